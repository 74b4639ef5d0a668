"""The alignment custom op (Smith-Waterman / Needleman-Wunsch / semiglobal scores):
schema, fake, and the CPU / CUDA implementations.

Inputs: queries and targets as flat codes + offsets (pair b = query b, target b), the
substitution ``table`` (int32 [S, S], codes < S), affine gaps (a gap of length L costs
gap_open + (L - 1) gap_extend), ``mode`` ("local", "global", "semiglobal"), the longest
query and target (-1: unknown, read from the data). Every DP cell must stay inside
+-SCORE_LIMIT (scores are exact int32): a pair whose bound passes it raises. ``check=True``
validates offsets and codes with one host read.
"""

from __future__ import annotations

import contextlib

import torch
from torch import Tensor

from ..batch import _pack
from ..cpu import align as cpu
from ..scoring import SCORE_LIMIT
from . import checks
from .backend import kernels, use_kernels

DEVICES = ("cpu", "cuda")
MODES = ("local", "global", "semiglobal")


def _check_bound(table: Tensor, gap_open: int, gap_extend: int, q_longest: int, t_longest: int) -> None:
    top = max(int(table.abs().max()) if table.numel() else 0, gap_open, gap_extend, 1)
    if top * (q_longest + t_longest + 2) >= SCORE_LIMIT:
        raise ValueError(f"align_score: sequences of {q_longest} and {t_longest} residues with scores up to {top} "
                         f"could pass {SCORE_LIMIT} (exact int32 scores would not be guaranteed); split the "
                         "sequences or scale the scores down")


def _validate(q_codes, q_offsets, t_codes, t_offsets, table, gap_open, gap_extend, q_longest, t_longest, check,
              names=("queries", "targets")):
    """Offsets and codes (check=True), then the score bound; one host read at most."""
    if check or min(q_longest, t_longest) < 0:
        vals = checks.read(checks.two_batches(q_codes, q_offsets, t_codes, t_offsets))
        if check:
            for name, facts, (lo, hi) in ((names[0], vals[0:3], vals[6:8]), (names[1], vals[3:6], vals[8:10])):
                checks.raise_if_bad(name, facts, 0, 0, 1)
                if lo < 0 or hi >= table.shape[0]:
                    raise ValueError(f"{name}: codes must lie in [0, {table.shape[0]}) (the scoring matrix's "
                                     f"symbols), found {lo}..{hi}; a symbol the matrix lacks, or another alphabet")
        q_longest, t_longest = vals[10], vals[11]
    _check_bound(table, gap_open, gap_extend, q_longest, t_longest)


def _pairs(q_codes, q_offsets, t_codes, t_offsets, pair_q, pair_t, table, gap_open, gap_extend, mode, track,
           long_target=None):
    """Scores (and ends with ``track``) of query pair_q[i] against target pair_t[i]."""
    q_starts, q_lens = q_offsets[:-1], q_offsets[1:] - q_offsets[:-1]
    t_starts, t_lens = t_offsets[:-1], t_offsets[1:] - t_offsets[:-1]
    if use_kernels(q_codes):
        return kernels("align").align_pairs(q_codes, q_starts, q_lens, t_codes, t_starts, t_lens, pair_q, pair_t,
                                            table, gap_open, gap_extend, MODES.index(mode), track=track,
                                            long_target=long_target)
    return cpu.align_score(q_codes, q_starts[pair_q], q_lens[pair_q], t_codes, t_starts[pair_t], t_lens[pair_t],
                           table, gap_open, gap_extend, mode)


@torch.library.custom_op("torchalign::align_score", mutates_args=(), device_types=DEVICES)
def align_score(q_codes: Tensor, q_offsets: Tensor, t_codes: Tensor, t_offsets: Tensor, table: Tensor,
                gap_open: int, gap_extend: int, mode: str, q_longest: int, t_longest: int,
                check: bool) -> tuple[Tensor, Tensor, Tensor]:
    _validate(q_codes, q_offsets, t_codes, t_offsets, table, gap_open, gap_extend, q_longest, t_longest, check)
    b = torch.arange(q_offsets.numel() - 1, device=q_codes.device)
    return _pairs(q_codes, q_offsets, t_codes, t_offsets, b, b, table, gap_open, gap_extend, mode, True)


@align_score.register_fake
def _(q_codes, q_offsets, t_codes, t_offsets, table, gap_open, gap_extend, mode, q_longest, t_longest, check):
    n = q_offsets.shape[0] - 1
    return (q_offsets.new_empty(n, dtype=torch.int32), q_offsets.new_empty(n, dtype=torch.int64),
            q_offsets.new_empty(n, dtype=torch.int64))


PAIRS_PER_LAUNCH = 1 << 24  # query x database pairs scored per launch (16 B of pair indices each)
NARROW_MAX_SCORE = 1000  # substitution scores and gaps up to this take the packed int16 scan
# The scan's pair table holds (S + 1)^3 int32 for S symbols: 20 KB for DNA (S = 16), 79 KB
# for proteins (S = 26), 1.1 MB at S = 64, but 68 MB for bytes (S = 256), where each query
# row's slice (264 KB) leaves the L1 cache and building the table costs more than scanning
# a small database. Larger tables take the int32 kernels (the same scores; their table is
# (S + 1)^2). The scan itself stays exact up to 256 symbols (tests/test_bytes_alphabet.py).
SCAN_MAX_SYMBOLS = 64


def _narrow(q_codes, d_codes, table, gap_open, gap_extend, mode) -> bool:
    """Whether the search takes the packed int16 database scan (local scores, byte codes,
    small scores, at most SCAN_MAX_SYMBOLS symbols)."""
    top = max(int(table.abs().max()) if table.numel() else 0, gap_open, gap_extend)
    return (use_kernels(q_codes) and mode == "local" and d_codes.dtype == torch.uint8 and top <= NARROW_MAX_SCORE
            and table.shape[0] <= SCAN_MAX_SYMBOLS)


SCAN_STREAMS = 4  # queries scanned on this many CUDA streams at once: one launch's tail overlaps the next
# Chunks this long leave the int16 scan (one would be its launch's tail) for align_pairs,
# where targets of SCAN_WAVE residues or more take the wavefront kernel and the rest the
# inter-task one. H200, 20 queries vs 570,000 sequences: (1,024, 1,024) 1.48 TCUPS,
# (1,024, 2,048) 1.68-1.70, (1,024, 4,096) 1.65-1.66, (2,048, 4,096) 1.87 (NOTES.md).
SCAN_LONG = 2048
SCAN_WAVE = 4096


def _side_streams(dev, n: int) -> list:
    """n streams that start after the work queued so far on the current one (None on the CPU)."""
    if dev.type != "cuda":
        return [None] * n
    streams = [torch.cuda.Stream(dev) for _ in range(n)]
    for s in streams:
        s.wait_stream(torch.cuda.current_stream(dev))
    return streams


def _on(stream):
    return torch.cuda.stream(stream) if stream is not None else contextlib.nullcontext()


class _Scan:
    """The database packed for align_scan (sorted by length, interleaved chunks of
    2 x LANES), the chunks of SCAN_LONG residues or more kept out of the scan."""

    def __init__(self, d_codes, d_offsets, table):
        self.k = kernels("align_scan")
        self.packed = _pack(d_codes, d_offsets, 2 * self.k.LANES)
        long = self.packed.chunk_lengths >= SCAN_LONG
        self.chunk0 = int(long.sum())  # sorted longest first: the long chunks lead
        self.n = d_offsets.numel() - 1
        self.long_ranks = min(self.n, self.chunk0 * 2 * self.k.LANES)
        self.pairs = self.k.pair_table(table, self.k.NEG16)
        self.scratch = []  # one per stream in use (int32 per packed slot)
        self.limit = 32767 - max(int(table.max()) if table.numel() else 0, 0)  # above: may have wrapped

    def scores(self, q_codes, q_offsets, d_codes, d_offsets, q0, q1, table, gap_open, gap_extend):
        """int32 [q1 - q0, n]: queries q0..q1 against every database sequence."""
        dev, order, lr = q_codes.device, self.packed.order, self.long_ranks
        by_rank = torch.empty((q1 - q0, self.n), dtype=torch.int32, device=dev)
        long_stream, *scan_streams = _side_streams(dev, 1 + min(SCAN_STREAMS, q1 - q0))
        if lr:  # the long chunks' pairs, beside the scans
            with _on(long_stream):
                pair_q = torch.arange(q0, q1, device=dev).repeat_interleave(lr)
                by_rank[:, :lr] = _pairs(q_codes, q_offsets, d_codes, d_offsets, pair_q, order[:lr].repeat(q1 - q0),
                                         table, gap_open, gap_extend, "local", False, SCAN_WAVE)[0].view(q1 - q0, lr)
        while len(self.scratch) < len(scan_streams):
            self.scratch.append(torch.empty(max(1, self.packed.codes.numel()), dtype=torch.int32, device=dev))
        for qi in range(q0, q1):
            s = (qi - q0) % len(scan_streams)
            with _on(scan_streams[s]):
                by_rank[qi - q0, lr:] = self.k.scan_query(q_codes, q_offsets, qi, self.pairs, self.packed, self.chunk0,
                                                          self.scratch[s], gap_open, gap_extend)[lr:self.n]
        if dev.type == "cuda":
            for stream in [long_stream] + scan_streams:
                torch.cuda.current_stream(dev).wait_stream(stream)
        # a score above the limit may have wrapped in 16 bits: recompute it in int32
        again = torch.nonzero(by_rank[:, lr:] > self.limit)
        if again.numel():
            pair_t = order[lr + again[:, 1]]
            by_rank[again[:, 0], lr + again[:, 1]] = _pairs(q_codes, q_offsets, d_codes, d_offsets, q0 + again[:, 0],
                                                            pair_t, table, gap_open, gap_extend, "local", False)[0]
        out = torch.empty_like(by_rank)
        out[:, order] = by_rank
        return out


@torch.library.custom_op("torchalign::search", mutates_args=(), device_types=DEVICES)
def search(q_codes: Tensor, q_offsets: Tensor, d_codes: Tensor, d_offsets: Tensor, table: Tensor, gap_open: int,
           gap_extend: int, mode: str, top_k: int, q_longest: int, d_longest: int,
           check: bool) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    _validate(q_codes, q_offsets, d_codes, d_offsets, table, gap_open, gap_extend, q_longest, d_longest, check,
              ("queries", "database"))
    n_q, n_d = q_offsets.numel() - 1, d_offsets.numel() - 1
    k = min(top_k, n_d)
    dev = q_codes.device
    keys = torch.empty((n_q, k), dtype=torch.int64, device=dev)
    per = max(1, PAIRS_PER_LAUNCH // max(n_d, 1))
    targets = torch.arange(n_d, device=dev)
    scan = _Scan(d_codes, d_offsets, table) if _narrow(q_codes, d_codes, table, gap_open, gap_extend, mode) else None
    for q0 in range(0, n_q, per):
        q1 = min(n_q, q0 + per)
        if scan is not None:
            score = scan.scores(q_codes, q_offsets, d_codes, d_offsets, q0, q1, table, gap_open, gap_extend)
        else:
            pair_q = torch.arange(q0, q1, device=dev).repeat_interleave(n_d)
            score = _pairs(q_codes, q_offsets, d_codes, d_offsets, pair_q, targets.repeat(q1 - q0), table, gap_open,
                           gap_extend, mode, False)[0]
        # the best scores, ties to the smallest database index: one int64 key each
        key = (score.to(torch.int64).view(q1 - q0, n_d) << 32) + ((1 << 32) - 1 - targets)
        keys[q0:q1] = torch.topk(key, k, dim=1).values
    scores = (keys >> 32).to(torch.int32)
    indices = (1 << 32) - 1 - (keys & 0xFFFFFFFF)
    # the ends of the chosen pairs only
    pair_q = torch.arange(n_q, device=dev).repeat_interleave(k)
    _, q_end, t_end = _pairs(q_codes, q_offsets, d_codes, d_offsets, pair_q, indices.reshape(-1), table, gap_open,
                             gap_extend, mode, True)
    return scores, indices, t_end.view(n_q, k), q_end.view(n_q, k)


@search.register_fake
def _(q_codes, q_offsets, d_codes, d_offsets, table, gap_open, gap_extend, mode, top_k, q_longest, d_longest, check):
    shape = (q_offsets.shape[0] - 1, min(top_k, d_offsets.shape[0] - 1))
    return (q_offsets.new_empty(shape, dtype=torch.int32), q_offsets.new_empty(shape, dtype=torch.int64),
            q_offsets.new_empty(shape, dtype=torch.int64), q_offsets.new_empty(shape, dtype=torch.int64))
