"""torchalign.distributed over CPU processes (gloo): sharded search and all-pairs equal the
single-process results (random data with many ties, real proteins), a rank that raises
makes every rank raise, and the CLI under torchrun writes what the single process writes.

One spawned run per world size holds every check (a spawned process that imports torch
costs seconds); joins and the process group have timeouts, so a hang fails the test.
"""

import contextlib
import datetime
import doctest
import io
import os
import random
import socket
import subprocess
import sys
import time

import pytest

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

import torchalign as ta
import torchalign.distributed as tad
from torchalign.cli import main

from .conftest import REPO, read_fasta

GROUP_TIMEOUT = datetime.timedelta(seconds=200)  # a collective that waits longer raises (a loaded 2-core CI box is slow)
JOIN_TIMEOUT = 300  # s for a whole spawned run: past it the test fails (a hang)
AMINO = "ARNDCQEGHILKMFPSTWYV"
SC = ta.Scoring()


# ---- running ranks ------------------------------------------------------------------
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _worker(rank, world, init, backend, check, args):
    if backend == "nccl":
        torch.cuda.set_device(rank)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # (as torchrun does: ranks that share 2 cores and spin-wait crawl)
    dist.init_process_group(backend, init_method=init, rank=rank, world_size=world, timeout=GROUP_TIMEOUT)
    try:
        check(torch.device("cuda", rank) if backend == "nccl" else torch.device("cpu"), *args)
        dist.barrier()
    finally:
        dist.destroy_process_group()
        torch.set_num_threads(threads)
    if world > 1:  # a spawned rank: no interpreter teardown, where gloo's worker threads
        sys.stdout.flush()  # may still be releasing tensors of the last collective (an abort)
        sys.stderr.flush()
        os._exit(0)


def _run_ranks(world, check, *args, backend="gloo", init=None):
    """check(device, *args) on ``world`` ranks: in this process for one rank, else spawned."""
    init = init or f"tcp://127.0.0.1:{_free_port()}"
    if world == 1:
        return _worker(0, 1, init, backend, check, args)
    ctx = mp.start_processes(_worker, args=(world, init, backend, check, args), nprocs=world, join=False,
                             start_method="spawn")
    deadline = time.monotonic() + JOIN_TIMEOUT
    try:
        while not ctx.join(timeout=max(1.0, deadline - time.monotonic())):  # raises if a rank raised
            if time.monotonic() >= deadline:
                pytest.fail(f"{world} ranks still running after {JOIN_TIMEOUT} s: a hang")
    finally:
        for p in ctx.processes:
            if p.is_alive():
                p.kill()


# ---- data ---------------------------------------------------------------------------
def _rand(rng, n):
    return "".join(rng.choice(AMINO) for _ in range(n))


def _tied(seed):
    """Queries and a database of few distinct sequences repeated (ties across every shard
    boundary), random and empty ones between; lengths kept alike (the CPU DP runs pairs
    of alike lengths together)."""
    rng = random.Random(seed)
    distinct = [_rand(rng, rng.randint(20, 25)) for _ in range(5)]
    db = [rng.choice(distinct) if rng.random() < 0.7 else _rand(rng, rng.randint(20, 25)) for _ in range(60)]
    db[rng.randrange(60)] = db[rng.randrange(60)] = ""
    return [distinct[0], distinct[1][2:12], _rand(rng, 22)], db


def _real():
    """Real query fragments against real proteins of 60..75 aa (the CPU search is slow)."""
    queries = [s[:40] for _, s in read_fasta("swissprot_queries20.fa")[:2]]
    return queries, [s for _, s in read_fasta("proteome_HG003687.fa") if 60 <= len(s) <= 75][:40]


def _cases(seed):
    """(queries, database, top_k, mode) searched on every world size, ta.search's result
    computed once here."""
    queries, db = _tied(seed)
    cases = [(queries, db, 4, "local"), (queries, db, 100, "local"), (queries, db, 1, "global"),
             (queries, db, 7, "semiglobal"), (*_real(), 10, "local")]
    return [(c, ta.search(c[0], ta.encode(c[1], "protein"), SC, c[2], mode=c[3])) for c in cases]


# ---- checks (each runs on every rank) --------------------------------------------------
def _same(got, want):
    assert got is not None
    for name, g, w in zip(want._fields, got, want):
        assert g.dtype == w.dtype and torch.equal(g.cpu(), w), (name, g, w)


def _raises_everywhere(fn, failing_rank, error, match):
    """fn raises ``error`` on failing_rank and RankError naming it on the other ranks."""
    rank = dist.get_rank()
    with pytest.raises(error if rank == failing_rank else tad.RankError, match=match) as e:
        fn()
    if rank != failing_rank:
        assert f"rank {failing_rank} failed" in str(e.value)


def _check_search(dev, cases, seed):
    rank, world = dist.get_rank(), dist.get_world_size()
    for (queries, db, top_k, mode), want in cases:
        shard = tad.shard(ta.encode(db, "protein", dev))
        assert (shard.start, shard.total) == (tad.shard(db, rank, world, alphabet="protein").start, len(db))
        _same(tad.search(queries, shard, SC, top_k, mode=mode), want)
    (queries, db, _, _), want = cases[0]  # top_k 4, local
    D = ta.encode(db, "protein", dev)
    shard = tad.shard(D)
    got = tad.search(queries, shard, SC, 4, dst=world - 1)
    if rank == world - 1:
        _same(got, want)
    else:
        assert got is None
    old, tad.CANDIDATES = tad.CANDIDATES, 9  # groups of 2 queries (9 // 4), and of 10 residues
    try:
        _same(tad.search(queries, shard, SC, 4, query_residues=10), want)
    finally:
        tad.CANDIDATES = old
    _same(tad.search(queries, shard.to("cpu"), SC, 4, batch_residues=50), want)
    # plain batches of unequal sizes in rank order, the first one empty
    cuts = [0, 0] + sorted(random.Random(seed).sample(range(len(db) + 1), max(0, world - 2))) + [len(db)]
    cuts = cuts if world > 1 else [0, len(db)]
    part = ta.encode(db[cuts[rank] : cuts[rank + 1]], "protein", dev)
    _same(tad.search(queries, part, SC, 4), want)
    # more ranks than sequences, one sequence, none; no queries
    for n in (world - 1, 1, 0):
        small = ta.encode(db[:n], "protein", dev)
        _same(tad.search(queries, tad.shard(small), SC, 3), ta.search(queries, small.to("cpu"), SC, 3))
    _same(tad.search([], shard, SC, 3), ta.search(ta.encode([], "protein"), D.to("cpu"), SC, 3))


def _check_cdist(dev, seed):
    rng = random.Random(seed)
    dna = "ACGT"
    a = ta.encode(["".join(rng.choice(dna) for _ in range(rng.randint(0, 20))) for _ in range(5)], "dna", dev)
    for b in (["".join(rng.choice(dna) for _ in range(rng.randint(0, 20))) for _ in range(13)], ["ACGT"]):
        B = ta.encode(b, "dna", dev)
        block = tad.levenshtein_cdist(a, tad.shard(B))
        want = ta.levenshtein_cdist(a, B)
        assert torch.equal(block.values, want[:, block.start : block.start + block.values.shape[1]])
        assert sum(block.sizes) == len(b) and block.sizes[dist.get_rank()] == block.values.shape[1]
        assert torch.equal(tad.gather_columns(block), want)
        full = tad.gather_columns(block, dst=0)
        assert torch.equal(full, want) if dist.get_rank() == 0 else full is None
    a = ta.encode(["".join(rng.choice(dna) for _ in range(12)) for _ in range(4)], "dna", dev)
    B = ta.encode(["".join(rng.choice(dna) for _ in range(12)) for _ in range(9)], "dna", dev)
    assert torch.equal(tad.gather_columns(tad.hamming_cdist(a, tad.shard(B))), ta.hamming_cdist(a, B))


def _check_errors(dev, cases):
    rank, world = dist.get_rank(), dist.get_world_size()
    last = world - 1
    (queries, db, _, _), want = cases[0]
    D = ta.encode(db, "protein", dev)
    shard = tad.shard(D)
    # bad input on one rank only (found before any search)
    _raises_everywhere(lambda: tad.search(queries, shard, SC, 0 if rank == last else 4), last, ValueError,
                       "top_k")
    # out of memory on one rank, inside its search
    real = tad._ta_search

    def oom(*a, **k):
        raise torch.OutOfMemoryError("CUDA out of memory (simulated)")

    tad._ta_search = oom if rank == last else real
    try:
        _raises_everywhere(lambda: tad.search(queries, shard, SC, 4), last, torch.OutOfMemoryError, "out of memory")
    finally:
        tad._ta_search = real
    # shards that do not cover one database, queries that differ: every rank says so
    with pytest.raises(ValueError, match="rank order"):
        tad.search(queries, tad.shard(D, rank, world + 1), SC, 4)
    with pytest.raises(ValueError, match="mode"):  # (raised by ta.search, but there are no queries)
        tad.search([], shard, SC, 4, mode="best")
    if world > 1:
        with pytest.raises(ValueError, match="different queries"):
            tad.search(queries[: 1 + rank % 2], shard, SC, 4)
    # unequal Hamming lengths in the last rank's columns only
    b = ta.encode(["ACGT"] * (2 * world) + ["ACG"], "dna", dev)
    _raises_everywhere(lambda: tad.hamming_cdist(["ACGT"], tad.shard(b)), last, ValueError, "length")
    _raises_everywhere(lambda: tad.guard(lambda: 1 / (rank != last)), last, ZeroDivisionError, "division")
    _same(tad.search(queries, shard, SC, 4), want)  # the group still works


def _check_cli(dev, q_path, db_path, expected):
    rank, world = dist.get_rank(), dist.get_world_size()
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["search", q_path, db_path, "--device", "cpu", "--top", "3", "--align"])
    assert code == 0, err.getvalue()
    assert out.getvalue() == (expected if rank == 0 else "")
    missing = db_path + ".missing" if rank == world - 1 else db_path  # a bad file on one rank
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["search", q_path, missing, "--device", "cpu"])
    assert code == (2 if rank == world - 1 else 1)
    assert ("No such file" if rank == world - 1 else f"rank {world - 1} failed") in err.getvalue()


def _all_checks(dev, seed, cases, cli):
    _check_search(dev, cases, seed)
    _check_cdist(dev, seed)
    _check_errors(dev, cases)
    if cli:
        _check_cli(dev, *cli)


# ---- tests ---------------------------------------------------------------------------
@pytest.fixture(scope="module")
def seed_and_cases():
    seed = random.randrange(2**32)
    print("seed", seed)
    return seed, _cases(seed)


@pytest.fixture(scope="module")
def cli_files(tmp_path_factory):
    """(queries, database, the single-process command's TSV), --top 3 --align."""
    path = tmp_path_factory.mktemp("cli")
    queries, db = _real()
    files = []
    for name, seqs in (("q.fa", queries), ("db.fa", db)):
        with open(path / name, "w") as f:
            f.writelines(f">{name[:-3]}{i} x\n{s}\n" for i, s in enumerate(seqs))
        files.append(str(path / name))
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        assert main(["search", *files, "--device", "cpu", "--top", "3", "--align"]) == 0
    assert out.getvalue().count("\n") == 1 + 2 * 3
    return (*files, out.getvalue())


@pytest.mark.parametrize("world", [1, 2, 3])
def test_ranks_equal_one_process(world, seed_and_cases, cli_files, tmp_path):
    """Search (every mode, ties, dst, query groups, unequal and empty shards, real data),
    the cdist blocks and their gathering, errors on one rank, and the CLI, on ``world`` ranks."""
    _run_ranks(world, _all_checks, *seed_and_cases, cli_files, init=f"file://{tmp_path}/store")


def test_shard_balances_residues():
    lengths = [5, 100, 1, 1, 1, 50, 50, 0, 3]
    db = ta.encode(["A" * n for n in lengths], "protein")
    for world in (1, 2, 3, 4, 12):
        shards = [tad.shard(db, r, world) for r in range(world)]
        assert [s.start for s in shards] == [sum(len(x) for x in shards[:r]) for r in range(world)]
        assert sum(len(s) for s in shards) == len(db) and all(s.total == len(db) for s in shards)
        assert torch.equal(torch.cat([s.codes for s in shards]), db.codes)
    assert [s.codes.numel() for s in (tad.shard(db, r, 2) for r in range(2))] == [105, 106]
    assert [len(tad.shard(db, r, 12)) for r in range(12)].count(0) >= 3
    assert isinstance(tad.shard(db, 1, 2).to("cpu"), tad.Shard)
    for bad, match in (((2, 2), "rank"), ((0, 0), "world_size"), ((-1, 2), "rank")):
        with pytest.raises(ValueError, match=match):
            tad.shard(db, *bad)


def test_docstring_examples():
    result = doctest.testmod(tad)
    assert result.attempted > 0 and result.failed == 0


def test_cli_under_torchrun(cli_files):
    q_path, db_path, expected = cli_files
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    out = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
                          "-m", "torchalign", "search", q_path, db_path, "--device", "cpu", "--top", "3", "--align"],
                         capture_output=True, text=True, timeout=JOIN_TIMEOUT, env=env)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout == expected


@pytest.mark.gpu
@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs 2 GPUs")
def test_two_gpus_equal_one(seed_and_cases):
    """The same checks on 2 GPUs with NCCL (the CLI runs on the CPU above)."""
    _run_ranks(2, _all_checks, *seed_and_cases, None, backend="nccl")
