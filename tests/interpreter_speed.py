"""Under TRITON_INTERPRET=1: the interpreter patches triton.language anew on every call of a
@triton.jit helper inside a kernel (``_patch_lang``, an ``inspect.getmembers`` of the
language modules, ~2 ms a call; the kernel's launch has patched them already, and the
helper's scope is never restored), a fifth of the interpreter tier's time. A helper call
made while the modules it sees are patched skips it; the results are the same (the
patches are the launch's). Where Triton's interpreter has no such function, nothing
changes."""

import triton.language as tl
from triton.runtime import interpreter


def install() -> None:
    patch = getattr(interpreter, "_patch_lang", None)
    scope = getattr(interpreter, "_LangPatchScope", None)
    if patch is None or scope is None or getattr(patch, "_once", False):
        return

    def patch_lang_once(fn):
        langs = [v for v in fn.__globals__.values() if v is tl or v is tl.core]
        if langs and not any(tl.core.is_builtin(getattr(lang, "load", None)) for lang in langs):
            return scope()  # already patched by the launch that runs this helper
        return patch(fn)

    patch_lang_once._once = True
    interpreter._patch_lang = patch_lang_once
