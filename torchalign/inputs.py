"""Turning what users pass (strings, lists, tensors, batches, numbers) into SequenceBatches and tensors."""

from __future__ import annotations

import operator

import numpy as np
import torch

from .alphabet import get_alphabet
from .batch import SequenceBatch, encode
from .ops.direct import direct


def batches(names: tuple[str, ...], values: tuple, alphabet, default: str) -> list[SequenceBatch]:
    """Encode several inputs with one alphabet and check they share alphabet, dtype and device.

    ``alphabet`` None: a SequenceBatch among the inputs decides, else ``default``. Plain
    strings go to the device of a SequenceBatch given beside them (queries as strings
    against a database on the GPU).
    """
    explicit = alphabet is not None
    if not explicit:
        given = [v.alphabet for v in values if isinstance(v, SequenceBatch)]
        alphabet = given[0] if given else None
    devices = [v.device for v in values if isinstance(v, SequenceBatch)]
    out = []
    for name, v in zip(names, values):
        try:
            if isinstance(v, SequenceBatch) and not explicit:
                b = v  # its own alphabet; a mismatch is reported below
            elif alphabet is None and isinstance(v, (str, bytes, bytearray, list)) and _all_text(v):
                b = encode(v, default)
            else:
                b = encode(v, alphabet)
            if devices and isinstance(v, (str, bytes, bytearray, list)) and _all_text(v):
                b = b.to(devices[0])
        except (TypeError, ValueError) as e:  # (not type(e): UnicodeError's subclasses take 5 arguments)
            raise (TypeError if isinstance(e, TypeError) else ValueError)(f"{name}: {e}") from None
        out.append(b)
    first = out[0]
    for name, b in zip(names[1:], out[1:]):
        if b.alphabet != first.alphabet:
            raise ValueError(
                f"{name}: alphabet {b.alphabet.name!r} differs from {names[0]}'s {first.alphabet.name!r}; "
                "encode both with one alphabet"
            )
        if b.device != first.device:
            raise ValueError(
                f"{name}: on {b.device} but {names[0]} is on {first.device}; move both with .to(device)"
            )
    return out


def _all_text(v) -> bool:
    if isinstance(v, (str, bytes, bytearray)):
        return True
    return all(isinstance(s, (str, bytes, bytearray)) for s in v)


INT64_MAX = (1 << 63) - 1
KERNEL_INT_MAX = 1 << 30  # scalars the kernels take as int32 stay at or below this (k + 1 cannot wrap)


def check_int(name: str, value, minimum: int, maximum: int | None = None) -> int:
    """An integer argument: anything ``operator.index`` takes (int, NumPy integers, one-element
    integer tensors), not a bool; outside [minimum, maximum] raises ValueError naming it."""
    if isinstance(value, (bool, np.bool_)) or (isinstance(value, torch.Tensor) and value.dtype == torch.bool):
        raise TypeError(f"{name}: expected an integer, got a bool ({value!r})")
    try:
        value = operator.index(value)
    except TypeError:
        raise TypeError(f"{name}: expected an integer, got {type(value).__name__}") from None
    if value < minimum:
        raise ValueError(f"{name}: must be >= {minimum}, got {value}")
    if maximum is not None and value > maximum:
        raise ValueError(f"{name}: must be <= {maximum}, got {value}")
    return value


def at_most_longest(value: int, batch, extra: int = 0) -> int:
    """min(value, longest sequence + extra), for arguments past which every value gives the
    same result (a k >= the longest pattern matches every window): exact, and the kernels
    never see a value past int32. Reads the lengths (one host sync) only when encode left
    no hint and the value is too large to pass as it is."""
    longest = batch.max_length
    if longest is None:
        if value <= KERNEL_INT_MAX:
            return value
        longest = int(batch.lengths.max()) if len(batch) else 0
    return min(value, longest + extra)


def check_choice(name: str, value, choices: tuple) -> str:
    if value not in choices:
        raise ValueError(f"{name}: expected one of {choices}, got {value!r}")
    return value


def nucleotide(name: str, alphabet) -> None:
    if not get_alphabet(alphabet).is_nucleotide:
        raise ValueError(f"{name}: needs a DNA or RNA alphabet, not {get_alphabet(alphabet).name!r}")


def n_symbols(batch) -> int:
    """The alphabet's size: codes are checked against it."""
    return min(batch.alphabet.size, 2**31 - 1)


def code_bound(batch) -> int:
    """A bound on the batch's codes: max_code + 1 when encode recorded it, else the
    alphabet's size. Sizes the one-hot tiles when check=False (check=True reads the data)."""
    return max(1, batch.max_code + 1) if batch.max_code is not None else n_symbols(batch)


def max_length(batch) -> int:
    """The longest sequence when encode recorded it, else -1 (the op reads it)."""
    return -1 if batch.max_length is None else batch.max_length


_CONSTANTS: dict = {}
_CONSTANTS_MAX = 256  # (distinct shapes and values before the cache starts over)


def constant(shape: tuple, value, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """A tensor of ``value``, the same one on every eager call with these arguments: the soft
    ops' lengths, gaps and gamma given as numbers, which nothing writes, so that a call pays
    no allocation and fill (each a dispatcher round trip and a launch: host time on a small
    step, benchmarks/NOTES.md session 39). Made fresh where the ops are not called directly
    (ops.direct: a compiled graph, a tracer, a dispatch mode such as fake tensors, which must
    own their tensors) and during a CUDA graph capture, whose fill would run only at replay.
    Cached ones are made outside inference mode, so that autograd may save them later."""
    device = torch.device(device)
    if not direct(()) or (device.type == "cuda" and torch.cuda.is_current_stream_capturing()):
        return torch.full(shape, value, dtype=dtype, device=device)
    key = (shape, type(value), value, dtype, device)
    t = _CONSTANTS.get(key)
    if t is None:
        if len(_CONSTANTS) >= _CONSTANTS_MAX:
            _CONSTANTS.clear()
        with torch.inference_mode(False):
            t = _CONSTANTS[key] = torch.full(shape, value, dtype=dtype, device=device)
    return t


def full_lengths(B: int, N: int, M: int, device) -> tuple[torch.Tensor, torch.Tensor]:
    """The lengths (int64 [B] each) of a batch of whole N x M pairs (constant: cached)."""
    return constant((B,), N, torch.int64, device), constant((B,), M, torch.int64, device)
