"""``z / w`` of complex numbers with NumPy's answers, division by zero included.

Numba divides complex numbers with CPython's algorithm, which raises
``ZeroDivisionError("complex division by zero")`` for ``w == 0`` (``z / 0j``,
``z / 0.0``, ``x / w``), where NumPy 2, and a lane run by ``backend="python"``
(whose values are NumPy scalars), give IEEE results (``(1+2j) / 0j`` is
``inf+infj``, ``(-1+0j) / 0j`` is ``-inf+nanj``).  CPython's algorithm also
divides by the denominator where NumPy multiplies by its reciprocal, so the two
could differ by an ulp for ordinary divisors.

This module registers, for every complex signature of ``/`` and ``/=``, the
implementation Numba's own ``np.divide`` of complex numbers uses (NumPy's
``loops.c.src``, Smith's algorithm), so a lane's ``z / w`` gives ``np.divide(z,
w)``'s bits.  Numba prefers the implementation registered last for a signature:
the fix holds for any Numba code in the process once :mod:`lanewise.lanemath` is
imported (a lane's first compile imports it), as :mod:`.intpower`'s does.

Example:
    >>> import numba
    >>> numba.njit(lambda z, w: z / w)(1 + 2j, 0j)
    (inf+infj)
"""

from __future__ import annotations

import operator

from numba.core import types
from numba.core.imputils import impl_ret_untracked, lower_builtin
from numba.np.npyfuncs import np_complex_div_impl


def _complex_div(context, builder, sig, args):
    """NumPy's complex division, for an operator's signature (two complex operands)."""
    res = np_complex_div_impl(context, builder, sig, args)
    return impl_ret_untracked(context, builder, sig.return_type, res)


for _op in (operator.truediv, operator.itruediv):
    lower_builtin(_op, types.Complex, types.Complex)(_complex_div)
