"""Levenshtein benchmark: ta.levenshtein_cdist beside peers, in one run, on the same pairs.

    python benchmarks/levenshtein.py [--commit HASH] [--out benchmarks/results] [--small]

Workload: all-pairs distances of 4,096 x 4,096 random DNA strings of length 100 (GCUPS
= cells per second, cells = pairs x 100 x 100). Peers: stringzillas-cuda
``LevenshteinDistances`` on a GPU DeviceScope (its integers must equal ours on the whole
matrix), rapidfuzz ``process.cdist(workers=-1)`` on the host's CPUs over a 1,024 x 1,024
corner (checked against ours). Peers missing from the machine are listed and skipped.
Still to come (issue 3): length 1,000, text lines, asm_search and asm_best.
"""

from __future__ import annotations

import argparse
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import Row, bench, fill_ratios, git_commit, markdown_table, pick_device, write_json  # noqa: E402

import torchalign as ta  # noqa: E402

SEED = 7


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--commit")
    ap.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "results"))
    ap.add_argument("--small", action="store_true", help="1,024 x 1,024 on a GPU (smoke run); the CPU runs 256 x 256")
    args = ap.parse_args()
    device = pick_device()
    n = 256 if device.type != "cuda" else (1024 if args.small else 4096)
    L, n_sub = 100, min(1024, n)
    g = torch.Generator().manual_seed(SEED)
    a_codes = torch.randint(0, 4, (n, L), generator=g, dtype=torch.uint8)
    b_codes = torch.randint(0, 4, (n, L), generator=g, dtype=torch.uint8)
    A, B = ta.encode(a_codes, "dna", device), ta.encode(b_codes, "dna", device)
    cells = float(n) * n * L * L
    wl, rows, skipped = f"levenshtein_cdist {n}x{n} DNA L={L}", [], []

    ours = ta.levenshtein_cdist(A, B, check=False).cpu()
    for algorithm in ("myers", "dp") if device.type == "cuda" else ("auto",):
        ms = bench(lambda: ta.levenshtein_cdist(A, B, algorithm=algorithm, check=False), device)
        got = ta.levenshtein_cdist(A, B, algorithm=algorithm, check=False).cpu()
        impl = f"torchalign {algorithm}"
        rows.append(Row(wl, impl, ms, cells, "CUPS", None if algorithm != "dp" else "torchalign myers",
                        "yes" if torch.equal(got, ours) else "NO"))
    ours_impl = rows[0].impl

    to_str = lambda codes: ["".join("ACGT"[c] for c in row) for row in codes.tolist()]  # noqa: E731
    sa, sb = to_str(a_codes), to_str(b_codes)
    try:
        import stringzilla as sz
        import stringzillas as szs

        scope = szs.DeviceScope(gpu_device=0)
        engine = szs.LevenshteinDistances(capabilities=scope)
        SA, SB = sz.Strs(sa), sz.Strs(sb)
        theirs = np.asarray(engine(SA, SB, device=scope))
        ms = bench(lambda: engine(SA, SB, device=scope), device)
        ok = np.array_equal(theirs.astype(np.int64), ours.numpy().astype(np.int64))
        rows.append(Row(wl, "stringzillas-cuda LevenshteinDistances", ms, cells, "CUPS", ours_impl,
                        "yes" if ok else "NO"))
    except Exception as e:  # noqa: BLE001  (a peer missing from this machine)
        skipped.append(f"stringzillas-cuda: {type(e).__name__}: {e}")
    try:
        from rapidfuzz import process
        from rapidfuzz.distance import Levenshtein

        sub_a, sub_b = sa[:n_sub], sb[:n_sub]
        theirs = process.cdist(sub_a, sub_b, scorer=Levenshtein.distance, workers=-1, dtype=np.int32)
        ms = bench(lambda: process.cdist(sub_a, sub_b, scorer=Levenshtein.distance, workers=-1, dtype=np.int32),
                   torch.device("cpu"), cpu_runs=3)
        ok = np.array_equal(theirs, ours[:n_sub, :n_sub].numpy())
        rows.append(Row(f"{wl} (corner {n_sub}x{n_sub})", f"rapidfuzz cdist workers=-1 ({os.cpu_count()} CPUs)",
                        ms, float(n_sub) * n_sub * L * L, "CUPS", ours_impl, "yes" if ok else "NO"))
    except Exception as e:  # noqa: BLE001
        skipped.append(f"rapidfuzz: {type(e).__name__}: {e}")

    fill_ratios(rows)
    print(markdown_table(rows))
    for s in skipped:
        print("skipped peer:", s)
    path = write_json(args.out, "levenshtein", device, git_commit(args.commit), rows,
                      {"n": n, "length": L, "seed": SEED, "skipped": skipped}, "-small" if args.small else "")
    print("wrote", path)
    return 0 if all(r.verified != "NO" for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
