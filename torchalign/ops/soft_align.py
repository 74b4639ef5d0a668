"""The soft alignment custom ops (smoothed NW / SW / semiglobal): schemas, fake impls,
autograd, and the CPU / CUDA implementations.

Three ops, each differentiable by the next:
``soft_align`` (scores, gap_open, gap_extend, q_lens, t_lens, shift, mode, linear, checkpoint)
-> (value [B], table [B, R, S, M + 1]): the value at temperature 1 and the saved state,
the M, X, Y values (S = 3; the kernels with linear gaps: S = 1, V = lse(M, X, Y)) of rows
0, K, 2K, ... (K = checkpoint; R = N // K + 1). ``table`` is not differentiable.
``soft_align_backward`` (..., table, value, grad) -> d value / d (scores, gap_open,
gap_extend) times grad: one backward sweep, edge probabilities recomputed from the table.
``soft_align_hvp`` (..., table, value, grad, the cotangents of those three) -> their
vector-Jacobian product (the Hessian-vector product, and d / d grad): the backward op's
own backward, so the first backward is differentiable (gradgradcheck). Eager calls of
torchalign.soft_align / soft_alignment run ``forward`` and ``backward`` (the first two ops'
implementations) directly, with ``_Eager``'s autograd (``value``, ``alignment``): the
dispatcher and torch.library's autograd wrapper cost ~0.4 of a training step's ~1.3 ms of
host time at 256 x 128^2 (H100 machine; benchmarks/NOTES.md, session 24).

``shift`` (None or c [B]): the DP reads scores - 2c (the one-state kernels as they load;
the other paths on a shifted copy) and the caller passes gaps + c, which lowers every path
by c per unit of i + j: the values are held as V - c (i + j) (torchalign.soft_align's
centring of long pairs), and the value as value - c (n + m), which the caller adds back.
Local and semiglobal alignments span different lengths, so the DP gives each start term
-c (i + j) of its cell (local: -c (i + j - 2) at the first aligned pair, and -c (n + m) to
the empty alignment; semiglobal: -c j in row 0) and each end term -c (n + m - i - j).
Gaps are [B, 1, 1] or [B, N, M]; ``linear``: every gap position costs gap_open
(gap_extend is not read and gets a zero gradient). ``mode``: 0 global, 1 local,
2 semiglobal. Lengths are int64 [B]; cells past them take no part.
float32 CUDA tensors (and CPU tensors with TORCHALIGN_CPU_BACKEND=triton under the
interpreter) run the Triton kernels. Linear gaps of one value per pair without
checkpoints run torchalign_kernels.soft_align_diag (forward) and soft_align_diag_bwd
(backward): one state by anti-diagonals, 4 B per cell, table [B, N + 1, 1, M + 1]
(S = 1; its own slot order). Affine gaps of one value per pair without checkpoints run
soft_align_diag3 (forward) and soft_align_diag3_bwd (backward, from the table's values
alone: no scores): three states by anti-diagonals into the row kernels' table. Everything
else runs the three-state row kernels of torchalign_kernels.soft_align (S = 3). The Hessian-vector product of the one-state table
runs soft_align_diag_bwd.hvp (a tangent sweep and a backward sweep with the adjoints'
derivatives, the tangents 4 B per cell more); of soft_align_diag3's table (affine gaps of
one value per pair) soft_align_diag3_hvp the same way, by anti-diagonals (tangents 12 B
per cell beside the table's 12); of the row kernels' table soft_align_hvp (with
soft_align's backward kernel), which reads the saved table when every row was kept
(K = 1; else recomputes it) and holds the tangents, 24 B per cell in all. float64 runs
the torch code of torchalign.cpu.soft_align on any device (the kernels compute in
float32; float64 on CUDA is correct but slow, a Python loop of small launches per row).
Working memory of the kernels besides the table and the gradients: three states, a
two-row scratch per pair and with K > 1 one segment of K rows per pair; one state, one
row of flows per strip of 128 or 256 rows (two for the Hessian-vector product: the
backward's hand-over between strips).
"""

from __future__ import annotations

import torch
from torch import Tensor

from ..cpu import soft_align as cpu
from .backend import kernels, use_kernels, on_tensor_device
from .direct import direct, needs_grad

DEVICES = ("cpu", "cuda")


def rows_saved(N: int, K: int) -> int:
    return N // K + 1


def _shaped(grad: Tensor, like: Tensor) -> Tensor:
    """A gap's gradient ([B] or [B, N, M]) in the shape of the gap tensor it belongs to."""
    return grad.reshape(like.shape) if grad.numel() == like.numel() else grad.sum_to_size(like.shape)


def _kernel_path(scores: Tensor) -> bool:
    return use_kernels(scores) and scores.dtype == torch.float32


def _one_state(scores: Tensor, gap_open: Tensor, linear: bool, checkpoint: int) -> bool:
    """Whether the one-state anti-diagonal kernels run (the fake impl asks too: the table's shape)."""
    return _kernel_path(scores) and linear and checkpoint == 1 and gap_open.shape[1:] == (1, 1)


def _three_state_diag(scores: Tensor, gap_open: Tensor, gap_extend: Tensor, linear: bool, checkpoint: int) -> bool:
    """Whether the three-state forward runs by anti-diagonals (affine gaps of one value per pair,
    every row saved: the row kernels' table, which their backward reads)."""
    return (_kernel_path(scores) and not linear and checkpoint == 1 and gap_open.shape[1:] == (1, 1)
            and gap_extend.shape[1:] == (1, 1))


def _shifted(scores: Tensor, shift: Tensor | None) -> Tensor:
    """The scores the DP reads: less 2 shift[b] (paths without the one-state kernels, which
    subtract it as they load)."""
    return scores if shift is None else scores - 2 * shift.to(scores.dtype)[:, None, None]


def _problem(scores, gap_open, gap_extend, q_lens, t_lens, shift, mode, linear):
    return cpu.Problem(_shifted(scores, shift), gap_open, gap_extend, mode, linear, q_lens, t_lens, shift)


@on_tensor_device
def forward(scores: Tensor, gap_open: Tensor, gap_extend: Tensor, q_lens: Tensor, t_lens: Tensor,
            shift: Tensor | None, mode: int, linear: bool, checkpoint: int) -> tuple[Tensor, Tensor]:
    if _one_state(scores, gap_open, linear, checkpoint):
        return kernels("soft_align_diag").forward(scores, gap_open, q_lens, t_lens, mode, shift=shift)
    if _three_state_diag(scores, gap_open, gap_extend, linear, checkpoint):
        return kernels("soft_align_diag3").forward(_shifted(scores, shift), gap_open, gap_extend, q_lens, t_lens, mode)
    if _kernel_path(scores):
        return kernels("soft_align").forward(_shifted(scores, shift), gap_open, gap_extend, q_lens, t_lens, mode,
                                             linear, checkpoint)
    return cpu.forward(_problem(scores, gap_open, gap_extend, q_lens, t_lens, shift, mode, linear), checkpoint)


soft_align = torch.library.custom_op("torchalign::soft_align", forward, mutates_args=(), device_types=DEVICES)


@soft_align.register_fake
def _(scores, gap_open, gap_extend, q_lens, t_lens, shift, mode, linear, checkpoint):
    B, N, M = scores.shape
    S = 1 if _one_state(scores, gap_open, linear, checkpoint) else 3
    return scores.new_empty(B), scores.new_empty(B, rows_saved(N, checkpoint), S, M + 1)


@on_tensor_device
def backward(scores: Tensor, gap_open: Tensor, gap_extend: Tensor, q_lens: Tensor, t_lens: Tensor,
             shift: Tensor | None, table: Tensor, value: Tensor, grad: Tensor, mode: int, linear: bool,
             checkpoint: int) -> tuple[Tensor, Tensor, Tensor]:
    return _backward_impl(scores, gap_open, gap_extend, q_lens, t_lens, shift, table, value, grad, mode, linear,
                          checkpoint)


@on_tensor_device
def _backward_direct(*args):
    """backward() for eager autograd: None for the one-state kernels' gap_extend gradient (linear
    gaps: zero), which autograd takes as zero without a fill on the step's host path."""
    return _backward_impl(*args, zero_extend=False)


def _backward_impl(scores, gap_open, gap_extend, q_lens, t_lens, shift, table, value, grad, mode, linear, checkpoint,
                   zero_extend=True):
    if _kernel_path(scores) and table.shape[2] == 1:
        gs, dg = kernels("soft_align_diag_bwd").backward(scores, gap_open, q_lens, t_lens, table, value, grad, mode,
                                                         shift=shift)
        dg = dg.view(gap_open.shape)
        return (gs, dg if dg.dtype == gap_open.dtype else dg.to(gap_open.dtype),
                torch.zeros_like(gap_extend) if zero_extend else None)
    if _three_state_diag(scores, gap_open, gap_extend, linear, checkpoint):  # (no scores: the table's values suffice)
        gs, go, ge = kernels("soft_align_diag3_bwd").backward(gap_open, gap_extend, q_lens, t_lens, table, value, grad,
                                                              mode)
    elif _kernel_path(scores):
        gs, go, ge = kernels("soft_align").backward(_shifted(scores, shift), gap_open, gap_extend, q_lens, t_lens,
                                                    table, value, grad, mode, linear, checkpoint)
    else:
        P = _problem(scores, gap_open, gap_extend, q_lens, t_lens, shift, mode, linear)
        gs, go, ge = cpu.backward(P, table, value, grad, checkpoint)
    return gs, _shaped(go, gap_open), _shaped(ge, gap_extend)


soft_align_backward = torch.library.custom_op("torchalign::soft_align_backward", backward, mutates_args=(),
                                              device_types=DEVICES)


@soft_align_backward.register_fake
def _(scores, gap_open, gap_extend, q_lens, t_lens, shift, table, value, grad, mode, linear, checkpoint):
    return torch.empty_like(scores), torch.empty_like(gap_open), torch.empty_like(gap_extend)


CENTRE_BLOCK = 128  # the side of the leading block whose value estimates a centring's growth


def leading_block(q_lens, t_lens, K: int = CENTRE_BLOCK):
    """The lengths of each pair's leading block: its shape scaled to at most K a side (int64
    tensors [B], or two ints for pairs that all have one shape)."""
    if isinstance(q_lens, int):
        side = max(q_lens, t_lens, 1)
        return tuple(min(L, (L * K + side - 1) // side) for L in (q_lens, t_lens))
    side = torch.maximum(q_lens, t_lens).clamp_min(1)
    n0 = torch.minimum(q_lens, (q_lens * K + side - 1) // side)  # ceil(n K / side), at most n
    return n0, torch.minimum(t_lens, (t_lens * K + side - 1) // side)


def _tangent_centre(scores, gap_open, gap_extend, q_lens, t_lens, shift, z_scores, z_open, z_extend, mode, linear):
    """dc [B], the growth of the tangents dV along z per unit of i + j, from the leading
    block's d value = <P, z_scores> + d value / d gaps z_gaps (one forward and one
    backward of the block). As the centring of the values: z_scores - 2 dc and z_gaps + dc
    lower every global alignment's derivative by dc (n + m) (local and semiglobal starts
    and ends take their share of dc as of c), so the tangent table holds dV - dc (i + j),
    small numbers, and the outputs are those of the plain tangents (global: the derivative
    of the value gets dc (n + m) back). Only a drift the block shows clearly is
    taken (|d| over 4 times sqrt(sum (P z)^2), its spread were z noise): a direction of
    random signs has none, and a noisy estimate would add a growth of its own (1,100^2
    float32, z unit normal: 1.6e-5 -> 8.5e-5 off float64 with it; z = the scores, which
    drift: 3.3e-4 -> 1.6e-5)."""
    n0, m0 = leading_block(q_lens, t_lens)
    x = scores[:, :CENTRE_BLOCK, :CENTRE_BLOCK]
    value, table = forward(x, gap_open, gap_extend, n0, m0, shift, mode, linear, 1)
    P, dgo, dge = backward(x, gap_open, gap_extend, n0, m0, shift, table, value, torch.ones_like(value), mode,
                           linear, 1)
    pz = P * z_scores[:, :CENTRE_BLOCK, :CENTRE_BLOCK]
    d = pz.sum((1, 2)) + (dgo * z_open + dge * z_extend).reshape(-1)
    clear = d.abs() > 4 * pz.square().sum((1, 2)).sqrt()
    return torch.where(clear, d / (n0 + m0).clamp_min(1).to(d.dtype), 0)


@on_tensor_device
def hvp(scores: Tensor, gap_open: Tensor, gap_extend: Tensor, q_lens: Tensor, t_lens: Tensor, shift: Tensor | None,
        table: Tensor, value: Tensor, grad: Tensor, z_scores: Tensor, z_open: Tensor, z_extend: Tensor, mode: int,
        linear: bool, checkpoint: int) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    dc = None  # a centred problem's tangents are centred too (_tangent_centre; alone they gain little)
    if shift is not None:
        dc = _tangent_centre(scores, gap_open, gap_extend, q_lens, t_lens, shift, z_scores, z_open, z_extend, mode,
                             linear)
        z_open = z_open + dc.to(z_open.dtype)[:, None, None]
        z_extend = z_extend + dc.to(z_extend.dtype)[:, None, None]
    if _kernel_path(scores) and table.shape[2] == 1:  # the one-state kernels' table
        gs, dg, dgrad = kernels("soft_align_diag_bwd").hvp(scores, gap_open.reshape(-1), q_lens, t_lens, table,
                                                           value, grad, z_scores, z_open.reshape(-1),
                                                           mode, shift=shift, tangent_shift=dc)
        go, ge = dg.reshape(gap_open.shape).to(gap_open.dtype), torch.zeros_like(gap_extend)
    else:
        z_scores = _shifted(z_scores, dc)
        if _three_state_diag(scores, gap_open, gap_extend, linear, checkpoint):  # (no scores: the tables suffice)
            gs, go, ge, dgrad = kernels("soft_align_diag3_hvp").hvp(gap_open, gap_extend, q_lens, t_lens, table,
                                                                    value, grad, z_scores, z_open, z_extend, mode)
        elif _kernel_path(scores):  # (the tangent sweep reads every row: a table with checkpoints is recomputed)
            gs, go, ge, dgrad = kernels("soft_align_hvp").hvp(_shifted(scores, shift), gap_open, gap_extend, q_lens,
                                                              t_lens, value, grad, z_scores, z_open, z_extend, mode,
                                                              linear, table=table)
        else:
            P = _problem(scores, gap_open, gap_extend, q_lens, t_lens, shift, mode, linear)
            gs, go, ge, dgrad = cpu.hvp(P, table, value, grad, (z_scores, z_open, z_extend, dc), checkpoint)
        go, ge = _shaped(go, gap_open), _shaped(ge, gap_extend)
    if dc is not None:
        dgrad = dgrad + dc.to(dgrad.dtype) * (q_lens + t_lens).to(dgrad.dtype)
    return gs, go, ge, dgrad


soft_align_hvp = torch.library.custom_op("torchalign::soft_align_hvp", hvp, mutates_args=(), device_types=DEVICES)


@soft_align_hvp.register_fake
def _(scores, gap_open, gap_extend, q_lens, t_lens, shift, table, value, grad, z_scores, z_open, z_extend, mode,
      linear, checkpoint):
    return (torch.empty_like(scores), torch.empty_like(gap_open), torch.empty_like(gap_extend),
            torch.empty_like(value))


def _save(ctx, inputs, *extra):
    """The inputs' tensors and ``extra`` saved for the backward; mode, linear, checkpoint as ctx.args."""
    *tensors, mode, linear, checkpoint = inputs
    ctx.save_for_backward(*tensors, *extra)
    ctx.args = (mode, linear, checkpoint)


def _setup(ctx, inputs, output):
    value, table = output
    ctx.mark_non_differentiable(table)
    ctx.set_materialize_grads(False)  # (else every backward allocated and zeroed a table-sized gradient for it)
    _save(ctx, inputs, table, value)


def _backward(ctx, grad_value, grad_table, backward_fn=None):
    """``backward_fn``: _EagerBackward.apply or the backward's implementation (eager code), else the op."""
    if grad_value is None:
        return None, None, None, None, None, None, None, None, None
    *saved, value = ctx.saved_tensors
    # value detached: the Hessian-vector product already holds the whole derivative through
    # it (soft_align_hvp returns none for it); an edge back to the forward would only run a
    # second first-order backward on zeros in every double backward
    if torch.is_grad_enabled():
        value = value.detach()
    gs, go, ge = (backward_fn or torch.ops.torchalign.soft_align_backward)(*saved, value, grad_value, *ctx.args)
    return gs, go, ge, None, None, None, None, None, None


soft_align.register_autograd(_backward, setup_context=_setup)


def _setup_bwd(ctx, inputs, output):
    ctx.set_materialize_grads(False)  # (_backward_bwd makes the zeros it needs)
    _save(ctx, inputs)


def _backward_bwd(ctx, z_scores, z_open, z_extend, product=None):
    """``product``: the Hessian-vector product's implementation (eager code), else the op."""
    scores, gap_open, gap_extend, q_lens, t_lens, shift, table, value, grad = ctx.saved_tensors
    z = [torch.zeros_like(x) if g is None else g for g, x in ((z_scores, scores), (z_open, gap_open),
                                                              (z_extend, gap_extend))]
    gs, go, ge, dgrad = (product or torch.ops.torchalign.soft_align_hvp)(scores, gap_open, gap_extend, q_lens, t_lens,
                                                                         shift, table, value, grad, *z, *ctx.args)
    return gs, go, ge, None, None, None, None, None, dgrad, None, None, None


soft_align_backward.register_autograd(_backward_bwd, setup_context=_setup_bwd)


class _Eager(torch.autograd.Function):
    """soft_align's value in eager code: the ops' implementations called directly, with the
    same saved state and backward, without the dispatcher and torch.library's autograd
    wrapper. Under create_graph the backward is _EagerBackward, itself differentiable."""

    @staticmethod
    def forward(ctx, *inputs):
        value, table = forward(*inputs)
        _save(ctx, inputs, table, value)
        return value

    @staticmethod
    def backward(ctx, grad):  # (create_graph: a backward whose own backward is the product)
        return _backward(ctx, grad, None, _EagerBackward.apply if torch.is_grad_enabled() else _backward_direct)


class _EagerBackward(torch.autograd.Function):
    """_Eager's backward under create_graph: the backward op's implementation, and for its own
    backward the Hessian-vector product's (the op itself a third time: it has no backward)."""

    @staticmethod
    def forward(ctx, *inputs):
        _setup_bwd(ctx, inputs, None)
        return backward(*inputs)

    @staticmethod
    def backward(ctx, z_scores, z_open, z_extend):
        return _backward_bwd(ctx, z_scores, z_open, z_extend, None if torch.is_grad_enabled() else hvp)


def value(*args) -> Tensor:
    """The value [B] of soft_align(*args), differentiable to any order: the op itself where a
    compiler or a mode must see it, else its implementation with _Eager's autograd."""
    if not direct(args[:3]):
        return torch.ops.torchalign.soft_align(*args)[0]
    return _Eager.apply(*args) if needs_grad(args[:3]) else forward(*args)[0]


def alignment(*args) -> tuple[Tensor, Tensor]:
    """(value [B], P [B, N, M]) of soft_align(*args): one forward and one backward sweep, through
    the ops where P must be differentiable or a compiler or mode must see them."""
    ops = torch.ops.torchalign
    fwd, bwd = ((forward, _backward_direct) if direct(args[:3]) and not needs_grad(args[:3])
                else (ops.soft_align, ops.soft_align_backward))
    value, table = fwd(*args)
    return value, bwd(*args[:6], table, value, torch.ones_like(value), *args[6:])[0]
