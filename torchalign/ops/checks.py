"""Value checks that run inside ops (so a compiled graph still raises).

Each op gathers what it needs into one small tensor and reads it back once: at most
one host sync per call. ``check=False`` skips all of this.
"""

from __future__ import annotations

import torch


def offsets_facts(codes: torch.Tensor, offsets: torch.Tensor) -> list[torch.Tensor]:
    """[offsets[0] == 0, offsets non-decreasing, offsets[-1] == numel] as 0-d int64 tensors."""
    n = codes.numel()
    first_ok = offsets[0] == 0
    mono_ok = (offsets[1:] >= offsets[:-1]).all()
    last_ok = offsets[-1] == n
    return [first_ok.to(torch.int64), mono_ok.to(torch.int64), last_ok.to(torch.int64)]


def code_range(codes: torch.Tensor) -> list[torch.Tensor]:
    """[min code, max code] (0, -1 for no codes)."""
    if codes.numel() == 0:
        z = torch.zeros((), dtype=torch.int64, device=codes.device)
        return [z, z - 1]
    lo, hi = torch.aminmax(codes)
    return [lo.to(torch.int64), hi.to(torch.int64)]


def two_batches(a_codes, a_offsets, b_codes, b_offsets) -> list[torch.Tensor]:
    """What two-batch ops check, for one read: [0:3] a's offsets facts, [3:6] b's, [6:8]
    a's code range, [8:10] b's, [10] a's longest sequence, [11] b's."""
    a_lens, b_lens = a_offsets[1:] - a_offsets[:-1], b_offsets[1:] - b_offsets[:-1]
    zero = a_lens.new_tensor(0)
    return (offsets_facts(a_codes, a_offsets) + offsets_facts(b_codes, b_offsets) + code_range(a_codes)
            + code_range(b_codes) + [a_lens.max() if a_lens.numel() else zero, b_lens.max() if b_lens.numel() else zero])


def read(values: list[torch.Tensor]) -> list[int]:
    """The one host read."""
    return torch.stack([v.reshape(()).to(torch.int64) for v in values]).tolist()


def raise_if_bad(name: str, facts: list[int], lo: int, hi: int, n_symbols: int) -> None:
    """Raise for bad offsets or out-of-range codes of the batch called ``name``."""
    first_ok, mono_ok, last_ok = facts
    if not (first_ok and mono_ok and last_ok):
        raise ValueError(
            f"{name}: offsets must start at 0, never decrease and end at codes.numel(); "
            "build batches with ta.encode or SequenceBatch"
        )
    if lo < 0 or hi >= n_symbols:
        raise ValueError(
            f"{name}: codes must lie in [0, {n_symbols}) for this alphabet, found {lo}..{hi}; "
            "encode with the right alphabet"
        )
