"""Soft alignment with affine gaps of one value per pair (three Gotoh states) by
anti-diagonals: the backward sweep, from soft_align_diag3.py's table.

The adjoints QM, QX, QY (d value / d node) of each cell from the last anti-diagonal to the
first, in soft_align_diag3's layout (lane l: row i = r0 + l + 1, step t: column j = t - l).
A cell (i, j) sends its M, X and Y into three successors, each a log-sum-exp whose edge
probabilities the cell recomputes from its own three values (no scores, no successor's
value): M(i + 1, j + 1) (pd, over M, X, Y; local: and the start term 0), Y(i + 1, j) (py,
over M - o, X - o, Y - e) and X(i, j + 1) (px, over M - o, X - e, Y - o), each normalised
by its own sum (the row kernels' rule: probabilities that sum to 1 to rounding). So
    Q_s(i, j) = QM(i + 1, j + 1) pd_s + QY(i + 1, j) py_s + QX(i, j + 1) px_s + end_s.
QX(i, j + 1) is the lane's own last step; the lane below hands up QM(i + 1, j + 1) (its
step before last) and QY(i + 1, j) (its last) by one ``tl.gather`` of the pair a step, and
a strip's last lane reads them from the strip below through a buffer (f[b, k]: one pair a
column, strip k's first row; progress counter: columns done from the right). Only those
gathers and FMAs lie on the step's chain: the 9 exps and 3 reciprocals of a cell read only
the table (one group per successor, each with its own max: a factorised form that shares
exps underflows at small temperatures, where o / T is large).

Row 0 (global, semiglobal) is a border, an explicit function of the gaps (global:
X(0, j) = -o - (j - 1) e; semiglobal: M(0, j) = 0): strip 0 reads the flows into it from its
own buffer after its sweep. The gaps' gradients are minus the expected opening and
extending moves (the flows through those edges), per pair.

Pure: imports only torch and triton.
"""

import torch
import triton
import triton.language as tl

from .cache_keys import settle_module
from .launch import Launcher
from .soft_align import (NEG, PREFETCH, _centred3, _eight_registers, _exp, _latest_first, _load_still, _p, _prefetch,
                         _rcp, _store8)
from .soft_align_diag import _finish, _wait, f32
from .soft_align_diag3 import BLOCK
from .soft_align_diag_bwd import _zero_padding
from .spin import GAVE_UP

ROUND = tl.constexpr(8)  # steps a round: one wait, one release, and _store8's eight registers


@triton.jit
def _probs(a, b, c, START: tl.constexpr):
    """exp(a, b, c less their lse): one successor's edge probabilities, and the start term's
    (START: the lse has a term 0 too, local's start; else 0); 0 where every term is -inf."""
    mx = tl.maximum(tl.maximum(a, b), c)
    if START:
        mx = tl.maximum(mx, 0.0)
    ms = tl.where(mx == NEG, 0.0, mx)
    ea = _exp(a - ms)
    eb = _exp(b - ms)
    ec = _exp(c - ms)
    tot = ea + eb + ec
    if START:
        tot += _exp(-ms)
    r = _rcp(tl.where(tot > 0, tot, 1.0))
    p0 = 0.0
    if START:
        p0 = _exp(-ms) * r
    return ea * r, eb * r, ec * r, p0


@triton.jit
def _loads(own, st, f_in, m1, u, offs, lane, bottom, m, other):
    """What step u reads: M, X, Y of the lane's cell (``other`` where there is none) and, in
    the strip's last lane, the pair the strip below hands up for column j (0 where none).
    The same for the tangents (own: their table; f_in: the pair's derivatives; other = 0)."""
    j = u - offs
    ok = lane & (j >= 0) & (j <= m)
    a = _load_still(own + j, ok, other)
    x = _load_still(own + st + j, ok, other)
    y = _load_still(own + 2 * st + j, ok, other)
    fb = bottom & (j >= 0) & (j <= m)
    fm = tl.load(f_in + j, mask=fb, other=0.0, cache_modifier=".cg")
    fy = tl.load(f_in + m1 + j, mask=fb, other=0.0, cache_modifier=".cg")
    return a, x, y, fm, fy


@triton.jit(do_not_specialize=['tab_b', 'row', 'gs_b', 'gs_i', 'grad_s', 'f_b', 'B', 'S'])
def soft_align_diag3_bwd_kernel(go_ptr, ge_ptr, q_ptr, t_ptr, tab_ptr, tab_b, row, value_ptr, grad_ptr, grad_s,
                                gs_ptr, gs_b, gs_i, part_ptr, dgo_ptr, dge_ptr, f_ptr, f_b, sync_ptr, B, S,
                                zo_ptr, ze_ptr, dtab_ptr, dvalue_ptr, MODE: tl.constexpr, BLOCK: tl.constexpr,
                                HVP: tl.constexpr):
    """Program (k, b) from its ticket (the last strips first): the adjoints of strip k of
    pair b (MODE 0 global, 1 local, 2 semiglobal) from its last anti-diagonal to its
    first; gs[i - 1, j - 1] = QM(i, j) (the expected alignment times grad), dgo[b], dge[b]:
    minus the flows through opening and extending moves (each strip's shares in part[0 or
    1, b, k], summed by the pair's last strip to finish). f[b, k] (two rows: QM(r0 + 1, j + 1),
    QY(r0 + 1, j) at column j): what strip k's first row hands up, read by strip k - 1 as
    it is written (sync[2 + b S + k]: columns done from the right; sync[0]: the tickets;
    sync[2 + B S + b], sync[2 + B S + B + b]: strips finished, for each gap).
    HVP: the backward half of the Hessian-vector product: with the tangents dV (dtab) and
    d value (dvalue) of soft_align_diag3_hvp's sweep along z (gaps zo, ze [B]), the
    adjoints' derivatives dQ ride along (dQ_from = sum over out-edges of dQ_to p + Q_to dp,
    dp = p (the edge's tangent less the in-edges' mean, soft_align._centred3)), and gs,
    dgo, dge get the derivatives of the first-order outputs along z; f holds four rows
    (the pair, then its derivatives)."""
    ticket = tl.atomic_add(sync_ptr, 1)
    b = (ticket % B).to(tl.int64)
    k = S - 1 - ticket // B
    n = tl.load(q_ptr + b).to(tl.int32)
    m = tl.load(t_ptr + b).to(tl.int32)
    o = tl.load(go_ptr + b)
    e = tl.load(ge_ptr + b)
    g = tl.load(grad_ptr + b * grad_s)
    value = tl.load(value_ptr + b)
    tab = tab_ptr + b * tab_b
    st = row // 3  # (the M, X, Y rows of a DP row)
    gp = gs_ptr + b * gs_b
    offs = tl.arange(0, BLOCK)
    i_dn = tl.minimum(offs + 1, BLOCK - 1)  # (the lane below)
    idx_dn = tl.join(i_dn, i_dn)
    vv = tl.zeros((BLOCK,), tl.float32) + value
    zo = 0.0
    ze = 0.0
    dvv = tl.zeros((BLOCK,), tl.float32)
    if HVP:
        zo = tl.load(zo_ptr + b)
        ze = tl.load(ze_ptr + b)
        dvv += tl.load(dvalue_ptr + b)
        idx_dn4 = tl.join(idx_dn, idx_dn)
    dtab = dtab_ptr + b * tab_b
    sum_o = tl.zeros((BLOCK,), tl.float32)  # flows through opening moves, per lane (HVP: their derivatives)
    sum_e = tl.zeros((BLOCK,), tl.float32)  # and extending ones
    flag_out = sync_ptr + 2 + b * S + k
    flag_in = flag_out + 1
    seen = 0
    m1 = m + 1
    NF: tl.constexpr = 4 if HVP else 2  # rows of f a strip
    f_out = f_ptr + b * f_b + k.to(tl.int64) * NF * m1
    f_in = f_out + NF * m1
    r0 = k * BLOCK
    _zero_padding(gp, gs_b, gs_i, r0, n, m, BLOCK)
    if r0 < n:
        R = tl.minimum(n - r0, BLOCK)
        below_too = r0 + R < n
        lane = offs < R
        i = r0 + 1 + offs
        last_row = i == n
        has_below = i < n
        bottom = (offs == R - 1) & has_below
        top = offs == 0
        own = tab + i.to(tl.int64) * row
        down = dtab + i.to(tl.int64) * row
        grow = gp + (r0 + offs).to(tl.int64) * gs_i  # (row i - 1 of the gradient)
        rt = tl.full((), 1.0, tl.float32)  # semiglobal: 1 / the sum of the end probabilities over row n (the row kernels')
        if MODE == 2:
            if r0 + R == n:
                last = tab + n.to(tl.int64) * row
                tot = tl.zeros((BLOCK,), tl.float32)
                j0 = 0
                while j0 <= m:
                    j = j0 + offs
                    tot += (_p(tl.load(last + j, mask=j <= m, other=NEG), vv)
                            + _p(tl.load(last + 2 * st + j, mask=j <= m, other=NEG), vv))
                    j0 += BLOCK
                tsum = tl.sum(tot, 0)
                rt = 1.0 / tl.where(tsum > 0, tsum, 1.0)
        t = R + m - 1
        if below_too:  # (the first two steps' pairs from below)
            seen = _wait(flag_in, tl.minimum(m1, m1 + R - t), seen)
        a, x, y, fm, fy = _loads(own, st, f_in, m1, t, offs, lane, bottom, m, NEG)
        a_n, x_n, y_n, fm_n, fy_n = _loads(own, st, f_in, m1, t - 1, offs, lane, bottom, m, NEG)
        qx_last = tl.zeros((BLOCK,), tl.float32)  # QX(i, j + 1): the lane's last step
        qm_last = tl.zeros((BLOCK,), tl.float32)  # QM(i, j + 1)
        up_m = tl.zeros((BLOCK,), tl.float32)  # QM(i + 1, j + 1) and QY(i + 1, j), from the lane below
        up_y = tl.zeros((BLOCK,), tl.float32)
        dqx_last = tl.zeros((BLOCK,), tl.float32)  # HVP: their derivatives
        dqm_last = tl.zeros((BLOCK,), tl.float32)
        up_dm = tl.zeros((BLOCK,), tl.float32)
        up_dy = tl.zeros((BLOCK,), tl.float32)
        da = dqx_last
        dx = dqx_last
        dy = dqx_last
        dfm = dqx_last
        dfy = dqx_last
        da_n = dqx_last
        dx_n = dqx_last
        dy_n = dqx_last
        dfm_n = dqx_last
        dfy_n = dqx_last
        if HVP:
            da, dx, dy, dfm, dfy = _loads(down, st, f_in + 2 * m1, m1, t, offs, lane, bottom, m, 0.0)
            da_n, dx_n, dy_n, dfm_n, dfy_n = _loads(down, st, f_in + 2 * m1, m1, t - 1, offs, lane, bottom, m, 0.0)
        g0, g1, g2, g3, g4, g5, g6, g7 = _eight_registers(BLOCK)  # the gradient of the last 8 steps, latest first
        while t >= 0:  # ROUND steps a round, no branch inside (steps past 0: no live lane)
            if below_too & (t - 1 - R >= 0):
                seen = _wait(flag_in, tl.minimum(m1, m1 - (t - ROUND - R)), seen)
            for _ in tl.static_range(ROUND):
                jp = t - PREFETCH - offs
                ok_p = lane & (jp >= 0) & (jp <= m)
                _prefetch(own + jp, ok_p)
                _prefetch(own + st + jp, ok_p)
                _prefetch(own + 2 * st + jp, ok_p)
                a_nn, x_nn, y_nn, fm_nn, fy_nn = _loads(own, st, f_in, m1, t - 2, offs, lane, bottom, m, NEG)
                j = t - offs
                live = lane & (j >= 0) & (j <= m)
                pdm, pdx, pdy, pd0 = _probs(a, x, y, MODE == 1)  # into M(i + 1, j + 1)
                pym, pyx, pyy, _ = _probs(a - o, x - o, y - e, False)  # into Y(i + 1, j)
                pxm, pxx, pxy, _ = _probs(a - o, x - e, y - o, False)  # into X(i, j + 1)
                bm = tl.where(has_below, tl.where(bottom, fm, up_m), 0.0)
                by = tl.where(has_below, tl.where(bottom, fy, up_y), 0.0)
                qm = bm * pdm + by * pym + qx_last * pxm
                qx = bm * pdx + by * pyx + qx_last * pxx
                qy = bm * pdy + by * pyy + qx_last * pxy
                if HVP:
                    _prefetch(down + jp, ok_p)
                    _prefetch(down + st + jp, ok_p)
                    _prefetch(down + 2 * st + jp, ok_p)
                    da_nn, dx_nn, dy_nn, dfm_nn, dfy_nn = _loads(down, st, f_in + 2 * m1, m1, t - 2, offs, lane,
                                                                 bottom, m, 0.0)
                    dbm = tl.where(has_below, tl.where(bottom, dfm, up_dm), 0.0)
                    dby = tl.where(has_below, tl.where(bottom, dfy, up_dy), 0.0)
                    cdm, cdx, cdy = _centred3(pdm, pdx, pdy, da, dx, dy, pd0)  # (each edge's dp = p c)
                    cym, cyx, cyy = _centred3(pym, pyx, pyy, da - zo, dx - zo, dy - ze, 0.0)
                    cxm, cxx, cxy = _centred3(pxm, pxx, pxy, da - zo, dx - ze, dy - zo, 0.0)
                    dqm = (dbm + bm * cdm) * pdm + (dby + by * cym) * pym + (dqx_last + qx_last * cxm) * pxm
                    dqx = (dbm + bm * cdx) * pdx + (dby + by * cyx) * pyx + (dqx_last + qx_last * cxx) * pxx
                    dqy = (dbm + bm * cdy) * pdy + (dby + by * cyy) * pyy + (dqx_last + qx_last * cxy) * pxy
                if MODE == 0:  # the end at (n, m): normalised over its three states
                    at = last_row & (j == m)
                    qm += tl.where(at, g * pdm, 0.0)
                    qx += tl.where(at, g * pdx, 0.0)
                    qy += tl.where(at, g * pdy, 0.0)
                    if HVP:
                        dqm += tl.where(at, g * pdm * cdm, 0.0)
                        dqx += tl.where(at, g * pdx * cdx, 0.0)
                        dqy += tl.where(at, g * pdy * cdy, 0.0)
                elif MODE == 1:  # an end at every M
                    end_m = tl.where(j >= 1, g * _p(a, vv), 0.0)
                    qm += end_m
                    if HVP:
                        dqm += end_m * (da - dvv)
                else:  # ends at M and Y of row n
                    end_m = tl.where(last_row, (g * rt) * _p(a, vv), 0.0)
                    end_y = tl.where(last_row, (g * rt) * _p(y, vv), 0.0)
                    qm += end_m
                    qy += end_y
                    if HVP:
                        dqm += end_m * (da - dvv)
                        dqy += end_y * (dy - dvv)
                qm = tl.where(live, qm, 0.0)
                qx = tl.where(live, qx, 0.0)
                qy = tl.where(live, qy, 0.0)
                if HVP:
                    dqm = tl.where(live, dqm, 0.0)
                    dqx = tl.where(live, dqx, 0.0)
                    dqy = tl.where(live, dqy, 0.0)
                    sum_o += tl.where(live, dby * (pym + pyx) + by * (pym * cym + pyx * cyx)
                                      + dqx_last * (pxm + pxy) + qx_last * (pxm * cxm + pxy * cxy), 0.0)
                    sum_e += tl.where(live, dby * pyy + by * pyy * cyy + dqx_last * pxx + qx_last * pxx * cxx, 0.0)
                    gval = dqm
                    tl.store(f_out + 2 * m1 + j, dqm_last, mask=top & live)
                    tl.store(f_out + 3 * m1 + j, dqy, mask=top & live)
                    hand = tl.gather(tl.join(tl.join(qm_last, qy), tl.join(dqm_last, dqy)), idx_dn4, 0)  # (one gather)
                    pair, dpair = tl.split(hand)
                    up_m, up_y = tl.split(pair)
                    up_dm, up_dy = tl.split(dpair)
                    dqm_last = dqm
                    dqx_last = dqx
                    da, dx, dy, dfm, dfy = da_n, dx_n, dy_n, dfm_n, dfy_n
                    da_n, dx_n, dy_n, dfm_n, dfy_n = da_nn, dx_nn, dy_nn, dfm_nn, dfy_nn
                else:
                    sum_o += tl.where(live, by * (pym + pyx) + qx_last * (pxm + pxy), 0.0)
                    sum_e += tl.where(live, by * pyy + qx_last * pxx, 0.0)
                    gval = qm
                    up_m, up_y = tl.split(tl.gather(tl.join(qm_last, qy), idx_dn, 0))  # (one gather)
                g0, g1, g2, g3, g4, g5, g6, g7 = _latest_first(gval, g0, g1, g2, g3, g4, g5, g6)  # (column j - 1)
                tl.store(f_out + j, qm_last, mask=top & live)
                tl.store(f_out + m1 + j, qy, mask=top & live)
                qm_last = qm
                qx_last = qx
                a, x, y, fm, fy = a_n, x_n, y_n, fm_n, fy_n  # (the loads' pipeline: two steps)
                a_n, x_n, y_n, fm_n, fy_n = a_nn, x_nn, y_nn, fm_nn, fy_nn
                t -= 1
            _store8(grow, t - offs, g0, g1, g2, g3, g4, g5, g6, g7, lane, 0, 7, m)
            if r0 > 0:  # columns t + 1 .. m of f_out are stored
                tl.debug_barrier()
                tl.atomic_xchg(flag_out, tl.minimum(m - t, m1), sem="release")
        if MODE != 1:
            if r0 == 0:  # the flows into row 0, a function of the gaps
                tl.debug_barrier()
                j0 = 0
                while j0 <= m:
                    j = j0 + offs
                    ok = j <= m
                    a = tl.load(tab + j, mask=ok, other=NEG)
                    x = tl.load(tab + st + j, mask=ok, other=NEG)
                    y = tl.load(tab + 2 * st + j, mask=ok, other=NEG)
                    fm = tl.load(f_out + j, mask=ok, other=0.0, cache_modifier=".cg")
                    fy = tl.load(f_out + m1 + j, mask=ok, other=0.0, cache_modifier=".cg")
                    pdm, pdx, pdy, _ = _probs(a, x, y, False)
                    pym, pyx, pyy, _ = _probs(a - o, x - o, y - e, False)
                    if HVP:
                        da = tl.load(dtab + j, mask=ok, other=0.0)
                        dx = tl.load(dtab + st + j, mask=ok, other=0.0)
                        dy = tl.load(dtab + 2 * st + j, mask=ok, other=0.0)
                        dfm = tl.load(f_out + 2 * m1 + j, mask=ok, other=0.0, cache_modifier=".cg")
                        dfy = tl.load(f_out + 3 * m1 + j, mask=ok, other=0.0, cache_modifier=".cg")
                        cdm, cdx, cdy = _centred3(pdm, pdx, pdy, da, dx, dy, 0.0)
                        cym, cyx, cyy = _centred3(pym, pyx, pyy, da - zo, dx - zo, dy - ze, 0.0)
                        into_x = tl.where(j >= 1, (dfm + fm * cdx) * pdx + (dfy + fy * cyx) * pyx, 0.0)
                        sum_o += tl.where(ok, dfy * (pym + pyx) + fy * (pym * cym + pyx * cyx) + into_x, 0.0)
                        sum_e += tl.where(ok, dfy * pyy + fy * pyy * cyy + (j - 1).to(tl.float32) * into_x, 0.0)
                    else:
                        into_x = tl.where(j >= 1, fm * pdx + fy * pyx, 0.0)  # X(0, j) = -o - (j - 1) e
                        sum_o += tl.where(ok, fy * (pym + pyx) + into_x, 0.0)
                        sum_e += tl.where(ok, fy * pyy + (j - 1).to(tl.float32) * into_x, 0.0)
                    j0 += BLOCK
        if seen == GAVE_UP:  # a wait gave up: this strip's gradient is NaN, never wrong
            jj = 0
            while jj < m:
                tl.store(grow + jj, float("nan"), mask=lane)
                jj += 1
    d_open = -tl.sum(sum_o, 0)
    d_ext = -tl.sum(sum_e, 0)
    if MODE == 0:
        if (n == 0) & (k == 0):  # the value is row 0's last cell: X(0, m) = -o - (m - 1) e, or M(0, 0)
            d_open = tl.where(HVP, 0.0, tl.where(m >= 1, -g, 0.0))  # (no derivative along z)
            d_ext = tl.where(HVP, 0.0, tl.where(m >= 1, -g * (m - 1).to(tl.float32), 0.0))
    if seen == GAVE_UP:
        d_open = float("nan")
        d_ext = float("nan")
    _finish(d_open, part_ptr, sync_ptr + 2 + B * S, dgo_ptr, b, k, S, 0, BLOCK)
    _finish(d_ext, part_ptr + B * S, sync_ptr + 2 + B * S + B, dge_ptr, b, k, S, 0, BLOCK)


def _sweep(gap_open, gap_extend, q_lens, t_lens, table, value, grad, mode, block, hvp=None):
    """The backward kernel: (gs [B, N, M], dgo [B], dge [B]); ``hvp``: (zo, ze, dtable, dvalue)."""
    B, N1, _, M1 = table.shape
    N, M = N1 - 1, M1 - 1
    gs = table.new_empty(B, N, M)  # (the kernel writes every cell)
    dgo = table.new_empty(B)
    dge = table.new_empty(B)
    if B:
        blk = block or BLOCK
        S = max(1, triton.cdiv(N, blk))
        part = table.new_empty(2, B, S)
        flows = table.new_empty(B, S, 4 if hvp else 2, M + 1)
        sync = torch.zeros(2 + B * S + 2 * B, dtype=torch.int32, device=table.device)
        if grad.dtype != torch.float32:  # (autograd's gradient of a sum is expanded: read with its stride)
            grad = grad.float()
        go, ge = f32(gap_open.reshape(B)), f32(gap_extend.reshape(B))
        zo, ze, dtab, dvalue = hvp or (go, ge, table, value)
        _launch((B * S,), go, ge, q_lens, t_lens, table, table.stride(0), table.stride(1), f32(value), grad,
                grad.stride(0), gs, N * M, M, part, dgo, dge, flows, flows.stride(0), sync, B, S, zo, ze, dtab,
                dvalue, mode, BLOCK=blk, HVP=hvp is not None, num_warps=max(1, blk // 32))
    return gs, dgo, dge


def backward(gap_open, gap_extend, q_lens, t_lens, table, value, grad, mode: int, block=None):
    """(d scores [B, N, M], d gap_open [B], d gap_extend [B]) times grad [B] from
    soft_align_diag3.forward's table and value (gaps [B] or [B, 1, 1], as forward's)."""
    return _sweep(gap_open, gap_extend, q_lens, t_lens, table, value, grad, mode, block)


_launch = Launcher(soft_align_diag3_bwd_kernel)
settle_module(__name__)  # the same cache keys in every process (cache_keys.py)
