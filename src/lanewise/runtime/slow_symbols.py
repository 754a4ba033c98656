"""Addresses for lanemath's slow paths, given at ``import lanewise`` (before any kernel loads).

Generated code calls each slow function (Payne-Hanek trig reduction...) through a
pointer, the data symbol ``lanewise_lanemath_<name>_ptr`` (see
:mod:`lanewise.lanemath._slowpath`).  Object code from Numba's disk cache links
that symbol by name, so it must exist in every process that loads a kernel: this
module is small and imported by ``lanewise/__init__``; lanemath itself (85 ms to
import) is imported only when a slow function is first compiled.

Example:
    >>> from lanewise.runtime import slow_symbols
    >>> slow_symbols.register_symbols()
    >>> sorted(slow_symbols.SLOW_FUNCTIONS)[0]
    'cos_slow_f64'
"""

from __future__ import annotations

import ctypes
import importlib
import threading
import warnings

import numba
from llvmlite import binding as llvm
from numba import types

from .cache import own_cache

#: The slow functions, by name: the module defining each (imported when first
#: needed) and the name of its plain-Python implementation there.
SLOW_FUNCTIONS = {
    "sin_slow_f64": ("lanewise.lanemath.trig", "_sin_slow_impl"),
    "cos_slow_f64": ("lanewise.lanemath.trig", "_cos_slow_impl"),
    "tan_slow_f64": ("lanewise.lanemath.trig", "_tan_slow_impl"),
}
_C_DOUBLE_FN = ctypes.CFUNCTYPE(ctypes.c_double, ctypes.c_double)
_cells: dict[str, ctypes.c_void_p] = {}
_keep_alive: list = []
_bound: dict = {}
_bind_lock = threading.Lock()


def pointer_symbol(name: str) -> str:
    """The data symbol holding slow function ``name``'s address."""
    return f"lanewise_lanemath_{name}_ptr"


def register_symbols() -> None:
    """Give every slow function's pointer symbol its address (idempotent): the
    pointer starts at a trampoline that compiles the function on its first call."""
    for name in SLOW_FUNCTIONS:
        if name in _cells:
            continue
        trampoline = _C_DOUBLE_FN(lambda x, name=name: _first_call(name, x))
        cell = ctypes.c_void_p(ctypes.cast(trampoline, ctypes.c_void_p).value)
        _keep_alive.append(trampoline)
        _cells[name] = cell
        llvm.add_symbol(pointer_symbol(name), ctypes.addressof(cell))


def bind(name: str):
    """Compile slow function ``name`` (or load it from the disk cache) and point its
    pointer at it; the ``cfunc``.  Callers that must not call back into Python
    (the XLA handler) bind first."""
    register_symbols()
    with _bind_lock:
        if name not in _bound:
            module, attr = SLOW_FUNCTIONS[name]
            impl = getattr(importlib.import_module(module), attr)
            _bound[name] = numba.cfunc(types.float64(types.float64), cache=own_cache(), error_model="numpy",
                                       nogil=True)(impl)
            _cells[name].value = _bound[name].address
        return _bound[name]


def bind_all() -> None:
    """:func:`bind` every slow function."""
    for name in SLOW_FUNCTIONS:
        bind(name)


def _first_call(name: str, x: float) -> float:
    """The trampoline's body (a ctypes callback: it must not raise)."""
    try:
        return bind(name).ctypes(x)
    except BaseException as e:  # noqa: BLE001 - nothing can propagate out of a C callback
        warnings.warn(f"lanewise could not compile its {name} slow path ({type(e).__name__}: {e}); "
                      "the result is NaN", RuntimeWarning, stacklevel=1)
        return float("nan")
