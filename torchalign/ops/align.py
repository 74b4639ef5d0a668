"""The alignment custom op (Smith-Waterman / Needleman-Wunsch / semiglobal scores):
schema, fake, and the CPU / CUDA implementations.

Inputs: queries and targets as flat codes + offsets (pair b = query b, target b), the
substitution ``table`` (int32 [S, S], codes < S), affine gaps (a gap of length L costs
gap_open + (L - 1) gap_extend), ``mode`` ("local", "global", "semiglobal"), the longest
query and target and (align_score) ``top``, the table's largest |entry| (-1: unknown, read
from the data). Every DP cell must stay inside +-SCORE_LIMIT (scores are exact int32): a
pair whose bound passes it raises. ``check=True`` validates offsets and codes with one
host read; align_score with ``check=False`` and every hint reads nothing back (its GPU
launches are planned from the hints: CUDA graphs).
"""

from __future__ import annotations

import bisect
import contextlib
import weakref

import torch
from torch import Tensor

from ..batch import _packs_of, packed
from ..cpu import parasail_align as cpu
from ..scoring import SCORE_LIMIT
from . import checks
from .backend import kernels, use_kernels, on_tensor_device

DEVICES = ("cpu", "cuda")
MODES = ("local", "global", "semiglobal")


def table_top(table: Tensor) -> int:
    """The largest |entry| of a substitution table (one host read for a device table)."""
    return int(table.abs().max()) if table.numel() else 0


def _check_bound(top: int, gap_open: int, gap_extend: int, q_longest: int, t_longest: int) -> None:
    top = max(top, gap_open, gap_extend, 1)
    if top * (q_longest + t_longest + 2) >= SCORE_LIMIT:
        raise ValueError(f"align_score: sequences of {q_longest} and {t_longest} residues with scores up to {top} "
                         f"could pass {SCORE_LIMIT} (exact int32 scores would not be guaranteed); split the "
                         "sequences or scale the scores down")


def _validate(q_codes, q_offsets, t_codes, t_offsets, table, gap_open, gap_extend, q_longest, t_longest, check,
              names=("queries", "targets"), top=-1):
    """Offsets and codes (check=True), then the score bound; one host read at most, none
    with check=False and every hint given (the longest query and target, the table's
    largest |entry| ``top``). Returns (q_longest, t_longest)."""
    if check or min(q_longest, t_longest, top) < 0:
        table_max = table.abs().max() if table.numel() else table.new_zeros(())
        vals = checks.read(checks.two_batches(q_codes, q_offsets, t_codes, t_offsets) + [table_max])
        if check:
            for name, facts, (lo, hi) in ((names[0], vals[0:3], vals[6:8]), (names[1], vals[3:6], vals[8:10])):
                checks.raise_if_bad(name, facts, 0, 0, 1)
                if lo < 0 or hi >= table.shape[0]:
                    raise ValueError(f"{name}: codes must lie in [0, {table.shape[0]}) (the scoring matrix's "
                                     f"symbols), found {lo}..{hi}; a symbol the matrix lacks, or another alphabet")
        q_longest, t_longest, top = vals[10], vals[11], vals[12]
    _check_bound(top, gap_open, gap_extend, q_longest, t_longest)
    return q_longest, t_longest


def _pairs(q_codes, q_offsets, t_codes, t_offsets, pair_q, pair_t, table, gap_open, gap_extend, mode, track,
           long_target=None, longest=None, wave_rows=None):
    """Scores (and ends with ``track``) of query pair_q[i] against target pair_t[i].
    ``longest``: (q_longest, t_longest) to plan the GPU launches without a host read."""
    q_starts, q_lens = q_offsets[:-1], q_offsets[1:] - q_offsets[:-1]
    t_starts, t_lens = t_offsets[:-1], t_offsets[1:] - t_offsets[:-1]
    if use_kernels(q_codes):
        return kernels("align").align_pairs(q_codes, q_starts, q_lens, t_codes, t_starts, t_lens, pair_q, pair_t,
                                            table, gap_open, gap_extend, MODES.index(mode), track=track,
                                            long_target=long_target, longest=longest, wave_rows=wave_rows)
    return cpu.align_pairs(q_codes, q_starts, q_lens, t_codes, t_starts, t_lens, pair_q, pair_t, table, gap_open,
                           gap_extend, mode)


@torch.library.custom_op("torchalign::align_score", mutates_args=(), device_types=DEVICES)
@on_tensor_device
def align_score(q_codes: Tensor, q_offsets: Tensor, t_codes: Tensor, t_offsets: Tensor, table: Tensor,
                gap_open: int, gap_extend: int, mode: str, q_longest: int, t_longest: int,
                check: bool, top: int = -1) -> tuple[Tensor, Tensor, Tensor]:
    longest = _validate(q_codes, q_offsets, t_codes, t_offsets, table, gap_open, gap_extend, q_longest, t_longest,
                        check, top=top)
    b = torch.arange(q_offsets.numel() - 1, device=q_codes.device)
    # check=False: launches planned from the hints (no host read); else from the data
    return _pairs(q_codes, q_offsets, t_codes, t_offsets, b, b, table, gap_open, gap_extend, mode, True,
                  longest=None if check else longest)


@align_score.register_fake
def _(q_codes, q_offsets, t_codes, t_offsets, table, gap_open, gap_extend, mode, q_longest, t_longest, check, top=-1):
    n = q_offsets.shape[0] - 1
    return (q_offsets.new_empty(n, dtype=torch.int32), q_offsets.new_empty(n, dtype=torch.int64),
            q_offsets.new_empty(n, dtype=torch.int64))


# Query x database pairs per step of a search: the local scan keeps ~40 B per pair (scores
# by rank and in order, the top-k keys), the other modes ~150 B (align_pairs' pair indices,
# sort keys and order, scores, and the keys).
PAIRS_PER_LAUNCH = 1 << 24
PAIRS_PER_STEP = 1 << 22
NARROW_MAX_SCORE = 1000  # substitution scores and gaps up to this take the packed int16 scan
# A tile of the scan's query profile holds ROWS x PW int16 (PW: the S symbols and the pad,
# rounded up to 32): 2.5 KB for DNA and proteins, 5 KB at S = 64, 23 KB for bytes (S = 256),
# whose gathers of 8 rows also spread over 36 cache lines instead of 4. Larger alphabets take
# the int32 kernels (the same scores). The scan itself stays exact up to 256 symbols
# (tests/test_bytes_alphabet.py).
SCAN_MAX_SYMBOLS = 64


def _narrow(q_codes, d_codes, table, gap_open, gap_extend, mode) -> bool:
    """Whether the search takes the packed int16 database scan (local scores, byte codes,
    small scores, at most SCAN_MAX_SYMBOLS symbols)."""
    top = max(table_top(table), gap_open, gap_extend)
    return (use_kernels(q_codes) and mode == "local" and d_codes.dtype == torch.uint8 and top <= NARROW_MAX_SCORE
            and table.shape[0] <= SCAN_MAX_SYMBOLS)


SCAN_STREAMS = 4  # launches of queries on this many CUDA streams at once: one launch's tail overlaps the next
# The scan's ring per stream (two int32 per packed slot and query of a launch): chunks in slices
# that fit, and as many queries per launch as fit (all 20 bundled ones; one for 200 M residues)
SCAN_SCRATCH_BYTES = 1 << 30
# The top hits' ends: fewer pairs than this all take align_wave (a pair per program, its query
# rows over the lanes) when a query reaches ENDS_WAVE_QUERY residues: one lane per pair would
# leave the GPU idle behind its longest pair. Shorter queries take the usual split (long
# targets on align_wave, the rest a lane each), which also keeps the interpreter's tests short.
ENDS_WAVE_PAIRS = 1 << 14
ENDS_WAVE_QUERY = 256
# and 8 rows per lane there: the bundled search's longest pair (5,478 x 4,560) took 3.4 ms on
# an H100 with 8 (six passes of 1,024 rows, a program each), 4.3 with 16, 6.9 with the 48 of
# one program (benchmarks/NOTES.md, "The top hits' ends")
ENDS_WAVE_ROWS = 8


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
    2 x LANES), scanned in slices of chunks whose ring (8 B per packed slot) fits
    SCAN_SCRATCH_BYTES. Long chunks stay on the scan: a query's tiles run as a wavefront
    (align_scan.py), so one long chunk is not its launch's tail."""

    def __init__(self, d_codes, d_offsets, table, gap_open: int, gap_extend: int):
        self.k = kernels("align_scan")
        p = self.packed = packed(d_codes, d_offsets, 2 * self.k.LANES)  # once per database
        offs = p.chunk_offsets.tolist()  # one read
        self.n = d_offsets.numel() - 1
        self.slices = []  # (first chunk, end chunk, the slice as a PackedBatch of its own)
        c0, slots = 0, max(1, SCAN_SCRATCH_BYTES // 8)
        while c0 < len(offs) - 1:
            c1 = min(len(offs) - 1, max(c0 + 1, bisect.bisect_right(offs, offs[c0] + slots) - 1))
            part = p._replace(codes=p.codes[offs[c0]:offs[c1]], chunk_offsets=p.chunk_offsets[c0 : c1 + 1] - offs[c0],
                              chunk_lengths=p.chunk_lengths[c0:c1], lengths=p.lengths[c0 * p.lanes : c1 * p.lanes])
            self.slices.append((c0, c1, part))
            c0 = c1
        self.slots = max([offs[c1] - offs[c0] for c0, c1, _ in self.slices], default=0)
        top, small = torch.stack([table.max(), table.abs().max()]).tolist() if table.numel() else (0, 0)
        top = max(top, 0)
        # float16 pairs (use_half2: the default without DPX) where the scores, the gaps and
        # their sums are exact integers in float16
        exact = max(small, gap_open + gap_extend) <= self.k.HALF_EXACT // 2
        self.half = self.k.use_half2(d_codes.device) if exact else 0
        self.profile = self.k.profile_table(table, gap_open, self.half > 0)
        # above the limit a score may have wrapped (int16) or been rounded (float16): recomputed in int32
        self.limit = (self.k.HALF_EXACT if self.half else 32767) - top

    def scores(self, q_codes, q_offsets, d_codes, d_offsets, q0, q1, table, gap_open, gap_extend):
        """int32 [q1 - q0, n]: queries q0..q1 against every database sequence."""
        dev, per_chunk = q_codes.device, 2 * self.k.LANES
        by_rank = torch.empty((q1 - q0, self.n), dtype=torch.int32, device=dev)
        q_lengths = (q_offsets[q0 + 1 : q1 + 1] - q_offsets[q0:q1]).tolist()
        # each query of a launch keeps two rows of the ring (8 B per packed slot)
        per_launch = max(1, min(q1 - q0, SCAN_SCRATCH_BYTES // (8 * max(1, self.slots))))
        launches = [(g0, min(q1, g0 + per_launch)) for g0 in range(q0, q1, per_launch)]
        streams = _side_streams(dev, min(SCAN_STREAMS, len(launches)))
        need = max(1, 2 * self.slots * per_launch)
        scratch = [torch.empty(need, dtype=torch.int32, device=dev) for _ in streams]  # (not kept: up to 1 GiB each)
        for i, (g0, g1) in enumerate(launches):
            s = i % len(streams)
            with _on(streams[s]):
                for c0, c1, part in self.slices:
                    a, b = c0 * per_chunk, min(self.n, c1 * per_chunk)
                    self.k.scan_queries(q_codes, q_offsets, g0, g1, self.profile, part, 0, scratch[s], gap_open,
                                        gap_extend, half=self.half, q_lengths=q_lengths[g0 - q0 : g1 - q0],
                                        out=by_rank[g0 - q0 : g1 - q0, a:b])
        if dev.type == "cuda":
            for stream in streams:
                torch.cuda.current_stream(dev).wait_stream(stream)
        # a score above the limit may have wrapped in 16 bits: recompute it in int32
        again = torch.nonzero(by_rank > self.limit)
        if again.numel():
            pair_t = self.packed.order[again[:, 1]]
            by_rank[again[:, 0], again[:, 1]] = _pairs(q_codes, q_offsets, d_codes, d_offsets, q0 + again[:, 0],
                                                       pair_t, table, gap_open, gap_extend, "local", False)[0]
        out = torch.empty_like(by_rank)
        out[:, self.packed.order] = by_rank
        return out


def _scan_of(d_codes, d_offsets, table, gap_open: int, gap_extend: int) -> _Scan:
    """The database's _Scan for this table and these gaps, made once and kept with its
    packed form, so its host reads and query profile are paid once (the bundled search:
    29.1 -> 28.1 ms on an H100); a table changed in place, another one, another float16
    choice or scratch budget makes it anew."""
    packs = _packs_of(d_codes, d_offsets)
    # (the float16 choice too: TORCHALIGN_SCAN_HALF2 / NO_DPX are read at every call; and the
    # scratch budget its slices are cut by)
    key = ("scan", gap_open, gap_extend, kernels("align_scan").use_half2(d_codes.device), SCAN_SCRATCH_BYTES)
    got = packs.get(key)
    try:
        stamp = table._version
    except RuntimeError:  # an inference tensor keeps no version: never reused
        stamp = None
    if got is None or got[0]() is not table or got[1] != stamp or stamp is None:
        got = packs[key] = (weakref.ref(table), stamp, _Scan(d_codes, d_offsets, table, gap_open, gap_extend))
    return got[2]


@torch.library.custom_op("torchalign::search", mutates_args=(), device_types=DEVICES)
@on_tensor_device
def search(q_codes: Tensor, q_offsets: Tensor, d_codes: Tensor, d_offsets: Tensor, table: Tensor, gap_open: int,
           gap_extend: int, mode: str, top_k: int, q_longest: int, d_longest: int,
           check: bool) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    q_longest, d_longest = _validate(q_codes, q_offsets, d_codes, d_offsets, table, gap_open, gap_extend, q_longest,
                                     d_longest, check, ("queries", "database"))
    n_q, n_d = q_offsets.numel() - 1, d_offsets.numel() - 1
    k = min(top_k, n_d)
    dev = q_codes.device
    keys = torch.empty((n_q, k), dtype=torch.int64, device=dev)
    targets = torch.arange(n_d, device=dev)
    narrow = _narrow(q_codes, d_codes, table, gap_open, gap_extend, mode)
    scan = _scan_of(d_codes, d_offsets, table, gap_open, gap_extend) if narrow else None
    per = max(1, (PAIRS_PER_LAUNCH if scan is not None else PAIRS_PER_STEP) // max(n_d, 1))
    for q0 in range(0, n_q, per):
        q1 = min(n_q, q0 + per)
        if scan is not None:
            score = scan.scores(q_codes, q_offsets, d_codes, d_offsets, q0, q1, table, gap_open, gap_extend)
        else:  # every pair of these queries: align_pairs runs them in launches of bounded scratch
            pair_q = torch.arange(q0, q1, device=dev)[:, None].expand(q1 - q0, n_d).reshape(-1)
            pair_t = targets[None, :].expand(q1 - q0, n_d).reshape(-1)
            score = _pairs(q_codes, q_offsets, d_codes, d_offsets, pair_q, pair_t, table, gap_open, gap_extend, mode,
                           False)[0]
            del pair_q, pair_t
        # the best scores, ties to the smallest database index: one int64 key each
        key = (score.to(torch.int64).view(q1 - q0, n_d) << 32) + ((1 << 32) - 1 - targets)
        keys[q0:q1] = torch.topk(key, k, dim=1).values
    scores = (keys >> 32).to(torch.int32)
    indices = (1 << 32) - 1 - (keys & 0xFFFFFFFF)
    # the ends of the chosen pairs only
    pair_q = torch.arange(n_q, device=dev)[:, None].expand(n_q, k).reshape(-1)
    _, q_end, t_end = _pairs(q_codes, q_offsets, d_codes, d_offsets, pair_q, indices.reshape(-1), table, gap_open,
                             gap_extend, mode, True,
                             0 if pair_q.numel() < ENDS_WAVE_PAIRS and q_longest >= ENDS_WAVE_QUERY else None,
                             wave_rows=ENDS_WAVE_ROWS)
    return scores, indices, t_end.view(n_q, k), q_end.view(n_q, k)


@search.register_fake
def _(q_codes, q_offsets, d_codes, d_offsets, table, gap_open, gap_extend, mode, top_k, q_longest, d_longest, check):
    shape = (q_offsets.shape[0] - 1, min(top_k, d_offsets.shape[0] - 1))
    return (q_offsets.new_empty(shape, dtype=torch.int32), q_offsets.new_empty(shape, dtype=torch.int64),
            q_offsets.new_empty(shape, dtype=torch.int64), q_offsets.new_empty(shape, dtype=torch.int64))
