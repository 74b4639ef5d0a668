"""kdiff_primers (the k-difference primer problem): CPU tier against brute force, edge
cases, bad input, properties and real data; interpreter and GPU tiers at the end."""

import pytest
import torch
from hypothesis import Phase, given, settings
from hypothesis import strategies as st

import torchalign as ta

from . import primers_cases as cases
from .conftest import lengths, read_fasta
from .hamming_cases import mutate, rand_seq

# alpha across the kernels' 64-row words; k, the edit rate of beta's copies, a near copy of
# a middle piece of alpha (answers past 64 rows) or not
DRAWN = st.tuples(lengths((64,), 20), lengths((64,), 20), st.integers(1, 6), st.sampled_from((0.1, 0.3)),
                  st.booleans(), st.randoms(use_true_random=False))


def check_drawn(drawn):
    n_alpha, n_beta, k, rate, copy, rnd = drawn
    alpha, beta = cases.related(rnd, n_alpha, n_beta, rate)
    if copy and alpha:
        i, j = rnd.randrange(len(alpha) // 4 + 1), len(alpha) - rnd.randrange(len(alpha) // 4 + 1)
        beta += mutate(rnd, alpha[i:j], rnd.randint(0, k))
    assert ta.kdiff_primers(alpha, beta, k).tolist() == cases.dp_primers(alpha, beta, k), (alpha, beta, k)


def test_paper_example():
    assert ta.kdiff_primers("ACTG", "AGCAAG", 2).tolist() == [3, 3, 0, 0]
    assert cases.brute_primers("ACTG", "AGCAAG", 2) == [3, 3, 0, 0]


def test_dp_reference_equals_definition(rng):
    for _ in range(60):
        alpha, beta = cases.related(rng, rng.randint(0, 10), rng.randint(0, 10), 0.3)
        k = rng.randint(1, 5)
        assert cases.dp_primers(alpha, beta, k) == cases.brute_primers(alpha, beta, k), (alpha, beta, k)


def test_against_brute_force(rng):
    for _ in range(40):
        alpha, beta = cases.related(rng, rng.randint(0, 12), rng.randint(0, 12), 0.2)
        k = rng.randint(1, 6)
        assert ta.kdiff_primers(alpha, beta, k).tolist() == cases.brute_primers(alpha, beta, k), (alpha, beta, k)


def test_random_lengths_0_to_40(rng):
    cases.check_random("cpu", rng, n=60)


@settings(deadline=None, max_examples=20)
@given(DRAWN)
def test_lengths_across_words(drawn):
    check_drawn(drawn)


def test_batches_of_alphas_and_beta_records(rng):
    got = cases.check_batch("cpu", rng)
    assert got.dim() == 1


def test_edge_cases():
    assert ta.kdiff_primers("", "ACGT", 2).tolist() == []
    assert ta.kdiff_primers([], "ACGT", 2).dtype == torch.int32
    # an empty beta has only the empty substring: every start with >= k symbols left gets k
    assert ta.kdiff_primers("ACGTA", "", 2).tolist() == [2, 2, 2, 2, 0]
    assert ta.kdiff_primers("ACGTA", ["", ""], 2).tolist() == [2, 2, 2, 2, 0]
    assert ta.kdiff_primers("A", "C", 1).tolist() == [1]
    assert ta.kdiff_primers("A", "A", 1).tolist() == [0]
    assert ta.kdiff_primers("A", "A", 2).tolist() == [0]
    # k larger than any distance: nothing is >= k away
    assert ta.kdiff_primers("ACGTTGCA", "T", 9).tolist() == [0] * 8
    # alpha == beta: every substring of alpha is in beta
    assert ta.kdiff_primers("ACGTTGCAAC", "ACGTTGCAAC", 1).tolist() == [0] * 10
    # all-equal symbols: AAAA.. is in beta up to beta's length
    assert ta.kdiff_primers("AAAAAAAA", "AAA", 1).tolist() == [4, 4, 4, 4, 4, 0, 0, 0]
    assert ta.kdiff_primers("AAAAAAAA", "AAA", 2).tolist() == [5, 5, 5, 5, 0, 0, 0, 0]


def test_alpha_equal_beta_random(rng):
    alpha = rand_seq(rng, rng.randint(1, 300))
    for k in (1, 5):
        assert ta.kdiff_primers(alpha, alpha, k).tolist() == [0] * len(alpha)


def test_properties(rng):
    alpha, beta = cases.related(rng, 200, 400, 0.15)
    for k in (1, 3, 8):
        L = ta.kdiff_primers(alpha, beta, k).tolist()
        n = len(alpha)
        for r, x in enumerate(L):
            assert x == 0 or k <= x <= n - r  # d(i) <= i
            if r + 1 < n and x:
                assert L[r + 1] == 0 or L[r + 1] >= x - 1  # L(r + 1) >= L(r) - 1
            if x == 0 and r + 1 < n:
                assert L[r + 1] == 0  # no answer here: none later either
        bigger = ta.kdiff_primers(alpha, beta, k + 1).tolist()
        assert all(b == 0 or (a and b > a) for a, b in zip(L, bigger))  # k + 1 needs strictly longer


def test_lower_case_and_alphabets():
    assert ta.kdiff_primers("actg", "AGCAAG", 2).tolist() == [3, 3, 0, 0]
    assert ta.kdiff_primers("xyzw", "yxxzzw", 2, alphabet="bytes").tolist() == \
        cases.dp_primers("xyzw", "yxxzzw", 2)
    tok = ta.encode([torch.tensor([7, 9000, 3, 7], dtype=torch.int32)], "tokens")
    beta = ta.encode([torch.tensor([7, 3, 9000, 7, 7], dtype=torch.int32)], "tokens")
    want = cases.dp_primers("abca", "acbaa", 2)  # the same pattern of equalities
    assert ta.kdiff_primers(tok, beta, 2).tolist() == want


def test_bad_input():
    with pytest.raises(ValueError, match="k: must be >= 1"):
        ta.kdiff_primers("ACGT", "ACGT", 0)
    with pytest.raises(TypeError, match="k: expected an int"):
        ta.kdiff_primers("ACGT", "ACGT", 1.5)
    with pytest.raises(ValueError, match="beta: alphabet 'protein' differs from alpha's 'dna'"):
        ta.kdiff_primers(ta.encode("ACGT", "dna"), ta.encode("MKV", "protein"), 2)
    with pytest.raises(ValueError, match="beta: holds no records"):
        ta.kdiff_primers("ACGT", [], 2)
    a, none = ta.encode("ACGTA", "dna"), ta.encode([], "dna")  # the op itself: as one empty record
    assert torch.ops.torchalign.kdiff_primers(a.codes, a.offsets, none.codes, none.offsets, 2, 15, -1, 0,
                                              True).tolist() == [2, 2, 2, 2, 0]
    with pytest.raises(ValueError, match="symbol"):
        ta.kdiff_primers("ACGU", "ACGT", 2)  # U is not DNA
    bad = ta.SequenceBatch(torch.tensor([0, 1, 99], dtype=torch.uint8), torch.tensor([0, 3]), "dna")
    with pytest.raises(ValueError, match=r"alpha: codes must lie in \[0, 15\)"):
        ta.kdiff_primers(bad, "ACGT", 2)


def test_real_mitochondria_slice():
    human = read_fasta("MT-human.fa")[0][1]
    chimp = read_fasta("MT-chimp.fa")[0][1]
    alpha, beta = human[16000:16080], chimp[15500:16800]  # the control region: it differs most
    got = ta.kdiff_primers(alpha, beta, 4).tolist()
    assert got == cases.dp_primers(alpha, beta, 4)
    assert any(got) and not all(got)
    assert ta.kdiff_primers(human[3000:3060], chimp[2500:3700], 1).tolist() == [0] * 60  # in chimp exactly


def test_cpu_implementation_groups(monkeypatch, rng):
    """Tiny groups of starts (one per row loop) give the same integers as one group."""
    from torchalign.cpu import primers as cpu

    alpha, beta = cases.related(rng, 90, 200, 0.1)
    want = ta.kdiff_primers(alpha, beta, 4)
    monkeypatch.setattr(cpu, "_CELLS", 1)
    assert torch.equal(ta.kdiff_primers(alpha, beta, 4), want)


# ---- interpreter tier: the kernels on the CPU (kept small: the whole tier shares CI) ----

@pytest.mark.interpret
@pytest.mark.usefixtures("kernels_on_cpu")
def test_interpret_paper_example_and_edges():
    assert ta.kdiff_primers("ACTG", "AGCAAG", 2).tolist() == [3, 3, 0, 0]
    assert ta.kdiff_primers("", "ACGT", 2).tolist() == []
    assert ta.kdiff_primers("ACGTA", ["", ""], 2).tolist() == [2, 2, 2, 2, 0]
    assert ta.kdiff_primers("ACGTTGCA", "T", 9).tolist() == [0] * 8
    assert ta.kdiff_primers("ACGTTGCAAC", "ACGTTGCAAC", 2).tolist() == [0] * 10
    a, b = ta.encode("ACTG", "dna"), ta.encode("AGCAAG", "dna")
    bare = ta.SequenceBatch(a.codes, a.offsets, "dna")  # hand-built: no max_code, so the op reads it
    assert ta.kdiff_primers(bare, b, 2, check=False).tolist() == [3, 3, 0, 0]
    tok = ta.encode([torch.tensor([7, 90000, 3, 7], dtype=torch.int32)], "tokens")  # renumbered for the bit table
    beta = ta.encode([torch.tensor([7, 3, 90000, 7, 5], dtype=torch.int32)], "tokens")
    assert ta.kdiff_primers(tok, beta, 2).tolist() == cases.dp_primers("abca", "acbae", 2)


@pytest.mark.interpret
@pytest.mark.usefixtures("kernels_on_cpu")
def test_interpret_batch(rng):
    cases.check_batch("cpu", rng, n_alpha=3, max_len=30)


@pytest.mark.interpret
@pytest.mark.usefixtures("kernels_on_cpu")
@settings(deadline=None, max_examples=8, phases=(Phase.explicit, Phase.reuse, Phase.generate))
@given(DRAWN)
def test_interpret_lengths_across_words(drawn):
    check_drawn(drawn)


@pytest.mark.interpret
@pytest.mark.usefixtures("kernels_on_cpu")
def test_interpret_long_windows_and_regrowth(monkeypatch, rng):
    """Answers past one 64-row block; a 64-row first window forces reruns with longer ones."""
    from torchalign_kernels import primers as K

    launches = []
    plain = K.longest_within
    monkeypatch.setattr(K, "longest_within", lambda *a, **kw: launches.append(1) or plain(*a, **kw))
    monkeypatch.setattr(K, "FIRST_ROWS", 16)  # windows of 4 k rows first
    monkeypatch.setattr(K, "PROBE_MIN", 1)  # the probe of each sequence's first start too
    monkeypatch.setattr(K, "MIN_STRETCH", 16)
    monkeypatch.setattr(K, "STRETCH_OVERLAPS", 1)  # beta in overlapping stretches,
    monkeypatch.setattr(K, "MAX_GRID_Y", 2)  # two per launch
    cases.check_long("cpu", rng, n_alpha=76, n_beta=12, k=6)
    assert len(launches) >= 3  # first windows, the probe, longer windows


# ---- GPU tier -------------------------------------------------------------------
@pytest.mark.gpu
def test_gpu_random_and_batches(rng):
    cases.check_random("cuda", rng, n=60)
    cases.check_batch("cuda", rng, n_alpha=6, max_len=200)
    cases.check_long("cuda", rng, n_alpha=500, n_beta=1500, k=12)


@pytest.mark.gpu
def test_gpu_regrowth_probe_and_stretches(monkeypatch, rng):
    from torchalign_kernels import primers as K

    monkeypatch.setattr(K, "FIRST_ROWS", 64)
    monkeypatch.setattr(K, "PROBE_MIN", 1)
    monkeypatch.setattr(K, "MIN_STRETCH", 64)
    monkeypatch.setattr(K, "STRETCH_OVERLAPS", 1)  # many short stretches of beta
    cases.check_long("cuda", rng, n_alpha=400, n_beta=3000, k=20)
    alpha = ta.encode(rand_seq(rng, 3000), "dna", "cuda")  # the probe settles it: one start with no cap
    assert ta.kdiff_primers(alpha, alpha, 5).tolist() == [0] * 3000


@pytest.mark.gpu
def test_gpu_mitochondria_equal_cpu():
    human = ta.encode(read_fasta("MT-human.fa")[0][1][:400], "dna")  # (the CPU side bounds the sizes)
    chimp = ta.encode(read_fasta("MT-chimp.fa")[0][1][:8000], "dna")
    for k in (10, 30):
        want = ta.kdiff_primers(human, chimp, k)
        got = ta.kdiff_primers(human.to("cuda"), chimp.to("cuda"), k)
        assert torch.equal(got.cpu(), want)
