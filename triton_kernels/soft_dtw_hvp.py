"""Soft-DTW's Hessian-vector product (Mensch & Blondel 2018, Algorithms 2 and 3) in two
sweeps, a row per step, after soft_dtw's forward has stored R; one program per pair, or
per column stripe of a long pair (soft_dtw's plan and wavefront: the tangent sweep's
stripe s reads T of stripe s - 1's last column from T itself, the second sweep's takes
what it needs of stripe s + 1's first column through boundary arrays).

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
from .soft_dtw import (HAND_OFF, _affine, _by_diagonals, _hand_over, _neg_entropy, _plan, _poison_if_gave_up,
                       _progress_flags, _stripe, _wait, _warps, _weights, centre_of, forward)


@triton.jit
def _pair_affine(a1, d1, p1, q1, a2, d2, p2, q2):
    """(E, dE) -> (a + p E, d + q E + p dE): map 1, then map 2."""
    return a2 + p2 * a1, d2 + q2 * a1 + p2 * d1, p1 * p2, q2 * p1 + p2 * q1


@triton.jit(do_not_specialize=["N", "M", "S", "W"])
def soft_dtw_tangent_kernel(r_ptr, v_ptr, vg_ptr, gamma_ptr, mu_ptr, nu_ptr, n_ptr, m_ptr, t_ptr, dot_ptr, flag_ptr,
                            err_ptr, N, M, S, W, BLOCK: tl.constexpr):
    """Program (b, s) = divmod(p, S): T [B, N, M] of pair b's columns [s W, s W + W) (0 off
    the pair) and dot[b] = T[n, m]. With S > 1 stripe s waits for stripe s - 1's row (flag:
    rows done) and reads T of its last column from T itself."""
    b, s, n, m, lo = _stripe(n_ptr, m_ptr, S, W, False)
    if lo < m:
        hi = tl.minimum(lo + W, m)
        scale = 1.4426950408889634 / tl.load(gamma_ptr + b)
        mu = tl.load(mu_ptr + b)  # (R is centred: the forward's)
        nu = tl.load(nu_ptr + b)  # (T too: T - nu (i + j) is stored, soft_dtw_diag_hvp's)
        vg = tl.load(vg_ptr + b)
        lane = tl.arange(0, BLOCK)
        seen = n * 0  # rows of stripe s - 1 known done
        t_dg = tl.full((), 0.0, tl.float32)  # T[i - 1, lo - 1] (row 0 and column 0: the border, 0)
        i = n * 0 + 1
        while i <= n:
            at = (b * N + i - 1) * M
            carry = tl.full((), 0.0, tl.float32)  # T[i, j0 - 1]
            if s > 0:
                if i > seen:
                    seen = _wait(flag_ptr + b * S + s - 1, i, err_ptr)
                carry = tl.load(t_ptr + at + lo - 1, volatile=True)
            t_left = carry
            j0 = lo
            while j0 < hi:
                col = j0 + lane
                row = col * 0 + i
                inside = col < hi
                ok, zu, zd, zl, l2, wu, wd, wl = _weights(r_ptr + at, r_ptr + at - M, col, i, m, scale, mu)
                tu = tl.load(t_ptr + at - M + col, mask=inside & (row > 1), other=0.0)
                td = tl.load(t_ptr + at - M + col - 1, mask=inside & (row > 1) & (col > lo), other=0.0)
                td = tl.where(col == lo, t_dg, td)
                a = tl.load(v_ptr + at + col, mask=inside, other=0.0) - nu + wu * tu + wd * (td - nu) \
                    + vg * _neg_entropy(wu, wd, wl, zu, zd, zl, l2)
                a = tl.where(ok, a, 0.0)
                A, Bm = tl.associative_scan((a, wl), 0, _affine)
                t = A + Bm * carry
                carry = tl.sum(tl.where(lane == BLOCK - 1, t, 0.0), 0)
                tl.store(t_ptr + at + col, t, mask=inside)
                j0 += BLOCK
            t_dg = t_left
            tl.debug_barrier()  # the next row reads this one across lanes
            if (hi < m) & ((i % HAND_OFF == 0) | (i == n)):
                tl.atomic_xchg(flag_ptr + b * S + s, i, sem="release")
            i += 1
        if hi == m:
            bad = tl.load(err_ptr, volatile=True) != 0
            t_nm = tl.load(t_ptr + (b * N + n - 1) * M + m - 1) + nu * (n + m)
            tl.store(dot_ptr + b, tl.where(bad, float("nan"), t_nm))


@triton.jit
def _dw(wu, wd, wl, zu, zd, zl, tu, td, tlf, vg, inv_g, GAMMA: tl.constexpr):
    """Directional derivatives of the three weights: dw_k = w_k (dz_k - sum_l w_l dz_l),
    dz_k = -(T_k + z_k v_g) / gamma, z_k natural (ln 2 times the gamma / ln 2 units); inv_g =
    1 / gamma (a multiply: three divisions a cell were MUFU work on the product's chain).
    GAMMA = False: v_g is zero (its terms left out). The T_k enter less one of them (a live
    one): the weights sum to 1 only to rounding, and that error times |T| would not cancel in
    dz_k - sum_l w_l dz_l, their differences' does."""
    ref = tl.where(wu > 0, tu, tl.where(wd > 0, td, tlf))
    su, sd, sl = tu - ref, td - ref, tlf - ref
    if GAMMA:
        su += zu * 0.6931471805599453 * vg
        sd += zd * 0.6931471805599453 * vg
        sl += zl * 0.6931471805599453 * vg
    du = tl.where(wu > 0, -su * inv_g, 0.0)
    dd = tl.where(wd > 0, -sd * inv_g, 0.0)
    dl = tl.where(wl > 0, -sl * inv_g, 0.0)
    mean = wu * du + wd * dd + wl * dl
    return wu * (du - mean), wd * (dd - mean), wl * (dl - mean)


@triton.jit(do_not_specialize=["N", "M", "S", "W"])
def soft_dtw_hvp_backward_kernel(grad_ptr, r_ptr, t_ptr, gamma_ptr, mu_ptr, nu_ptr, vg_ptr, n_ptr, m_ptr, sc_ptr,
                                 wl_ptr, out_ptr, hg_ptr, bnd_ptr, flag_ptr, err_ptr, N, M, S, W, BLOCK: tl.constexpr):
    """Program (b, S - 1 - s) = divmod(p, S): columns [s W, s W + W) of pair b; out[b] =
    grad[b] dE there (grad[b] H v over the costs: E seeded with grad[b], as the backward
    seeds it), hg[b, s] its cells' part of grad[b] H v over gamma. sc: [2 row
    parities, 4, M] per pair (E w_up, E w_diag, their derivatives, of the row below); wl:
    [2, M] per pair (w_left and dw_left of the row, for the cell to the left). With S > 1
    stripe s waits for stripe s + 1's row (flag: rows done) and takes what its first column
    hands over, by row, from bnd ([6, B, S, N + 2]: E, dE, w_left, dw_left, E w_diag and its
    derivative)."""
    b, s, n, m, lo = _stripe(n_ptr, m_ptr, S, W, True)
    if lo < m:
        hi = tl.minimum(lo + W, m)
        g = tl.load(gamma_ptr + b)
        scale = 1.4426950408889634 / g
        inv_g = 1.0 / g
        mu = tl.load(mu_ptr + b)
        nu = tl.load(nu_ptr + b)
        vg = tl.load(vg_ptr + b)
        seed = tl.load(grad_ptr + b)
        lane = tl.arange(0, BLOCK)
        sc = sc_ptr + b * 8 * M
        wrow = wl_ptr + b * 2 * M
        plane, mine, right = _hand_over(bnd_ptr, b, s, S, N)  # (bnd's six planes)
        hsum = tl.zeros((BLOCK,), tl.float32)
        seen = n * 0  # rows of stripe s + 1 known done
        i = n
        while i > 0:
            at = (b * N + i - 1) * M
            below = sc + (i % 2) * 4 * M
            here = sc + ((i + 1) % 2) * 4 * M
            c_e = tl.full((), 0.0, tl.float32)  # (E, dE)[i, j0 + BLOCK]
            c_d = tl.full((), 0.0, tl.float32)
            w_hi = tl.full((), 0.0, tl.float32)  # w_left, dw_left of cell (i, hi)
            dw_hi = tl.full((), 0.0, tl.float32)
            ed_hi = tl.full((), 0.0, tl.float32)  # E w_diag of cell (i + 1, hi) and its derivative
            ded_hi = tl.full((), 0.0, tl.float32)
            if hi < m:  # stripe s + 1's first column
                if n - i + 1 > seen:
                    seen = _wait(flag_ptr + b * S + s + 1, n - i + 1, err_ptr)
                c_e = tl.load(right + i, volatile=True)
                c_d = tl.load(right + plane + i, volatile=True)
                w_hi = tl.load(right + 2 * plane + i, volatile=True)
                dw_hi = tl.load(right + 3 * plane + i, volatile=True)
                if i < n:
                    ed_hi = tl.load(right + 4 * plane + i + 1, volatile=True)
                    ded_hi = tl.load(right + 5 * plane + i + 1, volatile=True)
            j0 = lo + ((hi - lo - 1) // BLOCK) * BLOCK
            while j0 >= lo:
                col = j0 + BLOCK - 1 - lane  # reversed: lane order runs right to left
                row = col * 0 + i
                inside = col < hi
                nxt = col + 1 < hi
                ok, zu, zd, zl, l2, wu, wd, wl = _weights(r_ptr + at, r_ptr + at - M, col, i, m, scale, mu)
                tu = tl.load(t_ptr + at - M + col, mask=inside & (row > 1), other=0.0)
                td = tl.load(t_ptr + at - M + col - 1, mask=inside & (row > 1) & (col >= 1), other=0.0)
                tlf = tl.load(t_ptr + at + col - 1, mask=inside & (col >= 1), other=0.0)
                dwu, dwd, dwl = _dw(wu, wd, wl, zu, zd, zl, tu, td - nu, tlf, vg, inv_g, True)
                tl.store(wrow + col, wl, mask=inside)
                tl.store(wrow + M + col, dwl, mask=inside)
                tl.debug_barrier()
                at_hi = col + 1 == hi
                w_next = tl.where(at_hi, w_hi, tl.load(wrow + col + 1, mask=nxt, other=0.0))  # the right neighbour's
                dw_next = tl.where(at_hi, dw_hi, tl.load(wrow + M + col + 1, mask=nxt, other=0.0))
                a = tl.load(below + col, mask=inside & (row < n), other=0.0) \
                    + tl.load(below + M + col + 1, mask=nxt & (row < n), other=0.0) + tl.where(at_hi, ed_hi, 0.0)
                a = tl.where((row == n) & (col == m - 1), seed, a)
                da = tl.load(below + 2 * M + col, mask=inside & (row < n), other=0.0) \
                    + tl.load(below + 3 * M + col + 1, mask=nxt & (row < n), other=0.0) + tl.where(at_hi, ded_hi, 0.0)
                A, D, P, Q = tl.associative_scan((a, da, w_next, dw_next), 0, _pair_affine)
                e = A + P * c_e
                de = D + Q * c_e + P * c_d
                c_e = tl.sum(tl.where(lane == BLOCK - 1, e, 0.0), 0)
                c_d = tl.sum(tl.where(lane == BLOCK - 1, de, 0.0), 0)
                ed = e * wd
                ded = de * wd + e * dwd
                tl.store(out_ptr + at + col, de, mask=inside)
                tl.store(here + col, e * wu, mask=inside)
                tl.store(here + M + col, ed, mask=inside)
                tl.store(here + 2 * M + col, de * wu + e * dwu, mask=inside)
                tl.store(here + 3 * M + col, ded, mask=inside)
                if (j0 == lo) & (s > 0):  # hand the first column to stripe s - 1
                    first = (col == lo) & (row > 0)
                    tl.store(mine + i + col * 0, e, mask=first)
                    tl.store(mine + plane + i + col * 0, de, mask=first)
                    tl.store(mine + 2 * plane + i + col * 0, wl, mask=first)
                    tl.store(mine + 3 * plane + i + col * 0, dwl, mask=first)
                    tl.store(mine + 4 * plane + i + col * 0, ed, mask=first)
                    tl.store(mine + 5 * plane + i + col * 0, ded, mask=first)
                # d(E h) = dE h + E dh, dh = sum_k dw_k log w_k, log w_k = ln 2 (z_k - log2 Z)
                dh = tl.where(wu > 0, dwu * (zu - l2), 0.0) + tl.where(wd > 0, dwd * (zd - l2), 0.0) \
                    + tl.where(wl > 0, dwl * (zl - l2), 0.0)
                hsum += de * _neg_entropy(wu, wd, wl, zu, zd, zl, l2) + e * dh * 0.6931471805599453
                tl.debug_barrier()  # the next block overwrites nothing this one reads, the next row does
                j0 -= BLOCK
            if (s > 0) & (((n - i + 1) % HAND_OFF == 0) | (i == 1)):
                tl.atomic_xchg(flag_ptr + b * S + s, n - i + 1, sem="release")
            i -= 1
        tl.store(hg_ptr + b * S + s, tl.sum(hsum, 0))
        if s == 0:
            _poison_if_gave_up(err_ptr, out_ptr + b * N * M, hg_ptr + b * S)


def hvp(costs, gamma, n, m, band: int, v_costs, v_gamma, R=None, kept=None, checkpoint: int = 0,
        block: int | None = None, warps: int | None = None, stripe: int | None = None, diag: bool | None = None,
        rows: int | None = None, mu=None, nu=None, grad=None, gamma_terms: bool = True):
    """(grad * H v over the costs [B, N, M], grad * H v over gamma [B], dV . v [B]); float32
    [B, N, M] inputs; ``grad`` [B] the value's gradient (None: ones), taken in by the
    product's sweep (no pass over [B, N, M] to scale it); ``gamma_terms`` False: v_gamma is
    zero and H v over gamma not wanted (zeros; the sweeps by anti-diagonals then skip its terms).
    ``R``: what the forward saved, its table [B, N, M] (checkpoint 0) or rows K, 2K, ..., and
    ``kept`` beside it. Where the forward kept the backward's segments by anti-diagonals (kept
    4-D) the product recomputes them too (soft_dtw_diag_hvp); else, with checkpoints, from a
    whole table recomputed. By anti-diagonals (strips of ``rows`` rows) where
    soft_dtw._by_diagonals says or ``diag`` forces; else by rows, the plan (one program per
    pair, or stripes) the forward's. ``mu``: the forward's centring (soft_dtw.forward); ``nu``
    [B] or None: the tangents' (T = dR . v held as T - nu (i + j), the same products)."""
    B, N, M = costs.shape
    mu, nu = centre_of(mu, costs), centre_of(nu, costs)
    if not B:
        return torch.zeros_like(costs), costs.new_zeros(B), costs.new_zeros(B)
    grad = costs.new_ones(B) if grad is None else grad.contiguous()
    if checkpoint and kept is not None and kept.dim() == 4:
        from . import soft_dtw_diag_hvp  # (here: it imports this module's _dw)

        return soft_dtw_diag_hvp.hvp(costs, gamma, n, m, band, v_costs, v_gamma, R, mu, nu, grad, kept, checkpoint,
                                     gamma_terms=gamma_terms)
    if checkpoint:
        R = None
    if R is None:
        R = forward(costs, gamma, n, m, band, 0, block=block, warps=warps, stripe=stripe, mu=mu)[1]
    if _by_diagonals(costs, 0) if diag is None else diag:
        from . import soft_dtw_diag_hvp  # (here: it imports this module's _dw)

        return soft_dtw_diag_hvp.hvp(costs, gamma, n, m, band, v_costs, v_gamma, R, mu, nu, grad, block=rows,
                                     gamma_terms=gamma_terms)
    hv = torch.zeros_like(costs)
    dot = costs.new_zeros(B)
    blk, W, S = _plan(costs, M, block, stripe, True)
    warps = warps or _warps(blk)
    T = torch.zeros_like(costs)
    hg = costs.new_zeros(B, S)
    half = -(-B * S // 4) * 4  # (each sweep's counters at a 16-byte boundary)
    flags, err = _progress_flags(2 * half, costs.device)
    gamma, v_gamma = gamma.contiguous(), v_gamma.contiguous()
    soft_dtw_tangent_kernel[(B * S,)](R, v_costs.contiguous(), v_gamma, gamma, mu, nu, n, m, T, dot, flags, err, N, M,
                                      S, W, BLOCK=blk, num_warps=warps)
    scratch = costs.new_empty(B, 8, M)
    wl = costs.new_empty(B, 2, M)
    bnd = costs.new_empty(6, B, S, N + 2) if S > 1 else hg
    soft_dtw_hvp_backward_kernel[(B * S,)](grad, R, T, gamma, mu, nu, v_gamma, n, m, scratch, wl, hv, hg, bnd,
                                           flags[half:], err, N, M, S, W, BLOCK=blk, num_warps=warps)
    return hv, hg.sum(1) if gamma_terms else torch.zeros_like(dot), dot


settle_module(__name__)  # the same cache keys in every process (cache_keys.py)
