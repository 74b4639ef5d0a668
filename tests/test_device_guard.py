"""Every op runs on its tensors' GPU, not the current one. Triton launches on the current
device and torch.library sets no device guard for Python implementations, so each op's
implementation (and each direct eager route of the soft ops) is wrapped in
``ops.backend.on_tensor_device``."""

from __future__ import annotations

import contextlib

import pytest
import torch

import torchalign as ta
from torchalign.ops import backend, soft_align as ops_soft_align, soft_dtw as ops_soft_dtw


def test_every_op_and_direct_route_is_guarded():
    from torch._library.custom_ops import OPDEFS

    ours = {name: op for name, op in OPDEFS.items() if name.startswith("torchalign::")}
    assert len(ours) >= 20
    unguarded = [name for name, op in ours.items() if not getattr(op._init_fn, "on_tensor_device", False)]
    assert not unguarded, f"implementations without ops.backend.on_tensor_device: {unguarded}"
    for fn in (ops_soft_align.forward, ops_soft_align._backward_direct, ops_soft_align.hvp,
               ops_soft_dtw.forward, ops_soft_dtw.backward, ops_soft_dtw.hvp):
        assert getattr(fn, "on_tensor_device", False), fn.__qualname__


class _OnGpu1(torch.Tensor):
    """A CPU tensor that says it lives on cuda:1 (the guard reads only is_cuda and get_device)."""

    @property
    def is_cuda(self):
        return True

    def get_device(self):
        return 1


@pytest.fixture
def devices(monkeypatch):
    """torch.cuda's current device as a variable: 0, switched by torch.cuda.device(...)."""
    state = {"current": 0, "entered": []}

    @contextlib.contextmanager
    def device(d):
        state["entered"].append(d)
        before, state["current"] = state["current"], 1
        try:
            yield
        finally:
            state["current"] = before

    monkeypatch.setattr(torch.cuda, "current_device", lambda: state["current"])
    monkeypatch.setattr(torch.cuda, "device", device)
    return state


def test_the_guard_switches_to_the_first_tensors_device_and_back(devices):
    seen = []

    @backend.on_tensor_device
    def impl(k: int, x: torch.Tensor, y: torch.Tensor) -> int:
        seen.append(torch.cuda.current_device())
        return k + 1

    x = torch.zeros(3).as_subclass(_OnGpu1)
    assert impl(1, x, torch.zeros(2)) == 2  # (a non-tensor argument first: the first tensor decides)
    assert seen == [1] and len(devices["entered"]) == 1 and devices["current"] == 0
    devices["current"] = 1  # already there: no switch
    impl(1, x, x)
    assert seen == [1, 1] and len(devices["entered"]) == 1
    devices["current"] = 0
    impl(1, torch.zeros(2), x)  # a CPU tensor first: nothing to switch
    assert seen == [1, 1, 0] and len(devices["entered"]) == 1


@pytest.mark.gpu
@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two GPUs")
def test_ops_on_the_second_gpu_under_current_device_0():
    """Each family on cuda:1 while cuda:0 is current equals the CPU result."""
    torch.cuda.set_device(0)
    dev = torch.device("cuda", 1)
    seqs = ["ACGTACGTTA", "ACGTTCGTAA", "TTGCA", "ACGTACGTAC"]
    a, b = ta.encode(seqs, "dna"), ta.encode(seqs[::-1], "dna")
    assert torch.equal(ta.levenshtein_cdist(a.to(dev), b.to(dev)).cpu(), ta.levenshtein_cdist(a, b))
    even = ta.encode(["ACGTACGTTA", "ACGTTCGTAA"], "dna")
    assert torch.equal(ta.hamming_cdist(even.to(dev), even.to(dev)).cpu(), ta.hamming_cdist(even, even))
    sc = ta.Scoring(match=2, mismatch=-1, gap_open=3, gap_extend=1)
    got = ta.align_score(a.to(dev), b.to(dev), sc, mode="local").score.cpu()
    assert torch.equal(got, ta.align_score(a, b, sc, mode="local").score)
    s = torch.randn(3, 40, 30, generator=torch.Generator().manual_seed(0))
    for fn in (lambda x: ta.soft_align(x, 1.0), lambda x: ta.soft_dtw(-x)):
        x1, x0 = s.to(dev).requires_grad_(True), s.clone().requires_grad_(True)
        v1, v0 = fn(x1), fn(x0)
        v1.sum().backward()
        v0.sum().backward()
        assert v1.device == dev and torch.allclose(v1.cpu(), v0, rtol=1e-5)
        assert torch.allclose(x1.grad.cpu(), x0.grad, atol=1e-4)
    assert torch.cuda.current_device() == 0
