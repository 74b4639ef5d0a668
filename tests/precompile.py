"""Compile every kernel variant the launchers make for this GPU, one process per core,
before the GPU tier runs (conftest's session fixture).

A GPU test process compiles its kernels one after another, seconds each, and that was most
of the GPU tier's time with an empty Triton cache. Here the workers record the launches of
tests/launches.py (the public ops on small CPU inputs, the launches recorded instead of run,
as test_compile.py does; every worker records the same list), then take the distinct variants
one at a time from a shared queue, the slow ones first, and compile each through the JIT
itself (``JITFunction.run(..., warmup=True)``: the JIT's own specialisation and cache key,
nothing launched), so the tests then find them in Triton's cache. A variant a test reaches
with other argument classes still compiles in the test.

conftest runs this when a GPU run selects at least PRECOMPILE_FROM tests (the tier,
not one test), or always with TORCHALIGN_PRECOMPILE=1; TORCHALIGN_PRECOMPILE=0 turns it off.
"""

from __future__ import annotations

import multiprocessing
import os
import time
from concurrent.futures import ProcessPoolExecutor

# the slow compiles (seconds each on the H200 host, benchmarks/NOTES.md) go to the queue first
HEAVY = ("scan_kernel", "hamming_windows", "align_wave", "align_kernel", "soft_align_bwd")


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
    """The distinct variants of the recorded launches, the slow compiles first; the scan also
    with DPX=False, the plain path that TORCHALIGN_NO_DPX=1 forces (test_portability's; 11.8 s
    of compiling inside the tier when it was left out), with the launcher's columns per step
    for each choice (a plain-path variant with two columns spills and compiles for a minute)."""
    import torch

    from torchalign_kernels import align_scan

    from . import launches

    dpx = align_scan.dpx_for(torch.cuda.get_device_capability())
    jobs = {}
    for fn, args, kwargs in seen:
        for choice in ({dpx, False} if kwargs.get("DPX") is launches.DEVICE_DPX else {None}):
            kw = kwargs if choice is None else launches.with_dpx(kwargs, choice)
            jobs.setdefault(_variant(fn, args, kw), (fn, args, kw))
    heavy = lambda job: next((i for i, h in enumerate(HEAVY) if h in job[0].__name__), len(HEAVY))  # noqa: E731
    return sorted(jobs.values(), key=heavy)


_RECORDED = []  # in a worker: its recording's jobs (every worker records the same list)


def _recorded() -> list:
    """In a worker: the recording's jobs (recorded on the worker's first call)."""
    if not _RECORDED:
        import pytest
        import torch

        from . import launches

        torch.set_num_threads(1)  # (16 workers with torch's default thread count each were slow)
        with pytest.MonkeyPatch.context() as monkeypatch:
            _RECORDED.extend(_jobs(launches.record(monkeypatch)))
    return _RECORDED


def _compile(i: int) -> None:
    """In a worker: compile job i of the recording."""
    fn, args, kwargs = _recorded()[i]
    fn.run(*args, grid=(1,), warmup=True, **kwargs)


def _count() -> int:
    """In a worker: how many jobs the recording holds."""
    return len(_recorded())


def precompile(workers: int | None = None) -> tuple[int, float, int]:
    """Compile the variants into Triton's cache: (variants, seconds, processes)."""
    workers = workers or os.cpu_count() or 1
    t0 = time.perf_counter()
    with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn")) as pool:
        n = pool.submit(_count).result()
        list(pool.map(_compile, range(n), chunksize=1))  # one at a time: the slow ones first, the rest fill in
    return n, time.perf_counter() - t0, workers
