"""Long pairs: one pair per program, its query's row tiles on the lanes, as a wavefront.

The inter-task kernel (align.py) gives a pair one lane, so a pair with a long target
runs alone at one warp's speed and its program finishes long after the rest (measured:
one 1,000 x 5,000 pair is most of a 20,000-pair launch). Here lane w holds query rows
[w ROWS, (w + 1) ROWS) in registers and at step t computes column t - w + 1: the bottom
row of tile w - 1 at that column was made one step earlier and comes through a small
double-buffered scratch array (one barrier per step). W lanes cover W x ROWS rows per
pass; a longer query takes several passes, each pass's last row going to a ring of two
scratch rows for the next. With PIPE, each pass is a program of its own and reads the
row above as it is written (a progress counter per pass, spin.py), so a few long pairs
spread over several SMs instead of one each: the search's top hits, few pairs of up to
thousands of rows, whose steps are a chain of ROWS dependent cells plus the hand-over
(NOTES.md, "The top hits' ends"). The best cell is reduced across lanes (and by the
caller across passes) with the same tie rule (score, then the smallest target end, then
the smallest query end).

Pure: imports only torch and triton.
"""

import torch
import triton
import triton.language as tl

from .align import GLOBAL, LOCAL, NEG, _cell, _code, _gap, _score_at, _tile, _track
from .cache_keys import settle_module
from .spin import GAVE_UP, wait_until

BIG = tl.constexpr(1 << 30)


@triton.jit(do_not_specialize=["width", "gap_open", "gap_extend", "n_pairs", "passes"],  # one variant per mode
            do_not_specialize_on_alignment=["q_ptr", "t_ptr"])  # (codes are read one by one: no vector loads)
def align_wave_kernel(
    q_ptr, q_start_ptr, q_len_ptr, t_ptr, t_start_ptr, t_len_ptr, pair_q_ptr, pair_t_ptr,
    table_ptr, width, gap_open, gap_extend, ring_ptr, ring_at_ptr, buf_ptr, sync_ptr, n_pairs, passes,
    score_ptr, q_end_ptr, t_end_ptr,
    MODE: tl.constexpr, TRACK: tl.constexpr, ROWS: tl.constexpr, W: tl.constexpr, PIPE: tl.constexpr,
    HAND_OFF: tl.constexpr,
):
    """Without PIPE, program i aligns query pair_q[i] with target pair_t[i], its passes one
    after the other. With PIPE, program k (its ticket, from the counter sync[0]) runs pass
    k // n_pairs of pair k % n_pairs alone, reading the pass above's last row as it is
    written (its progress counter, sync[2 + pair * passes + pass]): a pair's passes run on
    several SMs at once, a wavefront. Each program writes its best cell to slot
    pair * passes + pass of score / q_end / t_end (``passes`` slots per pair: an empty pass,
    or a pass's cells outside the answer's row, writes a score below every real one).
    ``ring``: 2 x 2 int32 per target column (and one more) from ring_at[pair]: pass p writes
    its last row (H, F) to half p % 2 and reads pass p - 1's from the other; ``buf``:
    2 x 2 x W int32 per program (the carries between lanes). A wait that gives up adds 1 to
    sync[1] (the caller then runs the launch again without PIPE)."""
    if PIPE:
        ticket = tl.atomic_add(sync_ptr, 1)
        pid = ticket % n_pairs
        p = ticket // n_pairs
        p_end = p + 1
        slot = pid.to(tl.int64) * passes + p
    else:
        pid = tl.program_id(0)
        p = 0
        p_end = passes  # (the pair's own count, below)
        slot = pid.to(tl.int64)
    w = tl.arange(0, W)
    pq = tl.load(pair_q_ptr + pid)
    pt = tl.load(pair_t_ptr + pid)
    qs = tl.load(q_start_ptr + pq)
    ts = tl.load(t_start_ptr + pt)
    m = tl.load(q_len_ptr + pq).to(tl.int32)
    n = tl.load(t_len_ptr + pt).to(tl.int32)
    pad = width - 1
    zero = tl.zeros((W,), tl.int32)
    ring = ring_ptr + tl.load(ring_at_ptr + pid)
    buf = buf_ptr + slot * 4 * W + w
    p_end = tl.minimum(p_end, tl.cdiv(m, W * ROWS))  # the pair's passes
    if MODE == LOCAL:
        best = zero
        best_i = zero
    else:  # (pass 0 holds the borders' candidates)
        if MODE == GLOBAL:  # H[0][n] or H[m][0] when a side is empty, else the lane of row m sets it
            first = tl.where(m > 0, _gap(m, gap_open, gap_extend), _gap(n, gap_open, gap_extend))
            best = tl.where((w == 0) & ((m == 0) | (n == 0)) & (p == 0), first, NEG)
        else:
            best = tl.where((w == 0) & (p == 0), _gap(m, gap_open, gap_extend), NEG)  # lane 0 holds H[m][0]
        best_i = zero + m
    best_j = zero
    seen = 0  # columns of the pass above known done
    while p < p_end:  # passes of W tiles
        r0 = p * (W * ROWS) + w * ROWS  # each lane's first row (0-based)
        rows, hs, es, last, corner = _tile(q_ptr, qs, r0, m, pad, table_ptr, width, zero, gap_open, gap_extend,
                                           MODE, ROWS)
        row_in = ring + ((p + 1) % 2) * 2 * (n + 1)
        row_out = ring + (p % 2) * 2 * (n + 1)
        flag_in = sync_ptr + 2 + pid.to(tl.int64) * passes + p - 1
        flag_out = flag_in + 1
        from_above = zero + p > 0  # (pass 0 starts from row 0's border)
        h_in = zero
        f_in = zero
        t = 0
        while t < n + W - 1:
            col = t - w + 1  # each lane's column (j)
            live = (col >= 1) & (col <= n)
            # lane 0 reads the pass above's last row (row 0's border in pass 0); the others
            # got theirs through buf last step
            if PIPE:
                if (p > 0) & (t + 1 <= n) & (t + 1 > seen):
                    seen = wait_until(flag_in, t + 1)
            above = (w == 0) & live & from_above
            h_top = tl.load(row_in + 2 * col, mask=above, other=0, cache_modifier=".cg")
            f_top = tl.load(row_in + 2 * col + 1, mask=above, other=NEG, cache_modifier=".cg")
            if MODE == GLOBAL:
                h_top = tl.where(from_above, h_top, _gap(col, gap_open, gap_extend))
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
            tl.store(row_out + 2 * col, h_up, mask=(w == W - 1) & live)  # the pass's last row
            tl.store(row_out + 2 * col + 1, f_up, mask=(w == W - 1) & live)
            tl.debug_barrier()
            if PIPE:
                if (p + 1) * (W * ROWS) < m:  # a pass below reads this one's last row: lane W - 1 has
                    done = tl.minimum(t - W + 2, n)  # written columns 1 .. t - W + 2
                    if (done > 0) & ((done % HAND_OFF == 0) | (done == n)):
                        tl.atomic_xchg(flag_out, done, sem="release")
            h_in = tl.load(here - 1, mask=w > 0, other=0)
            f_in = tl.load(here + W - 1, mask=w > 0, other=0)
            t += 1
        p += 1
    if seen == GAVE_UP:
        tl.atomic_add(sync_ptr + 1, 1)
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
    tl.store(score_ptr + slot, top)
    if TRACK:
        tl.store(q_end_ptr + slot, i_top.to(tl.int64))
        tl.store(t_end_ptr + slot, j_top.to(tl.int64))


HAND_OFF = 16  # a pass publishes its progress every HAND_OFF columns
W_MAX = 128  # lanes (row tiles) per pair and pass
W_SMALL = 32  # for queries of up to 32 tiles


def wave_width(q_longest: int, rows: int) -> int:
    """Lanes per pass for queries up to q_longest residues: two variants (each compiles for ~20 s)."""
    return min(W_SMALL, W_MAX) if triton.cdiv(q_longest, rows) <= W_SMALL else W_MAX


def align_long(q_codes, q_starts, q_lens, t_codes, t_starts, t_lens, pair_q, pair_t, padded, gap_open: int,
               gap_extend: int, mode: int, track: bool, rows: int, W: int, ring, ring_at, buf, sync, passes: int,
               pipe: bool, score, q_end, t_end):
    """Pairs pair_q[i], pair_t[i], writing slot i (without ``pipe``) or slots i x passes ..
    (i + 1) x passes - 1 (with it: one program per pass, their bests reduced by the caller)
    of score / q_end / t_end. ``padded``: the table with its pad code (align.padded_table);
    ``W``: lanes per pass (wave_width of the longest query); ``passes``: the longest query's
    passes; scratch: pair i's ring of 4 int32 per target column (and one more) at
    ``ring[ring_at[i]:]``, ``buf`` 4 W int32 per slot; ``sync``: 2 + P x passes int32, zeroed
    here (the ticket, the count of waits that gave up, the progress counters)."""
    P = pair_q.numel()
    if P == 0:
        return
    if pipe:
        sync.zero_()
    align_wave_kernel[(P * passes if pipe else P,)](
        q_codes, q_starts, q_lens, t_codes, t_starts, t_lens, pair_q, pair_t,
        padded, padded.shape[0], gap_open, gap_extend, ring, ring_at, buf, sync, P, passes,
        score, q_end, t_end,
        MODE=mode, TRACK=track, ROWS=rows, W=W, PIPE=pipe, HAND_OFF=HAND_OFF, num_warps=max(1, W // 32),
    )


def best_of_passes(score, q_end, t_end, passes: int):
    """Each pair's best cell over its passes' slots (score, then the smallest target end, then
    the smallest query end)."""
    score, q_end, t_end = (x.view(-1, passes) for x in (score, q_end, t_end))
    top = score.max(1, keepdim=True).values
    at = score == top
    j = torch.where(at, t_end, BIG.value).min(1, keepdim=True).values
    i = torch.where(at & (t_end == j), q_end, BIG.value).min(1).values
    return top.view(-1), i, j.view(-1)


settle_module(__name__)  # the same cache keys in every process (cache_keys.py)
