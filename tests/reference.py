"""Obviously-correct Python references (loops over strings), for tests only."""

IUPAC = {
    "A": "A", "C": "C", "G": "G", "T": "T", "U": "T", "N": "ACGT",
    "R": "AG", "Y": "CT", "S": "CG", "W": "AT", "K": "GT", "M": "AC",
    "B": "CGT", "D": "AGT", "H": "ACT", "V": "ACG",
}
COMPLEMENT = {"A": "T", "C": "G", "G": "C", "T": "A", "N": "N", "R": "Y", "Y": "R", "S": "S",
              "W": "W", "K": "M", "M": "K", "B": "V", "D": "H", "H": "D", "V": "B"}


def revcomp(s: str) -> str:
    return "".join(COMPLEMENT[c] for c in reversed(s.upper()))


def same(p, t, iupac=False, case_insensitive=False) -> bool:
    if case_insensitive:
        p, t = p.upper(), t.upper()
    if iupac:
        return set(IUPAC[t.upper()]) <= set(IUPAC[p.upper()])
    return p == t


def hamming(a, b, **kw) -> int:
    assert len(a) == len(b)
    return sum(not same(x, y, **kw) for x, y in zip(a, b))


def profile(texts, patterns, **kw):
    """[pattern][flat position] distance, -1 where the pattern does not fit."""
    total = sum(len(t) for t in texts)
    out = []
    for p in patterns:
        row, base = [-1] * total, 0
        for t in texts:
            for i in range(len(t) - len(p) + 1):
                row[base + i] = hamming(p, t[i : i + len(p)], **kw)
            base += len(t)
        out.append(row)
    return out


def kmismatch(texts, patterns, k, both_strands=False, **kw):
    """Sorted (pattern, text, position, distance, strand) tuples."""
    hits = []
    for pi, p in enumerate(patterns):
        variants = [(0, p)] + ([(1, revcomp(p))] if both_strands else [])
        for ti, t in enumerate(texts):
            for i in range(len(t) - len(p) + 1):
                for strand, q in variants:
                    d = hamming(q, t[i : i + len(p)], **kw)
                    if d <= k:
                        hits.append((pi, ti, i, d, strand))
    return sorted(hits, key=lambda h: (h[0], h[1], h[2], h[4]))


def levenshtein_row(a, b) -> list[int]:
    """Wagner-Fischer, one row at a time: the last row, [levenshtein(a, b[:j]) for j]."""
    prev = list(range(len(b) + 1))
    for i in range(1, len(a) + 1):
        cur = [i] + [0] * len(b)
        for j in range(1, len(b) + 1):
            cur[j] = min(prev[j - 1] + (a[i - 1] != b[j - 1]), prev[j] + 1, cur[j - 1] + 1)
        prev = cur
    return prev


def levenshtein(a, b) -> int:
    return levenshtein_row(a, b)[-1]


def asm_column(p, t) -> list[int]:
    """D[m][j] for j = 0 .. len(t): the least edit distance of p to a substring of t ending
    at j (semi-global: the first DP row is all zeros)."""
    prev = [0] * (len(t) + 1)
    for i in range(1, len(p) + 1):
        cur = [i] + [0] * len(t)
        for j in range(1, len(t) + 1):
            cur[j] = min(prev[j - 1] + (p[i - 1] != t[j - 1]), prev[j] + 1, cur[j - 1] + 1)
        prev = cur
    return prev


def asm_hits(texts, patterns, k, both_strands=False):
    """Sorted (pattern, text, start, end, distance, strand): every end with distance <= k,
    start the earliest one whose substring is at that distance."""
    hits = []
    for pi, p in enumerate(patterns):
        variants = [(0, p)] + ([(1, revcomp(p))] if both_strands else [])
        for ti, t in enumerate(texts):
            for strand, q in variants:
                for end, d in enumerate(asm_column(q, t)):
                    if d <= k:
                        # an alignment with d edits spans at most len(q) + d codes; back[L] =
                        # levenshtein(q, t[end - L:end]) (both read backwards from end)
                        back = levenshtein_row(q[::-1], t[max(0, end - len(q) - d) : end][::-1])
                        start = end - max(L for L, x in enumerate(back) if x == d)
                        hits.append((pi, ti, start, end, d, strand))
    return sorted(hits, key=lambda h: (h[0], h[1], h[3], h[5]))


def asm_best(texts, patterns):
    """([[distance]], [[first end]]) of every pattern x text."""
    cols = [[asm_column(p, t) for t in texts] for p in patterns]
    return [[min(c) for c in row] for row in cols], [[c.index(min(c)) for c in row] for row in cols]


def _gotoh(q, t, score, gap_open, gap_extend, mode):
    """Gotoh's matrices H, E (a gap in the query: target residues consumed), F (a gap in
    the target: query residues consumed), cell by cell, and the substitution scores used
    ({(a, b): score(a, b)}, looked up once per symbol pair); a gap of length L costs
    gap_open + (L - 1) * gap_extend."""
    NEG = float("-inf")
    m, n = len(q), len(t)
    sub = {(a, b): score(a, b) for a in set(q) for b in set(t)}
    gap = lambda L: 0 if L == 0 else -(gap_open + (L - 1) * gap_extend)  # noqa: E731
    H = [[0] * (n + 1) for _ in range(m + 1)]
    E = [[NEG] * (n + 1) for _ in range(m + 1)]
    F = [[NEG] * (n + 1) for _ in range(m + 1)]
    for i in range(1, m + 1):
        H[i][0] = 0 if mode == "local" else gap(i)
    for j in range(1, n + 1):
        H[0][j] = gap(j) if mode == "global" else 0
    for i in range(1, m + 1):
        for j in range(1, n + 1):
            E[i][j] = max(H[i][j - 1] - gap_open, E[i][j - 1] - gap_extend)
            F[i][j] = max(H[i - 1][j] - gap_open, F[i - 1][j] - gap_extend)
            H[i][j] = max(H[i - 1][j - 1] + sub[q[i - 1], t[j - 1]], E[i][j], F[i][j])
            if mode == "local":
                H[i][j] = max(H[i][j], 0)
    return H, E, F, sub


def _best(H, mode):
    """(score, query end, target end) of the best cell for the mode (align_score says which)."""
    m, n = len(H) - 1, len(H[0]) - 1
    if mode == "global":
        return H[m][n], m, n
    if mode == "semiglobal":
        best = max(H[m])
        return best, m, H[m].index(best)
    s, j, i = min((-H[i][j], j, i) for i in range(m + 1) for j in range(n + 1))
    return -s, i, j


def align_score(q, t, score, gap_open, gap_extend, mode):
    """Gotoh's DP, cell by cell: (score, query end, target end), ends exclusive. ``score(a,
    b)`` scores two symbols; a gap of length L costs gap_open + (L - 1) * gap_extend.
    local: the best cell anywhere (0 for the empty alignment at (0, 0)); global: (m, n);
    semiglobal: the whole query, target ends free: the best cell of row m. Ties: the
    smallest target end, then the smallest query end."""
    return _best(_gotoh(q, t, score, gap_open, gap_extend, mode)[0], mode)


def traceback(q, t, score, gap_open, gap_extend, mode):
    """Gotoh's DP cell by cell, then the walk back with torchalign's documented rule:
    (score, query start, query end, target start, target end, ops as a string of =XID).
    The end is align_score's; at each cell the walk prefers a local start (H = 0), then
    the diagonal, then E (a target residue against a gap: D), then F (I); in a gap it
    prefers opening (leaving the gap) to extending it. Semiglobal stops at row 0."""
    H, E, F, sub = _gotoh(q, t, score, gap_open, gap_extend, mode)
    best, qe, te = _best(H, mode)
    i, j, state, ops = qe, te, "H", []
    while True:
        if state == "H":
            if i == 0 or j == 0:
                if mode == "local" or (i == 0 and (j == 0 or mode == "semiglobal")):
                    break
                ops.append("I" if j == 0 else "D")  # a leading gap (global; I's in semiglobal)
                i, j = (i - 1, j) if j == 0 else (i, j - 1)
            elif mode == "local" and H[i][j] == 0:
                break
            elif H[i][j] == H[i - 1][j - 1] + sub[q[i - 1], t[j - 1]]:
                ops.append("=" if q[i - 1] == t[j - 1] else "X")
                i, j = i - 1, j - 1
            else:
                state = "E" if H[i][j] == E[i][j] else "F"
        elif state == "E":
            ops.append("D")
            state = "H" if H[i][j - 1] - gap_open >= E[i][j - 1] - gap_extend else "E"
            j -= 1
        else:
            ops.append("I")
            state = "H" if H[i - 1][j] - gap_open >= F[i - 1][j] - gap_extend else "F"
            i -= 1
    return best, i, qe, j, te, "".join(reversed(ops))
