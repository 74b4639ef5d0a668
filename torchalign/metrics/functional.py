"""Error rates and edit distances of strings as plain functions (torch only).

Each takes ``preds`` and ``target`` (a str or a list of str, one prediction per
reference) and computes on ``device`` (default: the CPU) with one ``ta.levenshtein`` call
for the whole batch (``edit_distance`` with a substitution cost other than 1: one global
``ta.align_score``). The definitions are torchmetrics' (``torchmetrics.functional.text``);
see ``torchalign.metrics`` for where torchmetrics' edit distance and jiwer differ.
"""

from __future__ import annotations

import torch

from ..inputs import check_choice, check_int
from ..levenshtein import levenshtein
from .text import encode_pairs, pairs

REDUCTIONS = ("mean", "sum", "none", None)
MAX_WEIGHTED_SYMBOLS = 8192  # substitution_cost != 1 scores through a V x V table (256 MiB here)
MAX_COST = (1 << 29) - 1  # a scoring matrix's entries stay below 2^29


def counts(preds, target, unit: str, denominator: str, device=None) -> tuple[torch.Tensor, torch.Tensor]:
    """(errors, total) as int64 scalars on ``device``: the edit distances summed over the
    pairs, and the target's length ("target") or the longer side's ("longer") summed, in
    ``unit`` "chars" or "words". What the metrics' states add up."""
    a, b = encode_pairs(*pairs(preds, target), unit, device)
    errors = levenshtein(a, b).sum()
    total = (b.lengths if denominator == "target" else torch.maximum(a.lengths, b.lengths)).sum()
    return errors, total


def ratio(errors: torch.Tensor, total: torch.Tensor, dtype=torch.float32) -> torch.Tensor:
    """errors / total, rounded once to ``dtype`` (nan for 0 / 0, inf for x / 0)."""
    return (errors.double() / total.double()).to(dtype)


def char_error_rate(preds, target, *, device=None) -> torch.Tensor:
    """Character error rate: the edit distances between the characters of each prediction
    and its reference, summed, over the characters of all references (float32 scalar).
    Characters are those of the Python str (code points), whitespace included.

    >>> from torchalign.metrics import char_error_rate
    >>> preds = ["this is the prediction", "there is an other sample"]
    >>> target = ["this is the reference", "there is another one"]
    >>> char_error_rate(preds, target)
    tensor(0.3415)
    """
    return ratio(*counts(preds, target, "chars", "target", device))


def word_error_rate(preds, target, *, device=None) -> torch.Tensor:
    """Word error rate: the edit distances between the words of each prediction and its
    reference (words as ``str.split()`` gives them), summed, over the words of all
    references (float32 scalar).

    >>> from torchalign.metrics import word_error_rate
    >>> word_error_rate(["this is the prediction", "there is an other sample"],
    ...                 ["this is the reference", "there is another one"])
    tensor(0.5000)
    """
    return ratio(*counts(preds, target, "words", "target", device))


def match_error_rate(preds, target, *, device=None) -> torch.Tensor:
    """Match error rate: word edit distances summed, over the sum of max(words of the
    prediction, words of the reference) of each pair (float32 scalar).

    >>> from torchalign.metrics import match_error_rate
    >>> match_error_rate(["this is the prediction", "there is an other sample"],
    ...                  ["this is the reference", "there is another one"])
    tensor(0.4444)
    """
    return ratio(*counts(preds, target, "words", "longer", device))


def distances(preds, target, substitution_cost: int = 1, device=None) -> torch.Tensor:
    """int32[B]: the character edit distance of each pair, insertions and deletions costing
    1 and substitutions ``substitution_cost`` (>= 0), on ``device``."""
    cost = check_int("substitution_cost", substitution_cost, 0, MAX_COST)
    a, b = encode_pairs(*pairs(preds, target), "chars", device)
    if cost == 1:
        return levenshtein(a, b)
    return _weighted(a, b, cost)


def _weighted(a, b, cost: int) -> torch.Tensor:
    """Global alignment scores with 0 for a match, -cost for a substitution and -1 per gap
    position (ta.align_score), over the batch's distinct characters numbered 0..V-1."""
    from ..align import align_score  # (alignment is needed only here)
    from ..batch import SequenceBatch
    from ..scoring import Scoring

    symbols, dense = torch.unique(torch.cat([a.codes, b.codes]).to(torch.int32), return_inverse=True)
    n_symbols = max(symbols.numel(), 1)
    if n_symbols > MAX_WEIGHTED_SYMBOLS:
        raise ValueError(f"substitution_cost={cost}: this batch holds {n_symbols} distinct characters and "
                         f"substitution costs other than 1 take at most {MAX_WEIGHTED_SYMBOLS} (a table of every "
                         "pair); pass fewer strings per call")
    table = torch.full((n_symbols, n_symbols), -cost, dtype=torch.int32)
    table.fill_diagonal_(0)
    dense = dense.to(torch.int32)
    cut = a.codes.numel()
    qa = SequenceBatch(dense[:cut], a.offsets, "tokens")
    qb = SequenceBatch(dense[cut:], b.offsets, "tokens")
    return -align_score(qa, qb, Scoring(table, gap_open=1, gap_extend=1, alphabet="tokens"), mode="global").score


def edit_distance(preds, target, substitution_cost: int = 1, reduction: str | None = "mean", *,
                  device=None) -> torch.Tensor:
    """Character edit distance of each pair (insertions and deletions cost 1, substitutions
    ``substitution_cost``), reduced: "mean" (float32), "sum" (int64), "none" or None (int32
    per pair); no pairs give ``tensor(0, dtype=torch.int32)``, as in torchmetrics.

    >>> from torchalign.metrics import edit_distance
    >>> edit_distance(["rain"], ["shine"]), edit_distance(["rain"], ["shine"], substitution_cost=2)
    (tensor(3.), tensor(5.))
    >>> edit_distance(["rain", "lnaguaeg"], ["shine", "language"], reduction=None)
    tensor([3, 4], dtype=torch.int32)
    """
    check_choice("reduction", reduction, REDUCTIONS)
    return reduce(distances(preds, target, substitution_cost, device), reduction)


def reduce(d: torch.Tensor, reduction: str | None) -> torch.Tensor:
    """torchmetrics' reduction of per-pair distances ``d``."""
    if d.numel() == 0:
        return torch.tensor(0, dtype=torch.int32, device=d.device)
    if reduction == "mean":
        return d.sum() / d.numel()
    if reduction == "sum":
        return d.sum()
    return d
