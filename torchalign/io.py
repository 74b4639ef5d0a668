"""Reading FASTA and FASTQ files (plain or gzipped) into SequenceBatches, with Biopython."""

from __future__ import annotations

import gzip
import os
from collections.abc import Iterator

from Bio.SeqIO.FastaIO import SimpleFastaParser
from Bio.SeqIO.QualityIO import FastqGeneralIterator

from .alphabet import Alphabet, get_alphabet
from .batch import SequenceBatch

_EXTENSIONS = {
    ".fa": "fasta", ".fasta": "fasta", ".fna": "fasta", ".faa": "fasta", ".ffn": "fasta",
    ".fq": "fastq", ".fastq": "fastq",
}
_FIRST_CHAR = {">": "fasta", "@": "fastq", "": "fasta"}  # "": an empty file, no records


def _open(path):
    path = os.fspath(path)
    return gzip.open(path, "rt") if path.endswith(".gz") else open(path)


def guess_format(path) -> str:
    """"fasta" or "fastq": from the extension (a trailing .gz aside), else the first character."""
    stem = os.fspath(path).lower().removesuffix(".gz")
    fmt = _EXTENSIONS.get(os.path.splitext(stem)[1])
    if fmt is None:
        with _open(path) as handle:
            first = handle.read(1)
        fmt = _FIRST_CHAR.get(first)
        if fmt is None:
            raise ValueError(f"{path}: neither FASTA ('>') nor FASTQ ('@'): starts with {first!r}")
    return fmt


def iter_records(path, format: str | None = None) -> Iterator[tuple[str, str]]:
    """(name, sequence) of each record, streamed; the name is the header's first word."""
    fmt = format or guess_format(path)
    if fmt not in ("fasta", "fastq"):
        raise ValueError(f"format: expected 'fasta' or 'fastq', got {fmt!r}")
    with _open(path) as handle:
        if fmt == "fasta":
            for title, seq in SimpleFastaParser(handle):
                yield _name(title), seq
        else:
            for title, seq, _ in FastqGeneralIterator(handle):
                yield _name(title), seq


def iter_named(path) -> Iterator[tuple[str, str]]:
    """FASTA/FASTQ records, or else one sequence per non-empty line, named by its line number."""
    try:
        fmt = guess_format(path)
    except ValueError:
        fmt = "lines"
    if fmt != "lines":
        yield from iter_records(path, fmt)
        return
    with _open(path) as handle:
        for number, line in enumerate(handle, 1):
            line = line.rstrip("\r\n")
            if line:
                yield str(number), line


def _name(title: str) -> str:
    words = title.split(None, 1)
    return words[0] if words else ""


def encode_records(records, alphabet: str | Alphabet = "dna", source="") -> tuple[list[str], SequenceBatch]:
    """(names, SequenceBatch) of (name, sequence) pairs; a bad symbol's ValueError names
    ``source`` (the file) and the record."""
    alpha = get_alphabet(alphabet)
    names, parts = [], []
    for name, seq in records:
        names.append(name)
        parts.append(alpha.encode_str(seq, what=f"{source}: record {name!r}"))
    return names, SequenceBatch.from_codes(parts, alpha)


def read_sequences(path, alphabet: str | Alphabet = "dna", format: str | None = None):
    """(names, SequenceBatch) of every record of a FASTA/FASTQ file (.gz too).

    The format comes from the extension (.fa .fasta .fna .faa .ffn / .fq .fastq), else
    from the first character.
    """
    return encode_records(iter_records(path, format), alphabet, path)


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
