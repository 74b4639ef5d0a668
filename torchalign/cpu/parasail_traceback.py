"""Alignment tracebacks on the CPU from parasail's DP table; traceback.py's torch DP where
parasail does not reach.

For each pair parasail fills H over the rectangle from (0, 0) to the end cell (the
prefixes of the pair: the DP is causal, so these are the full matrix's cells) in SIMD
lanes, int16 first and int32 where that saturated (its prefix-scan DP: Gotoh's, exact
for every gap). The walk back then reads H cell by cell with traceback.py's rule (as
tests/reference.py does): a local start, then the diagonal, then E, then F; leave a gap
rather than extend it. E and F come from H's prefix maxima, E[i][j] = max over k < j of
H[i][k] - open - (j - 1 - k) extend, computed for a row (a column for F) the first time
the walk needs one there. Memory: parasail's table, 4 B per cell of one rectangle per
thread (a larger rectangle than TABLE_CELLS takes the torch traceback: 1 B per cell).
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np
import torch

from . import traceback as torch_tb
from .parasail_align import encode, parasail

TABLE_CELLS = 1 << 26  # int32 cells of one parasail table (256 MiB)
TABLES = {"local": "sw_table_scan", "global": "nw_table_scan", "semiglobal": "sg_dx_table_scan"}
EQ, X, INS, DEL = 0, 1, 2, 3  # op codes (traceback.py's)


def traceback(q_codes, q_starts, t_codes, t_starts, rows, cols, table, gap_open: int, gap_extend: int, mode: str):
    """traceback.traceback's contract and integers: (query start, target start, op codes,
    op offsets) of the pairs whose alignments end at (rows[b], cols[b])."""
    B = rows.numel()
    small = torch.nonzero(rows * cols <= TABLE_CELLS).squeeze(1)
    # the prefixes up to the end cells
    enc = encode(q_codes, q_starts[small], rows[small], t_codes, t_starts[small], cols[small], table, gap_open,
                 gap_extend) if small.numel() else None
    if enc is None:
        return torch_tb.traceback(q_codes, q_starts, t_codes, t_starts, rows, cols, table, gap_open, gap_extend, mode)
    q_from, t_from = torch.zeros(B, dtype=torch.int64), torch.zeros(B, dtype=torch.int64)
    ops: list = [None] * B
    for b, (i, j, path) in zip(small.tolist(), _walks(enc, gap_open, gap_extend, mode)):
        q_from[b], t_from[b], ops[b] = i, j, torch.from_numpy(path)
    if small.numel() < B:
        big = torch.nonzero(rows * cols > TABLE_CELLS).squeeze(1)
        qf, tf, o, off = torch_tb.traceback(q_codes, q_starts[big], t_codes, t_starts[big], rows[big], cols[big],
                                            table, gap_open, gap_extend, mode)
        q_from[big], t_from[big] = qf, tf
        for k, b in enumerate(big.tolist()):
            ops[b] = o[off[k] : off[k + 1]]
    offsets = torch.zeros(B + 1, dtype=torch.int64)
    offsets[1:] = torch.cumsum(torch.tensor([len(o) for o in ops], dtype=torch.int64), 0)
    return q_from, t_from, torch.cat(ops) if B else torch.empty(0, dtype=torch.uint8), offsets


def _walks(enc, gap_open, gap_extend, mode):
    """(query start, target start, op codes in order) of each pair of ``enc``."""

    def one(k):
        q, t = enc.queries[k], enc.targets[k]
        result, H = _table(q, t, gap_open, gap_extend, mode, enc) if q and t else (None, None)
        return _walk(H, len(q), len(t), [c - 1 for c in q], [c - 1 for c in t], enc.table, gap_open, gap_extend,
                     mode)

    threads, n = torch.get_num_threads(), len(enc.queries)
    if threads == 1 or n < 2:
        return [one(k) for k in range(n)]
    with ThreadPoolExecutor(threads) as pool:
        return list(pool.map(one, range(n)))


def _table(q: bytes, t: bytes, gap_open, gap_extend, mode, enc):
    """(parasail's result, its table: H[i][j] for i, j >= 1 at [i - 1, j - 1], int32; a
    view of memory the result frees when dropped). int16 lanes first (where they hold the
    table and gaps), int32 if they saturated."""
    for bits in enc.widths:
        if bits == 8:  # (a table of int8 lanes saturates on most real pairs)
            continue
        r = getattr(parasail, f"{TABLES[mode]}_{bits}")(q, t, gap_open, gap_extend, enc.matrix)
        if not r.saturated:
            return r, r.score_table
    raise AssertionError("parasail's int32 table saturated inside the op's score bound")


def _walk(T, R: int, C: int, q: list, t: list, sub: list, go: int, ge: int, mode: str):
    """traceback.py's walk from (R, C) in state H over H = T inside, the mode's edges outside."""
    local, gap = mode == "local", lambda n: -(go + (n - 1) * ge) if n else 0

    def H(i, j):
        if i and j:
            return int(T[i - 1, j - 1])
        if local or (i == 0 and mode == "semiglobal"):
            return 0
        return gap(i + j)  # global row 0 / column 0, semiglobal column 0

    rows_e, cols_f = {}, {}  # row i -> prefix maxima for E; column j -> for F

    def E(i, j):  # max over k < j of H[i][k] - go - (j - 1 - k) ge; j >= 1
        run = rows_e.get(i)
        if run is None or len(run) < j:
            line = np.concatenate([[H(i, 0)], T[i - 1, : j - 1]]).astype(np.int64)
            run = rows_e[i] = np.maximum.accumulate(line + ge * np.arange(j))
        return int(run[j - 1]) - go - (j - 1) * ge

    def F(i, j):  # max over k < i of H[k][j] - go - (i - 1 - k) ge; i >= 1
        run = cols_f.get(j)
        if run is None or len(run) < i:
            line = np.concatenate([[H(0, j)], T[: i - 1, j - 1]]).astype(np.int64)
            run = cols_f[j] = np.maximum.accumulate(line + ge * np.arange(i))
        return int(run[i - 1]) - go - (i - 1) * ge

    i, j, state, ops = R, C, "H", []
    while True:
        if state == "H":
            if i == 0 or j == 0:
                if local or (i == 0 and (j == 0 or mode == "semiglobal")):
                    break
                if j == 0:  # a leading gap: query residues (global, semiglobal)
                    ops.append(INS)
                    i -= 1
                else:  # target residues before a global alignment
                    ops.append(DEL)
                    j -= 1
                continue
            h = H(i, j)
            if local and h == 0:
                break
            if h == H(i - 1, j - 1) + sub[q[i - 1]][t[j - 1]]:
                ops.append(EQ if q[i - 1] == t[j - 1] else X)
                i, j = i - 1, j - 1
            else:
                state = "E" if h == E(i, j) else "F"
        elif state == "E":
            ops.append(DEL)
            state = "H" if j == 1 or H(i, j - 1) - go >= E(i, j - 1) - ge else "E"
            j -= 1
        else:
            ops.append(INS)
            state = "H" if i == 1 or H(i - 1, j) - go >= F(i - 1, j) - ge else "F"
            i -= 1
    ops.reverse()
    return i, j, np.array(ops, dtype=np.uint8)
