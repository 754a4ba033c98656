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
    """Positional parameter names of ``fn`` (a ufunc: one per input); a trailing
    ``"*args"`` stands for its optional positional parameters.

    Only the required ones are named: ``np.dot(a, b, out=None)`` mapped as
    ``lw.vmap(np.dot)(xs, ys)`` gets two arguments, as ``jax.vmap(jnp.dot)`` does,
    and a lane ``def dot(a, b, out)`` refused the call.  Optional ones the caller
    passes (``np.clip``'s bounds) go through ``*args``.
    """
    if isinstance(fn, np.ufunc):
        return [f"x{i}" for i in range(fn.nin)]
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return []
    if any(p.kind == p.VAR_POSITIONAL for p in params):
        return []
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    required = [p.name for p in positional if p.default is p.empty]
    return required + (["*args"] if len(required) < len(positional) else [])


def bind_arguments(fn, fixed: dict, nargs: int):
    """A Python lane calling ``fn`` with ``fixed`` (position -> value) bound among
    its ``nargs`` positional arguments; its parameters are ``fn``'s others.

    The way a function passed unmapped (``in_axes=None``) reaches a compiled lane:
    as a constant of the generated wrapper, as ``functools.partial`` binds one.

    Example:
        >>> lane = bind_arguments(lambda f, v: f(v) + 1.0, {0: abs}, 2)
        >>> lane(-2.0)
        3.0
    """
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        params = []
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    names = [positional[k].name if k < len(positional) else f"_arg{k}" for k in range(nargs)]
    namespace, signature, call = {"_target": fn}, [], []
    for k, name in enumerate(names):
        if k in fixed:
            namespace[f"_bound{k}"] = fixed[k]
            call.append(f"_bound{k}")
        else:
            signature.append(name)
            call.append(name)
    # Parameters left to keywords keep their defaults (constants of the wrapper).
    rest = positional[nargs:] + [p for p in params if p.kind == p.KEYWORD_ONLY]
    for p in rest:
        if p.default is p.empty:
            signature.append(p.name)
        else:
            namespace[f"_default_{p.name}"] = p.default
            signature.append(f"{p.name}=_default_{p.name}")
        call.append(f"{p.name}={p.name}")
    return _generate(fn, signature, call, namespace, getattr(fn, "__name__", type(fn).__name__))


def _wrap(target, params: list[str], bound: list, keywords: dict, name: str):
    """``def name(*params): return _target(*bound, *params, **keywords)``, generated."""
    namespace = {"_target": target}
    args = []
    for i, value in enumerate(bound):
        namespace[f"_bound{i}"] = value
        args.append(f"_bound{i}")
    params = params or ["*args"]
    args += params
    for i, (key, value) in enumerate(keywords.items()):
        namespace[f"_keyword{i}"] = value
        args.append(f"{key}=_keyword{i}")
    return _generate(target, params, args, namespace, name)


def _generate(target, signature: list[str], call: list[str], namespace: dict, name: str):
    """``def name(signature): return _target(call)``, compiled in ``namespace``."""
    identifier = name if name.isidentifier() else "lane"
    source = f"def {identifier}({', '.join(signature)}):\n    return _target({', '.join(call)})\n"
    exec(compile(source, f"<lanewise lane for {name}>", "exec"), namespace)
    made = namespace[identifier]
    made.__qualname__ = getattr(target, "__qualname__", identifier)
    return made
