"""Sizes past 2^31 elements and past CUDA's grid limits (issue 12, items 3 and 4).

Interpreter tier: the kernels run on small data with strides and state layouts whose
32-bit products would pass 2^31. The interpreter specializes an integer argument below
2^31 as int32 and wraps int32 products as the GPU does (NumPy int32), so the old code
fails here too. The outputs and state live in a sparse address range (an anonymous
MAP_NORESERVE mapping: only the pages touched take memory) with 2^32 elements of room
before the base, so an offset that wrapped lands in mapped memory and shows as a wrong
result instead of killing the process. Grid limits: MAX_GRID_Y is patched small and
every launch's grid recorded.

GPU tier: one case per family past 2^31 elements, and the issue's grid cases (100,000
reads x 10 references, 40,000 guides on both strands). Each checks samples against the
CPU implementation (a full CPU run would take hours) and skips, saying so, when the GPU
lacks the memory.
"""

import mmap
import random
import sys

import pytest
import torch

import torchalign as ta

from . import reference as ref

MAP_NORESERVE = 0x4000  # Linux (x86-64 and arm64); Python 3.11's mmap lacks the name
INT32_WRAP = 1 << 31


# ---- interpreter tier -----------------------------------------------------------------------
def sparse(n: int, dtype) -> torch.Tensor:
    """n zeros of ``dtype`` in reserved, lazily backed memory, 2^32 elements after the
    mapping's start (an int32 offset, or two added, never reaches further back)."""
    if not sys.platform.startswith("linux"):
        pytest.skip("a sparse mapping needs Linux's MAP_NORESERVE")
    size = torch.empty((), dtype=dtype).element_size()
    guard = (1 << 32) * size
    try:
        mm = mmap.mmap(-1, guard + n * size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | MAP_NORESERVE)
    except OSError as e:  # vm.overcommit_memory=2 refuses address space without memory behind it
        pytest.skip(f"cannot reserve {(guard + n * size) >> 30} GiB of address space: {e}")
    return torch.frombuffer(mm, dtype=torch.uint8)[guard:].view(dtype)


def _codes(seqs, dtype=torch.uint8):
    codes = torch.tensor([c for s in seqs for c in s], dtype=dtype)
    lens = torch.tensor([len(s) for s in seqs], dtype=torch.int64)
    return codes, torch.cumsum(lens, 0) - lens, lens


@pytest.mark.interpret
def test_asm_rows_profile_row_offset_past_2_31(rng):
    """asm_rows PROFILE writes D[m][end] to out[q * out_stride + end - 1]: with out_stride
    = 2^30 + 5 the third pattern's row starts past 2^31 elements."""
    from torchalign.cpu import asm as cpu
    from torchalign_kernels import asm, asm_rows

    text = [rng.randrange(4) for _ in range(45)]
    pats = [[rng.randrange(4) for _ in range(n)] for n in (3, 7, 5)]
    t, _, _ = _codes([text])
    p, starts, lens = _codes(pats)
    offsets = torch.tensor([0, t.numel()])
    stride = (1 << 30) + 5
    assert 2 * stride >= INT32_WRAP > stride
    out = sparse(2 * stride + t.numel(), torch.int32)
    rows = [out[q * stride: q * stride + t.numel()] for q in range(3)]
    for r in rows:
        r.fill_(-7)
    scan, length, own, tid = asm.chunks(offsets, t.numel(), 3, 2 * 7)
    n_chunks = tid.numel()
    scratch = torch.empty((2, int(length.max()) + 1), dtype=torch.int64)
    counter = torch.zeros(1, dtype=torch.int64)
    asm_rows.asm_rows_kernel[(2,)](
        t, p, starts, lens, n_chunks, 3 * n_chunks, scan, length, own, tid, scratch, scratch.shape[1],
        0, out, counter, counter, counter, counter, stride, counter, 0, MODE=asm_rows.MODES["profile"], BLOCK=16)
    want = cpu.asm_profile(t, offsets, p, starts, lens)
    for q in range(3):
        assert rows[q].tolist() == want[q].tolist(), q


def _band_state(n_state: int, words: int) -> torch.Tensor:
    """Column state [3 x words, n_state] int64, sparse. With n_state = 2^30 the offsets
    (3 w + i) n_state pass 2^31 from (w, i) = (0, 2) on, and in int32 they alias each
    other (4 x 2^30 wraps to 0: word 1's mv on word 0's pv)."""
    return sparse(3 * words * n_state, torch.int64)


@pytest.mark.interpret
def test_myers_band_state_rows_past_2_31(rng):
    """myers_band keeps word w of a lane at state[(3 w + i) * n_state + slot]: with n_state
    = 2^30 those offsets pass 2^31 from w = 0, i = 2 on."""
    from torchalign_kernels import myers, myers_band

    pat = [rng.randrange(4) for _ in range(100)]  # two words
    texts = [[rng.randrange(4) for _ in range(n)] for n in (1, 60, 97, 120)]
    texts[2][10:80] = pat[15:85]  # close to the pattern: a small distance
    codes, starts, lens = _codes([pat] + texts)
    peq = myers.match_masks(codes, starts[:1], lens[:1], 4, 2)
    n_lanes, n_state = len(texts), 1 << 30
    state = _band_state(n_state, 2)
    out = torch.full((n_lanes,), -7, dtype=torch.int32)
    dummy = lens
    myers_band.myers_band_kernel[(1, 1)](
        codes, dummy, starts[1:], lens[1:], dummy, dummy, n_lanes, lens[:1], peq, 4, 2, state, n_state,
        myers.BIG.value, 0, out, dummy, dummy, dummy, 0, dummy, 0, 0,
        MODE=myers.MODES["dist"], PER_LANE_PATTERN=False, BLOCK=4)
    assert out.tolist() == [ref.levenshtein(pat, x) for x in texts]


@pytest.mark.interpret
def test_primers_state_rows_past_2_31(rng):
    """primers keeps the same [3 x words, n_state] state: n_state = 2^30, two-word windows."""
    from torchalign.cpu import primers as cpu
    from torchalign_kernels import primers

    alpha = [rng.randrange(4) for _ in range(110)]
    beta = [rng.randrange(4) for _ in range(30)] + alpha[:100] + [rng.randrange(4) for _ in range(20)]
    for i in (70, 95):  # two substitutions: answers past the first word
        beta[30 + i] = (beta[30 + i] + 1) % 4
    a, _, _ = _codes([alpha])
    b, _, _ = _codes([beta])
    a_off, b_off = torch.tensor([0, a.numel()]), torch.tensor([0, b.numel()])
    K = 1
    pos = torch.arange(4)
    rows = a.numel() - pos  # whole windows: the kernel's answer is i*
    seed = torch.clamp(rows, max=K)
    bits = primers.match_bits(a, 4)
    n_state = 1 << 30
    state = _band_state(n_state, 2)
    best = seed.to(torch.int32).clone()
    primers.primers_kernel[(1, 1)](
        b, torch.tensor([0]), torch.tensor([b.numel()]), bits, bits.shape[1], 4,
        pos, rows, seed, 4, K, state, n_state, best, BLOCK=4)
    want = cpu.longest_within(a, a_off, b, b_off, K)[:4]
    assert want.max() > 64  # the second word was used
    assert best.tolist() == want.tolist()


class _GridLog:
    """Stands in for a kernel: records each launch's grid, then launches."""

    def __init__(self, kernel, grids):
        self.kernel, self.grids = kernel, grids

    def __getitem__(self, grid):
        self.grids.append(tuple(grid))
        return self.kernel[grid]


@pytest.fixture
def grids(monkeypatch):
    """MAX_GRID_Y = 2 for the launchers, and the grid of every launch of the kernels with a
    second grid axis (Myers in registers, wavefront, band; Hamming all-vs-all)."""
    from torchalign_kernels import hamming, myers, myers_band, myers_wave

    log = []
    monkeypatch.setattr(myers, "MAX_GRID_Y", 2, raising=False)
    for module, name in ((myers, "myers_kernel"), (myers_wave, "myers_wave_kernel"),
                         (myers_band, "myers_band_kernel"), (hamming, "hamming_cdist_kernel")):
        monkeypatch.setattr(module, name, _GridLog(getattr(module, name), log))
    return log


def _assert_within(log, limit=2):
    assert log, "no launch recorded"
    assert all(g[1] <= limit for g in log if len(g) > 1), log
    assert all(g[2] <= limit for g in log if len(g) > 2), log


@pytest.mark.interpret
@pytest.mark.usefixtures("kernels_on_cpu")
def test_grid_y_split_levenshtein_cdist(grids, monkeypatch, rng):
    """Five patterns on the second grid axis, at most two per launch: one word (registers,
    through the op), three words (wavefront) and the band (forced), through the launcher
    with short texts."""
    from torchalign_kernels import myers

    a = ["".join(rng.choice("ACGT") for _ in range(rng.randint(5, 30))) for _ in range(5)]
    b = ["".join(rng.choice("ACGT") for _ in range(rng.randint(31, 40))) for _ in range(3)]  # a: the patterns
    assert ta.levenshtein_cdist(a, b, alphabet="dna", algorithm="myers").tolist() == \
        [[ref.levenshtein(x, y) for y in b] for x in a]
    pats = [[rng.randrange(4) for _ in range(rng.randint(129, 140))] for _ in range(5)]
    texts = [[rng.randrange(4) for _ in range(rng.randint(0, 12))] for _ in range(3)]
    codes, starts, lens = _codes(pats + texts)
    want = [ref.levenshtein(x, y) for x in pats for y in texts]
    for wave in (True, False):
        monkeypatch.setattr(myers, "WAVE", wave)
        got = myers.distances(codes, starts[:5], lens[:5], starts[5:], lens[5:], 4, 140, cdist=True)
        assert got.tolist() == want, wave
    _assert_within(grids)
    assert len(grids) == 3 * 3  # three launches (2 + 2 + 1 patterns) per kernel


@pytest.mark.interpret
@pytest.mark.usefixtures("kernels_on_cpu")
def test_grid_y_split_asm_both_strands(grids, rng):
    """Three guides on both strands are six patterns: three launches of two. Search, best
    and profile (each launch's pattern offset shows in every output)."""
    from . import asm_cases

    text = "".join(rng.choice("ACGT") for _ in range(120))
    guides = [text[10:22], ref.revcomp(text[50:62]), "".join(rng.choice("ACGT") for _ in range(12))]
    got = asm_cases.hit_tuples(ta.asm_search(text, guides, 2, alphabet="dna", both_strands=True, algorithm="myers"))
    assert got == ref.asm_hits([text], guides, 2, both_strands=True)
    assert {0, 1} <= {h[5] for h in got}
    texts, pats = [text, text[:50]], guides + [ref.revcomp(g) for g in guides]
    d, end = ta.asm_best(texts, pats, alphabet="dna", algorithm="myers")
    assert (d.tolist(), end.tolist()) == ref.asm_best(texts, pats)
    prof = ta.asm_profile(texts, pats, alphabet="dna", algorithm="myers")
    assert prof.tolist() == [sum((ref.asm_column(q, s)[1:] for s in texts), []) for q in pats]
    _assert_within(grids)


@pytest.mark.interpret
@pytest.mark.usefixtures("kernels_on_cpu")
def test_grid_y_split_hamming_cdist(grids, rng):
    """Hamming all-vs-all puts its tiles on one axis: 50 x 3 sequences in tiles of 16."""
    from torchalign_kernels import hamming

    a = torch.randint(0, 4, (50, 9), dtype=torch.uint8)
    b = torch.randint(0, 4, (3, 9), dtype=torch.uint8)
    want = (a[:, None, :] != b[None, :, :]).sum(2).to(torch.int32)
    assert torch.equal(hamming.hamming_cdist(b, a, 4, block_m=16, block_n=16), want.T)
    assert torch.equal(hamming.hamming_cdist(a, b, 4, block_m=16, block_n=16), want)
    _assert_within(grids)


# ---- GPU tier -----------------------------------------------------------------------------
GiB = 1 << 30


def _need_gpu(n_bytes: int) -> None:
    """Skip (saying why) unless the GPU has n_bytes free: the machine lacks the memory."""
    torch.cuda.empty_cache()
    free, total = torch.cuda.mem_get_info()
    if free < n_bytes:
        pytest.skip(f"needs {n_bytes / GiB:.1f} GiB of free GPU memory; {free / GiB:.1f} of {total / GiB:.1f} GiB free")


@pytest.fixture
def gpu():
    """A seeded generator on the GPU; the cached blocks are given back after the test."""
    g = torch.Generator("cuda").manual_seed(random.randrange(2**32))
    print("seed", g.initial_seed())
    yield g
    torch.cuda.synchronize()
    torch.cuda.empty_cache()


def _batch(lens, high, g, alphabet="dna", dtype=torch.uint8):
    """Random codes in [0, high) for sequences of lengths ``lens`` (int64, on the GPU)."""
    offsets = torch.zeros(lens.numel() + 1, dtype=torch.int64, device="cuda")
    offsets[1:] = torch.cumsum(lens, 0)
    codes = torch.randint(0, high, (int(offsets[-1]),), generator=g, device="cuda", dtype=dtype)
    return ta.SequenceBatch(codes, offsets, alphabet)


@pytest.mark.gpu
def test_gpu_asm_profile_dp_past_2_31(gpu):
    """40 patterns x 60 Mbp: pattern q's row starts at q x 60 M, past 2^31 from q = 36.
    The row-parallel DP (asm_rows) against the Myers kernels over the whole profile, and
    both against the CPU on slices of the last rows."""
    n_pat, n = 40, 60_000_000
    assert (n_pat - 1) * n >= INT32_WRAP
    _need_gpu(2 * n_pat * n * 4 + 2 * GiB)
    text = _batch(torch.tensor([n], device="cuda"), 4, gpu)
    pats = _batch(torch.randint(6, 13, (n_pat,), generator=gpu, device="cuda"), 4, gpu)
    dp = ta.asm_profile(text, pats, algorithm="dp")
    myers = ta.asm_profile(text, pats, algorithm="myers")
    assert torch.equal(dp, myers)
    del myers
    from torchalign.cpu import asm as cpu

    p, p_off = pats.codes.cpu(), pats.offsets.cpu()
    for a in (0, n // 2, n - 5_000):  # a profile column depends on the last 2 x 12 codes only
        t = text.codes[a: a + 5_000].cpu()
        want = cpu.asm_profile(t, torch.tensor([0, t.numel()]), p, p_off[:-1], p_off[1:] - p_off[:-1])
        skip = 0 if a == 0 else 24
        assert torch.equal(dp[:, a + skip: a + t.numel()].cpu(), want[:, skip:]), a


@pytest.mark.gpu
def test_gpu_levenshtein_cdist_past_2_31_pairs(gpu):
    """46,500 x 46,500 token-id sequences of 1..3 ids: 2.16e9 pairs, the row kernel's
    pair counter passes 2^31 (algorithm="dp"); the Myers kernels give the same matrix.
    Four distinct ids, so the distances (0..3) tell pairs apart."""
    na = nb = 46_500
    assert na * nb >= INT32_WRAP
    _need_gpu(2 * na * nb * 4 + GiB)
    a = _batch(torch.randint(1, 4, (na,), generator=gpu, device="cuda"), 4, gpu, "tokens", torch.int32)
    b = _batch(torch.randint(1, 4, (nb,), generator=gpu, device="cuda"), 4, gpu, "tokens", torch.int32)
    dp = ta.levenshtein_cdist(a, b, algorithm="dp")
    myers = ta.levenshtein_cdist(a, b, algorithm="myers")
    assert dp.shape == (na, nb) and torch.equal(dp, myers)
    del myers
    rows = torch.cat([torch.arange(8), torch.arange(na - 40, na)])  # the last rows' pairs are past 2^31
    cols = torch.randint(0, nb, (rows.numel(), 40), generator=torch.Generator().manual_seed(gpu.initial_seed()))
    got = dp[rows.cuda()[:, None], cols.cuda()].cpu()
    seqs = lambda s: [x.tolist() for x in torch.split(s.codes.cpu(), s.lengths.cpu().tolist())]  # noqa: E731
    xa, xb = seqs(a), seqs(b)
    want = [[ref.levenshtein(xa[i], xb[j]) for j in cols[r].tolist()] for r, i in enumerate(rows.tolist())]
    assert got.tolist() == want


@pytest.mark.gpu
def test_gpu_myers_band_state_past_2_31(gpu):
    """myers_band's column state is [3 x words, n_state] int64: two patterns of 128 words
    against 3 M four-code texts is 2.3e9 elements (18 GiB), words past 119 lie beyond 2^31.
    The patterns are a run of one code then 64 random others, so the distances depend on
    the last word."""
    from torchalign.cpu import levenshtein as cpu
    from torchalign_kernels import myers, myers_band

    n_lanes, words = 3_000_000, 128
    assert 3 * words * 2 * n_lanes >= INT32_WRAP
    _need_gpu(3 * words * 2 * n_lanes * 8 + GiB)
    m = 64 * words
    pats = torch.zeros((2, m), dtype=torch.uint8, device="cuda")
    pats[:, -64:] = torch.randint(1, 4, (2, 64), generator=gpu, device="cuda", dtype=torch.uint8)
    texts = torch.randint(0, 4, (n_lanes, 4), generator=gpu, device="cuda", dtype=torch.uint8)
    codes = torch.cat([pats.reshape(-1), texts.reshape(-1)])
    pat_starts = torch.tensor([0, m], device="cuda")
    pat_lens = torch.full((2,), m, device="cuda")
    starts = 2 * m + 4 * torch.arange(n_lanes, device="cuda")
    lens = torch.full((n_lanes,), 4, device="cuda")
    peq = myers.match_masks(codes, pat_starts, pat_lens, 4, words)
    out = torch.full((2 * n_lanes,), -1, dtype=torch.int32, device="cuda")
    myers_band.run("dist", codes, peq, pat_lens, starts, lens, n_programs_q=2, out=out)
    lanes = torch.cat([torch.arange(500), torch.arange(n_lanes - 500, n_lanes)])
    c = codes.cpu()
    for q in (0, 1):
        want = cpu.levenshtein_pairs(c, pat_starts.cpu()[q].repeat(lanes.numel()), torch.full((lanes.numel(),), m),
                                     starts.cpu()[lanes], lens.cpu()[lanes])
        assert torch.equal(out[q * n_lanes + lanes.cuda()].cpu(), want), q


@pytest.mark.gpu
def test_gpu_primers_state_past_2_31(gpu):
    """primers' state is [3 x words, 32 lanes x stretches] int64: windows of 23,000 rows
    (360 words) against 65,536 records (one stretch each; 65,535 in the first launch) is
    18 GiB, and from word 341 on the state lies beyond 2^31. alpha copies 24,000 codes of
    the long record with one substitution at 22,500, so with K = 0 start r's answer is
    22,500 - r, reached in word 351."""
    from torchalign_kernels import primers

    words, n_str = 360, 65_536
    assert (3 * 340 + 2) * 32 * (n_str - 1) < INT32_WRAP <= (3 * 341 + 2) * 32 * (n_str - 1)
    _need_gpu(3 * words * 32 * (n_str - 1) * 8 + GiB)
    long = torch.randint(0, 4, (30_000,), generator=gpu, device="cuda", dtype=torch.uint8)
    short = torch.randint(0, 4, ((n_str - 1) * 16,), generator=gpu, device="cuda", dtype=torch.uint8)
    beta = torch.cat([long, short])
    beta_offsets = torch.cat([torch.tensor([0], device="cuda"), 30_000 + 16 * torch.arange(n_str, device="cuda")])
    alpha = long[1_000: 25_000].clone()
    alpha[22_500] = (alpha[22_500] + 1) % 4
    bits = primers.match_bits(alpha, 4)
    pos = torch.arange(32, device="cuda")
    rows = torch.full((32,), words * 64 - 40, device="cuda")
    seed = torch.zeros(32, dtype=torch.int64, device="cuda")
    best = primers.longest_within(beta, beta_offsets, bits, 4, pos, rows, seed, 0)
    assert best.tolist() == [22_500 - r for r in range(32)]


@pytest.mark.gpu
def test_gpu_levenshtein_cdist_100k_reads(gpu):
    """100,000 reads x 10 references: the reads (the shorter side) are the patterns, one
    per program on grid axis y, which stops at 65,535: two launches."""
    from torchalign.cpu import levenshtein as cpu

    reads = _batch(torch.randint(100, 151, (100_000,), generator=gpu, device="cuda"), 4, gpu)
    refs = _batch(torch.randint(800, 1_001, (10,), generator=gpu, device="cuda"), 4, gpu)
    got = ta.levenshtein_cdist(reads, refs)
    assert got.shape == (100_000, 10)
    rows = torch.cat([torch.arange(10), torch.arange(65_530, 65_540), torch.arange(99_990, 100_000)])
    a_off, b_off = reads.offsets.cpu(), refs.offsets.cpu()
    codes = torch.cat([reads.codes.cpu(), refs.codes.cpu()])
    want = cpu.levenshtein_pairs(codes, a_off[:-1][rows], (a_off[1:] - a_off[:-1])[rows],
                                 b_off[:-1] + reads.codes.numel(), b_off[1:] - b_off[:-1], cdist=True)
    assert torch.equal(got[rows.cuda()].cpu().reshape(-1), want)


@pytest.mark.gpu
def test_gpu_asm_search_40k_guides_both_strands(gpu):
    """40,000 guides of 23 nt on both strands are 80,000 patterns (grid axis y: two
    launches); 100 kbp with planted copies (one substitution) of guides from both ends,
    reverse complements for the second half. Those guides' hits equal the CPU's."""
    n_guides, n = 40_000, 100_000
    guides = torch.randint(0, 4, (n_guides, 23), generator=gpu, device="cuda", dtype=torch.uint8)
    text = torch.randint(0, 4, (n,), generator=gpu, device="cuda", dtype=torch.uint8)
    picked = list(range(10)) + list(range(n_guides - 20, n_guides))
    for i, gi in enumerate(picked):
        site = guides[gi].clone()
        site[11] = (site[11] + 1) % 4
        if gi >= n_guides // 2:  # the reverse strand: patterns 40,000 + gi, past 65,535 for gi >= 25,535
            site = 3 - site.flip(0)
        text[1_000 + 3_000 * i: 1_023 + 3_000 * i] = site
    t, p = ta.encode(text[None], "dna", "cuda"), ta.encode(guides, "dna", "cuda")
    hits = ta.asm_search(t, p, 2, both_strands=True)
    found = set(zip(hits.pattern.tolist(), hits.strand.tolist()))
    assert all((gi, int(gi >= n_guides // 2)) in found for gi in picked)
    sub = torch.tensor(picked, device="cuda")
    keep = torch.isin(hits.pattern, sub)
    got = sorted(zip(*(x[keep].tolist() for x in (hits.pattern, hits.start, hits.end, hits.distance, hits.strand))))
    want_h = ta.asm_search(ta.encode(text[None].cpu(), "dna"), ta.encode(guides[sub].cpu(), "dna"), 2,
                           both_strands=True)
    want = sorted(zip((sub.cpu()[want_h.pattern]).tolist(),
                      *(x.tolist() for x in (want_h.start, want_h.end, want_h.distance, want_h.strand))))
    assert got == want


@pytest.mark.gpu
def test_gpu_hamming_cdist_8_5m_columns(gpu):
    """3 x 8,500,000 sequences: 66,407 tiles of b, past 65,535 (a second grid axis would
    fail to launch); every distance against torch."""
    _need_gpu(6 * GiB)
    a = torch.randint(0, 4, (3, 16), generator=gpu, device="cuda", dtype=torch.uint8)
    b = torch.randint(0, 4, (8_500_000, 16), generator=gpu, device="cuda", dtype=torch.uint8)
    got = ta.hamming_cdist(ta.encode(a, "dna", "cuda"), ta.encode(b, "dna", "cuda"))
    want = torch.stack([(b != x).sum(1, dtype=torch.int32) for x in a])
    assert torch.equal(got, want)
