"""Myers / Hyyro bit-vector edit distance: 64 DP cells of a column per machine word.

A lane runs one pattern (the DP's rows, in blocks of 64 = words) against one stretch of
text (the columns), one text code per step. Patterns of any length: one or two words
live in registers, more live in a per-lane state array in global memory (L1/L2
resident, coalesced across lanes). The pattern's match masks are ``peq[q, code, word]``
(uint64 bit patterns stored as int64); codes >= n_sym match nothing.

Modes (constexpr MODE):
- DIST: global distance (row 0 is D[0][j] = j); out[lane] = D[m][n].
- HITS: semi-global (row 0 is 0: the match may start anywhere); every column whose end
  (exclusive text position) is >= own[lane] and whose D[m][j] <= k is appended to
  out (end), out2 (pattern + q0), out3 (distance), out4 (the lane's tag: its text) through
  an atomic counter.
- BEST: semi-global; out[lane] = the least D[m][j] over ends >= own, out2[lane] = its first end.
- PROFILE: semi-global; out[q, end - 1] = D[m][j] for ends >= own.
- LAST: global, text read backwards from start + len; out[lane] = the largest j <= len
  with D[m][j] == tag[lane] (-1 if none): the longest alignment ending at a hit, i.e.
  its earliest start.

Pure: imports only torch and triton.
"""

import torch
import triton
import triton.language as tl

DIST = tl.constexpr(0)
HITS = tl.constexpr(1)
BEST = tl.constexpr(2)
PROFILE = tl.constexpr(3)
LAST = tl.constexpr(4)
MODES = {"dist": 0, "hits": 1, "best": 2, "profile": 3, "last": 4}
BIG = tl.constexpr(1 << 30)


@triton.jit
def _myers_word(pv, mv, eq, hin, ones):
    """One 64-row block of a DP column (Hyyro's step, edlib's block form): the vertical
    delta vectors pv / mv (uint64), the text code's match mask eq, the horizontal delta
    entering from above (hin, int32 in {-1, 0, 1}). Returns the new pv, mv and the
    horizontal delta vectors ph, mh before their shift (bit i: row i's delta).
    ``x ^ ones`` is ~x: triton 3.6's interpreter cannot invert a uint64."""
    xv = eq | mv
    eq = tl.where(hin < 0, eq | 1, eq)
    xh = (((eq & pv) + pv) ^ pv) | eq
    ph = mv | ((xh | pv) ^ ones)
    mh = pv & xh
    ph2 = ph << 1
    mh2 = mh << 1
    mh2 = tl.where(hin < 0, mh2 | 1, mh2)
    ph2 = tl.where(hin > 0, ph2 | 1, ph2)
    return mh2 | ((xv | ph2) ^ ones), ph2 & xv, ph, mh


@triton.jit
def _delta(ph, mh, mask):
    """The horizontal delta (-1, 0, 1) of the block row whose bit is set in ``mask``."""
    return ((ph & mask) != 0).to(tl.int32) - ((mh & mask) != 0).to(tl.int32)


@triton.jit
def _carry(ph, mh):
    """The horizontal delta leaving a block's bottom row (bit 63): the next block's hin."""
    return (ph >> 63).to(tl.int32) - (mh >> 63).to(tl.int32)


@triton.jit
def _memory_word(eq_row, w, state_ptr, n_state, slot, ok, known, hin, h, last_word, last_mask, ones):
    """Hyyro's step on word w of a column kept in ``state``; returns (carry out, h)."""
    eq = tl.load(eq_row + w, mask=known, other=0).to(tl.uint64, bitcast=True)
    pv_at = state_ptr + (2 * w) * n_state + slot
    mv_at = state_ptr + (2 * w + 1) * n_state + slot
    pv = tl.load(pv_at, mask=ok, other=0).to(tl.uint64, bitcast=True)
    mv = tl.load(mv_at, mask=ok, other=0).to(tl.uint64, bitcast=True)
    pv, mv, ph, mh = _myers_word(pv, mv, eq, hin, ones)
    tl.store(pv_at, pv.to(tl.int64, bitcast=True), mask=ok)
    tl.store(mv_at, mv.to(tl.int64, bitcast=True), mask=ok)
    return _carry(ph, mh), tl.where(last_word == w, _delta(ph, mh, last_mask), h)


@triton.jit
def _stretches(s, n_lanes, lane_pat_ptr, pat_len_ptr, lane_start_ptr, lane_len_ptr, PER_LANE_PATTERN: tl.constexpr):
    """Text stretches s: (in range, pattern q, output slot, pattern length, text start,
    stretch length). The pattern is lane_pat[s], or program_id(1) for all (then the
    slot is q * n_lanes + s)."""
    ok = s < n_lanes
    if PER_LANE_PATTERN:
        q = tl.load(lane_pat_ptr + s, mask=ok, other=0).to(tl.int64)
        slot = s.to(tl.int64)
    else:
        q = tl.program_id(1) + s.to(tl.int64) * 0
        slot = q * n_lanes + s
    m = tl.load(pat_len_ptr + q, mask=ok, other=0).to(tl.int32)
    t0 = tl.load(lane_start_ptr + s, mask=ok, other=0)
    n = tl.load(lane_len_ptr + s, mask=ok, other=0).to(tl.int32)  # a stretch is < 2^31 codes
    return ok, q, slot, m, t0, n


@triton.jit
def myers_kernel(
    codes_ptr, lane_pat_ptr, lane_start_ptr, lane_len_ptr, lane_own_ptr, lane_tag_ptr, n_lanes,
    pat_len_ptr, peq_ptr, n_sym, n_words, state_ptr, n_state,
    k, q0, out_ptr, out2_ptr, out3_ptr, out4_ptr, out_stride, counter_ptr, capacity,
    MODE: tl.constexpr, PER_LANE_PATTERN: tl.constexpr, WORDS: tl.constexpr, BLOCK: tl.constexpr,
):
    """Lane l of program (i, q) is text stretch l = i * BLOCK + arange; its pattern is
    lane_pat[l] (PER_LANE_PATTERN) or q = program_id(1) for every lane (uniform match
    masks). Outputs and state index q * n_lanes + l. WORDS: 1 or 2 keep the column in
    registers; 0 keeps n_words words per lane in ``state`` (patterns longer than
    myers_wave.MAX_WORDS words; shorter ones of 3+ words run in myers_wave)."""
    lane = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    ok, q, slot, m, t0, n = _stretches(lane, n_lanes, lane_pat_ptr, pat_len_ptr, lane_start_ptr, lane_len_ptr,
                                       PER_LANE_PATTERN)
    row = tl.maximum(m - 1, 0)  # the last pattern row: its word and bit
    last_word = row // 64
    stride = WORDS if WORDS > 0 else n_words  # a constant in the register variants
    table = peq_ptr + q * n_sym * stride
    zero = tl.zeros((BLOCK,), tl.uint64)
    ones = zero - 1  # all bits set
    last_mask = (zero + 1) << (row % 64).to(tl.uint64)
    if MODE == DIST or MODE == LAST:
        top = tl.full((BLOCK,), 1, tl.int32)  # row 0 is D[0][j] = j
    else:
        top = tl.zeros((BLOCK,), tl.int32)  # row 0 is 0: a match starts anywhere
    pv0, mv0, pv1, mv1 = ones, zero, ones, zero
    if WORDS == 0:
        w = 0
        while w < n_words:
            tl.store(state_ptr + (2 * w) * n_state + slot, ones.to(tl.int64, bitcast=True), mask=ok)
            tl.store(state_ptr + (2 * w + 1) * n_state + slot, zero.to(tl.int64, bitcast=True), mask=ok)
            w += 1
    score = m  # D[m][0]
    if MODE == HITS or MODE == BEST or MODE == PROFILE:
        # column j (after code j) is the end t0 + j + 1: reported from column first_j on
        own = tl.load(lane_own_ptr + lane, mask=ok, other=0)
        first_j = (tl.minimum(tl.maximum(own - t0, 0), n.to(tl.int64) + 1) - 1).to(tl.int32)
    if MODE == BEST:
        best = tl.where(ok & (first_j < 0), score, BIG)
        best_j = tl.zeros((BLOCK,), tl.int32)  # columns consumed at the best end
    if MODE == HITS:
        tag = tl.load(lane_tag_ptr + lane, mask=ok, other=0)
        first = ok & (first_j < 0) & (score <= k)
        _append(first, t0, q + q0, score, tag, counter_ptr, capacity, out_ptr, out2_ptr, out3_ptr, out4_ptr)
    if MODE == LAST:
        target = tl.load(lane_tag_ptr + lane, mask=ok, other=0)
        last = tl.where(ok & (score == target), 0, -1)
    n_max = tl.max(n, 0)
    j = 0
    while j < n_max:
        live = ok & (j < n)
        if MODE == LAST:
            c = tl.load(codes_ptr + t0 + n - 1 - j, mask=live, other=0).to(tl.int64)
        else:
            c = tl.load(codes_ptr + t0 + j, mask=live, other=0).to(tl.int64)
        known = live & (c < n_sym)
        eq_row = table + c * stride
        if WORDS == 0:
            hin = top
            h = tl.zeros((BLOCK,), tl.int32)
            w = 0
            while w < n_words:
                hin, h = _memory_word(eq_row, w, state_ptr, n_state, slot, ok, known, hin, h, last_word,
                                      last_mask, ones)
                w += 1
        else:
            eq0 = tl.load(eq_row, mask=known, other=0).to(tl.uint64, bitcast=True)
            pv0, mv0, ph0, mh0 = _myers_word(pv0, mv0, eq0, top, ones)
            h = _delta(ph0, mh0, last_mask)
            if WORDS == 2:
                eq1 = tl.load(eq_row + 1, mask=known, other=0).to(tl.uint64, bitcast=True)
                pv1, mv1, ph1, mh1 = _myers_word(pv1, mv1, eq1, _carry(ph0, mh0), ones)
                h = tl.where(last_word == 1, _delta(ph1, mh1, last_mask), h)
        score += tl.where(live & (m > 0), h, 0)
        if MODE == HITS:
            hit = live & (j >= first_j) & (score <= k)
            _append(hit, t0 + j + 1, q + q0, score, tag, counter_ptr, capacity, out_ptr, out2_ptr, out3_ptr,
                    out4_ptr)
        if MODE == BEST:
            better = live & (j >= first_j) & (score < best)
            best_j = tl.where(better, j + 1, best_j)
            best = tl.where(better, score, best)
        if MODE == PROFILE:
            tl.store(out_ptr + q * out_stride + t0 + j, score, mask=live & (j >= first_j))
        if MODE == LAST:
            last = tl.where(live & (score == target), j + 1, last)
        j += 1
    if MODE == DIST:
        tl.store(out_ptr + slot, tl.where(m > 0, score, n), mask=ok)  # empty pattern: n
    if MODE == BEST:
        tl.store(out_ptr + slot, best, mask=ok)
        tl.store(out2_ptr + slot, t0 + best_j, mask=ok)
    if MODE == LAST:
        tl.store(out_ptr + slot, last.to(tl.int64), mask=ok)


@triton.jit
def _append(hit, end, q, score, tag, counter_ptr, capacity, end_out, pat_out, dist_out, tag_out):
    """Append the lanes' hits (end, pattern, distance, tag), one predicated atomic per lane
    (no block-wide reduction on the hot path); slots past capacity are counted only."""
    slot = tl.atomic_add(counter_ptr + tl.zeros_like(end), tl.full(end.shape, 1, tl.int64), mask=hit)
    keep = hit & (slot < capacity)
    tl.store(end_out + slot, end, mask=keep)
    tl.store(pat_out + slot, q.to(tl.int32), mask=keep)
    tl.store(dist_out + slot, score, mask=keep)
    tl.store(tag_out + slot, tag, mask=keep)


def n_words(longest: int) -> int:
    return max(1, triton.cdiv(longest, 64))


def match_masks(codes, starts, lens, n_sym: int, words: int, reverse: bool = False) -> torch.Tensor:
    """int64 [n, n_sym, words]: bit i of word w is set where pattern position 64 w + i
    (counted from the pattern's end with ``reverse``) holds the code; codes >= n_sym and
    positions past ``words`` x 64 set nothing. O(total pattern length)."""
    n = lens.numel()
    dev = codes.device
    peq = torch.zeros(n * n_sym * words, dtype=torch.int64, device=dev)
    total = int(lens.sum()) if n else 0
    if total:
        who = torch.repeat_interleave(torch.arange(n, device=dev), lens, output_size=total)
        first = torch.cumsum(lens, 0) - lens
        j = torch.arange(total, device=dev) - first[who]
        c = codes[starts[who] + j].to(torch.int64)
        row = lens[who] - 1 - j if reverse else j
        use = (c < n_sym) & (row < words * 64)
        bit = row % 64
        value = torch.where(bit == 63, torch.full_like(bit, -(1 << 63)), torch.ones_like(bit) << bit)
        idx = (who * n_sym + c.clamp(max=n_sym - 1)) * words + row // 64
        peq.index_add_(0, idx[use], value[use])  # distinct bits: the sum is the OR
    return peq.reshape(n, n_sym, words)


LAUNCH = {"regs": (128, 4), "memory": (64, 2)}  # (lanes per program, warps) by where the column lives
WAVE = True  # 3+ word patterns on the wavefront kernel (False: the column in memory, for comparison)


def run(mode: str, codes, peq, pat_lens, lane_starts, lane_lens, *, lane_pats=None, n_programs_q: int = 1,
        own=None, tag=None, k: int = 0, q0: int = 0, out=None, out2=None, out3=None, out4=None,
        out_stride: int = 0, counter=None, capacity: int = 0, block: int | None = None):
    """Launch the kernel over lanes (text stretches) x n_programs_q patterns (one pattern
    per program), or with ``lane_pats`` one pattern per lane. ``peq`` from match_masks.
    Patterns of 3 .. myers_wave.MAX_WORDS words go to the wavefront kernel."""
    n_lanes = lane_lens.numel()
    n_sym, words = peq.shape[1], peq.shape[2]
    if n_lanes == 0 or n_programs_q == 0:
        return
    from . import myers_wave  # (it imports this module)

    if WAVE and 2 < words <= myers_wave.MAX_WORDS:
        return myers_wave.run(mode, codes, peq, pat_lens, lane_starts, lane_lens, lane_pats=lane_pats,
                              n_programs_q=n_programs_q, own=own, tag=tag, k=k, q0=q0, out=out, out2=out2,
                              out3=out3, out4=out4, out_stride=out_stride, counter=counter, capacity=capacity)
    n_state = n_lanes * (1 if lane_pats is not None else n_programs_q)
    state = torch.empty(2 * words * n_state if words > 2 else 1, dtype=torch.int64, device=codes.device)
    dummy = lane_lens
    default_block, num_warps = LAUNCH["regs" if words <= 2 else "memory"]
    block = block or default_block
    num_warps = min(num_warps, max(1, block // 32))
    grid = (triton.cdiv(n_lanes, block), 1 if lane_pats is not None else n_programs_q)
    myers_kernel[grid](
        codes, dummy if lane_pats is None else lane_pats, lane_starts, lane_lens,
        dummy if own is None else own, dummy if tag is None else tag, n_lanes,
        pat_lens, peq, n_sym, words, state, n_state,
        k, q0, out, dummy if out2 is None else out2, dummy if out3 is None else out3,
        dummy if out4 is None else out4, out_stride,
        dummy if counter is None else counter, capacity,
        MODE=MODES[mode], PER_LANE_PATTERN=lane_pats is not None, WORDS=words if words <= 2 else 0,
        BLOCK=block,
        num_warps=num_warps,
    )


STATE_BYTES = 1 << 28  # per launch: match masks, and the column words of > 2-word patterns


def distances(codes, pat_starts, pat_lens, txt_starts, txt_lens, n_sym: int, longest: int, cdist: bool = False,
              block: int | None = None):
    """Edit distances of pattern i vs text i, or of every pattern vs every text with cdist
    ([n_pat * n_txt], pattern-major). ``longest`` bounds the patterns' lengths; patterns go
    in groups so match masks and column state stay under STATE_BYTES each."""
    n_pat, n_txt = pat_lens.numel(), txt_lens.numel()
    words = n_words(longest)
    out = torch.empty(n_pat * n_txt if cdist else n_pat, dtype=torch.int32, device=codes.device)
    lanes_per_pattern = n_txt if cdist else 1
    per = max(1, min(STATE_BYTES // (n_sym * words * 8), STATE_BYTES // (lanes_per_pattern * words * 16)))
    for p0 in range(0, n_pat, per):
        p1 = min(n_pat, p0 + per)
        peq = match_masks(codes, pat_starts[p0:p1], pat_lens[p0:p1], n_sym, words)
        if cdist:
            run("dist", codes, peq, pat_lens[p0:p1], txt_starts, txt_lens, n_programs_q=p1 - p0,
                out=out[p0 * n_txt : p1 * n_txt], block=block)
        else:
            lanes = torch.arange(p1 - p0, device=codes.device)
            run("dist", codes, peq, pat_lens[p0:p1], txt_starts[p0:p1], txt_lens[p0:p1], lane_pats=lanes,
                out=out[p0:p1], block=block)
    return out
