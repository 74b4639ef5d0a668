"""The k-difference primer problem: for many starts r of alpha at once, the longest prefix
of alpha[r:] within K = k - 1 edits of some substring of beta (i*(r); the answer is
i*(r) + 1, or 0 where i* reaches the end of alpha).

i*(r) is the largest row i of the semi-global DP (pattern alpha[r:] on the rows, beta
on the columns, a match starting anywhere) holding a cell <= K in some column. A lane
runs one start against one stretch of beta with Myers' bit-vectors on the blocks of
Ukkonen's band (as myers_band.py, semi-global): blocks below the last active one hold
only cells > K and are never computed; that is the paper's early stop, per column.
After each computed block the lane looks for its lowest row <= K below its best so far:
from the block's bottom score it jumps up by the excess over K (rows change by at most
1, so no row <= K is skipped) and reads a row's value from the bottom score and the
vertical deltas (two popcounts). Computed cells are upper bounds, exact where <= K, so
"<= K" is decided exactly.

The starts share one match-mask table: bit t of bits[c, q] is set where alpha[64 q + t]
has code c, and the 64 rows of block w of start r are a funnel shift of two words at
r + 64 w (no per-start masks: alpha's sliding windows cost alpha's bits, once).

Lanes are (start, stretch): beta's records cut into overlapping stretches (the overlap,
rows + K columns, holds any alignment of a <= rows-row prefix within K that ends in the
next stretch), so long texts give parallelism too; lanes take the max (atomic) over
stretches. A lane stops when its best reaches its rows (the window matched whole).
Windows are capped at ``rows`` (state memory); the driver reruns starts whose whole
window matched with larger windows, so nothing is truncated.

Pure: imports only torch and triton.
"""

import torch
import triton
import triton.language as tl

from .cache_keys import settle_module
from .myers import _above, _band_word, _popcount


@triton.jit
def _bits_at(bits_ptr, n_bits_words, c, p, ok):
    """64 match bits of code c from alpha position p on (bit t: alpha[p + t] == c)."""
    q = p // 64
    s = (p % 64).to(tl.uint64)
    row = bits_ptr + c * n_bits_words + q
    lo = tl.load(row, mask=ok, other=0).to(tl.uint64, bitcast=True)
    hi = tl.load(row + 1, mask=ok & (s != 0), other=0).to(tl.uint64, bitcast=True)  # 0 where s == 0
    return (lo >> s) | (hi << ((64 - s) % 64))


@triton.jit(do_not_specialize=["n_bits_words", "n_sym", "n_lanes", "K", "n_state"])  # one variant
def primers_kernel(
    text_ptr, stretch_start_ptr, stretch_len_ptr, bits_ptr, n_bits_words, n_sym,
    lane_pos_ptr, lane_rows_ptr, lane_seed_ptr, n_lanes, K, state_ptr, n_state, best_ptr,
    BLOCK: tl.constexpr,
):
    """Program (i, s): starts i * BLOCK + arange against stretch s. lane_rows: the rows of
    each start's window (1 .. 64 x words), lane_seed: a known lower bound of its i*
    (>= min(K, rows)). best[lane] = max(best[lane], this stretch's i* within the window)."""
    lane = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    ok = lane < n_lanes
    at0 = tl.zeros((BLOCK,), tl.int64)  # stretch facts as vectors: the interpreter cannot mask with scalar & vector
    t0 = tl.load(stretch_start_ptr + tl.program_id(1) + at0)
    n = tl.load(stretch_len_ptr + tl.program_id(1) + at0).to(tl.int32)  # a stretch is < 2^31 codes
    slot = tl.program_id(1).to(tl.int64) * n_lanes + lane
    # int64: state offsets (3 w + 2) n_state pass 2^31 when long windows (words) meet many
    # stretches (a group is 32 lanes at least, whatever STATE_BYTES says); scalars, once a word
    n_state = tl.cast(n_state, tl.int64)
    p = tl.load(lane_pos_ptr + lane, mask=ok, other=0)
    m = tl.load(lane_rows_ptr + lane, mask=ok, other=1).to(tl.int32)
    best = tl.load(lane_seed_ptr + lane, mask=ok, other=0).to(tl.int32)
    row = tl.maximum(m - 1, 0)
    last_word = row // 64
    zero = tl.zeros((BLOCK,), tl.uint64)
    ones = zero - 1
    bit63 = (zero + 1) << 63
    last_mask = (zero + 1) << (row % 64).to(tl.uint64)
    keep = (last_mask << 1) - 1  # the window's rows of its last block (all ones for bit 63)
    # column 0 is D[i][0] = i: the band is the blocks with a row <= K
    y = tl.minimum(last_word, K // 64)
    w = 0
    y_max = tl.max(tl.where(ok, y, 0), 0)
    while w <= y_max:
        init = ok & (w <= y)
        at = state_ptr + (3 * w) * n_state + slot
        tl.store(at, ones.to(tl.int64, bitcast=True), mask=init)
        tl.store(at + n_state, zero.to(tl.int64, bitcast=True), mask=init)
        tl.store(at + 2 * n_state, tl.minimum(64 * (w + 1), m).to(tl.int64), mask=init)
        w += 1
    alive = ok & (n > 0) & (best < m)
    j = 0
    while tl.max(alive.to(tl.int32), 0) > 0:
        c = tl.load(text_ptr + t0 + j, mask=alive, other=0).to(tl.int64)  # one column for the whole program
        known = alive & (c < n_sym)
        hin = tl.zeros((BLOCK,), tl.int32)  # row 0 is 0: a match starts anywhere
        s_above = tl.zeros((BLOCK,), tl.int32)
        grow = alive & (y < 0)  # block y + 1 entered the band (all False here)
        pv_y, s_y = zero, s_above
        w = 0
        w_end = tl.max(tl.where(alive, tl.minimum(y + 1, last_word), -1), 0)
        while w <= w_end:
            active = alive & (w <= y)
            eq = _bits_at(bits_ptr, n_bits_words, c, p + 64 * w, known & (w <= y + 1) & (w <= last_word))
            eq = tl.where(w == last_word, eq & keep, eq)
            enter = alive & (w == y + 1) & (w <= last_word) & (s_above - hin <= K) & (((eq & 1) != 0) | (hin < 0))
            use = active | enter
            bottom = tl.where(w == last_word, last_mask, bit63)
            pv, mv, s, carry = _band_word(state_ptr + (3 * w) * n_state + slot, n_state, active, use, eq, hin, s_above,
                                          bottom, ones)
            hin = tl.where(use, carry, hin)
            s_above = tl.where(use, s, s_above)
            pv_y = tl.where(use, pv, pv_y)
            s_y = tl.where(use, s, s_y)
            grow = tl.where(w == y + 1, enter, grow)
            best = _lowest_within(best, use, s, pv, mv, bottom, tl.where(w == last_word, m, 64 * w + 64), 64 * w, K)
            w += 1
        y = tl.where(grow, y + 1, y)
        # the last block leaves the band when all its cells are > K (block 0 never: row 0 is 0)
        bottom_y = tl.where(y == last_word, last_mask, bit63)
        drop_y = alive & (_above(pv_y, s_y, bottom_y) > K) & (y > 0)
        y = tl.where(drop_y, y - 1, y)
        j += 1
        alive = alive & (j < n) & (best < m)
    tl.atomic_max(best_ptr + lane, best, mask=ok)


@triton.jit
def _lowest_within(best, use, s, pv, mv, bottom, bot_row, top_row, K):
    """max(best, the lowest row of the block (rows top_row + 1 .. bot_row, bottom score s)
    whose value is <= K)."""
    t = bot_row
    v = s
    look = use & (bot_row > best) & (v - K < bot_row - best)  # else no row below best can reach K
    while tl.max((look & (v > K)).to(tl.int32), 0) > 0:
        jump = look & (v > K)
        t = tl.where(jump, t - (v - K), t)
        look = look & (t > best) & (t > top_row)
        one = bottom * 0 + 1
        below = (bottom << 1) - (one << (tl.maximum(t - top_row, 0) % 64).to(tl.uint64))  # rows t + 1 .. bot_row
        v = tl.where(jump & look, s - _popcount(pv & below) + _popcount(mv & below), v)
    return tl.where(look & (v <= K), t, best)


def match_bits(codes, n_sym: int) -> torch.Tensor:
    """int64[n_sym, words + 2]: bit t of [c, q] set where codes[64 q + t] == c (codes >= n_sym: none)."""
    n = codes.numel()
    words = triton.cdiv(n, 64) + 2
    bits = torch.zeros(n_sym * words, dtype=torch.int64, device=codes.device)
    if n:
        pos = torch.arange(n, device=codes.device)
        c = codes.to(torch.int64)
        use = c < n_sym
        bit = pos % 64
        value = torch.where(bit == 63, torch.full_like(bit, -(1 << 63)), torch.ones_like(bit) << bit)
        bits.index_add_(0, (c * words + pos // 64)[use], value[use])  # distinct bits: the sum is the OR
    return bits.reshape(n_sym, words)


# (lanes per program, warps): one warp, one lane per thread, so the per-column and per-block
# "any lane left?" reductions are warp shuffles (no barrier); on an H200 (32, 1) beat (64, 1)
# by 1.2-1.7x on all four workloads of benchmarks/primers.py (--launch sweeps others)
LAUNCH = (32, 1)
STATE_BYTES = 1 << 28  # column state (pv, mv, bottom score per block) per launch
MIN_LANES = 1 << 18  # cut beta into stretches until starts x stretches reach this
MIN_STRETCH = 4096  # ... but stretches stay this long,
STRETCH_OVERLAPS = 4  # and this many times their overlap
MAX_GRID_Y = 65535  # stretches per launch (the grid's second axis)


def stretches(text_offsets, overlap: int, n_lanes: int):
    """(start, length) int64 of beta's records cut into overlapping stretches."""
    lens = (text_offsets[1:] - text_offsets[:-1]).tolist()
    total = sum(lens)
    want = max(1, -(-MIN_LANES // max(n_lanes, 1)))
    size = min(max(MIN_STRETCH, STRETCH_OVERLAPS * overlap, -(-total // want)), 1 << 30)  # lengths are int32
    starts, lengths = [], []
    for r, n in enumerate(lens):
        base = int(text_offsets[r])
        own = 0
        while True:
            a = max(0, own - overlap)
            b = min(n, own + size)
            starts.append(base + a)
            lengths.append(b - a)
            if b >= n:
                break
            own = b
    dev = text_offsets.device
    return torch.tensor(starts, dtype=torch.int64, device=dev), torch.tensor(lengths, dtype=torch.int64, device=dev)


def longest_within(text, text_offsets, bits, n_sym: int, pos, rows, seed, K: int):
    """i* within each start's window: int32[n], for starts ``pos`` (flat alpha positions)
    with windows of ``rows`` rows (>= 1) and lower bounds ``seed`` (>= min(K, rows))."""
    n_lanes = pos.numel()
    block, num_warps = LAUNCH
    best = seed.to(torch.int32).clone()
    if n_lanes == 0 or text_offsets.numel() < 2:
        return best
    longest = int(rows.max())
    words = triton.cdiv(longest, 64)
    s_start, s_len = stretches(text_offsets, longest + K, n_lanes)
    n_str = min(s_len.numel(), MAX_GRID_Y)
    per_lane = 3 * words * 8 * n_str
    group = max(block, STATE_BYTES // per_lane // block * block)
    state = torch.empty(3 * words * min(group, n_lanes) * n_str, dtype=torch.int64, device=text.device)
    for s0 in range(0, s_len.numel(), MAX_GRID_Y):  # (beta of more than MAX_GRID_Y records)
        s1 = min(s_len.numel(), s0 + MAX_GRID_Y)
        for g0 in range(0, n_lanes, group):
            g1 = min(n_lanes, g0 + group)
            n = g1 - g0
            primers_kernel[(triton.cdiv(n, block), s1 - s0)](
                text, s_start[s0:s1], s_len[s0:s1], bits, bits.shape[1], n_sym,
                pos[g0:g1], rows[g0:g1], seed[g0:g1], n, K, state, n * (s1 - s0), best[g0:g1],
                BLOCK=block, num_warps=num_warps,
            )
    return best


FIRST_ROWS = 2048  # the first window: rows of each start's pattern (only state memory grows with it: the band decides the work)
GROWTH = 4  # windows grow this much for starts whose whole window matched
PROBE_MIN = 4096  # with this many such starts, first try each sequence's first one with no cap


def solve(alpha, alpha_offsets, text, text_offsets, K: int, n_sym: int, first_rows: int = 0):
    """i*(r) for every flat position of alpha: int64. The first pass caps the windows at
    ``first_rows`` (default: FIRST_ROWS or 4 (K + 1)); starts whose whole window matched
    run again with windows GROWTH times longer. Between passes the bound
    i*(r + 1) >= i*(r) - 1 (r + i*(r) never decreases within a sequence) raises the
    others' lower bounds, and a start with no answer (i* = the rest) ends its sequence."""
    dev = alpha.device
    n_a = alpha.numel()
    lens = alpha_offsets[1:] - alpha_offsets[:-1]
    pos = torch.arange(n_a, device=dev)
    rem = torch.repeat_interleave(alpha_offsets[1:], lens, output_size=n_a) - pos
    best = torch.clamp(rem, max=K)  # d(i) <= i: at least min(K, rest)
    todo = rem > K
    if n_a == 0 or text_offsets.numel() < 2 or not bool(todo.any()):
        return best
    bits = match_bits(alpha, n_sym)
    cap = first_rows or max(FIRST_ROWS, 4 * (K + 1))
    first_pass = True
    while True:
        lanes = torch.nonzero(todo).flatten()
        if lanes.numel() == 0:
            return best
        if not first_pass and lanes.numel() >= PROBE_MIN:
            seq = torch.searchsorted(alpha_offsets, lanes, right=True)
            lead = torch.ones_like(lanes, dtype=torch.bool)
            lead[1:] = seq[1:] != seq[:-1]
            first, lanes = lanes[lead], lanes[~lead]
            best[first] = longest_within(text, text_offsets, bits, n_sym, first, rem[first], best[first], K).to(torch.int64)
            best = _propagate(best, pos)
            lanes = lanes[best[lanes] < rem[lanes]]
        rows = torch.clamp(rem[lanes], max=cap)
        got = longest_within(text, text_offsets, bits, n_sym, lanes, rows, best[lanes], K).to(torch.int64)
        best[lanes] = got
        best = _propagate(best, pos)
        todo = torch.zeros_like(todo)
        todo[lanes] = (got >= rows) & (rows < rem[lanes])
        todo &= best < rem
        cap *= GROWTH
        first_pass = False


def _propagate(best, pos):
    """Lower bounds from i*(r + 1) >= i*(r) - 1: r + i*(r) is non-decreasing in r within a
    sequence (an earlier sequence's r + i*(r) is at most its end, so it never leaks)."""
    return torch.maximum(best, torch.cummax(best + pos, 0).values - pos)


settle_module(__name__)  # the same cache keys in every process (cache_keys.py)
