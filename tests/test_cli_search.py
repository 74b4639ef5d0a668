"""`torchalign search QUERIES DATABASE`: BLAST-like hits, checked against Biopython."""

import re

import pytest
import torch

import torchalign as ta
from torchalign.cli import main

from . import reference as ref
from .align_cases import biopython, rand_protein, related
from .test_cli import write_fasta

HEADER = "#query\ttarget\tscore\tidentity\tquery_start\tquery_end\ttarget_start\ttarget_end"


def run(capsys, *args):
    capsys.readouterr()  # (the rng fixture's seed line)
    code = main(["search", *map(str, args)])
    out, err = capsys.readouterr()
    return code, out.splitlines(), err


def check_hits(lines, queries, db, scoring, mode, top, cigar):
    """Each query's hits: Biopython's best scores in order (ties: the earlier target), and
    coordinates, identity and CIGAR that agree with each other and re-score to the score."""
    assert lines[0] == HEADER + ("\tcigar" if cigar else "")
    rows = [line.split("\t") for line in lines[1:]]
    aligner = biopython(mode, scoring)
    names = [n for n, _ in db]
    table, index = scoring.table.tolist(), {c: i for i, c in enumerate(scoring.symbols)}
    at = 0
    for qname, q in queries:
        want = sorted(((-_score(aligner, scoring, mode, q, t), i) for i, (_, t) in enumerate(db)))
        want = [(int(-s), names[i]) for s, i in want[: min(top, len(db))]]
        got = rows[at : at + len(want)]
        at += len(want)
        assert [r[0] for r in got] == [qname] * len(want)
        assert [(int(r[2]), r[1]) for r in got] == want
        for r in got:
            score, qs, qe, ts, te = int(r[2]), *map(int, r[4:8])
            t = dict(db)[r[1]]
            assert 0 <= qs <= qe <= len(q) and 0 <= ts <= te <= len(t)
            if not cigar:
                continue
            ops = re.findall(r"(\d+)([=XID])", r[8]) if r[8] != "*" else []
            assert "".join(n + o for n, o in ops) == (r[8] if r[8] != "*" else "")
            columns = sum(int(n) for n, _ in ops)
            matches = sum(int(n) for n, o in ops if o == "=")
            assert r[3] == f"{100 * matches / columns if columns else 0:.1f}"
            assert qe - qs == sum(int(n) for n, o in ops if o in "=XI")
            assert te - ts == sum(int(n) for n, o in ops if o in "=XD")
            assert _rescore(ops, q[qs:qe], t[ts:te], table, index, scoring) == score
    assert at == len(rows)


def _score(aligner, scoring, mode, q, t):
    """Biopython's score; the cell-by-cell reference where a sequence is empty (Biopython refuses)."""
    if q and t:
        return aligner.score(t, q)  # Biopython: target first (its deletions are gaps in the query)
    return ref.align_score(q, t, scoring.score, scoring.gap_open, scoring.gap_extend, mode)[0]


def _rescore(ops, q, t, table, index, scoring):
    total, i, j = 0, 0, 0
    for n, o in ops:
        n = int(n)
        if o in "=X":
            total += sum(table[index[q[i + d]]][index[t[j + d]]] for d in range(n))
            i, j = i + n, j + n
        else:
            total -= scoring.gap_open + (n - 1) * scoring.gap_extend
            i, j = (i + n, j) if o == "I" else (i, j + n)
    return total


@pytest.mark.parametrize("mode", ["local", "global", "semiglobal"])
def test_protein_random_against_biopython(tmp_path, capsys, rng, mode):
    queries = [(f"q{i}", rand_protein(rng, rng.choice([1, 9, 30, 45]))) for i in range(3)]
    db = [(f"t{i}", related(rng, queries[i % 3][1]) if i % 2 else rand_protein(rng, rng.randint(0, 50)))
          for i in range(11)]
    code, lines, err = run(capsys, write_fasta(tmp_path / "q.fa", queries), write_fasta(tmp_path / "d.fa", db),
                           "--top", 4, "--mode", mode, "--align", "--device", "cpu")
    assert code == 0, err
    check_hits(lines, queries, db, ta.Scoring("BLOSUM62"), mode, 4, cigar=True)
    assert "3 queries x 11 sequences" in err and "GCUPS), 12 hits aligned" in err and "on cpu" in err


def test_dna_scoring_gaps_and_top_past_database(tmp_path, capsys, rng):
    queries = [(f"read{i}", rand_protein(rng, rng.randint(5, 40), "ACGT")) for i in range(2)]
    db = [(f"g{i}", related(rng, queries[i % 2][1], "ACGT")) for i in range(3)]
    code, lines, err = run(capsys, write_fasta(tmp_path / "q.fa", queries), write_fasta(tmp_path / "d.fa", db),
                           "--match", 2, "--mismatch", -3, "--gap-open", 5, "--gap-extend", 2, "--top", 10,
                           "--device", "cpu")
    assert code == 0, err
    scoring = ta.Scoring(match=2, mismatch=-3, gap_open=5, gap_extend=2)
    check_hits(lines, queries, db, scoring, "local", 10, cigar=False)
    assert len(lines) == 1 + 2 * 3  # every target once per query, no padding rows


def test_real_query_finds_itself(capsys, tmp_path):
    """A bundled query planted among proteome sequences is its own best hit, 100 % identity."""
    from .conftest import read_fasta

    proteome = read_fasta("proteome_HG003687.fa")[:40]
    name, query = read_fasta("swissprot_queries20.fa")[0]
    db = proteome[:20] + [("planted", query)] + proteome[20:]
    code, lines, err = run(capsys, write_fasta(tmp_path / "q.fa", [(name, query)], width=60),
                           write_fasta(tmp_path / "d.fa", db, width=60), "--top", 3, "--align", "--device", "cpu")
    assert code == 0, err
    best = lines[1].split("\t")
    score = ta.align_score([query], [query]).score.item()
    assert best[1:] == ["planted", str(score), "100.0", "0", str(len(query)), "0", str(len(query)), f"{len(query)}="]
    check_hits(lines, [(name, query)], db, ta.Scoring("BLOSUM62"), "local", 3, cigar=True)


@pytest.mark.parametrize("args, message", [
    (["--top", "0"], "--top must be >= 1"),
    (["--match", "2"], "--match and --mismatch go together"),
    (["--matrix", "BLOSUM999"], "BLOSUM999"),
    (["--gap-open", "-1"], "gap_open"),
])
def test_bad_arguments(tmp_path, capsys, args, message):
    q = write_fasta(tmp_path / "q.fa", [("q", "HEAGAWGHEE")])
    code, _, err = run(capsys, q, q, *args, "--device", "cpu")
    assert code == 2 and message in err


def test_bad_files(tmp_path, capsys):
    q = write_fasta(tmp_path / "q.fa", [("q", "HEAGAWGHEE")])
    empty = tmp_path / "empty.fa"
    empty.write_text("")
    code, _, err = run(capsys, q, empty, "--device", "cpu")
    assert code == 2 and f"database {empty}: holds no records" in err
    bad = write_fasta(tmp_path / "bad.fa", [("b", "HEA#GAW")])
    code, _, err = run(capsys, bad, q, "--device", "cpu")
    assert code == 2 and "queries" in err and "bad.fa" in err
    code, _, err = run(capsys, q, tmp_path / "missing.fa", "--device", "cpu")
    assert code == 2 and "missing.fa" in err


@pytest.mark.parametrize("mode", ["local", "global", "semiglobal"])
def test_hits_cut_to_their_rectangle_align_as_whole_pairs(rng, mode):
    # the command traces each hit in the rectangle up to its ends: the same alignment as the
    # whole pair gives (ties included: low-complexity targets make many)
    from torchalign.cli_search import _alignments

    queries = [rand_protein(rng, rng.randint(1, 60)) for _ in range(4)] + ["AAAAGGGG"]
    db = [related(rng, queries[i % 4]) for i in range(12)] + [rand_protein(rng, rng.randint(1, 200)) for _ in range(12)]
    db += ["AAAAAAAAGGGGAAAAGGGG" * 3, "G", "W" * 50]
    sc = ta.Scoring()
    Q, D = ta.encode(queries, "protein"), ta.encode(db, "protein")
    r = ta.search(Q, D, sc, top_k=8, mode=mode)
    pair_q = torch.arange(len(queries)).repeat_interleave(8)
    cut = _alignments(Q, D, sc, mode, pair_q, r.indices.reshape(-1), r.query_ends.reshape(-1), r.ends.reshape(-1))
    whole = ta.traceback(Q, D, sc, mode, pairs=(pair_q, r.indices.reshape(-1)))
    assert cut == whole
    assert [a.score for a in cut] == r.scores.reshape(-1).tolist()
