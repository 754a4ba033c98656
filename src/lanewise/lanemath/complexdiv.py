"""``z / w`` of complex numbers with NumPy's answers, division by zero included.

Numba divides complex numbers with CPython's algorithm, which raises
``ZeroDivisionError("complex division by zero")`` for ``w == 0`` (``z / 0j``,
``z / 0.0``, ``x / w``), where NumPy 2, and a lane run by ``backend="python"``
(whose values are NumPy scalars), give IEEE results (``(1+2j) / 0j`` is
``inf+infj``, ``(-1+0j) / 0j`` is ``-inf+nanj``).  CPython's algorithm also
divides by the denominator where NumPy multiplies by its reciprocal, so the two
could differ by an ulp for ordinary divisors.

This module registers, for every complex signature of ``/`` and ``/=``, NumPy's
algorithm (its ``loops.c.src``, Smith's), so a lane's ``z / w`` gives NumPy's bits.
Numba prefers the implementation registered last for a signature:
the fix holds for any Numba code in the process once :mod:`lanewise.lanemath` is
imported (a lane's first compile imports it), as :mod:`.intpower`'s does.

Example:
    >>> import numba
    >>> numba.njit(lambda z, w: z / w)(1 + 2j, 0j)
    (inf+infj)
"""

from __future__ import annotations

import operator

from llvmlite import ir
from numba.core import types
from numba.core.imputils import impl_ret_untracked, lower_builtin


def _complex_div(context, builder, sig, args):
    """NumPy's ``loops.c.src`` complex division (Smith's algorithm, multiplying by the
    reciprocal), in the operands' float type.  Numba's own copy of it (``np.divide``)
    takes ``|x|`` with ``x < 0 ? -x : x``, which keeps -0.0 negative: ``(3-4j) / -0j``
    gave -inf+infj, NumPy inf-infj; :func:`_fabs` clears the sign."""
    a, b = (context.make_complex(builder, t, value=v) for t, v in zip(sig.args, args, strict=True))
    ftype = a.real.type
    one = ir.Constant(ftype, 1.0)
    out = context.make_complex(builder, sig.return_type)
    br_abs, bi_abs = _fabs(builder, b.real), _fabs(builder, b.imag)
    with builder.if_else(builder.fcmp_ordered(">=", br_abs, bi_abs)) as (real_larger, imag_larger):
        with real_larger:
            zero = builder.fcmp_ordered("==", br_abs, ir.Constant(ftype, 0.0))
            with builder.if_else(zero) as (by_zero, general):
                with by_zero:  # inf/nan parts, as IEEE division by +0 gives them
                    out.real = builder.fdiv(a.real, br_abs)
                    out.imag = builder.fdiv(a.imag, br_abs)
                with general:
                    rat = builder.fdiv(b.imag, b.real)
                    scl = builder.fdiv(one, builder.fadd(b.real, builder.fmul(b.imag, rat)))
                    out.real = builder.fmul(builder.fadd(a.real, builder.fmul(a.imag, rat)), scl)
                    out.imag = builder.fmul(builder.fsub(a.imag, builder.fmul(a.real, rat)), scl)
        with imag_larger:
            rat = builder.fdiv(b.real, b.imag)
            scl = builder.fdiv(one, builder.fadd(b.imag, builder.fmul(b.real, rat)))
            out.real = builder.fmul(builder.fadd(builder.fmul(a.real, rat), a.imag), scl)
            out.imag = builder.fmul(builder.fsub(builder.fmul(a.imag, rat), a.real), scl)
    return impl_ret_untracked(context, builder, sig.return_type, out._getvalue())


def _fabs(builder, x):
    """``|x|`` with the sign bit cleared (-0.0 too): plain bit operations, which every
    target (NVVM included, which refused the ``llvm.fabs`` declaration) compiles."""
    bits = _int_like(x.type)
    mask = ir.Constant(bits, (1 << (bits.width - 1)) - 1)
    return builder.bitcast(builder.and_(builder.bitcast(x, bits), mask), x.type)


def _int_like(ftype):
    return ir.IntType(64 if isinstance(ftype, ir.DoubleType) else 32)


for _op in (operator.truediv, operator.itruediv):
    lower_builtin(_op, types.Complex, types.Complex)(_complex_div)
