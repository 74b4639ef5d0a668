"""The CPU fast paths (issue 15, item 4): parasail for alignment scores, ends and
tracebacks, rapidfuzz for Levenshtein distances. Against the plain references and the
previous CPU implementations (the torch DPs, kept as the fallback), on random inputs
(every mode, scores past int8 and int16, empty sequences, tied best cells, BLOSUM62,
DNA match / mismatch, a 256-symbol bytes table) and real data; and the fallbacks."""

from __future__ import annotations

import random

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import torchalign as ta
from torchalign.cpu import align as torch_align
from torchalign.cpu import levenshtein as torch_lev
from torchalign.cpu import parasail_align, parasail_traceback, rapidfuzz_levenshtein
from torchalign.cpu import traceback as torch_tb

from . import align_cases as cases
from . import reference as ref
from .conftest import read_fasta

pytest.importorskip("parasail")
pytest.importorskip("rapidfuzz")

MODES = ("local", "global", "semiglobal")
# open == extend and open = extend + 1 are the edges of striped SW's exactness (parasail_align.py)
GAPS = ((11, 1), (10, 2), (5, 5), (3, 0), (0, 0), (2, 1), (1, 1), (4, 3))
BYTES = ta.Scoring(match=5, mismatch=-4, alphabet="bytes")


@pytest.fixture(autouse=True, scope="module")
def parasail_for_small_pairs():
    """Every non-empty pair through parasail here (small ones take the torch DP by default:
    test_small_pairs_take_the_torch_dp), so small random cases test parasail's path; one
    torch thread (the torch DPs compared against ran 6x slower on two busy cores)."""
    saved = parasail_align.TORCH_CELLS, torch.get_num_threads()
    parasail_align.TORCH_CELLS = 1
    torch.set_num_threads(1)
    yield
    parasail_align.TORCH_CELLS = saved[0]
    torch.set_num_threads(saved[1])


def scorings():
    """(scoring, letters the sequences draw from): BLOSUM62, DNA match / mismatch, bytes."""
    blosum = st.builds(lambda g: ta.Scoring(gap_open=g[0], gap_extend=g[1]), st.sampled_from(GAPS))
    dna = st.builds(lambda g, m, x: ta.Scoring(match=m, mismatch=x, gap_open=g[0], gap_extend=g[1]),
                    st.sampled_from(GAPS), st.sampled_from((1, 2, 5)), st.sampled_from((-1, -3, -9)))
    return st.one_of(st.tuples(blosum, st.sampled_from((cases.AA, "AW", "W"))),
                     st.tuples(dna, st.sampled_from(("ACGT", "AC", "ACGTN"))),
                     st.tuples(st.just(BYTES), st.sampled_from(("ab", "\x00\xff", "".join(map(chr, range(256)))))))


def batch(seqs, sc):
    if sc.alphabet.name == "bytes":
        return ta.encode([s.encode("latin-1") for s in seqs], "bytes")
    return ta.encode(seqs, sc.alphabet)


def torch_scores(q, t, sc, mode):
    """The previous CPU implementation (the torch DP) on pairs (q[b], t[b])."""
    return torch_align.align_score(q.codes, q.offsets[:-1], q.lengths, t.codes, t.offsets[:-1], t.lengths, sc.table,
                                   sc.gap_open, sc.gap_extend, mode)


def score_fn(sc):
    """The reference's score(a, b) of two symbols (bytes: characters by code)."""
    if sc.alphabet.name == "bytes":
        return lambda a, b: int(sc.table[ord(a), ord(b)])
    return sc.score


def check_scores(qs, ts, sc, mode, reference=True):
    """ta.align_score on the CPU == the torch DP (and the cell-by-cell reference)."""
    q, t = batch(qs, sc), batch(ts, sc)
    got = cases.got_tuples(ta.align_score(q, t, sc, mode))
    assert got == cases.got_tuples(ta.Scores(*torch_scores(q, t, sc, mode))), mode
    if reference:
        score = score_fn(sc)
        assert got == [ref.align_score(a, b, score, sc.gap_open, sc.gap_extend, mode) for a, b in zip(qs, ts)], mode
    return got


def sequences(letters, max_len=40):
    return st.text(alphabet=letters, max_size=max_len)


@settings(deadline=None, max_examples=100)
@given(scoring=scorings(), mode=st.sampled_from(MODES), data=st.data())
def test_scores_and_ends_random(scoring, mode, data):
    sc, letters = scoring
    n = data.draw(st.integers(1, 6))
    qs = data.draw(st.lists(sequences(letters), min_size=n, max_size=n))
    ts = data.draw(st.lists(sequences(letters), min_size=n, max_size=n))
    check_scores(qs, ts, sc, mode)


def test_tied_best_cells():
    """Repeats tie the best cell many times over: the smallest target end, then query end;
    semiglobal's all-gap query (column 0) ties the best of its row."""
    sc = ta.Scoring(match=2, mismatch=-3, gap_open=1, gap_extend=1)
    qs = ["AAAA", "ACAC", "A", "AC", "CCC", "ACGT", "TTTTTTTT", "GA"]
    ts = ["AAAAAAAAAA", "ACACACACAC", "AAAA", "CACACA", "AAAA", "TGCA", "TT", "AAAAAAAG"]
    for mode in MODES:
        check_scores(qs, ts, sc, mode)
    # BLOSUM62 0 / 0: free gaps tie everywhere; striped SW would give 9 here (Gotoh: 11)
    got = check_scores(["MWPCAHC"], ["TKVMDYRATQTMGVDT"], ta.Scoring(gap_open=0, gap_extend=0), "local")
    assert got[0][0] == 11


@pytest.mark.parametrize("mode", MODES)
def test_scores_past_int8_and_int16(mode):
    """Pairs whose scores and cells pass int8 and int16 (+-32,767) both ways: parasail's
    saturation ladder recomputes them in wider lanes."""
    rng = random.Random(15)
    sc = ta.Scoring(match=900, mismatch=-900, gap_open=950, gap_extend=100)
    qs, ts = ["A" * 400, "A"], ["C" * 400, "A"]
    for n in (3, 20, 200, 400, 700):
        q = cases.rand_protein(rng, n, "ACGT")
        qs += [q, q, q[: n // 2]]
        ts += [cases.related(rng, q, "ACGT"), cases.rand_protein(rng, n + 50, "ACGT"), q + q]
    got = check_scores(qs, ts, sc, mode, reference=False)
    scores = [g[0] for g in got]
    assert max(scores) > 32767 and (mode == "local" or min(scores) < -32768)


@pytest.mark.parametrize("match, mismatch, gap_open, gap_extend", [
    (127, -128, 127, 1), (126, -127, 1, 0), (128, -129, 128, 1), (32767, -32768, 32767, 1), (32768, -32769, 2, 2)])
def test_lane_width_edges(match, mismatch, gap_open, gap_extend):
    """Tables and gaps at the edges of int8 and int16 lanes (parasail_align.LANES): the
    widest entry a width takes, and one past it."""
    rng = random.Random(match)
    sc = ta.Scoring(match=match, mismatch=mismatch, gap_open=gap_open, gap_extend=gap_extend)
    qs = [cases.rand_protein(rng, rng.randint(1, 40), "AC") for _ in range(20)]
    ts = [cases.rand_protein(rng, rng.randint(1, 40), "AC") for _ in range(20)]
    for mode in MODES:
        check_scores(qs, ts, sc, mode, reference=False)


def test_empty_sequences_and_batches():
    sc = ta.Scoring()
    for mode in MODES:
        check_scores(["", "W", "", "WW", "MKV"], ["", "", "WW", "W", "MKV"], sc, mode)
        check_scores([], [], sc, mode)
        check_scores(["", ""], ["A", ""], sc, mode)  # every pair empty: the torch DP alone


@settings(deadline=None, max_examples=40)
@given(mode=st.sampled_from(MODES), seed=st.integers(0, 2**32 - 1), used=st.sampled_from((2, 254, 255, 256)))
def test_bytes_table_symbols_in_use(mode, seed, used):
    """A 256-symbol table: up to 255 symbols in use go to parasail renumbered, 256 to the
    torch DP; the same integers either way."""
    rng = random.Random(seed)
    alphabet = [chr(c) for c in rng.sample(range(256), used)]
    qs = ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 30))) for _ in range(4)]
    ts = ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 30))) for _ in range(3)]
    ts.append("".join(alphabet))  # every symbol in use appears
    enc = parasail_align.encode(*_flat(batch(qs, BYTES)), *_flat(batch(ts, BYTES)), BYTES.table, 11, 1)
    assert (enc is None) == (used == 256)
    check_scores(qs, ts, BYTES, mode)


def _flat(b):
    return b.codes, b.offsets[:-1], b.lengths


def test_parasail_is_the_path_taken(monkeypatch):
    """The tests above prove parasail's path: with the torch DP disabled, non-empty pairs still score."""

    def no_torch_dp(*args):
        raise AssertionError("the torch DP ran")

    monkeypatch.setattr(parasail_align.torch_dp, "align_score", no_torch_dp)
    monkeypatch.setattr(parasail_traceback.torch_tb, "traceback", no_torch_dp)
    for mode in MODES:
        assert ta.align_score(["HEAGAWGHEE"], ["PAWHEAE"], mode=mode).score.numel() == 1
        assert ta.traceback(["HEAGAWGHEE"], ["PAWHEAE"], mode=mode)[0].columns > 0
    assert ta.search(["HEAGAWGHEE"], ["PAWHEAE", "GGGGHEAGAWGHEEGG"], top_k=2).scores.shape == (1, 2)


@pytest.mark.parametrize("mode", MODES)
def test_small_pairs_take_the_torch_dp(mode, monkeypatch):
    """With the default TORCH_CELLS, small pairs run in the torch DP and the rest in
    parasail, in one call: the same integers as all of them in either."""
    monkeypatch.setattr(parasail_align, "TORCH_CELLS", 400)
    rng = random.Random(11)
    qs, ts = cases.pairs(rng, 30, (0, 3, 10, 19, 20, 21, 60))
    sizes = [len(q) * len(t) for q, t in zip(qs, ts)]
    assert min(sizes) < 400 <= max(sizes)
    check_scores(qs, ts, ta.Scoring(), mode)


def test_fallback_without_parasail(monkeypatch):
    """Without parasail every case takes the torch DP: the same integers."""
    rng = random.Random(4)
    qs, ts = cases.pairs(rng, 12, (0, 1, 7, 40))
    sc = ta.Scoring(gap_open=10, gap_extend=2)
    fast = {mode: check_scores(qs, ts, sc, mode) for mode in MODES}
    paths = {mode: ta.traceback(qs, ts, sc, mode) for mode in MODES}
    monkeypatch.setattr(parasail_align, "parasail", None)
    for mode in MODES:
        assert check_scores(qs, ts, sc, mode) == fast[mode]
        assert ta.traceback(qs, ts, sc, mode) == paths[mode]


def check_tracebacks(qs, ts, sc, mode, reference=True):
    """ta.traceback on the CPU == the torch traceback from the same ends (and the reference walk)."""
    q, t = batch(qs, sc), batch(ts, sc)
    got = ta.traceback(q, t, sc, mode)
    s = ta.align_score(q, t, sc, mode)
    qf, tf, ops, off = torch_tb.traceback(q.codes, q.offsets[:-1], t.codes, t.offsets[:-1], s.query_end, s.target_end,
                                          sc.table, sc.gap_open, sc.gap_extend, mode)
    for b, a in enumerate(got):
        cigar_ops = "".join(torch_tb.OPS[x] for x in ops[off[b] : off[b + 1]].tolist())
        assert (a.query_start, a.target_start) == (int(qf[b]), int(tf[b])), (mode, b)
        assert _expand(a.cigar) == cigar_ops, (mode, b)
        if reference:
            r = ref.traceback(qs[b], ts[b], score_fn(sc), sc.gap_open, sc.gap_extend, mode)
            assert (a.score, a.query_start, a.query_end, a.target_start, a.target_end, _expand(a.cigar)) == r, mode
    return got


def _expand(cigar: str) -> str:
    out, n = [], ""
    for c in cigar:
        if c.isdigit():
            n += c
        else:
            out.append(c * int(n))
            n = ""
    return "".join(out)


@settings(deadline=None, max_examples=100)
@given(scoring=scorings(), mode=st.sampled_from(MODES), data=st.data())
def test_tracebacks_random(scoring, mode, data):
    sc, letters = scoring
    n = data.draw(st.integers(1, 5))
    qs = data.draw(st.lists(sequences(letters, 30), min_size=n, max_size=n))
    ts = data.draw(st.lists(sequences(letters, 30), min_size=n, max_size=n))
    check_tracebacks(qs, ts, sc, mode)


@pytest.mark.parametrize("mode", MODES)
def test_tracebacks_large_rectangles_take_torch(mode, monkeypatch):
    """Rectangles past TABLE_CELLS take the torch traceback, the rest parasail's table, in one call."""
    rng = random.Random(7)
    qs, ts = cases.pairs(rng, 10, (0, 3, 12, 40))
    monkeypatch.setattr(parasail_traceback, "TABLE_CELLS", 100)
    check_tracebacks(qs, ts, ta.Scoring(), mode)


def plain(x):
    """Results as nested lists (tensors) and tuples, comparable with ==."""
    if isinstance(x, torch.Tensor):
        return x.tolist()
    if isinstance(x, (list, tuple)):
        return tuple(plain(y) for y in x)
    return x


def test_threads_give_the_same_integers():
    """Pairs on several threads (parasail and rapidfuzz release the GIL): the same results."""
    rng = random.Random(9)
    qs, ts = cases.pairs(rng, 40, (1, 30, 90, 200))
    before = torch.get_num_threads()
    try:
        results = []
        for threads in (1, 3):
            torch.set_num_threads(threads)
            results.append(plain(([ta.align_score(qs, ts, mode=m) for m in MODES], ta.traceback(qs, ts),
                                  ta.search(qs[:5], ts, top_k=7), ta.levenshtein_cdist(qs, ts),
                                  ta.levenshtein(qs, ts))))
        assert results[0] == results[1]
    finally:
        torch.set_num_threads(before)


def test_real_proteins_search_and_tracebacks(monkeypatch):
    """The bundled queries against part of the bundled proteome: search (scores, indices,
    both ends) and the hits' tracebacks as the torch DPs give them."""
    queries = [s for _, s in read_fasta("swissprot_queries20.fa")]
    proteome = [s for _, s in read_fasta("proteome_HG003687.fa")]
    qs = [sorted(queries, key=len)[0], queries[5][:120]]
    db = proteome[:60] + [qs[0], qs[1][10:]]  # exact and partial copies: strong hits, and ties
    sc = ta.Scoring()
    fast = {mode: ta.search(qs, db, sc, 5, mode=mode) for mode in MODES}
    pair_q = torch.arange(len(qs)).repeat_interleave(5)
    hits = ta.traceback(qs, db, sc, pairs=(pair_q, fast["local"].indices.reshape(-1)))
    monkeypatch.setattr(parasail_align, "parasail", None)
    for mode in MODES:
        slow = ta.search(qs, db, sc, 5, mode=mode)
        assert all(torch.equal(a, b) for a, b in zip(fast[mode], slow)), mode
    assert hits == ta.traceback(qs, db, sc, pairs=(pair_q, fast["local"].indices.reshape(-1)))


@pytest.mark.parametrize("mode", MODES)
def test_real_dna(mode):
    """Genes of data/genes100_CP040672.fna against each other's prefixes, match / mismatch scoring."""
    genes = [s for _, s in read_fasta("genes100_CP040672.fna")][:6]
    qs = [g[:300] for g in genes]
    ts = [genes[(i + 1) % len(genes)][:400] if i % 2 else g[50:450] for i, g in enumerate(genes)]
    check_scores(qs, ts, ta.Scoring(match=2, mismatch=-3, gap_open=5, gap_extend=2), mode, reference=False)
    check_tracebacks(qs[:3], ts[:3], ta.Scoring(match=2, mismatch=-3, gap_open=5, gap_extend=2), mode,
                     reference=False)


# Levenshtein


def torch_levenshtein(a, b, cdist, max_distance=None):
    codes = torch.cat([a.codes, b.codes])
    d = torch_lev.levenshtein_pairs(codes, a.offsets[:-1], a.lengths, b.offsets[:-1] + a.codes.numel(), b.lengths,
                                    cdist=cdist)
    return d if max_distance is None else d.clamp(max=max_distance + 1)


def check_levenshtein(a_seqs, b_seqs, alphabet, max_distance, as_input=lambda s: s):
    """ta.levenshtein(_cdist) on the CPU == the torch DP == the reference, capped at
    max_distance + 1 (``as_input`` turns a sequence into what ta.encode takes)."""
    a, b = ta.encode([as_input(s) for s in a_seqs], alphabet), ta.encode([as_input(s) for s in b_seqs], alphabet)
    cap = (lambda d: d) if max_distance is None else (lambda d: min(d, max_distance + 1))  # noqa: E731
    cd = ta.levenshtein_cdist(a, b, max_distance=max_distance)
    assert cd.dtype == torch.int32 and cd.shape == (len(a_seqs), len(b_seqs))
    assert cd.reshape(-1).tolist() == torch_levenshtein(a, b, True, max_distance).tolist()
    assert cd.tolist() == [[cap(ref.levenshtein(x, y)) for y in b_seqs] for x in a_seqs]
    n = min(len(a_seqs), len(b_seqs))
    a, b = (ta.encode([as_input(s) for s in seqs[:n]], alphabet) for seqs in (a_seqs, b_seqs))
    pw = ta.levenshtein(a, b, max_distance=max_distance)
    assert pw.dtype == torch.int32 and pw.tolist() == torch_levenshtein(a, b, False, max_distance).tolist()
    assert pw.tolist() == [cap(ref.levenshtein(x, y)) for x, y in zip(a_seqs[:n], b_seqs[:n])]


@settings(deadline=None, max_examples=100)
@given(a=st.lists(st.binary(max_size=80), max_size=5), b=st.lists(st.binary(max_size=80), max_size=5),
       max_distance=st.one_of(st.none(), st.integers(0, 30)))
def test_levenshtein_bytes_random(a, b, max_distance):
    check_levenshtein(a, b, "bytes", max_distance)


TOKENS = st.one_of(st.integers(0, 5), st.sampled_from((0xD7FF, 0xD800, 0xDFFF, 0x10FFFF, 0x110000, 2**31 - 2)),
                   st.integers(0, 2**31 - 2))


@settings(deadline=None, max_examples=100)
@given(a=st.lists(st.lists(TOKENS, max_size=70), min_size=1, max_size=4),
       b=st.lists(st.lists(TOKENS, max_size=70), min_size=1, max_size=4),
       max_distance=st.one_of(st.none(), st.integers(0, 20)))
def test_levenshtein_tokens_random(a, b, max_distance):
    """int32 token ids: below 0x110000 as code points (surrogates included), beyond renumbered."""
    check_levenshtein(a, b, "tokens", max_distance, lambda s: torch.tensor(s, dtype=torch.int32))


def test_levenshtein_long_and_real():
    """Sequences past one 64-bit word (rapidfuzz's blocks), real mitochondrial DNA."""
    human = read_fasta("MT-human.fa")[0][1]
    chimp = read_fasta("MT-chimp.fa")[0][1]
    a = [human[i : i + 700] for i in range(0, 5600, 1400)] + ["", human[:65], human[:64]]
    b = [chimp[i : i + 650] for i in range(0, 5200, 1300)] + [chimp[:128]]
    for max_distance in (None, 100):
        A, B = ta.encode(a, "dna"), ta.encode(b, "dna")
        assert ta.levenshtein_cdist(A, B, max_distance=max_distance).reshape(-1).tolist() == \
            torch_levenshtein(A, B, True, max_distance).tolist()


def test_levenshtein_fallback_without_rapidfuzz(monkeypatch):
    rng = random.Random(3)
    a = [bytes(rng.choice(b"ACGT") for _ in range(rng.randint(0, 50))) for _ in range(7)]
    b = [bytes(rng.choice(b"ACGT") for _ in range(rng.randint(0, 50))) for _ in range(5)]
    fast = [ta.levenshtein_cdist(a, b, max_distance=m) for m in (None, 3)]
    monkeypatch.setattr(rapidfuzz_levenshtein, "process", None)
    assert all(torch.equal(f, ta.levenshtein_cdist(a, b, max_distance=m)) for f, m in zip(fast, (None, 3)))


def test_levenshtein_rapidfuzz_is_the_path_taken(monkeypatch):
    def no_torch_dp(*args, **kw):
        raise AssertionError("the torch DP ran")

    monkeypatch.setattr(rapidfuzz_levenshtein.torch_dp, "levenshtein_pairs", no_torch_dp)
    assert ta.levenshtein_cdist(["kitten", ""], ["sitting"]).tolist() == [[3], [7]]
    tok = [torch.tensor([1, 2, 3], dtype=torch.int32)], [torch.tensor([2**31 - 2, 2, 3], dtype=torch.int32)]
    assert ta.levenshtein(*tok, alphabet="tokens").tolist() == [1]
