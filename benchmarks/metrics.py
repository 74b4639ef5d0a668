"""Error-rate metrics benchmark: torchalign.metrics beside torchmetrics and jiwer, on the same pairs.

    python benchmarks/metrics.py [--small] [--commit HASH] [--out benchmarks/results] [--device cuda|cpu]

Workload: 10,000 pairs of 100-character English-like lines (words Zipf-distributed over a
5,000-word vocabulary; the prediction is the reference with ~8% of its characters and
one or two words replaced, lengths kept). CER and WER of the whole set, from the strings:
a fresh metric's update(preds, target) + compute() + reading the value, so the encoding
and the copy to the device are timed too.
Rows: ours (``torchalign.metrics.CharErrorRate`` / ``WordErrorRate`` on the device),
torchmetrics' ``CharErrorRate`` / ``WordErrorRate`` on the same device (its DP runs in
Python on the host) and jiwer's ``cer`` / ``wer`` (rapidfuzz, C++, one host core). Every
row's value must equal ours (the lines have no leading/trailing whitespace and only
spaces between words, so jiwer's transforms change nothing). Each time is the median of
3 runs after a warm-up call (ours: on the whole input, which also compiles the kernels;
the peers: on 100 pairs), with the spread (min..max) beside it.
``--small``: 500 pairs (a CPU smoke run); the CPU runs ``--small`` sizes anyway.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import (Clock, Row, fill_ratios, git_commit, markdown_table, pick_device, report_end, si, sync,  # noqa: E402
                    write_json)

import torchalign.metrics as tam  # noqa: E402

SEED = 11
LINE = 100
SIZES = {"full": 10_000, "small": 500}
CLOCK = Clock()
FAILURES: list[str] = []
ERRORS: list[str] = []


def english_lines(n: int, rng) -> tuple[list[str], list[str]]:
    """(predictions, references) of LINE (or LINE - 1) characters each, no leading/trailing spaces."""
    letters = np.array(list("etaoinshrdlcumwfgypbvkjxqz"))
    weights = 1.0 / np.arange(1, 27)
    vocab = ["".join(rng.choice(letters, size=rng.integers(1, 11), p=weights / weights.sum())) for _ in range(5000)]
    by_length: dict = {}
    for w in vocab:
        by_length.setdefault(len(w), []).append(w)
    zipf = 1.0 / np.arange(1, len(vocab) + 1)
    draws = iter(rng.choice(len(vocab), size=40 * n, p=zipf / zipf.sum()).tolist())
    refs, preds = [], []
    for _ in range(n):
        words: list[str] = []
        while sum(map(len, words)) + len(words) < LINE:
            words.append(vocab[next(draws)])
        line = " ".join(words)[:LINE]
        line = line[:-1] + "s" if line.endswith(" ") else line
        refs.append(line)
        words = line.split(" ")  # one or two words swapped for words of their length
        for i in rng.choice(len(words), size=min(len(words), int(rng.integers(1, 3))), replace=False):
            words[i] = rng.choice(by_length.get(len(words[i]), [words[i]]))
        chars = list(" ".join(words))  # (never a space at either end: jiwer strips them)
        for i in rng.choice(np.arange(1, len(chars) - 1), size=LINE * 8 // 100, replace=False):
            chars[i] = rng.choice(list("etaoinshrd "))
        preds.append("".join(chars))
    return preds, refs


def timed(fn, device, runs: int = 3) -> tuple[float, float, float, object]:
    """(median, min, max) milliseconds of ``runs`` calls, and the last result."""
    times = []
    for _ in range(runs):
        sync(device)
        t0 = time.perf_counter()
        out = fn()
        sync(device)
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times), min(times), max(times), out


def metric_value(metric_cls, device, preds, target) -> float:
    m = metric_cls().to(device)
    m.update(preds, target)
    return m.compute().item()


def workload(name, ours_cls, theirs_cls, jiwer_fn, preds, target, device, rows: list[Row]) -> None:
    n = len(preds)
    wl = f"{name}, {n:,} pairs of {LINE}-character lines"
    ours_impl = f"torchalign.metrics.{ours_cls.__name__} ({device.type})"
    print(f"{CLOCK()} [{wl}]", flush=True)
    cases = [(ours_impl, None, lambda: metric_value(ours_cls, device, preds, target),
              lambda: metric_value(ours_cls, device, preds, target))]
    if theirs_cls is not None:
        cases.append((f"torchmetrics {theirs_cls.__name__} ({device.type})", ours_impl,
                      lambda: metric_value(theirs_cls, device, preds[:100], target[:100]),
                      lambda: metric_value(theirs_cls, device, preds, target)))
    if jiwer_fn is not None:
        cases.append((f"jiwer.{jiwer_fn.__name__} (cpu, rapidfuzz)", ours_impl,
                      lambda: jiwer_fn(target[:100], preds[:100]), lambda: jiwer_fn(target, preds)))
    want = None
    for impl, ref, warm, fn in cases:
        try:
            warm()
            ms, lo, hi, value = timed(fn, device)
        except Exception as e:  # noqa: BLE001  (a failing peer must not lose the run)
            if ref is None:
                raise
            ERRORS.append(f"{wl}: {impl}: {type(e).__name__}: {str(e).splitlines()[0][:200]}")
            print(f"{CLOCK()}   {impl}: FAILED ({ERRORS[-1]})", flush=True)
            continue
        value = float(np.float32(value))  # (jiwer computes in float64; torchmetrics' value is float32)
        if ref is None:
            want, verified = value, "ref"
        elif value == want:
            verified = "yes"
        else:
            verified = "NO"
            FAILURES.append(f"{wl}: {impl} gives {value!r}, ours {want!r}")
        rows.append(Row(wl, impl, ms, n, "pairs/s", ref, verified, f"median of 3, {lo:.3g}..{hi:.3g} ms"))
        print(f"{CLOCK()}   {impl}: {ms:.3f} ms ({lo:.3f}..{hi:.3f}), {si(n / ms * 1e3)}pairs/s, value {value:.6f}, "
              f"verified {verified}", flush=True)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--small", action="store_true", help=f"{SIZES['small']} pairs (a quick smoke run)")
    ap.add_argument("--commit", default=None, help="commit hash to record (else git rev-parse HEAD)")
    ap.add_argument("--out", default=os.path.join("benchmarks", "results"), help="folder for the JSON")
    ap.add_argument("--device", default=None, help="cuda or cpu (default: cuda if available)")
    args = ap.parse_args(argv)

    device = pick_device(args.device)
    size = "small" if args.small or device.type != "cuda" else "full"
    commit = git_commit(args.commit)
    print(f"device {device} ({torch.cuda.get_device_name(device) if device.type == 'cuda' else 'cpu'}), "
          f"torch {torch.__version__}, sizes '{size}', commit {commit}", flush=True)
    try:
        import torchmetrics.text as tm
    except ImportError as e:
        sys.exit(f"the metrics benchmark needs torchmetrics ({e}): pip install torchmetrics")
    try:
        import jiwer
    except ImportError:
        jiwer = None
        ERRORS.append("jiwer is not installed: its rows are skipped")
    t0 = time.perf_counter()
    preds, target = english_lines(SIZES[size], np.random.default_rng(SEED))
    rows: list[Row] = []
    with torch.no_grad():
        workload("CER", tam.CharErrorRate, tm.CharErrorRate, jiwer and jiwer.cer, preds, target, device, rows)
        workload("WER", tam.WordErrorRate, tm.WordErrorRate, jiwer and jiwer.wer, preds, target, device, rows)
    fill_ratios(rows)
    info = {"sizes": size, "seed": SEED, "pairs": len(preds), "line_length": LINE,
            "wall_s": round(time.perf_counter() - t0, 1), "verification_failures": FAILURES, "peer_errors": ERRORS}
    path = write_json(args.out, "metrics", device, commit, rows, info, suffix="-small" if size == "small" else "")
    print()
    print(markdown_table(rows))
    print()
    print("vs ours: ours' throughput / this row's (>1: ours is faster); verified: the same value as ours. "
          "Times: median of 3 (spread in the note), string encoding and copies included.")
    report_end(path, info, ERRORS, FAILURES)


if __name__ == "__main__":
    main()
