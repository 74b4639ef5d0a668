"""The Triton kernels on the CPU under TRITON_INTERPRET=1 (run as its own pytest process):
the public ops routed through the kernels give the reference's integers."""

import random

import pytest
import torch
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

import torchalign as ta

from . import hamming_cases as cases
from . import reference as ref
from .conftest import lengths, set_defaults, texts

pytestmark = [pytest.mark.interpret, pytest.mark.usefixtures("kernels_on_cpu")]
# hypothesis: lengths across the kernels' boundaries, few examples (the interpreter is slow),
# no shrinking (a failing example is reported as drawn, not after minutes of interpreted reruns)
SETTINGS = dict(deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture],
                phases=(Phase.explicit, Phase.reuse, Phase.generate))


@pytest.mark.parametrize("alphabet", ["dna", "bytes"])
def test_pairs(rng, alphabet):
    cases.check_pairs("cpu", rng, n=20, alphabet=alphabet)


@pytest.mark.parametrize("alphabet", ["dna", "dna+n", "protein", "bytes"])
def test_cdist(rng, alphabet):
    cases.check_cdist("cpu", rng, na=19, nb=35, length=41, alphabet=alphabet)


def test_cdist_tokens(rng):
    cases.check_tokens_cdist("cpu", rng)


@pytest.mark.parametrize("iupac", [False, True])
def test_profile(rng, iupac):
    cases.check_profile("cpu", rng, iupac=iupac, text_len=70, max_pat=40)  # 40 > one K-tile


@pytest.mark.parametrize("both_strands,iupac,k", [(False, False, 0), (True, False, 2), (True, True, 1)])
def test_kmismatch(rng, both_strands, iupac, k):
    cases.check_kmismatch("cpu", rng, k=k, both_strands=both_strands, iupac=iupac, text_len=90)


def test_kmismatch_bytes_compare_path(rng):
    texts = [cases.rand_seq(rng, 60, "ab\xe9z") for _ in range(3)]  # \xe9: a byte >= 128
    patterns = [texts[0][5:9], "zz"]
    as_bytes = [s.encode("latin-1") for s in texts + patterns]  # one byte per symbol
    hits = ta.kmismatch_search(as_bytes[:3], as_bytes[3:], 1, alphabet="bytes")
    got = list(zip(*(x.tolist() for x in (hits.pattern, hits.text, hits.position, hits.distance, hits.strand))))
    assert got == ref.kmismatch(texts, patterns, 1)


def test_check_false_with_and_without_encode_hints(rng):
    texts, patterns = cases.texts_and_patterns(rng, text_len=60)
    t, p = ta.encode(texts, "dna"), ta.encode(patterns, "dna")
    bare = ta.SequenceBatch(p.codes, p.offsets, "dna")  # hand-built: no max_code / max_length
    want = ref.profile(texts, patterns)
    assert ta.hamming_profile(t, p, check=False).tolist() == want
    assert ta.hamming_profile(t, bare, check=False).tolist() == want


def test_hit_capacity_overflow_relaunches(monkeypatch):
    from torchalign.ops import hamming as ops

    monkeypatch.setattr(ops, "FIRST_CAPACITY", 4)
    hits = ta.kmismatch_search("A" * 50, "AAAA", 0, alphabet="dna")
    assert hits.position.tolist() == list(range(47))


def test_contig_matches_cpu_implementation_and_reference(monkeypatch):
    got, texts, patterns = cases.check_contig("cpu")  # the whole 391 kb contig
    short = cases.check_contig("cpu", span=6000)
    assert short[0] == ref.kmismatch(short[1], short[2], 3, both_strands=True)
    monkeypatch.delenv("TORCHALIGN_CPU_BACKEND")
    again, _, _ = cases.check_contig("cpu")
    assert got == again


def test_launch_helpers_directly():
    from torchalign_kernels import hamming as K

    a = torch.randint(0, 4, (20, 33), dtype=torch.uint8)
    b = torch.randint(0, 4, (17, 33), dtype=torch.uint8)
    want = (a[:, None] != b[None]).sum(-1).int()
    for n_symbols in (4, 200):  # tensor-core path and compare path
        assert torch.equal(K.hamming_cdist(a, b, n_symbols, block_m=16, block_n=16), want)


@settings(max_examples=10, **SETTINGS)
@given(st.lists(texts("ACGTN", (128,), 20), min_size=1, max_size=2),
       st.lists(texts("ACGTN", (8, 16), 8, low=1), min_size=1, max_size=3), st.integers(0, 3), st.booleans())
def test_hamming_tiles(texts_, patterns, k, iupac):
    """Profiles and k-mismatch hits against the reference: texts across a tile of 128
    windows, patterns across the one-hot K-tiles of 8 DNA positions; the pairs' matrix."""
    prof = ta.hamming_profile(texts_, patterns, alphabet="dna", iupac=iupac)
    assert prof.tolist() == ref.profile(texts_, patterns, iupac=iupac)
    hits = ta.kmismatch_search(texts_, patterns, k, alphabet="dna", iupac=iupac)
    got = list(zip(*(x.tolist() for x in (hits.pattern, hits.text, hits.position, hits.distance, hits.strand))))
    assert got == ref.kmismatch(texts_, patterns, k, iupac=iupac)
    same = [t[: len(texts_[0])] for t in texts_ if len(t) >= len(texts_[0])]
    assert ta.hamming_cdist(same, same, alphabet="dna").tolist() == [[ref.hamming(x, y) for y in same] for x in same]


# ---- Levenshtein -----------------------------------------------------------------------
@pytest.mark.parametrize("algorithm", ["myers", "dp"])
def test_levenshtein_pairs(rng, algorithm):
    from . import levenshtein_cases as lev

    lev.check_pairs("cpu", rng, lengths=(0, 1, 5, 63, 64, 65, 128), n=10, algorithm=algorithm)
    lev.check_unicode_bytes("cpu", algorithm=algorithm)


@pytest.mark.parametrize("algorithm", ["auto", "myers", "dp"])
def test_levenshtein_of_only_empty_sequences(algorithm):
    """No codes at all (the largest code -1) once divided the masks' budget by zero."""
    assert ta.levenshtein(["", ""], ["", ""], algorithm=algorithm).tolist() == [0, 0]
    assert ta.levenshtein_cdist(["", ""], ["", "", ""], algorithm=algorithm).tolist() == [[0, 0, 0]] * 2


def test_levenshtein_dp_rows_wider_than_a_chunk(rng):
    from . import levenshtein_cases as lev

    lev.check_pairs("cpu", rng, lengths=(129, 140), n=2, algorithm="dp")


@pytest.mark.parametrize("algorithm", ["myers", "dp"])
def test_levenshtein_cdist_tokens_boundaries(rng, algorithm):
    from . import levenshtein_cases as lev

    lev.check_cdist("cpu", rng, lengths=(0, 1, 7, 33), na=5, nb=4, algorithm=algorithm)
    lev.check_tokens("cpu", rng, n=5, max_len=20, algorithm="dp" if algorithm == "dp" else "auto")
    lev.check_unicode_chars("cpu", rng, n=4, algorithm="dp" if algorithm == "dp" else "auto")
    # (max_distance at and below each distance: test_levenshtein_words)


def test_levenshtein_myers_multiword(rng):
    """Patterns of 3 and 4 words (column state in memory), both sides longer in turn."""
    a = [cases.rand_seq(rng, rng.choice([150, 200])) for _ in range(3)]
    b = [cases.rand_seq(rng, rng.randint(0, 260)) for _ in range(4)]
    b[0] = a[0][5:] + "ACG"
    got = ta.levenshtein_cdist(a, b, alphabet="dna", algorithm="myers")
    assert got.tolist() == [[ref.levenshtein(x, y) for y in b] for x in a]
    got = ta.levenshtein(a[:3], b[:3], alphabet="dna", algorithm="myers")
    assert got.tolist() == [ref.levenshtein(x, y) for x, y in zip(a, b)]


def test_levenshtein_launchers_small_chunks():
    from torchalign_kernels import levenshtein as K

    rng = random.Random(random.randrange(2**32))
    seqs = [[rng.randrange(3) for _ in range(rng.randint(0, 40))] for _ in range(7)]
    codes = torch.tensor(sum(seqs, []), dtype=torch.int32)
    lens = torch.tensor([len(s) for s in seqs])
    starts = torch.cumsum(lens, 0) - lens
    want = [ref.levenshtein(x, y) for x in seqs for y in seqs]
    got = K.levenshtein_pairs(codes, starts, lens, starts, lens, 40, cdist=True, block=16, programs=3)
    assert got.tolist() == want


def test_myers_launcher_small_groups(monkeypatch):
    from torchalign_kernels import myers as M

    rng = random.Random(random.randrange(2**32))
    seqs = [[rng.randrange(3) for _ in range(rng.randint(0, 40))] for _ in range(7)]
    codes = torch.tensor(sum(seqs, []), dtype=torch.int32)
    lens = torch.tensor([len(s) for s in seqs])
    starts = torch.cumsum(lens, 0) - lens
    monkeypatch.setattr(M, "STATE_BYTES", 2 * 7 * 16)  # cdist: two patterns per group
    got = M.distances(codes, starts, lens, starts, lens, 3, 40, cdist=True, block=16)
    assert got.tolist() == [ref.levenshtein(x, y) for x in seqs for y in seqs]
    got = M.distances(codes, starts, lens, starts.flip(0), lens.flip(0), 3, 40, block=16)
    assert got.tolist() == [ref.levenshtein(x, y) for x, y in zip(seqs, seqs[::-1])]


WORDS = (64, 128)  # Myers' 64-code words: 1 and 2 in registers, 3 or more on the wavefront or the band


@settings(max_examples=8, **SETTINGS)
@given(st.lists(st.tuples(texts("ACGT", WORDS, 20), texts("ACGT", WORDS, 20)), min_size=1, max_size=2),
       st.sampled_from(("none", "d", "d - 1", "drawn")), lengths((0, 64), 70), st.sampled_from(("myers", "band", "dp")))
def test_levenshtein_words(monkeypatch, pairs, bound, drawn, algorithm):
    """Distances of pairs and of their matrix against rapidfuzz: lengths across 1, 2 and 3
    words (and the DP kernel's 128-column rows); no bound, or a bound at the first pair's
    distance d, at d - 1, or drawn: Ukkonen's cut-off, or ("band") the band kernel for
    every multiword pattern; values above the bound come back as bound + 1."""
    from rapidfuzz.distance import Levenshtein
    from torchalign_kernels import myers

    monkeypatch.setattr(myers, "BAND_SHARE", 0 if algorithm == "band" else 4)
    algorithm = "myers" if algorithm == "band" else algorithm
    a, b = (list(x) for x in zip(*pairs))
    want = [[Levenshtein.distance(x, y) for y in b] for x in a]
    bound = {"none": None, "d": want[0][0], "d - 1": max(want[0][0] - 1, 0), "drawn": drawn}[bound]
    cap = (lambda d: d) if bound is None else (lambda d: min(d, bound + 1))  # noqa: E731
    got = ta.levenshtein(a, b, alphabet="dna", algorithm=algorithm, max_distance=bound)
    assert got.tolist() == [cap(want[i][i]) for i in range(len(a))]
    got = ta.levenshtein_cdist(a, b, alphabet="dna", algorithm=algorithm, max_distance=bound)
    assert got.tolist() == [[cap(d) for d in row] for row in want]


# ---- approximate matching (k differences) -------------------------------------------------
@pytest.mark.parametrize("k,both_strands", [(0, False), (2, True)])
def test_asm_search(rng, k, both_strands):
    from . import asm_cases as asm

    asm.check_search("cpu", rng, k=k, both_strands=both_strands)


def test_asm_search_multiword_and_chunk_edges(rng):
    from . import asm_cases as asm

    asm.check_search("cpu", rng, k=3, text_lens=(150, 300), pat_lens=(64, 65, 130), n_texts=2, n_pat=2)


def test_asm_row_parallel_dp(rng):
    """algorithm="dp": the row-parallel DP kernel, starts carried in the cells."""
    from . import asm_cases as asm

    asm.check_search("cpu", rng, k=2, both_strands=True, algorithm="dp", text_lens=(0, 1, 40, 300),
                     pat_lens=(1, 5, 70))
    asm.check_best_and_profile("cpu", rng, algorithm="dp", text_lens=(0, 1, 100, 150), pat_lens=(1, 20, 70))
    asm.check_tokens_and_unicode("cpu", rng, algorithm="dp")


def test_asm_best_profile_edlib(rng):
    from . import asm_cases as asm

    asm.check_best_and_profile("cpu", rng, text_lens=(0, 1, 100, 200), pat_lens=(1, 20, 70))
    asm.check_edlib("cpu", rng, n=2, text_len=200)
    asm.check_k_boundaries("cpu", rng, n=2)


def test_asm_big_alphabets(rng):
    from . import asm_cases as asm

    asm.check_tokens_and_unicode("cpu", rng)


def test_asm_hit_capacity_overflow_relaunches(monkeypatch, rng):
    from torchalign.ops import asm as ops

    from . import asm_cases as asm

    monkeypatch.setattr(ops, "FIRST_CAPACITY", 2)
    assert len(asm.check_search("cpu", rng, k=3, text_lens=(60,), pat_lens=(4,))) > 2


def test_myers_column_in_memory(monkeypatch, rng):
    """Patterns past myers_wave.MAX_WORDS keep the column in memory (myers_band with no
    bound, or the search's k): that path, forced, for every mode."""
    from torchalign_kernels import myers

    from . import asm_cases as asm
    from . import levenshtein_cases as lev

    monkeypatch.setattr(myers, "WAVE", False)
    asm.check_search("cpu", rng, k=3, text_lens=(150,), pat_lens=(130,), n_texts=2, n_pat=2)
    asm.check_best_and_profile("cpu", rng, text_lens=(0, 150), pat_lens=(130,), n_texts=2, n_pat=2)
    lev.check_cdist("cpu", rng, lengths=(0, 150, 200), na=3, nb=3, algorithm="myers")


def test_myers_band(monkeypatch, rng):
    """Ukkonen's band forced for every multiword pattern with a bound: max_distance on pairs
    of 3 and 4 words, k-difference search and its starts. (Bounds at and below a pair's
    distance, the cut-off in registers: test_levenshtein_words.)"""
    from torchalign_kernels import myers

    from . import asm_cases as asm
    from . import levenshtein_cases as lev

    monkeypatch.setattr(myers, "BAND_SHARE", 0)
    lev.check_band("cpu", rng, lengths=(130, 200), bounds=(0, 64), n=3, boundaries=False)
    for k in (0, 4):
        asm.check_search("cpu", rng, k=k, text_lens=(150, 200), pat_lens=(130, 150), n_texts=2, n_pat=2)


@settings(max_examples=10, **SETTINGS)
@given(st.lists(texts("ACG", (16, 32), 40), min_size=1, max_size=2), st.lists(lengths((64,), 8, low=1), min_size=1,
       max_size=2), st.integers(0, 3), st.sampled_from(("myers", "dp")), st.randoms(use_true_random=False))
def test_asm_chunks_and_words(monkeypatch, texts_, pat_lens, k, algorithm, rnd):
    """k-difference hits with their starts, best matches and profiles against the reference:
    texts across chunk edges (chunks of 16 ends: MAX_CHUNK; the DP kernel's rows in blocks
    of 16 columns), patterns (mostly cut from the texts, edited) across a 64-code word."""
    from torchalign_kernels import asm, asm_rows

    from . import asm_cases

    monkeypatch.setattr(asm, "MAX_CHUNK", 16)
    set_defaults(monkeypatch, asm_rows.run, block=16)
    src = "".join(texts_)
    patterns = []
    for m in pat_lens:
        i = rnd.randrange(len(src) - m + 1) if len(src) >= m and rnd.random() < 0.7 else None
        patterns.append(cases.mutate(rnd, src[i : i + m], rnd.randint(0, 2), "ACG") if i is not None
                        else cases.rand_seq(rnd, m, "ACG"))
    hits = ta.asm_search(texts_, patterns, k, alphabet="dna", algorithm=algorithm)
    assert asm_cases.hit_tuples(hits) == ref.asm_hits(texts_, patterns, k)
    d, end = ta.asm_best(texts_, patterns, alphabet="dna", algorithm=algorithm)
    assert (d.tolist(), end.tolist()) == ref.asm_best(texts_, patterns)
    prof = ta.asm_profile(texts_, patterns, alphabet="dna", algorithm=algorithm)
    assert prof.tolist() == [sum((ref.asm_column(p, t)[1:] for t in texts_), []) for p in patterns]


def test_align_kernel(monkeypatch, rng):
    """The alignment kernels with the GPU's 48-row tiles: queries of 47, 48 and 49 residues
    (tile edges; short targets: the columns do not matter to them), every mode, affine and
    linear gaps, DNA scoring, edge cases; the wavefront kernel over one and two passes of 2
    tiles (local). Tiles and passes at random lengths, every mode: the hypothesis tests below
    (8-row tiles)."""
    from torchalign_kernels import align, align_wave

    from . import align_cases as al

    al.check_reference("cpu", rng, n=5, lengths=(0, 1, 47, 48, 49), gaps=((11, 1), (3, 0)), t_lengths=(0, 1, 5, 9))
    al.check_reference("cpu", rng, n=4, lengths=(0, 1, 9), gaps=((5, 2),), scoring_kw=dict(match=2, mismatch=-3),
                       letters="ACGTN")
    al.check_edges("cpu")
    monkeypatch.setattr(align, "LONG_TARGET", 9)  # one pair per program (a wavefront of 2 tiles: 96 rows)
    monkeypatch.setattr(align_wave, "W_MAX", 2)
    al.check_reference("cpu", rng, n=2, lengths=(49, 97), modes=("local",), gaps=((11, 1),), t_lengths=(9, 10))


@pytest.fixture
def small_tiles(monkeypatch):
    """The alignment kernels' code at sizes the interpreter crosses cheaply: tiles of 8 query
    rows (inter-task, wavefront and scan kernels), targets of 20 or more on the wavefront
    with 2 tiles (16 rows) per pass, scan chunks of 2 x 2 sequences. (Under the interpreter
    a step costs the same at any width, so narrow chunks only add steps: tests that need no
    chunk edges keep 32 lanes.)"""
    from torchalign_kernels import align, align_scan, align_wave

    set_defaults(monkeypatch, align.align_pairs, rows=8)
    monkeypatch.setattr(align, "LONG_TARGET", 20)
    monkeypatch.setattr(align_wave, "W_MAX", 2)
    monkeypatch.setattr(align_scan, "ROWS", 8)
    monkeypatch.setattr(align_scan, "LANES", 2)


FEW = "ACDEWHK"  # few letters: random pairs share more
TILES = (8, 16, 24)  # edges of 8-row tiles; 16 rows: one wavefront pass, 24: a second pass


@settings(max_examples=12, **SETTINGS)
@given(st.lists(st.tuples(texts(FEW, TILES, 12), texts(FEW, (20,), 12)), min_size=1, max_size=4),
       st.sampled_from(("local", "global", "semiglobal")), st.sampled_from(((11, 1), (3, 0))))
def test_align_tiles_and_wavefront(small_tiles, pairs, mode, gaps):
    """Scores and ends of the inter-task and wavefront kernels against the reference,
    queries across tile and pass edges, targets across LONG_TARGET."""
    sc = ta.Scoring(gap_open=gaps[0], gap_extend=gaps[1])
    qs, ts = (list(x) for x in zip(*pairs))
    s = ta.align_score(qs, ts, sc, mode)
    got = list(zip(s.score.tolist(), s.query_end.tolist(), s.target_end.tolist()))
    assert got == [ref.align_score(q, t, sc.score, *gaps, mode) for q, t in zip(qs, ts)]


@settings(max_examples=4, **SETTINGS)
@given(st.lists(lengths((14,), 15, low=12), min_size=1, max_size=2), st.lists(lengths(TILES[:1], 11), min_size=8,
                                                                              max_size=9),
       st.lists(lengths(TILES[:2], 17), min_size=1, max_size=2), st.randoms(use_true_random=False))
def test_search_scan_with_long_chunks(small_tiles, monkeypatch, long, short, q_lens, rnd):
    """ta.search (local) in every example: every chunk of the database on the packed int16
    scan in one launch of every query, the long chunks (sequences of 12 to 15 residues beside
    ones of 11 or fewer) included; query lengths across the scan's 8-row tiles; the ends of
    the top hits (short queries: the usual split of pairs between the two kernels); every
    score and both ends of every pair against the reference."""
    from torchalign_kernels import align_scan

    from torchalign.ops import align as ops_align

    from . import align_cases as al

    scans, ends = [], []
    plain_scan, plain_pairs = align_scan.scan_queries, ops_align._pairs
    monkeypatch.setattr(align_scan, "scan_queries", lambda *a, **kw: scans.append((a[5].chunk_lengths.numel(), a[6],
                                                                                    a[3] - a[2]))
                        or plain_scan(*a, **kw))
    monkeypatch.setattr(ops_align, "_pairs", lambda *a, **kw: ends.append(a[10:]) or plain_pairs(*a, **kw))
    qs = [al.rand_protein(rnd, n, FEW) for n in q_lens]
    db = [al.rand_protein(rnd, n, FEW) for n in long + short]
    for i, q in enumerate(qs):  # a piece of a query, edited, in a short sequence
        db[len(long) + i] = al.related(rnd, q, FEW)[:11]
    al.check_top_k("cpu", qs, db, ta.Scoring(), "local", (len(db),))
    n_chunks = -(-len(db) // (2 * align_scan.LANES))
    assert scans and all(s == (n_chunks, 0, len(qs)) for s in scans) and n_chunks >= 3
    # only the ends of the top hits: on align_wave when a query is long, else the usual split
    wave = 0 if max(q_lens) >= ops_align.ENDS_WAVE_QUERY else None
    assert ends and all(e == (True, wave) for e in ends)


def test_search_kernel(monkeypatch, rng):
    """ta.search through the kernels: the packed int16 scan (local; 32 lanes, 8-row tiles)
    with scores past int16 (queries of 36 and 37 at match 900: 32,400 above the limit,
    33,300 wrapped), found and recomputed; the pairs kernel (global, semiglobal) for the
    scores; ends for the top hits."""
    from torchalign_kernels import align, align_scan

    from . import align_cases as al

    monkeypatch.setattr(align_scan, "ROWS", 8)
    set_defaults(monkeypatch, align.align_pairs, rows=8)
    al.check_search_wrap("cpu", rng, lengths=(36, 37))
    al.check_search("cpu", rng, n_q=2, n_db=6, lengths=(0, 1, 9, 17), top_k=8, modes=("global", "semiglobal"),
                    stream=(), past_end=False)
