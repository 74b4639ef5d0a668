"""Kernel times of a soft NW and a soft_dtw training step (torch.profiler), per kernel.

    python benchmarks/soft_profile.py [--sizes 64x512,256x128,8x2000] [--only nw|dtw] [--no-grad | --double] [--graph]
                                      [--top 8]

One step: ``ta.soft_align(x, 1.0)`` (global, linear gap 1) or ``-ta.soft_dtw(-x, 1.0)`` on
standard normal scores [B, N, N], then ``autograd.grad`` (``--no-grad``: the forward alone,
which saves no table; ``--double``: the gradient with a graph, then the gradient of <gradient, u>
for a fixed random u, the double backward soft_align.py times; ``--graph``: replays of the step
captured in one CUDA graph, as soft_align.py's graphed rows run it, the scores' copy included).
Prints the GPU time per step of each kernel (mean over 5 steps after 3 warm-up steps), the
largest first (``--top`` rows), and the wall time of 20 steps back to back: what the host's
share hides and what a CUDA graph of the step leaves (RESULTS.md, sessions 31 and 32).
"""

from __future__ import annotations

import argparse
import functools

import torch
from torch.profiler import ProfilerActivity, profile

import torchalign as ta
from soft_align import graphed  # (benchmarks/ is the script's folder)

STEPS = {
    "nw": lambda x: ta.soft_align(x, 1.0),
    "dtw": lambda x: -ta.soft_dtw(-x, 1.0, check=False),
}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="64x512,256x128,8x2000", help="B x N pairs, comma-separated")
    ap.add_argument("--only", choices=tuple(STEPS), help="one of the two steps")
    order = ap.add_mutually_exclusive_group()
    order.add_argument("--no-grad", action="store_true", help="the forward alone")
    order.add_argument("--double", action="store_true", help="the double backward (a Hessian-vector product)")
    ap.add_argument("--graph", action="store_true", help="replays of the step in one CUDA graph")
    ap.add_argument("--top", type=int, default=8, help="kernels listed per step")
    args = ap.parse_args()
    if args.double and args.graph:
        ap.error("--graph captures the first order only; leave out --double or --graph")
    g = torch.Generator().manual_seed(18)
    for size in args.sizes.split(","):
        B, N = (int(v) for v in size.split("x"))
        s = torch.randn(B, N, N, generator=g).cuda()
        # (only for --double: the other runs draw the scores they always did)
        u = torch.randn(B, N, N, generator=g).cuda() if args.double else None
        for name, f in STEPS.items():
            if args.only not in (None, name):
                continue
            def step():
                if args.no_grad:
                    with torch.no_grad():
                        f(s)
                    return
                x = s.detach().requires_grad_(True)
                (grad,) = torch.autograd.grad(f(x).sum(), x, create_graph=args.double)
                if args.double:
                    torch.autograd.grad((grad * u).sum(), x)
            if args.graph:
                step = functools.partial(graphed(f, not args.no_grad), s)
            for _ in range(3):
                step()
            torch.cuda.synchronize()
            with profile(activities=[ProfilerActivity.CUDA]) as p:
                for _ in range(5):
                    step()
                torch.cuda.synchronize()
            rows = sorted(((e.key, e.device_time_total / 5, e.count / 5) for e in p.key_averages()
                           if e.device_time_total > 0), key=lambda r: -r[1])
            total = sum(r[1] for r in rows)
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(20):
                step()
            end.record()
            torch.cuda.synchronize()
            how = ((" (no grad)" if args.no_grad else "") + (" (double backward)" if args.double else "")
                   + (" (one CUDA graph)" if args.graph else ""))
            print(f"{name} {B} x {N}^2{how}: kernels {total:.1f} us a step, "
                  f"{start.elapsed_time(end) * 50:.1f} us a step back to back (20 steps)")
            for key, t, count in rows[:args.top]:
                print(f"    {t:9.1f} us  x{count:g}  {key[:100]}")


if __name__ == "__main__":
    main()
