"""Differentiable alignment benchmark (issue 18): soft Needleman-Wunsch and soft-DTW beside peers.

    python benchmarks/soft_align.py [--commit HASH] [--out DIR] [--small] [--runs 5] [--only nw|dtw|affine|local]

Inputs: float32 random scores [B, N, M] (standard normal, seed 18); soft NW, global, linear
gap 1.0 per position, temperature 1. Sizes: 64 x 512 x 512, 256 x 128 x 128, 8 x 2,000 x
2,000 (every peer), 4 x 10,000 x 10,000 (ours alone); the affine (global, gaps 1.5 / 0.5)
and local (linear 1.0) modes at the first size, ours beside the JAX form and plain torch
(three states, ta.soft_align's recurrences: benchmarks/soft_peers.py); soft-DTW at every
size, with a double-backward row for ours. ``--small`` runs tiny sizes (a CPU smoke test).
Each implementation is timed forward alone (no autograd) and forward + backward (the
value's gradient with respect to the scores), each a single call from an idle GPU: the
median of ``--runs`` runs (>= 3; CUDA events), the spread (min..max) and the peak GPU
memory of the call above what was allocated before it (torch.cuda.max_memory_allocated;
JAX's is not seen). Ours' soft NW forward + backward is also timed as a training loop runs
it, 20 calls back to back (the host issues a call while the GPU runs the one before), and
on CUDA ours' step is also timed captured whole in one CUDA graph (``graphed``).

Peers, in the same run, on the same scores; each one's value and gradient are checked
against a float64 reference *with that peer's convention* (the plain torch DP below, run in
float64 with autograd; values rel 1e-5 / abs 1e-3 at most on gradients, float32):
- ours: ``ta.soft_align(scores, 1.0, mode="global", temperature=1.0)`` (its own branch;
  "soft_align not available" until it lands) and ``ta.soft_dtw``;
- deepblast 1.0.2 ``NeedlemanWunschDecoder('softmax')`` (numba CUDA): V = theta + LSE(V_up +
  A, V_diag, V_left + A), V = 0 on row and column 0, A = -gap (a score on every move);
- pysdtw 0.0.5 ``SoftDTW`` (numba CUDA) on costs = -scores, no gap: soft-DTW, R = +inf borders
  (ours' soft_dtw rows are its peer of record);
- orihime 0.1 ``nw_value`` / ``dtw_value`` (CUDA C++; where a build of it imports: NOTES.md,
  session 31): ours' global convention with its gap score -GAP; soft-DTW on -scores;
- JAX: ``lax.scan`` over anti-diagonals, ``vmap`` over pairs, ``jit`` (written here; ours'
  convention);
- plain torch over anti-diagonals (written here; ours' convention; autograd for backward).
Peers that cannot be imported or fail at a size are skipped with the reason printed.
"""

from __future__ import annotations

import argparse
import inspect
import math
import os
import statistics
import sys
import time
import traceback

import torch

os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")  # JAX beside torch on one GPU: no 75% grab
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import Row, fill_ratios, git_commit, markdown_table, pick_device, report_end, write_json  # noqa: E402
from soft_peers import jax_dp3, jax_nw, torch_dp, torch_dp3  # noqa: E402

import torchalign as ta  # noqa: E402

SEED = 18
GAP = 1.0
SIZES = [(64, 512, 512), (256, 128, 128), (8, 2000, 2000)]
OURS_ONLY = [(4, 10_000, 10_000)]
SMALL = [(4, 24, 20), (16, 12, 12), (2, 40, 33)]
SMALL_OURS_ONLY = [(1, 64, 64)]
FAILURES: list[str] = []
ERRORS: list[str] = []


AFFINE = (1.5, 0.5)  # the affine workload's gap open / extend (global)
CONVENTIONS = {  # name: the torch DP of that convention (benchmarks/soft_peers.py)
    "nw": lambda s: torch_dp(s, GAP, 1.0, "charged", False),
    "deepblast": lambda s: torch_dp(s, GAP, 1.0, "zero", True),
    "sdtw": lambda s: torch_dp(s, 0.0, 1.0, "inf", True),
    "affine": lambda s: torch_dp3(s, *AFFINE, 1.0, "global"),
    "local": lambda s: torch_dp3(s, GAP, GAP, 1.0, "local"),
}
SOFT_ALIGN_ARGS = {"nw": ((GAP,), "global"), "affine": (AFFINE, "global"), "local": ((GAP,), "local")}


def reference(scores, convention: str, with_grad: bool):
    """(values, gradient or None) in float64, by the torch DP with autograd."""
    s = scores.double().detach().requires_grad_(with_grad)
    with torch.set_grad_enabled(with_grad):
        v = CONVENTIONS[convention](s)
        g = torch.autograd.grad(v.sum(), s)[0] if with_grad else None
    return v.detach(), g


# ------------------------------------------------------------------ timing ---------------
def timed(fn, device, runs: int):
    """(median ms, min ms, max ms, peak bytes above the start) of ``runs`` calls after one warm-up."""
    fn()
    sync(device)
    times = []
    base = peak = 0
    for _ in range(runs):
        if device.type == "cuda":
            torch.cuda.synchronize(device)
            base = torch.cuda.memory_allocated(device)
            torch.cuda.reset_peak_memory_stats(device)
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end))
            peak = max(peak, torch.cuda.max_memory_allocated(device) - base)
        else:
            t0 = time.perf_counter()
            fn()
            times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times), min(times), max(times), peak


STEPS = 20  # calls of the back-to-back row
LOOP_MODE = f"forward + backward, {STEPS} back to back (per call)"


def timed_steps(fn, device, runs: int, steps: int = STEPS):
    """(median ms, min ms, max ms) per call of ``steps`` calls back to back (no sync between:
    a training loop, where the host issues the next step while the GPU runs this one)."""
    fn()
    sync(device)
    times = []
    for _ in range(runs):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(steps):
            fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / steps)
    return statistics.median(times), min(times), max(times)


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _torch(x) -> torch.Tensor:
    """A result (torch or JAX) as a float64 CPU tensor."""
    if isinstance(x, torch.Tensor):
        return x.detach().double().cpu()
    import numpy as np
    return torch.from_numpy(np.array(x)).double()  # (a copy: JAX's arrays are read-only)


def _check(name, v, g, ref_v, ref_g, ours: bool) -> str:
    """'yes' or 'no (...)' for a value (rel 1e-5) and gradient (abs 1e-3) against the reference."""
    v = _torch(v).reshape(-1)
    dv = ((v - ref_v.cpu()).abs() / ref_v.cpu().abs().clamp_min(1.0)).max().item()
    dg = 0.0 if g is None or ref_g is None else (_torch(g) - ref_g.cpu()).abs().max().item()
    ok = dv <= 1e-5 and dg <= 1e-3 and math.isfinite(dv) and math.isfinite(dg)
    if not ok and ours:
        FAILURES.append(f"{name}: value rel err {dv:.2e}, gradient abs err {dg:.2e}")
    return "yes" if ok else f"no (value {dv:.1e}, grad {dg:.1e})"


# ------------------------------------------------------------------ implementations ------
def impls_nw(device, B, N, M, ours_only: bool, kind: str = "nw"):
    """[(name, convention, forward(s) -> values, forward+backward(s) -> (values, grad)) or (name, reason)].
    kind: "nw" (linear global: every peer), "affine" (global) or "local" (linear): ours, JAX, torch."""
    out = []
    gaps, mode = SOFT_ALIGN_ARGS[kind]

    def fb(f):
        def run(s):
            s = s.detach().requires_grad_(True)
            v = f(s)
            (g,) = torch.autograd.grad(v.sum(), s)
            return v, g
        return run

    if hasattr(ta, "soft_align"):
        f = lambda s: ta.soft_align(s, *gaps, mode=mode, temperature=1.0)  # noqa: E731
        out.append(("ours soft_align", kind, f, fb(f), hvp_of(f)))
        ck = max(2, int(math.sqrt(N)))
        if "checkpoint" in inspect.signature(ta.soft_align).parameters:
            fck = lambda s: ta.soft_align(s, *gaps, mode=mode, temperature=1.0, checkpoint=ck)  # noqa: E731
            out.append((f"ours soft_align checkpoint={ck}", kind, fck, fb(fck)))
        if hasattr(ta, "soft_alignment"):
            out.append(("ours soft_alignment (value, P)", kind, None,
                        lambda s: ta.soft_alignment(s, *gaps, mode=mode, temperature=1.0)))
        if device.type == "cuda":  # the same op with no host time per call
            out.append((GRAPHED.format("soft_align"), kind, graphed(f, False), graphed(f, True)))
            if kind == "nw":
                compiled = torch.compile(f, mode="reduce-overhead", fullgraph=True)
                out.append(("ours soft_align, compiled (CUDA graphs)", kind, _warmed(compiled),
                            _warmed(fb(compiled))))
    else:
        out.append(("ours soft_align", "soft_align not available (ta.soft_align is not in this build)"))
    if ours_only:
        return out
    if kind == "nw":
        out.append(_deepblast(device, fb, M))
        out.append(_orihime(device, fb, "nw"))
    out.append(_jax(device, kind))
    tf = CONVENTIONS[kind]
    out.append(("plain torch anti-diagonals", kind, tf, fb(tf)))
    return out


def _numba_on_new_numpy():
    """numba's CUDA target (deepblast's and pysdtw's kernels) still names np.row_stack, an alias of
    np.vstack that NumPy 2.4 removed: put the alias back before they import numba."""
    import numpy as np
    if not hasattr(np, "row_stack"):
        np.row_stack = np.vstack


ORIHIME = "orihime 0.1 (source build, nw and dtw only)"


def _orihime(device, fb, kind: str):
    """orihime's public ops (megure-labs/orihime, CUDA C++; not on PyPI, so built from its public
    source on the GPU machine: benchmarks/NOTES.md, session 31). nw_value: T logsumexp over global
    alignments, a gap *score* added per gap step (so -GAP), end gaps charged: ours' convention.
    dtw_value: Cuturi & Blondel's soft-DTW, R[0, 0] = 0, other borders +inf: on -scores as pysdtw."""
    if device.type != "cuda":
        return (ORIHIME, "needs CUDA (our build of it is CUDA only)")
    try:
        import orihime
    except Exception as e:  # noqa: BLE001
        return (ORIHIME, f"not importable (build it first: NOTES.md, session 31): {type(e).__name__}: {e}")
    if kind == "nw":
        f = lambda s: orihime.nw_value(s.contiguous(), gap_score=-GAP, temperature=1.0)  # noqa: E731
        return (ORIHIME + " nw_value", "nw", f, fb(f))
    f = lambda s: -orihime.dtw_value((-s).contiguous(), temperature=1.0)  # noqa: E731
    return (ORIHIME + " dtw_value", "sdtw", f, fb(f))


def _deepblast(device, fb, M):
    if device.type != "cuda":
        return ("deepblast 1.0.2 NeedlemanWunschDecoder", "needs CUDA (numba)")
    try:
        _numba_on_new_numpy()
        anomaly = torch.is_anomaly_enabled()
        from deepblast.nw_cuda import NeedlemanWunschDecoder
        torch.autograd.set_detect_anomaly(anomaly)  # deepblast turns anomaly detection on when imported
    except Exception as e:  # noqa: BLE001
        return ("deepblast 1.0.2 NeedlemanWunschDecoder", f"not importable: {type(e).__name__}: {e}")
    if M > 2046:
        return ("deepblast 1.0.2 NeedlemanWunschDecoder", f"M = {M} > 2,046 columns (its cap)")
    dec = NeedlemanWunschDecoder("softmax")

    def f(s):
        return dec(s, torch.full_like(s, -GAP))
    return ("deepblast 1.0.2 NeedlemanWunschDecoder", "deepblast", f, fb(f))


def _jax(device, kind):
    name = "JAX lax.scan anti-diagonals + vmap, jit"
    try:
        import jax
        import numpy as np
    except Exception as e:  # noqa: BLE001
        return (name, f"not importable: {type(e).__name__}: {e}")
    if device.type == "cuda" and not any(d.platform == "gpu" for d in jax.devices()):
        return (name, "JAX has no GPU here (install jax[cuda12])")
    if kind == "nw":
        fwd, grad = jax_nw(GAP, 1.0)
    else:
        gaps, mode = SOFT_ALIGN_ARGS[kind]
        fwd, grad = jax_dp3(gaps[0], gaps[-1], 1.0, mode)
    cache = {}  # the copy of the scores into JAX happens in the warm-up call, not in the timed ones

    def as_jax(s):
        return cache.setdefault(id(s), jax.numpy.asarray(np.asarray(s.detach().cpu())))

    def f(s):
        return fwd(as_jax(s)).block_until_ready()

    def g(s):
        (_, v), gr = grad(as_jax(s))
        return v, gr.block_until_ready()
    return (name, kind, f, g)


HVP_MODE = "fwd + bwd + double bwd (HVP)"


def _warmed(fn, calls: int = 3):
    """fn, called ``calls`` times first: torch.compile's CUDA graphs record on the second
    and third calls, and replay from then on."""
    state = {"warm": False}

    def run(s):
        if not state["warm"]:
            for _ in range(calls):
                fn(s)
            state["warm"] = True
        return fn(s)
    return run


def graphed(f, backward: bool):
    """f's forward (and, with ``backward``, the scores' gradient) captured whole in one CUDA graph on a
    static input, replayed per call with the call's scores copied in: a fixed-shape training step as
    ``torch.cuda.graph`` runs it, the host's work per step one copy and one replay (JAX's jit
    likewise runs its peer row as one compiled call). Timed with the copy."""
    state = {}

    def step(x):
        if not backward:
            with torch.no_grad():
                return f(x)
        v = f(x)
        return v, torch.autograd.grad(v.sum(), x)[0]

    def run(s):
        if not state:
            x = s.detach().clone().requires_grad_(backward)
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):  # warm-up off the capture stream (compiles the kernels)
                for _ in range(2):
                    step(x)
            torch.cuda.current_stream().wait_stream(side)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                out = step(x)
            state.update(x=x, graph=graph, out=out)
        with torch.no_grad():
            state["x"].copy_(s)
        state["graph"].replay()
        return state["out"]
    return run


GRAPHED = "ours {}, one CUDA graph a step"


def hvp_of(f):
    """Forward, backward with a graph, and the gradient of <gradient, u> (a Hessian-vector
    product along u = the scores themselves): (value, H u)."""
    def run(s):
        s = s.detach().requires_grad_(True)
        v = f(s)
        (g,) = torch.autograd.grad(v.sum(), s, create_graph=True)
        (hv,) = torch.autograd.grad((g * s.detach()).sum(), s)
        return v, hv
    return run


def hvp_reference(scores, big: bool, kind: str = "dtw"):
    """(value, H u) in float64 by the torch path (None past 2e8 cells): -soft_dtw(-scores),
    or soft_align with the workload's gaps and mode."""
    conv = "sdtw" if kind == "dtw" else kind
    if big:
        return reference(scores, conv, False)
    if kind == "dtw":
        f = lambda s: -ta.soft_dtw(-s, 1.0)  # noqa: E731
    else:
        gaps, mode = SOFT_ALIGN_ARGS[kind]
        f = lambda s: ta.soft_align(s, *gaps, mode=mode)  # noqa: E731
    v, hv = hvp_of(f)(scores.double())
    return v.detach(), hv


def impls_dtw(device, B, N, M, ours_only: bool):
    out = []

    def fb(f):
        def run(s):
            s = s.detach().requires_grad_(True)
            v = f(s)
            (g,) = torch.autograd.grad(v.sum(), s)
            return v, g
        return run

    # V = -soft-DTW(-scores): the gradient with respect to the scores is the expected alignment
    f = lambda s: -ta.soft_dtw(-s, 1.0)  # noqa: E731
    out.append(("ours soft_dtw", "sdtw", f, fb(f), hvp_of(f)))
    if device.type == "cuda":
        fg = lambda s: -ta.soft_dtw(-s, 1.0, check=False)  # noqa: E731  (no host read inside a capture)
        out.append((GRAPHED.format("soft_dtw"), "sdtw", graphed(fg, False), graphed(fg, True)))
    ck = max(2, int(math.sqrt(N)))
    fck = lambda s: -ta.soft_dtw(-s, 1.0, checkpoint=ck)  # noqa: E731
    out.append((f"ours soft_dtw checkpoint={ck}", "sdtw", fck, fb(fck)))
    if device.type == "cuda":  # the plan's alternatives: by rows (one program per pair; 128-column stripes)
        from torchalign_kernels import soft_dtw as K

        def knobs(fn, **values):
            def run(s):
                keep = {k: getattr(K, k) for k in values}
                for k, v in values.items():
                    setattr(K, k, v)
                try:
                    return fn(s)
                finally:
                    for k, v in keep.items():
                        setattr(K, k, v)
            return run
        for label, values in (("by rows", dict(DIAG_WIDE=0)),
                              ("by rows, one program per pair", dict(DIAG_WIDE=0, STRIPE=1 << 30)),
                              (f"by rows, stripes of {K.STRIPE} columns", dict(DIAG_WIDE=0, STRIPE_ABOVE=0))):
            out.append((f"ours soft_dtw, {label}", "sdtw", knobs(f, **values), knobs(fb(f), **values)))
        out.append((f"ours soft_dtw checkpoint={ck}, backward by rows", "sdtw", knobs(fck, DIAG_ROWS_MAX=0),
                    knobs(fb(fck), DIAG_ROWS_MAX=0)))
    if ours_only:
        return out
    out.append(_orihime(device, fb, "dtw"))
    name = "pysdtw 0.0.5 SoftDTW"
    if device.type != "cuda":
        out.append((name, "needs CUDA (numba)"))
        return out
    try:
        _numba_on_new_numpy()
        import pysdtw
    except Exception as e:  # noqa: BLE001
        out.append((name, f"not importable: {type(e).__name__}: {e}"))
        return out
    sd = pysdtw.SoftDTW(gamma=1.0, dist_func=lambda x, y: x, use_cuda=True)  # x: the cost matrix itself
    fp = lambda s: -sd(-s, -s)  # noqa: E731
    out.append((name, "sdtw", fp, fb(fp)))
    return out


# ------------------------------------------------------------------ checkpoints ----------
CHECKPOINT_SIZE = (64, 4096, 4096)  # the issue's: 64 affine pairs of 4,096 x 4,096


def run_checkpoints(device, runs, rows, small: bool):
    """Forward + backward of affine soft NW with every row kept and with checkpoint="auto":
    time, peak memory beyond the scores and their gradient, and the same numbers either way
    (the same kernel: value rel 1e-6, gradient abs 1e-5)."""
    B, N, M = (2, 64, 64) if small else CHECKPOINT_SIZE
    scores = torch.randn(B, N, M, generator=torch.Generator(device="cpu").manual_seed(SEED)).to(device)
    wl = f"affine {B} x {N} x {M} forward + backward"
    out = {}
    for ck in (None, "auto"):
        def run():
            x = scores.detach().requires_grad_(True)
            v = ta.soft_align(x, *AFFINE, checkpoint=ck)
            (g,) = torch.autograd.grad(v.sum(), x)
            return v, g
        out[ck] = run()
        med, lo, hi, peak = timed(run, device, runs)
        beyond = peak - scores.numel() * 4  # (the gradient is the one tensor of the scores' size it returns)
        note = f"{lo:.3g}..{hi:.3g} ms" + (f", peak {beyond / 2**20:.0f} MiB beyond the gradient"
                                           if device.type == "cuda" else "")
        rows.append(Row(wl, f"ours soft_align checkpoint={ck}", med, B * N * M, "cells/s",
                        ref=None if ck is None else "ours soft_align checkpoint=None", verified="", note=note))
        print(f"  {wl} checkpoint={ck}: {med:.1f} ms ({note})", flush=True)
        del run
    same = (torch.allclose(out[None][0], out["auto"][0], rtol=1e-6, atol=0)
            and torch.allclose(out[None][1], out["auto"][1], rtol=0, atol=1e-5))
    for r in rows[-2:]:
        r.verified = "yes (the same numbers either way)" if same else "no: the two modes differ"
    if not same:
        FAILURES.append(f"{wl}: checkpoint='auto' differs from the full table")


# ------------------------------------------------------------------ one workload ---------
def run_workload(kind, device, B, N, M, ours_only, runs, rows):
    g = torch.Generator(device="cpu").manual_seed(SEED)
    scores = torch.randn(B, N, M, generator=g).to(device)
    wl = f"{B} x {N} x {M}"
    impls = impls_dtw(device, B, N, M, ours_only) if kind == "dtw" else impls_nw(device, B, N, M, ours_only, kind)
    cells = B * N * M
    big = cells > 2e8
    refs = {}
    for item in impls:
        if len(item) == 2:
            print(f"  {kind} {wl}: {item[0]} skipped: {item[1]}", flush=True)
            ERRORS.append(f"{kind} {wl} {item[0]}: {item[1]}")
            continue
        name, conv, fwd, fwd_bwd, *rest = item
        hvp = rest[0] if rest else None
        ours = name.startswith("ours")
        if conv not in refs:
            refs[conv] = reference(scores, conv, with_grad=not big)
        ref_v, ref_g = refs[conv]
        checked = {}
        for mode, fn in (("forward", fwd), ("forward + backward", fwd_bwd), (HVP_MODE, hvp)):
            if fn is None:
                continue
            if mode == HVP_MODE:  # its reference: the float64 torch path of the same double backward
                if "hvp" not in refs:
                    refs["hvp"] = hvp_reference(scores, big, kind)
                ref_v, ref_g = refs["hvp"]
            try:
                with torch.no_grad() if mode == "forward" else torch.enable_grad():
                    result = fn(scores)
                    value, grad = (result, None) if mode == "forward" else result
                    verified = checked[mode] = _check(f"{kind} {wl} {name} {mode}", value, grad, ref_v, ref_g, ours)
                    med, lo, hi, peak = timed(lambda: fn(scores), device, runs)
            except Exception as e:  # noqa: BLE001
                msg = f"{type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}"
                print(f"  {kind} {wl} {name} {mode} failed: {msg}", flush=True)
                ERRORS.append(f"{kind} {wl} {name} {mode}: {msg}")
                if ours:
                    FAILURES.append(f"{kind} {wl} {name} {mode} raised {msg}")
                continue
            note = f"{lo:.3g}..{hi:.3g} ms" + (f", peak {peak / 2**20:.0f} MiB" if device.type == "cuda" else "")
            ref_name = ("ours soft_dtw" if kind == "dtw" else "ours soft_align")
            rows.append(Row(f"{kind} {wl} {mode}", name, med, cells, "cells/s",
                            ref=None if name == ref_name else ref_name, verified=verified, note=note))
            print(f"  {kind} {wl} {mode:20s} {name:45s} {med:10.3f} ms ({note}) verified {verified}", flush=True)
        if name == "ours soft_align" and kind == "nw" and device.type == "cuda":
            med, lo, hi = timed_steps(lambda: fwd_bwd(scores), device, runs)
            rows.append(Row(f"{kind} {wl} {LOOP_MODE}", name, med, cells, "cells/s",
                            verified=checked.get("forward + backward", ""),
                            note=f"{lo:.3g}..{hi:.3g} ms"))
            print(f"  {kind} {wl} {LOOP_MODE} {name} {med:10.3f} ms ({lo:.3g}..{hi:.3g} ms)", flush=True)
        if device.type == "cuda":
            torch.cuda.empty_cache()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--commit")
    ap.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "results"))
    ap.add_argument("--small", action="store_true", help="tiny sizes (a CPU smoke test)")
    ap.add_argument("--runs", type=int, default=5, help="timed runs per row (>= 3)")
    ap.add_argument("--only", choices=("nw", "dtw", "affine", "local", "checkpoint"))
    ap.add_argument("--sizes", help="B x N x M to run, comma-separated (e.g. 64x512x512,256x128x128; default: all)")
    args = ap.parse_args()
    device = pick_device()
    runs = max(3, args.runs)
    commit = git_commit(args.commit)
    sizes, ours_only = (SMALL, SMALL_OURS_ONLY) if args.small else (SIZES, OURS_ONLY)
    print(f"device {device} ({torch.cuda.get_device_name(device) if device.type == 'cuda' else 'cpu'}), "
          f"torch {torch.__version__}, commit {commit}", flush=True)
    t0 = time.perf_counter()
    rows: list[Row] = []
    for kind in ("nw", "dtw", "affine", "local", "checkpoint"):
        if args.only not in (None, kind):
            continue
        if kind == "checkpoint":
            run_checkpoints(device, runs, rows, args.small)
            continue
        plan = [(s, False) for s in sizes] + [(s, True) for s in ours_only]
        if args.sizes:
            keep = {tuple(int(v) for v in size.split("x")) for size in args.sizes.split(",")}
            plan = [p for p in plan if p[0] in keep]
        if kind in ("affine", "local"):  # the other modes: the first size, ours and the JAX form
            plan = plan[:1]
        for size, alone in plan:
            try:
                run_workload(kind, device, *size, alone, runs, rows)
            except Exception as e:  # noqa: BLE001  (keep the other workloads and the record)
                traceback.print_exc()
                FAILURES.append(f"{kind} {size} raised {type(e).__name__}: {str(e).splitlines()[0][:300]}")
    fill_ratios(rows)
    info = {"seed": SEED, "gap": GAP, "affine": AFFINE, "temperature": 1.0, "runs": runs, "sizes": sizes + ours_only,
            "wall_s": round(time.perf_counter() - t0, 1), "verification_failures": FAILURES, "peer_errors": ERRORS}
    suffix = ("-small" if args.small else "") + (f"-{args.only}" if args.only else "")  # (a day's kinds apart)
    path = write_json(args.out, "soft_align", device, commit, rows, info, suffix=suffix)
    print()
    print(markdown_table(rows))
    print()
    print("time: median of the runs; note: min..max and the peak GPU memory of one call above what was allocated "
          "before it. vs ours: ours' throughput / this row's (>1: ours is faster). verified: value (rel 1e-5) and "
          "gradient (abs 1e-3) equal a float64 reference with the row's own convention.")
    report_end(path, info, [], FAILURES)


if __name__ == "__main__":
    main()
