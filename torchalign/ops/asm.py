"""The approximate-matching custom ops (edit distance): schemas, fakes, CPU and CUDA.

Texts and patterns come as flat codes + offsets. Scalars: ``n_symbols`` (codes are
checked against it), ``code_bound`` (a bound on the codes, -1: unknown) and
``longest`` (the longest pattern, -1: unknown); ta.encode records both, so with
``check=False`` the fixed-shape ops read nothing back. ``algorithm`` picks the GPU kernel:
"myers" (bit-vectors; alphabets of more than MAX_MASK_SYMBOLS codes, token ids or
unicode, are first renumbered to the codes the patterns use), "dp" (the row-parallel DP,
starts carried in the cells) or "auto" (myers). The CPU runs its DP: same integers.
"""

from __future__ import annotations

from typing import Optional

import torch
from torch import Tensor

from ..cpu import asm as cpu
from . import checks
from .backend import kernels, use_kernels, on_tensor_device
from .hamming import pattern_strands

DEVICES = ("cpu", "cuda")
ALGORITHMS = ("auto", "myers", "dp")
FIRST_CAPACITY = 1 << 16  # hit slots of the first launch; a second launch sizes exactly
MAX_MASK_SYMBOLS = 256


def _prepare(name, text_codes, text_offsets, pat_codes, pat_offsets, n_symbols, code_bound, longest, check):
    """Validate (one host read) and return (code_bound, longest)."""
    lens = pat_offsets[1:] - pat_offsets[:-1]
    if check or (use_kernels(text_codes) and min(code_bound, longest) < 0):
        zero = lens.new_tensor(0)
        vals = checks.read(
            checks.offsets_facts(text_codes, text_offsets) + checks.offsets_facts(pat_codes, pat_offsets)
            + checks.code_range(text_codes) + checks.code_range(pat_codes)
            + [lens.min() if lens.numel() else zero + 1, lens.argmin() if lens.numel() else zero,
               lens.max() if lens.numel() else zero]
        )
        if check:
            checks.raise_if_bad("texts", vals[0:3], *vals[6:8], n_symbols)
            checks.raise_if_bad("patterns", vals[3:6], *vals[8:10], n_symbols)
            if vals[10] < 1:
                raise ValueError(f"{name}: pattern {vals[11]} is empty; patterns need length >= 1")
        code_bound, longest = max(vals[7], vals[9]) + 1, vals[12]
    return max(code_bound, 1), longest


def _kernel_inputs(text_codes, pat_codes, code_bound):
    """(text, patterns, n_sym) with codes below n_sym <= MAX_MASK_SYMBOLS: big alphabets
    are renumbered to the patterns' distinct codes (text codes no pattern has match nothing)."""
    if code_bound <= MAX_MASK_SYMBOLS:
        return text_codes, pat_codes, code_bound
    used, pat = torch.unique(pat_codes, return_inverse=True)
    if used.numel() == 0:
        return torch.zeros_like(text_codes), pat, 1
    at = torch.searchsorted(used, text_codes).clamp(max=used.numel() - 1)
    text = torch.where(used[at] == text_codes, at, used.numel()).to(torch.int32)
    return text, pat.to(torch.int32), used.numel()


@torch.library.custom_op("torchalign::asm_search", mutates_args=(), device_types=DEVICES)
@on_tensor_device
def asm_search(text_codes: Tensor, text_offsets: Tensor, pat_codes: Tensor, pat_offsets: Tensor, k: int,
               complement: Optional[Tensor], max_hits: int, n_symbols: int, code_bound: int, longest: int,
               algorithm: str, check: bool) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor, Tensor]:
    code_bound, longest = _prepare("asm_search", text_codes, text_offsets, pat_codes, pat_offsets, n_symbols,
                                   code_bound, longest, check)
    codes, starts, lens = pattern_strands(pat_codes, pat_offsets, complement)
    n_pat = pat_offsets.numel() - 1
    if use_kernels(text_codes) and algorithm == "dp":
        args = ("hits", text_codes, text_offsets, codes, starts, lens, longest, longest + min(k, longest), k)
        end, pat, dist, tid, start = _all_hits(lambda cap: kernels("asm_rows").run(*args, capacity=cap), max_hits)
    elif use_kernels(text_codes):
        K = kernels("asm")
        text, codes, n_sym = _kernel_inputs(text_codes, codes, code_bound)
        args = (text, text_offsets, codes, starts, lens, longest, n_sym, k)
        end, pat, dist, tid = _all_hits(lambda cap: K.asm_hits(*args, cap), max_hits)
        start = K.hit_starts(text, text_offsets[tid], end, pat, dist, codes, starts, lens, longest, n_sym, k)
    else:
        pat, tid, start, end, dist = cpu.asm_hits(text_codes, text_offsets, codes, starts, lens, k)
        _raise_if_too_many(pat.numel(), max_hits)
        dist = dist.to(torch.int32)
    pat = pat.to(torch.int64)
    strand = (pat >= n_pat).to(torch.int64)
    pattern = pat - strand * n_pat
    base = text_offsets[tid]
    start, end = start - base, end - base
    order = _lexsort(pattern, tid, end, strand)
    return (pattern[order], tid[order], start[order], end[order], dist[order], strand[order].to(torch.int8))


def _all_hits(launch, max_hits: int) -> list[Tensor]:
    """Run ``launch(capacity)`` -> (count, arrays...) with FIRST_CAPACITY slots, and once
    more with exactly enough when there were more hits (up to max_hits, else raise)."""
    cap = min(max_hits, FIRST_CAPACITY)
    out = launch(cap)
    n = int(out[0])
    _raise_if_too_many(n, max_hits)
    if n > cap:  # rare
        out = launch(n)
    return [x[:n] for x in out[1:]]


def _lexsort(*keys: Tensor) -> Tensor:
    """The permutation sorting by keys[0], then keys[1], ... (stable sorts, last key first)."""
    order = torch.arange(keys[0].numel(), device=keys[0].device)
    for key in reversed(keys):
        order = order[torch.sort(key[order], stable=True).indices]
    return order


def _raise_if_too_many(n: int, max_hits: int) -> None:
    if n > max_hits:
        raise ValueError(
            f"asm_search: {n} hits exceed max_hits={max_hits}; pass max_hits>={n}, lower k, "
            "or use asm_profile for a fixed-shape result"
        )


@asm_search.register_fake
def _(text_codes, text_offsets, pat_codes, pat_offsets, k, complement, max_hits, n_symbols, code_bound, longest,
      algorithm, check):
    n = torch.library.get_ctx().new_dynamic_size()
    i64 = [text_offsets.new_empty(n) for _ in range(4)]
    return (*i64, text_offsets.new_empty(n, dtype=torch.int32), text_offsets.new_empty(n, dtype=torch.int8))


@torch.library.custom_op("torchalign::asm_best", mutates_args=(), device_types=DEVICES)
@on_tensor_device
def asm_best(text_codes: Tensor, text_offsets: Tensor, pat_codes: Tensor, pat_offsets: Tensor, n_symbols: int,
             code_bound: int, longest: int, algorithm: str, check: bool) -> tuple[Tensor, Tensor]:
    code_bound, longest = _prepare("asm_best", text_codes, text_offsets, pat_codes, pat_offsets, n_symbols,
                                   code_bound, longest, check)
    starts, lens = pat_offsets[:-1], pat_offsets[1:] - pat_offsets[:-1]
    if use_kernels(text_codes) and algorithm == "dp":
        dist, end = kernels("asm_rows").run("best", text_codes, text_offsets, pat_codes, starts, lens, longest,
                                            2 * longest)
    elif use_kernels(text_codes):
        text, codes, n_sym = _kernel_inputs(text_codes, pat_codes, code_bound)
        dist, end = kernels("asm").asm_best(text, text_offsets, codes, starts, lens, max(longest, 1), n_sym)
    else:
        dist, end = cpu.asm_best(text_codes, text_offsets, pat_codes, starts, lens)
    return dist, end - text_offsets[:-1][None, :]


@asm_best.register_fake
def _(text_codes, text_offsets, pat_codes, pat_offsets, n_symbols, code_bound, longest, algorithm, check):
    shape = (pat_offsets.shape[0] - 1, text_offsets.shape[0] - 1)
    return text_offsets.new_empty(shape, dtype=torch.int32), text_offsets.new_empty(shape)


@torch.library.custom_op("torchalign::asm_profile", mutates_args=(), device_types=DEVICES)
@on_tensor_device
def asm_profile(text_codes: Tensor, text_offsets: Tensor, pat_codes: Tensor, pat_offsets: Tensor, n_symbols: int,
                code_bound: int, longest: int, algorithm: str, check: bool) -> Tensor:
    code_bound, longest = _prepare("asm_profile", text_codes, text_offsets, pat_codes, pat_offsets, n_symbols,
                                   code_bound, longest, check)
    starts, lens = pat_offsets[:-1], pat_offsets[1:] - pat_offsets[:-1]
    if use_kernels(text_codes) and algorithm == "dp":
        return kernels("asm_rows").run("profile", text_codes, text_offsets, pat_codes, starts, lens, longest,
                                       2 * longest)
    if use_kernels(text_codes):
        text, codes, n_sym = _kernel_inputs(text_codes, pat_codes, code_bound)
        return kernels("asm").asm_profile(text, text_offsets, codes, starts, lens, max(longest, 1), n_sym)
    return cpu.asm_profile(text_codes, text_offsets, pat_codes, starts, lens)


@asm_profile.register_fake
def _(text_codes, text_offsets, pat_codes, pat_offsets, n_symbols, code_bound, longest, algorithm, check):
    return text_codes.new_empty((pat_offsets.shape[0] - 1, text_codes.shape[0]), dtype=torch.int32)
