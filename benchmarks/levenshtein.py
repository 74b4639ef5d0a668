"""Levenshtein benchmark: ta.levenshtein_cdist beside peers, in one run, on the same pairs.

    python benchmarks/levenshtein.py [--commit HASH] [--out DIR] [--small] [--only dna100,dna1000,lines]

Workloads (GCUPS = cells per second, cells = pairs x len(a) x len(b)):
- dna100: 4,096 x 4,096 random DNA strings of length 100;
- dna1000: 2,048 x 2,048 random DNA strings of length 1,000;
- lines: 4,096 x 4,096 English-like text lines (words drawn from a Zipf vocabulary, 20..120
  bytes), compared as bytes;
- band: 2,048 pairs of 10,000 bp, half of them copies with ~0.5% edits, half unrelated,
  ``levenshtein(max_distance=200)`` (Ukkonen's band) beside the same call without a bound,
  edlib (NW with k) and rapidfuzz (``cpdist`` with ``score_cutoff``) on the host's CPUs;
  cells are the full matrices' (len a x len b), so the band's GCUPS are "effective".
Peers: stringzillas-cuda ``LevenshteinDistances`` on a GPU DeviceScope (its integers must
equal ours on the whole matrix); rapidfuzz ``process.cdist(workers=-1)`` on the host's
CPUs and a vectorised torch DP on the same device, both on a corner of the matrix
(checked against ours). Peers missing from the machine are listed and skipped.
"""

from __future__ import annotations

import argparse
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import Clock, Row, bench, fill_ratios, git_commit, markdown_table, pick_device, write_json  # noqa: E402

import torchalign as ta  # noqa: E402

SEED = 7


def dna(n: int, length: int, g) -> list[str]:
    codes = torch.randint(0, 4, (n, length), generator=g, dtype=torch.uint8)
    return [bytes(row).translate(bytes.maketrans(b"\0\1\2\3", b"ACGT")).decode() for row in codes.numpy()]


def text_lines(n: int, g) -> list[str]:
    """English-like lines: words of 1..10 letters, Zipf-distributed over a 5,000-word vocabulary."""
    rng = np.random.default_rng(int(torch.randint(0, 2**31, (1,), generator=g)))
    letters = np.array(list("etaoinshrdlcumwfgypbvkjxqz"))
    weights = 1.0 / np.arange(1, 27)
    vocab = ["".join(rng.choice(letters, size=rng.integers(1, 11), p=weights / weights.sum())) for _ in range(5000)]
    zipf = 1.0 / np.arange(1, len(vocab) + 1)
    zipf /= zipf.sum()
    draws = iter(rng.choice(len(vocab), size=60 * n, p=zipf).tolist())
    lines = []
    for _ in range(n):
        target = rng.integers(20, 121)
        words = []
        while sum(map(len, words)) + len(words) < target:
            words.append(vocab[next(draws)])
        lines.append(" ".join(words).capitalize()[:target] + ".")
    return lines


def torch_dp(a: list[str], b: list[str], device) -> torch.Tensor:
    """All-pairs distances by the textbook DP, vectorised over pairs with torch (equal
    lengths within a side: the rows' in-row dependency as a cummin)."""
    A = torch.tensor([list(s.encode()) for s in a], dtype=torch.int16, device=device)
    B = torch.tensor([list(s.encode()) for s in b], dtype=torch.int16, device=device)
    x = A.repeat_interleave(len(b), 0)
    y = B.repeat(len(a), 1)
    j = torch.arange(y.shape[1] + 1, device=device, dtype=torch.int32)
    row = j.expand(x.shape[0], -1).contiguous()
    for i in range(x.shape[1]):
        t = torch.empty_like(row)
        t[:, 0] = i + 1
        t[:, 1:] = torch.minimum(row[:, :-1] + (x[:, i, None] != y).to(torch.int32), row[:, 1:] + 1)
        row = torch.cummin(t - j, dim=1).values + j
    return row[:, -1].reshape(len(a), len(b))


def run_workload(name, sa, sb, alphabet, device, rows, skipped, corner, clock, bound=None):
    cells = float(sum(map(len, sa))) * sum(map(len, sb))
    wl = f"levenshtein_cdist {len(sa)}x{len(sb)} {name}"
    A, B = ta.encode(sa, alphabet, device), ta.encode(sb, alphabet, device)
    ours = ta.levenshtein_cdist(A, B, check=False).cpu()
    ms = bench(lambda: ta.levenshtein_cdist(A, B, check=False), device)
    rows.append(Row(wl, "torchalign", ms, cells, "CUPS"))
    print(clock(), wl, f"ours {ms:.2f} ms", flush=True)
    if bound is not None:  # the cut-off: lanes stop once their column is past the bound
        cut = ta.levenshtein_cdist(A, B, max_distance=bound, check=False).cpu()
        ms = bench(lambda: ta.levenshtein_cdist(A, B, max_distance=bound, check=False), device)
        rows.append(Row(wl, f"torchalign max_distance={bound}", ms, cells, "CUPS", "torchalign",
                        "yes" if torch.equal(cut, ours.clamp(max=bound + 1)) else "NO", note="effective cells"))
        print(clock(), "cut-off", f"{ms:.2f} ms", flush=True)
    try:
        import stringzilla as sz
        import stringzillas as szs

        scope = szs.DeviceScope(gpu_device=0)
        engine = szs.LevenshteinDistances(capabilities=scope)
        SA, SB = sz.Strs(sa), sz.Strs(sb)
        theirs = np.asarray(engine(SA, SB, device=scope))
        ms = bench(lambda: engine(SA, SB, device=scope), device)
        ok = np.array_equal(theirs.astype(np.int64), ours.numpy().astype(np.int64))
        rows.append(Row(wl, "stringzillas-cuda LevenshteinDistances", ms, cells, "CUPS", "torchalign",
                        "yes" if ok else "NO"))
        print(clock(), "stringzillas", f"{ms:.2f} ms", flush=True)
    except Exception as e:  # noqa: BLE001  (a peer missing from this machine)
        skipped.append(f"stringzillas-cuda ({name}): {type(e).__name__}: {e}")
    sub_a, sub_b = sa[:corner], sb[:corner]
    sub_cells = float(sum(map(len, sub_a))) * sum(map(len, sub_b))
    try:
        from rapidfuzz import process
        from rapidfuzz.distance import Levenshtein

        cdist = lambda: process.cdist(sub_a, sub_b, scorer=Levenshtein.distance, workers=-1, dtype=np.int32)  # noqa: E731
        theirs = cdist()
        ms = bench(cdist, torch.device("cpu"), cpu_runs=3)
        ok = np.array_equal(theirs, ours[:corner, :corner].numpy())
        rows.append(Row(f"{wl} (corner {corner}x{corner})", f"rapidfuzz cdist workers=-1 ({os.cpu_count()} CPUs)",
                        ms, sub_cells, "CUPS", "torchalign", "yes" if ok else "NO"))
        print(clock(), "rapidfuzz", f"{ms:.2f} ms", flush=True)
    except Exception as e:  # noqa: BLE001
        skipped.append(f"rapidfuzz ({name}): {type(e).__name__}: {e}")
    if len(set(map(len, sa))) == 1 and len(set(map(len, sb))) == 1:  # the torch DP wants equal lengths
        n_dp = max(8, corner // 4)
        dp_a, dp_b = sa[:n_dp], sb[:n_dp]
        theirs = torch_dp(dp_a, dp_b, device).cpu()
        ms = bench(lambda: torch_dp(dp_a, dp_b, device), device, cpu_runs=1)
        ok = torch.equal(theirs.to(torch.int32), ours[:n_dp, :n_dp])
        rows.append(Row(f"{wl} (corner {n_dp}x{n_dp})", "torch DP, vectorised over pairs", ms,
                        float(sum(map(len, dp_a))) * sum(map(len, dp_b)), "CUPS", "torchalign", "yes" if ok else "NO"))
        print(clock(), "torch DP", f"{ms:.2f} ms", flush=True)


def edited(s: str, n_edits: int, g) -> str:
    """s with n_edits random substitutions, insertions and deletions."""
    out = list(s)
    for op, at, base in torch.randint(0, 1 << 30, (n_edits, 3), generator=g).tolist():
        at %= len(out) + 1
        if op % 3 == 0 and at < len(out):
            out[at] = "ACGT"[base % 4]
        elif op % 3 == 1:
            out.insert(at, "ACGT"[base % 4])
        elif at < len(out):
            del out[at]
    return "".join(out)


def _edlib_nw(args):
    import edlib

    a, b, k = args
    return edlib.align(a, b, mode="NW", task="distance", k=k)["editDistance"]


def band_workload(n, length, bound, g, device, rows, skipped, clock):
    sa = dna(n, length, g)
    sb = [edited(x, length // 200, g) for x in sa[: n // 2]] + dna(n - n // 2, length, g)
    cells = float(sum(len(x) * len(y) for x, y in zip(sa, sb)))
    wl = f"levenshtein {n} pairs of {length // 1000}k bp, max_distance={bound} (half related)"
    A, B = ta.encode(sa, "dna", device), ta.encode(sb, "dna", device)
    ours = ta.levenshtein(A, B, max_distance=bound, check=False).cpu()
    ms = bench(lambda: ta.levenshtein(A, B, max_distance=bound, check=False), device)
    rows.append(Row(wl, "torchalign (band)", ms, cells, "CUPS", note=f"{int((ours <= bound).sum())} pairs <= {bound}"))
    print(clock(), wl, f"ours {ms:.2f} ms", flush=True)
    full = ta.levenshtein(A, B, check=False).cpu()
    ms = bench(lambda: ta.levenshtein(A, B, check=False), device)
    rows.append(Row(wl, "torchalign, no max_distance (wavefront)", ms, cells, "CUPS", "torchalign (band)",
                    "yes" if torch.equal(full.clamp(max=bound + 1), ours) else "NO"))
    print(clock(), "no bound", f"{ms:.2f} ms", flush=True)
    try:
        import multiprocessing as mp

        jobs = [(x, y, bound) for x, y in zip(sa, sb)]
        with mp.get_context("fork").Pool(os.cpu_count()) as pool:
            theirs = torch.tensor(pool.map(_edlib_nw, jobs, chunksize=16))
            ms = bench(lambda: pool.map(_edlib_nw, jobs, chunksize=16), torch.device("cpu"), cpu_runs=1)
        ok = torch.equal(torch.where(theirs < 0, bound + 1, theirs).to(torch.int32), ours)
        rows.append(Row(wl, f"edlib NW k={bound}, {os.cpu_count()} processes", ms, cells, "CUPS", "torchalign (band)",
                        "yes" if ok else "NO"))
        print(clock(), "edlib", f"{ms:.2f} ms", flush=True)
    except Exception as e:  # noqa: BLE001
        skipped.append(f"edlib (band): {type(e).__name__}: {e}")
    try:
        from rapidfuzz import process
        from rapidfuzz.distance import Levenshtein

        run = lambda: process.cpdist(sa, sb, scorer=Levenshtein.distance, score_cutoff=bound, workers=-1)  # noqa: E731
        theirs = torch.from_numpy(np.asarray(run()).astype(np.int32))
        ms = bench(run, torch.device("cpu"), cpu_runs=1)
        rows.append(Row(wl, f"rapidfuzz cpdist score_cutoff={bound} ({os.cpu_count()} CPUs)", ms, cells, "CUPS",
                        "torchalign (band)", "yes" if torch.equal(theirs, ours) else "NO"))
        print(clock(), "rapidfuzz", f"{ms:.2f} ms", flush=True)
    except Exception as e:  # noqa: BLE001
        skipped.append(f"rapidfuzz (band): {type(e).__name__}: {e}")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--commit")
    ap.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "results"))
    ap.add_argument("--small", action="store_true", help="a quarter of each side (smoke run)")
    ap.add_argument("--only", default="dna100,dna1000,lines,band")
    args = ap.parse_args()
    device = pick_device()
    gpu = device.type == "cuda"
    scale = 4 if args.small or not gpu else 1
    g = torch.Generator().manual_seed(SEED)
    rows, skipped, clock = [], [], Clock()
    wanted = args.only.split(",")
    if "dna100" in wanted:
        n = 4096 // scale
        run_workload("DNA L=100", dna(n, 100, g), dna(n, 100, g), "dna", device, rows, skipped,
                     1024 // scale, clock, bound=10)
    if "dna1000" in wanted:
        n = 2048 // scale
        run_workload("DNA L=1000", dna(n, 1000, g), dna(n, 1000, g), "dna", device, rows, skipped,
                     256 // scale, clock)
    if "lines" in wanted:
        n = 4096 // scale
        lines = text_lines(2 * n, g)
        run_workload("text lines 20-121 B", lines[:n], lines[n:], "bytes", device, rows, skipped,
                     1024 // scale, clock, bound=10)
    if "band" in wanted:
        band_workload(2048 // scale, 10_000, 200, g, device, rows, skipped, clock)
    fill_ratios(rows)
    print(markdown_table(rows))
    for s in skipped:
        print("skipped peer:", s)
    path = write_json(args.out, "levenshtein", device, git_commit(args.commit), rows,
                      {"seed": SEED, "workloads": wanted, "skipped": skipped}, "-small" if args.small else "")
    print("wrote", path)
    return 0 if all(r.verified != "NO" for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
