"""``np.where`` for scalars inside lanes: a scalar, as JAX users expect.

NumPy (and Numba) return a 0-d array for ``np.where(c, a, b)`` with scalar
arguments, so ``abs(np.where(x > 0, x, 0.0))`` did not compile in a lane.
Lanes compute on scalars: this ``where`` gives ``a if c else b`` in the two
values' common type (Numba's, which is NumPy's for two scalars), and is
``np.where`` itself for arrays.  It is the lane's ``np.where`` with
``lw.config.vector_math`` on (the default), like the other lanemath stand-ins.

Example:
    >>> import numba
    >>> f = numba.njit(lambda x: abs(where(x > 0, x, 0.0)))
    >>> f(-2.0), f(3.0)
    (0.0, 3.0)
"""

from __future__ import annotations

import numpy as np
from numba.core import types
from numba.extending import overload


def where(condition, x=None, y=None):
    """``np.where``; in compiled lanes, scalars in give a scalar out."""
    if x is None and y is None:
        return np.where(condition)
    return np.where(condition, x, y)


def _scalar(t) -> bool:
    return isinstance(t, (types.Number, types.Boolean))


@overload(where, jit_options={"error_model": "numpy"}, inline="always")
def _where(condition, x=None, y=None):
    if _scalar(condition) and _scalar(x) and _scalar(y):
        return _scalar_impl(_common_type(x, y))
    if x is None or isinstance(x, (types.NoneType, types.Omitted)):
        return lambda condition, x=None, y=None: np.where(condition)
    return lambda condition, x=None, y=None: np.where(condition, x, y)


def _common_type(x, y):
    """The type NumPy gives ``np.where(c, x, y)`` for scalars ``x``, ``y``."""
    from numba.np.numpy_support import as_dtype, from_dtype

    return from_dtype(np.result_type(as_dtype(types.unliteral(x)), as_dtype(types.unliteral(y))))


def _scalar_impl(common):
    def impl(condition, x=None, y=None):
        return common(x) if condition else common(y)
    return impl
