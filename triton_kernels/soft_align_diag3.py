"""Soft alignment with affine gaps of one value per pair (three Gotoh states) by
anti-diagonals: the forward sweep, into the three-state row kernels' table.

The recurrences are soft_align.py's (temperature 1; o, e the pair's gap open and extend):
    M[i, j] = s[i, j] + lse(M, X, Y at (i-1, j-1))     (local: lse(0, ...))
    Y[i, j] = lse(M[i-1, j] - o, X[i-1, j] - o, Y[i-1, j] - e)
    X[i, j] = lse(lse(M, Y at (i, j-1)) - o, X[i, j-1] - e)
Lane l of a program holds row i = r0 + l + 1 of a strip of up to BLOCK rows, and step t is
anti-diagonal t (column j = t - l), as in soft_align_diag.py. X comes from the lane's own
last cell; Y and M from the lane above, which hands down, by one ``tl.gather``, what its
cell gives the cell below: lse(M - o, X - o, Y - e) (Y's in-edges) and V = lse(M, X, Y)
(M's diagonal, a step later). Lane 0 computes both from the row above in the table. The
row kernels (a program per pair, a row scan per step) leave most SMs idle on batches of a
few long pairs and take ~4 us a row (benchmarks/NOTES.md, session 41).

The table is the row kernels' [B, N + 1, 3, M + 1] (M, X, Y rows of every DP row), so their
backward sweep and Hessian-vector product read it unchanged (those that run on it are
soft_align_diag3_bwd.py's and soft_align_diag3_hvp.py's, by anti-diagonals). A lane keeps its last eight
cells of each state in registers and a round of eight steps stores them as three [BLOCK, 8]
tiles (soft_align._store8: coalesced along the rows, where a store per step would touch a
sector per lane). A pair's strips run as a wavefront over SMs: strip k reads strip k - 1's
last row from the table as it is written (its progress counter, released after each
round's tiles; a wait that gives up makes the value NaN, never a wrong number).

Pure: imports only torch and triton.
"""

import torch
import triton
import triton.language as tl

from .cache_keys import settle_module
from .launch import Launcher
from .soft_align import NEG, PREFETCH, _latest_last, _load_still, _lse2, _lse3, _prefetch, _store8
from .soft_align_diag import _finish, _wait, f32
from .spin import GAVE_UP

ROUND = tl.constexpr(8)  # steps a round: one wait, one release, and _store8's eight registers
# rows a strip: one warp, so the step's gather is a warp shuffle with no barrier. Measured on the
# H200 against 64, 128 and 256 (four or eight warps, a gather through shared memory): 3-30 %
# faster at 64 x 512, 256 x 128 and 8 x 2,000 (benchmarks/NOTES.md, session 41)
BLOCK = 32


@triton.jit
def _top_load(top, st, j, m):
    """M, X, Y of cell (r0, j) of the row above, from the table (past L1: another program
    writes it); -inf past column m."""
    ok = j <= m
    return (tl.load(top + j, mask=ok, other=NEG, cache_modifier=".cg"),
            tl.load(top + st + j, mask=ok, other=NEG, cache_modifier=".cg"),
            tl.load(top + 2 * st + j, mask=ok, other=NEG, cache_modifier=".cg"))


@triton.jit(do_not_specialize=['s_b', 's_i', 'tab_b', 'row', 'B', 'S'])
def soft_align_diag3_fwd_kernel(s_ptr, s_b, s_i, go_ptr, ge_ptr, q_ptr, t_ptr, tab_ptr, tab_b, row, part_ptr,
                                out_ptr, sync_ptr, B, S, MODE: tl.constexpr, BLOCK: tl.constexpr):
    """Program (k, b) from its ticket: strip k of pair b (rows kB + 1 .. kB + B) into the
    table, and its share of the value (MODE 0 global, 1 local, 2 semiglobal) into part[b, k],
    combined by the pair's last strip into out[b] (soft_align_diag._finish). sync[0]: the
    tickets; sync[2 + b S + k]: strip k's columns done; sync[2 + B S + b]: strips finished."""
    ticket = tl.atomic_add(sync_ptr, 1)
    b = (ticket % B).to(tl.int64)
    k = ticket // B
    n = tl.load(q_ptr + b).to(tl.int32)
    m = tl.load(t_ptr + b).to(tl.int32)
    o = tl.load(go_ptr + b)
    e = tl.load(ge_ptr + b)
    sp = s_ptr + b * s_b
    tab = tab_ptr + b * tab_b
    st = row // 3  # (the M, X, Y rows of a DP row)
    offs = tl.arange(0, BLOCK)
    flag_in = sync_ptr + 2 + b * S + k - 1
    flag_out = flag_in + 1
    seen = 0
    if k == 0:  # row 0: global charges leading gaps (X); semiglobal starts anywhere (M = 0); local has none
        j0 = 0
        while j0 <= m:
            j = j0 + offs
            if MODE == 0:
                top_m = tl.where(j == 0, 0.0, NEG)
                top_x = tl.where(j >= 1, -o - (j - 1).to(tl.float32) * e, NEG)
            elif MODE == 2:
                top_m = tl.zeros((BLOCK,), tl.float32)
                top_x = tl.full((BLOCK,), NEG, tl.float32)
            else:
                top_m = tl.full((BLOCK,), NEG, tl.float32)
                top_x = top_m
            tl.store(tab + j, top_m, mask=j <= m)
            tl.store(tab + st + j, top_x, mask=j <= m)
            tl.store(tab + 2 * st + j, tl.full((BLOCK,), NEG, tl.float32), mask=j <= m)
            j0 += BLOCK
        tl.debug_barrier()
        seen = m + 1
    acc = tl.full((BLOCK,), NEG, tl.float32)  # the lanes' end terms (global: V at (n, m))
    idx2 = tl.join(tl.maximum(offs - 1, 0), tl.maximum(offs - 1, 0))  # (each lane reads the lane above)
    r0 = k * BLOCK
    if r0 < n:
        R = tl.minimum(n - r0, BLOCK)
        publish = r0 + R < n  # a strip below reads this one's last row
        lane = offs < R
        last_row = (r0 + 1 + offs) == n
        srow = sp + (r0 + offs).to(tl.int64) * s_i  # row i - 1 of the scores, per lane
        top = tab + r0.to(tl.int64) * row  # the row above the strip
        own = tab + (r0 + 1 + offs).to(tl.int64) * row  # each lane's row (its M; X and Y st, 2 st on)
        seen = _wait(flag_in, tl.minimum(2, m + 1), seen)
        tm, tx, ty = _top_load(top, st, 0, m)
        up_v = tl.where(offs == 0, _lse3(tm, tx, ty), NEG)  # V of the cell above, this step
        up_y = tl.where(offs == 0, _lse3(tm - o, tx - o, ty - e), NEG)  # and its term of Y
        tm, tx, ty = _top_load(top, st, 1, m)  # (lane 0's: a step ahead, off the step's chain)
        diag = tl.full((BLOCK,), NEG, tl.float32)  # V of the cell up-left
        h_left = tl.full((BLOCK,), NEG, tl.float32)  # lse(M, Y) of the lane's last cell
        x_left = tl.full((BLOCK,), NEG, tl.float32)  # X of it
        s_c = tl.zeros((BLOCK,), tl.float32)  # the scores of steps t and t + 1 (step 0 has no column >= 1)
        s_n = _load_still(srow, lane & (offs == 0) & (offs + m >= 1), 0.0)
        t = 0
        T = R + m
        while t < T:  # ROUND steps a round, no branch inside
            seen = _wait(flag_in, tl.minimum(t + ROUND + 2, m + 1), seen)
            t0 = t
            m0, m1, m2, m3, m4, m5, m6, m7 = _eight(BLOCK)
            x0, x1, x2, x3, x4, x5, x6, x7 = _eight(BLOCK)
            y0, y1, y2, y3, y4, y5, y6, y7 = _eight(BLOCK)
            for _ in tl.static_range(ROUND):
                j = t - offs
                live = lane & (j >= 0) & (j <= m)
                s = s_c
                s_c = s_n
                jn = j + 2
                s_n = _load_still(srow + jn - 1, lane & (jn >= 1) & (jn <= m), 0.0)
                jp = j + PREFETCH
                _prefetch(srow + jp - 1, lane & (jp >= 1) & (jp <= m))
                tv = _lse3(tm, tx, ty)  # lane 0's inputs of the next step: cell (r0, t + 1)
                tyd = _lse3(tm - o, tx - o, ty - e)
                tm, tx, ty = _top_load(top, st, t + 2, m)
                d = diag
                if MODE == 1:
                    d = _lse2(d, tl.zeros_like(d))  # an alignment may start here
                mc = tl.where(live & (j >= 1), s + d, NEG)
                yc = tl.where(live, up_y, NEG)
                xc = tl.where(live & (j >= 1), _lse2(h_left - o, x_left - e), NEG)
                h = _lse2(mc, yc)
                v = _lse2(h, xc)
                if MODE == 0:
                    acc = tl.where(live & last_row & (j == m), v, acc)
                elif MODE == 1:
                    acc = _lse2(acc, mc)
                else:
                    acc = _lse2(acc, tl.where(last_row, h, NEG))
                h_left = h
                x_left = xc
                m0, m1, m2, m3, m4, m5, m6, m7 = _latest_last(m1, m2, m3, m4, m5, m6, m7, mc)
                x0, x1, x2, x3, x4, x5, x6, x7 = _latest_last(x1, x2, x3, x4, x5, x6, x7, xc)
                y0, y1, y2, y3, y4, y5, y6, y7 = _latest_last(y1, y2, y3, y4, y5, y6, y7, yc)
                diag = up_v
                gv, gy = tl.split(tl.gather(tl.join(v, _lse3(mc - o, xc - o, yc - e)), idx2, 0))  # (one gather)
                up_v = tl.where(offs == 0, tv, gv)
                up_y = tl.where(offs == 0, tyd, gy)
                t += 1
            c0 = t0 - offs  # the round's first column in each lane
            _store8(own, c0, m0, m1, m2, m3, m4, m5, m6, m7, lane, 0, 7, m + 1)
            _store8(own + st, c0, x0, x1, x2, x3, x4, x5, x6, x7, lane, 0, 7, m + 1)
            _store8(own + 2 * st, c0, y0, y1, y2, y3, y4, y5, y6, y7, lane, 0, 7, m + 1)
            if publish:  # columns 0 .. done - 1 of the strip's last row are stored
                tl.debug_barrier()
                done = tl.minimum(t - R + 1, m + 1)
                if done > 0:
                    tl.atomic_xchg(flag_out, done, sem="release")
        tl.debug_barrier()
    if MODE == 0:
        value = tl.max(acc, 0)
        if n == 0:  # the value is row 0's last cell: M (m == 0) or X
            value = tl.where(m == 0, 0.0, -o - (m - 1).to(tl.float32) * e)
    else:
        mx = tl.max(acc, 0)
        ms = tl.where(mx == NEG, 0.0, mx)
        value = tl.where(mx == NEG, NEG, ms + tl.log(tl.sum(tl.exp(acc - ms), 0)))
        if MODE == 2:
            if n == 0:
                value = 0.0  # (the one alignment: every target residue free)
    if (k > 0) & (r0 >= n):
        value = tl.full((), NEG, tl.float32)  # no rows here (n == 0 is strip 0's)
    if seen == GAVE_UP:
        value = tl.full((), float("nan"), tl.float32)  # a wait gave up: never a wrong value
    _finish(value, part_ptr, sync_ptr + 2 + B * S, out_ptr, b, k, S, 2 if MODE == 1 else 1, BLOCK, empty=0.0)


@triton.jit
def _eight(BLOCK: tl.constexpr):
    """Eight -inf registers: a round's cells of one state (cells past column m are not stored)."""
    x = tl.full((BLOCK,), NEG, tl.float32)
    return x, x, x, x, x, x, x, x


def forward(scores, gap_open, gap_extend, q_lens, t_lens, mode: int, block=None):
    """(value [B], table [B, N + 1, 3, M + 1]) as soft_align.forward's with K = 1, for gaps of
    one value per pair (``gap_open``, ``gap_extend``: [B] or [B, 1, 1])."""
    s = f32(scores)
    B, N, M = s.shape
    table = torch.empty((B, N + 1, 3, M + 1), dtype=torch.float32, device=s.device)
    out = s.new_empty(B)
    if B:
        blk = block or BLOCK
        S = max(1, triton.cdiv(N, blk))
        part = s.new_empty(B, S)
        sync = torch.zeros(2 + B * S + B, dtype=torch.int32, device=s.device)
        go = f32(gap_open.reshape(B))
        ge = f32(gap_extend.reshape(B))
        _launch((B * S,), s, N * M, M, go, ge, q_lens, t_lens, table, table.stride(0), table.stride(1), part, out,
                sync, B, S, mode, BLOCK=blk, num_warps=max(1, blk // 32))
    return out, table


_launch = Launcher(soft_align_diag3_fwd_kernel)
settle_module(__name__)  # the same cache keys in every process (cache_keys.py)
