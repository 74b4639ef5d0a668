"""The aten ops a piece of code runs, with their output shapes (a TorchDispatchMode): for
tests of what a backward pass allocates."""

import torch
from torch.utils._python_dispatch import TorchDispatchMode


class OpShapes(TorchDispatchMode):
    """Records (op name, output shape) of every op run inside ``with OpShapes() as log:``."""

    def __init__(self):
        super().__init__()
        self.ops = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for o in out if isinstance(out, (tuple, list)) else (out,):
            if isinstance(o, torch.Tensor):
                self.ops.append((str(func), tuple(o.shape)))
        return out

    def zeros(self, shape) -> int:
        """How many zero-filled tensors of ``shape`` were made."""
        return sum(name.startswith(("aten.zeros", "aten.new_zeros", "aten.zero_")) and s == tuple(shape)
                   for name, s in self.ops)
