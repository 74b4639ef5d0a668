"""Soft (log-sum-exp) alignment on the CPU: forward, backward and Hessian-vector sweeps.

Plain torch, vectorised over the batch and over a row's cells, so it runs on any device
and in any float dtype (float64 stays float64). Row i comes from row i - 1; inside a row
the horizontal gap X is a linear recurrence, X[j] = lse(A[j], X[j - 1] - ext[j]),
computed as a log-semiring prefix scan over (value, offset) pairs (Hillis-Steele: log2 M
vector steps; no cumulative j * gap offsets, which would lose float32 precision). The
backward and tangent sweeps have the same shape in ordinary arithmetic.

Everything here is at temperature 1 (the public wrapper divides scores and gaps by T).
States per cell (i, j), 0 <= i <= N, 0 <= j <= M: M (ends in an aligned pair), X (ends in
a gap in the query: target residue j against '-', a move along the row) and Y (a gap in
the target, a move down the column). Edge weights: s[i, j] into M, -open / -extend into
X and Y; the recurrences and borders are written out in torchalign/soft_align.py.

Saved state: the M, X, Y values of every K-th row (``table`` [B, R, 3, M + 1]); the
backward sweep recomputes the rows of a segment from its checkpoint and the edge
probabilities p = exp(V_from + w - V_to) from the values.
"""

from __future__ import annotations

import torch

MODES = ("global", "local", "semiglobal")
GLOBAL, LOCAL, SEMIGLOBAL = 0, 1, 2
INF = float("inf")


def _lse(*xs: torch.Tensor) -> torch.Tensor:
    """logsumexp of equal-shape tensors, elementwise, with the running max (-inf stays -inf,
    no NaN): one torch call (``logaddexp`` for two, ``logsumexp`` of the stack for more),
    since a sweep is thousands of small calls on a few hundred cells each."""
    if len(xs) == 2:
        return torch.logaddexp(*xs)
    return torch.logsumexp(torch.stack(xs), 0)


def _p(src: torch.Tensor, to: torch.Tensor) -> torch.Tensor:
    """exp(src - to), the probability of an edge whose source value plus weight is ``src``
    into a node of value ``to``; 0 where the node is unreachable (to = -inf: there src - to
    is +inf or NaN, which no reachable node gives, since src <= to up to rounding)."""
    return torch.exp(src - to).nan_to_num_(nan=0.0, posinf=0.0)


def log_scan(a: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
    """x[j] = lse(a[j], x[j - 1] + c[j]) along the last axis (x[-1] = -inf): an inclusive
    scan of the pairs (a, c), combined (a1, c1), (a2, c2) -> (lse(a2, a1 + c2), c1 + c2)."""
    n, k = a.shape[-1], 1
    while k < n:
        a = torch.cat([a[..., :k], _lse(a[..., k:], a[..., :-k] + c[..., k:])], -1)
        c = torch.cat([c[..., :k], c[..., :-k] + c[..., k:]], -1)
        k *= 2
    return a


def lin_scan(a: torch.Tensor, c: torch.Tensor, reverse: bool = False) -> torch.Tensor:
    """y[j] = a[j] + c[j] y[j - 1] (y[-1] = 0) along the last axis; ``reverse``: y[j] = a[j] +
    c[j] y[j + 1]. Combined (a1, c1), (a2, c2) -> (a2 + c2 a1, c1 c2)."""
    if reverse:
        return lin_scan(a.flip(-1), c.flip(-1)).flip(-1)
    n, k = a.shape[-1], 1
    while k < n:
        a = torch.cat([a[..., :k], a[..., k:] + c[..., k:] * a[..., :-k]], -1)
        c = torch.cat([c[..., :k], c[..., :-k] * c[..., k:]], -1)
        k *= 2
    return a


class Problem:
    """One batch: scores (padding zeroed), gaps as [B, N, M] views, lengths, mode; ``centre``
    c [B] or None: the values are held as V - c (i + j) and the value as value - c (n + m),
    which the caller adds back. (The caller reads scores - 2c and gaps + c, which lowers
    every path by c per unit of i + j: global alignments all by c (n + m); a local or
    semiglobal one by c times its own span, so here each start term gets -c (i + j) of its
    cell and each end term -c (n + m - i - j): every alignment then by c (n + m).)"""

    def __init__(self, scores, gap_open, gap_extend, mode: int, linear: bool, q_lens, t_lens, centre=None):
        B, N, M = scores.shape
        self.B, self.N, self.M, self.mode, self.linear = B, N, M, mode, linear
        self.dtype, self.device = scores.dtype, scores.device
        self.n, self.m = q_lens.to(torch.int64), t_lens.to(torch.int64)
        inside = ((torch.arange(N, device=self.device)[None, :, None] < self.n[:, None, None])
                  & (torch.arange(M, device=self.device)[None, None, :] < self.m[:, None, None]))
        self.s = torch.where(inside, scores, torch.zeros((), dtype=scores.dtype, device=scores.device))
        ge = gap_open if linear else gap_extend
        self.full = any(g.dim() == 3 and g.shape[1:] == (N, M) and (N, M) != (1, 1) for g in (gap_open, ge))
        self.go, self.ge = gap_open.expand(B, N, M), ge.expand(B, N, M)
        self.go0, self.ge0 = gap_open[:, :1, :1].reshape(B, 1), ge[:, :1, :1].reshape(B, 1)  # (broadcast gaps)
        self.j = torch.arange(M + 1, device=self.device)
        self.c = None if centre is None else centre.to(self.dtype)[:, None]

    def at(self, i):
        """[B, M + 1]: c (i + j) (0 without a centring): what the centring took from row i's values."""
        if self.c is None:
            return self.zeros()
        return self.c * (i + self.j)[None, :].to(self.dtype)

    def neg(self, width=None):
        return torch.full((self.B, self.M + 1 if width is None else width), -INF, dtype=self.dtype, device=self.device)

    def zeros(self, width=None):
        return torch.zeros((self.B, self.M + 1 if width is None else width), dtype=self.dtype, device=self.device)

    def gaps_x(self, pen, i):
        """[B, M + 1] penalties of the moves along row i into column j (entry 0 unused):
        position [max(i, 1) - 1, j - 1]."""
        if not self.full:
            return (self.go0 if pen == "o" else self.ge0).expand(self.B, self.M + 1)
        g = (self.go if pen == "o" else self.ge)[:, max(i, 1) - 1, :]
        return torch.cat([g[:, :1], g], 1)

    def gaps_y(self, pen, i):
        """[B, M + 1] penalties of the moves down into row i >= 1, column j: position
        [i - 1, max(j, 1) - 1]."""
        if not self.full:
            return (self.go0 if pen == "o" else self.ge0).expand(self.B, self.M + 1)
        g = (self.go if pen == "o" else self.ge)[:, i - 1, :]
        return torch.cat([g[:, :1], g], 1)

    def score_row(self, i):
        """[B, M + 1] scores of row i >= 1 (entry 0 unused)."""
        return torch.cat([self.zeros(1), self.s[:, i - 1, :]], 1)


def _x_row(P: Problem, Mr, Yr, i):
    """X of row i from M and Y of the same row: X[j] = lse(M[j-1] - o, Y[j-1] - o, X[j-1] - e)."""
    if P.M == 0:
        return P.neg()
    a = _lse(Mr[:, :-1], Yr[:, :-1]) - P.gaps_x("o", i)[:, 1:]
    return torch.cat([P.neg(1), log_scan(a, -P.gaps_x("e", i)[:, 1:])], 1)


def row0(P: Problem):
    """(M, X, Y) of row 0: global M[0, 0] = 0 and leading target gaps; semiglobal M[0, j] = 0
    (free leading target residues, no X there); local all -inf."""
    if P.mode == SEMIGLOBAL:
        return -P.at(0), P.neg(), P.neg()
    Mr, Yr = P.neg(), P.neg()
    if P.mode == GLOBAL:
        Mr[:, 0] = 0
        return Mr, _x_row(P, Mr, Yr, 0), Yr
    return Mr, P.neg(), Yr


def row(P: Problem, i, prev):
    """(M, X, Y) of row i >= 1 from row i - 1."""
    Mp, Xp, Yp = prev
    diag = _lse(Mp[:, :-1], Xp[:, :-1], Yp[:, :-1])
    if P.mode == LOCAL:  # an alignment may start at any aligned pair
        diag = torch.logaddexp(diag, _start(P, i))
    Mr = torch.cat([P.neg(1), P.score_row(i)[:, 1:] + diag], 1)
    oy = P.gaps_y("o", i)
    Yr = _lse(Mp - oy, Xp - oy, Yp - P.gaps_y("e", i))
    return Mr, _x_row(P, Mr, Yr, i), Yr


def _start(P: Problem, i):
    """[B, M]: local mode's start term of row i's cells j = 1..M, 0 less the centring's c (i + j - 2)."""
    return -P.at(i - 1)[:, :-1]


def _rows(P: Problem, start, prev, stop):
    """Rows start .. stop - 1 (row start from ``prev`` = row start - 1, or row 0 if start == 0)."""
    out = []
    for i in range(start, stop):
        prev = row0(P) if i == 0 else row(P, i, prev)
        out.append(prev)
    return out


def _end_terms(P: Problem, i, vals):
    """The end edges leaving row i: list of (state index, [B, M + 1] mask) whose values sum
    into the result (each alignment ends in exactly one)."""
    at_n = (P.n == i)[:, None]
    if P.mode == GLOBAL:
        cell = at_n & (P.j[None, :] == P.m[:, None])
        return [(0, cell), (1, cell), (2, cell)]
    if P.mode == SEMIGLOBAL:
        if i == 0:
            return [(0, at_n & (P.j[None, :] == 0))]  # an empty query: the one alignment, score 0
        cols = at_n & (P.j[None, :] <= P.m[:, None])
        return [(0, cols), (2, cols)]
    cells = (P.n >= i)[:, None] & (P.j[None, :] >= 1) & (P.j[None, :] <= P.m[:, None]) & (i >= 1)
    return [(0, cells)]


def _end_probs(P: Problem, i, vals, value):
    """[(state, [B, M + 1] probability of ending there)] for row i; global and semiglobal
    ends (all in one row) normalised to sum to exactly 1 (see _normalised)."""
    off = _end_offset(P, i)
    terms = [(k, torch.where(mask, _p(vals[k] + off, value[:, None].expand_as(vals[k])), 0.0))
             for k, mask in _end_terms(P, i, vals)]
    if P.mode == LOCAL:
        return terms
    total = sum(p.sum(1) for _, p in terms)[:, None]
    return [(k, p / torch.where(total > 0, total, 1.0)) for k, p in terms]


def _end_offset(P: Problem, i):
    """What row i's end terms get back of the centring, relative to the value's: the value
    is held as value - c (n + m) (the caller adds that back), so an end at (i, j), held as
    V - c (i + j), enters less c (n + m - i - j) (global's one end: 0; 0 without a centring)."""
    if P.c is None:
        return P.zeros()
    return -P.c * ((P.n + P.m)[:, None] - i - P.j[None, :]).to(P.dtype)


def _end_lse(P, i, vals):
    """lse of the end terms of row i per pair ([B], -inf if none)."""
    off = _end_offset(P, i)
    parts = [torch.where(mask, vals[k] + off, -INF) for k, mask in _end_terms(P, i, vals)]
    return torch.logsumexp(torch.cat(parts, 1), 1)


def _empty(P: Problem):
    """[B]: local mode's empty alignment, score 0, as the value is held: less c (n + m)."""
    return P.zeros(1)[:, 0] if P.c is None else -P.c[:, 0] * (P.n + P.m).to(P.dtype)


def forward(P: Problem, K: int = 1):
    """(value [B], table [B, R, 3, M + 1]): the M, X, Y rows 0, K, 2K, ..."""
    R = (P.N + K) // K
    table = torch.empty((P.B, R, 3, P.M + 1), dtype=P.dtype, device=P.device)
    value = _empty(P) if P.mode == LOCAL else P.neg(1)[:, 0]
    prev = None
    for i in range(P.N + 1):
        prev = row0(P) if i == 0 else row(P, i, prev)
        if i % K == 0:
            table[:, i // K] = torch.stack(prev, 1)
        value = torch.logaddexp(value, _end_lse(P, i, prev))
    return value, table


def _segments(P: Problem, table, K: int):
    """Rows in reverse order, recomputed one segment of K rows at a time from its checkpoint."""
    for c in range(table.shape[1] - 1, -1, -1):
        first = tuple(table[:, c].unbind(1))
        seg = [first] + _rows(P, c * K + 1, first, min(c * K + K, P.N + 1))
        yield from ((c * K + k, seg[k]) for k in range(len(seg) - 1, -1, -1))


class _Grads:
    """Gradient accumulators shaped like the inputs (a [B] sum for broadcast gaps)."""

    def __init__(self, P: Problem):
        self.P = P
        self.s = torch.zeros((P.B, P.N, P.M), dtype=P.dtype, device=P.device)
        shape = (P.B, P.N, P.M) if P.full else (P.B,)
        self.o = torch.zeros(shape, dtype=P.dtype, device=P.device)
        self.e = torch.zeros(shape, dtype=P.dtype, device=P.device)

    def gap(self, pen, kind, i, contrib):
        """Add ``contrib`` [B, M + 1] (d value / d penalty of the moves of ``kind`` "x" along row i
        or "y" down into row i) at the positions those moves read."""
        acc = self.o if (pen == "o" or self.P.linear) else self.e
        if not self.P.full:
            acc += contrib.sum(1)
            return
        r = max(i, 1) - 1 if kind == "x" else i - 1
        acc[:, r, 0] += contrib[:, 0] if kind == "y" else 0
        acc[:, r, :] += contrib[:, 1:]


def _normalised(ps):
    """Edge probabilities into one node divided by their sum: exactly a distribution even
    where float32 rounding of the stored values is large against T (scores of 1e4 at T =
    1e-3); the same in exact arithmetic."""
    total = sum(ps)
    total = torch.where(total > 0, total, torch.ones_like(total))
    return [p / total for p in ps]


def _edges_down(P, i, vals, nxt):
    """Edge probabilities from row i into row i + 1: diag[k] [B, M] from state k at j into M
    at j + 1; down[k] [B, M + 1] from state k at j into Y at j (k: M, X, Y); start [B, M],
    local mode's start edge into M at j + 1 (else 0)."""
    Mn, _, Yn = nxt
    lse_in = Mn[:, 1:] - P.score_row(i + 1)[:, 1:]  # the log-sum over M's predecessors
    start = _p(_start(P, i + 1), lse_in) if P.mode == LOCAL else torch.zeros_like(lse_in)
    *diag, start = _normalised([_p(v[:, :-1], lse_in) for v in vals] + [start])
    oy, ey = P.gaps_y("o", i + 1), P.gaps_y("e", i + 1)
    down = _normalised([_p(vals[0] - oy, Yn), _p(vals[1] - oy, Yn), _p(vals[2] - ey, Yn)])
    return diag, down, start


def _edges_x(P, i, vals):
    """Edge probabilities along row i into X at j (entry 0: none): from M, X, Y at j - 1."""
    Mr, Xr, Yr = vals
    ox, ex = P.gaps_x("o", i), P.gaps_x("e", i)
    z = P.zeros(1)
    ps = _normalised([_p(v[:, :-1] - g[:, 1:], Xr[:, 1:]) for v, g in ((Mr, ox), (Xr, ex), (Yr, ox))])
    return [torch.cat([z, p], 1) for p in ps]


def _shift_left(x, P):
    """x[j + 1] at j (0 at the end)."""
    return torch.cat([x[:, 1:], P.zeros(1)], 1)


def backward(P: Problem, table, value, grad, K: int = 1):
    """(d scores, d gap_open, d gap_extend) times grad [B]: one sweep up the rows."""
    G = _Grads(P)
    nxt = Qn = None
    for i, vals in _segments(P, table, K):
        Q = [P.zeros() for _ in range(3)]
        for k, p in _end_probs(P, i, vals, value):
            Q[k] = Q[k] + grad[:, None] * p
        if nxt is not None:
            diag, down, _ = _edges_down(P, i, vals, nxt)
            for k in range(3):
                Q[k] = Q[k] + torch.cat([diag[k] * Qn[0][:, 1:], P.zeros(1)], 1) + down[k] * Qn[2]
            G.gap("o", "y", i + 1, -Qn[2] * (down[0] + down[1]))
            G.gap("e", "y", i + 1, -Qn[2] * down[2])
        xm, xx, xy = _edges_x(P, i, vals)
        QX = lin_scan(Q[1], _shift_left(xx, P), reverse=True)  # QX[j] = Q[j] + QX[j + 1] p_ext[j + 1]
        QX1 = _shift_left(QX, P)
        Q = [Q[0] + QX1 * _shift_left(xm, P), QX, Q[2] + QX1 * _shift_left(xy, P)]
        G.gap("o", "x", i, -QX * (xm + xy))
        G.gap("e", "x", i, -QX * xx)
        if i >= 1:
            G.s[:, i - 1, :] = Q[0][:, 1:]
        nxt, Qn = vals, Q
    return G.s, G.o, G.e


def _tangent_rows(P: Problem, vals_rows, value, z):
    """Directional derivatives (dM, dX, dY) of every row's values along z = (dS, dopen, dext)
    (a forward sweep) and of the value (dvalue [B])."""
    Z = _direction(P, z)
    out, dvalue, prev = [], P.zeros(1)[:, 0], None
    ends = None  # local: the ends' p, the empty alignment's too (d value is divided by their sum)
    if P.mode == LOCAL:
        ends = torch.exp(_empty(P) - value)
        dvalue = ends * _empty(Z)  # (the empty alignment's tangent: 0, held less dc (n + m))
    for i, vals in enumerate(vals_rows):
        Mr, Xr, Yr = vals
        if i == 0:
            dM, dY = -Z.at(0) if P.mode == SEMIGLOBAL else P.zeros(), P.zeros()
        else:
            diag, down, start = _edges_down(P, i - 1, vals_rows[i - 1], vals)
            dMp, dXp, dYp = prev
            into = sum(p * d[:, :-1] for p, d in zip(diag, prev)) + start * _start(Z, i)  # (start: local's)
            dM = torch.cat([P.zeros(1), Z.score_row(i)[:, 1:] + into], 1)
            zoy, zey = Z.gaps_y("o", i), Z.gaps_y("e", i)
            dY = down[0] * (dMp - zoy) + down[1] * (dXp - zoy) + down[2] * (dYp - zey)
        xm, xx, xy = _edges_x(P, i, vals)
        zox, zex = Z.gaps_x("o", i), Z.gaps_x("e", i)
        pad = lambda x: torch.cat([P.zeros(1), x[:, :-1]], 1)  # noqa: E731  (x[j - 1] at j)
        u = xm * (pad(dM) - zox) + xy * (pad(dY) - zox) - xx * zex
        dX = lin_scan(u, xx)  # dX[j] = u[j] + p_ext[j] dX[j - 1]
        prev = (dM, dX, dY)
        out.append(prev)
        off = _end_offset(Z, i)
        for k, p in _end_probs(P, i, vals, value):
            dvalue = dvalue + (p * (prev[k] + off)).sum(1)
            if ends is not None:
                ends = ends + p.sum(1)
    if ends is None:
        return out, dvalue
    # sum p dV / sum p: local's p = exp(V - value) sum to 1 only to the rounding of V and
    # value (~n + m), which times |dV| would stay in each end's dp = p (dV - d value)
    return out, dvalue / torch.where(ends > 0, ends, torch.ones_like(ends))


def _centred(ps, ts, start=0.0, t_start=0.0):
    """Each in-edge's tangent less the node's, t_k - sum_l p_l t_l (``start``, ``t_start``:
    local mode's start edge's probability and tangent), from the edges' own p and t, not the
    node's stored tangent: p sums to 1 only to rounding, and that error times |t| would stay
    in dp = p (t_k - t_node); differences from a live edge's t cancel it."""
    ref = torch.where(ps[0] > 0, ts[0], torch.where(ps[1] > 0, ts[1], ts[2]))
    cs = [t - ref for t in ts]
    mean = sum(p * c for p, c in zip(ps, cs)) + start * (t_start - ref)
    return [c - mean for c in cs]


def _direction(P: Problem, z):
    """The direction z = (dS, dopen, dext[, dc]) read like the inputs (dc: the tangents'
    centring, as P's c is the values')."""
    zs, zo, ze, *dc = z
    return Problem(zs, zo, ze, P.mode, P.linear, P.n, P.m, dc[0] if dc else None)


def hvp(P: Problem, table, value, grad, z, K: int = 1):
    """The derivative of backward()'s outputs along z = (dS, dopen, dext), and of the value
    (the vector-Jacobian product of backward() for cotangents z, by symmetry of the Hessian:
    Mensch & Blondel 2018, Algorithm 2/3: a forward sweep of tangents, then a backward sweep
    of the adjoints and their tangents). Holds every row (values and tangents)."""
    rows = [vals for _, vals in _segments(P, table, K)][::-1]
    drows, dvalue = _tangent_rows(P, rows, value, z)
    Z = _direction(P, z)
    G = _Grads(P)
    Qn = dQn = None
    for i in range(P.N, -1, -1):
        vals, dv = rows[i], drows[i]
        Q = [P.zeros() for _ in range(3)]
        dQ = [P.zeros() for _ in range(3)]
        off = _end_offset(Z, i)
        for k, p in _end_probs(P, i, vals, value):
            p = grad[:, None] * p
            Q[k] = Q[k] + p
            dQ[k] = dQ[k] + p * (dv[k] + off - dvalue[:, None])
        if i < P.N:
            nv = rows[i + 1]
            diag, down, start = _edges_down(P, i, vals, nv)
            zoy, zey = Z.gaps_y("o", i + 1), Z.gaps_y("e", i + 1)
            # diag edge k: tangent dv_k[j] + zs - dM_next[j + 1] (zs is every in-edge's: it cancels)
            t_diag = _centred(diag, [d[:, :-1] for d in dv], start, _start(Z, i + 1))
            t_down = _centred(down, [dv[0] - zoy, dv[1] - zoy, dv[2] - zey])
            dE_y = []
            for k in range(3):
                p = diag[k]
                dp = p * t_diag[k]
                Q[k] = Q[k] + torch.cat([p * Qn[0][:, 1:], P.zeros(1)], 1)
                dQ[k] = dQ[k] + torch.cat([p * dQn[0][:, 1:] + dp * Qn[0][:, 1:], P.zeros(1)], 1)
                p = down[k]
                dp = p * t_down[k]
                Q[k] = Q[k] + p * Qn[2]
                dE = p * dQn[2] + dp * Qn[2]
                dQ[k] = dQ[k] + dE
                dE_y.append(dE)
            G.gap("o", "y", i + 1, -(dE_y[0] + dE_y[1]))
            G.gap("e", "y", i + 1, -dE_y[2])
        xm, xx, xy = _edges_x(P, i, vals)
        zox, zex = Z.gaps_x("o", i), Z.gaps_x("e", i)
        pad = lambda x: torch.cat([P.zeros(1), x[:, :-1]], 1)  # noqa: E731
        # tangents of the X edges into j: p (dV_from[j - 1] - z_w[j] - dX[j])
        dxm, dxx, dxy = (p * t for p, t in zip((xm, xx, xy), _centred(
            (xm, xx, xy), [pad(dv[0]) - zox, pad(dv[1]) - zex, pad(dv[2]) - zox])))
        QX = lin_scan(Q[1], _shift_left(xx, P), reverse=True)
        QX1 = _shift_left(QX, P)
        dQX = lin_scan(dQ[1] + QX1 * _shift_left(dxx, P), _shift_left(xx, P), reverse=True)
        dQX1 = _shift_left(dQX, P)
        dQ = [dQ[0] + dQX1 * _shift_left(xm, P) + QX1 * _shift_left(dxm, P), dQX,
              dQ[2] + dQX1 * _shift_left(xy, P) + QX1 * _shift_left(dxy, P)]
        Q = [Q[0] + QX1 * _shift_left(xm, P), QX, Q[2] + QX1 * _shift_left(xy, P)]
        G.gap("o", "x", i, -(dQX * (xm + xy) + QX * (dxm + dxy)))
        G.gap("e", "x", i, -(dQX * xx + QX * dxx))
        if i >= 1:
            G.s[:, i - 1, :] = dQ[0][:, 1:]
        Qn, dQn = Q, dQ
    return G.s, G.o, G.e, dvalue
