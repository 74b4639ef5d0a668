"""``torchrun --nproc-per-node N -m torchalign search ...``: every rank reads the files,
searches its shard of the database on its own GPU (``torchalign.distributed``), and rank 0
aligns the hits and writes the TSV, in the single-process command's order."""

from __future__ import annotations

import os
import sys

import torch
import torch.distributed as dist
from torchalign_client import TORCHRUN_VARIABLES

from . import distributed


def launched() -> bool:
    """Whether this process is one rank of a torchrun job (or already in a process group)."""
    return all(v in os.environ for v in TORCHRUN_VARIABLES) or (dist.is_available() and dist.is_initialized())


def run(args, scoring, device: str, read) -> int:
    """The search subcommand on this rank; ``read()`` reads the files (every rank does, and if
    it fails on any rank every rank stops). 0, or 1 if another rank failed."""
    from . import cli_search

    own = not dist.is_initialized()  # a process group made here is destroyed here
    if device == "cuda":
        local = int(os.environ.get("LOCAL_RANK", 0))
        torch.cuda.set_device(local)
        dev = torch.device("cuda", local)
    else:
        dev = torch.device("cpu")
    if own:
        dist.init_process_group("nccl" if dev.type == "cuda" else "gloo")
    try:
        (q_names, queries), (d_names, database) = distributed.guard(read)
        shard = distributed.shard(database).to(dev)

        def search(group):
            return distributed.search(group, shard, scoring, args.top, mode=args.mode, dst=0)

        if dist.get_rank() == 0:
            print(f"{dist.get_world_size()} ranks ({dist.get_backend()}), the database sharded by residues",
                  file=sys.stderr)
            code = cli_search._report(args, scoring, dev, q_names, queries.to(dev), d_names, database, search)
        else:
            n_db = int(database.codes.numel())
            for q0, q1 in cli_search._groups(queries.lengths.tolist(), n_db, dev):  # rank 0's groups, in step
                search(distributed._part(queries, q0, q1))
            code = 0
        # the ranks leave together; waiting here also lets gloo's worker threads release the
        # last collective's tensors before the interpreter exits (a release during its
        # teardown aborts the process)
        dist.barrier()
        return code
    except distributed.RankError as e:  # the failing rank reports its own error
        print(f"torchalign {args.command}: error: {e}", file=sys.stderr)
        return 1
    finally:
        if own:
            dist.destroy_process_group()
