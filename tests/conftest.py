"""Test tiers: CPU (default), interpreter (`TRITON_INTERPRET=1 pytest -m interpret`, its
own process), GPU (`pytest -m gpu -n 4 --dist loadscope`, skipped without CUDA)."""

import inspect
import os
import random
from pathlib import Path

import pytest
import torch
from hypothesis import strategies as st

REPO = Path(__file__).resolve().parents[1]
INTERPRET = os.environ.get("TRITON_INTERPRET") == "1"
if INTERPRET:
    from .interpreter_speed import install

    install()
if os.environ.get("PYTEST_XDIST_WORKER_COUNT"):  # pytest-xdist: share the cores (OpenMP's spinning threads
    # oversubscribed 4 workers x 16 threads so far that one float64 CPU reference ran for minutes)
    torch.set_num_threads(max(1, (os.cpu_count() or 1) // int(os.environ["PYTEST_XDIST_WORKER_COUNT"])))


PACKAGE_DATA = REPO / "torchalign" / "data"  # the files the package ships (the CLI's defaults)


def data_dir() -> Path:
    """The repository's data/ folder (TORCHALIGN_TEST_DATA overrides it)."""
    return Path(os.environ.get("TORCHALIGN_TEST_DATA", REPO / "data"))


def data_file(name: str) -> Path:
    """A data file of the repository: data/ first, then the package's own torchalign/data/."""
    path = data_dir() / name
    return path if path.exists() else PACKAGE_DATA / name


def read_fasta(name: str) -> list[tuple[str, str]]:
    """(id, sequence) records of a data file of the repository, plain parsing."""
    records, name_, seq = [], None, []
    for line in data_file(name).read_text().splitlines():
        if line.startswith(">"):
            if name_ is not None:
                records.append((name_, "".join(seq)))
            name_, seq = line[1:].split()[0], []
        elif line.strip():
            seq.append(line.strip())
    if name_ is not None:
        records.append((name_, "".join(seq)))
    return records


def pytest_collection_modifyitems(config, items):
    # Interpreter tests need TRITON_INTERPRET=1 before triton is imported, so they run in a
    # pytest process of their own; every other process leaves them out (not skipped).
    if INTERPRET:
        keep = [i for i in items if "interpret" in i.keywords]
    else:
        keep = [i for i in items if "interpret" not in i.keywords]
    if len(keep) != len(items):
        config.hook.pytest_deselected(items=[i for i in items if i not in keep])
        items[:] = keep
    if not torch.cuda.is_available():
        skip = pytest.mark.skip(reason="needs CUDA")
        for item in items:
            if "gpu" in item.keywords:
                item.add_marker(skip)


_PRECOMPILED = []  # (variants, seconds, processes), or why not, once the session fixture ran


PRECOMPILE_FROM = 20  # GPU tests selected: a tier run, where compiling every variant first pays


@pytest.fixture(scope="session", autouse=True)
def _kernels_precompiled(request, tmp_path_factory):
    """On a GPU, before a run of PRECOMPILE_FROM or more GPU tests (or any, with
    TORCHALIGN_PRECOMPILE=1; never with =0): compile every kernel variant in parallel first
    (tests/precompile.py). The GPU tier from an empty Triton cache: benchmarks/NOTES.md.
    Under pytest-xdist (the README's `pytest -m gpu -n 4`) the first worker compiles and the
    others wait for it on a lock in the run's shared temporary directory, then find the
    variants in Triton's cache."""
    selected = sum("gpu" in i.keywords for i in request.session.items)
    wanted = os.environ.get("TORCHALIGN_PRECOMPILE", "1" if selected >= PRECOMPILE_FROM else "0") == "1"
    if INTERPRET or not selected or not wanted or not torch.cuda.is_available():
        return
    if not hasattr(request.config, "workerinput"):
        _precompile()
        return
    import fcntl

    shared = tmp_path_factory.getbasetemp().parent  # one directory for the run's workers
    with open(shared / "precompile.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        done = shared / "precompile.done"
        if not done.exists():
            _precompile()
            done.touch()


def _precompile() -> None:
    from .precompile import precompile

    try:
        _PRECOMPILED.append(precompile())
    except Exception as e:  # noqa: BLE001  (only a head start: the tests still compile what they launch)
        _PRECOMPILED.append(f"precompile failed, the tests compile their own kernels: {type(e).__name__}: {e}")


_COMPILES = []  # (test, kernel and its specialisation, seconds) of each Triton cache miss in this process
_RUNNING = ["(collection)"]
_VARIANTS = {}  # kernel -> variants its process compiled or loaded (workers' counts summed under xdist)


def pytest_runtest_setup(item):
    _RUNNING[0] = item.nodeid


def _listen_to_compiles() -> None:
    """Record every kernel this GPU process compiles itself (a Triton cache miss: a variant
    the precompile did not make), for the summary: the GPU tier's time goes there."""
    try:
        from triton import knobs
    except ImportError:
        return
    if not hasattr(knobs, "compilation") or not hasattr(knobs.compilation, "listener"):
        return

    def listener(*, src, metadata, metadata_group, times, cache_hit):
        if not cache_hit:
            fn = getattr(src, "fn", None)
            what = f"{getattr(fn, '__name__', src.name)} {getattr(src, 'constexprs', '')} {getattr(src, 'attrs', '')}"
            _COMPILES.append((_RUNNING[0], what, times.total / 1e6))

    knobs.compilation.listener = listener


if torch.cuda.is_available() and not INTERPRET:
    _listen_to_compiles()


def _count_variants() -> None:
    """Each Triton kernel's compiled variants in this process, into _VARIANTS."""
    import sys

    for name, module in list(sys.modules.items()):
        if name.startswith("torchalign_kernels."):
            for attr, obj in vars(module).items():
                caches = getattr(obj, "device_caches", None)  # a JITFunction's compiled kernels, per device
                n = sum(len(c[0]) for c in caches.values()) if isinstance(caches, dict) else 0
                if n:
                    key = f"{name.split('.', 1)[1]}.{attr}"
                    _VARIANTS[key] = _VARIANTS.get(key, 0) + n


def pytest_sessionfinish(session):
    """(Before the summary.) An xdist worker sends its part of the summary to the controller."""
    _count_variants()
    if hasattr(session.config, "workeroutput"):
        session.config.workeroutput["torchalign"] = (_PRECOMPILED, _COMPILES, _VARIANTS)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):
    """The controller gathers the workers' parts of the summary."""
    precompiled, compiles, variants = getattr(node, "workeroutput", {}).get("torchalign", ([], [], {}))
    _PRECOMPILED.extend(precompiled)
    _COMPILES.extend(compiles)
    for key, n in variants.items():
        _VARIANTS[key] = _VARIANTS.get(key, 0) + n


def pytest_terminal_summary(terminalreporter):
    """On a GPU: how many variants of each Triton kernel the test processes compiled (or
    loaded from Triton's cache). Triton compiles a kernel once per constexpr set and per class
    of each int argument (1, a multiple of 16, other) and of pointer alignment, seconds each:
    the GPU tier's time goes there."""
    for done in _PRECOMPILED:
        if isinstance(done, str):
            terminalreporter.write_line(done)
        else:
            terminalreporter.write_line("precompiled %d kernel variants in %.1f s on %d processes" % tuple(done))
    if _COMPILES:
        terminalreporter.write_sep("-", "compiled in the tests (Triton cache misses): %d variants, %.1f s"
                                   % (len(_COMPILES), sum(c[2] for c in _COMPILES)))
        for test, what, seconds in sorted(_COMPILES, key=lambda c: -c[2])[:40]:
            terminalreporter.write_line(f"{seconds:6.1f} s  {test}  {what[:300]}")
    if _VARIANTS:
        terminalreporter.write_sep("-", f"Triton kernel variants compiled or loaded: {sum(_VARIANTS.values())}")
        for key, n in sorted(_VARIANTS.items(), key=lambda x: -x[1]):
            terminalreporter.write_line(f"{n:5d}  {key}")


@pytest.fixture
def rng():
    """A fresh random generator per test; its seed is printed (shown on failure)."""
    seed = random.randrange(2**32)
    print("seed", seed)
    return random.Random(seed)


def set_defaults(monkeypatch, fn, **values):
    """Change keyword defaults of ``fn`` for one test (launchers take tile sizes as defaults)."""
    names = list(inspect.signature(fn).parameters)[-len(fn.__defaults__):]
    monkeypatch.setattr(fn, "__defaults__", tuple(values.get(n, d) for n, d in zip(names, fn.__defaults__)))


@pytest.fixture
def kernels_on_cpu(monkeypatch):
    """Route CPU tensors through the Triton kernels (under the interpreter)."""
    assert INTERPRET, "interpreter tests need TRITON_INTERPRET=1"
    monkeypatch.setenv("TORCHALIGN_CPU_BACKEND", "triton")


# ---- hypothesis: lengths that cross the kernels' boundaries --------------------------------
def lengths(edges, high: int, low: int = 0):
    """Lengths at and beside each boundary in ``edges`` (b - 1, b, b + 1: a tile's or a
    word's edge, a chunk's size), mixed with uniform ones in [low, high]."""
    near = sorted({x for b in edges for x in (b - 1, b, b + 1) if x >= low})
    return st.one_of(st.sampled_from(near), st.integers(low, high))


def texts(alphabet: str, edges, high: int, low: int = 0):
    """Strings over ``alphabet`` whose lengths are drawn by ``lengths``."""
    return lengths(edges, high, low).flatmap(lambda n: st.text(alphabet, min_size=n, max_size=n))
