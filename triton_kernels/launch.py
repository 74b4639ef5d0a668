"""Repeat launches of a Triton kernel without JITFunction.run's bookkeeping.

Every ``kernel[grid](...)`` binds and specialises each argument, builds a cache key, checks
the kernel's globals and asks for the device and stream: ~10 us of host time a launch of the
soft forward (24 arguments) on the lent H100 machine (triton 3.6), whose implementation,
allocations and launch, took 80.5 us through ``kernel[grid]`` and 70.9 us through this
(benchmarks/NOTES.md, session 24). ``Launcher`` sends a launch through
JITFunction.run until it has seen, for that specialisation, which compiled kernel Triton
picks and the exact arguments Triton hands that kernel's launcher; later launches of the
same specialisation go to the launcher directly, with Triton's launch metadata and hooks
(a profiler's). The specialisation key is a superset of what Triton specialises on (each
tensor's dtype and address mod 16; each int mod 16, whether it is 1 and its width; the
constexprs and options), so a replayed kernel is the one Triton would have picked. Anything
it cannot vouch for takes JITFunction.run: CPU tensors (the interpreter, recorded launches),
a recorded call it does not recognise (another Triton's argument layout).
"""

from __future__ import annotations

import contextlib
import inspect
import threading

import torch
from triton.runtime.jit import JITFunction

try:
    from triton import knobs
except ImportError:  # (a triton without knobs: every launch takes JITFunction.run)
    knobs = None

_MAX_KEYS = 512  # specialisations remembered per kernel (each new shape is a new key)


def _spec(x):
    """The properties of one argument that can change which compiled kernel Triton picks."""
    if isinstance(x, torch.Tensor):
        return x.dtype, x.data_ptr() % 16
    if isinstance(x, bool):
        return bool, x
    if isinstance(x, int):
        return int, x % 16, x == 1, -2**31 <= x < 2**31, x < 2**63
    if isinstance(x, float):
        return float
    return type(x), x


@contextlib.contextmanager
def _recorded(kernel, name: str, calls: list):
    """Within: ``kernel.<name>(...)`` also appends its arguments to ``calls``. Set on the kernel
    (3.9 keeps ``run`` there), else on its class as a property answering for this kernel only
    (3.6's ``run`` is a property without a setter)."""
    real = getattr(kernel, name)
    own = vars(kernel).get(name)

    def record(*a):
        calls.append(a)
        return real(*a)

    try:
        setattr(kernel, name, record)
    except AttributeError:
        cls = type(kernel)
        prop = inspect.getattr_static(cls, name)
        setattr(cls, name, property(lambda self: record if self is kernel else prop.__get__(self, cls)))
        try:
            yield
        finally:
            setattr(cls, name, prop)
        return
    try:
        yield
    finally:
        if own is None:
            delattr(kernel, name)
        else:
            setattr(kernel, name, own)


class Launcher:
    """``Launcher(kernel)(grid, *args, **constexprs_and_options)`` launches like
    ``kernel[grid](*args, **constexprs_and_options)``: the same compiled kernel, arguments,
    device, stream and launch hooks. ``args`` are the kernel's non-constexpr parameters, in
    order."""

    def __init__(self, fn: JITFunction):
        self.fn = fn
        self.first = {}  # key -> the compiled kernel JITFunction.run returned for it
        self.fast = {}  # key -> (launcher, function, packed metadata, kernel, constexpr tail), or None: never
        self.lock = threading.Lock()

    def __call__(self, grid, *args, **kwargs):
        if knobs is None or not (isinstance(self.fn, JITFunction) and isinstance(args[0], torch.Tensor)
                                 and args[0].is_cuda):
            return self.fn[grid](*args, **kwargs)
        device = torch.cuda.current_device()  # (Triton's choice of device and stream)
        key = (device, *kwargs.items(), *map(_spec, args))
        hit = self.fast.get(key)
        if hit is None:
            return self._slow(key, grid, args, kwargs)
        run, function, packed, kernel, tail = hit
        full = (*args, *tail)
        g = (*grid, 1, 1)
        stream = torch._C._cuda_getCurrentRawStream(device)
        hooks = knobs.runtime
        run(g[0], g[1], g[2], stream, function, packed, kernel.launch_metadata(grid, stream, *full),
            hooks.launch_enter_hook, hooks.launch_exit_hook, *full)

    def _slow(self, key, grid, args, kwargs):
        """A launch through JITFunction.run; the second of a key records what Triton passed its
        kernel's launcher and, where that is this launch's arguments, makes the key fast."""
        kernel = self.first.get(key)
        if kernel is None or key in self.fast:
            kernel = self.fn[grid](*args, **kwargs)
            if key not in self.first and hasattr(kernel, "launch_metadata"):
                if len(self.first) >= _MAX_KEYS:
                    self.first.clear()
                    self.fast.clear()
                self.first[key] = kernel
            return kernel
        calls = []
        with self.lock, _recorded(kernel, "launch_metadata", calls), _recorded(kernel, "run", calls):
            self.fn[grid](*args, **kwargs)
        self.fast[key] = self._replay(kernel.run, kernel, calls, grid, args, key[0])
        return kernel

    @staticmethod
    def _replay(run, kernel, calls, grid, args, device):
        """(launcher, function, packed metadata, kernel, constexpr tail) where the recorded
        calls are launch_metadata(grid, stream, *full) and then the launcher's (grid, stream,
        this kernel's function, that metadata, the hooks, *full), ``full`` these very
        arguments and constants; else None."""
        if len(calls) != 2 or len(calls[1]) < 9 + len(args):
            return None
        (g0, g1, g2, stream, function, packed, _, enter, leave, *full) = calls[1]
        tail = full[len(args):]
        same = (all(a is b for a, b in zip(full, args)) and (g0, g1, g2) == (*grid, 1, 1)[:3]
                and stream == torch._C._cuda_getCurrentRawStream(device)
                and enter is knobs.runtime.launch_enter_hook and leave is knobs.runtime.launch_exit_hook
                and tuple(calls[0][0]) == tuple(grid) and calls[0][1] == stream and len(calls[0]) == 2 + len(full)
                and all(a is b for a, b in zip(calls[0][2:], full))
                and not any(isinstance(t, torch.Tensor) for t in tail))
        return (run, function, packed, kernel, tuple(tail)) if same else None
