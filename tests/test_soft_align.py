"""ta.soft_align / ta.soft_alignment on the CPU: the float64 reference and the enumeration of
alignments, gradients (gradcheck, gradgradcheck, finite differences), the T -> 0 limit
against ta.align_score, numerics, checkpoints, torch.compile, errors."""

import math
import sys
import warnings

import pytest
import torch
from torch.autograd import gradcheck, gradgradcheck

import torchalign as ta

from . import reference_soft_align as ref
from .conftest import read_fasta

MODES = ("global", "local", "semiglobal")


@pytest.mark.parametrize("mode", MODES)
def test_each_alignment_counted_once(mode):
    """The DP (reference and op) equals the sum over every alignment written out, on all
    shapes up to 3 x 3 (empty sides too), linear, affine and position-specific gaps."""
    g = torch.Generator().manual_seed(1)
    for n in range(4):
        for m in range(4):
            s = torch.randn(1, n, m, generator=g, dtype=torch.float64) * 2
            gaps = [(1.3, 0.4), (0.7, None), (-0.3, 0.2)]
            if n and m:
                gaps.append((torch.rand(1, n, m, generator=g, dtype=torch.float64) + 0.5,
                             torch.rand(1, n, m, generator=g, dtype=torch.float64)))
            for go, ge in gaps:
                a = lambda x: x[0].numpy() if isinstance(x, torch.Tensor) else x  # noqa: E731
                want = ref.soft_align_enum(s[0].numpy(), a(go), a(ge), mode, 0.8)
                assert ref.soft_align_dp(s[0].numpy(), a(go), a(ge), mode, 0.8) == pytest.approx(want, abs=1e-12)
                got = ta.soft_align(s, go, ge, mode=mode, temperature=0.8)
                assert got.item() == pytest.approx(want, abs=1e-10), (n, m, go, ge)


def test_enumeration_counts():
    """The enumeration itself: global alignments of 2 x 2 are the 13 Delannoy paths; local
    ones of 1 x 1 are the empty one and the pair."""
    import numpy as np

    assert len(ref.alignment_scores(np.zeros((2, 2)), 1.0, None, "global")) == 13
    assert sorted(ref.alignment_scores(np.full((1, 1), 5.0), 1.0, None, "local")) == [0.0, 5.0]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("gaps", ["affine", "linear", "position"])
def test_padded_batch_matches_reference(mode, gaps):
    s, go, ge, lengths = ref.random_batch(6, 9, 7, torch.float64, seed=hash((mode, gaps)) % 1000,
                                          full_gaps=gaps == "position", linear=gaps == "linear")
    T = torch.tensor([0.5, 1.0, 2.0, 0.3, 1.5, 0.9], dtype=torch.float64)
    want = torch.tensor(ref.reference_values(s, go, ge, lengths, mode, T), dtype=torch.float64)
    got = ta.soft_align(s, go, ge, mode=mode, temperature=T, lengths=lengths)
    torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-9)
    got32 = ta.soft_align(s.float(), go.float(), None if ge is None else ge.float(), mode=mode, temperature=T.float(),
                          lengths=lengths)
    assert got32.dtype == torch.float32
    torch.testing.assert_close(got32.double(), want, rtol=1e-5, atol=1e-5)


def test_half_inputs_compute_in_float32():
    s, go, ge, lengths = ref.random_batch(3, 5, 6, torch.float64, seed=3)
    for dt in (torch.float16, torch.bfloat16):
        x = s.to(dt).requires_grad_()
        v = ta.soft_align(x, 1.0, 0.5, lengths=lengths)
        assert v.dtype == torch.float32
        want = ta.soft_align(x.detach().double(), 1.0, 0.5, lengths=lengths)
        torch.testing.assert_close(v.double(), want, rtol=1e-5, atol=1e-5)
        v.sum().backward()
        assert x.grad.dtype == dt and torch.isfinite(x.grad.float()).all()


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("gaps", ["affine", "linear", "position"])
@pytest.mark.parametrize("checkpoint", [None, 2])
def test_gradcheck_and_gradgradcheck(mode, gaps, checkpoint):
    s, go, ge, lengths = ref.random_batch(2, 3, 4, torch.float64, seed=7, full_gaps=gaps == "position",
                                          linear=gaps == "linear")
    T = torch.tensor([0.7, 1.3], dtype=torch.float64)
    args = [x.requires_grad_() for x in (s, go, ge, T) if x is not None]

    def f(s, go, *rest):
        ge, T = (None, rest[0]) if len(rest) == 1 else rest
        return ta.soft_align(s, go, ge, mode=mode, temperature=T, lengths=lengths, checkpoint=checkpoint)

    assert gradcheck(f, args)
    assert gradgradcheck(f, args)


@pytest.mark.parametrize("mode", MODES)
def test_gap_and_temperature_gradients_equal_finite_differences(mode):
    s, go, ge, lengths = ref.random_batch(3, 6, 5, torch.float64, seed=11)
    T = torch.tensor([0.6, 1.0, 1.7], dtype=torch.float64)
    go, ge, T = go.requires_grad_(), ge.requires_grad_(), T.requires_grad_()
    ta.soft_align(s, go, ge, mode=mode, temperature=T, lengths=lengths).sum().backward()
    h = 1e-6
    for x, name in ((go, "open"), (ge, "extend"), (T, "temperature")):
        for b in range(3):
            def at(delta, x=x, b=b):
                vals = {"open": go.detach().clone(), "extend": ge.detach().clone(), "temperature": T.detach().clone()}
                vals[name][b] += delta
                return ta.soft_align(s, vals["open"], vals["extend"], mode=mode, temperature=vals["temperature"],
                                     lengths=lengths)[b].item()
            fd = (at(h) - at(-h)) / (2 * h)
            assert x.grad[b].item() == pytest.approx(fd, abs=1e-7), (name, b)
    # the temperature's gradient is (value - expected score) / T: check the identity on pair 0
    v, P = ta.soft_alignment(s, go.detach(), ge.detach(), mode=mode, temperature=T.detach(), lengths=lengths)
    assert torch.isfinite(v).all() and (T.grad * T.detach() <= v.detach() + 1e-9).all() or mode != "local"


@pytest.mark.parametrize("mode", MODES)
def test_soft_alignment_is_the_gradient(mode):
    s, go, ge, lengths = ref.random_batch(4, 7, 8, torch.float64, seed=5)
    x = s.clone().requires_grad_()
    v = ta.soft_align(x, go, ge, mode=mode, lengths=lengths, temperature=0.7)
    (g,) = torch.autograd.grad(v.sum(), x)
    v2, P = ta.soft_alignment(s, go, ge, mode=mode, lengths=lengths, temperature=0.7)
    torch.testing.assert_close(v2, v.detach())
    torch.testing.assert_close(P, g, rtol=0, atol=1e-12)
    assert (P >= 0).all() and (P <= 1 + 1e-12).all()
    for b in range(4):  # padding takes no part; each query residue aligns at most once
        n, m = int(lengths[0][b]), int(lengths[1][b])
        assert P[b, n:].abs().sum() == 0 and P[b, :, m:].abs().sum() == 0
        assert (P[b].sum(1) <= 1 + 1e-12).all() and (P[b].sum(0) <= 1 + 1e-12).all()


def test_loss_on_the_expected_alignment_backpropagates():
    """A loss on P (DeepBLAST's) differentiates through the Hessian-vector product."""
    s, go, ge, lengths = ref.random_batch(2, 4, 3, torch.float64, seed=2)
    target = torch.rand(2, 4, 3, dtype=torch.float64)
    args = (s.requires_grad_(), go.requires_grad_(), ge.requires_grad_())
    assert gradcheck(lambda s, go, ge: (ta.soft_alignment(s, go, ge, mode="local", lengths=lengths)[1] - target)
                     .pow(2).sum(), args)


@pytest.mark.parametrize("mode", MODES)
def test_double_backward_runs_one_sweep_of_each(monkeypatch, mode):
    """A loss on the gradient runs the first-order backward once and the Hessian-vector
    product once: the backward's use of the value adds no second first-order sweep
    (counted, and the product still equals finite differences of the gradient)."""
    from torchalign.cpu import soft_align as cpu

    calls = {"backward": 0, "hvp": 0}
    for name in calls:
        def counted(*a, _f=getattr(cpu, name), _n=name, **k):
            calls[_n] += 1
            return _f(*a, **k)
        monkeypatch.setattr(cpu, name, counted)
    s, go, _, lengths = ref.random_batch(2, 5, 4, torch.float64, seed=4, linear=True)
    x = s.clone().requires_grad_()
    (g,) = torch.autograd.grad(ta.soft_align(x, go, mode=mode, lengths=lengths).sum(), x, create_graph=True)
    (hz,) = torch.autograd.grad(g, x, grad_outputs=s)
    assert calls == {"backward": 1, "hvp": 1}
    eps = 1e-6
    fd = []
    for sign in (1, -1):
        y = (s + sign * eps * s).requires_grad_()
        fd.append(torch.autograd.grad(ta.soft_align(y, go, mode=mode, lengths=lengths).sum(), y)[0])
    torch.testing.assert_close(hz, (fd[0] - fd[1]) / (2 * eps), rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("mode, linear, checkpoint", [("global", True, None), ("local", False, None),
                                                       ("semiglobal", False, 2)])
def test_eager_route_equals_the_ops(monkeypatch, mode, linear, checkpoint):
    """Eager calls run the ops' implementations directly (ops.soft_align._Eager and, under
    create_graph, _EagerBackward; no dispatcher): the values, the three gradients, the
    Hessian-vector products and soft_alignment's P are those of the ops' own autograd, bit
    for bit."""
    from torchalign.ops import soft_align as ops

    s, go, ge, lengths = ref.random_batch(3, 6, 5, torch.float64, seed=12)
    z = torch.randn_like(s)
    outs = {}
    for direct in (True, False):
        monkeypatch.setattr(ops, "direct", lambda tensors, _d=direct: _d)
        x, o, e = (y.clone().requires_grad_() for y in (s, go, ge))
        v = ta.soft_align(x, o, None if linear else e, mode=mode, lengths=lengths, checkpoint=checkpoint)
        assert (type(v.grad_fn).__name__ == "_EagerBackward") == direct
        wrt = (x, o) if linear else (x, o, e)
        grads = torch.autograd.grad(v.sum(), wrt, create_graph=True)
        assert (type(grads[0].grad_fn).__name__ == "_EagerBackwardBackward") == direct
        hvp = torch.autograd.grad((grads[0] * z).sum() + grads[1].sum(), wrt)
        with torch.no_grad():
            P = ta.soft_alignment(s, go, None if linear else ge, mode=mode, lengths=lengths, checkpoint=checkpoint)[1]
        outs[direct] = (v, *grads, *hvp, P)
    for a, b in zip(outs[True], outs[False]):
        assert torch.equal(a, b)
    torch.testing.assert_close(outs[True][-1], outs[True][1])  # P is the gradient


def test_tracing_and_fake_tensors_see_the_op():
    """Under a dispatch mode (make_fx's tracing, fake tensors) or torch.jit.trace soft_align
    calls the op, not its implementation: the graphs hold torchalign.soft_align and fake
    scores give a fake value."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.proxy_tensor import make_fx

    s = torch.randn(2, 5, 4, requires_grad=True)
    graph = make_fx(lambda x: torch.autograd.grad(ta.soft_align(x, 1.0).sum(), x)[0])(s)
    targets = {str(n.target) for n in graph.graph.nodes}
    ops = {"torchalign.soft_align.default", "torchalign.soft_align_backward.default"}
    assert ops <= targets, targets
    torch.testing.assert_close(graph(s), ta.soft_alignment(s.detach(), 1.0)[1])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (torch.jit.trace's deprecation)
        traced = torch.jit.trace(lambda x: ta.soft_align(x, 1.0), (s.detach(),), check_trace=False)
    assert "torchalign::soft_align" in str(traced.graph)
    with FakeTensorMode() as mode:
        fake = mode.from_tensor(s)
        assert ta.soft_align(fake, 1.0).shape == (2,)


def test_backward_makes_no_gradient_for_the_saved_table():
    """The table output is not differentiable: the backward gets no zero-filled table-sized
    gradient for it (it did: an extra table of memory and a memset in every backward). A
    direct call of the backward op is the baseline for what the sweep itself allocates."""
    from .dispatch_log import OpShapes

    B, N, M = 2, 5, 6
    x = torch.randn(B, N, M, requires_grad=True)
    v = ta.soft_align(x, 1.0, 0.5)
    with OpShapes() as through_autograd:
        v.sum().backward()
    args = (x.detach(), torch.full((B, 1, 1), 1.0), torch.full((B, 1, 1), 0.5), torch.full((B,), N), torch.full((B,), M))
    value, table = torch.ops.torchalign.soft_align(*args, None, 0, False, 1)
    with OpShapes() as direct:
        torch.ops.torchalign.soft_align_backward(*args, None, table, value, torch.ones(B), 0, False, 1)
    assert through_autograd.zeros(table.shape) == direct.zeros(table.shape), through_autograd.ops


def test_padding_takes_no_part():
    s, go, ge, lengths = ref.random_batch(4, 6, 6, torch.float32, seed=9)
    dirty = s.clone()
    for b in range(4):
        dirty[b, int(lengths[0][b]):] = float("nan")
        dirty[b, :, int(lengths[1][b]):] = float("inf")
    x = dirty.requires_grad_()
    for mode in MODES:
        v = ta.soft_align(x, go, ge, mode=mode, lengths=lengths)
        torch.testing.assert_close(v, ta.soft_align(s, go, ge, mode=mode, lengths=lengths))
        (g,) = torch.autograd.grad(v.sum(), x)
        inside = ~(torch.isnan(dirty) | torch.isinf(dirty))
        assert torch.isfinite(g).all() and (g[~inside] == 0).all()


def _proteins(k, n_max):
    prot = [s for _, s in read_fasta("proteome_HG003687.fa")]
    return [p[:n_max] for p in prot[:k]]


@pytest.mark.parametrize("mode", MODES)
def test_zero_temperature_limit_is_align_score(mode):
    """Integer BLOSUM62 scores of bundled proteins, gaps 11 / 1: the value lies in
    [best, best + T log(number of alignments)] with best = ta.align_score's score."""
    prot = _proteins(6, 60)
    pairs = [(prot[i], prot[i + 1][5:45]) for i in range(0, 6, 2)] + [(prot[0][:40], prot[0][3:50])]
    for T in (1e-2, 1e-3):
        for q, t in pairs:
            s, sc = ref.one_hot_blosum(q, t)
            best = ta.align_score([q], [t], sc, mode).score.item()
            v = ta.soft_align(s[None], float(sc.gap_open), float(sc.gap_extend), mode=mode, temperature=T).item()
            assert best - 1e-9 <= v <= best + T * (len(q) + len(t) + 1) * math.log(3), (q, t, best, v)
            v32 = ta.soft_align(s[None].float(), float(sc.gap_open), float(sc.gap_extend), mode=mode,
                                temperature=T).item()
            assert v32 == pytest.approx(v, rel=1e-5)


@pytest.mark.parametrize("mode", MODES)
def test_no_nan_or_inf_at_extremes(mode):
    s, go, ge, lengths = ref.random_batch(3, 12, 10, torch.float32, seed=4, scale=1e4)
    for T in (1e-3, 1.0, 1e3):
        x = s.clone().requires_grad_()
        o, e = go.clone().requires_grad_(), ge.clone().requires_grad_()
        v = ta.soft_align(x, o, e, mode=mode, temperature=T, lengths=lengths)
        v.sum().backward()
        for t in (v, x.grad, o.grad, e.grad):
            assert torch.isfinite(t).all(), T
        assert (x.grad >= 0).all() and (x.grad <= 1 + 1e-5).all()


@pytest.mark.parametrize("mode", MODES)
def test_checkpoints_give_the_same_numbers(mode):
    s, go, ge, lengths = ref.random_batch(3, 11, 9, torch.float64, seed=12, full_gaps=True)
    outs = []
    for ck in (None, 1, 3, 4, "auto", 100):
        x, o, e = (y.clone().requires_grad_() for y in (s, go, ge))
        v = ta.soft_align(x, o, e, mode=mode, lengths=lengths, checkpoint=ck)
        v.sum().backward()
        outs.append((v.detach(), x.grad, o.grad, e.grad))
    for other in outs[1:]:
        for a, b in zip(outs[0], other):
            torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12)


def test_checkpoint_saves_every_kth_row():
    s = torch.randn(2, 100, 30)
    go, ge = torch.ones(2, 1, 1), torch.full((2, 1, 1), 0.5)
    lens = (torch.full((2,), 100), torch.full((2,), 30))
    full = torch.ops.torchalign.soft_align(s, go, ge, *lens, None, 0, False, 1)[1]
    ck = torch.ops.torchalign.soft_align(s, go, ge, *lens, None, 0, False, 10)[1]
    assert full.shape == (2, 101, 3, 31) and ck.shape == (2, 11, 3, 31)
    torch.testing.assert_close(ck, full[:, ::10])


@pytest.mark.parametrize("mode, linear, checkpoint", [("global", False, None), ("local", False, None),
                                                       ("semiglobal", True, 2)])
def test_compiled_graph_equals_eager(mode, linear, checkpoint):
    s, go, ge, lengths = ref.random_batch(3, 6, 7, torch.float32, seed=6)

    def step(x, o, e):
        v, P = ta.soft_alignment(x, o, None if linear else e, mode=mode, lengths=lengths, temperature=0.5,
                                 checkpoint=checkpoint)
        return v.sum() + (P * P).sum() + (0 * e.sum() if linear else 0)

    outs = []
    for fn in (step, torch.compile(step, fullgraph=True, backend="aot_eager"), torch.compile(step, fullgraph=True)):
        x, o, e = (y.clone().requires_grad_() for y in (s, go, ge))
        loss = fn(x, o, e)
        loss.backward()
        outs.append((loss.detach(), x.grad, o.grad, e.grad))
    for other in outs[1:]:
        for a, b in zip(outs[0], other):
            torch.testing.assert_close(a, b, rtol=1e-6, atol=1e-6)


def test_opcheck():
    s, go, ge, lengths = ref.random_batch(2, 4, 5, torch.float64, seed=8)
    args = (s.requires_grad_(), go.reshape(2, 1, 1).requires_grad_(), ge.reshape(2, 1, 1).requires_grad_(), *lengths,
            None, 1, False, 2)
    torch.library.opcheck(torch.ops.torchalign.soft_align.default, args)


def test_long_unequal_pair_cpu():
    """No length limit: 1,200 x 700 in float32 equals float64 (values rel 1e-5, P abs 1e-3), with checkpoints."""
    g = torch.Generator().manual_seed(0)
    s = torch.randn(2, 1200, 700, generator=g)
    x = s.clone().requires_grad_()
    v = ta.soft_align(x, 2.0, 0.5, mode="local", checkpoint="auto")
    v.sum().backward()
    v64, P = ta.soft_alignment(s.double(), 2.0, 0.5, mode="local", checkpoint="auto")
    torch.testing.assert_close(v.double(), v64, rtol=1e-5, atol=0)
    torch.testing.assert_close(x.grad.double(), P, rtol=0, atol=1e-3)  # the bound for float32


def test_errors():
    s = torch.randn(2, 3, 4)
    with pytest.raises(ValueError, match="scores: expected \\[B, N, M\\]"):
        ta.soft_align(s[0], 1.0)
    with pytest.raises(TypeError, match="scores: expected a float tensor"):
        ta.soft_align(s.long(), 1.0)
    with pytest.raises(ValueError, match="mode: expected one of"):
        ta.soft_align(s, 1.0, mode="glocal")
    with pytest.raises(ValueError, match="gap_open: .* does not broadcast"):
        ta.soft_align(s, torch.ones(3))
    with pytest.raises(ValueError, match="gap_extend: .* does not broadcast"):
        ta.soft_align(s, 1.0, torch.ones(2, 5, 4))
    with pytest.raises(ValueError, match="temperature: must be > 0"):
        ta.soft_align(s, 1.0, temperature=0.0)
    with pytest.raises(ValueError, match="lengths: query lengths must lie in"):
        ta.soft_align(s, 1.0, lengths=([4, 1], [1, 1]))
    with pytest.raises(TypeError, match="lengths: expected"):
        ta.soft_align(s, 1.0, lengths=[1, 2, 3])
    with pytest.raises(ValueError, match="checkpoint: expected"):
        ta.soft_align(s, 1.0, checkpoint=0)


def test_docstring_example():
    import doctest
    import importlib

    result = doctest.testmod(importlib.import_module("torchalign.soft_align"))
    assert result.attempted > 0 and result.failed == 0


def test_mixed_gap_shapes():
    """A position-specific open with one extend per pair (and the reverse) reads each as given."""
    s, go, ge, lengths = ref.random_batch(3, 5, 4, torch.float64, seed=13, full_gaps=True)
    for o, e in ((go, ge[:, 0, 0]), (go[:, 0, 0], ge)):
        want = torch.tensor(ref.reference_values(s, o, e, lengths, "global"), dtype=torch.float64)
        torch.testing.assert_close(ta.soft_align(s, o, e, lengths=lengths), want, rtol=1e-12, atol=1e-10)
        args = (s.clone().requires_grad_(), o.clone().requires_grad_(), e.clone().requires_grad_())
        assert gradcheck(lambda s, o, e: ta.soft_align(s, o, e, mode="local", lengths=lengths), args)


def test_empty_batches_and_sides():
    """No pairs, or empty sides in the tensor's shape: global charges the one gap, local and
    semiglobal (free target ends) score 0."""
    for shape, want in (((0, 3, 4), []), ((2, 0, 4), [-2.5] * 2), ((2, 3, 0), [-2.0] * 2), ((2, 0, 0), [0.0] * 2)):
        x = torch.randn(*shape, requires_grad=True)
        v = ta.soft_align(x, 1.0, 0.5, mode="global")
        v.sum().backward()
        assert v.tolist() == want and x.grad.shape == shape
        assert ta.soft_align(x, 1.0, 0.5, mode="local").tolist() == [0.0] * shape[0]


@pytest.mark.parametrize("mode", [0, 1, 2])
@pytest.mark.parametrize("drift", [0.0, 1.0])
def test_centring_changes_no_output(drift, mode):
    """The ops with a shift c (scores read less 2c; the caller adds c to the gaps): every
    global alignment scores c (n + m) less, so the value drops by exactly that; local and
    semiglobal ones differ in span, and the DP gives their starts and ends the difference
    to n + m back, so their value drops by c (n + m) too. The gradients, gap gradients and
    Hessian-vector product are the same (float64, 1e-9). With a direction z that drifts (drift 1: every
    cell's z near 3, and a gap term) the product centres its tangents as well (a nonzero
    dc); one of random signs is left as it is."""
    B, N, M = 3, 30, 36
    s, go, _, (q, t) = ref.random_batch(B, N, M, torch.float64, seed=21, linear=True)
    s = s + 1  # (local alignments then span most of a pair: its drift is clear too)
    go = go.reshape(B, 1, 1)
    c = torch.tensor([0.7, -1.3, 2.9], dtype=torch.float64)
    z = 3 * drift + torch.randn(B, N, M, dtype=torch.float64, generator=torch.Generator().manual_seed(1)) / 2
    zo = drift * torch.randn(B, 1, 1, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
    grad = torch.tensor([0.5, 1.0, 1.5], dtype=torch.float64)
    out = []
    for shift, gap in ((None, go), (c, go + c[:, None, None])):
        value, table = torch.ops.torchalign.soft_align(s, gap, gap, q, t, shift, mode, True, 1)
        first = torch.ops.torchalign.soft_align_backward(s, gap, gap, q, t, shift, table, value, grad, mode, True, 1)
        second = torch.ops.torchalign.soft_align_hvp(s, gap, gap, q, t, shift, table, value, grad, z, zo, zo * 0,
                                                     mode, True, 1)
        out.append((value, *first[:2], *second))
    gc = go + c[:, None, None]
    dc = sys.modules["torchalign.ops.soft_align"]._tangent_centre(s, gc, gc, q, t, c, z, zo, zo * 0, mode, True)
    assert (dc[:2] != 0).all() if drift else (dc == 0).all(), dc  # (pair 2 is 0 x 36)
    torch.testing.assert_close(out[1][0] + c * (q + t), out[0][0], rtol=1e-12, atol=1e-9)
    for a, b in zip(out[1][1:], out[0][1:]):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-9)


@pytest.mark.parametrize("N, M", [(40, 300), (300, 40), (150, 150), (1, 200)])
def test_centring_of_whole_pairs_equals_the_leading_block(monkeypatch, N, M):
    """Pairs given no lengths take their leading block's sides as two numbers: the same
    centring, value and P as the same pairs given their lengths (leading_block's tensors)."""
    mod = sys.modules["torchalign.soft_align"]
    monkeypatch.setattr(mod, "CENTRE_FROM", 2)
    s = torch.randn(2, N, M, generator=torch.Generator().manual_seed(N + M)) + 0.5
    lengths = (torch.full((2,), N), torch.full((2,), M))
    go = torch.full((2, 1, 1), 1.0)
    c = mod._centre(s, go, go, True, *lengths, True)
    assert torch.equal(c, mod._centre(s, go, go, True, *lengths, False)) and (c != 0).all()
    for a, b in zip(ta.soft_alignment(s, 1.0), ta.soft_alignment(s, 1.0, lengths=lengths)):
        assert torch.equal(a, b)


@pytest.mark.parametrize("mode", MODES)
def test_centring_keeps_long_pairs_exact(monkeypatch, mode):
    """A float32 pair of 1,100 x 1,100, centred (CENTRE_FROM lowered to its size): the
    expected alignment within 3e-5 of float64 (measured: global 6.9e-6, local 5.0e-6,
    semiglobal 5.9e-6; without the centring 1.1e-4 / 1.4e-4 / 1.3e-4, an error that grows
    with n + m: global 1.5e-3 at 10,000^2 on the GPU, local 1.79e-3 and semiglobal 1.65e-3
    on the CPU, benchmarks/NOTES.md)."""
    monkeypatch.setattr(sys.modules["torchalign.soft_align"], "CENTRE_FROM", 2200)
    s = torch.randn(1, 1100, 1100, generator=torch.Generator().manual_seed(0))
    v32, P32 = ta.soft_alignment(s, 1.0, mode=mode)
    v64, P64 = ta.soft_alignment(s.double(), 1.0, mode=mode)
    torch.testing.assert_close(v32.double(), v64, rtol=1e-6, atol=0)
    assert (P32.double() - P64).abs().max() <= 3e-5


@pytest.mark.parametrize("mode", MODES)
def test_centring_keeps_long_hessian_vector_products_exact(monkeypatch, mode):
    """The same pair's Hessian-vector product along u = the scores (their tangents drift
    as the values do, and are centred too): within 5e-5 of float64 (measured: global
    1.2e-5, local 8.0e-6, semiglobal 8.7e-6; with neither centred 3.9e-4 / 3.9e-4 / 2.6e-4)."""
    monkeypatch.setattr(sys.modules["torchalign.soft_align"], "CENTRE_FROM", 2200)
    s = torch.randn(1, 1100, 1100, generator=torch.Generator().manual_seed(0))
    assert _float32_hvp_error(s, 1.0, mode=mode) <= 5e-5


@pytest.mark.parametrize("gap_extend", [None, 0.5])
def test_local_hessian_vector_product_in_float32(gap_extend):
    """Local mode's ends are every cell, each p = exp(V - value) of values that grow like
    n + m: in float32 they sum to 1 only within ~1e-5 here, and d value = sum p dV must be
    divided by that sum, as each edge's dp must come from its own node's in-edges, or the
    mismatch times |dV| stays in the product. CPU float32 at 300^2 along u = the scores:
    within 1.5e-4 of float64 (3.5e-5 / 1.6e-5 measured; 5.6e-4 / 1.3e-3 before)."""
    s = torch.randn(1, 300, 300, generator=torch.Generator().manual_seed(1))
    assert _float32_hvp_error(s, 1.0, gap_extend, mode="local") <= 1.5e-4


def _float32_hvp_error(s, *gaps, **kw):
    """Max |H u - float64's| of soft_align's Hessian-vector product along u = the scores, in float32."""
    def hvp(x):
        x = x.clone().requires_grad_()
        (g,) = torch.autograd.grad(ta.soft_align(x, *gaps, **kw).sum(), x, create_graph=True)
        return torch.autograd.grad((g * x.detach()).sum(), x)[0]

    return (hvp(s).double() - hvp(s.double())).abs().max().item()


def test_numbers_become_cached_constants():
    """Lengths, gaps and gamma given as numbers are one cached tensor per shape, value, dtype
    and device (no fill a call); one first made under inference mode still serves a call whose
    backward saves it; a compiled graph gets its own."""
    from unittest import mock

    from torchalign import inputs

    inputs._CONSTANTS.clear()
    a = inputs.constant((3,), 2.5, torch.float32, torch.device("cpu"))
    assert inputs.constant((3,), 2.5, torch.float32, "cpu") is a and a.tolist() == [2.5] * 3
    others = [inputs.constant((3,), 2.0, torch.float32, "cpu"), inputs.constant((3,), 2.5, torch.float64, "cpu"),
              inputs.constant((3, 1, 1), 2.5, torch.float32, "cpu"), inputs.constant((3,), 2, torch.int64, "cpu")]
    assert all(o is not a for o in others) and others[3].dtype == torch.int64
    with mock.patch.object(torch.compiler, "is_compiling", return_value=True):
        assert inputs.constant((3,), 2.5, torch.float32, "cpu") is not a
    inputs._CONSTANTS.clear()
    s = torch.randn(2, 5, 4, generator=torch.Generator().manual_seed(39))
    with torch.inference_mode():
        first = ta.soft_align(s, 1.5), ta.soft_dtw(s.exp(), 0.7)  # (the cache filled here)
    x = s.clone().requires_grad_(True)
    again = ta.soft_align(x, 1.5), ta.soft_dtw(x.exp(), 0.7)  # the same cached gap, gamma and lengths, saved
    (again[0].sum() + again[1].sum()).backward()
    assert all(torch.equal(u, v.detach()) for u, v in zip(first, again)) and torch.isfinite(x.grad).all()
    assert len(inputs._CONSTANTS) >= 3


@pytest.mark.parametrize("checkpoint", [1, 3])
def test_centring_of_affine_global_pairs_is_exact(checkpoint):
    """Affine gaps (the three-state path, every row kept or checkpoints): scores - 2c and
    both gaps + c lower every global alignment by c (n + m) and change nothing else: value,
    gradients, gap gradients and the Hessian-vector product equal the plain problem's
    (float64, 1e-9)."""
    B, N, M = 3, 20, 26
    s, go, ge, (q, t) = ref.random_batch(B, N, M, torch.float64, seed=23)
    go, ge = go.reshape(B, 1, 1), ge.reshape(B, 1, 1)
    c = torch.tensor([0.7, -1.3, 2.9], dtype=torch.float64)
    z = torch.randn(B, N, M, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    zo, ze = (torch.randn(B, 1, 1, dtype=torch.float64, generator=torch.Generator().manual_seed(k)) for k in (2, 3))
    grad = torch.tensor([0.5, 1.0, 1.5], dtype=torch.float64)
    out = []
    for shift, o, e in ((None, go, ge), (c, go + c[:, None, None], ge + c[:, None, None])):
        value, table = torch.ops.torchalign.soft_align(s, o, e, q, t, shift, 0, False, checkpoint)
        first = torch.ops.torchalign.soft_align_backward(s, o, e, q, t, shift, table, value, grad, 0, False, checkpoint)
        second = torch.ops.torchalign.soft_align_hvp(s, o, e, q, t, shift, table, value, grad, z, zo, ze, 0, False,
                                                     checkpoint)
        out.append((value, *first, *second))
    torch.testing.assert_close(out[1][0] + c * (q + t), out[0][0], rtol=1e-12, atol=1e-9)
    for a, b in zip(out[1][1:], out[0][1:]):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-9)


def test_centring_keeps_long_affine_global_pairs_exact(monkeypatch):
    """A float32 affine pair of 1,100 x 1,100, global, centred (CENTRE_FROM lowered): the
    expected alignment within 3e-5 of float64, as the linear pairs'."""
    monkeypatch.setattr(sys.modules["torchalign.soft_align"], "CENTRE_FROM", 2200)
    s = torch.randn(1, 1100, 1100, generator=torch.Generator().manual_seed(0))
    v32, P32 = ta.soft_alignment(s, 1.0, 0.25)
    v64, P64 = ta.soft_alignment(s.double(), 1.0, 0.25)
    torch.testing.assert_close(v32.double(), v64, rtol=1e-6, atol=0)
    assert (P32.double() - P64).abs().max() <= 3e-5
