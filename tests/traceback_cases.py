"""Traceback cases shared by the CPU, interpreter and GPU tiers."""

from __future__ import annotations

import itertools
import random

import torch

import torchalign as ta

from . import align_cases as al
from . import reference as ref

MODES = al.MODES
GAPS = ((11, 1), (10, 2), (5, 5), (3, 0), (0, 0))


def expand(cigar: str) -> str:
    """'2=1I' -> '==I'."""
    out, num = [], ""
    for c in cigar:
        if c.isdigit():
            num += c
        else:
            out.append(c * int(num))
            num = ""
    return "".join(out)


def rescore(a: ta.Alignment, q: str, t: str, sc: ta.Scoring, mode: str) -> int:
    """Check that ``a`` is an alignment of q[qs:qe] with t[ts:te] that fits the mode and
    agrees with its own CIGAR and rows; return its score recomputed from the sequences."""
    assert a.query_aligned.replace("-", "") == q[a.query_start : a.query_end]
    assert a.target_aligned.replace("-", "") == t[a.target_start : a.target_end]
    ops = expand(a.cigar)
    assert len(ops) == len(a.query_aligned) == len(a.target_aligned) == len(a.markup)
    if mode == "global":
        assert (a.query_start, a.query_end, a.target_start, a.target_end) == (0, len(q), 0, len(t))
    if mode == "semiglobal":
        assert (a.query_start, a.query_end) == (0, len(q))
    total, prev = 0, None
    for op, x, y, mark in zip(ops, a.query_aligned, a.target_aligned, a.markup):
        if op in "=X":
            assert (x == y) == (op == "=") and "-" not in (x, y)
            s = sc.score(x, y)
            total += s
            assert mark == ("|" if x == y else ":" if s > 0 else "." if s == 0 else " ")
        else:
            assert (x == "-") == (op == "D") and (y == "-") == (op == "I") and mark == " "
            total -= sc.gap_extend if prev == op else sc.gap_open
        prev = op
    matches = ops.count("=")
    assert a.matches == matches and a.identity == (matches / len(ops) if ops else 0.0)
    return total


def run(qs, ts, sc, mode, device, **kw):
    return ta.traceback(ta.encode(qs, sc.alphabet, device), ta.encode(ts, sc.alphabet, device), sc, mode, **kw)


def as_tuple(a: ta.Alignment):
    return (a.score, a.query_start, a.query_end, a.target_start, a.target_end, expand(a.cigar))


def check_reference(device, rng, n=10, lengths=(0, 1, 2, 7, 16, 17, 40), modes=MODES, gaps=GAPS, scoring_kw=None,
                    letters=al.AA, bio=True, scores=True):
    """Every alignment equals the cell-by-cell reference traceback (the documented tie
    rule), re-scores to align_score's score from the sequences (``scores``: and equals
    ta.align_score's score and ends), and scores as Biopython's; where Biopython's
    optimal alignment is unique, it is ours."""
    unique = 0
    for mode in modes:
        for go, ge in gaps:
            sc = ta.Scoring(gap_open=go, gap_extend=ge, **(scoring_kw or {}))
            qs, ts = al.pairs(rng, n, lengths, letters)
            got = run(qs, ts, sc, mode, device)
            for a, q, t in zip(got, qs, ts):
                assert as_tuple(a) == ref.traceback(q, t, sc.score, go, ge, mode), (mode, go, ge, q, t)
                assert rescore(a, q, t, sc, mode) == a.score
            if scores:
                s = ta.align_score(ta.encode(qs, sc.alphabet, device), ta.encode(ts, sc.alphabet, device), sc, mode)
                assert [(a.score, a.query_end, a.target_end) for a in got] == al.got_tuples(s)
            if bio:
                unique += check_biopython(got, qs, ts, sc, mode)
    assert unique > 0 or not bio, "no pair had a unique optimal alignment to compare with Biopython's"


def check_biopython(got, qs, ts, sc, mode):
    aligner = al.biopython(mode, sc)
    unique = 0
    for a, q, t in zip(got, qs, ts):
        if not (q and t):
            continue  # Biopython refuses empty sequences
        alns = aligner.align(t, q)
        assert alns.score == a.score
        try:
            count = len(alns)
        except OverflowError:
            continue
        if count == 1 and (a.score > 0 or mode != "local"):
            assert blocks(a) == bio_blocks(alns[0], mode), (mode, q, t)
            unique += 1
    return unique


def blocks(a: ta.Alignment):
    """The alignment as Biopython's coordinates: (target, query) at every block edge."""
    pts = [(a.target_start, a.query_start)]
    ops = expand(a.cigar).replace("X", "=")
    for op, run_ in itertools.groupby(ops):
        n = len(list(run_))
        tp, qp = pts[-1]
        pts.append((tp + n * (op != "I"), qp + n * (op != "D")))
    return pts if ops else []


def bio_blocks(aln, mode):
    pts = [tuple(int(x) for x in col) for col in aln.coordinates.T]
    # merge collinear edges (Biopython may split a block), drop semiglobal's free target flanks
    if mode == "semiglobal":
        while len(pts) > 1 and pts[1][1] == pts[0][1]:
            pts.pop(0)
        while len(pts) > 1 and pts[-2][1] == pts[-1][1]:
            pts.pop()
    return pts


def check_dna(device, rng, n=10):
    """match / mismatch scoring on DNA, N included."""
    check_reference(device, rng, n=n, lengths=(0, 1, 9, 30), gaps=((5, 2), (3, 3)),
                    scoring_kw=dict(match=2, mismatch=-3), letters="ACGTN")


def check_edges(device):
    """Empty and length-1 sequences, X and * (X against X scores -1 but is identical)."""
    sc = ta.Scoring()
    qs = ["", "W", "", "W", "X*X", "MKV*", "A" * 20, "W", "XX"]
    ts = ["", "", "W", "W", "*XX", "MKV*", "A" * 20, "C", "XX"]
    for mode in MODES:
        got = run(qs, ts, sc, mode, device)
        for a, q, t in zip(got, qs, ts):
            assert as_tuple(a) == ref.traceback(q, t, sc.score, 11, 1, mode), (mode, q, t)
            assert rescore(a, q, t, sc, mode) == a.score
    empty = run(["", "W"], ["W", "C"], sc, "local", device)
    assert [(a.score, a.cigar, a.identity, a.columns) for a in empty] == [(0, "", 0.0, 0)] * 2
    g = run(["XX"], ["XX"], sc, "global", device)[0]
    assert (g.score, g.cigar, g.identity, g.markup) == (-2, "2=", 1.0, "||")
    assert run([], [], sc, "local", device) == []


def check_long(device, rng, n=3100, scores=True):
    """A score past 32,767: a long pair whose path crosses a gap of 12 (cheaper than 12 substitutions)
    (``scores``: its score and ends equal ta.align_score's, one more DP of the pair)."""
    q = "W" * n
    t = al.rand_protein(rng, 3) + "W" * (n // 2) + "P" * 12 + "W" * (n // 2 - 7) + al.rand_protein(rng, 3)
    sc = ta.Scoring()
    a = run([q], [t], sc, "local", device)[0]
    assert a.score > 32767 and rescore(a, q, t, sc, "local") == a.score
    assert "12D" in a.cigar and a.target_end - a.target_start == a.query_end - a.query_start + 12
    if scores:
        s = ta.align_score(ta.encode([q], "protein", device), ta.encode([t], "protein", device), sc, "local")
        assert (a.score, a.query_end, a.target_end) == (s.score.item(), s.query_end.item(), s.target_end.item())
    short = q[: n // 4]
    g = run([short], [short[:-2]], sc, "global", device)[0]
    assert g.score == 11 * (len(short) - 2) - 12 and expand(g.cigar).count("I") == 2
    return a


def check_parasail(device, pairs_, modes=MODES):
    """Against parasail's traceback functions: the score and, where the score is positive,
    the ends; parasail's own alignment re-scores to the same score (so both are optimal)."""
    import parasail

    sc = ta.Scoring()
    fns = {"local": parasail.sw_trace_scan_32, "global": parasail.nw_trace_scan_32,
           "semiglobal": parasail.sg_dx_trace_scan_32}
    qs, ts = (list(x) for x in zip(*pairs_))
    for mode in modes:
        got = run(qs, ts, sc, mode, device)
        for a, q, t in zip(got, qs, ts):
            r = fns[mode](q, t, sc.gap_open, sc.gap_extend, parasail.blosum62)
            assert a.score == r.score == rescore(a, q, t, sc, mode), (mode, q[:20], t[:20])
            if mode != "global" and a.score > 0:
                assert (a.query_end, a.target_end) == (r.end_query + 1, r.end_ref + 1)
            tb = r.traceback  # parasail's rows: query, comparison, reference (target)
            assert _row_score(tb.query, tb.ref, sc, mode) == r.score


def _row_score(qrow: str, trow: str, sc: ta.Scoring, mode: str) -> int:
    """The score of two gapped rows (semiglobal: target residues at either end are free)."""
    cols = list(zip(qrow, trow))
    if mode == "semiglobal":
        while cols and cols[0][0] == "-":
            cols.pop(0)
        while cols and cols[-1][0] == "-":
            cols.pop()
    total, prev = 0, None
    for x, y in cols:
        op = "I" if y == "-" else "D" if x == "-" else "M"
        total += sc.score(x, y) if op == "M" else -(sc.gap_extend if prev == op else sc.gap_open)
        prev = op
    return total


def same_as_cpu(got, qs, ts, sc, mode):
    """The device's alignments equal the CPU implementation's, field by field."""
    want = run(qs, ts, sc, mode, "cpu")
    assert got == want


def real_pairs(rng: random.Random, queries, proteome, n=4, q_len=300, t_len=400):
    pairs = [(rng.choice(queries)[:q_len], rng.choice(proteome)[:t_len]) for _ in range(n)]
    return pairs + [(p[10:200], p[: t_len]) for p in rng.sample(proteome, n)]  # a protein and a piece of itself


def check_top_hits(device, rng):
    """pairs= with ta.search's top hits: the same alignments as pairwise calls."""
    qs = [al.rand_protein(rng, rng.choice((5, 20, 40))) for _ in range(3)]
    db = [al.related(rng, rng.choice(qs)) if rng.random() < 0.6 else al.rand_protein(rng, 30) for _ in range(12)]
    q, d = ta.encode(qs, "protein", device), ta.encode(db, "protein", device)
    r = ta.search(q, d, top_k=3)
    pair_q = torch.arange(len(qs), device=device).repeat_interleave(3)
    got = ta.traceback(q, d, pairs=(pair_q, r.indices.flatten()))
    assert [a.score for a in got] == r.scores.flatten().tolist()
    assert [a.target_end for a in got] == r.ends.flatten().tolist()
    want = ta.traceback([qs[i] for i in pair_q.tolist()], [db[i] for i in r.indices.flatten().tolist()])
    assert got == want
