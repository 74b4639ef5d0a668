"""The k-difference primer op: schema, fake, CPU and CUDA.

alpha (the sequences primers come from) and beta (the records they must not bind) come
as flat codes + offsets; the result is int32 in alpha's flat layout: the shortest
length from each start with >= k differences from every substring of every record of
beta, 0 where none exists. ``code_bound`` bounds the codes (-1: unknown, read with the
checks); the kernels' match-mask table has one row per code, so alphabets of more than
MAX_MASK_SYMBOLS codes are renumbered first (as in ops/asm.py). ``first_rows`` is the
kernels' first window (0: their default); starts whose whole window matched run again
with longer ones, so the result never depends on it. The GPU path reads back between
those passes (how many starts are left), so unlike the fixed-shape distance ops it cannot
be captured in a CUDA graph, even with ``check=False``.
"""

from __future__ import annotations

import torch
from torch import Tensor

from ..cpu import primers as cpu
from . import checks
from .asm import _kernel_inputs
from .backend import kernels, use_kernels, on_tensor_device

DEVICES = ("cpu", "cuda")


@torch.library.custom_op("torchalign::kdiff_primers", mutates_args=(), device_types=DEVICES)
@on_tensor_device
def kdiff_primers(alpha_codes: Tensor, alpha_offsets: Tensor, beta_codes: Tensor, beta_offsets: Tensor, k: int,
                  n_symbols: int, code_bound: int, first_rows: int, check: bool) -> Tensor:
    if check or (use_kernels(alpha_codes) and code_bound < 0):
        vals = checks.read(checks.two_batches(alpha_codes, alpha_offsets, beta_codes, beta_offsets))
        if check:
            checks.raise_if_bad("alpha", vals[0:3], *vals[6:8], n_symbols)
            checks.raise_if_bad("beta", vals[3:6], *vals[8:10], n_symbols)
        code_bound = max(vals[7], vals[9]) + 1
    K = k - 1
    if use_kernels(alpha_codes):
        # renumber by alpha's codes: beta codes alpha lacks match nothing
        beta, alpha, n_sym = _kernel_inputs(beta_codes, alpha_codes, max(code_bound, 1))
        best = kernels("primers").solve(alpha, alpha_offsets, beta, beta_offsets, K, n_sym, first_rows)
    else:
        best = cpu.longest_within(alpha_codes, alpha_offsets, beta_codes, beta_offsets, K)
    lens = alpha_offsets[1:] - alpha_offsets[:-1]
    rem = torch.repeat_interleave(alpha_offsets[1:], lens, output_size=alpha_codes.numel()) \
        - torch.arange(alpha_codes.numel(), device=alpha_codes.device)
    return torch.where(best < rem, best + 1, 0).to(torch.int32)


@kdiff_primers.register_fake
def _(alpha_codes, alpha_offsets, beta_codes, beta_offsets, k, n_symbols, code_bound, first_rows, check):
    return alpha_codes.new_empty(alpha_codes.shape, dtype=torch.int32)
