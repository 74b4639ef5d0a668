"""Approximate matching with edit distance on the CPU: the semi-global DP row by row.

Row i (pattern position) over all text columns at once, for a group of patterns:
T[j] = min(D[i-1][j-1] + mismatch, D[i-1][j] + 1), then the left dependency is a
prefix-min, D[i][j] = j + cummin_k (T[k] - k) (the first paper's row-parallel form).
Each cell carries the start of its alignment in one int64 key, (D << 32) + start, so
the minimum picks the least distance, then the earliest start (ties as everywhere in
torchalign). Long texts go in overlapping chunks like the kernels' (same integers).
"""

from __future__ import annotations

import torch

SHIFT = 32
_CELLS = 1 << 22  # patterns x columns per row of work


def final_rows(text, text_offsets, pat, pat_starts, pat_lens, overlap: int):
    """Yield (text id, first owned end, ends, distance [P, n], start [P, n]) per chunk:
    D[m][end] and the earliest start of an optimal alignment, for ends
    first .. first + n - 1 (absolute positions in ``text``)."""
    n_pat = pat_lens.numel()
    if n_pat == 0:
        return
    longest = int(pat_lens.max())
    j = torch.arange(longest)
    inside = j[None, :] < pat_lens[:, None]
    pc = torch.where(inside, pat[torch.where(inside, pat_starts[:, None] + j[None, :], 0)].to(torch.int64), -1) \
        if pat.numel() else torch.full((n_pat, longest), -1, dtype=torch.int64)
    size = max(64, _CELLS // max(n_pat, 1))
    bounds = text_offsets.tolist()
    for t in range(len(bounds) - 1):
        t0, t1 = bounds[t], bounds[t + 1]
        a = t0
        while True:
            b = min(t1, a + size)
            scan = max(t0, a - overlap)
            first = a if a == t0 else a + 1
            d, s = _rows(text[scan:b].to(torch.int64), pc, pat_lens)
            keep = first - scan
            yield t, first, torch.arange(first, b + 1), d[:, keep:], s[:, keep:] + scan
            if b >= t1:
                break
            a = b


def _rows(x, pc, pat_lens):
    """D[m][j] and starts for j = 0 .. len(x), every pattern (rows padded to the longest)."""
    n = x.numel()
    one = 1 << SHIFT
    cols = torch.arange(n + 1)
    row = cols.expand(pc.shape[0], n + 1).clone()  # row 0: D = 0, start = j
    out = torch.where((pat_lens == 0)[:, None], row, 0)
    for i in range(1, pc.shape[1] + 1):
        mismatch = (pc[:, i - 1, None] != x[None, :]).to(torch.int64) * one
        t = torch.empty_like(row)
        t[:, 0] = i * one  # D[i][0] = i, start 0
        t[:, 1:] = torch.minimum(row[:, :-1] + mismatch, row[:, 1:] + one)
        row = torch.cummin(t - cols * one, dim=1).values + cols * one
        ends = pat_lens == i
        if ends.any():
            out[ends] = row[ends]
    return out >> SHIFT, out & (one - 1)


def asm_hits(text, text_offsets, pat, pat_starts, pat_lens, k: int):
    """(pattern, text, start, end, distance) of every end with D[m][end] <= k, unsorted."""
    parts = []
    for t, _, ends, d, s in final_rows(text, text_offsets, pat, pat_starts, pat_lens, _longest(pat_lens) + k):
        q, col = torch.nonzero(d <= k, as_tuple=True)
        parts.append((q, torch.full_like(q, t), s[q, col], ends[col], d[q, col]))
    if not parts:
        e = torch.empty(0, dtype=torch.int64)
        return e, e, e, e, e
    return tuple(torch.cat(p) for p in zip(*parts))


def asm_best(text, text_offsets, pat, pat_starts, pat_lens):
    """(distance int32[P, n_texts], first end int64[P, n_texts], absolute)."""
    n_pat, n_texts = pat_lens.numel(), text_offsets.numel() - 1
    key = torch.full((n_pat, n_texts), 1 << 62, dtype=torch.int64)
    for t, _, ends, d, _ in final_rows(text, text_offsets, pat, pat_starts, pat_lens, 2 * _longest(pat_lens)):
        chunk = (d << 42) + ends[None, :]
        key[:, t] = torch.minimum(key[:, t], chunk.amin(1))
    return (key >> 42).to(torch.int32), key & ((1 << 42) - 1)


def asm_profile(text, text_offsets, pat, pat_starts, pat_lens):
    """int32[P, len(text)]: D[m][end] in column end - 1."""
    out = torch.empty((pat_lens.numel(), text.numel()), dtype=torch.int32)
    for t, first, ends, d, _ in final_rows(text, text_offsets, pat, pat_starts, pat_lens, 2 * _longest(pat_lens)):
        real = ends > text_offsets[t]  # the empty match at a text's start has no column
        out[:, ends[real] - 1] = d[:, real].to(torch.int32)
    return out


def _longest(lens) -> int:
    return int(lens.max()) if lens.numel() else 0
