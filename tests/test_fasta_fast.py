"""The fast FASTA reader gives exactly what Biopython's parser plus encode_records give, or
hands the file to that slow path (which raises the error naming the file and record)."""

import gzip
import re

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import torchalign as ta
from torchalign import fasta
from torchalign.io import encode_records, iter_named, read_named, read_sequences

from .conftest import data_file

# files the fast path reads itself: real files are messy in these ways
FAST = {
    "plain": b">a desc\nACGT\nAC\n>b\nGG\n",
    "crlf": b">a desc\r\nACGT\r\nAC\r\n>b\r\nGG\r\n",
    "bom, lower case, spaces, blank lines, no last newline": b"\xef\xbb\xbf>a\nacgtn\n\n>b x\n  GG T \n>c",
    "empty records": b">a\n>b\nAC\n>\nA\n",
    "tab after the name": b">a\tb c\nAC\n",
    "UTF-8 description": ">a Protéine\nAC\n".encode(),
    "no-break space in the header": ">a\u00a0b\nAC\n".encode(),
    "control byte in the header": b">a\x1cb\nAC\n",
    "only a header": b">a\n",
}
# files it hands to the slow path (which accepts the first, the rest are errors)
SLOW = {
    "a lone CR": b">a\rAC\n",
    "text before the first header": b"AC\n>a\nAC\n",
    "a bad symbol": b">a\nACJ\n",
    "a tab in a sequence": b">a\nAC\tG\n",
    "a name that is not UTF-8": b">\xe9a\nAC\n",
    "a comment line before the header": b"; made by hand\n>a\nAC\n",
}


def _slow(path, alphabet, scoring=None):
    try:
        return encode_records(iter_named(path), alphabet, str(path), scoring)
    except ValueError as e:
        return str(e)


def _same(got, want):
    assert not isinstance(want, str), want
    assert got[0] == want[0]
    assert torch.equal(got[1].codes, want[1].codes) and torch.equal(got[1].offsets, want[1].offsets)
    assert (got[1].max_code, got[1].max_length) == (want[1].max_code, want[1].max_length)
    assert got[1].alphabet is want[1].alphabet


@pytest.mark.parametrize("alphabet", ["dna", "protein", "bytes"])
@pytest.mark.parametrize("case", sorted(FAST))
def test_fast_path_reads_messy_files_as_the_slow_path(tmp_path, case, alphabet):
    path = tmp_path / "x.fa"
    path.write_bytes(FAST[case])
    got = fasta.read_fasta(path, alphabet)
    assert got is not None
    _same(got, _slow(path, alphabet))
    gz = tmp_path / "x.fa.gz"
    gz.write_bytes(gzip.compress(FAST[case]))
    _same(fasta.read_fasta(gz, alphabet), _slow(path, alphabet))


@pytest.mark.parametrize("case", sorted(SLOW))
def test_what_the_fast_path_leaves_goes_the_slow_way(tmp_path, case):
    path = tmp_path / "x.fa"
    path.write_bytes(SLOW[case])
    assert fasta.read_fasta(path, "dna") is None
    want = _slow(path, "dna")
    if isinstance(want, str):
        with pytest.raises(ValueError) as e:
            read_named(path, "dna", str(path))
        assert str(e.value) == want and str(path) in want
    else:
        _same(read_named(path, "dna"), want)


def test_unscored_symbols_go_the_slow_way_with_the_scoring_error(tmp_path):
    path = tmp_path / "p.fa"
    path.write_bytes(b">p1\nACDEUO\n>p2\nAC*J\n")  # U, O scored; J not a protein symbol
    sc = ta.Scoring()
    with pytest.raises(ValueError, match="p2"):
        read_named(path, sc.alphabet, "database", sc)
    path.write_bytes(b">p1\nACDEUO\n>p2\nACX*\n")
    _same(read_named(path, sc.alphabet, "database", sc), _slow(path, sc.alphabet, sc))
    assert fasta.read_fasta(path, sc.alphabet, sc.table.shape[0]) is not None
    strict = ta.Scoring(strict_symbols=True)  # U and O are errors: the slow path names them
    assert fasta.read_fasta(path, strict.alphabet, strict.table.shape[0]) is None
    with pytest.raises(ValueError, match="p1"):
        read_named(path, strict.alphabet, "database", strict)


@pytest.mark.parametrize("name, alphabet", [("epec_proteome.fa", "protein"), ("proteome_HG003687.fa", "protein"),
                                            ("swissprot_queries20.fa", "protein"), ("MT-chimp.fa", "dna"),
                                            ("genes100_CP040672.fna", "dna")])
def test_real_files(name, alphabet, monkeypatch):
    path = data_file(name)
    want = _slow(path, alphabet)
    _same(fasta.read_fasta(path, alphabet), want)
    monkeypatch.setattr(fasta, "BLOCK_BYTES", 4096)  # many blocks, several parsed at once
    _same(fasta.read_fasta(path, alphabet), want)
    _same(read_sequences(path, alphabet), want)


@settings(deadline=None, max_examples=300)
@given(st.binary(max_size=60).map(lambda b: bytes(b"ACGTNacgt >;\r\n\t\xc3\xa9*X"[x % 19] for x in b)),
       st.booleans(), st.integers(1, 16), st.sampled_from(["dna", "protein", "bytes"]))
def test_random_files_match_the_slow_path(tmp_path_factory, text, headed, block, alphabet):
    path = tmp_path_factory.mktemp("f") / "r.fa"
    path.write_bytes(b">" + text if headed else text)
    want = _slow(path, alphabet)
    old = fasta.BLOCK_BYTES
    fasta.BLOCK_BYTES = block  # records cut into blocks at every '\n>'
    try:
        got = fasta.read_fasta(path, alphabet)
    finally:
        fasta.BLOCK_BYTES = old
    if got is not None:
        _same(got, want)
    elif isinstance(want, str):
        with pytest.raises(ValueError, match="^" + re.escape(want) + "$"):
            read_named(path, alphabet, str(path))
    else:
        _same(read_named(path, alphabet), want)
