"""Hamming-distance kernels: pairwise, all-vs-all, and every window of a text.

A Hamming count is a dot product of one-hot codes: sum_j sum_s [a_j = s][b_j = s].
For small alphabets (S <= 32 symbols) the kernels build the one-hot tiles in registers
from uint8 codes and hand them to ``tl.dot`` (int8 x int8 -> int32 on tensor cores);
IUPAC patterns use multi-hot rows (every text code a pattern code allows). Large
alphabets (bytes, token ids) take a plain compare loop. Every kernel counts matches;
distance = length - matches.

Pure: imports only torch and triton.
"""

import torch
import triton
import triton.language as tl

# The largest alphabet that takes the one-hot tensor-core path.
MAX_DOT_SYMBOLS = 32
# One-hot K-tile width: JB positions x S symbols = DOT_K.
DOT_K = 128


@triton.jit
def _onehot(codes, S: tl.constexpr, R: tl.constexpr, JB: tl.constexpr):
    """int32 codes [R, JB] -> int8 one-hot [R, JB * S]; codes outside [0, S) give zeros."""
    s = tl.arange(0, S)
    return tl.reshape((codes[:, :, None] == s[None, None, :]).to(tl.int8), (R, JB * S))


@triton.jit
def _allowed(codes, table_ptr, table_stride, S: tl.constexpr, R: tl.constexpr, JB: tl.constexpr):
    """int32 pattern codes [R, JB] -> int8 multi-hot [R, JB * S] of the text codes each allows."""
    s = tl.arange(0, S)
    ok = (codes >= 0)[:, :, None] & (s < table_stride)[None, None, :]  # table is [C, C]
    rows = tl.load(table_ptr + codes[:, :, None] * table_stride + s[None, None, :], mask=ok, other=0)
    return tl.reshape(rows.to(tl.int8), (R, JB * S))


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
    for i in range(0, n, BLOCK):
        idx = i + tl.arange(0, BLOCK)
        m = idx < n
        x = tl.load(a_ptr + a0 + idx, mask=m, other=0)
        y = tl.load(b_ptr + b0 + idx, mask=m, other=0)
        acc += (x != y).to(tl.int32)
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
# all-vs-all: [Na, L] x [Nb, L] -> [Na, Nb]
# --------------------------------------------------------------------------------------
@triton.jit
def hamming_cdist_kernel(
    a_ptr, b_ptr, out_ptr, na, nb, L,
    S: tl.constexpr, USE_DOT: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, JB: tl.constexpr,
):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    m_ok = rm < na
    n_ok = rn < nb
    a_rows = a_ptr + rm.to(tl.int64) * L
    b_rows = b_ptr + rn.to(tl.int64) * L
    acc = tl.zeros((BM, BN), tl.int32)
    if USE_DOT:
        for j0 in range(0, L, JB):
            j = j0 + tl.arange(0, JB)
            j_ok = j < L
            a = tl.load(a_rows[:, None] + j[None, :], mask=m_ok[:, None] & j_ok[None, :], other=255).to(tl.int32)
            b = tl.load(b_rows[:, None] + j[None, :], mask=n_ok[:, None] & j_ok[None, :], other=255).to(tl.int32)
            acc = tl.dot(_onehot(a, S, BM, JB), tl.trans(_onehot(b, S, BN, JB)), acc, out_dtype=tl.int32)
    else:
        for j in range(0, L):
            a = tl.load(a_rows + j, mask=m_ok, other=0)
            b = tl.load(b_rows + j, mask=n_ok, other=0)
            acc += (a[:, None] == b[None, :]).to(tl.int32)
    out = out_ptr + rm.to(tl.int64)[:, None] * nb + rn[None, :]
    tl.store(out, L - acc, mask=m_ok[:, None] & n_ok[None, :])


def hamming_cdist(a, b, n_symbols: int, block_m: int = 128, block_n: int = 128):
    """int32[Na, Nb] for code matrices a [Na, L] and b [Nb, L] (contiguous).

    ``n_symbols``: every code that appears in both a and b is below it.
    """
    na, L = a.shape
    nb = b.shape[0]
    out = torch.empty((na, nb), dtype=torch.int32, device=a.device)
    if na == 0 or nb == 0:
        return out
    S, use_dot, jb = _dot_shape(n_symbols)
    grid = (triton.cdiv(na, block_m), triton.cdiv(nb, block_n))
    hamming_cdist_kernel[grid](a, b, out, na, nb, L, S=S, USE_DOT=use_dot, BM=block_m, BN=block_n, JB=jb)
    return out


def _dot_shape(n_symbols: int):
    """(S, use_dot, JB): one-hot width (a power of two), path, positions per K-tile."""
    S = max(2, triton.next_power_of_2(max(1, n_symbols)))
    if S > MAX_DOT_SYMBOLS:
        return S, False, 1
    return S, True, DOT_K // S


# --------------------------------------------------------------------------------------
# every window of every text against every pattern
# --------------------------------------------------------------------------------------
@triton.jit
def hamming_windows_kernel(
    text_ptr, text_off_ptr, tile_text_ptr, tile_start_ptr,
    pat_ptr, pat_start_ptr, pat_len_ptr, n_pat, max_len_ptr,
    table_ptr, table_stride,
    k, prof_ptr, prof_stride,
    hit_pos_ptr, hit_pat_ptr, hit_dist_ptr, counter_ptr, capacity,
    S: tl.constexpr, USE_DOT: tl.constexpr, IUPAC: tl.constexpr, SEARCH: tl.constexpr,
    ONE_K_TILE: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, JB: tl.constexpr,
):
    """One program: BM consecutive start positions of one text, all patterns.

    SEARCH: append (position, pattern, distance) of every window with distance <= k
    through an atomic counter (entries past ``capacity`` are counted, not written).
    Otherwise: write the distance of every window to prof[pattern, position], -1 where
    the pattern does not fit.
    """
    pid = tl.program_id(0)
    t = tl.load(tile_text_ptr + pid)
    max_len = tl.load(max_len_ptr).to(tl.int32)
    if t >= 0:
        start = tl.load(tile_start_ptr + pid)
        end = tl.load(text_off_ptr + t + 1)
        pos = start + tl.arange(0, BM).to(tl.int64)
        in_text = pos < end
        a_first = tl.zeros((BM, JB * S), tl.int8)
        if USE_DOT and ONE_K_TILE:  # the text tile's one-hot, built once for all patterns
            tpos0 = pos[:, None] + tl.arange(0, JB)[None, :]
            tc0 = tl.load(text_ptr + tpos0, mask=tpos0 < end, other=-1).to(tl.int32)
            a_first = _onehot(tc0, S, BM, JB)
        for n0 in range(0, n_pat, BN):
            cols = n0 + tl.arange(0, BN)
            c_ok = cols < n_pat
            plen = tl.load(pat_len_ptr + cols, mask=c_ok, other=0)
            pstart = tl.load(pat_start_ptr + cols, mask=c_ok, other=0)
            acc = tl.zeros((BM, BN), tl.int32)
            if USE_DOT:
                for j0 in range(0, max_len, JB):
                    j = j0 + tl.arange(0, JB)
                    pm = c_ok[:, None] & (j[None, :] < plen[:, None])
                    pc = tl.load(pat_ptr + pstart[:, None] + j[None, :], mask=pm, other=-1).to(tl.int32)
                    pc = tl.where(pm, pc, -1)
                    if IUPAC:
                        b = _allowed(pc, table_ptr, table_stride, S, BN, JB)
                    else:
                        b = _onehot(pc, S, BN, JB)
                    if ONE_K_TILE:
                        a = a_first
                    else:
                        tpos = pos[:, None] + j[None, :]
                        tc = tl.load(text_ptr + tpos, mask=tpos < end, other=-1).to(tl.int32)
                        a = _onehot(tc, S, BM, JB)
                    acc = tl.dot(a, tl.trans(b), acc, out_dtype=tl.int32)
            else:
                for j in range(0, max_len):
                    tc = tl.load(text_ptr + pos + j, mask=pos + j < end, other=-1).to(tl.int32)
                    pm = c_ok & (j < plen)
                    pc = tl.load(pat_ptr + pstart + j, mask=pm, other=-2).to(tl.int32)
                    if IUPAC:
                        ok = pm[None, :] & (tc >= 0)[:, None]
                        hit = tl.load(table_ptr + pc[None, :] * table_stride + tc[:, None], mask=ok, other=0)
                        acc += hit.to(tl.int32)
                    else:
                        acc += ((tc[:, None] == pc[None, :]) & pm[None, :]).to(tl.int32)
            dist = plen[None, :] - acc
            fits = (pos[:, None] + plen[None, :] <= end) & c_ok[None, :]
            if SEARCH:
                hit = fits & (dist <= k)
                flat = tl.reshape(hit.to(tl.int32), (BM * BN,))
                n_hit = tl.sum(flat, 0)
                if n_hit > 0:
                    base = tl.atomic_add(counter_ptr, n_hit.to(tl.int64))
                    slot = base + tl.cumsum(flat, 0).to(tl.int64) - 1
                    keep = (flat > 0) & (slot < capacity)
                    pos2 = tl.reshape(pos[:, None] + tl.zeros((BM, BN), tl.int64), (BM * BN,))
                    col2 = tl.reshape(cols[None, :] + tl.zeros((BM, BN), tl.int32), (BM * BN,))
                    tl.store(hit_pos_ptr + slot, pos2, mask=keep)
                    tl.store(hit_pat_ptr + slot, col2, mask=keep)
                    tl.store(hit_dist_ptr + slot, tl.reshape(dist, (BM * BN,)), mask=keep)
            else:
                out = prof_ptr + cols.to(tl.int64)[None, :] * prof_stride + pos[:, None]
                tl.store(out, tl.where(fits, dist, -1), mask=in_text[:, None] & c_ok[None, :])


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


def hamming_windows(
    text, text_offsets, pat, pat_starts, pat_lens, max_len: int, n_symbols: int,
    table=None, k: int = 0, search: bool = True, capacity: int = 0,
    block_m: int = 128, block_n: int = 64,
):
    """Distances of every pattern at every window start of every text.

    search=True: (n_hits int64[1], pos int64[capacity], pattern int32[capacity],
    distance int32[capacity]); windows with distance <= k, in no particular order.
    search=False: int32[n_patterns, len(text)], -1 where a pattern does not fit.
    ``max_len``: the longest pattern, or None to read it on the device (no host sync).
    ``table`` (uint8[C, C'], [p, t] = pattern code p allows text code t) turns on IUPAC
    matching; ``n_symbols`` bounds every text code a pattern can match.
    """
    dev = text.device
    n_pat = pat_lens.numel()
    total = text.numel()
    S, use_dot, jb = _dot_shape(n_symbols)
    iupac = table is not None
    table_t = table if iupac else torch.zeros(1, dtype=torch.uint8, device=dev)
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
        max_len_t = pat_lens.max().reshape(1)
        hamming_windows_kernel[(n_tiles,)](
            text, text_offsets, tile_text, tile_start,
            pat, pat_starts, pat_lens, n_pat, max_len_t,
            table_t, table_t.stride(0) if iupac else 0,
            k, prof, total,
            hit_pos, hit_pat, hit_dist, counter, capacity,
            S=S, USE_DOT=use_dot, IUPAC=iupac, SEARCH=search,
            ONE_K_TILE=use_dot and max_len is not None and max_len <= jb, BM=block_m, BN=block_n, JB=jb,
        )
    if search:
        return counter, hit_pos, hit_pat, hit_dist
    return prof
