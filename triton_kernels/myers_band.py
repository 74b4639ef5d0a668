"""Myers' bit-vector algorithm on the blocks of Ukkonen's band: the column in memory,
only the blocks that can hold a cell <= K computed (Myers 1999 section 4; edlib's form).

Block w holds pattern rows 64 w + 1 .. 64 w + 64. With a bound K (k of a search, a
pair's max_distance, a hit's distance), every cell of the blocks below the last active
block y is > K, so they are not computed: a cell of block y + 1 can only come to <= K
through its first row, which happens exactly when block y's bottom was K in the
previous column and its next row matches, or the bottom dropped below K (hin < 0); a
block entering the band starts from the previous column's bottom + 1, + 2, ...: bounds
from above that are exact wherever the true value is <= K (an optimal path never leaves
cells <= K). Block y leaves the band when its bottom score minus its +1 deltas (a lower
bound of its cells) is > K. Global modes (row 0 is j) also drop the first block f once
its cells and row 0 are past K (then hin = +1 above f), and a lane whose band is empty
stops: its distance is > K, reported as K + 1. Values <= K are exact; larger ones are
reported only as "> K". BEST bounds itself by its best value so far; with no bound
(K = BIG) every block is computed, which is the plain column-in-memory algorithm for
patterns past the wavefront's reach.

Modes as in myers.py. State per lane: pv, mv and the bottom score of each block, [3 x
words] int64 in ``state`` (L1/L2 resident, coalesced across lanes).

Pure: imports only torch and triton.
"""

import torch
import triton
import triton.language as tl

from .cache_keys import settle_module
from .myers import BEST, BIG, DIST, HITS, LAST, MODES, PROFILE, _above, _append, _band_word, _stretches, grid_y_launches


@triton.jit(do_not_specialize=["n_lanes", "n_sym", "n_words", "n_state", "k", "q0", "out_stride", "capacity", "q_first"])  # one variant per constexpr set
def myers_band_kernel(
    codes_ptr, lane_pat_ptr, lane_start_ptr, lane_len_ptr, lane_own_ptr, lane_tag_ptr, n_lanes,
    pat_len_ptr, peq_ptr, n_sym, n_words, state_ptr, n_state,
    k, q0, out_ptr, out2_ptr, out3_ptr, out4_ptr, out_stride, counter_ptr, capacity, q_first,
    MODE: tl.constexpr, PER_LANE_PATTERN: tl.constexpr, BLOCK: tl.constexpr,
):
    """As myers_kernel (lanes, outputs) for patterns of any number of words. The bound
    K is ``k`` (HITS, DIST: BIG for none), the lane's target (LAST) or its best (BEST).
    The state of word w of the lane in ``slot`` is at (3 w + i) n_state + slot, i = 0, 1, 2."""
    lane = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    ok, q, slot, m, t0, n = _stretches(lane, n_lanes, lane_pat_ptr, pat_len_ptr, lane_start_ptr, lane_len_ptr,
                                       q_first, PER_LANE_PATTERN)
    # int64: state offsets (3 w + 2) n_state pass 2^31 in a genome search (200 patterns of
    # 10 kbp on 3.1 Gbp in 64 k-code chunks: 3 x 157 words x 9.5 M lanes); scalars, once a word
    n_state = tl.cast(n_state, tl.int64)
    row = tl.maximum(m - 1, 0)
    last_word = row // 64
    table = peq_ptr + q * n_sym * n_words
    zero = tl.zeros((BLOCK,), tl.uint64)
    ones = zero - 1
    bit63 = (zero + 1) << 63
    last_mask = (zero + 1) << (row % 64).to(tl.uint64)
    GLOBAL: tl.constexpr = MODE == DIST or MODE == LAST
    top = 1 if GLOBAL else 0  # row 0: D[0][j] = j (global) or 0 (a match starts anywhere)
    score = m  # D[m][0]
    if MODE == HITS or MODE == BEST or MODE == PROFILE:
        own = tl.load(lane_own_ptr + lane, mask=ok, other=0)
        first_j = (tl.minimum(tl.maximum(own - t0, 0), n.to(tl.int64) + 1) - 1).to(tl.int32)
    if MODE == LAST:
        bound = tl.load(lane_tag_ptr + lane, mask=ok, other=0).to(tl.int32)
        last = tl.where(ok & (score == bound), 0, -1)
    elif MODE == BEST:
        best = tl.where(ok & (first_j < 0), score, BIG)
        best_j = tl.zeros((BLOCK,), tl.int32)
        bound = m  # no semi-global distance exceeds m
    elif MODE == PROFILE:
        bound = tl.full((BLOCK,), BIG, tl.int32)
    else:
        bound = k + tl.zeros((BLOCK,), tl.int32)
    if MODE == HITS:
        tag = tl.load(lane_tag_ptr + lane, mask=ok, other=0)
        first = ok & (first_j < 0) & (score <= bound)
        _append(first, t0, q + q0, score, tag, counter_ptr, capacity, out_ptr, out2_ptr, out3_ptr, out4_ptr)
    # column 0 is D[i][0] = i: the band is the blocks with a row <= K
    f = tl.zeros((BLOCK,), tl.int32)
    y = tl.minimum(last_word, tl.maximum(bound, 0) // 64)
    w = 0
    y_max = tl.max(tl.where(ok, y, 0), 0)
    while w <= y_max:
        init = ok & (w <= y)
        tl.store(state_ptr + (3 * w) * n_state + slot, ones.to(tl.int64, bitcast=True), mask=init)
        tl.store(state_ptr + (3 * w + 1) * n_state + slot, zero.to(tl.int64, bitcast=True), mask=init)
        tl.store(state_ptr + (3 * w + 2) * n_state + slot, tl.minimum(64 * (w + 1), m).to(tl.int64), mask=init)
        w += 1
    alive = ok & (n > 0)
    j = 0
    while tl.max(alive.to(tl.int32), 0) > 0:
        if MODE == LAST:
            c = tl.load(codes_ptr + t0 + n - 1 - j, mask=alive, other=0).to(tl.int64)
        else:
            c = tl.load(codes_ptr + t0 + j, mask=alive, other=0).to(tl.int64)
        known = alive & (c < n_sym)
        eq_row = table + c * n_words
        hin = tl.full((BLOCK,), 1, tl.int32) * top  # above block f: row 0, or +1 past a dropped block
        s_above = tl.zeros((BLOCK,), tl.int32)  # the bottom score of the block above, this column
        grow = alive & (y < 0)  # block y + 1 entered the band (all False here)
        pv_f, s_f, pv_y, s_y = zero, s_above, zero, s_above
        w = tl.min(tl.where(alive, f, n_words), 0)
        w_end = tl.max(tl.where(alive, tl.minimum(y + 1, last_word), -1), 0)
        while w <= w_end:
            active = alive & (w >= f) & (w <= y)
            eq = tl.load(eq_row + w, mask=known & (w >= f) & (w <= y + 1), other=0).to(tl.uint64, bitcast=True)
            enter = alive & (w == y + 1) & (w <= last_word) & (s_above - hin <= bound) & (((eq & 1) != 0) | (hin < 0))
            use = active | enter
            bottom = tl.where(w == last_word, last_mask, bit63)
            pv, mv, s, carry = _band_word(state_ptr + (3 * w) * n_state + slot, n_state, active, use, eq, hin, s_above,
                                          bottom, ones)
            hin = tl.where(use, carry, hin)
            s_above = tl.where(use, s, s_above)
            pv_y = tl.where(use, pv, pv_y)
            s_y = tl.where(use, s, s_y)
            first_here = use & (w == f)
            pv_f = tl.where(first_here, pv, pv_f)
            s_f = tl.where(first_here, s, s_f)
            grow = tl.where(w == y + 1, enter, grow)
            w += 1
        y = tl.where(grow, y + 1, y)
        in_band = alive & (y == last_word)
        score = tl.where(in_band, s_y, tl.where(alive, BIG, score))
        # leave the band: the last block, then (global) the first, when all their cells are > K
        bottom_y = tl.where(y == last_word, last_mask, bit63)
        row0_past = GLOBAL & (j + 1 > bound)  # row 0 can no longer feed a cell <= K
        drop_y = alive & (_above(pv_y, s_y, bottom_y) > bound) & ((y > f) | row0_past)
        if GLOBAL:
            bottom_f = tl.where(f == last_word, last_mask, bit63)
            drop_f = alive & row0_past & (f <= y) & (_above(pv_f, s_f, bottom_f) > bound)
            f = tl.where(drop_f & ~(drop_y & (f == y)), f + 1, f)
        y = tl.where(drop_y, y - 1, y)
        if MODE == HITS:
            hit = in_band & (j >= first_j) & (score <= bound)
            _append(hit, t0 + j + 1, q + q0, score, tag, counter_ptr, capacity, out_ptr, out2_ptr, out3_ptr,
                    out4_ptr)
        if MODE == BEST:
            better = in_band & (j >= first_j) & (score < best)
            best_j = tl.where(better, j + 1, best_j)
            best = tl.where(better, score, best)
            bound = tl.where(first_j <= j, tl.minimum(bound, best), bound)
        if MODE == PROFILE:
            tl.store(out_ptr + q * out_stride + t0 + j, score, mask=alive & (j >= first_j))
        if MODE == LAST:
            last = tl.where(in_band & (score == bound), j + 1, last)
        j += 1
        alive = alive & (j < n) & (f <= y)
    if MODE == DIST:
        d = tl.where((f <= y) & (y == last_word), score, bound + 1)  # out of the band: the distance is > K
        tl.store(out_ptr + slot, tl.where(m > 0, d, n), mask=ok)  # empty pattern: n
    if MODE == BEST:
        tl.store(out_ptr + slot, best, mask=ok)
        tl.store(out2_ptr + slot, t0 + best_j, mask=ok)
    if MODE == LAST:
        tl.store(out_ptr + slot, last.to(tl.int64), mask=ok)


def run(mode: str, codes, peq, pat_lens, lane_starts, lane_lens, *, lane_pats=None, n_programs_q: int = 1,
        own=None, tag=None, k: int = BIG.value, q0: int = 0, out=None, out2=None, out3=None, out4=None,
        out_stride: int = 0, counter=None, capacity: int = 0, block: int = 64):
    """As myers.run, for patterns of any number of words; ``k`` is the bound of HITS and DIST."""
    n_lanes = lane_lens.numel()
    n_sym, words = peq.shape[1], peq.shape[2]
    if n_lanes == 0 or n_programs_q == 0:
        return
    n_state = n_lanes * (1 if lane_pats is not None else n_programs_q)
    state = torch.empty(3 * words * n_state, dtype=torch.int64, device=codes.device)
    dummy = lane_lens
    for q_first, n_q in grid_y_launches(1 if lane_pats is not None else n_programs_q):
        myers_band_kernel[(triton.cdiv(n_lanes, block), n_q)](
            codes, dummy if lane_pats is None else lane_pats, lane_starts, lane_lens,
            dummy if own is None else own, dummy if tag is None else tag, n_lanes,
            pat_lens, peq, n_sym, words, state, n_state,
            min(k, BIG.value), q0, out, dummy if out2 is None else out2, dummy if out3 is None else out3,
            dummy if out4 is None else out4, out_stride, dummy if counter is None else counter, capacity, q_first,
            MODE=MODES[mode], PER_LANE_PATTERN=lane_pats is not None, BLOCK=block,
            num_warps=max(1, min(4, block // 32)),
        )


settle_module(__name__)  # the same cache keys in every process (cache_keys.py)
