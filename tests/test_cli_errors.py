"""Every subcommand on messy files, as a new user would try them (issue 12, items 9 and 10):
a user error is one line on stderr naming the file, record or option and the fix, exit
status 2, and nothing on stdout; what works keeps working."""

import gzip

import pytest
import torch

import torchalign as ta
import torchalign.cli as cli
from torchalign.cli import main

from . import reference as ref
from .align_cases import biopython
from .test_cli import brute_grep, write_fasta

GOOD_DNA = [("d1", "ACGTACGTTTGACCA"), ("d2", "GGACGTAC")]
GOOD_PROTEIN = [("p1", "HEAGAWGHEE"), ("p2", "PAWHEAE")]


def run(capsys, *args):
    """(exit code, stdout, stderr) of an in-process run."""
    capsys.readouterr()
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


def commands(bad, dna, protein):
    """Each subcommand with ``bad`` in each file position (the other files good)."""
    return {
        "search queries": ["search", bad, protein, "--device", "cpu"],
        "search database": ["search", protein, bad, "--device", "cpu"],
        "grep": ["grep", "ACGT", bad, "--device", "cpu"],
        "dist a": ["dist", bad, dna, "--device", "cpu"],
        "dist b": ["dist", dna, bad, "--device", "cpu"],
        "primers alpha": ["primers", bad, dna, "-k", "2", "--device", "cpu"],
        "primers beta": ["primers", dna, bad, "-k", "2", "--device", "cpu"],
    }


def _messy_files(tmp_path):
    """name -> (path, what the error must say)."""
    d = tmp_path
    (d / "empty.fa").write_bytes(b"")
    (d / "headers.fa").write_bytes(b">h1 nothing here\n>h2\n\n")
    (d / "binary.fa").write_bytes(bytes(range(256)) * 8)
    (d / "png.dat").write_bytes(b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR" + bytes(range(200)))
    (d / "latin1_name.fa").write_bytes(b">caf\xe9 r\xe9sum\xe9\nACGT\n")
    (d / "latin1_seq.fa").write_bytes(b">r1\nAC\xe9GT\n")
    (d / "latin1.txt").write_bytes(b"ACGT caf\xe9\nACGT\n")
    (d / "leading.fa").write_bytes(b"ACGT\n>r1\nACGT\n")
    whole = gzip.compress(b">r1\n" + b"ACGT" * 5000)
    (d / "cut.fa.gz").write_bytes(whole[: len(whole) // 2])
    (d / "bad_symbol.fa").write_bytes(b">ok\nACGT\n>r2 second\nAC#GT\n")
    return {
        "missing": (d / "missing.fa", "missing.fa"),
        "directory": (d, "Is a directory"),
        "empty": (d / "empty.fa", "empty.fa: holds no records; pass a file with sequences"),
        "headers only": (d / "headers.fa", "headers.fa: its 2 records hold no residues (headers only)"),
        "binary": (d / "binary.fa", "binary.fa: not a text file"),
        "binary, any name": (d / "png.dat", "png.dat: not a text file"),
        "non-UTF-8 name": (d / "latin1_name.fa", r"latin1_name.fa: the name of record 1 (b'caf\xe9') is not UTF-8"),
        "non-UTF-8 residue": (d / "latin1_seq.fa", "latin1_seq.fa: record 'r1': position 2 holds byte 0xe9"),
        "non-UTF-8 lines": (d / "latin1.txt", "latin1.txt: not UTF-8 text (byte 0xe9 near the start)"),
        "text before the header": (d / "leading.fa", "leading.fa: line 1 ('ACGT') comes before the first '>'"),
        "gzip cut short": (d / "cut.fa.gz", "cut.fa.gz: "),
        "bad symbol": (d / "bad_symbol.fa", "bad_symbol.fa: record 'r2': symbol '#' at position 2"),
    }


MESSY = ["missing", "directory", "empty", "headers only", "binary", "binary, any name", "non-UTF-8 name",
         "non-UTF-8 residue", "non-UTF-8 lines", "text before the header", "gzip cut short", "bad symbol"]
PLACES = ["search queries", "search database", "grep", "dist a", "dist b", "primers alpha", "primers beta"]


@pytest.mark.parametrize("place", PLACES)
@pytest.mark.parametrize("mess", MESSY)
def test_messy_file_is_one_line_exit_2_and_no_output(tmp_path, capsys, mess, place):
    path, says = _messy_files(tmp_path)[mess]
    if mess == "bad symbol" and place.startswith("dist"):
        pytest.skip("dist compares bytes: '#' is a symbol there")
    dna = write_fasta(tmp_path / "dna.fa", GOOD_DNA)
    protein = write_fasta(tmp_path / "protein.fa", GOOD_PROTEIN)
    code, out, err = run(capsys, *commands(path, dna, protein)[place])
    assert code == 2, err
    assert out == ""
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert err.startswith(f"torchalign {place.split()[0]}: error: ") and says in err, err


def test_selenoproteins_are_searched_as_ncbi_blast_scores_them(tmp_path, capsys):
    """U as C, O as X by default; --strict-symbols names the file, the record and the fix."""
    db = write_fasta(tmp_path / "proteome.fa", [("sel1", "MKUAGCWHEAGAWGHEE"), ("pyl1", "PAWOHEAEOK"),
                                                ("plain", "HEAGAWGHEE")])
    q = write_fasta(tmp_path / "q.fa", [("q1", "HEAGAWGHEEcu"), ("q2", "wohea")])
    code, out, err = run(capsys, "search", q, db, "--device", "cpu", "--mode", "global", "--matrix", "blosum62")
    assert code == 0, err
    aligner = biopython("global", ta.Scoring(strict_symbols=True))
    table = str.maketrans("UOuo", "CXCX")
    rows = [line.split("\t") for line in out.splitlines()[1:]]
    seqs = {"sel1": "MKUAGCWHEAGAWGHEE", "pyl1": "PAWOHEAEOK", "plain": "HEAGAWGHEE", "q1": "HEAGAWGHEEcu",
            "q2": "wohea"}
    assert len(rows) == 6
    for r in rows:
        want = aligner.score(seqs[r[1]].translate(table), seqs[r[0]].upper().translate(table))
        assert int(r[2]) == want, r
    code, out, err = run(capsys, "search", q, db, "--device", "cpu", "--strict-symbols")
    assert code == 2 and out == ""
    assert "queries " in err and "q.fa: record 'q1', position 11: symbol 'u' is not in BLOSUM62" in err
    assert "leave strict symbols off" in err


def test_a_bad_record_in_a_later_chunk_comes_before_any_hit(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(cli, "CHUNK_RESIDUES", 10)  # a chunk per record or two
    records = [(f"r{i}", "ACGTACGTAC") for i in range(6)]
    good = write_fasta(tmp_path / "good.fa", records)
    code, out, err = run(capsys, "grep", "CGTA", good, "-k", "1", "--both-strands", "--device", "cpu")
    assert code == 0 and out.splitlines()[1:] == brute_grep(records, ["CGTA"], 1, both_strands=True)
    bad = write_fasta(tmp_path / "bad.fa", records + [("late", "ACGTNNXACGT")])
    code, out, err = run(capsys, "grep", "CGTA", bad, "--device", "cpu")
    assert code == 2 and out == "" and "bad.fa: record 'late': symbol 'X' at position 6" in err


@pytest.mark.parametrize("args", [
    ["grep", "CG", "{dna}", "-k", str(2**63), "--device", "cpu"],
    ["grep", "CG", "{dna}", "-k", str(2**31), "--edits", "--device", "cpu"],
    ["grep", "CG", "{dna}", "--max-hits", str(10**30), "--device", "cpu"],
    ["dist", "{dna}", "{dna}", "--max-distance", str(2**63), "--device", "cpu"],
    ["primers", "{dna}", "{dna}", "-k", str(2**64), "--min-length", str(2**40), "--device", "cpu"],
    ["search", "{protein}", "{protein}", "--top", str(10**22), "--device", "cpu"],
])
def test_huge_integers_are_exact(tmp_path, capsys, args):
    dna = write_fasta(tmp_path / "dna.fa", GOOD_DNA)
    protein = write_fasta(tmp_path / "protein.fa", GOOD_PROTEIN)
    code, out, err = run(capsys, *(a.format(dna=dna, protein=protein) for a in args))
    assert code == 0, err
    lines = out.splitlines()
    if args[0] == "grep" and "--max-hits" not in args:  # every window of 2, or (edits) every end 0..len
        assert len(lines) - 1 == sum(len(s) + (1 if "--edits" in args else -1) for _, s in GOOD_DNA)
    if args[0] == "dist":
        d = ref.levenshtein(GOOD_DNA[0][1], GOOD_DNA[1][1])
        assert lines[1:] == [f"d1\t0\t{d}", f"d2\t{d}\t0"]
    if args[0] == "search":
        assert len(lines) == 1 + 2 * 2


def test_huge_min_length_prints_nothing(tmp_path, capsys):
    alpha = write_fasta(tmp_path / "a.fa", [("a", "AC")])
    beta = write_fasta(tmp_path / "b.fa", [("b", "GGGG")])
    code, out, err = run(capsys, "primers", alpha, beta, "-k", "2", "--device", "cpu")
    assert code == 0 and out.splitlines()[1:] == ["a\t0\t2\tAC"]  # a region as long as the longest record
    for huge in (3, 2**31, 2**40):
        code, out, err = run(capsys, "primers", alpha, beta, "-k", "2", "--min-length", huge, "--device", "cpu")
        assert code == 0 and out.splitlines()[1:] == [], huge


def test_what_works_keeps_working(tmp_path, capsys):
    """gzip (by its bytes, whatever the name), FASTQ, CRLF, lower case, a byte-order mark."""
    fq = b"@r1 x\r\nacgtACGTac\r\n+\r\nIIIIIIIIII\r\n@r2\r\nGGACGT\r\n+\r\nIIIIII\r\n"
    (tmp_path / "reads.fq.gz").write_bytes(gzip.compress(fq))
    (tmp_path / "reads.gzipped").write_bytes(gzip.compress(fq))
    (tmp_path / "bom.fa").write_bytes(b"\xef\xbb\xbf>r1\r\nacgtACGTac\r\n>r2\r\nGGACGT\r\n")
    want = brute_grep([("r1", "ACGTACGTAC"), ("r2", "GGACGT")], ["ACGT"], 0)
    for name in ("reads.fq.gz", "reads.gzipped", "bom.fa"):
        code, out, err = run(capsys, "grep", "acgt", tmp_path / name, "--device", "cpu")
        assert code == 0 and out.splitlines()[1:] == want, (name, err)


def test_threads_default_and_option(tmp_path, capsys):
    dna = write_fasta(tmp_path / "dna.fa", GOOD_DNA)
    before = torch.get_num_threads()
    try:
        assert run(capsys, "grep", "ACGT", dna, "--device", "cpu")[0] == 0
        assert torch.get_num_threads() == cli.DEFAULT_THREADS == 1
        assert run(capsys, "grep", "ACGT", dna, "--device", "cpu", "--threads", "2")[0] == 0
        assert torch.get_num_threads() == 2
        code, out, err = run(capsys, "dist", dna, dna, "--threads", "0")
        assert code == 2 and out == "" and "--threads must be >= 1, got 0" in err
    finally:
        torch.set_num_threads(before)
