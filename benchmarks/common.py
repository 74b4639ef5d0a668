"""Shared helpers of the benchmark scripts: device, timing, the table, the JSON record.

Imported by the scripts next to it (``python benchmarks/<family>.py`` puts this folder
on sys.path). Imports only torch at module level; triton only when timing on CUDA.
"""

from __future__ import annotations

import datetime as _dt
import json
import math
import os
import platform
import re
import statistics
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from typing import Callable, Optional

import torch

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def data_file(name: str) -> str:
    """A data file of the repository: data/ (TORCHALIGN_TEST_DATA overrides it), else the
    package's own torchalign/data/ (the files the CLI ships)."""
    path = os.path.join(os.environ.get("TORCHALIGN_TEST_DATA", os.path.join(REPO, "data")), name)
    return path if os.path.exists(path) else os.path.join(REPO, "torchalign", "data", name)


# ---------------------------------------------------------------- device ------------
def pick_device(name: Optional[str] = None) -> torch.device:
    """cuda if available (or as asked), else cpu."""
    if name:
        return torch.device(name)
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def device_name(device: torch.device) -> str:
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return platform.processor() or platform.machine() or "cpu"


def device_short(device: torch.device) -> str:
    """A file-name token: 'h100', 'h200', 'a100', ... or 'cpu'."""
    if device.type != "cuda":
        return "cpu"
    name = torch.cuda.get_device_name(device)
    m = re.search(r"\b([A-Z]{1,2}\d{2,4}[A-Za-z]?)\b", name.replace("NVIDIA", ""))
    token = m.group(1) if m else name.split()[-1]
    return re.sub(r"[^a-z0-9]+", "-", token.lower()).strip("-") or "cuda"


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


# ---------------------------------------------------------------- timing ------------
def bench(fn: Callable[[], object], device: torch.device, warmup: int = 25, rep: int = 100,
          cpu_runs: int = 3, slow_ms: float = 250.0) -> float:
    """Median milliseconds of one call of ``fn``, warm-up (and compilation) excluded.

    CUDA: one warm-up call, then ``triton.testing.do_bench`` (CUDA events, L2 flushed
    between calls; ``warmup`` and ``rep`` in ms). A call slower than ``slow_ms`` would get
    a single timed repeat from do_bench (and cost 8 calls): it is timed 3 times with CUDA
    events instead and the median returned, which bounds the run time.
    CPU: one warm-up call, then the median of ``cpu_runs`` ``time.perf_counter`` timings.
    """
    if device.type == "cuda":
        import triton.testing

        fn()
        torch.cuda.synchronize(device)
        first = _event_ms(fn)
        if first > slow_ms:
            return statistics.median([first, _event_ms(fn), _event_ms(fn)])
        return float(triton.testing.do_bench(fn, warmup=warmup, rep=rep, return_mode="median"))
    fn()
    times = []
    for _ in range(cpu_runs):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def _event_ms(fn) -> float:
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end)


class Clock:
    """Seconds since the script started, for progress lines."""

    def __init__(self):
        self.t0 = time.perf_counter()

    def __call__(self) -> str:
        return f"[{time.perf_counter() - self.t0:6.1f} s]"


# ---------------------------------------------------------------- results -----------
@dataclass
class Row:
    """One line of the table. ``work`` / time = throughput in ``unit``; ``ref`` names the
    row of ours on the same input that ``vs_ours`` compares against."""

    workload: str
    impl: str
    time_ms: float
    work: float
    unit: str
    ref: Optional[str] = None  # impl of our row on the same input; None: this row is ours
    verified: str = "n/a"  # "yes": same integers as the reference; "n/a": not compared
    note: str = ""
    vs_ours: float = field(default=float("nan"))

    @property
    def throughput(self) -> float:
        return self.work / (self.time_ms * 1e-3) if self.time_ms > 0 else float("nan")


def fill_ratios(rows: list[Row]) -> None:
    """vs_ours = ours' throughput / this row's throughput (>1: ours is faster)."""
    by_key = {(r.workload, r.impl): r for r in rows}
    for r in rows:
        ref = by_key.get((r.workload, r.ref)) if r.ref else r
        if ref is None:  # the reference may sit under another workload label
            ref = next((x for x in rows if x.impl == r.ref), None)
        if ref is not None and r.throughput > 0:
            r.vs_ours = ref.throughput / r.throughput


def si(x: float) -> str:
    if not math.isfinite(x):
        return "-"
    for p, s in ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(x) >= p:
            return f"{x / p:.3g} {s}"
    return f"{x:.3g} "


def markdown_table(rows: list[Row]) -> str:
    head = ["workload", "implementation", "time (ms)", "throughput", "vs ours", "verified"]
    lines = ["| " + " | ".join(head) + " |", "| " + " | ".join("---" for _ in head) + " |"]
    for r in rows:
        ratio = "1.00 (ours)" if r.ref is None else (f"{r.vs_ours:.3g}x" if math.isfinite(r.vs_ours) else "-")
        impl = r.impl + (f" ({r.note})" if r.note else "")
        lines.append(f"| {r.workload} | {impl} | {r.time_ms:.3f} | {si(r.throughput)}{r.unit} | {ratio} | {r.verified} |")
    return "\n".join(lines)


# ---------------------------------------------------------------- provenance --------
def git_commit(given: Optional[str]) -> str:
    if given:
        return given
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True, timeout=10)
        if out.returncode == 0 and out.stdout.strip():
            sha = out.stdout.strip()
            dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=REPO,
                                   capture_output=True, text=True, timeout=10)
            return sha + ("+dirty" if dirty.returncode == 0 and dirty.stdout.strip() else "")
    except (OSError, subprocess.SubprocessError):
        pass
    return "unknown"


def versions() -> dict:
    try:
        import triton

        triton_version = triton.__version__
    except Exception:  # noqa: BLE001  (triton is optional on CPU)
        triton_version = None
    return {"torch": torch.__version__, "triton": triton_version, "python": sys.version.split()[0],
            "cuda": torch.version.cuda}


def write_json(out_dir: str, family: str, device: torch.device, commit: str, rows: list[Row],
               extra: dict, suffix: str = "") -> str:
    now = _dt.datetime.now(_dt.timezone.utc)
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, f"{family}-{device_short(device)}-{now:%Y-%m-%d}{suffix}.json")
    record = {
        "benchmark": family,
        "device": device_name(device),
        "device_type": device.type,
        **versions(),
        "commit": commit,
        "date": now.isoformat(timespec="seconds"),
        "command": " ".join([os.path.basename(sys.executable)] + sys.argv),
        **extra,
        "rows": [dict(asdict(r), throughput=r.throughput) for r in rows],
    }
    with open(path, "w") as f:
        json.dump(record, f, indent=2, default=str)
        f.write("\n")
    return path


def report_end(path: str, info: dict, errors: list[str], failures: list[str]) -> None:
    """The lines after the table: peers that raised, the total time and the JSON written;
    then exit 1 if any result failed its verification."""
    for e in errors:
        print(f"peer error: {e}")
    print(f"total {info['wall_s']} s; wrote {path}")
    if failures:
        print("\nVERIFICATION FAILED:\n  " + "\n  ".join(failures))
        sys.exit(1)
