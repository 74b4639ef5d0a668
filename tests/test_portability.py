"""The database scan on every GPU (issue 12, item 2): the DPX instructions (add/max.s16x2,
sm_90 and later) are chosen from the device's compute capability, TORCHALIGN_NO_DPX=1
(with TORCHALIGN_SCAN_HALF2=0: else the float16 pairs) forces the plain path, and the plain
path gives the same integers."""

from __future__ import annotations

import random

import numpy as np
import pytest
import torch
import triton
import triton.language as tl

import torchalign as ta
from torchalign_kernels import align_scan
from torchalign_kernels.align_scan import _add2, _max2

from . import align_cases as al


# ---- the choice (CPU tier) ----------------------------------------------------------------
@pytest.mark.parametrize("capability,dpx", [((8, 0), False), ((8, 6), False), ((8, 9), False), ((9, 0), True),
                                            ((10, 0), True), ((12, 0), True)])
def test_dpx_follows_the_compute_capability(monkeypatch, capability, dpx):
    monkeypatch.delenv("TORCHALIGN_NO_DPX", raising=False)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: capability)
    assert align_scan.use_dpx(torch.device("cuda", 0)) is dpx
    monkeypatch.setenv("TORCHALIGN_NO_DPX", "1")  # read at every launch
    assert align_scan.use_dpx(torch.device("cuda", 0)) is False
    monkeypatch.setenv("TORCHALIGN_NO_DPX", "0")
    assert align_scan.use_dpx(torch.device("cuda", 0)) is dpx


def test_no_dpx_off_cuda(monkeypatch):
    def no_cuda(device=None):
        raise AssertionError("the capability of a CPU tensor's device was asked for")

    monkeypatch.setattr(torch.cuda, "get_device_capability", no_cuda)
    assert align_scan.use_dpx(torch.device("cpu")) is False


def test_the_launcher_passes_the_choice(monkeypatch):
    """scan_queries launches scan_kernel with DPX = use_dpx(the query's device)."""
    seen = []

    class Recorder:
        def __getitem__(self, grid):
            return lambda *args, **kw: seen.append(kw["DPX"])

    monkeypatch.setattr(align_scan, "scan_kernel", Recorder())
    monkeypatch.setattr(align_scan, "use_dpx", lambda device: ("the choice for", device.type))
    sc = ta.Scoring()
    q = ta.encode(["MKVL"], "protein")
    db = ta.encode(["MKV", "WWW"], "protein")
    packed = db.pack(2 * align_scan.LANES)
    pairs = align_scan.profile_table(sc.table, 11)
    scratch = torch.empty(2 * packed.codes.numel(), dtype=torch.int32)
    align_scan.scan_queries(q.codes, q.offsets, 0, 1, pairs, packed, 0, scratch, 11, 1)
    assert seen == [("the choice for", "cpu")]


# ---- the plain halfword arithmetic: the same integers as add/max.s16x2 ---------------------
@triton.jit
def _halfwords_kernel(a_ptr, b_ptr, add_ptr, max_ptr, n, DPX: tl.constexpr, BLOCK: tl.constexpr,
                      HALF: tl.constexpr = 0):
    """_add2 and _max2 of each word pair (HALF: the float16 pairs, tests/test_scan_half2.py)."""
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    ok = i < n
    a = tl.load(a_ptr + i, mask=ok, other=0)
    b = tl.load(b_ptr + i, mask=ok, other=0)
    tl.store(add_ptr + i, _add2(a, b, DPX, HALF), mask=ok)
    tl.store(max_ptr + i, _max2(a, b, DPX, HALF), mask=ok)


def _halfword_cases(n: int = 3000, seed: int = 0):
    """Pairs of int32 words: every pair of edge halfwords, then random ones."""
    edges = np.array([-32768, -32767, -16384, -1001, -1, 0, 1, 1000, 16383, 32766, 32767], dtype=np.int16)
    lo, hi = np.meshgrid(edges, edges)
    words = ((hi.astype(np.int64) << 16) | (lo.astype(np.int64) & 0xFFFF)).astype(np.uint32).view(np.int32).ravel()
    a, b = np.meshgrid(words, words)
    rng = np.random.default_rng(seed)
    rand = rng.integers(-(2**31), 2**31, size=(2, n), dtype=np.int64).astype(np.int32)
    return np.concatenate([a.ravel(), rand[0]]), np.concatenate([b.ravel(), rand[1]])


def _numpy_halfwords(a, b):
    """(add, max) of each 16-bit half as int16, packed again."""
    ha, hb = a.view(np.int16).reshape(-1, 2), b.view(np.int16).reshape(-1, 2)
    return ((ha + hb).astype(np.int16).reshape(-1).view(np.int32),
            np.maximum(ha, hb).astype(np.int16).reshape(-1).view(np.int32))


def _run_halfwords(a, b, device, dpx: bool, half: int = 0):
    ta_, tb = torch.from_numpy(a).to(device), torch.from_numpy(b).to(device)
    add, mx = torch.empty_like(ta_), torch.empty_like(ta_)
    _halfwords_kernel[(triton.cdiv(a.size, 1024),)](ta_, tb, add, mx, a.size, DPX=dpx, BLOCK=1024, HALF=half)
    return add.cpu().numpy(), mx.cpu().numpy()


@pytest.mark.interpret
def test_plain_halfwords_under_the_interpreter():
    a, b = _halfword_cases()
    add, mx = _run_halfwords(a, b, "cpu", False)
    want_add, want_max = _numpy_halfwords(a, b)
    assert np.array_equal(add, want_add) and np.array_equal(mx, want_max)


@pytest.mark.gpu
@pytest.mark.parametrize("dpx", [False, True])
def test_halfwords_on_the_gpu(dpx):
    if dpx and not align_scan.dpx_for(torch.cuda.get_device_capability()):
        pytest.skip("DPX needs compute capability 9.0")
    a, b = _halfword_cases(200_000)
    add, mx = _run_halfwords(a, b, "cuda", dpx)
    want_add, want_max = _numpy_halfwords(a, b)
    assert np.array_equal(add, want_add) and np.array_equal(mx, want_max)


# ---- search with and without DPX (GPU tier) -----------------------------------------------
def _scan_both_ways(monkeypatch, fn):
    """(DPX, the plain int16 path): TORCHALIGN_SCAN_HALF2=0, as the float16 pairs, the
    default without DPX, have tests of their own (test_scan_half2.py)."""
    monkeypatch.delenv("TORCHALIGN_NO_DPX", raising=False)
    monkeypatch.delenv("TORCHALIGN_SCAN_HALF2", raising=False)
    if not align_scan.use_dpx(torch.device("cuda")):
        pytest.skip("DPX needs compute capability 9.0: only the plain path runs here")
    with_dpx = fn()
    monkeypatch.setenv("TORCHALIGN_NO_DPX", "1")
    monkeypatch.setenv("TORCHALIGN_SCAN_HALF2", "0")
    assert not align_scan.use_dpx(torch.device("cuda")) and align_scan.use_half2(torch.device("cuda")) == 0
    return with_dpx, fn()


@pytest.mark.gpu
def test_search_without_dpx_equals_dpx(monkeypatch):
    """SearchResult field by field: proteins (BLOSUM62), and DNA scored high enough that
    the int16 scan wraps and recomputes."""
    rng = random.Random(12)
    qs = [al.rand_protein(rng, n) for n in (5, 60, 333)]
    db = [al.related(rng, rng.choice(qs)) if rng.random() < 0.3 else al.rand_protein(rng, rng.randint(0, 700))
          for _ in range(3000)]
    q, d = ta.encode(qs, "protein", "cuda"), ta.encode(db, "protein", "cuda")
    a, b = _scan_both_ways(monkeypatch, lambda: ta.search(q, d, ta.Scoring(), top_k=50))
    assert all(torch.equal(x, y) for x, y in zip(a, b))
    sc = ta.Scoring(match=900, mismatch=-900, gap_open=950, gap_extend=100)
    qs = [al.rand_protein(rng, n, "ACGT") for n in (40, 70)]
    db = [al.related(rng, rng.choice(qs), "ACGT") for _ in range(200)] + qs
    q, d = ta.encode(qs, "dna", "cuda"), ta.encode(db, "dna", "cuda")
    monkeypatch.delenv("TORCHALIGN_NO_DPX")
    a, b = _scan_both_ways(monkeypatch, lambda: ta.search(q, d, sc, top_k=len(db)))
    assert a.scores.max() > 32767 and all(torch.equal(x, y) for x, y in zip(a, b))


@pytest.mark.gpu
def test_scan_outputs_without_dpx_equal_dpx(monkeypatch):
    """The kernel's own packed outputs, wrapped halves included, bit for bit (a table of 31
    symbols: one profile width, 32, as the default protein and DNA searches; scores past int16)."""
    rng = random.Random(7)
    seqs = [bytes(rng.randrange(31) for _ in range(rng.randint(0, 300))) for _ in range(500)]
    seqs += [bytes(range(31)), b"\x1e" * 100, b"\x00" * 100]
    table = torch.randint(-50, 50, (31, 31), dtype=torch.int32, generator=torch.Generator().manual_seed(3))
    table.fill_diagonal_(900)
    d = ta.encode(seqs, "bytes", "cuda")
    q = ta.encode([seqs[-3], seqs[0], b"\x1e" * 40], "bytes", "cuda")
    packed = d.pack(2 * align_scan.LANES)
    pairs = align_scan.profile_table(table.cuda(), 950)
    assert pairs.shape[1] == 32  # (the width the precompiled variants have)
    scratch = torch.empty(2 * len(q) * packed.codes.numel(), dtype=torch.int32, device="cuda")

    def scan():
        return align_scan.scan_queries(q.codes, q.offsets, 0, len(q), pairs, packed, 0, scratch, 950, 100)

    a, b = _scan_both_ways(monkeypatch, scan)
    assert (a > 32767 - 900).any() and torch.equal(a, b)
