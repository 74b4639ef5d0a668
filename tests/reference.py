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


def levenshtein(a, b) -> int:
    """Wagner-Fischer, one row at a time."""
    prev = list(range(len(b) + 1))
    for i in range(1, len(a) + 1):
        cur = [i] + [0] * len(b)
        for j in range(1, len(b) + 1):
            cur[j] = min(prev[j - 1] + (a[i - 1] != b[j - 1]), prev[j] + 1, cur[j - 1] + 1)
        prev = cur
    return prev[-1]
