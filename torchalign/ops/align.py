"""The alignment custom op (Smith-Waterman / Needleman-Wunsch / semiglobal scores):
schema, fake, and the CPU / CUDA implementations.

Inputs: queries and targets as flat codes + offsets (pair b = query b, target b), the
substitution ``table`` (int32 [S, S], codes < S), affine gaps (a gap of length L costs
gap_open + (L - 1) gap_extend), ``mode`` ("local", "global", "semiglobal"), the longest
query and target (-1: unknown, read from the data). Every DP cell must stay inside
+-SCORE_LIMIT (scores are exact int32): a pair whose bound passes it raises. ``check=True``
validates offsets and codes with one host read.
"""

from __future__ import annotations

import torch
from torch import Tensor

from ..cpu import align as cpu
from ..scoring import SCORE_LIMIT
from . import checks
from .backend import kernels, use_kernels

DEVICES = ("cpu", "cuda")
MODES = ("local", "global", "semiglobal")


def _check_bound(table: Tensor, gap_open: int, gap_extend: int, q_longest: int, t_longest: int) -> None:
    top = max(int(table.abs().max()) if table.numel() else 0, gap_open, gap_extend, 1)
    if top * (q_longest + t_longest + 2) >= SCORE_LIMIT:
        raise ValueError(f"align_score: sequences of {q_longest} and {t_longest} residues with scores up to {top} "
                         f"could pass {SCORE_LIMIT} (exact int32 scores would not be guaranteed); split the "
                         "sequences or scale the scores down")


@torch.library.custom_op("torchalign::align_score", mutates_args=(), device_types=DEVICES)
def align_score(q_codes: Tensor, q_offsets: Tensor, t_codes: Tensor, t_offsets: Tensor, table: Tensor,
                gap_open: int, gap_extend: int, mode: str, q_longest: int, t_longest: int,
                check: bool) -> tuple[Tensor, Tensor, Tensor]:
    q_lens = q_offsets[1:] - q_offsets[:-1]
    t_lens = t_offsets[1:] - t_offsets[:-1]
    size = table.shape[0]
    if check or min(q_longest, t_longest) < 0:
        zero = q_lens.new_tensor(0)
        vals = checks.read(
            checks.offsets_facts(q_codes, q_offsets) + checks.offsets_facts(t_codes, t_offsets)
            + checks.code_range(q_codes) + checks.code_range(t_codes)
            + [q_lens.max() if q_lens.numel() else zero, t_lens.max() if t_lens.numel() else zero]
        )
        if check:
            for name, facts, (lo, hi) in (("queries", vals[0:3], vals[6:8]), ("targets", vals[3:6], vals[8:10])):
                checks.raise_if_bad(name, facts, 0, 0, 1)
                if lo < 0 or hi >= size:
                    raise ValueError(f"{name}: codes must lie in [0, {size}) (the scoring matrix's symbols), found "
                                     f"{lo}..{hi}; a symbol the matrix lacks, or a batch of another alphabet")
        q_longest, t_longest = vals[10], vals[11]
    _check_bound(table, gap_open, gap_extend, q_longest, t_longest)
    if use_kernels(q_codes):
        return kernels("align").align_score(q_codes, q_offsets[:-1], q_lens, t_codes, t_offsets[:-1], t_lens, table,
                                            gap_open, gap_extend, MODES.index(mode))
    return cpu.align_score(q_codes, q_offsets[:-1], q_lens, t_codes, t_offsets[:-1], t_lens, table, gap_open,
                           gap_extend, mode)


@align_score.register_fake
def _(q_codes, q_offsets, t_codes, t_offsets, table, gap_open, gap_extend, mode, q_longest, t_longest, check):
    n = q_offsets.shape[0] - 1
    return (q_offsets.new_empty(n, dtype=torch.int32), q_offsets.new_empty(n, dtype=torch.int64),
            q_offsets.new_empty(n, dtype=torch.int64))
