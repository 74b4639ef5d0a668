"""When eager code may call an op's implementation directly, past the dispatcher.

The dispatcher and torch.library's autograd wrapper (which reads the op's schema, fresh
pybind lists, several times a call) cost ~0.4 ms of a soft_align training step's ~1.3 ms of
host time at 256 x 128^2 on the H100 machine (benchmarks/NOTES.md, session 24). The soft
ops' eager routes (ops.soft_align, ops.soft_dtw) call their implementations with their own
autograd.Function instead, wherever nothing needs to see the op.
"""

from __future__ import annotations

import torch


def direct(tensors) -> bool:
    """Whether the implementations may be called directly: eager code on plain tensors, no
    compiler, tracer (torch.jit.trace would record the kernels' allocations, not their
    launches), dispatch mode (fake tensors, make_fx) or functorch transform in the way, none
    of which a direct call would honour."""
    return (not torch.compiler.is_compiling() and not torch.jit.is_tracing()
            and not torch.overrides.has_torch_function(tensors) and torch._C._len_torch_dispatch_stack() == 0
            and torch._C._functorch.peek_interpreter_stack() is None)


def needs_grad(tensors) -> bool:
    return torch.is_grad_enabled() and any(t.requires_grad for t in tensors)
