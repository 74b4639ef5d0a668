"""Working memory bounded by budgets, not by the problem: the database packing in steps of
PACK_STEP residues, align_pairs' launches within SCRATCH_BYTES of scratch, search in steps
of pairs and its scan in slices of chunks. With the budgets made small the results equal
the unsliced ones (CPU, interpreter); the live tensor bytes of a packing stay a fraction
of a byte per residue beside its output (CPU); on a GPU the peak memory of searches stays
under bounds computed from the budgets, the issue's 570,000-sequence search included."""

from __future__ import annotations

import weakref

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

import torchalign as ta
from torchalign import batch as batch_mod
from torchalign.ops import align as ops_align

from . import align_cases as al
from . import reference as ref

MODES = ("local", "global", "semiglobal")


# ---------------------------------------------------------------- packing ------------
class LiveBytes(TorchDispatchMode):
    """The peak of the bytes held by tensor storages created under it and still alive
    (views and in-place results of a storage that exists already are not new memory)."""

    def __init__(self):
        super().__init__()
        self.now = self.peak = 0
        self.live: set[int] = set()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        given = {t.untyped_storage().data_ptr() for t in tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor)}
        for t in tree_leaves(out):
            if not isinstance(t, torch.Tensor):
                continue
            storage = t.untyped_storage()
            key, size = id(storage), storage.nbytes()
            if size == 0 or key in self.live or storage.data_ptr() in given:
                continue
            self.live.add(key)
            self.now += size
            self.peak = max(self.peak, self.now)
            weakref.finalize(storage, self._free, key, size)  # runs when the storage itself is freed
        return out

    def _free(self, key: int, size: int) -> None:
        self.live.discard(key)
        self.now -= size


def _random_batch(gen: torch.Generator, n: int, longest: int, dtype=torch.uint8):
    lengths = torch.randint(0, longest + 1, (n,), generator=gen) * (torch.rand(n, generator=gen) > 0.1)
    offsets = torch.zeros(n + 1, dtype=torch.int64)
    torch.cumsum(lengths, 0, out=offsets[1:])
    return torch.randint(0, 20, (int(offsets[-1]),), generator=gen).to(dtype), offsets


def _layout(codes, offsets, lanes):
    """The packed layout, slot by slot: residue j of sorted rank r at
    chunk_offsets[r // lanes] + j * lanes + r % lanes."""
    lengths = (offsets[1:] - offsets[:-1]).tolist()
    order = sorted(range(len(lengths)), key=lambda i: -lengths[i])  # (stable: ties keep their order)
    chunks = [lengths[order[c]] for c in range(0, len(order), lanes)]
    starts = [0]
    for c in chunks:
        starts.append(starts[-1] + c * lanes)
    pad = 255 if codes.dtype == torch.uint8 else -1
    slots = [pad] * starts[-1]
    for r, i in enumerate(order):
        for j in range(lengths[i]):
            slots[starts[r // lanes] + j * lanes + r % lanes] = int(codes[offsets[i] + j])
    return slots, starts, order


@pytest.mark.parametrize("step", [1, 7, 1 << 22])
def test_pack_in_steps_gives_the_layout(monkeypatch, step):
    monkeypatch.setattr(batch_mod, "PACK_STEP", step)
    gen = torch.Generator().manual_seed(step)
    for lanes, dtype in ((4, torch.uint8), (64, torch.int32), (1, torch.uint8)):
        codes, offsets = _random_batch(gen, 37, 30, dtype)
        p = batch_mod._pack(codes, offsets, lanes)
        slots, starts, order = _layout(codes, offsets, lanes)
        assert p.codes.tolist() == slots and p.chunk_offsets.tolist() == starts and p.order.tolist() == order


def test_pack_working_memory_is_a_step_not_the_batch(monkeypatch):
    """Live tensor bytes during _pack: its outputs, ~100 B per sequence and ~24 B per
    residue of one step; before the steps it held ~40 B per residue of the whole batch."""
    monkeypatch.setattr(batch_mod, "PACK_STEP", 1 << 12)
    gen = torch.Generator().manual_seed(5)
    codes, offsets = _random_batch(gen, 1000, 600)  # ~270,000 residues
    with LiveBytes() as live:
        p = batch_mod._pack(codes, offsets, 64)
    outputs = sum(t.untyped_storage().nbytes() for t in (p.codes, p.chunk_offsets, p.chunk_lengths, p.lengths,
                                                             p.order))
    extra = live.peak - outputs
    assert 0 <= extra <= 100 * 1000 + 24 * (1 << 12), extra
    assert extra < codes.numel()  # under a byte per residue here (it was ~48)


# ---------------------------------------------------------------- search steps (CPU) --
@pytest.mark.parametrize("mode", MODES)
def test_search_in_steps_of_pairs_equals_one_step(monkeypatch, rng, mode):
    qs = [al.rand_protein(rng, n) for n in (0, 7, 19)]
    db = [al.related(rng, rng.choice(qs[1:])) if rng.random() < 0.5 else al.rand_protein(rng, rng.randint(0, 25))
          for _ in range(23)]
    q, d = ta.encode(qs, "protein"), ta.encode(db, "protein")
    whole = ta.search(q, d, top_k=5, mode=mode)
    monkeypatch.setattr(ops_align, "PAIRS_PER_STEP", 1)  # one query per step
    monkeypatch.setattr(ops_align, "PAIRS_PER_LAUNCH", 1)
    steps = ta.search(q, d, top_k=5, mode=mode)
    assert all(torch.equal(x, y) for x, y in zip(whole, steps))


# ---------------------------------------------------------------- interpreter --------
class Launches:
    """A kernel whose launches are recorded: (grid, args, constexprs)."""

    def __init__(self, kernel):
        self.kernel, self.calls = kernel, []

    def __getitem__(self, grid):
        launch = self.kernel[grid]

        def run(*args, **kw):
            self.calls.append((grid, args, kw))
            return launch(*args, **kw)
        return run


def _align_inputs(rng):
    """18 pairs over 9 queries and 9 targets of fixed lengths (random residues): 6 pairs
    with targets of 33 (two programs of 4 past LONG_TARGET 20), the rest of 17, 3 and 0."""
    sc = ta.Scoring()
    qs = [al.rand_protein(rng, n) for n in (0, 1, 9, 26, 9, 26, 1, 26, 9)]
    ts = [al.rand_protein(rng, n) for n in (0, 3, 17, 33, 17, 33, 33, 17, 0)]
    q, t = ta.encode(qs, "protein"), ta.encode(ts, "protein")
    pq = torch.tensor([rng.randrange(len(qs)) for _ in range(18)])
    pt = torch.tensor(rng.sample([i % len(ts) for i in range(18)], 18))
    return sc, q, t, pq, pt


@pytest.mark.interpret
@pytest.mark.usefixtures("kernels_on_cpu")
@pytest.mark.parametrize("mode,planned,long_target", [(2, "read", 20), (1, "hints", None), (0, "hints", 20)])
def test_align_pairs_launches_fit_the_budget(monkeypatch, rng, mode, planned, long_target):
    """Small SCRATCH_BYTES: several launches of each kernel, each within the budget (or
    one program), the same results as the CPU implementation. Planned from one host read
    of the lengths, or from the hints alone (then past long_target every pair takes
    align_wave)."""
    from torchalign_kernels import align, align_wave

    from torchalign.cpu import align as cpu

    budget = 500  # a program of 4 pairs needs 32 B per column of its longest target: one or two per launch
    monkeypatch.setattr(align, "SCRATCH_BYTES", budget)
    monkeypatch.setattr(align_wave, "W_MAX", 2)
    inter, wave = Launches(align.align_kernel), Launches(align_wave.align_wave_kernel)
    monkeypatch.setattr(align, "align_kernel", inter)
    monkeypatch.setattr(align_wave, "align_wave_kernel", wave)
    sc, q, t, pq, pt = _align_inputs(rng)
    q_lens, t_lens = q.offsets[1:] - q.offsets[:-1], t.offsets[1:] - t.offsets[:-1]
    longest = (int(q_lens.max()), int(t_lens.max())) if planned == "hints" else None
    block = 4
    got = align.align_pairs(q.codes, q.offsets[:-1], q_lens, t.codes, t.offsets[:-1], t_lens, pq, pt, sc.table, 11,
                            1, mode, rows=8, block=block, long_target=long_target, longest=longest)
    want = cpu.align_score(q.codes, q.offsets[:-1][pq], q_lens[pq], t.codes, t.offsets[:-1][pt], t_lens[pt], sc.table,
                           11, 1, MODES[mode])
    assert all(torch.equal(g, w) for g, w in zip(got, want))
    t_bound = longest[1] if longest else None
    needs = []  # of each inter-task launch: each program's scratch, 2 x block int32 per column of its longest target
    for grid, args, _ in inter.calls:
        pair_t, n = args[7], args[8]
        needs.append([((t_bound if t_bound is not None else int(t_lens[pair_t[i:i + block]].max())) + 1) * 8 * block
                      for i in range(0, n, block)])
        assert grid[0] == 1 or sum(needs[-1]) <= budget
    for _, args, _ in inter.calls:  # one scratch for all launches: the largest launch's
        assert args[13].numel() * 4 <= max(budget, max(max(x) for x in needs))
    for grid, args, kw in wave.calls:  # per pair: a ring of two rows of 2 int32 per column (and one), 4 W int32
        ring, buf, passes = args[12], args[14], args[17]  # of carries per slot (a slot per pass with PIPE)
        slots = passes if kw["PIPE"] else 1
        one_program = block * ((int(t_lens.max()) + 1) * 16 + 16 * kw["W"] * slots)
        assert one_program > budget and grid[0] <= block * slots  # each program here is past the budget: one per launch
        assert ring.untyped_storage().nbytes() <= one_program and buf.numel() == grid[0] * 4 * kw["W"]
        # queries of 17 to 26 rows are two passes of 2 x 8 rows: a program each when the lengths were read
        assert kw["PIPE"] == (passes > 1 and planned == "read")
    assert len(wave.calls if long_target and planned == "hints" else inter.calls) > 1
    if planned == "read":
        assert len(wave.calls) > 1


@pytest.mark.interpret
@pytest.mark.usefixtures("kernels_on_cpu")
def test_search_with_small_budgets_equals_defaults(monkeypatch, rng):
    """Every mode: search in steps of one query, align_pairs' launches of a few programs,
    the scan in slices of one chunk (70 sequences: two chunks of 2 x 32) give the default
    run's result, which is the reference's."""
    from torchalign_kernels import align, align_scan

    monkeypatch.setattr(align_scan, "ROWS", 8)
    sc = ta.Scoring()
    qs = [al.rand_protein(rng, n) for n in (6, 17)]
    db = [al.related(rng, rng.choice(qs)) if rng.random() < 0.3 else al.rand_protein(rng, rng.randint(0, 12))
          for _ in range(70)]
    q, d = ta.encode(qs, "protein"), ta.encode(db, "protein")
    for mode in MODES:
        whole = ta.search(q, d, sc, 3, mode=mode)
        every = [[ref.align_score(x, y, sc.score, 11, 1, mode)[0] for y in db] for x in qs]
        assert whole.scores.tolist() == [sorted(e, reverse=True)[:3] for e in every], mode
        with monkeypatch.context() as m:
            m.setattr(ops_align, "PAIRS_PER_STEP", 1)
            m.setattr(ops_align, "PAIRS_PER_LAUNCH", 1)
            m.setattr(ops_align, "SCAN_SCRATCH_BYTES", 4)
            m.setattr(align, "SCRATCH_BYTES", 1)
            small = ta.search(q, d, sc, 3, mode=mode)
        assert all(torch.equal(x, y) for x, y in zip(whole, small)), mode


# ---------------------------------------------------------------- GPU ----------------
def _gpu_database(n: int, seed: int, longest: int = 35_000, device="cuda"):
    """n protein sequences on the GPU as benchmarks/align.py generates them: lognormal
    lengths (mean ~350, 10 .. longest), residues with the bundled proteome's composition."""
    from .conftest import read_fasta

    gen = torch.Generator(device=device).manual_seed(seed)
    proteome = "".join(s for _, s in read_fasta("proteome_HG003687.fa"))
    letters = "ARNDCQEGHILKMFPSTWYV"
    weights = torch.tensor([proteome.count(c) for c in letters], dtype=torch.float, device=device)
    mean = torch.log(torch.tensor(350.0)) - 0.245
    lengths = torch.empty(n, device=device).log_normal_(float(mean), 0.7, generator=gen).long().clamp(10, longest)
    offsets = torch.zeros(n + 1, dtype=torch.int64, device=device)
    torch.cumsum(lengths, 0, out=offsets[1:])
    total = int(offsets[-1])
    codes_of = ta.encode(letters, "protein").codes.to(device)
    picks = torch.cat([torch.multinomial(weights, min(1 << 24, total - i), replacement=True, generator=gen)
                       for i in range(0, total, 1 << 24)])
    return ta.SequenceBatch(codes_of[picks], offsets, "protein", int(codes_of.max()), int(lengths.max()))


@pytest.mark.gpu
def test_pack_peak_memory_gpu(monkeypatch):
    """Packing's extra memory grows with the sequences, not the residues: doubling the
    database adds at most ~100 B per added sequence (steps of PACK_STEP residues keep
    the per-residue temporaries), and stays under 2 B per residue (was ~40)."""
    monkeypatch.setattr(batch_mod, "PACK_STEP", 1 << 20)

    def extra(n):
        d = _gpu_database(n, 1)
        torch.cuda.synchronize()
        base = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
        p = batch_mod._pack(d.codes, d.offsets, 64)
        torch.cuda.synchronize()
        return torch.cuda.max_memory_allocated() - base - p.codes.numel(), d

    small, _ = extra(30_000)  # ~10 M residues
    large, d = extra(60_000)  # ~21 M residues
    assert large - small <= 100 * 30_000 + (4 << 20), (small, large)  # (+ the allocator's 2 MB rounding)
    assert large < 2 * d.codes.numel(), large


@pytest.mark.gpu
def test_search_memory_stays_within_the_budgets(monkeypatch):
    """3 queries vs 150,000 sequences (< 1,024 residues: no new kernel variants): sized for
    the whole problem at once, align_pairs' scratch alone would be ~1.2 GB; with 64 MiB
    budgets every mode's peak stays under the bound they give, and the results equal
    those of the default budgets."""
    from torchalign_kernels import align

    d = _gpu_database(150_000, 2, longest=1023)
    q = ta.encode([s[:n] for s, n in zip(("MKV" * 200, "WHEAG" * 100, "ACDEFGHIKLMNPQRSTVWY" * 20), (600, 150, 400))],
                  "protein", "cuda")
    sc = ta.Scoring()
    defaults = {mode: ta.search(q, d, sc, 10, mode=mode) for mode in MODES}
    budget = 64 << 20
    monkeypatch.setattr(align, "SCRATCH_BYTES", budget)
    monkeypatch.setattr(ops_align, "SCAN_SCRATCH_BYTES", budget)
    pairs = len(q) * len(d)
    assert len(q) * d.codes.numel() * 8 > 10 * budget  # the old sizing: 8 B per target column of every pair at once
    for mode in MODES:
        torch.cuda.synchronize()
        base = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
        r = ta.search(q, d, sc, 10, mode=mode)
        torch.cuda.synchronize()
        extra = torch.cuda.max_memory_allocated() - base
        if mode == "local":  # the packed copy and a step of packing, one scratch per scan stream, ~40 B per pair
            bound = 2 * d.codes.numel() + 24 * batch_mod.PACK_STEP + ops_align.SCAN_STREAMS * budget + 48 * pairs
        else:  # both kernels' scratch, ~150 B per pair of a step (all three queries here)
            bound = 2 * budget + 200 * pairs
        assert extra <= bound + (32 << 20), (mode, extra, bound)
        assert all(torch.equal(x, y) for x, y in zip(r, defaults[mode])), mode


@pytest.mark.gpu
@pytest.mark.slow
@pytest.mark.parametrize("mode,n_queries", [("global", 20), ("semiglobal", 7)])
def test_issue_search_of_20_queries_vs_570k_sequences(mode, n_queries):
    """The issue's case: the 20 bundled queries (8.4e12 cells; semiglobal: the 7 shortest,
    one step of pairs, to save time: its memory is global's) against 570,000 generated
    sequences (~200 M residues) on one GPU. Sized for all pairs at once this needed
    ~46 GB; now the working memory is the budgets and a step of pairs. The top hit of
    each query is re-scored by align_score."""
    from torchalign_kernels import align

    from .conftest import read_fasta

    d = _gpu_database(570_000, 3)
    queries = ta.encode([s for _, s in read_fasta("swissprot_queries20.fa")][:n_queries], "protein", "cuda")
    torch.cuda.synchronize()
    base = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    r = ta.search(queries, d, ta.Scoring(), 10, mode=mode)
    torch.cuda.synchronize()
    extra = torch.cuda.max_memory_allocated() - base
    step = ops_align.PAIRS_PER_STEP // len(d) * len(d)
    assert extra <= 2 * align.SCRATCH_BYTES + 200 * step + (256 << 20), extra
    idx = r.indices[:, 0].cpu()
    top = ta.align_score(queries, ta.SequenceBatch.from_codes([d[int(i)] for i in idx], "protein"), mode=mode)
    assert torch.equal(top.score.cpu(), r.scores[:, 0].cpu())
