"""k-differences search (asm_search), best substring match (asm_best) and the fixed-shape
profile (asm_profile) on the CPU: against the plain reference, edlib, real data; errors."""

import random

import pytest
from hypothesis import given, settings

import torchalign as ta

from . import asm_cases as cases
from . import reference as ref
from .conftest import read_fasta, texts
from .hamming_cases import mutate, rand_seq


@pytest.mark.parametrize("k", [0, 1, 3])
def test_search_random(rng, k):
    cases.check_search("cpu", rng, k=k)


def test_search_long_patterns_both_strands(rng):
    cases.check_search("cpu", rng, k=4, both_strands=True, text_lens=(0, 70, 200), pat_lens=(63, 64, 65, 130),
                       n_pat=3)


def test_best_and_profile(rng):
    cases.check_best_and_profile("cpu", rng)
    cases.check_best_and_profile("cpu", rng, text_lens=(0, 1, 64, 200), pat_lens=(1, 64, 65, 100))


def test_against_edlib(rng):
    cases.check_edlib("cpu", rng)


def test_tokens_and_unicode(rng):
    cases.check_tokens_and_unicode("cpu", rng)


def test_k_boundaries(rng):
    cases.check_k_boundaries("cpu", rng)


def test_k_at_least_pattern_length_makes_every_end_a_hit():
    h = ta.asm_search(["ACG", ""], "TT", 2, alphabet="dna")
    assert list(zip(h.text.tolist(), h.end.tolist())) == [(0, 0), (0, 1), (0, 2), (0, 3), (1, 0)]
    assert h.start.tolist() == [0, 0, 0, 1, 0]  # earliest start: "AC" -> "TT" is 2 substitutions


def test_real_genes_in_the_contig():
    """Genes' fragments, mutated, found where they were cut, against edlib's best locations."""
    import edlib

    rng = random.Random(11)
    contig = read_fasta("contig_OFHT01000022.fna")[0][1].upper()
    text = contig[:60_000]
    patterns, planted = [], []
    for _ in range(4):
        i = rng.randrange(len(text) - 120)
        patterns.append(mutate(rng, text[i : i + 100], 3)[:60] + text[i + 61 : i + 100])  # 3 subs + 1 deletion
        planted.append(i + 100)
    best, end = ta.asm_best(text, patterns, alphabet="dna")
    hits = ta.asm_search(text, patterns, 4, alphabet="dna")
    for q, p in enumerate(patterns):
        want = edlib.align(p, text, mode="HW", task="locations")
        assert int(best[q, 0]) == want["editDistance"] <= 4
        assert int(end[q, 0]) == want["locations"][0][1] + 1
        mine = hits.pattern == q
        assert planted[q] in hits.end[mine].tolist()


def test_text_in_chunks(monkeypatch):
    """A long text goes in overlapping chunks (_CELLS / patterns ends each: 4 Mbp for one
    pattern, 4,096 here); a match across a chunk edge is found, with its start."""
    from torchalign.cpu import asm as cpu

    monkeypatch.setattr(cpu, "_CELLS", 1 << 12)
    rng = random.Random(5)
    text = bytearray(rand_seq(rng, 10_000).encode())
    p = rand_seq(rng, 40)
    at = 4_096 - 20  # straddles the first chunk edge of a one-pattern search
    text[at : at + 40] = mutate(rng, p, 2).encode()
    hits = ta.asm_search(bytes(text), p, 2, alphabet="dna")
    assert at + 40 in hits.end.tolist()
    assert int(hits.start[hits.end.tolist().index(at + 40)]) == at


# texts across the kernels' 64-code chunks, patterns across Myers' 64-code words
@settings(max_examples=40, deadline=None)
@given(texts("ACG", (64, 128), 25), texts("ACG", (64,), 8, low=1))
def test_properties(text, pattern):
    d, end = ta.asm_best(text, pattern, alphabet="dna")
    d, end = int(d), int(end)
    column = ref.asm_column(pattern, text)  # the least distance of a substring ending at each position
    assert (d, end) == (min(column), column.index(min(column)))
    assert 0 <= d <= len(pattern) and d <= ref.levenshtein(pattern, text)
    if len(text) <= 25:  # the definition, by brute force over every substring
        assert d == min(ref.levenshtein(pattern, text[s:e]) for e in range(len(text) + 1) for s in range(e + 1))
    assert ref.levenshtein(pattern, text[end - (len(pattern) + d) if end >= len(pattern) + d else 0 : end]) >= d
    prof = ta.asm_profile(text, pattern, alphabet="dna")[0].tolist()
    assert prof == column[1:] and min(prof + [len(pattern)]) == d


def test_errors():
    with pytest.raises(ValueError, match="k: must be >= 0"):
        ta.asm_search("ACGT", "AC", -1)
    with pytest.raises(TypeError, match="k: expected an int"):
        ta.asm_search("ACGT", "AC", 1.5)
    with pytest.raises(ValueError, match="pattern 1 is empty"):
        ta.asm_search("ACGT", ["AC", ""], 1)
    with pytest.raises(ValueError, match="alphabet"):
        ta.asm_best(ta.encode("ACGT", "dna"), ta.encode("AC", "protein"))
    with pytest.raises(ValueError, match="both_strands: needs a DNA or RNA alphabet"):
        ta.asm_search("ACGT", "AC", 1, alphabet="protein", both_strands=True)
    with pytest.raises(ValueError, match="max_hits=2"):
        ta.asm_search("AAAAAA", "A", 0, max_hits=2)
