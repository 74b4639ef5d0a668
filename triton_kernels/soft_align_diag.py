"""Soft alignment with linear gaps, one state, by anti-diagonals: the forward sweep.

One state (with open = extend the three Gotoh states collapse: V = lse(M, X, Y)):
    V[i, j] = lse(s[i, j] + V[i-1, j-1], V[i-1, j] - g, V[i, j-1] - g)
    (local: s[i, j] + lse(0, V[i-1, j-1]) in place of the first term).
Lane l of a program holds row i = r0 + l + 1 of a strip of up to BLOCK rows; step t
computes column j = t - l in every lane, so a step is one anti-diagonal. A cell's up and
diagonal terms are the lane above's values of the last two steps: one ``tl.gather`` (a
shift by one lane) per step carries them across; the left term is the lane's own last
value. Row 0 and, for later strips, the strip above's last row are read from the table.
Each strip is a program of its own (its ticket, taken in order, picks the pair and the
strip), so a pair's strips run as a wavefront over several SMs: strip k reads strip k - 1's
last row as it is written (a progress counter per strip, released every HAND_OFF columns,
spin.wait_until on the other side), and the backward hands its flows up the same way. A
wait only ever waits on a lower ticket, which has started; one that gives up turns the
pair's value or gradient into NaN, never a wrong number.
Every cell is one log-sum-exp of its three in-edges, so the backward sweep recomputes each
node's three edge probabilities from the stored values and normalises them per node
(a row scan's separately rounded values do not sum to one over long gap runs:
benchmarks/NOTES.md).

The table: V of every cell, (n + 1)(m + 1) float32 per pair. Row 0 at slots 0..m, then
each strip's cells in anti-diagonal order (``_diag_base``), so a step's loads and stores
are contiguous across lanes. The backward sweep and the Hessian-vector product:
soft_align_diag_bwd.py. With TANGENT set, the forward kernel is the product's forward
half (the values' directional derivatives dV along z, into a second table of the same
slots).

Pure: imports only torch and triton.
"""

import functools

import torch
import triton
import triton.language as tl

from .cache_keys import settle_module
from .launch import Launcher
from .soft_align import NEG, PREFETCH, _exp, _load_still, _log, _lse2, _p, _prefetch, _rcp, _store_own
from .spin import GAVE_UP, wait_until


@triton.jit
def _diag_base(t, R, m):
    """Slots before step t of a strip of R rows and columns 0..m (int64): the cells of
    the anti-diagonals 0..t-1, (t(t+1)/2 while the strip fills, R per step after) minus
    those past column m."""
    t = (m * 0 + t).to(tl.int64)  # (t may be a Python int)
    s1 = tl.where(t <= R, t * (t + 1) // 2, R * (R + 1) // 2 + (t - R) * R)
    u = tl.maximum(t - m - 1, 0)
    return s1 - u * (u + 1) // 2


@triton.jit
def _slot(t, l, r0, R, m):
    """The slot of lane l at step t of the strip of R rows below row r0."""
    return (r0 + 1).to(tl.int64) * (m + 1) + _diag_base(t, R, m) + l - tl.maximum(t - m, 0)


@triton.jit
def _slot_step(u, R, m):
    """_slot(u + 1, l) - _slot(u, l): the cells of step u, less one once the strip passes column m."""
    return (tl.minimum(u, R - 1) - tl.maximum(u - m, 0) + 1 - (u >= m).to(tl.int32)).to(tl.int64)


@triton.jit
def _top_step(r0, j, m, BLOCK: tl.constexpr):
    """_top_slot(r0, j + 1) - _top_slot(r0, j)."""
    return tl.where(r0 == 0, 1, _slot_step(j + BLOCK - 1, BLOCK, m))  # (no branch in a step)


@triton.jit
def _top_slot(r0, j, m, BLOCK: tl.constexpr):
    """The slot of cell (r0, j): row 0, or the last row of the full strip above."""
    if r0 == 0:
        out = j.to(tl.int64)
    else:
        out = _slot(j + BLOCK - 1, BLOCK - 1, r0 - BLOCK, BLOCK, m)
    return out


@triton.jit
def _lse3_p(a, b, c):
    """_lse3(a, b, c) (the same arithmetic) and each term's share exp(x - lse) from the same
    exps: the edge probabilities of a node, normalised (0 where all three are -inf)."""
    mx = tl.maximum(tl.maximum(a, b), c)
    ms = tl.where(mx == NEG, 0.0, mx)
    ea = _exp(a - ms)
    eb = _exp(b - ms)
    ec = _exp(c - ms)
    tot = ea + eb + ec
    r = _rcp(tl.where(tot > 0, tot, 1.0))
    return tl.where(mx == NEG, NEG, ms + _log(tot)), ea * r, eb * r, ec * r


@triton.jit
def _finish(share, part_ptr, count_ptr, out_ptr, b, k, S, how, BLOCK: tl.constexpr, den=0.0, den_ptr=None,
            empty=0.0):
    """Store strip k's share of pair b's result; the pair's last strip to finish writes
    out[b]: the shares' sum (how 0), their log-sum-exp (1), or that with one more term
    ``empty`` (2: local's empty alignment), or the shares' sum over the sum of the ``den`` shares
    (3, den_ptr: a weighted mean). A NaN share (a wait gave up) makes out[b] NaN. (One
    combine in the kernel, not a chain of small torch launches after it.)"""
    tl.store(part_ptr + b * S + k, share)
    if how == 3:
        tl.store(den_ptr + b * S + k, den)
    tl.debug_barrier()
    if tl.atomic_add(count_ptr + b, 1, sem="acq_rel") == S - 1:  # the others' shares precede their release
        offs = tl.arange(0, BLOCK)
        mx = tl.where(how == 2, empty, NEG)
        acc = tl.where(how == 2, 1.0, 0.0)  # a sum, or the sum of exp(share - mx)
        total = tl.full((), 0.0, tl.float32)  # (how 3: the den shares' sum)
        bad = 0
        c0 = 0
        while c0 < S:
            c = c0 + offs
            x = tl.load(part_ptr + b * S + c, mask=c < S, other=0.0, cache_modifier=".cg")
            bad += tl.sum((x != x).to(tl.int32), 0)
            if how == 0:
                acc += tl.sum(x, 0)
            elif how == 3:
                acc += tl.sum(x, 0)
                total += tl.sum(tl.load(den_ptr + b * S + c, mask=c < S, other=0.0, cache_modifier=".cg"), 0)
            else:
                x = tl.where(c < S, x, NEG)
                m2 = tl.maximum(mx, tl.max(x, 0))
                ms = tl.where(m2 == NEG, 0.0, m2)
                acc = acc * tl.exp(mx - ms) + tl.sum(tl.exp(x - ms), 0)
                mx = m2
            c0 += BLOCK
        out = acc
        if how == 3:
            out = acc / tl.where(total > 0, total, 1.0)
        elif how != 0:
            out = tl.where(mx == NEG, NEG, mx + tl.log(acc))
        if bad > 0:
            out = float("nan")
        tl.store(out_ptr + b, out)


@triton.jit
def _wait(flag, target, seen):
    """spin.wait_until once ``target`` passes what was ``seen``; GAVE_UP stays GAVE_UP."""
    if (target > seen) & (seen != GAVE_UP):
        seen = wait_until(flag, target)
    return seen


@triton.jit(do_not_specialize=['s_b', 's_i', 'shifted', 'tab_b', 'B', 'S'])
def soft_align_diag_fwd_kernel(s_ptr, s_b, s_i, g_ptr, c_ptr, dc_ptr, shifted, q_ptr, t_ptr, tab_ptr, tab_b, part_ptr,
                               out_ptr, sync_ptr, B, S, zs_ptr, zg_ptr, dtab_ptr, value_ptr, MODE: tl.constexpr,
                               BLOCK: tl.constexpr, HAND_OFF: tl.constexpr, TANGENT: tl.constexpr):
    """Program (k, b) from its ticket: strip k of pair b (rows kB + 1 .. kB + B) into the
    table; part[b, k]: the strip's share of the value (MODE 0 global, 1 local, 2
    semiglobal), which the pair's last strip to finish combines into out[b]. Strip k
    reads strip k - 1's last row as it is written (its progress counter,
    sync[2 + b S + k - 1]: columns done; sync[2 + B S + b]: the pair's strips finished).
    TANGENT: the forward half of the Hessian-vector product instead. V is recomputed (the
    table, forward()'s, is only read: the row above a strip), and the directional
    derivatives dV along z (scores zs, gap zg [B]) go to dtab (the table's slots): dV =
    sum over in-edges of p (d term), the edge probabilities p normalised per node;
    part[b, k]: the strip's share of d value (value [B]: the pair's value), summed into
    out[b]. shifted: the scores are read less 2 c[b] and g_ptr holds g + c[b] (the table
    then holds V - c (i + j), the same edge probabilities with smaller numbers, and out[b]
    the value less c (n + m): torchalign.soft_align's centring; local's starts and
    semiglobal's row 0 lose c (i + j) of their cell, every end c (n + m - i - j)); with
    TANGENT also zs less 2 dc[b] (the caller passes zg + dc[b]: the tangents' centring,
    dV - dc (i + j))."""
    ticket = tl.atomic_add(sync_ptr, 1)
    b = (ticket % B).to(tl.int64)
    k = ticket // B
    n = tl.load(q_ptr + b).to(tl.int32)
    m = tl.load(t_ptr + b).to(tl.int32)
    g = tl.load(g_ptr + b)
    centre = tl.load(c_ptr + b, mask=shifted != 0, other=0.0)  # (the values held as V - centre (i + j))
    sh2 = 2.0 * centre
    nm = (n + m).to(tl.float32)  # (the value is held less centre nm: an end at (i, j) less centre (nm - i - j))
    sp = s_ptr + b * s_b
    tab = tab_ptr + b * tab_b
    zg = 0.0
    if TANGENT:
        zg = tl.load(zg_ptr + b)
        dcentre = tl.load(dc_ptr + b, mask=shifted != 0, other=0.0)  # (the tangents as dV - dcentre (i + j))
        dsh2 = 2.0 * dcentre
        zsp = zs_ptr + b * s_b
        dtab = dtab_ptr + b * tab_b
        vtot = tl.zeros((BLOCK,), tl.float32) + tl.load(value_ptr + b)
    offs = tl.arange(0, BLOCK)
    flag_in = sync_ptr + 2 + b * S + k - 1
    flag_out = flag_in + 1
    seen = 0
    if k == 0:  # row 0: global charges leading gaps; semiglobal starts anywhere (0); local has none
        j0 = 0
        while j0 <= m:
            j = j0 + offs
            if MODE == 0:
                v0 = -j.to(tl.float32) * g
            elif MODE == 2:
                v0 = -j.to(tl.float32) * centre  # (0 less the centring's c j)
            else:
                v0 = tl.full((BLOCK,), NEG, tl.float32)
            if TANGENT:  # d of row 0: global's -j g, semiglobal's -dc j, local's none
                d0 = tl.where(MODE == 0, zg, tl.where(MODE == 2, dcentre, 0.0))
                tl.store(dtab + j, -j.to(tl.float32) * d0, mask=j <= m)
            else:
                tl.store(tab + j, v0, mask=j <= m)
            j0 += BLOCK
        tl.debug_barrier()
        seen = m + 1
    acc = tl.full((BLOCK,), NEG, tl.float32)  # local / semiglobal: the end terms, per lane
    dacc = tl.zeros((BLOCK,), tl.float32)  # TANGENT: the end terms' share of d value, per lane
    dden = tl.zeros((BLOCK,), tl.float32)  # and of their probabilities (local, semiglobal: see below)
    idx_up = tl.maximum(offs - 1, 0)
    r0 = k * BLOCK
    if r0 < n:
        R = tl.minimum(n - r0, BLOCK)
        publish = r0 + R < n  # a strip below reads this one's last row
        lane = offs < R
        last_row = (r0 + 1 + offs) == n
        srow = sp + (r0 + offs).to(tl.int64) * s_i  # row i - 1 of the scores, per lane
        ts = _top_slot(r0, r0 * 0, m, BLOCK)  # slot of (r0, t + 2), moved along each step
        seen = _wait(flag_in, tl.minimum(2, m + 1), seen)
        # V[i - 1, j] at this step (lane 0: the row above, read past L1: another program writes it)
        up = tl.where(offs == 0, tl.load(tab + ts, cache_modifier=".cg"), NEG)
        top = tl.load(tab + ts + _top_step(r0, 0, m, BLOCK), mask=1 <= m, other=NEG,
                      cache_modifier=".cg")  # lane 0's up at the next step
        diag = tl.full((BLOCK,), NEG, tl.float32)
        left = tl.full((BLOCK,), NEG, tl.float32)
        s_c = tl.zeros((BLOCK,), tl.float32)  # the scores of steps t and t + 1 (step 0 has no column >= 1)
        s_n = tl.load(srow, mask=lane & (offs == 0) & (offs + m >= 1), other=0.0) - sh2
        dup = tl.zeros((BLOCK,), tl.float32)  # TANGENT: the same for dV and the direction zs
        dtop = tl.zeros((), tl.float32)
        ddiag = tl.zeros((BLOCK,), tl.float32)
        dleft = tl.zeros((BLOCK,), tl.float32)
        zs_c = tl.zeros((BLOCK,), tl.float32)
        zs_n = tl.zeros((BLOCK,), tl.float32)
        if TANGENT:
            zrow = zsp + (r0 + offs).to(tl.int64) * s_i
            dup = tl.where(offs == 0, tl.load(dtab + ts, cache_modifier=".cg"), 0.0)
            dtop = tl.load(dtab + ts + _top_step(r0, 0, m, BLOCK), mask=1 <= m, other=0.0, cache_modifier=".cg")
            zs_n = tl.load(zrow, mask=lane & (offs == 0) & (offs + m >= 1), other=0.0) - dsh2
        ts += _top_step(r0, 0, m, BLOCK) + _top_step(r0, 1, m, BLOCK)
        ds = _slot(0, 0, r0, R, m)  # slot of lane 0 at step t (the others follow it)
        t = 0
        T = R + m
        while t < T:  # HAND_OFF steps a round: one wait and one release, no branch in the steps
            if t + 2 <= m:  # the columns of the row above that the round's steps read
                seen = _wait(flag_in, tl.minimum(t + HAND_OFF + 2, m + 1), seen)
            for _ in tl.static_range(HAND_OFF):  # (steps past T are masked out: no live lane)
                j = t - offs
                live = lane & (j >= 0) & (j <= m)
                s = s_c
                s_c = s_n
                jn = j + 2
                s_n = _load_still(srow + jn - 1, lane & (jn >= 1) & (jn <= m), 0.0) - sh2
                jp = j + PREFETCH
                _prefetch(srow + jp - 1, lane & (jp >= 1) & (jp <= m))
                top_n = tl.load(tab + ts, mask=t + 2 <= m, other=NEG, cache_modifier=".cg")
                span = (r0 + 1 + offs + j).to(tl.float32)  # i + j of the lanes' cells (the centring's unit)
                if MODE == 1:
                    start = (2.0 - span) * centre  # a start here: 0 less the centring's c (i + j - 2)
                    ld = _lse2(start, diag)
                else:
                    ld = diag
                dterm = tl.where(j >= 1, s + ld, NEG)
                v, pd, pu, pl = _lse3_p(dterm, up - g, left - g)
                v = tl.where(live, v, NEG)
                if TANGENT:
                    zs = zs_c
                    zs_c = zs_n
                    zs_n = _load_still(zrow + jn - 1, lane & (jn >= 1) & (jn <= m), 0.0) - dsh2
                    _prefetch(zrow + jp - 1, lane & (jp >= 1) & (jp <= m))
                    dtop_n = tl.load(dtab + ts, mask=t + 2 <= m, other=0.0, cache_modifier=".cg")
                    if MODE == 1:  # d lse(start, V_diag) = sigma d V_diag + (1 - sigma) d start
                        dd = zs + _p(diag, ld) * ddiag + _p(start, ld) * ((2.0 - span) * dcentre)
                    else:
                        dd = zs + ddiag
                    du = dup - zg
                    dl = dleft - zg
                    dv = tl.where(live, pd * dd + pu * du + pl * dl, 0.0)
                    _store_own(dtab + ds + offs, dv, live)
                    if MODE == 0:
                        dacc += tl.where(live & last_row & (j == m), dv, 0.0)
                    elif MODE == 1:  # (each end less centre (n + m - i - j), its tangent less dcentre (n + m - i - j))
                        pe = tl.where(live & (j >= 1), _p(dterm + (span - nm) * centre, vtot), 0.0)
                        dacc += pe * (dd + (span - nm) * dcentre)
                        dden += pe
                    else:
                        pe = tl.where(live & last_row, _p(dterm + (span - nm) * centre, vtot), 0.0)
                        pu_e = tl.where(live & last_row, _p(up - g + (span - nm) * centre, vtot), 0.0)
                        dacc += pe * (dd + (span - nm) * dcentre) + pu_e * (du + (span - nm) * dcentre)
                        dden += pe + pu_e
                else:
                    _store_own(tab + ds + offs, v, live)
                    if MODE == 1:  # (each end less centre (n + m - i - j): the value is held less centre (n + m))
                        acc = _lse2(acc, tl.where(live & (j >= 1), dterm + (span - nm) * centre, NEG))
                    elif MODE == 2:
                        acc = _lse2(acc, tl.where(live & last_row, _lse2(dterm, up - g) + (span - nm) * centre, NEG))
                ts += _top_step(r0, t + 2, m, BLOCK)
                ds += _slot_step(t, R, m)
                diag = up
                left = v
                if TANGENT:  # (the gathers' barrier: the step's stores are done)
                    ddiag = dup
                    dleft = dv
                    dup = tl.where(offs == 0, dtop, tl.gather(dv, idx_up, 0))
                    dtop = dtop_n
                up = tl.where(offs == 0, top, tl.gather(v, idx_up, 0))
                top = top_n
                t += 1
            if publish:  # columns 0 .. done - 1 of the strip's last row are written
                done = tl.minimum(t - R + 1, m + 1)
                if done > 0:
                    tl.atomic_xchg(flag_out, done, sem="release")
        tl.debug_barrier()
    last = (r0 < n) & (n <= r0 + BLOCK)
    if MODE == 0:
        if n == 0:
            value = tl.load(tab + m)
        elif last:
            value = tl.load(tab + _slot(m + n - 1 - r0, n - 1 - r0, r0, n - r0, m))
        else:
            value = tl.full((), NEG, tl.float32)
    else:
        mx = tl.max(acc, 0)
        tot = tl.sum(_p(acc, tl.zeros_like(acc) + mx), 0)
        value = tl.where(mx == NEG, NEG, mx + tl.log(tot))
        if MODE == 2:
            if n == 0:
                value = -nm * centre  # (the one alignment, score 0, less centre (n + m))
    if (k > 0) & (r0 >= n):
        value = tl.full((), NEG, tl.float32)  # no rows here (n == 0 is strip 0's)
    how = 2 if MODE == 1 else 1  # log-sum-exp of the shares (local: and the empty alignment's)
    empty = -nm * centre  # local's empty alignment, score 0, less centre (n + m)
    den = 0.0
    if TANGENT:  # the share of d value: sums, not log-sums
        value = tl.sum(dacc, 0)
        if (MODE == 0) & (n == 0) & (k == 0):  # the value is row 0's
            value = -m.to(tl.float32) * zg
        how = 0
        if MODE != 0:  # d value = sum p dV / sum p over the ends: p = exp(V - value) sums to 1 only
            how = 3  # to the rounding of V and value (~n + m), which times |dV| would stay in dp = p (dV - d value)
            den = tl.sum(dden, 0)
            if (MODE == 1) & (k == 0):  # local's empty alignment, its tangent 0 less dcentre (n + m)
                p_empty = tl.max(_p(empty + tl.zeros_like(vtot), vtot), 0)
                den += p_empty
                value += p_empty * (-nm * dcentre)
            if (MODE == 2) & (n == 0) & (k == 0):  # (the one alignment, row 0's)
                value = -nm * dcentre
                den = 1.0
    if seen == GAVE_UP:
        value = tl.full((), float("nan"), tl.float32)  # a wait gave up: never a wrong value
    _finish(value, part_ptr, sync_ptr + 2 + B * S, out_ptr, b, k, S, how, BLOCK, den, part_ptr + B * S, empty)


# a strip publishes its progress every HAND_OFF columns, after a round of HAND_OFF steps without
# a branch: fewer releases (a fence each) and polls than 8, a few steps more lag per strip (the
# backward's own: soft_align_diag_bwd)
HAND_OFF = 16


@functools.lru_cache
def _sms(device: torch.device) -> int:
    """The device's SMs; an H100's 132 for CPU tensors (the interpreter, recorded launches)."""
    return torch.cuda.get_device_properties(device).multi_processor_count if device.type == "cuda" else 132


def block_for(B: int, N: int, device: torch.device) -> int:
    """Rows per strip (and program): 32 (one warp) up to 32 rows; 256 (eight warps) for pairs of
    129..1,024 rows whose 256-row strips number at least 3/4 of the SMs (the same warps per
    scheduler as 128-row strips, half the hand-offs and their lag); else 128 (four warps).
    The forward and backward sweeps must agree: the table's slots follow the strips. Measured on
    the H100 (benchmarks/NOTES.md, session 23): 256 gained 2-13 % where the rule takes it, and
    lost up to 11 % on long pairs (the backward) and on batches too small to fill the SMs."""
    if N <= 32:
        return 32
    return 256 if 128 < N <= 1024 and B * triton.cdiv(N, 256) >= 0.75 * _sms(device) else 128


def _warps(block: int) -> int:
    return max(1, min(32, block // 32))


def f32(t):
    """t as contiguous float32, itself where it is (no dispatch: each torch call is host time
    on a soft sweep's critical path at small sizes, benchmarks/NOTES.md session 35)."""
    return (t if t.dtype == torch.float32 else t.float()).contiguous()


def forward(scores, gap, q_lens, t_lens, mode: int, block=None, warps=None, hand_off=HAND_OFF, shift=None):
    """(value [B], table [B, N + 1, 1, M + 1]) for linear gaps of one value per pair ``gap`` [B]
    (or [B, 1, 1], read as [B]); ``shift`` c [B]: the scores are read less 2 c (the caller
    passes gap + c as ``gap``)."""
    s = f32(scores)
    B, N, M = s.shape
    table = torch.empty((B, N + 1, 1, M + 1), dtype=torch.float32, device=s.device)
    if not B:
        return s.new_empty(0), table
    return _sweep_forward(s, gap, q_lens, t_lens, table, mode, block, warps, hand_off, shift=shift), table


def _gap_args(gap, shift, tangent_shift):
    """The kernels' (g_ptr, c_ptr, dc_ptr, shifted) from the per-pair gap and centrings (an
    absent centring passes a tensor the kernel does not read)."""
    gap = f32(gap)
    c = gap if shift is None else f32(shift)
    dc = c if tangent_shift is None else f32(tangent_shift)
    return gap, c, dc, int(shift is not None)


def _sweep_forward(s, gap, q_lens, t_lens, table, mode, block, warps, hand_off, tangent=None, shift=None,
                   tangent_shift=None):
    """The forward kernel: the value [B]; ``tangent``: (zs, zg, dtable, value): d value [B]
    (``tangent_shift`` dc [B], with ``shift`` only: zs is read less 2 dc)."""
    B, N, M = s.shape
    blk = block or block_for(B, N, s.device)
    S = max(1, triton.cdiv(N, blk))
    part = s.new_empty(2 if tangent else 1, B, S)  # (the tangent's: the ends' weights too)
    out = s.new_empty(B)
    sync = torch.zeros(2 + B * S + B, dtype=torch.int32, device=s.device)
    zs, zg, dtab, value = tangent or (s, gap, table, part)
    _launch_fwd((B * S,), s, N * M, M, *_gap_args(gap, shift, tangent_shift), q_lens, t_lens, table,
                table.stride(0), part, out, sync, B, S, zs, zg, dtab, value, mode,
                BLOCK=blk, HAND_OFF=hand_off, TANGENT=tangent is not None,
                num_warps=warps or _warps(blk))
    return out


_launch_fwd = Launcher(soft_align_diag_fwd_kernel)
settle_module(__name__)  # the same cache keys in every process (cache_keys.py)
