"""`torchalign primers ALPHA BETA -k K`: the TSV of candidate regions, against the reference."""

import pytest

from torchalign.cli import main

from .conftest import read_fasta
from .hamming_cases import rand_seq
from .primers_cases import dp_primers, related
from .test_cli import write_fasta


def run(capsys, *args):
    capsys.readouterr()  # (the rng fixture's seed line)
    code = main(["primers", *map(str, args)])
    out, err = capsys.readouterr()
    return code, out.splitlines(), err


def expected(records, beta_records, k, min_length=0):
    """Lines by the DP reference: a start's answer is 0 if some record holds its whole rest
    within k - 1, else the longest of the per-record answers."""
    lines = []
    for name, alpha in records:
        per = [dp_primers(alpha, beta, k) for _, beta in beta_records]
        want = [0 if 0 in col else max(col) for col in zip(*per)]
        lines += [f"{name}\t{r}\t{n}\t{alpha[r : r + n]}" for r, n in enumerate(want) if n and n >= min_length]
    return lines


def test_paper_example(tmp_path, capsys):
    a = write_fasta(tmp_path / "a.fa", [("alpha", "ACTG")])
    b = write_fasta(tmp_path / "b.fa", [("beta", "AGCAAG")])
    code, lines, err = run(capsys, a, b, "-k", 2, "--device", "cpu")
    assert code == 0
    assert lines == ["#record\tstart\tlength\tsequence", "alpha\t0\t3\tACT", "alpha\t1\t3\tCTG"]
    assert "2 regions from 4 starts" in err


def test_random_records_and_min_length(tmp_path, capsys, rng):
    records = [(f"r{i}", rand_seq(rng, rng.randint(0, 30))) for i in range(3)]
    alpha_all = "".join(s for _, s in records)
    beta = [("b0", related(rng, 0, 0, 0)[1] + alpha_all[5:25]), ("b1", rand_seq(rng, 20))]
    a = write_fasta(tmp_path / "a.fa", records)
    b = write_fasta(tmp_path / "b.fa", beta)
    k = rng.randint(1, 4)
    for min_length in (0, k + 2):
        code, lines, _ = run(capsys, a, b, "-k", k, "--min-length", min_length)
        assert code == 0
        assert lines[1:] == expected(records, beta, k, min_length)


def test_real_mitochondria_slice(tmp_path, capsys):
    human = read_fasta("MT-human.fa")[0][1][16000:16080]
    chimp = read_fasta("MT-chimp.fa")[0][1][15500:16800]
    a = write_fasta(tmp_path / "h.fa", [("human", human)], width=60)
    b = write_fasta(tmp_path / "c.fa", [("chimp", chimp)], width=60)
    code, lines, _ = run(capsys, a, b, "-k", 4, "--device", "cpu")
    assert code == 0 and len(lines) > 1
    assert lines[1:] == expected([("human", human)], [("chimp", chimp)], 4)


@pytest.mark.parametrize("args,message", [
    (["-k", "0"], "-k must be >= 1"),
    (["-k", "2", "--min-length", "-1"], "--min-length must be >= 0"),
])
def test_bad_arguments(tmp_path, capsys, args, message):
    a = write_fasta(tmp_path / "a.fa", [("a", "ACGT")])
    code, _, err = run(capsys, a, a, *args)
    assert code == 2 and message in err


def test_bad_files(tmp_path, capsys):
    a = write_fasta(tmp_path / "a.fa", [("a", "ACGT")])
    empty = tmp_path / "empty.fa"
    empty.write_text("")
    code, _, err = run(capsys, a, empty, "-k", 2)
    assert code == 2 and "no records" in err
    code, _, err = run(capsys, a, tmp_path / "missing.fa", "-k", 2)
    assert code == 2 and "missing.fa" in err
    bad = write_fasta(tmp_path / "bad.fa", [("x", "ACGU")])
    code, _, err = run(capsys, bad, a, "-k", 2)
    assert code == 2 and "symbol 'U'" in err
