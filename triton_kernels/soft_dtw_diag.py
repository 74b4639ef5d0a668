"""Soft-DTW's forward sweep by anti-diagonals: no scan on the chain.

The row sweep (soft_dtw.py) spends each row on a prefix scan across the row and a round
trip of the row through memory; here lane l of a program holds row i = r0 + l + 1 of a strip
of up to BLOCK rows and step t computes column c = t - l (0-based) in every lane, so a step
is one anti-diagonal, one three-way softmin per cell:

    R[i, c] = cost[i - 1, c] + softmin(R[i - 1, c], R[i - 1, c - 1], R[i, c - 1])

up is the lane above's value of the last step (one ``tl.gather``, a shift by one lane),
diagonal its value of the step before, left the lane's own last value. Values are held in
units of gamma / ln 2 (x log2(e) / gamma) as in soft_dtw.py, so the softmin is one log2 of
three exp2. Strip k of pair b is a program of its own (a ticket, taken in order, picks
them), so a pair's strips run as a wavefront: strip k reads strip k - 1's last row from a
boundary array as it is written (a progress counter per strip, released after every round
of HAND_OFF steps, spin.wait_until on the other side, once a round; the rounds' steps have
no branch, so ptxas schedules across them); a wait only ever waits on a lower ticket, which
has started, and one that gives up makes the pair's value NaN, never a wrong number.

What the backward reads is stored as the row sweep stores it, so soft_dtw.backward takes
either forward's: R unscaled, [B, N, M] (K = 0) or rows K, 2K, ... (K > 0; none when K > N),
and with the backward's column stripes each stripe's last column (``kept``, [B, S, N + 1],
scaled). Where the backward runs by anti-diagonals too with checkpoints (soft_dtw._segments),
the strips are K rows instead and ``kept`` holds each lane's R at the two steps before every
segment of SEGMENT anti-diagonals (segments_shape), whence soft_dtw_diag_bwd recomputes a
strip a segment at a time. The row stores are strided across lanes (a lane per row): one
32-byte sector per cell in L2, which the step's latency covers while the GPU has room
(soft_dtw._by_diagonals).

Pure: imports only torch and triton.
"""

import os

import torch
import triton
import triton.language as tl

from .cache_keys import settle_module
from .launch import Launcher
from .soft_align import (PREFETCH, _eight_registers, _exp2, _latest_last, _load_still, _log2, _prefetch, _store8,
                         _store_own)
from .soft_align_diag import block_for
from .soft_dtw import _neg_entropy, _softmax3, _unscaled, _wait

# steps a round (between a strip's releases of its progress counter): soft_align_diag's; 8 under
# the interpreter, whose time goes by steps (a strip's last round runs its dead steps too)
HAND_OFF = 8 if os.environ.get("TRITON_INTERPRET") == "1" else 16
SEGMENT = 64  # steps (anti-diagonals of a strip) the checkpointed backward recomputes at a time


@triton.jit
def _cell(a, b, c, x):
    """x + softmin(a, b, c) in gamma / ln 2 units (+inf when a, b, c all are), rounded once at
    R's magnitude: the small terms x - log2(sum) first (min + x, then - log2, rounded twice:
    gradients 1.3-1.4x further from float64, measured on the H100)."""
    lo = tl.minimum(tl.minimum(a, b), c)
    fin = lo < float("inf")
    ms = tl.where(fin, lo, 0.0)
    tot = _exp2(ms - a) + _exp2(ms - b) + _exp2(ms - c)
    return tl.where(fin, ms + (x - _log2(tot)), float("inf"))


@triton.jit
def _centred_cell(up, diag, left, cost, mu, scale):
    """(R' of the lanes' cells, the diagonal term it used) in gamma / ln 2 units for a table
    centred by mu (soft_dtw.forward): R' = (cost - mu) + softmin(up, diagonal - mu, left)."""
    dgc = diag - mu * scale
    return _cell(up, dgc, left, (cost - mu) * scale), dgc


@triton.jit
def _shift(v, up, top, first, idx_up):
    """The next step's (diagonal, left, up) of each lane after it computed v: its up of this
    step, its own v, and the lane above's v (lane 0: ``top``, the row above the strip)."""
    return up, v, tl.where(first, top, tl.gather(v, idx_up, 0))


@triton.jit
def _lanes(n, r0, H, BLOCK: tl.constexpr):
    """A strip's lanes: (offs, rows R of the strip on the pair, lane < R, the lane's row i
    (1-based), lane 0, the strip's last lane)."""
    offs = tl.arange(0, BLOCK)
    R = tl.minimum(n - r0, H)
    return offs, R, offs < R, r0 + 1 + offs, offs == 0, offs == R - 1


@triton.jit
def _costs_ahead(crow, c, lane, m):
    """Each lane's cost of the next step (column c + 1 of its row), and an L2 prefetch of
    the column PREFETCH on."""
    cn = c + 1
    c_n = tl.load(crow + cn, mask=lane & (cn >= 0) & (cn < m), other=0.0)
    cp = c + PREFETCH
    _prefetch(crow + cp, lane & (cp >= 0) & (cp < m))
    return c_n


@triton.jit
def _banded(v, i, c, live, band):
    """v in the lanes' cells (row i, column c) that are on the pair (live) and inside the band; +inf elsewhere."""
    if band >= 0:
        v = tl.where(tl.abs(i - 1 - c) > band, float("inf"), v)
    return tl.where(live, v, float("inf"))


@triton.jit
def _top(top, c, m, scale, k):
    """R[r0, c] of the row above strip k (a checkpoint row, as stored), scaled; inf off the pair and at row 0."""
    return tl.load(top + c, mask=(k > 0) & (c >= 0) & (c < m), other=float("inf")) * scale


@triton.jit
def _segment_start(scr, states, top, k, t0, offs, lane, first, m, scale, BLOCK: tl.constexpr):
    """A recompute's start at step t0 of a strip: the lanes' R at steps t0 - 2 and t0 - 1
    (what the forward kept, ``states``; none before step 0) into the scratch's rows 0 and 1,
    and the step's (left, up, diagonal), lane 0's from the row above the strip (``top``)."""
    idx_up = tl.maximum(offs - 1, 0)
    kept = lane & (offs * 0 + t0 > 0)  # (a tensor: the interpreter's masks)
    v2 = tl.load(states + offs, mask=kept, other=float("inf"))
    v1 = tl.load(states + BLOCK + offs, mask=kept, other=float("inf"))
    tl.store(scr + offs, v2)
    tl.store(scr + BLOCK + offs, v1)
    up = tl.where(first, _top(top, t0, m, scale, k), tl.gather(v1, idx_up, 0))
    diag = tl.where(first, _top(top, t0 - 1, m, scale, k), tl.gather(v2, idx_up, 0))
    diag = tl.where(first & (k == 0) & (t0 == 0), 0.0, diag)  # R[0, -1] = 0
    return v1, up, diag


@triton.jit
def _from_segment(at, top, t, k, m, scale, offs, first, BLOCK: tl.constexpr):
    """The lanes' (R, left, up, diagonal) of step t from a recomputed segment's scratch (``at``:
    step t's row, a step a row, lanes in order); lane 0's up and diagonal from the row above."""
    rc = tl.load(at)
    lf = tl.load(at - BLOCK)
    up = tl.where(first, _top(top, t, m, scale, k), tl.load(at - BLOCK - 1, mask=offs > 0, other=0.0))
    dg = tl.where(first, _top(top, t - 1, m, scale, k), tl.load(at - 2 * BLOCK - 1, mask=offs > 0, other=0.0))
    return rc, lf, up, dg


@triton.jit
def _ahead_in_segment(nxt, top, t, t0, k, m, scale, offs, first, BLOCK: tl.constexpr):
    """The next step's (left, diagonal) from the scratch's row of step t - 2 (``nxt``): +inf at
    the segment's first step t0, whose next step the next segment's recompute reloads."""
    more = offs * 0 + t > t0  # (a tensor: the interpreter's masks)
    lf_n = tl.load(nxt, mask=more, other=float("inf"))
    dg_n = tl.where(first, _top(top, t - 2, m, scale, k),
                    tl.load(nxt - BLOCK - 1, mask=more & (offs > 0), other=float("inf")))
    return lf_n, dg_n


@triton.jit
def _release(flag, done, m, HAND_OFF: tl.constexpr):
    """A strip's progress counter: ``done`` columns of its hand-over row, released every
    HAND_OFF columns and at the last."""
    if (done > 0) & ((done % HAND_OFF == 0) | (done == m)):
        tl.debug_barrier()  # (the hand-over row's lane may be another thread's: its stores first)
        tl.atomic_xchg(flag, done, sem="release")


@triton.jit
def _round_wait(flag, target, m, seen, err):
    """Before a round of steps: wait once for ``target`` (at most m) columns of the hand-over row
    at ``flag`` where fewer were seen; what was seen after."""
    target = tl.minimum(target, m)
    if target > seen:
        seen = _wait(flag, target, err)
    return seen


@triton.jit
def _round_release(flag, done, m):
    """After a round of steps: ``done`` (at most m) columns of the hand-over row are written."""
    done = tl.minimum(done, m)
    if done > 0:
        tl.debug_barrier()  # (the hand-over row's lane may be another thread's: its stores first)
        tl.atomic_xchg(flag, done, sem="release")


@triton.jit(do_not_specialize=["N", "M", "B", "S", "n_saved", "band", "K", "W", "S_kept", "H", "n_seg"])
def soft_dtw_diag_kernel(cost_ptr, gamma_ptr, mu_ptr, n_ptr, m_ptr, value_ptr, saved_ptr, kept_ptr, bnd_ptr, sync_ptr,
                         err_ptr, N, M, B, S, n_saved, band, K, W, S_kept, H, n_seg, BLOCK: tl.constexpr,
                         HAND_OFF: tl.constexpr, SEG: tl.constexpr, STRIPES: tl.constexpr):
    """Program (k, b) from its ticket: rows kH + 1 .. kH + H (H <= BLOCK) of pair b. saved:
    R (as stored, unscaled) of every row (K = 0) or of rows K, 2K, ... ([B, n_saved, M]);
    kept (STRIPES, S_kept > 0): R[:, (s + 1) W - 1] of stripes s whose last column is not the pair's,
    [B, S_kept, N + 1], scaled; or (SEG > 0, strips of H = K rows) the lanes' R at steps
    sSEG - 2 and sSEG - 1 of each segment s >= 1 of SEG steps, [B, S, n_seg, 2, BLOCK],
    scaled, whence soft_dtw_diag_bwd recomputes a segment; bnd [B, S, M]: each strip's last
    row, scaled, for the strip below; sync: the ticket counter, then a progress counter
    (columns done) per strip; err: waits that gave up. value[b] = R[n, m] from the strip
    that holds row n. R is centred by mu[b] everywhere but in the value (soft_dtw.forward)."""
    tl.static_assert(HAND_OFF % 8 == 0)  # (a round's stores of R go at its steps 7, 15, ...)
    ticket = tl.atomic_add(sync_ptr, 1)
    b = (ticket % B).to(tl.int64)
    k = ticket // B
    n = tl.load(n_ptr + b).to(tl.int32)
    m = tl.load(m_ptr + b).to(tl.int32)
    scale = 1.4426950408889634 / tl.load(gamma_ptr + b)
    mu = tl.load(mu_ptr + b)
    r0 = k * H
    if r0 < n:
        offs, R, lane, i, first, bottom = _lanes(n, r0, H, BLOCK)
        idx_up = tl.maximum(offs - 1, 0)
        publish = r0 + R < n  # a strip below reads this one's last row
        above = bnd_ptr + (b * S + k - 1) * M  # strip k - 1's last row (k > 0), scaled
        flag_in = sync_ptr + 1 + b * S + k - 1
        seen = n * 0
        crow = cost_ptr + (b * N + i - 1).to(tl.int64) * M  # the lane's row of costs
        srow = saved_ptr + (b * n_saved + tl.where(K > 0, i // tl.maximum(K, 1) - 1, i - 1)).to(tl.int64) * M
        keep = (i * 0 + K == 0) | (i % tl.maximum(K, 1) == 0)  # (tensors: the interpreter's masks)
        krow = kept_ptr + b * S_kept * (N + 1) + i
        # lane 0's up at steps 0 and 1: row r0 (row 0: R[0, c] = inf for c >= 0)
        if k > 0:
            seen = _wait(flag_in, tl.minimum(2, m), err_ptr)
            up0 = tl.load(above, volatile=True)
            top = tl.load(above + 1, mask=m > 1, other=float("inf"), volatile=True)
        else:
            up0 = tl.full((), float("inf"), tl.float32)
            top = tl.full((), float("inf"), tl.float32)
        up = tl.where(first, up0, float("inf"))
        diag = tl.where(first & (k == 0), 0.0, float("inf"))  # R[r0, -1]: 0 at row 0 only
        left = tl.full((BLOCK,), float("inf"), tl.float32)
        c_n = tl.load(crow, mask=lane & first, other=0.0)  # the costs of the next step
        # R as stored: v * gamma ln 2, not soft_dtw's correctly rounded division (~25 % of the
        # forward's time at 64 x 512, measured): here no value goes through memory on the chain, so
        # one rounding more per stored cell stays one rounding (rel 1e-7)
        unit = 0.6931471805599453 * tl.load(gamma_ptr + b)
        fin = tl.zeros((BLOCK,), tl.float32)  # R[n, m - 1] in its lane
        saves = tl.max((lane & keep).to(tl.int32), 0) > 0  # (no grad: K = N + 1, no row saved, no stores)
        h0, h1, h2, h3, h4, h5, h6, h7 = _eight_registers(BLOCK)  # R (as stored) of the last 8 steps, latest last
        wide = tl.where(band >= 0, band, N + M)  # (no band: one wider than any pair)
        t = 0
        T = R + m - 1
        while t < T:  # HAND_OFF steps a round: one wait and one release, no branch in the steps
            if k > 0:  # the columns of the row above that the round's steps read
                seen = _round_wait(flag_in, t + HAND_OFF + 2, m, seen, err_ptr)
            for u in tl.static_range(HAND_OFF):  # (steps past T: no live lane; t % 8 == u % 8)
                c = t - offs
                live = lane & (c >= 0) & (c < m)
                cost = c_n
                c_n = _load_still(crow + c + 1, lane & (c + 1 >= 0) & (c + 1 < m), 0.0)
                _prefetch(crow + c + PREFETCH, lane & (c + PREFETCH >= 0) & (c + PREFETCH < m))
                top_n = tl.load(above + t + 2, mask=(k > 0) & (t + 2 < m), other=float("inf"), volatile=True)
                v, _ = _centred_cell(up, diag, left, cost, mu, scale)
                v = tl.where(live & (tl.abs(i - 1 - c) <= wide), v, float("inf"))  # (_banded without its branch)
                h0, h1, h2, h3, h4, h5, h6, h7 = _latest_last(h1, h2, h3, h4, h5, h6, h7, v * unit)  # (column c)
                if u % 8 == 7:
                    if saves:  # (steps past T store nothing: their columns are m or more)
                        _store8(srow, c - 7, h0, h1, h2, h3, h4, h5, h6, h7, lane & keep, 0, 7, m)
                if STRIPES:
                    _store_own(krow + (c // W) * (N + 1), v, live & ((c + 1) % W == 0) & (c < m - 1))
                if SEG > 0:
                    ahead = offs * 0 + t + 2  # (a tensor: the interpreter's masks)
                    slot = ahead % SEG
                    _store_own(kept_ptr + (((b * S + k) * n_seg + ahead // SEG) * 2 + slot) * BLOCK + offs, v,
                               (slot < 2) & (ahead >= SEG) & (ahead < T + 2))  # (not past the strip's steps)
                fin = tl.where(live & (i == n) & (c == m - 1), v, fin)
                _store_own(above + M + c, v, live & bottom & (offs * 0 + r0 + R < n))  # (publish, as a tensor)
                diag, left, up = _shift(v, up, top, first, idx_up)
                top = top_n
                t += 1
            if publish:  # (the strip's last row: columns 0 .. t - R written)
                _round_release(flag_in + 1, t - R + 1, m)
        if r0 + R == n:
            v = tl.sum(tl.where(i == n, fin, 0.0), 0)
            bad = tl.load(err_ptr, volatile=True) != 0
            tl.store(value_ptr + b, tl.where(bad, float("nan"), _unscaled(v, scale) + mu * (n + m)))


@triton.jit(do_not_specialize=["N", "M", "band", "clear"])
def soft_dtw_centre_kernel(cost_ptr, v_ptr, vg_ptr, gamma_ptr, n_ptr, m_ptr, out_ptr, N, M, band, clear,
                           SIDE: tl.constexpr, TANGENT: tl.constexpr):
    """Program b: out[b] = mu = R[n0, m0] / (n0 + m0) of pair b's leading block, its n x m
    scaled to SIDE a side (n0 = ceil(n SIDE / max(n, m)), at most n), by the forward's
    recurrence (plain, unscaled); 0 where that is not finite. One program holds the block (a
    lane a row). TANGENT: out[b] = nu = dV . v / (n0 + m0) instead, the block's growth of
    the tangents T = dR . v along (v, v_g) (their recurrence beside R's), taken only where
    the drift is clear: |dV . v| over ``clear`` times rms(v) sqrt(n0 + m0), more than a v of
    random signs would give (sqrt(sum (E v)^2) ~ rms(v) sqrt(sum E^2), sum E^2 <= n0 + m0)."""
    b = tl.program_id(0).to(tl.int64)
    n = tl.load(n_ptr + b).to(tl.int32)
    m = tl.load(m_ptr + b).to(tl.int32)
    side = tl.maximum(tl.maximum(n, m), 1)
    n0 = tl.minimum(n, (n * SIDE + side - 1) // side)
    m0 = tl.minimum(m, (m * SIDE + side - 1) // side)
    scale = 1.4426950408889634 / tl.load(gamma_ptr + b)
    offs, _, lane, i, first, _ = _lanes(n0, 0, SIDE, SIDE)
    idx_up = tl.maximum(offs - 1, 0)
    crow = cost_ptr + (b * N + offs).to(tl.int64) * M
    up = tl.full((SIDE,), float("inf"), tl.float32)
    diag = tl.where(first, 0.0, float("inf"))  # R[0, 0] = 0 for cell (1, 1)
    left = tl.full((SIDE,), float("inf"), tl.float32)
    fin = tl.zeros((SIDE,), tl.float32)
    c_n = tl.load(crow, mask=lane & first, other=0.0)
    vrow = v_ptr + (b * N + offs).to(tl.int64) * M  # (TANGENT: v and T as the costs and R)
    vg = tl.load(vg_ptr + b)
    v_n = tl.zeros((SIDE,), tl.float32)
    if TANGENT:
        v_n = tl.load(vrow, mask=lane & first, other=0.0)
    t_up = tl.zeros((SIDE,), tl.float32)  # T of the cells above, diagonal and left (borders: 0)
    t_dg = tl.zeros((SIDE,), tl.float32)
    t_lf = tl.zeros((SIDE,), tl.float32)
    squares = tl.zeros((SIDE,), tl.float32)
    t = 0
    while t < n0 + m0 - 1:
        c = t - offs
        live = lane & (c >= 0) & (c < m0)
        x = c_n * scale
        c_n = _costs_ahead(crow, c, lane, m0)
        v = _banded(_cell(up, diag, left, x), i, c, live, band)
        if TANGENT:
            vc = v_n
            v_n = _costs_ahead(vrow, c, lane, m0)
            ok, zu, zd, zl, l2, wu, wd, wl = _softmax3(v, up, diag, left, live, 1.0)
            tc = tl.where(ok, vc + wu * t_up + wd * t_dg + wl * t_lf + vg * _neg_entropy(wu, wd, wl, zu, zd, zl, l2),
                          0.0)
            squares += tl.where(live, vc * vc, 0.0)
            fin = tl.where(live & (i == n0) & (c == m0 - 1), tc, fin)
            t_dg, t_lf, t_up = _shift(tc, t_up, 0.0, first, idx_up)
        else:
            fin = tl.where(live & (i == n0) & (c == m0 - 1), v, fin)
        diag, left, up = _shift(v, up, float("inf"), first, idx_up)
        t += 1
    span = (n0 + m0).to(tl.float32)
    out = tl.sum(tl.where(i == n0, fin, 0.0), 0)
    if TANGENT:
        noise = tl.sqrt(tl.sum(squares, 0) / tl.maximum(n0 * m0, 1).to(tl.float32) * span)
        out = tl.where(tl.abs(out) > clear * noise, out / span, 0.0)
    else:
        out = out / scale / span
    tl.store(out_ptr + b, tl.where(tl.abs(out) < float("inf"), out, 0.0))  # (NaN fails the test too)


def centre(costs, gamma, n, m, band: int, side: int, v_costs=None, v_gamma=None, clear: float = 0.0):
    """mu [B] for the ops' centring (torchalign.ops.soft_dtw.centre), or with ``v_costs``,
    ``v_gamma`` nu [B], the tangents' (``clear``: the drift rule's factor): one launch, one
    program a pair."""
    out = costs.new_empty(costs.shape[0])
    if out.numel():
        B, N, M = costs.shape
        tangent = v_costs is not None
        v, vg = (v_costs.contiguous(), v_gamma.contiguous()) if tangent else (costs, gamma)
        _launch_centre((B,), costs, v, vg, gamma.contiguous(), n, m, out, N, M, band, float(clear), SIDE=side,
                       TANGENT=tangent, num_warps=max(1, side // 32))
    return out


def segments_shape(B: int, N: int, M: int, checkpoint: int):
    """What the forward keeps for soft_dtw_diag_bwd's recompute: strips of K = checkpoint rows,
    each lane's R at the two steps before each segment of SEGMENT steps, [B, S, 2 n_seg, BLOCK]."""
    segments = triton.cdiv(checkpoint + M - 1, SEGMENT)
    return B, triton.cdiv(N, checkpoint), 2 * segments, triton.next_power_of_2(checkpoint)


def forward(costs, gamma, n, m, band: int, checkpoint: int, kept, mu, block: int | None = None,
            warps: int | None = None, stripe: int | None = None):
    """(value [B], saved) as soft_dtw.forward's (centred by ``mu`` [B]), into ``kept``: [B, S,
    N + 1] with the backward's column stripes of width ``stripe``; 4-D (segments_shape) for
    the backward by anti-diagonals, the strips then of ``checkpoint`` rows; else [B, 0, N + 1]."""
    B, N, M = costs.shape
    full = checkpoint == 0
    saved = costs.new_empty(B, N if full else N // checkpoint, M)
    value = costs.new_empty(B)
    if B:
        segments = kept.dim() == 4
        blk = kept.shape[3] if segments else block or block_for(B, N, costs.device)
        H = checkpoint if segments else blk
        S = triton.cdiv(N, H)
        bnd = costs.new_empty(B, S, M)
        sync = torch.zeros(1 + B * S + 1, dtype=torch.int32, device=costs.device)
        W = stripe if kept.shape[1] and not segments else M
        _launch((B * S,), costs, gamma.contiguous(), mu, n, m, value, saved if saved.numel() else value,
                kept if kept.numel() else value, bnd, sync, sync[-1:], N, M, B, S, saved.shape[1], band, checkpoint,
                W, 0 if segments else kept.shape[1], H, kept.shape[2] // 2 if segments else 0, BLOCK=blk,
                HAND_OFF=HAND_OFF, SEG=SEGMENT if segments else 0,
                STRIPES=bool(kept.shape[1]) and not segments, num_warps=warps or max(1, blk // 32))
    return value, saved


_launch = Launcher(soft_dtw_diag_kernel)
_launch_centre = Launcher(soft_dtw_centre_kernel)
settle_module(__name__)  # the same cache keys in every process (cache_keys.py)
