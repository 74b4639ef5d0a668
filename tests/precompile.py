"""Compile every kernel variant the launchers make for this GPU, one process per core,
before the GPU tier runs (conftest's session fixture, with TORCHALIGN_PRECOMPILE=1).

A GPU test process compiles its kernels one after another, seconds each (the alignment
kernels' 48 unrolled rows: ~10 s a variant on an H200 host), and that was most of the
GPU tier's time with an empty Triton cache. Here each worker records the launches of
tests/launches.py (the public ops on small CPU inputs, the launches recorded instead of
run, as test_compile.py does), takes its share of the distinct variants and compiles them
through the JIT itself (``JITFunction.run(..., warmup=True)``: the JIT's own
specialisation and cache key, nothing launched), so the tests then find them in Triton's
cache. A variant a test reaches with other argument classes still compiles in the test.

Opt-in: measured on an H200 host (16 cores, benchmarks/NOTES.md) it cut the first 68 GPU
tests from 174 s to 79 s but itself took ~170 s, and align_wave's tracked variants still
compiled in the tests. Likely why those were missed: each worker recorded its own launch list
and took every workers-th entry, and the recordings then differed from run to run (unrun
kernels' outputs steered search's ends), so some variants fell to no worker; the recordings
are the same in every process now. One torch thread per worker (set below) is also unmeasured.
"""

from __future__ import annotations

import multiprocessing
import os
import time
from concurrent.futures import ProcessPoolExecutor

HEAVY = ("align_wave", "align_kernel", "hamming_windows")  # the slow compiles: spread over the workers first


def _variant(fn, args, kwargs) -> tuple:
    """What tells two launches' compiles apart: each tensor's dtype and 16-byte alignment,
    each specialised int's class (1, a multiple of 16, other), the keywords."""
    plain = {fn.arg_names[p] if isinstance(p, int) else p for p in getattr(fn, "do_not_specialize", ())}

    def cls(name, a):
        if hasattr(a, "dtype"):
            return str(a.dtype), a.data_ptr() % 16 == 0
        if isinstance(a, bool) or not isinstance(a, int) or name in plain:
            return repr(a) if not isinstance(a, int) or isinstance(a, bool) else "int"
        return 1 if a == 1 else 16 if a % 16 == 0 else 0
    return (fn.__module__, fn.__name__, tuple(cls(n, a) for n, a in zip(fn.arg_names, args)),
            tuple(sorted((k, repr(v)) for k, v in kwargs.items())))


def _jobs(seen) -> list:
    """The distinct variants of the recorded launches, the slow compiles first."""
    jobs = {}
    for fn, args, kwargs in seen:
        jobs.setdefault(_variant(fn, args, kwargs), (fn, args, kwargs))
    return sorted(jobs.values(), key=lambda j: not any(h in j[0].__name__ for h in HEAVY))


def _warm(worker: int, workers: int) -> int:
    """In a worker: record the launches, compile every workers-th variant from ``worker`` on."""
    import pytest
    import torch

    from torchalign_kernels import align_scan

    from . import launches

    torch.set_num_threads(1)  # (16 workers with torch's default thread count each: the suspected cause of the 170 s)
    with pytest.MonkeyPatch.context() as monkeypatch:
        seen = launches.record(monkeypatch)
    dpx = align_scan.dpx_for(torch.cuda.get_device_capability())
    mine = _jobs(seen)[worker::workers]
    for fn, args, kwargs in mine:
        # the scan: the device's DPX choice, and the plain path that TORCHALIGN_NO_DPX=1 forces
        # (test_portability's; 11.8 s of compiling inside the tier when it was left out)
        dpx_choices = {dpx, False} if kwargs.get("DPX") is launches.DEVICE_DPX else {None}
        for choice in dpx_choices:
            fn.run(*args, grid=(1,), warmup=True, **(kwargs if choice is None else dict(kwargs, DPX=choice)))
    return len(mine)


def precompile(workers: int | None = None) -> tuple[int, float, int]:
    """Compile the variants into Triton's cache: (variants, seconds, processes)."""
    workers = workers or os.cpu_count() or 1
    t0 = time.perf_counter()
    with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn")) as pool:
        n = sum(pool.map(_warm, range(workers), [workers] * workers))
    return n, time.perf_counter() - t0, workers
