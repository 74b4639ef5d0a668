"""Messy input through the API (issue 12, items 9 and 10): selenocysteine and pyrrolysine,
integers of every kind and size, text that is not text, and the k-mismatch search streamed
in bounded memory on the CPU."""

import random

import numpy as np
import pytest
import torch
from Bio.Align import substitution_matrices

import torchalign as ta
import torchalign.cpu.hamming as cpu_hamming
from torchalign.io import read_sequences

from . import hamming_cases as hcases
from . import reference as ref
from .align_cases import biopython, rand_protein, related
from .conftest import data_file

# ---- selenocysteine (U) and pyrrolysine (O) ---------------------------------------
# NCBI BLAST+ scores U with C's row and column and O with X's (blast_stat.c, "Treat U as
# C, not X", 2016); Biopython's BLASTP matrix, NCBI's BLASTP scores, has the same rows.
STAND_IN = str.maketrans("UOuo", "CXCX")


def test_biopython_blastp_makes_the_same_choice():
    blastp = substitution_matrices.load("BLASTP")
    for c in "ARNDCQEGHILKMFPSTWYVBZX*UO":
        assert blastp["U", c] == blastp["C", c.translate(STAND_IN)]
        assert blastp["O", c] == blastp["X", c.translate(STAND_IN)]


@pytest.mark.parametrize("name", ["BLOSUM62", "BLOSUM45", "BLOSUM80", "PAM30", "PAM250"])
def test_u_as_c_and_o_as_x_in_every_cell(name):
    s = ta.Scoring(name)
    bio = substitution_matrices.load(name)
    assert s.symbols == "ARNDCQEGHILKMFPSTWYVBZX*UO"
    for a in s.symbols:
        for b in s.symbols:
            assert s.score(a, b) == bio[a.translate(STAND_IN), b.translate(STAND_IN)], (a, b)


def _rare(rng, n):
    """A protein with U, O, X, B, Z, lower case: what real proteomes hold."""
    return "".join(rng.choice("ARNDCQEGHILKMFPSTWYVUOXBZuoc") for _ in range(n))


@pytest.mark.parametrize("mode", ["local", "global", "semiglobal"])
def test_rare_residues_against_biopython_rewritten(rng, mode):
    """Scores equal Biopython's on the sequences with U written as C and O as X."""
    s = ta.Scoring("BLOSUM62", 10, 2)
    plain = ta.Scoring("BLOSUM62", 10, 2, strict_symbols=True)  # the 24 letters Biopython's BLOSUM62 has
    aligner = biopython(mode, plain)
    qs = [_rare(rng, rng.randint(1, 40)) for _ in range(6)]
    db = [related(rng, q.upper(), "ARNDCQEGHILKMFPSTWYVUOX") if i % 2 else _rare(rng, rng.randint(1, 50))
          for i, q in enumerate(qs)]
    want = [[aligner.score(t.upper().translate(STAND_IN), q.upper().translate(STAND_IN)) for t in db] for q in qs]
    got = ta.align_score([q for q in qs for _ in db], db * len(qs), s, mode).score.view(len(qs), len(db))
    assert got.tolist() == want
    r = ta.search(qs, db, s, top_k=3, mode=mode)
    for i in range(len(qs)):
        best = sorted(((-w, j) for j, w in enumerate(want[i])))[:3]
        assert r.scores[i].tolist() == [-w for w, _ in best] and r.indices[i].tolist() == [j for _, j in best]


def test_real_selenoprotein():
    """Bovine GPX1 (data/GPX1_BOVIN.fa, U at 52) searched against itself and a real proteome."""
    [name], gpx = read_sequences(data_file("GPX1_BOVIN.fa"), "protein")
    seq = gpx.decode()[0]
    assert name == "sp|P00435|GPX1_BOVIN" and seq[51] == "U" and len(seq) == 205
    as_c = seq.translate(STAND_IN)
    _, proteome = read_sequences(data_file("proteome_HG003687.fa"), "protein")
    db = proteome.decode()[:150] + [as_c, seq]
    s = ta.Scoring()
    r = ta.search([seq], db, s, top_k=2)
    self_score = biopython("local", ta.Scoring(strict_symbols=True)).score(as_c, as_c)
    assert r.scores[0].tolist() == [self_score, self_score] and r.indices[0].tolist() == [150, 151]
    aligner = biopython("local", ta.Scoring(strict_symbols=True))
    some = db[:20]
    got = ta.align_score([seq] * len(some), some, s).score.tolist()
    assert got == [aligner.score(t, as_c) for t in some]
    a = ta.traceback([seq], [as_c], s)[0]  # U against C: scored as C-C, shown as a substitution
    assert a.score == self_score and a.cigar == f"51=1X{len(seq) - 52}="


def test_strict_symbols_name_the_symbol_and_the_fix():
    strict = ta.Scoring(strict_symbols=True)
    with pytest.raises(ValueError, match=r"database: symbol 'O' is not in BLOSUM62.*leave strict symbols off"):
        ta.search(["MKV"], ["MKOV"], strict)
    with pytest.raises(ValueError, match=r"symbol 'U' is not in BLOSUM62"):
        strict.score("U", "C")
    assert ta.Scoring().score("u", "c") == 9  # lower case too


@pytest.mark.parametrize("given, canonical", [("blosum62", "BLOSUM62"), ("Blosum45", "BLOSUM45"),
                                              ("pam30", "PAM30"), ("nuc.4.4", "NUC.4.4")])
def test_matrix_names_in_any_case(given, canonical):
    s = ta.Scoring(given)
    assert s.name == canonical and torch.equal(s.table, ta.Scoring(canonical).table)


def test_unknown_matrix_still_named():
    with pytest.raises(ValueError, match="unknown name 'blosum63'"):
        ta.Scoring("blosum63")


# ---- integers past what a kernel takes ------------------------------------------
HUGE = [2**31, 2**32, 2**63, 10**30]


def _same(a, b) -> bool:
    return all(torch.equal(x, y) for x, y in zip(a, b, strict=True))


@pytest.mark.parametrize("k", HUGE)
def test_kmismatch_huge_k_is_every_window(k):
    hits = ta.kmismatch_search("ACGTACGT", "CG", k, alphabet="dna")
    assert hits.position.tolist() == list(range(7))
    assert hits.distance.tolist() == [ref.hamming("CG", "ACGTACGT"[i : i + 2]) for i in range(7)]
    both = ta.kmismatch_search(["ACGTAC", "GT"], ["CG", "ACG"], k, alphabet="dna", both_strands=True, iupac=True)
    assert _same(both, ta.kmismatch_search(["ACGTAC", "GT"], ["CG", "ACG"], 3, alphabet="dna", both_strands=True,
                                           iupac=True))


def test_huge_k_on_a_batch_without_length_hints():
    codes = torch.tensor([0, 1, 2, 3, 0, 1, 2, 3], dtype=torch.uint8)
    texts = ta.SequenceBatch(codes, torch.tensor([0, 8]), "dna")  # built by hand: no max_length
    pats = ta.SequenceBatch(codes[1:3].clone(), torch.tensor([0, 2]), "dna")
    assert pats.max_length is None
    assert ta.kmismatch_search(texts, pats, 2**40).position.tolist() == list(range(7))
    assert ta.asm_search(texts, pats, 2**40).end.tolist() == list(range(9))


@pytest.mark.parametrize("k", HUGE)
def test_asm_and_primers_huge_k(k):
    want = ta.asm_search("ACGTTGCA", ["GTT", "A"], 3, alphabet="dna")
    assert _same(ta.asm_search("ACGTTGCA", ["GTT", "A"], k, alphabet="dna"), want)
    assert ta.kdiff_primers("ACGTACGT", "ACG", k).tolist() == [0] * 8
    assert ta.kdiff_primers("ACGTACGT", "ACG", 9).tolist() == [0] * 8


@pytest.mark.parametrize("d", HUGE)
def test_levenshtein_huge_max_distance(d):
    a, b = ["kitten", "", "flaw"], ["sitting", "abc", "lawn"]
    assert ta.levenshtein(a, b, max_distance=d).tolist() == [3, 3, 2]
    assert ta.levenshtein_cdist(a, b, max_distance=d).tolist() == ta.levenshtein_cdist(a, b).tolist()


def test_huge_counts_and_budgets():
    db = ["MKVLAAGIW", "GGGGHEAGAWGHEEGG", "PAWHEAE"]
    want = ta.search(["HEAGAWGHEE"], db, top_k=3)
    for top_k in (2**31, 2**63, 10**30):
        assert _same(ta.search(["HEAGAWGHEE"], db, top_k=top_k), want)
        assert _same(ta.search(["HEAGAWGHEE"], db, top_k=top_k, batch_residues=2**70), want)
    assert ta.kmismatch_search("ACGT", "CG", 0, max_hits=2**64, alphabet="dna").position.tolist() == [1]
    assert ta.asm_search("ACGT", "CG", 0, max_hits=10**30, alphabet="dna").end.tolist() == [3]
    assert ta.traceback(["HEAG"], ["HEAG"], max_cells=2**65)[0].cigar == "4="


@pytest.mark.parametrize("kind", [np.int64, np.int32, np.uint8, np.int16, torch.tensor])
def test_any_integer_operator_index_takes(kind):
    one = kind(1)
    assert ta.kmismatch_search("ACGTACGT", "CG", kind(2), alphabet="dna", max_hits=kind(100)).position.numel() == 7
    assert ta.levenshtein(["kitten"], ["sitting"], max_distance=kind(2)).tolist() == [3]
    assert ta.search(["HEAG"], ["HEAG", "PAW"], top_k=one).indices.tolist() == [[0]]
    assert ta.kdiff_primers("ACTG", "AGCAAG", kind(2)).tolist() == [3, 3, 0, 0]
    assert ta.Scoring(gap_open=kind(10), gap_extend=one).gap_open == 10


@pytest.mark.parametrize("call, name", [
    (lambda v: ta.kmismatch_search("ACGT", "CG", v, alphabet="dna"), "k"),
    (lambda v: ta.kmismatch_search("ACGT", "CG", 1, max_hits=v, alphabet="dna"), "max_hits"),
    (lambda v: ta.asm_search("ACGT", "CG", v, alphabet="dna"), "k"),
    (lambda v: ta.levenshtein("ab", "ac", max_distance=v), "max_distance"),
    (lambda v: ta.search(["HEAG"], ["HEAG"], top_k=v), "top_k"),
    (lambda v: ta.search(["HEAG"], ["HEAG"], batch_residues=v), "batch_residues"),
    (lambda v: ta.kdiff_primers("ACGT", "AC", v), "k"),
    (lambda v: ta.traceback(["HEAG"], ["HEAG"], max_cells=v), "max_cells"),
    (lambda v: ta.Scoring(gap_open=v, gap_extend=0), "gap_open"),
])
def test_bad_integers_name_the_argument(call, name):
    for bad in (True, np.True_, 1.0, np.float64(2.0), "3", torch.tensor(1.0), torch.tensor(True)):
        with pytest.raises(TypeError, match=f"^{name}: expected an integer"):
            call(bad)
    with pytest.raises(ValueError, match=f"^{name}: must be >= "):
        call(-2**70)


def test_scores_past_the_limit_name_the_argument():
    with pytest.raises(ValueError, match="^gap_open: must be <= "):
        ta.Scoring(gap_open=2**63)
    with pytest.raises(ValueError, match="^match: must be <= "):
        ta.Scoring(match=2**63, mismatch=-1)
    with pytest.raises(ValueError, match="^mismatch: must be >= "):
        ta.Scoring(match=1, mismatch=-2**40)


# ---- strings that are not text ------------------------------------------------------
@pytest.mark.parametrize("a, b, kw, message", [
    ("\ud800", "a", {}, r"^a: sequence 0: position 0 holds '\\ud800', a lone surrogate"),
    ("a", ["ok", "x\udfff"], {}, r"^b: sequence 1: position 1 holds '\\udfff', a lone surrogate"),
    ("\ud800", "a", {"alphabet": "unicode"}, r"^a: sequence 0: position 0 holds '\\ud800'"),
    (b"\xff", b"a", {"alphabet": "unicode"}, r"^a: sequence 0: byte 0xff at position 0 is not UTF-8"),
    ("ab\udcff", "a", {"alphabet": "dna"}, r"^a: sequence 0: position 2 holds byte 0xff, which is not UTF-8"),
    ("AC\u00e9", "A", {"alphabet": "dna"}, r"^a: sequence 0: symbol 'é' at position 2 is not in the dna alphabet"),
])
def test_non_text_strings_raise_value_error(a, b, kw, message):
    for fn in (ta.levenshtein, ta.levenshtein_cdist):
        with pytest.raises(ValueError, match=message):
            fn(a, b, **kw)


def test_unicode_still_compares_characters():
    assert ta.levenshtein(["naïve", b"na\xc3\xafve"], ["naive", b"naive"], alphabet="unicode").tolist() == [1, 1]


# ---- the CPU k-mismatch search, streamed ----------------------------------------------
@pytest.fixture
def tiny_blocks(monkeypatch):
    """BLOCK_ELEMS of 13: slices of a few windows and groups of a few patterns, so hits
    fall on every slice border; records each block's buffers and slices."""
    monkeypatch.setattr(cpu_hamming, "BLOCK_ELEMS", 13)
    seen = []
    distances = cpu_hamming._Block.distances

    def record(self, windows):
        seen.append((self.rows, self.dist.numel(), windows.shape[0], self.dist.shape[1]))
        return distances(self, windows)

    monkeypatch.setattr(cpu_hamming._Block, "distances", record)
    return seen


@pytest.mark.parametrize("both_strands, iupac", [(False, False), (True, False), (True, True)])
def test_kmismatch_in_tiny_blocks_matches_the_reference(tiny_blocks, rng, both_strands, iupac):
    n = hcases.check_kmismatch("cpu", rng, k=2, both_strands=both_strands, iupac=iupac, n_pat=7, text_len=90)
    assert n > 0 and len(tiny_blocks) > 20
    for rows, buffer, r, g in tiny_blocks:
        assert r <= rows and r * g <= max(13, g) and buffer <= max(13, g)


def test_profile_in_tiny_blocks_matches_the_reference(tiny_blocks, rng):
    hcases.check_profile("cpu", rng, iupac=True, n_pat=6)
    assert len(tiny_blocks) > 20


def test_kmismatch_large_alphabet_in_tiny_blocks(tiny_blocks, rng):
    texts = ["".join(rng.choice("abcdefgh") for _ in range(rng.randint(0, 60))) for _ in range(3)]
    pats = [texts[0][5:9] or "ab", "bcd", "h"]
    got = ta.kmismatch_search(texts, pats, 1)  # bytes: 256 codes, compared directly
    want = ref.kmismatch(texts, pats, 1)
    assert list(zip(*(x.tolist() for x in (got.pattern, got.text, got.position, got.distance, got.strand)))) == want


def test_kmismatch_memory_does_not_grow_with_the_text(monkeypatch):
    """A block never holds a text x patterns matrix: every buffer is within BLOCK_ELEMS."""
    sizes = []
    init = cpu_hamming._Block.__init__

    def record(self, pcodes, n_symbols, table):
        init(self, pcodes, n_symbols, table)
        sizes.append(max(t.numel() for t in vars(self).values() if isinstance(t, torch.Tensor)))

    monkeypatch.setattr(cpu_hamming._Block, "__init__", record)
    g = torch.Generator().manual_seed(1)
    text = torch.randint(0, 4, (3_000_000,), generator=g, dtype=torch.uint8)
    pats = list(text[1_000_000 : 1_000_000 + 64 * 20].view(64, 20))  # 64 guides of 20 bp, each present once
    hits = ta.kmismatch_search(ta.SequenceBatch.from_codes([text], "dna"), ta.SequenceBatch.from_codes(pats, "dna"),
                               0, both_strands=True)
    assert set((1_000_000 + 20 * torch.arange(64)).tolist()) <= set(hits.position.tolist())
    assert sizes and max(sizes) <= cpu_hamming.BLOCK_ELEMS < 3_000_000 * 128


def test_too_many_hits_counts_them_all(rng):
    text = "".join(rng.choice("AC") for _ in range(3000))
    n = ta.kmismatch_search(text, ["AC", "CA"], 1, alphabet="dna").position.numel()
    with pytest.raises(ValueError, match=f"{n} hits exceed max_hits=10"):
        ta.kmismatch_search(text, ["AC", "CA"], 1, alphabet="dna", max_hits=10)


@pytest.mark.gpu
def test_gpu_rare_residues_and_huge_integers():
    """The kernels see U and O rows and clamped integers: the same results as the CPU."""
    rng = random.Random(12)
    qs = [_rare(rng, rng.randint(5, 60)) for _ in range(4)]
    db = [_rare(rng, rng.randint(5, 80)) for _ in range(40)]
    for mode in ("local", "global", "semiglobal"):
        cpu = ta.search(qs, db, top_k=5, mode=mode)
        gpu = ta.search(ta.encode(qs, "protein", "cuda"), ta.encode(db, "protein", "cuda"), top_k=2**40, mode=mode)
        assert torch.equal(gpu.scores[:, :5].cpu(), cpu.scores)
    for k in (2**31, 2**32, 2**63):
        h = ta.kmismatch_search(ta.encode("ACGTACGT", "dna", "cuda"), ta.encode("CG", "dna", "cuda"), k)
        assert h.position.tolist() == list(range(7))
        e = ta.asm_search(ta.encode("ACGTACGT", "dna", "cuda"), ta.encode("CG", "dna", "cuda"), k)
        assert e.end.tolist() == list(range(9))
    a, b = ta.encode(["kitten"], "bytes", "cuda"), ta.encode(["sitting"], "bytes", "cuda")
    assert ta.levenshtein(a, b, max_distance=2**31).tolist() == [3]
    alpha, beta = ta.encode("ACGTACGT", "dna", "cuda"), ta.encode("ACG", "dna", "cuda")
    assert ta.kdiff_primers(alpha, beta, 2**31).tolist() == [0] * 8


def test_random_related_proteins_still_agree(rng):
    """(Regression guard) the U and O rows change nothing for the 24 BLOSUM letters."""
    qs = [rand_protein(rng, rng.randint(1, 30)) for _ in range(4)]
    db = [related(rng, q) for q in qs]
    assert torch.equal(ta.align_score(qs, db).score, ta.align_score(qs, db, ta.Scoring(strict_symbols=True)).score)


@pytest.mark.interpret
@pytest.mark.usefixtures("kernels_on_cpu")
def test_interpreter_kernels_score_rare_residues(monkeypatch, rng):
    """The alignment kernels with the 26-row table (U and O), the packed local scan among
    them, give Biopython's scores on the rewritten sequences; and the window kernels take
    clamped integers."""
    from torchalign_kernels import align_scan

    monkeypatch.setattr(align_scan, "ROWS", 8)
    aligner = {m: biopython(m, ta.Scoring(strict_symbols=True)) for m in ("local", "global")}
    qs = [_rare(rng, n) for n in (3, 17)]
    db = [_rare(rng, n) for n in (1, 9, 20, 33)]
    for mode in ("local", "global"):
        r = ta.search(qs, db, top_k=2, mode=mode)
        for i, q in enumerate(qs):
            q_as = q.upper().translate(STAND_IN)
            want = sorted(-aligner[mode].score(t.upper().translate(STAND_IN), q_as) for t in db)
            assert r.scores[i].tolist() == [-w for w in want[:2]]
    assert ta.kmismatch_search("ACGTACGT", "CG", 2**40, alphabet="dna").position.tolist() == list(range(7))
    assert ta.asm_search("ACGTACGT", "CG", 2**40, alphabet="dna").end.tolist() == list(range(9))
