"""Database scan, local scores only, two cells per 32-bit operation (int16 pairs).

The search path of the inter-task scheme: many queries per launch, the database packed
(sorted by length, chunks of 2 x LANES sequences stored interleaved, so a warp's loads
of a column are coalesced). Lane l of a program holds two database sequences at once,
slot l in the low 16 bits and slot l + LANES in the high 16 bits of every DP register,
and each step of Gotoh's recurrence is one packed instruction: on Hopper ``add.s16x2``
and ``max.s16x2`` through inline PTX (ptxas fuses an add and a max into one DPX
instruction; both need sm_90), elsewhere (compute capability < 9.0, the interpreter,
TORCHALIGN_NO_DPX=1: DPX=False) the same integers from plain int32 instructions. The
substitution scores of both sequences come from one load of a pair table: entry (query
code, code A, code B) holds both scores packed. Slots past a sequence's end (and query
rows past the query's) take the pad code by their length, whatever the packed database
holds there: for 256-symbol tables every byte is a real code.

Saturation: local scores start at 0 and a cell exceeds its neighbours by at most the
largest substitution score S, so while every cell stays <= 32767 - S no sum can wrap
(gaps only lower a cell, and H >= 0 keeps E, F >= -gap_open). The kernel returns each
sequence's best cell; a best above 32767 - S means the sequence may have wrapped, and
the caller recomputes it in int32. A wrong score is never returned.

Pure: imports only torch and triton.
"""

import os

import torch
import triton
import triton.language as tl

NEG16 = -(1 << 14)  # minus infinity of the packed path: pads, the first E and F


def packed_pair(value: int) -> int:
    """``value`` in both halves of an int32."""
    v = value & 0xFFFF
    return ((v << 16) | v) - (1 << 32) if v >= 0x8000 else (v << 16) | v


NEG2 = tl.constexpr(packed_pair(NEG16))
LANES = 32  # lanes per program (2 x LANES sequences per chunk)
ROWS = 48  # query rows per tile, held in registers


HIGH = tl.constexpr(-(1 << 16))  # 0xFFFF0000: the high halfword


@triton.jit
def _add2(a, b, DPX: tl.constexpr):
    """Per-halfword a + b (wrapping)."""
    if DPX:
        return tl.inline_asm_elementwise("add.s16x2 $0, $1, $2;", "=r,r,r", [a, b], dtype=tl.int32,
                                         is_pure=True, pack=1)
    else:  # one 32-bit add, less the carry out of the low half (bit 16 of a ^ b ^ sum)
        s = a + b
        return s - ((a ^ b ^ s) & 0x10000)


@triton.jit
def _max2(a, b, DPX: tl.constexpr):
    """Per-halfword signed max."""
    if DPX:
        return tl.inline_asm_elementwise("max.s16x2 $0, $1, $2;", "=r,r,r", [a, b], dtype=tl.int32,
                                         is_pure=True, pack=1)
    else:  # each half compared alone in the top 16 bits of a signed max (the low bits 0)
        lo = tl.maximum(a << 16, b << 16).to(tl.uint32, bitcast=True) >> 16
        return tl.maximum(a & HIGH, b & HIGH) | lo.to(tl.int32, bitcast=True)


@triton.jit(do_not_specialize=["q0", "n_q", "chunk0", "n_seqs", "pair_width", "scratch_stride", "best_stride",
                               "neg_open", "neg_extend", "pad"])  # one variant per DPX
def scan_kernel(
    q_ptr, q_off_ptr, q0, n_q, pair_ptr, pair_width, db_ptr, chunk_off_ptr, chunk_len_ptr, len_ptr, n_seqs, chunk0,
    scratch_ptr, scratch_stride, best_ptr, best_stride, neg_open, neg_extend, pad,
    ROWS: tl.constexpr, LANES: tl.constexpr, DPX: tl.constexpr,
):
    """Program p scans chunk chunk0 + p // n_q against query qi = q0 + p % n_q, q[q_off[qi] :
    q_off[qi + 1]]: chunk-major, so the longest chunks of every query start first and a
    small database still fills the GPU.
    ``pair``: int32 [query code][code A * pair_width + code B] = the two scores packed;
    ``len``: the n_seqs sequence lengths in packed (sorted) order, slot s of chunk c
    holding sequence c * 2 LANES + s; ``neg_open`` / ``neg_extend``: -gap_open /
    -gap_extend packed in both halves; ``scratch``: int32, scratch_stride per query, at the
    chunk's own offset in it 2 x LANES per column (the tile's last row H and F). ``pad``:
    the pad code (pair_width - 1). Writes the packed best of lane l to
    best[(qi - q0) * best_stride + chunk * LANES + l]."""
    p = tl.program_id(0)
    c = chunk0 + p // n_q
    qn = (p % n_q).to(tl.int64)
    qi = q0 + qn
    q_start = tl.load(q_off_ptr + qi)
    m = (tl.load(q_off_ptr + qi + 1) - q_start).to(tl.int32)
    base = tl.load(chunk_off_ptr + c)
    n = tl.load(chunk_len_ptr + c).to(tl.int32)
    lane = tl.arange(0, LANES)
    rank = c.to(tl.int64) * (2 * LANES) + lane  # the low halves' sequences; the high halves' + LANES
    len_a = tl.load(len_ptr + rank, mask=rank < n_seqs, other=0).to(tl.int32)
    len_b = tl.load(len_ptr + rank + LANES, mask=rank + LANES < n_seqs, other=0).to(tl.int32)
    zero = tl.zeros((LANES,), tl.int32)
    neg = zero + NEG2
    col = db_ptr + base + lane
    row_at = scratch_ptr + qn * scratch_stride + base + lane
    best = zero
    r0 = 0
    while r0 < m:
        rows = ()
        hs = ()
        es = ()
        for r in tl.static_range(ROWS):
            qc = tl.load(q_ptr + q_start + r0 + r, mask=r0 + r < m, other=0).to(tl.int32)
            rows = rows + (pair_ptr + tl.where(r0 + r < m, tl.minimum(qc, pad), pad) * pair_width * pair_width,)
            hs = hs + (zero,)
            es = es + (neg,)
        corner = zero
        j = 0
        while j < n:
            a = tl.where(j < len_a, tl.minimum(tl.load(col + j * 2 * LANES).to(tl.int32), pad), pad)
            b = tl.where(j < len_b, tl.minimum(tl.load(col + j * 2 * LANES + LANES).to(tl.int32), pad), pad)
            idx = a * pair_width + b
            if r0 == 0:
                h_up = zero
                f_up = neg
            else:
                h_up = tl.load(row_at + j * 2 * LANES)
                f_up = tl.load(row_at + j * 2 * LANES + LANES)
            diag = corner
            corner = h_up
            new_h = ()
            new_e = ()
            for r in tl.static_range(ROWS):
                s = tl.load(rows[r] + idx)
                e = _max2(_add2(hs[r], neg_open, DPX), _add2(es[r], neg_extend, DPX), DPX)
                f = _max2(_add2(h_up, neg_open, DPX), _add2(f_up, neg_extend, DPX), DPX)
                h = _max2(_max2(_add2(diag, s, DPX), e, DPX), _max2(f, zero, DPX), DPX)
                best = _max2(best, h, DPX)
                diag = hs[r]
                h_up = h
                f_up = f
                new_h = new_h + (h,)
                new_e = new_e + (e,)
            hs = new_h
            es = new_e
            tl.store(row_at + j * 2 * LANES, h_up)
            tl.store(row_at + j * 2 * LANES + LANES, f_up)
            j += 1
        r0 += ROWS
    tl.store(best_ptr + qn * best_stride + c * LANES + lane, best)


def pair_table(table, pad_score: int):
    """int32 [S + 1, (S + 1)^2]: entry [q, a * (S + 1) + b] holds table[q, a] in the low and
    table[q, b] in the high 16 bits; code S is the pad, scoring ``pad_score``. (S + 1)^3
    entries: 68 MB for 256 symbols (the op sends such tables to the int32 kernels)."""
    size = table.shape[0] + 1
    t = torch.full((size, size), pad_score, dtype=torch.int32, device=table.device)
    t[:-1, :-1] = table
    lo = t[:, :, None].expand(size, size, size)
    hi = t[:, None, :].expand(size, size, size)
    return ((hi << 16) | (lo & 0xFFFF)).reshape(size, size * size).contiguous()


DPX_CAPABILITY = (9, 0)  # add.s16x2 / max.s16x2: Hopper and later


def dpx_for(capability: tuple[int, int]) -> bool:
    """Whether a GPU of this compute capability runs the DPX path: sm_90 and later, unless
    the environment sets TORCHALIGN_NO_DPX=1 (read at every launch: the plain path on any GPU)."""
    return tuple(capability) >= DPX_CAPABILITY and os.environ.get("TORCHALIGN_NO_DPX") != "1"


def use_dpx(device: torch.device) -> bool:
    """dpx_for the device's compute capability; False off CUDA (the interpreter)."""
    return device.type == "cuda" and dpx_for(torch.cuda.get_device_capability(device))


def scan_queries(q_codes, q_offsets, q0: int, q1: int, pairs, packed, chunk0: int, scratch, gap_open: int,
                 gap_extend: int, rows: int | None = None):
    """Best local scores of queries q0..q1 against every sequence of chunks chunk0.. of
    ``packed`` (a PackedBatch of 2 x lanes lanes), in one launch: int32 [q1 - q0, chunks x 2
    lanes] in packed (sorted) order, the sequences of chunks before chunk0 left at 0.
    ``pairs``: pair_table(table, NEG16); ``scratch``: int32, (q1 - q0) x packed.codes.numel()."""
    n_chunks, lanes, n_q = packed.chunk_lengths.numel(), packed.lanes // 2, q1 - q0
    slots = packed.codes.numel()
    if scratch.numel() < n_q * slots:
        raise ValueError(f"scan_queries: scratch holds {scratch.numel()} int32, {n_q} queries need {n_q * slots}")
    best = torch.zeros((n_q, n_chunks * lanes), dtype=torch.int32, device=q_codes.device)
    if n_q > 0 and n_chunks > chunk0 and slots and q_codes.numel():  # (else every best is 0)
        width = pairs.shape[0]
        scan_kernel[((n_chunks - chunk0) * n_q,)](
            q_codes, q_offsets, q0, n_q, pairs, width, packed.codes, packed.chunk_offsets, packed.chunk_lengths,
            packed.lengths, packed.lengths.numel(), chunk0, scratch, slots, best, n_chunks * lanes,
            packed_pair(-gap_open), packed_pair(-gap_extend), width - 1,
            ROWS=rows or ROWS, LANES=lanes, DPX=use_dpx(q_codes.device), num_warps=max(1, lanes // 32),
        )
    # lane l of a chunk: slot l in the low half, slot l + lanes in the high half
    per_chunk = best.view(n_q, -1, lanes)
    lo = (per_chunk << 16) >> 16
    hi = per_chunk >> 16
    return torch.cat([lo, hi], dim=2).reshape(n_q, -1)
