"""Soft alignment kernels side by side (issue 18 tuning): the one-state anti-diagonal kernels
(linear gaps) against the three-state row kernels on the same problem (gap_extend =
gap_open gives the same value), each checked against the float64 CPU path.

    python benchmarks/tune_soft_align.py [--runs 5] [--sizes 64x512x512,256x128x128]
    python benchmarks/tune_soft_align.py --affine 64x512x512,8x2000x2000   # the three-state forwards

Prints, per size and mode: forward and forward + backward medians (CUDA events, min..max
over --runs) of both kernels, the one-state kernel's value rel error and gradient abs error
against float64 (sizes up to 8 x 2,000^2)."""

from __future__ import annotations

import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import soft_align as soft_align_bench  # noqa: E402

import torchalign as ta  # noqa: E402


def timed(fn, runs):
    """(median, min, max) ms of ``runs`` calls after a warm-up: benchmarks/soft_align.py's timer."""
    return soft_align_bench.timed(fn, torch.device("cuda"), runs)[:3]


def fwd_bwd(s, *gaps, mode):
    x = s.detach().requires_grad_(True)
    v = ta.soft_align(x, *gaps, mode=mode)
    (g,) = torch.autograd.grad(v.sum(), x)
    return v, g


def kernel_variants(sizes, runs):
    """The one-state kernels alone, by rows per strip, warps per strip and the forward's hand-off
    (the backward's is fixed: soft_align_diag_bwd.HAND_OFF): forward and backward medians."""
    from torchalign_kernels import soft_align_diag as D
    from torchalign_kernels import soft_align_diag_bwd as DB

    for size in sizes:
        B, N, M = (int(x) for x in size.split("x"))
        s = torch.randn(B, N, M, generator=torch.Generator().manual_seed(18)).cuda()
        g = torch.ones(B, device="cuda")
        n = torch.full((B,), N, device="cuda")
        m = torch.full((B,), M, device="cuda")
        for blk, w, h in ((128, 4, 8), (128, 4, 16), (64, 2, 16), (32, 1, 8), (32, 1, 16)):
            f = timed(lambda: D.forward(s, g, n, m, 0, block=blk, warps=w, hand_off=h), runs)
            v, tab = D.forward(s, g, n, m, 0, block=blk, warps=w, hand_off=h)
            gr = torch.ones_like(v)
            b = timed(lambda: DB.backward(s, g, n, m, tab, v, gr, 0, block=blk, warps=w), runs)
            print(f"{size} BLOCK {blk} warps {w} hand-off {h}: fwd {f[0]:.3f} ({f[1]:.3f}..{f[2]:.3f}) bwd {b[0]:.3f} "
                  f"({b[1]:.3f}..{b[2]:.3f}) ms", flush=True)


def affine_forward(sizes, runs, device):
    """The three-state kernels alone on the same inputs, by rows (soft_align.forward, .backward)
    and by anti-diagonals (soft_align_diag3.forward, soft_align_diag3_bwd.backward), gap open
    1.5 and extend 0.5, global, local and semiglobal: medians (min..max); the values' rel
    difference and the tables' max abs difference over the cells both reach (RESULTS.md,
    session 41); both backwards and both Hessian-vector products (soft_align_hvp.hvp,
    soft_align_diag3_hvp.hvp) on the anti-diagonal table, their gradients' max abs difference
    and the other outputs' max rel one (session 43)."""
    from torchalign_kernels import soft_align as rows
    from torchalign_kernels import soft_align_diag3 as diag3
    from torchalign_kernels import soft_align_diag3_bwd as diag3_bwd
    from torchalign_kernels import soft_align_diag3_hvp as diag3_hvp
    from torchalign_kernels import soft_align_hvp as rows_hvp

    for size in sizes:
        B, N, M = (int(x) for x in size.split("x"))
        s = torch.randn(B, N, M, generator=torch.Generator().manual_seed(18)).to(device)
        n = torch.full((B,), N, device=device)
        m = torch.full((B,), M, device=device)
        go, ge = torch.full((B, 1, 1), 1.5, device=device), torch.full((B, 1, 1), 0.5, device=device)
        for mode, name in ((0, "global"), (1, "local"), (2, "semiglobal")):
            by_rows = lambda: rows.forward(s, go, ge, n, m, mode, False, 1)  # noqa: E731
            by_diag = lambda: diag3.forward(s, go, ge, n, m, mode)  # noqa: E731
            (v1, t1), (v2, t2) = by_rows(), by_diag()
            both = torch.isfinite(t1) & torch.isfinite(t2)
            dv = ((v1 - v2).abs() / v1.abs().clamp_min(1e-30)).max().item()
            dt = (t1[both] - t2[both]).abs().max().item() if both.any() else 0.0
            del t1, t2, both
            f1 = soft_align_bench.timed(by_rows, torch.device(device), runs)
            f2 = soft_align_bench.timed(by_diag, torch.device(device), runs)
            print(f"{size} {name}: forward by rows {f1[0]:.3f} ({f1[1]:.3f}..{f1[2]:.3f}) ms, by anti-diagonals "
                  f"{f2[0]:.3f} ({f2[1]:.3f}..{f2[2]:.3f}) ms; values rel {dv:.1e} apart, tables {dt:.1e}", flush=True)
            v, table = by_diag()
            gr = torch.ones_like(v)
            back_rows = lambda: rows.backward(s, go, ge, n, m, table, v, gr, mode, False, 1)  # noqa: E731
            back_diag = lambda: diag3_bwd.backward(go, ge, n, m, table, v, gr, mode)  # noqa: E731
            w, x = back_rows(), back_diag()
            dg = (w[0] - x[0]).abs().max().item()
            dgap = max(((a.reshape(-1) - b.reshape(-1)).abs() / a.reshape(-1).abs().clamp_min(1e-30)).max().item()
                       for a, b in zip(w[1:], x[1:]))
            del w, x
            b1 = soft_align_bench.timed(back_rows, torch.device(device), runs)
            b2 = soft_align_bench.timed(back_diag, torch.device(device), runs)
            print(f"{size} {name}: backward by rows {b1[0]:.3f} ({b1[1]:.3f}..{b1[2]:.3f}) ms, by anti-diagonals "
                  f"{b2[0]:.3f} ({b2[1]:.3f}..{b2[2]:.3f}) ms; gradients {dg:.1e} apart, gap gradients rel {dgap:.1e}",
                  flush=True)
            zs = torch.randn_like(s)
            zo, ze = torch.randn_like(go), torch.randn_like(ge)
            hvp_rows = lambda: rows_hvp.hvp(s, go, ge, n, m, v, gr, zs, zo, ze, mode, False, table=table)  # noqa: E731
            hvp_diag = lambda: diag3_hvp.hvp(go, ge, n, m, table, v, gr, zs, zo, ze, mode)  # noqa: E731
            w, x = hvp_rows(), hvp_diag()
            dg = (w[0] - x[0]).abs().max().item()
            drest = max(((a.reshape(-1) - b.reshape(-1)).abs() / a.reshape(-1).abs().clamp_min(1e-30)).max().item()
                        for a, b in zip(w[1:], x[1:]))
            del w, x
            h1 = soft_align_bench.timed(hvp_rows, torch.device(device), runs)
            h2 = soft_align_bench.timed(hvp_diag, torch.device(device), runs)
            print(f"{size} {name}: Hessian-vector product by rows {h1[0]:.3f} ({h1[1]:.3f}..{h1[2]:.3f}) ms, by "
                  f"anti-diagonals {h2[0]:.3f} ({h2[1]:.3f}..{h2[2]:.3f}) ms; gradients' derivatives {dg:.1e} apart, "
                  f"the rest rel {drest:.1e}", flush=True)
            del table


def long_pair():
    """test_cuda_long_pairs' linear case: one-state (full table) against three-state (checkpoints)."""
    s = torch.randn(1, 10_000, 7_000, device="cuda", generator=torch.Generator(device="cuda").manual_seed(0))
    out = []
    for ck in ("auto", None):
        x = s.clone().requires_grad_()
        v = ta.soft_align(x, 1.0, None, mode="global", checkpoint=ck)
        v.sum().backward()
        out.append((v.detach().double(), x.grad.double()))
    dv = ((out[0][0] - out[1][0]).abs() / out[1][0].abs()).max().item()
    dg = (out[0][1] - out[1][1]).abs().max().item()
    print(f"1 x 10,000 x 7,000 linear: one-state vs three-state checkpointed: value rel {dv:.2e} "
          f"(values {out[1][0].item():.6f}, {out[0][0].item():.6f}), grad abs {dg:.2e}, "
          f"P row sums max {out[1][1].sum(2).max().item():.6f}", flush=True)


def profile_host():
    """Where the host time of forward + backward goes at 256 x 128^2 (the GPU work is ~0.4 ms)."""
    import cProfile
    import pstats
    import time

    s = torch.randn(256, 128, 128, device="cuda")
    for _ in range(3):
        fwd_bwd(s, 1.0, mode="global")
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(20):
        fwd_bwd(s, 1.0, mode="global")
    host = (time.perf_counter() - t0) / 20 * 1e3
    torch.cuda.synchronize()
    print(f"host time per forward + backward (no sync): {host:.3f} ms")
    pr = cProfile.Profile()
    pr.enable()
    for _ in range(20):
        fwd_bwd(s, 1.0, mode="global")
    pr.disable()
    torch.cuda.synchronize()
    st = pstats.Stats(pr).sort_stats("tottime")
    st.print_stats(12)
    st.print_callees("backend_impl")
    # the kernels alone, launched from Python (no custom op, no autograd)
    from torchalign_kernels import soft_align_diag as D
    from torchalign_kernels import soft_align_diag_bwd as DB
    g = torch.ones(256, device="cuda")
    n = m = torch.full((256,), 128, device="cuda")
    t0 = time.perf_counter()
    for _ in range(20):
        v, tab = D.forward(s, g, n, m, 0)
        DB.backward(s, g, n, m, tab, v, torch.ones_like(v), 0)
    print(f"host time per forward + backward launch pair (no op): {(time.perf_counter() - t0) / 20 * 1e3:.3f} ms")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--sizes", default="64x512x512,256x128x128,8x2000x2000,4x10000x10000")
    ap.add_argument("--modes", default="global,local,semiglobal")
    ap.add_argument("--kernels", default="", help="sizes for the warps-per-program sweep of the kernels alone")
    ap.add_argument("--affine", default="", help="sizes for the three-state kernels, by rows and by anti-diagonals")
    ap.add_argument("--long", action="store_true", help="the 10,000 x 7,000 comparison")
    ap.add_argument("--profile", action="store_true", help="a host profile of forward + backward")
    args = ap.parse_args()
    if args.affine:
        affine_forward(args.affine.split(","), args.runs, "cuda" if torch.cuda.is_available() else "cpu")
        return
    print(torch.cuda.get_device_name(), torch.__version__)
    if args.kernels:
        kernel_variants(args.kernels.split(","), args.runs)
    if args.long:
        long_pair()
    if args.profile:
        profile_host()
    for size in args.sizes.split(","):
        B, N, M = (int(x) for x in size.split("x"))
        s = torch.randn(B, N, M, generator=torch.Generator().manual_seed(18)).cuda()
        for mode in args.modes.split(","):
            if N * M > 4e6 and mode != "global":
                continue
            row = [f"{B}x{N}x{M} {mode:10s}"]
            for name, gaps in (("one-state", (1.0,)), ("three-state", (1.0, 1.0))):
                if N * M > 4e7 and name == "three-state":
                    continue
                f = timed(lambda: ta.soft_align(s, *gaps, mode=mode), args.runs)
                fb = timed(lambda: fwd_bwd(s, *gaps, mode=mode), args.runs)
                row.append(f"{name} fwd {f[0]:.3f} ({f[1]:.3f}..{f[2]:.3f}) fwd+bwd {fb[0]:.3f} "
                           f"({fb[1]:.3f}..{fb[2]:.3f}) ms")
            if B * N * M <= 3.3e7:
                v, g = fwd_bwd(s, 1.0, mode=mode)
                rv, rg = fwd_bwd(s.double().cpu(), 1.0, mode=mode)
                dv = ((v.double().cpu() - rv).abs() / rv.abs().clamp_min(1)).max().item()
                dg = (g.double().cpu() - rg).abs().max().item()
                row.append(f"vs float64: value rel {dv:.1e}, grad abs {dg:.1e}, finite {bool(torch.isfinite(g).all())}")
            print(" | ".join(row), flush=True)


if __name__ == "__main__":
    main()
