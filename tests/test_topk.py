"""levenshtein_topk and near_duplicates (issue 15, item 2) against brute force: the plain
DP reference and levenshtein_cdist's full matrix, over ties, k > Nr, max_distance with
fewer hits, empty sequences and batches, and tiles made small so that several tiles and
partial ones are crossed. The interpreter test runs the kernels' path; the GPU tests compare
CUDA with the CPU and bound the peak memory."""

import doctest
import random

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import torchalign as ta
import torchalign.topk
from torchalign.ops import topk as topk_ops

from . import reference as ref
from .hamming_cases import mutate, rand_seq

NO_DISTANCE = 2**31 - 1


# ---------------------------------------------------------------- brute force -------
def brute_topk(D, k, max_distance=None):
    """(distances, indices) from a full matrix: each row's k smallest (distance, index)."""
    empty = (NO_DISTANCE if max_distance is None else max_distance + 1, -1)
    rows = [sorted((d, j) for j, d in enumerate(row) if max_distance is None or d <= max_distance)[:k] for row in D]
    rows = [r + [empty] * (k - len(r)) for r in rows]
    return [[d for d, _ in r] for r in rows], [[j for _, j in r] for r in rows]


def brute_pairs(D, max_distance):
    return [(i, j, D[i][j]) for i in range(len(D)) for j in range(i + 1, len(D)) if D[i][j] <= max_distance]


def dp_matrix(a, b):
    return [[ref.levenshtein(x, y) for y in b] for x in a]


def lines(rng, n, lo=0, hi=12, symbols="ab"):
    """Short strings over few symbols (many ties), some near copies of others, some empty."""
    out = []
    for _ in range(n):
        if out and rng.random() < 0.3:
            out.append(mutate(rng, rng.choice(out), rng.randint(0, 2), symbols))
        else:
            out.append(rand_seq(rng, rng.randint(lo, hi), symbols))
    return out


def as_lists(result):
    return [t.tolist() for t in result]


def small_tiles(monkeypatch, n_other, tile, kernels=False):
    """Make tile_size give ``tile`` sequences per tile against ``n_other`` others."""
    monkeypatch.setattr(topk_ops, "TILE_BYTES", tile * topk_ops.PAIR_BYTES[kernels] * n_other)
    assert topk_ops.tile_size(n_other, kernels) == tile


# ---------------------------------------------------------------- levenshtein_topk --
@pytest.mark.parametrize("k", [1, 3, 11, 16])
@pytest.mark.parametrize("max_distance", [None, 0, 2, 5])
def test_topk_equals_plain_dp(rng, k, max_distance):
    q, r = lines(rng, 7), lines(rng, 11)
    got = ta.levenshtein_topk(q, r, k, max_distance)
    assert got.distance.dtype == torch.int32 and got.index.dtype == torch.int64
    assert got.distance.shape == got.index.shape == (7, k)
    assert as_lists(got) == list(brute_topk(dp_matrix(q, r), k, max_distance))


@pytest.mark.parametrize("tile", [1, 3, 7, 40])
@pytest.mark.parametrize("k,max_distance", [(1, None), (4, None), (5, 3), (60, None), (2, 0)])
def test_topk_across_tiles_equals_cdist(monkeypatch, rng, tile, k, max_distance):
    """Tiles of 1, 3 (50 = 16 x 3 + 2: a partial tile), 7 and all 40+ references; k below,
    at and above a tile; ties everywhere (two symbols, duplicates)."""
    q, r = lines(rng, 23, hi=20), lines(rng, 50, hi=20)
    q[0] = r[7] = r[31] = r[49] = "ab" * 12  # equal references in different tiles (the only ones this long)
    small_tiles(monkeypatch, len(q), tile)
    got = ta.levenshtein_topk(q, r, k, max_distance=max_distance)
    D = ta.levenshtein_cdist(q, r).tolist()
    assert as_lists(got) == list(brute_topk(D, k, max_distance))
    if max_distance is None:
        assert got.index[0, :3].tolist() == [7, 31, 49][: min(k, 3)]


def test_topk_stops_at_the_worst_candidate_and_still_equals_brute_force(monkeypatch, rng):
    """After the first tile every query has k candidates: later tiles get the worst of them
    as a bound (values past it come back clamped) and the result is unchanged."""
    bounds = []
    real = topk_ops._distances

    def spy(*args):
        bounds.append(args[5])
        return real(*args)

    monkeypatch.setattr(topk_ops, "_distances", spy)
    q = lines(rng, 9, 5, 30, "abc")
    r = [mutate(rng, rng.choice(q), rng.randint(0, 3), "abc") for _ in range(30)] + lines(rng, 30, 20, 40, "abc")
    small_tiles(monkeypatch, len(q), 6)
    got = ta.levenshtein_topk(q, r, 3)
    assert as_lists(got) == list(brute_topk(dp_matrix(q, r), 3))
    assert len(bounds) == 10 and bounds[0] == -1 and min(bounds[1:]) >= 0 and min(bounds[1:]) < max(map(len, r))


def test_ties_go_to_the_smaller_index():
    got = ta.levenshtein_topk(["ab"], ["xy", "ab", "aa", "ab", "bb", "ab"], k=5)
    assert as_lists(got) == [[[0, 0, 0, 1, 1]], [[1, 3, 5, 2, 4]]]


def test_fewer_references_than_k_and_empty_batches():
    got = ta.levenshtein_topk(["abc", ""], ["abd", "", "abc"], k=5)
    assert as_lists(got) == [[[0, 1, 3, NO_DISTANCE, NO_DISTANCE], [0, 3, 3, NO_DISTANCE, NO_DISTANCE]],
                             [[2, 0, 1, -1, -1], [1, 0, 2, -1, -1]]]
    got = ta.levenshtein_topk(["abc", ""], ["abd", "", "abc"], k=5, max_distance=1)
    assert as_lists(got) == [[[0, 1, 2, 2, 2], [0, 2, 2, 2, 2]], [[2, 0, -1, -1, -1], [1, -1, -1, -1, -1]]]
    empty = ta.encode([], "bytes")
    got = ta.levenshtein_topk(["abc", ""], empty, k=2)
    assert as_lists(got) == [[[NO_DISTANCE] * 2] * 2, [[-1] * 2] * 2]
    got = ta.levenshtein_topk(empty, ["abc"], k=3, max_distance=4)
    assert got.distance.shape == got.index.shape == (0, 3)
    assert as_lists(ta.levenshtein_topk([""], ["", ""], k=1)) == [[[0]], [[0]]]
    d, i = ta.levenshtein_topk(["ab"], ["b", "ab"], k=100_000)  # k far past Nr: the rest is empty
    assert d.shape == (1, 100_000) and d[0, :3].tolist() == [0, 1, NO_DISTANCE] and i[0, :3].tolist() == [1, 0, -1]
    assert d[0, 2:].eq(NO_DISTANCE).all() and i[0, 2:].eq(-1).all()


def test_unequal_lengths_unicode_tokens_and_batch_inputs(rng):
    q = ["naïve café", "日本語のテキスト", "x" * 70, ""]
    r = ["naive cafe", "日本語テキスト", "x" * 130, "é", "y" * 65]
    for alphabet, conv in (("unicode", lambda s: s), (None, lambda s: s.encode())):
        got = ta.levenshtein_topk(q, r, 3, alphabet=alphabet)
        assert as_lists(got) == list(brute_topk(dp_matrix([conv(s) for s in q], [conv(s) for s in r]), 3))
    tq = [[rng.randrange(100_000) for _ in range(rng.randint(0, 9))] for _ in range(5)]
    tr = [x[: rng.randint(0, len(x))] + [rng.randrange(3)] for x in tq] + [[]]
    tok = lambda seqs: ta.encode([torch.tensor(s, dtype=torch.int32) for s in seqs], "tokens")  # noqa: E731
    assert as_lists(ta.levenshtein_topk(tok(tq), tok(tr), 2)) == list(brute_topk(dp_matrix(tq, tr), 2))
    padded = torch.tensor([[97, 98, 99], [98, 0, 0]], dtype=torch.uint8)
    got = ta.levenshtein_topk((padded, torch.tensor([3, 1])), ["abc", "b", "c"], 2, alphabet="bytes")
    assert as_lists(got) == [[[0, 2], [0, 1]], [[0, 1], [1, 2]]]


@settings(deadline=None, max_examples=40)
@given(st.lists(st.text("ab", max_size=8), max_size=6), st.lists(st.text("ab", max_size=8), max_size=9),
       st.integers(1, 10), st.one_of(st.none(), st.integers(0, 9)), st.integers(1, 4))
def test_topk_property(q, r, k, max_distance, tile):
    old = topk_ops.TILE_BYTES
    topk_ops.TILE_BYTES = tile * topk_ops.PAIR_BYTES[False] * max(1, len(q))
    try:
        got = ta.levenshtein_topk(q, ta.encode(r, "bytes"), k, max_distance)
    finally:
        topk_ops.TILE_BYTES = old
    assert as_lists(got) == list(brute_topk(dp_matrix(q, r), k, max_distance))


def test_topk_errors():
    with pytest.raises(ValueError, match="k: must be >= 1, got 0"):
        ta.levenshtein_topk(["a"], ["b"], 0)
    with pytest.raises(TypeError, match="k: expected an integer, got a bool"):
        ta.levenshtein_topk(["a"], ["b"], True)
    with pytest.raises(ValueError, match="max_distance: must be >= 0, got -1"):
        ta.levenshtein_topk(["a"], ["b"], 1, -1)
    with pytest.raises(ValueError, match="max_distance: must be <= 2147483646"):
        ta.levenshtein_topk(["a"], ["b"], 1, 2**31)
    with pytest.raises(ValueError, match="references: alphabet 'dna' differs"):
        ta.levenshtein_topk(ta.encode(["a"], "bytes"), ta.encode(["ACG"], "dna"), 1)
    with pytest.raises(ValueError, match="algorithm: expected one of"):
        ta.levenshtein_topk(["a"], ["b"], 1, algorithm="fast")
    bad = ta.SequenceBatch(torch.tensor([1, 200], dtype=torch.uint8), torch.tensor([0, 2]), "dna")
    with pytest.raises(ValueError, match=r"references: codes must lie in \[0, "):
        ta.levenshtein_topk(ta.encode(["AC"], "dna"), bad, 1)


# ---------------------------------------------------------------- near_duplicates ---
@pytest.mark.parametrize("tile", [1, 4, 100])
@pytest.mark.parametrize("max_distance", [0, 1, 3])
def test_near_duplicates_equal_brute_force(monkeypatch, rng, tile, max_distance):
    s = lines(rng, 37, hi=15, symbols="abc")
    s[5] = s[20] = s[36] = ""  # empty sequences are duplicates of each other
    small_tiles(monkeypatch, len(s), tile)
    got = ta.near_duplicates(s, max_distance)
    assert got.i.dtype == got.j.dtype == torch.int64 and got.distance.dtype == torch.int32
    want = brute_pairs(dp_matrix(s, s), max_distance)
    assert list(zip(*as_lists(got))) == want
    assert (5, 20, 0) in want


def test_near_duplicates_edges():
    assert as_lists(ta.near_duplicates([], 3)) == [[], [], []]
    assert as_lists(ta.near_duplicates(["abc"], 3)) == [[], [], []]
    assert as_lists(ta.near_duplicates(["", ""], 0)) == [[0], [1], [0]]
    assert as_lists(ta.near_duplicates(["abc", "xyz"], 2)) == [[], [], []]
    assert as_lists(ta.near_duplicates(["abc", "xyz", "abc"], 10**9)) == [[0, 0, 1], [1, 2, 2], [3, 0, 3]]
    got = ta.near_duplicates(["Straße", "Strasse", "strasse"], 2, alphabet="unicode")
    assert as_lists(got) == [[0, 1], [1, 2], [2, 1]]  # (S -> s is one more)


def test_near_duplicates_max_pairs(monkeypatch):
    s = ["aa", "ab", "aa", "ba", "aa"]  # within 1: every pair but (1, 3): 9 pairs
    assert len(ta.near_duplicates(s, 1, max_pairs=9).i) == 9
    small_tiles(monkeypatch, len(s), 2)  # the count passes 2 in the second tile: the rest still counted
    with pytest.raises(ValueError, match=r"9 pairs within max_distance=1 exceed max_pairs=2; pass max_pairs>=9"):
        ta.near_duplicates(s, 1, max_pairs=2)
    with pytest.raises(ValueError, match="max_pairs: must be >= 0"):
        ta.near_duplicates(s, 1, max_pairs=-1)
    with pytest.raises(ValueError, match="max_distance: must be >= 0"):
        ta.near_duplicates(s, -2)
    with pytest.raises(TypeError, match="max_distance: expected an integer"):
        ta.near_duplicates(s, None)


# ---------------------------------------------------------------- memory -----------
def test_tiles_stay_within_the_budget(monkeypatch, rng):
    """No call compares more pairs than the budget allows (never Nq x Nr), and every
    reference (every upper-triangle pair) is compared once."""
    calls = []
    real = topk_ops._distances

    def spy(a_codes, a_offsets, b_codes, b_offsets, *args):
        calls.append((a_offsets.numel() - 1, b_offsets.numel() - 1))
        return real(a_codes, a_offsets, b_codes, b_offsets, *args)

    monkeypatch.setattr(topk_ops, "_distances", spy)
    q, r = lines(rng, 20), lines(rng, 45)
    budget_pairs = 5 * len(q)
    monkeypatch.setattr(topk_ops, "TILE_BYTES", budget_pairs * topk_ops.PAIR_BYTES[False])
    ta.levenshtein_topk(q, r, 4)
    assert all(na * nb <= budget_pairs for na, nb in calls) and sum(na for na, _ in calls) == len(r)
    calls.clear()
    ta.near_duplicates(r, 2)
    assert all(na * nb <= 5 * len(q) for na, nb in calls) and sum(na for na, _ in calls) == len(r)
    assert sum(na * nb for na, nb in calls) < len(r) ** 2 * 0.65  # the upper triangle (+ diagonal blocks)


def test_live_memory_follows_the_tile_not_nq_x_nr(monkeypatch):
    """The ops' live tensor bytes (CPU) with the same budget stay flat when the references
    (or the sequences of a self-join) double; with one tile of everything they double too.
    (The CPU torch DP's own batches of rows are made small, so that the pairs' bytes show;
    rapidfuzz's buffers are not torch tensors.)"""
    from torch._library.custom_ops import OPDEFS

    from torchalign.cpu import levenshtein as cpu_lev
    from torchalign.cpu import rapidfuzz_levenshtein

    from .test_memory_budget import LiveBytes

    monkeypatch.setattr(rapidfuzz_levenshtein, "process", None)  # the torch DP, whose pair buffers show
    monkeypatch.setattr(cpu_lev, "_CHUNK_CELLS", 1 << 12)
    rng = random.Random(3)
    seqs = [rand_seq(rng, rng.randint(8, 12), "abcd") for _ in range(300)]
    q = ta.encode([rand_seq(rng, rng.randint(8, 12), "abcd") for _ in range(80)], "bytes")

    def peaks(n):
        s = ta.encode(seqs[:n], "bytes")
        out = []
        for name, args in (("levenshtein_topk", (q.codes, q.offsets, s.codes, s.offsets, 256, 5, -1, -1, -1, -1,
                                                 "auto", True)),
                           ("near_duplicates", (s.codes, s.offsets, 256, 1, -1, -1, "auto", 10**9, True))):
            with LiveBytes() as live:
                OPDEFS[f"torchalign::{name}"]._init_fn(*args)
            out.append(live.peak)
        return out

    monkeypatch.setattr(topk_ops, "TILE_BYTES", 1500 * topk_ops.PAIR_BYTES[False])  # 1,500 pairs a tile
    small, large = peaks(150), peaks(300)
    assert all(b < 1.3 * a for a, b in zip(small, large)), (small, large)
    monkeypatch.setattr(topk_ops, "TILE_BYTES", 1 << 40)  # one tile: the dense matrix's working set
    dense_small, dense_large = peaks(150), peaks(300)
    assert all(b > 1.6 * a for a, b in zip(dense_small, dense_large)), (dense_small, dense_large)
    assert all(3 * a < b for a, b in zip(large, dense_large)), (large, dense_large)


# ---------------------------------------------------------------- ops and docs ------
DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)]


@pytest.mark.parametrize("device", DEVICES)
def test_opcheck(device):
    q = ta.encode(["kitten", "", "flaw"], "bytes", device)
    r = ta.encode(["sitting", "lawn", "mitten", "kitten", "a"], "bytes", device)
    ops = torch.ops.torchalign
    torch.library.opcheck(ops.levenshtein_topk, (q.codes, q.offsets, r.codes, r.offsets, 256, 3, -1, -1, -1, -1,
                                                 "auto", True))
    torch.library.opcheck(ops.levenshtein_topk, (q.codes, q.offsets, r.codes, r.offsets, 256, 7, 2, q.max_length,
                                                 r.max_length, 128, "auto", False))
    torch.library.opcheck(ops.near_duplicates, (r.codes, r.offsets, 256, 4, -1, -1, "auto", 100, True))


@pytest.mark.parametrize("device", DEVICES)
def test_compile_fullgraph(device):
    q = ta.encode(["kitten", "", "flaw"], "bytes", device)
    r = ta.encode(["sitting", "lawn", "mitten", "kitten", "a"], "bytes", device)

    def f(q, r):
        d, i = ta.levenshtein_topk(q, r, 4, max_distance=5)
        return d * 2, i

    torch._dynamo.reset()
    got = torch.compile(f, fullgraph=True)(q, r)
    assert all(torch.equal(x, y) for x, y in zip(got, f(q, r)))


def test_docstring_examples():
    result = doctest.testmod(torchalign.topk)
    assert result.attempted > 0 and result.failed == 0


# ---------------------------------------------------------------- interpreter -------
@pytest.mark.interpret
def test_kernel_path_under_the_interpreter(monkeypatch, kernels_on_cpu):
    """The kernels' path (Myers through levenshtein_cdist, the device-side merge) on CPU
    tensors: tiles of 2, patterns of one and two words, all-empty sequences."""
    rng = random.Random(random.randrange(2**32))
    q = lines(rng, 5, 0, 10, "ab") + ["ab" * 40]
    r = lines(rng, 6, 0, 10, "ab") + ["ab" * 39 + "b"]
    small_tiles(monkeypatch, len(q), 2, kernels=True)
    assert topk_ops.use_kernels(torch.zeros(1))  # CPU tensors take the kernels here
    assert as_lists(ta.levenshtein_topk(q, r, 3)) == list(brute_topk(dp_matrix(q, r), 3))
    assert as_lists(ta.levenshtein_topk(q, r, 9, 2)) == list(brute_topk(dp_matrix(q, r), 9, 2))
    assert list(zip(*as_lists(ta.near_duplicates(r, 2)))) == brute_pairs(dp_matrix(r, r), 2)
    assert as_lists(ta.near_duplicates(["", ""], 0)) == [[0], [1], [0]]  # no codes at all


# ---------------------------------------------------------------- GPU ---------------
def _text_lines(rng, n):
    """Lines of 3..25 words (~10..150 bytes: one to three Myers words), a fifth of them an
    earlier line with up to 3 substitutions."""
    words = ["the", "a", "data", "set", "line", "of", "text", "near", "copy", "model", "token", "sample"]
    out = []
    for _ in range(n):
        if out and rng.random() < 0.2:
            out.append(mutate(rng, rng.choice(out), rng.randint(0, 3), "abcdefghij "))
        else:
            out.append(" ".join(rng.choice(words) for _ in range(rng.randint(3, 25))))
    return out


@pytest.mark.gpu
def test_gpu_equals_cpu(monkeypatch):
    """CUDA equals the CPU and brute force, in one tile and in many (partial ones too)."""
    rng = random.Random(15)
    q, r = _text_lines(rng, 40), _text_lines(rng, 300) + ["data " * 40, ""]  # 200 bytes: three words
    want = ta.levenshtein_topk(q, r, 10)  # (the CPU)
    want_md = ta.levenshtein_topk(q, r, 10, 12)
    qc, rc = ta.encode(q, "bytes", "cuda"), ta.encode(r, "bytes", "cuda")
    dense = ta.levenshtein_cdist(qc, rc).tolist()
    assert as_lists(want) == list(brute_topk(dense, 10)) and as_lists(want_md) == list(brute_topk(dense, 10, 12))
    want_pairs = [list(x) for x in zip(*brute_pairs(ta.levenshtein_cdist(rc, rc).tolist(), 6))]
    for tile in (None, 37):
        if tile:
            small_tiles(monkeypatch, len(q), tile, kernels=True)
        for got, exp in ((ta.levenshtein_topk(qc, rc, 10), want), (ta.levenshtein_topk(qc, rc, 10, 12), want_md),
                         (ta.near_duplicates(rc, 6), want_pairs)):
            assert all(x.is_cuda for x in got) and as_lists(got) == (exp if isinstance(exp, list) else as_lists(exp))
    assert len(want_pairs[0]) > 30


@pytest.mark.gpu
def test_gpu_memory_does_not_grow_with_nq_x_nr(monkeypatch):
    """20,000 x 20,000 lines: a dense int32 matrix would take 1.6 GB; with a 64 MiB tile the
    peak stays near the tile's budget, and the results equal dense rows on a slice."""
    rng = random.Random(16)
    lines_ = _text_lines(rng, 20_000)
    s = ta.encode(lines_, "bytes", "cuda")
    monkeypatch.setattr(topk_ops, "TILE_BYTES", 64 << 20)
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated()
    d, i = ta.levenshtein_topk(s, s, 10)
    pairs = ta.near_duplicates(s, 3)
    torch.cuda.synchronize()
    peak = torch.cuda.max_memory_allocated() - base
    assert peak < 3 * (64 << 20) + 16 * 20_000 * 10 + 64 * len(pairs.i) + (40 << 20), peak
    sub = list(range(0, 20_000, 97))
    dense = ta.levenshtein_cdist(ta.encode([lines_[j] for j in sub], "bytes", "cuda"), s).cpu().tolist()
    assert [[d[j].tolist() for j in sub], [i[j].tolist() for j in sub]] == list(brute_topk(dense, 10))
    assert d[:, 0].eq(0).all()  # each line finds itself (or an equal line before it)
    found = set(zip(pairs.i.tolist(), pairs.j.tolist()))
    want = {(min(a, b), max(a, b)) for a, row in zip(sub, dense) for b, x in enumerate(row) if x <= 3 and a != b}
    assert {(a, b) for a, b in found if a in sub or b in sub} == want and len(want) > 30
