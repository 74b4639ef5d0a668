"""Our ops' first call without torch's compiler stack, for processes that never compile.

torch wraps every custom op's device function in ``torch._disable_dynamo``, which imports
``torch._dynamo`` (sympy, fx, fsdp: ~4 s on the GPU host, 2 s here) on the op's first call,
so that dynamo does not trace into the function. A process that imported no dynamo has no
frame evaluation hook to guard against. ``skip_compiler_import()`` fills the wrapper's
cache with the plain function, so the first call goes straight to it. Only the command line
calls it: a library user may ``torch.compile`` later, and then wants the guard.
"""

from __future__ import annotations

import sys


def skip_compiler_import() -> bool:
    """True if every torchalign op now skips the import (False: dynamo is already loaded, or
    this torch keeps its wrappers differently, and nothing was changed)."""
    if "torch._dynamo" in sys.modules:
        return False
    try:
        from torch._library.custom_ops import OPDEFS

        fns = [fn.__wrapped__ for name, op in OPDEFS.items() if name.startswith("torchalign::")
               for fn in op._backend_fns.values()]
    except (ImportError, AttributeError):
        return False
    for fn in fns:
        setattr(fn, "__dynamo_disable", fn)  # torch._compile._disable_dynamo's cache, as dynamo.disable would fill it
    return bool(fns)
