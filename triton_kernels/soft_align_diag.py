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

The Hessian-vector product (hvp) runs the same two kernels with a constexpr set: TANGENT
(the forward sweep of the values' directional derivatives dV along z, into a second table
of the same slots) and HVP (the backward sweep carrying the adjoints' derivatives dQ
beside Q, dQ_from = sum over out-edges of dQ_to p + Q_to dp, dp = p (d term - dV_to)):
Mensch & Blondel 2018, Algorithms 2 and 3.

Pure: imports only torch and triton.
"""

import torch
import triton
import triton.language as tl

from .cache_keys import settle_module
from .soft_align import NEG, _lse2, _p
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
def _lse3_p(a, b, c):
    """_lse3(a, b, c) (the same arithmetic) and each term's share exp(x - lse) from the same
    exps: the edge probabilities of a node, normalised (0 where all three are -inf)."""
    mx = tl.maximum(tl.maximum(a, b), c)
    ms = tl.where(mx == NEG, 0.0, mx)
    ea = tl.exp(a - ms)
    eb = tl.exp(b - ms)
    ec = tl.exp(c - ms)
    tot = ea + eb + ec
    r = 1.0 / tl.where(tot > 0, tot, 1.0)
    return tl.where(mx == NEG, NEG, ms + tl.log(tot)), ea * r, eb * r, ec * r


@triton.jit
def _wait(flag, target, seen):
    """spin.wait_until once ``target`` passes what was ``seen``; GAVE_UP stays GAVE_UP."""
    if (target > seen) & (seen != GAVE_UP):
        seen = wait_until(flag, target)
    return seen


@triton.jit(do_not_specialize=['s_b', 's_i', 'MODE', 'tab_b', 'B', 'S'])
def soft_align_diag_fwd_kernel(s_ptr, s_b, s_i, g_ptr, q_ptr, t_ptr, tab_ptr, tab_b, part_ptr, sync_ptr, B, S,
                               zs_ptr, zg_ptr, dtab_ptr, value_ptr, MODE, BLOCK: tl.constexpr,
                               HAND_OFF: tl.constexpr, TANGENT: tl.constexpr):
    """Program (k, b) from its ticket: strip k of pair b (rows kB + 1 .. kB + B) into the
    table; part[b, k]: the strip's share of the value (MODE 0 global, 1 local, 2
    semiglobal), combined by the caller. Strip k reads strip k - 1's last row as it is
    written (its progress counter, sync[2 + b S + k - 1]: columns done).
    TANGENT: the forward half of the Hessian-vector product instead. V is recomputed (the
    table, forward()'s, is only read: the row above a strip), and the directional
    derivatives dV along z (scores zs, gap zg [B]) go to dtab (the table's slots): dV =
    sum over in-edges of p (d term), the edge probabilities p normalised per node;
    part[b, k]: the strip's share of d value (value [B]: the pair's value), summed by the
    caller."""
    ticket = tl.atomic_add(sync_ptr, 1)
    b = (ticket % B).to(tl.int64)
    k = ticket // B
    n = tl.load(q_ptr + b).to(tl.int32)
    m = tl.load(t_ptr + b).to(tl.int32)
    g = tl.load(g_ptr + b)
    sp = s_ptr + b * s_b
    tab = tab_ptr + b * tab_b
    zg = 0.0
    if TANGENT:
        zg = tl.load(zg_ptr + b)
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
                v0 = tl.zeros((BLOCK,), tl.float32)
            else:
                v0 = tl.full((BLOCK,), NEG, tl.float32)
            if TANGENT:  # d of row 0: global's -j g, the others constant
                tl.store(dtab + j, tl.where(MODE == 0, -j.to(tl.float32) * zg, 0.0), mask=j <= m)
            else:
                tl.store(tab + j, v0, mask=j <= m)
            j0 += BLOCK
        tl.debug_barrier()
        seen = m + 1
    acc = tl.full((BLOCK,), NEG, tl.float32)  # local / semiglobal: the end terms, per lane
    dacc = tl.zeros((BLOCK,), tl.float32)  # TANGENT: the end terms' share of d value, per lane
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
        s_n = tl.load(srow, mask=lane & (offs == 0) & (offs + m >= 1), other=0.0)
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
            zs_n = tl.load(zrow, mask=lane & (offs == 0) & (offs + m >= 1), other=0.0)
        ts += _top_step(r0, 0, m, BLOCK) + _top_step(r0, 1, m, BLOCK)
        ds = _slot(0, 0, r0, R, m)  # slot of lane 0 at step t (the others follow it)
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
            if MODE == 1:
                ld = _lse2(tl.zeros_like(diag), diag)
            else:
                ld = diag
            dterm = tl.where(j >= 1, s + ld, NEG)
            v, pd, pu, pl = _lse3_p(dterm, up - g, left - g)
            v = tl.where(live, v, NEG)
            if TANGENT:
                zs = zs_c
                zs_c = zs_n
                zs_n = tl.load(zrow + jn - 1, mask=lane & (jn >= 1) & (jn <= m), other=0.0)
                dtop_n = tl.load(dtab + ts, mask=t + 2 <= m, other=0.0, cache_modifier=".cg")
                if MODE == 1:
                    dd = zs + _p(diag, ld) * ddiag  # d lse(0, V_diag) = sigma d V_diag
                else:
                    dd = zs + ddiag
                du = dup - zg
                dl = dleft - zg
                dv = tl.where(live, pd * dd + pu * du + pl * dl, 0.0)
                tl.store(dtab + ds + offs, dv, mask=live)
                if MODE == 0:
                    dacc += tl.where(live & last_row & (j == m), dv, 0.0)
                elif MODE == 1:
                    dacc += tl.where(live & (j >= 1), _p(dterm, vtot) * dd, 0.0)
                else:
                    dacc += tl.where(live & last_row, _p(dterm, vtot) * dd + _p(up - g, vtot) * du, 0.0)
            else:
                tl.store(tab + ds + offs, v, mask=live)
                if MODE == 1:
                    acc = _lse2(acc, tl.where(live & (j >= 1), dterm, NEG))
                elif MODE == 2:
                    acc = _lse2(acc, tl.where(live & last_row, _lse2(dterm, up - g), NEG))
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
    if TANGENT:  # the share of d value: sums, not log-sums
        value = tl.sum(dacc, 0)
        if (MODE == 0) & (n == 0) & (k == 0):  # the value is row 0's
            value = -m.to(tl.float32) * zg
    elif (S == 1) & (MODE == 1):  # the whole value (the caller combines nothing): + the empty alignment
        value = _lse2(value, tl.zeros_like(value))
    if seen == GAVE_UP:
        value = tl.full((), float("nan"), tl.float32)  # a wait gave up: never a wrong value
    tl.store(part_ptr + b * S + k, value)


@triton.jit
def _bwd_loads(tab, q1, q2, tq, srow, f_in, u, offs, lane, bottom, m, other):
    """What step u of the backward sweep reads besides V and Vu (the step before's): V at
    (i, j - 1) and (i - 1, j - 1), the score s[i, j], and in the strip's last lane the flows
    from the strip below. q1, q2: the slots of lane 0 at steps u - 1, u - 2; tq: (r0, u - 1).
    The same for the tangents (dtab, zs, the flows' tangents: other = 0)."""
    j = u - offs
    nxt = lane & (j >= 1) & (j <= m + 1)  # column j - 1 exists (also the next step's V and Vu)
    Vl = tl.load(tab + q1 + offs, mask=nxt, other=other)
    Vd = tl.load(tab + tl.where(offs == 0, tq, q2 + offs - 1), mask=nxt, other=other)
    s = tl.load(srow + j - 1, mask=lane & (j >= 1) & (j <= m), other=0.0)
    below = tl.load(f_in + j, mask=bottom & (j >= 0) & (j <= m), other=0.0, cache_modifier=".cg")
    below += tl.load(f_in + (m + 1) + j, mask=bottom & (j >= 0) & (j < m), other=0.0, cache_modifier=".cg")
    return Vl, Vd, s, below


@triton.jit
def _zero_padding(gp, s_b, s_i, r0, n, m, BLOCK: tl.constexpr):
    """Zeros in the gradient past the pair's lengths, in this strip's rows: columns m.. of
    rows up to n, every column of the rows past n (the sweep writes the live cells only)."""
    ZB: tl.constexpr = 32
    rows = r0 + tl.arange(0, BLOCK)  # the gradient's row i - 1
    keep = rows < s_b // tl.maximum(s_i, 1)  # N
    past = rows >= n
    grow = gp + rows.to(tl.int64) * s_i
    c0 = tl.where(r0 + BLOCK > n, 0, (m // ZB) * ZB)
    while c0 < s_i:
        cols = c0 + tl.arange(0, ZB)
        pad = keep[:, None] & (cols[None, :] < s_i) & (past[:, None] | (cols[None, :] >= m))
        tl.store(grow[:, None] + cols[None, :], tl.zeros((BLOCK, ZB), tl.float32), mask=pad)
        c0 += ZB


@triton.jit(do_not_specialize=['s_b', 's_i', 'MODE', 'tab_b', 'f_b', 'B', 'S'])
def soft_align_diag_bwd_kernel(s_ptr, s_b, s_i, g_ptr, q_ptr, t_ptr, tab_ptr, tab_b, value_ptr, grad_ptr,
                               gs_ptr, dg_ptr, f_ptr, f_b, sync_ptr, B, S, zs_ptr, zg_ptr, dtab_ptr, dvalue_ptr,
                               MODE, BLOCK: tl.constexpr, HAND_OFF: tl.constexpr, HVP: tl.constexpr):
    """Program (k, b) from its ticket (the last strips first): the adjoints Q = d value / d V
    of strip k of pair b from its last anti-diagonal to its first; gs[i - 1, j - 1] = the
    adjoint of the aligned-pair term (the expected alignment times grad), dg[b, k] = - grad
    times the strip's expected number of gap positions. Flows into the strip's top row go
    to f[b, k] (two rows: down, down-right), which strip k - 1 reads as they are written
    (progress counter sync[2 + b S + k]: columns done from the right).
    HVP: the backward half of the Hessian-vector product: with dV (dtab) and d value
    (dvalue) from the TANGENT forward along z (zs, zg), the adjoints' derivatives dQ ride
    along (dQ = sum over out-edges of dQ_to p + Q_to dp, dp = p (d term - dV_to)), and gs,
    dg get the derivatives of the first-order outputs along z; f holds four rows (the
    flows, then their derivatives)."""
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
    gaps = tl.zeros((BLOCK,), tl.float32)  # the flow through gap edges, per lane (HVP: its derivative)
    vv = tl.zeros((BLOCK,), tl.float32) + value
    zg = 0.0
    dvv = tl.zeros((BLOCK,), tl.float32)
    if HVP:
        zg = tl.load(zg_ptr + b)
        dvv += tl.load(dvalue_ptr + b)
        dtab = dtab_ptr + b * tab_b
    flag_out = sync_ptr + 2 + b * S + k
    flag_in = flag_out + 1
    seen = 0
    r0 = k * BLOCK
    _zero_padding(gp, s_b, s_i, r0, n, m, BLOCK)
    if r0 < n:
        R = tl.minimum(n - r0, BLOCK)
        below_too = r0 + R < n  # a strip below hands its flows up
        lane = offs < R
        i = r0 + 1 + offs
        last_row = i == n
        bottom = (offs == R - 1) & (i < n)  # the strip's last lane takes flows from the strip below
        NF: tl.constexpr = 4 if HVP else 2  # rows of flows per strip
        f_out = f_ptr + b * f_b + k.to(tl.int64) * NF * (m + 1)
        f_in = f_out + NF * (m + 1)
        srow = sp + (r0 + offs).to(tl.int64) * s_i
        grow = gp + (r0 + offs).to(tl.int64) * s_i
        f_left = tl.zeros((BLOCK,), tl.float32)  # from (i, j + 1), this lane's last step
        f_down = tl.zeros((BLOCK,), tl.float32)  # from (i + 1, j), the lane below's last step
        f_dr1 = tl.zeros((BLOCK,), tl.float32)  # from (i + 1, j + 1): shifted last step, used next step
        f_dr = tl.zeros((BLOCK,), tl.float32)
        df_left = tl.zeros((BLOCK,), tl.float32)  # HVP: their derivatives
        df_down = tl.zeros((BLOCK,), tl.float32)
        df_dr1 = tl.zeros((BLOCK,), tl.float32)
        df_dr = tl.zeros((BLOCK,), tl.float32)
        t = R + m - 1
        top = offs == 0
        q1 = _slot(t - 1, 0, r0, R, m)  # slots of lane 0 at steps u - 1 and u - 2 (the others follow it)
        q2 = q1 - _slot_step(t - 2, R, m)
        tq = _top_slot(r0, t - 1, m, BLOCK)  # slot of (r0, u - 1)
        j = t - offs
        live = lane & (j >= 0) & (j <= m)
        V = tl.load(tab + _slot(t, 0, r0, R, m) + offs, mask=live, other=NEG)  # (i, j)
        up_slot = tl.where(top, tq + _top_step(r0, t - 1, m, BLOCK), q1 + offs - 1)
        Vu = tl.load(tab + up_slot, mask=live, other=NEG)  # (i - 1, j)
        if below_too:
            seen = _wait(flag_in, tl.minimum(m + 1, m + R - t), seen)
        Vl, Vd, s, below = _bwd_loads(tab, q1, q2, tq, srow, f_in, t, offs, lane, bottom, m, NEG)
        dV = tl.zeros((BLOCK,), tl.float32)
        dVu = tl.zeros((BLOCK,), tl.float32)
        dVl = tl.zeros((BLOCK,), tl.float32)
        dVd = tl.zeros((BLOCK,), tl.float32)
        zs = tl.zeros((BLOCK,), tl.float32)
        dbelow = tl.zeros((BLOCK,), tl.float32)
        if HVP:
            zrow = zs_ptr + b * s_b + (r0 + offs).to(tl.int64) * s_i
            dV = tl.load(dtab + _slot(t, 0, r0, R, m) + offs, mask=live, other=0.0)
            dVu = tl.load(dtab + up_slot, mask=live, other=0.0)
            dVl, dVd, zs, dbelow = _bwd_loads(dtab, q1, q2, tq, zrow, f_in + 2 * (m + 1), t, offs, lane, bottom,
                                              m, 0.0)
        while t >= 0:  # V and Vu carried from the step before; the next step's loads issued first
            q1 = q2
            q2 -= _slot_step(t - 3, R, m)
            tq -= _top_step(r0, t - 2, m, BLOCK)
            if below_too & (t - R >= 0):  # the flows into the last row at column t - R
                seen = _wait(flag_in, tl.minimum(m + 1, m + 1 - (t - R)), seen)
            Vl_n, Vd_n, s_n, below_n = _bwd_loads(tab, q1, q2, tq, srow, f_in, t - 1, offs, lane, bottom, m, NEG)
            j = t - offs
            live = lane & (j >= 0) & (j <= m)
            has_l = live & (j >= 1)
            ld = Vd  # what the aligned-pair term adds to s: Vd, or local's lse(0, Vd)
            sig = tl.full((BLOCK,), 1.0, tl.float32)  # d ld / d Vd
            if MODE == 1:
                ld = _lse2(tl.zeros_like(Vd), Vd)
                sig = _p(Vd, ld)
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
            ql = q * pl
            if HVP:  # the same for the derivatives along z
                dVl_n, dVd_n, zs_n, dbelow_n = _bwd_loads(dtab, q1, q2, tq, zrow, f_in + 2 * (m + 1), t - 1, offs,
                                                          lane, bottom, m, 0.0)
                dd = zs + sig * dVd
                du = dVu - zg
                dl = dVl - zg
                dq = df_left + df_down + df_dr + dbelow
                dqd = dq * pd + q * pd * (dd - dV)
                dqu = dq * pu + q * pu * (du - dV)
                dql = dq * pl + q * pl * (dl - dV)
            if MODE == 1:
                e = tl.where(has_l, gout * _p(dterm, vv), 0.0)  # the end edge from M
                qd += e
                if HVP:
                    dqd += e * (dd - dvv)
            elif MODE == 2:
                e_node = _lse2(dterm, uterm)
                e = tl.where(live & last_row, gout * _p(e_node, vv), 0.0)
                ed = e * _p(dterm, e_node)
                eu = e * _p(uterm, e_node)
                qd += ed
                qu += eu
                if HVP:
                    dqd += ed * (dd - dvv)
                    dqu += eu * (du - dvv)
            qd = tl.where(live, qd, 0.0)
            qu = tl.where(live, qu, 0.0)
            ql = tl.where(live, ql, 0.0)
            if MODE == 1:
                fd = qd * sig  # the part of lse(0, Vd) that came from Vd
            else:
                fd = qd
            if HVP:
                dqd = tl.where(live, dqd, 0.0)
                dqu = tl.where(live, dqu, 0.0)
                dql = tl.where(live, dql, 0.0)
                dfd = dqd * sig
                if MODE == 1:
                    dfd += qd * sig * (1.0 - sig) * dVd
                tl.store(grow + j - 1, dqd, mask=has_l)
                cu = dqu  # what the gap terms and the flows into row 0 count
                cd = dfd
                gaps += dqu + dql
            else:
                tl.store(grow + j - 1, qd, mask=has_l)
                cu = qu
                cd = fd
                gaps += qu + ql
            if MODE == 0:  # flows into row 0 travel j gap positions along it
                if r0 == 0:
                    gaps += tl.where(top & live, j.to(tl.float32) * cu + (j - 1).to(tl.float32) * cd, 0.0)
            tl.store(f_out + j, qu, mask=top & live)
            tl.store(f_out + (m + 1) + j - 1, fd, mask=top & has_l)
            f_left = ql
            f_dr = f_dr1
            if HVP:
                tl.store(f_out + 2 * (m + 1) + j, dqu, mask=top & live)
                tl.store(f_out + 3 * (m + 1) + j - 1, dfd, mask=top & has_l)
                df_left = dql
                df_dr = df_dr1
                df_down = tl.where(offs == BLOCK - 1, 0.0, tl.gather(dqu, idx_dn, 0))
                df_dr1 = tl.where(offs == BLOCK - 1, 0.0, tl.gather(dfd, idx_dn, 0))
                dV = dVl
                dVu = dVd
                dVl = dVl_n
                dVd = dVd_n
                zs = zs_n
                dbelow = dbelow_n
            f_down = tl.where(offs == BLOCK - 1, 0.0, tl.gather(qu, idx_dn, 0))
            f_dr1 = tl.where(offs == BLOCK - 1, 0.0, tl.gather(fd, idx_dn, 0))
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
        if (n == 0) & (k == 0):  # the value is row 0's: m gap positions (no derivative along z)
            dg = tl.where(HVP, 0.0, -gout * m.to(tl.float32))
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
    part = _sweep_forward(s, gap, q_lens, t_lens, table, mode, block, warps, hand_off)
    if part.shape[1] == 1:  # one strip per pair: the kernel's value is the whole (small calls: no more launches)
        return part[:, 0], table
    value = torch.logsumexp(part, 1)
    return (torch.logaddexp(value, torch.zeros_like(value)) if mode == 1 else value), table  # local: + the empty one


def _sweep_forward(s, gap, q_lens, t_lens, table, mode, block, warps, hand_off, tangent=None):
    """The forward kernel's per-strip shares [B, S]; ``tangent``: (zs, zg, dtable, value)."""
    B, N, M = s.shape
    blk = block or block_for(N)
    S = max(1, triton.cdiv(N, blk))
    part = s.new_empty(B, S)
    sync = torch.zeros(2 + B * S, dtype=torch.int32, device=s.device)
    zs, zg, dtab, value = tangent or (s, gap, table, part)
    soft_align_diag_fwd_kernel[(B * S,)](s, N * M, M, gap.float().contiguous(), q_lens, t_lens, table,
                                         table[0].numel(), part, sync, B, S, zs, zg, dtab, value, mode, BLOCK=blk,
                                         HAND_OFF=hand_off, TANGENT=tangent is not None,
                                         num_warps=warps or _warps(blk))
    return part


def _sweep_backward(s, gap, q_lens, t_lens, table, value, grad, mode, block, warps, hand_off, hvp=None):
    """The backward kernel: (gs [B, N, M], dg [B]); ``hvp``: (zs, zg, dtable, dvalue)."""
    B, N, M = s.shape
    gs = torch.empty((B, N, M), dtype=torch.float32, device=s.device)  # (the kernel writes every cell)
    if not B:
        return gs, s.new_empty(0)
    blk = block or block_for(N)
    S = max(1, triton.cdiv(N, blk))
    dg = s.new_empty(B, S)
    flows = s.new_empty(B, S, 4 if hvp else 2, M + 1)
    sync = torch.zeros(2 + B * S, dtype=torch.int32, device=s.device)
    zs, zg, dtab, dvalue = hvp or (s, gap, table, value)
    soft_align_diag_bwd_kernel[(B * S,)](s, N * M, M, gap.float().contiguous(), q_lens, t_lens, table,
                                         table[0].numel(), value.float().contiguous(), grad.float().contiguous(),
                                         gs, dg, flows, flows[0].numel(), sync, B, S, zs, zg, dtab, dvalue, mode,
                                         BLOCK=blk, HAND_OFF=hand_off, HVP=hvp is not None,
                                         num_warps=warps or _warps(blk))
    return gs, (dg[:, 0] if S == 1 else dg.sum(1))  # (small calls: one launch fewer)


def backward(scores, gap, q_lens, t_lens, table, value, grad, mode: int, block=None, warps=None, hand_off=HAND_OFF):
    """(d scores [B, N, M], d gap [B]) times grad."""
    return _sweep_backward(scores.float().contiguous(), gap, q_lens, t_lens, table, value, grad, mode, block, warps,
                           hand_off)


def hvp(scores, gap, q_lens, t_lens, table, value, grad, z_scores, z_gap, mode: int, block=None, warps=None,
        hand_off=HAND_OFF):
    """The derivatives of backward()'s outputs along z = (z_scores [B, N, M], z_gap [B]), and
    d value along z: (d scores, d gap, d value), each [B] but the first. A forward sweep of
    the tangents dV (4 B per cell beside forward()'s table), then the backward sweep with
    the adjoints' derivatives (Mensch & Blondel 2018, Algorithms 2 and 3)."""
    s = scores.float().contiguous()
    B, N, M = s.shape
    if not B:
        return torch.zeros_like(s), s.new_empty(0), s.new_empty(0)
    zs = z_scores.float().contiguous()
    zg = z_gap.float().contiguous()
    value = value.float().contiguous()
    dtab = torch.empty_like(table)
    dvalue = _sweep_forward(s, gap, q_lens, t_lens, table, mode, block, warps, hand_off,
                            (zs, zg, dtab, value)).sum(1)
    gs, dg = _sweep_backward(s, gap, q_lens, t_lens, table, value, grad, mode, block, warps, hand_off,
                             (zs, zg, dtab, dvalue))
    return gs, dg, dvalue


settle_module(__name__)  # the same cache keys in every process (cache_keys.py)
