"""Reading FASTA and FASTQ files (plain or gzipped) into SequenceBatches, with Biopython.

Files are UTF-8 text; gzip is recognised by its first bytes, whatever the name. A byte
that is not UTF-8 is kept (Python's surrogateescape) and reported where it matters: in a
record's name or sequence it raises ValueError naming the file and the record; in the rest
of a header (the description, never used) it is ignored. Every error names the file.
"""

from __future__ import annotations

import gzip
import os
import zlib
from collections.abc import Iterator
from contextlib import contextmanager

from Bio.SeqIO.FastaIO import SimpleFastaParser
from Bio.SeqIO.QualityIO import FastqGeneralIterator

from .alphabet import Alphabet, get_alphabet
from .batch import SequenceBatch
from .fasta import is_gzip, read_fasta

_EXTENSIONS = {
    ".fa": "fasta", ".fasta": "fasta", ".fna": "fasta", ".faa": "fasta", ".ffn": "fasta",
    ".fq": "fastq", ".fastq": "fastq",
}
_FIRST_CHAR = {">": "fasta", "@": "fastq", "": "fasta"}  # "": an empty file, no records
_SNIFF_CHARS = 4096  # read to tell text from binary: a NUL, or undecodable bytes in a file of lines


def _open(path):
    """A text handle: UTF-8 (a leading byte-order mark dropped), undecodable bytes kept."""
    opener = gzip.open if is_gzip(path) else open
    return opener(path, "rt", encoding="utf-8-sig", errors="surrogateescape")


@contextmanager
def _reading(path):
    """A gzip file cut short (a broken download, say) or corrupt raises ValueError naming it."""
    try:
        yield
    except (EOFError, gzip.BadGzipFile, zlib.error) as e:
        raise ValueError(f"{path}: {e}; is the gzip file complete?") from None


def _format(path) -> str | None:
    """"fasta" or "fastq" from the extension (a trailing .gz aside), else from the first
    character; None for other text. ValueError for a binary file."""
    with _reading(path), _open(path) as handle:
        head = handle.read(_SNIFF_CHARS)
    first = head.lstrip()[:1]
    if "\0" in head:
        raise ValueError(f"{path}: not a text file (it holds NUL bytes: binary, or compressed other than by gzip); "
                         "expected FASTA, FASTQ (.gz too) or one sequence per line")
    bad = next((c for c in head if 0xDC80 <= ord(c) <= 0xDCFF), None)
    if bad is not None and first not in (">", "@"):  # (in a header: reported only if in a name)
        raise ValueError(f"{path}: not UTF-8 text (byte {ord(bad) - 0xDC00:#04x} near the start): binary, or "
                         "another encoding (convert it to UTF-8)? Expected FASTA, FASTQ (.gz too) or one sequence "
                         "per line")
    return _EXTENSIONS.get(os.path.splitext(os.fspath(path).lower().removesuffix(".gz"))[1]) or _FIRST_CHAR.get(first)


def guess_format(path) -> str:
    """"fasta" or "fastq": from the extension (a trailing .gz aside), else the first character."""
    fmt = _format(path)
    if fmt is None:
        raise ValueError(f"{path}: neither FASTA ('>') nor FASTQ ('@'), by its extension or first character")
    return fmt


def iter_records(path, format: str | None = None) -> Iterator[tuple[str, str]]:
    """(name, sequence) of each record, streamed; the name is the header's first word."""
    fmt = format or guess_format(path)
    if fmt not in ("fasta", "fastq"):
        raise ValueError(f"format: expected 'fasta' or 'fastq', got {fmt!r}")
    number = 0
    try:
        with _reading(path), _open(path) as handle:
            lines = _headed(handle, path) if fmt == "fasta" else handle
            for title, seq, *_ in (SimpleFastaParser if fmt == "fasta" else FastqGeneralIterator)(lines):
                number += 1
                name = _name(title)
                if not name.isascii() and any(0xDC80 <= ord(c) <= 0xDCFF for c in name):
                    raw = name.encode("utf-8", "surrogateescape")
                    raise ValueError(f"{path}: the name of record {number} ({raw!r}) is not UTF-8 text; convert "
                                     "the file to UTF-8 (iconv -f latin1 -t utf-8, say)")
                yield name, seq
    except ValueError as e:  # the parser's own (a FASTQ record cut short, ...): name the file
        if str(e).startswith(f"{path}: "):
            raise
        raise ValueError(f"{path}: after record {number}: {e}" if number else f"{path}: {e}") from None


def _headed(handle, path):
    """The lines of a FASTA file; text before the first '>' header raises (Biopython would
    drop it silently), blank lines and ';' or '#' comment lines aside."""
    for number, line in enumerate(handle, 1):
        if line.startswith(">"):
            yield line
            break
        if line.strip() and not line.startswith((";", "#")):
            raise ValueError(f"{path}: line {number} ({line.rstrip()[:20]!r}) comes before the first '>' header; "
                             "a FASTA file starts with a '>name' line")
    yield from handle


def iter_named(path) -> Iterator[tuple[str, str]]:
    """FASTA/FASTQ records, or else one sequence per non-empty line, named by its line number."""
    fmt = _format(path)
    if fmt is not None:
        yield from iter_records(path, fmt)
        return
    with _reading(path), _open(path) as handle:
        for number, line in enumerate(handle, 1):
            line = line.rstrip("\r\n")
            if line:
                yield str(number), line


def _name(title: str) -> str:
    words = title.split(None, 1)
    return words[0] if words else ""


def encode_records(records, alphabet: str | Alphabet = "dna", source="",
                   scoring=None) -> tuple[list[str], SequenceBatch]:
    """(names, SequenceBatch) of (name, sequence) pairs; a bad symbol's ValueError names
    ``source`` (the file) and the record. With a ``scoring``, so does a symbol it does not
    score (every file is checked before anything is printed)."""
    alpha = get_alphabet(alphabet)
    limit = None if scoring is None else scoring.table.shape[0]
    names, parts = [], []
    for name, seq in records:
        names.append(name)
        codes = alpha.encode_str(seq, what=f"{source}: record {name!r}")
        if limit is not None and codes.numel() and int(codes.max()) >= limit:
            i = int((codes >= limit).nonzero()[0])
            raise ValueError(f"{source}: record {name!r}, position {i}: {scoring.unscored(seq[i])}")
        parts.append(codes)
    return names, SequenceBatch.from_codes(parts, alpha)


def require_residues(source, names, batch: SequenceBatch) -> None:
    """A file with no residues (0 bytes, headers only, blank lines) raises ValueError: an
    empty input is a failed download or a wrong path, never a result worth printing."""
    if batch.codes.numel() == 0:
        held = (f"its {len(names)} record{'s' if len(names) > 1 else ''} hold no residues (headers only)" if names
                else "holds no records")
        raise ValueError(f"{source}: {held}; pass a file with sequences")


def read_sequences(path, alphabet: str | Alphabet = "dna", format: str | None = None):
    """(names, SequenceBatch) of every record of a FASTA/FASTQ file (.gz too).

    The format comes from the extension (.fa .fasta .fna .faa .ffn / .fq .fastq), else
    from the first character.
    """
    fmt = format or guess_format(path)
    if fmt == "fasta":
        got = _fast(path, alphabet, None)
        if got is not None:
            return got
    return encode_records(iter_records(path, fmt), alphabet, path)


def read_named(path, alphabet: str | Alphabet = "dna", source=None, scoring=None):
    """``encode_records(iter_named(path), alphabet, source, scoring)``, through the fast
    FASTA reader where it applies (the same names and codes; a file it does not take, or
    one with an error, goes the slow way, which names the error)."""
    if _format(path) == "fasta":
        got = _fast(path, alphabet, None if scoring is None else scoring.table.shape[0])
        if got is not None:
            return got
    return encode_records(iter_named(path), alphabet, source or str(path), scoring)


def _fast(path, alphabet, limit):
    with _reading(path):
        return read_fasta(path, alphabet, limit)


def iter_batches(path, alphabet: str | Alphabet = "dna", format: str | None = None,
                 max_residues: int = 1 << 26) -> Iterator[tuple[list[str], SequenceBatch]]:
    """(names, SequenceBatch) chunks of whole records, each up to ``max_residues``
    (a longer record is a chunk of its own), so huge files stream in bounded memory."""
    chunk, size = [], 0
    for name, seq in iter_records(path, format):
        if chunk and size + len(seq) > max_residues:
            yield encode_records(chunk, alphabet, path)
            chunk, size = [], 0
        chunk.append((name, seq))
        size += len(seq)
    if chunk:
        yield encode_records(chunk, alphabet, path)
