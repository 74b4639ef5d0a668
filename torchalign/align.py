"""Pairwise alignment scores (Smith-Waterman, Needleman-Wunsch, semiglobal): public functions."""

from __future__ import annotations

from typing import NamedTuple

import torch

from . import ops  # noqa: F401  (registers torch.ops.torchalign.*)
from .inputs import batches, check_choice, max_length
from .ops.align import MODES
from .scoring import Scoring


class Scores(NamedTuple):
    """One entry per pair: the best score and the end (exclusive) of an optimal alignment
    in the query and in the target. Ties go to the smallest target end, then the
    smallest query end; a local score of 0 is the empty alignment, ends (0, 0)."""

    score: torch.Tensor  # int32
    query_end: torch.Tensor  # int64
    target_end: torch.Tensor  # int64


def align_score(queries, targets, scoring: Scoring | None = None, mode: str = "local", *,
                check: bool = True) -> Scores:
    """The optimal alignment score of each pair (query b, target b) with affine gaps.

    ``mode``: "local" (Smith-Waterman: the best-scoring pair of substrings, >= 0),
    "global" (Needleman-Wunsch: both sequences whole) or "semiglobal" (the whole query
    aligned somewhere inside the target: target residues before and after it cost
    nothing, as edlib's HW mode). ``scoring``: a ta.Scoring (default BLOSUM62, gaps
    11 / 1); plain strings are encoded with its alphabet, and a symbol it lacks raises.
    Any lengths; every cell stays exact (a pair whose scores could pass 2^29 raises).

    >>> import torchalign as ta
    >>> s = ta.align_score(["HEAGAWGHEE"], ["PAWHEAE"], ta.Scoring(gap_open=10, gap_extend=1))
    >>> s.score.tolist(), s.query_end.tolist(), s.target_end.tolist()
    ([17], [9], [5])
    """
    scoring = scoring if scoring is not None else Scoring()
    if not isinstance(scoring, Scoring):
        raise TypeError(f"scoring: expected a ta.Scoring, got {type(scoring).__name__}")
    check_choice("mode", mode, MODES)
    q, t = batches(("queries", "targets"), (queries, targets), scoring.alphabet, scoring.alphabet.name)
    if len(q) != len(t):
        raise ValueError(f"align_score: queries has {len(q)} sequences and targets {len(t)}; pass equal counts "
                         "(ta.search compares every query with every target)")
    for name, b in (("queries", q), ("targets", t)):
        if b.max_code is not None and b.max_code >= scoring.table.shape[0]:
            symbol = scoring.alphabet.decode(torch.tensor([b.max_code]))
            raise ValueError(f"{name}: symbol {symbol!r} is not in {scoring.name} (it scores "
                             f"{scoring.symbols!r}); remove it or pick another matrix")
    table = scoring.table.to(q.device)
    out = torch.ops.torchalign.align_score(q.codes, q.offsets, t.codes, t.offsets, table, scoring.gap_open,
                                           scoring.gap_extend, mode, max_length(q), max_length(t), check)
    return Scores(*out)


def smith_waterman(queries, targets, scoring: Scoring | None = None, **kw) -> Scores:
    """align_score(..., mode="local")."""
    return align_score(queries, targets, scoring, "local", **kw)


def needleman_wunsch(queries, targets, scoring: Scoring | None = None, **kw) -> Scores:
    """align_score(..., mode="global")."""
    return align_score(queries, targets, scoring, "global", **kw)
