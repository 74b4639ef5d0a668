"""Alignment tracebacks: a direction-byte DP and a walk back, one pair per program.

traceback_dp_kernel fills the rectangle from (0, 0) to the pair's end cell by
anti-diagonals d = i + j, the diagonal's cells on the lanes (chunks of BLOCK rows).
A cell needs H and E of its left neighbour and H and F of the one above (diagonal
d - 1) and H of its diagonal neighbour (d - 2); those live in three (H) and two (E, F)
rotating scratch rows indexed by the row i, and a barrier separates diagonals. Each
cell writes one direction byte (the layout and tie rule of torchalign/cpu/traceback.py,
which writes the same bytes):

  bits 0-1  H from: 0 diagonal, 1 E (D), 2 F (I), 3 zero (local start); ties in that
            order, zero first
  bit 2     E opened from H on the left (ties: open); bit 3  F opened from H above

traceback_walk_kernel walks back from the end cell, one scalar step per iteration, and
writes the op codes (0 '=', 1 'X', 2 'I', 3 'D') backwards into the pair's slot.
Scores are int32 with -2^29 as minus infinity, as in align.py (the op checks the bound).

Pure: imports only torch and triton.
"""

import torch
import triton
import triton.language as tl

from .cache_keys import settle_module

LOCAL = tl.constexpr(0)
GLOBAL = tl.constexpr(1)
NEG = tl.constexpr(-(1 << 29))


@triton.jit
def _gap(length, gap_open, gap_extend):
    return tl.where(length > 0, -(gap_open + (length - 1) * gap_extend), 0)


@triton.jit
def _col0(i, gap_open, gap_extend, MODE: tl.constexpr):
    """H(i, 0): a leading gap of i query residues (0 in local mode)."""
    if MODE == LOCAL:
        h = i * 0
    else:
        h = _gap(i, gap_open, gap_extend)
    return h


@triton.jit
def _row0(j, gap_open, gap_extend, MODE: tl.constexpr):
    """H(0, j): a leading gap of j target residues in global mode (else free: 0)."""
    if MODE == GLOBAL:
        h = _gap(j, gap_open, gap_extend)
    else:
        h = j * 0
    return h


@triton.jit(do_not_specialize=["width", "gap_open", "gap_extend"])  # one variant per mode
def traceback_dp_kernel(
    q_ptr, q_start_ptr, t_ptr, t_start_ptr, rows_ptr, cols_ptr, table_ptr, width, gap_open, gap_extend,
    dir_ptr, dir_at_ptr, scratch_ptr, scratch_at_ptr,
    MODE: tl.constexpr, BLOCK: tl.constexpr,
):
    """Program p: query from q_start[p], target from t_start[p], the rectangle to
    (rows[p], cols[p]); direction byte of (i, j) at dir_at[p] + i (cols[p] + 1) + j (row
    0 and column 0 unwritten). ``scratch``: 7 (rows[p] + 1) int32 from scratch_at[p]."""
    pid = tl.program_id(0)
    qs = tl.load(q_start_ptr + pid)
    ts = tl.load(t_start_ptr + pid)
    R = tl.load(rows_ptr + pid).to(tl.int32)
    C = tl.load(cols_ptr + pid).to(tl.int32)
    dirs = dir_ptr + tl.load(dir_at_ptr + pid)
    sc = scratch_ptr + tl.load(scratch_at_ptr + pid)
    stride = R.to(tl.int64) + 1  # int64: the scratch rows' offsets (up to 6 stride) pass 2^31 from 358 M rows
    lane = tl.arange(0, BLOCK)
    d = 2
    while d <= R + C:
        i_lo = tl.maximum(d - C, 1)
        i_hi = tl.minimum(d - 1, R)
        h_cur = sc + (d % 3) * stride
        h_1 = sc + ((d + 2) % 3) * stride  # diagonal d - 1
        h_2 = sc + ((d + 1) % 3) * stride  # diagonal d - 2
        e_cur = sc + (3 + d % 2) * stride
        e_1 = sc + (3 + (d + 1) % 2) * stride
        f_cur = sc + (5 + d % 2) * stride
        f_1 = sc + (5 + (d + 1) % 2) * stride
        c0 = i_lo
        while c0 <= i_hi:
            i = c0 + lane
            live = i <= i_hi
            j = d - i
            top = i == 1  # the cell above is on row 0
            lft = j == 1  # the cell on the left is on column 0
            h_left = tl.load(h_1 + i, mask=live & ~lft, other=0)
            h_left = tl.where(lft, _col0(i, gap_open, gap_extend, MODE), h_left)
            e_left = tl.load(e_1 + i, mask=live & ~lft, other=NEG)
            e_left = tl.where(lft, NEG, e_left)
            h_up = tl.load(h_1 + i - 1, mask=live & ~top, other=0)
            h_up = tl.where(top, _row0(j, gap_open, gap_extend, MODE), h_up)
            f_up = tl.load(f_1 + i - 1, mask=live & ~top, other=NEG)
            f_up = tl.where(top, NEG, f_up)
            h_dg = tl.load(h_2 + i - 1, mask=live & ~top & ~lft, other=0)
            h_dg = tl.where(top, _row0(j - 1, gap_open, gap_extend, MODE),
                            tl.where(lft, _col0(i - 1, gap_open, gap_extend, MODE), h_dg))
            qc = tl.load(q_ptr + qs + i - 1, mask=live, other=0).to(tl.int32)
            tc = tl.load(t_ptr + ts + j - 1, mask=live, other=0).to(tl.int32)
            s = tl.load(table_ptr + qc * width + tc, mask=live, other=0)
            e_opt = h_left - gap_open
            e = tl.maximum(e_opt, e_left - gap_extend)
            f_opt = h_up - gap_open
            f = tl.maximum(f_opt, f_up - gap_extend)
            dg = h_dg + s
            h = tl.maximum(tl.maximum(dg, e), f)
            src = tl.where(h == dg, 0, tl.where(h == e, 1, 2))
            if MODE == LOCAL:
                h = tl.maximum(h, 0)
                src = tl.where(h == 0, 3, src)
            e_bit = (e_opt >= e_left - gap_extend).to(tl.int32) << 2
            f_bit = (f_opt >= f_up - gap_extend).to(tl.int32) << 3
            byte = src | e_bit | f_bit
            tl.store(h_cur + i, h, mask=live)
            tl.store(e_cur + i, e, mask=live)
            tl.store(f_cur + i, f, mask=live)
            tl.store(dirs + i.to(tl.int64) * (C + 1) + j, byte.to(tl.uint8), mask=live)
            c0 += BLOCK
        tl.debug_barrier()  # diagonal d is read by d + 1 and d + 2 on other lanes
        d += 1


@triton.jit
def traceback_walk_kernel(
    q_ptr, q_start_ptr, t_ptr, t_start_ptr, rows_ptr, cols_ptr, dir_ptr, dir_at_ptr, out_ptr, out_at_ptr,
    len_ptr, q_from_ptr, t_from_ptr,
    MODE: tl.constexpr,
):
    """Program p walks back from (rows[p], cols[p]) in state H (0 H, 1 E, 2 F) and writes
    its k-th op at out_at[p] + rows[p] + cols[p] - 1 - k; then the op count and the start."""
    pid = tl.program_id(0)
    qs = tl.load(q_start_ptr + pid)
    ts = tl.load(t_start_ptr + pid)
    R = tl.load(rows_ptr + pid).to(tl.int32)
    C = tl.load(cols_ptr + pid).to(tl.int32)
    dirs = dir_ptr + tl.load(dir_at_ptr + pid)
    out = out_ptr + tl.load(out_at_ptr + pid) + R + C - 1
    i = R
    j = C
    st = R * 0
    k = R * 0
    go = R * 0 + 1
    while go != 0:
        inside = (i > 0) & (j > 0)
        byte = tl.load(dirs + i.to(tl.int64) * (C + 1) + j, mask=inside, other=0).to(tl.int32)
        src = byte & 3
        qa = tl.load(q_ptr + qs + i - 1, mask=i > 0, other=0)
        ta = tl.load(t_ptr + ts + j - 1, mask=j > 0, other=0)
        in_h = st == 0
        in_e = st == 1
        in_f = st == 2
        cell = in_h & inside
        if MODE == LOCAL:
            stop = (in_h & ~inside) | (cell & (src == 3))
            left_edge = in_h & (i < 0)  # never: local alignments stop at the edges
            top_edge = in_h & (i < 0)
        elif MODE == GLOBAL:
            stop = in_h & (i == 0) & (j == 0)
            left_edge = in_h & (i > 0) & (j == 0)
            top_edge = in_h & (i == 0) & (j > 0)
        else:
            stop = in_h & (i == 0)
            left_edge = in_h & (i > 0) & (j == 0)
            top_edge = in_h & (i < 0)
        diag = cell & (src == 0)
        ins = left_edge | in_f
        dele = top_edge | in_e
        op = tl.where(diag, tl.where(qa == ta, 0, 1), tl.where(ins, 2, 3))
        emit = diag | ins | dele
        tl.store(out - k, op.to(tl.uint8), mask=emit)
        k += emit.to(tl.int32)
        i -= (diag | ins).to(tl.int32)
        j -= (diag | dele).to(tl.int32)
        nxt = tl.where(cell & (src == 1), 1, tl.where(cell & (src == 2), 2, st))
        nxt = tl.where(in_e, tl.where(((byte >> 2) & 1) == 1, 0, 1), nxt)
        nxt = tl.where(in_f, tl.where(((byte >> 3) & 1) == 1, 0, 2), nxt)
        st = nxt
        go = tl.where(stop, 0, go)
    tl.store(len_ptr + pid, k.to(tl.int64))
    tl.store(q_from_ptr + pid, i.to(tl.int64))
    tl.store(t_from_ptr + pid, j.to(tl.int64))


# cells of a diagonal per step, one per thread up to 16 warps: the 200 hits of 20 queries
# (up to 5,459 x 3,095 cells) took 22 ms at 128 and ~14 ms at 512 (H100; 256-2,048 within 5 %)
BLOCK = 512


def traceback_pairs(q_codes, q_starts, t_codes, t_starts, rows, cols, table, gap_open: int, gap_extend: int,
                    mode: int, block: int | None = None):
    """For pair p (query from q_starts[p], target from t_starts[p]) whose alignment ends
    at (rows[p], cols[p]): (query start int64[P], target start int64[P], op codes
    uint8[N], op offsets int64[P + 1]). ``mode``: 0 local, 1 global, 2 semiglobal.
    Memory: one byte per cell of the rectangles, all pairs at once."""
    P = rows.numel()
    dev = q_codes.device
    block = block or BLOCK
    q_codes = q_codes if q_codes.numel() else torch.zeros(1, dtype=q_codes.dtype, device=dev)  # (no empty pointers)
    t_codes = t_codes if t_codes.numel() else torch.zeros(1, dtype=t_codes.dtype, device=dev)
    table = table.to(torch.int32).contiguous()
    cells = (rows + 1) * (cols + 1)
    dir_at = torch.cumsum(cells, 0) - cells
    scratch_size = 7 * (rows + 1)
    scratch_at = torch.cumsum(scratch_size, 0) - scratch_size
    cap = rows + cols  # the longest path in a rectangle
    out_at = torch.cumsum(cap, 0) - cap
    totals = torch.stack([cells.sum(), scratch_size.sum(), cap.sum()]).tolist() if P else [0, 0, 0]
    dirs = torch.empty(max(totals[0], 1), dtype=torch.uint8, device=dev)
    scratch = torch.empty(max(totals[1], 1), dtype=torch.int32, device=dev)
    buf = torch.empty(max(totals[2], 1), dtype=torch.uint8, device=dev)
    lens = torch.zeros(P, dtype=torch.int64, device=dev)
    q_from = torch.zeros(P, dtype=torch.int64, device=dev)
    t_from = torch.zeros(P, dtype=torch.int64, device=dev)
    if P:
        traceback_dp_kernel[(P,)](q_codes, q_starts, t_codes, t_starts, rows, cols, table, table.shape[1], gap_open,
                                  gap_extend, dirs, dir_at, scratch, scratch_at, MODE=mode, BLOCK=block,
                                  num_warps=max(1, min(16, block // 32)))
        traceback_walk_kernel[(P,)](q_codes, q_starts, t_codes, t_starts, rows, cols, dirs, dir_at, buf, out_at,
                                    lens, q_from, t_from, MODE=mode, num_warps=1)
    offsets = torch.zeros(P + 1, dtype=torch.int64, device=dev)
    offsets[1:] = torch.cumsum(lens, 0)
    n = int(offsets[-1])
    # pair p's ops: the last lens[p] bytes of its cap[p]
    pair = torch.repeat_interleave(torch.arange(P, device=dev), lens, output_size=n)
    pos = out_at[pair] + cap[pair] - lens[pair] + torch.arange(n, device=dev) - offsets[:-1][pair]
    return q_from, t_from, buf[pos], offsets


settle_module(__name__)  # the same cache keys in every process (cache_keys.py)
