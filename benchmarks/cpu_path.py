"""CPU path benchmark (issue 15, item 4): the CPU implementations beside the torch DPs they
replaced (still the fallback), in one run, on the same inputs.

    python benchmarks/cpu_path.py [--commit HASH] [--out DIR] [--threads 1,2] [--skip-cli]

Workloads:
- cli: the bundled default ``torchalign search --device cpu`` (20 Swiss-Prot queries x
  2,100 proteins, BLOSUM62 11/1, top 10, then the hits' tracebacks) in a child process,
  for each ``--threads``: wall seconds and the child's user + system CPU seconds;
- search: 2 queries (144 and 200 aa) x the first 300 bundled proteins (scores and ends),
  ours beside the torch DP;
- traceback: the 20 x 10 hits of the default search, ours beside the torch DP;
- cdist: levenshtein_cdist of 2,000 x 2,000 random 100-byte strings; the torch DP on
  200 of the rows (its throughput is per cell, the same at any row count).
The machine may be shared: each row records the load average when it ran.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import random
import resource
import subprocess
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import Clock, Row, fill_ratios, git_commit, markdown_table, write_json  # noqa: E402

import torchalign as ta  # noqa: E402
from torchalign import cli_search  # noqa: E402
from torchalign.cpu import parasail_align, rapidfuzz_levenshtein  # noqa: E402

OURS, TORCH_DP = "ours (parasail / rapidfuzz)", "torch DP (the fallback)"


@contextlib.contextmanager
def torch_dp():
    """The CPU ops without parasail and rapidfuzz: the torch DPs they fall back to."""
    saved = parasail_align.parasail, rapidfuzz_levenshtein.process
    parasail_align.parasail = rapidfuzz_levenshtein.process = None
    try:
        yield
    finally:
        parasail_align.parasail, rapidfuzz_levenshtein.process = saved


def timed(fn):
    """(result, wall seconds, this process's CPU seconds) of one call."""
    c0, t0 = os.times(), time.perf_counter()
    out = fn()
    c1 = os.times()
    return out, time.perf_counter() - t0, c1.user - c0.user + c1.system - c0.system


def load() -> str:
    return "load %.2f" % os.getloadavg()[0]


def cli_rows(threads: list[int], clock) -> list[Row]:
    rows = []
    for n in threads:
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        out = subprocess.run([sys.executable, "-m", "torchalign", "search", "--device", "cpu", "--threads", str(n)],
                             capture_output=True, text=True, check=True)
        wall = time.perf_counter() - t0
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
        hits = sum(1 for line in out.stdout.splitlines() if not line.startswith("#"))
        summary = out.stderr.strip().splitlines()[-1]
        print(f"{clock()} cli --threads {n}: {wall:.1f} s wall, {cpu:.1f} s CPU, {hits} hits; {summary}")
        rows.append(Row("bundled `torchalign search --device cpu` (28.5 G cells + 200 tracebacks)",
                        f"{OURS}, --threads {n}", wall * 1e3, 28.5e9, "CUPS", None, "n/a",
                        f"{cpu:.1f} s CPU, {load()}"))
    return rows


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--commit")
    p.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "results"))
    p.add_argument("--threads", default="1,2")
    p.add_argument("--skip-cli", action="store_true")
    args = p.parse_args()
    threads = [int(x) for x in args.threads.split(",")]
    clock = Clock()
    torch.set_num_threads(1)
    rows = [] if args.skip_cli else cli_rows(threads, clock)

    sc = ta.Scoring()
    ta.search(["W"], ["W"], sc), ta.traceback(["W"], ["W"], sc), ta.levenshtein_cdist(["w"], ["w"])  # first calls
    (_, q), (_, d) = cli_search._read_files(argparse.Namespace(queries=None, database=None), sc)
    part = ta.SequenceBatch.from_codes([d[i] for i in range(300)], d.alphabet)
    two = ta.SequenceBatch.from_codes([q[i] for i in (0, 1)], q.alphabet)
    cells = int(two.codes.numel()) * int(part.codes.numel())
    wl = "search: 2 queries x 300 bundled proteins"
    fast, t, cpu = timed(lambda: ta.search(two, part, sc, 10))
    rows.append(Row(wl, OURS, t * 1e3, cells, "CUPS", None, "n/a", f"{cpu:.2f} s CPU, {load()}"))
    with torch_dp():
        slow, t, cpu = timed(lambda: ta.search(two, part, sc, 10))
    same = all(torch.equal(a, b) for a, b in zip(fast, slow))
    rows.append(Row(wl, TORCH_DP, t * 1e3, cells, "CUPS", OURS, "yes" if same else "NO", f"{cpu:.2f} s CPU, {load()}"))
    print(f"{clock()} search done")

    r = ta.search(q, d, sc, 10)
    pair_q = torch.arange(len(q)).repeat_interleave(10)
    pairs = (pair_q, r.indices.reshape(-1))
    tb_cells = int(((r.query_ends + 1) * (r.ends + 1)).sum())
    wl = "traceback: the 200 hits of the default search"
    fast, t, cpu = timed(lambda: ta.traceback(q, d, sc, pairs=pairs))
    rows.append(Row(wl, OURS, t * 1e3, tb_cells, "CUPS", None, "n/a", f"{cpu:.2f} s CPU, {load()}"))
    with torch_dp():
        slow, t, cpu = timed(lambda: ta.traceback(q, d, sc, pairs=pairs))
    rows.append(Row(wl, TORCH_DP, t * 1e3, tb_cells, "CUPS", OURS, "yes" if fast == slow else "NO",
                    f"{cpu:.2f} s CPU, {load()}"))
    print(f"{clock()} traceback done")

    rng = random.Random(0)
    letters = "abcdefghijklmnopqrstuvwxyz"
    a = ta.encode(["".join(rng.choice(letters) for _ in range(100)) for _ in range(2000)], "bytes")
    b = ta.encode(["".join(rng.choice(letters) for _ in range(100)) for _ in range(2000)], "bytes")
    wl = "levenshtein_cdist: 2,000 x 2,000 x 100 bytes"
    for n in threads:
        torch.set_num_threads(n)
        fast, t, cpu = timed(lambda: ta.levenshtein_cdist(a, b))
        rows.append(Row(wl, f"{OURS}, {n} thread(s)", t * 1e3, 2000 * 2000 * 100 * 100, "CUPS",
                        None if n == threads[0] else f"{OURS}, {threads[0]} thread(s)", "n/a",
                        f"{cpu:.2f} s CPU, {load()}"))
    torch.set_num_threads(1)
    rows_a = ta.SequenceBatch.from_codes([a[i] for i in range(200)], a.alphabet)
    with torch_dp():
        slow, t, cpu = timed(lambda: ta.levenshtein_cdist(rows_a, b))
    rows.append(Row(wl, TORCH_DP + ", 200 of the rows", t * 1e3, 200 * 2000 * 100 * 100, "CUPS",
                    f"{OURS}, {threads[0]} thread(s)", "yes" if torch.equal(slow, fast[:200]) else "NO",
                    f"{cpu:.2f} s CPU, {load()}"))
    print(f"{clock()} cdist done")

    fill_ratios(rows)
    print(markdown_table(rows))
    commit = git_commit(args.commit)
    path = write_json(args.out, "cpu_path", torch.device("cpu"), commit, rows, {"cpus": os.cpu_count()},
                      f"-{commit[:7]}")
    print("wrote", path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
