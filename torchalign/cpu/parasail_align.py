"""Alignment scores and ends on the CPU through parasail, the torch DP (align.py) where it
does not reach.

parasail runs one pair at a time in SIMD lanes over the query (Farrar's striped layout
for local scores, the prefix-scan one elsewhere), first in int8, then in int16 and
int32 for a pair that saturated: exact int32 scores inside the op's bound. A width
whose lanes cannot hold every table entry and gap is skipped: parasail would wrap them
in its profile and gap vectors unseen (its ``_sat`` functions do: match 900 scored 74).
Its DP is Gotoh's with our gap convention (a gap of L residues costs open + (L - 1)
extend), and its ends follow our tie rule: the first target column reaching the
best score, then the first query row in it. Three cases differ and are fixed here: a
local score of 0 (our ends (0, 0)), a semiglobal best equal to the all-gap query (our
target end 0: parasail's row starts at column 1), and global ends (always (m, n)).

Codes travel as the bytes code + 1 (parasail's alphabet is a C string: no byte 0), so a
table of more than MAX_SYMBOLS symbols (bytes, token ids) is cut to the symbols the
sequences use, renumbered. Small pairs (an empty side included: parasail takes none),
more symbols in use than that and a missing parasail take the torch DP. The calls release the GIL: pairs run on
torch.get_num_threads() threads.
"""

from __future__ import annotations

import functools
from concurrent.futures import ThreadPoolExecutor
from typing import NamedTuple

import numpy as np
import torch

from . import align as torch_dp

try:
    import parasail
except ImportError:  # (an optional dependency off Linux x86-64)
    parasail = None

MAX_SYMBOLS = 255
# Striped local runs ~3x faster than scan (NOTES.md) but is exact only for gap_open >
# gap_extend: its lazy-F loop stops once F - extend no longer beats H - open, and with
# open == extend that also stops an F that has just raised H, one the first pass never
# saw (BLOSUM62, gaps 0 / 0: striped 9, Gotoh 11). Scan (Gotoh's, F by a prefix max) is
# exact for every gap, and measured faster than striped for global and semiglobal.
FUNCTIONS = {"local": "sw_scan_profile", "global": "nw_scan_profile", "semiglobal": "sg_dx_scan_profile"}
STRIPED_LOCAL = "sw_striped_profile"
LANES = ((8, (1 << 7) - 1), (16, (1 << 15) - 1), (32, 1 << 30))  # lane bits, the largest |entry| or gap they hold
# Pairs of fewer cells run faster in the torch DP, vectorised over pairs, than one parasail
# call each (~7 us; 20,000 local pairs of 5..10 aa: 1.8 us a pair there, NOTES.md)
TORCH_CELLS = 400
TASKS_PER_THREAD = 4  # pairs cut into this many tasks of equal cells per thread: balanced ends


class Encoded(NamedTuple):
    """The codes as parasail reads them: the bytes code + 1 of every query and target, the
    table over those codes (cut to the symbols in use), parasail's matrix of it and the
    lane widths that hold its entries and the gaps."""

    queries: list
    targets: list
    table: list
    matrix: object
    widths: tuple


def widths(table: torch.Tensor, gap_open: int, gap_extend: int) -> tuple:
    """The lane widths (8, 16, 32) that hold every |table entry| and both gaps."""
    top = max(int(table.abs().max()) if table.numel() else 0, gap_open, gap_extend)
    return tuple(bits for bits, limit in LANES if top <= limit)


def encode(q_codes, q_starts, q_lens, t_codes, t_starts, t_lens, table, gap_open, gap_extend) -> Encoded | None:
    """The sequences and table for parasail; None where it cannot take them (not
    installed, more than MAX_SYMBOLS symbols in use)."""
    if parasail is None:
        return None
    if table.shape[0] > MAX_SYMBOLS:
        used = torch.zeros(table.shape[0], dtype=torch.int64)
        for codes in (q_codes, t_codes):
            used += torch.bincount(codes.to(torch.int32), minlength=table.shape[0])[: table.shape[0]]
        keep = torch.nonzero(used).squeeze(1)
        if keep.numel() > MAX_SYMBOLS:
            return None
        rank = torch.zeros(table.shape[0], dtype=torch.uint8)
        rank[keep] = torch.arange(keep.numel(), dtype=torch.uint8)
        table = table[keep][:, keep]
        q_codes, t_codes = rank[q_codes.to(torch.int32)], rank[t_codes.to(torch.int32)]
    values = table.to(torch.int32)
    return Encoded(_sequences(q_codes, q_starts, q_lens), _sequences(t_codes, t_starts, t_lens), values.tolist(),
                   _matrix(values.shape[0], values.numpy().tobytes()), widths(table, gap_open, gap_extend))


def align_pairs(q_codes, q_starts, q_lens, t_codes, t_starts, t_lens, pair_q, pair_t, table, gap_open: int,
                gap_extend: int, mode: str):
    """(score int32[P], query end int64[P], target end int64[P]) of query pair_q[p] with
    target pair_t[p]: align.align_score's integers, ties included."""
    ql, tl = q_lens[pair_q], t_lens[pair_t]
    small = ql * tl < TORCH_CELLS
    enc = None if bool(small.all()) else encode(q_codes, q_starts, q_lens, t_codes, t_starts, t_lens, table, gap_open,
                                                gap_extend)
    if enc is None:
        return torch_dp.align_score(q_codes, q_starts[pair_q], ql, t_codes, t_starts[pair_t], tl, table, gap_open,
                                    gap_extend, mode)
    P = pair_q.numel()
    score = torch.empty(P, dtype=torch.int32)
    q_end, t_end = torch.empty(P, dtype=torch.int64), torch.empty(P, dtype=torch.int64)
    if bool(small.any()):
        e = torch.nonzero(small).squeeze(1)
        score[e], q_end[e], t_end[e] = torch_dp.align_score(q_codes, q_starts[pair_q[e]], ql[e], t_codes,
                                                            t_starts[pair_t[e]], tl[e], table, gap_open, gap_extend,
                                                            mode)
    rest = torch.nonzero(~small).squeeze(1)
    score[rest], q_end[rest], t_end[rest] = _parasail(enc, q_lens, t_lens, pair_q[rest], pair_t[rest], gap_open,
                                                      gap_extend, mode)
    return score, q_end, t_end


def _parasail(enc: Encoded, q_lens, t_lens, pair_q, pair_t, gap_open, gap_extend, mode):
    name = STRIPED_LOCAL if mode == "local" and gap_open > gap_extend else FUNCTIONS[mode]
    ladder = [getattr(parasail, f"{name}_{bits}") for bits in enc.widths]
    pq, pt = pair_q.tolist(), pair_t.tolist()
    order = torch.argsort(pair_q, stable=True).tolist()  # a query's pairs side by side: one profile each

    def run(idx):
        out, prev, profile = np.empty((len(idx), 3), dtype=np.int64), -1, None
        for k, p in enumerate(idx):
            if pq[p] != prev:  # (the profile of every width: each is built from the matrix alone)
                prev, profile = pq[p], parasail.profile_create_sat(enc.queries[pq[p]], enc.matrix)
            for fn in ladder:
                result = fn(profile, enc.targets[pt[p]], gap_open, gap_extend)  # (frees its C struct when dropped)
                if not result.saturated:
                    break
            r = result.pointer[0]  # (NULL, on an error: a ValueError, not a crash)
            out[k] = r.score, r.end_query, r.end_ref
        return out

    m, n = q_lens[pair_q], t_lens[pair_t]
    threads = torch.get_num_threads()
    if threads == 1:
        res = run(order)
    else:
        with ThreadPoolExecutor(threads) as pool:
            res = np.concatenate(list(pool.map(run, _tasks(order, m * n, threads * TASKS_PER_THREAD))))
    res = torch.from_numpy(res)
    at = torch.tensor(order, dtype=torch.int64)
    score, q_end, t_end = (torch.empty(len(order), dtype=torch.int64) for _ in range(3))
    score[at], q_end[at], t_end[at] = res[:, 0], res[:, 1] + 1, res[:, 2] + 1  # parasail's ends are inclusive
    if mode == "local":  # the empty alignment
        q_end, t_end = torch.where(score == 0, 0, q_end), torch.where(score == 0, 0, t_end)
    elif mode == "global":
        q_end, t_end = m, n
    else:  # the all-gap query at column 0 ties the best: the smaller target end
        q_end = m
        t_end = torch.where(score == -(gap_open + (m - 1) * gap_extend), 0, t_end)
    return score.to(torch.int32), q_end, t_end


def _tasks(order: list, cells: torch.Tensor, count: int) -> list:
    """``order`` cut into up to ``count`` runs of about equal DP cells (``cells`` per pair)."""
    total = torch.cumsum(cells[torch.tensor(order, dtype=torch.int64)], 0)
    cuts = torch.searchsorted(total, total[-1] * torch.arange(1, count) // count).tolist()
    cuts = sorted(set([0] + cuts + [len(order)]))
    return [order[a:b] for a, b in zip(cuts[:-1], cuts[1:])]


def _sequences(codes, starts, lens) -> list[bytes]:
    """Each sequence as the bytes code + 1 (codes < MAX_SYMBOLS)."""
    data = (codes.to(torch.uint8) + 1).numpy().tobytes()
    return [data[s : s + n] for s, n in zip(starts.tolist(), lens.tolist())]


@functools.lru_cache(maxsize=16)
def _matrix(size: int, values: bytes):
    """parasail's matrix of a table (int32 [size, size] as bytes) over the bytes 1..size."""
    m = parasail.matrix_create(bytes(range(1, size + 1)), 0, 0, case_sensitive=True)
    table = np.frombuffer(values, dtype=np.int32).reshape(size, size)
    for i in range(size):
        for j in range(size):
            m[i, j] = int(table[i, j])
    return m
