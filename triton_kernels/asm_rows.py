"""Approximate matching by the row-parallel DP of the first paper (``algorithm="dp"``).

Row i of the semi-global DP (pattern position i against a text stretch, all columns at
once): T[j] = min(D[i-1][j-1] + (p_i != t_j), D[i-1][j] + 1), then the left dependency
is a prefix-min, D[i][j] = j + min_{k <= j} (T[k] - k): ``tl.associative_scan``. Each cell
is one int64 key, (D << 32) + start (the stretch-local start of its alignment), so the
same minimum picks the least distance, then the earliest start: hits come with their
starts, no second pass. A program runs (pattern, chunk) items one after another
(persistent grid) on a scratch row in global memory (L1/L2 resident). Any integer codes.

Pure: imports only torch and triton.
"""

import torch
import triton
import triton.language as tl

from .asm import best_per_text, chunks
from .cache_keys import settle_module

ONE = tl.constexpr(1 << 32)  # one edit, in key units
LOW = tl.constexpr((1 << 32) - 1)
BIG = tl.constexpr(1 << 62)
MODES = {"hits": 1, "best": 2, "profile": 3}
ROW_BYTES = 1 << 28  # scratch rows of all programs together


@triton.jit
def _min(a, b):
    return tl.minimum(a, b)


@triton.jit(do_not_specialize=["n_chunks", "n_items", "row_stride", "k", "out_stride", "capacity"])  # one variant per mode
def asm_rows_kernel(
    text_ptr, pat_ptr, pat_start_ptr, pat_len_ptr, n_chunks, n_items,
    scan_ptr, len_ptr, own_ptr, tid_ptr, row_ptr0, row_stride,
    k, out_ptr, out2_ptr, out3_ptr, out4_ptr, out5_ptr, out_stride, counter_ptr, capacity,
    MODE: tl.constexpr, BLOCK: tl.constexpr,
):
    """Item p = (pattern p // n_chunks, chunk p % n_chunks). HITS appends (end, pattern,
    distance, text, start) to out..out5; BEST writes the least (distance << 42) + end per
    item to out[p]; PROFILE writes D[m][end] to out[q, end - 1]."""
    pid = tl.program_id(0)
    row = row_ptr0 + pid.to(tl.int64) * row_stride
    jj = tl.arange(0, BLOCK)
    # int64 item counter, so q (and q * out_stride: 40 patterns x 60 Mbp of PROFILE) is
    # int64 too, and n_items = patterns x chunks may pass 2^31; once per item
    p = pid.to(tl.int64)
    while p < n_items:
        q = p // n_chunks
        c = p % n_chunks
        t0 = tl.load(scan_ptr + c)
        n = tl.load(len_ptr + c)
        own = tl.load(own_ptr + c)
        m = tl.load(pat_len_ptr + q)
        p0 = tl.load(pat_start_ptr + q)
        c0 = 0
        while c0 <= n:  # row 0: D = 0, the alignment starts at its own column
            j = c0 + jj
            tl.store(row + j, j.to(tl.int64), mask=j <= n)
            c0 += BLOCK
        tl.debug_barrier()
        i = 1
        while i <= m:
            xi = tl.load(pat_ptr + p0 + i - 1)
            first = i.to(tl.int64) * ONE  # D[i][0] = i, start 0
            run = first  # min over k < chunk of (key[k] - k * ONE)
            diag_first = tl.load(row)  # D[i-1][0]
            c0 = 1
            while c0 <= n:
                j = c0 + jj
                jm = j <= n
                up = tl.load(row + j, mask=jm, other=BIG)
                diag = tl.load(row + j - 1, mask=jm & (j > c0), other=BIG)
                diag = tl.where(j == c0, diag_first, diag)
                yj = tl.load(text_ptr + t0 + j - 1, mask=jm, other=0)
                t = tl.minimum(diag + (xi != yj).to(tl.int64) * ONE, up + ONE)
                u = tl.where(jm, t - j.to(tl.int64) * ONE, BIG)
                pref = tl.minimum(tl.associative_scan(u, 0, _min), run)
                diag_first = tl.min(tl.where(j == c0 + BLOCK - 1, up, BIG), 0)
                tl.debug_barrier()  # every lane has read the old row before it is overwritten
                tl.store(row + j, pref + j.to(tl.int64) * ONE, mask=jm)
                run = tl.minimum(run, tl.min(u, 0))
                c0 += BLOCK
            tl.debug_barrier()
            tl.store(row, first)
            tl.debug_barrier()
            i += 1
        # the last row: D[m][j] and starts, ends t0 + j
        best = BIG
        c0 = 0
        while c0 <= n:
            j = c0 + jj
            end = t0 + j
            mine = (j <= n) & (end >= own)
            key = tl.load(row + j, mask=mine, other=BIG)
            d = (key >> 32).to(tl.int32)
            if MODE == 1:
                hit = mine & (d <= k)
                slot = tl.atomic_add(counter_ptr + tl.zeros_like(end), tl.full(end.shape, 1, tl.int64), mask=hit)
                keep = hit & (slot < capacity)
                tl.store(out_ptr + slot, end, mask=keep)
                tl.store(out2_ptr + slot, q.to(tl.int32) + tl.zeros_like(d), mask=keep)
                tl.store(out3_ptr + slot, d, mask=keep)
                tl.store(out4_ptr + slot, tl.load(tid_ptr + c) + tl.zeros_like(end), mask=keep)
                tl.store(out5_ptr + slot, t0 + (key & LOW), mask=keep)
            if MODE == 2:
                best = tl.minimum(best, tl.min(tl.where(mine, (key >> 32 << 42) + end, BIG), 0))
            if MODE == 3:
                tl.store(out_ptr + q * out_stride + end - 1, d, mask=mine & (j > 0))
            c0 += BLOCK
        if MODE == 2:
            tl.store(out_ptr + p, best)
        tl.debug_barrier()
        p += tl.num_programs(0)


def run(mode: str, text, text_offsets, pat, pat_starts, pat_lens, longest: int, overlap: int, k: int = 0,
        capacity: int = 0, block: int = 256, programs: int | None = None):
    """HITS: (count, end, pattern, distance, text, start); BEST: (distance [P, T], end [P, T]);
    PROFILE: int32 [P, len(text)]. Same integers as the Myers path."""
    dev = text.device
    n_pat, n_texts = pat_lens.numel(), text_offsets.numel() - 1
    scan, length, own, tid = chunks(text_offsets, text.numel(), n_pat, overlap)
    n_chunks = tid.numel()
    n_items = n_pat * n_chunks
    cap = max(capacity, 1)
    counter = torch.zeros(1, dtype=torch.int64, device=dev)
    if mode == "hits":
        outs = [torch.empty(cap, dtype=dt, device=dev)
                for dt in (torch.int64, torch.int32, torch.int32, torch.int64, torch.int64)]
    elif mode == "best":
        outs = [torch.full((n_items,), 1 << 62, dtype=torch.int64, device=dev)]
    else:
        outs = [torch.empty((n_pat, text.numel()), dtype=torch.int32, device=dev)]
    outs += [counter] * (5 - len(outs))  # unused pointer slots
    if n_items:
        stride = int(length.max()) + 1 if n_chunks else 1
        programs = min(n_items, programs or (1024 if text.is_cuda else 4), max(1, ROW_BYTES // (8 * stride)))
        rows = torch.empty((programs, stride), dtype=torch.int64, device=dev)
        asm_rows_kernel[(programs,)](
            text, pat, pat_starts, pat_lens, n_chunks, n_items, scan, length, own, tid, rows, stride,
            min(k, longest), *outs, text.numel(), counter, capacity, MODE=MODES[mode], BLOCK=block,
        )
    if mode == "hits":
        return (counter, *outs)
    if mode == "profile":
        return outs[0]
    return best_per_text(outs[0].reshape(n_pat, n_chunks), tid, n_texts)


settle_module(__name__)  # the same cache keys in every process (cache_keys.py)
