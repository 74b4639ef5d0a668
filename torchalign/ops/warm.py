"""The GPU's one-off costs of a process, started in a background thread by the command line.

A process's first kernel launch waits for two things that hold no Python lock for most of
their time: the CUDA context (``cuInit`` and the context, ~0.3 s) and Triton's own cache
key, a SHA-256 of its ~0.5 GB ``libtriton`` library computed once per process (0.4-0.8 s)
before any cached kernel is loaded. A thread does both while the main thread reads the
input files and imports the kernels. Both are idempotent and thread-safe (torch's lazy init
holds a lock; the key is an ``lru_cache`` of a pure function), so whichever thread comes
first does the work and the other waits for it or finds it done.
"""

from __future__ import annotations

import os
import threading

import torch


def start(device: str) -> threading.Thread | None:
    """The warm-up thread for ``device``, started (None off CUDA, or without Triton)."""
    if torch.device(device).type != "cuda":
        return None
    try:
        from triton.runtime.cache import triton_key  # imported here: one thread imports triton
    except ImportError:
        return None
    thread = threading.Thread(target=_warm, args=(triton_key,), name="torchalign-warm", daemon=True)
    thread.start()
    return thread


def _warm(triton_key) -> None:
    if "LOCAL_RANK" not in os.environ:  # under torchrun the rank picks its device first
        torch.cuda.init()
    triton_key()
