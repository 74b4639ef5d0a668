"""The soft-DTW custom ops: forward, backward (itself differentiable) and the Hessian-vector
product; schemas, fake impls, autograd, and the CPU / CUDA implementations.

``torchalign::soft_dtw(costs, gamma, n, m, mu, bandwidth, checkpoint, check) -> (value,
saved, kept)``: costs float32 / float64 [B, N, M], gamma [B] (same dtype), n / m int64 [B]
(each pair's rows and columns), mu (None or [B]: the tables hold R - mu (i + j), a centring
that changes only the rounding; torchalign.cpu.soft_dtw), bandwidth (-1: none), checkpoint
(0: every row of R is saved, [B, N, M]; K: rows K, 2K, ... only, [B, N // K, M], the others
recomputed segment by segment in the backward; with the kernels' stripes, ``kept`` holds
each stripe's last column of R, [B, S, N + 1], so that a stripe recomputes its segments
alone; [B, 0, N + 1] otherwise). ``check=True`` reads gamma, n and m back once and raises on
gamma <= 0, bad lengths or a band too narrow for a pair. The backward op returns (dV/dcosts,
dV/dgamma) and has its own autograd: the Hessian-vector product op (Mensch & Blondel), which
takes the saved R and kept (with checkpoints it recomputes R a segment at a time where the
forward kept the segments, else whole), so gradgradcheck passes. Eager calls of
torchalign.soft_dtw run the implementations (``forward``, ``backward``, ``hvp``) directly
with ``_Eager``'s autograd (``value``; ops.direct says when).

CUDA float32 runs the Triton kernels (torchalign_kernels.soft_dtw, soft_dtw_hvp); CPU
tensors and float64 CUDA tensors run the torch code of torchalign.cpu.soft_dtw.
"""

from __future__ import annotations

import torch
from torch import Tensor

from ..cpu import soft_dtw as cpu
from .backend import kernels, use_kernels, on_tensor_device
from .direct import direct, needs_grad
from .soft_align import leading_block

DEVICES = ("cpu", "cuda")


def _triton(costs: Tensor) -> bool:
    return use_kernels(costs) and costs.dtype == torch.float32


def _check(gamma: Tensor, n: Tensor, m: Tensor, N: int, M: int, bandwidth: int) -> None:
    """One host read: gamma > 0, every pair has 1..N rows and 1..M columns, and its last
    cell lies in the band."""
    if n.numel() == 0:
        return
    facts = torch.stack([n.min(), n.max(), m.min(), m.max(), (n - m).abs().max(), (gamma > 0).all().to(n.dtype)])
    lo_n, hi_n, lo_m, hi_m, gap, positive = facts.tolist()
    if not positive:
        raise ValueError("gamma: every value must be > 0")
    if lo_n < 1 or hi_n > N:
        raise ValueError(f"lengths: n must lie in [1, {N}] (costs.shape[1]), found {lo_n}..{hi_n}")
    if lo_m < 1 or hi_m > M:
        raise ValueError(f"lengths: m must lie in [1, {M}] (costs.shape[2]), found {lo_m}..{hi_m}")
    if 0 <= bandwidth < gap:
        raise ValueError(f"bandwidth={bandwidth} is narrower than a pair's length difference {gap}: its last cell "
                         f"lies outside the Sakoe-Chiba band; use bandwidth >= {gap} or None")


@on_tensor_device
def forward(costs: Tensor, gamma: Tensor, n: Tensor, m: Tensor, mu: Tensor | None, bandwidth: int, checkpoint: int,
            check: bool) -> tuple[Tensor, Tensor, Tensor]:
    if check:
        _check(gamma, n, m, costs.shape[1], costs.shape[2], bandwidth)
    if _triton(costs):
        return kernels("soft_dtw").forward(costs, gamma, n, m, bandwidth, checkpoint, mu=mu)
    return (*cpu.forward(costs, gamma, n, m, bandwidth, checkpoint, mu),
            costs.new_empty(_kept_shape(costs, checkpoint)))


soft_dtw = torch.library.custom_op("torchalign::soft_dtw", forward, mutates_args=(), device_types=DEVICES)


def _saved_shape(costs, checkpoint):
    B, N, M = costs.shape
    return (B, N if checkpoint == 0 else N // checkpoint, M)


def _kept_shape(costs, checkpoint):
    if _triton(costs):
        return kernels("soft_dtw").kept_shape(costs, checkpoint)
    B, N, _ = costs.shape
    return (B, 0, N + 1)


@soft_dtw.register_fake
def _(costs, gamma, n, m, mu, bandwidth, checkpoint, check):
    return (costs.new_empty(costs.shape[0]), costs.new_empty(_saved_shape(costs, checkpoint)),
            costs.new_empty(_kept_shape(costs, checkpoint)))


@on_tensor_device
def backward(grad: Tensor, costs: Tensor, gamma: Tensor, saved: Tensor, kept: Tensor, n: Tensor, m: Tensor,
             mu: Tensor | None, bandwidth: int, checkpoint: int, need_gamma: bool) -> tuple[Tensor, Tensor]:
    grad = grad.contiguous()
    if _triton(costs):
        return kernels("soft_dtw").backward(grad, costs, gamma, saved, kept, n, m, bandwidth, checkpoint, need_gamma,
                                            mu=mu)
    return cpu.backward(grad, costs, gamma, saved, n, m, bandwidth, checkpoint, need_gamma, mu)


soft_dtw_backward = torch.library.custom_op("torchalign::soft_dtw_backward", backward, mutates_args=(),
                                            device_types=DEVICES)


@soft_dtw_backward.register_fake
def _(grad, costs, gamma, saved, kept, n, m, mu, bandwidth, checkpoint, need_gamma):
    return torch.empty_like(costs), gamma.new_empty(costs.shape[0])


@on_tensor_device
def hvp(grad: Tensor, costs: Tensor, gamma: Tensor, saved: Tensor, kept: Tensor, n: Tensor, m: Tensor,
        mu: Tensor | None, bandwidth: int, checkpoint: int, v_costs: Tensor, v_gamma: Tensor, gamma_terms: bool
        ) -> tuple[Tensor, Tensor, Tensor]:
    """(grad * H v over the costs, grad * H v over gamma, dV . v): the kernels take grad in as
    the backward does (E seeded with it), with no pass over [B, N, M] to scale H v.
    ``gamma_terms`` False: v_gamma is zero and H v over gamma is not wanted (zeros), which
    spares the kernels gamma's entropy terms."""
    nu = None if mu is None else _tangent_centre(costs, gamma, n, m, mu, bandwidth, v_costs, v_gamma)
    if _triton(costs):
        return kernels("soft_dtw_hvp").hvp(costs, gamma, n, m, bandwidth, v_costs, v_gamma, R=saved, kept=kept,
                                           checkpoint=checkpoint, mu=mu, nu=nu, grad=grad,
                                           gamma_terms=gamma_terms)
    R = saved if checkpoint == 0 else None  # (checkpoints: R recomputed whole)
    hv_costs, hv_gamma, dot = cpu.hvp(costs, gamma, n, m, bandwidth, v_costs.contiguous(), v_gamma.contiguous(), R=R,
                                      mu=mu, nu=nu)
    return grad[:, None, None] * hv_costs, grad * hv_gamma if gamma_terms else torch.zeros_like(dot), dot


soft_dtw_hvp = torch.library.custom_op("torchalign::soft_dtw_hvp", hvp, mutates_args=(), device_types=DEVICES)


@soft_dtw_hvp.register_fake
def _(grad, costs, gamma, saved, kept, n, m, mu, bandwidth, checkpoint, v_costs, v_gamma, gamma_terms):
    B = costs.shape[0]
    return torch.empty_like(costs), costs.new_empty(B), costs.new_empty(B)


# The side of the leading block whose value gives the centring (a power of two: the kernel's
# lanes), one more small forward a call (B x 64^2 cells). In float32 the plain tables carry R's
# rounding, eps |R| with |R| ~ |mu| (i + j), into every softmin weight (/ gamma): at gamma 0.2
# in a band a 650 x 770 pair's gradient was 9e-4 off float64, 4.8e-5 centred, and 4 x 10,000^2
# at gamma 1 4.3e-3, 3.1e-4 centred (H100; benchmarks/NOTES.md, session 29)
CENTRE_BLOCK = 64
DRIFT_CLEAR = 4.0  # (_tangent_centre)


@on_tensor_device
def centre_impl(costs: Tensor, gamma: Tensor, n: Tensor, m: Tensor, bandwidth: int) -> Tensor:
    """mu [B], R's growth per unit of i + j estimated from a leading block of each pair (its
    shape scaled to CENTRE_BLOCK a side, ops.soft_align.leading_block), for the ops'
    centring: the tables then hold R - mu (i + j), small numbers near the soft path, and the
    value and gradients are the same up to rounding (exact in exact arithmetic, so a poor mu,
    e.g. of costs that drift, only keeps the plain rounding). 0 where the block's value is
    not finite (its last cell outside the band)."""
    if _triton(costs):  # (one launch: through the forward op the host's part was ~0.2 ms a call)
        return kernels("soft_dtw_diag").centre(costs, gamma, n, m, bandwidth, CENTRE_BLOCK)
    n0, m0 = leading_block(n, m, CENTRE_BLOCK)
    v, _ = cpu.forward(costs[:, :CENTRE_BLOCK, :CENTRE_BLOCK], gamma, n0, m0, bandwidth, 0)
    return torch.nan_to_num(v / (n0 + m0).to(v.dtype), nan=0.0, posinf=0.0, neginf=0.0)


soft_dtw_centre = torch.library.custom_op("torchalign::soft_dtw_centre", centre_impl, mutates_args=(),
                                          device_types=DEVICES)


@soft_dtw_centre.register_fake
def _(costs, gamma, n, m, bandwidth):
    return costs.new_empty(costs.shape[0])


def _detached(t: Tensor) -> Tensor:
    """t without its graph, itself where it has none (a detach is host time on a small step)."""
    return t.detach() if t.requires_grad else t


def centre(costs: Tensor, gamma: Tensor, n: Tensor, m: Tensor, bandwidth: int) -> Tensor:
    """centre_impl's mu, through the op where a compiler or a mode must see it."""
    args = (_detached(costs), _detached(gamma), n, m, bandwidth)
    return centre_impl(*args) if direct(args[:2]) else torch.ops.torchalign.soft_dtw_centre(*args)


def _tangent_centre(costs, gamma, n, m, mu, bandwidth, v_costs, v_gamma):
    """nu [B], the growth of the tangents T = dR . v per unit of i + j, from the leading
    block's dV . v: the Hessian-vector product then holds T - nu (i + j), as the values are
    centred (a direction that drifts, such as the costs themselves, makes T grow like R).
    Only a drift the block shows clearly is taken: |dV . v| over DRIFT_CLEAR times
    rms(v) sqrt(n0 + m0), more than a v of random signs would give (its spread
    sqrt(sum (E v)^2) ~ rms(v) sqrt(sum E^2), and sum E^2 <= sum E <= n0 + m0); a noisy
    estimate would add a growth of its own (ops.soft_align._tangent_centre's rule). On CUDA
    one kernel launch (soft_dtw_diag.centre: T by its recurrence beside R); here a forward
    and a backward of the block, dV . v = <E, v> + dV/dgamma v_gamma."""
    if _triton(costs):
        return kernels("soft_dtw_diag").centre(costs, gamma, n, m, bandwidth, CENTRE_BLOCK, v_costs, v_gamma,
                                               DRIFT_CLEAR)
    with torch.no_grad():
        n0, m0 = leading_block(n, m, CENTRE_BLOCK)
        x = costs[:, :CENTRE_BLOCK, :CENTRE_BLOCK].contiguous()
        _, saved, kept = forward(x, gamma, n0, m0, mu, bandwidth, 0, False)
        E, dgamma = backward(torch.ones_like(gamma), x, gamma, saved, kept, n0, m0, mu, bandwidth, 0, True)
        v = v_costs[:, :CENTRE_BLOCK, :CENTRE_BLOCK]
        d = (E * v).sum((1, 2)) + dgamma * v_gamma
        span = (n0 + m0).clamp_min(1).to(d.dtype)
        rows, cols = (torch.arange(k, device=v.device) for k in v.shape[1:])
        block = (rows[None, :, None] < n0[:, None, None]) & (cols[None, None, :] < m0[:, None, None])
        mean_square = torch.where(block, v * v, 0.0).sum((1, 2)) / (n0 * m0).clamp_min(1).to(d.dtype)
        clear = d.abs() > DRIFT_CLEAR * (mean_square * span).sqrt()
        return torch.where(clear, d / span, 0.0)


def _save(ctx, inputs, saved, kept):
    """What the backward reads: costs, gamma, the forward's saved rows and kept columns, n,
    m, the centring; the band and K."""
    costs, gamma, n, m, mu, bandwidth, checkpoint, _ = inputs
    ctx.save_for_backward(costs, gamma, saved, kept, n, m, mu)
    ctx.bandwidth, ctx.checkpoint = bandwidth, checkpoint


def _setup(ctx, inputs, output):
    _save(ctx, inputs, *output[1:])
    ctx.mark_non_differentiable(*output[1:])
    ctx.set_materialize_grads(False)  # (else every backward allocated and zeroed a [B, N, M] gradient for R)


def _backward(ctx, grad_value, *_grad_saved, backward_fn=None):
    """``backward_fn``: _EagerBackward.apply or the backward's implementation (eager code), else the op."""
    costs, gamma, saved, kept, n, m, mu = ctx.saved_tensors
    if grad_value is None:
        return None, None, None, None, None, None, None, None
    g_costs, g_gamma = (backward_fn or torch.ops.torchalign.soft_dtw_backward)(
        grad_value, costs, gamma, saved, kept, n, m, mu, ctx.bandwidth, ctx.checkpoint, ctx.needs_input_grad[1])
    return (g_costs if ctx.needs_input_grad[0] else None, g_gamma if ctx.needs_input_grad[1] else None,
            None, None, None, None, None, None)


soft_dtw.register_autograd(_backward, setup_context=_setup)


def _setup_backward(ctx, inputs, output):
    grad, costs, gamma, saved, kept, n, m, mu, bandwidth, checkpoint, need_gamma = inputs
    ctx.set_materialize_grads(False)  # (_double_backward makes the zeros it needs)
    ctx.save_for_backward(grad, costs, gamma, saved, kept, n, m, mu)
    ctx.bandwidth, ctx.checkpoint = bandwidth, checkpoint


def _double_backward(ctx, v_costs, v_gamma, product=None):
    """The backward op returns grad * (dV/dcosts, dV/dgamma); along (v_costs, v_gamma) its
    derivative is grad * H v for costs and gamma and dV . v for grad. R (``saved``) gets
    none: H v already holds the whole derivative through it. ``product``: the
    Hessian-vector product's implementation (eager code), else the op."""
    grad, costs, gamma, saved, kept, n, m, mu = ctx.saved_tensors
    gamma_terms = v_gamma is not None or ctx.needs_input_grad[2]  # (else the kernels skip gamma's entropy)
    if v_costs is None:
        v_costs = torch.zeros_like(costs)
    if v_gamma is None:
        v_gamma = torch.zeros_like(gamma)
    hv_costs, hv_gamma, dot = (product or torch.ops.torchalign.soft_dtw_hvp)(grad, costs, gamma, saved, kept, n, m,
                                                                             mu, ctx.bandwidth, ctx.checkpoint,
                                                                             v_costs, v_gamma, gamma_terms)
    return (dot, hv_costs, hv_gamma, None, None, None, None, None, None, None, None)


soft_dtw_backward.register_autograd(_double_backward, setup_context=_setup_backward)


class _Eager(torch.autograd.Function):
    """soft_dtw's value in eager code: the ops' implementations called directly (ops.direct),
    with the same saved state and backward. Under create_graph the backward is
    _EagerBackward, whose own backward is the Hessian-vector product's implementation (the
    op itself a third time: it has no backward)."""

    @staticmethod
    def forward(ctx, *inputs):
        value, saved, kept = forward(*inputs)
        _save(ctx, inputs, saved, kept)
        return value

    @staticmethod
    def backward(ctx, grad):
        return _backward(ctx, grad, backward_fn=_EagerBackward.apply if torch.is_grad_enabled() else backward)


class _EagerBackward(torch.autograd.Function):
    """_Eager's backward under create_graph: the backward's implementation, differentiable
    through the Hessian-vector product's."""

    @staticmethod
    def forward(ctx, *inputs):
        _setup_backward(ctx, inputs, None)
        return backward(*inputs)

    @staticmethod
    def backward(ctx, v_costs, v_gamma):
        return _double_backward(ctx, v_costs, v_gamma, None if torch.is_grad_enabled() else hvp)


def value(*args) -> Tensor:
    """The value [B] of soft_dtw(*args), differentiable to any order: the op itself where a
    compiler or a mode must see it, else its implementation with _Eager's autograd."""
    if not direct(args[:2]):
        return torch.ops.torchalign.soft_dtw(*args)[0]
    return _Eager.apply(*args) if needs_grad(args[:2]) else forward(*args)[0]
