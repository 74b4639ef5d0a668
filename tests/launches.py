"""The kernel launches the library makes, recorded from its own launch code (for
tests/test_compile.py).

``record()`` runs the public ops on small CPU inputs chosen to reach every branch of
every launcher (each mode, alphabet size, pattern width, tile kind, ...), with the kernels
routed as for CUDA tensors and ``JITFunction.run`` replaced by a recorder: nothing runs,
and each launch leaves (kernel, arguments, keyword arguments) exactly as the launcher
passed them. Where an op's next step reads a kernel's output (the traceback's end cells,
the starts of approximate hits), the launch helper is called directly instead. Routing
thresholds (which kernel takes a pair) are lowered so that small inputs reach every
kernel; constexprs are never set here. The one choice that depends on the GPU, the scan's
DPX path, is left as DEVICE_DPX for test_compile to fill per target (align_scan.dpx_for).
"""

from __future__ import annotations

import contextlib
import importlib
import pkgutil
from unittest import mock

import torch
from triton.runtime.jit import JITFunction

import torchalign as ta
import torchalign_kernels
from torchalign import ops

DEVICE_DPX = object()  # the scan's DPX constexpr: the launcher's choice for the target's compute capability


def with_dpx(kwargs: dict, dpx: bool) -> dict:
    """A recorded scan launch's keywords with DEVICE_DPX filled in, and the columns per step
    the launcher takes with that choice."""
    from torchalign_kernels import align_scan

    return dict(kwargs, DPX=dpx, COLS=align_scan.columns_per_step(dpx, kwargs["HALF"]))


def kernel_modules():
    return [importlib.import_module(f"torchalign_kernels.{m.name}") for m in pkgutil.iter_modules(torchalign_kernels.__path__)]


def kernels() -> dict[str, JITFunction]:
    """Every launchable kernel (a JITFunction named *_kernel), by module.name."""
    return {f"{m.__name__.split('.')[-1]}.{name}": fn for m in kernel_modules() for name, fn in vars(m).items()
            if isinstance(fn, JITFunction) and name.endswith("_kernel") and fn.__module__ == m.__name__}


@contextlib.contextmanager
def recording(monkeypatch):
    """Yield the list that collects (kernel, args, kwargs) of every launch."""
    seen = []

    def run(self, *args, grid, warmup, **kwargs):
        seen.append((self, args, kwargs))

    kernel_modules()  # imported before anything is patched
    from torchalign_kernels import align, align_scan, align_wave

    monkeypatch.setattr(JITFunction, "run", run)
    # nothing runs, so outputs keep what they were allocated with, and some launches depend on
    # them (search's ends: the pairs its top-k picked, aligned by one kernel or the other by
    # their lengths): zeros, so that every recording takes the same launches
    empty, empty_like = torch.empty, torch.empty_like
    monkeypatch.setattr(torch, "empty", lambda *a, **k: empty(*a, **k).zero_())
    monkeypatch.setattr(torch, "empty_like", lambda *a, **k: empty_like(*a, **k).zero_())
    for m in pkgutil.iter_modules(ops.__path__):
        mod = importlib.import_module(f"torchalign.ops.{m.name}")
        if hasattr(mod, "use_kernels"):
            monkeypatch.setattr(mod, "use_kernels", lambda t: True)
    monkeypatch.setattr(align_scan, "use_dpx", lambda device: DEVICE_DPX)
    monkeypatch.setattr(align, "LONG_TARGET", 6)  # targets of 6+ residues: align_wave
    yield seen
    del align_wave


def _seqs(symbols: str, lengths, seed: int = 0) -> list[str]:
    g = torch.Generator().manual_seed(seed)
    return ["".join(symbols[i] for i in torch.randint(0, len(symbols), (n,), generator=g).tolist()) for n in lengths]


DNA, IUPAC, PROTEIN = "ACGT", "ACGTNRYSWKMBDHV", "ARNDCQEGHILKMFPSTWYV"
BYTES = bytes(range(256)).decode("latin-1")


def _as(alphabet: str, seqs):
    if alphabet == "bytes":
        return ta.encode([s.encode("latin-1") for s in seqs], "bytes")
    if alphabet == "tokens":
        g = torch.Generator().manual_seed(len(seqs))
        return ta.encode([torch.randint(0, 70_000, (len(s),), generator=g, dtype=torch.int32) for s in seqs], "tokens")
    return ta.encode(seqs, alphabet)


# alphabets by the sizes the launchers branch on (one-hot width, mask tables, renumbering)
ALPHABETS = [("dna", "AC"), ("dna", DNA), ("dna", "ACGTN"), ("dna", IUPAC), ("protein", PROTEIN),
             ("bytes", BYTES), ("tokens", DNA)]


def drive_alignment():
    from torchalign.metrics import functional as tmf
    from torchalign.ops import align as ops_align
    from torchalign_kernels import align_scan

    sc = ta.Scoring()
    qs, ts = _seqs(PROTEIN, [3, 5, 1, 0]), _seqs(PROTEIN, [4, 2, 9, 14])  # 9, 14: align_wave
    q, t = ta.encode(qs, "protein"), ta.encode(ts, "protein")
    short = ta.encode(_seqs(PROTEIN, [4, 2, 5, 3]), "protein")  # every target under 6: align_kernel alone
    long_q = ta.encode(_seqs(PROTEIN, [33 * 48]), "protein")  # more than 32 row tiles: align_wave's wide variant
    # the search's top hits' ends on align_wave with ENDS_WAVE_ROWS: 33 row tiles (128 lanes),
    # 129 (two passes, a program each)
    long_qs = [ta.encode(_seqs(PROTEIN, [n * ops_align.ENDS_WAVE_ROWS]), "protein") for n in (33, 129)]
    for mode in ("local", "global", "semiglobal"):
        ta.align_score(q, t, sc, mode)  # TRACK
        ta.align_score(q, short, sc, mode)
        ta.search(q, short, sc, top_k=2, mode=mode)
        ta.align_score(long_q, ta.encode(_seqs(PROTEIN, [7]), "protein"), sc, mode)
        ta.search(q, t, sc, top_k=2, mode=mode)  # global / semiglobal: no TRACK
        for ends_q in long_qs:
            ta.search(ends_q, t, sc, top_k=1, mode=mode)
    dna = ta.Scoring(match=2, mismatch=-3)
    db = ta.encode(_seqs(DNA, [20, 9] + [3, 0, 5, 4] * 40), "dna")  # a long chunk, then two scanned chunks with residues
    ta.search(ta.encode(_seqs(DNA, [4, 9]), "dna"), db, dna, top_k=3)
    with mock.patch.object(align_scan, "use_half2", lambda device: 1):  # the float16 pair scan (the default without DPX)
        ta.search(ta.encode(_seqs(DNA, [4, 9]), "dna"), db, dna, top_k=3)
    ta.search(ta.encode(["MKV"], "protein"), t, ta.Scoring(match=2000, mismatch=-1, alphabet="protein"), top_k=2)  # wide scores
    for preds, target in ((["ab", "c"], ["abc", "b"]), (["kitten"], ["sitting"])):  # token ids (int32 codes), global
        tmf.distances(preds, target, substitution_cost=2)
    ta.search(ta.encode([b"\x00\xff"], "bytes"), ta.encode([b"\xff" * 3, b"A"], "bytes"),
              ta.Scoring(match=1, mismatch=-1, alphabet="bytes"), top_k=2)  # 256 symbols: int32 kernels


def drive_traceback():
    from torchalign_kernels import traceback

    sc = ta.Scoring()
    q, t = ta.encode(_seqs(PROTEIN, [5, 0]), "protein"), ta.encode(_seqs(PROTEIN, [7, 3]), "protein")
    for mode in range(3):  # as ops/traceback.py calls it, with the ends align_score would give
        traceback.traceback_pairs(q.codes, q.offsets[:-1], t.codes, t.offsets[:-1], torch.tensor([5, 0]),
                                  torch.tensor([7, 3]), sc.table, sc.gap_open, sc.gap_extend, mode)


def drive_hamming():
    for alphabet, symbols in ALPHABETS:
        a = _as(alphabet, _seqs(symbols, [9, 9, 9], seed=1))
        b = _as(alphabet, _seqs(symbols, [9, 9, 9], seed=2))
        ta.hamming(a, b)
        ta.hamming_cdist(a, b)
        for text_len in (40, 5000):  # short texts, long texts (taller tiles)
            texts = _as(alphabet, _seqs(symbols, [text_len, 3], seed=3))
            for pat_len in (3, 130):  # one K-tile, several
                pats = _as(alphabet, _seqs(symbols, [pat_len, 2], seed=4))
                ta.hamming_profile(texts, pats)
                ta.kmismatch_search(texts, pats, 1)
    texts, pats = ta.encode(_seqs(DNA, [300]), "dna"), ta.encode(["NGG", "ACGTRY"], "dna")
    ta.kmismatch_search(texts, pats, 1, iupac=True, both_strands=True)
    ta.hamming_profile(texts, pats, iupac=True)


# pattern lengths: 1 and 2 Myers words, then 3 .. MAX_WORDS words (every wavefront width), then more
PATTERN_LENGTHS = [40, 100] + [64 * w - 1 for w in (3, 5, 9, 17, 33, 65, 129, 257, 513)] + [64 * 1024 + 5]


def drive_distances():
    for alphabet, symbols in ALPHABETS:
        a = _as(alphabet, _seqs(symbols, [5, 40, 0], seed=5))
        b = _as(alphabet, _seqs(symbols, [7, 3, 2], seed=6))
        for algorithm in ("dp",) if alphabet == "tokens" else ("myers", "dp"):
            for max_distance in (None, 3):
                ta.levenshtein(a, b, algorithm=algorithm, max_distance=max_distance)
                ta.levenshtein_cdist(a, b, algorithm=algorithm, max_distance=max_distance)
    for n in PATTERN_LENGTHS:
        a, b = ta.encode(_seqs(DNA, [n, 3]), "dna"), ta.encode(_seqs(DNA, [n + 1, n]), "dna")
        for max_distance in (None, 5):
            ta.levenshtein(a, b, max_distance=max_distance)
            ta.levenshtein_cdist(a, b, max_distance=max_distance)


def drive_asm():
    from torchalign_kernels import asm

    for alphabet, symbols in ALPHABETS:
        texts = _as(alphabet, _seqs(symbols, [60, 5], seed=7))
        pats = _as(alphabet, _seqs(symbols, [4, 9], seed=8))
        for algorithm in ("myers", "dp"):
            ta.asm_search(texts, pats, 1, algorithm=algorithm)
            ta.asm_best(texts, pats, algorithm=algorithm)
            ta.asm_profile(texts, pats, algorithm=algorithm)
    texts = ta.encode(_seqs(DNA, [70_000]), "dna")
    for n in PATTERN_LENGTHS:
        pats = ta.encode(_seqs(DNA, [n, 2], seed=n), "dna")
        for k in (0, 3 * n // 4):  # narrow and wide bands
            ta.asm_search(texts, pats, k)
        ta.asm_best(texts, pats)
        ta.asm_profile(texts, pats)
        # the starts of hits: ops/asm.py calls this only when the (here unrun) search found some
        lens = pats.offsets[1:] - pats.offsets[:-1]
        for k in (1, 3 * n // 4):
            asm.hit_starts(texts.codes, torch.tensor([0, 0]), torch.tensor([n + 3, 900]), torch.tensor([0, 1]),
                           torch.tensor([1, 0]), pats.codes, pats.offsets[:-1], lens, n, 4, k)


def drive_primers():
    for alphabet, symbols in ALPHABETS:
        ta.kdiff_primers(_as(alphabet, _seqs(symbols, [30, 5], seed=9)), _as(alphabet, _seqs(symbols, [40], seed=10)),
                         2, alphabet=alphabet)


def drive_soft_align():
    for mode in ("global", "local", "semiglobal"):
        for M in (5, 200):  # chunks of 128 and 1,024 columns
            for gap in (1.0, torch.ones(2, 3, M)):  # one per pair, position-specific
                for checkpoint in (None, 2):
                    for extend in (0.5, None):  # affine (three states), linear (one)
                        x = torch.randn(2, 3, M, requires_grad=True)
                        ta.soft_align(x, gap, extend, mode=mode, checkpoint=checkpoint).sum().backward()
            for gap in (1.0, torch.ones(2, 3, M)):  # a loss on P: the Hessian-vector product
                ta.soft_alignment(x, gap, 0.5, mode=mode)[1].sum().backward()
        # one-state strips of 128 rows (3 rows: 32), and of 256 where a batch of 129..1,024 rows fills the SMs;
        # rows of a width % 4 == 0 take the backward's own-row stores
        for x in (torch.randn(2, 40, 5, requires_grad=True), torch.randn(100, 129, 2, requires_grad=True),
                  torch.randn(2, 40, 8, requires_grad=True), torch.randn(100, 129, 4, requires_grad=True)):
            ta.soft_align(x, 1.0, mode=mode).sum().backward()
            ta.soft_alignment(x, 1.0, mode=mode)[1].sum().backward()  # its Hessian-vector product



def drive_soft_dtw():
    for m in (10, 100, 200, 300, 600):  # each column block width
        costs = torch.randn(2, 5, m, requires_grad=True)
        for gamma in (0.5, torch.tensor(0.5, requires_grad=True)):  # dV/dgamma off, on
            for checkpoint in (None, 2):
                ta.soft_dtw(costs, gamma, checkpoint=checkpoint, bandwidth=m).sum().backward()
        (grad,) = torch.autograd.grad(ta.soft_dtw(costs, 0.5).sum(), costs, create_graph=True)
        grad.sum().backward()  # the Hessian-vector product's kernels
    # by anti-diagonals: strips of 32 rows, 128, and 256 where a batch fills the SMs, from a
    # full table (dV/dgamma off, on); with checkpoints the GPU tests' K: 2 and 8 the row
    # backward, 16 and 100 strips of K rows recomputed in segments
    # (the product's sweeps with gamma's terms, where gamma takes part, and without)
    for costs, ks in ((torch.randn(2, 5, 6), (2,)), (torch.randn(2, 40, 30), (8, 16)),
                      (torch.randn(100, 129, 2), (100,))):
        costs.requires_grad_(True)
        for gamma in (0.5, torch.tensor(0.5, requires_grad=True)):  # dV/dgamma off, on
            for k in ks:
                ta.soft_dtw(costs, gamma, checkpoint=k).sum().backward()
                (grad,) = torch.autograd.grad(ta.soft_dtw(costs, gamma, checkpoint=k).sum(), costs, create_graph=True)
                grad.sum().backward()  # (K >= 16: the product's sweeps by segments too)
            ta.soft_dtw(costs, gamma).sum().backward()
            (grad,) = torch.autograd.grad(ta.soft_dtw(costs, gamma).sum(), costs, create_graph=True)
            grad.sum().backward()  # the Hessian-vector product's two sweeps


DRIVERS = [drive_alignment, drive_traceback, drive_hamming, drive_distances, drive_asm, drive_primers,
           drive_soft_align, drive_soft_dtw]


def record(monkeypatch) -> list:
    with recording(monkeypatch) as seen:
        for drive in DRIVERS:
            drive()
    return seen
