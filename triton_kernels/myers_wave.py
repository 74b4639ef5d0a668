"""Myers' bit-vector algorithm for long patterns as an anti-diagonal wavefront over words.

The second paper's anti-diagonal DP, one level up: a pattern of W words (64 rows each)
runs on W lanes, lane w holds word w of the column in registers, and at step t lane w
computes column t - w. The only dependency between words is the horizontal carry
leaving a word's bottom row, which lane w + 1 needs one step later: it passes through a
small double-buffered scratch array (one barrier per step). Every lane works on every
step (after a W - 1 step ramp), so one long pattern on one text stretch keeps W lanes
busy, and a program runs C stretches side by side: [C, W] lanes.

Modes as in myers.py (DIST, HITS, BEST, PROFILE, LAST); the lane holding the pattern's
last row (word last_word) keeps the score and does the mode's bookkeeping.

Pure: imports only torch and triton.
"""

import torch
import triton
import triton.language as tl

from .cache_keys import settle_module
from .myers import (BEST, BIG, DIST, HITS, LAST, MODES, PROFILE, _append, _carry, _delta, _myers_word, _stretches,
                    grid_y_launches)

MAX_WORDS = 1024  # lanes of one stretch: patterns of up to 65,536 codes
LANES = 64  # C x W per program (64, 128, 256 measured within 10%: NOTES.md)


@triton.jit(do_not_specialize=["n_lanes", "n_sym", "n_words", "k", "q0", "out_stride", "capacity", "q_first"])  # one variant per constexpr set
def myers_wave_kernel(
    codes_ptr, lane_pat_ptr, lane_start_ptr, lane_len_ptr, lane_own_ptr, lane_tag_ptr, n_lanes,
    pat_len_ptr, peq_ptr, n_sym, n_words, scratch_ptr,
    k, q0, out_ptr, out2_ptr, out3_ptr, out4_ptr, out_stride, counter_ptr, capacity, q_first,
    MODE: tl.constexpr, PER_LANE_PATTERN: tl.constexpr, W: tl.constexpr, C: tl.constexpr,
):
    """Stretch s = program_id(0) * C + row of the [C, W] lane grid; its pattern is
    lane_pat[s] (PER_LANE_PATTERN) or q = q_first + program_id(1). Outputs index
    q * n_lanes + s."""
    s = tl.program_id(0) * C + tl.arange(0, C)
    ok, q, slot, m, t0, n = _stretches(s, n_lanes, lane_pat_ptr, pat_len_ptr, lane_start_ptr, lane_len_ptr,
                                       q_first, PER_LANE_PATTERN)
    row = tl.maximum(m - 1, 0)
    last_word = row // 64
    w = tl.arange(0, W)
    is_last = w[None, :] == last_word[:, None]  # [C, W]: the lane that keeps the score
    table = (peq_ptr + q * n_sym * n_words)[:, None] + w[None, :]
    zero = tl.zeros((C, W), tl.uint64)
    ones = zero - 1
    last_mask = (zero + 1) << (row % 64).to(tl.uint64)[:, None]
    if MODE == DIST or MODE == LAST:
        top = 1  # row 0 is D[0][j] = j
    else:
        top = 0  # row 0 is 0: a match starts anywhere
    pv, mv = ones, zero
    score = m[:, None] + tl.zeros((C, W), tl.int32)
    if MODE == HITS or MODE == BEST or MODE == PROFILE:
        own = tl.load(lane_own_ptr + s, mask=ok, other=0)
        first_col = (tl.minimum(tl.maximum(own - t0, 0), n.to(tl.int64) + 1) - 1).to(tl.int32)
        first_j = first_col[:, None]
    if MODE == BEST:
        best = tl.where(ok[:, None] & (first_j < 0), score, BIG)
        best_j = tl.zeros((C, W), tl.int32)
    if MODE == HITS:
        tag = tl.load(lane_tag_ptr + s, mask=ok, other=0)
        first = ok & (first_col < 0) & (m <= k)
        _append(first, t0, q + q0, m, tag, counter_ptr, capacity, out_ptr, out2_ptr, out3_ptr, out4_ptr)
        tag = tag[:, None] + tl.zeros((C, W), tl.int64)
        pat_id = (q + q0)[:, None] + tl.zeros((C, W), tl.int64)
    if MODE == LAST:
        target = tl.load(lane_tag_ptr + s, mask=ok, other=0).to(tl.int32)[:, None]
        last = tl.where(ok[:, None] & (score == target), 0, -1)
    # the carry each lane passes down: two buffers, so one barrier per step suffices
    pid = tl.program_id(1).to(tl.int64) * tl.num_programs(0) + tl.program_id(0)
    buf = scratch_ptr + pid * (2 * C * W) + (tl.arange(0, C) * W)[:, None] + w[None, :]
    hin = tl.zeros((C, W), tl.int32) + top
    steps = tl.max(n, 0) + tl.max(last_word, 0)
    t = 0
    while t <= steps:
        j = t - w[None, :]  # the column each lane computes now
        live = ok[:, None] & (j >= 0) & (j < n[:, None]) & (w[None, :] < n_words)
        if MODE == LAST:
            at = (t0 + n - 1)[:, None] - j
        else:
            at = t0[:, None] + j
        c = tl.load(codes_ptr + at, mask=live, other=0).to(tl.int64)
        known = live & (c < n_sym)
        eq = tl.load(table + c * n_words, mask=known, other=0).to(tl.uint64, bitcast=True)
        pv2, mv2, ph, mh = _myers_word(pv, mv, eq, hin, ones)
        pv = tl.where(live, pv2, pv)
        mv = tl.where(live, mv2, mv)
        here = buf + (t % 2) * (C * W)
        tl.store(here, _carry(ph, mh))
        tl.debug_barrier()
        hin = tl.load(here - 1, mask=w[None, :] > 0, other=top)
        mine = live & is_last
        score += tl.where(mine & (m[:, None] > 0), _delta(ph, mh, last_mask), 0)
        if MODE == HITS:
            hit = mine & (j >= first_j) & (score <= k)
            _append(hit, t0[:, None] + j + 1, pat_id, score, tag, counter_ptr, capacity, out_ptr, out2_ptr,
                    out3_ptr, out4_ptr)
        if MODE == BEST:
            better = mine & (j >= first_j) & (score < best)
            best_j = tl.where(better, j + 1, best_j)
            best = tl.where(better, score, best)
        if MODE == PROFILE:
            tl.store(out_ptr + q[:, None] * out_stride + at, score, mask=mine & (j >= first_j))
        if MODE == LAST:
            last = tl.where(mine & (score == target), j + 1, last)
        t += 1
    if MODE == DIST:
        d = tl.sum(tl.where(is_last, score, 0), 1)
        tl.store(out_ptr + slot, tl.where(m > 0, d, n), mask=ok)
    if MODE == BEST:
        tl.store(out_ptr + slot, tl.sum(tl.where(is_last, best, 0), 1), mask=ok)
        tl.store(out2_ptr + slot, t0 + tl.sum(tl.where(is_last, best_j, 0), 1), mask=ok)
    if MODE == LAST:
        tl.store(out_ptr + slot, tl.sum(tl.where(is_last, last, 0), 1).to(tl.int64), mask=ok)


def run(mode: str, codes, peq, pat_lens, lane_starts, lane_lens, *, lane_pats=None, n_programs_q: int = 1,
        own=None, tag=None, k: int = 0, q0: int = 0, out=None, out2=None, out3=None, out4=None,
        out_stride: int = 0, counter=None, capacity: int = 0, lanes: int | None = None):
    """As myers.run, for patterns of 3 .. MAX_WORDS words."""
    n_lanes = lane_lens.numel()
    n_sym, words = peq.shape[1], peq.shape[2]
    if n_lanes == 0 or n_programs_q == 0:
        return
    W = triton.next_power_of_2(words)
    C = max(1, (lanes or LANES) // W)
    launches = grid_y_launches(1 if lane_pats is not None else n_programs_q)
    n_x = triton.cdiv(n_lanes, C)
    # the carries between lanes, per program of a launch (the launches run one after another)
    scratch = torch.empty(n_x * launches[0][1] * 2 * C * W, dtype=torch.int32, device=codes.device)
    dummy = lane_lens
    for q_first, n_q in launches:
        myers_wave_kernel[(n_x, n_q)](
            codes, dummy if lane_pats is None else lane_pats, lane_starts, lane_lens,
            dummy if own is None else own, dummy if tag is None else tag, n_lanes,
            pat_lens, peq, n_sym, words, scratch,
            k, q0, out, dummy if out2 is None else out2, dummy if out3 is None else out3,
            dummy if out4 is None else out4, out_stride, dummy if counter is None else counter, capacity, q_first,
            MODE=MODES[mode], PER_LANE_PATTERN=lane_pats is not None, W=W, C=C,
            num_warps=max(1, min(8, C * W // 32)),
        )


settle_module(__name__)  # the same cache keys in every process (cache_keys.py)
