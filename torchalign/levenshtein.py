"""The Levenshtein family: public functions (validation, then torch.ops.torchalign.*)."""

from __future__ import annotations

import torch

from . import ops  # noqa: F401  (registers torch.ops.torchalign.*)
from .inputs import at_most_longest, batches, check_choice, check_int, code_bound, max_length, n_symbols
from .ops.levenshtein import ALGORITHMS


def levenshtein(a, b, *, max_distance: int | None = None, alphabet=None, algorithm: str = "auto",
                check: bool = True) -> torch.Tensor:
    """Edit distance (unit-cost insertions, deletions, substitutions) of each pair: int32[B].

    ``a`` and ``b`` hold B sequences each, of any lengths; plain strings are compared as
    UTF-8 bytes unless ``alphabet`` says otherwise: ``alphabet="unicode"`` compares
    characters (CER), int32 token ids (``alphabet="tokens"``) give word-level distances (WER). With ``max_distance``, pairs further apart report
    ``max_distance + 1``. ``algorithm`` picks the GPU kernel: "myers" (bit-vector, 64 DP
    cells per word, any lengths, alphabets <= 256 codes), "dp" (row-parallel DP, any
    lengths and token ids) or "auto" (myers where it applies);
    every choice gives the same integers, and the CPU always runs its DP.

    Memory beside the output (CUDA): one copy of both batches' codes (1 B per residue,
    4 for token ids), ~60 B per pair, the match masks (8 x codes bytes per 64 residues
    of each pair's shorter sequence, in groups of <= 256 MiB) and ~50 B per mask row
    while they are built (steps of 2 M rows); on Ukkonen's band (sequences of more than
    65,536 codes, or long ones with a small ``max_distance``) 24 B per 64 residues of
    each pair's shorter sequence; the DP keeps one int32 per residue of the longest
    sequence for each of its 1,024 programs. With ``check=False`` and encode's hints
    nothing is read back from the device (CUDA graphs).

    >>> import torchalign as ta
    >>> ta.levenshtein(["kitten", "flaw", ""], ["sitting", "lawn", "abc"]).tolist()
    [3, 2, 3]
    >>> ta.levenshtein(["kitten"], ["sitting"], max_distance=2).tolist()
    [3]
    >>> ta.levenshtein(["naïve café"], ["naive cafe"], alphabet="unicode").tolist()
    [2]
    """
    a, b = batches(("a", "b"), (a, b), alphabet, "bytes")
    if len(a) != len(b):
        raise ValueError(f"levenshtein: a has {len(a)} sequences and b has {len(b)}; pass equal counts "
                         "(or use levenshtein_cdist for all pairs)")
    return torch.ops.torchalign.levenshtein(a.codes, a.offsets, b.codes, b.offsets, n_symbols(a),
                                            _max_distance(max_distance, a, b), *_hints(a, b), check_choice("algorithm", algorithm, ALGORITHMS),
                                            check)


def levenshtein_cdist(a, b, *, max_distance: int | None = None, alphabet=None, algorithm: str = "auto",
                      check: bool = True) -> torch.Tensor:
    """All-vs-all edit distances: int32[len(a), len(b)], sequences of any lengths.

    Memory beside the output (CUDA): as levenshtein's, with the masks of one side's
    sequences only and, on Ukkonen's band, 24 B per 64 residues of that side's
    sequence per pair, in groups of <= 256 MiB. ``algorithm`` as in ``levenshtein``.

    >>> import torchalign as ta
    >>> ta.levenshtein_cdist(["ACGT", "AGT"], ["ACGT", "", "TTT"], alphabet="dna").tolist()
    [[0, 4, 3], [1, 3, 2]]
    """
    a, b = batches(("a", "b"), (a, b), alphabet, "bytes")
    return torch.ops.torchalign.levenshtein_cdist(a.codes, a.offsets, b.codes, b.offsets, n_symbols(a),
                                                  _max_distance(max_distance, a, b), *_hints(a, b),
                                                  check_choice("algorithm", algorithm, ALGORITHMS), check)


def _max_distance(max_distance, a, b) -> int:
    if max_distance is None:
        return -1
    d = check_int("max_distance", max_distance, 0)
    # no distance passes the longer sequence's length: a larger cap changes nothing
    return max(at_most_longest(d, a), at_most_longest(d, b))


def _hints(a, b) -> tuple[int, int, int]:
    """(a's longest, b's longest, code bound) as encode recorded them; -1 where unknown."""
    unknown = a.max_code is None or b.max_code is None
    return max_length(a), max_length(b), -1 if unknown else max(code_bound(a), code_bound(b))
