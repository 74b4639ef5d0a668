"""Custom ops (torch.ops.torchalign.*): importing this package registers them."""

from . import hamming  # noqa: F401
