"""torchalign's Triton kernels and their launch helpers (import name: torchalign_kernels).

Pure: imports only torch and triton, never torchalign.
"""
