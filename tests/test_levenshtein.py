"""Levenshtein family on the CPU: against rapidfuzz and the plain reference, properties, errors."""

import random

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from rapidfuzz.distance import Levenshtein

import torchalign as ta

from . import levenshtein_cases as cases
from . import reference as ref
from .conftest import read_fasta, texts


def test_pairs_many_lengths(rng):
    cases.check_pairs("cpu", rng, lengths=(0, 1, 63, 64, 65, 1000), n=40)


def test_pairs_long():
    rng = random.Random(random.randrange(2**32))
    cases.check_pairs("cpu", rng, lengths=(10_000,), n=2)


@pytest.mark.parametrize("alphabet,symbols", [("protein", "ACDEFGHIKLMNPQRSTVWY"), ("bytes", "ab c\x00\xff")])
def test_pairs_alphabets(rng, alphabet, symbols):
    cases.check_pairs("cpu", rng, alphabet=alphabet, symbols=symbols)


def test_cdist(rng):
    cases.check_cdist("cpu", rng, na=23, nb=17)


def test_tokens_and_unicode(rng):
    cases.check_tokens("cpu", rng)
    cases.check_unicode_bytes("cpu")
    cases.check_unicode_chars("cpu", rng, n=30)


def test_max_distance_boundaries(rng):
    cases.check_max_distance_boundaries("cpu", rng)
    cases.check_band("cpu", rng, lengths=(130, 700), bounds=(0, 10, 64, 65))


def test_edge_cases():
    assert ta.levenshtein(["", "a", "", "abc"], ["", "", "a", "abc"]).tolist() == [0, 1, 1, 0]
    empty = ta.encode([], "dna")
    assert ta.levenshtein(empty, empty).shape == (0,)
    assert ta.levenshtein_cdist(empty, ["ACG"], alphabet="dna").shape == (0, 1)
    assert ta.levenshtein_cdist(["AC", ""], empty, alphabet="dna").shape == (2, 0)
    assert ta.levenshtein(["A" * 300], ["A" * 300]).tolist() == [0]  # all equal
    assert ta.levenshtein(["A" * 300], ["C" * 200]).tolist() == [300]  # nothing equal


def test_real_proteins():
    """Swiss-Prot queries (144..5,478 residues) against each other and rapidfuzz."""
    recs = [s for _, s in read_fasta("swissprot_queries20.fa")]
    short = sorted(recs, key=len)[:6]
    got = ta.levenshtein_cdist(short, short[::-1], alphabet="protein")
    assert got.tolist() == [[Levenshtein.distance(x, y) for y in short[::-1]] for x in short]
    mito = [s for _, s in read_fasta("MT-human.fa")][0][:2000], [s for _, s in read_fasta("MT-chimp.fa")][0][:2000]
    assert ta.levenshtein([mito[0]], [mito[1]], alphabet="dna").tolist() == [Levenshtein.distance(*mito)]


@settings(deadline=None, max_examples=50)
@given(st.lists(texts("ACGT", (64, 128), 20), min_size=3, max_size=3))  # across Myers' 64-code words
def test_metric_properties(seqs):
    d = ta.levenshtein_cdist(seqs, seqs, alphabet="dna")
    assert (d.diagonal() == 0).all() and torch.equal(d, d.T)
    x, y, z = seqs
    assert d[0, 2] <= d[0, 1] + d[1, 2]
    assert abs(len(x) - len(y)) <= d[0, 1] <= max(len(x), len(y))
    assert d[0, 1] == ref.levenshtein(x, y)


def test_errors():
    with pytest.raises(ValueError, match="max_distance: must be >= 0"):
        ta.levenshtein(["a"], ["b"], max_distance=-1)
    with pytest.raises(ValueError, match="a has 2 sequences and b has 1"):
        ta.levenshtein(["a", "b"], ["a"])
    with pytest.raises(ValueError, match="alphabet 'protein' differs"):
        ta.levenshtein_cdist(ta.encode("ACG", "dna"), ta.encode("ACG", "protein"))
    good = ta.encode(["ACGT"], "dna")
    bad = ta.SequenceBatch(torch.tensor([0, 1, 99, 3], dtype=torch.uint8), good.offsets, "dna")
    with pytest.raises(ValueError, match=r"b: codes must lie in \[0, 15\)"):
        ta.levenshtein(good, bad)


def test_check_false_and_hand_built_batches(rng):
    a, b = cases.related_pairs(rng, (0, 5, 70), 10)
    A, B = ta.encode(a, "dna"), ta.encode(b, "dna")
    bare = ta.SequenceBatch(B.codes, B.offsets, "dna")  # no length hint
    want = ta.levenshtein_cdist(A, B)
    assert torch.equal(ta.levenshtein_cdist(A, B, check=False), want)
    assert torch.equal(ta.levenshtein_cdist(A, bare, check=False), want)
