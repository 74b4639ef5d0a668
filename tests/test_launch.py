"""torchalign_kernels.launch.Launcher: repeat launches straight to the compiled kernel's
launcher, only where they specialise as an earlier launch did (GPU), and the specialisation
key (CPU)."""

import pytest
import torch
import triton
import triton.language as tl

from torchalign_kernels.launch import Launcher, _spec


@triton.jit
def _scaled_add_kernel(x_ptr, y_ptr, out_ptr, n, scale, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    keep = i < n
    x = tl.load(x_ptr + i, mask=keep)
    y = tl.load(y_ptr + i, mask=keep)
    tl.store(out_ptr + i, x * scale + y, mask=keep)


def test_key_separates_what_triton_specialises_on():
    a = torch.zeros(64)
    assert _spec(a) == _spec(torch.zeros(32)) != _spec(a[1:])  # 16-byte aligned or not
    assert _spec(a) != _spec(a.double())
    assert _spec(32) == _spec(48) != _spec(40)
    assert _spec(17) != _spec(1)  # 1 is a constant to Triton
    assert _spec(2**31 - 16) != _spec(2**31)  # int32 or int64
    assert _spec(True) != _spec(1)
    assert _spec(None) == _spec(None) != _spec(0)


@pytest.mark.gpu
def test_repeat_launches_equal_triton_s_own():
    """Sizes and offsets that specialise differently (aligned or not, multiples of 16 or
    not, 1), each launched three times: every launch gives x * scale + y; the fast path
    engages for the aligned ones (the second launch of a key records, the third replays),
    and an unaligned launch never takes an aligned launch's kernel."""
    launch = Launcher(_scaled_add_kernel)
    base = torch.randn(4097, device="cuda")
    other = torch.randn(4097, device="cuda")
    keys = {}
    for n, offset in ((4096, 0), (4000, 0), (1, 0), (4096, 1), (3001, 3), (4096, 0)):
        x, y = base[offset:offset + n], other[offset:offset + n]
        for scale in (0.5, 2.0, -1.0):  # (powers of two: x * scale + y rounds once, fused or not)
            out = torch.empty_like(x)
            launch((triton.cdiv(n, 512),), x, y, out, n, scale, BLOCK=512)
            torch.testing.assert_close(out, x * scale + y, rtol=0, atol=0)
        keys[n, offset] = tuple(map(_spec, (x, y, out, n, scale)))
    fast = {k[2:]: v for k, v in launch.fast.items()}
    aligned, unaligned = fast[keys[4096, 0]], fast[keys[4096, 1]]
    assert aligned is not None and (unaligned is None or unaligned[1] is not aligned[1])


@pytest.mark.gpu
def test_side_streams_and_launch_hooks():
    """A replayed launch runs on the caller's current stream, and calls the launch hooks a
    profiler adds, as Triton's own launch does."""
    from triton import knobs

    launch = Launcher(_scaled_add_kernel)
    x, y = torch.randn(1024, device="cuda"), torch.randn(1024, device="cuda")
    out = torch.empty_like(x)
    for _ in range(3):
        launch((2,), x, y, out, 1024, 4.0, BLOCK=512)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        torch.cuda._sleep(10_000_000)  # (the side stream is busy: a launch on the default stream would run first)
        out2 = torch.zeros_like(x)
        launch((2,), x, y, out2, 1024, 4.0, BLOCK=512)
        done = out2.clone()
    side.synchronize()
    torch.testing.assert_close(done, x * 4.0 + y, rtol=0, atol=0)
    seen = []
    hook = seen.append
    knobs.runtime.launch_enter_hook.add(hook)  # (a chain of hooks in triton 3.6 and 3.9)
    try:
        launch((2,), x, y, out, 1024, 8.0, BLOCK=512)
    finally:
        knobs.runtime.launch_enter_hook.remove(hook)
    torch.cuda.synchronize()
    assert len(seen) == 1
    torch.testing.assert_close(out, x * 8.0 + y, rtol=0, atol=0)
