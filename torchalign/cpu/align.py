"""Gotoh's affine-gap DP on the CPU, vectorised over pairs and over a row's cells.

Row i of every pair at once ([B, n + 1] int64). The vertical gap F and the diagonal are
elementwise; the horizontal gap E has the in-row dependency E[j] = max over k < j of
H[k] - open - (j - 1 - k) extend, a running max (cummax) of H[k] + k extend. That
needs H without E inside the max, which is exact when gap_open >= gap_extend (a gap
closed and reopened never beats extending it; Scoring enforces it). Pairs are sorted by
length and run in groups of similar sizes, so padding stays small. Plain torch: it runs
on any device (benchmarks/align.py times it on the GPU as the vectorised torch baseline).
"""

from __future__ import annotations

import torch

MODES = ("local", "global", "semiglobal")
NEG = -(1 << 30)  # minus infinity; real cells stay inside +-2^29 (the op checks a bound)
DT = torch.int32  # int32 runs ~5x faster than int64 here; sums stay inside int32 (see _group)
GROUP_CELLS = 1 << 20  # pairs x padded target length per group: bounded memory
WIDTH_SPREAD = 1.25


def align_score(q_codes, q_starts, q_lens, t_codes, t_starts, t_lens, table, gap_open: int, gap_extend: int,
                mode: str):
    """(score int32[B], query end int64[B], target end int64[B]) of pair b = (query b,
    target b): ends exclusive; ties go to the smallest target end, then query end."""
    B = q_lens.numel()
    dev = q_lens.device
    score = torch.empty(B, dtype=torch.int32, device=dev)
    q_end = torch.empty(B, dtype=torch.int64, device=dev)
    t_end = torch.empty(B, dtype=torch.int64, device=dev)
    order = torch.argsort((q_lens // 64) * (1 << 32) + t_lens)  # similar query rows, then target widths
    widths, heights = t_lens[order].tolist(), (q_lens[order] // 64).tolist()  # plan the groups on the host
    start = 0
    while start < B:
        stop = start + 1
        # grow the group while the query rows stay alike, the padded width within the budget
        # and the padding small (a width at most WIDTH_SPREAD x the group's first)
        while (stop < B and heights[stop] == heights[start] and widths[stop] <= WIDTH_SPREAD * widths[start] + 16
               and (stop + 1 - start) * (widths[stop] + 1) <= GROUP_CELLS):
            stop += 1
        idx = order[start:stop]
        s, qe, te = _group(q_codes, q_starts[idx], q_lens[idx], t_codes, t_starts[idx], t_lens[idx],
                           table.to(DT), gap_open, gap_extend, mode)
        score[idx], q_end[idx], t_end[idx] = s.to(torch.int32), qe, te
        start = stop
    return score, q_end, t_end


def _padded(codes, starts, lens, width: int, pad: int) -> torch.Tensor:
    j = torch.arange(width, device=lens.device)
    at = starts[:, None] + j[None, :]
    inside = j[None, :] < lens[:, None]
    return torch.where(inside, codes[at.clamp(max=max(codes.numel() - 1, 0))].to(torch.int64) if codes.numel()
                       else torch.zeros_like(at), pad)


def _group(q_codes, q_starts, m, t_codes, t_starts, n, table, gap_open, gap_extend, mode):
    B = m.numel()
    dev = m.device
    m_max, n_max = int(m.max()), int(n.max())
    size = table.shape[0]
    # one pad code scoring NEG / 2 against everything: padded cells never win (and, clamped
    # at NEG every row, a padded cell plus a pad score stays inside int32)
    scores = torch.full((size + 1, size + 1), NEG // 2, dtype=DT, device=dev)
    scores[:size, :size] = table
    Q = _padded(q_codes, q_starts, m, m_max, size)
    T = _padded(t_codes, t_starts, n, n_max, size)
    j = torch.arange(n_max + 1, device=dev, dtype=DT)
    gap = lambda L: torch.where(L > 0, -(gap_open + (L - 1) * gap_extend), 0)  # noqa: E731
    in_target = j[None, :] <= n[:, None]
    if mode == "global":
        H = gap(j).expand(B, -1).clone()
    else:
        H = torch.zeros(B, n_max + 1, dtype=DT, device=dev)
    F = torch.full((B, n_max + 1), NEG, dtype=DT, device=dev)
    ramp = j * gap_extend
    if mode == "local":
        best, bi, bj = torch.zeros(B, dtype=DT, device=dev), *(torch.zeros(B, dtype=torch.int64, device=dev)
                                                                 for _ in range(2))
    else:  # row m, column 0 (an all-gap query); replaced when the row m is reached
        best = torch.where(m > 0, gap(m), H[torch.arange(B, device=dev), n] if mode == "global" else 0)
        bi, bj = m.clone(), torch.where((m == 0) & (mode == "global"), n, 0)
    rows = torch.arange(B, device=dev)
    for i in range(1, m_max + 1):
        s = torch.gather(scores[Q[:, i - 1]], 1, T)  # [B, n_max]
        F = torch.maximum(H - gap_open, F - gap_extend)
        left = torch.full((B, 1), 0 if mode == "local" else -(gap_open + (i - 1) * gap_extend), dtype=DT,
                          device=dev)
        Hd = torch.cat([left, torch.maximum(H[:, :-1] + s, F[:, 1:])], 1).clamp_(min=0 if mode == "local" else NEG)
        # E[j] = max_{k < j} (Hd[k] + k ext) - open - (j - 1) ext
        run = torch.cummax(Hd + ramp, 1).values
        E = torch.cat([torch.full((B, 1), NEG, dtype=DT, device=dev), run[:, :-1] - gap_open - ramp[:-1]], 1)
        H = torch.maximum(Hd, E)
        H[:, 0] = left[:, 0]
        if mode == "local":
            row = torch.where(in_target & (i <= m[:, None]), H, -1)
            top, at = row.max(1)  # the first j reaching the row's max
            better = (top > best) | ((top == best) & (at < bj))
            best, bi, bj = torch.where(better, top, best), torch.where(better, i, bi), torch.where(better, at, bj)
        else:
            last = m == i
            if mode == "global":
                best = torch.where(last, H[rows, n], best)
            else:
                top, at = torch.where(in_target, H, NEG).max(1)
                best, bj = torch.where(last, top, best), torch.where(last, at, bj)
    if mode == "global":
        bj = n.clone()
    return best, bi, bj
