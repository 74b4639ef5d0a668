"""Soft-DTW's Hessian-vector product (Mensch & Blondel 2018, Algorithms 2 and 3) in two
sweeps, one program per pair, a row per step, after soft_dtw's forward has stored R.

Along a direction (v over the costs, v_g for gamma), with each cell's softmin weights w_k
of its predecessors (recomputed from R as in the backward) and h = sum_k w_k log w_k:

- tangent sweep, rows 1 .. n, left to right: T = dR . v,
  T[i, j] = v[i, j] + w_up T[i-1, j] + w_diag T[i-1, j-1] + v_g h + w_left T[i, j-1]:
  an affine scan along the row (maps x -> a + w_left x). dV . v = T[n, m].
- second sweep, rows n .. 1, right to left: E (the backward's expected alignment) and its
  directional derivative dE together. With dw_k = w_k (dz_k - sum_l w_l dz_l), dz_k =
  -(T_k + z_k v_g) / gamma (z_k = (min - R_k) / gamma), the pair (E, dE) of a cell is an
  affine map of its right neighbour's: (E, dE) = (a, a') + [[w, 0], [dw, w]] (E', dE') with
  w, dw the right neighbour's w_left and its derivative, a = E w_up + E w_diag of the row
  below, a' = dE w + E dw of the same; the maps compose in that form (a scan of four).
  H v over the costs is dE; over gamma, sum over cells of dE h + E dh, dh = sum_k dw_k log w_k.

Pure: imports only torch, triton and the sibling kernels module.
"""

import torch
import triton
import triton.language as tl

from .cache_keys import settle_module
from .soft_dtw import _affine, _block, _neg_entropy, _warps, _weights


@triton.jit
def _pair_affine(a1, d1, p1, q1, a2, d2, p2, q2):
    """(E, dE) -> (a + p E, d + q E + p dE): map 1, then map 2."""
    return a2 + p2 * a1, d2 + q2 * a1 + p2 * d1, p1 * p2, q2 * p1 + p2 * q1


@triton.jit(do_not_specialize=["N", "M"])
def soft_dtw_tangent_kernel(r_ptr, v_ptr, vg_ptr, gamma_ptr, n_ptr, m_ptr, t_ptr, dot_ptr, N, M,
                            BLOCK: tl.constexpr):
    """Program b: T [B, N, M] of pair b (0 off the pair) and dot[b] = T[n, m]."""
    b = tl.program_id(0).to(tl.int64)
    n = tl.load(n_ptr + b).to(tl.int32)
    m = tl.load(m_ptr + b).to(tl.int32)
    scale = 1.4426950408889634 / tl.load(gamma_ptr + b)
    vg = tl.load(vg_ptr + b)
    lane = tl.arange(0, BLOCK)
    i = n * 0 + 1
    while i <= n:
        at = (b * N + i - 1) * M
        carry = tl.full((), 0.0, tl.float32)  # T[i, j0 - 1] (the border: 0)
        j0 = 0
        while j0 < m:
            col = j0 + lane
            row = col * 0 + i
            inside = col < m
            ok, zu, zd, zl, l2, wu, wd, wl = _weights(r_ptr + at, r_ptr + at - M, col, i, m, scale)
            tu = tl.load(t_ptr + at - M + col, mask=inside & (row > 1), other=0.0)
            td = tl.load(t_ptr + at - M + col - 1, mask=inside & (row > 1) & (col >= 1), other=0.0)
            a = tl.load(v_ptr + at + col, mask=inside, other=0.0) + wu * tu + wd * td \
                + vg * _neg_entropy(wu, wd, wl, zu, zd, zl, l2)
            a = tl.where(ok, a, 0.0)
            A, Bm = tl.associative_scan((a, wl), 0, _affine)
            t = A + Bm * carry
            carry = tl.sum(tl.where(lane == BLOCK - 1, t, 0.0), 0)
            tl.store(t_ptr + at + col, t, mask=inside)
            j0 += BLOCK
        tl.debug_barrier()  # the next row reads this one across lanes
        i += 1
    tl.store(dot_ptr + b, tl.load(t_ptr + (b * N + n - 1) * M + m - 1))


@triton.jit
def _dw(wu, wd, wl, zu, zd, zl, tu, td, tlf, vg, g):
    """Directional derivatives of the three weights: dw_k = w_k (dz_k - sum_l w_l dz_l),
    dz_k = -(T_k + z_k v_g) / gamma, z_k natural (ln 2 times the gamma / ln 2 units)."""
    du = tl.where(wu > 0, -(tu + zu * 0.6931471805599453 * vg) / g, 0.0)
    dd = tl.where(wd > 0, -(td + zd * 0.6931471805599453 * vg) / g, 0.0)
    dl = tl.where(wl > 0, -(tlf + zl * 0.6931471805599453 * vg) / g, 0.0)
    mean = wu * du + wd * dd + wl * dl
    return wu * (du - mean), wd * (dd - mean), wl * (dl - mean)


@triton.jit(do_not_specialize=["N", "M"])
def soft_dtw_hvp_backward_kernel(r_ptr, t_ptr, gamma_ptr, vg_ptr, n_ptr, m_ptr, sc_ptr, wl_ptr, out_ptr, hg_ptr,
                                 N, M, BLOCK: tl.constexpr):
    """Program b: out[b] = dE (H v over the costs), hg[b] = H v over gamma. sc: [2 row
    parities, 4, M] per pair (E w_up, E w_diag, their derivatives, of the row below);
    wl: [2, M] per pair (w_left and dw_left of the row, for the cell to the left)."""
    b = tl.program_id(0).to(tl.int64)
    n = tl.load(n_ptr + b).to(tl.int32)
    m = tl.load(m_ptr + b).to(tl.int32)
    g = tl.load(gamma_ptr + b)
    scale = 1.4426950408889634 / g
    vg = tl.load(vg_ptr + b)
    lane = tl.arange(0, BLOCK)
    sc = sc_ptr + b * 8 * M
    wrow = wl_ptr + b * 2 * M
    hsum = tl.zeros((BLOCK,), tl.float32)
    i = n
    while i > 0:
        at = (b * N + i - 1) * M
        below = sc + (i % 2) * 4 * M
        here = sc + ((i + 1) % 2) * 4 * M
        c_e = tl.full((), 0.0, tl.float32)  # (E, dE)[i, j0 + BLOCK]
        c_d = tl.full((), 0.0, tl.float32)
        j0 = ((m - 1) // BLOCK) * BLOCK
        while j0 >= 0:
            col = j0 + BLOCK - 1 - lane  # reversed: lane order runs right to left
            row = col * 0 + i
            inside = col < m
            ok, zu, zd, zl, l2, wu, wd, wl = _weights(r_ptr + at, r_ptr + at - M, col, i, m, scale)
            tu = tl.load(t_ptr + at - M + col, mask=inside & (row > 1), other=0.0)
            td = tl.load(t_ptr + at - M + col - 1, mask=inside & (row > 1) & (col >= 1), other=0.0)
            tlf = tl.load(t_ptr + at + col - 1, mask=inside & (col >= 1), other=0.0)
            dwu, dwd, dwl = _dw(wu, wd, wl, zu, zd, zl, tu, td, tlf, vg, g)
            tl.store(wrow + col, wl, mask=inside)
            tl.store(wrow + M + col, dwl, mask=inside)
            tl.debug_barrier()
            w_next = tl.load(wrow + col + 1, mask=col + 1 < m, other=0.0)  # the right neighbour's
            dw_next = tl.load(wrow + M + col + 1, mask=col + 1 < m, other=0.0)
            a = tl.load(below + col, mask=inside & (row < n), other=0.0) \
                + tl.load(below + M + col + 1, mask=(col + 1 < m) & (row < n), other=0.0)
            a = tl.where((row == n) & (col == m - 1), 1.0, a)
            da = tl.load(below + 2 * M + col, mask=inside & (row < n), other=0.0) \
                + tl.load(below + 3 * M + col + 1, mask=(col + 1 < m) & (row < n), other=0.0)
            A, D, P, Q = tl.associative_scan((a, da, w_next, dw_next), 0, _pair_affine)
            e = A + P * c_e
            de = D + Q * c_e + P * c_d
            c_e = tl.sum(tl.where(lane == BLOCK - 1, e, 0.0), 0)
            c_d = tl.sum(tl.where(lane == BLOCK - 1, de, 0.0), 0)
            tl.store(out_ptr + at + col, de, mask=inside)
            tl.store(here + col, e * wu, mask=inside)
            tl.store(here + M + col, e * wd, mask=inside)
            tl.store(here + 2 * M + col, de * wu + e * dwu, mask=inside)
            tl.store(here + 3 * M + col, de * wd + e * dwd, mask=inside)
            # d(E h) = dE h + E dh, dh = sum_k dw_k log w_k, log w_k = ln 2 (z_k - log2 Z)
            dh = tl.where(wu > 0, dwu * (zu - l2), 0.0) + tl.where(wd > 0, dwd * (zd - l2), 0.0) \
                + tl.where(wl > 0, dwl * (zl - l2), 0.0)
            hsum += de * _neg_entropy(wu, wd, wl, zu, zd, zl, l2) + e * dh * 0.6931471805599453
            tl.debug_barrier()  # the next block overwrites nothing this one reads, the next row does
            j0 -= BLOCK
        i -= 1
    tl.store(hg_ptr + b, tl.sum(hsum, 0))


def hvp(costs, gamma, n, m, band: int, v_costs, v_gamma, R=None, block: int | None = None, warps: int | None = None):
    """(H v over the costs [B, N, M], over gamma [B], dV . v [B]); float32 [B, N, M] inputs.
    ``R``: the forward's table [B, N, M] if it was saved (else recomputed)."""
    from .soft_dtw import forward

    B, N, M = costs.shape
    hv = torch.zeros_like(costs)
    hg = costs.new_zeros(B)
    dot = costs.new_zeros(B)
    if not B:
        return hv, hg, dot
    if R is None:
        _, R = forward(costs, gamma, n, m, band, 0, block=block, warps=warps)
    T = torch.zeros_like(costs)
    blk = _block(M, block)
    gamma, v_gamma = gamma.contiguous(), v_gamma.contiguous()
    soft_dtw_tangent_kernel[(B,)](R, v_costs.contiguous(), v_gamma, gamma, n, m, T, dot, N, M, BLOCK=blk,
                                  num_warps=warps or _warps(blk))
    scratch = costs.new_empty(B, 8, M)
    wl = costs.new_empty(B, 2, M)
    soft_dtw_hvp_backward_kernel[(B,)](R, T, gamma, v_gamma, n, m, scratch, wl, hv, hg, N, M, BLOCK=blk,
                                       num_warps=warps or _warps(blk))
    return hv, hg, dot


settle_module(__name__)  # the same cache keys in every process (cache_keys.py)
