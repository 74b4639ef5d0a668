"""Hits: the data-dependent result of the search ops."""

from typing import NamedTuple

import torch


class Hits(NamedTuple):
    """Equal-length tensors, one entry per hit, sorted by (pattern, text, position, strand).

    ``position`` is the window start in forward-strand coordinates of its text (a
    reverse-strand hit covers the same window); ``strand`` is 0 forward, 1 reverse
    complement.
    """

    pattern: torch.Tensor  # int64
    text: torch.Tensor  # int64
    position: torch.Tensor  # int64
    distance: torch.Tensor  # int32
    strand: torch.Tensor  # int8


class EditHits(NamedTuple):
    """Equal-length tensors, one entry per end position, sorted by (pattern, text, end, strand).

    ``[start, end)`` is the matched substring in forward-strand coordinates of its text
    (end exclusive); ``start`` is the earliest start of an alignment with ``distance``
    edits ending at ``end``. ``strand`` is 0 forward, 1 reverse complement.
    """

    pattern: torch.Tensor  # int64
    text: torch.Tensor  # int64
    start: torch.Tensor  # int64
    end: torch.Tensor  # int64
    distance: torch.Tensor  # int32
    strand: torch.Tensor  # int8
