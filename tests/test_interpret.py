"""The Triton kernels on the CPU under TRITON_INTERPRET=1 (run as its own pytest process):
the public ops routed through the kernels give the reference's integers."""

import random

import pytest
import torch

import torchalign as ta

from . import hamming_cases as cases
from . import reference as ref

pytestmark = [pytest.mark.interpret, pytest.mark.usefixtures("kernels_on_cpu")]


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


# ---- Levenshtein -----------------------------------------------------------------------
@pytest.mark.parametrize("algorithm", ["myers", "dp"])
def test_levenshtein_pairs(rng, algorithm):
    from . import levenshtein_cases as lev

    lev.check_pairs("cpu", rng, lengths=(0, 1, 5, 63, 64, 65, 128), n=10, algorithm=algorithm)
    lev.check_unicode_bytes("cpu", algorithm=algorithm)


def test_levenshtein_dp_rows_wider_than_a_chunk(rng):
    from . import levenshtein_cases as lev

    lev.check_pairs("cpu", rng, lengths=(129, 140), n=2, algorithm="dp")


@pytest.mark.parametrize("algorithm", ["myers", "dp"])
def test_levenshtein_cdist_tokens_boundaries(rng, algorithm):
    from . import levenshtein_cases as lev

    lev.check_cdist("cpu", rng, lengths=(0, 1, 7, 33), na=5, nb=4, algorithm=algorithm)
    lev.check_tokens("cpu", rng, n=5, max_len=20, algorithm="dp" if algorithm == "dp" else "auto")
    lev.check_unicode_chars("cpu", rng, n=4, algorithm="dp" if algorithm == "dp" else "auto")
    lev.check_max_distance_boundaries("cpu", rng, n=4, algorithm=algorithm)


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
    asm.check_best_and_profile("cpu", rng, algorithm="dp", text_lens=(0, 1, 100, 300), pat_lens=(1, 20, 70))
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
    """Ukkonen's band forced for every multiword pattern with a bound: max_distance at
    and around the boundaries, k-difference search and its starts."""
    from torchalign_kernels import myers

    from . import asm_cases as asm
    from . import levenshtein_cases as lev

    lev.check_band("cpu", rng, lengths=(5, 50, 70, 128), bounds=(0, 3, 30), n=6)  # the cut-off in registers
    monkeypatch.setattr(myers, "BAND_SHARE", 0)
    lev.check_band("cpu", rng, lengths=(130, 200), bounds=(0, 5, 64), n=3)
    for k in (0, 4):
        asm.check_search("cpu", rng, k=k, text_lens=(0, 300), pat_lens=(130, 150), n_texts=2, n_pat=2)

def test_align_kernel(rng):
    """The inter-task alignment kernel: tiles of 48 rows, queries of 47, 48, 49 and 97
    residues (tile edges), every mode, affine and linear gaps, DNA scoring, edge cases."""
    from . import align_cases as al

    al.check_reference("cpu", rng, n=5, lengths=(0, 1, 47, 48, 49, 97), gaps=((11, 1), (3, 0)))
    al.check_dna("cpu", rng, n=4)
    al.check_edges("cpu")


def test_align_long_targets_wavefront(monkeypatch, rng):
    """Targets past LONG_TARGET run one pair per program, row tiles as a wavefront; with
    two lanes per pass, queries of 100 take two passes. In a search, the database's long
    chunks go there (beside the packed scan of the rest)."""
    from torchalign_kernels import align, align_scan, align_wave

    from torchalign.ops import align as ops_align

    from . import align_cases as al

    monkeypatch.setattr(align, "LONG_TARGET", 20)
    monkeypatch.setattr(align_wave, "W_MAX", 2)
    al.check_reference("cpu", rng, n=5, lengths=(0, 1, 17, 49, 100), gaps=((11, 1),))
    monkeypatch.setattr(align_scan, "ROWS", 8)
    monkeypatch.setattr(ops_align, "SCAN_LONG", 20)
    monkeypatch.setattr(ops_align, "SCAN_WAVE", 20)
    al.check_search("cpu", rng, n_q=2, n_db=6, lengths=(0, 1, 16, 33), top_k=3, modes=("local",))


def test_search_kernel(monkeypatch, rng):
    """ta.search through the kernels: the packed int16 scan (local) or the pairs kernel
    (global, semiglobal) for the scores, ends for the top hits; tiles of 8 rows (fast
    under the interpreter; 17, 33 and 40 residues cross them)."""
    from torchalign_kernels import align_scan

    from . import align_cases as al

    monkeypatch.setattr(align_scan, "ROWS", 8)
    al.check_search("cpu", rng, n_q=3, n_db=9, lengths=(0, 1, 16, 33), top_k=4)
    al.check_search_wrap("cpu", rng)
