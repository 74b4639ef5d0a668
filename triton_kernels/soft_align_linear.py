"""Soft alignment with linear gaps: one state per cell (forward and backward sweeps by rows).

With every gap position costing g the three Gotoh states merge into V = lse(M, X, Y):
    D[i, j] = s[i, j] + V[i-1, j-1]              (local: s + lse(0, V[i-1, j-1]))
    U[i, j] = V[i-1, j] - g_y
    V[i, j] = lse(lse(D, U)[i, j], V[i, j-1] - g_x)
(gaps read where soft_align.py's moves read them). A third of the three-state kernel's
transcendentals and saved state (4 B per cell); the in-row term is the same log-semiring
scan, here over V itself (lane j computes V at j). Ends: global V[n, m]; semiglobal
lse_j lse(D, U)[n, j] (an alignment ends at its last non-X column; n = 0: 0); local
lse(0, D over all cells). The backward sweep recomputes the edge probabilities from V
(rows i and i + 1 at step i) and runs the adjoint Q of V right to left, Q[j] = a[j] +
pL[j + 1] Q[j + 1], Q's rows in a two-row scratch. Same layouts and conventions as
soft_align.py.

Pure: imports only torch and triton.
"""

import torch
import triton
import triton.language as tl

from .soft_align import (NEG, _block, _forward_slots, _gaps, _keep_checkpoint, _lin_combine, _log_combine, _lse2,
                         _p, _row_ptr)


@triton.jit
def _linear_row(s_ptr, s_i, go_ptr, g_i, g_j, prev_ptr, out_ptr, i, n, m, value,
                MODE, BLOCK: tl.constexpr, END: tl.constexpr):
    """Row i of V (from the row at prev_ptr) stored at out_ptr; ``value`` with row i's end terms (END)."""
    offs = tl.arange(0, BLOCK)
    carry = tl.full((), NEG, tl.float32)  # V left of the chunk
    gx_row = (tl.maximum(i, 1) - 1).to(tl.int64) * g_i
    j0 = 0
    while j0 <= m:
        j = j0 + offs
        inrow = j <= m
        left = inrow & (j >= 1)
        ib = tl.zeros_like(j) + i
        nb = tl.zeros_like(j) + n
        gx = tl.load(go_ptr + gx_row + (j - 1) * g_j, mask=left, other=0.0)
        c = -gx
        if i == 0:
            if MODE == 0:
                a = tl.where(j == 0, 0.0, NEG)
            elif MODE == 2:
                a = tl.zeros((BLOCK,), tl.float32)
                c = tl.full((BLOCK,), NEG, tl.float32)  # no X in row 0: leading target residues are free
            else:
                a = tl.full((BLOCK,), NEG, tl.float32)
            d = tl.full((BLOCK,), NEG, tl.float32)
        else:
            v1 = tl.load(prev_ptr + j - 1, mask=left, other=NEG)
            s = tl.load(s_ptr + (i - 1).to(tl.int64) * s_i + j - 1, mask=left, other=0.0)
            if MODE == 1:
                v1 = _lse2(v1, tl.zeros_like(v1))
            d = tl.where(left, s + v1, NEG)
            v0 = tl.load(prev_ptr + j, mask=inrow, other=NEG)
            gy = tl.load(go_ptr + (i - 1).to(tl.int64) * g_i + (tl.maximum(j, 1) - 1) * g_j, mask=inrow, other=0.0)
            a = _lse2(d, v0 - gy)
        a = tl.where(inrow, a, NEG)
        sa, sc = tl.associative_scan((a, c), 0, _log_combine)
        v = _lse2(sa, carry + sc)
        carry = tl.max(tl.where(offs == BLOCK - 1, v, NEG), 0)
        tl.store(out_ptr + j, v, mask=inrow)
        if END:
            if MODE == 0:
                t = tl.where((j == m) & (ib == nb), v, NEG)
            elif MODE == 2:
                t = tl.where(inrow & (ib == nb) & ((nb > 0) | (j == 0)), a, NEG)
            else:
                t = tl.where(left & (ib >= 1), d, NEG)
            mx = tl.max(t, 0)
            if mx > NEG:
                value = _lse2(value, mx + tl.log(tl.sum(tl.exp(t - mx), 0)))
        j0 += BLOCK
    return value


@triton.jit(do_not_specialize=['MODE', 'K', 'g_b', 'g_i', 'g_j', 'tab_b', 'work_b', 'row_stride'])
def soft_align_linear_fwd_kernel(s_ptr, s_b, s_i, go_ptr, g_b, g_i, g_j, q_ptr, t_ptr, tab_ptr, tab_b, work_ptr,
                                 work_b, row_stride, K, value_ptr, MODE, BLOCK: tl.constexpr):
    """Program b: pair b's rows 0..n of V; row i in the table (i % K == 0) and, with K > 1,
    in the two-row scratch (slot i % 2) that the next row reads."""
    b = tl.program_id(0).to(tl.int64)
    n = tl.load(q_ptr + b).to(tl.int32)
    m = tl.load(t_ptr + b).to(tl.int32)
    sp = s_ptr + b * s_b
    gp = go_ptr + b * g_b
    if MODE == 1:
        value = tl.full((), 0.0, tl.float32)  # the empty local alignment
    else:
        value = tl.full((), NEG, tl.float32)
    i = 0
    while i <= n:
        out, prev = _forward_slots(tab_ptr, work_ptr, b * tab_b, b * work_b, i, K, row_stride)
        value = _linear_row(sp, s_i, gp, g_i, g_j, prev, out, i, n, m, value, MODE, BLOCK, True)
        tl.debug_barrier()
        _keep_checkpoint(tab_ptr + b * tab_b, out, i, K, row_stride, BLOCK)
        i += 1
    if MODE == 2:
        if n == 0:
            value = tl.full((), 0.0, tl.float32)  # an empty query: the one alignment
    tl.store(value_ptr + b, value)


@triton.jit(do_not_specialize=['MODE', 'K', 'g_b', 'g_i', 'g_j', 'tab_b', 'seg_b', 'q_buf_b', 'row_stride', 'gs_b',
                               'gs_i', 'gg_b', 'gg_i', 'gg_j'])
def soft_align_linear_bwd_kernel(s_ptr, s_b, s_i, go_ptr, g_b, g_i, g_j, q_ptr, t_ptr, tab_ptr, tab_b, seg_ptr,
                                 seg_b, q_buf_ptr, q_buf_b, row_stride, K, value_ptr, grad_ptr, gs_ptr, gs_b, gs_i,
                                 gg_ptr, gg_b, gg_i, gg_j, FULL_GAPS: tl.constexpr, MODE,
                                 BLOCK: tl.constexpr):
    """Program b: Q = d value / d V from row n up to row 0, chunks right to left. Step i
    reads rows i and i + 1: the flows into D[i+1, j+1] and U[i+1, j] (their edge
    probabilities from those two rows; the scores' gradient of row i and the vertical
    gaps' of row i are these flows), then Q of row i by the scan over the horizontal
    edges (probabilities from row i alone, not renormalised: a node's in-edges would need
    row i - 1, which a checkpoint segment may not hold)."""
    b = tl.program_id(0).to(tl.int64)
    n = tl.load(q_ptr + b).to(tl.int32)
    m = tl.load(t_ptr + b).to(tl.int32)
    g = tl.load(grad_ptr + b)
    value = tl.load(value_ptr + b)
    sp = s_ptr + b * s_b
    gp = go_ptr + b * g_b
    offs = tl.arange(0, BLOCK)
    tb = b * tab_b
    sb = b * seg_b
    qb = q_buf_ptr + b * q_buf_b
    rs = row_stride
    sum_g = tl.zeros((BLOCK,), tl.float32)
    end_total = tl.full((), 1.0, tl.float32)  # semiglobal: the sum of the end probabilities (row n)
    c = n // K
    while c >= 0:
        r0 = c * K
        r1 = tl.minimum(r0 + K, n + 1)
        r = r0 + 1
        while r < r1:  # recompute the segment's rows from its checkpoint
            _linear_row(sp, s_i, gp, g_i, g_j, _row_ptr(tab_ptr, seg_ptr, tb, sb, r - 1, K, rs),
                        _row_ptr(tab_ptr, seg_ptr, tb, sb, r, K, rs), r, n, m, value, MODE, BLOCK, False)
            tl.debug_barrier()
            r += 1
        i = r1 - 1
        while i >= r0:
            vp = _row_ptr(tab_ptr, seg_ptr, tb, sb, i, K, rs)
            np_ = _row_ptr(tab_ptr, seg_ptr, tb, sb, i + 1, K, rs)
            qp = qb + (i % 2).to(tl.int64) * rs
            qn = qb + ((i + 1) % 2).to(tl.int64) * rs
            gx_row = (tl.maximum(i, 1) - 1).to(tl.int64)
            if MODE == 2:
                if i == n - 1:  # the ends (D and U of row n): their total
                    row_total = tl.zeros((BLOCK,), tl.float32)
                    j0 = 0
                    while j0 <= m:
                        j = j0 + offs
                        inrow = j <= m
                        v = tl.load(vp + j, mask=inrow, other=NEG)
                        v1 = tl.load(vp + j - 1, mask=inrow & (j >= 1), other=NEG)
                        s = tl.load(sp + i.to(tl.int64) * s_i + j - 1, mask=inrow & (j >= 1), other=0.0)
                        gy = tl.load(gp + i.to(tl.int64) * g_i + (tl.maximum(j, 1) - 1) * g_j, mask=inrow, other=0.0)
                        d = tl.where(inrow & (j >= 1), s + v1, NEG)
                        vv = value + tl.zeros_like(d)
                        row_total += tl.where(inrow, _p(d, vv) + _p(v - gy, vv), 0.0)
                        j0 += BLOCK
                    end_total = tl.sum(row_total, 0)
                    end_total = tl.where(end_total > 0, end_total, 1.0)
            carry = tl.full((), 0.0, tl.float32)  # Q right of the chunk
            jb = m
            while jb >= 0:
                j = jb - offs  # reverse column order: the scan runs right to left
                inrow = j >= 0
                right = inrow & (j + 1 <= m)
                ib = tl.zeros_like(j) + i
                nb = tl.zeros_like(j) + n
                v = tl.load(vp + j, mask=inrow, other=NEG)
                vr = tl.load(vp + j + 1, mask=right, other=NEG)
                a = tl.zeros((BLOCK,), tl.float32)
                if MODE == 0:
                    a = tl.where(inrow & (ib == nb) & (j == m), g, 0.0)
                if i < n:
                    # into D[i+1, j+1] from V[i, j] (weight s[i+1, j+1])
                    s1 = tl.load(sp + i.to(tl.int64) * s_i + j, mask=right, other=0.0)
                    vd = v
                    if MODE == 1:
                        vd = _lse2(v, tl.zeros_like(v))  # beside the start edge
                    d = tl.where(right, s1 + vd, NEG)
                    vn1 = tl.load(np_ + j + 1, mask=right, other=NEG)
                    fd = tl.load(qn + j + 1, mask=right, other=0.0) * _p(d, vn1)
                    # into U[i+1, j] from V[i, j]
                    gy = tl.load(gp + i.to(tl.int64) * g_i + (tl.maximum(j, 1) - 1) * g_j, mask=inrow, other=0.0)
                    u = v - gy
                    vn = tl.load(np_ + j, mask=inrow, other=NEG)
                    fu = tl.load(qn + j, mask=inrow, other=0.0) * _p(u, vn)
                    if MODE == 1:  # local ends: every D of rows 1..n
                        fd += tl.where(right, g * _p(d, value + tl.zeros_like(d)), 0.0)
                    elif MODE == 2:
                        at = (ib + 1 == nb)
                        fd += tl.where(right & at, g * _p(d, value + tl.zeros_like(d)) / end_total, 0.0)
                        fu += tl.where(inrow & at, g * _p(u, value + tl.zeros_like(u)) / end_total, 0.0)
                    tl.store(gs_ptr + b * gs_b + i.to(tl.int64) * gs_i + j, fd, mask=right)
                    if MODE == 1:
                        fd = fd * _p(v, vd)  # the diagonal edge's share beside the start edge
                    a += fd + fu
                    if FULL_GAPS:
                        tl.atomic_add(gg_ptr + b * gg_b + i.to(tl.int64) * gg_i + (tl.maximum(j, 1) - 1) * gg_j,
                                      -fu, mask=inrow)
                    else:
                        sum_g += tl.where(inrow, -fu, 0.0)
                gx = tl.load(gp + gx_row * g_i + j * g_j, mask=right, other=0.0)
                pl = tl.where(right, _p(v - gx, vr), 0.0)  # V[i, j] -> V[i, j+1]
                if MODE == 2:
                    if i == 0:
                        pl = tl.zeros((BLOCK,), tl.float32)  # no X in row 0 (free leading target residues)
                sa, sc = tl.associative_scan((a, pl), 0, _lin_combine)  # Q[j] = a[j] + pL Q[j + 1]
                q = sa + sc * carry
                carry = tl.sum(tl.where(offs == BLOCK - 1, q, 0.0), 0)
                tl.store(qp + j, q, mask=inrow)
                tl.debug_barrier()
                fl = -tl.load(qp + j + 1, mask=right, other=0.0) * pl
                if FULL_GAPS:  # along row i into j + 1: reads [max(i, 1) - 1, j]
                    tl.atomic_add(gg_ptr + b * gg_b + gx_row * gg_i + j * gg_j, fl, mask=right)
                else:
                    sum_g += tl.where(right, fl, 0.0)
                jb -= BLOCK
            tl.debug_barrier()
            i -= 1
        c -= 1
    if not FULL_GAPS:
        tl.store(gg_ptr + b, tl.sum(sum_g, 0))


def forward(scores, gap, q_lens, t_lens, mode: int, K: int, block=None):
    """(value [B], table [B, N // K + 1, 1, M + 1]) of the one-state DP (float32)."""
    s = scores.float().contiguous()
    B, N, M = s.shape
    go, _, (g_b, g_i, g_j) = _gaps(gap, gap, True)
    R, row = N // K + 1, M + 1
    table = torch.empty((B, R, 1, M + 1), dtype=torch.float32, device=s.device)
    work = torch.empty((B, 2, 1, M + 1), dtype=torch.float32, device=s.device) if K > 1 else table
    value = torch.empty(B, dtype=torch.float32, device=s.device)
    if B:
        soft_align_linear_fwd_kernel[(B,)](s, N * M, M, go, g_b, g_i, g_j, q_lens, t_lens, table, R * row, work,
                                           work.stride(0), row, K, value, MODE=mode, BLOCK=block or _block(M + 1))
    return value, table


def backward(scores, gap, q_lens, t_lens, table, value, grad, mode: int, K: int, block=None):
    """(d scores, d gap) times grad: the gap's gradient [B, N, M] if position-specific, else [B]."""
    s = scores.float().contiguous()
    B, N, M = s.shape
    go, _, (g_b, g_i, g_j) = _gaps(gap, gap, True)
    full = go.shape[1:] != (1, 1)
    R, row = table.shape[1], M + 1
    dev = s.device
    seg = torch.empty((B, K, 1, M + 1), dtype=torch.float32, device=dev) if K > 1 else table
    q_buf = torch.empty((B, 2, M + 1), dtype=torch.float32, device=dev)
    gs = torch.zeros((B, N, M), dtype=torch.float32, device=dev)
    g_gap = torch.zeros((B, N, M) if full else (B,), dtype=torch.float32, device=dev)
    if B:
        soft_align_linear_bwd_kernel[(B,)](s, N * M, M, go, g_b, g_i, g_j, q_lens, t_lens, table, R * row, seg,
                                           seg.stride(0), q_buf, q_buf.stride(0), row, K,
                                           value.float().contiguous(), grad.float().contiguous(), gs, N * M, M,
                                           g_gap, N * M if full else 1, M if full else 0, 1 if full else 0,
                                           FULL_GAPS=full, MODE=mode, BLOCK=block or _block(M + 1))
    return gs, g_gap
