"""Hamming family on the CPU: against the plain reference, edge cases, errors, properties."""


import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import torchalign as ta

from . import hamming_cases as cases
from . import reference as ref
from .conftest import lengths, read_fasta, texts


@pytest.mark.parametrize("alphabet", ["dna", "protein", "bytes"])
def test_pairs(rng, alphabet):
    cases.check_pairs("cpu", rng, alphabet=alphabet)


@pytest.mark.parametrize("alphabet", ["dna", "dna+n", "protein", "bytes"])
def test_cdist(rng, alphabet):
    cases.check_cdist("cpu", rng, alphabet=alphabet)


def test_cdist_tokens(rng):
    cases.check_tokens_cdist("cpu", rng)


@pytest.mark.parametrize("iupac", [False, True])
def test_profile(rng, iupac):
    cases.check_profile("cpu", rng, iupac=iupac)


@pytest.mark.parametrize("both_strands,iupac,k", [(False, False, 0), (False, False, 2), (True, False, 2),
                                                  (True, True, 1), (False, True, 3)])
def test_kmismatch(rng, both_strands, iupac, k):
    cases.check_kmismatch("cpu", rng, k=k, both_strands=both_strands, iupac=iupac)


def test_kmismatch_every_window_hits():
    texts, patterns = ["ACGTACGTAC", "GG"], ["ACG", "T"]
    hits = ta.kmismatch_search(texts, patterns, k=3, alphabet="dna")
    assert hits.pattern.numel() == 8 + 0 + 10 + 2  # k >= m: every window that fits
    assert (hits.distance <= 3).all()


def test_kmismatch_no_hits_and_long_pattern():
    hits = ta.kmismatch_search(["AAAA", "CC"], ["GGG", "TTTTTTT"], k=0, alphabet="dna")
    assert all(x.numel() == 0 for x in hits)
    prof = ta.hamming_profile(["AC"], ["ACGT"], alphabet="dna")
    assert prof.tolist() == [[-1, -1]]


def test_empty_batches():
    empty = ta.encode([], "dna")
    assert ta.hamming(empty, empty).shape == (0,)
    assert ta.hamming_cdist(empty, ["ACG"], alphabet="dna").shape == (0, 1)
    assert ta.hamming_cdist(["ACG", "ACC"], empty, alphabet="dna").shape == (2, 0)
    assert ta.hamming_profile(empty, ["AC"], alphabet="dna").shape == (1, 0)
    assert ta.kmismatch_search(["ACGT"], empty, 1, alphabet="dna").pattern.numel() == 0
    assert ta.hamming(["", ""], ["", ""]).tolist() == [0, 0]


def test_real_data_mitochondria():
    """Human vs chimp mitochondrial genome windows: all-vs-all against the reference."""
    human = read_fasta("MT-human.fa")[0][1].upper()
    chimp = read_fasta("MT-chimp.fa")[0][1].upper()
    a = [human[i : i + 64] for i in range(0, 16000, 500)]
    b = [chimp[i : i + 64] for i in range(0, 16000, 700)]
    got = ta.hamming_cdist(a, b, alphabet="dna")
    assert got.tolist() == [[ref.hamming(x, y) for y in b] for x in a]
    assert ta.hamming(a, a[::-1], alphabet="dna").tolist() == [ref.hamming(x, y) for x, y in zip(a, a[::-1])]


def test_real_data_contig():
    got, texts, patterns = cases.check_contig("cpu")
    # the plain reference on a 6 kb stretch, where it is fast enough
    short = cases.check_contig("cpu", span=6000)
    assert short[0] == ref.kmismatch(short[1], short[2], 3, both_strands=True)


# ---- properties ------------------------------------------------------------------------
# lengths across the kernels' one-hot K-tiles (8 DNA positions) and tiles of 128 windows
@settings(deadline=None, max_examples=40)
@given(st.data())
def test_metric_properties(data):
    n = data.draw(lengths((8, 16, 128), 30))
    x, y, z = (data.draw(st.text(alphabet="ACGTN", min_size=n, max_size=n)) for _ in range(3))
    d = ta.hamming_cdist([x, y, z], [x, y, z], alphabet="dna")
    assert (d.diagonal() == 0).all() and torch.equal(d, d.T)
    assert d[0, 2] <= d[0, 1] + d[1, 2]
    assert 0 <= d.min() and d.max() <= n
    assert d[0, 1] == ref.hamming(x, y)


@settings(deadline=None, max_examples=40)
@given(text=texts("ACGT", (128, 256), 30), pattern=texts("ACGTN", (8, 16), 8, low=1), k=st.integers(0, 8))
def test_search_matches_profile(text, pattern, k):
    prof = ta.hamming_profile(text, pattern, alphabet="dna")[0]
    assert prof.tolist() == ref.profile([text], [pattern])[0]
    hits = ta.kmismatch_search(text, pattern, k, alphabet="dna")
    mask = (prof >= 0) & (prof <= k)
    assert hits.position.tolist() == torch.nonzero(mask).flatten().tolist()
    assert hits.distance.tolist() == prof[mask].tolist()


# ---- errors ----------------------------------------------------------------------------
def test_unequal_lengths_name_the_pair():
    with pytest.raises(ValueError, match="pair 1 has lengths 3 and 2"):
        ta.hamming(["ACG", "ACG"], ["ACG", "AC"])
    with pytest.raises(ValueError, match="a has 2 sequences and b has 1"):
        ta.hamming(["A", "C"], ["A"])
    with pytest.raises(ValueError, match="differ in length"):
        ta.hamming_cdist(["ACG", "AC"], ["ACG"])
    with pytest.raises(ValueError, match="length 3, b of length 2"):
        ta.hamming_cdist(["ACG"], ["AC"])


def test_bad_symbols_k_dtype_device():
    with pytest.raises(ValueError, match="symbol 'X' at position 2"):
        ta.encode("ACXGT", "dna")
    with pytest.raises(ValueError, match="patterns: .*'J'"):
        ta.kmismatch_search("ACGT", "AJ", 1, alphabet="dna")
    with pytest.raises(ValueError, match="k: must be >= 0"):
        ta.kmismatch_search("ACGT", "AC", -1)
    with pytest.raises(TypeError, match="k: expected an int"):
        ta.kmismatch_search("ACGT", "AC", 1.5)
    with pytest.raises(TypeError, match="codes must be an integer tensor"):
        ta.encode(torch.zeros(3, 4), "dna")
    with pytest.raises(ValueError, match="alphabet 'protein' differs"):
        ta.hamming(ta.encode("ACG", "dna"), ta.encode("ACG", "protein"))
    with pytest.raises(ValueError, match="both_strands: needs a DNA or RNA alphabet"):
        ta.kmismatch_search("ACGT", "AC", 1, alphabet="protein", both_strands=True)


def test_hand_built_codes_are_checked_inside_the_op():
    good = ta.encode(["ACGT"], "dna")
    bad = ta.SequenceBatch(torch.tensor([0, 1, 9, 3], dtype=torch.uint8), good.offsets, "dna")
    bad.codes[2] = 200  # out of the DNA range, bypassing encode
    with pytest.raises(ValueError, match=r"a: codes must lie in \[0, 15\)"):
        ta.hamming(bad, good)
    broken = ta.SequenceBatch(good.codes, torch.tensor([0, 5]), "dna")
    with pytest.raises(ValueError, match="offsets must start at 0"):
        ta.hamming_cdist(broken, good)


def test_max_hits_raises_with_count():
    with pytest.raises(ValueError, match="10 hits exceed max_hits=3"):
        ta.kmismatch_search("A" * 12, "AAA", 0, alphabet="dna", max_hits=3)
    assert ta.kmismatch_search("A" * 12, "AAA", 0, alphabet="dna", max_hits=10).position.numel() == 10


def test_empty_pattern_is_an_error():
    with pytest.raises(ValueError, match="pattern 1 is empty"):
        ta.kmismatch_search("ACGT", ["A", ""], 1, alphabet="dna")


def test_check_false_gives_the_same_integers(rng):
    texts, patterns = cases.texts_and_patterns(rng)
    t, p = ta.encode(texts, "dna"), ta.encode(patterns, "dna")
    assert torch.equal(ta.hamming_profile(t, p, check=False), ta.hamming_profile(t, p))
    a = ta.encode(["ACGTN" * 3] * 4, "dna")
    assert torch.equal(ta.hamming_cdist(a, a, check=False), ta.hamming_cdist(a, a))


@pytest.mark.parametrize("check", [True, False])
def test_reverse_strand_codes_beyond_the_forward_ones(check):
    """AACG has no T, its reverse complement CGTT has: the one-hot width must cover both."""
    hits = ta.kmismatch_search("GCGTTA", "AACG", 0, alphabet="dna", both_strands=True, check=check)
    assert list(zip(hits.position.tolist(), hits.strand.tolist())) == [(1, 1)]
    texts, patterns = ["ACGTTTGCANNA"], ["AAC", "CA", "NNA"]
    hits = ta.kmismatch_search(texts, patterns, 1, alphabet="dna", both_strands=True, check=check)
    got = list(zip(*(x.tolist() for x in (hits.pattern, hits.text, hits.position, hits.distance, hits.strand))))
    assert got == ref.kmismatch(texts, patterns, 1, both_strands=True)
