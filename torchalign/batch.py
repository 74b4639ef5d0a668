"""SequenceBatch: many sequences as flat codes plus offsets (torch's jagged layout)."""

from __future__ import annotations

import weakref
from typing import NamedTuple

import numpy as np
import torch

from .alphabet import Alphabet, get_alphabet, get_alphabet_or_none


class PackedBatch(NamedTuple):
    """A batch sorted by length (longest first) and cut into chunks of ``lanes`` sequences.

    Residue j of lane i of chunk c is at ``codes[chunk_offsets[c] + j * lanes + i]``;
    slots past a sequence's end hold ``pad``, a filler only: the bytes alphabet uses all
    256 uint8 values, so no value marks a slot as empty, and a kernel tells those slots by
    ``lengths`` (a mask). ``order[r]`` is the original index of the sequence in sorted rank r
    (lane ``r % lanes`` of chunk ``r // lanes``).
    """

    codes: torch.Tensor
    chunk_offsets: torch.Tensor  # int64[n_chunks + 1]
    chunk_lengths: torch.Tensor  # int64[n_chunks]: the longest sequence of each chunk
    lengths: torch.Tensor  # int64[B], in sorted order
    order: torch.Tensor  # int64[B]: sorted rank -> original index
    lanes: int
    pad: int


class SequenceBatch:
    """B sequences stored back to back: ``codes`` (uint8, or int32 token ids) and
    ``offsets`` (int64[B + 1]); sequence i is ``codes[offsets[i]:offsets[i + 1]]``.

    >>> import torchalign as ta
    >>> b = ta.encode(["ACGT", "GA"], alphabet="dna")
    >>> b.lengths.tolist(), b.decode()
    ([4, 2], ['ACGT', 'GA'])
    """

    def __init__(self, codes: torch.Tensor, offsets: torch.Tensor, alphabet: str | Alphabet,
                 max_code: int | None = None, max_length: int | None = None):
        self.alphabet = get_alphabet(alphabet)
        if codes.dim() != 1 or offsets.dim() != 1 or offsets.numel() < 1:
            raise ValueError("SequenceBatch: codes must be 1-D and offsets 1-D with B + 1 entries")
        if offsets.dtype != torch.int64:
            raise TypeError(f"SequenceBatch: offsets must be int64, got {offsets.dtype}")
        if codes.dtype != self.alphabet.dtype:
            raise TypeError(
                f"SequenceBatch: {self.alphabet.name} codes must be {self.alphabet.dtype}, got {codes.dtype}"
            )
        if codes.device != offsets.device:
            raise ValueError(f"SequenceBatch: codes on {codes.device} but offsets on {offsets.device}")
        self.codes = codes
        self.offsets = offsets
        # The largest code (-1: none) and the longest sequence, when known at encode time.
        # Ops called with check=False size their tiles from them without reading the device.
        self.max_code = max_code
        self.max_length = max_length

    # ---- shape -------------------------------------------------------------
    def __len__(self) -> int:
        return self.offsets.numel() - 1

    @property
    def lengths(self) -> torch.Tensor:
        return self.offsets[1:] - self.offsets[:-1]

    @property
    def device(self) -> torch.device:
        return self.codes.device

    def __getitem__(self, i: int) -> torch.Tensor:
        return self.codes[self.offsets[i] : self.offsets[i + 1]]

    def __repr__(self) -> str:
        return f"SequenceBatch(n={len(self)}, residues={self.codes.numel()}, alphabet={self.alphabet.name!r}, device={self.device})"

    # ---- on disk -----------------------------------------------------------
    def save(self, path) -> None:
        """Write the batch to ``path``: plain tensors and the alphabet's name, so that
        ``SequenceBatch.load`` reads it with ``torch.load(weights_only=True)``. A database
        encoded once loads in one read instead of being parsed again.

        >>> import tempfile, torchalign as ta
        >>> db = ta.encode(["MKVLAAGIW", "PAWHEAE"], "protein")
        >>> path = tempfile.mktemp(suffix=".pt"); db.save(path)
        >>> ta.SequenceBatch.load(path).decode()
        ['MKVLAAGIW', 'PAWHEAE']
        """
        if get_alphabet_or_none(self.alphabet.name) is not self.alphabet:
            raise ValueError(f"save: the alphabet {self.alphabet.name!r} is not a built-in one; save codes and "
                             "offsets yourself")
        packs = {lanes: {k: v.cpu() if isinstance(v, torch.Tensor) else v for k, v in p._asdict().items()}
                 for lanes, p in _packs_of(self.codes, self.offsets).items()}
        torch.save({"codes": self.codes.cpu(), "offsets": self.offsets.cpu(), "alphabet": self.alphabet.name,
                    "max_code": self.max_code, "max_length": self.max_length, "packed": packs}, path)

    @classmethod
    def load(cls, path, device=None) -> "SequenceBatch":
        """A batch written by ``save``, on ``device`` (default: the CPU)."""
        d = torch.load(path, map_location="cpu", weights_only=True)
        batch = cls(d["codes"], d["offsets"], d["alphabet"], d["max_code"], d["max_length"])
        batch = batch if device is None else batch.to(device)
        packs = _packs_of(batch.codes, batch.offsets)
        for lanes, p in d.get("packed", {}).items():
            packs[lanes] = PackedBatch(**{k: v.to(batch.device) if isinstance(v, torch.Tensor) else v
                                          for k, v in p.items()})
        return batch

    # ---- movement ----------------------------------------------------------
    def to(self, device, non_blocking: bool = False) -> "SequenceBatch":
        return SequenceBatch(
            self.codes.to(device, non_blocking=non_blocking),
            self.offsets.to(device, non_blocking=non_blocking),
            self.alphabet,
            self.max_code,
            self.max_length,
        )

    def cuda(self, non_blocking: bool = False) -> "SequenceBatch":
        return self.to("cuda", non_blocking)

    def pin_memory(self) -> "SequenceBatch":
        """Page-locked host copy, so ``.to('cuda', non_blocking=True)`` overlaps compute."""
        return SequenceBatch(self.codes.pin_memory(), self.offsets.pin_memory(), self.alphabet, self.max_code,
                             self.max_length)

    # ---- construction ------------------------------------------------------
    @classmethod
    def from_strings(cls, seqs, alphabet="bytes") -> "SequenceBatch":
        """From a list of str/bytes: one table lookup over all of them joined."""
        alpha = get_alphabet(alphabet)
        if alpha.name == "tokens":
            raise TypeError("alphabet 'tokens' takes int32 ids (tensors or arrays), not strings; "
                            "alphabet 'unicode' encodes characters")
        parts = [alpha.encode_str(s, what=f"sequence {i}") for i, s in enumerate(seqs)]
        lengths = torch.tensor([p.numel() for p in parts], dtype=torch.int64)
        codes = torch.cat(parts) if parts else torch.empty(0, dtype=alpha.dtype)
        return cls(codes, _offsets(lengths), alpha, int(codes.max()) if codes.numel() else -1, _longest(lengths))

    @classmethod
    def from_codes(cls, seqs, alphabet) -> "SequenceBatch":
        """From a list of 1-D code arrays or tensors (codes, not characters)."""
        alpha = get_alphabet(alphabet)
        parts = [_as_codes(torch.as_tensor(s), alpha, f"sequence {i}") for i, s in enumerate(seqs)]
        lengths = torch.tensor([p.numel() for p, _ in parts], dtype=torch.int64)
        if not parts:
            return cls(torch.empty(0, dtype=alpha.dtype), _offsets(lengths), alpha, -1, 0)
        device = parts[0][0].device
        codes = torch.cat([p.to(device) for p, _ in parts])
        return cls(codes, _offsets(lengths).to(device), alpha, max(hi for _, hi in parts), _longest(lengths))

    @classmethod
    def from_padded(cls, codes: torch.Tensor, lengths: torch.Tensor, alphabet) -> "SequenceBatch":
        """From padded codes [B, L] and lengths [B]; padding past each length is ignored."""
        alpha = get_alphabet(alphabet)
        codes = torch.as_tensor(codes)
        lengths = torch.as_tensor(lengths, device=codes.device)
        if codes.dim() != 2:
            raise ValueError(f"from_padded: codes must be [B, L], got shape {tuple(codes.shape)}")
        if lengths.shape != codes.shape[:1]:
            raise ValueError(f"from_padded: lengths must be [{codes.shape[0]}], got {tuple(lengths.shape)}")
        lengths = lengths.to(torch.int64)
        if lengths.numel() and (int(lengths.min()) < 0 or int(lengths.max()) > codes.shape[1]):
            raise ValueError(f"from_padded: lengths must lie in [0, {codes.shape[1]}]")
        keep = torch.arange(codes.shape[1], device=codes.device)[None, :] < lengths[:, None]
        flat, hi = _as_codes(codes[keep], alpha, "from_padded codes")
        return cls(flat, _offsets(lengths), alpha, hi, _longest(lengths))

    @classmethod
    def from_nested(cls, nt: torch.Tensor, alphabet) -> "SequenceBatch":
        """From a jagged nested tensor (torch.nested.nested_tensor(..., layout=torch.jagged))."""
        alpha = get_alphabet(alphabet)
        if not getattr(nt, "is_nested", False):
            raise TypeError("from_nested: expected a nested tensor")
        if nt.layout == torch.jagged:
            values, offsets = nt.values(), nt.offsets().to(torch.int64)
        else:
            parts = nt.unbind()
            values = torch.cat(parts) if parts else torch.empty(0)
            offsets = _offsets(torch.tensor([p.numel() for p in parts], dtype=torch.int64)).to(values.device)
        codes, hi = _as_codes(values, alpha, "nested codes")
        return cls(codes, offsets, alpha, hi, _longest(offsets[1:] - offsets[:-1]))

    # ---- conversion --------------------------------------------------------
    def to_padded(self, pad: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
        """(codes [B, max_len] filled with ``pad``, lengths int64[B])."""
        lengths = self.lengths
        width = int(lengths.max()) if len(self) else 0
        out = torch.full((len(self), width), pad, dtype=self.codes.dtype, device=self.device)
        keep = torch.arange(width, device=self.device)[None, :] < lengths[:, None]
        out[keep] = self.codes
        return out, lengths

    def to_nested(self) -> torch.Tensor:
        return torch.nested.nested_tensor_from_jagged(self.codes, self.offsets)

    def decode(self) -> list[str]:
        codes, offs = self.codes.cpu(), self.offsets.cpu().tolist()
        return [self.alphabet.decode(codes[offs[i] : offs[i + 1]]) for i in range(len(self))]

    # ---- device layout -----------------------------------------------------
    def pack(self, lanes: int = 32) -> PackedBatch:
        """Length-sorted, interleaved chunks of ``lanes`` sequences, made once per lanes
        while the batch's tensors live unchanged (see ``packed``).

        Done on the batch's device with one host read (the packed size). Memory beside
        the packed copy: ~40 B per sequence and ~20 B per residue of one step of
        PACK_STEP (4 M) residues.
        """
        return packed(self.codes, self.offsets, lanes)


def _longest(lengths: torch.Tensor) -> int:
    return int(lengths.max()) if lengths.numel() else 0


def _offsets(lengths: torch.Tensor) -> torch.Tensor:
    out = torch.zeros(lengths.numel() + 1, dtype=torch.int64, device=lengths.device)
    torch.cumsum(lengths, 0, out=out[1:])
    return out


def _as_codes(t: torch.Tensor, alpha: Alphabet, what: str) -> tuple[torch.Tensor, int]:
    """Hand-given codes: integer dtype, inside the alphabet's range, in its dtype; with the
    largest code (-1 if none)."""
    if t.dtype.is_floating_point or t.dtype == torch.bool or t.dtype.is_complex:
        raise TypeError(f"{what}: codes must be an integer tensor, got {t.dtype}")
    hi = -1
    if t.numel():
        lo, hi = int(t.min()), int(t.max())
        if lo < 0 or hi >= alpha.size:
            raise ValueError(
                f"{what}: codes must lie in [0, {alpha.size}) for alphabet {alpha.name!r}, found {lo}..{hi}"
            )
    return t.to(alpha.dtype).reshape(-1), hi


# id(codes) -> (weak reference to codes, to offsets, their version counters, {lanes: PackedBatch})
_PACKS: dict[int, tuple] = {}


def _packs_of(codes: torch.Tensor, offsets: torch.Tensor) -> dict:
    """The packed forms kept for these two tensors ({} new when they changed in place, when
    offsets is another tensor, or when they keep no version counter: inference tensors)."""
    try:
        stamp = (codes._version, offsets._version)
    except RuntimeError:
        return {}
    key = id(codes)
    entry = _PACKS.get(key)
    if entry is None or entry[0]() is not codes or entry[1]() is not offsets or entry[2] != stamp:
        # dropped with codes (the callback of a replaced entry's reference only ever finds a newer one)
        entry = _PACKS[key] = (weakref.ref(codes, lambda _, key=key: _PACKS.pop(key, None)), weakref.ref(offsets),
                               stamp, {})
    return entry[3]


def packed(codes: torch.Tensor, offsets: torch.Tensor, lanes: int) -> PackedBatch:
    """``_pack(codes, offsets, lanes)``, made once and kept as long as ``codes`` lives and
    neither tensor is changed in place (tensor identity and version counter), so a database
    searched again, or by query after query, is packed once. The packed copy (the codes
    and their chunk padding) lives as long as the codes do."""
    packs = _packs_of(codes, offsets)
    if lanes not in packs:
        packs[lanes] = _pack(codes, offsets, lanes)
    return packs[lanes]


PACK_STEP = 1 << 22  # residues placed per step of _pack (~20 B of int64 / int32 temporaries each)


def _pack(codes: torch.Tensor, offsets: torch.Tensor, lanes: int) -> PackedBatch:
    """Working memory beside the packed copy: ~40 B per sequence, ~20 B per residue of
    one step of PACK_STEP residues (each residue finds its sequence by a binary search
    in ``offsets``, so nothing per residue is kept for the whole batch)."""
    dev = codes.device
    lengths = offsets[1:] - offsets[:-1]
    n = lengths.numel()
    pad = 255 if codes.dtype == torch.uint8 else -1  # a filler: readers mask by length (255 is a real byte)
    sorted_lengths, order = torch.sort(lengths, descending=True, stable=True)
    n_chunks = (n + lanes - 1) // lanes
    chunk_lengths = (sorted_lengths[::lanes] if n else sorted_lengths[:0]).contiguous()  # (kernels index it)
    chunk_offsets = _offsets(chunk_lengths * lanes)
    total = int(chunk_offsets[-1]) if n_chunks else 0  # the one host read
    packed = torch.full((total,), pad, dtype=codes.dtype, device=dev)
    if codes.numel():
        rank = torch.empty_like(order)
        rank[order] = torch.arange(n, device=dev)
        # residue p of sequence s goes to first[s] + p * lanes (p counted in the flat codes)
        first = chunk_offsets[rank // lanes] + rank % lanes - offsets[:-1] * lanes
        del rank
        for p0 in range(0, codes.numel(), PACK_STEP):
            p = torch.arange(p0, min(codes.numel(), p0 + PACK_STEP), device=dev)
            seq = torch.searchsorted(offsets, p, right=True, out_int32=n < 1 << 31).sub_(1)  # the sequence holding p
            at = first[seq].add_(p, alpha=lanes)
            del p, seq
            packed[at] = codes[p0 : p0 + at.numel()]
    return PackedBatch(packed, chunk_offsets, chunk_lengths, sorted_lengths, order, lanes, pad)


def encode(seqs, alphabet: str | Alphabet | None = None, device=None) -> SequenceBatch:
    """Encode sequences into a SequenceBatch.

    ``seqs`` may be a str or bytes (one sequence), a list of them, a list of 1-D code
    arrays/tensors, a 2-D code tensor/array (equal lengths), ``(padded codes, lengths)``,
    a nested tensor, or a SequenceBatch. Strings default to the bytes alphabet, code
    tensors to "tokens" if int32 else "bytes".

    >>> import torchalign as ta
    >>> ta.encode("ACGTN", alphabet="dna").codes.tolist()
    [0, 1, 2, 3, 4]
    """
    batch = _encode(seqs, alphabet)
    return batch if device is None else batch.to(device)


def _default_for_codes(t) -> str:
    return "tokens" if getattr(t, "dtype", None) in (torch.int32, np.int32) else "bytes"


def _encode(seqs, alphabet) -> SequenceBatch:
    if isinstance(seqs, SequenceBatch):
        if alphabet is not None and get_alphabet(alphabet) != seqs.alphabet:
            raise ValueError(
                f"alphabet: the batch is encoded as {seqs.alphabet.name!r}, not {get_alphabet(alphabet).name!r}"
            )
        return seqs
    if isinstance(seqs, (str, bytes, bytearray)):
        return SequenceBatch.from_strings([seqs], alphabet or "bytes")
    if isinstance(seqs, torch.Tensor) and seqs.is_nested:
        return SequenceBatch.from_nested(seqs, alphabet or _default_for_codes(seqs))
    if isinstance(seqs, (torch.Tensor, np.ndarray)):
        t = torch.as_tensor(seqs)
        alpha = alphabet or _default_for_codes(t)
        if t.dim() == 1:
            return SequenceBatch.from_codes([t], alpha)
        if t.dim() == 2:
            lengths = torch.full((t.shape[0],), t.shape[1], dtype=torch.int64, device=t.device)
            return SequenceBatch.from_padded(t, lengths, alpha)
        raise ValueError(f"seqs: a code tensor must be 1-D or 2-D, got shape {tuple(t.shape)}")
    if (
        isinstance(seqs, tuple)
        and len(seqs) == 2
        and isinstance(seqs[0], (torch.Tensor, np.ndarray))
        and torch.as_tensor(seqs[0]).dim() == 2
    ):
        codes = torch.as_tensor(seqs[0])
        return SequenceBatch.from_padded(codes, torch.as_tensor(seqs[1]), alphabet or _default_for_codes(codes))
    if isinstance(seqs, (list, tuple)):
        if all(isinstance(s, (str, bytes, bytearray)) for s in seqs):
            return SequenceBatch.from_strings(seqs, alphabet or "bytes")
        if all(isinstance(s, (torch.Tensor, np.ndarray)) for s in seqs):
            return SequenceBatch.from_codes(seqs, alphabet or _default_for_codes(seqs[0]))
    raise TypeError(
        "seqs: expected str, bytes, a list of them, code arrays/tensors, (padded codes, lengths), "
        f"a nested tensor or a SequenceBatch; got {type(seqs).__name__}"
    )
