"""Strings to batches on a device for the error-rate metrics: characters, and words as token ids.

Characters: all strings of an update joined and encoded at once (ASCII as bytes, anything
else as UTF-32 code points, lone surrogates included, as ``str`` holds them), one copy to
the device. Words: split on the device exactly as ``str.split()`` splits (at runs of the
characters ``str.isspace()`` names) and numbered per batch: equal words get equal ids.
Ids come from a hash of each word's characters; words that share a hash are then compared
character by character, and should two different words share one (possible, never seen),
the batch is numbered on the host instead. No result depends on the hash.
"""

from __future__ import annotations

import numpy as np
import torch

from ..alphabet import BYTES, TOKENS, UNICODE
from ..batch import SequenceBatch

SPACE_LAST = 0x3000  # no code point above U+3000 is whitespace (tests check all of them)
_SPACE = np.array([chr(c).isspace() for c in range(SPACE_LAST + 1)] + [False])  # + "above U+3000"
_SPACE_ON: dict = {}

# splitmix64's constants as signed int64 (torch multiplies int64 with wrap-around)
_M1, _M2, _GOLDEN = (c - (1 << 64) if c >= 1 << 63 else c
                     for c in (0xBF58476D1CE4E5B9, 0x94D049BB133111EB, 0x9E3779B97F4A7C15))


def strings(name: str, value) -> list[str]:
    """A str (one text) or a list/tuple of str, as a list (the items are checked when
    they are joined: ``check_items``)."""
    if isinstance(value, str):
        return [value]
    if not isinstance(value, (list, tuple)):
        raise TypeError(f"{name}: expected a str or a list of str, got {type(value).__name__}")
    return list(value)


def check_items(name: str, texts: list) -> None:
    """TypeError naming the first item of ``texts`` that is not a str."""
    for i, s in enumerate(texts):
        if not isinstance(s, str):
            raise TypeError(f"{name}: expected a str or a list of str; item {i} is a {type(s).__name__} "
                            "(decode bytes, join tokens into one string)")


def pairs(preds, target) -> tuple[list[str], list[str]]:
    """preds and target as lists of equally many strings."""
    preds, target = strings("preds", preds), strings("target", target)
    if len(preds) != len(target):
        raise ValueError(f"preds has {len(preds)} strings and target {len(target)}; pass one prediction per "
                         "reference")
    return preds, target


def encode_pairs(preds: list[str], target: list[str], unit: str, device) -> tuple[SequenceBatch, SequenceBatch]:
    """(preds, target) as two batches on ``device`` (None: the CPU): characters (bytes for
    an all-ASCII update, else unicode code points) or, for unit "words", word ids (tokens)."""
    device = torch.device("cpu") if device is None else torch.device(device)
    codes, offsets = _characters(preds + target, len(preds), device)
    if unit == "words":
        return _words(codes, offsets, len(preds), preds + target)
    cut = int(offsets[len(preds)])
    alphabet = BYTES if codes.dtype == torch.uint8 else UNICODE
    dev_offsets = torch.from_numpy(offsets).to(device)
    return (SequenceBatch(codes[:cut], dev_offsets[: len(preds) + 1], alphabet),
            SequenceBatch(codes[cut:], dev_offsets[len(preds):] - cut, alphabet))


def _characters(texts: list[str], n_first: int, device) -> tuple[torch.Tensor, np.ndarray]:
    """All texts' characters back to back on ``device`` (uint8 if all are ASCII, else
    int32 code points) and their offsets (int64[len(texts) + 1], on the host). ``texts``
    are preds (the first ``n_first``), then target: an item that is not a str is named."""
    try:
        joined = "".join(texts)  # (checks the items' type in C)
    except TypeError:
        check_items("preds", texts[:n_first])
        check_items("target", texts[n_first:])
        raise
    offsets = np.zeros(len(texts) + 1, dtype=np.int64)
    np.cumsum(np.fromiter(map(len, texts), np.int64, len(texts)), out=offsets[1:])
    if joined.isascii():
        codes = np.frombuffer(bytearray(joined, "ascii"), dtype=np.uint8)
    else:
        codes = np.frombuffer(joined.encode("utf-32-le", "surrogatepass"), dtype="<i4").astype(np.int32)
    return torch.from_numpy(codes).to(device), offsets


def _space_table(device) -> torch.Tensor:
    """bool[SPACE_LAST + 2] on ``device``: code point -> whitespace (the last entry stands
    for every code point above SPACE_LAST)."""
    if device not in _SPACE_ON:
        _SPACE_ON[device] = torch.from_numpy(_SPACE).to(device)
    return _SPACE_ON[device]


def _mix(x: torch.Tensor) -> torch.Tensor:
    """splitmix64's finaliser (int64, wrapping; arithmetic shifts: still a fine hash)."""
    x = (x ^ (x >> 30)) * _M1
    x = (x ^ (x >> 27)) * _M2
    return x ^ (x >> 31)


def word_hash(codes: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    """A hash of each character from its code and its position k within its word; a word's
    hash is the (wrapping) sum over its characters. Tests replace it to force collisions."""
    return _mix(codes * _GOLDEN + k)


def _words(codes: torch.Tensor, offsets: np.ndarray, n_first: int, texts: list[str]):
    """The texts' words as token ids: (batch of texts[:n_first], batch of the rest)."""
    dev = codes.device
    n = codes.numel()
    dev_offsets = torch.from_numpy(offsets).to(dev)
    c = codes.to(torch.int64)
    space = _space_table(dev)[c.clamp(max=SPACE_LAST + 1)]
    first = torch.zeros(n + 1, dtype=torch.bool, device=dev)
    first[dev_offsets[:-1]] = True  # each text's first position (an empty text marks the next one's)
    start = ~space  # a word starts at a non-space after a space or at a text's start
    start[1:] &= space[:-1] | first[1:n]
    count = torch.zeros(n + 1, dtype=torch.int64, device=dev)
    torch.cumsum(start, 0, out=count[1:])
    word_offsets = count[dev_offsets]  # each text's first word
    n_words = int(count[-1])
    if n_words == 0:
        ids = torch.zeros(0, dtype=torch.int32, device=dev)
        return _split(ids, word_offsets, n_first, 0)
    pos = torch.arange(n, device=dev)
    k = pos - torch.cummax(torch.where(start, pos, 0), 0).values  # position within the word
    inword = ~space
    wid = torch.where(inword, count[1:] - 1, n_words)  # spaces go to a spare slot

    def per_word(v):  # sums over each word's characters (bincount would read its maximum back)
        return torch.zeros(n_words + 1, dtype=torch.int64, device=dev).index_add_(0, wid, v)[:-1]

    h = per_word(word_hash(c, k))
    length = per_word(inword.to(torch.int64))
    h = _mix(h + length * _GOLDEN)
    distinct, ids = torch.unique(h, return_inverse=True)
    # every word against the first word of its id: the same length and characters, else a collision
    word = torch.arange(n_words, device=dev)
    rep = torch.full((distinct.numel(),), n_words, device=dev).scatter_reduce_(0, ids, word, "amin")[ids]
    word_start = torch.full((n_words + 1,), n, device=dev).scatter_reduce_(0, wid, pos, "amin")[:-1]
    w = wid.clamp(max=n_words - 1)
    partner = torch.where(inword, word_start[rep[w]] + k, pos).clamp_(max=n - 1)
    same = (length[rep] == length).all() & (c[partner] == c).all()
    ok, cut = torch.stack([same.to(torch.int64), word_offsets[n_first]]).tolist()
    if not ok:
        return _words_host(texts, n_first, dev)
    return _split(ids.to(torch.int32), word_offsets, n_first, cut)


def _words_host(texts: list[str], n_first: int, device):
    """Word ids from a dictionary on the host (after a hash collision)."""
    vocab: dict = {}
    split = [t.split() for t in texts]
    ids = torch.tensor([vocab.setdefault(w, len(vocab)) for ws in split for w in ws], dtype=torch.int32)
    offsets = torch.zeros(len(texts) + 1, dtype=torch.int64)
    torch.cumsum(torch.tensor([len(ws) for ws in split], dtype=torch.int64), 0, out=offsets[1:])
    return _split(ids.to(device), offsets.to(device), n_first, int(offsets[n_first]))


def _split(ids, offsets, n_first: int, cut: int) -> tuple[SequenceBatch, SequenceBatch]:
    return (SequenceBatch(ids[:cut], offsets[: n_first + 1], TOKENS),
            SequenceBatch(ids[cut:], offsets[n_first:] - cut, TOKENS))
