"""The FASTA/FASTQ reader and `torchalign grep`, against a brute-force Python reference."""

import gzip
import random
import subprocess
import sys
from importlib import resources

import pytest
import torch
from Bio import SeqIO

from torchalign.cli import main
from torchalign.io import iter_records, read_sequences

from .conftest import data_dir
from .reference import revcomp, same

DATA = data_dir()  # TORCHALIGN_TEST_DATA, else <repo root>/data
BUNDLED = resources.files("torchalign") / "data" / "MT-human.fa"


# ---- reference -----------------------------------------------------------------
def brute_grep(records, patterns, k, both_strands=False, iupac=False):
    """Expected output lines (no header), by plain loops over every window."""
    lines = []
    for name, text in records:
        text = text.upper()
        for pos in range(len(text)):
            for strand in ("+", "-") if both_strands else ("+",):
                for pattern in patterns:
                    p = pattern.upper()
                    window = text[pos : pos + len(p)]
                    if len(window) < len(p):
                        continue
                    target = p if strand == "+" else revcomp(p)
                    dist = sum(not same(a, b, iupac) for a, b in zip(target, window))
                    if dist > k:
                        continue
                    shown = window if strand == "+" else revcomp(window)
                    match = "".join(c if same(a, c, iupac) else c.lower() for a, c in zip(p, shown))
                    pat = f"{pattern}\t" if len(patterns) > 1 else ""
                    lines.append(f"{name}\t{pat}{pos}\t{strand}\t{dist}\t{match}")
    return lines


def grep(capsys, *args):
    """Run `torchalign grep` in-process: (hit lines, stderr); checks the header and casing."""
    assert main(["grep", *map(str, args)]) == 0
    out, err = capsys.readouterr()
    header, *lines = out.splitlines()
    assert header.startswith("#record\t") and header.endswith("position\tstrand\tdistance\tmatch")
    for line in lines:
        *_, dist, match = line.split("\t")
        assert sum(c.islower() for c in match) == int(dist)
    assert "hits in" in err
    return lines, err


def write_fasta(path, records, width=7):
    with open(path, "w") as f:
        for name, seq in records:
            f.write(f">{name} some description\n")
            f.writelines(seq[i : i + width] + "\n" for i in range(0, len(seq), width))
    return path


def write_fastq(path, records):
    with open(path, "w") as f:
        for name, seq in records:
            f.write(f"@{name}\n{seq}\n+\n{'I' * len(seq)}\n")
    return path


def random_records(rng, n, symbols="ACGT"):
    return [(f"r{i}", "".join(rng.choice(symbols) for _ in range(rng.randint(0, 60)))) for i in range(n)]


# ---- reading -------------------------------------------------------------------

def test_read_fasta_matches_biopython():
    names, batch = read_sequences(BUNDLED)
    [rec] = SeqIO.parse(BUNDLED, "fasta")
    assert names == [rec.id] and batch.decode() == [str(rec.seq).upper()]


def test_formats_by_extension_gzip_and_first_char(tmp_path):
    records = [("a", "ACGTN"), ("b", ""), ("c", "ggcc")]
    fa = write_fasta(tmp_path / "x.fna", records)
    fq = write_fastq(tmp_path / "x.fq", records)
    gz = tmp_path / "x.fastq.gz"
    gz.write_bytes(gzip.compress(fq.read_bytes()))
    fa_txt = write_fasta(tmp_path / "fa.txt", records)
    fq_txt = write_fastq(tmp_path / "fq.txt", records)
    for path in (fa, fq, gz, fa_txt, fq_txt):
        assert list(iter_records(path)) == records
        names, batch = read_sequences(path)
        assert names == ["a", "b", "c"] and batch.decode() == ["ACGTN", "", "GGCC"]
    assert read_sequences(fa, alphabet="bytes")[1].decode() == ["ACGTN", "", "ggcc"]


def test_read_errors_name_file_and_record(tmp_path):
    path = write_fasta(tmp_path / "bad.fa", [("ok", "ACGT"), ("chrX", "ACGUA")])
    with pytest.raises(ValueError, match=r"bad\.fa: record 'chrX': symbol 'U' at position 3"):
        read_sequences(path)
    odd = tmp_path / "odd.txt"
    odd.write_text("ACGT\n")
    with pytest.raises(ValueError, match="neither FASTA"):
        read_sequences(odd)
    with pytest.raises(ValueError, match="format"):
        read_sequences(path, format="genbank")


# ---- grep ----------------------------------------------------------------------

def test_grep_bundled_default(capsys):
    [rec] = SeqIO.parse(BUNDLED, "fasta")
    lines, err = grep(capsys, "GATCACAGGTCTATCACCCT", "-k", 3, "--both-strands", "--device", "cpu")
    assert lines == brute_grep([(rec.id, str(rec.seq))], ["GATCACAGGTCTATCACCCT"], 3, both_strands=True)
    assert lines[0] == f"{rec.id}\t0\t+\t0\tGATCACAGGTCTATCACCCT"
    assert "1 records (16569 bp)" in err


def test_grep_small_fasta_both_strands_lowercase(tmp_path, capsys):
    records = [("s1", "ACGTTACGAACGTNNACGTCCGT"), ("s2", "acgtac"), ("empty", ""), ("s3", "TTAGCG")]
    path = write_fasta(tmp_path / "small.fa", records)
    lines, _ = grep(capsys, "ACGT", path, "-k", 1, "--both-strands")
    assert lines == brute_grep(records, ["ACGT"], 1, both_strands=True)
    assert "s1\t5\t+\t1\tACGa" in lines  # ACGA: the mismatch in lower case
    assert "s1\t5\t-\t1\ttCGT" in lines  # the reverse complement of ACGA
    lines, _ = grep(capsys, "AACG", "-k", 1, path, "--both-strands")  # options between positionals
    assert "s1\t10\t-\t1\tnACG" in lines  # CGTN, reverse-complemented
    assert lines == brute_grep(records, ["AACG"], 1, both_strands=True)


def test_grep_several_patterns_and_iupac(tmp_path, capsys):
    records = [("g", "TTTACGTAGGAACCGGTTNNAGGTGA"), ("h", "CCTGCCGRAGG")]
    path = write_fasta(tmp_path / "g.fa", records)
    lines, _ = grep(capsys, "NGG,acgt , CCN", path, "--iupac", "--both-strands", "-k", 1)
    assert lines == brute_grep(records, ["NGG", "acgt", "CCN"], 1, both_strands=True, iupac=True)
    assert any(line.split("\t")[1] == "NGG" for line in lines)
    plain, _ = grep(capsys, "NGG", path, "--both-strands")
    assert plain == brute_grep(records, ["NGG"], 0, both_strands=True)  # N only matches N


def test_grep_fastq_gz(tmp_path, capsys):
    records = [("read1", "ACGTACGTTT"), ("read2", "GGGACGAACG")]
    fq = write_fastq(tmp_path / "r.fastq", records)
    gz = tmp_path / "r.fq.gz"
    gz.write_bytes(gzip.compress(fq.read_bytes()))
    lines, _ = grep(capsys, "ACGA", gz, "-k", 2)
    assert lines == brute_grep(records, ["ACGA"], 2)


@pytest.mark.parametrize("seed", range(8))
def test_grep_random_against_brute_force(tmp_path, capsys, seed):
    rng = random.Random(seed)
    records = random_records(rng, rng.randint(1, 5), "ACGT" * 8 + "NRY")
    patterns = ["".join(rng.choice("ACGTN" if seed % 2 else "ACGT") for _ in range(rng.randint(1, 8)))
                for _ in range(rng.randint(1, 3))]
    k = rng.randint(0, 3)
    both, iupac = bool(seed & 2), bool(seed & 4)
    path = write_fasta(tmp_path / "r.fa", records)
    args = [",".join(patterns), path, "-k", k] + ["--both-strands"] * both + ["--iupac"] * iupac
    lines, err = grep(capsys, *args)
    assert lines == brute_grep(records, patterns, k, both_strands=both, iupac=iupac)
    assert f"{len(lines)} hits in {len(records)} records" in err


@pytest.mark.parametrize("seed", range(4))
def test_grep_edits_against_brute_force(tmp_path, capsys, seed):
    from .reference import asm_hits

    rng = random.Random(seed)
    records = random_records(rng, rng.randint(1, 4), "ACGT")
    patterns = ["".join(rng.choice("ACGT") for _ in range(rng.randint(3, 8))) for _ in range(rng.randint(1, 2))]
    k, both = rng.randint(0, 2), bool(seed & 1)
    path = write_fasta(tmp_path / "r.fa", records)
    assert main(["grep", ",".join(patterns), str(path), "-k", str(k), "--edits"] + ["--both-strands"] * both) == 0
    header, *lines = capsys.readouterr().out.splitlines()
    assert header.endswith("start\tend\tstrand\tdistance\tmatch")
    texts = [t for _, t in records]
    want = []
    for p, r, start, end, d, strand in asm_hits(texts, patterns, k, both_strands=both):
        match = texts[r][start:end] if strand == 0 else revcomp(texts[r][start:end])
        pat = f"{patterns[p]}\t" if len(patterns) > 1 else ""
        want.append((r, end, strand, p, f"{records[r][0]}\t{pat}{start}\t{end}\t{'+-'[strand]}\t{d}\t{match}"))
    assert lines == [w[-1] for w in sorted(want)]


def test_grep_empty_file(tmp_path, capsys):
    path = tmp_path / "none.fa"
    path.write_text("")  # an empty input is an error, as in every subcommand (tests/test_cli_errors.py)
    assert main(["grep", "ACGT", str(path)]) == 2
    out, err = capsys.readouterr()
    assert out == "" and "none.fa: holds no records" in err


@pytest.mark.parametrize("args, message", [
    (["ACGT", "-k", "-1"], "-k must be >= 0"),
    (["ACGU"], "pattern 'ACGU': symbol 'U' at position 3"),
    (["ACGT,,GG"], "empty pattern"),
    (["ACGT", "/no/such/file.fa"], "No such file"),
    (["A", "--max-hits", "10"], "more than 10 hits"),
    (["ACGT", "--device", "tpu"], "invalid choice"),
    (["ACGT", "-k", "two"], "invalid int value"),
    (["ACGT", "--edits", "--iupac"], "--iupac works with mismatches only"),
])
def test_grep_bad_input(capsys, args, message):
    assert main(["grep", *args]) == 2
    out, err = capsys.readouterr()
    assert message in err and "Traceback" not in err
    assert out == ""


def test_grep_bad_symbol_in_file(tmp_path, capsys):
    path = write_fasta(tmp_path / "prot.fa", [("P1", "PEPTIDE")])
    assert main(["grep", "ACGT", str(path)]) == 2
    assert "prot.fa: record 'P1': symbol 'P' at position 0" in capsys.readouterr().err


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message shown without CUDA")
def test_grep_cuda_unavailable(capsys):
    assert main(["grep", "ACGT", "--device", "cuda"]) == 2
    assert "CUDA is not available" in capsys.readouterr().err


def test_no_command(capsys):
    assert main([]) == 2
    assert "usage" in capsys.readouterr().err


def test_python_m_torchalign():
    proc = subprocess.run([sys.executable, "-m", "torchalign", "grep", "GATCACAGGTCTATCACCCT", "-k", "3",
                           "--both-strands"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[1] == "HS#NC_012920.1\t0\t+\t0\tGATCACAGGTCTATCACCCT"
    assert "hits in 1 records" in proc.stderr


# ---- real data (data/) -------------------------------------------------------------

def test_grep_real_contig(capsys):
    path = DATA / "contig_OFHT01000022.fna"
    [rec] = SeqIO.parse(path, "fasta")
    text = str(rec.seq).upper()
    pos = 123_456
    window = text[pos : pos + 20]
    pattern = "".join(c if i not in (3, 15) else "ACGT"[("ACGT".index(c) + 1) % 4] for i, c in enumerate(window))
    lines, _ = grep(capsys, pattern, path, "-k", 2)
    expected = "".join(c.lower() if i in (3, 15) else c for i, c in enumerate(window))
    assert f"{rec.id}\t{pos}\t+\t2\t{expected}" in lines
    lines, _ = grep(capsys, revcomp(pattern), path, "-k", 2, "--both-strands")
    assert f"{rec.id}\t{pos}\t-\t2\t{revcomp(expected.upper())[:4]}" in "\n".join(lines)
    assert lines == brute_grep([(rec.id, text)], [revcomp(pattern)], 2, both_strands=True)


def test_grep_real_genes_many_records(capsys):
    path = DATA / "genes100_CP040672.fna"
    records = [(r.id, str(r.seq)) for r in SeqIO.parse(path, "fasta")]
    names, batch = read_sequences(path)
    assert names == [name for name, _ in records] and batch.decode() == [seq.upper() for _, seq in records]
    name, seq = records[42]
    pattern = revcomp(seq[30:50])
    lines, err = grep(capsys, pattern, path, "-k", 1, "--both-strands")
    assert f"{name}\t30\t-\t0\t{pattern}" in lines
    assert "in 100 records" in err


# ---- torchalign dist -----------------------------------------------------------
def test_dist_matrix_fasta_against_lines(tmp_path, capsys):
    from rapidfuzz.distance import Levenshtein

    rng = random.Random(random.randrange(2**32))
    a = {f"r{i}": "".join(rng.choice("ACGT") for _ in range(rng.randint(0, 90))) for i in range(6)}
    b = ["".join(rng.choice("ACGTacgt") for _ in range(rng.randint(1, 70))) for _ in range(5)]
    fa, lines = tmp_path / "a.fa", tmp_path / "b.txt"
    fa.write_text("".join(f">{k} some description\n{v}\n" for k, v in a.items()))
    lines.write_text("\n".join(b[:2]) + "\n\n" + "\n".join(b[2:]) + "\n")  # a blank line is skipped
    assert main(["dist", str(fa), str(lines)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "#\t1\t2\t4\t5\t6"
    want = [[k] + [str(Levenshtein.distance(v, y)) for y in b] for k, v in a.items()]
    assert [row.split("\t") for row in out[1:]] == want
    assert main(["dist", str(fa), str(lines), "--alphabet", "dna", "--max-distance", "5"]) == 0
    out = capsys.readouterr().out.splitlines()
    want = [[k] + [str(min(Levenshtein.distance(v, y.upper()), 6)) for y in b] for k, v in a.items()]
    assert [row.split("\t") for row in out[1:]] == want


def test_dist_bad_input(tmp_path, capsys):
    f = tmp_path / "a.txt"
    f.write_text("ACGT\n")
    assert main(["dist", str(f), str(f), "--max-distance", "-1"]) == 2
    assert "--max-distance must be >= 0" in capsys.readouterr().err
    assert main(["dist", str(f), str(tmp_path / "missing.txt")]) == 2
    f.write_text("ACXT\n")
    assert main(["dist", str(f), str(f), "--alphabet", "dna"]) == 2
    assert "'X'" in capsys.readouterr().err
