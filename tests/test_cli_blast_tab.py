"""`torchalign search --outfmt 6`: BLAST's 12 tabular columns, read back with Biopython's
blast-tab parser; coordinates, identity, mismatches and gap openings against Biopython's
PairwiseAligner; bit scores and E-values from lambda and K written out here."""

import math

import pytest
from Bio import SearchIO

import torchalign as ta
from torchalign.blast_tab import bits_text, evalue_text
from torchalign.cli import main

from .align_cases import biopython, related
from .conftest import read_fasta
from .test_cli import write_fasta

TOP = 4
# BLOSUM62 with BLAST's gap costs 11 / 1 (torchalign's --gap-open 12): lambda and K from
# NCBI BLAST+'s blast_stat.c, blosum62_values
LAMBDA, K = 0.267, 0.041


def run(capsys, *args):
    capsys.readouterr()  # (the rng fixture's seed line)
    code = main(["search", *map(str, args), "--device", "cpu"])
    out, err = capsys.readouterr()
    return code, out, err


def protein_files(tmp_path, rng):
    """3 real protein starts as queries; a database of edited copies of them (hits with
    gaps and substitutions) and of other real proteins."""
    proteins = read_fasta("proteome_HG003687.fa")
    queries = [(name, seq[:70]) for name, seq in proteins[:3]]
    db = [(f"copy{i}", related(rng, queries[i % 3][1])) for i in range(6)]
    db += [(name, seq[:90]) for name, seq in proteins[3:8]]
    return queries, db, write_fasta(tmp_path / "q.fa", queries), write_fasta(tmp_path / "db.fa", db)


def parse(tmp_path, out):
    """(the hits as Biopython reads them, in file order; the text rows)."""
    path = tmp_path / "hits.tsv"
    path.write_text(out)
    hsps = [(qres.id, hit.id, hsp) for qres in SearchIO.parse(path, "blast-tab") for hit in qres for hsp in hit]
    rows = [line.split("\t") for line in out.splitlines()]
    assert len(hsps) == len(rows) and all(len(r) == 12 for r in rows)
    return hsps, rows


def test_columns_against_biopython(tmp_path, capsys, rng):
    queries, db, q_path, db_path = protein_files(tmp_path, rng)
    code, out, err = run(capsys, q_path, db_path, "--outfmt", 6, "--gap-open", 12, "--top", TOP)
    assert code == 0, err
    hsps, rows = parse(tmp_path, out)
    aligner = biopython("local", ta.Scoring("BLOSUM62", 12, 1))
    targets, n_db = dict(db), sum(len(t) for _, t in db)
    # the hits: each query's TOP best scores (ties: the earlier target), as in the default output
    want = []
    for qname, q in queries:
        best = sorted((-aligner.score(t, q), i) for i, (_, t) in enumerate(db))[:TOP]
        want += [(qname, db[i][0]) for s, i in best if s < 0]
    assert [(qid, hid) for qid, hid, _ in hsps] == want
    unique = 0
    for (qid, hid, hsp), row in zip(hsps, rows):
        q, t = dict(queries)[qid], targets[hid]
        alns = aligner.align(t, q)  # Biopython: target first
        score = alns.score
        # statistics by hand, printed as BLAST prints them
        evalue = K * len(q) * n_db * math.exp(-LAMBDA * score)
        assert row[10:] == [evalue_text(evalue), bits_text((LAMBDA * score - math.log(K)) / math.log(2))]
        assert (hsp.evalue, hsp.bitscore) == (float(row[10]), float(row[11]))
        # 1-based inclusive in the file: Biopython's reader turns them back into 0-based, end exclusive
        assert row[6:10] == [str(hsp.query_start + 1), str(hsp.query_end), str(hsp.hit_start + 1), str(hsp.hit_end)]
        assert 0 <= hsp.query_start < hsp.query_end <= len(q) and 0 <= hsp.hit_start < hsp.hit_end <= len(t)
        if len(alns) != 1:
            continue  # co-optimal alignments: Biopython's may be another one
        aln, unique = alns[0], unique + 1
        (t0, *_, t1), (q0, *_, q1) = aln.coordinates.tolist()
        assert (hsp.query_start, hsp.query_end, hsp.hit_start, hsp.hit_end) == (q0, q1, t0, t1)
        counts = aln.counts()
        assert hsp.aln_span == aln.length
        assert row[2] == f"{100 * counts.identities / aln.length:.3f}"
        assert hsp.mismatch_num == counts.mismatches and hsp.gapopen_num == counts.open_gaps
    assert unique >= 3, "too few hits with one optimal alignment to compare with Biopython's"


def test_evalue_keeps_hits_at_or_below(tmp_path, capsys, rng):
    queries, db, q_path, db_path = protein_files(tmp_path, rng)
    args = (q_path, db_path, "--outfmt", 6, "--gap-open", 12, "--top", TOP)
    code, out, _ = run(capsys, *args)
    lines = out.splitlines(keepends=True)
    scores = {(qn, tn): biopython("local", ta.Scoring("BLOSUM62", 12, 1)).score(t, q) for qn, q in queries
              for tn, t in db}
    n_db, q_len = sum(len(t) for _, t in db), dict(queries)
    exact = [K * len(q_len[line.split("\t")[0]]) * n_db * math.exp(-LAMBDA * scores[tuple(line.split("\t")[:2])])
             for line in lines]
    cut = sorted(exact)[len(exact) // 2]  # a hit's own E-value: kept (at or below)
    assert min(exact) < cut < max(exact)
    code, kept, _ = run(capsys, *args, "--evalue", repr(cut))
    assert code == 0
    assert kept == "".join(line for line, e in zip(lines, exact) if e <= cut)
    # --no-evalue: the same hits, NaN for the statistics, still a blast-tab file
    code, plain, _ = run(capsys, *args, "--no-evalue")
    assert code == 0
    assert [r.split("\t")[:10] + ["NaN", "NaN"] for r in out.splitlines()] == [r.split("\t") for r in plain.splitlines()]
    hsps, _ = parse(tmp_path, plain)
    assert all(math.isnan(h.evalue) and math.isnan(h.bitscore) for _, _, h in hsps)


def test_global_with_no_evalue(tmp_path, capsys, rng):
    """Coordinates of global alignments cover the whole query and target."""
    queries, db, q_path, db_path = protein_files(tmp_path, rng)
    code, out, err = run(capsys, q_path, db_path, "--outfmt", 6, "--mode", "global", "--no-evalue", "--top", 2)
    assert code == 0, err
    hsps, rows = parse(tmp_path, out)
    for (qid, hid, hsp), row in zip(hsps, rows):
        assert (hsp.query_start, hsp.query_end) == (0, len(dict(queries)[qid]))
        assert (hsp.hit_start, hsp.hit_end) == (0, len(dict(db)[hid]))


def test_dna_even_scores(tmp_path, capsys):
    """match 2 / mismatch -3 with BLAST's gap costs 5 / 2 (--gap-open 7): lambda 0.625, K
    0.41 for even scores; an odd score (a 3-base gap: 2 x 77 - (7 + 2 x 2)) counts as the even one below."""
    mt = read_fasta("MT-chimp.fa")[0][1]
    q = mt[1000:1080]
    db = [("gapped", mt[900:1040] + mt[1043:1200]), ("other", mt[5000:5300])]
    q_path, db_path = write_fasta(tmp_path / "q.fa", [("q", q)]), write_fasta(tmp_path / "db.fa", db)
    code, out, err = run(capsys, q_path, db_path, "--outfmt", 6, "--match", 2, "--mismatch", -3, "--gap-open", 7,
                         "--gap-extend", 2, "--top", 1)
    assert code == 0, err
    hsps, rows = parse(tmp_path, out)
    assert [r[:10] for r in rows] == [["q", "gapped", "96.250", "80", "0", "1", "1", "80", "101", "177"]]
    score = 2 * 77 - (7 + 2 * 2)
    assert biopython("local", ta.Scoring(match=2, mismatch=-3, gap_open=7, gap_extend=2)).score(db[0][1], q) == score
    even = score - 1
    n_db = sum(len(t) for _, t in db)
    assert rows[0][10:] == [evalue_text(0.41 * 80 * n_db * math.exp(-0.625 * even)),
                            bits_text((0.625 * even - math.log(0.41)) / math.log(2))]


def test_empty_alignments_are_no_hits(tmp_path, capsys):
    """W scores below zero against P and G: every local alignment is empty, no line."""
    q_path = write_fasta(tmp_path / "q.fa", [("w", "WWW")])
    db_path = write_fasta(tmp_path / "db.fa", [("p", "PPPP"), ("g", "GGGG")])
    code, out, err = run(capsys, q_path, db_path, "--outfmt", 6)
    assert (code, out) == (0, "")
    code, out, err = run(capsys, q_path, db_path)  # the default output still lists them
    assert code == 0 and len(out.splitlines()) == 3


@pytest.mark.parametrize("args, names", [
    (["--gap-open", 20], ["--gap-open/--gap-extend", "12/1", "--no-evalue"]),
    (["--matrix", "BLOSUM80"], ["--matrix", "BLOSUM62", "--no-evalue"]),
    (["--match", 2, "--mismatch", -9], ["--match/--mismatch", "2/-7", "--no-evalue"]),
    (["--mode", "global"], ["--mode global", "--no-evalue"]),
    (["--align"], ["--align", "--outfmt 6"]),
    (["--evalue", -1], ["--evalue", ">= 0"]),
    (["--evalue", 1, "--no-evalue"], ["--evalue", "--no-evalue"]),
])
def test_usage_errors(tmp_path, capsys, args, names):
    """One line on stderr naming the option and the fix, exit 2, nothing on stdout (before
    any file is read: the files here do not exist)."""
    code, out, err = run(capsys, tmp_path / "none.fa", tmp_path / "none.fa", "--outfmt", 6, *args)
    assert (code, out) == (2, "")
    assert err.startswith("torchalign search: error: ") and err.count("\n") == 1
    assert all(n in err for n in names), err


@pytest.mark.parametrize("option", [["--evalue", 1], ["--no-evalue"]])
def test_statistics_options_need_outfmt_6(tmp_path, capsys, option):
    code, out, err = run(capsys, tmp_path / "none.fa", tmp_path / "none.fa", *option)
    assert (code, out) == (2, "") and "--outfmt 6" in err and err.count("\n") == 1


@pytest.mark.parametrize("e, text", [
    (1e-181, "0.0"), (0.99e-180, "0.0"), (1.0e-180, "1.00e-180"), (2.7345e-67, "2.73e-67"), (8.99e-4, "8.99e-04"),
    (0.0009, "0.001"), (0.05, "0.050"), (0.0999, "0.100"), (0.1, "0.10"), (0.5, "0.50"), (0.999, "1.00"),
    (1.0, "1.0"), (5.26, "5.3"), (10.0, "10"), (123.4, "123"), (2.5e6, "2500000"),
])
def test_evalue_text_is_blasts(e, text):
    """GetScoreString's ranges (align_format_util.cpp), %.2e below 0.0009 (tabular.cpp)."""
    assert evalue_text(e) == text


@pytest.mark.parametrize("bits, text", [
    (5.0, " 5.0"), (9.96, "10.0"), (43.128, "43.1"), (99.9, "99.9"), (99.95, " 99"), (100.7, "100"),
    (1234.9, "1234"), (99999.0, "99999"), (123456.0, "1.235e+05"),
])
def test_bits_text_is_blasts(bits, text):
    """%4.1lf up to 99.9, the integer part above, %5.3le above 99999 (GetScoreString)."""
    assert bits_text(bits) == text
