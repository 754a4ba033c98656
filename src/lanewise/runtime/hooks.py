"""One way to run lanewise code around a Numba method (codegen hooks).

lanewise changes two things in how Numba builds machine code, each a small hook
on Numba's CPU code library: kernels are tagged with their vector width before
LLVM sees them (:mod:`lanewise.runtime.vector_width`), and the vectoriser's calls
to slow-path variants are inlined after it ran (:mod:`lanewise.lanemath._slowpath`).

Example:
    >>> class Library:
    ...     def build(self, x):
    ...         return x * 2
    >>> seen = []
    >>> hook_method(Library, "build", lambda self, x: seen.append(x), after=False)
    >>> hook_method(Library, "build", lambda self, x: seen.append(x), after=False) is None
    True
    >>> Library().build(3), len(seen) >= 1
    (6, True)
"""

from __future__ import annotations

import functools


def hook_method(cls, name: str, hook, *, after: bool) -> None:
    """Make ``cls.<name>`` call ``hook(self, *args)`` before it runs (or after:
    ``after=True``); installing the same hook again changes nothing."""
    original = getattr(cls, name)
    hooks = getattr(original, "_lw_hooks", ())
    if hook in hooks:
        return

    @functools.wraps(original)
    def hooked(self, *args, **kwargs):
        if not after:
            hook(self, *args, **kwargs)
        result = original(self, *args, **kwargs)
        if after:
            hook(self, *args, **kwargs)
        return result

    hooked._lw_hooks = hooks + (hook,)
    setattr(cls, name, hooked)
