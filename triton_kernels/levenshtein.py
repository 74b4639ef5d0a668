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

from .cache_keys import settle_module

INTERPRETER = os.environ.get("TRITON_INTERPRET") == "1"
BIG = tl.constexpr(1 << 30)


@triton.jit
def _min(a, b):
    return tl.minimum(a, b)


@triton.jit(do_not_specialize=["n_pairs", "nb", "scratch_stride"])  # one variant per CDIST
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
    p = pid.to(tl.int64)  # the pair counter: a cdist passes 2^31 pairs (50,000 x 50,000); once per pair
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


settle_module(__name__)  # the same cache keys in every process (cache_keys.py)
