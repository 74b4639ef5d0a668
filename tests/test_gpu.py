"""CUDA: the kernels against the reference and the CPU implementation, at GPU sizes."""

import random

import pytest
import torch

import torchalign as ta

from . import hamming_cases as cases
from . import reference as ref

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("alphabet", ["dna", "protein", "bytes"])
def test_pairs(rng, alphabet):
    cases.check_pairs("cuda", rng, n=300, alphabet=alphabet)


@pytest.mark.parametrize("alphabet", ["dna", "dna+n", "protein", "bytes"])
def test_cdist(rng, alphabet):
    cases.check_cdist("cuda", rng, na=70, nb=150, length=77, alphabet=alphabet)


def test_cdist_tokens(rng):
    cases.check_tokens_cdist("cuda", rng, na=40, nb=33, length=50)


@pytest.mark.parametrize("iupac", [False, True])
def test_profile(rng, iupac):
    cases.check_profile("cuda", rng, iupac=iupac, n_texts=6, text_len=400, n_pat=20, max_pat=70)


@pytest.mark.parametrize("both_strands,iupac,k", [(False, False, 0), (True, False, 3), (True, True, 2)])
def test_kmismatch(rng, both_strands, iupac, k):
    cases.check_kmismatch("cuda", rng, k=k, both_strands=both_strands, iupac=iupac,
                          n_texts=5, text_len=500, n_pat=30, max_pat=40)


def _same_on_cpu_and_cuda(fn, *batches):
    got = fn(*(b.to("cuda") for b in batches))
    want = fn(*batches)
    got = got if isinstance(got, tuple) else (got,)
    want = want if isinstance(want, tuple) else (want,)
    for g, w in zip(got, want):
        assert g.device.type == "cuda" and torch.equal(g.cpu(), w)


def test_large_random_cuda_equals_cpu():
    g = torch.Generator().manual_seed(random.randrange(2**32))
    a = ta.encode(torch.randint(0, 5, (600, 256), generator=g, dtype=torch.uint8), "dna")
    b = ta.encode(torch.randint(0, 5, (300, 256), generator=g, dtype=torch.uint8), "dna")
    _same_on_cpu_and_cuda(ta.hamming_cdist, a, b)
    _same_on_cpu_and_cuda(ta.hamming, a, a.to("cpu"))
    text = ta.encode(torch.randint(0, 4, (1, 300_000), generator=g, dtype=torch.uint8), "dna")
    pats = ta.encode(torch.randint(0, 4, (64, 23), generator=g, dtype=torch.uint8), "dna")
    _same_on_cpu_and_cuda(lambda t, p: ta.kmismatch_search(t, p, 6, both_strands=True), text, pats)
    _same_on_cpu_and_cuda(lambda t, p: ta.hamming_profile(t, p, iupac=True), text, pats)


def test_contig_cuda_equals_cpu_and_reference():
    got, texts, patterns = cases.check_contig("cuda", n_pat=64)
    want, _, _ = cases.check_contig("cpu", n_pat=64)
    assert got == want
    short = cases.check_contig("cuda", span=6000)
    assert short[0] == ref.kmismatch(short[1], short[2], 3, both_strands=True)


def test_check_false_is_sync_free_and_equal(rng):
    texts, patterns = cases.texts_and_patterns(rng, n_texts=4, text_len=300, n_pat=12)
    t, p = ta.encode(texts, "dna", "cuda"), ta.encode(patterns, "dna", "cuda")
    want = ta.hamming_profile(t, p)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    ta.hamming_profile(t, p, check=False)  # warm up (compiles the kernel)
    torch.cuda.synchronize()
    with torch.cuda.graph(graph):
        out = ta.hamming_profile(t, p, check=False)
    graph.replay()
    torch.cuda.synchronize()
    assert torch.equal(out, want)


def test_inputs_on_different_devices_are_refused():
    with pytest.raises(ValueError, match="b: on cpu but a is on cuda"):
        ta.hamming(ta.encode(["ACGT"], "dna", "cuda"), ta.encode(["ACGT"], "dna"))
    with pytest.raises(ValueError, match="patterns: on cpu but texts is on cuda"):
        ta.kmismatch_search(ta.encode(["ACGT"], "dna", "cuda"), ta.encode(["AC"], "dna"), 1)


# ---- Levenshtein -----------------------------------------------------------------------
@pytest.mark.parametrize("algorithm", ["myers", "dp"])
def test_levenshtein_pairs_and_cdist(rng, algorithm):
    from . import levenshtein_cases as lev

    lev.check_pairs("cuda", rng, lengths=(0, 1, 63, 64, 65, 128), n=200, algorithm=algorithm)
    lev.check_cdist("cuda", rng, na=40, nb=33, algorithm=algorithm)
    lev.check_unicode_bytes("cuda", algorithm=algorithm)
    lev.check_max_distance_boundaries("cuda", rng, algorithm=algorithm)


def test_levenshtein_long_and_tokens(rng):
    from . import levenshtein_cases as lev

    lev.check_pairs("cuda", rng, lengths=(0, 1, 63, 64, 65, 1000), n=60)
    lev.check_pairs("cuda", rng, lengths=(10_000,), n=2)
    lev.check_tokens("cuda", rng, n=40, max_len=300)


def test_levenshtein_cuda_equals_cpu_on_proteins():
    from .conftest import read_fasta

    prots = [s for _, s in read_fasta("proteome_HG003687.fa")][:48]  # the CPU side is most of the time
    a, b = ta.encode(prots[:24], "protein"), ta.encode(prots[24:], "protein")
    got = ta.levenshtein_cdist(a.to("cuda"), b.to("cuda"))
    assert torch.equal(got.cpu(), ta.levenshtein_cdist(a, b))


def test_levenshtein_myers_multiword_cdist(rng):
    from . import levenshtein_cases as lev

    lev.check_cdist("cuda", rng, lengths=(0, 63, 200, 1000), na=24, nb=20, algorithm="myers")


# ---- approximate matching (k differences) -------------------------------------------------
@pytest.mark.parametrize("k,both_strands", [(0, False), (3, True)])
def test_asm_search(rng, k, both_strands):
    from . import asm_cases as asm

    asm.check_search("cuda", rng, k=k, both_strands=both_strands, text_lens=(0, 1, 300, 2000),
                     pat_lens=(1, 20, 64, 65, 200), n_pat=8)


@pytest.mark.parametrize("algorithm", ["myers", "dp"])
def test_asm_algorithms_agree(rng, algorithm):
    from . import asm_cases as asm

    asm.check_search("cuda", rng, k=4, algorithm=algorithm, text_lens=(0, 1, 3000), pat_lens=(1, 30, 200), n_pat=6)
    asm.check_best_and_profile("cuda", rng, algorithm=algorithm, text_lens=(0, 700), pat_lens=(1, 64, 130))
    asm.check_tokens_and_unicode("cuda", rng, algorithm=algorithm)


def test_asm_best_profile_edlib_tokens(rng):
    from . import asm_cases as asm

    asm.check_best_and_profile("cuda", rng, text_lens=(0, 1, 300, 1000), pat_lens=(1, 20, 70, 130))
    asm.check_edlib("cuda", rng, n=20, text_len=3000, m=200)
    asm.check_k_boundaries("cuda", rng)
    asm.check_tokens_and_unicode("cuda", rng)


def test_asm_cuda_equals_cpu_on_the_contig():
    from .conftest import read_fasta
    from .hamming_cases import mutate

    rng = random.Random(3)
    contig = read_fasta("contig_OFHT01000022.fna")[0][1].upper()[:150_000]  # the CPU side is most of the time
    patterns = [mutate(rng, contig[i : i + m], 3) for i, m in ((1000, 30), (100_000, 100), (140_000, 700))]
    t, p = ta.encode(contig, "dna"), ta.encode(patterns + ["ACGTACGTTTGACA"], "dna")
    for fn in (lambda t, p: ta.asm_search(t, p, 6, both_strands=True), ta.asm_best):
        want = fn(t, p)
        got = fn(t.to("cuda"), p.to("cuda"))
        assert all(torch.equal(g.cpu(), w) for g, w in zip(got, want))
    assert torch.equal(ta.asm_profile(t.to("cuda"), p.to("cuda")).cpu(), ta.asm_profile(t, p))


def test_asm_genome_scale_single_pattern():
    """A 20 Mbp text and one pattern: chunked over the GPU; planted matches at chunk-sized strides."""
    rng = torch.Generator().manual_seed(1)
    text = torch.randint(0, 4, (20_000_000,), dtype=torch.uint8, generator=rng)
    pat = torch.randint(0, 4, (150,), dtype=torch.uint8, generator=rng)
    spots = list(range(123_457, 20_000_000 - 200, 1_999_993))
    for s in spots:
        text[s : s + 150] = pat
        text[s + 70] = (text[s + 70] + 1) % 4  # one substitution
    t, p = ta.encode(text.cuda(), "dna"), ta.encode(pat.cuda(), "dna")
    hits = ta.asm_search(t, p, 1)
    assert [(s, s + 150) for s in spots] == [(a, b) for a, b, d in zip(hits.start.tolist(), hits.end.tolist(),
                                                                         hits.distance.tolist()) if d == 1
                                             and b - a == 150]
    d, end = ta.asm_best(t, p)
    assert int(d) == 1 and int(end) == spots[0] + 150


def test_myers_column_in_memory_and_band_equal_wavefront(monkeypatch, rng):
    from torchalign_kernels import myers

    from . import asm_cases as asm

    texts, patterns = asm.texts_and_patterns(rng, text_lens=(5000,), pat_lens=(200, 700), n_texts=2, n_pat=6)
    t, p = ta.encode(texts, "dna", "cuda"), ta.encode(patterns, "dna", "cuda")
    monkeypatch.setattr(myers, "BAND_SHARE", 1 << 30)  # never the band while the wavefront reaches
    wave = ta.asm_search(t, p, 20), ta.asm_best(t, p)
    cpu = ta.asm_search(t.to("cpu"), p.to("cpu"), 20), ta.asm_best(t.to("cpu"), p.to("cpu"))
    monkeypatch.setattr(myers, "BAND_SHARE", 0)  # always the band when there is a bound
    band = ta.asm_search(t, p, 20), ta.asm_best(t, p)
    monkeypatch.setattr(myers, "WAVE", False)  # the band kernel for everything
    memory = ta.asm_search(t, p, 20), ta.asm_best(t, p)
    for other in (cpu, band, memory):
        assert all(torch.equal(a.cpu(), b.cpu()) for x, y in zip(wave, other) for a, b in zip(x, y))
    assert wave[0].end.numel() > 0


def test_levenshtein_band(monkeypatch, rng):
    """max_distance on long pairs takes Ukkonen's band by default; forced on shorter ones."""
    from torchalign_kernels import myers

    from . import levenshtein_cases as lev

    lev.check_band("cuda", rng, lengths=(200, 1000, 5000), bounds=(0, 10, 64, 300), n=12)
    lev.check_band("cuda", rng, lengths=(1, 20, 64, 65, 100, 128), bounds=(0, 3, 10, 64), n=40)  # registers
    monkeypatch.setattr(myers, "BAND_SHARE", 0)
    lev.check_band("cuda", rng, lengths=(130, 200, 700), bounds=(0, 5, 64, 65), n=30)


# Triton compiles a kernel per MODE and per class of each int argument (1, a multiple of 16,
# other): gaps (11, 1) and (3, 0) are two classes of the four; counts of pairs that are
# neither 1 nor a multiple of 16 share one. (Every gap value: the CPU and interpreter tiers.)
GPU_GAPS = ((11, 1), (3, 0))


def test_align_scores(rng):
    """Scores and ends against the reference and Biopython (every mode, affine and
    linear gaps; DNA scoring, local), edge cases, and a batch the size of a real launch
    against the CPU implementation."""
    from . import align_cases as al

    al.check_reference("cuda", rng, n=40, lengths=(0, 1, 15, 47, 48, 49, 100), gaps=GPU_GAPS)
    al.check_reference("cuda", rng, n=40, lengths=(0, 1, 9, 30), modes=("local",), gaps=GPU_GAPS[1:],
                       scoring_kw=dict(match=2, mismatch=-3), letters="ACGTN")  # DNA: a table of 16 codes
    al.check_edges("cuda")
    qs, ts = al.pairs(rng, 3000, (1, 50, 200, 400))
    qs += [al.rand_protein(rng, rng.choice([700, 2000])) for _ in range(12)]  # long targets: align_wave
    ts += [al.related(rng, q) + al.rand_protein(rng, rng.choice([1100, 2500])) for q in qs[-12:]]
    for mode in al.MODES:
        sc = ta.Scoring()
        gpu = ta.align_score(ta.encode(qs, "protein", "cuda"), ta.encode(ts, "protein", "cuda"), sc, mode)
        cpu = ta.align_score(ta.encode(qs, "protein"), ta.encode(ts, "protein"), sc, mode)
        assert all(torch.equal(a.cpu(), b) for a, b in zip(gpu, cpu)), mode


def test_align_real_proteins_and_long_scores(rng):
    """Real proteins (the Swiss-Prot queries against the proteome) and scores past int16,
    against parasail."""
    pytest.importorskip("parasail")
    from . import align_cases as al
    from .conftest import read_fasta

    proteome = [s for _, s in read_fasta("proteome_HG003687.fa")]
    queries = [s for _, s in read_fasta("swissprot_queries20.fa")]
    pairs = [(q, rng.choice(proteome)) for q in queries] + [(p[20:300], p) for p in rng.sample(proteome, 20)]
    al.check_parasail("cuda", rng, pairs)
    al.check_long_scores("cuda", rng, n=6000)


def test_search(rng):
    pytest.importorskip("parasail")
    from . import align_cases as al
    from .conftest import read_fasta

    al.check_search("cuda", rng, n_q=4, n_db=120, lengths=(0, 1, 16, 33, 70), top_k=10, stream=(10**6,))
    al.check_search_wrap("cuda", rng)  # scores past int16 in the packed DPX scan
    proteome = [s for _, s in read_fasta("proteome_HG003687.fa")]
    queries = [s for _, s in read_fasta("swissprot_queries20.fa")]
    al.check_search_parasail("cuda", [queries[0], queries[5][:700], proteome[7]], proteome[:1500])
