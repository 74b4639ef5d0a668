"""CPU implementations: vectorised torch, the same integers as the Triton kernels."""
