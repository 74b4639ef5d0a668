"""The command's start: its first op call does not load torch's compiler (ops/eager.py),
while the library, called from Python, keeps torch's guard for compiled graphs."""

import subprocess
import sys

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
