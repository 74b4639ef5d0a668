"""Approximate matching with k differences (edit distance): public functions."""

from __future__ import annotations

import torch

from . import ops  # noqa: F401  (registers torch.ops.torchalign.*)
from .hamming import DEFAULT_MAX_HITS
from .hits import EditHits
from .inputs import (INT64_MAX, at_most_longest, batches, check_choice, check_int, code_bound, max_length,
                     n_symbols, nucleotide)
from .ops.asm import ALGORITHMS


def asm_search(texts, patterns, k: int, *, alphabet=None, both_strands: bool = False,
               max_hits: int = DEFAULT_MAX_HITS, algorithm: str = "auto", check: bool = True) -> EditHits:
    """Every end position in every text where a pattern matches a substring with at most
    ``k`` edits (insertions, deletions, substitutions), as EditHits.

    Each hit is an end (exclusive, 0 .. len(text)), its distance (the least over all
    substrings ending there) and the earliest start of an alignment with that distance.
    Patterns may differ in length and be longer than 64 (any length); texts may be
    genomes (they are split into overlapping chunks on the GPU). ``both_strands=True``
    (DNA/RNA) also searches each pattern's reverse complement (strand 1, forward
    coordinates). Sorted by (pattern, text, end, strand); more than ``max_hits`` hits raise
    ValueError (nothing is dropped). With k >= len(pattern) every end is a hit, the
    empty match at end 0 included. ``algorithm`` picks the GPU kernel: "myers"
    (bit-vectors, 64 pattern rows per word), "dp" (the row-parallel DP) or "auto" (myers);
    every choice gives the same integers, and the CPU always runs its DP.

    Memory beside the hits (CUDA): the texts' overlapping chunks (~40 B per chunk of
    >= 64 residues: under 1 B per residue), the match masks (8 x codes bytes per 64
    residues of each pattern, in groups of <= 256 MiB; ~50 B per mask row while built),
    on Ukkonen's band (patterns of more than 65,536 codes, or long ones with a small
    ``k``) ~0.4 B per text residue and pattern (m / 170,000 B for a pattern of m >
    65,536 codes), 24 B per hit slot (65,536 first, then one per hit) and ~80 B per hit
    while starts are found and hits sorted.

    >>> import torchalign as ta
    >>> h = ta.asm_search("TTGATTACAGG", "GATACA", k=1, alphabet="dna")
    >>> h.start.tolist(), h.end.tolist(), h.distance.tolist()
    ([2], [9], [1])
    """
    k = check_int("k", k, 0)
    max_hits = min(check_int("max_hits", max_hits, 0), INT64_MAX)  # (a hit count is a tensor size)
    t, p = batches(("texts", "patterns"), (texts, patterns), alphabet, "dna" if both_strands else "bytes")
    k = at_most_longest(k, p)  # k >= a pattern's length: every end, either way
    complement = None
    if both_strands:
        nucleotide("both_strands", t.alphabet)
        complement = t.alphabet.complement_codes(t.device)
    out = torch.ops.torchalign.asm_search(t.codes, t.offsets, p.codes, p.offsets, k, complement, max_hits,
                                          n_symbols(t), *_hints(t, p), check_choice("algorithm", algorithm, ALGORITHMS), check)
    return EditHits(*out)


def asm_best(texts, patterns, *, alphabet=None, algorithm: str = "auto",
             check: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
    """The least edit distance of each pattern to any substring of each text, and the
    first end (exclusive) where it is reached: (int32[n_patterns, n_texts],
    int64[n_patterns, n_texts]). An empty text gives (len(pattern), 0). ``algorithm`` as
    in asm_search. Memory beside the output (CUDA): asm_search's chunks and masks, and
    ~30 B per chunk and pattern (each chunk's best). With ``check=False`` and encode's
    hints nothing is read back from the device (CUDA graphs), except with
    ``algorithm="dp"`` (one read: the longest chunk) or alphabets of more than 256 codes
    (the patterns' codes are renumbered first: one read).

    >>> import torchalign as ta
    >>> d, end = ta.asm_best(["TTGATTACAGG", "CCCC"], ["GATACA"], alphabet="dna")
    >>> d.tolist(), end.tolist()
    ([[1, 5]], [[9, 1]])
    """
    t, p = batches(("texts", "patterns"), (texts, patterns), alphabet, "bytes")
    return torch.ops.torchalign.asm_best(t.codes, t.offsets, p.codes, p.offsets, n_symbols(t), *_hints(t, p),
                                         check_choice("algorithm", algorithm, ALGORITHMS), check)


def asm_profile(texts, patterns, *, alphabet=None, algorithm: str = "auto", check: bool = True) -> torch.Tensor:
    """The least edit distance of each pattern to a substring ending at every position:
    int32[n_patterns, total text length]; column ``texts.offsets[t] + i`` is the end
    i + 1 of text t (the texts' flat layout). A fixed-shape result, for torch.compile
    and CUDA graphs: ``profile <= k`` is asm_search's mask (less the empty match at end 0).
    Memory beside the output (CUDA): asm_search's chunks and masks. ``check=False`` with
    encode's hints reads nothing back, with asm_best's two exceptions.

    >>> import torchalign as ta
    >>> ta.asm_profile("ACGTT", "CGT", alphabet="dna").tolist()
    [[3, 2, 1, 0, 1]]
    """
    t, p = batches(("texts", "patterns"), (texts, patterns), alphabet, "bytes")
    return torch.ops.torchalign.asm_profile(t.codes, t.offsets, p.codes, p.offsets, n_symbols(t), *_hints(t, p),
                                            check_choice("algorithm", algorithm, ALGORITHMS), check)


def _hints(texts, patterns) -> tuple[int, int]:
    """(code bound, longest pattern) as encode recorded them; -1 where unknown."""
    unknown = texts.max_code is None or patterns.max_code is None
    return -1 if unknown else max(code_bound(texts), code_bound(patterns)), max_length(patterns)
