"""Custom ops (torch.ops.torchalign.*): importing this package registers them."""

from . import align, asm, hamming, levenshtein, primers, soft_align, soft_dtw, topk, traceback  # noqa: F401
