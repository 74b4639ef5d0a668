"""Soft (log-sum-exp) alignment, three states (Gotoh): forward and backward sweeps by rows.

One program per pair, a whole DP row per step, the row in BLOCK-wide column chunks with
the scan state carried from chunk to chunk (any length). Recurrences (temperature 1;
torchalign/soft_align.py writes them out with the borders of each mode):
    M[i, j] = s[i, j] + lse(M, X, Y at (i-1, j-1))     (local: lse(0, ...))
    Y[i, j] = lse(M[i-1, j] - o, X[i-1, j] - o, Y[i-1, j] - e)
    X[i, j+1] = lse(H[i, j] - o, X[i, j] - e),   H = lse(M, Y)
M and Y are elementwise from the row above; X is a linear recurrence in the log semiring,
``tl.associative_scan`` over (value, offset) pairs combined (a1, c1), (a2, c2) ->
(lse(a2, a1 + c2), c1 + c2): no cumulative j * gap offsets (float32 would lose them).
Lane j computes X at j + 1, so nothing shifts in registers.

Saved state: the M, X, Y row values (``table`` [B, R, 3, M + 1], every K-th row; with K > 1
the rows in between live in a two-row scratch). The backward sweep (rows upward, chunks
right to left) recomputes each segment of K rows from its checkpoint, then the edge
probabilities from the values (normalised per node, so they sum to 1 even where float32
rounding is large against the temperature), and runs the in-row adjoint recurrence
QX[j] = Q[j] + p_ext QX[j + 1] as a (value, factor) scan in reverse column order.
With affine gaps of one value per pair and every row kept, the forward into this table and
the backward from it run by anti-diagonals instead (soft_align_diag3.py,
soft_align_diag3_bwd.py, and the Hessian-vector product: soft_align_diag3_hvp.py).

Pure: imports only torch and triton.
"""

import os

import torch
import triton
import triton.language as tl

from .cache_keys import settle_module

NEG = tl.constexpr(float("-inf"))
GLOBAL, LOCAL, SEMIGLOBAL = 0, 1, 2
# exp and log as the bare MUFU instructions (ex2/lg2.approx.ftz, by inline PTX, every sm_80+
# GPU): tl.log is a ~25-instruction polynomial and tl.exp carries denormal fix-ups, on the
# chain of every cell (benchmarks/NOTES.md). The interpreter runs no inline PTX: tl.exp/tl.log.
INLINE_PTX = tl.constexpr(os.environ.get("TRITON_INTERPRET") != "1")
FAST_MATH = tl.constexpr(INLINE_PTX.value and os.environ.get("TORCHALIGN_SOFT_FAST_MATH", "1") != "0")


# Steps ahead at which the one-state kernels prefetch into L2 what a later step loads (the
# scores, each lane on its own row; the backward's table): a load issued one step ahead
# waits for DRAM at the next step's register move (benchmarks/NOTES.md). The three-state
# rows prefetch the next row. 0: none (and the interpreter, which runs no inline PTX).
PREFETCH = tl.constexpr(0 if os.environ.get("TRITON_INTERPRET") == "1"
                        else int(os.environ.get("TORCHALIGN_SOFT_PREFETCH", "16")))


@triton.jit
def _store8(rows, c0, s0, s1, s2, s3, s4, s5, s6, s7, lanes, lo, hi, m):
    """A lane's last eight values of an anti-diagonal sweep (registers s0..s7, columns c0[l] + q
    of its row rows[l], q = 0..7) into a row-major output (the one-state backward's gradient,
    soft-DTW's R and gradient): slots lo..hi where the column lies in 0..m - 1 and lanes[l].
    One store of the [BLOCK, 8] tile every eight steps, which Triton lays out with consecutive
    columns across threads (a shuffle through shared memory), in place of a store each step
    that touches a sector per lane (32 a warp: a quarter of the backward's time; every four
    steps gained less, NOTES.md session 32). The tile is built here, where it is stored: built
    in the loop, Triton shuffled each value as it came."""
    # (join adds the last axis: slot 4i + 2j + k is leaf k of pair j of quad i)
    tile = tl.join(tl.join(tl.join(s0, s4), tl.join(s2, s6)), tl.join(tl.join(s1, s5), tl.join(s3, s7)))
    tile = tl.reshape(tile, (s0.shape[0], 8))
    q = tl.arange(0, 8)[None, :]
    c = c0[:, None] + q
    tl.store(rows[:, None] + c, tile, mask=lanes[:, None] & (q >= lo) & (q <= hi) & (c >= 0) & (c < m))


@triton.jit
def _store8_own_row(ptr, row_off, c0, s0, s1, s2, s3, s4, s5, s6, s7, lanes, width):
    """_store8 without the shuffle, for rows that start 16-byte aligned (``width`` % 4 == 0, row l
    at ``ptr + row_off[l]``), called every step: each lane whose columns c0[l] + 0..7 start at a
    multiple of 8 stores them as two 16-byte vectors into its own row (a full 32-byte sector),
    up to ``width``. So columns from the pair's length to ``width`` must hold zeros: a sweep's
    steps past column m - 1 give zeros."""
    start = lanes & ((c0 & 7) == 0) & (c0 >= 0)
    off = tl.multiple_of(row_off + c0, 4)  # (true where start: the other lanes store nothing)
    if INLINE_PTX:  # (as _load_still: no tl.store for the coalescing pass to walk from)
        _store_own4(ptr + off, s0, s1, s2, s3, start & (c0 < width))
        _store_own4(ptr + off + 4, s4, s5, s6, s7, start & (c0 + 4 < width))
    else:
        q = tl.arange(0, 4)[None, :]
        lo = tl.reshape(tl.join(tl.join(s0, s2), tl.join(s1, s3)), (s0.shape[0], 4))
        hi = tl.reshape(tl.join(tl.join(s4, s6), tl.join(s5, s7)), (s0.shape[0], 4))
        tl.store(ptr + off[:, None] + q, lo, mask=(start & (c0 < width))[:, None])
        tl.store(ptr + off[:, None] + 4 + q, hi, mask=(start & (c0 + 4 < width))[:, None])


@triton.jit
def _bits(x):
    """float32 as its int32 bits: an inline-PTX operand beside a pointer (triton 3.6's
    inline_asm_elementwise rejects pointer and float operands in one call)."""
    return x.to(tl.int32, bitcast=True)


@triton.jit
def _store_own4(ptrs, a, b, c, d, mask):
    """Each lane's four float32 as one 16-byte vector at its own 16-byte aligned pointer (inline PTX)."""
    tl.inline_asm_elementwise("mov.b32 $0, 0;\n@$6 st.global.v4.b32 [$1], {$2, $3, $4, $5};", "=r,l,r,r,r,r,b",
                              [ptrs, _bits(a), _bits(b), _bits(c), _bits(d), mask], dtype=tl.int32, is_pure=False,
                              pack=1)


@triton.jit
def _store_own(ptrs, v, mask):
    """tl.store(ptrs, v, mask=mask) of float32 as inline PTX on a GPU (as _load_still: a one-state
    sweep's per-step stores, the coalescing pass's walks); the interpreter: tl.store."""
    if INLINE_PTX:
        tl.inline_asm_elementwise("mov.b32 $0, 0;\n@$3 st.global.b32 [$1], $2;", "=r,l,r,b", [ptrs, _bits(v), mask],
                                  dtype=tl.int32, is_pure=False, pack=1)
    else:
        tl.store(ptrs, v, mask=mask)


@triton.jit
def _load_still(ptrs, mask, other):
    """tl.load(ptrs, mask=mask, other=other) of float32 that no program of the launch writes (the
    scores, a finished table), as inline PTX on a GPU: Triton's coalescing pass walks the kernel's
    whole def-use slice once per tl.load, and the unrolled rounds of the one-state sweeps hold
    dozens (most of their compile time; the loads are the ones Triton emits: the same loop SASS,
    benchmarks/NOTES.md session 34). The interpreter runs no PTX: tl.load."""
    if INLINE_PTX:
        out = tl.inline_asm_elementwise("mov.b32 $0, $3;\n@$2 ld.global.b32 $0, [$1];", "=r,l,b,r",
                                        [ptrs, mask, (tl.zeros_like(mask.to(tl.float32)) + other).to(tl.int32,
                                                                                                    bitcast=True)],
                                        dtype=tl.int32, is_pure=True, pack=1).to(tl.float32, bitcast=True)
    else:
        out = tl.load(ptrs, mask=mask, other=other)
    return out


@triton.jit
def _eight_registers(BLOCK: tl.constexpr):
    """_store8's registers, zero (eight tensors: a Triton loop carries a variable only if its
    body binds it to an object of its own, NOTES.md session 22)."""
    return (tl.zeros((BLOCK,), tl.float32), tl.zeros((BLOCK,), tl.float32), tl.zeros((BLOCK,), tl.float32),
            tl.zeros((BLOCK,), tl.float32), tl.zeros((BLOCK,), tl.float32), tl.zeros((BLOCK,), tl.float32),
            tl.zeros((BLOCK,), tl.float32), tl.zeros((BLOCK,), tl.float32))


@triton.jit
def _latest_first(v, s0, s1, s2, s3, s4, s5, s6):
    """The registers after a step of a sweep whose columns fall: v in front, the oldest out."""
    return v, s0, s1, s2, s3, s4, s5, s6


@triton.jit
def _latest_last(s1, s2, s3, s4, s5, s6, s7, v):
    """The registers after a step of a sweep whose columns rise: v behind, the oldest out."""
    return s1, s2, s3, s4, s5, s6, s7, v


@triton.jit
def _prefetch(ptrs, mask):
    """Bring the 32-byte sectors at ``ptrs`` (where ``mask``) into L2 (ptxas drops an L1 prefetch
    on sm_90). Only an address that starts a sector asks: a lane walking its row asks once per
    sector, not once a step (every step's ask made L2 68 % busy with repeats)."""
    if PREFETCH > 0:
        tl.inline_asm_elementwise("{ .reg .pred p, q; .reg .b64 a; and.b64 a, $1, 31; setp.eq.u64 q, a, 0; "
                                  "setp.ne.and.b32 p, $2, 0, q; @p prefetch.global.L2 [$1]; mov.b32 $0, 0; }",
                                  "=r,l,r", [ptrs, mask.to(tl.int32)], dtype=tl.int32, is_pure=False,
                                  pack=1)


@triton.jit
def _exp2(x):
    """2^x: with FAST_MATH the bare MUFU instruction (ex2.approx.ftz), else tl.exp2."""
    if FAST_MATH:
        out = tl.inline_asm_elementwise("ex2.approx.ftz.f32 $0, $1;", "=f,f", [x], dtype=tl.float32, is_pure=True,
                                        pack=1)
    else:
        out = tl.exp2(x)
    return out


@triton.jit
def _log2(x):
    """log2 x: with FAST_MATH the bare MUFU instruction (lg2.approx.ftz), else tl.log2."""
    if FAST_MATH:
        out = tl.inline_asm_elementwise("lg2.approx.ftz.f32 $0, $1;", "=f,f", [x], dtype=tl.float32, is_pure=True,
                                        pack=1)
    else:
        out = tl.log2(x)
    return out


@triton.jit
def _rcp(x):
    """1 / x: with FAST_MATH the bare MUFU instruction (rcp.approx.ftz), not an IEEE division's
    range scaling around it (the backward normalises three edge probabilities by it)."""
    if FAST_MATH:
        out = tl.inline_asm_elementwise("rcp.approx.ftz.f32 $0, $1;", "=f,f", [x], dtype=tl.float32, is_pure=True,
                                        pack=1)
    else:
        out = 1.0 / x
    return out


@triton.jit
def _opaque(t):
    """t through a move LLVM cannot see into. A sweep's step counter, stepped through it, stays
    32-bit: LLVM widens an affine counter to 64 bits for the addresses it feeds, and then every
    column compare and index of the step takes two instructions (48 of the one-state backward's
    349 a step). Used where it measured faster: the one-state backward only (the forwards lost
    up to 10 %, NOTES.md session 33). Not under the interpreter (no inline PTX)."""
    if INLINE_PTX:
        t = tl.inline_asm_elementwise("mov.b32 $0, $1;", "=r,r", [t], dtype=tl.int32, is_pure=True, pack=1)
    return t


@triton.jit
def _exp(x):
    if FAST_MATH:
        out = _exp2(x * 1.4426950408889634)
    else:
        out = tl.exp(x)
    return out


@triton.jit
def _log(x):
    if FAST_MATH:
        out = _log2(x) * 0.6931471805599453
    else:
        out = tl.log(x)
    return out


@triton.jit
def _lse2(a, b):
    """log(exp(a) + exp(b)) with one exp and one log (the scan's combine calls it most)."""
    m = tl.maximum(a, b)
    d = tl.minimum(a, b) - m  # <= 0; NaN where both are -inf, masked below
    return tl.where(m == NEG, NEG, m + _log(1.0 + _exp(d)))


@triton.jit
def _lse3(a, b, c):
    m = tl.maximum(tl.maximum(a, b), c)
    ms = tl.where(m == NEG, 0.0, m)
    return tl.where(m == NEG, NEG, ms + _log(_exp(a - ms) + _exp(b - ms) + _exp(c - ms)))


@triton.jit
def _log_combine(a1, c1, a2, c2):
    return _lse2(a2, a1 + c2), c1 + c2


@triton.jit
def _lin_combine(a1, c1, a2, c2):
    return a2 + c2 * a1, c1 * c2


@triton.jit
def _p(src, to):
    """exp(src - to), 0 where the node is unreachable (to = -inf)."""
    return tl.where(to == NEG, 0.0, _exp(src - tl.where(to == NEG, 0.0, to)))


@triton.jit
def _centred3(p1, p2, p3, t1, t2, t3, p0):
    """An edge's tangent less the destination's: t_k - sum_l p_l t_l over a node's in-edges
    (p0: a start edge's probability, its tangent 0), taken from the edges' own p and t, not
    the destination's stored tangent: p sums to 1 only to rounding, and that error times |t|
    would stay in dp = p (t_k - t_to); differences from a live edge's t cancel it."""
    ref = tl.where(p1 > 0, t1, tl.where(p2 > 0, t2, t3))
    c1 = t1 - ref
    c2 = t2 - ref
    c3 = t3 - ref
    mean = p1 * c1 + p2 * c2 + p3 * c3 - p0 * ref
    return c1 - mean, c2 - mean, c3 - mean


@triton.jit
def _row_ptr(tab_ptr, seg_ptr, b_tab, b_seg, i, K, row_stride):
    """Where row i's values live: checkpoint rows (i % K == 0) in the table, others in the scratch."""
    if i % K == 0:
        out = tab_ptr + b_tab + (i // K).to(tl.int64) * row_stride
    else:
        out = seg_ptr + b_seg + (i % K).to(tl.int64) * row_stride
    return out


@triton.jit
def _forward_row(s_ptr, s_i, go_ptr, ge_ptr, g_i, g_j, prev_ptr, out_ptr, i, n, m, value, st,
                 MODE, BLOCK: tl.constexpr, END: tl.constexpr):
    """Row i (from the row at prev_ptr) stored at out_ptr; returns ``value`` with row i's
    end terms added (END). st: the stride between the M, X, Y rows."""
    offs = tl.arange(0, BLOCK)
    carry = tl.full((), NEG, tl.float32)  # X at the chunk's first column
    gx_row = (tl.maximum(i, 1) - 1).to(tl.int64) * g_i  # moves along row i read row max(i, 1) - 1
    j0 = 0
    while j0 <= m:
        j = j0 + offs
        inrow = j <= m
        ib = tl.zeros_like(j) + i  # (scalar conditions as vectors: masks must be blocks)
        nb = tl.zeros_like(j) + n
        if i == 0:
            if MODE == 0:
                Mv = tl.where(j == 0, 0.0, NEG)
            elif MODE == 2:
                Mv = tl.zeros((BLOCK,), tl.float32)
            else:
                Mv = tl.full((BLOCK,), NEG, tl.float32)
            Yv = tl.full((BLOCK,), NEG, tl.float32)
        else:
            left = inrow & (j >= 1)
            pm1 = tl.load(prev_ptr + j - 1, mask=left, other=NEG)
            px1 = tl.load(prev_ptr + st + j - 1, mask=left, other=NEG)
            py1 = tl.load(prev_ptr + 2 * st + j - 1, mask=left, other=NEG)
            s = tl.load(s_ptr + (i - 1).to(tl.int64) * s_i + j - 1, mask=left, other=0.0)
            _prefetch(s_ptr + i.to(tl.int64) * s_i + j - 1, left & (ib < nb))  # the next row's
            d = _lse3(pm1, px1, py1)
            if MODE == 1:
                d = _lse2(d, tl.zeros_like(d))
            Mv = tl.where(left, s + d, NEG)
            pm = tl.load(prev_ptr + j, mask=inrow, other=NEG)
            px = tl.load(prev_ptr + st + j, mask=inrow, other=NEG)
            py = tl.load(prev_ptr + 2 * st + j, mask=inrow, other=NEG)
            gy = (i - 1).to(tl.int64) * g_i + (tl.maximum(j, 1) - 1) * g_j
            oy = tl.load(go_ptr + gy, mask=inrow, other=0.0)
            ey = tl.load(ge_ptr + gy, mask=inrow, other=0.0)
            Yv = _lse3(pm - oy, px - oy, py - ey)
        right = j + 1 <= m
        ox = tl.load(go_ptr + gx_row + j * g_j, mask=right, other=0.0)
        ex = tl.load(ge_ptr + gx_row + j * g_j, mask=right, other=0.0)
        a = _lse2(Mv, Yv) - ox
        if MODE == 2:
            if i == 0:
                a = tl.full((BLOCK,), NEG, tl.float32)  # no X in row 0: leading target residues are free
        a = tl.where(right, a, NEG)
        sa, sc = tl.associative_scan((a, -ex), 0, _log_combine)
        Xn = _lse2(sa, carry + sc)  # X at j + 1
        carry = tl.max(tl.where(offs == BLOCK - 1, Xn, NEG), 0)
        tl.store(out_ptr + j, Mv, mask=inrow)
        tl.store(out_ptr + 2 * st + j, Yv, mask=inrow)
        tl.store(out_ptr + st + j + 1, Xn, mask=right)
        tl.store(out_ptr + st + j, tl.full((BLOCK,), NEG, tl.float32), mask=j == 0)
        if END:
            if MODE == 0:
                t1 = tl.where((j == m) & (ib == nb), Mv, NEG)
                t2 = tl.where((j == m) & (ib == nb), Yv, NEG)
                t3 = tl.where((j + 1 == m) & (ib == nb), Xn, NEG)
            elif MODE == 2:
                cols = inrow & (ib == nb) & ((nb > 0) | (j == 0))
                t1 = tl.where(cols, Mv, NEG)
                t2 = tl.where(cols & (nb > 0), Yv, NEG)
                t3 = tl.full((BLOCK,), NEG, tl.float32)
            else:
                t1 = tl.where(inrow & (j >= 1) & (ib >= 1), Mv, NEG)
                t2 = tl.full((BLOCK,), NEG, tl.float32)
                t3 = t2
            mx = tl.max(tl.maximum(tl.maximum(t1, t2), t3), 0)
            if mx > NEG:
                tot = tl.sum(tl.exp(t1 - mx) + tl.exp(t2 - mx) + tl.exp(t3 - mx), 0)
                value = _lse2(value, mx + tl.log(tot))
        j0 += BLOCK
    return value


@triton.jit(do_not_specialize=['s_b', 's_i', 'MODE', 'K', 'g_b', 'g_i', 'g_j', 'tab_b', 'work_b', 'row_stride'])
def soft_align_fwd_kernel(s_ptr, s_b, s_i, go_ptr, ge_ptr, g_b, g_i, g_j, q_ptr, t_ptr, tab_ptr, tab_b, work_ptr,
                          work_b, row_stride, K, value_ptr, MODE, BLOCK: tl.constexpr):
    """Program b: pair b's rows 0..n; row i stored in the table (i % K == 0) and, with
    K > 1, in the two-row scratch (slot i % 2) that the next row reads."""
    b = tl.program_id(0).to(tl.int64)
    n = tl.load(q_ptr + b).to(tl.int32)
    m = tl.load(t_ptr + b).to(tl.int32)
    sp = s_ptr + b * s_b
    gop = go_ptr + b * g_b
    gep = ge_ptr + b * g_b
    st = row_stride // 3
    if MODE == 1:
        value = tl.full((), 0.0, tl.float32)  # the empty local alignment
    else:
        value = tl.full((), NEG, tl.float32)
    i = 0
    while i <= n:
        if K == 1:
            out = tab_ptr + b * tab_b + i.to(tl.int64) * row_stride
            prev = out - row_stride
        else:
            out = work_ptr + b * work_b + (i % 2).to(tl.int64) * row_stride
            prev = work_ptr + b * work_b + ((i + 1) % 2).to(tl.int64) * row_stride
        value = _forward_row(sp, s_i, gop, gep, g_i, g_j, prev, out, i, n, m, value, st, MODE, BLOCK, True)
        tl.debug_barrier()
        if K > 1:
            if i % K == 0:  # a checkpoint: copy the row into the table
                dst = tab_ptr + b * tab_b + (i // K).to(tl.int64) * row_stride
                c0 = 0
                while c0 < row_stride:
                    c = c0 + tl.arange(0, BLOCK)
                    tl.store(dst + c, tl.load(out + c, mask=c < row_stride), mask=c < row_stride)
                    c0 += BLOCK
        i += 1
    tl.store(value_ptr + b, value)


@triton.jit(do_not_specialize=['s_b', 's_i', 'MODE', 'K', 'g_b', 'g_i', 'g_j', 'tab_b', 'seg_b', 'q_buf_b', 'row_stride', 'gs_b',
                               'gs_i', 'gg_b', 'gg_i', 'gg_j'])
def soft_align_bwd_kernel(s_ptr, s_b, s_i, go_ptr, ge_ptr, g_b, g_i, g_j, q_ptr, t_ptr, tab_ptr, tab_b, seg_ptr,
                          seg_b, q_buf_ptr, q_buf_b, row_stride, K, value_ptr, grad_ptr, gs_ptr, gs_b, gs_i,
                          gop_ptr, gep_ptr, gg_b, gg_i, gg_j, dtab_ptr, dvalue_ptr, zo_ptr, ze_ptr,
                          dq_buf_ptr, FULL_GAPS: tl.constexpr, MODE, HVP: tl.constexpr,
                          BLOCK: tl.constexpr):
    """Program b: pair b's adjoints Q (d value / d node) from row n up to row 0; the scores'
    gradient is Q at M; the gaps' gradients minus the expected moves of each kind, into
    [B, N, M] (FULL_GAPS) or one sum per pair.

    HVP (K = 1): also the adjoints' derivatives dQ along the direction z (scores, gaps
    zo, ze), from the values' tangents (dtab, dvalue: soft_align_tangent_kernel): each
    edge's probability p changes by dp = p (dV_from + z_edge - dV_to) (dV_to taken as the
    in-edges' sum, _centred3), and dQ_from =
    sum over edges (dQ_to p + Q_to dp). The outputs then hold the derivatives of the
    gradients along z (Mensch & Blondel 2018, the backward half of the Hessian-vector
    product); the gradients themselves are not written."""
    b = tl.program_id(0).to(tl.int64)
    n = tl.load(q_ptr + b).to(tl.int32)
    m = tl.load(t_ptr + b).to(tl.int32)
    g = tl.load(grad_ptr + b)
    value = tl.load(value_ptr + b)
    sp = s_ptr + b * s_b
    gop = go_ptr + b * g_b
    gep = ge_ptr + b * g_b
    zop = zo_ptr + b * g_b
    zep = ze_ptr + b * g_b
    st = row_stride // 3
    offs = tl.arange(0, BLOCK)
    tb = b * tab_b
    sb = b * seg_b
    qb = q_buf_ptr + b * q_buf_b
    dqb = dq_buf_ptr + b * q_buf_b
    dtb = dtab_ptr + b * tab_b
    if HVP:
        dvalue = tl.load(dvalue_ptr + b)
    else:
        dvalue = tl.full((), 0.0, tl.float32)
    sum_o = tl.zeros((BLOCK,), tl.float32)
    sum_e = tl.zeros((BLOCK,), tl.float32)
    end_total = tl.full((), 1.0, tl.float32)  # semiglobal: the sum of the end probabilities (row n)
    c = n // K
    while c >= 0:
        r0 = c * K
        r1 = tl.minimum(r0 + K, n + 1)
        r = r0 + 1
        while r < r1:  # recompute the segment's rows from its checkpoint
            _forward_row(sp, s_i, gop, gep, g_i, g_j, _row_ptr(tab_ptr, seg_ptr, tb, sb, r - 1, K, row_stride),
                         _row_ptr(tab_ptr, seg_ptr, tb, sb, r, K, row_stride), r, n, m, value, st, MODE, BLOCK,
                         False)
            tl.debug_barrier()
            r += 1
        i = r1 - 1
        while i >= r0:
            vp = _row_ptr(tab_ptr, seg_ptr, tb, sb, i, K, row_stride)
            np_ = _row_ptr(tab_ptr, seg_ptr, tb, sb, i + 1, K, row_stride)
            dvp = dtb + i.to(tl.int64) * row_stride  # (HVP only: K = 1)
            qp = qb + (i % 2).to(tl.int64) * row_stride
            qn = qb + ((i + 1) % 2).to(tl.int64) * row_stride
            dqp = dqb + (i % 2).to(tl.int64) * row_stride
            dqn = dqb + ((i + 1) % 2).to(tl.int64) * row_stride
            has_next = i < n
            if MODE == 2:
                if i == n:
                    if n > 0:
                        end_total = tl.full((), 0.0, tl.float32)
                        j0 = 0
                        while j0 <= m:
                            j = j0 + offs
                            mm = tl.load(vp + j, mask=j <= m, other=NEG)
                            yy = tl.load(vp + 2 * st + j, mask=j <= m, other=NEG)
                            vv = value + tl.zeros_like(mm)
                            end_total += tl.sum(_p(mm, vv) + _p(yy, vv), 0)
                            j0 += BLOCK
                        end_total = tl.where(end_total > 0, end_total, 1.0)
            carry = tl.full((), 0.0, tl.float32)  # QX right of the chunk
            dcarry = tl.full((), 0.0, tl.float32)  # dQX right of the chunk
            gx_row = (tl.maximum(i, 1) - 1).to(tl.int64)
            pv = _row_ptr(tab_ptr, seg_ptr, tb, sb, tl.maximum(i - 1, 0), K, row_stride)  # the next row's values
            jb = m
            while jb >= 0:
                j = jb - offs  # reverse column order: the scan runs right to left
                inrow = j >= 0
                for state in tl.static_range(3):
                    _prefetch(pv + state * st + j, inrow & (i > r0))
                _prefetch(sp + (i - 1).to(tl.int64) * s_i + j, inrow & (j < m) & (i >= 1))
                ib = tl.zeros_like(j) + i  # (scalar conditions as vectors: masks must be blocks)
                nb = tl.zeros_like(j) + n
                right = inrow & (j + 1 <= m)
                Mi = tl.load(vp + j, mask=inrow, other=NEG)
                Xi = tl.load(vp + st + j, mask=inrow, other=NEG)
                Yi = tl.load(vp + 2 * st + j, mask=inrow, other=NEG)
                Xr = tl.load(vp + st + j + 1, mask=right, other=NEG)
                qm = tl.zeros((BLOCK,), tl.float32)
                qx = tl.zeros((BLOCK,), tl.float32)
                qy = tl.zeros((BLOCK,), tl.float32)
                dqm = tl.zeros((BLOCK,), tl.float32)
                dqx = tl.zeros((BLOCK,), tl.float32)
                dqy = tl.zeros((BLOCK,), tl.float32)
                if HVP:
                    dMi = tl.load(dvp + j, mask=inrow, other=0.0)
                    dXi = tl.load(dvp + st + j, mask=inrow, other=0.0)
                    dYi = tl.load(dvp + 2 * st + j, mask=inrow, other=0.0)
                else:
                    dMi = qm
                    dXi = qm
                    dYi = qm
                # the end edges leaving row i (weight 0; dp = p (dV - dvalue))
                if MODE == 0:
                    at = inrow & (ib == nb) & (j == m)
                    e1 = tl.where(at, _p(Mi, value + tl.zeros_like(Mi)), 0.0)
                    e2 = tl.where(at, _p(Xi, value + tl.zeros_like(Xi)), 0.0)
                    e3 = tl.where(at, _p(Yi, value + tl.zeros_like(Yi)), 0.0)
                    tot = e1 + e2 + e3
                    tot = tl.where(tot > 0, tot, 1.0)
                    e1 = g * e1 / tot
                    e2 = g * e2 / tot
                    e3 = g * e3 / tot
                elif MODE == 2:
                    cols = inrow & (ib == nb) & ((nb > 0) | (j == 0))
                    e1 = tl.where(cols, g * _p(Mi, value + tl.zeros_like(Mi)) / end_total, 0.0)
                    e2 = tl.zeros((BLOCK,), tl.float32)
                    e3 = tl.where(cols & (nb > 0), g * _p(Yi, value + tl.zeros_like(Yi)) / end_total, 0.0)
                else:
                    cells = inrow & (j >= 1) & (ib >= 1) & (ib <= nb)
                    e1 = tl.where(cells, g * _p(Mi, value + tl.zeros_like(Mi)), 0.0)
                    e2 = tl.zeros((BLOCK,), tl.float32)
                    e3 = e2
                qm += e1
                qx += e2
                qy += e3
                if HVP:
                    dqm += e1 * (dMi - dvalue)
                    dqx += e2 * (dXi - dvalue)
                    dqy += e3 * (dYi - dvalue)
                if has_next:
                    Mn1 = tl.load(np_ + j + 1, mask=right, other=NEG)
                    Yn = tl.load(np_ + 2 * st + j, mask=inrow, other=NEG)
                    s1 = tl.load(sp + i.to(tl.int64) * s_i + j, mask=right, other=0.0)
                    lse_in = tl.where(right, Mn1 - s1, NEG)
                    d1 = _p(Mi, lse_in)
                    d2 = _p(Xi, lse_in)
                    d3 = _p(Yi, lse_in)
                    tot = d1 + d2 + d3
                    d0 = tl.zeros_like(d1)
                    if MODE == 1:
                        d0 = _p(tl.zeros_like(lse_in), lse_in)  # the start edge
                        tot += d0
                    tot = tl.where(tot > 0, tot, 1.0)
                    d1 = d1 / tot
                    d2 = d2 / tot
                    d3 = d3 / tot
                    qmn = tl.load(qn + j + 1, mask=right, other=0.0)
                    qm += qmn * d1
                    qx += qmn * d2
                    qy += qmn * d3
                    gy = i.to(tl.int64) * g_i + (tl.maximum(j, 1) - 1) * g_j
                    oy = tl.load(gop + gy, mask=inrow, other=0.0)
                    ey = tl.load(gep + gy, mask=inrow, other=0.0)
                    y1 = _p(Mi - oy, Yn)
                    y2 = _p(Xi - oy, Yn)
                    y3 = _p(Yi - ey, Yn)
                    tot = y1 + y2 + y3
                    tot = tl.where(tot > 0, tot, 1.0)
                    y1 = y1 / tot
                    y2 = y2 / tot
                    y3 = y3 / tot
                    qyn = tl.load(qn + 2 * st + j, mask=inrow, other=0.0)
                    qm += qyn * y1
                    qx += qyn * y2
                    qy += qyn * y3
                    if HVP:  # (the score's direction is common to M's in-edges: it cancels)
                        dqmn = tl.load(dqn + j + 1, mask=right, other=0.0)
                        a1, a2, a3 = _centred3(d1, d2, d3, dMi, dXi, dYi, d0 / tot)
                        dqm += dqmn * d1 + qmn * d1 * a1
                        dqx += dqmn * d2 + qmn * d2 * a2
                        dqy += dqmn * d3 + qmn * d3 * a3
                        dqyn = tl.load(dqn + 2 * st + j, mask=inrow, other=0.0)
                        zoy = tl.load(zop + gy, mask=inrow, other=0.0)
                        zey = tl.load(zep + gy, mask=inrow, other=0.0)
                        a1, a2, a3 = _centred3(y1, y2, y3, dMi - zoy, dXi - zoy, dYi - zey, 0.0)
                        f1 = dqyn * y1 + qyn * y1 * a1
                        f2 = dqyn * y2 + qyn * y2 * a2
                        f3 = dqyn * y3 + qyn * y3 * a3
                        dqm += f1
                        dqx += f2
                        dqy += f3
                        co = -(f1 + f2)
                        ce = -f3
                    else:
                        co = -qyn * (y1 + y2)
                        ce = -qyn * y3
                    if FULL_GAPS:  # moves down into (i + 1, j) read [i, max(j, 1) - 1] (j = 0 and 1 share)
                        ga = b * gg_b + i.to(tl.int64) * gg_i + (tl.maximum(j, 1) - 1) * gg_j
                        tl.atomic_add(gop_ptr + ga, co, mask=inrow)
                        tl.atomic_add(gep_ptr + ga, ce, mask=inrow)
                    else:
                        sum_o += tl.where(inrow, co, 0.0)
                        sum_e += tl.where(inrow, ce, 0.0)
                # moves along row i from j into X at j + 1
                gx = gx_row * g_i + j * g_j
                ox = tl.load(gop + gx, mask=right, other=0.0)
                ex = tl.load(gep + gx, mask=right, other=0.0)
                x1 = _p(Mi - ox, Xr)
                x2 = _p(Xi - ex, Xr)
                x3 = _p(Yi - ox, Xr)
                tot = x1 + x2 + x3
                tot = tl.where(tot > 0, tot, 1.0)
                x1 = tl.where(right, x1 / tot, 0.0)
                x2 = tl.where(right, x2 / tot, 0.0)
                x3 = tl.where(right, x3 / tot, 0.0)
                sa, sc = tl.associative_scan((qx, x2), 0, _lin_combine)  # QX[j] = qx[j] + x2[j] QX[j + 1]
                QX = sa + sc * carry
                carry = tl.sum(tl.where(offs == BLOCK - 1, QX, 0.0), 0)
                tl.store(qp + st + j, QX, mask=inrow)
                tl.debug_barrier()
                QXr = tl.load(qp + st + j + 1, mask=right, other=0.0)
                qm += QXr * x1
                qy += QXr * x3
                tl.store(qp + j, qm, mask=inrow)
                tl.store(qp + 2 * st + j, qy, mask=inrow)
                if HVP:
                    zox = tl.load(zop + gx, mask=right, other=0.0)
                    zex = tl.load(zep + gx, mask=right, other=0.0)
                    a1, a2, a3 = _centred3(x1, x2, x3, dMi - zox, dXi - zex, dYi - zox, 0.0)
                    dx1 = x1 * a1
                    dx2 = x2 * a2
                    dx3 = x3 * a3
                    sa, sc = tl.associative_scan((dqx + QXr * dx2, x2), 0, _lin_combine)
                    dQX = sa + sc * dcarry
                    dcarry = tl.sum(tl.where(offs == BLOCK - 1, dQX, 0.0), 0)
                    tl.store(dqp + st + j, dQX, mask=inrow)
                    tl.debug_barrier()
                    dQXr = tl.load(dqp + st + j + 1, mask=right, other=0.0)
                    dqm += dQXr * x1 + QXr * dx1
                    dqy += dQXr * x3 + QXr * dx3
                    tl.store(dqp + j, dqm, mask=inrow)
                    tl.store(dqp + 2 * st + j, dqy, mask=inrow)
                    out_m = dqm
                    co = -(dQXr * (x1 + x3) + QXr * (dx1 + dx3))
                    ce = -(dQXr * x2 + QXr * dx2)
                else:
                    out_m = qm
                    co = -QXr * (x1 + x3)
                    ce = -QXr * x2
                tl.store(gs_ptr + b * gs_b + (i - 1).to(tl.int64) * gs_i + j - 1, out_m,
                         mask=inrow & (j >= 1) & (ib >= 1))
                if FULL_GAPS:  # moves along row i into j + 1 read [max(i, 1) - 1, j] (rows 0 and 1 share)
                    ga = b * gg_b + gx_row * gg_i + j * gg_j
                    tl.atomic_add(gop_ptr + ga, co, mask=right)
                    tl.atomic_add(gep_ptr + ga, ce, mask=right)
                else:
                    sum_o += tl.where(right, co, 0.0)
                    sum_e += tl.where(right, ce, 0.0)
                jb -= BLOCK
            tl.debug_barrier()
            i -= 1
        c -= 1
    if not FULL_GAPS:
        tl.store(gop_ptr + b, tl.sum(sum_o, 0))
        tl.store(gep_ptr + b, tl.sum(sum_e, 0))


def _block(width: int) -> int:
    """Columns per chunk: two variants keep compiles few (the mode, the checkpoint step and
    the gaps' strides are run-time arguments, never specialised); a row of 513 columns
    (N = M = 512) takes one chunk of 1,024, not two of 512 with one column in the second."""
    return 128 if width <= 128 else 1024


def warps_for(block: int) -> int:
    """Warps per program: 16 for rows of 1,024-column chunks (1.8x faster than 4 at
    64 x 4,096^2 and 8 x 2,000^2 on an H200: each pair is one program, latency-bound, and
    the scans split across more warps; 32 is slower again), 4 for 128 (benchmarks/NOTES.md)."""
    return 16 if block >= 1024 else 4


def _gaps(gap_open, gap_extend, linear, *more):
    """Gap tensors [B, 1, 1] or [B, N, M] (and ``more`` of the same kind: the direction of a
    Hessian-vector product) as float32 with their common strides (0 where broadcast)."""
    go = gap_open.float()
    ge = go if linear else gap_extend.float()
    out = torch.broadcast_tensors(go, ge, *(x.float() for x in more))
    if out[0].shape[1:] != (1, 1):
        out = [x.contiguous() for x in out]
    x = out[0]
    strides = (x.stride(0), x.stride(1) if x.shape[1] > 1 else 0, x.stride(2) if x.shape[2] > 1 else 0)
    return (*out, strides)


def forward(scores, gap_open, gap_extend, q_lens, t_lens, mode: int, linear: bool, K: int, block=None):
    """(value [B], table [B, N // K + 1, 3, M + 1]) of the three-state DP (float32)."""
    s = scores.float().contiguous()
    B, N, M = s.shape
    go, ge, (g_b, g_i, g_j) = _gaps(gap_open, gap_extend, linear)
    R = N // K + 1
    row = 3 * (M + 1)
    table = torch.empty((B, R, 3, M + 1), dtype=torch.float32, device=s.device)
    work = torch.empty((B, 2, 3, M + 1), dtype=torch.float32, device=s.device) if K > 1 else table
    value = torch.empty(B, dtype=torch.float32, device=s.device)
    blk = block or _block(M + 1)
    if B:
        soft_align_fwd_kernel[(B,)](s, N * M, M, go, ge, g_b, g_i, g_j, q_lens, t_lens, table, R * row, work,
                                    work.stride(0), row, K, value, MODE=mode, BLOCK=blk, num_warps=warps_for(blk))
    return value, table


def _sweep(s, go, ge, strides, q_lens, t_lens, table, K, value, grad, mode, linear, block, hvp=None):
    """The backward kernel; ``hvp``: (dtab, dvalue, zo, ze) for the derivative along z (the scores'
    direction enters through the tangents dtab alone)."""
    B, N, M = s.shape
    g_b, g_i, g_j = strides
    full = go.shape[1:] != (1, 1)
    R, row = table.shape[1], 3 * (M + 1)
    dev = s.device
    seg = torch.empty((B, K, 3, M + 1), dtype=torch.float32, device=dev) if K > 1 else table
    q_buf = torch.empty((B, 2, 3, M + 1), dtype=torch.float32, device=dev)
    dq_buf = torch.empty_like(q_buf) if hvp else q_buf
    gs = torch.zeros((B, N, M), dtype=torch.float32, device=dev)
    shape = (B, N, M) if full else (B,)
    g_open = torch.zeros(shape, dtype=torch.float32, device=dev)
    g_ext = torch.zeros(shape, dtype=torch.float32, device=dev)
    dtab, dvalue, zo, ze = hvp or (table, value, go, ge)
    blk = block or _block(M + 1)
    if B:
        soft_align_bwd_kernel[(B,)](s, N * M, M, go, ge, g_b, g_i, g_j, q_lens, t_lens, table, R * row, seg,
                                    seg.stride(0), q_buf, q_buf.stride(0), row, K, value.float().contiguous(),
                                    grad.float().contiguous(), gs, N * M, M, g_open, g_ext, N * M if full else 1,
                                    M if full else 0, 1 if full else 0, dtab, dvalue, zo, ze, dq_buf,
                                    FULL_GAPS=full, MODE=mode, HVP=hvp is not None, BLOCK=blk,
                                    num_warps=warps_for(blk))
    if linear:  # one gap: the opening and extending moves both read gap_open
        return gs, g_open + g_ext, torch.zeros_like(g_ext)
    return gs, g_open, g_ext


def backward(scores, gap_open, gap_extend, q_lens, t_lens, table, value, grad, mode: int, linear: bool, K: int,
             block=None):
    """(d scores, d gap_open, d gap_extend) times grad: gap gradients [B, N, M] for
    position-specific gaps, else [B]; linear: all of it in d gap_open."""
    s = scores.float().contiguous()
    go, ge, strides = _gaps(gap_open, gap_extend, linear)
    return _sweep(s, go, ge, strides, q_lens, t_lens, table, K, value, grad, mode, linear, block)


settle_module(__name__)  # the same cache keys in every process (cache_keys.py)
