"""Inter-task Smith-Waterman / Needleman-Wunsch / semiglobal scores with affine gaps (Gotoh).

One lane aligns one pair (the inter-task scheme of the CUDASW++ lineage). The DP runs in
tiles of ROWS query rows: a tile's rows live in registers (a tuple of [BLOCK] tensors,
unrolled), the tile sweeps the target column by column, and only its last row (H and
the vertical gap F) goes to a scratch row in memory for the next tile: one load and one
store of 8 bytes per ROWS cells. Pairs are sorted by length so a program's lanes finish
together; pairs whose target reaches LONG_TARGET run in align_wave instead (a long pair
on one lane would keep its program running long after the rest), on a second stream.
Scores are int32; -2^29 stands for minus infinity, so every true cell must stay inside
+-2^29 (the op checks a bound before launching).

Substitution scores come from a table padded with one extra code scoring -2^29 against
everything: query rows past a lane's query and target columns past its target use it,
so padded cells never reach the best cell (they are strictly below a real neighbour).
The pad is chosen by the lengths (a mask), never read from memory: a 256-symbol table's
pad code is 256, which a uint8 load cannot hold (it would read as code 0, a real byte).

Pure: imports only torch and triton.
"""

import contextlib
import os

import torch
import triton
import triton.language as tl

from .cache_keys import settle_module

LOCAL = tl.constexpr(0)
GLOBAL = tl.constexpr(1)
SEMIGLOBAL = tl.constexpr(2)
NEG = tl.constexpr(-(1 << 29))


@triton.jit
def _cell(h_left, e_left, diag, h_up, f_up, s, gap_open, gap_extend, MODE: tl.constexpr):
    """Gotoh's cell: E (gap in the query, from the left), F (gap in the target, from
    above), H (the best, >= 0 in local mode)."""
    e = tl.maximum(h_left - gap_open, e_left - gap_extend)
    f = tl.maximum(h_up - gap_open, f_up - gap_extend)
    h = tl.maximum(tl.maximum(diag + s, e), f)
    if MODE == LOCAL:
        h = tl.maximum(h, 0)
    return h, e, f


@triton.jit
def _gap(length, gap_open, gap_extend):
    """The score of a gap of ``length`` (0 for none)."""
    return tl.where(length > 0, -(gap_open + (length - 1) * gap_extend), 0)


@triton.jit
def _code(c, inside, pad):
    """The table code of a loaded residue: the pad outside the sequence (by the mask, so
    that every code of a 256-symbol table stays a real symbol) and for codes past the table."""
    return tl.where(inside, tl.minimum(c, pad), pad)


# The tile's unrolled gathers (ROWS query codes, ROWS substitution scores per column) are inline
# PTX loads on a GPU: Triton's coalescing pass walks the kernel's whole def-use slice once per
# tl.load, which was ~70% of these kernels' compile time (align_wave: 8 of 11.5 s a variant).
# The loads are the ones Triton emits (the column loop's SASS is unchanged; benchmarks/NOTES.md);
# pure, as the kernels never write the table or the codes. The interpreter runs no PTX: tl.load.
GATHER_PTX = tl.constexpr(os.environ.get("TRITON_INTERPRET") != "1")


@triton.jit
def _score_at(ptr):
    """The int32 at each pointer (a substitution score)."""
    if GATHER_PTX:
        return tl.inline_asm_elementwise("ld.global.b32 $0, [$1];", "=r,l", [ptr], dtype=tl.int32,
                                         is_pure=True, pack=1)
    else:
        return tl.load(ptr)


@triton.jit
def _code_at(ptr, inside):
    """The code at each pointer as int32 (0 outside), for uint8 codes (others: tl.load)."""
    if GATHER_PTX and ptr.dtype.element_ty == tl.uint8:
        return tl.inline_asm_elementwise(
            "mov.u32 $0, 0;\n@$2 ld.global.u8 $0, [$1];", "=r,l,b",
            [ptr, inside], dtype=tl.int32, is_pure=True, pack=1)
    else:
        return tl.load(ptr, mask=inside, other=0).to(tl.int32)


@triton.jit
def _tile(q_ptr, qs, r0, m, pad, table_ptr, width, zero, gap_open, gap_extend, MODE: tl.constexpr,
          ROWS: tl.constexpr):
    """A tile of ROWS query rows from row r0 (0-based) on: each row's table row, H and E
    at column 0, whether it is the query's last row; and H[r0][0], the top row's corner."""
    rows = ()
    hs = ()
    es = ()
    last = ()
    for r in tl.static_range(ROWS):
        c = _code_at(q_ptr + qs + r0 + r, r0 + r < m)
        rows = rows + (table_ptr + _code(c, r0 + r < m, pad) * width,)
        if MODE == LOCAL:
            hs = hs + (zero,)
        else:
            hs = hs + (zero + _gap(r0 + r + 1, gap_open, gap_extend),)
        es = es + (zero + NEG,)
        last = last + (m == r0 + r + 1,)
    if MODE == LOCAL:
        corner = zero
    else:
        corner = zero + _gap(r0, gap_open, gap_extend)
    return rows, hs, es, last, corner


@triton.jit
def _track(h, i, j, live, is_last, n, best, best_i, best_j, MODE: tl.constexpr, TRACK: tl.constexpr):
    """The best cell so far after cell (i, j) of score h. Local: the best anywhere (ties:
    the smaller column, then the smaller row, as cells arrive row by row in a column);
    global: H[m][n]; semiglobal: the best of row m (padded columns stay below a real cell
    of row m, so they need no test)."""
    if MODE == LOCAL:
        if TRACK:
            better = live & ((h > best) | ((h == best) & (j < best_j)))
            best_i = tl.where(better, i, best_i)
            best_j = tl.where(better, j, best_j)
            best = tl.where(better, h, best)
        else:
            best = tl.where(live, tl.maximum(best, h), best)
    elif MODE == GLOBAL:
        best = tl.where(live & is_last & (j == n), h, best)
    else:
        better = live & is_last & (h > best)
        best_j = tl.where(better, j, best_j)
        best = tl.where(better, h, best)
    return best, best_i, best_j


@triton.jit(do_not_specialize=["n_pairs", "width", "gap_open", "gap_extend"],  # one variant per mode
            do_not_specialize_on_alignment=["q_ptr", "t_ptr"])  # (every lane reads its own pair: no vector loads)
def align_kernel(
    q_ptr, q_start_ptr, q_len_ptr, t_ptr, t_start_ptr, t_len_ptr, pair_q_ptr, pair_t_ptr, n_pairs,
    table_ptr, width, gap_open, gap_extend, scratch_ptr, scratch_at_ptr,
    score_ptr, q_end_ptr, t_end_ptr,
    MODE: tl.constexpr, TRACK: tl.constexpr, ROWS: tl.constexpr, BLOCK: tl.constexpr,
):
    """Lane l of program i aligns query pair_q[s] with target pair_t[s], s = i * BLOCK + l;
    outputs go to slot s. ``table``: [width, width] int32, code width - 1 the pad (chosen
    by the lengths: it need not fit the codes' dtype).
    ``scratch``: 2 x BLOCK int32 per target column of the program, from
    scratch_at[i]. TRACK: also the ends (else the local mode keeps only the score)."""
    slot = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    ok = slot < n_pairs
    pq = tl.load(pair_q_ptr + slot, mask=ok, other=0)
    pt = tl.load(pair_t_ptr + slot, mask=ok, other=0)
    qs = tl.load(q_start_ptr + pq, mask=ok, other=0)
    ts = tl.load(t_start_ptr + pt, mask=ok, other=0)
    m = tl.load(q_len_ptr + pq, mask=ok, other=0).to(tl.int32)
    n = tl.load(t_len_ptr + pt, mask=ok, other=0).to(tl.int32)
    pad = width - 1
    zero = tl.zeros((BLOCK,), tl.int32)
    every = zero == 0  # every lane's cell counts (a constant: no cost)
    row_at = scratch_ptr + tl.load(scratch_at_ptr + tl.program_id(0)) + tl.arange(0, BLOCK)
    n_max = tl.max(n, 0)
    m_max = tl.max(m, 0)
    # row 0: H[0][j] (a leading gap in global mode, else 0), F[0][j] = -inf
    j = 0
    while j <= n_max:
        if MODE == GLOBAL:
            h0 = zero + _gap(j, gap_open, gap_extend)
        else:
            h0 = zero
        tl.store(row_at + j * 2 * BLOCK, h0)
        tl.store(row_at + j * 2 * BLOCK + BLOCK, zero + NEG)
        j += 1
    if MODE == LOCAL:
        best = zero  # the empty alignment at (0, 0)
        best_i = zero
    else:  # H[m][0] (H[0][n] for an empty global query); row m replaces it
        if MODE == GLOBAL:
            best = tl.where(m > 0, _gap(m, gap_open, gap_extend), _gap(n, gap_open, gap_extend))
        else:
            best = _gap(m, gap_open, gap_extend)
        best_i = m
    best_j = zero
    r0 = 0
    while r0 < m_max:
        rows, hs, es, last, corner = _tile(q_ptr, qs, r0, m, pad, table_ptr, width, zero, gap_open, gap_extend,
                                           MODE, ROWS)
        j = 1
        while j <= n_max:
            c = tl.load(t_ptr + ts + j - 1, mask=j <= n, other=0).to(tl.int32)
            c = _code(c, j <= n, pad)
            h_up = tl.load(row_at + j * 2 * BLOCK)
            f_up = tl.load(row_at + j * 2 * BLOCK + BLOCK)
            diag = corner
            corner = h_up
            new_h = ()
            new_e = ()
            for r in tl.static_range(ROWS):
                s = _score_at(rows[r] + c)
                h, e, f = _cell(hs[r], es[r], diag, h_up, f_up, s, gap_open, gap_extend, MODE)
                diag = hs[r]
                h_up = h
                f_up = f
                new_h = new_h + (h,)
                new_e = new_e + (e,)
                best, best_i, best_j = _track(h, r0 + r + 1, j, every, last[r], n, best, best_i, best_j, MODE, TRACK)
            hs = new_h
            es = new_e
            tl.store(row_at + j * 2 * BLOCK, h_up)  # the tile's last row, for the next tile
            tl.store(row_at + j * 2 * BLOCK + BLOCK, f_up)
            j += 1
        r0 += ROWS
    if MODE == GLOBAL:
        best_j = n
    tl.store(score_ptr + slot, best, mask=ok)
    # the ends even without TRACK (then meaningless): without these stores ptxas 12.9 (Triton 3.9)
    # crashes on sm_80 for MODE local and semiglobal at num_warps=1 (tests/test_compile.py)
    tl.store(q_end_ptr + slot, best_i.to(tl.int64), mask=ok)
    tl.store(t_end_ptr + slot, best_j.to(tl.int64), mask=ok)


LONG_TARGET = 1024  # targets this long go to align_wave (one pair per program)
ROWS = 48  # query rows per tile (registers: about 4 x ROWS per lane); 16..48 measured in NOTES.md
if os.environ.get("TRITON_INTERPRET") == "1":  # the interpreter's time goes by rows run, live or not
    ROWS = 16
BLOCK = 32  # pairs per program
# Scratch of one launch of each kernel (8 B per target column of each pair, and 16 W B per
# pair in align_wave): the pairs run in as many launches as it takes (a program needing
# more gets a launch of its own). 512 MiB holds ~190,000 pairs of 350-residue targets.
SCRATCH_BYTES = 1 << 29


def padded_table(table):
    """The table with one more code, scoring NEG against everything (the pad)."""
    size = table.shape[0]
    padded = torch.full((size + 1, size + 1), NEG.value, dtype=torch.int32, device=table.device)
    padded[:size, :size] = table
    return padded


def _launches(k0: int, sizes: list, budget: int) -> list:
    """Programs k0, k0 + 1, ... of ``sizes`` bytes each, in launches of consecutive
    programs needing at most ``budget`` bytes (or one program): [(first, end, bytes)]."""
    out, first, used = [], k0, 0
    for k, size in enumerate(sizes, k0):
        if k > first and used + size > budget:
            out.append((first, k, used))
            first, used = k, 0
        used += size
    if sizes:
        out.append((first, k0 + len(sizes), used))
    return out


def _even_launches(k0: int, k1: int, size: int, budget: int) -> list:
    """(first, end) launches of programs k0..k1 of ``size`` bytes each, within ``budget``."""
    per = max(1, budget // max(size, 1))
    return [(k, min(k1, k + per)) for k in range(k0, k1, per)]


def align_pairs(q_codes, q_starts, q_lens, t_codes, t_starts, t_lens, pair_q, pair_t, table, gap_open: int,
                gap_extend: int, mode: int, track: bool = True, rows: int = ROWS, block: int = BLOCK,
                long_target: int | None = None, longest: tuple | None = None, wave_rows: int | None = None):
    """Align query pair_q[i] with target pair_t[i] for every i: (score int32[P], query end
    int64[P], target end int64[P]); the ends only with ``track`` (else None). ``table``:
    int32 [S, S] over codes < S; ``mode`` 0 local, 1 global, 2 semiglobal.

    Pairs run sorted by target then query length, longest first, in programs of ``block``
    lanes; programs whose longest target reaches ``long_target`` (default LONG_TARGET) run
    in align_wave (one pair per program, on a second stream). Launches of each kernel take
    consecutive programs while their scratch fits SCRATCH_BYTES. Memory beside that:
    ~100 B per pair (lengths, sort keys and order, sorted pair indices and outputs).

    ``wave_rows``: rows per lane in align_wave (default ``rows``): fewer make a step shorter and
    a pair's passes more (a program each), for few pairs that would each keep one SM busy
    long after the rest (the search's top hits).

    ``longest``: (q_longest, t_longest), bounds on every pair's lengths: launches are then
    planned from them alone and nothing is read back from the device (CUDA graphs); every
    pair takes align_wave when t_longest reaches long_target. None: one host read of each
    program's longest target and query plans them (mixed lengths run faster)."""
    P = pair_q.numel()
    dev = q_codes.device
    score = torch.empty(P, dtype=torch.int32, device=dev)
    q_end = torch.empty(P, dtype=torch.int64, device=dev) if track else None
    t_end = torch.empty(P, dtype=torch.int64, device=dev) if track else None
    if P == 0:
        return score, q_end, t_end
    q_codes = q_codes if q_codes.numel() else torch.zeros(1, dtype=q_codes.dtype, device=dev)  # (no empty pointers)
    t_codes = t_codes if t_codes.numel() else torch.zeros(1, dtype=t_codes.dtype, device=dev)
    padded = padded_table(table)
    long_target = LONG_TARGET if long_target is None else long_target
    n_prog = triton.cdiv(P, block)
    n_len = t_lens[pair_t]
    order = torch.argsort(n_len * (1 << 32) + q_lens[pair_q], descending=True)
    firsts = n_len[order[::block]]  # each program's longest target (its first pair)
    pair_q, pair_t = pair_q[order], pair_t[order]
    if longest is None:  # one host read: each program's longest target and query
        m_top = torch.nn.functional.pad(q_lens[pair_q], (0, n_prog * block - P)).view(n_prog, block).amax(1)
        t_top, q_top = torch.stack([firsts, m_top]).tolist()
        n_wave = sum(t >= long_target for t in t_top)  # sorted: the leading programs
        q_wave = max(q_top[:n_wave], default=0)
    else:
        t_top = None
        firsts = torch.full((n_prog,), longest[1], dtype=torch.int64, device=dev)
        n_wave = n_prog if longest[1] >= long_target else 0
        q_wave = longest[0]
    del n_len
    s_out = torch.empty_like(score)
    # the kernels store the ends even without track (a ptxas workaround, align_kernel's end): never into s_out
    qe_out, te_out = (torch.empty(P, dtype=torch.int64, device=dev) for _ in range(2))
    outs = (s_out, qe_out, te_out)

    def plan(k0: int, k1: int, per_column: int, per_pair: int) -> list:
        """Launches of programs k0..k1 (each's scratch: per_column B per target column and
        per_pair B per pair): [(first, end, bytes)]."""
        if t_top is None:
            size = block * ((longest[1] + 1) * per_column + per_pair)
            return [(k, e, (e - k) * size) for k, e in _even_launches(k0, k1, size, SCRATCH_BYTES)]
        return _launches(k0, [block * ((t + 1) * per_column + per_pair) for t in t_top[k0:k1]], SCRATCH_BYTES)

    side = torch.cuda.Stream(dev) if dev.type == "cuda" and 0 < n_wave < n_prog else None  # overlaps the two kernels
    if side is not None:
        side.wait_stream(torch.cuda.current_stream(dev))
    if n_wave:  # long targets: one pair per program (or per pass of W row tiles), row tiles as a wavefront
        from .align_wave import align_long, best_of_passes, wave_width

        wave_rows = min(rows, wave_rows or rows)
        W = wave_width(q_wave, wave_rows)
        passes = max(1, triton.cdiv(q_wave, W * wave_rows))
        # a pass per program when there are several; the check that no wait gave up reads the device
        pipe = passes > 1 and t_top is not None
        slots = passes if pipe else 1
        with torch.cuda.stream(side) if side is not None else contextlib.nullcontext():
            # scratch: a ring of two rows of 2 int32 per column, 4 W int32 of carries per slot
            launches = plan(0, n_wave, 16, 16 * W * slots)
            scratch = torch.empty(max(b for _, _, b in launches) // 4, dtype=torch.int32, device=dev)
            for k0, k1, _ in launches:
                lo, hi = k0 * block, min(P, k1 * block)
                size = ((firsts[k0:k1] + 1) * 4)[:, None].expand(k1 - k0, block).reshape(-1)[: hi - lo]
                carries, ring = scratch[: (hi - lo) * slots * 4 * W], scratch[(hi - lo) * slots * 4 * W :]
                sync = torch.empty(2 + (hi - lo) * slots, dtype=torch.int32, device=dev)
                part = [x[lo:hi] for x in outs] if not pipe else [x.new_empty((hi - lo) * slots) for x in outs]
                args = (q_codes, q_starts, q_lens, t_codes, t_starts, t_lens, pair_q[lo:hi], pair_t[lo:hi], padded,
                        gap_open, gap_extend, mode, track, wave_rows, W, ring, torch.cumsum(size, 0) - size, carries,
                        sync, passes)
                align_long(*args, pipe, *part)
                if pipe and int(sync[1]):  # a wait gave up (it never should): the passes one after the other
                    align_long(*args, False, *(x[lo:hi] for x in outs))
                elif pipe:
                    for x, y in zip(outs, best_of_passes(*part, passes)):
                        x[lo:hi] = y
    if n_wave < n_prog:  # the rest: one lane per pair; a program's scratch: 2 x block int32 per column
        launches = plan(n_wave, n_prog, 8, 0)
        scratch = torch.empty(max(b for _, _, b in launches) // 4, dtype=torch.int32, device=dev)
        for k0, k1, _ in launches:
            lo, hi = k0 * block, min(P, k1 * block)
            size = (firsts[k0:k1] + 1) * 2 * block
            align_kernel[(k1 - k0,)](
                q_codes, q_starts, q_lens, t_codes, t_starts, t_lens, pair_q[lo:hi], pair_t[lo:hi], hi - lo,
                padded, padded.shape[0], gap_open, gap_extend, scratch, torch.cumsum(size, 0) - size,
                *(x[lo:hi] for x in outs),
                MODE=mode, TRACK=track, ROWS=rows, BLOCK=block, num_warps=max(1, min(4, block // 32)),
            )
    if side is not None:  # (the outputs were allocated on this stream and outlive the wait)
        torch.cuda.current_stream(dev).wait_stream(side)
    score.index_copy_(0, order, s_out)
    if track:
        q_end.index_copy_(0, order, qe_out)
        t_end.index_copy_(0, order, te_out)
    return score, q_end, t_end


def align_score(q_codes, q_starts, q_lens, t_codes, t_starts, t_lens, table, gap_open: int, gap_extend: int,
                mode: int, **kw):
    """Pairs (query b, target b): align_pairs with pair_q = pair_t = arange(B)."""
    b = torch.arange(q_lens.numel(), device=q_codes.device)
    return align_pairs(q_codes, q_starts, q_lens, t_codes, t_starts, t_lens, b, b, table, gap_open, gap_extend,
                       mode, **kw)


settle_module(__name__)  # the same cache keys in every process (cache_keys.py)
