"""Alignment scores on the CPU: the reference, Biopython, parasail, real proteins, errors."""

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import torchalign as ta

from . import align_cases as cases
from . import reference as ref
from .conftest import read_fasta, texts


def test_scores_and_ends_match_reference_and_biopython(rng):
    cases.check_reference("cpu", rng)


def test_dna_match_mismatch(rng):
    cases.check_dna("cpu", rng)


def test_edges():
    cases.check_edges("cpu")


def test_scores_past_int16(rng):
    pytest.importorskip("parasail")
    cases.check_long_scores("cpu", rng)
    q = "W" * 3000
    s = ta.align_score([q], [q], ta.Scoring(), "global")
    assert s.score.item() == 11 * 3000 > 32767


def test_real_proteins_against_parasail(rng):
    pytest.importorskip("parasail")
    proteome = [s for _, s in read_fasta("proteome_HG003687.fa")]
    queries = [s for _, s in read_fasta("swissprot_queries20.fa")]
    pairs = [(rng.choice(queries)[:300], rng.choice(proteome)[:400]) for _ in range(6)]
    pairs += [(p[10:200], p) for p in rng.sample(proteome, 4)]  # a protein and a piece of itself
    cases.check_parasail("cpu", rng, pairs)


def test_named_matrices_and_gaps(rng):
    for name, gaps in (("BLOSUM45", (15, 2)), ("PAM30", (9, 1)), ("BLOSUM80", (10, 1))):
        sc = ta.Scoring(name, *gaps)
        qs, ts = cases.pairs(rng, 6, (1, 9, 25))
        got = cases.got_tuples(ta.align_score(qs, ts, sc, "local"))
        assert got == [ref.align_score(q, t, sc.score, *gaps, "local") for q, t in zip(qs, ts)]
    dna = ta.Scoring("NUC.4.4", 10, 1)
    assert dna.alphabet.name == "dna" and dna.score("A", "A") == 5 and dna.score("A", "N") == -2


# lengths across the align kernel's 48-row tiles and the CPU code's 64-row groups
SEQS = texts(cases.AA, (48, 64), 25)


@settings(deadline=None, max_examples=40)
@given(SEQS, SEQS, st.sampled_from(cases.GAPS))
def test_properties(q, t, gaps):
    sc = ta.Scoring(gap_open=gaps[0], gap_extend=gaps[1])
    s = {mode: ta.align_score([q, t], [t, q], sc, mode).score.tolist() for mode in cases.MODES}
    assert s["local"][0] >= 0 and s["local"][0] == s["local"][1]  # symmetric matrix: symmetric scores
    assert s["global"][0] == s["global"][1]
    assert s["global"][0] <= s["semiglobal"][0] <= s["local"][0]
    assert s["local"][0] == ref.align_score(q, t, sc.score, *gaps, "local")[0]


def test_scoring_object():
    sc = ta.Scoring()
    assert (sc.name, sc.gap_open, sc.gap_extend, sc.alphabet.name) == ("BLOSUM62", 11, 1, "protein")
    assert sc.score("W", "W") == 11 and sc.score("A", "R") == -1 and sc.gap_cost(1) == 11 and sc.gap_cost(4) == 14
    assert sc.symbols == "ARNDCQEGHILKMFPSTWYVBZX*UO"  # U and O scored as C and X (tests/test_messy_input.py)
    custom = ta.Scoring(torch.tensor([[1, -1], [-1, 1]]), 2, 1, alphabet="dna")
    assert ta.align_score("AAC", "AC", custom, "global").score.item() == 0
    assert "BLOSUM62" in repr(sc)


def test_errors():
    with pytest.raises(ValueError, match="symbol 'U' is not in BLOSUM62"):
        ta.align_score(["MKU"], ["MK"], ta.Scoring(strict_symbols=True))
    with pytest.raises(ValueError, match="gap_extend: 3 is more than gap_open 2"):
        ta.Scoring(gap_open=2, gap_extend=3)
    with pytest.raises(ValueError, match="gap_open: must be >= 0"):
        ta.Scoring(gap_open=-1)
    with pytest.raises(ValueError, match="unknown name 'BLOSUM63'"):
        ta.Scoring("BLOSUM63")
    with pytest.raises(ValueError, match="give both"):
        ta.Scoring(match=1)
    with pytest.raises(ValueError, match="not both"):
        ta.Scoring("BLOSUM62", match=1, mismatch=-1)
    with pytest.raises(ValueError, match="needs alphabet="):
        ta.Scoring(torch.eye(4, dtype=torch.int32))
    with pytest.raises(ValueError, match="must be integers"):
        ta.Scoring(torch.full((4, 4), 0.5), alphabet="dna")
    with pytest.raises(ValueError, match="mode: expected one of"):
        ta.align_score(["A"], ["A"], mode="glocal")
    with pytest.raises(TypeError, match="scoring: expected a ta.Scoring"):
        ta.align_score(["A"], ["A"], "BLOSUM62")
    with pytest.raises(ValueError, match="queries has 2 sequences and targets 1"):
        ta.align_score(["A", "C"], ["A"])
    with pytest.raises(ValueError, match="queries: alphabet: the batch is encoded as 'dna', not 'protein'"):
        ta.align_score(ta.encode(["ACGT"], "dna"), ["ACGT"])
    big = ta.Scoring(match=1 << 26, mismatch=0)
    with pytest.raises(ValueError, match="could pass"):
        ta.align_score(["ACGT"], ["ACGT"], big)
    # hand-built codes out of the matrix's range: the op's value check
    bad = ta.SequenceBatch(torch.tensor([24], dtype=torch.uint8), torch.tensor([0, 1]), ta.PROTEIN)
    with pytest.raises(ValueError, match=r"queries: codes must lie in \[0, 24\)"):
        ta.align_score(bad, ["A"], ta.Scoring(strict_symbols=True))  # (strict: no U, O rows)


def test_wrappers():
    sw = ta.smith_waterman(["HEAGAWGHEE"], ["PAWHEAE"])
    nw = ta.needleman_wunsch(["HEAGAWGHEE"], ["PAWHEAE"])
    assert sw.score.item() == ref.align_score("HEAGAWGHEE", "PAWHEAE", ta.Scoring().score, 11, 1, "local")[0]
    assert nw.score.item() == ref.align_score("HEAGAWGHEE", "PAWHEAE", ta.Scoring().score, 11, 1, "global")[0]


def test_search_top_k(rng):
    cases.check_search("cpu", rng)
    cases.check_search_wrap("cpu", rng)


def test_search_real_proteins_against_parasail():
    pytest.importorskip("parasail")
    proteome = [s for _, s in read_fasta("proteome_HG003687.fa")][:60]
    cases.check_search_parasail("cpu", [proteome[3][:120], proteome[10][50:200]], proteome)


def test_search_errors():
    with pytest.raises(ValueError, match="top_k: must be >= 1"):
        ta.search(["MKV"], ["MKV"], top_k=0)
    with pytest.raises(ValueError, match="database: symbol 'U' is not in BLOSUM62"):
        ta.search(["MKV"], ["MKUV"], ta.Scoring(strict_symbols=True))
    empty = ta.search(["MKV", "W"], [], top_k=3)
    assert empty.scores.shape == (2, 0) and empty.indices.dtype == torch.int64
