"""Karlin-Altschul statistics of local alignment scores: bit scores and E-values from the
gapped lambda and K that NCBI BLAST+ publishes for its scoring systems."""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cache

import torch

from .scoring import Scoring

# Gapped (lambda, K) by BLAST's gap costs (existence G, extension E): BLAST charges a gap of
# L residues G + L * E, torchalign gap_open + (L - 1) * gap_extend, so BLAST's G / E is our
# gap_open = G + E, gap_extend = E (BLAST's default BLOSUM62 11 / 1 is Scoring(gap_open=12)).
# Copied from NCBI BLAST+'s blast_stat.c (ncbi/ncbi-cxx-toolkit-public,
# src/algo/blast/core/blast_stat.c at 3bb5fe34cc, 2026-01-08): the *_values tables (columns
# 4 and 5), without their ungapped first rows. BLOSUM80 is left out: NCBI's BLOSUM80 is in
# 1/2-bit units, Biopython's (the one Scoring loads) in 1/3-bit units, so NCBI's lambda does
# not fit it. For the other seven the 20 x 20 standard-residue scores of Biopython's matrix
# equal NCBI's (src/util/tables/sm_*.c), which is what lambda and K depend on.
PROTEIN = {
    "BLOSUM45": {(13, 3): (0.207, 0.049), (12, 3): (0.199, 0.039), (11, 3): (0.190, 0.031), (10, 3): (0.179, 0.023),
                 (16, 2): (0.210, 0.051), (15, 2): (0.203, 0.041), (14, 2): (0.195, 0.032), (13, 2): (0.185, 0.024),
                 (12, 2): (0.171, 0.016), (19, 1): (0.205, 0.040), (18, 1): (0.198, 0.032), (17, 1): (0.189, 0.024),
                 (16, 1): (0.176, 0.016)},
    "BLOSUM50": {(13, 3): (0.212, 0.063), (12, 3): (0.206, 0.055), (11, 3): (0.197, 0.042), (10, 3): (0.186, 0.031),
                 (9, 3): (0.172, 0.022), (16, 2): (0.215, 0.066), (15, 2): (0.210, 0.058), (14, 2): (0.202, 0.045),
                 (13, 2): (0.193, 0.035), (12, 2): (0.181, 0.025), (19, 1): (0.212, 0.057), (18, 1): (0.207, 0.050),
                 (17, 1): (0.198, 0.037), (16, 1): (0.186, 0.025), (15, 1): (0.171, 0.015)},
    "BLOSUM62": {(11, 2): (0.297, 0.082), (10, 2): (0.291, 0.075), (9, 2): (0.279, 0.058), (8, 2): (0.264, 0.045),
                 (7, 2): (0.239, 0.027), (6, 2): (0.201, 0.012), (13, 1): (0.292, 0.071), (12, 1): (0.283, 0.059),
                 (11, 1): (0.267, 0.041), (10, 1): (0.243, 0.024), (9, 1): (0.206, 0.010)},
    "BLOSUM90": {(9, 2): (0.310, 0.12), (8, 2): (0.300, 0.099), (7, 2): (0.283, 0.072), (6, 2): (0.259, 0.048),
                 (11, 1): (0.302, 0.093), (10, 1): (0.290, 0.075), (9, 1): (0.265, 0.044)},
    "PAM30": {(7, 2): (0.305, 0.15), (6, 2): (0.287, 0.11), (5, 2): (0.264, 0.079), (10, 1): (0.309, 0.15),
              (9, 1): (0.294, 0.11), (8, 1): (0.270, 0.072), (15, 3): (0.339, 0.28), (14, 2): (0.337, 0.27),
              (14, 1): (0.333, 0.27), (13, 3): (0.338, 0.27)},
    "PAM70": {(8, 2): (0.301, 0.12), (7, 2): (0.286, 0.093), (6, 2): (0.264, 0.064), (11, 1): (0.305, 0.12),
              (10, 1): (0.291, 0.091), (9, 1): (0.270, 0.060), (11, 2): (0.323, 0.186), (12, 3): (0.330, 0.219)},
    "PAM250": {(15, 3): (0.205, 0.049), (14, 3): (0.200, 0.043), (13, 3): (0.194, 0.036), (12, 3): (0.186, 0.029),
               (11, 3): (0.174, 0.020), (17, 2): (0.204, 0.047), (16, 2): (0.198, 0.038), (15, 2): (0.191, 0.031),
               (14, 2): (0.182, 0.024), (13, 2): (0.171, 0.017), (21, 1): (0.205, 0.045), (20, 1): (0.199, 0.037),
               (19, 1): (0.192, 0.029), (18, 1): (0.183, 0.021), (17, 1): (0.171, 0.014)},
}
# DNA by (match, mismatch): the blastn_values_* tables of the same file, without the
# (0, 0) rows (megablast's non-affine greedy gaps). BLAST reduces match / mismatch by their
# gcd first (4 / -6 is 2 / -3 with lambda / 2 and gap costs x 2), and computes E-values of
# the 2 / -7, 2 / -5, 2 / -3 and 3 / -4 tables from scores rounded down to even
# (s_GetNuclValuesArray's round_down; blast_hits.c, Blast_HSPListAdjustOddBlastnScores).
DNA = {
    (1, -5): {(3, 3): (1.39, 0.747)},
    (1, -4): {(1, 2): (1.36, 0.67), (0, 2): (1.26, 0.43), (2, 1): (1.35, 0.61), (1, 1): (1.22, 0.35)},
    (2, -7): {(2, 4): (0.68, 0.67), (0, 4): (0.63, 0.43), (4, 2): (0.675, 0.62), (2, 2): (0.61, 0.35)},
    (1, -3): {(2, 2): (1.37, 0.70), (1, 2): (1.35, 0.64), (0, 2): (1.25, 0.42), (2, 1): (1.34, 0.60),
              (1, 1): (1.21, 0.34)},
    (2, -5): {(2, 4): (0.67, 0.59), (0, 4): (0.62, 0.39), (4, 2): (0.67, 0.61), (2, 2): (0.56, 0.32)},
    (1, -2): {(2, 2): (1.33, 0.62), (1, 2): (1.30, 0.52), (0, 2): (1.19, 0.34), (3, 1): (1.32, 0.57),
              (2, 1): (1.29, 0.49), (1, 1): (1.14, 0.26)},
    (2, -3): {(4, 4): (0.63, 0.42), (2, 4): (0.615, 0.37), (0, 4): (0.55, 0.21), (3, 3): (0.615, 0.37),
              (6, 2): (0.63, 0.42), (5, 2): (0.625, 0.41), (4, 2): (0.61, 0.35), (2, 2): (0.515, 0.14)},
    (3, -4): {(6, 3): (0.389, 0.25), (5, 3): (0.375, 0.21), (4, 3): (0.351, 0.14), (6, 2): (0.362, 0.16),
              (5, 2): (0.330, 0.092), (4, 2): (0.281, 0.046)},
    (4, -5): {(6, 5): (0.28, 0.21), (5, 5): (0.27, 0.17), (4, 5): (0.25, 0.10), (3, 5): (0.23, 0.065)},
    (1, -1): {(3, 2): (1.09, 0.31), (2, 2): (1.07, 0.27), (1, 2): (1.02, 0.21), (0, 2): (0.80, 0.064),
              (4, 1): (1.08, 0.28), (3, 1): (1.06, 0.25), (2, 1): (0.99, 0.17)},
    (3, -2): {(5, 5): (0.208, 0.030)},
    (5, -4): {(10, 6): (0.163, 0.068), (8, 6): (0.146, 0.039)},
}
EVEN_SCORES = {(2, -7), (2, -5), (2, -3), (3, -4)}


@dataclass(frozen=True)
class KarlinAltschul:
    """The gapped ``lam`` (lambda) and ``k`` (K) of a scoring system. ``even``: the
    parameters hold for even scores only, and an odd score counts as the even one below
    (as BLAST does for those DNA tables).

    >>> import torchalign as ta
    >>> s = parameters(ta.Scoring("BLOSUM62", gap_open=12, gap_extend=1))   # BLAST's 11 / 1
    >>> s.lam, s.k, round(s.bits(100), 2)
    (0.267, 0.041, 43.13)
    """

    lam: float
    k: float
    even: bool = False

    def _score(self, score: int) -> int:
        return score - score % 2 if self.even else score

    def bits(self, score: int) -> float:
        """The bit score (lambda S - ln K) / ln 2."""
        return (self.lam * self._score(score) - math.log(self.k)) / math.log(2)

    def evalue(self, score: int, query_length: int, database_length: int) -> float:
        """K m n exp(-lambda S): the alignments of score S or more expected by chance when a
        query of m residues is searched against a database of n residues in all (the search
        space is m n; BLAST's length adjustment, which shrinks both, is not applied)."""
        return self.k * query_length * database_length * math.exp(-self.lam * self._score(score))


def parameters(scoring: Scoring, matrix: str = "matrix", gaps: str = "gap_open/gap_extend") -> KarlinAltschul:
    """The published gapped parameters of ``scoring``: a protein matrix whose 20 standard
    residues score as one of NCBI BLAST+'s (BLOSUM45/50/62/90, PAM30/70/250), or DNA whose
    A, C, G, T score as match / mismatch, with gap costs BLAST tabulates for it. Else
    ValueError naming the argument (``matrix`` or ``gaps``: the names to print) and listing
    the choices."""
    found = _system(scoring)
    if found is None:
        names = ", ".join(PROTEIN) + ", DNA match/mismatch " + ", ".join(f"{m}/{x}" for m, x in DNA)
        raise ValueError(f"{matrix}: no published Karlin-Altschul parameters (lambda, K) fit {scoring.name}; "
                         f"NCBI BLAST+ has them for {names} (or multiples of those match/mismatch pairs)")
    label, table, scale, even = found
    g, e = scoring.gap_open - scoring.gap_extend, scoring.gap_extend  # BLAST's existence, extension
    if g % scale or e % scale or (g // scale, e // scale) not in table:
        ours = ", ".join(f"{(a + b) * scale}/{b * scale}" for a, b in table)
        raise ValueError(f"{gaps}: no published Karlin-Altschul parameters (lambda, K) fit {label} with gaps "
                         f"{scoring.gap_open}/{scoring.gap_extend}; NCBI BLAST+ has them for {label} with {gaps} "
                         f"{ours} (a gap of L residues costs gap_open + (L - 1) * gap_extend)")
    lam, k = table[g // scale, e // scale]
    return KarlinAltschul(lam / scale, k, even)


def _system(scoring: Scoring):
    """(label, {(G, E): (lambda, K)}, gcd scale, even) of the scoring's table, or None."""
    t, name = scoring.table, scoring.alphabet.name
    if name == "protein" and t.shape[0] >= 20:
        found = next((n for n in PROTEIN if torch.equal(t[:20, :20], _standard(n))), None)
        return None if found is None else (found, PROTEIN[found], 1, False)
    if name in ("dna", "rna") and t.shape[0] >= 4:
        block = t[:4, :4]
        m, x = int(block[0, 0]), int(block[0, 1])
        if m > 0 > x and torch.equal(block, torch.full((4, 4), x, dtype=t.dtype).fill_diagonal_(m)):
            scale = math.gcd(m, x)
            key = (m // scale, x // scale)
            if key in DNA:
                return f"match/mismatch {m}/{x}", DNA[key], scale, key in EVEN_SCORES
    return None


@cache
def _standard(name: str) -> torch.Tensor:
    """Biopython's ``name`` over the 20 standard residues, in the protein alphabet's order."""
    return Scoring(name).table[:20, :20]
