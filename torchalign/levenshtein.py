"""The Levenshtein family: public functions (validation, then torch.ops.torchalign.*)."""

from __future__ import annotations

import torch

from . import ops  # noqa: F401  (registers torch.ops.torchalign.*)
from .hamming import _n_symbols
from .inputs import batches, check_int


def levenshtein(a, b, *, max_distance: int | None = None, alphabet=None, check: bool = True) -> torch.Tensor:
    """Edit distance (unit-cost insertions, deletions, substitutions) of each pair: int32[B].

    ``a`` and ``b`` hold B sequences each, of any lengths; plain strings are compared as
    UTF-8 bytes unless ``alphabet`` says otherwise; int32 token ids (``alphabet="tokens"``)
    give word-level distances (WER). With ``max_distance``, pairs further apart report
    ``max_distance + 1``.

    >>> import torchalign as ta
    >>> ta.levenshtein(["kitten", "flaw", ""], ["sitting", "lawn", "abc"]).tolist()
    [3, 2, 3]
    >>> ta.levenshtein(["kitten"], ["sitting"], max_distance=2).tolist()
    [3]
    """
    a, b = batches(("a", "b"), (a, b), alphabet, "bytes")
    if len(a) != len(b):
        raise ValueError(f"levenshtein: a has {len(a)} sequences and b has {len(b)}; pass equal counts "
                         "(or use levenshtein_cdist for all pairs)")
    return torch.ops.torchalign.levenshtein(a.codes, a.offsets, b.codes, b.offsets, _n_symbols(a),
                                            _max_distance(max_distance), _longest(a, b), check)


def levenshtein_cdist(a, b, *, max_distance: int | None = None, alphabet=None, check: bool = True) -> torch.Tensor:
    """All-vs-all edit distances: int32[len(a), len(b)], sequences of any lengths.

    Works pair after pair in a fixed set of GPU programs, so it needs no memory beyond
    the output and a scratch row per program.

    >>> import torchalign as ta
    >>> ta.levenshtein_cdist(["ACGT", "AGT"], ["ACGT", "", "TTT"], alphabet="dna").tolist()
    [[0, 4, 3], [1, 3, 2]]
    """
    a, b = batches(("a", "b"), (a, b), alphabet, "bytes")
    return torch.ops.torchalign.levenshtein_cdist(a.codes, a.offsets, b.codes, b.offsets, _n_symbols(a),
                                                  _max_distance(max_distance), _longest(a, b), check)


def _max_distance(max_distance) -> int:
    return -1 if max_distance is None else check_int("max_distance", max_distance, 0)


def _longest(a, b) -> int:
    """min(longest of a, longest of b) when encode recorded both, else -1 (read from data)."""
    if a.max_length is None or b.max_length is None:
        return -1
    return min(a.max_length, b.max_length)
