"""Levenshtein distance by the row-parallel DP (every cell of a DP row at once).

Row i of the DP over x (length lx) against y (length ly) is
    T[j] = min(D[i-1][j-1] + (x_i != y_j), D[i-1][j] + 1)
    D[i][j] = min(T[j], D[i][j-1] + 1) = j + min_{k <= j} (T[k] - k),   with D[i][0] = i,
so the in-row dependency is a prefix-min, ``tl.associative_scan``. A row lives in a
per-program scratch row in global memory (L1/L2-resident), processed in BLOCK-wide
chunks with the running minimum carried across chunks, so any length works. Each
program runs pairs one after another (a persistent grid), so scratch memory is
n_programs x the longest row, never pairs x length. Any integer codes (token ids too).

Pure: imports only torch and triton.
"""

import os

import torch
import triton
import triton.language as tl

INTERPRETER = os.environ.get("TRITON_INTERPRET") == "1"
BIG = tl.constexpr(1 << 30)


@triton.jit
def _min(a, b):
    return tl.minimum(a, b)


@triton.jit
def levenshtein_rows_kernel(
    codes_ptr, a_start_ptr, a_len_ptr, b_start_ptr, b_len_ptr, n_pairs, nb,
    scratch_ptr, scratch_stride, out_ptr,
    CDIST: tl.constexpr, BLOCK: tl.constexpr,
):
    """Pair p is (a[p], b[p]), or with CDIST (a[p // nb], b[p % nb]); a's and b's codes
    both index ``codes_ptr``. The shorter sequence of each pair spans the row."""
    pid = tl.program_id(0)
    row_ptr = scratch_ptr + pid.to(tl.int64) * scratch_stride
    jj = tl.arange(0, BLOCK)
    p = pid
    while p < n_pairs:
        ia = p // nb if CDIST else p
        ib = p % nb if CDIST else p
        a0 = tl.load(a_start_ptr + ia)
        la = tl.load(a_len_ptr + ia)
        b0 = tl.load(b_start_ptr + ib)
        lb = tl.load(b_len_ptr + ib)
        swap = lb > la  # x: the longer (rows), y: the shorter (the row)
        x0 = tl.where(swap, b0, a0)
        lx = tl.where(swap, lb, la)
        y0 = tl.where(swap, a0, b0)
        ly = tl.where(swap, la, lb)
        # row 0: D[0][j] = j, stored at row_ptr[j - 1] for j = 1 .. ly
        c0 = 1
        while c0 <= ly:
            j = c0 + jj
            tl.store(row_ptr + j - 1, j.to(tl.int32), mask=j <= ly)
            c0 += BLOCK
        tl.debug_barrier()
        i = 1
        while i <= lx:
            xi = tl.load(codes_ptr + x0 + i - 1)
            run = i.to(tl.int32)  # min of (T[k] - k) so far; D[i][0] = i
            diag_first = (i - 1).to(tl.int32)  # D[i-1][c0 - 1] for the chunk's first cell
            c0 = 1
            while c0 <= ly:
                j = c0 + jj
                jm = j <= ly
                up = tl.load(row_ptr + j - 1, mask=jm, other=BIG)
                diag = tl.load(row_ptr + j - 2, mask=jm & (j > c0), other=BIG)
                diag = tl.where(j == c0, diag_first, diag)
                yj = tl.load(codes_ptr + y0 + j - 1, mask=jm, other=0)
                t = tl.minimum(diag + (xi != yj).to(tl.int32), up + 1)
                u = tl.where(jm, t - j.to(tl.int32), BIG)
                pref = tl.minimum(tl.associative_scan(u, 0, _min), run)
                diag_first = tl.min(tl.where(j == c0 + BLOCK - 1, up, BIG), 0)
                tl.debug_barrier()  # every lane has read the old row before it is overwritten
                tl.store(row_ptr + j - 1, pref + j.to(tl.int32), mask=jm)
                run = tl.minimum(run, tl.min(u, 0))
                c0 += BLOCK
            tl.debug_barrier()
            i += 1
        d = tl.where(ly > 0, tl.load(row_ptr + ly - 1, mask=ly > 0, other=0), lx.to(tl.int32))
        tl.store(out_ptr + p, d)
        tl.debug_barrier()
        p += tl.num_programs(0)


def levenshtein_pairs(codes, a_starts, a_lens, b_starts, b_lens, longest: int, cdist: bool = False,
                      block: int = 128, programs: int | None = None):
    """int32 distances of pairs (a_i, b_i), or of all pairs [len(a) * len(b)] with cdist.

    ``codes`` holds every sequence; starts/lengths (int64) index it. ``longest`` bounds
    every sequence's length (sizes the scratch rows).
    """
    na, nb = a_lens.numel(), b_lens.numel()
    n_pairs = na * nb if cdist else na
    out = torch.empty(n_pairs, dtype=torch.int32, device=codes.device)
    if n_pairs == 0:
        return out
    if programs is None:
        programs = 1024 if codes.is_cuda else 8
    programs = min(programs, n_pairs)
    scratch = torch.empty((programs, max(longest, 1)), dtype=torch.int32, device=codes.device)
    levenshtein_rows_kernel[(programs,)](
        codes, a_starts, a_lens, b_starts, b_lens, n_pairs, max(nb, 1),
        scratch, scratch.stride(0), out, CDIST=cdist, BLOCK=block,
    )
    return out


# --------------------------------------------------------------------------------------
# Myers / Hyyro bit-vector: 64 DP cells of a column per machine word, patterns <= 128
# --------------------------------------------------------------------------------------
MYERS_MAX_PATTERN = 128  # two words per lane, held in registers


@triton.jit
def _myers_word(pv, mv, eq, hin, ones):
    """One 64-row block of a DP column (Hyyro's step, edlib's block form): the vertical
    delta vectors pv / mv (uint64), the text char's match mask eq, the horizontal delta
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
def _bit(x, i):
    return ((x >> i.to(tl.uint64)) & 1).to(tl.int32)


@triton.jit
def levenshtein_myers_kernel(
    codes_ptr, pat_start_ptr, pat_len_ptr, txt_start_ptr, txt_len_ptr, n_lanes, n_txt,
    peq_ptr, n_sym, out_ptr,
    CDIST: tl.constexpr, BLOCK: tl.constexpr,
):
    """Lane l runs pattern q against text t: CDIST, q = program_id(1) for every lane and
    t = l (out[q, t]); else q = t = l (out[l]). The pattern's match masks are
    peq[q, code, word] (uint64 bit patterns in int64), codes >= n_sym match nothing."""
    lane = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    ok = lane < (n_txt if CDIST else n_lanes)
    q = tl.program_id(1) + lane * 0 if CDIST else lane
    m = tl.load(pat_len_ptr + q, mask=ok, other=0).to(tl.int32)
    t0 = tl.load(txt_start_ptr + lane, mask=ok, other=0)
    n = tl.load(txt_len_ptr + lane, mask=ok, other=0).to(tl.int32)
    row = tl.maximum(m - 1, 0)  # the last pattern row: its word and bit
    high = row >= 64
    bit = tl.where(high, row - 64, row)
    table = peq_ptr + q.to(tl.int64) * n_sym * 2
    zero = tl.zeros((BLOCK,), tl.uint64)
    ones = zero - 1  # all bits set
    pv0, mv0, pv1, mv1 = ones, zero, ones, zero
    score = m
    n_max = tl.max(n, 0)
    j = 0
    while j < n_max:
        live = ok & (j < n)
        c = tl.load(codes_ptr + t0 + j, mask=live, other=0).to(tl.int64)
        known = live & (c < n_sym)
        eq0 = tl.load(table + c * 2, mask=known, other=0).to(tl.uint64, bitcast=True)
        eq1 = tl.load(table + c * 2 + 1, mask=known, other=0).to(tl.uint64, bitcast=True)
        plus = tl.full((BLOCK,), 1, tl.int32)  # row 0 of the DP: D[0][j] = j
        pv0, mv0, ph0, mh0 = _myers_word(pv0, mv0, eq0, plus, ones)
        h0 = _bit(ph0, tl.full((BLOCK,), 63, tl.int32)) - _bit(mh0, tl.full((BLOCK,), 63, tl.int32))
        pv1, mv1, ph1, mh1 = _myers_word(pv1, mv1, eq1, h0, ones)
        ph = tl.where(high, ph1, ph0)
        mh = tl.where(high, mh1, mh0)
        score += tl.where(live & (m > 0), _bit(ph, bit) - _bit(mh, bit), 0)
        j += 1
    score = tl.where(m > 0, score, n)  # an empty pattern: n insertions
    out = out_ptr + (q.to(tl.int64) * n_txt + lane if CDIST else lane)
    tl.store(out, score, mask=ok)



def match_masks(codes, starts, lens, n_sym: int) -> torch.Tensor:
    """int64 [n, n_sym, 2]: bit i of word w is set where pattern position 64 w + i holds the
    code (patterns of at most 128 codes)."""
    n = lens.numel()
    j = torch.arange(MYERS_MAX_PATTERN, device=codes.device)
    inside = j[None, :] < lens[:, None]
    pc = torch.where(inside, codes[torch.where(inside, starts[:, None] + j[None, :], 0)].to(torch.int64), -1) \
        if codes.numel() else torch.full((n, MYERS_MAX_PATTERN), -1, dtype=torch.int64, device=codes.device)
    onehot = pc[:, :, None] == torch.arange(n_sym, device=codes.device)  # [n, 128, S]
    weights = torch.tensor([1 << i for i in range(63)] + [-(1 << 63)], dtype=torch.int64, device=codes.device)
    bits = onehot.reshape(n, 2, 64, n_sym).to(torch.int64) * weights[None, None, :, None]
    return bits.sum(2).transpose(1, 2).contiguous()  # distinct bits: the sum is the OR


def levenshtein_myers(codes, pat_starts, pat_lens, txt_starts, txt_lens, n_sym: int, cdist: bool = False,
                      block: int = 128, table_bytes: int = 1 << 28):
    """Distances of pattern i vs text i (or of every pattern vs every text with cdist,
    [n_pat * n_txt]); every pattern has at most MYERS_MAX_PATTERN codes, all below n_sym.
    Patterns go in chunks so their match-mask tables stay under ``table_bytes``."""
    n_pat, n_txt = pat_lens.numel(), txt_lens.numel()
    out = torch.empty(n_pat * n_txt if cdist else n_pat, dtype=torch.int32, device=codes.device)
    chunk = max(1, table_bytes // (n_sym * 16))
    for p0 in range(0, n_pat, chunk):
        p1 = min(n_pat, p0 + chunk)
        peq = match_masks(codes, pat_starts[p0:p1], pat_lens[p0:p1], n_sym)
        if cdist:
            grid = (triton.cdiv(n_txt, block), p1 - p0)
            args = (txt_starts, txt_lens, p1 - p0, n_txt, peq, n_sym, out[p0 * n_txt : p1 * n_txt])
        else:
            grid = (triton.cdiv(p1 - p0, block), 1)
            args = (txt_starts[p0:p1], txt_lens[p0:p1], p1 - p0, n_txt, peq, n_sym, out[p0:p1])
        if grid[0] and grid[1]:
            levenshtein_myers_kernel[grid](codes, pat_starts[p0:p1], pat_lens[p0:p1], *args,
                                           CDIST=cdist, BLOCK=block)
    return out
