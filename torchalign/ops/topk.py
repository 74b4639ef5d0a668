"""Nearest neighbours and near-duplicate pairs by edit distance, with no dense matrix.

The references go in tiles: one tile of references against every query (levenshtein_cdist's
kernels, or the CPU DP), reduced on the device before the next tile: into every query's
running top k (levenshtein_topk), or to the tile's pairs within max_distance
(near_duplicates). A tile's distances and their reduction take at most about TILE_BYTES,
the top k another 8 B per query and slot: peak memory never grows with Nq x Nr.

Ties go to the smaller reference index on every path: a candidate's key is
distance * Nr + index (int64, unique), so the running top k is the k smallest keys, in
order. Empty slots hold the key EMPTY (larger than every real key).

Scalars as in ops/levenshtein.py (n_symbols, the hints: -1 unknown, algorithm, check);
``max_distance`` -1: none, else only pairs within it count; ``max_pairs``: more pairs
raise ValueError (nothing dropped silently).
"""

from __future__ import annotations

import torch
from torch import Tensor

from . import checks
from .backend import use_kernels, on_tensor_device
from .levenshtein import DEVICES, _distances

TILE_BYTES = 1 << 30  # working memory of one tile: its distances and their reduction
# bytes per pair of a tile, measured loosely: the kernels' int32 distance (+ its clamp), the
# int64 key and the merge's copy; the CPU DP's per-pair index tensors (levenshtein_pairs)
PAIR_BYTES = {True: 48, False: 160}
EMPTY = (1 << 63) - 1  # the key of an empty slot
NO_DISTANCE = (1 << 31) - 1  # an empty slot's distance when there is no max_distance


def tile_size(n_other: int, kernels: bool) -> int:
    """Sequences per tile when each is compared with ``n_other`` others (at least 1)."""
    return max(1, TILE_BYTES // (PAIR_BYTES[kernels] * max(1, n_other)))


def _prepare(names, a_codes, a_offsets, b_codes, b_offsets, n_symbols, a_longest, b_longest, code_bound, check):
    """Validate (check=True) and fill in the hints encode left unknown: one host read."""
    if check or min(a_longest, b_longest, code_bound) < 0:
        vals = checks.read(checks.two_batches(a_codes, a_offsets, b_codes, b_offsets))
        if check:
            checks.raise_if_bad(names[0], vals[0:3], *vals[6:8], n_symbols)
            checks.raise_if_bad(names[1], vals[3:6], *vals[8:10], n_symbols)
        a_longest, b_longest, code_bound = vals[10], vals[11], max(vals[7], vals[9]) + 1
    return a_longest, b_longest, max(1, code_bound)  # (no codes at all: still one symbol for the kernels)


def _cap(max_distance: int, longest: int) -> int:
    """The bound the kernels get: none (-1), or at most the longest sequence (no distance passes it)."""
    return -1 if max_distance < 0 else min(max_distance, longest)


def _tile_distances(a_codes, a_offsets, a_lens, r0, r1, b_codes, b_offsets, b_longest, n_symbols, bound,
                    code_bound, algorithm):
    """int32 [r1 - r0, len(b)]: sequences r0 .. r1 of a against all of b (offsets need not start
    at 0: the codes are passed whole, no copy per tile)."""
    d = _distances(a_codes, a_offsets[r0 : r1 + 1], b_codes, b_offsets, n_symbols, bound,
                   int(a_lens[r0:r1].max()), b_longest, code_bound, algorithm, False, True)
    return d.reshape(r1 - r0, b_offsets.numel() - 1)


@torch.library.custom_op("torchalign::levenshtein_topk", mutates_args=(), device_types=DEVICES)
@on_tensor_device
def levenshtein_topk(q_codes: Tensor, q_offsets: Tensor, r_codes: Tensor, r_offsets: Tensor, n_symbols: int,
                     k: int, max_distance: int, q_longest: int, r_longest: int, code_bound: int, algorithm: str,
                     check: bool) -> tuple[Tensor, Tensor]:
    q_longest, r_longest, code_bound = _prepare(("queries", "references"), q_codes, q_offsets, r_codes, r_offsets,
                                                n_symbols, q_longest, r_longest, code_bound, check)
    nq, nr = q_offsets.numel() - 1, r_offsets.numel() - 1
    kept = min(k, max(nr, 1))  # slots past nr stay empty: not carried through the merges
    best = torch.full((nq, kept), EMPTY, dtype=torch.int64, device=q_codes.device)
    bound = _cap(max_distance, max(q_longest, r_longest))
    r_lens = (r_offsets[1:] - r_offsets[:-1]).cpu()  # per-tile longest, on the host (one read)
    step = tile_size(nq, use_kernels(q_codes))
    for r0 in range(0, nr if nq else 0, step):
        r1 = min(nr, r0 + step)
        d = _tile_distances(r_codes, r_offsets, r_lens, r0, r1, q_codes, q_offsets, q_longest, n_symbols, bound,
                            code_bound, algorithm).T  # [nq, tile]
        key = d.to(torch.int64) * nr + torch.arange(r0, r1, device=d.device)
        if max_distance >= 0:
            key = key.masked_fill(d > max_distance, EMPTY)
        best = torch.cat([best, key], 1).topk(kept, dim=1, largest=False, sorted=True).values
        del d, key
        worst = int(best[:, -1].max())
        if worst != EMPTY:  # every query has k within worst // nr, and later references have larger
            bound = max(worst // nr - 1, 0)  # indices: one at that distance or more cannot enter, and
            # the kernels may report all of those as bound + 1 (they stop early; the result is the same)
    best = torch.cat([best, best.new_full((nq, k - kept), EMPTY)], 1)
    empty = best == EMPTY
    distance = torch.where(empty, max_distance + 1 if max_distance >= 0 else NO_DISTANCE, best // max(nr, 1))
    return distance.to(torch.int32), torch.where(empty, -1, best % max(nr, 1))


@levenshtein_topk.register_fake
def _(q_codes, q_offsets, r_codes, r_offsets, n_symbols, k, max_distance, q_longest, r_longest, code_bound,
      algorithm, check):
    shape = (q_offsets.shape[0] - 1, k)
    return q_offsets.new_empty(shape, dtype=torch.int32), q_offsets.new_empty(shape)


@torch.library.custom_op("torchalign::near_duplicates", mutates_args=(), device_types=DEVICES)
@on_tensor_device
def near_duplicates(codes: Tensor, offsets: Tensor, n_symbols: int, max_distance: int, longest: int,
                    code_bound: int, algorithm: str, max_pairs: int, check: bool) -> tuple[Tensor, Tensor, Tensor]:
    longest, _, code_bound = _prepare(("seqs", "seqs"), codes, offsets, codes[:0], offsets[:1] * 0, n_symbols,
                                      longest, 0, code_bound, check)
    n = offsets.numel() - 1
    lens = (offsets[1:] - offsets[:-1]).cpu()  # per-tile longest, on the host (one read)
    prefix_longest = lens.cummax(0).values if n else lens
    bound = _cap(max_distance, longest)
    step = tile_size(n, use_kernels(codes))
    found, count = [], 0
    for t0 in range(0, n, step):  # sequences t0 .. t1 (the j of a pair) against 0 .. t1 (its i < j)
        t1 = min(n, t0 + step)
        d = _tile_distances(codes, offsets, lens, t0, t1, codes, offsets[: t1 + 1], int(prefix_longest[t1 - 1]),
                            n_symbols, bound, code_bound, algorithm)
        i = torch.arange(t1, device=d.device)
        j = torch.arange(t0, t1, device=d.device)
        jj, ii = ((d <= max_distance) & (i[None, :] < j[:, None])).nonzero(as_tuple=True)
        count += ii.numel()
        found = [] if count > max_pairs else found + [(ii, jj + t0, d[jj, ii])]  # past it: only count
    if count > max_pairs:
        raise ValueError(f"near_duplicates: {count} pairs within max_distance={max_distance} exceed "
                         f"max_pairs={max_pairs}; pass max_pairs>={count} or lower max_distance")
    if not found:
        empty = offsets.new_empty(0)
        return empty, empty.clone(), empty.to(torch.int32)
    i, j, d = (torch.cat(x) for x in zip(*found))
    order = torch.argsort(i * n + j)  # (i, j) order; the tiles came in j order
    return i[order], j[order], d[order]


@near_duplicates.register_fake
def _(codes, offsets, n_symbols, max_distance, longest, code_bound, algorithm, max_pairs, check):
    n = torch.library.get_ctx().new_dynamic_size()
    return offsets.new_empty(n), offsets.new_empty(n), offsets.new_empty(n, dtype=torch.int32)
