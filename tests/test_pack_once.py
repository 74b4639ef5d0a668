"""A database is packed once (issue 13, item 1): the packed form is kept with the batch's
tensors while they live unchanged, reused by every search, by query after query of the
CLI, and by SequenceBatch.save / load. Counted with a wrapper of the packing function."""

from __future__ import annotations

import gc
import random

import pytest
import torch

import torchalign as ta
from torchalign import batch as batch_mod
from torchalign.cli import main

from .align_cases import rand_protein, related

REAL_PACK = batch_mod._pack  # for comparisons by hand, not counted


@pytest.fixture
def pack_calls(monkeypatch):
    """The (lanes,) of every _pack call from here on."""
    calls = []
    real = batch_mod._pack

    def counting(codes, offsets, lanes):
        calls.append(lanes)
        return real(codes, offsets, lanes)

    monkeypatch.setattr(batch_mod, "_pack", counting)
    return calls


def _same(p, q):
    assert p.lanes == q.lanes and p.pad == q.pad
    for name in ("codes", "chunk_offsets", "chunk_lengths", "lengths", "order"):
        assert torch.equal(getattr(p, name), getattr(q, name)), name


def _db(n=40, seed=0):
    rng = random.Random(seed)
    return ta.encode([rand_protein(rng, rng.randint(0, 90)) for _ in range(n)], "protein")


def test_pack_is_kept_per_lanes(pack_calls):
    db = _db()
    p8, p64 = db.pack(8), db.pack(64)
    assert db.pack(8) is p8 and db.pack(64) is p64
    assert pack_calls == [8, 64]
    _same(p8, REAL_PACK(db.codes, db.offsets, 8))  # (a third call, by hand)


def test_changed_tensors_are_packed_again(pack_calls):
    db = _db()
    p = db.pack(8)
    db.codes[3] = (int(db.codes[3]) + 1) % 20  # in place: the version counter moves
    q = db.pack(8)
    assert q is not p and pack_calls == [8, 8]
    _same(q, REAL_PACK(db.codes, db.offsets, 8))
    again = ta.SequenceBatch(db.codes, db.offsets, db.alphabet)  # the same tensors: the same pack
    assert again.pack(8) is q and len(pack_calls) == 2
    other = ta.SequenceBatch(db.codes, db.offsets.clone(), db.alphabet)  # the same codes, other offsets
    assert other.pack(8) is not q and len(pack_calls) == 3


def test_kept_only_while_the_codes_live():
    db = _db()
    db.pack(8)
    key = id(db.codes)
    assert key in batch_mod._PACKS
    del db
    gc.collect()
    assert key not in batch_mod._PACKS


def test_inference_tensors_are_packed_every_time(pack_calls):
    with torch.inference_mode():
        db = ta.SequenceBatch(torch.randint(0, 20, (50,), dtype=torch.uint8), torch.tensor([0, 20, 50]), "protein")
        p, q = db.pack(4), db.pack(4)
    assert pack_calls == [4, 4]
    _same(p, q)


def test_save_and_load_keep_the_pack(tmp_path, pack_calls):
    db = _db()
    p = db.pack(64)
    db.save(tmp_path / "db.pt")
    loaded = ta.SequenceBatch.load(tmp_path / "db.pt")
    _same(loaded.pack(64), p)
    assert pack_calls == [64]  # loaded, not packed again
    ta.encode([], "protein").save(tmp_path / "empty.pt")  # nothing packed: nothing kept, loads as before
    assert len(ta.SequenceBatch.load(tmp_path / "empty.pt")) == 0


def _search_twice(device, pack_calls, monkeypatch):
    """Two searches of one database: one packing, one scan setup (host reads, query profile);
    the scoring's table changed in place: a new setup, the new scores."""
    from torchalign.ops import align as ops_align

    scans, real = [], ops_align._Scan
    monkeypatch.setattr(ops_align, "_Scan", lambda *a: scans.append(a) or real(*a))
    rng = random.Random(5)
    queries = [rand_protein(rng, rng.randint(1, 12)) for _ in range(2)]
    db = ta.encode([related(rng, rng.choice(queries)) for _ in range(6)] + [rand_protein(rng, 10) for _ in range(6)],
                   "protein", device)
    sc = ta.Scoring()
    first = ta.search(queries, db, sc, top_k=3)
    second = ta.search(queries[::-1], db, sc, top_k=3)
    assert torch.equal(first.scores.flip(0), second.scores)
    assert len(pack_calls) == 1, pack_calls
    assert len(scans) == 1
    sc.table[:20, :20] += 3  # every standard pair scores 3 more
    changed = ta.search(queries, db, sc, top_k=3)
    fresh = ta.search(queries, db, ta.Scoring(sc.table.clone(), 11, 1, alphabet="protein"), top_k=3)
    assert len(scans) == 3 and len(pack_calls) == 1
    assert torch.equal(changed.scores, fresh.scores) and not torch.equal(changed.scores, first.scores)
    monkeypatch.setenv("TORCHALIGN_SCAN_HALF2", "1")  # the float16 pairs: another scan setup (its profile)
    halves = ta.search(queries, db, sc, top_k=3)
    assert len(scans) == 4 and torch.equal(halves.scores, changed.scores)


@pytest.mark.interpret
def test_search_packs_once_under_the_interpreter(kernels_on_cpu, pack_calls, monkeypatch):
    _search_twice("cpu", pack_calls, monkeypatch)


@pytest.mark.gpu
def test_search_packs_once_on_the_gpu(pack_calls, monkeypatch):
    _search_twice("cuda", pack_calls, monkeypatch)


def _cli_files(tmp_path, n_queries=4):
    rng = random.Random(6)
    queries = [rand_protein(rng, rng.randint(20, 40)) for _ in range(n_queries)]
    db = [related(rng, rng.choice(queries)) for _ in range(10)] + [rand_protein(rng, 30) for _ in range(10)]
    (tmp_path / "q.fa").write_text("".join(f">q{i}\n{s}\n" for i, s in enumerate(queries)))
    (tmp_path / "db.fa").write_text("".join(f">d{i}\n{s}\n" for i, s in enumerate(db)))
    return [str(tmp_path / "q.fa"), str(tmp_path / "db.fa")]


def test_cli_searches_one_database_for_every_query_group(tmp_path, monkeypatch, capsys):
    """One search call per query (a group of cells smaller than any query's): every call
    gets the same database tensors, so the packed form made by the first is the one used."""
    from torchalign import cli_search

    seen, real = [], ta.search
    monkeypatch.setattr(cli_search.ta, "search", lambda q, d, *a, **kw: seen.append((d.codes, d.offsets))
                        or real(q, d, *a, **kw))
    monkeypatch.setattr(cli_search, "GROUP_CELLS", {"cuda": 1, "cpu": 1})
    assert main(["search", *_cli_files(tmp_path), "--top", "3", "--device", "cpu"]) == 0
    assert len([x for x in capsys.readouterr().out.splitlines() if not x.startswith("#")]) == 4 * 3
    assert len(seen) == 4 and all(c is seen[0][0] and o is seen[0][1] for c, o in seen)


@pytest.mark.gpu
def test_cli_packs_once_on_the_gpu(tmp_path, monkeypatch, capsys, pack_calls):
    from torchalign import cli_search

    monkeypatch.setattr(cli_search, "GROUP_CELLS", {"cuda": 1, "cpu": 1})
    assert main(["search", *_cli_files(tmp_path), "--top", "3", "--device", "cuda"]) == 0
    assert len([x for x in capsys.readouterr().out.splitlines() if not x.startswith("#")]) == 4 * 3
    assert pack_calls == [64]
