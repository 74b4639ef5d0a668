"""Plain float64 references for ta.soft_align (tests only).

``soft_align_dp``: the three-state recurrences cell by cell in Python floats.
``soft_align_enum``: for tiny pairs, every alignment written out as a sequence of columns
('M' aligned pair, 'X' target residue against a gap, 'Y' query residue against a gap),
scored on its own and summed once: the definition the DP must equal. ``s`` is a 2-D
NumPy array (n x m; n or m may be 0).

Gap penalties are per position: a move along a row into cell (i, j) (1-based cells, row 0
and column 0 the borders) reads [max(i, 1) - 1, j - 1], a move down into (i, j) reads
[i - 1, max(j, 1) - 1]; a gap column costs ``open`` when the column before it is not the
same kind of gap, else ``extend``. Scalars are broadcast.
"""

from __future__ import annotations

import math

NEG = -math.inf


def lse(*xs):
    m = max(xs)
    if m == NEG:
        return NEG
    return m + math.log(sum(math.exp(x - m) for x in xs))


def _at(p, i, j):
    return float(p) if isinstance(p, (int, float)) or getattr(p, "ndim", 2) == 0 else float(p[i][j])


def _gap(kind, i, j, go, ge, opening):
    """The cost of a gap column entering cell (i, j)."""
    r, c = (max(i, 1) - 1, j - 1) if kind == "X" else (i - 1, max(j, 1) - 1)
    return _at(go, r, c) if opening else _at(ge, r, c)


def soft_align_dp(s, go, ge=None, mode="global", T=1.0):
    """T log sum over alignments of exp(score / T) for one pair; s a list of rows (n x m)."""
    ge = go if ge is None else ge
    n, m = s.shape
    Mv = [[NEG] * (m + 1) for _ in range(n + 1)]
    X = [[NEG] * (m + 1) for _ in range(n + 1)]
    Y = [[NEG] * (m + 1) for _ in range(n + 1)]
    for i in range(n + 1):
        for j in range(m + 1):
            if i == 0:
                if mode == "semiglobal":
                    Mv[0][j] = 0.0
                    continue
                if mode == "global" and j == 0:
                    Mv[0][0] = 0.0
                    continue
            if i >= 1 and j >= 1:
                prev = lse(Mv[i - 1][j - 1], X[i - 1][j - 1], Y[i - 1][j - 1])
                if mode == "local":
                    prev = lse(prev, 0.0)
                Mv[i][j] = float(s[i - 1][j - 1]) / T + prev
            if j >= 1 and not (i == 0 and mode != "global"):
                o, e = _gap("X", i, j, go, ge, True) / T, _gap("X", i, j, go, ge, False) / T
                X[i][j] = lse(Mv[i][j - 1] - o, Y[i][j - 1] - o, X[i][j - 1] - e)
            if i >= 1:
                o, e = _gap("Y", i, j, go, ge, True) / T, _gap("Y", i, j, go, ge, False) / T
                Y[i][j] = lse(Mv[i - 1][j] - o, X[i - 1][j] - o, Y[i - 1][j] - e)
    if mode == "global":
        v = lse(Mv[n][m], X[n][m], Y[n][m])
    elif mode == "semiglobal":
        v = 0.0 if n == 0 else lse(*[Mv[n][j] for j in range(m + 1)], *[Y[n][j] for j in range(m + 1)])
    else:
        v = lse(0.0, *[Mv[i][j] for i in range(1, n + 1) for j in range(1, m + 1)])
    return T * v


def _paths(i, j, n, m):
    """Every column sequence from cell (i, j) to (n, m)."""
    if (i, j) == (n, m):
        yield ()
        return
    for col, di, dj in (("M", 1, 1), ("X", 0, 1), ("Y", 1, 0)):
        if i + di <= n and j + dj <= m:
            for rest in _paths(i + di, j + dj, n, m):
                yield (col,) + rest


def _score(cols, i, j, s, go, ge, free_x=False):
    """Score of ``cols`` starting after cell (i, j); ``free_x``: leading and trailing X free."""
    first = next((k for k, c in enumerate(cols) if c != "X"), len(cols))
    last = max((k for k, c in enumerate(cols) if c != "X"), default=-1)
    total, before = 0.0, None
    for k, c in enumerate(cols):
        if c == "M":
            i, j = i + 1, j + 1
            total += float(s[i - 1][j - 1])
        elif c == "X":
            j += 1
            if not (free_x and (k < first or k > last)):
                total -= _gap("X", i, j, go, ge, before != "X")
        else:
            i += 1
            total -= _gap("Y", i, j, go, ge, before != "Y")
        before = c
    return total


def alignment_scores(s, go, ge=None, mode="global"):
    """The score of every alignment of the pair, each once."""
    ge = go if ge is None else ge
    n, m = s.shape
    out = []
    if mode == "global":
        out = [_score(p, 0, 0, s, go, ge) for p in _paths(0, 0, n, m)]
    elif mode == "semiglobal":
        out = [_score(p, 0, 0, s, go, ge, free_x=True) for p in _paths(0, 0, n, m)]
    else:
        out = [0.0]  # the empty alignment
        for a in range(n):
            for c in range(m):
                for b in range(a + 1, n + 1):
                    for d in range(c + 1, m + 1):
                        for p in _paths(a, c, b, d):
                            if p and p[0] == "M" and p[-1] == "M":
                                out.append(_score(p, a, c, s, go, ge))
    return out


def soft_align_enum(s, go, ge=None, mode="global", T=1.0):
    scores = alignment_scores(s, go, ge, mode)
    return T * lse(*[x / T for x in scores])


def one_hot_blosum(q: str, t: str, dtype=None):
    """[len(q), len(t)] float scores of BLOSUM62 for two protein strings (the one-hot
    embeddings of both multiplied through the matrix), and the ta.Scoring."""
    import torch

    import torchalign as ta

    sc = ta.Scoring()
    codes = [ta.encode([x], "protein").codes.long() for x in (q, t)]
    eye = torch.eye(sc.table.shape[0], dtype=dtype or torch.float64)
    a, b = eye[codes[0]], eye[codes[1]]
    return a @ sc.table.to(a.dtype) @ b.T, sc


def random_batch(B, N, M, dtype, seed, full_gaps=False, linear=False, ragged=True, scale=1.0):
    """Scores, gaps and lengths of a random padded batch (float64 master copies)."""
    import torch

    g = torch.Generator().manual_seed(seed)
    s = (torch.randn(B, N, M, generator=g, dtype=torch.float64) * scale).to(dtype)
    shape = (B, N, M) if full_gaps else (B,)
    go = (torch.rand(shape, generator=g, dtype=torch.float64) + 0.5).to(dtype)
    ge = None if linear else (torch.rand(shape, generator=g, dtype=torch.float64) * 0.5 + 0.1).to(dtype)
    if ragged:
        low = 1 if full_gaps else 0  # (position-specific gaps of an empty side would read padding)
        q = torch.randint(low, N + 1, (B,), generator=g)
        t = torch.randint(low, M + 1, (B,), generator=g)
        q[0], t[0] = N, M
    else:
        q, t = torch.full((B,), N), torch.full((B,), M)
    return s, go, ge, (q, t)


def reference_values(s, go, ge, lengths, mode, T=1.0):
    """soft_align_dp of each pair of a padded batch (float64 list)."""
    out = []
    for b in range(s.shape[0]):
        n, m = int(lengths[0][b]), int(lengths[1][b])
        def cut(x):
            if x is None:
                return None
            return x[b, :n, :m].double().numpy() if x.dim() == 3 else float(x[b])

        t = T if isinstance(T, float) else float(T[b])
        out.append(soft_align_dp(s[b, :n, :m].double().numpy(), cut(go), cut(ge), mode, t))
    return out
