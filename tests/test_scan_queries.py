"""The database scan runs many queries per launch (issue 13, item 2): a program per (tile of
query rows, chunk), the tiles of a query a wavefront. One launch of several queries equals one
launch per query, and ta.search launches as many queries together as the ring budget holds."""

from __future__ import annotations

import random

import pytest
import torch

import torchalign as ta

from .align_cases import rand_protein, related

pytestmark = pytest.mark.interpret


def _setup(seed=0):
    from torchalign_kernels import align_scan

    rng = random.Random(seed)
    queries = [rand_protein(rng, n) for n in (0, 1, 9, 5)]
    db = [related(rng, rng.choice(queries[1:]))[:12] for _ in range(40)] + [rand_protein(rng, rng.randint(0, 12))
                                                                            for _ in range(40)]
    q, d = ta.encode(queries, "protein"), ta.encode(db, "protein")
    packed = d.pack(2 * align_scan.LANES)  # 2 chunks
    pairs = align_scan.profile_table(ta.Scoring().table, 11)
    return align_scan, q, packed, pairs


def test_one_launch_of_many_queries_equals_one_per_query(kernels_on_cpu):
    align_scan, q, packed, pairs = _setup()
    slots, n, per_chunk = packed.codes.numel(), len(q), 2 * align_scan.LANES
    assert packed.chunk_lengths.numel() == 2
    together = align_scan.scan_queries(q.codes, q.offsets, 0, n, pairs, packed, 0,
                                       torch.empty(2 * n * slots, dtype=torch.int32), 11, 1, rows=8)
    alone = torch.cat([align_scan.scan_queries(q.codes, q.offsets, i, i + 1, pairs, packed, 0,
                                               torch.empty(2 * slots, dtype=torch.int32), 11, 1, rows=8)
                       for i in range(n)])
    assert together.shape == (n, packed.lengths.numel()) and packed.lengths.numel() > per_chunk
    assert torch.equal(together, alone)
    assert (together[0] == 0).all() and (together[1:, per_chunk:] > 0).any()
    # queries 2..4 from chunk 1 on: chunk 0 left at 0, chunk 1 as before
    middle = align_scan.scan_queries(q.codes, q.offsets, 2, 4, pairs, packed, 1,
                                     torch.empty(4 * slots, dtype=torch.int32), 11, 1, rows=8)
    assert (middle[:, :per_chunk] == 0).all() and torch.equal(middle[:, per_chunk:], alone[2:4, per_chunk:])


def test_ring_too_small_is_an_error(kernels_on_cpu):
    align_scan, q, packed, pairs = _setup()
    with pytest.raises(ValueError, match="ring holds"):
        align_scan.scan_queries(q.codes, q.offsets, 0, 2, pairs, packed, 0,
                                torch.empty(3 * packed.codes.numel(), dtype=torch.int32), 11, 1)


def test_search_launches_as_many_queries_as_the_budget_holds(kernels_on_cpu, monkeypatch):
    from torchalign_kernels import align_scan

    from torchalign.ops import align as ops_align

    rng = random.Random(2)
    queries = [rand_protein(rng, rng.randint(1, 10)) for _ in range(3)]
    db = ta.encode([related(rng, rng.choice(queries)) for _ in range(10)] + [rand_protein(rng, 8)
                                                                            for _ in range(10)], "protein")
    slots = db.pack(2 * align_scan.LANES).codes.numel()
    monkeypatch.setattr(ops_align, "SCAN_SCRATCH_BYTES", 8 * 2 * slots)  # two queries' ring per launch
    launched = []
    plain = align_scan.scan_queries
    monkeypatch.setattr(align_scan, "scan_queries", lambda *a, **kw: launched.append(a[3] - a[2]) or plain(*a, **kw))
    got = ta.search(queries, db, top_k=3)
    assert launched == [2, 1]
    with monkeypatch.context() as m:
        m.delenv("TORCHALIGN_CPU_BACKEND")  # the CPU implementation
        want = ta.search(queries, db, top_k=3)
    for name in ("scores", "indices", "ends", "query_ends"):
        assert torch.equal(getattr(got, name), getattr(want, name)), name


@pytest.mark.parametrize("every", [2, 4, 16])
def test_hand_off_interval_changes_no_score(kernels_on_cpu, monkeypatch, every):
    # tiles release their progress every `every` columns (a run-time argument): a tile below
    # must wait for exactly the columns it reads, whatever the interval (here up to 12 columns,
    # so 16 releases only at a chunk's end)
    align_scan, q, packed, pairs = _setup(seed=3)
    n, slots = len(q), packed.codes.numel()
    ring = torch.empty(2 * n * slots, dtype=torch.int32)
    monkeypatch.setattr(align_scan, "HAND_OFF_FEW", 8)
    reference = align_scan.scan_queries(q.codes, q.offsets, 0, n, pairs, packed, 0, ring, 11, 1, rows=8)
    assert (reference[1:] > 0).any()
    monkeypatch.setattr(align_scan, "HAND_OFF_FEW", every)
    assert align_scan.hand_off(packed.chunk_lengths.numel()) == every
    assert torch.equal(align_scan.scan_queries(q.codes, q.offsets, 0, n, pairs, packed, 0, ring, 11, 1, rows=8),
                       reference)
