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
    """Walk ``a``'s CIGAR over the two sequences from its start cell with the substitution
    matrix and the affine gap model (a gap of length L costs gap_open + (L - 1) *
    gap_extend); check that the walk ends at a's end cell, fits the mode and gives a's
    rows, markup and identity; return the score the walk adds up to (it never reads
    a.score)."""
    i, j, total, prev = a.query_start, a.target_start, 0, None
    cols = []  # (query symbol, markup, target symbol) of each column
    for op in expand(a.cigar):
        if op in "=X":
            assert i < len(q) and j < len(t), "the CIGAR runs past a sequence"
            x, y = q[i], t[j]
            assert (x == y) == (op == "=")
            s = sc.score(x, y)
            total += s
            cols.append((x, "|" if x == y else ":" if s > 0 else "." if s == 0 else " ", y))
            i, j = i + 1, j + 1
        else:
            assert (i < len(q)) if op == "I" else (j < len(t)), "the CIGAR runs past a sequence"
            total -= sc.gap_extend if prev == op else sc.gap_open
            cols.append((q[i], " ", "-") if op == "I" else ("-", " ", t[j]))
            i, j = (i + 1, j) if op == "I" else (i, j + 1)
        prev = op
    assert (i, j) == (a.query_end, a.target_end), "the CIGAR does not end at the alignment's end"
    if mode == "global":
        assert (a.query_start, a.query_end, a.target_start, a.target_end) == (0, len(q), 0, len(t))
    if mode == "semiglobal":
        assert (a.query_start, a.query_end) == (0, len(q))
    q_row, mark, t_row = ("".join(c) for c in zip(*cols)) if cols else ("", "", "")
    assert (q_row, mark, t_row) == (a.query_aligned, a.markup, a.target_aligned)
    assert a.matches == mark.count("|") and a.identity == (mark.count("|") / len(mark) if mark else 0.0)
    return total


def check_alignment(a: ta.Alignment, q: str, t: str, sc: ta.Scoring, mode: str):
    """a's score and ends are the plain Python DP's (reference.align_score) and its CIGAR
    re-scores to that score: both from sources independent of the op."""
    want = ref.align_score(q, t, sc.score, sc.gap_open, sc.gap_extend, mode)
    assert (a.score, a.query_end, a.target_end) == want, (mode, q, t)
    assert rescore(a, q, t, sc, mode) == want[0], (mode, q, t)


def run(qs, ts, sc, mode, device, **kw):
    return ta.traceback(ta.encode(qs, sc.alphabet, device), ta.encode(ts, sc.alphabet, device), sc, mode, **kw)


def as_tuple(a: ta.Alignment):
    return (a.score, a.query_start, a.query_end, a.target_start, a.target_end, expand(a.cigar))


def check_reference(device, rng, n=10, lengths=(0, 1, 2, 7, 16, 17, 40), modes=MODES, gaps=GAPS, scoring_kw=None,
                    letters=al.AA, bio=True):
    """Every alignment equals the cell-by-cell reference traceback (the plain Python DP's
    score and ends, the documented tie rule), its CIGAR re-scores to the reference's score,
    and it scores as Biopython's; where Biopython's optimal alignment is unique, it is ours."""
    unique = 0
    for mode in modes:
        for go, ge in gaps:
            sc = ta.Scoring(gap_open=go, gap_extend=ge, **(scoring_kw or {}))
            qs, ts = al.pairs(rng, n, lengths, letters)
            got = run(qs, ts, sc, mode, device)
            for a, q, t in zip(got, qs, ts):
                want = ref.traceback(q, t, sc.score, go, ge, mode)
                assert as_tuple(a) == want, (mode, go, ge, q, t)
                assert rescore(a, q, t, sc, mode) == want[0]
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


def check_dna(device, rng, n=10, gaps=((5, 2), (3, 3))):
    """match / mismatch scoring on DNA, N included."""
    check_reference(device, rng, n=n, lengths=(0, 1, 9, 30), gaps=gaps, scoring_kw=dict(match=2, mismatch=-3),
                    letters="ACGTN")


def check_edges(device):
    """Empty and length-1 sequences, X and * (X against X scores -1 but is identical)."""
    sc = ta.Scoring()
    qs = ["", "W", "", "W", "X*X", "MKV*", "A" * 20, "W", "XX"]
    ts = ["", "", "W", "W", "*XX", "MKV*", "A" * 20, "C", "XX"]
    for mode in MODES:
        got = run(qs, ts, sc, mode, device)
        for a, q, t in zip(got, qs, ts):
            want = ref.traceback(q, t, sc.score, 11, 1, mode)
            assert as_tuple(a) == want, (mode, q, t)
            assert rescore(a, q, t, sc, mode) == want[0]
    empty = run(["", "W"], ["W", "C"], sc, "local", device)
    assert [(a.score, a.cigar, a.identity, a.columns) for a in empty] == [(0, "", 0.0, 0)] * 2
    g = run(["XX"], ["XX"], sc, "global", device)[0]
    assert (g.score, g.cigar, g.identity, g.markup) == (-2, "2=", 1.0, "||")
    assert run([], [], sc, "local", device) == []


NOT_W = "ARNDCQEGHIKLMPSTV"  # BLOSUM62 scores each of these < 0 against W (F and Y score > 0)


def long_pair(rng, n: int):
    """(q, t, the reference traceback's tuple worked out by hand): q = W * n, t = W * a +
    P * 12 + W * b (a = n // 2, b = a - 7) inside flanks of 3 residues scoring < 0 against
    W. The best local alignment takes every W of t and crosses the P's as one gap of 12
    (cost 11 + 11 = 22; substituting them costs 12 x 4 = 48, a shorter gap plus
    substitutions more): score 11 (a + b) - 22 from (0, 3) to the smallest query end of
    that score, a + b, and target end 3 + a + 12 + b. n = 3,100: 34,001 > 32,767."""
    a, b = n // 2, n // 2 - 7
    q = "W" * n
    t = al.rand_protein(rng, 3, NOT_W) + "W" * a + "P" * 12 + "W" * b + al.rand_protein(rng, 3, NOT_W)
    return q, t, (11 * (a + b) - 22, 0, a + b, 3, 3 + a + 12 + b, "=" * a + "D" * 12 + "=" * b)


def check_long(device, rng, n=3100):
    """Scores past 32,767 against their values worked out by hand (long_pair; a global pair of
    W's with two of them against a gap: 11 (L - 2) - 12, the gap leading)."""
    sc = ta.Scoring()
    q, t, want = long_pair(rng, n)
    a = run([q], [t], sc, "local", device)[0]
    assert want[0] > 32767 and as_tuple(a) == want
    assert rescore(a, q, t, sc, "local") == want[0]
    short = q[: n // 4]
    g = run([short], [short[:-2]], sc, "global", device)[0]
    L = len(short)
    assert as_tuple(g) == (11 * (L - 2) - 12, 0, L, 0, L - 2, "II" + "=" * (L - 2))
    assert rescore(g, short, short[:-2], sc, "global") == g.score
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
    return pairs + [(p[10 : 10 + min(190, q_len)], p[:t_len]) for p in rng.sample(proteome, n)]  # a piece of itself


def check_top_hits(device, rng):
    """pairs= with ta.search's top hits: the same alignments as pairwise calls."""
    qs = [al.rand_protein(rng, rng.choice((5, 20, 40))) for _ in range(3)]
    db = [al.related(rng, rng.choice(qs)) if rng.random() < 0.6 else al.rand_protein(rng, 30) for _ in range(12)]
    q, d = ta.encode(qs, "protein", device), ta.encode(db, "protein", device)
    r = ta.search(q, d, top_k=3)
    pair_q = torch.arange(len(qs), device=device).repeat_interleave(3)
    got = ta.traceback(q, d, pairs=(pair_q, r.indices.flatten()))
    sc = ta.Scoring()
    for a, qi, ti in zip(got, pair_q.tolist(), r.indices.flatten().tolist()):
        check_alignment(a, qs[qi], db[ti], sc, "local")
    assert [a.score for a in got] == r.scores.flatten().tolist()
    assert [a.target_end for a in got] == r.ends.flatten().tolist()
    want = ta.traceback([qs[i] for i in pair_q.tolist()], [db[i] for i in r.indices.flatten().tolist()])
    assert got == want
