"""Which implementation an op runs, the Triton kernels or the CPU code, and on which GPU
(``on_tensor_device``: its tensors', whatever device is current).

CUDA tensors always take the kernels. CPU tensors take the CPU code, unless
``TORCHALIGN_CPU_BACKEND=triton`` is set together with ``TRITON_INTERPRET=1``: then the
kernels run under Triton's interpreter, which is how the test suite proves them
without a GPU.
"""

import functools
import inspect
import os

import torch


def use_kernels(t: torch.Tensor) -> bool:
    if t.is_cuda:
        return True
    return os.environ.get("TORCHALIGN_CPU_BACKEND") == "triton" and os.environ.get("TRITON_INTERPRET") == "1"


def kernels(family: str):
    """A kernel module of torchalign_kernels, imported on first use (triton is not needed
    for CPU work)."""
    import importlib

    return importlib.import_module(f"torchalign_kernels.{family}")


def on_tensor_device(fn):
    """``fn`` run with the current CUDA device set to that of its first tensor argument.
    Triton launches a kernel on the current device, and torch.library sets no device guard
    for Python implementations, so without this a tensor on cuda:1 under current device 0
    would be handed to a kernel on device 0 (Triton refuses the pointer, or the kernel reads
    memory of another GPU). Costs an index compare where the devices already agree."""

    @functools.wraps(fn)
    def run(*args, **kwargs):
        for a in args:
            if isinstance(a, torch.Tensor):
                if a.is_cuda and a.get_device() != torch.cuda.current_device():
                    with torch.cuda.device(a.device):
                        return fn(*args, **kwargs)
                break
        return fn(*args, **kwargs)

    # (the schema is inferred from the signature; its string annotations resolve in fn's module)
    run.__signature__ = inspect.signature(fn, eval_str=True)
    run.on_tensor_device = True
    return run
