"""The traceback custom op: one optimal alignment path per chosen pair.

Inputs as torchalign::align_score's, plus the pairs (query pair_q[p] with target
pair_t[p], int64[P]: the top hits of a search, or arange(B) twice) and ``max_cells``.
The scores and end cells come from align_score's own code path (so they are
align_score's, ties included); then a second DP over the rectangle from (0, 0) to the
end cell stores one direction byte per cell and a walk back reads the path
(cpu/traceback.py documents the bytes and the tie rule; the Triton kernels write the
same bytes). Memory: one byte per cell of every rectangle, (query_end + 1) x
(target_end + 1) per pair, all pairs at once on the GPU; a call needing more than
``max_cells`` raises before allocating.

Outputs (P pairs): scores int32[P]; coordinates int64[P, 4] (query start, query end,
target start, target end; 0-based, ends exclusive); op codes uint8[N] (0 '=', 1 'X',
2 'I': a query residue against a gap, 3 'D': a target residue against a gap), pair p's
at ops[offsets[p]:offsets[p + 1]]; offsets int64[P + 1].
"""

from __future__ import annotations

import torch
from torch import Tensor

from ..cpu import parasail_traceback as cpu
from .align import DEVICES, MODES, _pairs, _validate
from .backend import kernels, use_kernels, on_tensor_device

MAX_CELLS = 1 << 30  # direction bytes per call (1 GiB): a 5,000 x 35,000 pair needs 175 M


def _check_cells(cells: int, max_cells: int) -> None:
    if cells > max_cells:
        raise ValueError(f"traceback: the pairs need {cells} DP cells (1 byte each), more than max_cells={max_cells}; "
                         "pass fewer pairs per call, cut the targets to the region around the hit (align_score's "
                         "ends), or raise max_cells if the memory is there")


def _check_pairs(pair_q: Tensor, pair_t: Tensor, n_q: int, n_t: int) -> None:
    """Pair indices inside the batches (one host read)."""
    lo_q, hi_q, lo_t, hi_t = torch.stack([pair_q.min(), pair_q.max(), pair_t.min(), pair_t.max()]).tolist()
    for name, lo, hi, n in (("query", lo_q, hi_q, n_q), ("target", lo_t, hi_t, n_t)):
        if lo < 0 or hi >= n:
            raise ValueError(f"pairs: {name} indices must lie in [0, {n}), found {lo}..{hi}")


@torch.library.custom_op("torchalign::traceback", mutates_args=(), device_types=DEVICES)
@on_tensor_device
def traceback(q_codes: Tensor, q_offsets: Tensor, t_codes: Tensor, t_offsets: Tensor, pair_q: Tensor,
              pair_t: Tensor, table: Tensor,
              gap_open: int, gap_extend: int, mode: str, q_longest: int, t_longest: int, max_cells: int,
              check: bool) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    try:
        _validate(q_codes, q_offsets, t_codes, t_offsets, table, gap_open, gap_extend, q_longest, t_longest, check)
    except ValueError as e:  # (the shared check names align_score)
        raise ValueError(str(e).replace("align_score:", "traceback:", 1)) from None
    if check and pair_q.numel():
        _check_pairs(pair_q, pair_t, q_offsets.numel() - 1, t_offsets.numel() - 1)
    score, q_end, t_end = _pairs(q_codes, q_offsets, t_codes, t_offsets, pair_q, pair_t, table, gap_open, gap_extend,
                                 mode, True)
    if pair_q.numel():
        _check_cells(int(((q_end + 1) * (t_end + 1)).sum()), max_cells)
    q_starts, t_starts = q_offsets[:-1][pair_q], t_offsets[:-1][pair_t]
    if use_kernels(q_codes):
        impl = kernels("traceback").traceback_pairs
        mode_arg = MODES.index(mode)
    else:
        impl, mode_arg = cpu.traceback, mode
    q_from, t_from, ops, offsets = impl(q_codes, q_starts, t_codes, t_starts, q_end, t_end, table, gap_open,
                                        gap_extend, mode_arg)
    return score, torch.stack([q_from, q_end, t_from, t_end], 1), ops, offsets


@traceback.register_fake
def _(q_codes, q_offsets, t_codes, t_offsets, pair_q, pair_t, table, gap_open, gap_extend, mode, q_longest, t_longest,
      max_cells, check):
    B = pair_q.shape[0]
    n = torch.library.get_ctx().new_dynamic_size()
    return (q_offsets.new_empty(B, dtype=torch.int32), q_offsets.new_empty((B, 4), dtype=torch.int64),
            q_offsets.new_empty(n, dtype=torch.uint8), q_offsets.new_empty(B + 1, dtype=torch.int64))
