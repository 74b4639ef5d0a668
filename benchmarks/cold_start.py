"""The main job's cold start (issue 13, item 4): the bundled default search (`torchalign
search`: the 20 bundled Swiss-Prot queries against the bundled 2,100-protein proteome) in a
fresh process, with an empty Triton cache and then with the cache it left (warm), and where a
warm process's seconds go (python and torch, torchalign's import, reading and encoding the
files, the first search call, a second one). The steps take the command's path: the fast
FASTA reader, and no import of torch's compiler on the first op call (ops/eager.py).

    python benchmarks/cold_start.py [--runs 3] [--commit C]      (on a GPU machine)

Each run takes a new empty cache directory (TRITON_CACHE_DIR and TORCHINDUCTOR_CACHE_DIR),
then runs the CLI in it twice (empty, warm), then the step-timing process (warm). Medians
and spreads of the runs go to stdout as a markdown table.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

from common import REPO, git_commit

# one warm process's steps as the command takes them, timed in it (CUDA work synchronised
# before each clock)
STEPS = r"""
import time
t = [time.perf_counter()]
import torch
t.append(time.perf_counter())
torch.cuda.init(); torch.zeros(1, device="cuda"); torch.cuda.synchronize()
t.append(time.perf_counter())
import torchalign as ta
from torchalign.io import read_named
from torchalign.ops.eager import skip_compiler_import
skip_compiler_import()  # as the command does
t.append(time.perf_counter())
data = REPO + "/torchalign/data/"
sc = ta.Scoring()
q = read_named(data + "swissprot_queries20.fa", sc.alphabet, "queries", sc)[1].to("cuda")
d = read_named(data + "proteome_HG003687.fa", sc.alphabet, "database", sc)[1].to("cuda")
torch.cuda.synchronize(); t.append(time.perf_counter())
for _ in range(2):
    r = ta.search(q, d, sc); torch.cuda.synchronize(); t.append(time.perf_counter())
print("STEPS", [b - a for a, b in zip(t, t[1:])])
"""
STEP_NAMES = ["import torch", "CUDA context", "import torchalign", "read + encode + to cuda",
              "first ta.search (kernel load)", "second ta.search"]


def _run(cmd, env) -> tuple[float, str]:
    t = time.perf_counter()
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True)
    return time.perf_counter() - t, out.stdout


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--commit")
    args = ap.parse_args()
    cli = [sys.executable, "-m", "torchalign", "search", "--device", "cuda"]
    rows = {"CLI, empty Triton cache": [], "CLI, warm cache": [], "python -c (steps), warm cache": []}
    steps = []
    for _ in range(args.runs):
        cache = tempfile.mkdtemp(prefix="torchalign-cold-")
        env = dict(os.environ, TRITON_CACHE_DIR=os.path.join(cache, "triton"),
                   TORCHINDUCTOR_CACHE_DIR=os.path.join(cache, "inductor"))
        rows["CLI, empty Triton cache"].append(_run(cli, env)[0])
        rows["CLI, warm cache"].append(_run(cli, env)[0])
        wall, out = _run([sys.executable, "-c", f"REPO = {REPO!r}\n" + STEPS], env)
        rows["python -c (steps), warm cache"].append(wall)
        steps.append(json.loads(out.split("STEPS", 1)[1].strip()))
    print(f"commit {git_commit(args.commit)}, {args.runs} runs, process wall seconds: median (min-max)")
    print("| what | seconds |\n| --- | --- |")
    for name, xs in rows.items():
        print(f"| {name} | {statistics.median(xs):.2f} ({min(xs):.2f}-{max(xs):.2f}) |")
    for i, name in enumerate(STEP_NAMES):
        xs = [s[i] for s in steps]
        print(f"| step: {name} | {statistics.median(xs):.3f} ({min(xs):.3f}-{max(xs):.3f}) |")


if __name__ == "__main__":
    main()
