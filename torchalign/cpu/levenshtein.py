"""Levenshtein distance on the CPU: the row-parallel DP, vectorised over a batch of pairs.

Row i over all pairs at once: T = min(diag + mismatch, up + 1), then the in-row
dependency is a prefix-min, D[i][j] = j + cummin_k (T[k] - k). Same integers as the kernel.
"""

from __future__ import annotations

import torch

_CHUNK_CELLS = 1 << 22  # pairs x row width per batch of work


def levenshtein_pairs(codes, a_starts, a_lens, b_starts, b_lens, cdist: bool = False) -> torch.Tensor:
    """int32 distances of pairs (a_i, b_i), or of all pairs [len(a) * len(b)] with cdist."""
    if cdist:
        na, nb = a_lens.numel(), b_lens.numel()
        ia = torch.arange(na).repeat_interleave(nb)
        ib = torch.arange(nb).repeat(na)
        a_starts, a_lens, b_starts, b_lens = a_starts[ia], a_lens[ia], b_starts[ib], b_lens[ib]
    n = a_lens.numel()
    out = torch.empty(n, dtype=torch.int32)
    if n == 0:
        return out
    # the longer sequence of each pair runs over rows, the shorter spans the row
    swap = b_lens > a_lens
    x0, lx = torch.where(swap, b_starts, a_starts), torch.maximum(a_lens, b_lens)
    y0, ly = torch.where(swap, a_starts, b_starts), torch.minimum(a_lens, b_lens)
    order = torch.argsort(lx * (1 << 32) + ly)  # similar shapes share a batch
    per_batch = max(1, _CHUNK_CELLS // (int(ly.max()) + 1))
    for start in range(0, n, per_batch):
        idx = order[start : start + per_batch]
        out[idx] = _rows(codes, x0[idx], lx[idx], y0[idx], ly[idx])
    return out


def _rows(codes, x0, lx, y0, ly) -> torch.Tensor:
    """The DP for a batch of pairs, padded to the longest x and y of the batch."""
    m, w = int(lx.max()), int(ly.max())
    last = max(codes.numel() - 1, 0)
    j = torch.arange(w + 1)
    inside = j[None, 1:] <= ly[:, None]
    y = torch.where(inside, codes[(y0[:, None] + j[None, 1:] - 1).clamp(0, last)].to(torch.int64), -1)
    row = j.expand(len(lx), w + 1).clone()  # D[0][j] = j
    done = torch.where(lx == 0, ly, 0)
    for i in range(1, m + 1):
        xi = codes[(x0 + i - 1).clamp(0, last)].to(torch.int64)  # pairs already done read anything
        t = torch.empty_like(row)
        t[:, 0] = i
        t[:, 1:] = torch.minimum(row[:, :-1] + (xi[:, None] != y).to(torch.int64), row[:, 1:] + 1)
        row = torch.cummin(t - j, dim=1).values + j
        ends = lx == i
        if ends.any():
            done[ends] = row[ends].gather(1, ly[ends, None]).squeeze(1)
    return done.to(torch.int32)
