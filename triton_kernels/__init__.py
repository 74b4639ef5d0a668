"""torchalign's Triton kernels and their launch helpers (import name: torchalign_kernels).

Pure: imports only torch and triton, never torchalign.
"""
from . import (align, align_scan, align_wave, asm, asm_rows, hamming, levenshtein, myers, myers_band, myers_wave,
               primers, soft_align, soft_align_hvp, soft_dtw, soft_dtw_hvp, traceback)
from .cache_keys import settle

# every kernel's cache key before any launch: the same in every process (cache_keys.py)
settle([m for m in list(globals().values()) if isinstance(m, type(align))])
