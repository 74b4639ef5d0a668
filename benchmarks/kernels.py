"""One mid-size workload per Triton kernel, timed alone: the before/after check of a
change that touches every kernel (the int64 widening of issue 12).

Each row is the median of ``--runs`` separate ``bench`` calls (each itself a median of
do_bench repeats), printed with the spread (min..max of the runs). Inputs are generated
with a fixed seed (correctness is the tests' job, not this script's).

    python benchmarks/kernels.py [--runs 3] [--only name,name] [--commit SHA] [--small] [--out DIR]

Writes benchmarks/results/kernels-<device>-<date>-<commit>.json.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import Row, bench, data_file, git_commit, pick_device, write_json  # noqa: E402

import torchalign as ta  # noqa: E402


def dna(g, n: int, length: int) -> list[str]:
    codes = torch.randint(0, 4, (n, length), generator=g)
    return ["".join("ACGT"[c] for c in row.tolist()) for row in codes]


def genome(g, n: int, dev) -> ta.SequenceBatch:
    codes = torch.randint(0, 4, (n,), generator=g, dtype=torch.uint8)
    return ta.SequenceBatch(codes.to(dev), torch.tensor([0, n], device=dev), ta.alphabet.DNA, 3)


def read_fasta(path: str) -> list[str]:
    out, cur = [], []
    for line in open(path):
        if line.startswith(">"):
            if cur:
                out.append("".join(cur))
            cur = []
        else:
            cur.append(line.strip())
    return out + ["".join(cur)] if cur else out


def workloads(dev, s: int):
    """name -> (call, what it runs); sizes divided by ``s`` (a smoke run)."""
    g = torch.Generator().manual_seed(7)
    w = {}
    a = ta.encode(dna(g, 4096 // s, 256), "dna", device=dev)
    w["hamming_cdist"] = (lambda: ta.hamming_cdist(a, a), "4,096 x 4,096 DNA, L=256 (hamming)")
    text = genome(g, 10_000_000 // s, dev)
    guides = ta.encode(dna(g, 256 // s, 23), "dna", device=dev)
    w["kmismatch"] = (lambda: ta.kmismatch_search(text, guides, 3, both_strands=True),
                      "256 x 23 bp, k=3, 10 Mbp, both strands (hamming search)")
    lines = dna(g, 4096 // s, 100)
    b, b_dp = ta.encode(lines, "dna", device=dev), ta.encode(lines[:1024 // s], "dna", device=dev)
    w["lev_myers"] = (lambda: ta.levenshtein_cdist(b, b), "4,096 x 4,096 DNA, L=100 (myers registers)")
    w["lev_dp"] = (lambda: ta.levenshtein_cdist(b_dp, b_dp, algorithm="dp"),
                   "1,024 x 1,024 DNA, L=100 (levenshtein rows)")
    long_pat = ta.encode(dna(g, 32 // s, 3000), "dna", device=dev)
    text1 = genome(g, 1_000_000 // s, dev)
    w["asm_wave"] = (lambda: ta.asm_best(text1, long_pat), "32 x 3,000 bp vs 1 Mbp (myers wave / memory)")
    pats = ta.encode(dna(g, 32, 32), "dna", device=dev)
    w["asm_dp"] = (lambda: ta.asm_profile(text1, pats, algorithm="dp"), "32 x 32 bp vs 1 Mbp profile (asm_rows)")
    genes = ta.encode(dna(g, 64 // s, 1000), "dna", device=dev)
    w["asm_band"] = (lambda: ta.asm_search(text, genes, 30), "64 x 1,000 bp, k=30, 10 Mbp (myers band)")
    alpha = genome(g, 20_000 // s, dev)
    beta = genome(g, 200_000 // s, dev)
    w["primers"] = (lambda: ta.kdiff_primers(alpha, beta, 20), "20 kbp vs 200 kbp, k=20 (primers)")
    prot = read_fasta(data_file("proteome_HG003687.fa"))
    queries = read_fasta(data_file("swissprot_queries20.fa"))[:8 // s]
    db = ta.encode(prot[:21_000 // s] * (10 // s or 1), "protein", device=dev)
    q = ta.encode(queries, "protein", device=dev)
    w["search_local"] = (lambda: ta.search(q, db), "8 Swiss-Prot queries vs 21,000 proteins, local (scan + align)")
    pq = ta.encode(prot[:2000 // s], "protein", device=dev)
    pt = ta.encode(prot[100:100 + 2000 // s], "protein", device=dev)
    w["align_global"] = (lambda: ta.align_score(pq, pt, mode="global"), "2,000 protein pairs, global (align)")
    return w


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--only", default="")
    ap.add_argument("--commit")
    ap.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "results"))
    ap.add_argument("--small", action="store_true", help="sizes / 8 (a smoke run)")
    args = ap.parse_args()
    dev = pick_device()
    commit = git_commit(args.commit)
    print(f"device {torch.cuda.get_device_name(dev) if dev.type == 'cuda' else 'cpu'}, commit {commit}")
    rows = []
    for name, (call, what) in workloads(dev, 8 if args.small else 1).items():
        if args.only and name not in args.only.split(","):
            continue
        call()  # compile
        times = sorted(bench(call, dev) for _ in range(args.runs))
        rows.append((name, statistics.median(times), times[0], times[-1], what))
        print(f"{name:14s} {rows[-1][1]:10.3f} ms  ({times[0]:.3f}..{times[-1]:.3f})  {what}", flush=True)
    results = [Row(name, "torchalign", med, 1.0, "calls", note=f"{what}; runs {lo:.3f}..{hi:.3f} ms")
               for name, med, lo, hi, what in rows]
    write_json(args.out, "kernels", dev, commit, results, {"runs": args.runs}, suffix=f"-{commit[:7]}")
    print("\n| kernel row | median ms | spread | workload |\n| --- | --- | --- | --- |")
    for name, med, lo, hi, what in rows:
        print(f"| {name} | {med:.3f} | {lo:.3f}..{hi:.3f} | {what} |")


if __name__ == "__main__":
    main()
