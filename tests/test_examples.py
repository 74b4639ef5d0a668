"""The examples run as a user would run them (on the CPU here)."""

import subprocess
import sys

from .conftest import REPO


def test_dataloader_compile_example():
    out = subprocess.run([sys.executable, str(REPO / "examples" / "dataloader_compile.py"), "--device", "cpu"],
                         capture_output=True, text=True, timeout=600, check=True).stdout
    lines = out.strip().splitlines()
    assert lines[-1].endswith("hits in 512 reads") and int(lines[-1].split()[0]) > 0
    assert all("best distance [1]" in line for line in lines[:-1])  # the planted guide, one substitution


def test_soft_align_train_example():
    """The loss falls and the learned matrix correlates with BLOSUM62 (100 steps on the CPU)."""
    out = subprocess.run([sys.executable, str(REPO / "examples" / "soft_align_train.py"), "--steps", "100"],
                         capture_output=True, text=True, timeout=600, check=True).stdout
    last = out.strip().splitlines()[-1]  # "loss A -> B; final correlation with BLOSUM62 +R"
    first, rest = last.removeprefix("loss ").split(" -> ")
    assert float(rest.split(";")[0]) < 0.5 * float(first), out
    assert float(last.rsplit(" ", 1)[1]) > 0.7, out
