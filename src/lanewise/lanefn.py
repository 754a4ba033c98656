"""Turning a user's plain-Python lane function into something Numba compiles.

Users write no decorators: helper functions the lane calls (by global name or
through a closure) are compiled too, by rebinding the lane's globals and closure
cells to ``njit`` versions (DESIGN.md: "Rebinding a lane's globals").  The
fingerprint of a lane — its code, constants, defaults, closure values and every
global it reaches — keys the disk cache, so editing a helper invalidates it.

Example:
    >>> def helper(v): return v + 1
    >>> def lane(x): return helper(x) * 2
    >>> jit_lane(lane)(3)
    8
"""

from __future__ import annotations

import builtins
import hashlib
import inspect
import sys
import types
import weakref
from typing import Any, Callable

import numba
import numpy as np
from numba.core.dispatcher import Dispatcher

#: Options every lane and generated kernel is compiled with.  ``error_model``
#: "numpy" makes ``x / 0.0`` give inf/nan (as NumPy and JAX do) and removes the
#: zero checks that would stop LLVM vectorising the nest.
JIT_OPTIONS = dict(error_model="numpy", nogil=True)

_STANDIN = sys.modules.setdefault("lanewise._lanes", types.ModuleType("lanewise._lanes"))

_jitted: "weakref.WeakKeyDictionary[Callable, Dispatcher]" = weakref.WeakKeyDictionary()


def python_function(fn: Callable) -> Callable:
    """The plain Python function behind ``fn`` (unwraps Numba dispatchers)."""
    return fn.py_func if isinstance(fn, Dispatcher) else fn


def jit_lane(fn: Callable) -> Dispatcher:
    """An ``njit`` dispatcher for ``fn`` whose helper calls are compiled too."""
    if isinstance(fn, Dispatcher):
        return fn
    cached = _jitted.get(fn)
    if cached is None:
        cached = numba.njit(**JIT_OPTIONS)(_rebind(fn))
        _jitted[fn] = cached
    return cached


def _rebind(fn: types.FunctionType) -> types.FunctionType:
    """A copy of ``fn`` whose plain-Python callees are replaced by dispatchers."""
    code = fn.__code__
    names = _all_names(code)
    new_globals = dict(fn.__globals__)
    for name in names:
        value = new_globals.get(name)
        if _is_plain_function(value):
            new_globals[name] = jit_lane(value)
    closure = fn.__closure__
    if closure:
        closure = tuple(_rebind_cell(c) for c in closure)
    clone = types.FunctionType(code, new_globals, fn.__name__, fn.__defaults__, closure)
    clone.__kwdefaults__ = fn.__kwdefaults__
    clone.__qualname__ = fn.__qualname__
    # Numba records a function's module by name and re-imports it when it loads
    # cached code; functions from unimportable places get a stand-in module.
    clone.__module__ = fn.__module__ if inspect.getmodule(fn) is not None else _STANDIN.__name__
    return clone


def _rebind_cell(cell: types.CellType) -> types.CellType:
    try:
        value = cell.cell_contents
    except ValueError:  # an empty cell (variable not yet bound): leave as is
        return cell
    return types.CellType(jit_lane(value)) if _is_plain_function(value) else cell


def _is_plain_function(value: Any) -> bool:
    # Functions lanewise implements for Numba itself (via @overload) stay as they are.
    return isinstance(value, types.FunctionType) and not getattr(value, "_lw_intrinsic", False)


def _all_names(code: types.CodeType) -> set[str]:
    """Global/attribute names used by ``code`` and the code objects nested in it."""
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _all_names(const)
    return names


# --------------------------------------------------------------------------- fingerprint


class Unfingerprintable(Exception):
    """A lane reaches a value whose effect on compiled code cannot be hashed."""


def fingerprint(fn: Callable) -> str | None:
    """A stable hash of everything that determines ``fn``'s compiled code.

    Returns None when the lane reaches a value lanewise cannot hash (an
    arbitrary object): such lanes are cached in memory only, never stale on disk.
    """
    h = hashlib.sha256()
    try:
        _feed_function(h, python_function(fn), set())
    except Unfingerprintable:
        return None
    return h.hexdigest()[:32]


def _feed_function(h, fn: types.FunctionType, seen: set[int]) -> None:
    if id(fn) in seen:
        h.update(b"<recursion>")
        return
    seen.add(id(fn))
    if not isinstance(fn, types.FunctionType):
        raise Unfingerprintable(repr(fn))
    _feed_code(h, fn.__code__)
    _feed_value(h, fn.__defaults__, seen)
    _feed_value(h, fn.__kwdefaults__, seen)
    for cell in fn.__closure__ or ():
        try:
            _feed_value(h, cell.cell_contents, seen)
        except ValueError:
            h.update(b"<empty cell>")
    for name in sorted(_all_names(fn.__code__)):
        if name in fn.__globals__:
            h.update(b"G" + name.encode())
            _feed_value(h, fn.__globals__[name], seen)
        elif hasattr(builtins, name):
            h.update(b"B" + name.encode())


def _feed_code(h, code: types.CodeType) -> None:
    h.update(code.co_code)
    h.update(repr((code.co_names, code.co_varnames, code.co_freevars, code.co_argcount,
                   code.co_kwonlyargcount, code.co_flags)).encode())
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            _feed_code(h, const)
        else:
            h.update(repr(const).encode())


_SIMPLE = (int, float, complex, bool, str, bytes, type(None), np.number, np.bool_)


def _feed_value(h, value: Any, seen: set[int]) -> None:
    if isinstance(value, _SIMPLE):
        h.update(f"{type(value).__name__}:{value!r}".encode())
    elif isinstance(value, (tuple, list)):
        h.update(f"seq{len(value)}".encode())
        for v in value:
            _feed_value(h, v, seen)
    elif isinstance(value, dict):
        for k in sorted(value, key=repr):
            h.update(repr(k).encode())
            _feed_value(h, value[k], seen)
    elif isinstance(value, types.ModuleType):
        h.update(f"module:{value.__name__}".encode())
    elif isinstance(value, Dispatcher):
        _feed_function(h, value.py_func, seen)
    elif isinstance(value, types.FunctionType):
        _feed_function(h, value, seen)
    elif isinstance(value, (types.BuiltinFunctionType, type, np.ufunc)):
        h.update(f"obj:{getattr(value, '__module__', '')}.{getattr(value, '__qualname__', value)}".encode())
    elif isinstance(value, np.ndarray):
        h.update(f"arr:{value.dtype}:{value.shape}".encode())
        h.update(np.ascontiguousarray(value).tobytes())
    else:
        raise Unfingerprintable(repr(value))
