"""Long pairs on CUDA: soft_alignment's float32 value and expected alignment P against float64.

    python benchmarks/soft_precision.py [N] [--modes local,semiglobal,global]

One pair of N x N standard normal scores (seed 31), linear gap 1: the float32 kernels (long
pairs are centred) against the float64 torch path on the same GPU (slow: ~80 s a mode at
10,000^2 on an H200). Prints the value's relative error and P's largest absolute error (the
issue's bars: 1e-5 and 1e-3).
"""

from __future__ import annotations

import argparse
import time

import torch

import torchalign as ta


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("n", type=int, nargs="?", default=10_000)
    ap.add_argument("--modes", default="local,semiglobal,global")
    args = ap.parse_args()
    s = torch.randn(1, args.n, args.n, generator=torch.Generator().manual_seed(31)).cuda()
    for mode in args.modes.split(","):
        t0 = time.perf_counter()
        v32, p32 = ta.soft_alignment(s, 1.0, mode=mode)
        torch.cuda.synchronize()
        t1 = time.perf_counter()
        v64, p64 = ta.soft_alignment(s.double(), 1.0, mode=mode)
        torch.cuda.synchronize()
        t2 = time.perf_counter()
        dv = ((v32.double() - v64).abs() / v64.abs().clamp_min(1)).max().item()
        dp = (p32.double() - p64).abs().max().item()
        print(f"{mode:10s} {args.n}^2: value rel {dv:.2e}, P abs {dp:.2e} "
              f"(float32 {t1 - t0:.2f} s, float64 {t2 - t1:.1f} s)", flush=True)
        del p32, p64
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
