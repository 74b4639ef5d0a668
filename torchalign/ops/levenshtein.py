"""The Levenshtein custom ops: schemas, fake impls, and the CPU / CUDA implementations.

Scalars: ``n_symbols`` (the alphabet's size: codes are checked against it),
``max_distance`` (-1: none; else distances above it report max_distance + 1) and
``longest`` (the longest sequence of the shorter side, sizing the kernel's scratch rows;
-1: unknown, read from the data). ``check=True`` validates offsets and code ranges with
one host read.
"""

from __future__ import annotations

import torch
from torch import Tensor

from ..cpu import levenshtein as cpu
from . import checks
from .backend import kernels, use_kernels

DEVICES = ("cpu", "cuda")


def _distances(a_codes, a_offsets, b_codes, b_offsets, n_symbols, max_distance, longest, check, cdist):
    la = a_offsets[1:] - a_offsets[:-1]
    lb = b_offsets[1:] - b_offsets[:-1]
    if check:
        most = [la.max() if la.numel() else la.new_tensor(0), lb.max() if lb.numel() else lb.new_tensor(0)]
        vals = checks.read(
            checks.offsets_facts(a_codes, a_offsets) + checks.offsets_facts(b_codes, b_offsets)
            + checks.code_range(a_codes) + checks.code_range(b_codes) + most
        )
        checks.raise_if_bad("a", vals[0:3], *vals[6:8], n_symbols)
        checks.raise_if_bad("b", vals[3:6], *vals[8:10], n_symbols)
        longest = min(vals[10], vals[11])
    elif longest < 0:  # no hint: one host read
        longest = int(torch.minimum(la.max(), lb.max())) if la.numel() and lb.numel() else 0
    codes = torch.cat([a_codes, b_codes])  # one array: a pair may put either side on the rows
    args = (codes, a_offsets[:-1], la, b_offsets[:-1] + a_codes.numel(), lb)
    if use_kernels(a_codes):
        d = kernels("levenshtein").levenshtein_pairs(*args, longest, cdist=cdist)
    else:
        d = cpu.levenshtein_pairs(*args, cdist=cdist)
    return d if max_distance < 0 else d.clamp(max=max_distance + 1)


@torch.library.custom_op("torchalign::levenshtein", mutates_args=(), device_types=DEVICES)
def levenshtein(a_codes: Tensor, a_offsets: Tensor, b_codes: Tensor, b_offsets: Tensor, n_symbols: int,
                max_distance: int, longest: int, check: bool) -> Tensor:
    return _distances(a_codes, a_offsets, b_codes, b_offsets, n_symbols, max_distance, longest, check, False)


@levenshtein.register_fake
def _(a_codes, a_offsets, b_codes, b_offsets, n_symbols, max_distance, longest, check):
    return a_offsets.new_empty(a_offsets.shape[0] - 1, dtype=torch.int32)


@torch.library.custom_op("torchalign::levenshtein_cdist", mutates_args=(), device_types=DEVICES)
def levenshtein_cdist(a_codes: Tensor, a_offsets: Tensor, b_codes: Tensor, b_offsets: Tensor, n_symbols: int,
                      max_distance: int, longest: int, check: bool) -> Tensor:
    d = _distances(a_codes, a_offsets, b_codes, b_offsets, n_symbols, max_distance, longest, check, True)
    return d.reshape(a_offsets.numel() - 1, b_offsets.numel() - 1)


@levenshtein_cdist.register_fake
def _(a_codes, a_offsets, b_codes, b_offsets, n_symbols, max_distance, longest, check):
    return a_codes.new_empty((a_offsets.shape[0] - 1, b_offsets.shape[0] - 1), dtype=torch.int32)
