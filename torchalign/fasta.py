"""A fast FASTA reader: whole blocks of a file parsed and encoded with NumPy.

Biopython's parser and one ``encode_str`` per record take ~25 s for a 199 M-residue
database; this reads it in ~1 s. It gives exactly what ``io.iter_records`` plus
``io.encode_records`` give, or ``None`` where the file has anything it does not handle the
same way for sure (a bad symbol, text before the first header, a control or non-ASCII byte
in a sequence line, a lone carriage return, an undecodable name): the caller then reads
the file with that slow path, which raises the error with the file, record and position.
"""

from __future__ import annotations

import gzip
import os
from collections import deque
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import torch

from .alphabet import get_alphabet
from .batch import SequenceBatch

BLOCK_BYTES = 1 << 24  # read and parsed at a time (temporaries ~12 B per byte), cut after a record
WORKERS = min(8, os.cpu_count() or 1)  # blocks parsed at once: NumPy lets go of the GIL
_BOM = b"\xef\xbb\xbf"
_GZIP_MAGIC = b"\x1f\x8b"
_NL, _CR, _SPACE, _GT = 10, 13, 32, ord(">")
# bytes a sequence line may hold here: printable ASCII; CR only before LF (checked apart)
_SEQ_BYTE = np.zeros(256, dtype=bool)
_SEQ_BYTE[32:127] = True
_SEQ_BYTE[[_NL, _CR]] = True


def read_fasta(path, alphabet, limit: int | None = None):
    """(names, SequenceBatch) of a FASTA file (gzip too), or None where the slow path must
    read it. ``limit``: codes at or above it (symbols the scoring does not score) also give
    None, so that the slow path names them."""
    alpha = get_alphabet(alphabet)
    if alpha.symbols is None or alpha.name == "unicode":
        return None
    lut = alpha.lookup_table() if alpha.name != "bytes" else np.arange(256, dtype=np.uint8)
    if limit is not None:
        lut = np.where(lut < limit, lut, 255).astype(np.uint8)
    names, parts, lengths = [], [], []
    with _opened(path) as handle:
        for got in _parsed(_blocks(handle), lut):
            if got is None:
                return None
            names += got[0]
            parts.append(got[1])
            lengths.append(got[2])
    codes = torch.from_numpy(np.concatenate(parts) if parts else np.empty(0, np.uint8))
    lengths = torch.from_numpy(np.concatenate(lengths) if lengths else np.empty(0, np.int64))
    offsets = torch.zeros(lengths.numel() + 1, dtype=torch.int64)
    torch.cumsum(lengths, 0, out=offsets[1:])
    max_code = int(codes.max()) if codes.numel() else -1
    return names, SequenceBatch(codes, offsets, alpha, max_code, int(lengths.max()) if lengths.numel() else 0)


def _parsed(blocks, lut):
    """``_parse`` of each block, in order, up to WORKERS blocks at once."""
    with ThreadPoolExecutor(WORKERS) as pool:
        pending = deque()
        for block in blocks:
            pending.append(pool.submit(_parse, block, lut))
            if len(pending) >= WORKERS:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()


def is_gzip(path) -> bool:
    """Whether the file starts with gzip's magic bytes (its name does not matter)."""
    with open(path, "rb") as raw:
        return raw.read(2) == _GZIP_MAGIC


def _opened(path):
    return gzip.open(path, "rb") if is_gzip(path) else open(path, "rb")


def _blocks(handle):
    """The file's bytes in blocks of whole records (a block ends before a '\\n>' or at the end
    of the file), the byte-order mark dropped."""
    rest = handle.read(BLOCK_BYTES)
    if rest.startswith(_BOM):
        rest = rest[len(_BOM):]
    while True:
        more = handle.read(BLOCK_BYTES)
        if not more:
            if rest:
                yield rest
            return
        data = rest + more
        cut = data.rfind(b"\n>")
        if cut < 0:  # one record longer than a block: read on
            rest = data
            continue
        yield data[: cut + 1]
        rest = data[cut + 1 :]


def _parse(data: bytes, lut: np.ndarray):
    """(names, codes, lengths) of a block of whole records, or None (see the module)."""
    arr = np.frombuffer(data, dtype=np.uint8)
    if arr.size == 0 or arr[0] != _GT:
        return None  # text before the first header (or a leading blank line): the slow path decides
    line_ends = np.flatnonzero(arr == _NL)
    starts = np.concatenate(([0], line_ends + 1))
    starts = starts[starts < arr.size]
    heads = starts[arr[starts] == _GT]
    # each header's newline (the file's end if it has none)
    head_ends = np.append(line_ends, arr.size)[np.searchsorted(line_ends, heads)]
    # header lines (the newline aside) as runs: [head, head_end) in, [head_end, next head) out
    ends = np.append(heads[1:], arr.size)  # each record's end
    runs = np.empty(2 * heads.size, dtype=np.int64)
    runs[0::2], runs[1::2] = head_ends - heads, ends - head_ends
    in_head = np.repeat(np.tile(np.array([True, False]), heads.size), runs)
    if not (_SEQ_BYTE[arr] | in_head).all():
        return None
    cr = np.flatnonzero(arr == _CR)
    if cr.size and (cr[-1] + 1 >= arr.size or (arr[cr + 1] != _NL).any()):
        return None  # a lone CR ends a line in text mode: the slow path splits it so
    dropped = arr <= _SPACE  # in a sequence line only LF, CR and spaces are: all dropped
    keep = ~(dropped | in_head)
    codes = lut[arr[keep]]
    if codes.size and (codes == 255).any():
        return None
    # each record's residues: its bytes after the header line less the dropped ones among them
    gone = np.flatnonzero(dropped & ~in_head)
    counts = (ends - head_ends) - (np.searchsorted(gone, ends) - np.searchsorted(gone, head_ends))
    names = []
    for a, b in zip(heads.tolist(), head_ends.tolist()):
        words = data[a + 1 : b].decode("utf-8", "surrogateescape").split(None, 1)  # str's whitespace, as io
        name = words[0] if words else ""
        if not name.isascii() and any(0xDC80 <= ord(c) <= 0xDCFF for c in name):
            return None  # not UTF-8: the slow path says where
        names.append(name)
    return names, codes, counts
