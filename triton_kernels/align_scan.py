"""Database scan, local scores only, two cells per 32-bit operation (int16 pairs).

The search path of the inter-task scheme: many queries per launch, the database packed
(sorted by length, chunks of 2 x LANES sequences stored interleaved, so a warp's loads
of a column are coalesced). Lane l of a program holds two database sequences at once,
slot l in the low 16 bits and slot l + LANES in the high 16 bits of every DP register,
and each step of Gotoh's recurrence is one packed instruction: on Hopper ``add.s16x2``
and ``max.s16x2`` through inline PTX (ptxas fuses an add and a max into one DPX
instruction; both need sm_90), elsewhere (compute capability < 9.0, the interpreter,
TORCHALIGN_NO_DPX=1: DPX=False) the same integers from plain int32 instructions. The
substitution scores of both sequences come from the tile's query profile: 8 rows' int16
scores in one 16-byte load per sequence, the two joined by a byte permute per row. Slots
past a sequence's end (and query rows past the query's) take the pad code by their length,
whatever the packed database holds there: for 256-symbol tables every byte is a real code.

Work: a program per (tile of ROWS query rows, chunk), so a small database or one long
chunk still fills the GPU. Tile t of a query reads tile t - 1's bottom row as it is
written (a ring of two rows per query, progress counters, spin.py): a wavefront down the
query, on top of the chunks' independence. Programs take their work in ticket order (an
atomic counter), so whatever a program waits for has started.

Saturation: local scores start at 0 and a cell exceeds its neighbours by at most the
largest substitution score S, so while every cell stays <= 32767 - S no sum can wrap
(gaps only lower a cell, and H >= 0 keeps E, F >= -gap_open). The kernel returns each
sequence's best cell; a best above 32767 - S means the sequence may have wrapped, and
the caller recomputes it in int32. A wrong score is never returned.

Float16 pairs (HALF; the default where DPX is not taken, TORCHALIGN_SCAN_HALF2=0 / 1
turns it off / on; CUDASW++'s arithmetic before Hopper): the same recurrence on float16
bit patterns, ``add.rn.f16x2`` / ``max.f16x2`` on sm_80 and later (the interpreter:
Triton's float16 ops, the same sums). Every integer up to HALF_EXACT = 2,048 is a float16,
so while every cell stays <= 2,048 - S all sums are exact; the first cell past it is itself
exact and raises the best above the caller's limit (2,048 - S), which recomputes that
sequence in int32.

Pure: imports only torch and triton.
"""

import os

import torch
import triton
import triton.language as tl

# the scores by inline PTX (compile time; the interpreter runs tl.load); the query codes stay
# tl.load here: inline, they moved the DPX column loop's register allocation (3 more instructions)
from .align import GATHER_PTX
from .cache_keys import settle_module
from .spin import GAVE_UP, wait_until

NEG16 = -(1 << 14)  # minus infinity of the packed path: pads, the first E and F


def packed_pair(value: int) -> int:
    """``value`` in both halves of an int32."""
    v = value & 0xFFFF
    return ((v << 16) | v) - (1 << 32) if v >= 0x8000 else (v << 16) | v


def packed_half(value: int) -> int:
    """``value`` as float16 in both halves of an int32 (exact for |value| <= 2048 and -16384)."""
    v = int(torch.tensor(float(value), dtype=torch.float16).view(torch.int16)) & 0xFFFF
    return packed_pair(v - 0x10000 if v >= 0x8000 else v)


NEG2 = tl.constexpr(packed_pair(NEG16))
NEG2_HALF = tl.constexpr(packed_half(NEG16))
HALF_EXACT = 2048  # float16 holds every integer up to 2^11: the half2 path's scores are exact below
LANES = 32  # lanes per program (2 x LANES sequences per chunk)
ROWS = 40  # query rows per tile, held in registers (int16 pairs; benchmarks/NOTES.md: 40 beat 32, 48, 56)
ROWS_HALF = 32  # the same for the float16 pairs (32 beat 40 and 48)
if os.environ.get("TRITON_INTERPRET") == "1":  # the interpreter's time goes by rows run, live or not: two
    ROWS = ROWS_HALF = 16                       # groups of 8 (the profile's layout) in a tile suffice there


HIGH = tl.constexpr(-(1 << 16))  # 0xFFFF0000: the high halfword


@triton.jit
def _halves(x):
    """The two float16 halves of packed int32s (low, high)."""
    lo = (x & 0xFFFF).to(tl.int16).to(tl.float16, bitcast=True)
    hi = (x >> 16).to(tl.int16).to(tl.float16, bitcast=True)
    return lo, hi


@triton.jit
def _packed(lo, hi):
    """float16 halves back into int32s."""
    return (lo.to(tl.int16, bitcast=True).to(tl.int32) & 0xFFFF) | (hi.to(tl.int16, bitcast=True).to(tl.int32) << 16)


@triton.jit
def _add2(a, b, DPX: tl.constexpr, HALF: tl.constexpr = 0):
    """Per-halfword a + b: int16 (wrapping; DPX or plain) or, with HALF, float16 (1: add.rn.f16x2,
    2: the same float16 sums from Triton's float16 arithmetic, for the interpreter)."""
    if HALF == 1:
        return tl.inline_asm_elementwise("add.rn.f16x2 $0, $1, $2;", "=r,r,r", [a, b], dtype=tl.int32,
                                         is_pure=True, pack=1)
    elif HALF == 2:
        a_lo, a_hi = _halves(a)
        b_lo, b_hi = _halves(b)
        return _packed(a_lo + b_lo, a_hi + b_hi)
    elif DPX:
        return tl.inline_asm_elementwise("add.s16x2 $0, $1, $2;", "=r,r,r", [a, b], dtype=tl.int32,
                                         is_pure=True, pack=1)
    else:  # the high halves added apart (wrapping past bit 31), the low half of the whole sum
        return (((a >> 16) + (b >> 16)) << 16) | ((a + b) & 0xFFFF)


@triton.jit
def _max2(a, b, DPX: tl.constexpr, HALF: tl.constexpr = 0):
    """Per-halfword signed max: int16 or, with HALF, float16 (as _add2)."""
    if HALF == 1:
        return tl.inline_asm_elementwise("max.f16x2 $0, $1, $2;", "=r,r,r", [a, b], dtype=tl.int32,
                                         is_pure=True, pack=1)
    elif HALF == 2:
        a_lo, a_hi = _halves(a)
        b_lo, b_hi = _halves(b)
        return _packed(tl.maximum(a_lo, b_lo), tl.maximum(a_hi, b_hi))
    elif DPX:
        return tl.inline_asm_elementwise("max.s16x2 $0, $1, $2;", "=r,r,r", [a, b], dtype=tl.int32,
                                         is_pure=True, pack=1)
    else:  # each half compared alone in the top 16 bits of a signed max (the low bits 0)
        lo = tl.maximum(a << 16, b << 16).to(tl.uint32, bitcast=True) >> 16
        return tl.maximum(a & HIGH, b & HIGH) | lo.to(tl.int32, bitcast=True)


@triton.jit
def _unpacked(x, HALF: tl.constexpr):
    """The two halves of packed int32s as int32 (low, high): int16, or float16 with HALF."""
    if HALF:
        lo, hi = _halves(x)
        return lo.to(tl.int32), hi.to(tl.int32)
    return (x << 16) >> 16, x >> 16


@triton.jit
def _pairs8(at_a, at_b):
    """The packed score pairs of 8 query rows: entry k of the 8 int16 at ``at_a`` in the low
    half and of the 8 at ``at_b`` in the high half, k = 0..7. On a GPU two 16-byte loads and
    a byte permute per row (prmt: sm_80 and later); the interpreter: tl.load."""
    if GATHER_PTX:
        return tl.inline_asm_elementwise(
            """{ .reg .b32 a<4>, b<4>;
            ld.global.v4.b32 {a0, a1, a2, a3}, [$8];
            ld.global.v4.b32 {b0, b1, b2, b3}, [$9];
            prmt.b32 $0, a0, b0, 0x5410; prmt.b32 $1, a0, b0, 0x7632;
            prmt.b32 $2, a1, b1, 0x5410; prmt.b32 $3, a1, b1, 0x7632;
            prmt.b32 $4, a2, b2, 0x5410; prmt.b32 $5, a2, b2, 0x7632;
            prmt.b32 $6, a3, b3, 0x5410; prmt.b32 $7, a3, b3, 0x7632; }""",
            "=r,=r,=r,=r,=r,=r,=r,=r,l,l", [at_a, at_b], dtype=(tl.int32,) * 8, is_pure=True, pack=1)
    else:
        out = ()
        for k in tl.static_range(8):
            a = tl.load(at_a + k).to(tl.int32) & 0xFFFF
            b = tl.load(at_b + k).to(tl.int32)
            out = out + ((b << 16) | a,)
        return out


@triton.jit
def _column(hs, es, h_up, f_up, diag, at_a, at_b, best, neg_open, neg_extend, zero, ROWS: tl.constexpr,
            PW: tl.constexpr, DPX: tl.constexpr, HALF: tl.constexpr):
    """Gotoh's recurrence down one column of the tile, on G = H - gap_open in place of H:
    (G, E of every row, the bottom row's G and F, the best G so far). ``hs`` / ``es``: the
    rows' G and E one column left; ``h_up`` / ``f_up``: the row above the tile; ``diag``: G
    of the row above, one column left; ``at_a`` / ``at_b``: the column's profile entries
    (rows 0..7; rows 8g.. 8 PW further per g), which hold score + gap_open.
    With G, E = max(G_left, E_left - ext) is one fused add-max (DPX), H = max(0, G_diag +
    score + gap_open, E, F) needs no add of its own, and G = H - open is one add: 6.5 DPX
    instructions a cell pair in ptxas's code, F's and the best's (a three-input max per two
    rows) included."""
    new_h = ()
    new_e = ()
    for r in tl.static_range(ROWS):
        if r % 8 == 0:
            scores = _pairs8(at_a + (r // 8) * 8 * PW, at_b + (r // 8) * 8 * PW)
        s = scores[r % 8]
        e = _max2(_add2(es[r], neg_extend, DPX, HALF), hs[r], DPX, HALF)
        f = _max2(_add2(f_up, neg_extend, DPX, HALF), h_up, DPX, HALF)
        h = _max2(_max2(_add2(diag, s, DPX, HALF), e, DPX, HALF), _max2(f, zero, DPX, HALF), DPX, HALF)
        g = _add2(h, neg_open, DPX, HALF)
        if r % 2 == 1:  # the best over two rows at a time (one three-input max with DPX)
            best = _max2(best, _max2(h_up, g, DPX, HALF), DPX, HALF)
        diag = hs[r]
        h_up = g
        f_up = f
        new_h = new_h + (g,)
        new_e = new_e + (e,)
    return new_h, new_e, h_up, f_up, best


@triton.jit(do_not_specialize=["q0", "n_chunks", "chunk0", "n_seqs", "slots", "best_stride",
                               "neg_open", "neg_extend", "pad", "hand_off_mask"],  # one variant per DPX / HALF
            do_not_specialize_on_alignment=["chunk_off_ptr", "chunk_len_ptr", "work_ptr"])  # (slices)
def scan_kernel(
    q_off_ptr, q0, work_ptr, prof_ptr, db_ptr, chunk_off_ptr, chunk_len_ptr, len_ptr, n_seqs,
    chunk0, n_chunks, ring_ptr, slots, best_ptr, best_stride, ticket_ptr, flag_ptr, neg_open, neg_extend, pad,
    hand_off_mask, ROWS: tl.constexpr, PW: tl.constexpr, LANES: tl.constexpr, DPX: tl.constexpr,
    HALF: tl.constexpr, COLS: tl.constexpr,
):
    """One tile: ROWS query rows against one chunk. Program w (its ticket, taken from an atomic
    counter when it starts, so a lower ticket has always started) takes work item
    w // n_chunks, (query qi, tile t) = work[w // n_chunks], against chunk chunk0 + w % n_chunks.
    The work list holds the tiles of a query one after another, so tile t - 1 of the same
    query and chunk holds ticket w - n_chunks: tile t reads that tile's last row (G and F, from
    the ring) column by column as it is written, waiting on its progress counter (columns
    done, published every hand_off_mask + 1 columns, a power of 2), a wavefront down the query.
    ``prof``: int16 [work item][ROWS / 8][PW][8], the tile's query profile (tile_profiles):
    entry [g][a][k] scores row 8 g + k against code a, so a lane loads 8 rows' scores of its
    code in 16 bytes, a warp's load of group g stays within 16 PW bytes (4 cache lines for
    proteins), and each address is the column's pointer plus a constant;
    ``len``: the n_seqs sequence lengths in packed (sorted) order, slot s of chunk c holding
    sequence c * 2 LANES + s; ``neg_open`` / ``neg_extend``: -gap_open / -gap_extend packed
    in both halves; ``ring``: int32, two rows of ``slots`` per query of the launch (tile t
    writes row t % 2), at the chunk's own offset 2 x LANES per column (H, then F); ``pad``:
    the pad code (S); ``flag``: one zeroed counter per work item and chunk.
    Raises best[qi - q0, chunk * 2 LANES + s] (int32, zeroed) to sequence s's best cell of the
    tile (atomic max). A wait that gives up (spin.py) raises the chunk's bests to 32767, above
    every caller's limit: they are then recomputed, never returned wrong."""
    w = tl.atomic_add(ticket_ptr, 1).to(tl.int64)
    item = w // n_chunks
    c = chunk0 + w % n_chunks
    qi = tl.load(work_ptr + 2 * item).to(tl.int64)
    t = tl.load(work_ptr + 2 * item + 1)
    qn = qi - q0
    m = (tl.load(q_off_ptr + qi + 1) - tl.load(q_off_ptr + qi)).to(tl.int32)
    r0 = t * ROWS
    prof = prof_ptr + item * (ROWS * PW)
    base = tl.load(chunk_off_ptr + c)
    n = tl.load(chunk_len_ptr + c).to(tl.int32)
    lane = tl.arange(0, LANES)
    rank = c.to(tl.int64) * (2 * LANES) + lane  # the low halves' sequences; the high halves' + LANES
    len_a = tl.load(len_ptr + rank, mask=rank < n_seqs, other=0).to(tl.int32)
    len_b = tl.load(len_ptr + rank + LANES, mask=rank + LANES < n_seqs, other=0).to(tl.int32)
    zero = tl.zeros((LANES,), tl.int32)
    if HALF:
        neg = zero + NEG2_HALF
    else:
        neg = zero + NEG2
    col = db_ptr + base + lane
    row_in = ring_ptr + (2 * qn + (t + 1) % 2) * slots + base + lane
    row_out = ring_ptr + (2 * qn + t % 2) * slots + base + lane
    flag_in = flag_ptr + (item - 1) * n_chunks + (c - chunk0)
    flag_out = flag_ptr + item * n_chunks + (c - chunk0)
    # the DP holds G = H - gap_open (_column): the borders' H = 0 is G = -gap_open
    g0 = zero + neg_open
    best = g0
    hs = ()
    es = ()
    for r in tl.static_range(ROWS):
        hs = hs + (g0,)
        es = es + (neg,)
    corner = g0
    # columns of tile t - 1 known done (all, when it ran in an earlier launch: a query's tiles may span two)
    seen = tl.where(item > 0, 0, n)
    # COLS = 2 columns per step, their row loops one block of straight-line code, so that the
    # compiler interleaves the two dependency chains (row r of column j + 1 needs row r of
    # column j only). An odd chunk's last step runs one column past it: the pad's column,
    # which changes no best (its cells stay below the cells they come from) and is not
    # stored. The next step's codes and rows above are loaded during this one. (COLS = 1
    # for the plain int16 arithmetic, whose two columns do not fit the registers.)
    code_a0 = tl.load(col, mask=zero < n, other=0).to(tl.int32)
    code_b0 = tl.load(col + LANES, mask=zero < n, other=0).to(tl.int32)
    code_a1 = tl.load(col + 2 * LANES, mask=zero + 1 < n, other=0).to(tl.int32)
    code_b1 = tl.load(col + 3 * LANES, mask=zero + 1 < n, other=0).to(tl.int32)
    h_next0 = g0
    f_next0 = neg
    h_next1 = g0
    f_next1 = neg
    if t > 0:
        if n > 0:
            if seen < tl.minimum(n, 2):
                seen = wait_until(flag_in, tl.minimum(n, 2))
            # (L2, not L1: another program wrote it)
            h_next0 = tl.load(row_in, cache_modifier=".cg")
            f_next0 = tl.load(row_in + LANES, cache_modifier=".cg")
            h_next1 = tl.load(row_in + 2 * LANES, mask=zero + 1 < n, other=0, cache_modifier=".cg")
            f_next1 = tl.load(row_in + 3 * LANES, mask=zero + 1 < n, other=0, cache_modifier=".cg")
    keep = zero + r0 + ROWS < m  # not the query's last tile: its row is read
    j = 0
    while j < n:
        at_a0 = prof + 8 * tl.where(j < len_a, tl.minimum(code_a0, pad), pad)
        at_b0 = prof + 8 * tl.where(j < len_b, tl.minimum(code_b0, pad), pad)
        at_a1 = prof + 8 * tl.where(j + 1 < len_a, tl.minimum(code_a1, pad), pad)
        at_b1 = prof + 8 * tl.where(j + 1 < len_b, tl.minimum(code_b1, pad), pad)
        h_up0 = h_next0
        f_up0 = f_next0
        h_up1 = h_next1
        f_up1 = f_next1
        j2 = j + COLS
        code_a0 = tl.load(col + j2 * 2 * LANES, mask=zero + j2 < n, other=0).to(tl.int32)
        code_b0 = tl.load(col + j2 * 2 * LANES + LANES, mask=zero + j2 < n, other=0).to(tl.int32)
        code_a1 = tl.load(col + j2 * 2 * LANES + 2 * LANES, mask=zero + j2 + 1 < n, other=0).to(tl.int32)
        code_b1 = tl.load(col + j2 * 2 * LANES + 3 * LANES, mask=zero + j2 + 1 < n, other=0).to(tl.int32)
        if t > 0:
            if j2 < n:
                if tl.minimum(j2 + 2, n) > seen:
                    seen = wait_until(flag_in, tl.minimum(j2 + 2, n))
                h_next0 = tl.load(row_in + j2 * 2 * LANES, cache_modifier=".cg")
                f_next0 = tl.load(row_in + j2 * 2 * LANES + LANES, cache_modifier=".cg")
                h_next1 = tl.load(row_in + j2 * 2 * LANES + 2 * LANES, mask=zero + j2 + 1 < n, other=0,
                                  cache_modifier=".cg")
                f_next1 = tl.load(row_in + j2 * 2 * LANES + 3 * LANES, mask=zero + j2 + 1 < n, other=0,
                                  cache_modifier=".cg")
        diag0 = corner  # the row above, one column left: row 0's diagonal
        diag1 = h_up0
        corner = h_up1
        hs, es, h_up0, f_up0, best = _column(hs, es, h_up0, f_up0, diag0, at_a0, at_b0, best, neg_open, neg_extend,
                                             zero, ROWS, PW, DPX, HALF)
        tl.store(row_out + j * 2 * LANES, h_up0, mask=keep)
        tl.store(row_out + j * 2 * LANES + LANES, f_up0, mask=keep)
        if COLS == 2:
            hs, es, h_up1, f_up1, best = _column(hs, es, h_up1, f_up1, diag1, at_a1, at_b1, best, neg_open,
                                                 neg_extend, zero, ROWS, PW, DPX, HALF)
            tl.store(row_out + j * 2 * LANES + 2 * LANES, h_up1, mask=keep & (zero + j + 1 < n))
            tl.store(row_out + j * 2 * LANES + 3 * LANES, f_up1, mask=keep & (zero + j + 1 < n))
        else:  # column j + 1 comes next step (its codes and row above were loaded as column j2's)
            corner = diag1
        j = j2
        if r0 + ROWS < m:
            if ((j & hand_off_mask) == 0) | (j >= n):
                tl.debug_barrier()  # every lane's stores before the release
                tl.atomic_xchg(flag_out, tl.minimum(j, n), sem="release")
    lo, hi = _unpacked(best, HALF)
    open_lo, open_hi = _unpacked(g0, HALF)  # H = G + gap_open
    lo -= open_lo
    hi -= open_hi
    if seen == GAVE_UP:
        lo = zero + 32767
        hi = lo
    at = best_ptr + qn * best_stride + rank
    tl.atomic_max(at, lo, mask=rank < n_seqs)
    tl.atomic_max(at + LANES, hi, mask=rank + LANES < n_seqs)


def profile_table(table, gap_open: int, half: bool = False):
    """int16 [S + 1, PW] (PW = profile_width(S)): row q holds table[q, a] + gap_open at column
    a (the scan adds scores to G = H - gap_open), the pad columns and row S (the pad code)
    NEG16; int16 or, with ``half``, float16 bit patterns (exact: every entry is an integer
    of magnitude <= HALF_EXACT, or the pad, a power of 2)."""
    size, width = table.shape[0] + 1, profile_width(table.shape[0])
    t = torch.full((size, width), NEG16, dtype=torch.int32, device=table.device)
    t[:-1, : size - 1] = table + gap_open
    return t.to(torch.float16).view(torch.int16) if half else t.to(torch.int16)


def profile_width(symbols: int) -> int:
    """PW: the codes and the pad, rounded up to 32 (a group of 8 rows: 512 B, 4 cache lines)."""
    return -(-(symbols + 1) // 32) * 32


DPX_CAPABILITY = (9, 0)  # add.s16x2 / max.s16x2: Hopper and later


def dpx_for(capability: tuple[int, int]) -> bool:
    """Whether a GPU of this compute capability runs the DPX path: sm_90 and later, unless
    the environment sets TORCHALIGN_NO_DPX=1 (read at every launch: the plain path on any GPU)."""
    return tuple(capability) >= DPX_CAPABILITY and os.environ.get("TORCHALIGN_NO_DPX") != "1"


def use_half2(device: torch.device) -> int:
    """The HALF constexpr: on CUDA without the DPX path (before sm_90, or TORCHALIGN_NO_DPX=1)
    1, the float16 pair path (add/max.f16x2, CUDASW++'s pre-Hopper arithmetic: on an H200
    1.81x the plain int16 path, benchmarks/RESULTS.md), else 0 (int16: DPX, or plain).
    TORCHALIGN_SCAN_HALF2=1 / 0 forces it on / off (read at every launch); off CUDA (the
    interpreter) 2 when forced on (Triton's float16 ops), else 0."""
    force = os.environ.get("TORCHALIGN_SCAN_HALF2")
    if device.type != "cuda":
        return 2 if force == "1" else 0
    if force in ("0", "1"):
        return int(force)
    return 0 if use_dpx(device) else 1


def columns_per_step(dpx, half: int) -> int:
    """The scan's COLS: two columns per step with DPX or float16 pairs; one for the plain
    int16 arithmetic (two spill: 500 B of stack, a minute of ptxas per target)."""
    return 2 if dpx or half else 1


def use_dpx(device: torch.device) -> bool:
    """dpx_for the device's compute capability; False off CUDA (the interpreter)."""
    return device.type == "cuda" and dpx_for(torch.cuda.get_device_capability(device))


# A tile publishes its progress every hand_off columns (a power of 2, a run-time argument):
# HAND_OFF where the launch's chunks fill the GPU by themselves, HAND_OFF_FEW below
# FEW_CHUNKS chunks, where the wavefront's fill (tiles x hand_off columns) is the critical
# path. H200, 20 queries (NOTES.md): the bundled 2,100 proteins (33 chunks) 27.8 -> 24.7-26.2
# ms with 8 (float16 pairs 31.5 -> 27.1-28.3); 20,000 proteins (313 chunks) 88.3 -> 88.9 ms
# (float16 103.7 -> 105.3-106.1) and 570,000 (8,900) 1,870 -> 1,894 ms: 16 there.
HAND_OFF = 16
HAND_OFF_FEW = 8
FEW_CHUNKS = 128


def hand_off(n_chunks: int) -> int:
    """Columns between a tile's progress releases for a launch over ``n_chunks`` chunks."""
    return HAND_OFF_FEW if n_chunks < FEW_CHUNKS else HAND_OFF


MAX_GRID = (1 << 31) - 1  # programs per launch (grid x)


def work_list(q_lengths: list[int], q0: int, rows: int) -> list[tuple[int, int]]:
    """(query, tile) of every tile of queries q0, q0 + 1, ... (lengths ``q_lengths``), the
    longest queries first (their wavefronts are the longest), a query's tiles in order."""
    order = sorted(range(len(q_lengths)), key=lambda i: -q_lengths[i])
    return [(q0 + i, t) for i in order for t in range(-(-q_lengths[i] // rows))]


PROFILE_BYTES = 1 << 28  # the tile profiles of one launch (2.5 KB per tile of 40 protein rows)


def tile_profiles(q_codes, q_offsets, work, table_profile, rows: int):
    """int16 [items, rows / 8, PW, 8]: entry [i, g, a, k] = table_profile[code of row 8 g + k
    of work item i's (query, tile), a], the rows past the query's end the pad's."""
    pad, width = table_profile.shape[0] - 1, table_profile.shape[1]
    q, t = work[:, 0].long(), work[:, 1].long()
    start, length = q_offsets[q], q_offsets[q + 1] - q_offsets[q]
    pos = t[:, None] * rows + torch.arange(rows, device=work.device)
    inside = pos < length[:, None]
    codes = q_codes[torch.where(inside, start[:, None] + pos, 0)].long().clamp_(max=pad) if q_codes.numel() else pos
    rows_profile = table_profile[torch.where(inside, codes, pad)]  # [items, rows, PW]
    return rows_profile.view(len(work), rows // 8, 8, width).transpose(2, 3).contiguous()


def scan_queries(q_codes, q_offsets, q0: int, q1: int, table_profile, packed, chunk0: int, ring, gap_open: int,
                 gap_extend: int, rows: int | None = None, half: int = 0, q_lengths: list[int] | None = None,
                 out=None):
    """Best local scores of queries q0..q1 against every sequence of chunks chunk0.. of
    ``packed`` (a PackedBatch of 2 x lanes lanes): int32 [q1 - q0, chunks x 2 lanes] in packed
    (sorted) order, the sequences of chunks before chunk0 left at 0. A launch of a program
    per (tile of ``rows`` query rows, chunk), more if the grid passes MAX_GRID or the tiles'
    profiles PROFILE_BYTES. ``table_profile``: profile_table(table, gap_open, half > 0);
    ``ring``: int32, 2 (q1 - q0) packed.codes.numel(); ``half``: use_half2's mode (0: int16
    scores, wrapping past 32767; else float16, exact up to HALF_EXACT); ``q_lengths``: the
    queries' lengths if the caller has them on the host (else one read); ``out``: where to
    write the result (a view with unit stride along the sequences), else a new tensor."""
    rows = rows or (ROWS_HALF if half else ROWS)
    if rows % 8:
        raise ValueError(f"scan_queries: rows={rows}; the profile is loaded 8 rows at a time, give a multiple of 8")
    n_chunks, lanes, n_q = packed.chunk_lengths.numel(), packed.lanes // 2, q1 - q0
    slots = packed.codes.numel()
    if ring.numel() < 2 * n_q * slots:
        raise ValueError(f"scan_queries: ring holds {ring.numel()} int32, {n_q} queries need {2 * n_q * slots}")
    dev = q_codes.device
    if out is None:
        out = torch.empty((n_q, packed.lengths.numel()), dtype=torch.int32, device=dev)
    out.zero_()
    n_c = n_chunks - chunk0
    if n_q <= 0 or n_c <= 0 or not slots:
        return out
    if q_lengths is None:
        q_lengths = (q_offsets[q0 + 1 : q1 + 1] - q_offsets[q0:q1]).tolist()
    items = work_list(q_lengths, q0, rows)
    width = table_profile.shape[1]
    pack = packed_half if half else packed_pair
    dpx = False if half else use_dpx(dev)
    per = max(1, min(MAX_GRID // n_c, PROFILE_BYTES // (rows * 2 * width)))  # work items per launch
    for i0 in range(0, len(items), per):  # (a query's tiles may span two launches: one stream, in order)
        work = torch.tensor(items[i0 : i0 + per], dtype=torch.int32).to(dev, non_blocking=True)
        profiles = tile_profiles(q_codes, q_offsets, work, table_profile, rows)
        sync = torch.zeros(4 + len(work) * n_c, dtype=torch.int32, device=dev)  # the ticket, then the counters
        scan_kernel[(len(work) * n_c,)](
            q_offsets, q0, work, profiles, packed.codes, packed.chunk_offsets, packed.chunk_lengths,
            packed.lengths, packed.lengths.numel(), chunk0, n_c, ring, slots, out, out.stride(0), sync[:1],
            sync[4:], pack(-gap_open), pack(-gap_extend), table_profile.shape[0] - 1, hand_off(n_c) - 1,
            ROWS=rows, PW=width, LANES=lanes, DPX=dpx, HALF=half, COLS=columns_per_step(dpx, half),
            num_warps=max(1, lanes // 32),
        )
    return out


settle_module(__name__)  # the same cache keys in every process (cache_keys.py)
