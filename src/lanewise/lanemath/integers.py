"""``np.sign`` and ``np.reciprocal`` with NumPy's answers for unsigned integers.

Numba computes both wrongly for some unsigned values, silently:

* ``np.sign(np.uint8(200))`` is 255: the value is compared as a signed integer
  (-56 < 0) and -1 wraps (NumPy: 1); the same for every unsigned value of
  2**(bits-1) or more (``np.uint64(2**63)`` gave 2**64 - 1);
* ``np.reciprocal(np.uint64(0))`` is 2**64 - 1 (NumPy: 0).

A lane's ``np.sign``/``np.reciprocal`` are rebound to the functions here, with or
without vector math (:func:`lanewise.lanemath.corrected`), and the SPMD path calls
them too.  Every other argument (signed integers, floats, complex values) goes to
Numba's ufunc unchanged.

Example:
    >>> import numba, numpy as np
    >>> numba.njit(lambda v: sign(v))(np.uint8(200))
    1
    >>> int(numba.njit(lambda v: reciprocal(v))(np.uint64(0)))
    0
"""

from __future__ import annotations

import numba
import numpy as np
from numba.core import types
from numba.extending import overload


def sign(x):
    """``np.sign(x)``; compiled, also right for unsigned integers >= 2**(bits-1)."""
    return np.sign(x)


def reciprocal(x):
    """``np.reciprocal(x)``; compiled, also right for an unsigned 0 (NumPy's 0)."""
    return np.reciprocal(x)


def _unsigned(t) -> bool:
    return isinstance(t, types.Integer) and not t.signed


@numba.njit(inline="always")
def _sign_of(v, t):
    return t(1) if v != 0 else t(0)


@numba.njit(inline="always")
def _reciprocal_of(v, t):
    return t(1) if v == 1 else t(0)


def _implementation(x, scalar, ufunc):
    """``scalar(element, its Numba type)`` for an unsigned scalar or each element of an
    unsigned array; Numba's ``ufunc`` for everything else."""
    if _unsigned(x):
        x_type = x
        return lambda x: scalar(x, x_type)
    if isinstance(x, types.Array) and _unsigned(x.dtype):
        element = x.dtype

        def each(x):
            out = np.empty_like(x)
            for index in np.ndindex(x.shape):
                out[index] = scalar(x[index], element)
            return out

        return each
    return lambda x: ufunc(x)


@overload(sign)
def _sign(x):
    return _implementation(x, _sign_of, np.sign)


@overload(reciprocal)
def _reciprocal(x):
    return _implementation(x, _reciprocal_of, np.reciprocal)
