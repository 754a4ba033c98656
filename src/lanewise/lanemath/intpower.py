"""``a ** b`` of two integers, wrapping as NumPy does for every exponent.

Numba computes an integer power by squaring, but above an exponent of 65536 it
"falls back" on ``math.pow(a, float(b))`` and converts the float back: for any
base other than 0 and ±1 the result is garbage, silently (``np.int64(3) **
np.int64(2**31)`` gave -2**63, ``np.uint64(3) ** np.uint64(2**40)`` gave
2**64 - 1, where NumPy wraps modulo 2**bits).  A lane's ``n ** k`` and ``pow(n, k)``
of integers go through it, and so does its ``np.power(n, k)``
(:func:`lanewise.lanemath.integers.power`: Numba's own ``np.power`` of integers
computes in floating point, which this module does not change).

This module registers, for every pair of same-typed integers, Numba's own
implementation without that cutoff (at most 64 squarings, so no slower);
negative exponents keep Numba's behaviour (``docs/lanes.md``, L19).  Numba
prefers the implementation registered last for a signature, and the fix holds
for any Numba code in the process once :mod:`lanewise.lanemath` is imported (a
lane's first compile imports it).  A float base (``x ** n``) keeps Numba's
``math.pow`` above the cutoff, which is right for floats.

Example:
    >>> import numba, numpy as np
    >>> int(numba.njit(lambda a, b: a ** b)(np.int64(3), np.int64(2**31)))
    -7977717197575290879
    >>> int(np.int64(3) ** np.int64(2**31))
    -7977717197575290879
"""

from __future__ import annotations

import operator

from numba.core import types
from numba.core.imputils import impl_ret_untracked, lower_builtin
from numba.cpython.numbers import _get_power_zerodiv_return


def _int_power_impl(context, builder, sig, args):
    """Numba's ``int_power_impl`` for an integer base, without its float fallback."""
    tp = sig.return_type
    zerodiv_return = _get_power_zerodiv_return(context, tp)

    def int_power(a, b):
        r = tp(1)
        a = tp(a)
        if b < 0:  # as Numba: 0 ** -k, ±1 ** -k, and 0 for the rest
            exp = -b
            if exp < 0:
                raise OverflowError
            if a == 0:
                if zerodiv_return:
                    return zerodiv_return
                raise ZeroDivisionError("0 cannot be raised to a negative power")
            if a != 1 and a != -1:
                return 0
            return a if exp & 1 else tp(1)
        exp = b
        while exp != 0:
            if exp & 1:
                r *= a
            exp >>= 1
            a *= a
        return r

    res = context.compile_internal(builder, int_power, sig, args)
    return impl_ret_untracked(context, builder, sig.return_type, res)


for _ty in types.integer_domain:
    for _op in (operator.pow, operator.ipow, pow):
        lower_builtin(_op, _ty, _ty)(_int_power_impl)
