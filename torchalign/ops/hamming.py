"""The Hamming custom ops: schemas, fake impls, and the CPU / CUDA implementations.

Each op takes flat codes + int64 offsets (a SequenceBatch unpacked) and scalars:
``n_symbols`` (the alphabet's size: codes are checked against it) and ``code_bound``
(every code that can match is below it: the one-hot width). With ``check=True`` the op
validates values (offsets, code ranges, equal lengths) with one host read and raises
ValueError; that read also recomputes ``code_bound`` from the data. ``check=False`` reads
nothing for the fixed-shape ops (CUDA graphs, trusted loops) when the caller passes the
hints (``code_bound``, ``max_len`` of the patterns; ta.encode records them);
kmismatch_search still reads its hit count, since its output size depends on it.
"""

from __future__ import annotations

from typing import Optional

import torch
from torch import Tensor

from ..cpu import hamming as cpu
from . import checks
from .backend import kernels, use_kernels, on_tensor_device

DEVICES = ("cpu", "cuda")


# ---------------------------------------------------------------- pairwise -----------
@torch.library.custom_op("torchalign::hamming", mutates_args=(), device_types=DEVICES)
@on_tensor_device
def hamming(a_codes: Tensor, a_offsets: Tensor, b_codes: Tensor, b_offsets: Tensor,
            n_symbols: int, check: bool) -> Tensor:
    if check:
        la = a_offsets[1:] - a_offsets[:-1]
        lb = b_offsets[1:] - b_offsets[:-1]
        unequal = la != lb
        first_bad = torch.argmax(unequal.to(torch.int8)) if la.numel() else torch.zeros((), dtype=torch.int64)
        vals = checks.read(
            checks.offsets_facts(a_codes, a_offsets) + checks.offsets_facts(b_codes, b_offsets)
            + checks.code_range(a_codes) + checks.code_range(b_codes)
            + [unequal.any() if la.numel() else torch.zeros((), dtype=torch.bool), first_bad]
        )
        checks.raise_if_bad("a", vals[0:3], *vals[6:8], n_symbols)
        checks.raise_if_bad("b", vals[3:6], *vals[8:10], n_symbols)
        if vals[10]:
            i = vals[11]
            raise ValueError(
                f"hamming: pair {i} has lengths {int(la[i])} and {int(lb[i])}; Hamming distance "
                "needs equal lengths (use ta.levenshtein for unequal ones)"
            )
    if use_kernels(a_codes):
        return kernels("hamming").hamming_pairs(a_codes, a_offsets, b_codes, b_offsets)
    return cpu.hamming_pairs(a_codes, a_offsets, b_codes, b_offsets)


@hamming.register_fake
def _(a_codes, a_offsets, b_codes, b_offsets, n_symbols, check):
    return a_offsets.new_empty(a_offsets.shape[0] - 1, dtype=torch.int32)


# ---------------------------------------------------------------- all-vs-all ---------
@torch.library.custom_op("torchalign::hamming_cdist", mutates_args=(), device_types=DEVICES)
@on_tensor_device
def hamming_cdist(a_codes: Tensor, a_offsets: Tensor, b_codes: Tensor, b_offsets: Tensor,
                  n_symbols: int, code_bound: int, check: bool) -> Tensor:
    na, nb = a_offsets.numel() - 1, b_offsets.numel() - 1
    la = a_codes.numel() // na if na else 0
    lb = b_codes.numel() // nb if nb else 0
    if check:
        vals = checks.read(
            checks.offsets_facts(a_codes, a_offsets) + checks.offsets_facts(b_codes, b_offsets)
            + checks.code_range(a_codes) + checks.code_range(b_codes)
            + [_uniform(a_offsets, la), _uniform(b_offsets, lb)]
        )
        checks.raise_if_bad("a", vals[0:3], *vals[6:8], n_symbols)
        checks.raise_if_bad("b", vals[3:6], *vals[8:10], n_symbols)
        for name, ok in (("a", vals[10]), ("b", vals[11])):
            if not ok:
                raise ValueError(f"hamming_cdist: the sequences of {name} differ in length; all must be equal")
        code_bound = max(1, min(vals[7], vals[9]) + 1)  # only codes present in both can match
    if na and nb and la != lb:
        raise ValueError(f"hamming_cdist: a has sequences of length {la}, b of length {lb}; they must be equal")
    a = a_codes.reshape(na, la) if na else a_codes.new_empty((0, lb))
    b = b_codes.reshape(nb, lb) if nb else b_codes.new_empty((0, la))
    if use_kernels(a_codes):
        return kernels("hamming").hamming_cdist(a, b, code_bound)
    return cpu.hamming_cdist(a, b, code_bound)


def _uniform(offsets: Tensor, length: int) -> Tensor:
    return (offsets == torch.arange(offsets.numel(), device=offsets.device) * length).all()


@hamming_cdist.register_fake
def _(a_codes, a_offsets, b_codes, b_offsets, n_symbols, code_bound, check):
    return a_codes.new_empty((a_offsets.shape[0] - 1, b_offsets.shape[0] - 1), dtype=torch.int32)


# ---------------------------------------------------------------- windows ------------
def pattern_strands(pat_codes: Tensor, pat_offsets: Tensor, complement: Optional[Tensor]):
    """(codes, starts, lengths) of the patterns, then their reverse complements if asked."""
    starts = pat_offsets[:-1]
    lens = pat_offsets[1:] - starts
    if complement is None:
        return pat_codes, starts, lens
    n = pat_codes.numel()
    seq = torch.repeat_interleave(torch.arange(lens.numel(), device=lens.device), lens, output_size=n)
    j = torch.arange(n, device=lens.device) - starts[seq]
    rc = complement[pat_codes[starts[seq] + lens[seq] - 1 - j].to(torch.int64)]
    return torch.cat([pat_codes, rc]), torch.cat([starts, starts + n]), torch.cat([lens, lens])


def _reach(table: Optional[Tensor], complement: Optional[Tensor]) -> Tensor:
    """int64[C]: the largest text code each pattern code can match, on either strand
    searched (IUPAC sets through ``table``; the reverse strand through ``complement``)."""
    if table is not None:
        cols = torch.arange(table.shape[1], device=table.device)
        top = torch.where(table.bool(), cols, -1).amax(1)
    else:
        top = torch.arange(complement.numel(), device=complement.device)
    if complement is not None:
        top = torch.maximum(top, top[complement.to(torch.int64)])
    return top


def _window_checks(name: str, text_codes, text_offsets, pat_codes, pat_offsets, table, complement, n_symbols):
    """Validate both batches; return the one-hot bound (every text code a searched pattern
    can match is below it) and the longest pattern."""
    lens = pat_offsets[1:] - pat_offsets[:-1]
    if table is None and complement is None:
        bound = checks.code_range(pat_codes)[1] + 1
    else:  # out-of-range codes are clamped here and reported below
        top = _reach(table, complement)
        idx = pat_codes.to(torch.int64).clamp(0, top.numel() - 1)
        bound = (top[idx].max() if pat_codes.numel() else top.new_tensor(-1)) + 1
    vals = checks.read(
        checks.offsets_facts(text_codes, text_offsets) + checks.offsets_facts(pat_codes, pat_offsets)
        + checks.code_range(text_codes) + checks.code_range(pat_codes)
        + [lens.min() if lens.numel() else lens.new_tensor(1), lens.argmin() if lens.numel() else lens.new_tensor(0),
           lens.max() if lens.numel() else lens.new_tensor(0), bound]
    )
    checks.raise_if_bad("texts", vals[0:3], *vals[6:8], n_symbols)
    checks.raise_if_bad("patterns", vals[3:6], *vals[8:10], n_symbols)
    if vals[10] < 1:
        raise ValueError(f"{name}: pattern {vals[11]} is empty; patterns need length >= 1")
    return max(1, vals[13]), vals[12]


@torch.library.custom_op("torchalign::hamming_profile", mutates_args=(), device_types=DEVICES)
@on_tensor_device
def hamming_profile(text_codes: Tensor, text_offsets: Tensor, pat_codes: Tensor, pat_offsets: Tensor,
                    table: Optional[Tensor], n_symbols: int, code_bound: int, max_len: int, check: bool) -> Tensor:
    if check:
        code_bound, max_len = _window_checks("hamming_profile", text_codes, text_offsets, pat_codes,
                                            pat_offsets, table, None, n_symbols)
    codes, starts, lens = pattern_strands(pat_codes, pat_offsets, None)
    if not check and max_len < 0:  # no hint: one host read
        max_len = int(lens.max()) if lens.numel() else 0
    if use_kernels(text_codes):
        return kernels("hamming").hamming_windows(text_codes, text_offsets, codes, starts, lens, max_len,
                                         code_bound, table, search=False)
    return cpu.hamming_windows(text_codes, text_offsets, codes, starts, lens, code_bound, table, search=False)


@hamming_profile.register_fake
def _(text_codes, text_offsets, pat_codes, pat_offsets, table, n_symbols, code_bound, max_len, check):
    return text_codes.new_empty((pat_offsets.shape[0] - 1, text_codes.shape[0]), dtype=torch.int32)


FIRST_CAPACITY = 1 << 16  # hit slots of the first launch; a second launch sizes exactly


@torch.library.custom_op("torchalign::kmismatch_search", mutates_args=(), device_types=DEVICES)
@on_tensor_device
def kmismatch_search(text_codes: Tensor, text_offsets: Tensor, pat_codes: Tensor, pat_offsets: Tensor,
                     k: int, table: Optional[Tensor], complement: Optional[Tensor], max_hits: int,
                     n_symbols: int, code_bound: int, max_len: int, check: bool
                     ) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor]:
    if check:
        code_bound, max_len = _window_checks("kmismatch_search", text_codes, text_offsets, pat_codes,
                                            pat_offsets, table, complement, n_symbols)
    codes, starts, lens = pattern_strands(pat_codes, pat_offsets, complement)
    n_pat = pat_offsets.numel() - 1
    if not check and max_len < 0:  # no hint: one host read
        max_len = int(lens.max()) if lens.numel() else 0
    if use_kernels(text_codes):
        K = kernels("hamming")
        cap = min(max_hits, FIRST_CAPACITY)
        args = (text_codes, text_offsets, codes, starts, lens, max_len, code_bound, table, k)
        counter, pos, pat, dist = K.hamming_windows(*args, search=True, capacity=cap)
        n = int(counter)
        _raise_if_too_many(n, max_hits)
        if n > cap:  # rare: run again with room for every hit
            counter, pos, pat, dist = K.hamming_windows(*args, search=True, capacity=n)
        pos, pat, dist = pos[:n], pat[:n], dist[:n]
    else:
        n, pos, pat, dist = cpu.hamming_windows(text_codes, text_offsets, codes, starts, lens, code_bound,
                                                table, k, search=True, capacity=max_hits)
        _raise_if_too_many(n, max_hits)
    return _sorted_hits(pos, pat.to(torch.int64), dist, n_pat, text_offsets, text_codes.numel())


def _raise_if_too_many(n: int, max_hits: int) -> None:
    if n > max_hits:
        raise ValueError(
            f"kmismatch_search: {n} hits exceed max_hits={max_hits}; pass max_hits>={n}, "
            "lower k, or use hamming_profile for a fixed-shape result"
        )


def _sorted_hits(pos: Tensor, pat: Tensor, dist: Tensor, n_pat: int, text_offsets: Tensor, total: int):
    """Hits sorted by (pattern, text, position, strand); patterns >= n_pat are reverse strand."""
    strand = (pat >= n_pat).to(torch.int64)
    pattern = pat - strand * n_pat
    key = pattern * (2 * max(1, total)) + pos * 2 + strand
    order = torch.argsort(key)
    pos, pattern, strand, dist = pos[order], pattern[order], strand[order], dist[order]
    text = torch.searchsorted(text_offsets, pos, right=True) - 1
    return pattern, text, pos - text_offsets[text], dist, strand.to(torch.int8)


@kmismatch_search.register_fake
def _(text_codes, text_offsets, pat_codes, pat_offsets, k, table, complement, max_hits, n_symbols, code_bound,
      max_len, check):
    n = torch.library.get_ctx().new_dynamic_size()
    i64 = text_offsets.new_empty(n)
    return i64, text_offsets.new_empty(n), text_offsets.new_empty(n), \
        text_offsets.new_empty(n, dtype=torch.int32), text_offsets.new_empty(n, dtype=torch.int8)
