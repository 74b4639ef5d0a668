"""check=False makes the fixed-shape ops free of host syncs (README). On a GPU each op is
captured in a CUDA graph, the graph replayed on new data and compared with eager calls,
and an eager call runs under torch.cuda.set_sync_debug_mode("error"). Under the Triton
interpreter (the same launch code on CPU tensors) no op that reads a value back or sizes
an output by the data is dispatched while the op runs."""

from __future__ import annotations

import random

import pytest
import torch
from torch._library.custom_ops import OPDEFS
from torch.utils._python_dispatch import TorchDispatchMode

import torchalign as ta
from torchalign.alphabet import get_alphabet

aten = torch.ops.aten
DNA, AA = "ACGT", "ARNDCQEGHILKMFPSTWYV"


# ---------------------------------------------------------------- the cases ----------
class Batches:
    """Static batches of fixed shapes (codes and offsets), with the encode-time hints, and
    a way to fill them with new data: new codes and the lengths permuted (same total,
    same longest, so the hints still hold)."""

    def __init__(self, rng: random.Random, device, alphabet: str, letters: str, lengths: list[list[int]],
                 paired: bool = False):
        self.rng, self.alphabet, self.letters, self.paired = rng, get_alphabet(alphabet), letters, paired
        self.lengths = lengths
        self.batches = [self._batch(ls, device) for ls in lengths]

    def _batch(self, lengths, device):
        b = ta.encode(["".join(self.rng.choice(self.letters) for _ in range(n)) for n in lengths], self.alphabet,
                      device)
        top = int(self.alphabet.encode_str(self.letters, "letters").max())
        return ta.SequenceBatch(b.codes, b.offsets, b.alphabet, top, max(lengths, default=0))

    def refill(self) -> None:
        """New data in place (the graph reads these very tensors)."""
        perm = list(range(len(self.lengths[0])))
        self.rng.shuffle(perm)
        for b, lengths in zip(self.batches, self.lengths):
            order = perm if self.paired else self.rng.sample(range(len(lengths)), len(lengths))
            new = self._batch([lengths[i] for i in order], "cpu")
            b.codes.copy_(new.codes)
            b.offsets.copy_(new.offsets)


def _cases(rng: random.Random, device, small: bool = False) -> dict:
    """name -> (Batches, fn(batch, ..., check) -> output). ``small``: sizes for the
    interpreter (with align.LONG_TARGET at 20)."""
    pick = lambda n, sizes: [rng.choice(sizes) for _ in range(n)]  # noqa: E731
    dna_pairs = pick(8 if small else 20, [0, 5, 31, 64, 90])
    texts = pick(3 if small else 5, [0, 1, 50] if small else [0, 1, 70, 300])
    patterns = pick(3 if small else 6, [1, 8, 23, 40])
    prot_q = pick(5 if small else 14, [0, 1, 9, 17] if small else [0, 1, 30, 120, 300])
    prot_t = pick(5 if small else 14, [0, 2, 12, 19] if small else [0, 2, 50, 200, 400])
    long_q, long_t = (30, 25) if small else (1600, 1100)
    edits = (pick(6 if small else 16, [0, 3, 60, 130] if small else [0, 3, 60, 130, 200]),
             pick(6 if small else 16, [0, 7, 64, 150]))
    sc = ta.Scoring()
    return {
        "hamming": (Batches(rng, device, "dna", DNA, [dna_pairs, dna_pairs], paired=True),
                    lambda a, b, check: ta.hamming(a, b, check=check)),
        "hamming_cdist": (Batches(rng, device, "protein", AA, [[37] * (4 if small else 9), [37] * 13]),
                          lambda a, b, check: ta.hamming_cdist(a, b, check=check)),
        "hamming_profile": (Batches(rng, device, "dna", DNA, [texts, patterns]),
                            lambda t, p, check: ta.hamming_profile(t, p, check=check)),
        "levenshtein": (Batches(rng, device, "dna", DNA, list(edits), paired=True),
                        lambda a, b, check: ta.levenshtein(a, b, check=check)),
        "levenshtein_cdist": (Batches(rng, device, "protein", AA,
                                      [edits[0][: 4 if small else 7], edits[1][: 5 if small else 11]]),
                              lambda a, b, check: ta.levenshtein_cdist(a, b, max_distance=40, check=check)),
        "asm_profile": (Batches(rng, device, "dna", DNA, [texts, patterns]),
                        lambda t, p, check: ta.asm_profile(t, p, check=check)),
        "asm_best": (Batches(rng, device, "dna", DNA, [texts, patterns]),
                     lambda t, p, check: ta.asm_best(t, p, check=check)),
        "align_score": (Batches(rng, device, "protein", AA, [prot_q, prot_t], paired=True),
                        lambda q, t, check: tuple(ta.align_score(q, t, sc, "semiglobal", check=check))),
        # a target past LONG_TARGET: every pair on the one-pair-per-program kernel
        "align_score_long": (Batches(rng, device, "protein", AA, [prot_q[:5] + [long_q], prot_t[:5] + [long_t]],
                                     paired=True),
                             lambda q, t, check: tuple(ta.align_score(q, t, sc, "local", check=check))),
    }


CASES = list(_cases(random.Random(0), "cpu"))


def _outputs(x) -> tuple:
    return x if isinstance(x, tuple) else (x,)


# ---------------------------------------------------------------- GPU ----------------
@pytest.mark.gpu
@pytest.mark.parametrize("name", CASES)
def test_captured_in_a_cuda_graph_and_replayed_on_new_data(name, rng):
    data, fn = _cases(rng, "cuda")[name]
    run = lambda: _outputs(fn(*data.batches, False))  # noqa: E731
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm-up on a side stream (compiles the kernels), as torch's docs say
        for _ in range(2):
            run()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):  # raises if the op syncs (a host read cannot be captured)
        static_out = run()
    for _ in range(2):
        data.refill()
        graph.replay()
        torch.cuda.synchronize()
        eager = _outputs(fn(*data.batches, True))  # checked, on the same new data
        cpu = _outputs(fn(*(b.to("cpu") for b in data.batches), True))
        for got, want, on_cpu in zip(static_out, eager, cpu):
            assert torch.equal(got, want) and torch.equal(got.cpu(), on_cpu), name


@pytest.mark.gpu
@pytest.mark.parametrize("name", CASES)
def test_eager_call_does_not_sync(name, rng):
    data, fn = _cases(rng, "cuda")[name]
    want = _outputs(fn(*data.batches, True))  # (compiles the kernels; syncs for its checks)
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        got = _outputs(fn(*data.batches, False))
    finally:
        torch.cuda.set_sync_debug_mode(0)
    assert all(torch.equal(g, w) for g, w in zip(got, want))


# ---------------------------------------------------------------- interpreter --------
class NoHostReads(TorchDispatchMode):
    """Raises on each op that would sync on a GPU: reading a value to the host (item,
    int, bool) and outputs sized by the data (nonzero, unique, boolean-mask indexing,
    masked_select, repeat_interleave without output_size). torchalign's own ops are run
    through their Python implementations under the mode, so their inner ops are seen."""

    READS = {aten._local_scalar_dense.default, aten.nonzero.default, aten._unique2.default, aten.unique_dim.default,
             aten.unique_consecutive.default, aten.masked_select.default, aten.equal.default,
             aten.is_nonzero.default}
    INDEXING = {aten.index.Tensor, aten.index_put.default, aten.index_put_.default, aten._index_put_impl_.default}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func.namespace == "torchalign":
            with self:
                return OPDEFS[func.name().split(".")[0]]._init_fn(*args, **kwargs)
        bad = func in self.READS
        bad |= func is aten.repeat_interleave.Tensor and kwargs.get("output_size") is None
        bad |= func in self.INDEXING and any(
            i is not None and i.dtype in (torch.bool, torch.uint8) for i in args[1])
        if bad:
            raise AssertionError(f"{func} reads the device on the check=False path")
        return func(*args, **kwargs)


def _refuse(name):
    def method(self, *args, **kwargs):
        raise AssertionError(f"Tensor.{name}() reads the device on the check=False path")
    return method


@pytest.mark.interpret
@pytest.mark.usefixtures("kernels_on_cpu")
@pytest.mark.parametrize("name", CASES)
def test_kernel_path_reads_nothing_back(name, rng, monkeypatch):
    """The ops' GPU launch code (run under the interpreter on CPU tensors): no host read."""
    from torchalign_kernels import align, align_wave

    monkeypatch.setattr(align, "LONG_TARGET", 20)  # (long targets at interpreter sizes)
    monkeypatch.setattr(align_wave, "W_MAX", 2)
    data, fn = _cases(rng, "cpu", small=True)[name]
    want = _outputs(fn(*data.batches, True))
    for method in ("tolist", "numpy", "cpu", "item", "__int__", "__index__", "__float__", "__bool__"):
        monkeypatch.setattr(torch.Tensor, method, _refuse(method))
    with NoHostReads():
        got = _outputs(fn(*data.batches, False))
    monkeypatch.undo()
    assert all(torch.equal(g, w) for g, w in zip(got, want))


# ------------------------------------------------ soft alignment training steps ----------
SOFT_STEPS = {  # name: (shape, the value of a batch), check=False where the op would read back
    "soft_align global": ((8, 96, 80), lambda x: ta.soft_align(x, 1.0)),
    "soft_align local affine": ((4, 40, 56), lambda x: ta.soft_align(x, 1.5, 0.5, mode="local", temperature=0.7)),
    "soft_dtw": ((8, 96, 80), lambda x: ta.soft_dtw(x, 0.5, check=False)),
    "soft_dtw banded, checkpoints": ((4, 70, 64), lambda x: ta.soft_dtw(x, 1.0, bandwidth=12, checkpoint=8,
                                                                      check=False)),
}


@pytest.mark.gpu
@pytest.mark.parametrize("name", SOFT_STEPS)
def test_soft_training_step_in_a_cuda_graph(name):
    """A training step through a soft op, forward, backward and a loss on the gradient
    (the double backward), captured whole in one CUDA graph (as CUDA-graph training loops
    and torch.compile's reduce-overhead mode run it: no host time per step) and replayed on
    new data: the same numbers as eager calls on that data."""
    shape, value = SOFT_STEPS[name]
    gen = torch.Generator(device="cuda").manual_seed(len(name))
    x = torch.randn(shape, device="cuda", generator=gen).requires_grad_(True)
    target = torch.rand(shape, device="cuda", generator=gen)

    def step(inp):
        v = value(inp)
        (g,) = torch.autograd.grad(v.sum(), inp, create_graph=True)
        (h,) = torch.autograd.grad(((g - target) ** 2).sum(), inp)
        return v.detach(), g.detach(), h

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm-up on a side stream (compiles the kernels)
        for _ in range(2):
            step(x)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):  # raises if anything syncs
        static_out = step(x)
    for _ in range(2):
        with torch.no_grad():
            x.copy_(torch.randn(shape, device="cuda", generator=gen))
        graph.replay()
        torch.cuda.synchronize()
        for got, want in zip(static_out, step(x.detach().clone().requires_grad_(True))):
            torch.testing.assert_close(got, want, rtol=1e-6, atol=1e-6)


@pytest.mark.gpu
def test_constants_first_made_in_a_capture_stay_out_of_the_cache():
    """A number's tensor (ops' gamma, gaps, lengths: torchalign.inputs.constant) first needed
    inside a CUDA graph capture is made for the graph alone: its fill runs only at replay, so
    an eager call after the capture must not find it cached."""
    from torchalign import inputs

    x = torch.randn(3, 40, 30, generator=torch.Generator().manual_seed(39)).cuda()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm-up (gamma 0.6: 0.7's tensor is not made here)
        ta.soft_dtw(x, 0.6, check=False)
    torch.cuda.current_stream().wait_stream(side)
    cached = set(inputs._CONSTANTS)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        static = ta.soft_dtw(x, 0.7, check=False)
    assert set(inputs._CONSTANTS) == cached  # nothing cached during the capture
    eager = ta.soft_dtw(x, 0.7)
    graph.replay()
    torch.testing.assert_close(eager.cpu(), ta.soft_dtw(x.cpu(), 0.7), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(static, eager, rtol=0, atol=0)
