"""The scan's float16 pair path (TORCHALIGN_SCAN_HALF2=1, issue 13: CUDASW++'s pre-Hopper
arithmetic): two cells per 32-bit register as float16, exact up to 2,048, every score above
2,048 - S recomputed in int32. Opt-in until it is measured on a GPU; the interpreter runs
the same float16 arithmetic through Triton's own float16 ops (HALF=2), the GPU through
add/max.f16x2 (HALF=1)."""

from __future__ import annotations

import random

import numpy as np
import pytest
import torch

import torchalign as ta
from torchalign_kernels import align_scan

from .align_cases import rand_protein, related
from .test_portability import _run_halfwords


def _cases(n: int, seed: int = 0):
    """Pairs of packed float16 words: the scan's values (integers in [-2048, 2048], the pad
    -16384) in both halves, edge values first."""
    edges = np.array([-16384, -2048, -1100, -12, -1, 0, 1, 11, 2047, 2048], dtype=np.float16)
    rng = np.random.default_rng(seed)
    vals = np.concatenate([np.repeat(edges, 2), rng.integers(-2048, 2049, size=2 * n).astype(np.float16)])
    a = vals.view(np.int32)
    return a, np.roll(a, 7)


def _run(a, b, device, half: int):
    add, mx = _run_halfwords(a, b, device, False, half)
    return add.view(np.float16), mx.view(np.float16)


def _want(a, b):
    fa, fb = a.view(np.float16), b.view(np.float16)
    return fa + fb, np.maximum(fa, fb)


def test_packed_half_constants():
    assert align_scan.packed_half(0) == 0
    for v in (-16384, -11, -1, 7, 2048):
        word = np.array([align_scan.packed_half(v)], dtype=np.int32).view(np.float16)
        assert word.tolist() == [v, v]
    table = ta.Scoring().table
    half = align_scan.profile_table(table, 11, half=True)
    plain = align_scan.profile_table(table, 11)
    assert half.dtype == plain.dtype == torch.int16 and half.shape == plain.shape
    assert torch.equal(plain[:-1, : table.shape[1]], (table + 11).to(torch.int16))  # scores + gap_open
    assert (plain[-1] == align_scan.NEG16).all() and (plain[:, table.shape[1]:] == align_scan.NEG16).all()
    assert torch.equal(half.view(torch.float16).to(torch.int16), plain)  # the same integers, as float16


@pytest.mark.interpret
def test_half_arithmetic_under_the_interpreter():
    a, b = _cases(3000)
    add, mx = _run(a, b, "cpu", 2)
    want_add, want_max = _want(a, b)
    assert np.array_equal(add, want_add) and np.array_equal(mx, want_max)


@pytest.mark.gpu
def test_half_arithmetic_on_the_gpu():
    a, b = _cases(200_000)
    add, mx = _run(a, b, "cuda", 1)
    want_add, want_max = _want(a, b)
    assert np.array_equal(add, want_add) and np.array_equal(mx, want_max)


def _workload(seed: int):
    rng = random.Random(seed)
    queries = [rand_protein(rng, n) for n in (1, 5, 11)]
    db = [related(rng, rng.choice(queries)) for _ in range(20)] + [rand_protein(rng, rng.randint(0, 12))
                                                                  for _ in range(10)]
    return queries, db


def _same(got, want):
    for name in ("scores", "indices", "ends", "query_ends"):
        assert torch.equal(getattr(got, name).cpu(), getattr(want, name)), name


# BLOSUM62 (scores far below 2,048) and a scoring whose local scores pass 2,048 (rescored in int32)
SCORINGS = [ta.Scoring(), ta.Scoring(match=300, mismatch=-300, gap_open=400, gap_extend=100, alphabet="protein")]


@pytest.mark.interpret
def test_half2_search_equals_cpu_under_the_interpreter(kernels_on_cpu, monkeypatch):
    """Scores on both sides of 2,048 - S (the float16 path's exact range and the rescore)."""
    queries, db, scoring = *_workload(1), SCORINGS[1]
    monkeypatch.setenv("TORCHALIGN_SCAN_HALF2", "1")
    launched = []
    plain = align_scan.scan_queries
    monkeypatch.setattr(align_scan, "scan_queries", lambda *a, **kw: launched.append(kw["half"]) or plain(*a, **kw))
    got = ta.search(queries, db, scoring, top_k=20)
    assert launched and set(launched) == {2}  # the float16 path ran
    with monkeypatch.context() as m:
        m.delenv("TORCHALIGN_CPU_BACKEND")
        want = ta.search(queries, db, scoring, top_k=20)
    assert int(want.scores.max()) > align_scan.HALF_EXACT  # the rescore is exercised
    assert ((want.scores > 0) & (want.scores < align_scan.HALF_EXACT - 300)).any()  # and the exact range
    _same(got, want)


def test_half2_only_where_float16_is_exact(monkeypatch):
    """Scores or gaps past HALF_EXACT / 2 keep the int16 path (its own exactness argument)."""
    from torchalign.ops.align import _Scan

    monkeypatch.setenv("TORCHALIGN_SCAN_HALF2", "1")
    d = ta.encode(["MKV"], "protein")
    big = ta.Scoring(match=900, mismatch=-900, gap_open=950, gap_extend=100, alphabet="protein")
    assert _Scan(d.codes, d.offsets, big.table, 950, 100).half == 0
    assert _Scan(d.codes, d.offsets, ta.Scoring().table, 11, 1).half == 2  # (a CPU tensor: the interpreter's mode)
    monkeypatch.delenv("TORCHALIGN_SCAN_HALF2")
    assert _Scan(d.codes, d.offsets, ta.Scoring().table, 11, 1).half == 0  # off CUDA: only when asked for


@pytest.mark.parametrize("capability,env,half", [((8, 0), None, 1), ((8, 9), None, 1), ((9, 0), None, 0),
                                                 ((10, 0), None, 0), ((8, 0), "0", 0), ((9, 0), "1", 1)])
def test_half2_is_the_default_without_dpx(monkeypatch, capability, env, half):
    """On CUDA: the float16 pairs where the DPX path is not taken (before sm_90, or
    TORCHALIGN_NO_DPX=1), int16 DPX from sm_90 on; TORCHALIGN_SCAN_HALF2=0 / 1 forces."""
    monkeypatch.delenv("TORCHALIGN_NO_DPX", raising=False)
    monkeypatch.delenv("TORCHALIGN_SCAN_HALF2", raising=False)
    if env is not None:
        monkeypatch.setenv("TORCHALIGN_SCAN_HALF2", env)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: capability)
    cuda = torch.device("cuda", 0)
    assert align_scan.use_half2(cuda) == half
    if env is None:
        monkeypatch.setenv("TORCHALIGN_NO_DPX", "1")  # Hopper with DPX turned off: what an A100 runs
        assert align_scan.use_half2(cuda) == 1


@pytest.mark.gpu
@pytest.mark.parametrize("scoring", SCORINGS, ids=["blosum62", "past-2048"])
def test_half2_search_equals_cpu_on_the_gpu(monkeypatch, scoring):
    queries, db = _workload(2)
    want = ta.search(queries, db, scoring, top_k=20)
    monkeypatch.setenv("TORCHALIGN_SCAN_HALF2", "1")
    got = ta.search(ta.encode(queries, "protein", "cuda"), ta.encode(db, "protein", "cuda"), scoring, top_k=20)
    _same(got, want)
