"""The ops as ML code uses them: opcheck, torch.compile(fullgraph=True), DataLoader."""

import random

import pytest
import torch
from torch.utils.data import DataLoader

import torchalign as ta

from . import hamming_cases as cases

DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)]


def _op_samples(device):
    rng = random.Random(3)
    texts, patterns = cases.texts_and_patterns(rng, n_texts=2, text_len=50)
    t, p = ta.encode(texts, "dna", device), ta.encode(patterns, "dna", device)
    a = ta.encode(["ACGTTGCA", "TTTTACGA", "ACGTNNNN"], "dna", device)
    table = ta.DNA.iupac_match_table().to(device)
    comp = ta.DNA.complement_codes().to(device)
    q = ta.encode(["MKVLAW", "", "WWHE*X"], "protein", device)
    blosum = ta.Scoring().table.to(device)
    dna = ta.Scoring(match=2, mismatch=-3, gap_open=5, gap_extend=2).table.to(device)
    ops = torch.ops.torchalign
    return [
        (ops.hamming, (a.codes, a.offsets, a.codes.flip(0), a.offsets, 15, True)),
        (ops.hamming_cdist, (a.codes, a.offsets, a.codes, a.offsets, 15, 15, True)),
        (ops.hamming_profile, (t.codes, t.offsets, p.codes, p.offsets, None, 15, 4, -1, True)),
        (ops.hamming_profile, (t.codes, t.offsets, p.codes, p.offsets, table, 15, 15, p.max_length, False)),
        (ops.kmismatch_search, (t.codes, t.offsets, p.codes, p.offsets, 2, table, comp, 1000, 15, 15, -1, True)),
        (ops.levenshtein, (a.codes, a.offsets, a.codes.flip(0), a.offsets, 15, -1, -1, -1, -1, "auto", True)),
        (ops.levenshtein_cdist, (t.codes, t.offsets, p.codes, p.offsets, 15, 3, t.max_length, p.max_length, 5,
                                 "dp", False)),
        (ops.levenshtein_cdist, (p.codes, p.offsets, t.codes, t.offsets, 15, -1, p.max_length, t.max_length, 5,
                                 "myers", False)),
        (ops.asm_search, (t.codes, t.offsets, p.codes, p.offsets, 2, comp, 1000, 15, -1, -1, "auto", True)),
        (ops.asm_search, (t.codes, t.offsets, p.codes, p.offsets, 1, None, 1000, 15, -1, -1, "dp", True)),
        (ops.asm_best, (t.codes, t.offsets, p.codes, p.offsets, 15, 5, p.max_length, "myers", False)),
        (ops.asm_profile, (t.codes, t.offsets, p.codes, p.offsets, 15, -1, -1, "dp", True)),
        (ops.align_score, (q.codes, q.offsets, q.codes.flip(0), q.offsets, blosum,
                           11, 1, "local", -1, -1, True)),
        (ops.align_score, (q.codes, q.offsets, q.codes, q.offsets, blosum, 10, 2, "semiglobal", q.max_length,
                           q.max_length, False)),
        (ops.align_score, (a.codes, a.offsets, a.codes, a.offsets, dna, 5, 2, "global", -1, -1, True)),
        (ops.search, (q.codes, q.offsets, q.codes, q.offsets, blosum, 11, 1, "local", 2, -1, -1, True)),
        (ops.search, (a.codes, a.offsets, t.codes, t.offsets, dna, 5, 2, "semiglobal", 10, -1, -1, True)),
        (ops.kdiff_primers, (p.codes, p.offsets, t.codes, t.offsets, 2, 15, -1, 0, True)),
        (ops.kdiff_primers, (a.codes, a.offsets, p.codes, p.offsets, 1, 15, 5, 64, False)),
        (ops.traceback, (q.codes, q.offsets, q.codes.flip(0), q.offsets, pairs(device, 0, 1, 2), pairs(device, 0, 1, 2),
                         blosum, 11, 1, "local", -1, -1, 1 << 30, True)),
        (ops.traceback, (a.codes, a.offsets, t.codes, t.offsets, pairs(device, 0, 2, 1), pairs(device, 1, 0, 1), dna,
                         5, 2, "semiglobal", a.max_length, t.max_length, 1 << 30, False)),
        (ops.traceback, (q.codes, q.offsets, q.codes, q.offsets, pairs(device, 2, 0), pairs(device, 1, 2), blosum,
                         10, 2, "global", -1, -1, 1 << 30, True)),
    ]


def pairs(device, *index):
    return torch.tensor(index, dtype=torch.int64, device=device)


@pytest.mark.parametrize("device", DEVICES)
def test_opcheck(device):
    for op, args in _op_samples(device):
        torch.library.opcheck(op, args)


DNA_SCORING = ta.Scoring(match=2, mismatch=-3, gap_open=5, gap_extend=2)


def _pipeline(texts, patterns, a, b):
    prof = ta.hamming_profile(texts, patterns, check=False)
    near = ((prof >= 0) & (prof <= 2)).sum(1)
    hits = ta.kmismatch_search(texts, patterns, 2, both_strands=True)
    edits = ta.levenshtein_cdist(texts, patterns, max_distance=5) + ta.levenshtein(a, b)[0]
    close = ta.asm_profile(texts, patterns, check=False) <= 1
    found = ta.asm_search(texts, patterns, 1, both_strands=True)
    best, end = ta.asm_best(texts, patterns)
    local = ta.align_score(a, b, DNA_SCORING, "local")
    glob = ta.needleman_wunsch(texts, texts, DNA_SCORING, check=False)
    top = ta.search(a, texts, DNA_SCORING, top_k=2)
    primers = ta.kdiff_primers(patterns, texts, 2) + ta.kdiff_primers(a, b, 1, check=False)[0]
    return (primers, near, ta.hamming_cdist(a, b) * 2, ta.hamming(a, b), hits.position, hits.strand, edits, close,
            found.start, found.end, best, end, local.score, local.target_end, glob.score, top.scores, top.indices,
            top.ends)


@pytest.mark.parametrize("device", DEVICES)
def test_compile_fullgraph_matches_eager(device):
    rng = random.Random(5)
    texts, patterns = cases.texts_and_patterns(rng)
    t, p = ta.encode(texts, "dna", device), ta.encode(patterns, "dna", device)
    a = ta.encode([cases.rand_seq(rng, 30) for _ in range(4)], "dna", device)
    b = ta.encode([cases.rand_seq(rng, 30) for _ in range(4)], "dna", device)
    torch._dynamo.reset()
    compiled = torch.compile(_pipeline, fullgraph=True)
    for got, want in zip(compiled(t, p, a, b), _pipeline(t, p, a, b)):
        assert torch.equal(got, want)


def _traceback_pipeline(q, t, pair_q, pair_t, table):
    score, coords, ops, offsets = torch.ops.torchalign.traceback(q.codes, q.offsets, t.codes, t.offsets, pair_q,
                                                                 pair_t, table, 11, 1, "local", -1, -1, 1 << 30, True)
    matches = (ops == 0).sum()  # '=' columns of every path
    return score * 2, coords, ops, offsets, matches


@pytest.mark.parametrize("device", DEVICES)
def test_traceback_compile_fullgraph_matches_eager(device):
    """The traceback op in a fullgraph-compiled graph: its path has a data-dependent size."""
    rng = random.Random(7)
    from . import align_cases as al

    qs, ts = al.pairs(rng, 6, (0, 1, 9, 30))
    q, t = ta.encode(qs, "protein", device), ta.encode(ts, "protein", device)
    table = ta.Scoring().table.to(device)
    b = torch.arange(len(qs), device=device)
    torch._dynamo.reset()
    compiled = torch.compile(_traceback_pipeline, fullgraph=True)
    for got, want in zip(compiled(q, t, b, b.flip(0), table), _traceback_pipeline(q, t, b, b.flip(0), table)):
        assert torch.equal(got, want)
    want = ta.traceback(q, t, pairs=(b, b.flip(0)))
    assert compiled(q, t, b, b.flip(0), table)[0].tolist() == [2 * a.score for a in want]


@pytest.mark.parametrize("device", DEVICES)
def test_compiled_graph_still_raises_on_bad_input(device):
    f = torch.compile(lambda a, b: ta.hamming(a, b), fullgraph=True)
    with pytest.raises(ValueError, match="pair 0 has lengths 3 and 2"):
        f(ta.encode(["ACG"], "dna", device), ta.encode(["AC"], "dna", device))


class Reads(torch.utils.data.Dataset):
    def __init__(self, n):
        rng = random.Random(11)
        self.reads = [cases.rand_seq(rng, rng.randint(20, 40)) for _ in range(n)]

    def __len__(self):
        return len(self.reads)

    def __getitem__(self, i):
        return self.reads[i]


def collate(reads):
    """Runs in the workers (no CUDA there): strings -> a CPU SequenceBatch."""
    return ta.encode(reads, "dna")


@pytest.mark.parametrize("device", DEVICES)
def test_dataloader_collate_then_search_on_device(device):
    ds = Reads(24)
    # pin_memory: the loader pins each batch in the main process (SequenceBatch.pin_memory)
    loader = DataLoader(ds, batch_size=8, num_workers=2, collate_fn=collate, pin_memory=device == "cuda")
    guide = ta.encode(["ACGTAC"], "dna", device)
    seen = 0
    for batch in loader:
        assert batch.codes.is_pinned() == (device == "cuda")
        batch = batch.to(device, non_blocking=True)
        hits = ta.kmismatch_search(batch, guide, 2)
        want = ta.kmismatch_search(batch.to("cpu"), guide.to("cpu"), 2)
        assert all(torch.equal(x.cpu(), y) for x, y in zip(hits, want))
        seen += len(batch)
    assert seen == len(ds)
