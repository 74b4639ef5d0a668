"""256-symbol alphabets (bytes): every uint8 value is a real code, 0 and 255 included, so
no kernel may pad a sequence with a code (issue 12, item 1). Each op runs on sequences
that hold codes 0, 255 and every byte in between, against the plain references (and the
CPU implementation), in three tiers: the CPU code, the Triton kernels under the
interpreter (``-m interpret``, its own process) and the GPU (``-m gpu``)."""

from __future__ import annotations

import random

import pytest
import torch

import torchalign as ta

from . import primers_cases
from . import reference as ref
from .conftest import INTERPRET

TIERS = [
    pytest.param("cpu", id="cpu"),
    pytest.param("interpret", id="interpret", marks=pytest.mark.interpret),
    pytest.param("cuda", id="gpu", marks=pytest.mark.gpu),
]
MODES = ("local", "global", "semiglobal")
MATCH = ta.Scoring(match=5, mismatch=-4, alphabet="bytes")  # the repros: 256 x 256, gaps 11 / 1
EDGES = [b"", b"\x00", b"\xff", b"\x00\xff", b"\xff\x00\xff", b"\x00" * 9, b"\xff" * 9]


@pytest.fixture(params=TIERS)
def device(request):
    """'cpu' (the CPU code), 'cpu' routed through the Triton kernels (interpreter), or 'cuda'."""
    if request.param == "interpret":
        request.getfixturevalue("kernels_on_cpu")
        return "cpu"
    return request.param


def text(b: bytes) -> str:
    """One character per byte, for the references (which compare and index symbols)."""
    return b.decode("latin-1")


def every_byte(rng: random.Random, size: int = 11) -> list[bytes]:
    """cdiv(256, size) sequences holding every byte once between them, shuffled (short
    ones: the interpreter's time grows with the longest sequence of a launch)."""
    codes = list(range(256))
    rng.shuffle(codes)
    return [bytes(codes[i : i + size]) for i in range(0, 256, size)]


def edited(rng: random.Random, s: bytes, substitutions_only: bool = False) -> bytes:
    """A copy with a few edits, the new bytes often 0 or 255."""
    out = bytearray(s)
    for _ in range(rng.randint(1, max(1, len(s) // 5))):
        c = rng.choice([0, 255, rng.randrange(256)])
        op = 0.0 if substitutions_only else rng.random()
        if out and op < 0.5:
            out[rng.randrange(len(out))] = c
        elif out and op < 0.75:
            del out[rng.randrange(len(out))]
        else:
            out.insert(rng.randint(0, len(out)), c)
    return bytes(out)


def random_scoring(rng: random.Random) -> ta.Scoring:
    """An asymmetric 256 x 256 matrix (so a swapped or shifted code changes the score)."""
    g = torch.Generator().manual_seed(rng.randrange(2**31))
    table = torch.randint(-4, 3, (256, 256), generator=g, dtype=torch.int32)
    table.fill_diagonal_(6)
    return ta.Scoring(table, gap_open=5, gap_extend=2, alphabet="bytes")


def score_fn(scoring: ta.Scoring):
    rows = scoring.table.tolist()
    return lambda a, b: rows[ord(a)][ord(b)]


def align_pairs(rng: random.Random) -> tuple[list[bytes], list[bytes]]:
    """32 pairs (one program of the inter-task kernel): every byte in the queries and in
    the targets; short pairs beside longer ones, so their rows and columns past the end
    are padded; the issue's repro pairs."""
    qs = every_byte(rng)
    ts = [edited(rng, q) for q in qs]
    qs += [b"A", b"C" * 10, b"\x00", b"\xff", b"", b"\x00" * 5, b"\xff\x00\xff", b"\xff" * 4]
    ts += [b"B", b"G" * 10, b"\xff", b"\x00", b"\x00\xff", b"\x00" * 3, b"", b"AB"]
    return qs, ts


def aligned(scores: ta.Scores) -> list[tuple[int, int, int]]:
    return list(zip(scores.score.tolist(), scores.query_end.tolist(), scores.target_end.tolist()))


# ---- the repros (they failed under the interpreter and on the GPU) -----------------
def test_align_score_repro(device):
    got = ta.align_score(ta.encode(["A", "CCCCCCCCCC"], "bytes", device),
                         ta.encode(["B", "GGGGGGGGGG"], "bytes", device), MATCH, "local")
    assert got.score.tolist() == [0, 0]


@pytest.mark.parametrize("scan", [False, True], ids=["int32", "scan"])
def test_search_repro(device, monkeypatch, scan):
    """Scored by the int32 kernels (256 symbols, the default) and by the int16 scan."""
    from torchalign.ops import align as ops

    monkeypatch.setattr(ops, "SCAN_MAX_SYMBOLS", 256 if scan else ops.SCAN_MAX_SYMBOLS)
    r = ta.search(ta.encode([b"\xff" * 4], "bytes", device), ta.encode([b"A" * 12, b"AB"], "bytes", device), MATCH,
                  top_k=2)
    assert r.scores.tolist() == [[0, 0]] and r.indices.tolist() == [[0, 1]]
    assert r.ends.tolist() == [[0, 0]] and r.query_ends.tolist() == [[0, 0]]


# ---- alignment ---------------------------------------------------------------------------
@pytest.mark.parametrize("wave", [False, True], ids=["inter_task", "wave"])
def test_align_score(device, rng, monkeypatch, wave):
    """Every mode against the reference; ``wave``: every pair through align_wave (its
    long-target kernel), by lowering the length that sends a pair there."""
    qs, ts = align_pairs(rng)
    if wave:
        from torchalign_kernels import align as kernel

        monkeypatch.setattr(kernel, "LONG_TARGET", 1)
        if INTERPRET:  # one program per pair, each as slow as 32 pairs of the inter-task kernel
            qs, ts = [b"A\x00\x00", qs[0], b"\xff" * 4], [b"B", ts[0][:4], b"\xff\x00\xff\x00"]
    sc = random_scoring(rng)
    fn = score_fn(sc)
    for mode in MODES:
        got = aligned(ta.align_score(ta.encode(qs, "bytes", device), ta.encode(ts, "bytes", device), sc, mode))
        want = [ref.align_score(text(q), text(t), fn, sc.gap_open, sc.gap_extend, mode) for q, t in zip(qs, ts)]
        assert got == want, mode


def _every_pair(qs, db, sc, mode):
    fn = score_fn(sc)
    return [[ref.align_score(text(q), text(t), fn, sc.gap_open, sc.gap_extend, mode) for t in db] for q in qs]


def _check_search(r: ta.SearchResult, every):
    for i, row in enumerate(every):
        order = sorted(range(len(row)), key=lambda x: (-row[x][0], x))[: r.indices.shape[1]]
        assert r.indices[i].tolist() == order, i
        assert r.scores[i].tolist() == [row[x][0] for x in order]
        assert r.query_ends[i].tolist() == [row[x][1] for x in order]
        assert r.ends[i].tolist() == [row[x][2] for x in order]


@pytest.mark.parametrize("scan", [False, True], ids=["int32", "scan"])
def test_search(device, rng, monkeypatch, scan):
    """Local search over a database of every byte, by the int32 kernels and the int16 scan
    (packed database: slots past a sequence's end hold 255, a real byte)."""
    from torchalign.ops import align as ops

    monkeypatch.setattr(ops, "SCAN_MAX_SYMBOLS", 256 if scan else ops.SCAN_MAX_SYMBOLS)
    sc = random_scoring(rng)
    pieces = every_byte(rng)
    db = pieces + EDGES + [b"A" * 12, b"AB"]
    qs = [edited(rng, pieces[0]), b"\xff" * 4, b"\x00\xff\x00"]
    r = ta.search(ta.encode(qs, "bytes", device), ta.encode(db, "bytes", device), sc, top_k=len(db))
    _check_search(r, _every_pair(qs, db, sc, "local"))


@pytest.mark.parametrize("mode", ["global", "semiglobal"])
def test_search_other_modes(device, rng, mode):
    pieces = every_byte(rng)
    db = pieces + EDGES
    qs = [edited(rng, pieces[3]), b"\xff\x00"]
    r = ta.search(ta.encode(qs, "bytes", device), ta.encode(db, "bytes", device), MATCH, top_k=5, mode=mode)
    _check_search(r, _every_pair(qs, db, MATCH, mode))


def test_traceback(device, rng):
    sc = random_scoring(rng)
    qs, ts = align_pairs(rng)
    fn = score_fn(sc)
    for mode in MODES:
        got = ta.traceback(ta.encode(qs, "bytes", device), ta.encode(ts, "bytes", device), sc, mode)
        for a, q, t in zip(got, qs, ts):
            want = ref.traceback(text(q), text(t), fn, sc.gap_open, sc.gap_extend, mode)
            assert (a.score, a.query_start, a.query_end, a.target_start, a.target_end, _expand(a.cigar)) == want, \
                (mode, q, t)


def _expand(cigar: str) -> str:
    from .traceback_cases import expand

    return expand(cigar)


# ---- distances (codes compared for equality) ----------------------------------------------
def test_hamming(device, rng):
    pieces = every_byte(rng, 16)
    a = pieces + [b"\x00" * 9, b"\xff" * 9, b"", b"\xff\x00"]
    b = [edited(rng, x, substitutions_only=True) for x in pieces] + [b"\xff" * 9, b"\xff" * 9, b"", b"\x00\xff"]
    got = ta.hamming(ta.encode(a, "bytes", device), ta.encode(b, "bytes", device))
    assert got.tolist() == [ref.hamming(x, y) for x, y in zip(a, b)]
    a, b = pieces, b[:16] + [b"\x00" * 16, b"\xff" * 16]  # equal lengths
    got = ta.hamming_cdist(ta.encode(a, "bytes", device), ta.encode(b, "bytes", device))
    assert got.tolist() == [[ref.hamming(x, y) for y in b] for x in a]


def _texts_and_patterns(rng):
    pieces = every_byte(rng, 64)
    texts = [pieces[0] + pieces[1] + b"\xff" * 6, pieces[2] + b"\x00" * 6 + pieces[3], b"", b"\xff"]
    patterns = [pieces[1][5:15], edited(rng, pieces[2][30:50]), b"\xff\xff\xff", b"\x00\x00", b"\xff",
                pieces[3][-4:] + b"\xff"]
    return texts, patterns


def test_hamming_windows(device, rng):
    texts, patterns = _texts_and_patterns(rng)
    t, p = ta.encode(texts, "bytes", device), ta.encode(patterns, "bytes", device)
    st, sp = [text(x) for x in texts], [text(x) for x in patterns]
    assert ta.hamming_profile(t, p).tolist() == ref.profile(st, sp)
    hits = ta.kmismatch_search(t, p, 1)
    got = list(zip(*(x.tolist() for x in (hits.pattern, hits.text, hits.position, hits.distance, hits.strand))))
    assert got == ref.kmismatch(st, sp, 1)


@pytest.mark.parametrize("algorithm", ["myers", "dp"])
def test_levenshtein(device, rng, algorithm):
    pieces = every_byte(rng)
    a = pieces + EDGES
    b = [edited(rng, x) for x in pieces] + EDGES[::-1]
    got = ta.levenshtein(ta.encode(a, "bytes", device), ta.encode(b, "bytes", device), algorithm=algorithm)
    assert got.tolist() == [ref.levenshtein(x, y) for x, y in zip(a, b)]
    a, b = a[:2] + EDGES[:3], b[:2] + [b"\xff" * 7, b"\x00" * 70]  # 70: two Myers words
    got = ta.levenshtein_cdist(ta.encode(a, "bytes", device), ta.encode(b, "bytes", device), algorithm=algorithm)
    assert got.tolist() == [[ref.levenshtein(x, y) for y in b] for x in a]


@pytest.mark.parametrize("algorithm", ["myers", "dp"])
def test_asm(device, rng, algorithm):
    texts, patterns = _texts_and_patterns(rng)
    t, p = ta.encode(texts, "bytes", device), ta.encode(patterns, "bytes", device)
    st, sp = [text(x) for x in texts], [text(x) for x in patterns]
    hits = ta.asm_search(t, p, 2, algorithm=algorithm)
    got = list(zip(*(x.tolist() for x in (hits.pattern, hits.text, hits.start, hits.end, hits.distance,
                                          hits.strand))))
    assert got == ref.asm_hits(st, sp, 2)
    d, end = ta.asm_best(t, p, algorithm=algorithm)
    assert (d.tolist(), end.tolist()) == ref.asm_best(st, sp)


def test_kdiff_primers(device, rng):
    pieces = every_byte(rng, 64)
    alpha = pieces[0][:16] + b"\xff\x00" * 2
    beta = [edited(rng, pieces[0][:14]) + b"\x00\xff", pieces[1], b"\xff" * 5]
    for k in (1, 2, 3):
        got = ta.kdiff_primers(ta.encode([alpha], "bytes", device), ta.encode(beta, "bytes", device), k)
        # beta's records never join: the reference takes each record and keeps the largest answer
        per_record = [primers_cases.dp_primers(text(alpha), text(r), k) for r in beta]
        want = [0 if 0 in xs else max(xs) for xs in zip(*per_record)]
        assert got.tolist() == want, k
