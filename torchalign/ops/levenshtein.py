"""The Levenshtein custom ops: schemas, fake impls, and the CPU / CUDA implementations.

Scalars: ``n_symbols`` (the alphabet's size: codes are checked against it),
``max_distance`` (-1: none; else distances above it report max_distance + 1),
``a_longest`` / ``b_longest`` and ``code_bound`` (the longest sequence of each side and a
bound on the codes, recorded by ta.encode; -1: unknown, read from the data) and
``algorithm`` ("auto", "myers", "dp": which kernel; the CPU runs its DP, same integers).
``check=True`` validates offsets and code ranges with one host read.
"""

from __future__ import annotations

import torch
from torch import Tensor

from ..cpu import rapidfuzz_levenshtein as cpu
from . import checks
from .backend import kernels, use_kernels, on_tensor_device

DEVICES = ("cpu", "cuda")
ALGORITHMS = ("auto", "myers", "dp")
MYERS_MAX_SYMBOLS = 256  # match-mask tables of bigger alphabets cost more than the DP saves


def _distances(a_codes, a_offsets, b_codes, b_offsets, n_symbols, max_distance, a_longest, b_longest,
               code_bound, algorithm, check, cdist):
    la = a_offsets[1:] - a_offsets[:-1]
    lb = b_offsets[1:] - b_offsets[:-1]
    if check or (use_kernels(a_codes) and min(a_longest, b_longest, code_bound) < 0):
        vals = checks.read(checks.two_batches(a_codes, a_offsets, b_codes, b_offsets))
        if check:
            checks.raise_if_bad("a", vals[0:3], *vals[6:8], n_symbols)
            checks.raise_if_bad("b", vals[3:6], *vals[8:10], n_symbols)
        a_longest, b_longest, code_bound = vals[10], vals[11], max(vals[7], vals[9], 0) + 1  # (no codes: 1)
    if use_kernels(a_codes):
        d = _kernel(a_codes, a_offsets, la, b_codes, b_offsets, lb, a_longest, b_longest, code_bound,
                    max_distance, algorithm, cdist)
    else:
        codes = torch.cat([a_codes, b_codes])
        d = cpu.levenshtein_pairs(codes, a_offsets[:-1], la, b_offsets[:-1] + a_codes.numel(), lb, cdist=cdist,
                                  max_distance=max_distance)
    return d if max_distance < 0 else d.clamp(max=max_distance + 1)


def _kernel(a_codes, a_offsets, la, b_codes, b_offsets, lb, a_longest, b_longest, code_bound, max_distance,
            algorithm, cdist):
    codes = torch.cat([a_codes, b_codes])  # one array: a pair may put either side on the rows
    a_starts, b_starts = a_offsets[:-1], b_offsets[:-1] + a_codes.numel()
    short = min(a_longest, b_longest)  # no pair has a shorter side longer than this
    if max(a_longest, b_longest) >= 1 << 31:
        raise ValueError("levenshtein on CUDA: sequences of 2^31 codes or more are not supported (the kernels "
                         "count columns in int32); split them or use CPU tensors")
    if algorithm == "auto":
        algorithm = "myers" if code_bound <= MYERS_MAX_SYMBOLS else "dp"
    if algorithm == "dp":
        return kernels("levenshtein").levenshtein_pairs(codes, a_starts, la, b_starts, lb, short, cdist=cdist)
    if code_bound > MYERS_MAX_SYMBOLS:
        raise ValueError(f"algorithm='myers' takes alphabets of <= {MYERS_MAX_SYMBOLS} codes, got codes up to "
                         f"{code_bound - 1}; use algorithm='auto' or 'dp'")
    K = kernels("myers")
    bound = None if max_distance < 0 else max_distance  # Ukkonen's band for long sequences
    if not cdist:  # per pair, the shorter sequence is the pattern (the DP's rows)
        swap = lb < la
        return K.distances(codes, torch.where(swap, b_starts, a_starts), torch.minimum(la, lb),
                           torch.where(swap, a_starts, b_starts), torch.maximum(la, lb), code_bound, short,
                           max_distance=bound)
    if a_longest <= b_longest:
        return K.distances(codes, a_starts, la, b_starts, lb, code_bound, a_longest, cdist=True, max_distance=bound)
    d = K.distances(codes, b_starts, lb, a_starts, la, code_bound, b_longest, cdist=True, max_distance=bound)  # b's side as patterns
    return d.reshape(lb.numel(), la.numel()).T.reshape(-1)


@torch.library.custom_op("torchalign::levenshtein", mutates_args=(), device_types=DEVICES)
@on_tensor_device
def levenshtein(a_codes: Tensor, a_offsets: Tensor, b_codes: Tensor, b_offsets: Tensor, n_symbols: int,
                max_distance: int, a_longest: int, b_longest: int, code_bound: int, algorithm: str,
                check: bool) -> Tensor:
    return _distances(a_codes, a_offsets, b_codes, b_offsets, n_symbols, max_distance, a_longest, b_longest,
                      code_bound, algorithm, check, False)


@levenshtein.register_fake
def _(a_codes, a_offsets, b_codes, b_offsets, n_symbols, max_distance, a_longest, b_longest, code_bound,
      algorithm, check):
    return a_offsets.new_empty(a_offsets.shape[0] - 1, dtype=torch.int32)


@torch.library.custom_op("torchalign::levenshtein_cdist", mutates_args=(), device_types=DEVICES)
@on_tensor_device
def levenshtein_cdist(a_codes: Tensor, a_offsets: Tensor, b_codes: Tensor, b_offsets: Tensor, n_symbols: int,
                      max_distance: int, a_longest: int, b_longest: int, code_bound: int, algorithm: str,
                      check: bool) -> Tensor:
    d = _distances(a_codes, a_offsets, b_codes, b_offsets, n_symbols, max_distance, a_longest, b_longest,
                   code_bound, algorithm, check, True)
    return d.reshape(a_offsets.numel() - 1, b_offsets.numel() - 1)


@levenshtein_cdist.register_fake
def _(a_codes, a_offsets, b_codes, b_offsets, n_symbols, max_distance, a_longest, b_longest, code_bound,
      algorithm, check):
    return a_codes.new_empty((a_offsets.shape[0] - 1, b_offsets.shape[0] - 1), dtype=torch.int32)
