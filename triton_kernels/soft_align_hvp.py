"""The Hessian-vector product of soft alignment (three states): the forward half.

A loss on the expected alignment P = d value / d scores needs P's vector-Jacobian
product, which by the Hessian's symmetry is the derivative of the gradient along the
cotangent z (Mensch & Blondel 2018, "Differentiable dynamic programming for structured
prediction and attention", Algorithms 2 and 3): a forward sweep of the node values'
directional derivatives (soft_align_tangent_kernel: dV_to = sum over in-edges of p
(dV_from + z_edge), X by a forward linear scan), then the backward kernel of
soft_align.py with HVP set (the adjoints and their derivatives). Linear gaps run these
three-state kernels too (with extend = open). Holds the full value and tangent tables.

Pure: imports only torch and triton.
"""

import torch
import triton
import triton.language as tl

from .cache_keys import settle_module
from .soft_align import NEG, _block, _gaps, _lin_combine, _p, _sweep, forward, warps_for


@triton.jit(do_not_specialize=['s_b', 's_i', 'MODE', 'g_b', 'g_i', 'g_j', 'tab_b', 'row_stride'])
def soft_align_tangent_kernel(s_ptr, s_b, s_i, go_ptr, ge_ptr, g_b, g_i, g_j, q_ptr, t_ptr, tab_ptr, tab_b,
                              row_stride, value_ptr, zs_ptr, zo_ptr, ze_ptr, dtab_ptr, dvalue_ptr,
                              MODE, BLOCK: tl.constexpr):
    """Program b: the directional derivatives dV of pair b's node values along z (scores zs,
    gaps zo, ze), rows 0..n from the full value table: dV_to = sum over edges p (dV_from +
    z_edge), X by a forward linear scan; and dvalue, the value's (the forward half of the
    Hessian-vector product)."""
    b = tl.program_id(0).to(tl.int64)
    n = tl.load(q_ptr + b).to(tl.int32)
    m = tl.load(t_ptr + b).to(tl.int32)
    value = tl.load(value_ptr + b)
    sp = s_ptr + b * s_b
    zsp = zs_ptr + b * s_b
    gop = go_ptr + b * g_b
    gep = ge_ptr + b * g_b
    zop = zo_ptr + b * g_b
    zep = ze_ptr + b * g_b
    st = row_stride // 3
    offs = tl.arange(0, BLOCK)
    dvalue = tl.zeros((BLOCK,), tl.float32)
    den = tl.zeros((BLOCK,), tl.float32)  # (local: the ends' probabilities)
    i = 0
    while i <= n:
        vp = tab_ptr + b * tab_b + i.to(tl.int64) * row_stride
        pp = vp - row_stride
        dvp = dtab_ptr + b * tab_b + i.to(tl.int64) * row_stride
        dpp = dvp - row_stride
        gx_row = (tl.maximum(i, 1) - 1).to(tl.int64)
        carry = tl.full((), 0.0, tl.float32)  # dX at the chunk's first column
        j0 = 0
        while j0 <= m:
            j = j0 + offs
            inrow = j <= m
            right = j + 1 <= m
            ib = tl.zeros_like(j) + i
            Mi = tl.load(vp + j, mask=inrow, other=NEG)
            Xi = tl.load(vp + st + j, mask=inrow, other=NEG)
            Yi = tl.load(vp + 2 * st + j, mask=inrow, other=NEG)
            Xr = tl.load(vp + st + j + 1, mask=right, other=NEG)
            dM = tl.zeros((BLOCK,), tl.float32)
            dY = tl.zeros((BLOCK,), tl.float32)
            if i > 0:
                left = inrow & (j >= 1)
                s = tl.load(sp + (i - 1).to(tl.int64) * s_i + j - 1, mask=left, other=0.0)
                zs = tl.load(zsp + (i - 1).to(tl.int64) * s_i + j - 1, mask=left, other=0.0)
                lse_in = tl.where(left, Mi - s, NEG)
                pm1 = tl.load(pp + j - 1, mask=left, other=NEG)
                px1 = tl.load(pp + st + j - 1, mask=left, other=NEG)
                py1 = tl.load(pp + 2 * st + j - 1, mask=left, other=NEG)
                d1 = _p(pm1, lse_in)
                d2 = _p(px1, lse_in)
                d3 = _p(py1, lse_in)
                tot = d1 + d2 + d3
                if MODE == 1:
                    tot += _p(tl.zeros_like(lse_in), lse_in)
                tot = tl.where(tot > 0, tot, 1.0)
                dpm1 = tl.load(dpp + j - 1, mask=left, other=0.0)
                dpx1 = tl.load(dpp + st + j - 1, mask=left, other=0.0)
                dpy1 = tl.load(dpp + 2 * st + j - 1, mask=left, other=0.0)
                dM = tl.where(left, zs + (d1 * dpm1 + d2 * dpx1 + d3 * dpy1) / tot, 0.0)
                pm = tl.load(pp + j, mask=inrow, other=NEG)
                px = tl.load(pp + st + j, mask=inrow, other=NEG)
                py = tl.load(pp + 2 * st + j, mask=inrow, other=NEG)
                gy = (i - 1).to(tl.int64) * g_i + (tl.maximum(j, 1) - 1) * g_j
                oy = tl.load(gop + gy, mask=inrow, other=0.0)
                ey = tl.load(gep + gy, mask=inrow, other=0.0)
                zoy = tl.load(zop + gy, mask=inrow, other=0.0)
                zey = tl.load(zep + gy, mask=inrow, other=0.0)
                y1 = _p(pm - oy, Yi)
                y2 = _p(px - oy, Yi)
                y3 = _p(py - ey, Yi)
                tot = y1 + y2 + y3
                tot = tl.where(tot > 0, tot, 1.0)
                dpm = tl.load(dpp + j, mask=inrow, other=0.0)
                dpx = tl.load(dpp + st + j, mask=inrow, other=0.0)
                dpy = tl.load(dpp + 2 * st + j, mask=inrow, other=0.0)
                dY = (y1 * (dpm - zoy) + y2 * (dpx - zoy) + y3 * (dpy - zey)) / tot
            gx = gx_row * g_i + j * g_j
            ox = tl.load(gop + gx, mask=right, other=0.0)
            ex = tl.load(gep + gx, mask=right, other=0.0)
            zox = tl.load(zop + gx, mask=right, other=0.0)
            zex = tl.load(zep + gx, mask=right, other=0.0)
            x1 = _p(Mi - ox, Xr)
            x2 = _p(Xi - ex, Xr)
            x3 = _p(Yi - ox, Xr)
            tot = x1 + x2 + x3
            tot = tl.where(tot > 0, tot, 1.0)
            x1 = tl.where(right, x1 / tot, 0.0)
            x2 = tl.where(right, x2 / tot, 0.0)
            x3 = tl.where(right, x3 / tot, 0.0)
            u = x1 * (dM - zox) + x3 * (dY - zox) - x2 * zex
            sa, sc = tl.associative_scan((u, x2), 0, _lin_combine)  # dX[j + 1] = u[j] + x2[j] dX[j]
            dXn = sa + sc * carry
            carry = tl.sum(tl.where(offs == BLOCK - 1, dXn, 0.0), 0)
            tl.store(dvp + j, dM, mask=inrow)
            tl.store(dvp + 2 * st + j, dY, mask=inrow)
            tl.store(dvp + st + j + 1, dXn, mask=right)
            tl.store(dvp + st + j, tl.zeros((BLOCK,), tl.float32), mask=j == 0)
            if MODE == 1:  # local ends: every M cell of rows 1..n
                cells = inrow & (j >= 1) & (ib >= 1)
                pe = tl.where(cells, _p(Mi, value + tl.zeros_like(Mi)), 0.0)
                dvalue += pe * dM
                den += pe
            j0 += BLOCK
        tl.debug_barrier()
        i += 1
    if MODE == 1:  # sum p dV / sum p (the empty alignment's dV 0): the ends' p sum to 1 only to rounding
        total = tl.sum(den, 0) + tl.exp(-value)
        dvalue = dvalue / total
    else:  # global and semiglobal ends lie in row n (dX of the end cell is stored by now)
        vp = tab_ptr + b * tab_b + n.to(tl.int64) * row_stride
        dvp = dtab_ptr + b * tab_b + n.to(tl.int64) * row_stride
        num = tl.zeros((BLOCK,), tl.float32)
        den = tl.zeros((BLOCK,), tl.float32)
        j0 = 0
        while j0 <= m:
            j = j0 + offs
            if MODE == 0:
                at = j == m
                e3 = tl.where(at, _p(tl.load(vp + 2 * st + j, mask=at, other=NEG), value + tl.zeros_like(num)), 0.0)
                e2 = tl.where(at, _p(tl.load(vp + st + j, mask=at, other=NEG), value + tl.zeros_like(num)), 0.0)
            else:
                at = (j <= m) & ((tl.zeros_like(j) + n > 0) | (j == 0))
                e3 = tl.where(at & (tl.zeros_like(j) + n > 0),
                              _p(tl.load(vp + 2 * st + j, mask=at, other=NEG), value + tl.zeros_like(num)), 0.0)
                e2 = tl.zeros((BLOCK,), tl.float32)
            e1 = tl.where(at, _p(tl.load(vp + j, mask=at, other=NEG), value + tl.zeros_like(num)), 0.0)
            num += (e1 * tl.load(dvp + j, mask=at, other=0.0) + e2 * tl.load(dvp + st + j, mask=at, other=0.0)
                    + e3 * tl.load(dvp + 2 * st + j, mask=at, other=0.0))
            den += e1 + e2 + e3
            j0 += BLOCK
        total = tl.sum(den, 0)
        dvalue = num / tl.where(total > 0, total, 1.0)
    tl.store(dvalue_ptr + b, tl.sum(dvalue, 0))


def hvp(scores, gap_open, gap_extend, q_lens, t_lens, value, grad, z_scores, z_open, z_extend, mode: int,
        linear: bool, block=None, table=None):
    """The derivatives of backward()'s outputs along z = (z_scores, z_open, z_extend) and of
    the value (d value along z): a tangent sweep forward, then the backward kernel with
    the adjoints' tangents. ``table``: forward()'s full table ([B, N + 1, 3, M + 1]) if the
    caller kept it, else it is recomputed. Holds the full value and tangent tables (24 B
    per cell)."""
    s = scores.float().contiguous()
    zs = z_scores.float().contiguous()
    go, ge, zo, ze, strides = _gaps(gap_open, gap_extend, linear, z_open, z_open if linear else z_extend)
    B, N, M = s.shape
    if table is None or table.shape[1:3] != (N + 1, 3):
        _, table = forward(s, go, ge, q_lens, t_lens, mode, linear, 1, block)
    dtab = torch.empty_like(table)
    dvalue = torch.empty(B, dtype=torch.float32, device=s.device)
    value = value.float().contiguous()
    blk = block or _block(M + 1)
    if B:
        soft_align_tangent_kernel[(B,)](s, N * M, M, go, ge, *strides, q_lens, t_lens, table, table.stride(0),
                                        3 * (M + 1), value, zs, zo, ze, dtab, dvalue, MODE=mode,
                                        BLOCK=blk, num_warps=warps_for(blk))
    out = _sweep(s, go, ge, strides, q_lens, t_lens, table, 1, value, grad, mode, linear, block,
                 (dtab, dvalue, zo, ze))
    return (*out, dvalue)


settle_module(__name__)  # the same cache keys in every process (cache_keys.py)
