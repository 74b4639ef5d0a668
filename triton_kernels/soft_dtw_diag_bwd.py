"""Soft-DTW's backward sweep (Cuturi & Blondel's E) by anti-diagonals, from a full table of R.

The mirror of soft_dtw_diag's forward: lane l of a program holds row i = r0 + l + 1 of a
strip, and step tau runs the anti-diagonals from the last back to the first, column
c = T - 1 - tau - l in every lane. A cell's E is what its successors push back,

    E[i, c] = Ew_up(i + 1, c) + Ew_diag(i + 1, c + 1) + Ew_left(i, c + 1),  Ew_k(x) = E[x] w_k(x),

w_k(x) the softmin weights of x's predecessors (soft_dtw._softmax3, from R alone: no costs
are read). The lane below computed Ew_up(i + 1, c) on the last step and Ew_diag(i + 1, c + 1)
the step before, so it hands their sum over in one ``tl.gather``; Ew_left comes from the
lane's own last step. R of the cell and of its predecessors is loaded one step ahead (off
the chain), each lane's row prefetched into L2 PREFETCH columns ahead (the table is past L2
on long pairs: a load a step ahead waited on DRAM, benchmarks/NOTES.md session 38); a step
stores E (times the incoming gradient: it seeds E[n, m]) and no scratch.

With checkpoints (where soft_dtw._segments takes them) the strips are the forward's, K rows
(soft_dtw_diag, SEG > 0). What a strip needs of R is recomputed a segment of SEG
anti-diagonals at a time, from the last, into a scratch of its own ([SEG + 2, BLOCK], a step
a row: coalesced), from what the forward kept: the row above the strip (a checkpoint row)
and each lane's R at the two steps before the segment. The sweep then reads R there.

Strips run as a wavefront from the bottom up (tickets in that order): strip k's bottom lane
reads what strip k + 1's top lane hands over, through a boundary row per strip and a
progress counter released after every round of HAND_OFF steps, as in the forward (from a
full table; with checkpoints a step at a time, every HAND_OFF columns: a segment's
recompute starts where the segment does, not where a round would). A wait that gives up
poisons the pair's gradient with NaN.

Pure: imports only torch and triton.
"""

import torch
import triton
import triton.language as tl

from .cache_keys import settle_module
from .launch import Launcher
from .soft_align import PREFETCH, _eight_registers, _latest_first, _load_still, _prefetch, _store8, _store_own
from .soft_align_diag import block_for
from . import soft_dtw_diag
from .soft_dtw import _neg_entropy, _poison_if_gave_up, _softmax3, _wait
from .soft_dtw_diag import (HAND_OFF, _ahead_in_segment, _banded, _centred_cell, _costs_ahead, _from_segment, _lanes,
                            _release, _round_release, _round_wait, _segment_start, _shift, _top)


@triton.jit
def _recompute(scr, states, top, crow, k, t0, t1, offs, lane, first, i, m, scale, mu, band, BLOCK: tl.constexpr):
    """R (scaled, centred by mu) of the strip's steps t0 - 2 .. t1 - 1 into scr (step t in row
    t - t0 + 2): the forward's steps from the lanes' R at steps t0 - 2 and t0 - 1 (states;
    none before step 0) and the row above the strip (top)."""
    idx_up = tl.maximum(offs - 1, 0)
    tl.debug_barrier()  # (the sweep of the segment after this one has read scr)
    left, up, diag = _segment_start(scr, states, top, k, t0, offs, lane, first, m, scale, BLOCK)
    c = t0 - offs
    c_n = tl.load(crow + c, mask=lane & (c >= 0) & (c < m), other=0.0)
    top1 = _top(top, t0 + 1, m, scale, k)  # (lane 0's up of the next step: loads a step ahead, off the chain)
    t = t0
    while t < t1:
        c = t - offs
        live = lane & (c >= 0) & (c < m)
        cost = c_n
        c_n = _costs_ahead(crow, c, lane, m)
        top2 = _top(top, t + 2, m, scale, k)
        v, _ = _centred_cell(up, diag, left, cost, mu, scale)
        v = _banded(v, i, c, live, band)
        tl.store(scr + (t - t0 + 2) * BLOCK + offs, v)
        diag, left, up = _shift(v, up, top1, first, idx_up)
        top1 = top2
        t += 1
    tl.debug_barrier()  # (the sweep reads scr across lanes)


@triton.jit
def _adjoint(rc, up, dg, lf, nb, hand, ew_left, ew_diag, seed, c, inside, bottom, i, n, m, mu_r, unit, idx_down,
             NEED_GAMMA: tl.constexpr):
    """One step of the E sweep: the lanes' E at (i, c) from R there and at its three
    predecessors (rc, up, dg, lf; dg uncentred by mu_r here), the lane below's hand-over
    (bottom lane: nb, the strip below's) and the lane's own left term; then (E, the hand-over
    for the lane above, Ew_diag and Ew_left for the next step, E dV/dgamma's term or 0)."""
    e = tl.where(bottom, nb, tl.gather(hand, idx_down, 0)) + ew_left
    e = tl.where((i == n) & (c == m - 1), seed, e)
    e = tl.where(inside, e, 0.0)
    # (cell (1, 1)'s one predecessor, R[0, 0] = 0, is no cell: its weights push to no one, so inf does)
    ok, zu, zd, zl, l2, wu, wd, wl = _softmax3(rc, up, dg - mu_r, lf, inside, unit)
    dgam = tl.zeros_like(e)
    if NEED_GAMMA:
        dgam = e * _neg_entropy(wu, wd, wl, zu, zd, zl, l2)
    return e, e * wu + ew_diag, e * wd, e * wl, dgam


@triton.jit(do_not_specialize=["N", "M", "B", "S", "H", "n_saved", "n_seg", "band"])
def soft_dtw_diag_backward_kernel(grad_ptr, cost_ptr, gamma_ptr, mu_ptr, n_ptr, m_ptr, saved_ptr, states_ptr,
                                  scratch_ptr, out_ptr, gg_ptr, bnd_ptr, sync_ptr, err_ptr, N, M, B, S, H, n_saved,
                                  n_seg, band,
                                  NEED_GAMMA: tl.constexpr, BLOCK: tl.constexpr, HAND_OFF: tl.constexpr,
                                  SEG: tl.constexpr):
    """Program (k, b) from its ticket, strips from the last: rows kH + 1 .. kH + H (H <= BLOCK)
    of pair b. saved: R as stored, [B, N, M] (SEG = 0), or its rows H, 2H, ... ([B, n_saved,
    M]) with states ([B, S, 2 n_seg, BLOCK], soft_dtw_diag's) and scratch ([B S, SEG + 2,
    BLOCK]) for the recompute (SEG > 0; costs and band are read then only); out [B, N, M]:
    grad[b] * E; gg [B, S]: each strip's part of grad[b] * dV/dgamma; bnd [B, S, M]:
    Ew_up(r0 + 1, c) + Ew_diag(r0 + 1, c + 1) of each strip's top row, for the strip above;
    sync: the ticket counter, then a progress counter (columns done, from the right) per
    strip; err: waits that gave up."""
    tl.static_assert(HAND_OFF % 8 == 0)  # (a round's stores of the gradient go at its steps 7, 15, ...)
    ticket = tl.atomic_add(sync_ptr, 1)
    b = (ticket % B).to(tl.int64)
    k = S - 1 - ticket // B
    n = tl.load(n_ptr + b).to(tl.int32)
    m = tl.load(m_ptr + b).to(tl.int32)
    r0 = k * H
    if r0 < n:
        scale = 1.4426950408889634 / tl.load(gamma_ptr + b)
        mu = tl.load(mu_ptr + b)  # (R is centred: the forward's)
        mu_r = mu * scale if SEG > 0 else mu  # (in the units of R as read: scaled scratch, or as stored)
        seed = tl.load(grad_ptr + b)
        offs, R, lane, i, first, bottom = _lanes(n, r0, H, BLOCK)
        idx_down = tl.minimum(offs + 1, BLOCK - 1)
        below = r0 + R < n  # strip k + 1 hands its top row over
        lower = bnd_ptr + (b * S + k + 1) * M
        mine = bnd_ptr + (b * S + k) * M
        flag_in = sync_ptr + 1 + b * S + k + 1
        flag_out = sync_ptr + 1 + b * S + k
        orow = out_ptr + (b * N + i - 1).to(tl.int64) * M
        T = R + m - 1
        c = T - 1 - offs
        if SEG > 0:
            crow = cost_ptr + (b * N + i - 1).to(tl.int64) * M
            top = saved_ptr + (b * n_saved + tl.maximum(k - 1, 0)) * M  # row r0 (k > 0)
            states = states_ptr + (b * S + k) * n_seg * 2 * BLOCK
            scr = scratch_ptr + (b * S + k) * (SEG + 2) * BLOCK
            t0 = T
            # (set by the first step; each its own tensor: a Triton loop drops a carried variable
            # bound to another's initial value, benchmarks/NOTES.md session 22)
            rc = tl.full((BLOCK,), float("inf"), tl.float32)
            up = tl.full((BLOCK,), float("inf"), tl.float32)
            lf = tl.full((BLOCK,), float("inf"), tl.float32)
            dg = tl.full((BLOCK,), float("inf"), tl.float32)
        else:
            row = saved_ptr + (b * N + i - 1).to(tl.int64) * M  # R's row i, and row i - 1 (i > 1)
            above = saved_ptr + (b * N + tl.maximum(i - 2, 0)).to(tl.int64) * M
            has_above = lane & (i > 1)
            rc = tl.load(row + c, mask=lane & (c >= 0) & (c < m), other=float("inf"))
            up = tl.load(above + c, mask=has_above & (c >= 0) & (c < m), other=float("inf"))
            lf = tl.load(row + c - 1, mask=lane & (c >= 1) & (c <= m), other=float("inf"))
            dg = tl.load(above + c - 1, mask=has_above & (c >= 1) & (c <= m), other=float("inf"))
        seen = n * 0
        nb = tl.full((), 0.0, tl.float32)  # the strip below's hand-over at the bottom lane's column
        if below:
            seen = _wait(flag_in, 1, err_ptr)
            nb = tl.load(lower + m - 1, volatile=True)
        ew_left = tl.zeros((BLOCK,), tl.float32)  # Ew_left(i, c + 1), the lane's last step
        ew_diag = tl.zeros((BLOCK,), tl.float32)  # Ew_diag(i, c + 1)
        hand = tl.zeros((BLOCK,), tl.float32)  # Ew_up(i, c + 1) + Ew_diag(i, c + 2), for the lane above
        gsum = tl.zeros((BLOCK,), tl.float32)
        g0, g1, g2, g3, g4, g5, g6, g7 = _eight_registers(BLOCK)  # the gradient of the last 8 steps, latest first
        unit = 1.0 if SEG > 0 else scale  # (R as read: scaled scratch, or as stored)
        tau = 0
        if SEG > 0:  # a step at a time: a segment's recompute starts at its last step
            while tau < T:
                t = T - 1 - tau
                c = t - offs
                inside = lane & (c >= 0) & (c < m)
                if (tau == 0) | ((t + 1) % SEG == 0):  # the segment's last step: recompute the segment
                    t0 = (t // SEG) * SEG
                    _recompute(scr, states + (t0 // SEG) * 2 * BLOCK, top, crow, k, t0, t + 1, offs, lane, first, i,
                               m, scale, mu, band, BLOCK)
                    rc, lf, up, dg = _from_segment(scr + (t - t0 + 2) * BLOCK + offs, top, t, k, m, scale, offs,
                                                   first, BLOCK)
                # (step t - 2's row: the next step's left and, a lane up, diagonal)
                lf_n, dg_n = _ahead_in_segment(scr + (t - t0) * BLOCK + offs, top, t, t0, k, m, scale, offs, first,
                                               BLOCK)
                if below:
                    if tau + 2 > seen:
                        if tau + 1 < m:
                            seen = _wait(flag_in, tau + 2, err_ptr)
                nb_n = tl.load(lower + m - 2 - tau, mask=below & (tau + 1 < m), other=0.0, volatile=True)
                e, hand, ew_diag, ew_left, dgam = _adjoint(rc, up, dg, lf, nb, hand, ew_left, ew_diag, seed, c, inside,
                                                           bottom, i, n, m, mu_r, unit, idx_down, NEED_GAMMA)
                if NEED_GAMMA:
                    gsum += dgam
                g0, g1, g2, g3, g4, g5, g6, g7 = _latest_first(e, g0, g1, g2, g3, g4, g5, g6)  # (column c)
                if t % 8 == 0:
                    _store8(orow, c, g0, g1, g2, g3, g4, g5, g6, g7, lane, 0, tl.minimum(7, tau), m)
                _store_own(mine + c, hand, inside & first & (offs * 0 + k > 0))  # (the hand-over to strip k - 1)
                rc, up, lf, dg, nb = lf, dg, lf_n, dg_n, nb_n
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
                    lf_n = _load_still(row + cn, lane & (cn >= 0) & (cn < m), float("inf"))
                    dg_n = _load_still(above + cn, has_above & (cn >= 0) & (cn < m), float("inf"))
                    cp = c - PREFETCH  # (the row above: the lane above's own row, prefetched there)
                    _prefetch(row + cp, lane & (cp >= 0) & (cp < m))
                    nb_n = tl.load(lower + m - 2 - tau, mask=below & (tau + 1 < m), other=0.0, volatile=True)
                    e, hand, ew_diag, ew_left, dgam = _adjoint(rc, up, dg, lf, nb, hand, ew_left, ew_diag, seed, c,
                                                               inside, bottom, i, n, m, mu_r, unit, idx_down,
                                                               NEED_GAMMA)
                    if NEED_GAMMA:
                        gsum += dgam
                    g0, g1, g2, g3, g4, g5, g6, g7 = _latest_first(e, g0, g1, g2, g3, g4, g5, g6)  # (column c)
                    if u % 8 == 7:  # (the eight steps' columns c .. c + 7; steps past T: columns below 0)
                        _store8(orow, c, g0, g1, g2, g3, g4, g5, g6, g7, lane, 0, 7, m)
                    _store_own(mine + c, hand, inside & first & (offs * 0 + k > 0))  # (the hand-over to strip k - 1)
                    rc, up, lf, dg, nb = lf, dg, lf_n, dg_n, nb_n
                    tau += 1
                if k > 0:  # columns m - done .. m - 1 of the strip's top row are handed over
                    _round_release(flag_out, tau - R + 1, m)
        tl.store(gg_ptr + b * S + k, tl.sum(gsum, 0))
        if k == 0:  # the pair's last strip to finish: every wait of the pair is behind it
            _poison_if_gave_up(err_ptr, out_ptr + b * N * M, gg_ptr + b * S)


def backward(grad, costs, gamma, saved, kept, n, m, band: int, checkpoint: int, need_gamma: bool, mu,
             block: int | None = None, warps: int | None = None):
    """(grad * dV/dcosts [B, N, M], grad * dV/dgamma [B]) from R's full table ``saved``
    (checkpoint 0: strips of ``block`` rows), or from its rows K, 2K, ... and what the
    forward kept for the recompute (``kept``, soft_dtw_diag.segments_shape: strips of K
    rows); ``mu`` [B]: the forward's centring."""
    B, N, M = costs.shape
    out = torch.zeros_like(costs)
    segments = checkpoint > 0
    blk = kept.shape[3] if segments else block or block_for(B, N, costs.device)
    H = checkpoint if segments else blk
    S = triton.cdiv(N, H)
    gg = costs.new_zeros(B, S)
    if B:
        bnd = costs.new_empty(B, S, M)
        sync = torch.zeros(1 + B * S + 1, dtype=torch.int32, device=costs.device)
        seg = soft_dtw_diag.SEGMENT  # (the forward's: looked up at the call, which tests change)
        scratch = costs.new_empty(B * S, seg + 2, blk) if segments else gg
        _launch((B * S,), grad, costs, gamma.contiguous(), mu, n, m, saved, kept if segments else gg, scratch, out, gg,
                bnd, sync, sync[-1:], N, M, B, S, H, saved.shape[1], kept.shape[2] // 2 if segments else 0, band,
                NEED_GAMMA=bool(need_gamma), BLOCK=blk, HAND_OFF=HAND_OFF, SEG=seg if segments else 0,
                num_warps=warps or max(1, blk // 32))
    return out, gg.sum(1)


_launch = Launcher(soft_dtw_diag_backward_kernel)
settle_module(__name__)  # the same cache keys in every process (cache_keys.py)
