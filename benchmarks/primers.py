"""k-difference primer benchmark: ta.kdiff_primers on the GPU beside its CPU implementation
and the paper's reported rate, one run.

    python benchmarks/primers.py [--commit HASH] [--out DIR] [--small] [--launch 64,1 32,1 ...]

Workloads (issue 5):
- MT-human.fa against MT-chimp.fa (data/ and torchalign/data/), k = 10 and 50;
- generated instances of the paper's sizes, k = 100: |alpha| = 43,606 against |beta| =
  241,494 (its Table 1), and 107,280 against 1,088,386 (its largest): alpha random DNA,
  beta random DNA holding copies of alpha's segments (500..5,000 bp) with 10-20 % edits
  (substitutions, insertions, deletions), half of beta's length.
Work: DP cells of the paper's conventional solution with its early stop (optimization 1),
sum over starts of (rows until the first row > k - 1, at most the rest of alpha) x |beta|,
counted from the answers: the paper's "symbol comparisons". The paper's best CUDA
version did 11.85e9 per second on a Quadro M4000 (|alpha| = 107,280, |beta| = 1,088,386,
k = 100, its data). The CPU row runs the CPU implementation on a sample of starts (its
cells over its time) and checks those starts' answers against the GPU's.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import Clock, Row, bench, data_file, fill_ratios, git_commit, markdown_table, pick_device, write_json  # noqa: E402

import torchalign as ta  # noqa: E402

SEED = 5
PAPER_RATE = 11.85e9


def read_fasta(name: str) -> str:
    lines = open(data_file(name)).read().splitlines()
    return "".join(x.strip() for x in lines if x and not x.startswith(">"))


def mutate(g, seg: torch.Tensor, rate: float) -> torch.Tensor:
    """seg with each position edited with probability ``rate`` (a third each: substitution,
    deletion, insertion of a random base after it)."""
    n = seg.numel()
    hit = torch.rand(n, generator=g) < rate
    kind = torch.randint(0, 3, (n,), generator=g)
    sub = hit & (kind == 0)
    out = torch.where(sub, (seg + torch.randint(1, 4, (n,), generator=g, dtype=torch.uint8)) % 4, seg)
    count = 1 - (hit & (kind == 1)).to(torch.int64) + (hit & (kind == 2)).to(torch.int64)
    res = torch.repeat_interleave(out, count)
    first = torch.cumsum(count, 0) - count  # each position's first slot; an insertion's slot follows
    ins = torch.nonzero(hit & (kind == 2)).flatten()
    res[first[ins] + 1] = torch.randint(0, 4, (ins.numel(),), generator=g, dtype=torch.uint8)
    return res


def instance(g, n_alpha: int, n_beta: int) -> tuple[torch.Tensor, torch.Tensor]:
    """alpha random; beta: random DNA with mutated copies of alpha's segments (half of it)."""
    alpha = torch.randint(0, 4, (n_alpha,), generator=g, dtype=torch.uint8)
    parts, size = [], 0
    while size < n_beta:
        m = int(torch.randint(500, 5001, (1,), generator=g))
        if torch.rand(1, generator=g).item() < 0.5:
            at = int(torch.randint(0, max(1, n_alpha - m), (1,), generator=g))
            rate = 0.10 + 0.10 * torch.rand(1, generator=g).item()
            parts.append(mutate(g, alpha[at : at + m], rate))
        else:
            parts.append(torch.randint(0, 4, (m,), generator=g, dtype=torch.uint8))
        size += parts[-1].numel()
    return alpha, torch.cat(parts)[:n_beta]


def cells(lengths: torch.Tensor, n_alpha: int, n_beta: int) -> float:
    """The conventional solution's cells (the paper's Fig. 1 and 2a with optimization 1):
    rows until the early stop (the answer L) x |beta| per start, and at the first start
    with no answer the whole rest, after which the paper stops."""
    lengths = lengths.cpu().to(torch.int64)
    zero = torch.nonzero(lengths == 0)
    end = int(zero[0, 0]) if zero.numel() else n_alpha
    rows = float(lengths[:end].sum()) + (n_alpha - end if end < n_alpha else 0)
    return rows * n_beta


def cpu_sample(alpha: torch.Tensor, beta: torch.Tensor, k: int, got: torch.Tensor, n_starts: int, budget_s: float):
    """(ms, cells, verified, starts) of the CPU implementation on starts spread over alpha,
    a few at a time until ``budget_s`` is spent."""
    from torchalign.cpu import primers as cpu

    n = alpha.numel()
    codes, col0, v = cpu._columns(beta, torch.tensor([0, beta.numel()]), n + 2)
    a = alpha.to(torch.int64)
    starts = torch.linspace(0, n - 1, n_starts).round().to(torch.int64).unique()
    rem = n - starts
    starts, rem = starts[rem > k - 1], rem[rem > k - 1]
    done, work, ok, t0 = 0, 0.0, True, time.perf_counter()
    step = 1 if beta.numel() > 1 << 19 else 4  # a group of rows x 1 Mbp is already ~10 s
    for g0 in range(0, starts.numel(), step):
        rs, rr = starts[g0 : g0 + step], rem[g0 : g0 + step]
        best = cpu._group(a, rs, rr, codes, col0, v, k - 1)
        want = got[rs].to(torch.int64)
        ok &= bool(torch.equal(torch.where(best < rr, best + 1, 0), want))
        work += float(torch.minimum(best + 1, rr).sum()) * beta.numel()
        done += rs.numel()
        if time.perf_counter() - t0 > budget_s:
            break
    return (time.perf_counter() - t0) * 1e3, work, ok, done


def run_workload(wl, alpha, beta, k, device, rows, clock, sample: int, budget_s: float, launches):
    from torchalign_kernels import primers as K

    A, B = ta.encode(alpha.to(device), "dna"), ta.encode(beta.to(device), "dna")
    t = time.perf_counter()
    got = ta.kdiff_primers(A, B, k)
    first_s = time.perf_counter() - t
    work = cells(got, alpha.numel(), beta.numel())
    found = int((got > 0).sum())
    note = f"{found} starts with a primer, mean length {float(got[got > 0].float().mean()) if found else 0:.1f}"
    print(clock(), wl, f"first call {first_s:.2f} s, {note}", flush=True)
    default = K.LAUNCH
    best_ms = None
    for launch in launches:
        K.LAUNCH = launch
        ms = bench(lambda: ta.kdiff_primers(A, B, k, check=False), device, cpu_runs=1)
        same = torch.equal(ta.kdiff_primers(A, B, k), got)
        label = "torchalign" if launch == default else f"torchalign, launch {launch}"
        rows.append(Row(wl, label, ms, work, "cells/s", None if launch == default else "torchalign",
                        "n/a" if launch == default else ("yes" if same else "NO"), note if launch == default else ""))
        print(clock(), wl, label, f"{ms:.1f} ms, {work / ms / 1e9:.3g} Tcells/s", flush=True)
        best_ms = ms if best_ms is None else min(best_ms, ms)
    K.LAUNCH = default
    rows.append(Row(wl, "paper, Quadro M4000 (11.85e9/s reported, not run)", work / PAPER_RATE * 1e3, work, "cells/s",
                    "torchalign"))
    ms, cwork, ok, done = cpu_sample(alpha, beta, k, got.cpu(), sample, budget_s)
    rows.append(Row(wl, f"CPU implementation ({done} starts sampled)", ms, cwork, "cells/s", "torchalign",
                    "yes" if ok else "NO"))
    print(clock(), wl, f"cpu {done} starts {ms:.0f} ms", flush=True)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--commit")
    ap.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "results"))
    ap.add_argument("--small", action="store_true", help="1/20 of the sizes (smoke run; the CPU runs 1/200)")
    ap.add_argument("--launch", nargs="*", default=[],
                    help="extra (lanes,warps) launches to time beside the default, e.g. 32,1 128,4")
    ap.add_argument("--cpu-budget", type=float, default=20.0, help="seconds of CPU sampling per workload")
    args = ap.parse_args()
    from torchalign_kernels import primers as K

    device = pick_device()
    scale = 1 if device.type == "cuda" and not args.small else (20 if device.type == "cuda" else 200)
    launches = [K.LAUNCH] + [tuple(int(x) for x in s.split(",")) for s in args.launch]
    g = torch.Generator().manual_seed(SEED)
    rows, clock = [], Clock()
    human, chimp = read_fasta("MT-human.fa"), read_fasta("MT-chimp.fa")
    H, C = ta.DNA.encode_str(human), ta.DNA.encode_str(chimp)
    if scale > 1:
        H, C = H[: 20_000 // scale], C[: 20_000 // scale]
    for k in (10, 50):
        wl = f"MT-human {H.numel()} vs MT-chimp {C.numel()}, k={k}"
        run_workload(wl, H, C, k, device, rows, clock, 16, args.cpu_budget, launches)
    for n_alpha, n_beta in ((43_606, 241_494), (107_280, 1_088_386)):
        n_alpha, n_beta = n_alpha // scale, n_beta // scale
        alpha, beta = instance(g, n_alpha, n_beta)
        wl = f"generated {n_alpha} vs {n_beta}, k=100"
        run_workload(wl, alpha, beta, 100, device, rows, clock, 8, args.cpu_budget, launches)
    fill_ratios(rows)
    print(markdown_table(rows))
    path = write_json(args.out, "primers", device, git_commit(args.commit), rows,
                      {"seed": SEED, "paper_rate": PAPER_RATE, "launches": [list(x) for x in launches]})
    print("wrote", path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
