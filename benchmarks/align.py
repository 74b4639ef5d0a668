"""Alignment benchmark: Smith-Waterman scores (BLOSUM62, gaps 11 / 1) beside peers, one run.

    python benchmarks/align.py [--commit HASH] [--out DIR] [--db N] [--small]

Workload (issue 4, first cut): the 20 Swiss-Prot queries of ../shared/data (144..5,478
residues) against a generated database of N sequences (default 20,000; the issue's full
run is 570,000 once ta.search lands) with Swiss-Prot-like lengths (lognormal, mean ~350)
and the residue composition of the bundled proteome. Until ta.search exists, each query
runs as ``ta.align_score`` over (query, target) pairs: the query is repeated per pair.
GCUPS = query length x database residues / time, per query and overall. Peers in the same
run: parasail ``sw_striped_profile_sat`` (8/16/32-bit saturation ladder, one profile per
query) on all host CPUs over database slices, and the vectorised torch DP
(torchalign.cpu.align on the GPU) on the shortest queries against a slice.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import Clock, Row, bench, fill_ratios, git_commit, markdown_table, pick_device, write_json  # noqa: E402

import torchalign as ta  # noqa: E402
from torchalign.cpu import align as torch_dp  # noqa: E402

SEED = 5
DATA = os.environ.get("TORCHALIGN_TEST_DATA", os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                                           "shared", "data"))
_DB: list[str] = []  # parasail workers read the database through fork


def read_fasta(path: str) -> list[str]:
    seqs, cur = [], []
    for line in open(path):
        if line.startswith(">"):
            if cur:
                seqs.append("".join(cur))
            cur = []
        else:
            cur.append(line.strip())
    if cur:
        seqs.append("".join(cur))
    return seqs


def database(n: int, rng: np.random.Generator) -> list[str]:
    """n sequences, lognormal lengths (mean ~350), residues drawn with the composition of
    the bundled proteome (the 20 standard amino acids)."""
    proteome = "".join(read_fasta(os.path.join(DATA, "proteome_HG003687.faa")))
    letters = np.array(list("ARNDCQEGHILKMFPSTWYV"))
    counts = np.array([proteome.count(c) for c in letters], dtype=float)
    lengths = np.clip(rng.lognormal(np.log(350) - 0.245, 0.7, n).astype(int), 10, 35000)
    flat = rng.choice(letters, size=int(lengths.sum()), p=counts / counts.sum())
    cuts = np.cumsum(lengths)[:-1]
    return ["".join(x) for x in np.split(flat, cuts)]


def _parasail_slice(args):
    import parasail

    query, lo, hi = args
    profile = parasail.profile_create_sat(query, parasail.blosum62)
    return [parasail.sw_striped_profile_sat(profile, t, 11, 1).score for t in _DB[lo:hi]]


def parasail_all(pool, query: str, workers: int) -> list[int]:
    step = -(-len(_DB) // (workers * 4))
    parts = pool.map(_parasail_slice, [(query, lo, min(len(_DB), lo + step)) for lo in range(0, len(_DB), step)])
    return [s for part in parts for s in part]


def main() -> int:
    global _DB
    ap = argparse.ArgumentParser()
    ap.add_argument("--commit")
    ap.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "results"))
    ap.add_argument("--db", type=int, default=20_000)
    ap.add_argument("--small", action="store_true", help="200 database sequences, 4 queries (smoke run)")
    args = ap.parse_args()
    device = pick_device()
    rng = np.random.default_rng(SEED)
    n_db = 200 if args.small else args.db
    queries = read_fasta(os.path.join(DATA, "swissprot_queries20.fasta"))
    queries = sorted(queries, key=len)[:: 5 if args.small else 1]
    _DB = database(n_db, rng)
    residues = sum(map(len, _DB))
    sc = ta.Scoring()
    T = ta.encode(_DB, "protein", device)
    rows, skipped, clock = [], [], Clock()
    workers = os.cpu_count() or 1
    print(clock(), f"database: {n_db} sequences, {residues} residues", flush=True)
    try:
        import parasail  # noqa: F401

        pool = mp.get_context("fork").Pool(workers)
    except ImportError as e:
        pool = None
        skipped.append(f"parasail: {e}")
    total_ours = total_theirs = cells_all = 0.0
    for q in queries:
        Q = ta.encode([q] * n_db, "protein", device)
        cells = float(len(q)) * residues
        wl = f"SW {len(q)} aa vs {n_db} seqs ({residues / 1e6:.1f} M aa)"
        ours = ta.align_score(Q, T, sc, "local").score.cpu()
        ms = bench(lambda: ta.align_score(Q, T, sc, "local"), device, warmup=2, rep=5, cpu_runs=1)
        rows.append(Row(wl, "torchalign", ms, cells, "CUPS"))
        total_ours += ms
        cells_all += cells
        line = f"ours {ms:.1f} ms"
        if pool is not None:
            theirs = torch.tensor(parasail_all(pool, q, workers), dtype=torch.int32)
            ms_p = bench(lambda: parasail_all(pool, q, workers), torch.device("cpu"), cpu_runs=1)
            rows.append(Row(wl, f"parasail sw_striped_profile_sat, {workers} processes", ms_p, cells, "CUPS",
                            "torchalign", "yes" if torch.equal(theirs, ours) else "NO"))
            total_theirs += ms_p
            line += f", parasail {ms_p:.1f} ms"
        print(clock(), wl, line, flush=True)
    rows.append(Row(f"SW, {len(queries)} queries vs {n_db} seqs, overall", "torchalign", total_ours, cells_all, "CUPS"))
    if pool is not None:
        rows.append(Row(f"SW, {len(queries)} queries vs {n_db} seqs, overall", f"parasail, {workers} processes",
                        total_theirs, cells_all, "CUPS", "torchalign"))
        pool.close()
    # the vectorised torch DP on the GPU: the shortest query against the first 2,000 targets
    q, sub = queries[0], min(n_db, 2000)
    Tq = ta.encode(_DB[:sub], "protein", device)
    Qq = ta.encode([q] * sub, "protein", device)
    sub_cells = float(len(q)) * sum(map(len, _DB[:sub]))

    def dp():
        return torch_dp.align_score(Qq.codes, Qq.offsets[:-1], Qq.offsets[1:] - Qq.offsets[:-1], Tq.codes,
                                    Tq.offsets[:-1], Tq.offsets[1:] - Tq.offsets[:-1], sc.table.to(device), 11, 1,
                                    "local")[0]

    wl = f"SW {len(q)} aa vs {sub} seqs"
    ms = bench(lambda: ta.align_score(Qq, Tq, sc), device, warmup=2, rep=5, cpu_runs=1)
    rows.append(Row(wl, "torchalign", ms, sub_cells, "CUPS"))
    same = torch.equal(dp().cpu(), ta.align_score(Qq, Tq, sc).score.cpu())
    ms = bench(dp, device, warmup=1, rep=3, cpu_runs=1)
    rows.append(Row(wl, "torch DP vectorised over pairs (torchalign.cpu.align)", ms, sub_cells, "CUPS",
                    "torchalign", "yes" if same else "NO"))
    fill_ratios(rows)
    print(markdown_table(rows))
    for s in skipped:
        print("skipped peer:", s)
    path = write_json(args.out, "align", device, git_commit(args.commit), rows,
                      {"seed": SEED, "db": n_db, "skipped": skipped}, "-small" if args.small else "")
    print("wrote", path)
    return 0 if all(r.verified != "NO" for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
