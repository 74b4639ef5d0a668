"""Karlin-Altschul bit scores and E-values (torchalign.karlin) against values worked out by
hand from NCBI BLAST+'s published lambda and K, and the errors for scorings without them."""

import doctest
import math

import pytest
import torch

import torchalign as ta
from torchalign import karlin

M, N = 250, 1_000_000  # query length, database residues


# (scoring, score, bits, E for M x N): bits = (lambda S - ln K) / ln 2, E = K M N exp(-lambda S),
# worked out by hand (ln 0.041 = ln 41 - ln 1000 = -3.194183; (26.7 + 3.194183) / 0.693147 =
# 43.1282; 0.041 x 2.5e8 x exp(-26.7) = 1.025e7 x 2.53711e-12 = 2.6005e-5; the others alike).
# torchalign's gap_open is BLAST's existence + extension: 12 / 1 here is BLAST's 11 / 1.
CASES = [
    # BLAST's BLOSUM62 11 / 1: lambda 0.267, K 0.041 (score 100 is BLAST's familiar 43.1 bits)
    (dict(matrix="BLOSUM62", gap_open=12, gap_extend=1), 100, 43.128190, 2.6005260e-05),
    (dict(matrix="BLOSUM62", gap_open=12, gap_extend=1), 40, 20.016215, 235.75385),
    # torchalign's default 11 / 1 is BLAST's 10 / 1: lambda 0.243, K 0.024
    (dict(), 100, 40.438311, 1.6780131e-04),
    # PAM30, BLAST's 9 / 1: lambda 0.294, K 0.11
    (dict(matrix="pam30", gap_open=10, gap_extend=1), 60, 28.633565, 0.60031339),
    # DNA 1 / -2, BLAST's 2 / 1: lambda 1.29, K 0.49
    (dict(match=1, mismatch=-2, gap_open=3, gap_extend=1), 25, 47.556061, 1.2082006e-06),
    # DNA 2 / -3, BLAST's 5 / 2: lambda 0.625, K 0.41, for even scores: 31 counts as 30
    (dict(match=2, mismatch=-3, gap_open=7, gap_extend=2), 31, 28.336836, 0.73739864),
    (dict(match=2, mismatch=-3, gap_open=7, gap_extend=2), 30, 28.336836, 0.73739864),
    # DNA 4 / -6 is 2 / -3 with gaps x 2 (BLAST's 10 / 4) and lambda / 2 = 0.3125, K 0.41
    (dict(match=4, mismatch=-6, gap_open=14, gap_extend=4), 62, 29.238521, 0.39470105),
]


@pytest.mark.parametrize("kw, score, bits, evalue", CASES)
def test_bits_and_evalue_by_hand(kw, score, bits, evalue):
    stats = karlin.parameters(ta.Scoring(**kw))
    assert stats.bits(score) == pytest.approx(bits, rel=1e-7)
    e = stats.evalue(score, M, N)
    assert e == pytest.approx(evalue, rel=1e-7)
    # E = m n 2^-bits: the two are the same statistic
    assert e == pytest.approx(M * N * 2.0 ** -bits, rel=1e-6)


def test_parameters_picked():
    """lambda and K as BLAST's tables list them, by the equivalent BLAST gap costs."""
    def lk(**kw):
        s = karlin.parameters(ta.Scoring(**kw))
        return s.lam, s.k, s.even

    assert lk(matrix="BLOSUM62", gap_open=12, gap_extend=1) == (0.267, 0.041, False)
    assert lk(matrix="BLOSUM62", gap_open=13, gap_extend=2) == (0.297, 0.082, False)
    assert lk(matrix="BLOSUM45", gap_open=15, gap_extend=3) == (0.199, 0.039, False)  # BLAST's 12 / 3
    assert lk(matrix="PAM250", gap_open=16, gap_extend=2) == (0.182, 0.024, False)  # BLAST's 14 / 2
    assert lk(match=1, mismatch=-3, gap_open=4, gap_extend=2) == (1.37, 0.70, False)
    assert lk(match=3, mismatch=-4, gap_open=8, gap_extend=2) == (0.362, 0.16, True)
    assert lk(match=4, mismatch=-6, gap_open=14, gap_extend=4) == (0.3125, 0.41, True)


def test_matrix_recognised_by_its_scores():
    """BLASTP (BLOSUM62 with more letters) and BLOSUM62 given as a tensor get BLOSUM62's
    parameters; a changed score does not."""
    want = karlin.parameters(ta.Scoring("BLOSUM62", 12, 1))
    assert karlin.parameters(ta.Scoring("BLASTP", 12, 1, alphabet="protein")) == want
    table = ta.Scoring().table.clone()
    assert karlin.parameters(ta.Scoring(table, 12, 1, alphabet="protein")) == want
    table[0, 0] += 1
    with pytest.raises(ValueError, match=r"^matrix: .* fit custom "):
        karlin.parameters(ta.Scoring(table, 12, 1, alphabet="protein"))


@pytest.mark.parametrize("kw, argument, listed", [
    (dict(matrix="BLOSUM62", gap_open=20, gap_extend=1), "gap_open/gap_extend", "12/1"),
    (dict(matrix="BLOSUM62", gap_open=12, gap_extend=0), "gap_open/gap_extend", "12/1"),
    # BLOSUM80: NCBI's is in 1/2 bits, Biopython's in 1/3 bits; NCBI's lambda does not fit it
    (dict(matrix="BLOSUM80"), "matrix", "BLOSUM62"),
    (dict(matrix="MCLACHLAN"), "matrix", "PAM250"),
    (dict(match=2, mismatch=-9), "matrix", "2/-7"),
    (dict(match=1, mismatch=-2, gap_open=9, gap_extend=1), "gap_open/gap_extend", "3/1"),
    # 4 / -6 takes 2 / -3's gap costs x 2: BLAST's 5 / 3 (ours 8 / 3) has no half
    (dict(match=4, mismatch=-6, gap_open=8, gap_extend=3), "gap_open/gap_extend", "14/4"),
    (dict(match=2, mismatch=-3, alphabet="protein"), "matrix", "BLOSUM62"),
])
def test_no_parameters_is_a_clear_error(kw, argument, listed):
    with pytest.raises(ValueError) as e:
        karlin.parameters(ta.Scoring(**kw))
    msg = str(e.value)
    assert msg.startswith(f"{argument}: no published Karlin-Altschul parameters")
    assert listed in msg and "\n" not in msg


def test_error_names_given_options():
    with pytest.raises(ValueError, match=r"^--gap-open/--gap-extend: .* --gap-open/--gap-extend 13/2"):
        karlin.parameters(ta.Scoring("BLOSUM62", 20, 1), matrix="--matrix", gaps="--gap-open/--gap-extend")


def test_large_scores_underflow_to_zero():
    stats = karlin.parameters(ta.Scoring("BLOSUM62", 12, 1))
    assert stats.evalue(100_000, M, N) == 0.0
    assert math.isfinite(stats.bits(100_000))
    assert stats.evalue(0, M, N) == pytest.approx(0.041 * M * N)


def test_docstring_examples():
    result = doctest.testmod(karlin)
    assert result.attempted > 0 and result.failed == 0


def test_tables_are_consistent():
    """Every tabled protein pair is reachable through Scoring (gap_open >= gap_extend) and
    every lambda, K is positive; the even-score pairs are DNA tables."""
    for name, table in karlin.PROTEIN.items():
        for (g, e), (lam, k) in table.items():
            assert lam > 0 and k > 0
            assert karlin.parameters(ta.Scoring(name, g + e, e)) == karlin.KarlinAltschul(lam, k)
    assert karlin.EVEN_SCORES <= set(karlin.DNA)
    assert torch.equal(karlin._standard("BLOSUM62"), ta.Scoring().table[:20, :20])
