"""The k-difference primer problem on the CPU: the paper's conventional solution with
its early stop (optimization 1), vectorised over start positions and columns.

For a start r, d(i) = min over substrings s of beta of ED(alpha[r:r+i], s) is the least
value of row i of the semi-global DP of the pattern alpha[r:] against beta; it is
non-decreasing in i and grows by at most 1 per row. So the longest prefix with at most
K = k - 1 differences, i*(r), is the row before the first row whose minimum is > K,
and the answer is i*(r) + 1, or 0 where i*(r) reaches the end of alpha.

A group of consecutive starts runs row by row over all of beta's columns at once
(row i of start r reads alpha[r + i - 1]); the left dependency is a prefix-min,
D[i][j] = v_j + cummin(T - v) (the row-parallel form of cpu/asm.py). Beta's records sit
side by side with a gap of G in the virtual column coordinate v, so a prefix-min never
crosses into the next record (every value is <= i < G). A start leaves its group at its
early-stop row. Two facts prune whole starts: d(i) <= i (a start with at most K
symbols left has no answer), and i*(r + 1) >= i*(r) - 1, so once a start has no answer
(i* = the rest of alpha), no later start of that sequence has one.
"""

from __future__ import annotations

import torch

_CELLS = 1 << 22  # starts x columns per row of work


def longest_within(alpha, alpha_offsets, beta, beta_offsets, K: int) -> torch.Tensor:
    """i*(r) for every flat position r of alpha: the longest prefix of alpha[r:] (within
    its sequence) at edit distance <= K from some substring of one of beta's records.
    int64[alpha.numel()]."""
    lens = alpha_offsets[1:] - alpha_offsets[:-1]
    n_a = alpha.numel()
    ends = torch.repeat_interleave(alpha_offsets[1:], lens, output_size=n_a)
    rem = ends - torch.arange(n_a)
    best = torch.minimum(rem, torch.tensor(K))  # d(i) <= i: at least min(K, rest)
    if n_a == 0 or beta_offsets.numel() < 2:  # no records: as one empty record (the kernels agree)
        return best
    codes, col0, v = _columns(beta, beta_offsets, int(lens.max()) + 2)
    group = max(1, _CELLS // codes.numel())
    a = alpha.to(torch.int64)
    for s in range(lens.numel()):
        r0, r1 = int(alpha_offsets[s]), int(alpha_offsets[s + 1])
        r = r0
        while r < r1:
            rs = torch.arange(r, min(r + group, r1))
            rs = rs[rem[rs] > K]
            if rs.numel():
                best[rs] = _group(a, rs, rem[rs], codes, col0, v, K)
                done = torch.nonzero(best[rs] == rem[rs])
                if done.numel():  # no answer here: none for any later start either
                    best[int(rs[done[0, 0]]):r1] = rem[int(rs[done[0, 0]]):r1]
                    break
            r += group
    return best


def _columns(beta, beta_offsets, gap: int):
    """(codes, column-0 mask, virtual coordinate) of beta's records side by side, each
    with its own column 0 (D[i][0] = i)."""
    n_rec = beta_offsets.numel() - 1
    lens = beta_offsets[1:] - beta_offsets[:-1]
    width = lens + 1
    total = int(width.sum())
    rec = torch.repeat_interleave(torch.arange(n_rec), width, output_size=total)
    first = torch.cumsum(width, 0) - width
    at = torch.arange(total) - first[rec]  # 0 at a record's column 0
    col0 = at == 0
    src = beta_offsets[rec] + at - 1
    codes = torch.where(col0, -1, beta[src.clamp(min=0)].to(torch.int64) if beta.numel() else -1)
    v = torch.arange(total) + rec * gap
    # the rows' dtype: int32 (half the memory traffic of int64) wherever v + a row value fits
    return codes, col0, v.to(torch.int32) if total and int(v[-1]) + gap < 2**31 else v


def _group(a, rs, rem, codes, col0, v, K: int) -> torch.Tensor:
    """i* of starts rs (each with more than K symbols left), by rows until each start's
    row minimum passes K or its pattern ends."""
    out = torch.empty(rs.numel(), dtype=torch.int64)
    idx = torch.arange(rs.numel())  # live starts' slots in out
    row = torch.zeros((rs.numel(), codes.numel()), dtype=v.dtype)  # row 0: a match starts anywhere
    i = 0
    while idx.numel():
        i += 1
        c = a[rs[idx] + i - 1]
        t = torch.empty_like(row)
        t[:, 1:] = torch.minimum(row[:, :-1] + (c[:, None] != codes[None, 1:]), row[:, 1:] + 1)
        t[:, col0] = i
        row = torch.cummin(t - v, dim=1).values + v
        over = row.amin(1) > K  # d(i) > K: i* = i - 1
        end = ~over & (rem[idx] == i)  # the whole rest matched: i* = rest
        stop = over | end
        out[idx[over]] = i - 1
        out[idx[end]] = i
        if stop.any():
            keep = ~stop
            idx, row = idx[keep], row[keep]
    return out
