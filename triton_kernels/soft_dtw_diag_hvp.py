"""Soft-DTW's Hessian-vector product (soft_dtw_hvp.py's two sweeps) by anti-diagonals, from
R's full table: a lane per row, a step per anti-diagonal, strips of rows run as a
wavefront, as soft_dtw_diag (forward) and soft_dtw_diag_bwd (backward) do.

- Tangent sweep, strips from the top: T = dR . v, T[i, c] = v + w_up T[i-1, c] + w_diag
  T[i-1, c-1] + v_g h + w_left T[i, c-1]. T of the row above comes from the lane above (one
  ``tl.gather`` a step; its value two steps back is the diagonal), the strip's first lane
  reads it from T itself (the strip above's last row, as it is written); dV . v = T[n, m].
- Second sweep, strips from the bottom: E and dE together. A cell's pair is what its
  successors push back, (E, dE)[x] = sum_s (E_s w_s, dE_s w_s + E_s dw_s), the lane below
  handing over the sums of its up and (a step earlier) diagonal pushes in two gathers, the
  lane's own last step the left push; H v over the costs is dE, over gamma sum dE h + E dh.
  E starts at the value's gradient grad[b] (E and dE are linear in it), so the sweep
  returns grad * H v with no pass over [B, N, M] to scale it.

GAMMA = False (gamma a constant: v_g zero and H v over gamma not wanted) leaves gamma's terms
out of both sweeps, the entropy's log2 a cell among them: the product's backward is ~9 %
faster at 4 x 10,000 (benchmarks/NOTES.md, session 39).

R and T of a cell's predecessors are loaded a step ahead (off the chain), each of R's and
T's rows once a lane, and each lane's rows of the tables prefetched into L2 PREFETCH columns
ahead (soft_dtw_diag_bwd's reason). Waits that give up poison the results with NaN.

Pure: imports only torch and triton.
"""

import torch
import triton
import triton.language as tl

from .cache_keys import settle_module
from .launch import Launcher
from . import soft_dtw_diag
from .soft_align import (PREFETCH, _eight_registers, _latest_first, _latest_last, _load_still, _prefetch, _store8,
                         _store_own)
from .soft_align_diag import block_for
from .soft_dtw import _neg_entropy, _poison_if_gave_up, _softmax3, _wait
from .soft_dtw_diag import (HAND_OFF, _ahead_in_segment, _banded, _centred_cell, _costs_ahead, _from_segment, _lanes,
                            _release, _round_release, _round_wait, _segment_start, _shift, _top)
from .soft_dtw_hvp import _dw


@triton.jit(do_not_specialize=["N", "M", "B", "S", "H", "n_saved", "n_seg", "band"])
def soft_dtw_diag_tangent_kernel(r_ptr, cost_ptr, v_ptr, vg_ptr, gamma_ptr, mu_ptr, nu_ptr, n_ptr, m_ptr, t_ptr,
                                 t_states_ptr, dot_ptr, sync_ptr, err_ptr, N, M, B, S, H, n_saved, n_seg, band,
                                 BLOCK: tl.constexpr, HAND_OFF: tl.constexpr, SEG: tl.constexpr,
                                 GAMMA: tl.constexpr):
    """Program (k, b) from its ticket, strips from the first: T of pair b's rows kH + 1 ..
    kH + H (H <= BLOCK); dot[b] = T[n, m]. SEG = 0: R's full table at r_ptr, T [B, N, M].
    SEG > 0 (checkpoints, strips of H = K rows): R recomputed by the forward's recurrence from
    the costs and its rows K, 2K, ... (r_ptr, [B, n_saved, M]); T keeps each strip's last row
    (t_ptr, [B, S, M]) and the lanes' T at the two steps before each segment (t_states, [B, S,
    2 n_seg, BLOCK]). sync: the ticket counter, then a progress counter (columns of the
    strip's last row in T) per strip; err: waits that gave up. R is centred by mu[b] (the
    forward's), T by nu[b]: T - nu (i + j) is stored (the diagonal's T and each v get -nu).
    GAMMA = False: gamma's direction vg is zero (its entropy term left out)."""
    tl.static_assert(HAND_OFF % 8 == 0)  # (a round's stores of T go at its steps 7, 15, ...)
    ticket = tl.atomic_add(sync_ptr, 1)
    b = (ticket % B).to(tl.int64)
    k = ticket // B
    n = tl.load(n_ptr + b).to(tl.int32)
    m = tl.load(m_ptr + b).to(tl.int32)
    r0 = k * H
    if r0 < n:
        scale = 1.4426950408889634 / tl.load(gamma_ptr + b)
        mu = tl.load(mu_ptr + b)
        nu = tl.load(nu_ptr + b)
        vg = tl.load(vg_ptr + b)
        offs, R, lane, i, first, bottom = _lanes(n, r0, H, BLOCK)
        idx_up = tl.maximum(offs - 1, 0)
        publish = r0 + R < n
        flag_in = sync_ptr + 1 + b * S + k - 1
        row = (b * N + i - 1).to(tl.int64) * M  # the lane's row, and the one above (i > 1)
        above = (b * N + tl.maximum(i - 2, 0)).to(tl.int64) * M
        has_above = lane & (i > 1)
        if SEG > 0:
            t_top = t_ptr + (b * S + k - 1) * M  # the strip above's last row of T (k > 0)
            t_out = t_ptr + (b * S + k) * M
            states = t_states_ptr + (b * S + k) * n_seg * 2 * BLOCK
            r_top = r_ptr + (b * n_saved + tl.maximum(k - 1, 0)) * M  # R's row r0, a checkpoint (k > 0)
            c_n = tl.load(cost_ptr + row, mask=lane & first, other=0.0)
            rtop = _top(r_top, 1, m, scale, k)
            # R, scaled, as the forward's recurrence carries it: up and diagonal from the lane above
            up = tl.where(first, _top(r_top, 0, m, scale, k), float("inf"))
            dg = tl.where(first & (k == 0), 0.0, float("inf"))  # R[0, -1] = 0
            lf = tl.full((BLOCK,), float("inf"), tl.float32)
            rc = tl.full((BLOCK,), float("inf"), tl.float32)  # (its own tensor: see soft_dtw_diag_bwd)
        else:
            t_top = t_ptr + (b * N + r0 - 1) * M  # T's row r0 (k > 0), the strip above's last
            # R of the cell and its predecessors, as stored: lf, dg rotate in from rc, up
            rc = tl.load(r_ptr + row, mask=lane & first, other=float("inf"))
            up = tl.load(r_ptr + above, mask=has_above & first, other=float("inf"))
            lf = tl.full((BLOCK,), float("inf"), tl.float32)
            dg = tl.where(i == 1, 0.0, float("inf"))  # R[0, -1] = 0: cell (1, 0)'s one predecessor
        seen = n * 0
        if k > 0:
            seen = _wait(flag_in, tl.minimum(2, m), err_ptr)
        top = tl.load(t_top + 1, mask=(k > 0) & (m > 1), other=0.0, volatile=True)  # T[r0, 1]
        up_t = tl.where(first, tl.load(t_top, mask=k > 0, other=0.0, volatile=True), 0.0)  # T[i - 1, c]
        dg_t = tl.zeros((BLOCK,), tl.float32)  # T[i - 1, c - 1] (row 0, column -1: the border, 0)
        left_t = tl.zeros((BLOCK,), tl.float32)
        v_n = tl.load(v_ptr + row, mask=lane & first, other=0.0)
        h0, h1, h2, h3, h4, h5, h6, h7 = _eight_registers(BLOCK)  # T of the last eight steps, the latest last (SEG = 0)
        wide = tl.where(band >= 0, band, N + M)  # (no band: one wider than any pair)
        t = 0
        T = R + m - 1
        while t < T:  # HAND_OFF steps a round: one wait and one release, no branch in the steps
            if k > 0:  # the columns of the row above that the round's steps read
                seen = _round_wait(flag_in, t + HAND_OFF + 2, m, seen, err_ptr)
            for u in tl.static_range(HAND_OFF):  # (steps past T: no live lane; t % 8 == u % 8)
                c = t - offs
                live = lane & (c >= 0) & (c < m)
                cn = c + 1
                nxt = (cn >= 0) & (cn < m)
                cp = c + PREFETCH
                ahead_ok = lane & (cp >= 0) & (cp < m)
                if SEG > 0:
                    cost = c_n
                    c_n = _load_still(cost_ptr + row + cn, lane & nxt, 0.0)
                    _prefetch(cost_ptr + row + cp, ahead_ok)
                    rtop_n = _load_still(r_top + t + 2, (k > 0) & (t + 2 < m), float("inf")) * scale  # (_top)
                    rc, dgc = _centred_cell(up, dg, lf, cost, mu, scale)
                    rc = tl.where(live & (tl.abs(i - 1 - c) <= wide), rc, float("inf"))  # (_banded, no branch)
                    ok, zu, zd, zl, l2, wu, wd, wl = _softmax3(rc, up, dgc, lf, live, 1.0)
                else:
                    rc_n = _load_still(r_ptr + row + cn, lane & nxt, float("inf"))
                    up_n = _load_still(r_ptr + above + cn, has_above & nxt, float("inf"))
                    _prefetch(r_ptr + row + cp, ahead_ok)  # (the row above: the lane above's, prefetched there)
                    ok, zu, zd, zl, l2, wu, wd, wl = _softmax3(rc, up, dg - mu, lf, live, scale)
                vx = v_n
                v_n = _load_still(v_ptr + row + cn, lane & nxt, 0.0)  # (the direction's, as the costs are read)
                _prefetch(v_ptr + row + cp, ahead_ok)
                top_n = tl.load(t_top + t + 2, mask=(k > 0) & (t + 2 < m), other=0.0, volatile=True)
                x = _tangent(vx, nu, wu, wd, wl, up_t, dg_t, left_t, vg, zu, zd, zl, l2, GAMMA)
                x = tl.where(ok, x, 0.0)
                if SEG > 0:
                    _store_own(t_out + c, x, live & bottom & (offs * 0 + r0 + R < n))  # (publish, as a tensor)
                    ahead = offs * 0 + t + 2  # (the states: the two steps before each segment)
                    slot = ahead % SEG
                    _store_own(states + (ahead // SEG * 2 + slot) * BLOCK + offs, x,
                               (slot < 2) & (ahead >= SEG) & (ahead < T + 2))  # (not past the strip's steps)
                    dg, lf, up = _shift(rc, up, rtop, first, idx_up)
                    rtop = rtop_n
                else:
                    h0, h1, h2, h3, h4, h5, h6, h7 = _latest_last(h1, h2, h3, h4, h5, h6, h7, x)  # (column c)
                    if u % 8 == 7:  # (steps past T store nothing: their columns are m or more)
                        _store8(t_ptr + row, c - 7, h0, h1, h2, h3, h4, h5, h6, h7, lane, 0, 7, m)
                    lf, dg, rc, up = rc, up, rc_n, up_n
                _store_own(dot_ptr + b + offs * 0, x + nu * (n + m), live & (i == n) & (c == m - 1))
                dg_t, left_t, up_t = _shift(x, up_t, top, first, idx_up)
                top = top_n
                t += 1
            if publish:  # (SEG = 0: the row's last store, _store8's, was the round's last step's)
                _round_release(flag_in + 1, t - R + 1, m)
        if r0 + R == n:
            if tl.load(err_ptr, volatile=True) != 0:  # a wait gave up: poison, never a wrong number
                tl.store(dot_ptr + b, float("nan"))


@triton.jit
def _tangent(vx, nu, wu, wd, wl, up_t, dg_t, left_t, vg, zu, zd, zl, l2, GAMMA: tl.constexpr):
    """T - nu (i + j) of a cell from its predecessors' (the diagonal's as stored, less nu).
    GAMMA = False: gamma's direction vg is zero, and its entropy term (a log2 a cell) is left out."""
    x = vx - nu + wu * up_t + wd * (dg_t - nu) + wl * left_t
    if GAMMA:
        x += vg * _neg_entropy(wu, wd, wl, zu, zd, zl, l2)
    return x


@triton.jit
def _t_top(t_top, c, m, k):
    """T[r0, c] of the row above strip k (the tangent sweep's kept row); 0 off the pair and at row 0."""
    return tl.load(t_top + c, mask=(k > 0) & (c >= 0) & (c < m), other=0.0)


@triton.jit
def _recompute(scr, r_states, t_states, r_top, t_top, crow, vrow, k, t0, t1, offs, lane, first, i, m, scale, mu, nu,
               vg, band, SEG: tl.constexpr, BLOCK: tl.constexpr, GAMMA: tl.constexpr):
    """R (scaled) and T of the strip's steps t0 - 2 .. t1 - 1 into scr ([2, SEG + 2, BLOCK]:
    step t in row t - t0 + 2 of each), as soft_dtw_diag_bwd._recompute does R: the forward's
    and the tangent sweep's steps from the lanes' values at steps t0 - 2 and t0 - 1 (the
    states both kept; none before step 0) and the row above the strip."""
    idx_up = tl.maximum(offs - 1, 0)
    plane = (SEG + 2) * BLOCK
    tl.debug_barrier()  # (the sweep of the segment after this one has read scr)
    lf, up, dg = _segment_start(scr, r_states, r_top, k, t0, offs, lane, first, m, scale, BLOCK)
    kept = lane & (offs * 0 + t0 > 0)  # (a tensor: the interpreter's masks)
    t2 = tl.load(t_states + offs, mask=kept, other=0.0)
    t1v = tl.load(t_states + BLOCK + offs, mask=kept, other=0.0)
    tl.store(scr + plane + offs, t2)
    tl.store(scr + plane + BLOCK + offs, t1v)
    lf_t = t1v
    up_t = tl.where(first, _t_top(t_top, t0, m, k), tl.gather(t1v, idx_up, 0))
    dg_t = tl.where(first, _t_top(t_top, t0 - 1, m, k), tl.gather(t2, idx_up, 0))
    c = t0 - offs
    on = lane & (c >= 0) & (c < m)
    c_n = tl.load(crow + c, mask=on, other=0.0)
    v_n = tl.load(vrow + c, mask=on, other=0.0)
    rtop = _top(r_top, t0 + 1, m, scale, k)  # (lane 0's up of the next step: loads a step ahead)
    ttop = _t_top(t_top, t0 + 1, m, k)
    t = t0
    while t < t1:
        c = t - offs
        live = lane & (c >= 0) & (c < m)
        cost = c_n
        c_n = _costs_ahead(crow, c, lane, m)
        vx = v_n
        v_n = _costs_ahead(vrow, c, lane, m)
        rtop_n = _top(r_top, t + 2, m, scale, k)
        ttop_n = _t_top(t_top, t + 2, m, k)
        rc, dgc = _centred_cell(up, dg, lf, cost, mu, scale)
        rc = _banded(rc, i, c, live, band)
        ok, zu, zd, zl, l2, wu, wd, wl = _softmax3(rc, up, dgc, lf, live, 1.0)
        x = _tangent(vx, nu, wu, wd, wl, up_t, dg_t, lf_t, vg, zu, zd, zl, l2, GAMMA)
        x = tl.where(ok, x, 0.0)
        tl.store(scr + (t - t0 + 2) * BLOCK + offs, rc)
        tl.store(scr + plane + (t - t0 + 2) * BLOCK + offs, x)
        dg, lf, up = _shift(rc, up, rtop, first, idx_up)
        rtop = rtop_n
        dg_t, lf_t, up_t = _shift(x, up_t, ttop, first, idx_up)
        ttop = ttop_n
        t += 1
    tl.debug_barrier()  # (the sweep reads scr across lanes)


@triton.jit
def _second(rc, up, dg, lf, tu, td, tlf, nb_e, nb_d, hand_e, hand_d, ew_left, dw_left, ew_diag, dw_diag, c, inside,
            bottom, i, n, m, mu_r, nu, unit, vg, inv_g, seed, idx_down, GAMMA: tl.constexpr):
    """One step of the second sweep: the lanes' (E, dE) at (i, c) from R and T there and at the
    predecessors (dg uncentred by mu_r, T's diagonal by nu here), the lane below's hand-overs
    (bottom lane: nb_e, nb_d, the strip below's) and the lane's own left pushes; then (dE, the
    hand-overs for the lane above, the diagonal and left pushes for the next step, and the
    step's share of H v over gamma, dE h + E dh). ``seed``: E at the last cell, grad[b] (E and
    dE are linear in it, so the products come out scaled by the value's gradient)."""
    e = tl.where(bottom, nb_e, tl.gather(hand_e, idx_down, 0)) + ew_left
    de = tl.where(bottom, nb_d, tl.gather(hand_d, idx_down, 0)) + dw_left
    e = tl.where((i == n) & (c == m - 1), seed, e)
    e = tl.where(inside, e, 0.0)
    de = tl.where(inside, de, 0.0)
    ok, zu, zd, zl, l2, wu, wd, wl = _softmax3(rc, up, dg - mu_r, lf, inside, unit)
    dwu, dwd, dwl = _dw(wu, wd, wl, zu, zd, zl, tu, td - nu, tlf, vg, inv_g, GAMMA)
    share = tl.zeros_like(de)  # (GAMMA = False: H v over gamma is not wanted, nor its log2 a cell)
    if GAMMA:
        # d(E h) = dE h + E dh, dh = sum_k dw_k log w_k, log w_k = ln 2 (z_k - log2 Z)
        dh = tl.where(wu > 0, dwu * (zu - l2), 0.0) + tl.where(wd > 0, dwd * (zd - l2), 0.0) \
            + tl.where(wl > 0, dwl * (zl - l2), 0.0)
        share = de * _neg_entropy(wu, wd, wl, zu, zd, zl, l2) + e * dh * 0.6931471805599453
    return (de, e * wu + ew_diag, de * wu + e * dwu + dw_diag, e * wd, de * wd + e * dwd, e * wl, de * wl + e * dwl,
            share)


@triton.jit
def _hand_over(mine, plane, c, hand_e, hand_d, mask):
    """The top lane's two hand-overs (E, dE) at column c, for the strip above."""
    _store_own(mine + c, hand_e, mask)
    _store_own(mine + plane + c, hand_d, mask)


@triton.jit(do_not_specialize=["N", "M", "B", "S", "H", "n_saved", "n_seg", "band"])
def soft_dtw_diag_hvp_backward_kernel(grad_ptr, r_ptr, t_ptr, cost_ptr, v_ptr, r_states_ptr, t_states_ptr,
                                      scratch_ptr, gamma_ptr, mu_ptr, nu_ptr, vg_ptr, n_ptr, m_ptr, out_ptr, hg_ptr,
                                      bnd_ptr, sync_ptr, err_ptr, N, M, B, S, H, n_saved, n_seg, band,
                                      BLOCK: tl.constexpr, HAND_OFF: tl.constexpr, SEG: tl.constexpr,
                                      GAMMA: tl.constexpr):
    """Program (k, b) from its ticket, strips from the last: out[b] = grad[b] dE (grad[b] H v
    over the costs) of rows kH + 1 .. kH + H, hg[b, k] their part of grad[b] H v over gamma
    (GAMMA = False: zeros; gamma's terms left out). bnd [2, B, S, M]: the top row's pushes
    up, (E, dE)(w_up at c, w_diag at c + 1), for the strip above. SEG = 0: R and T full
    tables (as stored; T unscaled). SEG > 0: what soft_dtw_diag's forward (r_ptr: rows K, 2K,
    ...; r_states) and the tangent sweep (t_ptr: each strip's last row; t_states) kept, each
    strip's R and T recomputed a segment at a time into its scratch ([B S, 2, SEG + 2,
    BLOCK]) from the costs and the direction v."""
    tl.static_assert(HAND_OFF % 8 == 0)  # (a round's stores of dE go at its steps 7, 15, ...)
    ticket = tl.atomic_add(sync_ptr, 1)
    b = (ticket % B).to(tl.int64)
    k = S - 1 - ticket // B
    n = tl.load(n_ptr + b).to(tl.int32)
    m = tl.load(m_ptr + b).to(tl.int32)
    r0 = k * H
    if r0 < n:
        g = tl.load(gamma_ptr + b)
        scale = 1.4426950408889634 / g
        inv_g = 1.0 / g
        mu = tl.load(mu_ptr + b)  # (R and T are centred: the forward's, the tangent sweep's)
        mu_r = mu * scale if SEG > 0 else mu  # (in the units of R as read: scaled scratch, or as stored)
        nu = tl.load(nu_ptr + b)
        vg = tl.load(vg_ptr + b)
        seed = tl.load(grad_ptr + b)
        offs, R, lane, i, first, bottom = _lanes(n, r0, H, BLOCK)
        idx_down = tl.minimum(offs + 1, BLOCK - 1)
        below = r0 + R < n
        plane = (B * S).to(tl.int64) * M
        lower = bnd_ptr + (b * S + k + 1) * M
        mine = bnd_ptr + (b * S + k) * M
        flag_in = sync_ptr + 1 + b * S + k + 1
        flag_out = sync_ptr + 1 + b * S + k
        row = (b * N + i - 1).to(tl.int64) * M
        above = (b * N + tl.maximum(i - 2, 0)).to(tl.int64) * M
        has_above = lane & (i > 1)
        T = R + m - 1
        c = T - 1 - offs
        if SEG > 0:
            r_top = r_ptr + (b * n_saved + tl.maximum(k - 1, 0)) * M  # rows r0 of R and T (k > 0)
            t_top = t_ptr + (b * S + tl.maximum(k - 1, 0)) * M
            r_states = r_states_ptr + (b * S + k) * n_seg * 2 * BLOCK
            t_states = t_states_ptr + (b * S + k) * n_seg * 2 * BLOCK
            scr = scratch_ptr + (b * S + k) * 2 * (SEG + 2) * BLOCK
            tplane = (SEG + 2) * BLOCK
            t0 = T
            # (set by the first step; each its own tensor, as in soft_dtw_diag_bwd)
            rc = tl.full((BLOCK,), float("inf"), tl.float32)
            up = tl.full((BLOCK,), float("inf"), tl.float32)
            lf = tl.full((BLOCK,), float("inf"), tl.float32)
            dg = tl.full((BLOCK,), float("inf"), tl.float32)
            tu = tl.zeros((BLOCK,), tl.float32)
            td = tl.zeros((BLOCK,), tl.float32)
            tlf = tl.zeros((BLOCK,), tl.float32)
        else:
            cur = lane & (c >= 0) & (c < m)
            prv = lane & (c >= 1) & (c <= m)  # column c - 1 on the pair
            rc = tl.load(r_ptr + row + c, mask=cur, other=float("inf"))
            up = tl.load(r_ptr + above + c, mask=has_above & cur, other=float("inf"))
            lf = tl.load(r_ptr + row + c - 1, mask=prv, other=float("inf"))
            dg = tl.load(r_ptr + above + c - 1, mask=has_above & prv, other=float("inf"))
            tu = tl.load(t_ptr + above + c, mask=has_above & cur, other=0.0)
            td = tl.load(t_ptr + above + c - 1, mask=has_above & prv, other=0.0)
            tlf = tl.load(t_ptr + row + c - 1, mask=prv, other=0.0)
        seen = n * 0
        nb_e = tl.full((), 0.0, tl.float32)  # the strip below's hand-over at the bottom lane's column
        nb_d = tl.full((), 0.0, tl.float32)
        if below:
            seen = _wait(flag_in, 1, err_ptr)
            nb_e = tl.load(lower + m - 1, volatile=True)
            nb_d = tl.load(lower + plane + m - 1, volatile=True)
        ew_left = tl.zeros((BLOCK,), tl.float32)  # the lane's last step's pushes: left, diagonal
        dw_left = tl.zeros((BLOCK,), tl.float32)
        ew_diag = tl.zeros((BLOCK,), tl.float32)
        dw_diag = tl.zeros((BLOCK,), tl.float32)
        hand_e = tl.zeros((BLOCK,), tl.float32)  # for the lane above: up now + diagonal a step ago
        hand_d = tl.zeros((BLOCK,), tl.float32)
        hsum = tl.zeros((BLOCK,), tl.float32)
        g0, g1, g2, g3, g4, g5, g6, g7 = _eight_registers(BLOCK)  # d E of the last eight steps, the latest first
        unit = 1.0 if SEG > 0 else scale  # (R as read: scaled scratch, or as stored)
        tau = 0
        if SEG > 0:  # a step at a time: a segment's recompute starts at its last step
            while tau < T:
                t = T - 1 - tau
                c = t - offs
                inside = lane & (c >= 0) & (c < m)
                if (tau == 0) | ((t + 1) % SEG == 0):  # the segment's last step: recompute the segment
                    t0 = (t // SEG) * SEG
                    _recompute(scr, r_states + (t0 // SEG) * 2 * BLOCK, t_states + (t0 // SEG) * 2 * BLOCK, r_top,
                               t_top, cost_ptr + row, v_ptr + row, k, t0, t + 1, offs, lane, first, i, m, scale, mu,
                               nu, vg, band, SEG, BLOCK, GAMMA)
                    at = scr + (t - t0 + 2) * BLOCK + offs  # (step t's row)
                    rc, lf, up, dg = _from_segment(at, r_top, t, k, m, scale, offs, first, BLOCK)
                    tlf = tl.load(at + tplane - BLOCK)
                    tu = tl.where(first, _t_top(t_top, t, m, k), tl.load(at + tplane - BLOCK - 1, mask=offs > 0,
                                                                          other=0.0))
                    td = tl.where(first, _t_top(t_top, t - 1, m, k), tl.load(at + tplane - 2 * BLOCK - 1,
                                                                             mask=offs > 0, other=0.0))
                nxt = scr + (t - t0) * BLOCK + offs  # step t - 2's row: the next step's left and (a lane up) diagonal
                lf_n, dg_n = _ahead_in_segment(nxt, r_top, t, t0, k, m, scale, offs, first, BLOCK)
                more = offs * 0 + t > t0  # (the segment's first step: the next segment reloads)
                tlf_n = tl.load(nxt + tplane, mask=more, other=0.0)
                td_n = tl.where(first, _t_top(t_top, t - 2, m, k),
                                tl.load(nxt + tplane - BLOCK - 1, mask=more & (offs > 0), other=0.0))
                if below:
                    if tau + 2 > seen:
                        if tau + 1 < m:
                            seen = _wait(flag_in, tau + 2, err_ptr)
                nb_e_n = tl.load(lower + m - 2 - tau, mask=below & (tau + 1 < m), other=0.0, volatile=True)
                nb_d_n = tl.load(lower + plane + m - 2 - tau, mask=below & (tau + 1 < m), other=0.0, volatile=True)
                de, hand_e, hand_d, ew_diag, dw_diag, ew_left, dw_left, dh = _second(
                    rc, up, dg, lf, tu, td, tlf, nb_e, nb_d, hand_e, hand_d, ew_left, dw_left, ew_diag, dw_diag, c,
                    inside, bottom, i, n, m, mu_r, nu, unit, vg, inv_g, seed, idx_down, GAMMA)
                hsum += dh
                g0, g1, g2, g3, g4, g5, g6, g7 = _latest_first(de, g0, g1, g2, g3, g4, g5, g6)  # (column c)
                if t % 8 == 0:
                    _store8(out_ptr + row, c, g0, g1, g2, g3, g4, g5, g6, g7, lane, 0, tl.minimum(7, tau), m)
                _hand_over(mine, plane, c, hand_e, hand_d, inside & first & (offs * 0 + k > 0))
                rc, up, lf, dg, tu, td, tlf, nb_e, nb_d = lf, dg, lf_n, dg_n, td, td_n, tlf_n, nb_e_n, nb_d_n
                if k > 0:
                    _release(flag_out, tau - R + 2, m, HAND_OFF)  # (columns of the top row done, from the right)
                tau += 1
        else:  # rounds of HAND_OFF steps: one wait and one release, no branch in the steps
            while tau < T:
                if below:  # the columns of the strip below's hand-over that the round's steps read
                    seen = _round_wait(flag_in, tau + HAND_OFF + 1, m, seen, err_ptr)
                for u in tl.static_range(HAND_OFF):  # (steps past T: no lane inside; tau % 8 == u % 8)
                    t = T - 1 - tau
                    c = t - offs
                    inside = lane & (c >= 0) & (c < m)
                    cn = c - 2  # the next step's left column
                    on = (cn >= 0) & (cn < m)
                    lf_n = _load_still(r_ptr + row + cn, lane & on, float("inf"))
                    dg_n = _load_still(r_ptr + above + cn, has_above & on, float("inf"))
                    tlf_n = _load_still(t_ptr + row + cn, lane & on, 0.0)
                    td_n = _load_still(t_ptr + above + cn, has_above & on, 0.0)
                    cp = c - PREFETCH  # (the rows above: the lane above's own, prefetched there)
                    ahead_ok = lane & (cp >= 0) & (cp < m)
                    _prefetch(r_ptr + row + cp, ahead_ok)
                    _prefetch(t_ptr + row + cp, ahead_ok)
                    nb_e_n = tl.load(lower + m - 2 - tau, mask=below & (tau + 1 < m), other=0.0, volatile=True)
                    nb_d_n = tl.load(lower + plane + m - 2 - tau, mask=below & (tau + 1 < m), other=0.0,
                                     volatile=True)
                    de, hand_e, hand_d, ew_diag, dw_diag, ew_left, dw_left, dh = _second(
                        rc, up, dg, lf, tu, td, tlf, nb_e, nb_d, hand_e, hand_d, ew_left, dw_left, ew_diag, dw_diag,
                        c, inside, bottom, i, n, m, mu_r, nu, unit, vg, inv_g, seed, idx_down, GAMMA)
                    hsum += dh
                    g0, g1, g2, g3, g4, g5, g6, g7 = _latest_first(de, g0, g1, g2, g3, g4, g5, g6)  # (column c)
                    if u % 8 == 7:  # (the eight steps' columns c .. c + 7; steps past T: columns below 0)
                        _store8(out_ptr + row, c, g0, g1, g2, g3, g4, g5, g6, g7, lane, 0, 7, m)
                    _hand_over(mine, plane, c, hand_e, hand_d, inside & first & (offs * 0 + k > 0))
                    rc, up, lf, dg, tu, td, tlf, nb_e, nb_d = lf, dg, lf_n, dg_n, td, td_n, tlf_n, nb_e_n, nb_d_n
                    tau += 1
                if k > 0:  # columns m - done .. m - 1 of the strip's top row are handed over
                    _round_release(flag_out, tau - R + 1, m)
        tl.store(hg_ptr + b * S + k, tl.sum(hsum, 0))
        if k == 0:  # the pair's last strip to finish: every wait of the pair is behind it
            _poison_if_gave_up(err_ptr, out_ptr + b * N * M, hg_ptr + b * S)


def hvp(costs, gamma, n, m, band: int, v_costs, v_gamma, saved, mu, nu, grad, kept=None, checkpoint: int = 0,
        block: int | None = None, warps: int | None = None, gamma_terms: bool = True):
    """(grad * H v over the costs [B, N, M], over gamma [B], dV . v [B]) from R's full table ``saved``
    (checkpoint 0: strips of ``block`` rows; T is a full table too), or from its rows K, 2K, ...
    and what the forward kept for the backward's segments (``kept`` 4-D: strips of K rows; T
    keeps the same: its strips' last rows and the lanes' T before each segment); ``mu`` [B]:
    the forward's centring; ``nu`` [B]: T's (soft_dtw_hvp.hvp); ``gamma_terms`` False: v_gamma
    is zero and H v over gamma is not wanted (it comes back as zeros), so neither sweep spends a
    log2 a cell on gamma's entropy."""
    B, N, M = costs.shape
    hv = torch.zeros_like(costs)
    dot = costs.new_zeros(B)
    segments = checkpoint > 0
    blk = kept.shape[3] if segments else block or block_for(B, N, costs.device)
    H = checkpoint if segments else blk
    S = triton.cdiv(N, H)
    hg = costs.new_zeros(B, S)
    if B:
        seg = soft_dtw_diag.SEGMENT if segments else 0  # (the forward's: looked up at the call, which tests change)
        n_seg = kept.shape[2] // 2 if segments else 0
        T = costs.new_empty(B, S, M) if segments else torch.empty_like(costs)  # (cells written before read)
        t_states = costs.new_empty(B, S, 2 * n_seg, blk) if segments else T
        scratch = costs.new_empty(B * S, 2, seg + 2, blk) if segments else T
        # two sweeps' tickets and counters, and one error count: the second sweep poisons its
        # products where a tangent wait gave up too
        syncs = torch.zeros(2 * (1 + B * S) + 1, dtype=torch.int32, device=costs.device)
        tangent, second, err = syncs[:1 + B * S], syncs[1 + B * S:-1], syncs[-1:]
        gamma, v_gamma, v_costs = gamma.contiguous(), v_gamma.contiguous(), v_costs.contiguous()
        warps = warps or max(1, blk // 32)
        const = dict(BLOCK=blk, HAND_OFF=HAND_OFF, SEG=seg, GAMMA=bool(gamma_terms), num_warps=warps)
        _launch_tangent((B * S,), saved, costs, v_costs, v_gamma, gamma, mu, nu, n, m, T, t_states, dot, tangent, err,
                        N, M, B, S, H, saved.shape[1], n_seg, band, **const)
        bnd = costs.new_empty(2, B, S, M)
        _launch_second((B * S,), grad, saved, T, costs, v_costs, kept if segments else T, t_states, scratch, gamma, mu,
                       nu, v_gamma, n, m, hv, hg, bnd, second, err, N, M, B, S, H, saved.shape[1], n_seg, band, **const)
    return hv, hg.sum(1), dot


_launch_tangent = Launcher(soft_dtw_diag_tangent_kernel)
_launch_second = Launcher(soft_dtw_diag_hvp_backward_kernel)
settle_module(__name__)  # the same cache keys in every process (cache_keys.py)
