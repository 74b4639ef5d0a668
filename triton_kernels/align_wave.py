"""Long pairs: one pair per program, its query's row tiles on the lanes, as a wavefront.

The inter-task kernel (align.py) gives a pair one lane, so a pair with a long target
runs alone at one warp's speed and its program finishes long after the rest (measured:
one 1,000 x 5,000 pair is most of a 20,000-pair launch). Here lane w holds query rows
[w ROWS, (w + 1) ROWS) in registers and at step t computes column t - w + 1: the bottom
row of tile w - 1 at that column was made one step earlier and comes through a small
double-buffered scratch array (one barrier per step). W lanes cover W x ROWS rows per
pass; a longer query takes several passes, the last tile's bottom row going to a scratch
row as in align.py. The best cell is reduced across lanes at the end with the same tie
rule (score, then the smallest target end, then the smallest query end).

Pure: imports only torch and triton.
"""

import torch
import triton
import triton.language as tl

from .align import GLOBAL, LOCAL, NEG, _cell, _code, _gap, _score_at, _tile, _track

BIG = tl.constexpr(1 << 30)


@triton.jit(do_not_specialize=["width", "gap_open", "gap_extend"],  # one variant per mode
            do_not_specialize_on_alignment=["q_ptr", "t_ptr"])  # (codes are read one by one: no vector loads)
def align_wave_kernel(
    q_ptr, q_start_ptr, q_len_ptr, t_ptr, t_start_ptr, t_len_ptr, pair_q_ptr, pair_t_ptr,
    table_ptr, width, gap_open, gap_extend, row_ptr, row_at_ptr, buf_ptr,
    score_ptr, q_end_ptr, t_end_ptr,
    MODE: tl.constexpr, TRACK: tl.constexpr, ROWS: tl.constexpr, W: tl.constexpr,
):
    """Program i aligns query pair_q[i] with target pair_t[i]; outputs go to slot i.
    ``row``: 2 int32 per target column from row_at[i] (a pass's last row); ``buf``: 2 x 2 x W
    int32 per program (the carries between lanes)."""
    pid = tl.program_id(0)
    w = tl.arange(0, W)
    pq = tl.load(pair_q_ptr + pid)
    pt = tl.load(pair_t_ptr + pid)
    qs = tl.load(q_start_ptr + pq)
    ts = tl.load(t_start_ptr + pt)
    m = tl.load(q_len_ptr + pq).to(tl.int32)
    n = tl.load(t_len_ptr + pt).to(tl.int32)
    pad = width - 1
    zero = tl.zeros((W,), tl.int32)
    row = row_ptr + tl.load(row_at_ptr + pid)
    buf = buf_ptr + pid.to(tl.int64) * 4 * W + w
    j = 0
    while j <= n:  # row 0
        if MODE == GLOBAL:
            tl.store(row + 2 * j, _gap(j, gap_open, gap_extend))
        else:
            tl.store(row + 2 * j, 0)
        tl.store(row + 2 * j + 1, NEG)
        j += 1
    tl.debug_barrier()
    if MODE == LOCAL:
        best = zero
        best_i = zero
    else:
        if MODE == GLOBAL:  # H[0][n] or H[m][0] when a side is empty, else the lane of row m sets it
            first = tl.where(m > 0, _gap(m, gap_open, gap_extend), _gap(n, gap_open, gap_extend))
            best = tl.where((w == 0) & ((m == 0) | (n == 0)), first, NEG)
        else:
            best = tl.where(w == 0, _gap(m, gap_open, gap_extend), NEG)  # lane 0 holds H[m][0]
        best_i = zero + m
    best_j = zero
    p0 = 0
    while p0 < m:  # passes of W tiles
        r0 = p0 + w * ROWS  # each lane's first row (0-based)
        rows, hs, es, last, corner = _tile(q_ptr, qs, r0, m, pad, table_ptr, width, zero, gap_open, gap_extend,
                                           MODE, ROWS)
        h_in = zero
        f_in = zero
        t = 0
        while t < n + W - 1:
            col = t - w + 1  # each lane's column (j)
            live = (col >= 1) & (col <= n)
            # lane 0 reads the pass's top row; the others got theirs through buf last step
            h_top = tl.load(row + 2 * col, mask=(w == 0) & live, other=0)
            f_top = tl.load(row + 2 * col + 1, mask=(w == 0) & live, other=0)
            h_up = tl.where(w == 0, h_top, h_in)
            f_up = tl.where(w == 0, f_top, f_in)
            c = tl.load(t_ptr + ts + col - 1, mask=live, other=0).to(tl.int32)
            c = _code(c, live, pad)
            diag = corner
            new_h = ()
            new_e = ()
            for r in tl.static_range(ROWS):
                s = _score_at(rows[r] + c)
                h, e, f = _cell(hs[r], es[r], diag, h_up, f_up, s, gap_open, gap_extend, MODE)
                diag = hs[r]
                h_up = h
                f_up = f
                new_h = new_h + (tl.where(live, h, hs[r]),)
                new_e = new_e + (tl.where(live, e, es[r]),)
                best, best_i, best_j = _track(h, r0 + r + 1, col, live, last[r], n, best, best_i, best_j, MODE,
                                              TRACK)
            hs = new_h
            es = new_e
            corner = tl.where(live, tl.where(w == 0, h_top, h_in), corner)
            # pass the bottom row down: lane w writes, lane w + 1 reads after the barrier
            here = buf + (t % 2) * 2 * W
            tl.store(here, h_up)
            tl.store(here + W, f_up)
            tl.store(row + 2 * col, h_up, mask=(w == W - 1) & live)  # the pass's last row
            tl.store(row + 2 * col + 1, f_up, mask=(w == W - 1) & live)
            tl.debug_barrier()
            h_in = tl.load(here - 1, mask=w > 0, other=0)
            f_in = tl.load(here + W - 1, mask=w > 0, other=0)
            t += 1
        p0 += W * ROWS
    # reduce across lanes: the best score, then the smallest column, then the smallest row
    top = tl.max(best, 0)
    if MODE == GLOBAL:
        j_top = n
    else:
        j_top = tl.min(tl.where(best == top, best_j, BIG), 0)
    if MODE == LOCAL and TRACK:
        i_top = tl.min(tl.where((best == top) & (best_j == j_top), best_i, BIG), 0)
    else:
        i_top = m
    tl.store(score_ptr + pid, top)
    if TRACK:
        tl.store(q_end_ptr + pid, i_top.to(tl.int64))
        tl.store(t_end_ptr + pid, j_top.to(tl.int64))


W_MAX = 128  # lanes (row tiles) per pair and pass
W_SMALL = 32  # for queries of up to 32 tiles


def wave_width(q_longest: int, rows: int) -> int:
    """Lanes per pass for queries up to q_longest residues: two variants (each compiles for ~20 s)."""
    return min(W_SMALL, W_MAX) if triton.cdiv(q_longest, rows) <= W_SMALL else W_MAX


def align_long(q_codes, q_starts, q_lens, t_codes, t_starts, t_lens, pair_q, pair_t, padded, gap_open: int,
               gap_extend: int, mode: int, track: bool, rows: int, W: int, row, row_at, buf, score, q_end, t_end):
    """Pairs pair_q[i], pair_t[i] one per program, writing slot i of score / q_end / t_end.
    ``padded``: the table with its pad code (align.padded_table); ``W``: lanes per pass
    (wave_width of the longest query); scratch: pair i's row of 2 int32 per target column
    (and one more) at ``row[row_at[i]:]``, ``buf`` 4 W int32 per pair."""
    P = pair_q.numel()
    if P == 0:
        return
    align_wave_kernel[(P,)](
        q_codes, q_starts, q_lens, t_codes, t_starts, t_lens, pair_q, pair_t,
        padded, padded.shape[0], gap_open, gap_extend, row, row_at, buf,
        score, q_end, t_end,
        MODE=mode, TRACK=track, ROWS=rows, W=W, num_warps=max(1, W // 32),
    )
