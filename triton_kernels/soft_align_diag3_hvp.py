"""The Hessian-vector product of soft alignment with affine gaps of one value per pair (three
Gotoh states) by anti-diagonals, from soft_align_diag3.py's table.

A loss on the expected alignment needs the derivative of the backward's outputs along the
cotangent z (Mensch & Blondel 2018, Algorithms 2 and 3): a forward sweep of the node
values' tangents dV (here: soft_align_diag3_tangent_kernel, into a table of the forward's
layout), then soft_align_diag3_bwd's kernel with HVP set (the adjoints' derivatives). The
tangent sweep takes soft_align_diag3's layout (lane l: row r0 + l + 1, step t: column
t - l), and, as the backward, each cell normalises its three out-edge groups from its own
M, X, Y: it sends its successors
    to M(i + 1, j + 1): sum pd dV,   to Y(i + 1, j): sum py (dV - z_gap),   to X(i, j + 1): sum px (dV - z_gap)
(z_gap: zo for an opening move, ze for an extension), and a cell's dM is zs + what came to
it diagonally, dY and dX what came to them. The lane below takes the first two by one
``tl.gather`` a step; a strip's first lane reads them for the row above from a buffer
(f[b, k]: row kB's terms by column; strip 0 fills it for row 0, strip k - 1's last lane
for the others as it goes; progress counter: columns done).

Pure: imports only torch and triton.
"""

import torch
import triton
import triton.language as tl

from .cache_keys import settle_module
from .launch import Launcher
from .soft_align import NEG, PREFETCH, _eight_registers, _latest_last, _load_still, _p, _prefetch, _store8
from .soft_align_diag import _finish, _wait, f32
from .soft_align_diag3 import BLOCK, ROUND
from .soft_align_diag3_bwd import _probs, _sweep
from .spin import GAVE_UP


@triton.jit(do_not_specialize=['zs_b', 'zs_i', 'tab_b', 'row', 'f_b', 'B', 'S'])
def soft_align_diag3_tangent_kernel(zs_ptr, zs_b, zs_i, go_ptr, ge_ptr, zo_ptr, ze_ptr, q_ptr, t_ptr, tab_ptr, tab_b,
                                    row, value_ptr, dtab_ptr, f_ptr, f_b, part_ptr, den_ptr, dvalue_ptr, sync_ptr, B,
                                    S, MODE: tl.constexpr, BLOCK: tl.constexpr):
    """Program (k, b) from its ticket: the tangents dM, dX, dY of strip k of pair b (rows
    kB + 1 .. kB + B) into dtab (the table's layout; row 0 by strip 0), and the strip's
    shares of d value (MODE 0 global, 1 local, 2 semiglobal: sum over ends p dV, and sum p)
    in part[b, k], den[b, k], combined by the pair's last strip into dvalue[b]. sync[0]: the
    tickets; sync[2 + b S + k]: columns of f[b, k + 1] done; sync[2 + B S + b]: strips finished."""
    ticket = tl.atomic_add(sync_ptr, 1)
    b = (ticket % B).to(tl.int64)
    k = ticket // B
    n = tl.load(q_ptr + b).to(tl.int32)
    m = tl.load(t_ptr + b).to(tl.int32)
    o = tl.load(go_ptr + b)
    e = tl.load(ge_ptr + b)
    zo = tl.load(zo_ptr + b)
    ze = tl.load(ze_ptr + b)
    value = tl.load(value_ptr + b)
    vv = tl.zeros((BLOCK,), tl.float32) + value
    tab = tab_ptr + b * tab_b
    dtab = dtab_ptr + b * tab_b
    st = row // 3  # (the M, X, Y rows of a DP row)
    offs = tl.arange(0, BLOCK)
    top = offs == 0
    m1 = m + 1
    f_in = f_ptr + b * f_b + k.to(tl.int64) * 2 * m1  # row kB's terms: to M below-right, to Y below
    f_out = f_in + 2 * m1
    flag_in = sync_ptr + 2 + b * S + k - 1
    flag_out = flag_in + 1
    seen = 0
    num = tl.zeros((BLOCK,), tl.float32)  # the ends' p dV (global: the end's dV)
    den = tl.zeros((BLOCK,), tl.float32)  # and p
    if k == 0:  # row 0: global X(0, j) = -o - (j - 1) e, semiglobal M(0, j) = 0: tangents -zo - (j - 1) ze, 0
        j0 = 0
        while j0 <= m:
            j = j0 + offs
            ok = j <= m
            d0 = tl.zeros((BLOCK,), tl.float32)
            dx0 = d0
            if MODE == 0:
                dx0 = tl.where(j >= 1, -zo - (j - 1).to(tl.float32) * ze, 0.0)
            tl.store(dtab + j, d0, mask=ok)
            tl.store(dtab + st + j, dx0, mask=ok)
            tl.store(dtab + 2 * st + j, d0, mask=ok)
            a = tl.load(tab + j, mask=ok, other=NEG)
            x = tl.load(tab + st + j, mask=ok, other=NEG)
            y = tl.load(tab + 2 * st + j, mask=ok, other=NEG)
            pdm, pdx, pdy, _ = _probs(a, x, y, MODE == 1)
            pym, pyx, pyy, _ = _probs(a - o, x - o, y - e, False)
            tl.store(f_in + j, pdx * dx0, mask=ok)
            tl.store(f_in + m1 + j, pym * (-zo) + pyx * (dx0 - zo) + pyy * (-ze), mask=ok)
            j0 += BLOCK
        tl.debug_barrier()
        seen = m1
        if MODE == 0:
            if n == 0:  # the value is row 0's last cell
                num = tl.where(top & (m >= 1), -zo - (m - 1).to(tl.float32) * ze, 0.0)
                den = tl.where(top, 1.0, 0.0)
        elif MODE == 1:
            den = tl.where(top, tl.exp(-value), 0.0)  # the empty alignment (its dV: 0)
    idx_up = tl.join(tl.maximum(offs - 1, 0), tl.maximum(offs - 1, 0))  # (each lane reads the lane above)
    r0 = k * BLOCK
    if r0 < n:
        R = tl.minimum(n - r0, BLOCK)
        publish = r0 + R < n  # a strip below reads this one's last row's terms
        lane = offs < R
        i = r0 + 1 + offs
        last_row = i == n
        out_lane = (offs == R - 1) & (offs * 0 + r0 + R < n)  # (a tensor: interpreter masks)
        own = tab + i.to(tl.int64) * row
        down = dtab + i.to(tl.int64) * row
        zrow = zs_ptr + b * zs_b + (r0 + offs).to(tl.int64) * zs_i  # row i - 1 of z
        seen = _wait(flag_in, tl.minimum(2, m1), seen)
        diag = tl.zeros((BLOCK,), tl.float32)  # what (i - 1, j - 1) sends M(i, j)
        up_d = tl.where(top, tl.load(f_in + offs * 0, mask=top, other=0.0, cache_modifier=".cg"), 0.0)
        up_y = tl.where(top, tl.load(f_in + m1 + offs * 0, mask=top, other=0.0, cache_modifier=".cg"), 0.0)
        nx_ok = top & (offs * 0 + 1 <= m)  # lane 0's terms of the next column
        nx_d = tl.load(f_in + 1 + offs * 0, mask=nx_ok, other=0.0, cache_modifier=".cg")
        nx_y = tl.load(f_in + m1 + 1 + offs * 0, mask=nx_ok, other=0.0, cache_modifier=".cg")
        x_left = tl.zeros((BLOCK,), tl.float32)  # what (i, j - 1) sends X(i, j)
        a, x, y, z = _loads(own, st, zrow, 0, offs, lane, m)
        a_n, x_n, y_n, z_n = _loads(own, st, zrow, 1, offs, lane, m)
        t = 0
        T = R + m
        while t < T:  # ROUND steps a round, no branch inside
            seen = _wait(flag_in, tl.minimum(t + ROUND + 2, m1), seen)
            t0 = t
            dm0, dm1, dm2, dm3, dm4, dm5, dm6, dm7 = _eight_registers(BLOCK)  # (the round's tangents, to store)
            dx0, dx1, dx2, dx3, dx4, dx5, dx6, dx7 = _eight_registers(BLOCK)
            dy0, dy1, dy2, dy3, dy4, dy5, dy6, dy7 = _eight_registers(BLOCK)
            for _ in tl.static_range(ROUND):
                jp = t + PREFETCH - offs
                ok_p = lane & (jp >= 0) & (jp <= m)
                _prefetch(own + jp, ok_p)
                _prefetch(own + st + jp, ok_p)
                _prefetch(own + 2 * st + jp, ok_p)
                _prefetch(zrow + jp - 1, ok_p & (jp >= 1))
                a_nn, x_nn, y_nn, z_nn = _loads(own, st, zrow, t + 2, offs, lane, m)
                j = t - offs
                live = lane & (j >= 0) & (j <= m)
                dm = tl.where(live & (j >= 1), z + diag, 0.0)
                dy = tl.where(live, up_y, 0.0)
                dx = tl.where(live & (j >= 1), x_left, 0.0)
                pdm, pdx, pdy, _ = _probs(a, x, y, MODE == 1)
                pym, pyx, pyy, _ = _probs(a - o, x - o, y - e, False)
                pxm, pxx, pxy, _ = _probs(a - o, x - e, y - o, False)
                to_m = pdm * dm + pdx * dx + pdy * dy
                to_y = pym * (dm - zo) + pyx * (dx - zo) + pyy * (dy - ze)
                x_left = pxm * (dm - zo) + pxx * (dx - ze) + pxy * (dy - zo)
                if MODE == 0:  # the end at (n, m): its dV, lse's weights over the three states
                    at = live & last_row & (j == m)
                    num += tl.where(at, to_m, 0.0)
                    den += tl.where(at, 1.0, 0.0)
                elif MODE == 1:  # an end at every M
                    pe = tl.where(live & (j >= 1), _p(a, vv), 0.0)
                    num += pe * dm
                    den += pe
                else:  # ends at M and Y of row n
                    pe = tl.where(live & last_row, _p(a, vv), 0.0)
                    pf = tl.where(live & last_row, _p(y, vv), 0.0)
                    num += pe * dm + pf * dy
                    den += pe + pf
                tl.store(f_out + j, to_m, mask=out_lane & live)
                tl.store(f_out + m1 + j, to_y, mask=out_lane & live)
                dm0, dm1, dm2, dm3, dm4, dm5, dm6, dm7 = _latest_last(dm1, dm2, dm3, dm4, dm5, dm6, dm7, dm)
                dx0, dx1, dx2, dx3, dx4, dx5, dx6, dx7 = _latest_last(dx1, dx2, dx3, dx4, dx5, dx6, dx7, dx)
                dy0, dy1, dy2, dy3, dy4, dy5, dy6, dy7 = _latest_last(dy1, dy2, dy3, dy4, dy5, dy6, dy7, dy)
                diag = up_d
                gd, gy = tl.split(tl.gather(tl.join(to_m, to_y), idx_up, 0))  # (one gather)
                up_d = tl.where(top, nx_d, gd)
                up_y = tl.where(top, nx_y, gy)
                nx_ok = top & (offs * 0 + t + 2 <= m)
                nx_d = tl.load(f_in + t + 2 + offs * 0, mask=nx_ok, other=0.0, cache_modifier=".cg")
                nx_y = tl.load(f_in + m1 + t + 2 + offs * 0, mask=nx_ok, other=0.0, cache_modifier=".cg")
                a, x, y, z = a_n, x_n, y_n, z_n  # (the loads' pipeline: two steps)
                a_n, x_n, y_n, z_n = a_nn, x_nn, y_nn, z_nn
                t += 1
            c0 = t0 - offs  # the round's first column in each lane
            _store8(down, c0, dm0, dm1, dm2, dm3, dm4, dm5, dm6, dm7, lane, 0, 7, m1)
            _store8(down + st, c0, dx0, dx1, dx2, dx3, dx4, dx5, dx6, dx7, lane, 0, 7, m1)
            _store8(down + 2 * st, c0, dy0, dy1, dy2, dy3, dy4, dy5, dy6, dy7, lane, 0, 7, m1)
            if publish:  # columns 0 .. done - 1 of f_out are stored
                tl.debug_barrier()
                done = tl.minimum(t - R + 1, m1)
                if done > 0:
                    tl.atomic_xchg(flag_out, done, sem="release")
        tl.debug_barrier()
    share = tl.sum(num, 0)
    if seen == GAVE_UP:
        share = float("nan")  # a wait gave up: never a wrong number
    _finish(share, part_ptr, sync_ptr + 2 + B * S, dvalue_ptr, b, k, S, 3, BLOCK, den=tl.sum(den, 0),
            den_ptr=den_ptr)


@triton.jit
def _loads(own, st, zrow, u, offs, lane, m):
    """What step u reads: M, X, Y of the lane's cell (-inf where there is none) and zs[i - 1, j - 1]."""
    j = u - offs
    ok = lane & (j >= 0) & (j <= m)
    return (_load_still(own + j, ok, NEG), _load_still(own + st + j, ok, NEG), _load_still(own + 2 * st + j, ok, NEG),
            _load_still(zrow + j - 1, ok & (j >= 1), 0.0))


def hvp(gap_open, gap_extend, q_lens, t_lens, table, value, grad, z_scores, z_open, z_extend, mode: int, block=None):
    """The derivatives of soft_align_diag3_bwd.backward's outputs along z = (z_scores [B, N, M],
    z_open, z_extend [B] or [B, 1, 1]), and d value along z: (d scores, d gap_open, d gap_extend,
    d value). A tangent sweep (4 B per cell more: dtable beside the table), then the backward
    sweep with the adjoints' derivatives."""
    B, N1, _, M1 = table.shape
    N, M = N1 - 1, M1 - 1
    dvalue = table.new_empty(B)
    if not B:
        return table.new_zeros(0, N, M), dvalue, table.new_empty(0), dvalue
    zs = f32(z_scores)
    go, ge, zo, ze = (f32(x.reshape(B)) for x in (gap_open, gap_extend, z_open, z_extend))
    dtab = torch.empty_like(table)
    blk = block or BLOCK
    S = max(1, triton.cdiv(N, blk))
    part = table.new_empty(2, B, S)  # (the shares of sum p dV and of sum p)
    flows = table.new_empty(B, S, 2, M + 1)
    sync = torch.zeros(2 + B * S + B, dtype=torch.int32, device=table.device)
    _launch((B * S,), zs, N * M, M, go, ge, zo, ze, q_lens, t_lens, table, table.stride(0), table.stride(1),
            f32(value), dtab, flows, flows.stride(0), part[0], part[1], dvalue, sync, B, S, mode, BLOCK=blk,
            num_warps=max(1, blk // 32))
    gs, dgo, dge = _sweep(go, ge, q_lens, t_lens, table, value, grad, mode, block, (zo, ze, dtab, dvalue))
    return gs, dgo, dge, dvalue


_launch = Launcher(soft_align_diag3_tangent_kernel)
settle_module(__name__)  # the same cache keys in every process (cache_keys.py)
