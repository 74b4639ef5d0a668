"""Soft-DTW in plain torch (the CPU implementation, and the path of float64 CUDA tensors and
of the Hessian-vector product on any device).

Cells are visited by anti-diagonals, each one vectorised over the batch and its cells; the
tables are kept "skewed": S[b, d, x] = T[b, x, d - x], so diagonal d is one slice. A block
of K rows [i0, i0 + K) is computed from the row above it (``top``, border column included),
which serves the whole table (K = N, top = the border row 0, inf, inf, ...) and the
checkpoint mode (saved rows as tops, segments recomputed). Units, borders and band as in
torchalign/soft_dtw.py; gamma is a [B] tensor (one per pair).

Centring: with ``mu`` [B] the tables hold R - mu (i + j) (torchalign.soft_dtw's choice of
mu: the growth of R per unit of i + j, so they hold small numbers whose float32 rounding
does not grow with the pair). Every path gains i + j one step at a time (two for a
diagonal move), so R' = (cost - mu) + softmin(up, diagonal - mu, left), the same
weights, and the value is R'[n, m] + mu (n + m): exact in exact arithmetic.

The backward sweep recomputes each cell's softmin weights of its three predecessors from
the saved R (a softmax of -R / gamma, normalised per cell, so R - C's rounding never
enters), and the expected alignment E[i, j] = sum over successors s of E[s] * w_s(i, j).
"""

from __future__ import annotations

import torch

INF = float("inf")


def _diag_index(rows: int, cols: int, device):
    """For a rows x cols table: the flat index of cell (x, d - x) at [d, x], and whether it exists."""
    d = torch.arange(rows + cols - 1, device=device)[:, None]
    x = torch.arange(rows, device=device)[None, :]
    c = d - x
    valid = (c >= 0) & (c < cols)
    return x * cols + c.clamp(0, cols - 1), valid


def skew(t: torch.Tensor, fill) -> torch.Tensor:
    """[B, rows, cols] -> [B, rows + cols - 1, rows]: S[b, d, x] = t[b, x, d - x] (``fill`` outside)."""
    B, rows, cols = t.shape
    idx, valid = _diag_index(rows, cols, t.device)
    s = t.reshape(B, rows * cols)[:, idx.reshape(-1)].reshape(B, rows + cols - 1, rows)
    return s.masked_fill(~valid, fill)


def unskew(s: torch.Tensor, cols: int) -> torch.Tensor:
    """The inverse of skew: [B, rows + cols - 1, rows] -> [B, rows, cols]."""
    B, _, rows = s.shape
    x = torch.arange(rows, device=s.device)[:, None]
    c = torch.arange(cols, device=s.device)[None, :]
    return s.reshape(B, -1)[:, ((x + c) * rows + x).reshape(-1)].reshape(B, rows, cols)


def _band_ok(rows: int, cols: int, row0: int, col0: int, band: int, device) -> torch.Tensor:
    """[rows + cols - 1, rows] skewed: cell (row0 + x, col0 + c) lies in the Sakoe-Chiba band."""
    d = torch.arange(rows + cols - 1, device=device)[:, None]
    x = torch.arange(rows, device=device)[None, :]
    if band < 0:
        return torch.ones(d.shape[0], rows, dtype=torch.bool, device=device)
    return ((row0 + x) - (col0 + d - x)).abs() <= band


def softmin3(a, b, c, g):
    """-g log(e^(-a/g) + e^(-b/g) + e^(-c/g)) with the running min (logsumexp's); +inf when all
    are +inf. One logsumexp of the stack: a sweep is thousands of small torch calls."""
    return -g * torch.logsumexp(torch.stack([a, b, c]) / -g, 0)


def border_row(B: int, M: int, like: torch.Tensor) -> torch.Tensor:
    """Row 0 of R with its border column: 0, inf, inf, ..."""
    top = torch.full((B, M + 1), INF, dtype=like.dtype, device=like.device)
    top[:, 0] = 0
    return top


def forward_block(costs: torch.Tensor, top: torch.Tensor, i0: int, gamma: torch.Tensor, band: int,
                  mu: torch.Tensor) -> torch.Tensor:
    """Rows i0 + 1 .. i0 + K of R (1-based; [B, K, M], border column left out; centred by mu
    [B]) from ``costs`` [B, K, M] (rows i0 .. i0 + K - 1 of the cost tensor) and ``top``
    [B, M + 1], R's row i0."""
    B, K, M = costs.shape
    D = K + M - 1
    csk = skew(costs - mu[:, None, None], 0.0)
    mu = mu[:, None]
    _, valid = _diag_index(K, M, costs.device)
    ok = valid & _band_ok(K, M, i0 + 1, 1, band, costs.device)
    g = gamma[:, None]
    inf_col = torch.full((B, 1), INF, dtype=costs.dtype, device=costs.device)
    prev2 = torch.cat([top[:, :1], inf_col.expand(B, K)], 1)  # [b, x]: R at (x - 1, d - x) of diagonal d - 2 ...
    prev1 = torch.cat([top[:, 1:2], inf_col.expand(B, K)], 1)  # ... and d - 1; x = 0: the top row
    out = torch.empty(B, D, K, dtype=costs.dtype, device=costs.device)
    for d in range(D):
        new = (csk[:, d] + softmin3(prev1[:, :-1], prev2[:, :-1] - mu, prev1[:, 1:], g)).masked_fill(~ok[d], INF)
        out[:, d] = new
        prev2 = prev1
        prev1 = torch.cat([top[:, d + 2:d + 3] if d + 2 <= M else inf_col, new], 1)
    return unskew(out, M)


def _pick(block: torch.Tensor, rows: torch.Tensor, cols: torch.Tensor, current: torch.Tensor) -> torch.Tensor:
    """block[b, rows[b], cols[b]] where rows[b] lies in the block, else current[b]."""
    inside = (rows >= 0) & (rows < block.shape[1])
    b = torch.arange(block.shape[0], device=block.device)
    return torch.where(inside, block[b, rows.clamp(0, block.shape[1] - 1), cols], current)


def centre_of(mu, costs):
    """mu as a [B] tensor of the costs' dtype (None: zeros, no centring)."""
    return costs.new_zeros(costs.shape[0]) if mu is None else mu.to(costs.dtype)


def forward(costs, gamma, n, m, band: int, checkpoint: int, mu=None):
    """(value [B], saved): saved is R [B, N, M] (checkpoint 0) or R's rows K, 2K, ... [B, N // K, M],
    centred by ``mu`` [B] (None: not centred); the value is R[n, m] whatever mu."""
    B, N, M = costs.shape
    mu = centre_of(mu, costs)
    top = border_row(B, M, costs)
    if checkpoint == 0:
        R = forward_block(costs, top, 0, gamma, band, mu)
        return _pick(R, n - 1, m - 1, costs.new_zeros(B)) + mu * (n + m), R
    saved = costs.new_empty(B, N // checkpoint, M)
    value = costs.new_zeros(B)
    for s, i0 in enumerate(range(0, N, checkpoint)):
        blk = forward_block(costs[:, i0:i0 + checkpoint], top, i0, gamma, band, mu)
        value = _pick(blk, n - 1 - i0, m - 1, value)
        if blk.shape[1] == checkpoint:
            saved[:, s] = blk[:, -1]
        top = torch.cat([top[:, :1].new_full((B, 1), INF), blk[:, -1]], 1)
    return value + mu * (n + m), saved


class _Cells:
    """Skewed R of an extended block (row 0: the row above, last row: the row below, column
    0: the border) and, per diagonal, each cell's softmin weights of its predecessors."""

    def __init__(self, rfull, valid, gamma, mu):
        self.r = skew(rfull, INF)
        self.valid = skew(valid, False)
        self.g = gamma[:, None]
        self.mu = mu[:, None]

    def weights(self, dd: int):
        """(w [3, B, X], z [3, B, X], log Z [B, X]) of the cells of diagonal dd (x = 0: zeros;
        cells outside the table, the lengths or the reachable set: zeros)."""
        r, B, X = self.r, self.r.shape[0], self.r.shape[2]
        zero = r.new_zeros(3, B, X)
        if dd < 2 or dd >= r.shape[1]:
            return zero, zero, r.new_zeros(B, X)
        preds = torch.stack([r[:, dd - 1, :-1], r[:, dd - 2, :-1] - self.mu, r[:, dd - 1, 1:]])  # up, diagonal, left
        mn = torch.minimum(torch.minimum(preds[0], preds[1]), preds[2])  # (not .min(0): a reduction costs ms here)
        ok = self.valid[:, dd, 1:] & torch.isfinite(r[:, dd, 1:]) & torch.isfinite(mn)
        z = -(preds - torch.where(ok, mn, torch.zeros_like(mn))) / self.g
        e = torch.exp(z)
        zsum = e.sum(0)
        w = torch.where(ok, e / torch.where(ok, zsum, torch.ones_like(zsum)), torch.zeros_like(e))
        lz = torch.where(ok, torch.log(torch.where(ok, zsum, torch.ones_like(zsum))), torch.zeros_like(zsum))
        pad = r.new_zeros(3, B, 1)
        return torch.cat([pad, w], 2), torch.cat([pad, torch.where(w > 0, z, torch.zeros_like(z))], 2), \
            torch.cat([pad[0], lz], 1)


def _neg_entropy(w, z, lz):
    """sum_k w_k log w_k of each cell (d softmin / d gamma)."""
    return (w * (z - lz)).sum(0)


def _extended(top, rblk, r_below, i0, n, m):
    """R of a block with the rows above and below and the border column, and which of its
    cells are real cells of the pair ([B, K + 2, M + 1] each)."""
    B, K, M = rblk.shape
    inf_col = rblk.new_full((B, K + 1, 1), INF)
    rfull = torch.cat([top[:, None], torch.cat([inf_col, torch.cat([rblk, r_below[:, None]], 1)], 2)], 1)
    x = torch.arange(K + 2, device=rblk.device)[None, :, None]
    c = torch.arange(M + 1, device=rblk.device)[None, None, :]
    valid = (x >= 1) & (i0 + x - 1 < n[:, None, None]) & (c >= 1) & (c <= m[:, None, None])
    return rfull, valid


def backward_block(grad, top, rblk, r_below, e_below, i0, gamma, n, m, need_gamma: bool, mu):
    """E of a block's rows ([B, K, M]) and its cells' part of dV/dgamma ([B]), from the row
    below's R and E (r_below = inf and e_below = 0 under the last row); E[n, m] = grad."""
    B, K, M = rblk.shape
    rfull, valid = _extended(top, rblk, r_below, i0, n, m)
    cells = _Cells(rfull, valid, gamma, mu)
    X, D = K + 2, K + M + 2
    esk = skew(torch.cat([rblk.new_zeros(B, K + 1, M + 1),
                          torch.cat([rblk.new_zeros(B, 1), e_below], 1)[:, None]], 1), 0.0)
    esk = torch.cat([esk, esk.new_zeros(B, 2, X)], 1)
    seed_x = n - i0  # the pair's last cell (x = n - i0, c = m) when its row lies in this block
    seeded = (seed_x >= 1) & (seed_x <= K)
    bidx = torch.arange(B, device=rblk.device)
    gg = rblk.new_zeros(B)
    w1, _, _ = cells.weights(D)
    w2 = w1
    for dd in range(D - 1, 1, -1):
        w0, z0, lz0 = cells.weights(dd)
        e = (esk[:, dd + 1, 2:] * w1[0, :, 2:] + esk[:, dd + 2, 2:] * w2[1, :, 2:]  # down, diagonal successors
             + esk[:, dd + 1, 1:-1] * w1[2, :, 1:-1])  # right successor
        hit = seeded & (seed_x + m == dd)
        e[bidx[hit], seed_x[hit] - 1] += grad[hit]
        e = torch.where(cells.valid[:, dd, 1:-1], e, torch.zeros_like(e))
        esk[:, dd, 1:-1] = e
        if need_gamma:
            gg = gg + (e * _neg_entropy(w0, z0, lz0)[:, 1:-1]).sum(1)
        w2, w1 = w1, w0
    return unskew(esk[:, :D], M + 1)[:, 1:K + 1, 1:], gg


def backward(grad, costs, gamma, saved, n, m, band: int, checkpoint: int, need_gamma: bool, mu=None):
    """(dV/dcosts [B, N, M] (grad times E), dV/dgamma [B]); padding and unreachable cells get 0.
    ``mu``: the forward's centring."""
    B, N, M = costs.shape
    mu = centre_of(mu, costs)
    k = checkpoint or N
    e_below, r_below = costs.new_zeros(B, M), costs.new_full((B, M), INF)
    out = torch.empty_like(costs)
    gg = costs.new_zeros(B)
    for i0 in reversed(range(0, N, k)):
        top = border_row(B, M, costs) if i0 == 0 else torch.cat([costs.new_full((B, 1), INF), saved[:, i0 // k - 1]], 1)
        rblk = saved if checkpoint == 0 else forward_block(costs[:, i0:i0 + k], top, i0, gamma, band, mu)
        eblk, g = backward_block(grad, top, rblk, r_below, e_below, i0, gamma, n, m, need_gamma, mu)
        out[:, i0:i0 + k] = eblk
        gg = gg + g
        e_below, r_below = eblk[:, 0], rblk[:, 0]
    return out, gg


def hvp(costs, gamma, n, m, band: int, v_costs, v_gamma, R=None, mu=None, nu=None):
    """Mensch & Blondel's Hessian-vector product of V = R[n, m] in (costs, gamma) along
    (v_costs, v_gamma): a forward sweep of directional derivatives T = dR . v, then a
    backward sweep of E and its directional derivative. Returns (H v restricted to costs
    [B, N, M], to gamma [B], dV . v [B]). ``R``: the forward's table, if saved (else
    recomputed); ``mu``: its centring; ``nu``: T's, held as T - nu (i + j) the same way (each
    v and the diagonal's T get -nu; dV . v gets nu (n + m) back)."""
    B, N, M = costs.shape
    mu, nu = centre_of(mu, costs), centre_of(nu, costs)[:, None]
    if R is None:
        R = forward_block(costs, border_row(B, M, costs), 0, gamma, band, mu)
    rfull, valid = _extended(border_row(B, M, costs), R, costs.new_full((B, M), INF), 0, n, m)
    rfull, valid = rfull[:, :-1], valid[:, :-1]  # no row below: rows 0..N
    cells = _Cells(rfull, valid, gamma, mu)
    X, D = N + 1, N + M + 1
    g, vg = gamma[:, None], v_gamma[:, None]
    vsk = skew(torch.cat([costs.new_zeros(B, 1, M + 1),
                          torch.cat([costs.new_zeros(B, N, 1), v_costs], 2)], 1), 0.0)
    tsk = torch.zeros_like(vsk)
    for dd in range(2, D):  # T = v_costs + sum_k w_k T_k + v_gamma * sum_k w_k log w_k
        w, z, lz = cells.weights(dd)
        t = vsk[:, dd, 1:] - nu + w[0, :, 1:] * tsk[:, dd - 1, :-1] + w[1, :, 1:] * (tsk[:, dd - 2, :-1] - nu) \
            + w[2, :, 1:] * tsk[:, dd - 1, 1:] + vg * _neg_entropy(w, z, lz)[:, 1:]
        tsk[:, dd, 1:] = torch.where(cells.valid[:, dd, 1:], t, torch.zeros_like(t))
    bidx = torch.arange(B, device=costs.device)
    dot_value = tsk[bidx, n + m, n] + nu[:, 0] * (n + m)

    def tangent(dd):
        """(w, dw, z, lz) of diagonal dd: dw = the directional derivative of the weights."""
        w, z, lz = cells.weights(dd)
        if dd < 2 or dd >= D:
            return w, w, z, lz
        t_pred = torch.stack([tsk[:, dd - 1, :-1], tsk[:, dd - 2, :-1] - nu, tsk[:, dd - 1, 1:]])
        t_pred = torch.cat([t_pred.new_zeros(3, B, 1), t_pred], 2)
        live = w > 0
        # z_k = -(R_k - min) / g: dz_k = -T_k / g + (R_k - min) v_g / g^2 (the min cancels in the softmax)
        # the T_k less a live one's: the weights sum to 1 only to rounding, and that error
        # times |T| would not cancel in dz_k - sum_l w_l dz_l (3x less error at 1,000^2)
        t_pred = t_pred - torch.where(live[0], t_pred[0], torch.where(live[1], t_pred[1], t_pred[2]))
        dz = torch.where(live, -t_pred / g - z * vg / g, torch.zeros_like(z))
        dw = w * (dz - (w * dz).sum(0))
        return w, dw, z, lz

    esk = torch.zeros(B, D + 2, X, dtype=costs.dtype, device=costs.device)
    desk = torch.zeros_like(esk)
    hg = costs.new_zeros(B)
    w1, dw1, _, _ = tangent(D)
    w2, dw2 = w1, dw1
    for dd in range(D - 1, 1, -1):
        w0, dw0, z0, lz0 = tangent(dd)
        e = torch.zeros(B, X, dtype=costs.dtype, device=costs.device)
        de = torch.zeros_like(e)
        e[:, :-1] = esk[:, dd + 1, 1:] * w1[0, :, 1:] + esk[:, dd + 2, 1:] * w2[1, :, 1:]
        de[:, :-1] = (desk[:, dd + 1, 1:] * w1[0, :, 1:] + esk[:, dd + 1, 1:] * dw1[0, :, 1:]
                      + desk[:, dd + 2, 1:] * w2[1, :, 1:] + esk[:, dd + 2, 1:] * dw2[1, :, 1:])
        e = e + esk[:, dd + 1] * w1[2]
        de = de + desk[:, dd + 1] * w1[2] + esk[:, dd + 1] * dw1[2]
        hit = n + m == dd
        e[bidx[hit], n[hit]] += 1
        keep = cells.valid[:, dd]
        e = torch.where(keep, e, torch.zeros_like(e))
        de = torch.where(keep, de, torch.zeros_like(de))
        esk[:, dd], desk[:, dd] = e, de
        logw = torch.where(w0 > 0, z0 - lz0, torch.zeros_like(z0))
        hg = hg + (de * (w0 * logw).sum(0) + e * (dw0 * logw).sum(0)).sum(1)
        w2, dw2, w1, dw1 = w1, dw1, w0, dw0
    return unskew(desk[:, :D], M + 1)[:, 1:, 1:].contiguous(), hg, dot_value
