"""Soft alignment with linear gaps, one state, by anti-diagonals: the backward sweep and
the Hessian-vector product (the layout, the table and the strips: soft_align_diag.py).

Adjoints Q from the last step to the first; a cell's Q is the sum of the flows from its
successors (right: the lane's own last step; down and down-right: the lane below's last
two steps, which it sums, shifted up by one ``tl.gather`` a step); flows into row 0 and
into a strip's top row are handed over through a buffer, strip k - 1 reading strip k's as
they are written.

The Hessian-vector product runs soft_align_diag's forward kernel with TANGENT set (dV
along z), then this kernel with HVP set: the adjoints' derivatives dQ ride beside Q,
dQ_from = sum over out-edges of dQ_to p + Q_to dp, dp = p (d term - dV_to) (Mensch &
Blondel 2018, Algorithms 2 and 3).

Pure: imports only torch and triton.
"""

import torch
import triton
import triton.language as tl

from .cache_keys import settle_module
from .launch import Launcher
from .soft_align import (NEG, PREFETCH, _centred3, _eight_registers, _latest_first, _load_still, _lse2,
                         _opaque, _p, _prefetch, _rcp, _store8, _store8_own_row, _store_own)
from .soft_align_diag import HAND_OFF as FORWARD_HAND_OFF
from .soft_align_diag import (_finish, _gap_args, f32, _slot, _slot_step, _sweep_forward, _top_slot, _top_step, _wait,
                              _warps, block_for)
from .spin import GAVE_UP


@triton.jit
def _bwd_loads(tab, q1, q2, tq, srow, f_in, u, offs, lane, bottom, m, other, shift):
    """What step u of the backward sweep reads besides V and Vu (the step before's): V at
    (i, j - 1) and (i - 1, j - 1), the score s[i, j], and in the strip's last lane the flows
    from the strip below. q1, q2: the slots of lane 0 at steps u - 1, u - 2; tq: (r0, u - 1);
    shift: subtracted from the score.
    The same for the tangents (dtab, zs, the flows' tangents: other = 0)."""
    j = u - offs
    nxt = lane & (j >= 1) & (j <= m + 1)  # column j - 1 exists (also the next step's V and Vu)
    Vl = _load_still(tab + q1 + offs, nxt, other)
    Vd = _load_still(tab + tl.where(offs == 0, tq, q2 + offs - 1), nxt, other)
    s = _load_still(srow + j - 1, lane & (j >= 1) & (j <= m), 0.0) - shift
    below = tl.load(f_in + j, mask=bottom & (j >= 0) & (j <= m), other=0.0, cache_modifier=".cg")
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


@triton.jit(do_not_specialize=['s_b', 's_i', 'shifted', 'tab_b', 'f_b', 'B', 'S', 'aligned'])
def soft_align_diag_bwd_kernel(s_ptr, s_b, s_i, g_ptr, c_ptr, dc_ptr, shifted, q_ptr, t_ptr, tab_ptr, tab_b,
                               value_ptr, grad_ptr, grad_s, gs_ptr, part_ptr, dg_ptr, f_ptr, f_b, sync_ptr, B, S,
                               aligned, zs_ptr, zg_ptr, dtab_ptr, dvalue_ptr, MODE: tl.constexpr,
                               BLOCK: tl.constexpr, HAND_OFF: tl.constexpr, HVP: tl.constexpr):
    """Program (k, b) from its ticket (the last strips first): the adjoints Q = d value / d V
    of strip k of pair b from its last anti-diagonal to its first; gs[i - 1, j - 1] = the
    adjoint of the aligned-pair term (the expected alignment times grad), dg[b] = - grad
    times the expected number of gap positions (each strip's share in part[b, k], summed
    by the pair's last strip to finish). Flows into the strip's top row go
    to f[b, k] (one row: into column j, the down flow and the down-right one, summed),
    which strip k - 1 reads as they are written
    (progress counter sync[2 + b S + k]: columns done from the right).
    HVP: the backward half of the Hessian-vector product: with dV (dtab) and d value
    (dvalue) from the TANGENT forward along z (zs, zg), the adjoints' derivatives dQ ride
    along (dQ = sum over out-edges of dQ_to p + Q_to dp, dp = p (d term - dV_to)), and gs,
    dg get the derivatives of the first-order outputs along z; f holds two rows (the
    flows, then their derivatives). shifted: the scores are read less 2 c[b], with HVP zs
    less 2 dc[b] (the centrings of soft_align_diag_fwd_kernel). aligned (not 0): rows of a
    width % 4 == 0, whose gradient each lane stores into its own row (_store8_own_row); else
    a round's gradients go as one tile (_store8). A run-time flag, not a constexpr: one
    compiled kernel holds both stores (half the variants to compile)."""
    ticket = tl.atomic_add(sync_ptr, 1)
    b = (ticket % B).to(tl.int64)
    k = S - 1 - ticket // B
    n = tl.load(q_ptr + b).to(tl.int32)
    m = tl.load(t_ptr + b).to(tl.int32)
    g = tl.load(g_ptr + b)
    centre = tl.load(c_ptr + b, mask=shifted != 0, other=0.0)  # (the values held as V - centre (i + j))
    sh2 = 2.0 * centre
    nm = (n + m).to(tl.float32)  # (the value is held less centre nm: an end at (i, j) less centre (nm - i - j))
    value = tl.load(value_ptr + b)
    gout = tl.load(grad_ptr + b * grad_s)
    sp = s_ptr + b * s_b
    gp = gs_ptr + b * s_b
    tab = tab_ptr + b * tab_b
    offs = tl.arange(0, BLOCK)
    idx_dn = tl.minimum(offs + 1, BLOCK - 1)
    gaps = tl.zeros((BLOCK,), tl.float32)  # the flow through gap edges, per lane (HVP: its derivative)
    vv = tl.zeros((BLOCK,), tl.float32) + value
    zg = 0.0
    dvv = tl.zeros((BLOCK,), tl.float32)
    dsh2 = 0.0
    dcentre = 0.0
    if HVP:
        zg = tl.load(zg_ptr + b)
        dcentre = tl.load(dc_ptr + b, mask=shifted != 0, other=0.0)  # (the tangents as dV - dcentre (i + j))
        dsh2 = 2.0 * dcentre
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
        NF: tl.constexpr = 2 if HVP else 1  # rows of flows per strip (HVP: their derivatives too)
        f_out = f_ptr + b * f_b + k.to(tl.int64) * NF * (m + 1)
        f_in = f_out + NF * (m + 1)
        srow = sp + (r0 + offs).to(tl.int64) * s_i
        grow_off = b * s_b + (r0 + offs).to(tl.int64) * s_i  # (from gs_ptr: 16-byte aligned rows where aligned)
        grow = gs_ptr + grow_off
        own_row = lane & (offs * 0 + aligned != 0)  # (lanes that store their own rows; a tensor: interpreter masks)
        f_left = tl.zeros((BLOCK,), tl.float32)  # from (i, j + 1), this lane's last step
        # from (i + 1, j) and (i + 1, j + 1): the lane below's up flow of its last step and its
        # diagonal flow of the step before, summed there and shifted up by one gather a step
        f_below = tl.zeros((BLOCK,), tl.float32)
        fd_last = tl.zeros((BLOCK,), tl.float32)  # this lane's diagonal flow of the last step
        df_left = tl.zeros((BLOCK,), tl.float32)  # HVP: their derivatives
        df_below = tl.zeros((BLOCK,), tl.float32)
        dfd_last = tl.zeros((BLOCK,), tl.float32)
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
        if below_too:  # (the first two steps' flows from below)
            seen = _wait(flag_in, tl.minimum(m + 1, m + R + 1 - t), seen)
        Vl, Vd, s, below = _bwd_loads(tab, q1, q2, tq, srow, f_in, t, offs, lane, bottom, m, NEG, sh2)
        q1 = q2  # (slots for step t - 1's loads)
        q2 -= _slot_step(t - 3, R, m)
        tq -= _top_step(r0, t - 2, m, BLOCK)
        Vl_n, Vd_n, s_n, below_n = _bwd_loads(tab, q1, q2, tq, srow, f_in, t - 1, offs, lane, bottom, m, NEG, sh2)
        dVu = tl.zeros((BLOCK,), tl.float32)
        dVl = tl.zeros((BLOCK,), tl.float32)
        dVd = tl.zeros((BLOCK,), tl.float32)
        zs = tl.zeros((BLOCK,), tl.float32)
        dbelow = tl.zeros((BLOCK,), tl.float32)
        if HVP:
            zrow = zs_ptr + b * s_b + (r0 + offs).to(tl.int64) * s_i
            dVu = tl.load(dtab + up_slot, mask=live, other=0.0)
            # (step t's slots, from step t - 1's: the first loads above stepped them)
            dVl, dVd, zs, dbelow = _bwd_loads(dtab, q1 + _slot_step(t - 2, R, m), q1,
                                              tq + _top_step(r0, t - 2, m, BLOCK), zrow, f_in + (m + 1), t, offs,
                                              lane, bottom, m, 0.0, dsh2)
            dVl_n, dVd_n, zs_n, dbelow_n = _bwd_loads(dtab, q1, q2, tq, zrow, f_in + (m + 1), t - 1, offs, lane,
                                                      bottom, m, 0.0, dsh2)
        qp = _slot(t - PREFETCH, 0, r0, R, m)  # slot of lane 0 at step t - PREFETCH
        g0, g1, g2, g3, g4, g5, g6, g7 = _eight_registers(BLOCK)  # the gradient of the last 8 steps, latest first
        tl.static_assert(HAND_OFF == 8, "a round's steps fill _store8's eight registers")
        while t >= 0:  # HAND_OFF steps a round: one wait and one release, no branch in the steps
            if below_too & (t - 1 - R >= 0):  # the flows into the last row that the round's steps read
                seen = _wait(flag_in, tl.minimum(m + 1, m + 1 - (t - HAND_OFF - R)), seen)
            for _ in tl.static_range(HAND_OFF):  # V, Vu carried from the step before; loads two steps ahead
                # (steps past 0 are masked out: no live lane)
                jp = t - PREFETCH - offs
                _prefetch(tab + qp + offs, lane & (jp >= 0) & (jp <= m))
                _prefetch(srow + jp - 1, lane & (jp >= 1) & (jp <= m))
                if HVP:
                    _prefetch(dtab + qp + offs, lane & (jp >= 0) & (jp <= m))
                    _prefetch(zrow + jp - 1, lane & (jp >= 1) & (jp <= m))
                qp -= _slot_step(t - PREFETCH - 1, R, m)
                q1 = q2
                q2 -= _slot_step(t - 4, R, m)
                tq -= _top_step(r0, t - 3, m, BLOCK)
                Vl_nn, Vd_nn, s_nn, below_nn = _bwd_loads(tab, q1, q2, tq, srow, f_in, t - 2, offs, lane, bottom, m,
                                                          NEG, sh2)
                j = t - offs
                live = lane & (j >= 0) & (j <= m)
                has_l = live & (j >= 1)
                ld = Vd  # what the aligned-pair term adds to s: Vd, or local's lse(start, Vd)
                sig = tl.full((BLOCK,), 1.0, tl.float32)  # d ld / d Vd
                span = (i + j).to(tl.float32)  # (the centring's unit: starts c (i + j - 2), ends c (n + m - i - j))
                if MODE == 1:
                    ld = _lse2((2.0 - span) * centre, Vd)
                    sig = _p(Vd, ld)
                dterm = tl.where(has_l, s + ld, NEG)
                uterm = tl.where(live, Vu - g, NEG)
                lterm = tl.where(has_l, Vl - g, NEG)
                pd = _p(dterm, V)
                pu = _p(uterm, V)
                pl = _p(lterm, V)
                tot = pd + pu + pl
                r = _rcp(tl.where(tot > 0, tot, 1.0))
                pd = pd * r
                pu = pu * r
                pl = pl * r
                q = f_left + f_below + below
                if MODE == 0:
                    q += tl.where(live & last_row & (j == m), gout, 0.0)
                qd = q * pd  # the adjoint of the aligned-pair term
                qu = q * pu
                ql = q * pl
                if HVP:  # the same for the derivatives along z
                    dVl_nn, dVd_nn, zs_nn, dbelow_nn = _bwd_loads(dtab, q1, q2, tq, zrow, f_in + (m + 1), t - 2, offs,
                                                                  lane, bottom, m, 0.0, dsh2)
                    dd = zs + sig * dVd
                    if MODE == 1:  # (local's start term has a tangent too: -dc (i + j - 2))
                        dd += (1.0 - sig) * ((2.0 - span) * dcentre)
                    du = dVu - zg
                    dl = dVl - zg
                    dq = df_left + df_below + dbelow
                    ad, au, al = _centred3(pd, pu, pl, dd, du, dl, 0.0)  # (d term - dV, dV the in-edges' sum)
                    dqd = dq * pd + q * pd * ad
                    dqu = dq * pu + q * pu * au
                    dql = dq * pl + q * pl * al
                if MODE == 1:
                    e = tl.where(has_l, gout * _p(dterm + (span - nm) * centre, vv), 0.0)  # the end edge from M
                    qd += e
                    if HVP:
                        dqd += e * (dd + (span - nm) * dcentre - dvv)
                elif MODE == 2:
                    e_node = _lse2(dterm, uterm)
                    e = tl.where(live & last_row, gout * _p(e_node + (span - nm) * centre, vv), 0.0)
                    ed = e * _p(dterm, e_node)
                    eu = e * _p(uterm, e_node)
                    qd += ed
                    qu += eu
                    if HVP:
                        dqd += ed * (dd + (span - nm) * dcentre - dvv)
                        dqu += eu * (du + (span - nm) * dcentre - dvv)
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
                        dfd += qd * sig * (1.0 - sig) * (dVd - (2.0 - span) * dcentre)  # (d sigma, the start's too)
                    gval = dqd
                    cu = dqu  # what the gap terms and the flows into row 0 count
                    cd = dfd
                    gaps += dqu + dql
                else:
                    gval = qd
                    cu = qu
                    cd = fd
                    gaps += qu + ql
                g0, g1, g2, g3, g4, g5, g6, g7 = _latest_first(gval, g0, g1, g2, g3, g4, g5, g6)  # (column j - 1)
                _store8_own_row(gs_ptr, grow_off, t - offs - 1, g0, g1, g2, g3, g4, g5, g6, g7, own_row, s_i)
                if MODE == 0:  # flows into row 0 travel j gap positions along it
                    gaps += tl.where(top & live & (r0 == 0), j.to(tl.float32) * cu + (j - 1).to(tl.float32) * cd, 0.0)
                up = qu + fd_last  # what this lane hands up: the lane (or strip) above reads it next step
                _store_own(f_out + j, up, top & live)
                f_left = ql
                if HVP:
                    dup = dqu + dfd_last
                    _store_own(f_out + (m + 1) + j, dup, top & live)
                    df_left = dql
                    df_below = tl.where(offs == BLOCK - 1, 0.0, tl.gather(dup, idx_dn, 0))
                    dfd_last = dfd
                    dVu, dVl, dVd, zs, dbelow = dVd, dVl_n, dVd_n, zs_n, dbelow_n  # (the loads' pipeline, as below)
                    dVl_n, dVd_n, zs_n, dbelow_n = dVl_nn, dVd_nn, zs_nn, dbelow_nn
                f_below = tl.where(offs == BLOCK - 1, 0.0, tl.gather(up, idx_dn, 0))
                fd_last = fd
                V, Vu, Vl, Vd, s, below = Vl, Vd, Vl_n, Vd_n, s_n, below_n  # (the loads' pipeline: two steps)
                Vl_n, Vd_n, s_n, below_n = Vl_nn, Vd_nn, s_nn, below_nn
                t -= 1
            if aligned == 0:  # the round's eight gradients, one tile (a uniform branch)
                _store8(grow, t - offs, g0, g1, g2, g3, g4, g5, g6, g7, lane, 0, 7, m)
            if r0 > 0:  # (after the gathers' barrier) columns t + 1 .. m of f_out are complete
                tl.atomic_xchg(flag_out, tl.minimum(m - t, m + 1), sem="release")
            t = _opaque(t)
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
    _finish(dg, part_ptr, sync_ptr + 2 + B * S, dg_ptr, b, k, S, 0, BLOCK)


# the backward's hand-off (columns between releases) and its round of steps: fixed at 8, the tile
# store's registers (16 measured 0-3 % slower, 32 up to 11 %, before the rounds were unrolled)
HAND_OFF = 8


def _sweep_backward(s, gap, q_lens, t_lens, table, value, grad, mode, block, warps, hvp=None, shift=None,
                    tangent_shift=None):
    """The backward kernel: (gs [B, N, M], dg [B]); ``hvp``: (zs, zg, dtable, dvalue), zs read
    less 2 ``tangent_shift`` (with ``shift`` only)."""
    B, N, M = s.shape
    gs = torch.empty((B, N, M), dtype=torch.float32, device=s.device)  # (the kernel writes every cell)
    if not B:
        return gs, s.new_empty(0)
    blk = block or block_for(B, N, s.device)
    S = max(1, triton.cdiv(N, blk))
    part = s.new_empty(B, S)
    dg = s.new_empty(B)
    flows = s.new_empty(B, S, 2 if hvp else 1, M + 1)
    sync = torch.zeros(2 + B * S + B, dtype=torch.int32, device=s.device)
    zs, zg, dtab, dvalue = hvp or (s, gap, table, value)
    if grad.dtype != torch.float32:  # (autograd's gradient of a sum is expanded: read with its stride, no copy)
        grad = grad.float()
    _launch_bwd((B * S,), s, N * M, M, *_gap_args(gap, shift, tangent_shift), q_lens, t_lens, table,
                table.stride(0), f32(value), grad, grad.stride(0), gs,
                part, dg, flows, flows.stride(0), sync, B, S, int(M % 4 == 0), zs, zg, dtab, dvalue, mode,
                BLOCK=blk, HAND_OFF=HAND_OFF, HVP=hvp is not None,
                num_warps=warps or _warps(blk))
    return gs, dg


def backward(scores, gap, q_lens, t_lens, table, value, grad, mode: int, block=None, warps=None, shift=None):
    """(d scores [B, N, M], d gap [B]) times grad; ``shift`` [B]: forward()'s."""
    return _sweep_backward(f32(scores), gap, q_lens, t_lens, table, value, grad, mode, block, warps,
                           shift=shift)


def hvp(scores, gap, q_lens, t_lens, table, value, grad, z_scores, z_gap, mode: int, block=None, warps=None,
        shift=None, tangent_shift=None):
    """The derivatives of backward()'s outputs along z = (z_scores [B, N, M], z_gap [B]), and
    d value along z: (d scores, d gap, d value), each [B] but the first. A forward sweep of
    the tangents dV (4 B per cell beside forward()'s table), then the backward sweep with
    the adjoints' derivatives (Mensch & Blondel 2018, Algorithms 2 and 3). With ``shift``,
    ``tangent_shift`` dc [B]: z_scores are read less 2 dc (the caller passes z_gap + dc)."""
    s = f32(scores)
    B, N, M = s.shape
    if not B:
        return torch.zeros_like(s), s.new_empty(0), s.new_empty(0)
    zs = f32(z_scores)
    zg = f32(z_gap)
    value = f32(value)
    dtab = torch.empty_like(table)
    dvalue = _sweep_forward(s, gap, q_lens, t_lens, table, mode, block, warps, FORWARD_HAND_OFF,
                            (zs, zg, dtab, value), shift, tangent_shift)
    gs, dg = _sweep_backward(s, gap, q_lens, t_lens, table, value, grad, mode, block, warps, (zs, zg, dtab, dvalue),
                             shift, tangent_shift)
    return gs, dg, dvalue


_launch_bwd = Launcher(soft_align_diag_bwd_kernel)
settle_module(__name__)  # the same cache keys in every process (cache_keys.py)
