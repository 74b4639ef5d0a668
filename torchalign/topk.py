"""Nearest neighbours and near duplicates by edit distance: public functions (validation, then
torch.ops.torchalign.*). Neither builds the Nq x Nr matrix: see ops/topk.py."""

from __future__ import annotations

from typing import NamedTuple

import torch

from . import ops  # noqa: F401  (registers torch.ops.torchalign.*)
from .hamming import DEFAULT_MAX_HITS
from .inputs import INT64_MAX, at_most_longest, batches, check_choice, check_int, n_symbols
from .levenshtein import _hints
from .ops.levenshtein import ALGORITHMS

MAX_DISTANCE = (1 << 31) - 2  # max_distance + 1 is an int32


class Neighbours(NamedTuple):
    """Each query's k nearest references: ``distance`` int32 [Nq, k], ``index`` int64 [Nq, k]."""

    distance: torch.Tensor
    index: torch.Tensor


class NearDuplicates(NamedTuple):
    """Pairs (i, j), i < j, within a distance: ``i``, ``j`` int64, ``distance`` int32, sorted by (i, j)."""

    i: torch.Tensor
    j: torch.Tensor
    distance: torch.Tensor


def levenshtein_topk(queries, references, k: int, max_distance: int | None = None, *, alphabet=None,
                     algorithm: str = "auto", check: bool = True) -> Neighbours:
    """The k references nearest to each query by edit distance, as (distance int32 [Nq, k],
    index int64 [Nq, k]), without the Nq x Nr matrix.

    Each row is sorted by (distance, index): among equally distant references the smaller
    index comes first, on every device. With ``max_distance``, only references within it
    are reported. A slot with no reference (k > Nr, or fewer within ``max_distance``) has
    index -1 and distance ``max_distance + 1``, or 2**31 - 1 with no ``max_distance``:
    empty slots sort last. k >= 1; k > Nr is allowed. Inputs and ``alphabet`` as in
    ``levenshtein`` (plain strings compare as UTF-8 bytes; ``alphabet="unicode"`` compares
    characters); ``algorithm`` picks the GPU kernel as there.

    The references go in tiles, each compared with every query (Myers' bit-vectors on the
    GPU) and merged into the running top k on the device; once every query has k
    candidates, the kernels stop below the worst of them (Ukkonen's cut-off). Memory
    beside the output: about ``ops.topk.TILE_BYTES`` (1 GiB) for a tile, 8 B per query
    and slot for the running top k, and levenshtein_cdist's for one tile (on the CPU, its
    DP's batches of rows); never Nq x Nr. One host read per tile, even with
    ``check=False``: not for CUDA graphs.

    >>> import torchalign as ta
    >>> d, i = ta.levenshtein_topk(["kitten", "flaw"], ["sitting", "lawn", "mitten", "flaws"], k=2)
    >>> d.tolist(), i.tolist()
    ([[1, 3], [1, 2]], [[2, 0], [3, 1]])
    >>> ta.levenshtein_topk(["kitten"], ["sitting", "lawn", "mitten"], k=2, max_distance=2).index.tolist()
    [[2, -1]]
    """
    k = check_int("k", k, 1)
    max_distance = -1 if max_distance is None else check_int("max_distance", max_distance, 0, MAX_DISTANCE)
    q, r = batches(("queries", "references"), (queries, references), alphabet, "bytes")
    q_longest, r_longest, bound = _hints(q, r)
    out = torch.ops.torchalign.levenshtein_topk(q.codes, q.offsets, r.codes, r.offsets, n_symbols(q), k,
                                                max_distance, q_longest, r_longest, bound,
                                                check_choice("algorithm", algorithm, ALGORITHMS), check)
    return Neighbours(*out)


def near_duplicates(seqs, max_distance: int, *, alphabet=None, max_pairs: int = DEFAULT_MAX_HITS,
                    algorithm: str = "auto", check: bool = True) -> NearDuplicates:
    """Every pair of sequences within ``max_distance`` edits of each other, as (i int64,
    j int64, distance int32) with i < j, sorted by (i, j): the pairs to drop in a dataset
    dedup. Never builds the N x N matrix: the upper triangle goes in tiles, each reduced
    to its pairs on the device (memory as in ``levenshtein_topk``).

    More than ``max_pairs`` pairs raise ValueError saying how many there are (nothing is
    dropped). Inputs, ``alphabet`` and ``algorithm`` as in ``levenshtein``.

    >>> import torchalign as ta
    >>> p = ta.near_duplicates(["the cat sat", "the bat sat", "a dog", "the cat sat."], max_distance=1)
    >>> p.i.tolist(), p.j.tolist(), p.distance.tolist()
    ([0, 0], [1, 3], [1, 1])
    """
    max_pairs = min(check_int("max_pairs", max_pairs, 0), INT64_MAX)
    (s,) = batches(("seqs",), (seqs,), alphabet, "bytes")
    max_distance = at_most_longest(check_int("max_distance", max_distance, 0), s)  # no distance passes the longest
    longest, _, bound = _hints(s, s)
    out = torch.ops.torchalign.near_duplicates(s.codes, s.offsets, n_symbols(s), max_distance, longest, bound,
                                               check_choice("algorithm", algorithm, ALGORITHMS), max_pairs, check)
    return NearDuplicates(*out)
