"""torchalign.metrics under DDP: 2 CPU processes (gloo), each updating with its own,
unequal share of the batches; compute() reduces the states across ranks and equals
torchmetrics' metric run the same way and one process over all batches.

One spawned run holds every check (a spawned process that imports torch costs seconds).
"""

import torch
import torchmetrics.text as TM

import torchalign.metrics as tam

from .test_distributed import _run_ranks
from .test_metrics import random_batches, real_pairs, same

WORLD = 2


def _batches():
    """Real lines (for the rates) and short random strings (for all: torchmetrics' edit
    distance is exact on them, see torchalign.metrics), an empty batch, an empty string."""
    preds, target = real_pairs(11, 45)
    short = random_batches(12, n_batches=4) + [([], []), ("", "")]
    return [(preds[i : i + 15], target[i : i + 15]) for i in range(0, 45, 15)] + short, short


def _metrics():
    """(ours, torchmetrics' class, constructor arguments)."""
    return [(tam.CharErrorRate, TM.CharErrorRate, ()), (tam.WordErrorRate, TM.WordErrorRate, ()),
            (tam.MatchErrorRate, TM.MatchErrorRate, ()), (tam.EditDistance, TM.EditDistance, (1, "mean")),
            (tam.EditDistance, TM.EditDistance, (1, "sum")), (tam.EditDistance, TM.EditDistance, (2, "none"))]


def _check(device, text, short):
    rank, world = torch.distributed.get_rank(), torch.distributed.get_world_size()
    for ours_cls, theirs_cls, args in _metrics():
        batches = short if ours_cls is tam.EditDistance else text
        mine = batches[rank::world]  # every other batch (of 9 text batches, rank 0 gets 5)
        in_rank_order = [b for r in range(world) for b in batches[r::world]]  # (how "none" concatenates)
        ours, theirs = ours_cls(*args).to(device), theirs_cls(*args)
        alone = theirs_cls(*args, sync_on_compute=False)  # one process over every batch
        for preds, target in mine:
            ours.update(preds, target)
            theirs.update(preds, target)
        for preds, target in in_rank_order:
            alone.update(preds, target)
        got = ours.compute()  # reduced over the ranks
        same(got, theirs.compute())
        same(got, alone.compute())
        for name in ("errors", "total", "edit_scores", "num_elements"):  # this rank's own states again
            if hasattr(theirs, name):
                same(getattr(ours, name), getattr(theirs, name))


def test_metrics_under_ddp():
    _run_ranks(WORLD, _check, *_batches())
