"""torchalign's Triton kernels and their launch helpers (import name: torchalign_kernels).

Pure: imports only torch and triton, never torchalign. Each module is imported where it is
used (``import torchalign_kernels.align_scan``) and settles its kernels' cache keys then
(cache_keys.py).
"""
