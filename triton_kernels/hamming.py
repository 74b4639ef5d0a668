"""Hamming-distance kernels: pairwise, all-vs-all, and every window of a text.

A Hamming count is a dot product of one-hot codes: sum_j sum_s [a_j = s][b_j = s].
For small alphabets (S <= 32 symbols) the counts run on tensor cores (``tl.dot``, int8 x
int8 -> int32): cdist multiplies one-hot rows written once per call; the window search
builds each text tile's one-hot in registers and multiplies it with the patterns' rows
(IUPAC patterns: multi-hot rows, every text code a pattern code allows). Large alphabets
(bytes, token ids) take a plain compare loop. Every kernel counts matches;
distance = length - matches.

Loops over run-time bounds are while loops, or for loops behind a constexpr switch where
the compiler's pipelining pays: Triton 3.6's interpreter (with NumPy >= 2.4) cannot range()
over a run-time value. Pure: imports only torch and triton.
"""

import os

import torch
import triton
import triton.language as tl

from .cache_keys import settle_module

# Under TRITON_INTERPRET=1 loops over run-time bounds must be while loops (see above).
INTERPRETER = os.environ.get("TRITON_INTERPRET") == "1"
# The largest alphabet that takes the one-hot tensor-core path.
MAX_DOT_SYMBOLS = 32
# One-hot K-tile width: JB positions x S symbols = DOT_K.
DOT_K = 128


@triton.jit
def _onehot(codes, S: tl.constexpr, R: tl.constexpr, JB: tl.constexpr):
    """int32 codes [R, JB] -> int8 one-hot [R, JB * S]; codes outside [0, S) give zeros."""
    s = tl.arange(0, S)
    return tl.reshape((codes[:, :, None] == s[None, None, :]).to(tl.int8), (R, JB * S))


# --------------------------------------------------------------------------------------
# pairwise: B pairs, one program each, looping over the pair in BLOCK chunks
# --------------------------------------------------------------------------------------
@triton.jit
def hamming_pairs_kernel(a_ptr, a_off_ptr, b_ptr, b_off_ptr, out_ptr, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    a0 = tl.load(a_off_ptr + pid)
    la = tl.load(a_off_ptr + pid + 1) - a0
    b0 = tl.load(b_off_ptr + pid)
    lb = tl.load(b_off_ptr + pid + 1) - b0
    n = tl.minimum(la, lb)
    acc = tl.zeros((BLOCK,), tl.int32)
    i = n * 0
    while i < n:
        idx = i + tl.arange(0, BLOCK)
        m = idx < n
        x = tl.load(a_ptr + a0 + idx, mask=m, other=0)
        y = tl.load(b_ptr + b0 + idx, mask=m, other=0)
        acc += (x != y).to(tl.int32)
        i += BLOCK
    # unequal lengths (only with check=False): the overhang counts as mismatches
    extra = tl.maximum(la, lb) - n
    tl.store(out_ptr + pid, tl.sum(acc, 0) + extra.to(tl.int32))


def hamming_pairs(a_codes, a_offsets, b_codes, b_offsets, block: int = 1024):
    """int32[B]: Hamming distance of pair i (a_i vs b_i)."""
    n = a_offsets.numel() - 1
    out = torch.empty(n, dtype=torch.int32, device=a_codes.device)
    if n:
        hamming_pairs_kernel[(n,)](a_codes, a_offsets, b_codes, b_offsets, out, BLOCK=block)
    return out


# --------------------------------------------------------------------------------------
# one-hot rows, built once per call with torch (small: patterns, or cdist operands)
# --------------------------------------------------------------------------------------
def onehot_rows(codes: torch.Tensor, S: int, table=None) -> torch.Tensor:
    """int8 [R, P * S] from int codes [R, P] (-1: padding -> zeros).

    Without ``table`` a code c sets column c (codes >= S set nothing); with ``table``
    (uint8 [C, C], [p, t] = pattern code p allows text code t) a code sets every text
    code it allows.
    """
    R, P = codes.shape
    if table is None:
        oh = codes[:, :, None] == torch.arange(S, device=codes.device)
    else:
        rows = torch.zeros((table.shape[0] + 1, S), dtype=torch.bool, device=codes.device)
        rows[:-1, : min(S, table.shape[1])] = table[:, :S].bool()
        oh = rows[codes.to(torch.int64)]  # -1 picks the all-zero last row
    return oh.reshape(R, P * S).to(torch.int8)


def _dot_shape(n_symbols: int):
    """(S, use_dot, JB): one-hot width (a power of two), path, positions per K-tile. The
    compare path has no one-hot tile: S = 1 there (a BM x S tile passes Triton's limit of
    2^20 elements once token ids reach a few thousand; and one variant serves every alphabet)."""
    S = max(2, triton.next_power_of_2(max(1, n_symbols)))
    if S > MAX_DOT_SYMBOLS:
        return 1, False, 1
    return S, True, DOT_K // S


# --------------------------------------------------------------------------------------
# all-vs-all: [Na, L] x [Nb, L] -> [Na, Nb]
# --------------------------------------------------------------------------------------
@triton.jit
def hamming_cdist_kernel(
    a_ptr, b_ptr, out_ptr, na, nb, L, a_stride, b_stride,
    S: tl.constexpr, USE_DOT: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, JB: tl.constexpr,
    FOR_LOOP: tl.constexpr,
):
    """USE_DOT: a and b are one-hot rows (int8 [N, stride]) and this is an int8 GEMM;
    else a and b are codes compared position by position. Program p is tile
    (p % tiles of a, p // tiles of a): one grid axis, since b's tiles pass 65,535 (CUDA's
    limit on axis y) from 8.4 M sequences on."""
    tiles_m = tl.cdiv(na, BM)
    pid_m = tl.program_id(0) % tiles_m
    pid_n = tl.program_id(0) // tiles_m
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    m_ok = rm < na
    n_ok = rn < nb
    a_rows = a_ptr + rm.to(tl.int64) * a_stride
    b_rows = b_ptr + rn.to(tl.int64) * b_stride
    acc = tl.zeros((BM, BN), tl.int32)
    if USE_DOT:
        kk = tl.arange(0, JB * S)
        if FOR_LOOP:  # pipelined by the compiler
            for k0 in range(0, a_stride, JB * S):
                a = tl.load(a_rows[:, None] + k0 + kk[None, :], mask=m_ok[:, None], other=0)
                b = tl.load(b_rows[:, None] + k0 + kk[None, :], mask=n_ok[:, None], other=0)
                acc = tl.dot(a, tl.trans(b), acc, out_dtype=tl.int32)
        else:
            k0 = 0
            while k0 < a_stride:
                a = tl.load(a_rows[:, None] + k0 + kk[None, :], mask=m_ok[:, None], other=0)
                b = tl.load(b_rows[:, None] + k0 + kk[None, :], mask=n_ok[:, None], other=0)
                acc = tl.dot(a, tl.trans(b), acc, out_dtype=tl.int32)
                k0 += JB * S
    else:
        j = 0
        while j < L:
            a = tl.load(a_rows + j, mask=m_ok, other=0)
            b = tl.load(b_rows + j, mask=n_ok, other=0)
            acc += (a[:, None] == b[None, :]).to(tl.int32)
            j += 1
    out = out_ptr + rm.to(tl.int64)[:, None] * nb + rn[None, :]
    tl.store(out, L - acc, mask=m_ok[:, None] & n_ok[None, :])


def hamming_cdist(a, b, n_symbols: int, block_m: int = 128, block_n: int = 128,
                  num_warps: int = 4, num_stages: int = 3, for_loop=None):
    """int32[Na, Nb] for code matrices a [Na, L] and b [Nb, L] (contiguous).

    ``n_symbols``: every code that appears in both a and b is below it. Small alphabets
    count matches on tensor cores from one-hot rows written once per call (building them
    per tile in registers measured 1.7x slower: benchmarks/NOTES.md).
    """
    na, L = a.shape
    nb = b.shape[0]
    out = torch.empty((na, nb), dtype=torch.int32, device=a.device)
    if na == 0 or nb == 0:
        return out
    S, use_dot, jb = _dot_shape(n_symbols)
    a_stride = b_stride = L
    if use_dot:
        width = triton.cdiv(L, jb) * jb  # positions, padded to whole K-tiles
        a = onehot_rows(torch.nn.functional.pad(a.to(torch.int32), (0, width - L), value=-1), S)
        b = onehot_rows(torch.nn.functional.pad(b.to(torch.int32), (0, width - L), value=-1), S)
        a_stride = b_stride = width * S
    grid = (triton.cdiv(na, block_m) * triton.cdiv(nb, block_n),)  # the order of an (a tiles, b tiles) grid
    hamming_cdist_kernel[grid](a, b, out, na, nb, L, a_stride, b_stride, S=S, USE_DOT=use_dot,
                               BM=block_m, BN=block_n, JB=jb, FOR_LOOP=not INTERPRETER if for_loop is None else for_loop,
                               num_warps=num_warps, num_stages=num_stages)
    return out


# --------------------------------------------------------------------------------------
# every window of every text against every pattern
# --------------------------------------------------------------------------------------
@triton.jit
def _pattern_tile(
    n0, a_first, pos, end, text_ptr,
    pat_ptr, pat_start_ptr, pat_len_ptr, n_pat, max_len, pat_oh_ptr, pat_oh_stride,
    k, prof_ptr, prof_stride, hit_pos_ptr, hit_pat_ptr, hit_dist_ptr, counter_ptr, capacity,
    S: tl.constexpr, USE_DOT: tl.constexpr, SEARCH: tl.constexpr, ONE_K_TILE: tl.constexpr,
    BM: tl.constexpr, BN: tl.constexpr, JB: tl.constexpr,
):
    """The windows at ``pos`` against patterns n0 .. n0 + BN."""
    cols = n0 + tl.arange(0, BN)
    c_ok = cols < n_pat
    plen = tl.load(pat_len_ptr + cols, mask=c_ok, other=0).to(tl.int32)
    kk = tl.arange(0, JB * S)
    acc = tl.zeros((BM, BN), tl.int32)  # zeros, not a bias: the first MMA then skips the add
    if USE_DOT:
        b_rows = pat_oh_ptr + cols.to(tl.int64) * pat_oh_stride
        if ONE_K_TILE:
            b = tl.load(b_rows[:, None] + kk[None, :], mask=c_ok[:, None], other=0)
            acc = tl.dot(a_first, tl.trans(b), acc, out_dtype=tl.int32)
        else:
            j0 = 0
            while j0 < max_len:
                b = tl.load(b_rows[:, None] + (j0 * S) + kk[None, :], mask=c_ok[:, None], other=0)
                tpos = pos[:, None] + (j0 + tl.arange(0, JB))[None, :]
                tc = tl.load(text_ptr + tpos, mask=tpos < end, other=-1).to(tl.int32)
                acc = tl.dot(_onehot(tc, S, BM, JB), tl.trans(b), acc, out_dtype=tl.int32)
                j0 += JB
    else:
        pstart = tl.load(pat_start_ptr + cols, mask=c_ok, other=0)
        j = 0
        while j < max_len:
            tc = tl.load(text_ptr + pos + j, mask=pos + j < end, other=-1).to(tl.int32)
            pm = c_ok & (j < plen)
            pc = tl.load(pat_ptr + pstart + j, mask=pm, other=-2).to(tl.int32)
            acc += ((tc[:, None] == pc[None, :]) & pm[None, :]).to(tl.int32)
            j += 1
    if SEARCH:
        # a cheap test first (hits are rare): any cell with matches >= length - k?
        need = tl.where(c_ok, plen - k, 1 << 30)
        if tl.max(tl.max(acc - need[None, :], 1), 0) >= 0:
            dist = plen[None, :] - acc
            fits = (pos[:, None] + plen[None, :] <= end) & c_ok[None, :]
            hit = fits & (dist <= k)
            # one slot per hit from the counter (the caller sorts the hits): numbering them by a
            # cumsum over the flattened tile doubled the variant's compile time (NOTES.md, session 36)
            one = tl.full((BM, BN), 1, tl.int64)
            slot = tl.atomic_add(counter_ptr + tl.zeros((BM, BN), tl.int32), one, mask=hit)
            keep = hit & (slot < capacity)
            tl.store(hit_pos_ptr + slot, pos[:, None] + tl.zeros((BM, BN), tl.int64), mask=keep)
            tl.store(hit_pat_ptr + slot, cols[None, :] + tl.zeros((BM, BN), tl.int32), mask=keep)
            tl.store(hit_dist_ptr + slot, dist, mask=keep)
    else:
        dist = plen[None, :] - acc
        fits = (pos[:, None] + plen[None, :] <= end) & c_ok[None, :]
        out = prof_ptr + cols.to(tl.int64)[None, :] * prof_stride + pos[:, None]
        tl.store(out, tl.where(fits, dist, -1), mask=(pos < end)[:, None] & c_ok[None, :])


@triton.jit(do_not_specialize=["n_pat", "max_len", "k", "prof_stride", "capacity"])  # one variant per constexpr set
def hamming_windows_kernel(
    text_ptr, text_off_ptr, tile_text_ptr, tile_start_ptr,
    pat_ptr, pat_start_ptr, pat_len_ptr, n_pat, max_len,
    pat_oh_ptr, pat_oh_stride,
    k, prof_ptr, prof_stride,
    hit_pos_ptr, hit_pat_ptr, hit_dist_ptr, counter_ptr, capacity,
    S: tl.constexpr, USE_DOT: tl.constexpr, SEARCH: tl.constexpr, ONE_K_TILE: tl.constexpr,
    BM: tl.constexpr, BN: tl.constexpr, JB: tl.constexpr, FOR_LOOP: tl.constexpr,
):
    """One program: BM consecutive start positions of one text, all patterns.

    Dot path: the text windows' one-hot tile is built in registers (once, when every
    pattern fits one K-tile) and multiplied with the patterns' one-hot rows
    (``pat_oh``, int8 [n_pat, pat_oh_stride], built once per call). Compare path
    (large alphabets): codes compared position by position.
    SEARCH: append (position, pattern, distance) of every window with distance <= k
    through an atomic counter (entries past ``capacity`` are counted, not written).
    Otherwise: write the distance of every window to prof[pattern, position], -1 where
    the pattern does not fit.
    FOR_LOOP: loop over pattern tiles with range() (the compiler pipelines its loads);
    the interpreter takes the while loop.
    """
    pid = tl.program_id(0)
    t = tl.load(tile_text_ptr + pid)
    if t >= 0:
        start = tl.load(tile_start_ptr + pid)
        end = tl.load(text_off_ptr + t + 1)
        pos = start + tl.arange(0, BM).to(tl.int64)
        a_first = tl.zeros((BM, JB * S), tl.int8)
        if USE_DOT and ONE_K_TILE:  # the text tile's one-hot, built once for all patterns
            tpos0 = pos[:, None] + tl.arange(0, JB)[None, :]
            tc0 = tl.load(text_ptr + tpos0, mask=tpos0 < end, other=-1).to(tl.int32)
            a_first = _onehot(tc0, S, BM, JB)
        if FOR_LOOP:
            for n0 in range(0, n_pat, BN):
                _pattern_tile(n0, a_first, pos, end, text_ptr, pat_ptr, pat_start_ptr, pat_len_ptr, n_pat,
                              max_len, pat_oh_ptr, pat_oh_stride, k, prof_ptr, prof_stride, hit_pos_ptr,
                              hit_pat_ptr, hit_dist_ptr, counter_ptr, capacity, S, USE_DOT, SEARCH, ONE_K_TILE,
                              BM, BN, JB)
        else:
            n0 = 0
            while n0 < n_pat:
                _pattern_tile(n0, a_first, pos, end, text_ptr, pat_ptr, pat_start_ptr, pat_len_ptr, n_pat,
                              max_len, pat_oh_ptr, pat_oh_stride, k, prof_ptr, prof_stride, hit_pos_ptr,
                              hit_pat_ptr, hit_dist_ptr, counter_ptr, capacity, S, USE_DOT, SEARCH, ONE_K_TILE,
                              BM, BN, JB)
                n0 += BN


def window_tiles(text_offsets: torch.Tensor, total: int, block_m: int):
    """Tiles of block_m start positions that never cross a text: (tile_text, tile_start, n).

    Sized by a bound known without a host read (total / block_m + n_texts); tiles past
    the real count get text -1 and do nothing.
    """
    dev = text_offsets.device
    n_texts = text_offsets.numel() - 1
    per_text = (text_offsets[1:] - text_offsets[:-1] + block_m - 1) // block_m
    ends = torch.cumsum(per_text, 0)
    n_tiles = (total + block_m - 1) // block_m + n_texts
    idx = torch.arange(n_tiles, device=dev)
    t = torch.searchsorted(ends, idx, right=True).clamp(max=n_texts)
    tc = t.clamp(max=n_texts - 1)
    start = text_offsets[tc] + (idx - (ends[tc] - per_text[tc])) * block_m
    tile_text = torch.where(t < n_texts, t, torch.full_like(t, -1))
    return tile_text, start, n_tiles


def pattern_onehot(pat, pat_starts, pat_lens, max_len: int, S: int, jb: int, table=None):
    """int8 [n_pat, cdiv(max_len, jb) * jb * S]: each pattern's one-hot (or IUPAC
    multi-hot) row, zero past its length, in whole K-tiles."""
    width = triton.cdiv(max(max_len, 1), jb) * jb
    j = torch.arange(width, device=pat.device)
    inside = j[None, :] < pat_lens[:, None]
    idx = torch.where(inside, pat_starts[:, None] + j[None, :], 0)
    codes = torch.where(inside, pat[idx].to(torch.int32), -1) if pat.numel() else torch.full_like(idx, -1, dtype=torch.int32)
    return onehot_rows(codes, S, table)


def hamming_windows(
    text, text_offsets, pat, pat_starts, pat_lens, max_len: int, n_symbols: int,
    table=None, k: int = 0, search: bool = True, capacity: int = 0,
    block_m=None, block_n: int = 64, num_warps=None, num_stages: int = 3, for_loop=None,
):
    """Distances of every pattern at every window start of every text.

    search=True: (n_hits int64[1], pos int64[capacity], pattern int32[capacity],
    distance int32[capacity]); windows with distance <= k, in no particular order.
    search=False: int32[n_patterns, len(text)], -1 where a pattern does not fit.
    ``max_len``: the longest pattern. ``table`` (uint8[C, C], [p, t] = pattern code p
    allows text code t) turns on IUPAC matching; ``n_symbols`` bounds every text code a
    pattern can match (IUPAC needs it <= MAX_DOT_SYMBOLS).
    """
    dev = text.device
    n_pat = pat_lens.numel()
    total = text.numel()
    if block_m is None:  # long texts: taller tiles (measured: benchmarks/NOTES.md); reads: 128
        long_texts = total >= 1024 * (text_offsets.numel() - 1)
        block_m, num_warps = (256, 4) if long_texts else (128, 2)
    S, use_dot, jb = _dot_shape(n_symbols)
    if table is not None and not use_dot:
        raise ValueError(f"IUPAC matching needs an alphabet of <= {MAX_DOT_SYMBOLS} codes")
    counter = torch.zeros(1, dtype=torch.int64, device=dev)
    if search:
        cap = max(capacity, 1)
        hit_pos = torch.empty(cap, dtype=torch.int64, device=dev)
        hit_pat = torch.empty(cap, dtype=torch.int32, device=dev)
        hit_dist = torch.empty(cap, dtype=torch.int32, device=dev)
        prof = torch.empty(1, dtype=torch.int32, device=dev)
    else:
        prof = torch.empty((n_pat, total), dtype=torch.int32, device=dev)
        hit_pos = torch.empty(1, dtype=torch.int64, device=dev)
        hit_pat = hit_dist = torch.empty(1, dtype=torch.int32, device=dev)
    if n_pat and total:
        tile_text, tile_start, n_tiles = window_tiles(text_offsets, total, block_m)
        pat_oh = pattern_onehot(pat, pat_starts, pat_lens, max_len, S, jb, table) if use_dot else pat
        hamming_windows_kernel[(n_tiles,)](
            text, text_offsets, tile_text, tile_start,
            pat, pat_starts, pat_lens, n_pat, max_len,
            pat_oh, pat_oh.stride(0) if use_dot else 0,
            k, prof, total,
            hit_pos, hit_pat, hit_dist, counter, capacity,
            S=S, USE_DOT=use_dot, SEARCH=search, ONE_K_TILE=use_dot and max_len <= jb,
            BM=block_m, BN=block_n, JB=jb, FOR_LOOP=not INTERPRETER if for_loop is None else for_loop,
            num_warps=num_warps, num_stages=num_stages,
        )
    if search:
        return counter, hit_pos, hit_pat, hit_dist
    return prof


settle_module(__name__)  # the same cache keys in every process (cache_keys.py)
