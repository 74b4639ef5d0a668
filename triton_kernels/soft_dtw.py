"""Soft-DTW forward and backward sweeps: one program per pair (or per column stripe of a
long pair), a whole row per step. ``forward`` runs the forward by anti-diagonals instead
(soft_dtw_diag.py) where _by_diagonals says; both store what ``backward`` reads.

Values are held in units of gamma / ln 2 (x * log2(e) / gamma), so every softmin is
``min - log2(1 + exp2(-|a - b|))`` (one exp2 and one log2) and the combine function of a
scan needs no gamma. R is stored unscaled (float32).

Forward, row i (1-based), columns j: with A_j = softmin(R[i-1, j], R[i-1, j-1]),
R[i, j] = c_j + softmin(A_j, R[i, j-1]) is a linear recurrence in the log semiring: cell j
is the map x -> softmin(p_j, x + q_j) of the cell to its left, (p_j, q_j) = (A_j + c_j, c_j),
and maps compose in that form: f2(f1(x)) = softmin(softmin(p2, q2 + p1), x + q1 + q2). A
prefix scan (tl.associative_scan) of the pairs gives the row; rows wider than BLOCK go in
column blocks, the last R of a block carried into the next.

Backward (Cuturi & Blondel's E sweep), rows n .. 1, column blocks right to left, lanes in
reversed column order (a forward scan runs right to left): each cell's softmin weights
(w_up, w_diag, w_left) of its predecessors are recomputed from R (a softmax: three exp2, one
reciprocal), and E[i, j] = a_j + w_left(i, j + 1) E[i, j + 1] with a_j = E[i+1, j] w_up(i+1, j)
+ E[i+1, j+1] w_diag(i+1, j+1): an affine map of E[i, j + 1], composed by a scan of
(a, b) pairs. Row i + 1's products E w_up and E w_diag wait in a two-row scratch; w_left of
the cell to the right is computed again in the lane of cell j (three more exp2 and one
more load of R, instead of a hand-over through memory and a barrier on the critical path).

Checkpoints (K > 0): the forward keeps two rows in a ring and saves rows K, 2K, ...; the
backward recomputes each segment of K rows from its saved top row into a [K, M] buffer,
then sweeps it. Padding (columns >= m, rows > n) is never visited. The value of a pair is
R[n, m]; dV/dgamma = sum over cells of E * sum_k w_k log w_k.

Stripes: when fewer than two pairs an SM have rows longer than STRIPE_ABOVE, each is cut
into stripes of STRIPE columns, one program each, run as a wavefront: the forward's stripe
s takes R of stripe s - 1's last column, row by row, the backward's stripe s takes E,
E w_diag and w_left of stripe s + 1's first column, through per-row boundary arrays; a progress counter per
stripe (release every HAND_OFF rows, acquire on the other side) says which rows are there.
With checkpoints the forward also keeps its hand-over column (R[:, hi - 1] of every stripe but
the last, ``kept``), and the backward's stripe recomputes its columns of a segment from the
segment's top row and that column alone: no stripe reads another's rows, which in the
shared [K, M] buffer may belong to another segment (R left of its first column comes from
``kept``, w_left right of its last with the E hand-over).
A stripe only waits on a program of a lower id (launched earlier), so the wavefront cannot
deadlock as long as programs start in id order; a wait that passes spin.SPIN_LIMIT polls gives
up and the launch's value or gradient comes back NaN (never a silently wrong number).

Pure: imports only torch and triton.
"""

import torch
import triton
import triton.language as tl

from .cache_keys import settle_module
from .launch import Launcher
from .soft_align import _exp2, _log2
from .soft_align_diag import _sms
from .spin import GAVE_UP, wait_until

BLOCKS = (64, 128, 256, 512, 1024)  # column block widths (each one a compiled variant); longer rows: 1024
STRIPE = 128  # columns per program when pairs are split into stripes ...
# ... whose rows are longer than this: B x M^2 of 16-250 x 384-1,024 ran forward + backward
# 1.06-1.65x faster as 128-column stripes than one program per pair, M = 256 within 7 %
# either way (H100, benchmarks/NOTES.md, session 25)
STRIPE_ABOVE = 256
# The sweeps by anti-diagonals (soft_dtw_diag*.py), 1.4-2.3x the row sweeps' speed where the
# rule takes them, unless the rows are over DIAG_WIDE times longer than the pairs are tall (their
# N + M steps against N row steps: all of 4, 8, 64 and 256 pairs of M = 4 N ran faster by
# anti-diagonals, 4 and 256 pairs of 8 N slower, 64 pairs of 8 N even; 16 x 30 x 3,000 2x slower)
# or, where every row is saved (one sector per cell: their lanes are rows), the batch fills 2
# programs an SM with a pair each, the row sweep's best case (512 x 256^2: the backward 1.6x slower);
# H100, benchmarks/NOTES.md, sessions 27-28
DIAG_WIDE = 4
# With checkpoints DIAG_ROWS_MIN <= K <= DIAG_ROWS_MAX the backward runs by anti-diagonals too,
# in strips of K rows (a lane a row: a strip is one program, up to 8 warps); larger K go by rows,
# and so do smaller: under half a warp of rows a strip, K = 8 ran 1.1-1.4x slower than the row
# backward at 64 x 512^2, 512 x 256^2 and 1,024 x 64^2 (K = 16: 0.6-1.0x; H100, NOTES.md session 28)
DIAG_ROWS_MIN = 16
DIAG_ROWS_MAX = 256
HAND_OFF = tl.constexpr(8)  # a stripe releases its progress counter every HAND_OFF rows (and at its last)


@triton.jit
def _softmin2(a, b):
    """softmin of two values in gamma / ln 2 units; +inf when both are."""
    lo = tl.minimum(a, b)
    hi = tl.maximum(a, b)
    d = tl.where(hi == float("inf"), float("inf"), hi - lo)
    return lo - _log2(1.0 + _exp2(-d))


@triton.jit
def _unscaled(r, scale):
    """R as stored, from gamma / ln 2 units: a correctly rounded division. `/` is div.full
    on the GPU, r * rcp(scale) with rcp's error the same for every value, so each row's
    store and reload scaled R by the same (1 + eps): rel +4e-5 at 10,000^2 after 10,000 rows."""
    return tl.math.div_rn(r, scale)


@triton.jit
def _then(p1, q1, p2, q2):
    """The map of cells 1 then 2: x -> softmin(softmin(p2, q2 + p1), x + q1 + q2)."""
    return _softmin2(p2, q2 + p1), q1 + q2


@triton.jit
def _affine(a1, b1, a2, b2):
    """x -> a1 + b1 x, then y -> a2 + b2 y."""
    return a2 + b2 * a1, b1 * b2


@triton.jit
def _forward_block(c, prev, col, j0, lo, dg_lo, i, m, scale, band, carry, mus, BLOCK: tl.constexpr):
    """R[i, col] (gamma / ln 2 units) of one column block of row i, col = j0 + lanes: c = its
    costs less mu (units), prev = R's row i - 1 (row 1: the border 0, inf, inf, ... instead),
    carry = R[i, j0 - 1]; columns < lo are not this program's: R[i - 1, lo - 1] comes as
    dg_lo; the diagonal term gets - mus (the centring, units).

    The block's softmins run relative to ref = R[i - 1, j0]: a softmin subtracts
    log2(1 + 2^-d), and where that is below half an ulp of R it rounds away, always the same
    way (a float32 emulation of the tree scan, N = 500: rel 6.4e-7 at R's magnitude, 3.5e-8
    relative to ref); near ref they survive, and only the final + ref rounds, to nearest."""
    row = col * 0 + i  # (scalar conditions as tensors: the interpreter's masks take bool tensors only)
    inside = col < m
    ref = tl.load(prev + col * 0 + j0, mask=row > 1, other=0.0) * scale  # (one address: a broadcast load)
    ref = tl.where(ref == float("inf"), 0.0, ref)  # (outside a band: nothing finite there)
    up = tl.load(prev + col, mask=inside & (row > 1), other=float("inf")) * scale - ref
    dg = tl.load(prev + col - 1, mask=inside & (row > 1) & (col > lo), other=float("inf")) * scale
    dg = tl.where(col == lo, dg_lo, dg) - mus - ref
    p = _softmin2(up, dg) + c
    q = c
    if band >= 0:
        off = tl.abs(i - 1 - col) > band
        p = tl.where(off, float("inf"), p)
        q = tl.where(off, float("inf"), q)
    P, Q = tl.associative_scan((p, q), 0, _then)
    return _softmin2(P, Q + (carry - ref)) + ref


@triton.jit
def _forward_row(cost_row, prev, out, i, lo, hi, m, scale, band, carry, dg_lo, mu, BLOCK: tl.constexpr):
    """Columns [lo, hi) of R's row i (at ``out``) from row i - 1 at ``prev``, given R[i, lo - 1]
    (carry) and R[i - 1, lo - 1] (dg_lo) in gamma / ln 2 units, centred by mu: the backward's
    recompute, the same operations as the forward's (the same floats)."""
    lane = tl.arange(0, BLOCK)
    j0 = lo
    while j0 < hi:
        col = j0 + lane
        c = (tl.load(cost_row + col, mask=col < hi, other=0.0) - mu) * scale
        r = _forward_block(c, prev, col, j0, lo, dg_lo, i, m, scale, band, carry, mu * scale, BLOCK)
        carry = tl.min(tl.where(lane == BLOCK - 1, r, float("inf")), 0)
        tl.store(out + col, _unscaled(r, scale), mask=col < hi)
        j0 += BLOCK
    tl.debug_barrier()  # the next row reads this one across lanes


@triton.jit
def _wait(flag, target, err):
    """spin.wait_until, a wait that gave up counted as an error (the launch's results are
    then poisoned with NaN, never left wrong)."""
    seen = wait_until(flag, target)
    if seen == GAVE_UP:
        tl.atomic_add(err, 1)
    return seen


@triton.jit
def _poison_if_gave_up(err_ptr, out, gg):
    """A wait of the launch gave up: the pair's first gradient and its part of the gamma
    gradient become NaN (never a wrong number). Called by the pair's last program to finish."""
    if tl.load(err_ptr, volatile=True) != 0:
        tl.store(out, float("nan"))
        tl.store(gg, float("nan"))


@triton.jit
def _stripe(n_ptr, m_ptr, S, W, RIGHT_TO_LEFT: tl.constexpr):
    """(pair b, stripe s, the pair's n and m, the stripe's first column lo) of this program:
    program p runs stripe p % S of pair p // S, counted from the right in a sweep that runs
    right to left, so that a stripe waits only on a program of a lower id (started first)."""
    p = tl.program_id(0).to(tl.int64)
    b = p // S
    s = (p % S).to(tl.int32)
    if RIGHT_TO_LEFT:
        s = S - 1 - s
    n = tl.load(n_ptr + b).to(tl.int32)
    m = tl.load(m_ptr + b).to(tl.int32)
    return b, s, n, m, s * W


@triton.jit
def _hand_over(bnd_ptr, b, s, S, N):
    """(one plane's stride, this stripe's row, the stripe to its right's row) of a backward
    sweep's boundary array, planes of [B, S, N + 2] (a value of a stripe's first column by row)."""
    plane = tl.num_programs(0).to(tl.int64) * (N + 2)
    return plane, bnd_ptr + (b * S + s) * (N + 2), bnd_ptr + (b * S + s + 1) * (N + 2)


@triton.jit(do_not_specialize=["N", "M", "buf_rows", "n_saved", "band", "K", "S", "W"])
def soft_dtw_forward_kernel(cost_ptr, gamma_ptr, mu_ptr, n_ptr, m_ptr, value_ptr, saved_ptr, buf_ptr, bnd_ptr,
                            flag_ptr, err_ptr, N, M, buf_rows, n_saved, band, K, S, W, BLOCK: tl.constexpr):
    """Program (b, s) = divmod(p, S): columns [s W, s W + W) of pair b, row by row, into buf
    (row i in slot (i - 1) % buf_rows: buf is saved itself with K = 0, a two-row ring
    otherwise, rows K, 2K, ... then also going to saved); value[b] = R[n, m]. One step per
    column block of a row; the next step's costs are loaded ahead (their latency hides
    behind the scan). With S > 1 the stripes of a pair run as a wavefront: stripe s waits
    for stripe s - 1's row (flag: rows done) and takes its last R of rows i - 1 and i from
    bnd ([B, S, N + 1], gamma / ln 2 units). R is centred by mu[b] (R - mu (i + j) stored);
    the value is not."""
    b, s, n, m, lo = _stripe(n_ptr, m_ptr, S, W, False)
    scale = 1.4426950408889634 / tl.load(gamma_ptr + b)
    mu = tl.load(mu_ptr + b)
    if lo < m:
        hi = tl.minimum(lo + W, m)
        lane = tl.arange(0, BLOCK)
        cost = cost_ptr + b * N * M
        blocks = (hi - lo + BLOCK - 1) // BLOCK  # per row
        steps = n * blocks
        c_next = tl.load(cost + lo + lane, mask=lo + lane < hi, other=0.0)
        carry = tl.full((), float("inf"), tl.float32)
        dg_lo = tl.full((), float("inf"), tl.float32)
        from_left = tl.full((), float("inf"), tl.float32)  # R[i - 1, lo - 1] (stripes)
        seen = n * 0  # rows of stripe s - 1 known done
        left = bnd_ptr + (b * S + s - 1) * (N + 1)  # stripe s - 1's last column, by row
        t = n * 0  # (a tensor: the interpreter's masks take no Python bools)
        while t < steps:
            i = t // blocks + 1
            jb = t % blocks
            j0 = lo + jb * BLOCK
            col = j0 + lane
            c = (c_next - mu) * scale
            t1 = t + 1  # prefetch
            col1 = lo + (t1 % blocks) * BLOCK + lane
            c_next = tl.load(cost + (t1 // blocks).to(tl.int64) * M + col1, mask=(col1 < hi) & (col1 * 0 + t1 < steps),
                             other=0.0)
            out = buf_ptr + (b * buf_rows + (i - 1) % buf_rows) * M
            prev = buf_ptr + (b * buf_rows + (i + buf_rows - 2) % buf_rows) * M
            if jb == 0:  # the row's first block: R[i, lo - 1] and R[i - 1, lo - 1]
                carry = tl.full((), float("inf"), tl.float32)
                dg_lo = tl.where(i == 1, 0.0, float("inf"))
                if s > 0:
                    if i > seen:
                        seen = _wait(flag_ptr + b * S + s - 1, i, err_ptr)
                    dg_lo = from_left
                    carry = tl.load(left + i, volatile=True)
                    from_left = carry
            r = _forward_block(c, prev, col, j0, lo, dg_lo, i, m, scale, band, carry, mu * scale, BLOCK)
            if j0 + BLOCK < hi:  # a block of this row follows
                carry = tl.min(tl.where(lane == BLOCK - 1, r, float("inf")), 0)
            tl.store(out + col, _unscaled(r, scale), mask=col < hi)
            save = (K > 0) & (i % tl.maximum(K, 1) == 0)
            extra = saved_ptr + (b * n_saved + tl.where(save, i // tl.maximum(K, 1) - 1, 0)) * M
            tl.store(extra + col, _unscaled(r, scale), mask=(col < hi) & ((col * 0 + save.to(tl.int32)) != 0))
            if j0 + BLOCK >= hi:  # the row is done
                if hi < m:  # hand the last column to stripe s + 1
                    tl.store(bnd_ptr + (b * S + s) * (N + 1) + i + col * 0, r, mask=col == hi - 1)
                tl.debug_barrier()  # (and the next row reads this one across lanes)
                if (hi < m) & ((i % HAND_OFF == 0) | (i == n)):
                    tl.atomic_xchg(flag_ptr + b * S + s, i, sem="release")
            t += 1
        if hi == m:
            v = tl.load(buf_ptr + (b * buf_rows + (n - 1) % buf_rows) * M + m - 1) + mu * (n + m)
            bad = tl.load(err_ptr, volatile=True) != 0
            tl.store(value_ptr + b, tl.where(bad, float("nan"), v))


@triton.jit
def _logit(mn, r, ok, scale):
    """log2 of a predecessor's unnormalised softmin weight, (min - R) in gamma / ln 2 units
    (<= 0), -inf where not ok. The difference of R as stored, scaled after: mn - r * scale
    would be contracted to an FMA whose unrounded product exceeds the rounded mn by up to half
    an ulp of R * scale, 128 at R ~ 2^24 / gamma 0.01: exp2(+128) = inf, then inf * 0 = NaN
    weights (seen on an H200)."""
    return tl.where(ok, (mn - r) * scale, -float("inf"))


@triton.jit
def _weights(cur, prev, col, i, m, scale, mu):
    """Softmin weights of cell (i, col)'s predecessors (up, diagonal, left), a softmax of
    their -R in gamma / ln 2 units, from R's rows i (cur) and i - 1 (prev), centred by mu (the
    diagonal's R less mu): (ok, zu, zd, zl, log2 Z, wu, wd, wl), z_k = min - R_k (<= 0; -inf
    and weight 0 where the cell is off the table, outside the pair or unreachable)."""
    return _weights_from(cur, prev, col, i, m, scale, 0, float("inf"), tl.where(i == 1, 0.0, float("inf")), mu)


@triton.jit
def _weights_from(cur, prev, col, i, m, scale, lo, lf_lo, dg_lo, mu):
    """_weights where R's column lo - 1 is given, not loaded: R[i, lo - 1] (lf_lo) and
    R[i - 1, lo - 1] (dg_lo), as stored (a stripe's left neighbour, or the border)."""
    row = col * 0 + i
    inside = col < m
    rc = tl.load(cur + col, mask=inside, other=float("inf"))
    up = tl.load(prev + col, mask=inside & (row > 1), other=float("inf"))
    dg = tl.load(prev + col - 1, mask=inside & (row > 1) & (col > lo), other=float("inf"))
    dg = tl.where(col == lo, dg_lo, dg) - mu
    lf = tl.load(cur + col - 1, mask=inside & (col > lo), other=float("inf"))
    lf = tl.where(col == lo, lf_lo, lf)
    return _softmax3(rc, up, dg, lf, inside, scale)


@triton.jit
def _softmax3(rc, up, dg, lf, inside, scale):
    """_weights of a cell from its R (rc) and its predecessors' (up, dg, lf), as stored."""
    mn = tl.minimum(tl.minimum(up, dg), lf)
    ok = inside & (rc < float("inf")) & (mn < float("inf"))
    zu = _logit(mn, up, ok, scale)
    zd = _logit(mn, dg, ok, scale)
    zl = _logit(mn, lf, ok, scale)
    eu = _exp2(zu)
    ed = _exp2(zd)
    el = _exp2(zl)
    total = eu + ed + el
    inv = tl.where(ok, 1.0 / total, 0.0)
    l2 = _log2(tl.where(ok, total, 1.0))  # (dead code, removed by the compiler, where unused)
    return ok, zu, zd, zl, l2, eu * inv, ed * inv, el * inv


@triton.jit
def _left_weight_of_next(cur, prev, col, i, m, scale, mu):
    """w_left of cell (i, col + 1) for col + 1 < m (else 0): its predecessors' softmax, from
    R's rows i and i - 1 loaded beside the cell's own (no hand-over between lanes)."""
    row = col * 0 + i
    nxt = col + 1 < m
    up = tl.load(prev + col + 1, mask=nxt & (row > 1), other=float("inf"))
    dg = tl.load(prev + col, mask=nxt & (row > 1), other=float("inf")) - mu  # (row 0: inf past R[0, 0])
    lf = tl.load(cur + col, mask=nxt, other=float("inf"))
    mn = tl.minimum(tl.minimum(up, dg), lf)
    ok = nxt & (mn < float("inf"))
    mn = tl.where(ok, mn, 0.0)
    el = _exp2(_logit(mn, lf, ok, scale))
    total = _exp2(_logit(mn, up, ok, scale)) + _exp2(_logit(mn, dg, ok, scale)) + el
    return tl.where(ok, el / total, 0.0)


@triton.jit
def _neg_entropy(wu, wd, wl, zu, zd, zl, l2):
    """sum_k w_k log w_k (natural log; log w_k = ln 2 (z_k - log2 Z)): d softmin / d gamma."""
    h = tl.where(wu > 0, wu * (zu - l2), 0.0) + tl.where(wd > 0, wd * (zd - l2), 0.0) \
        + tl.where(wl > 0, wl * (zl - l2), 0.0)
    return h * 0.6931471805599453


@triton.jit
def _row_above(buf, saved, b, i, buf_rows, n_saved, M, K):
    """Where R's row i - 1 lies in the backward: a saved checkpoint (segment tops), else the buffer."""
    if (K > 0) & ((i - 1) % tl.maximum(K, 1) == 0) & (i > 1):
        p = saved + (b * n_saved + (i - 1) // tl.maximum(K, 1) - 1) * M
    else:
        p = buf + (b * buf_rows + (i + buf_rows - 2) % buf_rows) * M
    return p


@triton.jit(do_not_specialize=["N", "M", "buf_rows", "n_saved", "band", "K", "S", "W"])
def soft_dtw_backward_kernel(grad_ptr, cost_ptr, gamma_ptr, mu_ptr, n_ptr, m_ptr, saved_ptr, kept_ptr, buf_ptr, ud_ptr,
                             out_ptr, gg_ptr, bnd_ptr, flag_ptr, err_ptr, N, M, buf_rows, n_saved, band, K, S, W,
                             NEED_GAMMA: tl.constexpr, BLOCK: tl.constexpr):
    """Program (b, S - 1 - s) = divmod(p, S): columns [s W, s W + W) of pair b; out[b] =
    grad[b] * E there and gg[b, s] its cells' part of grad[b] * dV/dgamma. R's rows come
    from saved (K = 0, buf is saved) or are recomputed per segment into buf ([K, M] per
    pair), a stripe's columns from its top row and the forward's kept last columns of the
    stripe to its left (kept: [B, S, N + 1], gamma / ln 2 units). ud: [2 row parities, 2, M]
    per pair (E w_up, E w_diag of the row below). With S > 1 stripe s waits for stripe
    s + 1's row (flag: rows done) and takes E, E w_diag and w_left of its first column, by
    row, from bnd ([3, B, S, N + 2]); R of the column left of its own, from saved or kept (a
    stripe reads no column of R but its own: with checkpoints, its neighbours' rows in buf
    belong to other segments)."""
    b, s, n, m, lo = _stripe(n_ptr, m_ptr, S, W, True)
    if lo < m:
        hi = tl.minimum(lo + W, m)
        g = tl.load(gamma_ptr + b)
        scale = 1.4426950408889634 / g
        mu = tl.load(mu_ptr + b)  # (R as stored is centred: the forward's)
        seed = tl.load(grad_ptr + b)
        lane = tl.arange(0, BLOCK)
        ud = ud_ptr + b * 4 * M
        plane, mine, right = _hand_over(bnd_ptr, b, s, S, N)  # (bnd's three planes)
        left = kept_ptr + (b * S + s - 1) * (N + 1)  # (K > 0, s > 0) R[:, lo - 1] by row
        gsum = tl.zeros((BLOCK,), tl.float32)
        seen = n * 0  # rows of stripe s + 1 known done
        seg_len = tl.where(K > 0, K, n)
        seg = (n - 1) // seg_len
        i = n
        while seg >= 0:
            if K > 0:  # recompute rows seg * K + 1 .. min(seg * K + K, n)
                r = seg * K + 1
                while r <= tl.minimum(seg * K + K, n):
                    prev = _row_above(buf_ptr, saved_ptr, b, r, buf_rows, n_saved, M, K)
                    out = buf_ptr + (b * buf_rows + (r - 1) % buf_rows) * M
                    carry = tl.full((), float("inf"), tl.float32)  # R[r, lo - 1], R[r - 1, lo - 1]
                    dg_lo = tl.where(r == 1, 0.0, float("inf"))
                    if s > 0:
                        carry = tl.load(left + r)
                        dg_lo = tl.where(r > 1, tl.load(left + r - 1), float("inf"))
                    _forward_row(cost_ptr + (b * N + r - 1) * M, prev, out, r, lo, hi, m, scale, band, carry, dg_lo,
                                 mu, BLOCK)
                    r += 1
            while i > seg * seg_len:
                cur = buf_ptr + (b * buf_rows + (i - 1) % buf_rows) * M
                prev = _row_above(buf_ptr, saved_ptr, b, i, buf_rows, n_saved, M, K)
                below = ud + (i % 2) * 2 * M  # E w_up, E w_diag of row i + 1
                here = ud + ((i + 1) % 2) * 2 * M
                lf_lo = tl.full((), float("inf"), tl.float32)  # R[i, lo - 1], R[i - 1, lo - 1] as stored
                dg_lo = tl.where(i == 1, 0.0, float("inf"))
                if s > 0:
                    if K > 0:
                        lf_lo = _unscaled(tl.load(left + i), scale)
                        dg_lo = tl.where(i > 1, _unscaled(tl.load(left + i - 1), scale), float("inf"))
                    else:
                        lf_lo = tl.load(cur + lo - 1)
                        dg_lo = tl.where(i > 1, tl.load(prev + lo - 1), float("inf"))
                carry = tl.full((), 0.0, tl.float32)  # E[i, j0 + BLOCK]
                d_hi = tl.full((), 0.0, tl.float32)  # E w_diag of cell (i + 1, hi)
                w_hi = tl.full((), 0.0, tl.float32)  # w_left of cell (i, hi)
                if hi < m:  # stripe s + 1's first column
                    if n - i + 1 > seen:
                        seen = _wait(flag_ptr + b * S + s + 1, n - i + 1, err_ptr)
                    carry = tl.load(right + i, volatile=True)
                    d_hi = tl.where(i < n, tl.load(right + plane + i + 1, volatile=True), 0.0)
                    w_hi = tl.load(right + 2 * plane + i, volatile=True)
                j0 = lo + ((hi - lo - 1) // BLOCK) * BLOCK
                while j0 >= lo:
                    col = j0 + BLOCK - 1 - lane  # reversed: lane order runs right to left
                    row = col * 0 + i
                    inside = col < hi
                    ok, zu, zd, zl, l2, wu, wd, wlf = _weights_from(cur, prev, col, i, m, scale, lo, lf_lo, dg_lo,
                                                                    mu)
                    w_next = tl.where(col + 1 == hi, w_hi, _left_weight_of_next(cur, prev, col, i, hi, scale, mu))
                    a = tl.load(below + col, mask=inside & (row < n), other=0.0)
                    a += tl.load(below + M + col + 1, mask=(col + 1 < hi) & (row < n), other=0.0)
                    a += tl.where(col + 1 == hi, d_hi, 0.0)
                    a = tl.where((row == n) & (col == m - 1), seed, a)
                    A, Bm = tl.associative_scan((a, w_next), 0, _affine)
                    e = A + Bm * carry
                    carry = tl.sum(tl.where(lane == BLOCK - 1, e, 0.0), 0)
                    tl.store(out_ptr + (b * N + i - 1) * M + col, e, mask=inside)
                    tl.store(here + col, e * wu, mask=inside)
                    tl.store(here + M + col, e * wd, mask=inside)
                    if NEED_GAMMA:
                        gsum += e * _neg_entropy(wu, wd, wlf, zu, zd, zl, l2)
                    if (j0 == lo) & (s > 0):  # hand the first column to stripe s - 1
                        first = (col == lo) & ((col * 0 + i) > 0)
                        tl.store(mine + i + col * 0, e, mask=first)
                        tl.store(mine + plane + i + col * 0, e * wd, mask=first)
                        tl.store(mine + 2 * plane + i + col * 0, wlf, mask=first)
                    j0 -= BLOCK
                tl.debug_barrier()  # row i - 1 reads this row's scratch across lanes
                # (and at a segment's last row: the stripe to the left must not wait out the recompute)
                if (s > 0) & (((n - i + 1) % HAND_OFF == 0) | (i == seg * seg_len + 1)):
                    tl.atomic_xchg(flag_ptr + b * S + s, n - i + 1, sem="release")
                i -= 1
            seg -= 1
        tl.store(gg_ptr + b * S + s, tl.sum(gsum, 0))
        if s == 0:
            _poison_if_gave_up(err_ptr, out_ptr + b * N * M, gg_ptr + b * S)


def _block(M: int, block: int | None) -> int:
    return block or next((b for b in BLOCKS if M <= b), BLOCKS[-1])


def _warps(block: int) -> int:
    """Warps per program (a guess to be tuned on the GPU: benchmarks pass ``warps``)."""
    return max(1, min(8, block // 128))


def _plan(costs, M: int, block, stripe, allow_stripes: bool):
    """(BLOCK, stripe width W, stripes S). One program per pair (S = 1) when the batch fills
    the GPU (2 pairs an SM) or the rows are short; else stripes of STRIPE columns (one block
    each): more programs, each with a short row scan, spread over the SMs. ``stripe``
    forces a width (a multiple of the block)."""
    B = costs.shape[0]
    if stripe is None and allow_stripes and costs.is_cuda and M > max(STRIPE, STRIPE_ABOVE):
        sms = torch.cuda.get_device_properties(costs.device).multi_processor_count
        if B < 2 * sms:
            stripe = STRIPE
    if stripe is None or not allow_stripes:
        blk = _block(M, block)
        return blk, max(M, 1), 1
    blk = block or stripe
    if stripe % blk:
        raise ValueError(f"stripe {stripe} must be a multiple of the block {blk}")
    return blk, stripe, -(-M // stripe)


def kept_shape(costs, checkpoint: int, block: int | None = None, stripe: int | None = None, diag: bool | None = None):
    """The shape of what the forward keeps beside the checkpoints: by anti-diagonals, what
    their backward recomputes segments from (soft_dtw_diag.segments_shape, 4-D); by rows with
    stripes, R's last column of every stripe, by row ([B, S, N + 1], gamma / ln 2 units), from
    which the backward recomputes each stripe's segments on its own; [B, 0, N + 1] otherwise, and
    where no row is saved (K > N: torchalign.soft_dtw's forward with no backward to come), so that
    such a forward neither stores stripe columns (two integer divisions a step) nor runs in
    strips of K rows."""
    B, N, M = costs.shape
    if checkpoint > N:
        return B, 0, N + 1
    if _segments(costs, checkpoint, diag):
        from .soft_dtw_diag import segments_shape

        return segments_shape(B, N, M, checkpoint)
    S = _plan(costs, M, block, stripe, True)[2] if checkpoint else 1
    return B, (S if S > 1 else 0), N + 1


def centre_of(mu, costs):
    """mu [B] float32 (None: zeros, no centring)."""
    if mu is None:
        return costs.new_zeros(costs.shape[0])
    return (mu if mu.dtype == costs.dtype else mu.to(costs.dtype)).contiguous()


def forward(costs, gamma, n, m, band: int, checkpoint: int, block: int | None = None, warps: int | None = None,
            stripe: int | None = None, diag: bool | None = None, rows: int | None = None, mu=None):
    """(value [B], saved, kept): saved = R [B, N, M] (checkpoint 0) or its rows K, 2K, ...
    [B, N // K, M]; kept: see kept_shape. costs float32 [B, N, M] contiguous; gamma float32
    [B]; n, m int64 [B]; mu float32 [B] or None: the tables hold R - mu (i + j) (the value
    does not; torchalign.cpu.soft_dtw). ``diag``: by anti-diagonals (soft_dtw_diag, strips of
    ``rows`` rows), else by rows; None: _by_diagonals's choice. ``block`` and ``warps`` are
    the row sweep's."""
    B, N, M = costs.shape
    mu = centre_of(mu, costs)
    kept = costs.new_empty(kept_shape(costs, checkpoint, block, stripe, diag))
    if _by_diagonals(costs, checkpoint) if diag is None else diag:
        from . import soft_dtw_diag  # (here: it imports this module's helpers)

        W = _plan(costs, M, block, stripe, True)[1] if kept.shape[1] and kept.dim() == 3 else None
        return *soft_dtw_diag.forward(costs, gamma, n, m, band, checkpoint, kept, mu, block=rows, stripe=W), kept
    full = bool(checkpoint == 0)
    saved = costs.new_empty(B, N if full else N // checkpoint, M)
    buf = saved if full else costs.new_empty(B, 2, M)
    value = costs.new_empty(B)
    if B:
        blk, W, S = _plan(costs, M, block, stripe, True)
        bnd = kept if kept.shape[1] else costs.new_empty(B, S, N + 1) if S > 1 else value
        flags, err = _progress_flags(B * S, costs.device)
        keep = saved if saved.numel() else value  # (no rows kept: a pointer that is never written)
        _launch_fwd((B * S,), costs, gamma.contiguous(), mu, n, m, value, keep, buf, bnd, flags, err, N, M,
                    N if full else 2, saved.shape[1], band, checkpoint, S, W, BLOCK=blk,
                    num_warps=warps or _warps(blk))
    return value, saved, kept


def _by_diagonals(costs, checkpoint: int) -> bool:
    """The forward's choice (DIAG_WIDE)."""
    B, N, M = costs.shape
    if M > DIAG_WIDE * N:
        return False
    return checkpoint != 0 or B < 2 * _sms(costs.device)


def _segments(costs, checkpoint: int, diag: bool | None) -> bool:
    """Whether a checkpointed backward goes by anti-diagonals (the forward's strips then K
    rows, kept_shape 4-D): K <= DIAG_ROWS_MAX where ``diag`` forces it, else where the forward
    goes by anti-diagonals and K >= DIAG_ROWS_MIN."""
    if not 0 < checkpoint < min(costs.shape[1], DIAG_ROWS_MAX + 1):
        return False
    return diag if diag is not None else checkpoint >= DIAG_ROWS_MIN and _by_diagonals(costs, checkpoint)


def _progress_flags(stripes: int, device):
    """(a progress counter per stripe, the error count): one zeroed allocation, the count
    at a 16-byte boundary whatever the number of stripes (one compiled variant, not two)."""
    flags = torch.zeros(-(-stripes // 4) * 4 + 1, dtype=torch.int32, device=device)
    return flags, flags[-1:]


def backward(grad, costs, gamma, saved, kept, n, m, band: int, checkpoint: int, need_gamma: bool,
             block: int | None = None, warps: int | None = None, stripe: int | None = None, diag: bool | None = None,
             rows: int | None = None, mu=None):
    """(grad * dV/dcosts [B, N, M], grad * dV/dgamma [B]); padding cells get 0; ``mu``: the
    forward's centring. With
    checkpoints, stripes only where the forward kept their columns (the same plan). By
    anti-diagonals (soft_dtw_diag_bwd) where the forward kept their segments (``kept`` 4-D),
    or from a full table where _by_diagonals says or ``diag`` forces (strips of ``rows``
    rows); ``block``, ``warps`` and ``stripe`` are the row sweep's."""
    B, N, M = costs.shape
    mu = centre_of(mu, costs)
    if kept.dim() == 4 if checkpoint else (_by_diagonals(costs, 0) if diag is None else diag):
        from . import soft_dtw_diag_bwd

        return soft_dtw_diag_bwd.backward(grad, costs, gamma, saved, kept, n, m, band, checkpoint, need_gamma, mu,
                                          block=rows)
    out = torch.zeros_like(costs)
    if not B:
        return out, costs.new_zeros(B)
    full = checkpoint == 0
    blk, W, S = _plan(costs, M, block, stripe, True)
    if not full and S > 1 and kept.shape[1] != S:  # (the forward ran another plan)
        blk, W, S = _plan(costs, M, block, None, False)
    gg = costs.new_zeros(B, S)
    buf = saved if full else costs.new_empty(B, checkpoint, M)
    ud = costs.new_empty(B, 4, M)
    bnd = costs.new_empty(3, B, S, N + 2) if S > 1 else gg
    flags, err = _progress_flags(B * S, costs.device)
    _launch_bwd((B * S,), grad, costs, gamma.contiguous(), mu, n, m, saved, kept if kept.numel() else gg, buf, ud, out,
                gg, bnd, flags, err, N, M,
                N if full else checkpoint, saved.shape[1], band, checkpoint, S, W, NEED_GAMMA=bool(need_gamma),
                BLOCK=blk, num_warps=warps or _warps(blk))
    return out, gg.sum(1)


# the training step's two launches past JITFunction.run's per-call binding (launch.py)
_launch_fwd = Launcher(soft_dtw_forward_kernel)
_launch_bwd = Launcher(soft_dtw_backward_kernel)
settle_module(__name__)  # the same cache keys in every process (cache_keys.py)
