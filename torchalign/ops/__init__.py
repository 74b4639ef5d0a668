"""Custom ops (torch.ops.torchalign.*): importing this package registers them."""

from . import hamming, levenshtein  # noqa: F401
