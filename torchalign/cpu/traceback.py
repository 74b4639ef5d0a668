"""Alignment tracebacks on the CPU: Gotoh's DP with one direction byte per cell, then
the walk back, both vectorised over pairs in plain torch (it runs on any device).

The DP covers the rectangle from (0, 0) to the pair's end cell (rows 0..R, columns
0..C): the path never leaves it, and the DP is causal, so the cells in it are those of
the full matrix. A direction byte holds (the Triton kernel writes the same bits):

  bits 0-1  where H came from: 0 diagonal, 1 E (gap in the query: a target residue,
            CIGAR D), 2 F (gap in the target: a query residue, CIGAR I), 3 zero (local:
            the alignment starts here). Ties: zero, then diagonal, then E, then F.
  bit 2     E opened here from H of the cell to the left (ties: open, not extend)
  bit 3     F opened here from H of the cell above (ties: open)

The walk starts in state H at the end cell and stops at the first cell where local H is
0 (the shortest of the co-optimal local alignments ending there), at row 0 in
semiglobal mode (target residues before the query are free) and at (0, 0) in global
mode. Op codes: 0 '=' (identical codes), 1 'X', 2 'I', 3 'D'.
"""

from __future__ import annotations

import torch

NEG = -(1 << 40)
GROUP_CELLS = 1 << 24  # direction bytes per group of pairs (padded): bounded memory
OPS = "=XID"
NONE = 4


def traceback(q_codes, q_starts, t_codes, t_starts, rows, cols, table, gap_open: int, gap_extend: int, mode: str):
    """For pair b (query from q_starts[b], target from t_starts[b]) whose alignment ends
    at (rows[b], cols[b]): (query start int64[B], target start int64[B], op codes
    uint8[N], op offsets int64[B + 1]), the ops of pair b in order at
    ops[offsets[b]:offsets[b + 1]]."""
    B = rows.numel()
    dev = rows.device
    q_from = torch.zeros(B, dtype=torch.int64, device=dev)
    t_from = torch.zeros(B, dtype=torch.int64, device=dev)
    parts: list[tuple[torch.Tensor, torch.Tensor]] = []
    order = torch.argsort(rows * (1 << 32) + cols)
    r_list, c_list = rows[order].tolist(), cols[order].tolist()
    start = 0
    while start < B:
        stop = start + 1
        while stop < B and (stop + 1 - start) * (r_list[stop] + 1) * (c_list[stop] + 1) <= GROUP_CELLS:
            stop += 1
        idx = order[start:stop]
        qf, tf, ops, lens = _group(q_codes, q_starts[idx], t_codes, t_starts[idx], rows[idx], cols[idx],
                                   table.to(torch.int64), gap_open, gap_extend, mode)
        q_from[idx], t_from[idx] = qf, tf
        parts.append((idx, ops, lens))
        start = stop
    lens = torch.zeros(B, dtype=torch.int64, device=dev)
    for idx, _, n in parts:
        lens[idx] = n
    offsets = torch.zeros(B + 1, dtype=torch.int64, device=dev)
    offsets[1:] = torch.cumsum(lens, 0)
    out = torch.empty(int(offsets[-1]), dtype=torch.uint8, device=dev)
    for idx, ops, n in parts:  # each group's ops (in group order) to their pairs' slots
        pos = _ranges(offsets[idx], n)
        out[pos] = ops
    return q_from, t_from, out, offsets


def _ranges(starts: torch.Tensor, lens: torch.Tensor) -> torch.Tensor:
    """starts[g] + 0 .. lens[g] - 1 for every g, back to back."""
    total = int(lens.sum())
    g = torch.repeat_interleave(torch.arange(lens.numel(), device=lens.device), lens, output_size=total)
    first = torch.cumsum(lens, 0) - lens
    return starts[g] + torch.arange(total, device=lens.device) - first[g]


def _padded(codes, starts, lens, width: int, pad: int) -> torch.Tensor:
    j = torch.arange(width, device=lens.device)
    inside = j[None, :] < lens[:, None]
    if codes.numel() == 0:
        return torch.full((lens.numel(), width), pad, dtype=torch.int64, device=lens.device)
    at = (starts[:, None] + j[None, :]).clamp(max=codes.numel() - 1)
    return torch.where(inside, codes[at].to(torch.int64), pad)


def _group(q_codes, q_starts, t_codes, t_starts, R, C, table, gap_open, gap_extend, mode):
    dirs, Q, T = _directions(q_codes, q_starts, t_codes, t_starts, R, C, table, gap_open, gap_extend, mode)
    return _walk(dirs, Q, T, R, C, mode)


def _directions(q_codes, q_starts, t_codes, t_starts, R, C, table, gap_open, gap_extend, mode):
    """uint8 [G, R_max + 1, C_max + 1] direction bytes (row 0 and column 0 unused) and the
    padded query / target codes."""
    G, dev = R.numel(), R.device
    r_max, c_max = int(R.max()), int(C.max())
    size = table.shape[0]
    scores = torch.full((size + 1, size + 1), NEG, dtype=torch.int64, device=dev)  # pad code: never wins
    scores[:size, :size] = table
    Q = _padded(q_codes, q_starts, R, r_max + 1, size)  # (one pad more: the walk reads Q[0] of empty rows)
    T = _padded(t_codes, t_starts, C, c_max + 1, size)
    dirs = torch.zeros((G, r_max + 1, c_max + 1), dtype=torch.uint8, device=dev)
    j = torch.arange(c_max + 1, device=dev)
    gap = lambda L: torch.where(L > 0, -(gap_open + (L - 1) * gap_extend), 0)  # noqa: E731
    H = (gap(j) if mode == "global" else torch.zeros_like(j)).expand(G, -1).clone()
    F = torch.full((G, c_max + 1), NEG, dtype=torch.int64, device=dev)
    ramp = j * gap_extend
    neg_col = torch.full((G, 1), NEG, dtype=torch.int64, device=dev)
    T_cols = T[:, :-1].contiguous()
    for i in range(1, r_max + 1):
        s = torch.gather(scores.index_select(0, Q[:, i - 1]), 1, T_cols)  # [G, c_max] (gather: no index kernel)
        f_open = H - gap_open >= F - gap_extend
        F = torch.maximum(H - gap_open, F - gap_extend)
        left = 0 if mode == "local" else -(gap_open + (i - 1) * gap_extend)
        diag = H[:, :-1] + s
        Hd = torch.maximum(diag, F[:, 1:])
        if mode == "local":
            Hd = Hd.clamp(min=0)
        Hd = torch.cat([torch.full((G, 1), left, dtype=torch.int64, device=dev), Hd], 1)
        # E[j] = max_{k < j} (Hd[k] - open - (j - 1 - k) extend): exact for open >= extend
        run = torch.cummax(Hd + ramp, 1).values
        E = torch.cat([neg_col, run[:, :-1] - gap_open - ramp[:-1]], 1)
        H = torch.maximum(Hd, E)
        e_open = H[:, :-1] - gap_open >= E[:, :-1] - gap_extend
        h, e = H[:, 1:], E[:, 1:]
        src = torch.where(h == diag, 0, torch.where(h == e, 1, 2))
        if mode == "local":
            src = torch.where(h == 0, 3, src)
        dirs[:, i, 1:] = (src | (e_open.to(torch.int64) << 2) | (f_open[:, 1:].to(torch.int64) << 3)).to(torch.uint8)
    return dirs, Q, T


def _walk(dirs, Q, T, R, C, mode):
    """The walk back from (R, C) in state H, every pair one step per iteration."""
    G, dev = R.numel(), R.device
    g = torch.arange(G, device=dev)
    cap = R + C  # the longest path in the rectangle
    buf = torch.full((G, max(int(cap.max()), 1)), NONE, dtype=torch.uint8, device=dev)
    i, j = R.clone(), C.clone()
    st = torch.zeros(G, dtype=torch.int64, device=dev)  # 0 H, 1 E, 2 F
    k = torch.zeros(G, dtype=torch.int64, device=dev)
    done = torch.zeros(G, dtype=torch.bool, device=dev)
    step = 0
    while True:
        if step % 16 == 0 and bool(done.all()):
            break
        step += 1
        inside = (i > 0) & (j > 0)
        byte = dirs[g, i, j].to(torch.int64)
        src, e_open, f_open = byte & 3, (byte >> 2) & 1, (byte >> 3) & 1
        same = Q[g, (i - 1).clamp(min=0)] == T[g, (j - 1).clamp(min=0)]
        in_h, in_e, in_f = st == 0, st == 1, st == 2
        left_edge = in_h & (i > 0) & (j == 0)  # H(i, 0): a gap of i query residues (not local)
        top_edge = in_h & (i == 0) & (j > 0)  # H(0, j): j target residues (global), else free
        cell = in_h & inside
        if mode == "local":
            stop = (in_h & ~inside) | (cell & (src == 3))
            left_edge, top_edge = left_edge & False, top_edge & False
        elif mode == "global":
            stop = in_h & (i == 0) & (j == 0)
        else:
            stop = in_h & (i == 0)
            top_edge = top_edge & False
        diag = cell & (src == 0)
        ins, dele = left_edge | in_f, top_edge | in_e
        op = torch.where(diag, torch.where(same, 0, 1), torch.where(ins, 2, 3))
        emit = (diag | ins | dele) & ~done
        at = (cap - 1 - k).clamp(min=0)
        buf[g, at] = torch.where(emit, op, buf[g, at].to(torch.int64)).to(torch.uint8)
        k = k + emit.to(torch.int64)
        live = ~done
        i = i - ((diag | ins) & live).to(torch.int64)
        j = j - ((diag | dele) & live).to(torch.int64)
        nxt = torch.where(cell & (src == 1), 1, torch.where(cell & (src == 2), 2, st))
        nxt = torch.where(in_e, torch.where(e_open == 1, 0, 1), nxt)
        nxt = torch.where(in_f, torch.where(f_open == 1, 0, 2), nxt)
        st = torch.where(live, nxt, st)
        done = done | stop
    # pair g's ops: the last k[g] slots of its first cap[g]
    rows_ = torch.repeat_interleave(g, k, output_size=int(k.sum()))
    first = torch.cumsum(k, 0) - k
    cols_ = cap[rows_] - k[rows_] + torch.arange(rows_.numel(), device=dev) - first[rows_]
    return i, j, buf[rows_, cols_], k
