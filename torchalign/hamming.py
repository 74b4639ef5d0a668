"""The Hamming family: public functions (validation, then torch.ops.torchalign.*)."""

from __future__ import annotations

import torch

from . import ops  # noqa: F401  (registers torch.ops.torchalign.*)
from .hits import Hits
from .inputs import INT64_MAX, at_most_longest, batches, check_int, code_bound, max_length, n_symbols, nucleotide

DEFAULT_MAX_HITS = 1 << 24


def hamming(a, b, *, alphabet=None, check: bool = True) -> torch.Tensor:
    """Hamming distance of each pair (a[i], b[i]): int32[B].

    ``a`` and ``b`` hold B sequences each (str, bytes, lists of them, SequenceBatch,
    (padded codes, lengths), ...); plain strings are compared as bytes unless
    ``alphabet`` says otherwise. Pair lengths must be equal: ValueError names the
    first pair that is not. ``check=False`` skips the value checks (no host sync);
    a pair of unequal length then counts its overhang as mismatches. Memory: none
    beside the output.

    >>> import torchalign as ta
    >>> ta.hamming(["GATTACA", "ACGT"], ["GACTATA", "ACGT"]).tolist()
    [2, 0]
    """
    a, b = batches(("a", "b"), (a, b), alphabet, "bytes")
    if len(a) != len(b):
        raise ValueError(f"hamming: a has {len(a)} sequences and b has {len(b)}; pass equal counts "
                         "(or use hamming_cdist for all pairs)")
    return torch.ops.torchalign.hamming(a.codes, a.offsets, b.codes, b.offsets, n_symbols(a), check)


def hamming_cdist(a, b, *, alphabet=None, check: bool = True) -> torch.Tensor:
    """All-vs-all Hamming distances: int32[len(a), len(b)].

    Every sequence of ``a`` and ``b`` must have one common length. On CUDA, small
    alphabets (DNA, protein) run as one-hot int8 matrix products on tensor cores.
    Memory beside the output (CUDA): those one-hot rows, S bytes per residue of a and
    of b (S: the codes rounded up to a power of two, <= 32), and ~4 + S more per
    residue while they are built; larger alphabets compare codes and need none.

    >>> import torchalign as ta
    >>> ta.hamming_cdist(["AAAA", "ACGT"], ["ACGA", "TTTT", "AAAA"], alphabet="dna").tolist()
    [[2, 4, 0], [1, 3, 3]]
    """
    a, b = batches(("a", "b"), (a, b), alphabet, "bytes")
    bound = min(code_bound(a), code_bound(b))  # only codes present in both can match
    return torch.ops.torchalign.hamming_cdist(a.codes, a.offsets, b.codes, b.offsets, n_symbols(a), bound,
                                              check)


def hamming_profile(texts, patterns, *, alphabet=None, iupac: bool = False, check: bool = True) -> torch.Tensor:
    """Distance of every pattern at every window start: int32[n_patterns, total text length].

    Column ``texts.offsets[t] + i`` is the window starting at position i of text t (the
    flat layout of the texts' SequenceBatch); -1 where the pattern does not fit before
    the text's end. A fixed-shape result, for ``torch.compile`` and CUDA graphs:
    ``(profile >= 0) & (profile <= k)`` is the k-mismatch mask. ``iupac=True`` (DNA/RNA)
    lets a pattern's ambiguity codes match every text code whose bases they cover.
    Memory beside the output (CUDA): ~0.3 B per text residue (the tiles of window
    starts) and the patterns' one-hot rows (S bytes per pattern position, S as in
    hamming_cdist; ~30 B per position while built). ``check=False`` with encode's hints
    reads nothing back from the device (CUDA graphs).

    >>> import torchalign as ta
    >>> ta.hamming_profile("ACGTACGT", "CGT", alphabet="dna").tolist()
    [[3, 0, 3, 3, 3, 0, -1, -1]]
    """
    t, p = batches(("texts", "patterns"), (texts, patterns), alphabet, "dna" if iupac else "bytes")
    table = _iupac_table(t, iupac)
    return torch.ops.torchalign.hamming_profile(t.codes, t.offsets, p.codes, p.offsets, table,
                                                n_symbols(t), _pattern_bound(t, p, iupac, False), max_length(p), check)


def kmismatch_search(texts, patterns, k: int, *, alphabet=None, both_strands: bool = False,
                     iupac: bool = False, max_hits: int = DEFAULT_MAX_HITS, check: bool = True) -> Hits:
    """Every window of every text within Hamming distance ``k`` of a pattern, as Hits.

    Patterns may differ in length. ``both_strands=True`` (DNA/RNA) also searches the
    reverse complement of each pattern and reports ``strand`` 1; positions are always
    forward-strand window starts. ``iupac=True`` lets ambiguity codes in a pattern match
    their sets (N matches anything, so a guide plus its NGG PAM is one pattern). Hits are
    sorted by (pattern, text, position, strand). More than ``max_hits`` hits raise
    ValueError (nothing is dropped). A pattern longer than a text has no hits there.
    Memory as hamming_profile's without its output, plus ~16 B per hit slot (65,536
    first, then one per hit) and ~60 B per hit while they are sorted.

    >>> import torchalign as ta
    >>> h = ta.kmismatch_search("ACGTTACGAACGT", "ACGT", k=1, alphabet="dna")
    >>> h.position.tolist(), h.distance.tolist()
    ([0, 5, 9], [0, 1, 0])
    """
    k = check_int("k", k, 0)
    max_hits = min(check_int("max_hits", max_hits, 0), INT64_MAX)  # (a hit count is a tensor size)
    t, p = batches(("texts", "patterns"), (texts, patterns), alphabet,
                   "dna" if (iupac or both_strands) else "bytes")
    k = at_most_longest(k, p)  # k >= a pattern's length: every window, either way
    complement = None
    if both_strands:
        nucleotide("both_strands", t.alphabet)
        complement = t.alphabet.complement_codes(t.device)
    table = _iupac_table(t, iupac)
    bound = _pattern_bound(t, p, iupac, both_strands)
    out = torch.ops.torchalign.kmismatch_search(t.codes, t.offsets, p.codes, p.offsets, k, table, complement,
                                                max_hits, n_symbols(t), bound, max_length(p),
                                                check)
    return Hits(*out)


def _pattern_bound(texts, patterns, iupac: bool, both_strands: bool) -> int:
    """A bound on the text codes any searched pattern (and, with ``both_strands``, its
    reverse complement) can match. On the host, from the alphabet's tables as lists: no
    tensor work for a compiled graph to run (or for inductor to compile for the CPU)."""
    bound = code_bound(patterns)
    if not (iupac or both_strands):
        return bound
    codes = list(range(bound))
    if both_strands:
        complement = texts.alphabet.complement_list()
        codes += [complement[c] for c in codes]
    if iupac:
        rows = texts.alphabet.iupac_match_rows()
        allowed = [t for t in range(len(rows)) if any(rows[c][t] for c in codes)]
        return max(allowed) + 1 if allowed else 1
    return max(codes) + 1 if codes else 1


def _iupac_table(batch, iupac: bool):
    if not iupac:
        return None
    nucleotide("iupac", batch.alphabet)
    return batch.alphabet.iupac_match_table(batch.device)
