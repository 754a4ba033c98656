"""Lanes that are not ``def`` functions: builtins, NumPy ufuncs, ``functools.partial``.

JAX users write ``jax.vmap(math.sin)``, ``jax.vmap(np.dot)`` or map a
``functools.partial``; Numba compiles only Python functions, so such a lane is
wrapped in a generated one with the same parameters that calls it (a partial's
bound arguments become constants of the wrapper, so they are part of its
fingerprint and its cache key).

Example:
    >>> import math
    >>> lane = as_lane_function(math.hypot)
    >>> lane.__name__, lane(3.0, 4.0)
    ('hypot', 5.0)
"""

from __future__ import annotations

import functools
import inspect
import types

import numpy as np


def as_lane_function(fn):
    """``fn`` itself when it is a Python function (or already compiled), else a
    generated Python function with ``fn``'s parameters that calls it."""
    if isinstance(fn, types.FunctionType) or hasattr(fn, "py_func") or not callable(fn):
        return fn
    if isinstance(fn, functools.partial):
        return _wrap(fn.func, _parameters(fn), list(fn.args), dict(fn.keywords),
                     getattr(fn.func, "__name__", "partial"))
    return _wrap(fn, _parameters(fn), [], {}, getattr(fn, "__name__", type(fn).__name__))


def _parameters(fn) -> list[str]:
    """Positional parameter names of ``fn`` (a ufunc: one per input)."""
    if isinstance(fn, np.ufunc):
        return [f"x{i}" for i in range(fn.nin)]
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return []
    if any(p.kind == p.VAR_POSITIONAL for p in params):
        return []
    return [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]


def _wrap(target, params: list[str], bound: list, keywords: dict, name: str):
    """``def name(*params): return _target(*bound, *params, **keywords)``, generated."""
    namespace = {"_target": target}
    args = []
    for i, value in enumerate(bound):
        namespace[f"_bound{i}"] = value
        args.append(f"_bound{i}")
    signature = ", ".join(params) if params else "*args"
    args += params if params else ["*args"]
    for i, (key, value) in enumerate(keywords.items()):
        namespace[f"_keyword{i}"] = value
        args.append(f"{key}=_keyword{i}")
    identifier = name if name.isidentifier() else "lane"
    source = f"def {identifier}({signature}):\n    return _target({', '.join(args)})\n"
    exec(compile(source, f"<lanewise lane for {name}>", "exec"), namespace)
    made = namespace[identifier]
    made.__qualname__ = getattr(target, "__qualname__", identifier)
    return made
