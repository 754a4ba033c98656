"""The fingerprint of a lane: a stable hash of everything that determines its
compiled code — its code, constants, defaults, closure values and every global
it reaches (helpers, classes, module attributes) — which keys the disk cache,
so editing a helper invalidates it.

Example:
    >>> def helper(v): return v + 1
    >>> def lane(x): return helper(x) * 2
    >>> key = fingerprint(lane)
    >>> len(key), key == fingerprint(lane)
    (32, True)
"""

from __future__ import annotations

import builtins
import enum
import hashlib
import sys
import types
from typing import Any, Callable

import numpy as np
from numba.core.dispatcher import Dispatcher

from ..dtypes import code_names


def python_function(fn: Callable) -> Callable:
    """The plain Python function behind ``fn`` (unwraps Numba dispatchers)."""
    return fn.py_func if isinstance(fn, Dispatcher) else fn


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
    names = code_names(fn.__code__)
    for cell in fn.__closure__ or ():
        try:
            _feed_value(h, cell.cell_contents, seen, names)
        except ValueError:
            h.update(b"<empty cell>")
    for name in sorted(names):
        if name in fn.__globals__:
            h.update(b"G" + name.encode())
            _feed_value(h, fn.__globals__[name], seen, names)
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


def _feed_value(h, value: Any, seen: set[int], names=frozenset()) -> None:
    """``names``: the names the code reading ``value`` uses (attributes included),
    for modules it reaches (:func:`_feed_module`).

    Every kind of value a lane can read is hashed by what Numba compiles from it:
    numbers by value, containers element by element (with their class: a
    namedtuple's fields are part of it), Enum members by class, name and value,
    classes by their definition, Numba dispatchers by their function *and* their
    options, modules by the attributes the code reads.  Anything else cannot be
    hashed soundly: the lane is then cached in memory only."""
    if isinstance(value, enum.Enum):
        h.update(f"enum:{value.name}".encode())
        _feed_class(h, type(value), seen)
    elif isinstance(value, _SIMPLE):
        h.update(f"{type(value).__name__}:{value!r}".encode())
    elif isinstance(value, (tuple, list)):
        h.update(f"seq{len(value)}".encode())
        if type(value) not in (tuple, list):
            _feed_class(h, type(value), seen)
        for v in value:
            _feed_value(h, v, seen)
    elif isinstance(value, dict):
        for k in sorted(value, key=repr):
            h.update(repr(k).encode())
            _feed_value(h, value[k], seen)
    elif isinstance(value, types.ModuleType):
        _feed_module(h, value, names, seen, ())
    elif isinstance(value, Dispatcher):
        h.update(repr(sorted(value.targetoptions.items())).encode())  # fastmath, error_model, ...
        _feed_function(h, value.py_func, seen)
    elif _pinned_function(value):
        # np.median, np.searchsorted (NumPy's dispatcher objects), lanewise's own
        # functions: their definitions are pinned by the versions in the key.
        h.update(f"pinned:{value.__module__}.{value.__qualname__}".encode())
    elif isinstance(value, types.FunctionType):
        _feed_function(h, value, seen)
    elif isinstance(value, type) and not pinned(value):
        _feed_class(h, value, seen)
    elif isinstance(value, (types.BuiltinFunctionType, type, np.ufunc)):
        h.update(f"obj:{getattr(value, '__module__', '')}.{getattr(value, '__qualname__', value)}".encode())
    elif isinstance(value, np.ndarray):
        h.update(f"arr:{value.dtype}:{value.shape}".encode())
        h.update(np.ascontiguousarray(value).tobytes())
    else:
        raise Unfingerprintable(repr(value))


def _pinned_function(value) -> bool:
    """A function (not a class, not a partial or bound object carrying data) defined by
    a pinned module, named by its qualified name.

    Only a definition found under that name in its module counts: a closure or a
    generated function that lanewise makes around the user's lane (a derivative
    lane calling it, a bridge's cotangent lane) carries the lane in its closure
    or globals, so it is hashed by its code and what it reaches, never by its name
    (named alone, an edited lane reused the derivatives of its old version)."""
    return (callable(value) and not isinstance(value, type) and pinned(value) and pinned(type(value))
            and isinstance(getattr(value, "__qualname__", None), str) and not hasattr(value, "__self__")
            and _defined_at_its_name(value))


def _defined_at_its_name(value) -> bool:
    found = sys.modules.get(value.__module__)
    for part in value.__qualname__.split("."):
        found = getattr(found, part, None)
    return found is value


def pinned(obj) -> bool:
    """Defined by a module whose version the cache key pins (its definition cannot change)."""
    return (getattr(obj, "__module__", None) or "").split(".")[0] in PINNED_MODULES


def _feed_class(h, cls: type, seen: set[int]) -> None:
    """A user class by its definition: name, bases, namedtuple fields, Enum members and
    the values and methods in its namespace (a name alone let an edited class reuse a
    kernel compiled from its old definition)."""
    h.update(f"class:{cls.__module__}.{cls.__qualname__}".encode())
    if id(cls) in seen or pinned(cls):
        return
    seen.add(id(cls))
    h.update(repr([f"{b.__module__}.{b.__qualname__}" for b in cls.__mro__[1:]]).encode())
    if issubclass(cls, enum.Enum):
        for member in cls:
            h.update(f"member:{member.name}".encode())
            _feed_value(h, member.value, seen)
    for name, value in sorted(vars(cls).items()):
        if name in ("__dict__", "__weakref__", "__doc__", "__module__", "_member_map_", "_value2member_map_",
                    "_member_names_", "_new_member_", "_unhashable_values_", "_value_repr_"):
            continue
        h.update(b"M" + name.encode())
        try:
            _feed_value(h, value, seen)
        except Unfingerprintable:  # descriptors, slots...: their type stands in
            h.update(f"<{type(value).__qualname__}>".encode())


#: Modules whose contents the cache key pins already (Python, NumPy, Numba and
#: lanewise versions): their attributes are not hashed one by one.
PINNED_MODULES = ("math", "cmath", "numpy", "numba", "lanewise", "builtins",
                   "enum", "collections", "typing", "abc", "functools", "operator", "dataclasses")


def _feed_module(h, module: types.ModuleType, names, seen: set[int], chain: tuple) -> None:
    """A module the code reads attributes of: its name and the value of each of
    its attributes the code could read (``cfg.SCALE``, ``helpers.f``).  Numba
    freezes such values into the compiled code, so editing one must change the
    key (a name alone once let a changed ``cfg.SCALE`` reuse the old kernel)."""
    h.update(f"module:{module.__name__}".encode())
    if module.__name__.split(".")[0] in PINNED_MODULES or id(module) in chain:
        return
    attrs = vars(module)
    for name in sorted(n for n in names if n in attrs):
        h.update(b"A" + name.encode())
        value = attrs[name]
        if isinstance(value, types.ModuleType):  # pkg.sub.CONST: the same names apply
            _feed_module(h, value, names, seen, chain + (id(module),))
        else:
            _feed_value(h, value, seen, names)
