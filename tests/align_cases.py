"""Alignment-score cases shared by the CPU, interpreter and GPU tiers."""

from __future__ import annotations

import random

import torch
from Bio import Align

import torchalign as ta

from . import reference as ref

AA = "ARNDCQEGHILKMFPSTWYV"
MODES = ("local", "global", "semiglobal")
GAPS = ((11, 1), (10, 2), (5, 5), (3, 0), (0, 0))


def rand_protein(rng: random.Random, n: int, letters=AA) -> str:
    return "".join(rng.choice(letters) for _ in range(n))


def related(rng: random.Random, q: str, letters=AA) -> str:
    """A target holding an edited copy of part of q inside random flanks."""
    core = list(q[rng.randint(0, len(q) // 3) :])
    for _ in range(rng.randint(0, max(1, len(core) // 5))):
        if core and rng.random() < 0.6:
            core[rng.randrange(len(core))] = rng.choice(letters)
        elif core and rng.random() < 0.5:
            del core[rng.randrange(len(core))]
        else:
            core.insert(rng.randint(0, len(core)), rng.choice(letters))
    return rand_protein(rng, rng.randint(0, 8), letters) + "".join(core) + rand_protein(rng, rng.randint(0, 8), letters)


def pairs(rng: random.Random, n: int, lengths, letters=AA, t_lengths=None):
    """n (query, target) pairs, queries of ``lengths``; targets mostly related to their query,
    or with ``t_lengths`` random of those lengths (short targets: cheap DPs of long queries)."""
    qs = [rand_protein(rng, rng.choice(lengths), letters) for _ in range(n)]
    if t_lengths:
        return qs, [rand_protein(rng, rng.choice(t_lengths), letters) for _ in qs]
    ts = [related(rng, q, letters) if q and rng.random() < 0.6 else rand_protein(rng, rng.choice(lengths), letters)
          for q in qs]
    return qs, ts


def biopython(mode: str, scoring: ta.Scoring) -> Align.PairwiseAligner:
    """Biopython's aligner for a mode: semiglobal frees the target's end residues (gaps
    at the query's ends, which Biopython calls deletions)."""
    a = Align.PairwiseAligner()
    a.substitution_matrix = _bio_matrix(scoring)
    a.open_gap_score, a.extend_gap_score = -scoring.gap_open, -scoring.gap_extend
    a.mode = "local" if mode == "local" else "global"
    if mode == "semiglobal":
        a.open_left_deletion_score = a.extend_left_deletion_score = 0
        a.open_right_deletion_score = a.extend_right_deletion_score = 0
    return a


def _bio_matrix(scoring: ta.Scoring):
    from Bio.Align.substitution_matrices import Array

    letters = scoring.symbols
    return Array(alphabet=letters, dims=2, data=scoring.table.numpy().astype(float))


def got_tuples(s: ta.Scores):
    assert s.score.dtype == torch.int32 and s.query_end.dtype == torch.int64 and s.target_end.dtype == torch.int64
    return list(zip(s.score.tolist(), s.query_end.tolist(), s.target_end.tolist()))


def check_reference(device, rng, n=12, lengths=(0, 1, 2, 7, 16, 17, 40), modes=MODES, gaps=GAPS,
                    scoring_kw=None, letters=AA, t_lengths=None):
    """Scores and ends equal the cell-by-cell reference; scores equal Biopython's."""
    for mode in modes:
        for go, ge in gaps:
            sc = ta.Scoring(gap_open=go, gap_extend=ge, **(scoring_kw or {}))
            qs, ts = pairs(rng, n, lengths, letters, t_lengths)
            got = got_tuples(ta.align_score(ta.encode(qs, sc.alphabet, device), ta.encode(ts, sc.alphabet, device),
                                            sc, mode))
            assert got == [ref.align_score(q, t, sc.score, go, ge, mode) for q, t in zip(qs, ts)], (mode, go, ge)
            bio = biopython(mode, sc)
            # Biopython refuses empty sequences; the reference covers them
            assert [g[0] for g, q, t in zip(got, qs, ts) if q and t] == [bio.score(t, q) for q, t in zip(qs, ts)
                                                                       if q and t]


def check_parasail(device, rng, pairs_, scoring=None):
    """Scores against parasail (32-bit striped/scan), ends too where the best is positive
    (parasail's are 0-based inclusive)."""
    import parasail

    sc = scoring or ta.Scoring()
    matrix = parasail.matrix_create(sc.symbols, 0, 0)
    for i, a in enumerate(sc.symbols):
        for j, b in enumerate(sc.symbols):
            matrix[i, j] = int(sc.table[i, j])
    qs, ts = zip(*pairs_)
    for mode, fn in (("local", parasail.sw_trace_scan_32), ("global", parasail.nw_trace_scan_32),
                     ("semiglobal", parasail.sg_dx_trace_scan_32)):
        got = got_tuples(ta.align_score(ta.encode(list(qs), sc.alphabet, device),
                                        ta.encode(list(ts), sc.alphabet, device), sc, mode))
        for (s, qe, te), q, t in zip(got, qs, ts):
            r = fn(q, t, sc.gap_open, sc.gap_extend, matrix)
            assert s == r.score, (mode, q[:20], t[:20])
            if mode != "global" and s > 0:
                assert (qe, te) == (r.end_query + 1, r.end_ref + 1), mode


def check_dna(device, rng, n=10):
    """match / mismatch scoring on DNA, IUPAC N included (equal codes score match)."""
    check_reference(device, rng, n=n, lengths=(0, 1, 9, 30), gaps=((5, 2), (3, 3)),
                    scoring_kw=dict(match=2, mismatch=-3), letters="ACGTN")


def check_edges(device):
    sc = ta.Scoring()
    qs = ["", "W", "", "W", "X*X", "MKV*", "A" * 20]
    ts = ["", "", "W", "W", "*XX", "MKV*", "A" * 20]
    for mode in MODES:
        got = got_tuples(ta.align_score(ta.encode(qs, "protein", device), ta.encode(ts, "protein", device), sc, mode))
        assert got == [ref.align_score(q, t, sc.score, 11, 1, mode) for q, t in zip(qs, ts)], mode
    got = ta.align_score(ta.encode([], "protein", device), ta.encode([], "protein", device), sc)
    assert got.score.shape == (0,) and got.score.device.type == torch.device(device).type


def check_long_scores(device, rng, n=3000):
    """Scores past the int16 range (32,767) stay exact: against parasail's 32-bit kernels."""
    q = "W" * n
    t = rand_protein(rng, 3) + "W" * (n - 5) + "G" + "WW" + rand_protein(rng, 3)
    s = ta.align_score(ta.encode([q], "protein", device), ta.encode([t], "protein", device), ta.Scoring(), "local")
    assert s.score.item() > 32767
    check_parasail(device, rng, [(q, t), (t[:2000], q), (q[:1000], "A" * 50 + q[:990])])


def check_search(device, rng, n_q=4, n_db=17, lengths=(0, 1, 5, 16, 17, 40), top_k=5, modes=MODES,
                 stream=(30, 10**6), past_end=True):
    """Top-k against every pair scored by the reference (check_top_k); ``past_end``: top_k
    past the database size too (the whole database); ``stream``: streamed in slices of one
    of these many residues too (() for none)."""
    qs = [rand_protein(rng, rng.choice(lengths)) for _ in range(n_q)]
    db = [related(rng, rng.choice(qs)) if rng.random() < 0.5 else rand_protein(rng, rng.choice(lengths))
          for _ in range(n_db)]
    db += db[:2]  # exact duplicates: tied scores
    for mode in modes:
        check_top_k(device, qs, db, ta.Scoring(), mode, (top_k, len(db) + 3) if past_end else (top_k,),
                    rng.choice(stream) if stream else None)


def check_top_k(device, qs, db, sc, mode, ks, batch_residues=None):
    """ta.search's scores, indices (ties: the smaller index) and both ends against every
    pair scored by the reference, for each top_k in ``ks``; with ``batch_residues``, the
    database streamed in slices from a host copy gives the same result."""
    every = [[ref.align_score(q, t, sc.score, sc.gap_open, sc.gap_extend, mode) for t in db] for q in qs]
    q, d = ta.encode(qs, sc.alphabet, device), ta.encode(db, sc.alphabet, device)
    for k in ks:
        r = ta.search(q, d, sc, k, mode=mode)
        assert r.scores.shape == (len(qs), min(k, len(db))) and r.scores.dtype == torch.int32
        if batch_residues:
            streamed = ta.search(q, ta.encode(db, sc.alphabet), sc, k, mode=mode, batch_residues=batch_residues)
            assert all(torch.equal(x, y) for x, y in zip(r, streamed)), mode
        for i, every_i in enumerate(every):
            order = sorted(range(len(db)), key=lambda x: (-every_i[x][0], x))[: min(k, len(db))]
            assert r.indices[i].tolist() == order, (mode, i)
            assert r.scores[i].tolist() == [every_i[x][0] for x in order]
            assert r.query_ends[i].tolist() == [every_i[x][1] for x in order]
            assert r.ends[i].tolist() == [every_i[x][2] for x in order]


def check_search_wrap(device, rng, lengths=(40, 70)):
    """Scores past int16 in the packed database scan (match 900 passes 32,767 after 37
    matches): the wrapped sequences are found and recomputed, every score exact."""
    sc = ta.Scoring(match=900, mismatch=-900, gap_open=950, gap_extend=100)
    qs = [rand_protein(rng, n, "ACGT") for n in lengths]
    db = [related(rng, rng.choice(qs), "ACGT") for _ in range(6)] + [rand_protein(rng, n, "ACGT") for n in (0, 1, 50)]
    db += qs  # exact copies: 36,000 and 63,000
    every = [[ref.align_score(q, t, sc.score, sc.gap_open, sc.gap_extend, "local")[0] for t in db] for q in qs]
    assert max(max(e) for e in every) > 32767  # the case under test is there
    r = ta.search(ta.encode(qs, "dna", device), ta.encode(db, "dna", device), sc, len(db))
    for i, every_i in enumerate(every):
        order = sorted(range(len(db)), key=lambda x: (-every_i[x], x))
        assert r.indices[i].tolist() == order and r.scores[i].tolist() == [every_i[x] for x in order]


def check_search_parasail(device, queries, db):
    """Every database score of each query (top_k = the database) against parasail's."""
    import parasail

    r = ta.search(ta.encode(queries, "protein", device), ta.encode(db, "protein", device), ta.Scoring(), len(db))
    for i, q in enumerate(queries):
        profile = parasail.profile_create_sat(q, parasail.blosum62)
        theirs = [parasail.sw_striped_profile_sat(profile, t, 11, 1).score for t in db]
        order = sorted(range(len(db)), key=lambda x: (-theirs[x], x))
        assert r.indices[i].tolist() == order and r.scores[i].tolist() == [theirs[x] for x in order]
