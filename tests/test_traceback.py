"""Tracebacks on the CPU: the reference walk, Biopython, parasail, real proteins, errors."""

import pytest
import torch

import torchalign as ta

from . import traceback_cases as cases
from .conftest import read_fasta


def test_alignments_match_reference_and_biopython(rng):
    cases.check_reference("cpu", rng)


def test_dna_match_mismatch(rng):
    cases.check_dna("cpu", rng)


def test_edges():
    cases.check_edges("cpu")


def test_long_pair_past_int16(rng):
    cases.check_long("cpu", rng, n=3100)


def test_real_proteins_against_parasail(rng):
    pytest.importorskip("parasail")
    proteome = [s for _, s in read_fasta("proteome_HG003687.faa")]
    queries = [s for _, s in read_fasta("swissprot_queries20.fasta")]
    cases.check_parasail("cpu", cases.real_pairs(rng, queries, proteome))


def test_top_hits_pairs(rng):
    cases.check_top_hits("cpu", rng)


def test_many_pairs_in_groups(monkeypatch, rng):
    """Pairs split into several groups (a small group budget) give the same alignments."""
    from torchalign.cpu import traceback as cpu

    from . import align_cases as al

    qs, ts = al.pairs(rng, 30, (0, 1, 5, 30))
    want = ta.traceback(qs, ts, mode="global")
    monkeypatch.setattr(cpu, "GROUP_CELLS", 200)
    assert ta.traceback(qs, ts, mode="global") == want


def test_render():
    a = ta.traceback(["MKVLAAGIWHEAGAWGHEE"], ["PAWHEAEMKVLAGIW"], mode="global")[0]
    text = a.render(width=8, names=("q", "t"))
    lines = text.split("\n")
    assert a.columns == 25 and len(lines) == 4 * 3 + 3  # four blocks of three lines, blank lines between
    assert lines[0].startswith("q  1 ") and lines[2].startswith("t  1 ")
    assert "".join(ln.split()[2] for ln in lines[0::4]) == a.query_aligned
    assert lines[-3].endswith(" 19") and lines[-1].endswith(" 15")
    assert str(a) == a.render()
    assert "empty alignment" in ta.traceback(["W"], ["C"])[0].render()


def test_dna_and_bytes_rendering():
    sc = ta.Scoring(match=2, mismatch=-3, gap_open=5, gap_extend=2)
    a = ta.traceback("ACGTTGCA", "ACGTAGCA", sc, "global")[0]
    assert (a.cigar, a.query_aligned, a.markup) == ("4=1X3=", "ACGTTGCA", "|||| |||")
    assert a.identity == 7 / 8


def test_errors():
    with pytest.raises(ValueError, match="mode: expected one of"):
        ta.traceback(["A"], ["A"], mode="glocal")
    with pytest.raises(ValueError, match="queries has 2 sequences and targets 1"):
        ta.traceback(["A", "C"], ["A"])
    with pytest.raises(ValueError, match="symbol 'U' is not in BLOSUM62"):
        ta.traceback(["MKU"], ["MK"])
    with pytest.raises(ValueError, match=r"traceback: the pairs need 92 DP cells \(1 byte each\), more than "
                                         r"max_cells=50; pass fewer pairs"):
        ta.traceback(["MKVLAWG", "W"], ["MKVLAWGHEE", "W"], mode="global", max_cells=50)
    with pytest.raises(ValueError, match="traceback: sequences of 4 and 4 residues"):
        ta.traceback(["ACGT"], ["ACGT"], ta.Scoring(match=1 << 26, mismatch=0))
    with pytest.raises(ValueError, match=r"pairs: target indices must lie in \[0, 2\), found 0..2"):
        ta.traceback(["MKV"], ["MKV", "W"], pairs=([0, 0], [0, 2]))
    with pytest.raises(ValueError, match="pairs: 2 query indices but 1 target indices"):
        ta.traceback(["MKV"], ["MKV", "W"], pairs=([0, 0], [1]))
    with pytest.raises(TypeError, match="pairs: expected"):
        ta.traceback(["MKV"], ["MKV"], pairs=[0])
    with pytest.raises(TypeError, match="max_cells: expected an int"):
        ta.traceback(["MKV"], ["MKV"], max_cells=1.5)
    bad = ta.SequenceBatch(torch.tensor([24], dtype=torch.uint8), torch.tensor([0, 1]), ta.PROTEIN)
    with pytest.raises(ValueError, match=r"queries: codes must lie in \[0, 24\)"):
        ta.traceback(bad, ["A"])
