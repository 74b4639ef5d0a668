"""Every kernel variant a launcher can pick compiles for sm_80, sm_86, sm_89 and sm_90 (and
sm_100 with TORCHALIGN_COMPILE_TARGETS=80,86,89,90,100, where the installed Triton knows it),
on this CPU-only machine (issue 12, item 2).

The interpreter runs kernels as NumPy and misses what only the GPU compiler rejects
(inline PTX a target lacks, loop-carried variables changing type, constexpr misuse,
dtype rules of tl.dot, shared memory past a target's limit, ptxas itself failing);
Triton compiles to PTX and cubin (its own ptxas) without a GPU. The variants are not
listed here: tests/launches.py runs the public ops with every launch recorded instead of
run, so each compile gets the argument types, specializations, constexprs and num_warps /
num_stages that the launcher itself passed. The scan's DPX constexpr is the launcher's
rule for the target (align_scan.dpx_for) and also False (TORCHALIGN_NO_DPX=1).

Time: the front end (TTIR, TTGIR) is most of a compile (the alignment kernels' 48 unrolled
rows: seconds each). Triton's TTGIR passes that differ between targets act on tensor-core
dots (and TMA descriptors, which no kernel here uses), so a variant whose sm_80 TTGIR has
no tt.dot runs its front end once, for sm_80; sm_86 and sm_89 take sm_80's PTX (the same
but for its .target line) through ptxas alone, and sm_90 and later take that TTGIR through
their own back end (LLVM IR, PTX, ptxas); test_ttgir_without_dots_is_the_same_on_every_target
checks both premises. Variants with dots run the front end per Triton pipeline family
(capability // 10: sm_80 for sm_86 and sm_89, sm_90, sm_100). Compiles run in one process
per core; Triton's cache (TRITON_CACHE_DIR) keeps them between runs.
"""

from __future__ import annotations

import functools
import multiprocessing
import os
import re
from concurrent.futures import ProcessPoolExecutor

import pytest


if os.environ.get("TRITON_INTERPRET") == "1":  # the recorder replaces JITFunction.run, which the interpreter lacks
    pytest.skip("compile tests run without TRITON_INTERPRET", allow_module_level=True)

triton = pytest.importorskip("triton")
from triton.backends.compiler import GPUTarget  # noqa: E402
from triton.compiler.compiler import make_backend  # noqa: E402
from triton.runtime.jit import create_function_from_signature  # noqa: E402

from torchalign_kernels import align_scan  # noqa: E402

from . import launches  # noqa: E402

# sm_100 too with TORCHALIGN_COMPILE_TARGETS=80,86,89,90,100 (left out by default: CI has 2 cores and 20 minutes)
TARGETS = [int(c) for c in os.environ.get("TORCHALIGN_COMPILE_TARGETS", "80,86,89,90").split(",")]
# the most shared memory one block may use, by compute capability (CUDA programming guide)
SHARED_LIMIT = {80: 163 << 10, 86: 99 << 10, 89: 99 << 10, 90: 227 << 10, 100: 227 << 10}
KERNELS = sorted(launches.kernels())
# Triton's own ptxas (the one its back end runs)
PTXAS = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "ptxas")
SAME_PTX = (86, 89)  # Ampere and Ada take sm_80's PTX unchanged but for .target (checked below): ptxas only


def _compile(job):
    """One compile, in a worker process: (error or None, shared bytes, PTX, TTGIR). A job
    is (cap, options, source): source is the kernel, its signature, constexprs and
    attributes (front end and back end), or another target's TTGIR (back end only)."""
    import importlib
    import subprocess
    import tempfile

    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    cap, options, source = job
    try:
        if isinstance(source, tuple) and source[0] == "ptx":  # sm_80's PTX through this target's ptxas
            _, ptx, shared = source
            ptx = re.sub(r"\.target sm_\d+", f".target sm_{cap}", ptx)
            with tempfile.TemporaryDirectory() as tmp:
                path = os.path.join(tmp, "kernel.ptx")
                with open(path, "w") as f:
                    f.write(ptx)
                done = subprocess.run([PTXAS, f"-arch=sm_{cap}", path, "-o", os.path.join(tmp, "kernel.cubin")],
                                      capture_output=True, text=True)
            if done.returncode:
                return f"PTXASError: {done.stderr[:3000]}", 0, "", ""
            return None, shared, ptx, ""
        if isinstance(source, str):
            with tempfile.TemporaryDirectory() as tmp:
                path = os.path.join(tmp, "kernel.ttgir")
                with open(path, "w") as f:
                    f.write(re.sub(r'"cuda:\d+"', f'"cuda:{cap}"', source))
                c = triton.compile(path, target=GPUTarget("cuda", cap, 32), options=options)
        else:
            module, name, signature, constexprs, attrs = source
            fn = getattr(importlib.import_module(module), name)
            c = triton.compile(ASTSource(fn, signature, constexprs, attrs), target=GPUTarget("cuda", cap, 32),
                               options=options)
    except Exception as e:  # noqa: BLE001  (reported by the test)
        return f"{type(e).__name__}: {str(e)[:3000]}", 0, "", ""
    return None, c.metadata.shared, c.asm["ptx"], c.asm["ttgir"]


def _specialize(fn, args, kwargs, cap):
    """What JITFunction.run hands the compiler on a GPU of this compute capability."""
    backend = make_backend(GPUTarget("cuda", cap, 32))
    kwargs = dict(kwargs, debug=False)
    bound, spec, options = create_function_from_signature(fn.signature, fn.params, backend)(*args, **kwargs)
    options, signature, constexprs, attrs = fn._pack_args(backend, kwargs, bound, spec, options)
    return signature, constexprs, attrs, options.__dict__


def _device_choices(kwargs, cap, monkeypatch):
    """The launch's keyword arguments with the device's own choices filled in: the scan's
    DPX as the launcher decides on this target, and as TORCHALIGN_NO_DPX=1 forces it (and
    the columns per step that go with it)."""
    if kwargs.get("DPX") is not launches.DEVICE_DPX:
        return [kwargs]
    choices = set()
    for no_dpx in (False, True):
        if no_dpx:
            monkeypatch.setenv("TORCHALIGN_NO_DPX", "1")
        else:
            monkeypatch.delenv("TORCHALIGN_NO_DPX", raising=False)
        choices.add(align_scan.dpx_for((cap // 10, cap % 10)))
    return [launches.with_dpx(kwargs, dpx) for dpx in sorted(choices)]


@functools.cache
def variants() -> dict:
    """{(kernel, target): {variant: (options, source)}} from the recorded launches. A
    variant is a kernel with its constexprs, pointer types and launch options; of its
    launches the one with the fewest scalars specialized to constants (the most general)
    is compiled."""
    with pytest.MonkeyPatch.context() as monkeypatch:
        return _variants(launches.record(monkeypatch), monkeypatch)


def _variants(seen, monkeypatch) -> dict:
    names = {fn: key for key, fn in launches.kernels().items()}
    best = {}
    for fn, args, kwargs in seen:
        declared = [p.name for p in fn.params if p.is_constexpr]
        for cap in TARGETS:
            for kw in _device_choices(kwargs, cap, monkeypatch):
                signature, constexprs, attrs, options = _specialize(fn, args, kw, cap)
                const = {fn.arg_names[path[0]]: v for path, v in constexprs.items()}
                label = ", ".join([f"{n}={const[n]}" for n in declared]
                                  + [f"num_warps={options['num_warps']}", f"num_stages={options['num_stages']}"]
                                  + [f"{n}:{t}" for n, t in signature.items() if t.startswith("*")])
                rank = sum(n not in declared for n in const)
                slot = best.setdefault((names[fn], cap), {})
                if label not in slot or rank < slot[label][0]:
                    slot[label] = (rank, options, (fn.__module__, fn.__name__, signature, constexprs, attrs))
    return {key: {label: (options, source) for label, (_, options, source) in v.items()} for key, v in best.items()}


@functools.cache
def known(cap: int) -> bool:
    """Whether the installed Triton compiles for this compute capability."""
    import triton.language as tl
    from triton.compiler import ASTSource

    @triton.jit
    def probe(x_ptr):
        tl.store(x_ptr, 1)

    try:
        triton.compile(ASTSource(probe, {"x_ptr": "*i32"}), target=GPUTarget("cuda", cap, 32))
        return True
    except Exception:  # noqa: BLE001
        return False


@pytest.fixture(scope="module")
def compiled(request):
    """{(kernel, target): {variant: (error, shared, PTX, TTGIR)}} for the selected tests."""
    want = {(item.callspec.params["kernel"], item.callspec.params["cap"]) for item in request.session.items
            if getattr(item, "originalname", None) == "test_compiles"}
    found = variants()
    want = {(k, cap) for k, cap in want if known(cap)}
    out = {key: {} for key in found}
    with ProcessPoolExecutor(max_workers=os.cpu_count() or 1, mp_context=multiprocessing.get_context("spawn")) as pool:
        def run(jobs):
            for (key, label, _), result in zip(jobs, pool.map(_compile, [job for _, _, job in jobs])):
                out[key][label] = result

        fronts = {(kernel, 80) for kernel, _ in want} & found.keys()
        run([(key, label, (80, options, source)) for key in fronts for label, (options, source) in found[key].items()])
        rest = []
        for kernel, cap in (want - fronts) & found.keys():
            for label, (options, source) in found[(kernel, cap)].items():
                err, shared, ptx, ttgir = out[(kernel, 80)].get(label, (None, 0, "", ""))
                if err:
                    out[(kernel, cap)][label] = (f"the front end (sm_80) failed: {err}", 0, "", "")
                elif ptx and cap in SAME_PTX:
                    rest.append(((kernel, cap), label, (cap, options, ("ptx", ptx, shared))))
                elif not ttgir or ("tt.dot" in ttgir and cap // 10 != 8):  # (no sm_80 variant: DPX=True)
                    rest.append(((kernel, cap), label, (cap, options, source)))
                else:
                    rest.append(((kernel, cap), label, (cap, options, ttgir)))
        run(rest)
    return out


@pytest.mark.parametrize("cap", TARGETS, ids=[f"sm_{c}" for c in TARGETS])
@pytest.mark.parametrize("kernel", KERNELS)
def test_compiles(compiled, kernel, cap):
    """Every recorded variant of ``kernel`` compiles for sm_<cap> within its shared memory."""
    if not known(cap):
        pytest.skip(f"triton {triton.__version__} does not compile for sm_{cap}")
    results = compiled.get((kernel, cap))
    assert results, f"no launch of {kernel} was recorded: drive it in tests/launches.py"
    failed = {label: err for label, (err, _, _, _) in results.items() if err}
    assert not failed, "\n".join(f"{kernel}[{label}] for sm_{cap}: {err}" for label, err in failed.items())
    over = {label: shared for label, (_, shared, _, _) in results.items() if shared > SHARED_LIMIT[cap]}
    assert not over, f"shared memory past sm_{cap}'s {SHARED_LIMIT[cap]} bytes: {over}"
    if kernel == "align_scan.scan_kernel":  # the DPX instructions exactly where the launcher asks for them
        for label, (_, _, ptx, _) in results.items():
            dpx, half = "DPX=True" in label, "HALF=1" in label
            assert dpx == ("max.s16x2" in ptx) == ("add.s16x2" in ptx), label
            assert half == ("max.f16x2" in ptx) == ("add.rn.f16x2" in ptx), label  # (the opt-in float16 pairs)
            assert not dpx or cap >= 90, label
        assert any("DPX=False" in label for label in results) and any("HALF=1" in label for label in results)
    if kernel.startswith("soft_align"):  # exp and log as the bare MUFU instructions (soft_align.FAST_MATH)
        for label, (_, _, ptx, _) in results.items():
            assert "ex2.approx.ftz.f32" in ptx, label
            # what later steps load, brought into L2 ahead (soft_align.PREFETCH; the tangent rows excepted)
            assert ("prefetch.global.L2" in ptx) == (kernel != "soft_align_hvp.soft_align_tangent_kernel"), label


_SWITCHES_PTX = """
import triton, triton.language as tl
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from torchalign_kernels import soft_align

@triton.jit
def probe(x_ptr):
    x = tl.load(x_ptr + tl.arange(0, 32))
    soft_align._prefetch(x_ptr + 32 + tl.arange(0, 32), x > 0)
    tl.store(x_ptr + tl.arange(0, 32), soft_align._lse2(x, x + 1.0))

print(triton.compile(ASTSource(probe, {"x_ptr": "*fp32"}), target=GPUTarget("cuda", 80, 32)).asm["ptx"])
"""


@pytest.mark.parametrize("fast", ["1", "0"])
def test_soft_fast_math_and_prefetch_are_switches(fast, tmp_path):
    """TORCHALIGN_SOFT_FAST_MATH=0 (and the interpreter) compiles tl.exp / tl.log, no inline
    approximations; by default the lse is ex2/lg2.approx.ftz. TORCHALIGN_SOFT_PREFETCH=0:
    no prefetch (a process each: the switches are read when the kernels' module is imported)."""
    import subprocess
    import sys

    (tmp_path / "switches_ptx.py").write_text(_SWITCHES_PTX)  # (triton.jit reads a kernel's source from its file)
    env = dict(os.environ, TORCHALIGN_SOFT_FAST_MATH=fast, TORCHALIGN_SOFT_PREFETCH="16" if fast == "1" else "0",
               TRITON_CACHE_DIR=str(tmp_path / "cache"))
    ptx = subprocess.run([sys.executable, str(tmp_path / "switches_ptx.py")], env=env, capture_output=True, text=True,
                         check=True).stdout
    assert "ld.global" in ptx  # (the kernel's PTX)
    assert ("lg2.approx.ftz.f32" in ptx) == ("ex2.approx.ftz.f32" in ptx) == (fast == "1")
    assert ("prefetch.global.L2" in ptx) == (fast == "1")


def test_dpx_needs_sm_90():
    """The reason for the switch: add/max.s16x2 do not assemble for sm_80 (ptxas)."""
    import triton.language as tl
    from triton.compiler import ASTSource

    @triton.jit
    def dpx(x_ptr):
        x = tl.load(x_ptr)
        tl.store(x_ptr, align_scan._max2(align_scan._add2(x, x, True), x, True))

    with pytest.raises(Exception, match="s16x2"):
        triton.compile(ASTSource(dpx, {"x_ptr": "*i32"}), target=GPUTarget("cuda", 80, 32))
    ptx = triton.compile(ASTSource(dpx, {"x_ptr": "*i32"}), target=GPUTarget("cuda", 90, 32)).asm["ptx"]
    assert "add.s16x2" in ptx and "max.s16x2" in ptx


def _ops(ttgir: str) -> list[str]:
    """The operations of a TTGIR module, sorted (SSA names and constant order vary)."""
    return sorted(re.findall(r"\b(?:arith|math|tt|ttg|ttng|scf|cf|gpu|nvgpu)\.[a-z_.]+", ttgir))


@pytest.mark.parametrize("kernel", ["align.align_kernel", "align_wave.align_wave_kernel", "align_scan.scan_kernel"])
def test_unrolled_gathers_are_inline_ptx(kernel):
    """The alignment kernels' unrolled substitution-score gathers (ROWS per column) reach the
    compiler as inline PTX loads, not tt.load: Triton's coalescing pass walks the kernel's whole
    def-use slice once per tt.load, which was most of these kernels' compile time (NOTES.md)."""
    from torchalign_kernels.align import ROWS

    label, (options, source) = next(iter(variants()[(kernel, 80)].items()))
    err, _, _, ttgir = _compile((80, options, source))
    assert err is None, err
    # with tt.load: a score gather per row and a query-code load per row (2 ROWS and a few)
    assert len(re.findall(r"\btt\.load\b", ttgir)) < 2 * ROWS, label


def test_inline_ptx_operands_suit_older_triton():
    """No inline PTX takes a pointer (constraint "l") and a float ("f") in one call. Triton 3.6
    (the GPU machine's) type-checks inline_asm_elementwise's operands against each other and
    rejects a pointer beside a float ("invalid operands of type pointer<fp32> and float32");
    the Triton that compiles this tier no longer does, so a kernel that passes here failed on
    the GPU (session 35: the soft sweeps' stores, which now pass the floats' int32 bits)."""
    import inspect

    mixed, calls, read = [], 0, 0
    for module in launches.kernel_modules():
        src = inspect.getsource(module)
        calls += len(re.findall(r"inline_asm_elementwise\(", src))
        for call in re.finditer(r"inline_asm_elementwise\(\s*(?:\"[^\"]*\"\s*)+,\s*\"(=[^\"]*)\"", src):
            read += 1
            inputs = [c for c in call.group(1).split(",") if not c.startswith("=")]
            if "l" in inputs and "f" in inputs:
                mixed.append(f"{module.__name__}: {call.group(1)}")
    assert calls and read == calls  # (every call's constraints were read)
    assert not mixed, mixed


@pytest.mark.parametrize("kernel", ["levenshtein.levenshtein_rows_kernel", "traceback.traceback_walk_kernel"])
def test_ttgir_without_dots_is_the_same_on_every_target(kernel):
    """The premise of the back-end-only compiles: without tensor-core dots, every target's
    front end gives sm_80's TTGIR (the same operations; checked on small kernels with loops)."""
    label = next(iter(variants()[(kernel, 80)]))
    full = {cap: _compile((cap, *variants()[(kernel, cap)][label])) for cap in TARGETS if known(cap)}
    ops = {cap: _ops(ttgir) for cap, (_, _, _, ttgir) in full.items()}
    assert ops[80] and all(o == ops[80] for o in ops.values()), label
    # and the premise of the ptxas-only compiles: Ampere's and Ada's PTX is sm_80's but for .target
    ptx = {cap: _code(p) for cap, (_, _, p, _) in full.items()}
    assert all(ptx[cap] == ptx[80] for cap in SAME_PTX if cap in ptx), label


def _code(ptx: str) -> str:
    """A PTX module's instructions: without its .target line and its debug information, which
    names the directory of the compile that filled Triton's cache (another clone's, in CI)."""
    ptx = ptx.split("\t.section\t.debug", 1)[0]
    return re.sub(r"^\s*\.(?:target|file)\b.*$", "", ptx, flags=re.M)


def test_cache_keys_do_not_depend_on_which_kernel_was_keyed_first():
    """Triton took a helper's global constexprs into a caller's cache key only when the
    helper's key already existed, so align_wave_kernel's key changed when align_kernel (which
    shares its helpers) was keyed first: the GPU tier's precompile then missed and the tests
    compiled those kernels again. torchalign_kernels.cache_keys settles every key on import."""
    import subprocess
    import sys

    def keys(order: str) -> str:
        code = ("import importlib\n"
                f"names = {order}\n"
                "fns = [getattr(importlib.import_module('torchalign_kernels.' + m), f)\n"
                "       for m, f in (n.split('.') for n in names)]\n"
                "[fn.cache_key for fn in fns]\n"
                "print(sorted((fn.__name__, fn.cache_key) for fn in fns))\n")
        return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout

    assert len(KERNELS) > 10
    assert keys(repr(KERNELS)) == keys(repr(KERNELS[::-1]))
