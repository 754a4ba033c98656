"""``np.median`` with NumPy's answers, which Numba's does not give, silently; ``np.dot``
of two integer rows, which Numba's does not compile.

Numba's ``np.median`` selects the middle elements with comparisons that NaN
breaks (``np.median([5.0, 1.0, 2.0, nan])`` gave 3.5 where NumPy gives nan,
depending on where the NaN sits) and averages two middle integers in the
integers' own type, which overflows (``np.median([2**62 + 1, 2**62 + 3])`` gave
-4.6e18).  NumPy's median is nan when any element is nan, and otherwise the
mean of the middle elements as ``np.mean`` computes it: in float64 for integers
(each converted first), in the array's own type for floats (float32 stays
float32).

Numba's ``np.dot`` takes float and complex arrays only; NumPy's dot of two integer
rows is exact and keeps their type, wrapping at its width (two int8 rows give an
int8), which :func:`dot` computes.

A lane's ``np.median`` and ``np.dot`` are rebound to :func:`median` and :func:`dot`
(lanemath.CORRECTIONS), with or without vector math.

Example:
    >>> import numba, numpy as np
    >>> float(numba.njit(lambda a: median(a))(np.array([5.0, 1.0, 2.0, np.nan])))
    nan
    >>> float(numba.njit(lambda a: median(a))(np.array([2**62 + 1, 2**62 + 3])))
    4.611686018427388e+18
"""

from __future__ import annotations

import numba
import numpy as np
from numba.core import types
from numba.extending import overload
from numba.np import numpy_support
from numba.np.arraymath import _select, _select_two


def median(a):
    """``np.median(a)`` of a whole array; compiled, NumPy's value (module docstring).

    >>> float(median(np.array([3, 1, 2])))
    2.0
    """
    return np.median(a)


@numba.njit(inline="always")
def _middle(a):
    """The middle element(s) of ``a`` flattened: (low, high, odd), by Numba's own
    selection (in place on a copy), as its median does; NaN-free floats only."""
    b = a.flatten()
    n = b.size
    half = n >> 1
    if n & 1:
        v = _select(b, half, 0, n - 1)
        return v, v, True
    low, high = _select_two(b, half - 1, 0, n - 1)
    return low, high, False


@numba.njit(inline="always")
def _has_nan(a):
    for v in a.flat:
        if np.isnan(v):
            return True
    return False


@numba.njit(inline="always")
def _float_median(a, t):
    if a.size == 0 or _has_nan(a):
        return t(np.nan)
    low, high, odd = _middle(a)
    return high if odd else t((low + high) / t(2))


@numba.njit(inline="always")
def _integer_median(a):
    if a.size == 0:
        return np.nan
    low, high, odd = _middle(a)
    return np.float64(high) if odd else (np.float64(low) + np.float64(high)) / 2.0


@overload(median)
def _median(a):
    if isinstance(a, types.Array) and isinstance(a.dtype, types.Float):
        t = a.dtype
        return lambda a: _float_median(a, t)
    if isinstance(a, types.Array) and isinstance(a.dtype, types.Integer):
        return lambda a: _integer_median(a)
    return lambda a: np.median(a)


def dot(a, b):
    """``np.dot(a, b)``; compiled, also of two 1-D integer arrays (module docstring).

    >>> int(dot(np.array([100, 100], np.int8), np.array([1, 2], np.int8)))
    44
    """
    return np.dot(a, b)


@numba.njit(inline="always")
def _integer_dot(a, b, wide, t):
    # In 64 bits of the result's signedness, then cast: arithmetic modulo 2**64 reduced
    # to t's width is NumPy's sum wrapping at that width after every step.
    if a.shape[0] != b.shape[0]:
        raise ValueError("np.dot of two integer rows of different lengths")
    s = wide(0)
    for k in range(a.shape[0]):
        s += wide(a[k]) * wide(b[k])
    return t(s)


@overload(dot)
def _dot(a, b):
    if isinstance(a, types.Array) and isinstance(b, types.Array) and a.ndim == b.ndim == 1 \
            and isinstance(a.dtype, types.Integer) and isinstance(b.dtype, types.Integer):
        dtype = np.result_type(numpy_support.as_dtype(a.dtype), numpy_support.as_dtype(b.dtype))
        if dtype.kind in "iu":  # uint64 with a signed type is float64 in NumPy: Numba's error stays
            t = numpy_support.from_dtype(dtype)
            wide = types.int64 if dtype.kind == "i" else types.uint64
            return lambda a, b: _integer_dot(a, b, wide, t)
    return lambda a, b: np.dot(a, b)
