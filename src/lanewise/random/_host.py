"""The host side of lw.random's public functions: each is a Numba dispatcher that
compiles its in-lane version (:mod:`._lanes`) for Numba code and runs a host
version with argument checks for Python (:func:`compiled_as`); the checks here
read a key, an integer or a real number as the host versions take them.

Example:
    >>> host_key((1, 2**32 + 3), "bits")
    (1, 3)
"""

from __future__ import annotations

import functools
import importlib
import operator

import numpy as np
from numba.core.registry import CPUDispatcher

from . import _core

MASK32 = 0xFFFFFFFF
MASK64 = 0xFFFFFFFFFFFFFFFF


class _Dual(CPUDispatcher):
    """A public lw.random function: compiled (and inlined) when Numba code calls
    it, a host function with argument checks when Python calls it."""

    _lw_intrinsic = True  # lanewise.lane.lanefn: already compiled, do not re-jit

    def __init__(self, lane_impl, host):
        super().__init__(lane_impl, targetoptions=dict(nopython=True, **_core.JIT))
        functools.update_wrapper(self, host)  # name, docstring, signature of the host
        self._host = host

    def __call__(self, *args, **kwargs):
        return self._host(*args, **kwargs)

    def __reduce__(self):  # pickle by reference (dask ships lanes to workers)
        return _public, (self.__name__,)

    def __repr__(self) -> str:
        return f"<lanewise.random.{self.__name__}>"


def _public(name: str):
    return getattr(importlib.import_module("lanewise.random"), name)


def compiled_as(lane_impl):
    """Decorator: the host function becomes a dispatcher compiling ``lane_impl``."""
    return lambda host: _Dual(lane_impl, host)


def host_key(k, fn: str) -> tuple[int, int]:
    """A host key (array or 2-sequence of ints) as two Python ints < 2**32."""
    if isinstance(k, np.ndarray):
        if k.shape == (2,) and k.dtype.kind in "iu":
            return int(k[0]) & MASK32, int(k[1]) & MASK32
    elif isinstance(k, (tuple, list)) and len(k) == 2:
        try:
            return operator.index(k[0]) & MASK32, operator.index(k[1]) & MASK32
        except TypeError:
            pass
    what = f"array of shape {k.shape} and dtype {k.dtype}" if isinstance(k, np.ndarray) else repr(k)
    hint = "; map over a batch of keys with lw.vmap" if getattr(k, "ndim", 0) == 2 else ""
    raise TypeError(f"lw.random.{fn}: a key is a uint32 array of shape (2,) (from key/split) or "
                    f"a tuple of two ints (from fold_in), got {what}{hint}")


def int64ish(value, fn: str, name: str) -> int:
    """An integer in [-2**63, 2**64), reduced modulo 2**64."""
    if isinstance(value, (bool, np.bool_)):
        raise TypeError(f"lw.random.{fn}: {name} must be an integer, got a bool")
    try:
        v = operator.index(value)
    except TypeError:
        raise TypeError(f"lw.random.{fn}: {name} must be an integer, got "
                        f"{type(value).__name__} {value!r}") from None
    if not -(1 << 63) <= v < (1 << 64):
        raise ValueError(f"lw.random.{fn}: {name} must be in [-2**63, 2**64), got {v}")
    return v & MASK64


def int64(value, fn: str, name: str) -> int:
    """An integer in int64's range."""
    int64ish(value, fn, name)  # type and range checks
    v = operator.index(value)
    if v >= 1 << 63:
        raise ValueError(f"lw.random.{fn}: {name} must fit in int64, got {v}")
    return v


def real(value, fn: str, name: str) -> float:
    real = isinstance(value, (int, float, np.integer, np.floating))
    if isinstance(value, (bool, np.bool_)) or not real:
        raise TypeError(f"lw.random.{fn}: {name} must be a real number, got {type(value).__name__}")
    return float(value)
