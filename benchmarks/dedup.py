"""Nearest neighbours and dedup benchmark: ta.levenshtein_topk and ta.near_duplicates on
100,000 x 100,000 lines of text, with no dense matrix (an int32 one would take 40 GB).

    python benchmarks/dedup.py [--commit HASH] [--out DIR] [--n 100000] [--small]

Lines: English-like sentences of 50..100 bytes (Zipf words), 5% of them near copies of an
earlier line (1..5 character edits), seeded. Workloads (all lines against all lines):
- levenshtein_topk, k=10 (each line finds itself, or an equal line before it, first);
- levenshtein_topk, k=10, max_distance=10;
- near_duplicates, max_distance=5.
Ours: the median of --repeats timed calls (CUDA events, a warm-up call first) and the
peak GPU memory of a call beside its inputs (torch.cuda.max_memory_allocated). Every
workload is checked against brute force on a slice of queries (levenshtein_cdist's dense
rows against all lines). Peer: rapidfuzz ``process.cdist(workers=-1)`` on the host's CPUs,
then ``np.argpartition`` (top k) or a threshold (pairs), on the slice the host can do
(--peer-queries lines against all lines); its time is EXTRAPOLATED to the full size by the
ratio of pairs (labelled as such) and its integers are checked against ours on the slice.
``--small``: 10,000 lines on a GPU, 200 on the CPU (a smoke run: the CPU DP is slow), one timed call.
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
from common import Clock, Row, fill_ratios, git_commit, markdown_table, pick_device, sync, write_json  # noqa: E402

import torchalign as ta  # noqa: E402

SEED = 15
K = 10
TOPK_BOUND = 10
DEDUP_BOUND = 5


def sentences(n: int, seed: int = SEED, copies: float = 0.05) -> list[str]:
    """n lines of 50..100 bytes from a 5,000-word Zipf vocabulary; a share ``copies`` of
    them are an earlier line with 1..5 random substitutions, insertions or deletions."""
    rng = np.random.default_rng(seed)
    letters = np.array(list("etaoinshrdlcumwfgypbvkjxqz"))
    weights = 1.0 / np.arange(1, 27)
    vocab = ["".join(rng.choice(letters, size=rng.integers(1, 11), p=weights / weights.sum())) for _ in range(5000)]
    zipf = 1.0 / np.arange(1, len(vocab) + 1)
    draws = iter(rng.choice(len(vocab), size=25 * n, p=zipf / zipf.sum()).tolist())
    out = []
    for i in range(n):
        if i and rng.random() < copies:
            line = list(out[rng.integers(0, i)])
            for _ in range(rng.integers(1, 6)):
                at, op = int(rng.integers(0, len(line))), rng.integers(0, 3)
                c = str(rng.choice(letters))
                if op == 0:
                    line[at] = c
                elif op == 1:
                    line.insert(at, c)
                else:
                    del line[at]
            out.append("".join(line))
            continue
        target = int(rng.integers(50, 100))
        words = []
        while sum(map(len, words)) + len(words) < target:
            words.append(vocab[next(draws)])
        out.append(" ".join(words).capitalize()[: target - 1] + ".")
    return out


def timed(fn, device, repeats: int):
    """(result of a warm-up call, median ms of ``repeats`` calls, peak bytes of a call beside
    what was allocated before it)."""
    out = fn()
    times, peaks = [], []
    for _ in range(repeats):
        sync(device)
        if device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(device)
            base = torch.cuda.memory_allocated(device)
        t0 = time.perf_counter()
        fn()
        sync(device)
        times.append((time.perf_counter() - t0) * 1e3)
        if device.type == "cuda":
            peaks.append(torch.cuda.max_memory_allocated(device) - base)
    return out, statistics.median(times), max(peaks) if peaks else None


def brute_topk(dense: torch.Tensor, k: int, max_distance=None):
    """Rows of a dense slice reduced by keys distance * N + index: (distance, index) [rows, k]."""
    n = dense.shape[1]
    key = dense.to(torch.int64) * n + torch.arange(n, device=dense.device)
    if max_distance is not None:
        key = key.masked_fill(dense > max_distance, torch.iinfo(torch.int64).max)
    best = key.topk(min(k, n), dim=1, largest=False).values
    empty = best == torch.iinfo(torch.int64).max
    fill = max_distance + 1 if max_distance is not None else 2**31 - 1
    return torch.where(empty, fill, best // n).to(torch.int32), torch.where(empty, -1, best % n)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--commit")
    ap.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "results"))
    ap.add_argument("--n", type=int, default=100_000, help="lines (default 100,000)")
    ap.add_argument("--small", action="store_true", help="10,000 lines on a GPU, 200 on the CPU; one timed call")
    ap.add_argument("--repeats", type=int, default=2, help="timed calls of ours (median)")
    ap.add_argument("--peer-queries", type=int, default=1000, help="rapidfuzz's slice: this many lines x all")
    ap.add_argument("--check-queries", type=int, default=256, help="lines checked against dense rows")
    args = ap.parse_args()
    device = pick_device()
    n = (10_000 if device.type == "cuda" else 200) if args.small else args.n
    repeats = 1 if args.small else args.repeats
    peer_q, check_q = min(args.peer_queries, n // 5 if args.small else n), min(args.check_queries, n)
    clock = Clock()
    lines = sentences(n)
    lengths = np.array([len(s) for s in lines], dtype=np.float64)
    print(clock(), f"{n} lines, {lengths.min():.0f}..{lengths.max():.0f} bytes, mean {lengths.mean():.1f}", flush=True)
    s = ta.encode(lines, "bytes", device)
    all_cells = float(lengths.sum()) ** 2
    half_cells = (all_cells - float((lengths**2).sum())) / 2  # pairs i < j
    check = torch.linspace(0, n - 1, check_q).round().long().unique().tolist()  # spread over the lines
    dense = ta.levenshtein_cdist(ta.encode([lines[i] for i in check], "bytes", device), s, check=False)
    rows, skipped, extra = [], [], {"n": n, "dense_int32_bytes": 4 * n * n, "peak_gpu_bytes": {}}
    dense_gb = 4 * n * n / 1e9

    workloads = [
        (f"levenshtein_topk {n:,} x {n:,} lines, k={K}", lambda: ta.levenshtein_topk(s, s, K, check=False), None),
        (f"levenshtein_topk {n:,} x {n:,} lines, k={K}, max_distance={TOPK_BOUND}",
         lambda: ta.levenshtein_topk(s, s, K, TOPK_BOUND, check=False), TOPK_BOUND),
        (f"near_duplicates {n:,} lines, max_distance={DEDUP_BOUND}",
         lambda: ta.near_duplicates(s, DEDUP_BOUND, check=False), DEDUP_BOUND),
    ]
    results = {}
    for wl, fn, bound in workloads:
        got, ms, peak = timed(fn, device, repeats)
        results[wl] = got
        dedup = wl.startswith("near")
        if dedup:
            pairs, checked = set(zip(got.i.tolist(), got.j.tolist())), set(check)
            want = {(min(a, b), max(a, b)) for a, row in zip(check, (dense <= bound).cpu()) for b in
                    row.nonzero().flatten().tolist() if a != b}
            ok = {(a, b) for a, b in pairs if a in checked or b in checked} == want
            note = f"{len(pairs):,} pairs"
        else:
            want_d, want_i = brute_topk(dense, K, bound)
            ok = torch.equal(got.distance[check], want_d) and torch.equal(got.index[check], want_i)
            note = f"{int((got.index >= 0).sum()):,} neighbours"
        if peak is not None:
            extra["peak_gpu_bytes"][wl] = peak
            note += f", peak GPU memory {peak / 1e9:.2f} GB beside the inputs (dense int32: {dense_gb:.0f} GB)"
        rows.append(Row(wl, "torchalign", ms, half_cells if dedup else all_cells, "CUPS",
                        verified="yes" if ok else "NO", note=note))
        print(clock(), wl, f"ours {ms:.1f} ms, {note}, checked on {len(check)} rows: {ok}", flush=True)

    try:
        from rapidfuzz import process
        from rapidfuzz.distance import Levenshtein

        sub = lines[:peer_q]
        for wl, _, bound in workloads:
            dedup = wl.startswith("near")
            if dedup:
                def peer():
                    d = process.cdist(sub, lines, scorer=Levenshtein.distance, score_cutoff=bound, workers=-1,
                                      dtype=np.int32)
                    i, j = np.nonzero(d <= bound)
                    keep = j > i
                    return i[keep], j[keep]
                scale = (n * (n - 1) / 2) / (peer_q * n)  # their pairs i < j vs the slice's rows x all
            else:
                def peer():
                    d = process.cdist(sub, lines, scorer=Levenshtein.distance, workers=-1, dtype=np.int32,
                                      **({} if bound is None else {"score_cutoff": bound}))
                    top = np.argpartition(d, K - 1, axis=1)[:, :K]
                    return np.take_along_axis(d, top, 1), top
                scale = n / peer_q
            t0 = time.perf_counter()
            theirs = peer()
            ms = (time.perf_counter() - t0) * 1e3
            ours = results[wl]
            if dedup:
                mine = {(a, b) for a, b in zip(ours.i.tolist(), ours.j.tolist()) if a < peer_q}
                ok = set(zip(theirs[0].tolist(), theirs[1].tolist())) == mine
            else:
                d = np.sort(theirs[0], axis=1)
                if bound is not None:
                    d = np.minimum(d, bound + 1)  # (ours: empty slots hold max_distance + 1)
                ok = np.array_equal(d, ours.distance[:peer_q].cpu().numpy())
            rows.append(Row(wl, f"rapidfuzz cdist workers=-1 + {'threshold' if dedup else 'argpartition'} "
                                f"({os.cpu_count()} CPUs)", ms * scale, half_cells if dedup else all_cells, "CUPS",
                            "torchalign", "yes" if ok else "NO",
                            note=f"EXTRAPOLATED x{scale:.0f} from {ms:.0f} ms on {peer_q:,} x {n:,}"))
            print(clock(), "rapidfuzz", wl, f"{ms:.0f} ms on the slice, x{scale:.0f}, checked: {ok}", flush=True)
    except ImportError as e:
        skipped.append(f"rapidfuzz: {e}")

    fill_ratios(rows)
    print(markdown_table(rows))
    for x in skipped:
        print("skipped peer:", x)
    path = write_json(args.out, "dedup", device, git_commit(args.commit), rows,
                      {**extra, "seed": SEED, "k": K, "peer_queries": peer_q, "checked_rows": len(check),
                       "skipped": skipped}, "-small" if args.small else "")
    print("wrote", path)
    return 0 if all(r.verified != "NO" for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
