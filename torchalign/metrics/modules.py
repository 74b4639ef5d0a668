"""The error-rate metrics as ``torchmetrics.Metric`` classes (needs torchmetrics).

Each subclasses torchmetrics' own class (``torchmetrics.text.CharErrorRate``, ...) and
replaces only ``update``: the states, their DDP reduction (sums; EditDistance with
``reduction="none"`` concatenates), ``compute``, ``forward`` and ``plot`` are
torchmetrics'. ``update`` computes on the metric's device (``metric.to("cuda")``) with
one ``ta.levenshtein`` call per batch and adds exact int64 counts to the states.
"""

from __future__ import annotations

try:
    from torchmetrics import text as _tm
except ImportError as e:  # pragma: no cover  (the metrics extra is missing)
    raise ImportError("torchalign.metrics' Metric classes need torchmetrics: pip install 'torchalign[metrics]' "
                      "(or pip install torchmetrics); the functions (char_error_rate, ...) need only torch") from e

from .functional import counts, distances


class _Rate:
    """update() of the rate metrics: their states ``errors`` and ``total`` from counts of
    ``_units`` ("chars" or "words") over ``_over`` (the target's length or the longer one)."""

    _units, _over = "chars", "target"

    def update(self, preds, target) -> None:
        errors, total = counts(preds, target, self._units, self._over, self.device)
        self.errors += errors
        self.total += total


class CharErrorRate(_Rate, _tm.CharErrorRate):
    """Character error rate (torchmetrics' definition and states), computed by torchalign.

    >>> from torchalign.metrics import CharErrorRate
    >>> cer = CharErrorRate()                    # cer.to("cuda") computes on the GPU
    >>> cer.update(["this is the prediction"], ["this is the reference"])
    >>> cer.update("there is an other sample", "there is another one")
    >>> cer.compute()
    tensor(0.3415)
    """

    _units, _over = "chars", "target"


class WordErrorRate(_Rate, _tm.WordErrorRate):
    """Word error rate (torchmetrics' definition and states), computed by torchalign.

    >>> from torchalign.metrics import WordErrorRate
    >>> WordErrorRate()(["this is the prediction", "there is an other sample"],
    ...                 ["this is the reference", "there is another one"])
    tensor(0.5000)
    """

    _units, _over = "words", "target"


class MatchErrorRate(_Rate, _tm.MatchErrorRate):
    """Match error rate (torchmetrics' definition and states), computed by torchalign.

    >>> from torchalign.metrics import MatchErrorRate
    >>> MatchErrorRate()(["this is the prediction", "there is an other sample"],
    ...                  ["this is the reference", "there is another one"])
    tensor(0.4444)
    """

    _units, _over = "words", "longer"


class EditDistance(_tm.EditDistance):
    """Character edit distance (torchmetrics' options ``substitution_cost`` and
    ``reduction``, and its states), exact (see ``torchalign.metrics``), computed by torchalign.

    >>> from torchalign.metrics import EditDistance
    >>> EditDistance(reduction="none")(["rain", "lnaguaeg"], ["shine", "language"])
    tensor([3, 4], dtype=torch.int32)
    """

    def update(self, preds, target) -> None:
        distance = distances(preds, target, self.substitution_cost, self.device)
        if self.reduction == "none" or self.reduction is None:
            self.edit_scores_list.append(distance)
        else:
            self.edit_scores += distance.sum()
            self.num_elements += distance.shape[0]
