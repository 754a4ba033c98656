"""What a compiled lane froze: the user values it read, checked again on every call.

Numba compiles the values of the globals a lane reads into its code (an array
becomes a constant), and a ``lw.vmap`` or ``lw.reduce`` object keeps its
compiled kernels.  So a value changed after the first call — a global rebound,
an array mutated in place, ``cfg.SCALE = 2``, a closure variable reassigned —
did not reach the next call of the same object, while the ``python`` backend
(the spec) read the new value: a silently stale result.  The disk and memory
caches were keyed soundly (:func:`lanewise.lane.fingerprint.fingerprint`); the
object's own table of executables was not.

:func:`watch` lists every user value the lane reaches, as the fingerprint does
(globals and closure cells of the lane and of its helpers, attributes of user
modules it reads, defaults), with a snapshot of each array's bytes.  The objects
check the list before each call and drop their executables when something
changed: the next call builds afresh, and the caches, keyed by the new
fingerprint, serve or compile the matching kernel.  Values of pinned modules
(NumPy, ``math``, lanewise) are not watched.  The cost per call is a
dictionary look-up per watched name, plus a SHA-256 of each watched array's
buffer, hashed in place (about as fast as copying it, and no snapshot kept: a
1 GB table does not cost another GB), and nothing at all for a lane that reads
no user value.

Example:
    >>> import numpy as np
    >>> TABLE = np.array([1.0, 2.0])
    >>> w = watch(lambda x: x * TABLE[0])
    >>> w.changed()
    False
    >>> TABLE[0] = 3.0
    >>> w.changed()
    True
"""

from __future__ import annotations

import hashlib
import types
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from ..dtypes import cell_contents, code_names

_MISSING = object()

# Numba freezes a global array into compiled code by its address, not its bytes,
# when it is larger than this or not contiguous ("dynamic globals"); such code
# cannot be saved to its disk cache.  (numba.core.base: ``make_constant_array``.)
NUMBA_ADDRESS_GLOBAL_BYTES = 10**6


@dataclass(frozen=True)
class _Entry:
    """One value the compiled code froze: ``read()`` gives its current binding."""

    name: str  # as the user's code spells it
    read: Callable[[], Any]
    value: Any
    data: bytes | None  # an array's layout and digest when watched (None: identity alone)

    def changed(self) -> bool:
        now = self.read()
        if now is not self.value:
            return True
        return self.data is not None and _digest(now) != self.data


@dataclass(frozen=True)
class Watch:
    """The values one build of a lane froze (see the module docstring)."""

    entries: tuple[_Entry, ...]

    def changed(self) -> bool:
        """Whether any watched binding or array changed since :func:`watch` ran."""
        return any(entry.changed() for entry in self.entries)


def watch(fn: Callable) -> Watch | None:
    """The watch list of the user values ``fn`` reaches; None when there is none.
    (Called when a kernel is built: what it imports is not paid by ``import lanewise``.)"""
    from .lanefn import python_function

    entries: list[_Entry] = []
    _function(python_function(fn), set(), entries)
    return Watch(tuple(entries)) if entries else None


def _function(fn, seen: set[int], out: list) -> None:
    if not isinstance(fn, types.FunctionType) or id(fn) in seen:
        return
    seen.add(id(fn))
    names = code_names(fn.__code__)
    for free, cell in zip(fn.__code__.co_freevars, fn.__closure__ or (), strict=True):
        value = cell_contents(cell, _MISSING)
        if value is _MISSING:  # an empty cell: nothing was frozen
            continue
        _bind(free, lambda c=cell: cell_contents(c, _MISSING), value, names, seen, out)
    if fn.__defaults__:
        _bind(f"the defaults of {fn.__qualname__}", lambda f=fn: f.__defaults__, fn.__defaults__, names, seen, out)
    space = fn.__globals__
    for name in sorted(n for n in names if n in space):
        _bind(name, lambda s=space, n=name: s.get(n, _MISSING), space[name], names, seen, out)


def _bind(name: str, read, value, names, seen: set[int], out: list) -> None:
    """Watch the binding ``read()`` (now ``value``) unless it is pinned, and what it reaches."""
    if _is_pinned(value):
        return
    out.append(_Entry(name, read, value, _bytes(value)))
    _reach(name, value, names, seen, out)


def _reach(name: str, value, names, seen: set[int], out: list) -> None:
    from numba.core.dispatcher import Dispatcher

    if isinstance(value, Dispatcher):
        _function(value.py_func, seen, out)
    elif isinstance(value, types.FunctionType):
        _function(value, seen, out)
    elif isinstance(value, types.ModuleType) and id(value) not in seen:
        seen.add(id(value))
        space = vars(value)
        for attr in sorted(n for n in names if n in space):
            _bind(f"{name}.{attr}", lambda s=space, n=attr: s.get(n, _MISSING), space[attr], names, seen, out)
    elif isinstance(value, tuple):
        for k, item in enumerate(value):  # immutable, but an array inside it is not
            if isinstance(item, (np.ndarray, tuple)):
                _bind(f"{name}[{k}]", lambda v=item: v, item, names, seen, out)


def big_global_arrays(fn: Callable) -> list[str]:
    """The names of the arrays ``fn`` reads from its globals that Numba compiles in by
    address (over 1 MB, or not contiguous), which keeps a kernel off the disk cache.

    Example:
        >>> BIG = np.zeros(200_000)
        >>> big_global_arrays(lambda i: BIG[i])
        ['BIG']
    """
    found = watch(fn)
    return [e.name for e in found.entries if isinstance(e.value, np.ndarray) and _frozen_by_address(e.value)] \
        if found else []


def _frozen_by_address(array: np.ndarray) -> bool:
    contiguous = array.flags.c_contiguous or array.flags.f_contiguous
    return array.nbytes > NUMBA_ADDRESS_GLOBAL_BYTES or not contiguous


def _bytes(value) -> bytes | None:
    return _digest(value) if isinstance(value, np.ndarray) else None


def _digest(array: np.ndarray) -> bytes:
    """The layout (an in-place ``a.shape = ...`` or ``a.dtype = ...`` keeps the object)
    and a SHA-256 of the contents of ``array``."""
    layout = repr((array.shape, array.strides, array.dtype.str)).encode()
    return layout + hashlib.sha256(np.ascontiguousarray(array).data).digest()


def _is_pinned(value) -> bool:
    """Values whose definition the versions in the cache key pin (NumPy, ``math``, lanewise)."""
    from .fingerprint import pinned

    if isinstance(value, types.ModuleType):
        return pinned(types.SimpleNamespace(__module__=value.__name__))
    return not isinstance(value, (np.ndarray, tuple)) and callable(value) and pinned(value)
