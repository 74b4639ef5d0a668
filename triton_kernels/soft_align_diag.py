"""Soft alignment with linear gaps, one state, by anti-diagonals: forward and backward sweeps.

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
are contiguous across lanes. Backward: adjoints Q from the last step to the first; a
cell's Q is the sum of the flows from its successors (right: the lane's own last step;
down and down-right: the lane below's last two steps, shifted up by ``tl.gather``);
flows into row 0 and into a strip's top row are handed over through a buffer.

Pure: imports only torch and triton.
"""

import torch
import triton
import triton.language as tl

from .cache_keys import settle_module
from .soft_align import NEG, _lse2, _lse3, _p
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
    if r0 == 0:
        out = tl.full((), 1, tl.int64)
    else:
        out = _slot_step(j + BLOCK - 1, BLOCK, m)
    return out


@triton.jit
def _top_slot(r0, j, m, BLOCK: tl.constexpr):
    """The slot of cell (r0, j): row 0, or the last row of the full strip above."""
    if r0 == 0:
        out = j.to(tl.int64)
    else:
        out = _slot(j + BLOCK - 1, BLOCK - 1, r0 - BLOCK, BLOCK, m)
    return out


@triton.jit
def _wait(flag, target, seen):
    """spin.wait_until once ``target`` passes what was ``seen``; GAVE_UP stays GAVE_UP."""
    if (target > seen) & (seen != GAVE_UP):
        seen = wait_until(flag, target)
    return seen


@triton.jit(do_not_specialize=['s_b', 's_i', 'MODE', 'tab_b', 'B', 'S'])
def soft_align_diag_fwd_kernel(s_ptr, s_b, s_i, g_ptr, q_ptr, t_ptr, tab_ptr, tab_b, part_ptr, sync_ptr, B, S,
                               MODE, BLOCK: tl.constexpr, HAND_OFF: tl.constexpr):
    """Program (k, b) from its ticket: strip k of pair b (rows kB + 1 .. kB + B) into the
    table; part[b, k]: the strip's share of the value (MODE 0 global, 1 local, 2
    semiglobal), combined by the caller. Strip k reads strip k - 1's last row as it is
    written (its progress counter, sync[2 + b S + k - 1]: columns done)."""
    ticket = tl.atomic_add(sync_ptr, 1)
    b = (ticket % B).to(tl.int64)
    k = ticket // B
    n = tl.load(q_ptr + b).to(tl.int32)
    m = tl.load(t_ptr + b).to(tl.int32)
    g = tl.load(g_ptr + b)
    sp = s_ptr + b * s_b
    tab = tab_ptr + b * tab_b
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
                v0 = tl.zeros((BLOCK,), tl.float32)
            else:
                v0 = tl.full((BLOCK,), NEG, tl.float32)
            tl.store(tab + j, v0, mask=j <= m)
            j0 += BLOCK
        tl.debug_barrier()
        seen = m + 1
    acc = tl.full((BLOCK,), NEG, tl.float32)  # local / semiglobal: the end terms, per lane
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
        ts += _top_step(r0, 0, m, BLOCK)
        top = tl.load(tab + ts, mask=1 <= m, other=NEG, cache_modifier=".cg")  # lane 0's up at the next step
        ts += _top_step(r0, 1, m, BLOCK)
        diag = tl.full((BLOCK,), NEG, tl.float32)
        left = tl.full((BLOCK,), NEG, tl.float32)
        ds = _slot(0, 0, r0, R, m)  # slot of lane 0 at step t (the others follow it)
        s_c = tl.zeros((BLOCK,), tl.float32)  # the scores of steps t and t + 1 (step 0 has no column >= 1)
        s_n = tl.load(srow, mask=lane & (offs == 0) & (offs + m >= 1), other=0.0)
        t = 0
        T = R + m
        while t < T:  # loads two steps ahead: a score row's next sector comes from DRAM
            j = t - offs
            live = lane & (j >= 0) & (j <= m)
            s = s_c
            s_c = s_n
            jn = j + 2
            s_n = tl.load(srow + jn - 1, mask=lane & (jn >= 1) & (jn <= m), other=0.0)
            if t + 2 <= m:
                seen = _wait(flag_in, t + 3, seen)
            top_n = tl.load(tab + ts, mask=t + 2 <= m, other=NEG, cache_modifier=".cg")
            ts += _top_step(r0, t + 2, m, BLOCK)
            if MODE == 1:
                dterm = s + _lse2(tl.zeros_like(diag), diag)
            else:
                dterm = s + diag
            dterm = tl.where(j >= 1, dterm, NEG)
            v = tl.where(live, _lse3(dterm, up - g, left - g), NEG)
            tl.store(tab + ds + offs, v, mask=live)
            ds += _slot_step(t, R, m)
            if MODE == 1:
                acc = _lse2(acc, tl.where(live & (j >= 1), dterm, NEG))
            elif MODE == 2:
                acc = _lse2(acc, tl.where(live & last_row, _lse2(dterm, up - g), NEG))
            diag = up
            left = v
            up = tl.where(offs == 0, top, tl.gather(v, idx_up, 0))  # (a barrier: the row's stores are done)
            top = top_n
            if publish:
                done = t - R + 2  # columns of the last row written
                if (done > 0) & ((done % HAND_OFF == 0) | (done == m + 1)):
                    tl.atomic_xchg(flag_out, done, sem="release")
            t += 1
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
                value = tl.zeros_like(value)
    if (k > 0) & (r0 >= n):
        value = tl.full((), NEG, tl.float32)  # no rows here (n == 0 is strip 0's)
    if seen == GAVE_UP:
        value = tl.full((), float("nan"), tl.float32)  # a wait gave up: never a wrong value
    tl.store(part_ptr + b * S + k, value)


@triton.jit
def _bwd_loads(tab, q1, q2, tq, srow, f_in, u, offs, lane, bottom, m):
    """What step u of the backward sweep reads besides V and Vu (the step before's): V at
    (i, j - 1) and (i - 1, j - 1), the score s[i, j], and in the strip's last lane the flows
    from the strip below. q1, q2: the slots of lane 0 at steps u - 1, u - 2; tq: (r0, u - 1)."""
    j = u - offs
    nxt = lane & (j >= 1) & (j <= m + 1)  # column j - 1 exists (also the next step's V and Vu)
    Vl = tl.load(tab + q1 + offs, mask=nxt, other=NEG)
    Vd = tl.load(tab + tl.where(offs == 0, tq, q2 + offs - 1), mask=nxt, other=NEG)
    s = tl.load(srow + j - 1, mask=lane & (j >= 1) & (j <= m), other=0.0)
    below = tl.load(f_in + j, mask=bottom & (j >= 0) & (j <= m), other=0.0, cache_modifier=".cg")
    below += tl.load(f_in + (m + 1) + j, mask=bottom & (j >= 0) & (j < m), other=0.0, cache_modifier=".cg")
    return Vl, Vd, s, below


@triton.jit(do_not_specialize=['s_b', 's_i', 'MODE', 'tab_b', 'f_b', 'B', 'S'])
def soft_align_diag_bwd_kernel(s_ptr, s_b, s_i, g_ptr, q_ptr, t_ptr, tab_ptr, tab_b, value_ptr, grad_ptr,
                               gs_ptr, dg_ptr, f_ptr, f_b, sync_ptr, B, S, MODE, BLOCK: tl.constexpr,
                               HAND_OFF: tl.constexpr):
    """Program (k, b) from its ticket (the last strips first): the adjoints Q = d value / d V
    of strip k of pair b from its last anti-diagonal to its first; gs[i - 1, j - 1] = the
    adjoint of the aligned-pair term (the expected alignment times grad), dg[b, k] = - grad
    times the strip's expected number of gap positions. Flows into the strip's top row go
    to f[b, k] (two rows: down, down-right), which strip k - 1 reads as they are written
    (progress counter sync[2 + b S + k]: columns done from the right)."""
    ticket = tl.atomic_add(sync_ptr, 1)
    b = (ticket % B).to(tl.int64)
    k = S - 1 - ticket // B
    n = tl.load(q_ptr + b).to(tl.int32)
    m = tl.load(t_ptr + b).to(tl.int32)
    g = tl.load(g_ptr + b)
    value = tl.load(value_ptr + b)
    gout = tl.load(grad_ptr + b)
    sp = s_ptr + b * s_b
    gp = gs_ptr + b * s_b
    tab = tab_ptr + b * tab_b
    offs = tl.arange(0, BLOCK)
    idx_dn = tl.minimum(offs + 1, BLOCK - 1)
    gaps = tl.zeros((BLOCK,), tl.float32)  # the flow through gap edges, per lane
    vv = tl.zeros((BLOCK,), tl.float32) + value
    flag_out = sync_ptr + 2 + b * S + k
    flag_in = flag_out + 1
    seen = 0
    r0 = k * BLOCK
    if r0 < n:
        R = tl.minimum(n - r0, BLOCK)
        below_too = r0 + R < n  # a strip below hands its flows up
        lane = offs < R
        i = r0 + 1 + offs
        last_row = i == n
        bottom = (offs == R - 1) & (i < n)  # the strip's last lane takes flows from the strip below
        f_out = f_ptr + b * f_b + k.to(tl.int64) * 2 * (m + 1)
        f_in = f_out + 2 * (m + 1)
        srow = sp + (r0 + offs).to(tl.int64) * s_i
        grow = gp + (r0 + offs).to(tl.int64) * s_i
        f_left = tl.zeros((BLOCK,), tl.float32)  # from (i, j + 1), this lane's last step
        f_down = tl.zeros((BLOCK,), tl.float32)  # from (i + 1, j), the lane below's last step
        f_dr1 = tl.zeros((BLOCK,), tl.float32)  # from (i + 1, j + 1): shifted last step, used next step
        f_dr = tl.zeros((BLOCK,), tl.float32)
        t = R + m - 1
        top = offs == 0
        q1 = _slot(t - 1, 0, r0, R, m)  # slots of lane 0 at steps u - 1 and u - 2 (the others follow it)
        q2 = q1 - _slot_step(t - 2, R, m)
        tq = _top_slot(r0, t - 1, m, BLOCK)  # slot of (r0, u - 1)
        j = t - offs
        live = lane & (j >= 0) & (j <= m)
        V = tl.load(tab + _slot(t, 0, r0, R, m) + offs, mask=live, other=NEG)  # (i, j)
        Vu = tl.load(tab + tl.where(top, tq + _top_step(r0, t - 1, m, BLOCK), q1 + offs - 1), mask=live,
                     other=NEG)  # (i - 1, j)
        if below_too:
            seen = _wait(flag_in, tl.minimum(m + 1, m + R - t), seen)
        Vl, Vd, s, below = _bwd_loads(tab, q1, q2, tq, srow, f_in, t, offs, lane, bottom, m)
        while t >= 0:  # V and Vu carried from the step before; the next step's loads issued first
            q1 = q2
            q2 -= _slot_step(t - 3, R, m)
            tq -= _top_step(r0, t - 2, m, BLOCK)
            if below_too & (t - R >= 0):  # the flows into the last row at column t - R
                seen = _wait(flag_in, tl.minimum(m + 1, m + 1 - (t - R)), seen)
            Vl_n, Vd_n, s_n, below_n = _bwd_loads(tab, q1, q2, tq, srow, f_in, t - 1, offs, lane, bottom, m)
            j = t - offs
            live = lane & (j >= 0) & (j <= m)
            has_l = live & (j >= 1)
            ld = Vd  # what the aligned-pair term adds to s: Vd, or local's lse(0, Vd)
            if MODE == 1:
                ld = _lse2(tl.zeros_like(Vd), Vd)
            dterm = tl.where(has_l, s + ld, NEG)
            uterm = tl.where(live, Vu - g, NEG)
            lterm = tl.where(has_l, Vl - g, NEG)
            pd = _p(dterm, V)
            pu = _p(uterm, V)
            pl = _p(lterm, V)
            tot = pd + pu + pl
            tot = tl.where(tot > 0, tot, 1.0)
            pd = pd / tot
            pu = pu / tot
            pl = pl / tot
            q = f_left + f_down + f_dr + below
            if MODE == 0:
                q += tl.where(live & last_row & (j == m), gout, 0.0)
            qd = q * pd  # the adjoint of the aligned-pair term
            qu = q * pu
            if MODE == 1:
                qd += tl.where(has_l, gout * _p(dterm, vv), 0.0)  # the end edge from M
            elif MODE == 2:
                e_node = _lse2(dterm, uterm)
                e = tl.where(live & last_row, gout * _p(e_node, vv), 0.0)
                qd += e * _p(dterm, e_node)
                qu += e * _p(uterm, e_node)
            qd = tl.where(live, qd, 0.0)
            qu = tl.where(live, qu, 0.0)
            ql = tl.where(live, q * pl, 0.0)
            tl.store(grow + j - 1, qd, mask=has_l)
            if MODE == 1:
                fd = qd * _p(Vd, ld)  # the part of lse(0, Vd) that came from Vd
            else:
                fd = qd
            gaps += qu + ql
            if MODE == 0:  # flows into row 0 travel j gap positions along it
                if r0 == 0:
                    gaps += tl.where(top & live, j.to(tl.float32) * qu + (j - 1).to(tl.float32) * fd, 0.0)
            tl.store(f_out + j, qu, mask=top & live)
            tl.store(f_out + (m + 1) + j - 1, fd, mask=top & has_l)
            f_left = ql
            f_dr = f_dr1
            f_down = tl.gather(qu, idx_dn, 0)
            f_dr1 = tl.gather(fd, idx_dn, 0)
            f_down = tl.where(offs == BLOCK - 1, 0.0, f_down)
            f_dr1 = tl.where(offs == BLOCK - 1, 0.0, f_dr1)
            if r0 > 0:  # (after the gathers' barrier) columns t .. m of f_out are complete
                done = m + 1 - t
                if (done > 0) & ((done % HAND_OFF == 0) | (t == 0)):
                    tl.atomic_xchg(flag_out, done, sem="release")
            V = Vl
            Vu = Vd
            Vl = Vl_n
            Vd = Vd_n
            s = s_n
            below = below_n
            t -= 1
        if seen == GAVE_UP:  # a wait gave up: this strip's gradient is NaN, never wrong
            jj = 0
            while jj < m:
                tl.store(grow + jj, float("nan"), mask=lane)
                jj += 1
    dg = -tl.sum(gaps, 0)
    if MODE == 0:
        if (n == 0) & (k == 0):  # the value is row 0's: m gap positions
            dg = -gout * m.to(tl.float32)
    if seen == GAVE_UP:
        dg = float("nan")
    tl.store(dg_ptr + b * S + k, dg)


HAND_OFF = 8  # a strip publishes its progress every HAND_OFF columns


def block_for(N: int) -> int:
    """Rows per strip (and program): 128 (four warps) past 32 rows. Strips of a pair run as a
    wavefront on several SMs (a strip's steps are R + m whatever BLOCK is); 32 or 64 rows,
    and one or two warps, measured within 15% (benchmarks/NOTES.md)."""
    return 32 if N <= 32 else 128


def _warps(block: int) -> int:
    return max(1, min(32, block // 32))


def forward(scores, gap, q_lens, t_lens, mode: int, block=None, warps=None, hand_off=HAND_OFF):
    """(value [B], table [B, N + 1, 1, M + 1]) for linear gaps of one value per pair ``gap`` [B]."""
    s = scores.float().contiguous()
    B, N, M = s.shape
    table = torch.empty((B, N + 1, 1, M + 1), dtype=torch.float32, device=s.device)
    if not B:
        return s.new_empty(0), table
    blk = block or block_for(N)
    S = max(1, triton.cdiv(N, blk))
    part = s.new_empty(B, S)
    sync = torch.zeros(2 + B * S, dtype=torch.int32, device=s.device)
    soft_align_diag_fwd_kernel[(B * S,)](s, N * M, M, gap.float().contiguous(), q_lens, t_lens, table,
                                         table[0].numel(), part, sync, B, S, mode, BLOCK=blk,
                                         HAND_OFF=hand_off, num_warps=warps or _warps(blk))
    value = torch.logsumexp(part, 1)
    return (torch.logaddexp(value, torch.zeros_like(value)) if mode == 1 else value), table  # local: + the empty one


def backward(scores, gap, q_lens, t_lens, table, value, grad, mode: int, block=None, warps=None, hand_off=HAND_OFF):
    """(d scores [B, N, M], d gap [B]) times grad."""
    s = scores.float().contiguous()
    B, N, M = s.shape
    gs = torch.zeros((B, N, M), dtype=torch.float32, device=s.device)
    if not B:
        return gs, s.new_empty(0)
    blk = block or block_for(N)
    S = max(1, triton.cdiv(N, blk))
    dg = s.new_empty(B, S)
    flows = s.new_empty(B, S, 2, M + 1)
    sync = torch.zeros(2 + B * S, dtype=torch.int32, device=s.device)
    soft_align_diag_bwd_kernel[(B * S,)](s, N * M, M, gap.float().contiguous(), q_lens, t_lens, table,
                                         table[0].numel(), value.float().contiguous(), grad.float().contiguous(),
                                         gs, dg, flows, flows[0].numel(), sync, B, S, mode, BLOCK=blk,
                                         HAND_OFF=hand_off, num_warps=warps or _warps(blk))
    return gs, dg.sum(1)


settle_module(__name__)  # the same cache keys in every process (cache_keys.py)
