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

from .cache_keys import settle_module

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
def _popcount(x):
    """Set bits of a uint64, in plain tl (the interpreter has no popc)."""
    x = x - ((x >> 1) & 0x5555555555555555)
    x = (x & 0x3333333333333333) + ((x >> 2) & 0x3333333333333333)
    x = (x + (x >> 4)) & 0x0F0F0F0F0F0F0F0F
    return ((x * 0x0101010101010101) >> 56).to(tl.int32)


@triton.jit
def _band_word(at, n_state, active, use, eq, hin, s_above, bottom, ones):
    """One 64-row word of a lane's banded column (myers_band, primers): its stored state
    (pv, mv, bottom score at ``at``, ``at + n_state``, ``at + 2 n_state``), or for a word
    entering the band the score above it plus its rows; one Myers step; stored back where
    ``use``. Returns (pv, mv, bottom score, the carry into the next word)."""
    pv = tl.load(at, mask=active, other=-1).to(tl.uint64, bitcast=True)
    mv = tl.load(at + n_state, mask=active, other=0).to(tl.uint64, bitcast=True)
    s = tl.load(at + 2 * n_state, mask=active, other=0).to(tl.int32)
    s = tl.where(active, s, s_above - hin + _popcount(bottom * 2 - 1))  # entering: previous bottom + rows
    pv, mv, ph, mh = _myers_word(pv, mv, eq, hin, ones)
    s += _delta(ph, mh, bottom)
    tl.store(at, pv.to(tl.int64, bitcast=True), mask=use)
    tl.store(at + n_state, mv.to(tl.int64, bitcast=True), mask=use)
    tl.store(at + 2 * n_state, s.to(tl.int64), mask=use)
    return pv, mv, s, _carry(ph, mh)


@triton.jit
def _above(pv, score, bottom):
    """Block cells all > K iff this lower bound of them is: the bottom score minus the +1
    vertical deltas of rows 1 .. bottom (``bottom``: the bottom row's bit)."""
    return score - _popcount(pv & ((bottom << 1) - 2))


@triton.jit
def _stretches(s, n_lanes, lane_pat_ptr, pat_len_ptr, lane_start_ptr, lane_len_ptr, q_first,
               PER_LANE_PATTERN: tl.constexpr):
    """Text stretches s: (in range, pattern q, output slot, pattern length, text start,
    stretch length). The pattern is lane_pat[s], or q_first + program_id(1) for all (then
    the slot is q * n_lanes + s: int64, patterns x lanes pass 2^31 in a genome search)."""
    ok = s < n_lanes
    if PER_LANE_PATTERN:
        q = tl.load(lane_pat_ptr + s, mask=ok, other=0).to(tl.int64)
        slot = s.to(tl.int64)
    else:
        q = q_first + tl.program_id(1) + s.to(tl.int64) * 0
        slot = q * n_lanes + s
    m = tl.load(pat_len_ptr + q, mask=ok, other=0).to(tl.int32)
    t0 = tl.load(lane_start_ptr + s, mask=ok, other=0)
    n = tl.load(lane_len_ptr + s, mask=ok, other=0).to(tl.int32)  # a stretch is < 2^31 codes
    return ok, q, slot, m, t0, n


@triton.jit(do_not_specialize=["n_lanes", "n_sym", "k", "q0", "out_stride", "capacity", "q_first"])  # one variant per constexpr set
def myers_kernel(
    codes_ptr, lane_pat_ptr, lane_start_ptr, lane_len_ptr, lane_own_ptr, lane_tag_ptr, n_lanes,
    pat_len_ptr, peq_ptr, n_sym,
    k, q0, out_ptr, out2_ptr, out3_ptr, out4_ptr, out_stride, counter_ptr, capacity, q_first,
    MODE: tl.constexpr, PER_LANE_PATTERN: tl.constexpr, WORDS: tl.constexpr, BLOCK: tl.constexpr,
    CUTOFF: tl.constexpr = False,
):
    """Lane l of program (i, j) is text stretch l = i * BLOCK + arange; its pattern is
    lane_pat[l] (PER_LANE_PATTERN) or q = q_first + j for every lane (uniform match
    masks). Outputs index q * n_lanes + l. WORDS: 1 or 2, the column in registers
    (longer patterns run in myers_wave or myers_band). CUTOFF (DIST): a lane whose column
    and row 0 are all past k stops (its distance is > k: reported as k + 1), and the
    program ends when all its lanes have (checked every 8 columns)."""
    lane = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    ok, q, slot, m, t0, n = _stretches(lane, n_lanes, lane_pat_ptr, pat_len_ptr, lane_start_ptr, lane_len_ptr,
                                       q_first, PER_LANE_PATTERN)
    row = tl.maximum(m - 1, 0)  # the last pattern row: its word and bit
    last_word = row // 64
    table = peq_ptr + q * n_sym * WORDS
    zero = tl.zeros((BLOCK,), tl.uint64)
    ones = zero - 1  # all bits set
    last_mask = (zero + 1) << (row % 64).to(tl.uint64)
    if MODE == DIST or MODE == LAST:
        top = tl.full((BLOCK,), 1, tl.int32)  # row 0 is D[0][j] = j
    else:
        top = tl.zeros((BLOCK,), tl.int32)  # row 0 is 0: a match starts anywhere
    pv0, mv0, pv1, mv1 = ones, zero, ones, zero
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
    if CUTOFF:
        over = ok & (m > 0) & (tl.abs(m - n) > k)  # past k already: |m - n| <= distance
        s0 = tl.full((BLOCK,), 64, tl.int32)  # D[64][j], the bottom of word 0 (two words)
        bit63 = (zero + 1) << 63
        n_max = tl.max(tl.where(over, 0, n), 0)
    j = 0
    while j < n_max:
        live = ok & (j < n)
        if CUTOFF:
            live = live & ~over
        if MODE == LAST:
            c = tl.load(codes_ptr + t0 + n - 1 - j, mask=live, other=0).to(tl.int64)
        else:
            c = tl.load(codes_ptr + t0 + j, mask=live, other=0).to(tl.int64)
        known = live & (c < n_sym)
        eq_row = table + c * WORDS
        eq0 = tl.load(eq_row, mask=known, other=0).to(tl.uint64, bitcast=True)
        pv0, mv0, ph0, mh0 = _myers_word(pv0, mv0, eq0, top, ones)
        h = _delta(ph0, mh0, last_mask)
        if WORDS == 2:
            eq1 = tl.load(eq_row + 1, mask=known, other=0).to(tl.uint64, bitcast=True)
            pv1, mv1, ph1, mh1 = _myers_word(pv1, mv1, eq1, _carry(ph0, mh0), ones)
            h = tl.where(last_word == 1, _delta(ph1, mh1, last_mask), h)
        score += tl.where(live & (m > 0), h, 0)
        if CUTOFF:
            if WORDS == 2:
                s0 += tl.where(live, _carry(ph0, mh0), 0)
            if j % 8 == 7:  # a lower bound of the column: every cell, and row 0 (= j + 1)
                low = _above(pv0, score, last_mask)
                if WORDS == 2:
                    low = tl.where(last_word == 1, tl.minimum(_above(pv0, s0, bit63), _above(pv1, score, last_mask)),
                                   low)
                over = over | (live & (m > 0) & (tl.minimum(low, j + 1) > k))
                n_max = tl.max(tl.where(over, 0, n), 0)
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
        if CUTOFF:
            score = tl.where(over, k + 1, score)
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


MASK_ROWS = 1 << 21  # pattern rows placed per step of match_masks (~50 B of temporaries each)


def match_masks(codes, starts, lens, n_sym: int, words: int, reverse: bool = False) -> torch.Tensor:
    """int64 [n, n_sym, words]: bit i of word w is set where pattern position 64 w + i
    (counted from the pattern's end with ``reverse``) holds the code; codes >= n_sym and
    positions past ``words`` x 64 set nothing. Reads nothing back from the device (CUDA
    graphs): every pattern's words x 64 rows are visited, in steps of MASK_ROWS rows."""
    n = lens.numel()
    dev = codes.device
    peq = torch.zeros(n * n_sym * words, dtype=torch.int64, device=dev)
    if n == 0 or codes.numel() == 0:
        return peq.reshape(n, n_sym, words)
    row = torch.arange(words * 64, device=dev)
    bit = row % 64
    value = torch.where(bit == 63, torch.full_like(bit, -(1 << 63)), torch.ones_like(bit) << bit)
    per = max(1, MASK_ROWS // (words * 64))
    for p0 in range(0, n, per):
        p1 = min(n, p0 + per)
        length = lens[p0:p1, None]
        j = length - 1 - row if reverse else row[None, :]  # the pattern position of each row
        at = (starts[p0:p1, None] + j).clamp(0, codes.numel() - 1)
        c = codes[at].to(torch.int64)
        use = (row < length) & (c < n_sym)
        idx = (torch.arange(p0, p1, device=dev)[:, None] * n_sym + c.clamp(max=n_sym - 1)) * words + row // 64
        peq.index_add_(0, idx.reshape(-1), torch.where(use, value, 0).reshape(-1))  # distinct bits: the sum is the OR
    return peq.reshape(n, n_sym, words)


MAX_GRID_Y = 65535  # CUDA's limit on grid axes y and z


def grid_y_launches(n: int) -> list[tuple[int, int]]:
    """(first, count) of the launches that put n programs on grid axis y, at most
    MAX_GRID_Y each (the patterns of a Myers launch: a guide search on both strands
    passes 65,535)."""
    return [(y0, min(MAX_GRID_Y, n - y0)) for y0 in range(0, n, MAX_GRID_Y)]


LAUNCH = (128, 4)  # (lanes per program, warps)
WAVE = True  # False: patterns of 3+ words on the band kernel with no bound (for comparison)
BAND_SHARE = 4  # the band kernel when at most 1 / BAND_SHARE of the words are in the band


def band_blocks(mode: str, k: int) -> int:
    """Blocks per column in Ukkonen's band for a bound k: the blocks down to row k (+ the
    one entering), and in the global modes the band's width on both sides of the diagonal."""
    return (2 if mode in ("dist", "last") else 1) * (k // 64 + 1) + 1


def run(mode: str, codes, peq, pat_lens, lane_starts, lane_lens, *, lane_pats=None, n_programs_q: int = 1,
        own=None, tag=None, k: int | None = None, q0: int = 0, out=None, out2=None, out3=None, out4=None,
        out_stride: int = 0, counter=None, capacity: int = 0, block: int | None = None):
    """Launch a Myers kernel over lanes (text stretches) x n_programs_q patterns (one
    pattern per program), or with ``lane_pats`` one pattern per lane. ``peq`` from
    match_masks. ``k`` bounds the distances that matter (hits: required; dist: values
    above k may come back as anything > k; last: the largest ``tag``). Patterns of 1-2
    words run here, 3 .. myers_wave.MAX_WORDS on the wavefront, and longer ones, or any
    whose band for k is narrow, on myers_band (Ukkonen's cut-off)."""
    n_lanes = lane_lens.numel()
    n_sym, words = peq.shape[1], peq.shape[2]
    if n_lanes == 0 or n_programs_q == 0:
        return
    from . import myers_band, myers_wave  # (they import this module)

    args = dict(lane_pats=lane_pats, n_programs_q=n_programs_q, own=own, tag=tag, q0=q0, out=out, out2=out2,
                out3=out3, out4=out4, out_stride=out_stride, counter=counter, capacity=capacity)
    if words > 2:
        narrow = k is not None and BAND_SHARE * band_blocks(mode, k) <= words
        if WAVE and words <= myers_wave.MAX_WORDS and not narrow:
            return myers_wave.run(mode, codes, peq, pat_lens, lane_starts, lane_lens, k=k or 0, **args)
        return myers_band.run(mode, codes, peq, pat_lens, lane_starts, lane_lens, **args,
                              **({} if k is None else {"k": k}))
    dummy = lane_lens
    default_block, num_warps = LAUNCH
    block = block or default_block
    num_warps = min(num_warps, max(1, block // 32))
    for q_first, n_q in grid_y_launches(1 if lane_pats is not None else n_programs_q):
        myers_kernel[(triton.cdiv(n_lanes, block), n_q)](
            codes, dummy if lane_pats is None else lane_pats, lane_starts, lane_lens,
            dummy if own is None else own, dummy if tag is None else tag, n_lanes,
            pat_lens, peq, n_sym,
            min(k or 0, BIG.value), q0, out, dummy if out2 is None else out2, dummy if out3 is None else out3,
            dummy if out4 is None else out4, out_stride,
            dummy if counter is None else counter, capacity, q_first,
            MODE=MODES[mode], PER_LANE_PATTERN=lane_pats is not None, WORDS=words, BLOCK=block,
            CUTOFF=mode == "dist" and k is not None, num_warps=num_warps,
        )


STATE_BYTES = 1 << 28  # per launch: match masks, and the column words of > 2-word patterns


def distances(codes, pat_starts, pat_lens, txt_starts, txt_lens, n_sym: int, longest: int, cdist: bool = False,
              max_distance: int | None = None, block: int | None = None):
    """Edit distances of pattern i vs text i, or of every pattern vs every text with cdist
    ([n_pat * n_txt], pattern-major); with ``max_distance``, values above it are only
    "> max_distance" (Ukkonen's band may stop early). ``longest`` bounds the patterns'
    lengths; patterns go in groups so match masks and column state stay under STATE_BYTES."""
    n_pat, n_txt = pat_lens.numel(), txt_lens.numel()
    words = n_words(longest)
    out = torch.empty(n_pat * n_txt if cdist else n_pat, dtype=torch.int32, device=codes.device)
    lanes_per_pattern = n_txt if cdist else 1
    per = max(1, min(STATE_BYTES // (n_sym * words * 8), STATE_BYTES // (lanes_per_pattern * words * 24)))
    for p0 in range(0, n_pat, per):
        p1 = min(n_pat, p0 + per)
        peq = match_masks(codes, pat_starts[p0:p1], pat_lens[p0:p1], n_sym, words)
        if cdist:
            run("dist", codes, peq, pat_lens[p0:p1], txt_starts, txt_lens, n_programs_q=p1 - p0,
                k=max_distance, out=out[p0 * n_txt : p1 * n_txt], block=block)
        else:
            lanes = torch.arange(p1 - p0, device=codes.device)
            run("dist", codes, peq, pat_lens[p0:p1], txt_starts[p0:p1], txt_lens[p0:p1], lane_pats=lanes,
                k=max_distance, out=out[p0:p1], block=block)
    return out


settle_module(__name__)  # the same cache keys in every process (cache_keys.py)
