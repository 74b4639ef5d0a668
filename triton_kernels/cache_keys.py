"""The same Triton cache key for a kernel in every process, whatever it launched first.

Triton 3.6 (3.9 no longer does) folds a kernel's global constexprs into its cache key, and a
caller takes a helper's globals only when the helper's key already exists
(``DependenciesFinder._update_hash`` reads ``used_global_vals`` before ``cache_key``). So the
key of ``align_wave_kernel`` depended on whether ``align_kernel`` (which shares its helpers)
had been keyed first, and a process that launched the kernels in another order than the
GPU tier's precompile missed its cache and compiled them again (31 s of the tier). Keying
every kernel and helper of the package to a fixed point makes each caller see its helpers'
complete globals.

A kernel's key depends only on its own helpers, so each kernel module settles, when imported,
the kernels of the modules it reaches through its globals (``settle_module``): a process keys
only what it imports (the main job's first search imported and keyed all 74 kernels and
helpers: ~0.4 s of the command's warm start), and every order of imports gives the same keys.
"""

import sys

from triton.runtime.jit import JITFunction


def settle(modules) -> int:
    """Compute the cache key of every JITFunction in ``modules`` until no key changes (the
    globals only grow, so a few rounds); the rounds it took. Under the interpreter there are
    no JITFunctions and nothing to do."""
    fns = list({id(v): v for m in modules for v in vars(m).values() if isinstance(v, JITFunction)}.values())
    keys, rounds = None, 0
    while True:
        rounds += 1
        for fn in fns:
            fn.hash = None  # recomputed below from the helpers' globals of the round before
        new = [fn.cache_key for fn in fns]
        if new == keys:
            return rounds
        keys = new


_SETTLED: set[str] = set()  # modules whose keys are final (their helpers' too)


def settle_module(name: str) -> int:
    """``settle`` the module ``name`` together with every module not yet settled whose
    JITFunctions it reaches through module globals (its helpers', transitively); the rounds it
    took. A settled module's keys are final, so a caller keyed later sees its complete globals."""
    reached, todo = {}, [sys.modules[name]]
    while todo:
        module = todo.pop()
        if module.__name__ not in reached and module.__name__ not in _SETTLED:
            reached[module.__name__] = module
            todo += [sys.modules[v.fn.__module__] for v in vars(module).values() if isinstance(v, JITFunction)]
    rounds = settle(reached.values())
    _SETTLED.update(reached)
    return rounds
