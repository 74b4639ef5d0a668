"""The k-difference primer problem: public function (validation, then torch.ops.torchalign.*)."""

from __future__ import annotations

import torch

from . import ops  # noqa: F401  (registers torch.ops.torchalign.*)
from .inputs import at_most_longest, batches, check_int, code_bound, n_symbols


def kdiff_primers(alpha, beta, k: int, *, alphabet=None, check: bool = True) -> torch.Tensor:
    """For every start r of alpha, the length L of the shortest substring alpha[r:r+L]
    with at least ``k`` differences (edits: insertions, deletions, substitutions) from
    every substring of beta, or 0 where none exists: int32[len(alpha)]. These are the
    regions where a primer can bind alpha but not beta (k-difference primer problem).

    Plain strings are read as DNA (case-insensitive; N and the IUPAC codes are symbols
    of their own that match only themselves), unless ``alphabet`` says otherwise. Beta may
    hold several records (a genome's chromosomes): substrings never cross between them.
    Alpha may hold several sequences too: the result is then in alpha's flat layout,
    start r of sequence s at ``alpha.offsets[s] + r``.

    Defined results: ``k`` must be >= 1 (every string is within 0 of something). A start
    with fewer than ``k`` symbols left gets 0 (a string of length L is within L of the
    empty substring). An empty alpha gives an empty result; an empty beta (or empty
    records) leaves only the empty substring, so every start with >= k symbols left gets
    exactly k. Once a start gets 0, so does every later start of that sequence.
    Alphabets that differ raise ValueError.

    Memory beside the output (CUDA): ~30 B per residue of alpha (positions, bounds, the
    starts left), its match bits (codes / 8 B per residue; ~40 B per residue while
    built) and the band's column state, at most 256 MiB per launch.

    >>> import torchalign as ta
    >>> ta.kdiff_primers("ACTG", "AGCAAG", k=2).tolist()
    [3, 3, 0, 0]
    >>> ta.kdiff_primers("ACGTACGT", "", k=3).tolist()
    [3, 3, 3, 3, 3, 3, 0, 0]
    """
    k = check_int("k", k, 1)
    a, b = batches(("alpha", "beta"), (alpha, beta), alphabet, "dna")
    k = at_most_longest(k, a, extra=1)  # k past every start's remaining length: all 0, either way
    if len(b) == 0:
        raise ValueError("beta: holds no records; pass at least one sequence (an empty one is allowed)")
    unknown = a.max_code is None or b.max_code is None
    bound = -1 if unknown else max(code_bound(a), code_bound(b))
    return torch.ops.torchalign.kdiff_primers(a.codes, a.offsets, b.codes, b.offsets, k, n_symbols(a), bound, 0,
                                              check)
