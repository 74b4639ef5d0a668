"""Tracebacks on the CPU: the reference walk, Biopython, parasail, real proteins, errors."""

import pytest
import torch
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

import torchalign as ta

from . import traceback_cases as cases
from . import reference as ref
from .conftest import read_fasta, set_defaults, texts


def test_alignments_match_reference_and_biopython(rng):
    cases.check_reference("cpu", rng)


def test_dna_match_mismatch(rng):
    cases.check_dna("cpu", rng)


def test_edges():
    cases.check_edges("cpu")


def test_long_pair_past_int16(rng):
    cases.check_long("cpu", rng, n=3100)


def test_long_pair_worked_out_by_hand(rng):
    """check_long's expected alignment (worked out by hand) is the reference traceback's."""
    for n in (30, 41):
        q, t, want = cases.long_pair(rng, n)
        assert ref.traceback(q, t, ta.Scoring().score, 11, 1, "local") == want


def test_real_proteins_against_parasail(rng):
    pytest.importorskip("parasail")
    proteome = [s for _, s in read_fasta("proteome_HG003687.fa")]
    queries = [s for _, s in read_fasta("swissprot_queries20.fa")]
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


# lengths across the align kernel's 48-row tiles and the CPU code's 64-row groups
SEQS = texts("ACDEWX*", (48, 64), 14)


@settings(deadline=None, max_examples=30)
@given(st.lists(st.tuples(SEQS, SEQS), min_size=1, max_size=3), st.sampled_from(cases.GAPS),
       st.sampled_from(cases.MODES))
def test_properties(pairs, gaps, mode):
    """Every path's score and ends are the plain Python DP's and its CIGAR re-scores to that
    score; local paths start and end on a positive-scoring column (the shortest of equal
    alignments)."""
    sc = ta.Scoring(gap_open=gaps[0], gap_extend=gaps[1])
    qs, ts = (list(x) for x in zip(*pairs))
    for a, q, t in zip(ta.traceback(qs, ts, sc, mode), qs, ts):
        cases.check_alignment(a, q, t, sc, mode)
        if mode == "local" and a.columns:
            ops = cases.expand(a.cigar)
            assert ops[0] in "=X" and ops[-1] in "=X"
            assert sc.score(a.query_aligned[0], a.target_aligned[0]) > 0
            assert sc.score(a.query_aligned[-1], a.target_aligned[-1]) > 0


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
    gap = ta.Alignment(-12, 0, 0, 3, 5, "2D", "--", "AC", "  ")  # a block with no query residue
    assert gap.render().split("\n") == ["query  0 -- 0", " " * 11, "target 4 AC 5"]


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
        ta.traceback(["MKU"], ["MK"], ta.Scoring(strict_symbols=True))
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
        ta.traceback(bad, ["A"], ta.Scoring(strict_symbols=True))  # (strict: no U, O rows)


# --- interpreter tier: TRITON_INTERPRET=1 pytest -m interpret tests/test_traceback.py ---


@pytest.fixture
def scores_on_cpu(monkeypatch):
    """The op's score pass (the align kernel, proven in test_interpret.py and about 2 ms
    per cell of its 48-row tiles under the interpreter) on the CPU code, so the time goes
    to the traceback kernels; test_kernels_whole_op keeps the whole path."""
    from torchalign.cpu import align as cpu_align
    from torchalign.ops import traceback as op

    def cpu_pairs(q_codes, q_offsets, t_codes, t_offsets, pair_q, pair_t, table, gap_open, gap_extend, mode, track):
        q_lens, t_lens = q_offsets[1:] - q_offsets[:-1], t_offsets[1:] - t_offsets[:-1]
        return cpu_align.align_score(q_codes, q_offsets[:-1][pair_q], q_lens[pair_q], t_codes, t_offsets[:-1][pair_t],
                                     t_lens[pair_t], table, gap_open, gap_extend, mode)

    monkeypatch.setattr(op, "_pairs", cpu_pairs)

@pytest.mark.interpret
@pytest.mark.usefixtures("kernels_on_cpu", "scores_on_cpu")
@pytest.mark.parametrize("mode", cases.MODES)
def test_kernels_match_reference(rng, mode):
    """The DP and walk kernels: the reference walk, Biopython; diagonals in one chunk of
    128 lanes (chunks of 4: test_kernels_diagonal_chunks)."""
    cases.check_reference("cpu", rng, n=4, lengths=(0, 1, 2, 9, 17), modes=(mode,), gaps=((11, 1), (5, 5), (3, 0)))


@pytest.mark.interpret
@pytest.mark.usefixtures("kernels_on_cpu", "scores_on_cpu")
@settings(deadline=None, max_examples=10, phases=(Phase.explicit, Phase.reuse, Phase.generate),
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(texts("ACDEW", (4, 8), 10), texts("ACDEW", (4, 8), 10)), min_size=1, max_size=3),
       st.sampled_from(cases.GAPS), st.sampled_from(cases.MODES))
def test_kernels_diagonal_chunks(monkeypatch, pairs, gaps, mode):
    """Diagonals in chunks of 4 lanes, lengths across one and two chunks: every alignment is
    the reference traceback (score, ends, path) and re-scores to its score."""
    from torchalign_kernels import traceback as K

    monkeypatch.setattr(K, "BLOCK", 4)
    sc = ta.Scoring(gap_open=gaps[0], gap_extend=gaps[1])
    qs, ts = (list(x) for x in zip(*pairs))
    for a, q, t in zip(ta.traceback(qs, ts, sc, mode), qs, ts):
        want = ref.traceback(q, t, sc.score, *gaps, mode)
        assert cases.as_tuple(a) == want and cases.rescore(a, q, t, sc, mode) == want[0]


@pytest.mark.interpret
@pytest.mark.usefixtures("kernels_on_cpu", "scores_on_cpu")
def test_kernels_dna(rng):
    cases.check_reference("cpu", rng, n=4, lengths=(0, 1, 9, 17), gaps=((5, 2), (3, 3)),
                          scoring_kw=dict(match=2, mismatch=-3), letters="ACGTN")


@pytest.mark.interpret
@pytest.mark.usefixtures("kernels_on_cpu")
def test_kernels_whole_op(monkeypatch):
    """The whole op through the kernels (score kernel included, 8-row tiles): edges, X and *."""
    from torchalign_kernels import align

    set_defaults(monkeypatch, align.align_pairs, rows=8)
    cases.check_edges("cpu")


@pytest.mark.interpret
@pytest.mark.usefixtures("kernels_on_cpu", "scores_on_cpu")
def test_kernels_equal_cpu_implementation(monkeypatch, rng):
    """Kernels and CPU implementation give identical alignments: random pairs in every
    mode, real protein pieces, and scores past 32,767 (match scores of 1,000)."""
    from . import align_cases as al

    proteome = [s for _, s in read_fasta("proteome_HG003687.fa")]
    queries = [s for _, s in read_fasta("swissprot_queries20.fa")]
    sets = [(al.pairs(rng, 8, (0, 1, 5, 30, 45)), ta.Scoring(), "local"),
            (al.pairs(rng, 8, (0, 1, 5, 30, 45)), ta.Scoring(gap_open=5, gap_extend=2), "global"),
            (al.pairs(rng, 8, (0, 1, 5, 30, 45)), ta.Scoring(gap_open=4, gap_extend=4), "semiglobal"),
            (tuple(zip(*cases.real_pairs(rng, queries, proteome, n=2, q_len=60, t_len=90))), ta.Scoring(), "local")]
    dna = ta.Scoring(match=1000, mismatch=-1000, gap_open=1500, gap_extend=100)  # past 32,767 in 33 matches
    q = al.rand_protein(rng, 40, "ACGT")
    t = al.rand_protein(rng, 5, "ACGT") + q[:20] + "A" + q[20:38] + al.rand_protein(rng, 5, "ACGT")
    sets.append((([q, q[:20]], [t, t[:30]]), dna, "local"))
    got = [cases.run(list(qs), list(ts), sc, mode, "cpu") for (qs, ts), sc, mode in sets]
    assert got[-1][0].score > 32767
    monkeypatch.delenv("TORCHALIGN_CPU_BACKEND")
    for alns, ((qs, ts), sc, mode) in zip(got, sets):
        assert alns == cases.run(list(qs), list(ts), sc, mode, "cpu"), mode


# --- GPU tier: pytest -m gpu tests/test_traceback.py ---


# Variants: Triton compiles a kernel once per MODE and per class of each int argument (1,
# a multiple of 16, other): gap_open / gap_extend (11, 1) and (3, 0) and pair counts that
# are neither 1 nor multiples of 16 are test_gpu.py's classes, so the alignment kernels
# compiled there serve here and only the traceback kernels compile (2 x 3 + 3 variants).
GPU_GAPS = ((11, 1), (3, 0))


@pytest.mark.gpu
def test_gpu_matches_reference_and_cpu(rng):
    """The traceback kernels on CUDA: the reference traceback (score, ends, path) and
    Biopython, DNA, edges, top hits; launches of 304 pairs, four of 2,000 x 3,100 residues,
    against the CPU implementation (an independent implementation of the same rule),
    every alignment re-scored."""
    from . import align_cases as al

    cases.check_reference("cuda", rng, n=15, lengths=(0, 1, 2, 15, 47, 130), gaps=GPU_GAPS)
    cases.check_dna("cuda", rng, n=20, gaps=GPU_GAPS[1:])
    cases.check_edges("cuda")
    cases.check_top_hits("cuda", rng)
    for mode in cases.MODES:
        qs, ts = al.pairs(rng, 300, (1, 50, 200, 400))
        qs += [al.rand_protein(rng, 2000) for _ in range(4)]
        ts += [al.related(rng, q) + al.rand_protein(rng, 1100) for q in qs[-4:]]
        got = cases.run(qs, ts, ta.Scoring(), mode, "cuda")
        cases.same_as_cpu(got, qs, ts, ta.Scoring(), mode)
        assert all(cases.rescore(a, q, t, ta.Scoring(), mode) == a.score for a, q, t in zip(got, qs, ts))


@pytest.mark.gpu
def test_gpu_real_proteins_and_long_scores(rng):
    """Real proteins (the Swiss-Prot queries against the proteome) against parasail; a
    6,000-residue pair scoring 65,901 (worked out by hand: long_pair)."""
    pytest.importorskip("parasail")
    proteome = [s for _, s in read_fasta("proteome_HG003687.fa")]
    queries = [s for _, s in read_fasta("swissprot_queries20.fa")]
    pairs = [(q, rng.choice(proteome)) for q in queries] + [(p[20:300], p) for p in rng.sample(proteome, 20)]
    cases.check_parasail("cuda", pairs)
    a = cases.check_long("cuda", rng, n=6000)
    assert a.score > 60000
