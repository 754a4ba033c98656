"""The public functions: one Python function per name, typed by Numba overloads.

Each public function (``lanemath.cos`` ...) is a plain Python function registered with
``numba.extending.overload``, so Numba code calling it picks the implementation by
argument type at compile time:

* float64 -> the float64 kernel; float32 -> the float32 kernel (returns float32);
* integers and booleans -> promoted to float64, as ``math`` does;
* arrays and complex values -> the NumPy ufunc of the same name (so ``np.cos(row)``
  in a lane that was rebound to lanemath still works on a row view, and ``np.exp(z)``
  on a complex ``z``).

Called from the interpreter, the function runs the same compiled code (a small
``njit`` wrapper compiled on first use per type), so results are identical.
"""

from __future__ import annotations

import numba
import numpy as np
from numba import types
from numba.extending import overload

from ._core import KERNEL, kernel, public

#: name -> public function
FUNCTIONS: dict = {}
#: name -> its (float64, float32) kernels (:class:`_Public`)
KERNELS: dict = {}

_OVERLOAD_OPTIONS = dict(jit_options=KERNEL, strict=False)


def _is_real_scalar(t):
    return isinstance(t, (types.Float, types.Integer, types.Boolean))


def _float32_of(k64):
    """A float32 kernel evaluating the float64 kernel and rounding once.

    The float64 kernels are accurate to < 1 ulp of float64, so the float32 result is
    the correctly rounded one except in double-rounding cases (error <= 0.5 + 2**-28
    ulp of float32).
    """
    def k32(x):
        return np.float32(k64(np.float64(x)))
    return kernel(_named_after(k32, k64))


def _float32_of2(k64):
    def k32(x, y):
        return np.float32(k64(np.float64(x), np.float64(y)))
    return kernel(_named_after(k32, k64))


def _pair_float32_of(k64):
    def k32(x):
        a, b = k64(np.float64(x))
        return np.float32(a), np.float32(b)
    return kernel(_named_after(k32, k64))


def _named_after(k32, k64):
    """``k32`` named after the float64 kernel it calls: Numba's disk cache files a
    function by name and line, and every float32 variant is this one ``def``."""
    k32.__qualname__ = f"{k64.py_func.__qualname__}_float32"
    return k32


class _Public:
    """A public kernel's disk-cached dispatcher (:func:`._core.public`), made the
    first time a compile uses it: flattening its source takes milliseconds, too
    many to spend at import on a hundred kernels a lane rarely uses."""

    def __init__(self, k):
        self.kernel, self._dispatcher = k, None

    @property
    def dispatcher(self):
        if self._dispatcher is None:
            self._dispatcher = public(self.kernel)
        return self._dispatcher

    def direct(self):
        """The implementation an overload returns for arguments of the kernel's own
        types: its Python function, which the overload compiles with the kernel's
        options (and disk cache entries).  Not ``lambda x: k(x)``: that wrapper was one
        more function to type, optimise and emit on every cold first call (0.04 s a
        function)."""
        return self.dispatcher.py_func

    def promoting(self, nargs: int):
        """An implementation converting its ``nargs`` arguments to float64 first."""
        d = self.dispatcher
        if nargs == 1:
            return lambda x: d(np.float64(x))
        return lambda x, y: d(np.float64(x), np.float64(y))


def _scalar_impl(x, k32, k64):
    """A one-argument overload's implementation for a real scalar type ``x``
    (integers and booleans promote to float64, as ``math`` does)."""
    if isinstance(x, types.Float) and x.bitwidth in (32, 64):
        return (k32 if x.bitwidth == 32 else k64).direct()
    return k64.promoting(1)


def _interpreted(fn, nargs):
    """Compile-on-first-use njit wrapper so ``fn`` also works from the interpreter."""
    if nargs == 1:
        jitted = numba.njit(lambda x: fn(x))
    else:
        jitted = numba.njit(lambda x, y: fn(x, y))
    return jitted


def _box(result, x):
    """Numba returns float32 results to Python as float; keep NumPy's float32 type."""
    if isinstance(x, np.float32):
        if isinstance(result, tuple):
            return tuple(np.float32(r) for r in result)
        return np.float32(result)
    return result


def unary(name, k64, k32=None, ufunc=None, doc=""):
    """Define the public one-argument function ``name``."""
    k32 = _Public(k32 if k32 is not None else _float32_of(k64))
    k64 = _Public(k64)
    cache = []

    def fn(x):
        if not cache:
            cache.append(_interpreted(fn, 1))
        return _box(cache[0](x), x)

    fn.__name__ = fn.__qualname__ = name
    fn.__module__ = "lanewise.lanemath"
    fn.__doc__ = doc or f"{name}(x) for one float64/float32 scalar; vectorisable inside loops."

    @overload(fn, **_OVERLOAD_OPTIONS)
    def _ov(x):
        if _is_real_scalar(x):
            return _scalar_impl(x, k32, k64)
        if ufunc is not None and isinstance(x, (types.Array, types.Complex)):
            return lambda x: ufunc(x)  # complex values: NumPy's own (lanemath is real)
        return None

    FUNCTIONS[name] = fn
    KERNELS[name] = (k64, k32)
    return fn


def binary(name, k64, k32=None, ufunc=None, doc="", int_impl=None):
    """Define the public two-argument function ``name`` (float32 only if both are float32)."""
    k32 = _Public(k32 if k32 is not None else _float32_of2(k64))
    k64 = _Public(k64)
    cache = []

    def fn(x, y):
        if not cache:
            cache.append(_interpreted(fn, 2))
        r = cache[0](x, y)
        return np.float32(r) if isinstance(x, np.float32) and isinstance(y, np.float32) else r

    fn.__name__ = fn.__qualname__ = name
    fn.__module__ = "lanewise.lanemath"
    fn.__doc__ = doc or f"{name}(x, y) for float64/float32 scalars; vectorisable inside loops."

    @overload(fn, **_OVERLOAD_OPTIONS)
    def _ov(x, y):
        if _is_real_scalar(x) and _is_real_scalar(y):
            if int_impl is not None and not isinstance(x, types.Float) and not isinstance(y, types.Float):
                return int_impl
            if (isinstance(x, types.Float) and x.bitwidth == 32
                    and isinstance(y, types.Float) and y.bitwidth == 32):
                return k32.direct()
            if x == y == types.float64:
                return k64.direct()
            return k64.promoting(2)
        if ufunc is not None and any(isinstance(t, (types.Array, types.Complex)) for t in (x, y)):
            return lambda x, y: ufunc(x, y)  # complex values: NumPy's own (lanemath is real)
        return None

    FUNCTIONS[name] = fn
    KERNELS[name] = (k64, k32)
    return fn


def pair(name, k64, k32=None, doc=""):
    """Define a one-argument function returning a pair (``sincos``)."""
    k32 = _Public(k32 if k32 is not None else _pair_float32_of(k64))
    k64 = _Public(k64)
    cache = []

    def fn(x):
        if not cache:
            cache.append(_interpreted(fn, 1))
        return _box(cache[0](x), x)

    fn.__name__ = fn.__qualname__ = name
    fn.__module__ = "lanewise.lanemath"
    fn.__doc__ = doc

    @overload(fn, **_OVERLOAD_OPTIONS)
    def _ov(x):
        if _is_real_scalar(x):
            return _scalar_impl(x, k32, k64)
        return None

    FUNCTIONS[name] = fn
    KERNELS[name] = (k64, k32)
    return fn
