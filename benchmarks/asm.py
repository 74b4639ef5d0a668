"""Approximate matching benchmark: ta.asm_search / ta.asm_best beside edlib, one run.

    python benchmarks/asm.py [--commit HASH] [--out DIR] [--small]

Workloads (issue 3):
- search: 256 random patterns of 32 bp, k = 3, over a generated 100 Mbp genome in which
  each pattern is planted once with up to 3 edits (all hits, with their starts);
- best: one pattern of 1,024 against 4 Mbp (2^22), random 0/1 strings as in the second
  paper (419.6 ms on a GTX 580);
- search16: one 16-mer, k = 6, over 22.87 MB of random DNA (the first paper: 1.99 Gb/s
  on a GTX 660);
- genes: 64 patterns of 1,000 bp planted with up to 30 substitutions, k = 30, over 10 Mbp:
  Ukkonen's band (the default for this k) beside the wavefront over all 16 words.
Throughput: text bytes x patterns per second. Peer: edlib (HW mode) on the host's CPUs,
one process per pattern (or per text slice); edlib reports only the best-distance
locations, so "verified" checks that each of those (start, end, distance) is among ours.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import Clock, Row, bench, fill_ratios, git_commit, markdown_table, pick_device, write_json  # noqa: E402

import torchalign as ta  # noqa: E402

SEED = 11
_TEXT = b""  # the text edlib workers read (inherited through fork)


def _edlib_one(args):
    import edlib

    pattern, k, lo, hi = args
    r = edlib.align(pattern, _TEXT[lo:hi], mode="HW", task="locations", k=k)
    return r["editDistance"], [(s + lo, e + 1 + lo) for s, e in r["locations"]]


def edlib_all(jobs, workers):
    with mp.get_context("fork").Pool(workers) as pool:
        return pool.map(_edlib_one, jobs, chunksize=1)


def planted_genome(g, n: int, n_pat: int, m: int, k: int):
    text = torch.randint(0, 4, (n,), generator=g, dtype=torch.uint8)
    pats = torch.randint(0, 4, (n_pat, m), generator=g, dtype=torch.uint8)
    spots = torch.randperm(n // (2 * m), generator=g)[:n_pat] * (2 * m)
    for p, s in zip(pats, spots.tolist()):
        copy = p.clone()
        for _ in range(int(torch.randint(0, k + 1, (1,), generator=g))):
            copy[int(torch.randint(0, m, (1,), generator=g))] = int(torch.randint(0, 4, (1,), generator=g))
        text[s : s + m] = copy
    return text, pats


def as_bytes(codes: torch.Tensor) -> bytes:
    return codes.numpy().tobytes().translate(bytes.maketrans(b"\0\1\2\3", b"ACGT"))


def check_against_edlib(results, hits, first_pattern=0) -> bool:
    ours = set(zip(hits.pattern.tolist(), hits.start.tolist(), hits.end.tolist(), hits.distance.tolist()))
    for q, (d, locs) in enumerate(results, first_pattern):
        if d >= 0 and any((q, s, e, d) not in ours for s, e in locs):
            return False
    return True


def planted_search(g, device, n: int, n_pat: int, m: int, k: int, rows, clock):
    """asm_search of n_pat planted patterns of m over a genome of n: our row; returns
    (workload, text, patterns, T, P, hits)."""
    text, pats = planted_genome(g, n, n_pat, m, k)
    T, P = ta.encode(text.to(device), "dna"), ta.encode(pats.to(device), "dna")
    wl = f"asm_search {n_pat} x {m} bp, k={k}, {n / 1e6:g} Mbp"
    hits = ta.asm_search(T, P, k)
    ms = bench(lambda: ta.asm_search(T, P, k), device)
    found = len(set(hits.pattern.tolist()))
    rows.append(Row(wl, "torchalign", ms, float(n) * n_pat, "B/s",
                    note=f"{hits.end.numel()} hits, {found}/{n_pat} planted"))
    print(clock(), wl, f"ours {ms:.1f} ms, {hits.end.numel()} hits", flush=True)
    return wl, text, pats, T, P, hits


def edlib_rows(wl, text, pats, k: int, hits, workers: int, rows, clock) -> None:
    """edlib HW with k on the given patterns over the whole text, one process each; its
    best locations checked against our hits."""
    global _TEXT
    _TEXT = as_bytes(text)
    jobs = [(as_bytes(p), k, 0, text.numel()) for p in pats]
    res = edlib_all(jobs, workers)
    ms = bench(lambda: edlib_all(jobs, workers), torch.device("cpu"), cpu_runs=1)
    ok = check_against_edlib(res, ta.EditHits(*(x.cpu() for x in hits)))
    rows.append(Row(f"{wl} ({len(pats)} patterns)", f"edlib HW, {workers} processes", ms, float(text.numel()) * len(pats),
                    "B/s", "torchalign", "yes" if ok else "NO"))
    print(clock(), "edlib", f"{ms:.1f} ms", flush=True)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--commit")
    ap.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "results"))
    ap.add_argument("--small", action="store_true", help="1/100 of the texts (smoke run; the CPU runs 1/2,000)")
    args = ap.parse_args()
    global _TEXT
    device = pick_device()
    scale = 1 if device.type == "cuda" and not args.small else (100 if device.type == "cuda" else 2000)
    workers = os.cpu_count() or 1
    g = torch.Generator().manual_seed(SEED)
    rows, skipped, clock = [], [], Clock()
    try:
        import edlib  # noqa: F401
    except ImportError as e:
        edlib = None
        skipped.append(f"edlib: {e}")

    # ---- search: 256 x 32 bp, k = 3, 100 Mbp
    k = 3
    wl, text, pats, T, P, hits = planted_search(g, device, 100_000_000 // scale, 256, 32, k, rows, clock)
    if edlib:
        edlib_rows(wl, text, pats[: len(pats) if scale > 1 else 32], k, hits, workers, rows, clock)  # 32 (all: --small)

    # ---- best: 1,024 vs 4 Mbp of random 0/1 symbols
    n, m = (1 << 22) // scale, 1024
    y = torch.randint(0, 2, (n,), generator=g, dtype=torch.uint8)
    x = torch.randint(0, 2, (m,), generator=g, dtype=torch.uint8)
    Y, X = ta.encode(y.to(device), "dna"), ta.encode(x.to(device), "dna")
    wl = f"asm_best {m} vs {n / 2**20:g} Mi random 0/1"
    d, end = ta.asm_best(Y, X)
    ms = bench(lambda: ta.asm_best(Y, X), device)
    rows.append(Row(wl, "torchalign", ms, float(n), "B/s", note=f"distance {int(d)}"))
    if scale == 1:
        rows.append(Row(wl, "paper 2, GeForce GTX 580 (reported, not run)", 419.6, float(n), "B/s", "torchalign"))
    print(clock(), wl, f"ours {ms:.2f} ms", flush=True)
    got = ta.asm_best(Y, X, algorithm="dp")
    ms = bench(lambda: ta.asm_best(Y, X, algorithm="dp"), device, cpu_runs=1)
    rows.append(Row(wl, "torchalign dp (row-parallel DP kernel)", ms, float(n), "B/s", "torchalign",
                    "yes" if int(got[0]) == int(d) and int(got[1]) == int(end) else "NO"))
    if edlib:
        _TEXT = as_bytes(y)
        job = [(as_bytes(x), -1, 0, n)]
        (ed, locs), = edlib_all(job, 1)
        ms = bench(lambda: edlib_all(job, 1), torch.device("cpu"), cpu_runs=1)
        ok = ed == int(d) and locs[0][1] == int(end)
        rows.append(Row(wl, "edlib HW, 1 process", ms, float(n), "B/s", "torchalign", "yes" if ok else "NO"))
        print(clock(), "edlib", f"{ms:.1f} ms", flush=True)

    # ---- search16: one 16-mer, k = 6, 22.87 MB
    n, m, k = int(22.87e6) // scale, 16, 6
    text = torch.randint(0, 4, (n,), generator=g, dtype=torch.uint8)
    pat = text[1000 : 1000 + m].clone()
    T, P = ta.encode(text.to(device), "dna"), ta.encode(pat.to(device), "dna")
    wl = f"asm_search 1 x {m} bp, k={k}, {n / 1e6:g} MB"
    hits = ta.asm_search(T, P, k)
    ms = bench(lambda: ta.asm_search(T, P, k), device)
    rows.append(Row(wl, "torchalign", ms, float(n), "B/s", note=f"{hits.end.numel()} hits"))
    got = ta.asm_search(T, P, k, algorithm="dp")
    ms = bench(lambda: ta.asm_search(T, P, k, algorithm="dp"), device, cpu_runs=1)
    same = all(torch.equal(a, b) for a, b in zip(got, hits))
    rows.append(Row(wl, "torchalign dp (row-parallel DP kernel)", ms, float(n), "B/s", "torchalign",
                    "yes" if same else "NO"))
    if scale == 1:
        rows.append(Row(wl, "paper 1, GeForce GTX 660 (reported 1.99 Gb/s, not run)", n * 8 / 1.99e9 * 1e3,
                        float(n), "B/s", "torchalign", note="taken as gigabits/s"))
    print(clock(), wl, f"ours {ms:.2f} ms, {hits.end.numel()} hits", flush=True)
    if edlib:
        _TEXT = as_bytes(text)
        piece = -(-n // workers)
        jobs = [(as_bytes(pat), k, max(0, lo - m - k), min(n, lo + piece)) for lo in range(0, n, piece)]
        res = edlib_all(jobs, workers)
        ms = bench(lambda: edlib_all(jobs, workers), torch.device("cpu"), cpu_runs=1)
        rows.append(Row(wl, f"edlib HW, {workers} processes (text slices)", ms, float(n), "B/s", "torchalign",
                        note="best locations only"))
        print(clock(), "edlib", f"{ms:.1f} ms", flush=True)

    # ---- genes: 64 x 1,000 bp, k = 30, 10 Mbp: the band against the full column
    k = 30
    wl, text, pats, T, P, hits = planted_search(g, device, 10_000_000 // scale, 64, 1000, k, rows, clock)
    if device.type == "cuda":
        from torchalign_kernels import myers

        myers.BAND_SHARE, share = 1 << 30, myers.BAND_SHARE
        full = ta.asm_search(T, P, k)
        ms = bench(lambda: ta.asm_search(T, P, k), device)
        myers.BAND_SHARE = share
        rows.append(Row(wl, "torchalign, wavefront over all words (no band)", ms, float(T.codes.numel()) * len(pats),
                        "B/s", "torchalign", "yes" if all(torch.equal(a, b) for a, b in zip(full, hits)) else "NO"))
        print(clock(), "no band", f"{ms:.1f} ms", flush=True)
    if edlib:
        edlib_rows(wl, text, pats[: len(pats) if scale > 1 else 16], k, hits, workers, rows, clock)

    fill_ratios(rows)
    print(markdown_table(rows))
    for s in skipped:
        print("skipped peer:", s)
    path = write_json(args.out, "asm", device, git_commit(args.commit), rows, {"seed": SEED, "skipped": skipped},
                      "-small" if args.small else "")
    print("wrote", path)
    return 0 if all(r.verified != "NO" for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
