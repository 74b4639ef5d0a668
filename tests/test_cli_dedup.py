"""``torchalign dedup FILE --max-distance K [--clusters]`` (issue 15, item 2): the pairs and the
connected components equal brute force on text lines, FASTA (gzip too) and FASTQ; user
errors are one line on stderr, exit status 2, nothing on stdout."""

import gzip
import random

import pytest

from torchalign.cli import main
from torchalign.cli_dedup import clusters

from . import reference as ref
from .hamming_cases import mutate, rand_seq
from .test_cli import write_fasta, write_fastq


def run(capsys, *args):
    """(exit code, stdout, stderr) of an in-process run."""
    capsys.readouterr()
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


def brute_pairs(seqs, k):
    return [(i, j, ref.levenshtein(seqs[i], seqs[j])) for i in range(len(seqs)) for j in range(i + 1, len(seqs))
            if ref.levenshtein(seqs[i], seqs[j]) <= k]


def brute_clusters(n, pairs):
    """Components by repeated merging of sets (no union-find), two or more members each."""
    groups = [{x} for x in range(n)]
    for i, j, _ in pairs:
        gi, gj = next(g for g in groups if i in g), next(g for g in groups if j in g)
        if gi is not gj:
            gi |= gj
            groups.remove(gj)
    return sorted(sorted(g) for g in groups if len(g) > 1)


def random_lines(rng, n, symbols="ab c"):
    out = []
    for _ in range(n):
        if out and rng.random() < 0.4:
            out.append(mutate(rng, rng.choice(out), rng.randint(0, 2), symbols))
        else:
            out.append(rand_seq(rng, rng.randint(1, 14), symbols).strip() or "x")
    return out


def pair_rows(out):
    lines = out.splitlines()
    assert lines[0] == "#i\tj\tname_i\tname_j\tdistance"
    return [line.split("\t") for line in lines[1:]]


@pytest.mark.parametrize("k", [0, 1, 3])
def test_lines_equal_brute_force(tmp_path, capsys, rng, k):
    seqs = random_lines(rng, 40)
    path = tmp_path / "lines.txt"
    # blank lines are skipped (a name is the line number), CRLF endings are not part of a line
    path.write_bytes(b"".join(s.encode() + (b"\r\n" if n % 3 else b"\n\n") for n, s in enumerate(seqs)))
    numbers = [str(n) for n, line in enumerate(path.read_bytes().split(b"\n"), 1) if line.rstrip(b"\r")]
    code, out, err = run(capsys, "dedup", path, "--max-distance", k, "--device", "cpu")
    assert code == 0, err
    want = brute_pairs(seqs, k)
    assert pair_rows(out) == [[str(i), str(j), numbers[i], numbers[j], str(d)] for i, j, d in want]
    assert f"{len(want)} pairs within {k} edits among 40 sequences" in err
    code, out, err = run(capsys, "dedup", path, "--max-distance", k, "--clusters", "--device", "cpu")
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0] == "#cluster\tsize\tindex\tname"
    got = {}
    for row in (line.split("\t") for line in lines[1:]):
        got.setdefault(int(row[0]), []).append(int(row[2]))
        assert int(row[1]) > 1 and row[3] == numbers[int(row[2])]
    assert [got[c] for c in sorted(got)] == brute_clusters(len(seqs), want)
    assert all(int(r.split("\t")[1]) == len(got[int(r.split("\t")[0])]) for r in lines[1:])


def test_fasta_gz_and_fastq(tmp_path, capsys):
    records = [("r1", "ACGTACGTAC"), ("r2", "ACGTACGTAA"), ("r3", "TTTT"), ("r4", "acgtacgtac"), ("r5", "TTTA")]
    fa = write_fasta(tmp_path / "s.fa", records)
    gz = tmp_path / "s.fa.gz"
    gz.write_bytes(gzip.compress(fa.read_bytes()))
    fq = write_fastq(tmp_path / "s.fq", records)
    for path in (fa, gz, fq):
        code, out, err = run(capsys, "dedup", path, "--max-distance", 1, "--device", "cpu")
        assert code == 0, err
        assert pair_rows(out) == [["0", "1", "r1", "r2", "1"], ["2", "4", "r3", "r5", "1"]]  # bytes: case counts
    code, out, err = run(capsys, "dedup", fa, "--max-distance", 1, "--alphabet", "dna", "--device", "cpu")
    assert [r[:2] for r in pair_rows(out)] == [["0", "1"], ["0", "3"], ["1", "3"], ["2", "4"]]
    code, out, err = run(capsys, "dedup", fa, "--max-distance", 1, "--alphabet", "dna", "--clusters",
                         "--device", "cpu")
    assert out.splitlines()[1:] == ["0\t3\t0\tr1", "0\t3\t1\tr2", "0\t3\t3\tr4", "1\t2\t2\tr3", "1\t2\t4\tr5"]


def test_first_character_decides_the_format(tmp_path, capsys):
    """No FASTA/FASTQ extension: a first non-blank '>' or '@' means FASTA/FASTQ, else lines."""
    text = tmp_path / "t.txt"
    text.write_text("abc\n@bc\nxyz\n")  # '@' on a later line: still lines
    code, out, err = run(capsys, "dedup", text, "--max-distance", 1, "--device", "cpu")
    assert code == 0 and pair_rows(out) == [["0", "1", "1", "2", "1"]], err
    fasta = tmp_path / "f.txt"
    fasta.write_text("\n>a\nabc\n>b\nabd\n")
    code, out, err = run(capsys, "dedup", fasta, "--max-distance", 1, "--device", "cpu")
    assert code == 0 and pair_rows(out) == [["0", "1", "a", "b", "1"]], err


def test_unicode_alphabet(tmp_path, capsys):
    path = tmp_path / "u.txt"
    path.write_text("naïve café\nnaive cafe\nnaïve cafe\n", encoding="utf-8")
    code, out, err = run(capsys, "dedup", path, "--max-distance", 1, "--alphabet", "unicode", "--device", "cpu")
    assert pair_rows(out) == [["0", "2", "1", "3", "1"], ["1", "2", "2", "3", "1"]]
    code, out, err = run(capsys, "dedup", path, "--max-distance", 2, "--device", "cpu")  # bytes: ï, é are 2
    assert pair_rows(out) == [["0", "2", "1", "3", "2"], ["1", "2", "2", "3", "2"]]


def test_no_pairs_and_huge_max_distance(tmp_path, capsys):
    path = tmp_path / "l.txt"
    path.write_text("aaaa\nbbbb\ncccc\n")
    code, out, err = run(capsys, "dedup", path, "--max-distance", 3, "--device", "cpu")
    assert code == 0 and out.splitlines() == ["#i\tj\tname_i\tname_j\tdistance"]
    code, out, err = run(capsys, "dedup", path, "--max-distance", 3, "--clusters", "--device", "cpu")
    assert code == 0 and out.splitlines() == ["#cluster\tsize\tindex\tname"] and "0 clusters" in err
    code, out, err = run(capsys, "dedup", path, "--max-distance", 2**63, "--device", "cpu")
    assert code == 0 and len(pair_rows(out)) == 3


def test_clusters_union_find_against_brute_force():
    rng = random.Random(7)
    for n in (0, 1, 5, 30):
        pairs = sorted({tuple(sorted(rng.sample(range(n), 2))) for _ in range(rng.randint(0, 2 * n))}) if n > 1 else []
        assert clusters(n, [p[0] for p in pairs], [p[1] for p in pairs]) == brute_clusters(n, [(*p, 0) for p in pairs])


@pytest.mark.parametrize("args,message", [
    (["--max-distance", "-1"], "--max-distance must be >= 0, got -1"),
    (["--max-distance", "1", "--max-pairs", "-3"], "--max-pairs must be >= 0, got -3"),
    (["--max-distance", "1", "--max-pairs", "2"],
     "3 pairs within --max-distance 1 exceed --max-pairs 2; pass --max-pairs 3 or more, or lower --max-distance"),
])
def test_bad_options_are_one_line_exit_2(tmp_path, capsys, args, message):
    path = tmp_path / "l.txt"
    path.write_text("abc\nabd\nabe\nxyz\n")
    code, out, err = run(capsys, "dedup", path, *args, "--device", "cpu")
    assert code == 2 and out == "" and err == f"torchalign dedup: error: {message}\n"


def test_missing_max_distance_is_a_usage_error(tmp_path, capsys):
    path = tmp_path / "l.txt"
    path.write_text("abc\n")
    code, out, err = run(capsys, "dedup", path)
    assert code == 2 and out == "" and "--max-distance" in err


@pytest.mark.parametrize("name,content,says", [
    ("missing.txt", None, "missing.txt"),
    ("empty.txt", b"", "empty.txt: holds no records; pass a file with sequences"),
    ("blank.txt", b"\n\n\r\n", "blank.txt: holds no records"),
    ("headers.fa", b">a\n>b\n", "headers.fa: its 2 records hold no residues"),
    ("binary.dat", bytes(range(256)) * 4, "binary.dat: not a text file"),
    ("latin1.txt", b"caf\xe9\ncafe\n", "latin1.txt: not UTF-8 text (byte 0xe9 near the start)"),
    ("cut.fa.gz", gzip.compress(b">r1\n" + b"ACGT" * 5000, mtime=0)[:60], "cut.fa.gz: "),
])
def test_messy_files_are_one_line_exit_2(tmp_path, capsys, name, content, says):
    path = tmp_path / name
    if content is not None:
        path.write_bytes(content)
    code, out, err = run(capsys, "dedup", path, "--max-distance", 1, "--device", "cpu")
    assert code == 2 and out == "", err
    assert err.count("\n") == 1 and err.startswith("torchalign dedup: error: ") and says in err, err


def test_bad_symbol_names_the_record(tmp_path, capsys):
    path = write_fasta(tmp_path / "s.fa", [("ok", "ACGT"), ("r2", "AC#GT")])
    code, out, err = run(capsys, "dedup", path, "--max-distance", 1, "--alphabet", "dna", "--device", "cpu")
    assert code == 2 and out == "" and "s.fa: record 'r2': symbol '#' at position 2" in err


def test_cuda_unavailable(tmp_path, capsys, monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    path = tmp_path / "l.txt"
    path.write_text("abc\n")
    code, out, err = run(capsys, "dedup", path, "--max-distance", 1, "--device", "cuda")
    assert code == 2 and out == "" and "--device cuda: CUDA is not available here; use --device cpu" in err


def test_example_script(tmp_path, rng):
    """examples/dedup.py as a user runs it (CPU), on its built-in lines and on a file: the
    pairs, the kept lines and each kept line's nearest kept line equal brute force."""
    import subprocess
    import sys

    from .conftest import REPO

    script = str(REPO / "examples" / "dedup.py")
    out = subprocess.run([sys.executable, script, "--device", "cpu"], capture_output=True, text=True, timeout=600,
                         check=True).stdout
    assert "kept 4 of 8 lines" in out and out.count(" edits: line ") == 4
    lines = random_lines(rng, 25)
    path = tmp_path / "lines.txt"
    path.write_text("\n".join(lines) + "\n")
    out = subprocess.run([sys.executable, script, str(path), "--max-distance", "2", "--device", "cpu"],
                         capture_output=True, text=True, timeout=600, check=True).stdout.splitlines()
    pairs = brute_pairs(lines, 2)
    assert out[: len(pairs)] == [f"{d} edits: line {i} {lines[i]!r} ~ line {j} {lines[j]!r}" for i, j, d in pairs]
    kept = [n for n in range(len(lines)) if n not in {j for _, j, _ in pairs}]
    assert out[len(pairs)] == f"kept {len(kept)} of {len(lines)} lines"
    want = []
    for a in kept:
        others = [(ref.levenshtein(lines[a], lines[b]), kept.index(b)) for b in kept if b != a]
        if others:
            d, m = min(others)
            want.append(f"line {a}: nearest kept line {kept[m]} at {d} edits")
    assert out[len(pairs) + 1:] == want
