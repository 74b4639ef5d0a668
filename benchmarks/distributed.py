"""Sharded search and all-pairs over the GPUs of one host (torchalign.distributed, NCCL).

    python benchmarks/distributed.py [--gpus 1,2] [--large-on 2] [--commit HASH] [--out DIR] [--cache DIR] [--small]

One command: the script generates the inputs once (cached under --cache), then launches
itself under torchrun once per world size in --gpus (``python -m torch.distributed.run
--standalone --nproc-per-node N``, one rank per GPU), and prints the table of all of
them with the scaling efficiency T(1) / (N x T(N)). NCCL's environment is left as the
machine sets it (NVLink multicast stays off where the machine says so; the JSON records
every NCCL_* variable). Without a GPU the ranks are CPU processes on gloo.

Workloads (each rank times its calls between a barrier and a device sync; the time of a
call is the slowest rank's, so the collectives and any imbalance are inside it):
- the 20 bundled Swiss-Prot queries (144..5,478 aa) against the 570,000-sequence
  database of benchmarks/align.py (same generator and seed: the same sequences, 199 M
  residues), ``tad.search(top_k=10)`` over the database sharded by residues; beside it,
  on one GPU, plain ``ta.search`` (no torch.distributed);
- the same queries against a database 4x larger (2,280,000 sequences, ~800 M residues:
  the 570,000 and the next three draws of the same generator), on the world sizes in
  --large-on (default 2 only; its efficiency is then the throughput per GPU against the
  570,000-sequence search on one GPU);
- ``tad.levenshtein_cdist`` 16,384 x 16,384 random DNA of length 100 (the columns
  sharded), and ``tad.gather_columns`` of the full matrix to every rank;
- where the time of a search goes: each rank's local ``ta.search`` alone, and the
  merge alone (the all-gather of the candidates plus the top-k).
Results are checked across world sizes (search: scores, indices, ends equal; cdist: a
checksum of the full matrix). ``--small``: 300 database sequences, the 2 shortest
queries, 64 x 64 cdist, on the CPU with gloo, one thread per rank (a smoke run).
Expected run time on 2 H200s with a warm Triton cache: ~4 minutes (generating the
databases the first time: ~1 more).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch
import torch.distributed as dist

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from align import SEED, database, read_fasta  # noqa: E402
from common import Clock, Row, data_file, git_commit, markdown_table, pick_device, write_json  # noqa: E402

import torchalign as ta  # noqa: E402
import torchalign.distributed as tad  # noqa: E402

AMINO = "ARNDCQEGHILKMFPSTWYV"  # PROTEIN codes 0..19, in this order
TOP_K = 10


def database_codes(n: int, rng: np.random.Generator) -> ta.SequenceBatch:
    """``ta.encode(align.database(n, rng), "protein")`` without the strings: the same draws
    from ``rng`` (checked in main), so the same sequences, made in seconds at 800 M residues."""
    proteome = "".join(read_fasta(data_file("proteome_HG003687.fa")))
    counts = np.array([proteome.count(c) for c in AMINO], dtype=float)
    lengths = np.clip(rng.lognormal(np.log(350) - 0.245, 0.7, n).astype(int), 10, 35000)
    codes = rng.choice(len(AMINO), size=int(lengths.sum()), p=counts / counts.sum()).astype(np.uint8)
    offsets = torch.zeros(n + 1, dtype=torch.int64)
    torch.cumsum(torch.from_numpy(lengths).to(torch.int64), 0, out=offsets[1:])
    return ta.SequenceBatch(torch.from_numpy(codes), offsets, "protein", int(codes.max()), int(lengths.max()))


def prepare(args, clock) -> dict:
    """The inputs as files (databases saved once per size), and the job for the ranks."""
    os.makedirs(args.cache, exist_ok=True)
    queries = sorted(read_fasta(data_file("swissprot_queries20.fa")), key=len)
    n = 300 if args.small else args.db
    if args.small:
        queries = queries[:2]
        check = ta.encode(database(n, np.random.default_rng(SEED)), "protein")
        same = database_codes(n, np.random.default_rng(SEED))
        assert torch.equal(check.codes, same.codes) and torch.equal(check.offsets, same.offsets)
    dbs = []
    for times, label, worlds in ((1, f"{n:,}", None), (args.large, f"{args.large * n:,}", args.large_on)):
        path = os.path.join(args.cache, f"db-{SEED}-{n}x{times}.pt")
        if not os.path.exists(path):
            rng = np.random.default_rng(SEED)
            parts = [database_codes(n, rng) for _ in range(times)]
            ends = torch.tensor([0] + [p.codes.numel() for p in parts]).cumsum(0)
            whole = ta.SequenceBatch(torch.cat([p.codes for p in parts]),
                                     torch.cat([parts[0].offsets[:1]] + [p.offsets[1:] + e for p, e in zip(parts, ends)]),
                                     "protein", max(p.max_code for p in parts), max(p.max_length for p in parts))
            whole.save(path + ".tmp")
            os.replace(path + ".tmp", path)
            print(clock(), f"generated {path}", flush=True)
        d = ta.SequenceBatch.load(path)
        dbs.append({"label": f"{len(queries)} queries vs {label} seqs ({d.codes.numel() / 1e6:.3g} M aa)",
                    "path": path, "sequences": len(d), "residues": int(d.codes.numel()),
                    "worlds": [int(x) for x in worlds.split(",")] if worlds else None})
    side = 64 if args.small else args.cdist
    return {"queries": queries, "dbs": dbs, "cdist": {"n": side, "length": 100, "seed": SEED},
            "reps": 1 if args.small else args.reps, "cpu": args.small or not torch.cuda.is_available()}


# ---------------------------------------------------------------- the ranks --------------
def worker(job_path: str, result_path: str) -> None:
    job = json.load(open(job_path))
    local = int(os.environ.get("LOCAL_RANK", 0))
    if job["cpu"]:
        device = torch.device("cpu")
        torch.set_num_threads(1)
    else:
        device = torch.device("cuda", local)
        torch.cuda.set_device(device)
    dist.init_process_group("gloo" if job["cpu"] else "nccl", timeout=datetime.timedelta(minutes=5))
    rank, world = dist.get_rank(), dist.get_world_size()
    reps, sc = job["reps"], ta.Scoring()
    queries = ta.encode(job["queries"], "protein", device)
    out = {"world": world, "device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
           "backend": str(dist.get_backend()), "search": [], "nccl_env": _nccl_env()}
    for db in job["dbs"]:
        if db["worlds"] and world not in db["worlds"]:
            continue
        shard = tad.shard(ta.SequenceBatch.load(db["path"])).to(device)
        run = lambda: tad.search(queries, shard, sc, TOP_K)  # noqa: E731
        run()  # compiles the kernels, opens the communicators
        times, r = timed(run, device, reps)
        local_times, mine = timed(lambda: ta.search(queries, shard, sc, TOP_K), device, reps, every_rank=True)
        cand = tad._candidates(mine, shard.start, TOP_K, tad._comm_device(None, device))

        def merge():
            parts = tad._exchange(lambda: cand, cand.numel(), torch.int64, cand.device, None)
            return tad._merge_all(parts, len(queries), TOP_K, min(TOP_K, shard.total))

        merge_times, _ = timed(merge, device, max(reps, 5))
        row = {**db, "ms": times, "local_ms": local_times, "merge_ms": merge_times,
               "shard_residues": _every_rank(shard.codes.numel()),
               "result": [t.cpu().tolist() for t in r]}
        if world == 1 and db is job["dbs"][0]:  # plain ta.search on the whole database, no torch.distributed
            whole = ta.SequenceBatch.load(db["path"]).to(device)
            row["plain_ms"], plain = timed(lambda: ta.search(queries, whole, sc, TOP_K), device, reps)
            row["plain_equal"] = all(torch.equal(a, b) for a, b in zip(plain, r))
            del whole
        out["search"].append(row)
        del shard
        if rank == 0:
            print(f"[rank 0 of {world}] {db['label']}: {statistics.median(times):.1f} ms", flush=True)
    c = job["cdist"]
    g = torch.Generator().manual_seed(c["seed"])
    a = ta.encode(torch.randint(0, 4, (c["n"], c["length"]), generator=g, dtype=torch.uint8), "dna").to(device)
    b = tad.shard(ta.encode(torch.randint(0, 4, (c["n"], c["length"]), generator=g, dtype=torch.uint8), "dna"))
    b = b.to(device)
    run = lambda: tad.levenshtein_cdist(a, b)  # noqa: E731
    run()
    times, block = timed(run, device, max(reps, 5))
    gather_times, full = timed(lambda: tad.gather_columns(block), device, max(reps, 5))
    out["cdist"] = {**c, "ms": times, "gather_ms": gather_times, "checksum": _checksum(full)}
    if rank == 0:
        print(f"[rank 0 of {world}] cdist {c['n']}^2: {statistics.median(times):.1f} ms", flush=True)
        with open(result_path, "w") as f:
            json.dump(out, f)
    dist.destroy_process_group()


def timed(fn, device, reps: int, every_rank: bool = False):
    """(milliseconds of each of ``reps`` calls, the last call's result). A call starts
    after a barrier and ends when this rank's device is done; its time is the slowest
    rank's (every rank's, [reps][world], with ``every_rank``)."""
    times, out = [], None
    for _ in range(reps):
        dist.barrier()
        _sync(device)
        t0 = time.perf_counter()
        out = fn()
        _sync(device)
        ms = (time.perf_counter() - t0) * 1e3
        times.append(_every_rank(ms) if every_rank else max(_every_rank(ms)))
    return times, out


def _every_rank(x: float) -> list:
    comm = tad._comm_device(None, torch.device("cuda", torch.cuda.current_device()) if torch.cuda.is_available()
                            else torch.device("cpu"))
    t = torch.tensor([float(x)], dtype=torch.float64, device=comm)
    parts = [torch.empty_like(t) for _ in range(dist.get_world_size())]
    dist.all_gather(parts, t)
    return [float(p) for p in parts]


def _sync(device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _checksum(m: torch.Tensor) -> list[int]:
    """Two sums of the matrix (plain, and weighted by row and column) as its fingerprint."""
    rows = torch.arange(m.shape[0], device=m.device, dtype=torch.int64)[:, None] % 1009
    cols = torch.arange(m.shape[1], device=m.device, dtype=torch.int64)[None, :] % 1013
    return [int(m.sum(dtype=torch.int64)), int((m.to(torch.int64) * (rows * 7 + cols * 13 + 1)).sum())]


def _nccl_env() -> dict:
    return {k: v for k, v in sorted(os.environ.items()) if k.startswith("NCCL_")}


# ---------------------------------------------------------------- the table -------------
def rows_of(runs: dict, job: dict) -> list[Row]:
    """Rows for every workload and world size; efficiency and checks against 1 rank."""
    unit = "CPU process" if job["cpu"] else "GPU"
    name = lambda w: f"torchalign.distributed, {w} x {unit}"  # noqa: E731
    rows = []
    cells_q = sum(map(len, job["queries"]))
    base = runs.get(1)
    found = lambda run, db: next((s for s in run["search"] if s["path"] == db["path"]), None)  # noqa: E731
    first = found(base, job["dbs"][0]) if base else None  # the 570,000-sequence search on one rank
    for db in job["dbs"]:
        cells = float(cells_q) * db["residues"]
        one = found(base, db) if base else None
        for w, run in sorted(runs.items()):
            s = found(run, db)
            if s is None:
                continue
            ms = statistics.median(s["ms"])
            row = Row(f"search, {db['label']}", name(w), ms, cells, "CUPS")
            local = [statistics.median(r[k] for r in s["local_ms"]) for k in range(w)]
            row.note = (f"local search per rank {', '.join(f'{x:.0f}' for x in local)} ms, merge "
                        f"{statistics.median(s['merge_ms']):.2f} ms")
            if one and w > 1:
                t1 = statistics.median(one["ms"])
                row.ref, row.note = name(1), f"efficiency {t1 / (w * ms):.3f}; " + row.note
                row.verified = "yes" if s["result"] == one["result"] else "NO"
            elif first and w > 1:  # per-GPU throughput against the first database on one rank
                per_gpu = cells / ms / w / (float(cells_q) * job["dbs"][0]["residues"] / statistics.median(first["ms"]))
                row.note = f"throughput per rank / one rank's on the first database {per_gpu:.3f}; " + row.note
            rows.append(row)
            if "plain_ms" in s:
                rows.append(Row(f"search, {db['label']}", "ta.search, one process (no torch.distributed)",
                                statistics.median(s["plain_ms"]), cells, "CUPS", name(1),
                                "yes" if s["plain_equal"] else "NO"))
    c = job["cdist"]
    cells = float(c["n"]) ** 2 * c["length"] ** 2
    for w, run in sorted(runs.items()):
        d = run["cdist"]
        ms = statistics.median(d["ms"])
        row = Row(f"levenshtein_cdist {c['n']:,} x {c['n']:,} DNA, L={c['length']}", name(w), ms, cells, "CUPS",
                  note=f"gather_columns to every rank {statistics.median(d['gather_ms']):.1f} ms")
        if base and w > 1:
            row.ref = name(1)
            row.note = f"efficiency {statistics.median(base['cdist']['ms']) / (w * ms):.3f}; " + row.note
            row.verified = "yes" if d["checksum"] == base["cdist"]["checksum"] else "NO"
        rows.append(row)
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--gpus", default="1,2", help="world sizes to run, comma-separated (default 1,2)")
    ap.add_argument("--db", type=int, default=570_000, help="database sequences (default 570,000)")
    ap.add_argument("--large", type=int, default=4, help="the larger database, in databases (default 4)")
    ap.add_argument("--large-on", default="2", help="world sizes that search the larger database (default 2)")
    ap.add_argument("--cdist", type=int, default=16_384, help="cdist side (default 16,384)")
    ap.add_argument("--reps", type=int, default=3, help="timed calls per search (default 3; cdist 5)")
    ap.add_argument("--commit")
    ap.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "results"))
    ap.add_argument("--cache", default=os.path.join(tempfile.gettempdir(), "torchalign-bench"),
                    help="where the generated databases are kept between runs")
    ap.add_argument("--small", action="store_true", help="a CPU smoke run on gloo (tiny inputs)")
    ap.add_argument("--timeout", type=int, default=1800, help="seconds per world size")
    ap.add_argument("--worker", nargs=2, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        worker(*args.worker)
        return 0
    clock = Clock()
    job = prepare(args, clock)
    runs = {}
    with tempfile.TemporaryDirectory() as tmp:
        job_path = os.path.join(tmp, "job.json")
        with open(job_path, "w") as f:
            json.dump(job, f)
        for w in (int(x) for x in args.gpus.split(",")):
            result = os.path.join(tmp, f"world{w}.json")
            cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={w}",
                   os.path.abspath(__file__), "--worker", job_path, result]
            print(clock(), " ".join(cmd), flush=True)
            subprocess.run(cmd, check=True, timeout=args.timeout)
            runs[w] = json.load(open(result))
    rows = rows_of(runs, job)
    print(markdown_table(rows))
    device = torch.device("cpu") if job["cpu"] else pick_device()
    extra = {"seed": SEED, "top_k": TOP_K, "world_sizes": sorted(runs), "backend": runs[min(runs)]["backend"],
             "nccl_env": runs[min(runs)]["nccl_env"], "job": {k: v for k, v in job.items() if k != "queries"},
             "runs": {w: {k: v for k, v in r.items() if k != "search"} | {"search": [
                 {k: v for k, v in s.items() if k != "result"} for s in r["search"]]} for w, r in runs.items()}}
    path = write_json(args.out, "distributed", device, git_commit(args.commit), rows, extra,
                      "-small" if args.small else "")
    print("wrote", path)
    return 0 if all(not r.verified.startswith("NO") for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
