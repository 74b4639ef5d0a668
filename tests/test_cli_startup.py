"""The command's start: its first op call does not load torch's compiler (ops/eager.py),
while the library, called from Python, keeps torch's guard for compiled graphs; it warms
CUDA in the background (ops/warm.py), keys only the kernels it imports, and leaves without
the interpreter's teardown."""

import subprocess
import sys

import pytest

import torchalign as ta
from torchalign.ops.eager import skip_compiler_import

from .conftest import REPO


def _imports(args):
    run = subprocess.run([sys.executable, "-X", "importtime", *args], cwd=REPO, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr[-2000:]
    return run.stdout, {line.split("|")[-1].strip() for line in run.stderr.splitlines() if line.startswith("import time")}


def test_command_searches_without_loading_dynamo():
    out, modules = _imports(["-m", "torchalign", "search", "examples/query.fa", "--device", "cpu", "--top", "2"])
    assert len([x for x in out.splitlines() if not x.startswith("#")]) == 2
    assert "torch" in modules and "torch._dynamo" not in modules


def test_without_the_skip_the_first_call_loads_dynamo():
    # the measurement above means something: an op call from Python does load it
    code = "import torchalign as ta; ta.levenshtein(['ab'], ['abc'])"
    _, modules = _imports(["-c", code])
    assert "torch._dynamo" in modules


def test_skip_is_a_no_op_once_dynamo_is_loaded():
    import torch._dynamo  # noqa: F401  (this test process may have loaded it already)

    assert skip_compiler_import() is False
    assert ta.levenshtein(["kitten"], ["sitting"]).tolist() == [3]


def test_command_ends_with_its_output_flushed_and_its_exit_code():
    # entry() leaves by os._exit, past the interpreter's teardown: nothing written may be lost
    ok = subprocess.run([sys.executable, "-m", "torchalign", "search", "examples/query.fa", "--device", "cpu"],
                        cwd=REPO, capture_output=True, text=True)
    assert ok.returncode == 0 and len([x for x in ok.stdout.splitlines() if not x.startswith("#")]) == 10
    assert "GCUPS" in ok.stderr
    bad = subprocess.run([sys.executable, "-m", "torchalign", "search", "--top", "0"], cwd=REPO,
                         capture_output=True, text=True)
    assert bad.returncode == 2 and "--top must be >= 1" in bad.stderr


def test_a_kernel_module_keys_only_what_it_reaches():
    # the first search imports and keys its own kernels, not the package's 74 (cache_keys.py)
    code = ("import sys, torchalign_kernels.align_scan\n"
            "print(*sorted(m.split('.')[1] for m in sys.modules if m.startswith('torchalign_kernels.')))")
    run = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.split() == ["align", "align_scan", "cache_keys", "spin"]


def test_warm_up_thread_only_on_cuda():
    from torchalign.ops import warm

    assert warm.start("cpu") is None


@pytest.mark.gpu
def test_warm_up_thread_readies_cuda_and_tritons_key():
    import torch
    from triton.runtime.cache import triton_key

    from torchalign.ops import warm

    thread = warm.start("cuda")
    thread.join(timeout=60)
    assert not thread.is_alive() and torch.cuda.is_initialized()
    assert triton_key.cache_info().currsize == 1
