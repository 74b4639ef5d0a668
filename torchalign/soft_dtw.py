"""Soft-DTW (Cuturi & Blondel 2017) with autograd: public functions (validation, then
torch.ops.torchalign.soft_dtw, or in eager code its implementation: ops.soft_dtw.value)."""

from __future__ import annotations

import numbers

import torch

from . import ops  # noqa: F401  (registers torch.ops.torchalign.*)
from .inputs import check_int, constant, full_lengths
from .ops import soft_dtw as ops_soft_dtw
from .ops.soft_dtw import value as op_value

FLOATS = (torch.float16, torch.bfloat16, torch.float32, torch.float64)


def soft_dtw(costs: torch.Tensor, gamma=1.0, *, lengths=None, bandwidth: int | None = None,
             checkpoint: int | None = None, check: bool = True) -> torch.Tensor:
    """Soft-DTW value of each pair of a batch of cost matrices: float[B], differentiable.

    ``costs`` [B, N, M]: the cost of matching position i of the first series with position
    j of the second (squared distances, say; any sign). With 1-based i, j::

        R[0, 0] = 0,  R[i, 0] = R[0, j] = +inf  (i, j >= 1)
        R[i, j] = costs[i-1, j-1] + softmin_gamma(R[i-1, j], R[i-1, j-1], R[i, j-1])
        softmin_gamma(a, b, c) = -gamma * log(exp(-a/gamma) + exp(-b/gamma) + exp(-c/gamma))
        value = R[N, M]   (R[n_b, m_b] with lengths)

    evaluated with the running minimum (no overflow for costs of 1e4 and gamma down to
    1e-3; +inf borders give weight 0, never NaN). As gamma -> 0 the value tends to the DTW
    cost (min over monotone paths of the summed costs); it is -gamma log of the sum over
    all paths of exp(-path cost / gamma). This is Cuturi & Blondel's recurrence exactly,
    and pysdtw's ``SoftDTW(gamma=gamma)`` on the same cost matrix (pysdtw computes the
    costs itself from two series, squared Euclidean by default). As a soft alignment it is
    soft Needleman-Wunsch with scores = -costs, zero gap cost and temperature gamma, with
    the DTW moves (a diagonal move or a repeat of either position; each position matched
    at least once) in place of gaps.

    The gradient with respect to ``costs`` is the expected alignment E (E[i, j] = the
    probability that the soft path passes through cell (i, j)), computed by Cuturi &
    Blondel's backward sweep from the saved R (one value per cell, or per checkpoint row),
    the softmin weights recomputed per cell; the gradient with respect to ``gamma`` (when
    it requires one) is sum over cells of E times sum_k w_k log w_k. The backward is
    itself differentiable (Hessian-vector products, Mensch & Blondel 2018), so
    ``torch.autograd.gradgradcheck`` passes and losses on the gradient train.

    - ``gamma``: a float > 0 or a tensor broadcastable to [B] (a gradient when it requires one).
    - ``lengths``: ``(n, m)``, each B integers (tensors or sequences): pair b uses
      ``costs[b, :n[b], :m[b]]``; the padding takes no part and gets zero gradient.
    - ``bandwidth``: a Sakoe-Chiba band: cells with ``|i - j| > bandwidth`` (1-based, on the
      unscaled indices, as tslearn; pysdtw's on square pairs, but pysdtw scales a
      non-square pair's longer side to the shorter's and takes 0 as no band, where ours
      is the diagonal alone) are +inf. A band narrower than a pair's ``|n - m|`` leaves
      its last cell outside: ValueError (not an infinite value).
    - ``checkpoint``: K saves every K-th row of R only (memory N / K rows per pair instead
      of N) and recomputes the rest in the backward (one forward more).
      Without autograd (no_grad, or nothing requires a gradient) no row is saved.
      Memory beside the costs and their gradient: 4 B per cell saved (float32). With
      checkpoints 4 / K B a cell, plus:
      - by anti-diagonals (16 <= K <= 256, the kernels' choice below): the strips are K rows
        and keep each lane's R at two steps of every 64 anti-diagonals, ~0.125 (K' / K)
        (1 + K / M) B a cell (K' = K rounded up to a power of two: a K of 32, 64, 128 or
        256 wastes no lanes and runs fastest), and the backward recomputes a strip 64
        anti-diagonals at a time in a scratch of 66 K' values per strip;
      - by rows: a [K, M] segment per pair in the backward, and where a few long pairs
        run as column stripes each stripe's last column (4 / 128 B a cell).
      O(B x M) scratch; the double backward keeps one more table (its tangents) while it runs.
    - float16 / bfloat16 costs are computed in float32 (float32 value); float64 stays float64.
      In float32, pairs wider than 64 are centred: the tables hold R - mu (i + j), mu per pair
      the value per unit of i + j of a leading 64-side block (one more small forward a call),
      and the recurrence becomes R' = (cost - mu) + softmin(up, diagonal - mu, left), the
      value R'[n, m] + mu (n + m): the same numbers in exact arithmetic, but the stored R' stay
      small, so their rounding no longer grows with the pair's length over gamma (float32
      gradients 5-20x nearer float64: at gamma 0.2 in a band, 9e-4 -> 5e-5 on the H100). The
      double backward centres its tangents the same way where the block shows them drifting.
    - ``check``: read the lengths (and gamma) back once to validate them (set False for CUDA graphs).

    CUDA float32 runs Triton kernels, all three sweeps (forward, backward, the
    Hessian-vector product's two) by anti-diagonals (a lane per row, strips of rows run as
    a wavefront), or by rows where rows are much longer than the pairs are tall (over 4x)
    or a batch that fills the GPU saves every row (one program per pair, a row per step,
    the row's left-to-right dependence as a prefix scan; a few long pairs split into
    column stripes run as a wavefront); with checkpoints K < 16 or K > 256 the backward goes by rows,
    and the Hessian-vector product recomputes the whole table. CPU tensors and float64 run
    vectorised torch over anti-diagonals.

    >>> import torch, torchalign as ta
    >>> c = torch.tensor([[[0.0, 1.0], [1.0, 0.0]]])   # paths: the diagonal (cost 0), two of cost 1
    >>> round(ta.soft_dtw(c, gamma=1.0).item(), 4)     # -log(e^0 + 2 e^-1)
    -0.5514
    >>> round(ta.soft_dtw(c, gamma=0.01).item(), 4)    # gamma -> 0: DTW, the diagonal
    0.0
    """
    costs = _costs(costs)
    B, N, M = costs.shape
    work = costs if costs.dtype in (torch.float32, torch.float64) else costs.float()
    g = _gamma(gamma, B, work)
    band = -1 if bandwidth is None else check_int("bandwidth", bandwidth, 0)
    k = 0 if checkpoint is None else check_int("checkpoint", checkpoint, 1)
    if k >= N:
        k = 0  # one segment: every row is saved anyway
    wants_grad = costs.requires_grad or (isinstance(gamma, torch.Tensor) and gamma.requires_grad)
    if not (torch.is_grad_enabled() and wants_grad):
        k = N + 1  # no backward to come: save no rows (two in flight)
    n, m = _lengths(lengths, B, N, M, costs.device)
    if lengths is None and 0 <= band < abs(N - M):
        raise ValueError(f"bandwidth={band} is narrower than |N - M| = {abs(N - M)}: the last cell lies outside "
                         f"the Sakoe-Chiba band; use bandwidth >= {abs(N - M)} or None")
    # values to read back: the lengths, a gamma tensor's positivity (one read, inside the op)
    reads = check and (lengths is not None or isinstance(gamma, torch.Tensor))
    mu = None  # float32 tables centred (ops.soft_dtw.centre) where the pair is wider than the block
    if work.dtype == torch.float32 and max(N, M) > ops_soft_dtw.CENTRE_BLOCK:
        mu = ops_soft_dtw.centre(work, g, n, m, band)
    return op_value(work, g, n, m, mu, band, k, reads)


def soft_dtw_divergence(x: torch.Tensor, y: torch.Tensor, gamma=1.0, *, lengths=None,
                        checkpoint: int | None = None, check: bool = True) -> torch.Tensor:
    """Soft-DTW divergence of two batches of series, ``x`` [B, N, D] and ``y`` [B, M, D]:
    ``sdtw(x, y) - (sdtw(x, x) + sdtw(y, y)) / 2`` with squared Euclidean costs
    ``||x_i - y_j||^2`` (Blondel, Mensch & Vert 2021): zero for equal series, float[B],
    differentiable in x, y and gamma. ``lengths=(x_lengths, y_lengths)`` for padded
    batches; ``gamma``, ``checkpoint``, ``check`` as in soft_dtw.

    >>> import torch, torchalign as ta
    >>> x = torch.randn(2, 5, 3)
    >>> ta.soft_dtw_divergence(x, x).abs().max().item()
    0.0
    """
    for name, t in (("x", x), ("y", y)):
        if not isinstance(t, torch.Tensor) or t.dim() != 3 or t.dtype not in FLOATS:
            raise TypeError(f"{name}: expected a float tensor [B, length, D], got "
                            f"{getattr(t, 'shape', type(t).__name__)} {getattr(t, 'dtype', '')}")
    if x.shape[0] != y.shape[0] or x.shape[2] != y.shape[2]:
        raise ValueError(f"x {tuple(x.shape)} and y {tuple(y.shape)}: need the same batch size and feature size D")
    if x.device != y.device:
        raise ValueError(f"y is on {y.device} but x is on {x.device}; move both with .to(device)")
    if x.dtype not in (torch.float32, torch.float64):
        x = x.float()
    y = y.to(x.dtype)
    nx, ny = (None, None) if lengths is None else _pair(lengths)
    kw = dict(gamma=gamma, checkpoint=checkpoint, check=check)
    xy = soft_dtw(_sq_dist(x, y), lengths=None if lengths is None else (nx, ny), **kw)
    xx = soft_dtw(_sq_dist(x, x), lengths=None if lengths is None else (nx, nx), **kw)
    yy = soft_dtw(_sq_dist(y, y), lengths=None if lengths is None else (ny, ny), **kw)
    return xy - (xx + yy) / 2


def _sq_dist(a, b):
    """||a_i - b_j||^2 [B, N, M] (the expanded form: no [B, N, M, D] temporary)."""
    return (a * a).sum(-1)[:, :, None] + (b * b).sum(-1)[:, None, :] - 2 * a @ b.transpose(1, 2)


def _costs(costs):
    if not isinstance(costs, torch.Tensor):
        raise TypeError(f"costs: expected a float tensor [B, N, M], got {type(costs).__name__}")
    if costs.dim() != 3:
        raise ValueError(f"costs: expected [B, N, M], got shape {tuple(costs.shape)}")
    if costs.dtype not in FLOATS:
        raise TypeError(f"costs: expected float16, bfloat16, float32 or float64, got {costs.dtype}")
    if costs.shape[1] < 1 or costs.shape[2] < 1:
        raise ValueError(f"costs: N and M must be >= 1, got shape {tuple(costs.shape)}")
    return costs.contiguous()


def _gamma(gamma, B, like):
    if isinstance(gamma, torch.Tensor):
        if not gamma.is_floating_point():
            raise TypeError(f"gamma: expected a float or a float tensor, got {gamma.dtype}")
        try:
            return gamma.to(device=like.device, dtype=like.dtype).expand(B).contiguous()
        except RuntimeError:
            raise ValueError(f"gamma: shape {tuple(gamma.shape)} does not broadcast to [B] = [{B}]") from None
    if isinstance(gamma, bool) or not isinstance(gamma, numbers.Real):
        raise TypeError(f"gamma: expected a float > 0 or a tensor, got {type(gamma).__name__}")
    if not gamma > 0 or gamma == float("inf"):
        raise ValueError(f"gamma: must be a finite float > 0, got {gamma}")
    return constant((B,), float(gamma), like.dtype, like.device)


def _pair(lengths):
    if not isinstance(lengths, (tuple, list)) or len(lengths) != 2:
        raise TypeError("lengths: expected (n, m), two sequences of B integers each")
    return lengths


def _lengths(lengths, B, N, M, device):
    if lengths is None:
        return full_lengths(B, N, M, device)
    out = []
    for name, v in zip(("n", "m"), _pair(lengths)):
        t = torch.as_tensor(v, device=device)
        if t.dtype.is_floating_point or t.dtype == torch.bool or t.dtype.is_complex:
            raise TypeError(f"lengths: {name} must hold integers, got {t.dtype}")
        if t.shape != (B,):
            raise ValueError(f"lengths: {name} must have shape [B] = [{B}], got {tuple(t.shape)}")
        out.append(t.to(torch.int64).contiguous())
    return out
