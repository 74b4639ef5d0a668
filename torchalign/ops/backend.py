"""Which implementation an op runs: the Triton kernels or the CPU code.

CUDA tensors always take the kernels. CPU tensors take the CPU code, unless
``TORCHALIGN_CPU_BACKEND=triton`` is set together with ``TRITON_INTERPRET=1``: then the
kernels run under Triton's interpreter, which is how the test suite proves them
without a GPU.
"""

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
