"""More than one GPU: a database (or the columns of an all-pairs matrix) sharded over the
ranks of a ``torch.distributed`` process group, one GPU per rank (NCCL; gloo on the CPU).

Launch with ``torchrun --nproc-per-node N script.py``; every rank runs the same calls::

    import torch, torch.distributed as dist, torchalign as ta, torchalign.distributed as tad
    dist.init_process_group("nccl"); torch.cuda.set_device(dist.get_rank() % torch.cuda.device_count())
    db = tad.shard(ta.SequenceBatch.load("db.pt")).cuda()    # this rank's part, balanced by residues
    r = tad.search(queries, db, ta.Scoring(), top_k=10)       # = ta.search on the whole database

A shard is a contiguous range of the database (``Shard.start``, ``Shard.total``), so a
rank's local index plus ``start`` is the global index. ``search`` merges every rank's
top_k with one all-gather per query group: the merged result is ``ta.search``'s on the
whole database (same scores, global indices, ends; ties to the smaller global index).
Every collective here carries each rank's error flag: a rank that raises (bad input, out
of memory) makes every rank raise (``RankError`` on the others) instead of hanging.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
import torch.distributed as dist

from .align import SearchResult, _scoring_and_batches, _slices
from .align import search as _ta_search
from .batch import SequenceBatch, encode
from .hamming import hamming_cdist as _hamming_cdist
from .inputs import check_int
from .levenshtein import levenshtein_cdist as _levenshtein_cdist

CANDIDATES = 1 << 22  # query x top_k candidates per all-gather (24 B each per rank): bounds a group


class RankError(RuntimeError):
    """Raised on every rank whose own work succeeded when another rank of the group failed."""


class Shard(SequenceBatch):
    """Sequences ``start .. start + len(self) - 1`` of a database of ``total`` sequences."""

    def __init__(self, codes, offsets, alphabet, max_code, max_length, start: int, total: int):
        super().__init__(codes, offsets, alphabet, max_code, max_length)
        self.start, self.total = start, total

    def _like(self, batch: SequenceBatch) -> "Shard":
        return Shard(batch.codes, batch.offsets, batch.alphabet, batch.max_code, batch.max_length, self.start,
                     self.total)

    def to(self, device, non_blocking: bool = False) -> "Shard":
        return self._like(super().to(device, non_blocking))

    def pin_memory(self) -> "Shard":
        return self._like(super().pin_memory())

    def __repr__(self) -> str:
        return f"Shard(start={self.start}, total={self.total}, {super().__repr__()})"


class Block(NamedTuple):
    """This rank's columns of an all-pairs matrix: ``values`` [n_rows, sizes[rank]] holds
    global columns ``start .. start + sizes[rank] - 1``; ``sizes``: every rank's width."""

    values: torch.Tensor
    start: int
    sizes: tuple


def shard(database, rank: int | None = None, world_size: int | None = None, *, alphabet=None,
          group=None) -> Shard:
    """This rank's part of ``database``: a contiguous range of sequences holding about
    1 / world_size of its residues (cut at the sequence boundary nearest each share;
    with more ranks than sequences some shards are empty). ``rank`` and ``world_size``
    default to those of ``group`` (the default process group). Codes stay where they
    were (a view): ``.to(device)`` copies only this part. ``database``: a SequenceBatch,
    or what ``ta.encode`` takes (with ``alphabet``: encode it as you will search it).

    >>> import torchalign.distributed as tad
    >>> [len(tad.shard(["A" * 8, "A", "A", "A" * 6], r, 2)) for r in range(2)]
    [1, 3]
    """
    database = encode(database, alphabet)
    if world_size is None or rank is None:
        if not dist.is_initialized():
            raise ValueError("shard: pass rank and world_size, or call torch.distributed.init_process_group first")
        rank = dist.get_rank(group) if rank is None else rank
        world_size = dist.get_world_size(group) if world_size is None else world_size
    world_size = check_int("world_size", world_size, 1)
    rank = check_int("rank", rank, 0)
    if rank >= world_size:
        raise ValueError(f"rank: must be < world_size ({world_size}), got {rank}")
    offsets = database.offsets.cpu()
    lo, hi = (_cut(offsets, r, world_size) for r in (rank, rank + 1))
    lengths = offsets[lo + 1 : hi + 1] - offsets[lo:hi]
    o0, o1 = int(offsets[lo]), int(offsets[hi])
    return Shard(database.codes[o0:o1], database.offsets[lo : hi + 1] - o0, database.alphabet, database.max_code,
                 int(lengths.max()) if hi > lo else 0, lo, len(database))


def _cut(offsets: torch.Tensor, r: int, world_size: int) -> int:
    """The first sequence of rank r: the boundary nearest r / world_size of the residues."""
    n = offsets.numel() - 1
    if r == world_size:
        return n
    target = int(offsets[-1]) * r // world_size
    i = int(torch.searchsorted(offsets, target))  # offsets[i] >= target
    if i > 0 and target - int(offsets[i - 1]) <= int(offsets[i]) - target:
        i -= 1
    return min(i, n)


def search(queries, database_shard: SequenceBatch, scoring=None, top_k: int = 10, *, mode: str = "local",
           group=None, dst: int | None = None, query_residues: int | None = None,
           batch_residues: int | None = None, check: bool = True) -> SearchResult | None:
    """``ta.search`` over a database sharded across the ranks of ``group``: call it on
    every rank with the same queries and arguments and this rank's shard. Every rank
    searches its shard on its own device, then the top_k lists (scores, global indices,
    ends) meet in one all-gather per query group; every rank (only rank ``dst`` if given:
    the others return None) returns exactly ``ta.search(queries, whole_database, ...)``.

    ``database_shard``: a ``shard(...)`` (moved to this rank's device), or a plain
    SequenceBatch per rank, taken as the rank-order concatenation of the ranks' batches.
    The search runs on the shard's device (with ``batch_residues``: on the queries',
    the shard streaming through in slices, as ``ta.search``). ``query_residues``: search
    the queries in groups of about this many residues, each moved to that device in turn
    (queries larger than device memory); a group also holds at most CANDIDATES // top_k
    queries. Indices are global (below 2^32, as ``ta.search``'s).
    """
    world, rank = dist.get_world_size(group), dist.get_rank(group)
    if dst is not None and not 0 <= dst < world:
        raise ValueError(f"dst: must be a rank of the group (0..{world - 1}), got {dst}")
    setup = {}

    def local_setup():  # validation and encoding, whose errors every rank must hear of
        setup["k"] = check_int("top_k", top_k, 1)
        sc, (q,), table = _scoring_and_batches(("queries",), (queries,), scoring)
        if not isinstance(database_shard, SequenceBatch):
            raise TypeError(f"database_shard: expected a SequenceBatch (torchalign.distributed.shard(...)), got "
                            f"{type(database_shard).__name__}")
        _scoring_and_batches(("database_shard",), (database_shard,), sc)
        if query_residues is not None:
            check_int("query_residues", query_residues, 1)
        setup.update(sc=sc, q=q)
        shard_info = (database_shard.start, database_shard.total) if isinstance(database_shard, Shard) else (-1, -1)
        return torch.tensor([len(q), setup["k"], len(database_shard), *shard_info])

    device = database_shard.device if isinstance(database_shard, SequenceBatch) else torch.device("cpu")
    comm = _comm_device(group, device)
    info = torch.stack(_exchange(local_setup, 5, torch.int64, comm, group)).tolist()
    start, total = _layout(info, rank)
    k, sc, q = setup["k"], setup["sc"], setup["q"]
    device = q.device if batch_residues is not None else database_shard.device
    k_out = min(k, total)
    merged = []
    for q0, q1 in _query_groups(q.offsets.cpu(), query_residues, max(1, CANDIDATES // k)):

        def local(q0=q0, q1=q1):
            group_q = _part(q, q0, q1).to(device)
            r = _ta_search(group_q, database_shard, sc, k, mode=mode, batch_residues=batch_residues, check=check)
            return _candidates(r, start, k, comm)

        parts = _exchange(local, (q1 - q0) * k * 3, torch.int64, comm, group)
        if dst is None or dst == rank:
            merged.append(_merge_all(parts, q1 - q0, k, k_out))
    if dst is not None and dst != rank:
        return None
    if not merged:  # no queries
        return SearchResult(torch.empty((0, k_out), dtype=torch.int32, device=device),
                            *(torch.empty((0, k_out), dtype=torch.int64, device=device) for _ in range(3)))
    return SearchResult(*(torch.cat(x).to(device) for x in zip(*merged)))


def _layout(info: list[list[int]], rank: int) -> tuple[int, int]:
    """(this rank's first global index, the database size) from every rank's
    [n_queries, top_k, n_local, start, total]; the ranks must agree."""
    for name, col in (("queries", 0), ("top_k", 1)):
        if len({row[col] for row in info}) > 1:
            raise ValueError(f"search: the ranks pass different {name} ({[row[col] for row in info]}); pass the "
                             "same on every rank")
    counts = [row[2] for row in info]
    firsts = [sum(counts[:r]) for r in range(len(info))]
    shards = [row[3:] for row in info]
    if any(s != [-1, -1] for s in shards):
        if shards != [[f, sum(counts)] for f in firsts]:
            raise ValueError(f"database_shard: the ranks' shards (start, total: {shards}, sizes {counts}) do not "
                             "cover one database in rank order; pass shard(database) of one database on every rank")
    return firsts[rank], sum(counts)


def _query_groups(offsets: torch.Tensor, residues: int | None, max_queries: int):
    """(q0, q1) ranges: about ``residues`` residues (all if None), at most ``max_queries``."""
    for s0, s1 in _slices(offsets, residues) if residues is not None else [(0, offsets.numel() - 1)]:
        for q0 in range(s0, s1, max_queries):
            yield q0, min(s1, q0 + max_queries)


def _part(b: SequenceBatch, i0: int, i1: int) -> SequenceBatch:
    if i0 == 0 and i1 == len(b):
        return b
    o0, o1 = (int(x) for x in b.offsets[[i0, i1]])
    return SequenceBatch(b.codes[o0:o1], b.offsets[i0 : i1 + 1] - o0, b.alphabet, b.max_code, b.max_length)


def _candidates(r: SearchResult, start: int, k: int, comm) -> torch.Tensor:
    """[n, k, 3] int64 (sort key, end, query end) flattened: ta.search's key (score in the
    high word, ties to the smaller global index), padded to k columns with keys below any."""
    n, kr = r.scores.shape
    out = torch.full((n, k, 3), torch.iinfo(torch.int64).min, dtype=torch.int64, device=r.scores.device)
    out[:, :kr, 0] = (r.scores.to(torch.int64) << 32) + ((1 << 32) - 1 - (r.indices + start))
    out[:, :kr, 1] = r.ends
    out[:, :kr, 2] = r.query_ends
    return out.reshape(-1).to(comm)


def _merge_all(parts: list[torch.Tensor], n: int, k: int, k_out: int) -> tuple:
    """The k_out best candidates of all ranks per query, best first (the key decides)."""
    cand = torch.cat([p.view(n, k, 3) for p in parts], 1)
    pick = torch.topk(cand[:, :, 0], k_out, dim=1).indices
    key, ends, q_ends = (torch.gather(cand[:, :, c], 1, pick) for c in range(3))
    return (key >> 32).to(torch.int32), (1 << 32) - 1 - (key & 0xFFFFFFFF), ends, q_ends


def levenshtein_cdist(a, b_shard, *, group=None, **kw) -> Block:
    """``ta.levenshtein_cdist(a, b_shard, **kw)`` on this rank: its block of columns of the
    matrix of ``a`` against the whole (sharded) ``b``, with the block's first global
    column. ``gather_columns`` assembles the full matrix where it fits."""
    return _block(lambda: _levenshtein_cdist(a, b_shard, **kw), group, b_shard)


def hamming_cdist(a, b_shard, *, group=None, **kw) -> Block:
    """``ta.hamming_cdist`` over a sharded second argument, as ``levenshtein_cdist``."""
    return _block(lambda: _hamming_cdist(a, b_shard, **kw), group, b_shard)


def _block(fn, group, b_shard) -> Block:
    out = {}

    def local():
        out["values"] = fn()
        return torch.tensor([out["values"].shape[1]])

    device = b_shard.device if isinstance(b_shard, SequenceBatch) else torch.device("cpu")
    sizes = [int(s) for s in torch.cat(_exchange(local, 1, torch.int64, _comm_device(group, device), group))]
    rank = dist.get_rank(group)
    return Block(out["values"], sum(sizes[:rank]), tuple(sizes))


def gather_columns(block: Block, *, group=None, dst: int | None = None) -> torch.Tensor | None:
    """The full matrix [n_rows, sum(block.sizes)] from every rank's block (one all-gather,
    each block padded to the widest), on every rank, or on rank ``dst`` only (the others
    return None). Needs world_size x the widest block of memory on each receiving rank."""
    world, rank = dist.get_world_size(group), dist.get_rank(group)
    if dst is not None and not 0 <= dst < world:
        raise ValueError(f"dst: must be a rank of the group (0..{world - 1}), got {dst}")
    values, width = block.values, max(block.sizes)
    comm = _comm_device(group, values.device)

    def local():
        out = torch.zeros((values.shape[0], width), dtype=values.dtype, device=comm)
        out[:, : values.shape[1]] = values
        return out.reshape(-1)

    parts = _exchange(local, values.shape[0] * width, values.dtype, comm, group, gather_to=dst)
    if dst is not None and dst != rank:
        return None
    return torch.cat([p.view(values.shape[0], width)[:, :s] for p, s in zip(parts, block.sizes)], 1).to(values.device)


def guard(fn, group=None):
    """``fn()`` on this rank, with a collective after it: if ``fn`` raised on any rank of
    ``group``, it raises on every rank (its own error where it failed, RankError on the
    others) instead of leaving them waiting in their next collective.

    Use it around per-rank work outside this module (reading files, loading a model)."""
    out = {}

    def local():
        out["value"] = fn()
        return torch.empty(0, dtype=torch.int64)

    _exchange(local, 0, torch.int64, _comm_device(group, torch.device("cpu")), group)
    return out["value"]


def _comm_device(group, device: torch.device) -> torch.device:
    """Where the group's collectives take tensors: the data's device if its backend
    serves it (NCCL: CUDA, gloo: CPU), else the one it serves."""
    backend = str(dist.get_backend(group))
    if device.type == "cuda" and "nccl" in backend:
        return device
    if "gloo" in backend:
        return torch.device("cpu")
    if "nccl" in backend:
        return torch.device("cuda", torch.cuda.current_device())
    return device


def _exchange(local, size: int, dtype, device, group, gather_to: int | None = None) -> list[torch.Tensor]:
    """Every rank's ``local()`` (a tensor of ``size`` elements), gathered in rank order,
    each with a flag saying whether it raised. If any rank raised, every rank raises:
    that rank its own exception, the others RankError with its message. ``gather_to``:
    the payload goes to that rank only (the flags to every rank, first); [] elsewhere."""
    error = None
    try:
        payload = local().reshape(-1).to(device=device, dtype=dtype)
        if payload.numel() != size:
            raise RuntimeError(f"torchalign.distributed: internal error, {payload.numel()} elements for {size}")
    except Exception as e:  # noqa: BLE001  (any failure must reach the other ranks)
        error, payload = e, torch.zeros(size, dtype=dtype, device=device)
    world = dist.get_world_size(group)
    flag = torch.tensor([error is not None], dtype=dtype, device=device)
    if gather_to is None:
        send = torch.cat([flag, payload])
        recv = [torch.empty_like(send) for _ in range(world)]
        dist.all_gather(recv, send, group=group)
        flags = torch.stack([t[0] for t in recv])
    else:
        flags = [torch.empty_like(flag) for _ in range(world)]
        dist.all_gather(flags, flag, group=group)
        flags = torch.cat(flags)
    failed = [r for r, f in enumerate(flags.tolist()) if f]
    if failed:
        messages = [None] * world
        dist.all_gather_object(messages, f"{type(error).__name__}: {error}" if error else None, group=group)
        if error is not None:
            raise error
        raise RankError("; ".join(f"rank {r} failed: {messages[r]}" for r in failed))
    if gather_to is None:
        return [t[1:] for t in recv]
    rank = dist.get_rank(group)
    recv = [torch.empty_like(payload) for _ in range(world)] if rank == gather_to else None
    dist.gather(payload, recv, group=group, group_dst=gather_to)
    return recv or []
