"""Waiting on another program's progress counter (the wavefronts of soft_dtw and align_scan).

A program only ever waits on one that started before it (a lower ticket or program id), so
a wait ends as long as the GPU runs what it started; SPIN_LIMIT bounds it all the same (a
lost wait must never hang the process: the caller poisons its results instead).

Pure: imports only triton.
"""

import triton
import triton.language as tl

from .cache_keys import settle_module

SPIN_LIMIT = tl.constexpr(1 << 22)  # polls (seconds of waiting) before a wait gives up
GAVE_UP = tl.constexpr(1 << 30)  # what a wait that gave up returns: past any real count


@triton.jit
def wait_until(flag, target):
    """Spin until the counter at ``flag`` reaches ``target`` (acquire) and return what it
    read, or GAVE_UP after SPIN_LIMIT polls (the program then waits no more)."""
    seen = tl.atomic_add(flag, 0, sem="acquire")
    spins = 0
    while (seen < target) & (spins < SPIN_LIMIT):
        seen = tl.atomic_add(flag, 0, sem="acquire")
        spins += 1
    if seen < target:
        seen = GAVE_UP
    return seen


settle_module(__name__)  # the same cache keys in every process (cache_keys.py)
