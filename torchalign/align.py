"""Pairwise alignment scores (Smith-Waterman, Needleman-Wunsch, semiglobal): public functions."""

from __future__ import annotations

import weakref
from typing import NamedTuple

import torch

from . import ops  # noqa: F401  (registers torch.ops.torchalign.*)
from .batch import SequenceBatch
from .inputs import batches, check_choice, check_int, max_length
from .ops.align import MODES, table_top
from .scoring import Scoring


class Scores(NamedTuple):
    """One entry per pair: the best score and the end (exclusive) of an optimal alignment
    in the query and in the target. Ties go to the smallest target end, then the
    smallest query end; a local score of 0 is the empty alignment, ends (0, 0)."""

    score: torch.Tensor  # int32
    query_end: torch.Tensor  # int64
    target_end: torch.Tensor  # int64


class SearchResult(NamedTuple):
    """[n_queries, k] each, k = min(top_k, database size), best first: the scores, the
    database indices (ties: the smaller index first), and the ends (exclusive) of an
    optimal alignment in the target (``ends``) and in the query (``query_ends``)."""

    scores: torch.Tensor  # int32
    indices: torch.Tensor  # int64
    ends: torch.Tensor  # int64
    query_ends: torch.Tensor  # int64


def _scoring_and_batches(names, values, scoring):
    scoring = scoring if scoring is not None else Scoring()
    if not isinstance(scoring, Scoring):
        raise TypeError(f"scoring: expected a ta.Scoring, got {type(scoring).__name__}")
    batches_ = batches(names, values, scoring.alphabet, scoring.alphabet.name)
    for name, b in zip(names, batches_):
        if b.max_code is not None and b.max_code >= scoring.table.shape[0]:
            symbol = scoring.alphabet.decode(torch.tensor([b.max_code]))
            raise ValueError(f"{name}: {scoring.unscored(symbol)}")
    return scoring, batches_, _table_on(scoring, batches_[0].device)[0]


_TABLES: "weakref.WeakKeyDictionary[Scoring, dict]" = weakref.WeakKeyDictionary()


def _table_on(scoring: Scoring, device: torch.device) -> tuple[torch.Tensor, int]:
    """scoring.table on ``device`` and its largest |entry|, found once per table and device
    (a copy from host memory in every call would sync, and a CUDA graph cannot hold one);
    a new or changed table is copied again. (-1 for the bound inside torch.compile.)"""
    table = scoring.table
    if torch.compiler.is_compiling():  # traced into the graph; the op finds the bound itself
        return table.to(device), -1
    per_device = _TABLES.setdefault(scoring, {})
    cached = per_device.get(device)
    if cached is None or cached[0] is not table or cached[1] != table._version:
        cached = per_device[device] = (table, table._version, table.to(device), table_top(table))
    return cached[2], cached[3]


def search(queries, database, scoring: Scoring | None = None, top_k: int = 10, *, mode: str = "local",
           batch_residues: int | None = None, check: bool = True) -> SearchResult:
    """Every query against every database sequence; the top_k best per query.

    Scores as align_score's (``mode`` "local" by default); the ends are those of the
    chosen hits only (the scan itself keeps scores alone). On the GPU the database is
    packed (sorted by length, interleaved) and local scores run two sequences per lane
    in 16-bit halves; a score that could have wrapped is recomputed in int32. The packed
    database is made once and kept with the database's tensors (``SequenceBatch.pack``):
    keep the encoded database on the GPU between calls (query after query reuses it), and
    on disk with ``SequenceBatch.save`` / ``SequenceBatch.load``, which keep the packing too.

    ``batch_residues``: search the database in slices of about this many residues, each
    copied to the queries' device in turn and merged into the same top_k; the database
    may then live anywhere (a pinned host copy larger than GPU memory streams through).

    Memory beside the database (CUDA), bounded by budgets in ``torchalign.ops.align``
    and ``torchalign_kernels.align``: local mode holds the packed copy (1 B per residue
    and the padding of length-sorted chunks of 64), the scan's scratch (4 B per packed
    residue for each of 4 streams, at most 1 GiB each: a longer database is scanned in
    slices) and ~40 B per query x sequence pair of a step of 16 M pairs; global and
    semiglobal modes ~150 B per pair of a step of 4 M pairs (one query at least) and
    align_score's scratch (at most 512 MiB per kernel). 20 queries against 570,000
    sequences (200 M residues) need ~1.7 GB beside the database in global mode.

    >>> import torchalign as ta
    >>> db = ["MKVLAAGIW", "GGGGHEAGAWGHEEGG", "PAWHEAE"]
    >>> r = ta.search(["HEAGAWGHEE"], db, top_k=2)
    >>> r.indices.tolist(), r.scores.tolist(), r.ends.tolist()
    ([[1, 0]], [[62, 20]], [[14, 9]])
    """
    check_choice("mode", mode, MODES)
    top_k = check_int("top_k", top_k, 1)
    if batch_residues is None:
        scoring, (q, d), table = _scoring_and_batches(("queries", "database"), (queries, database), scoring)
        return _search(q, d, table, scoring, mode, min(top_k, max(1, len(d))), check)  # (k = min(top_k, len(d)))
    batch_residues = check_int("batch_residues", batch_residues, 1)
    scoring, (q,), table = _scoring_and_batches(("queries",), (queries,), scoring)
    _, (d,), _ = _scoring_and_batches(("database",), (database,), scoring)
    top_k = min(top_k, max(1, len(d)))  # k = min(top_k, database size) either way
    batch_residues = min(batch_residues, max(1, d.codes.numel()))  # one slice holds it all either way
    best = None
    for start, stop in _slices(d.offsets.cpu(), batch_residues):
        o0, o1 = (int(x) for x in d.offsets[[start, stop]])
        part = SequenceBatch(d.codes[o0:o1], d.offsets[start : stop + 1] - o0, d.alphabet, d.max_code)
        r = _search(q, part.to(q.device, non_blocking=True), table, scoring, mode, top_k, check)
        r = r._replace(indices=r.indices + start)
        best = r if best is None else _merge(best, r, top_k)
    if best is None:  # an empty database
        return _search(q, d.to(q.device), table, scoring, mode, top_k, check)
    return best


def _search(q, d, table, scoring, mode, top_k, check) -> SearchResult:
    out = torch.ops.torchalign.search(q.codes, q.offsets, d.codes, d.offsets, table, scoring.gap_open,
                                      scoring.gap_extend, mode, top_k, max_length(q), max_length(d), check)
    return SearchResult(*out)


def _slices(offsets: torch.Tensor, residues: int):
    """(start, stop) sequence ranges of about ``residues`` residues (one sequence at least)."""
    n, start = offsets.numel() - 1, 0
    while start < n:
        stop = int(torch.searchsorted(offsets, offsets[start] + residues, right=True)) - 1
        stop = min(max(stop, start + 1), n)
        yield start, stop
        start = stop


def _merge(a: SearchResult, b: SearchResult, top_k: int) -> SearchResult:
    """The top_k of two results over disjoint database slices (ties: the smaller index)."""
    scores = torch.cat([a.scores, b.scores], 1)
    indices = torch.cat([a.indices, b.indices], 1)
    key = (scores.to(torch.int64) << 32) + ((1 << 32) - 1 - indices)
    pick = torch.topk(key, min(top_k, key.shape[1]), dim=1).indices
    return SearchResult(*(torch.gather(torch.cat([x, y], 1), 1, pick) for x, y in zip(a, b)))


def align_score(queries, targets, scoring: Scoring | None = None, mode: str = "local", *,
                check: bool = True) -> Scores:
    """The optimal alignment score of each pair (query b, target b) with affine gaps.

    ``mode``: "local" (Smith-Waterman: the best-scoring pair of substrings, >= 0),
    "global" (Needleman-Wunsch: both sequences whole) or "semiglobal" (the whole query
    aligned somewhere inside the target: target residues before and after it cost
    nothing, as edlib's HW mode). ``scoring``: a ta.Scoring (default BLOSUM62, gaps
    11 / 1); plain strings are encoded with its alphabet, and a symbol it lacks raises.
    Any lengths; every cell stays exact (a pair whose scores could pass 2^29 raises).

    Memory beside the output (CUDA): ~100 B per pair (lengths, sort keys, the sorted
    pairs and their outputs) and scratch of 8 B per target residue of each pair, run in
    launches of at most 512 MiB of it per kernel (``torchalign_kernels.align.
    SCRATCH_BYTES``; a larger pair gets a launch of its own). ``check=False`` with
    encode's length hints reads nothing back from the device (CUDA graphs): the launches
    are sized from the longest query and target alone, and once a target reaches 1,024
    residues every pair runs one per program (fast for long pairs, slower for a batch
    mixing them with short ones: check=True sizes the launches from the lengths).

    >>> import torchalign as ta
    >>> s = ta.align_score(["HEAGAWGHEE", "HEAGAWGHEE"], ["PAWHEAE", "PAWHEAE"], mode="local")
    >>> s.score.tolist(), s.query_end.tolist(), s.target_end.tolist()
    ([17, 17], [9, 9], [5, 5])
    """
    check_choice("mode", mode, MODES)
    scoring, (q, t), table = _scoring_and_batches(("queries", "targets"), (queries, targets), scoring)
    if len(q) != len(t):
        raise ValueError(f"align_score: queries has {len(q)} sequences and targets {len(t)}; pass equal counts "
                         "(ta.search compares every query with every target)")
    out = torch.ops.torchalign.align_score(q.codes, q.offsets, t.codes, t.offsets, table, scoring.gap_open,
                                           scoring.gap_extend, mode, max_length(q), max_length(t), check,
                                           _table_on(scoring, table.device)[1])
    return Scores(*out)


def smith_waterman(queries, targets, scoring: Scoring | None = None, **kw) -> Scores:
    """align_score(..., mode="local")."""
    return align_score(queries, targets, scoring, "local", **kw)


def needleman_wunsch(queries, targets, scoring: Scoring | None = None, **kw) -> Scores:
    """align_score(..., mode="global")."""
    return align_score(queries, targets, scoring, "global", **kw)
