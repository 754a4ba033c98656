"""``np.sign``, ``np.reciprocal``, ``np.fmod``, ``np.power``, ``np.round`` and ``round``
with NumPy's answers for integers (and ``np.sign`` of -0.0 and of complex numbers);
``np.floor_divide``, ``np.remainder`` and ``np.spacing`` with NumPy's answers for floats.

Numba computes them wrongly for some integers, silently:

* ``np.sign(np.uint8(200))`` is 255: the value is compared as a signed integer
  (-56 < 0) and -1 wraps (NumPy: 1); the same for every unsigned value of
  2**(bits-1) or more (``np.uint64(2**63)`` gave 2**64 - 1);
* ``np.reciprocal(np.uint64(0))`` is 2**64 - 1 (NumPy: 0);
* ``np.sign(-0.0)`` is -0.0 (NumPy: 0.0); ``np.sign`` of a complex number with an
  infinite part is nan+nanj (NumPy 2's ``z / |z|``: ``np.sign(1+infj)`` is 1j);
* ``np.spacing(-0.0)`` is -5e-324 (NumPy: 5e-324);
* ``np.fmod`` of signed integers with a negative operand: ``np.fmod(-7, 3)`` is 0,
  ``np.fmod(7, -3)`` is 7, ``np.fmod(-6, 3)`` is 1 (NumPy, C's remainder: -1, 1, 0);
* ``np.power`` of integers (scalars and arrays) is computed in floating point:
  ``np.power(3, 39)`` is 4052555153018976256 (NumPy: ...267), every result above
  2**53 is rounded, and a narrow or wrapped one is garbage.  (``n ** k`` itself
  is exact: :mod:`.intpower`.);
* ``round(n)``, ``round(n, 2)`` and ``np.round(n, 2)`` of an integer go through a float
  (``round(2**63 - 1)`` is -2**63; uint64 values >= 2**63 come out negative);
* ``np.floor_divide`` of floats is ``floor(x1 / x2)``: -0.0 for ``(-3.5, inf)``, -inf
  for ``(inf, -3.5)`` (NumPy: -1.0, nan); ``np.remainder`` of floats gives a zero
  remainder the wrong sign (``(-3.5, -3.5)``: 0.0, NumPy -0.0).

A lane's ``np.sign``/``np.reciprocal``/``np.fmod``/``np.power``/``np.round``/
``np.floor_divide``/``np.remainder``/``np.spacing`` (and the builtin ``round``) are
rebound to the functions here, with or without vector math
(:func:`lanewise.lanemath.corrected`), and the SPMD path calls them too.  Every
argument they do not correct goes to Numba's own function unchanged.

Example:
    >>> import numba, numpy as np
    >>> numba.njit(lambda v: sign(v))(np.uint8(200))
    1
    >>> int(numba.njit(lambda v: reciprocal(v))(np.uint64(0)))
    0
"""

from __future__ import annotations

import math

import numba
import numpy as np
from numba.core import types
from numba.extending import overload
from numba.np import numpy_support


def sign(x):
    """``np.sign(x)``; compiled, also right for unsigned integers >= 2**(bits-1) and
    for -0.0 (NumPy's 0.0).

    >>> int(sign(np.uint8(200))), float(sign(-2.5))
    (1, -1.0)
    """
    return np.sign(x)


def spacing(x):
    """``np.spacing(x)``; compiled, also right for -0.0 (NumPy's smallest positive
    subnormal, where Numba's is negative).

    >>> float(spacing(-0.0)), float(spacing(-1.0))
    (5e-324, -2.220446049250313e-16)
    """
    return np.spacing(x)


def reciprocal(x):
    """``np.reciprocal(x)``; compiled, also right for an unsigned 0 (NumPy's 0).

    >>> float(reciprocal(4.0)), int(reciprocal(np.uint64(1)))
    (0.25, 1)
    """
    return np.reciprocal(x)


def _unsigned(t) -> bool:
    return isinstance(t, types.Integer) and not t.signed


@numba.njit(inline="always")
def _sign_of(v, t):
    return t(1) if v != 0 else t(0)


@numba.njit(inline="always")
def _float_sign_of(v, t):
    # NumPy's: 0.0 for -0.0 too (Numba's gave -0.0), NaN for NaN
    if v > 0:
        return t(1)
    if v < 0:
        return t(-1)
    return t(0) if v == 0 else v


@numba.njit(inline="always")
def _complex_sign_of(z, t):
    # NumPy 2's z / |z| (its loops.c.src, case by case), whose special cases z / abs(z)
    # misses: an infinite |z| (an infinite part, or a float32 modulus overflowing) gives
    # the unit on the axis of the infinite real part, else on the imaginary axis
    # (1+infj is 1j, inf+nanj is 1), both parts infinite nan+nanj.
    r, i = z.real, z.imag
    size = math.hypot(r, i)
    if math.isnan(size) or (math.isinf(r) and math.isinf(i)):
        return t(complex(math.nan, math.nan))
    if math.isinf(size):
        if math.isinf(r):
            return t(complex(1.0 if r > 0 else -1.0, 0.0))
        return t(complex(0.0, 1.0 if i > 0 else -1.0))
    if size == 0:
        return t(0)
    return t(complex(r / size, i / size))


@numba.njit(inline="always")
def _spacing_of(v, t):
    # NumPy: spacing(-0.0) is spacing(0.0), the smallest positive subnormal
    return np.spacing(t(0)) if v == 0 else np.spacing(v)


@numba.njit(inline="always")
def _reciprocal_of(v, t):
    return t(1) if v == 1 else t(0)


def _implementation(x, scalar, ufunc, applies=_unsigned):
    """``scalar(element, its Numba type)`` for a scalar of a type that ``applies`` (by
    default: unsigned) or each element of such an array; Numba's ``ufunc`` for the rest."""
    if applies(x):
        x_type = x
        return lambda x: scalar(x, x_type)
    if isinstance(x, types.Array) and applies(x.dtype):
        element = x.dtype

        def each(x):
            out = np.empty_like(x)
            for index in np.ndindex(x.shape):
                out[index] = scalar(x[index], element)
            return out

        return each
    return lambda x: ufunc(x)


def fmod(x1, x2):
    """``np.fmod(x1, x2)``; compiled, also right for negative integers (C's remainder:
    the dividend's sign).

    >>> int(fmod(np.int64(-7), np.int64(3))), float(fmod(7.5, -2.0))
    (-1, 1.5)
    """
    return np.fmod(x1, x2)


@numba.njit(inline="always")
def _fmod_of(a, b, t):
    if b == 0:
        return t(0)  # NumPy's value (it warns; compiled lanes do not: docs/lanes.md L10)
    r = a % b  # Python's remainder: the divisor's sign, never overflowing (INT_MIN % -1 is 0)
    if r != 0 and (r < 0) != (a < 0):
        r -= b
    return t(r)


def _integer_result(x1, x2):
    """The integer Numba type NumPy's binary ufuncs (fmod, power) give for these operand
    types (scalars or arrays), or None (a float: uint64 with a signed integer, a float operand)."""
    d1, d2 = (x.dtype if isinstance(x, types.Array) else x for x in (x1, x2))
    if not (isinstance(d1, types.Integer) and isinstance(d2, types.Integer)):
        return None
    out = numba.from_dtype(np.result_type(numpy_support.as_dtype(d1), numpy_support.as_dtype(d2)))
    return out if isinstance(out, types.Integer) else None


@overload(fmod)
def _fmod(x1, x2):
    return _elementwise(x1, x2, _fmod_of, lambda x1, x2: np.fmod(x1, x2))


def _elementwise(x1, x2, scalar, otherwise, result=_integer_result):
    """``scalar(a, b, NumPy's result type)`` for two operands whose types ``result``
    corrects (by default, integers), and for each element of such arrays (a scalar
    broadcast); ``otherwise`` for the rest."""
    out = result(x1, x2)
    if out is None:
        return otherwise
    if not any(isinstance(x, types.Array) for x in (x1, x2)):
        return lambda x1, x2: scalar(x1, x2, out)

    def each(x1, x2):
        shape = _shape(x1, x2)
        result = np.empty(shape, out)
        for index in np.ndindex(shape):
            result[index] = scalar(_at(x1, index), _at(x2, index), out)
        return result

    return each


def floor_divide(x1, x2):
    """``np.floor_divide(x1, x2)``; compiled, NumPy's values for floats too.  Numba's is
    ``floor(x1 / x2)``, which gave -0.0 for ``np.floor_divide(-3.5, inf)`` (NumPy: -1.0)
    and -inf for ``np.floor_divide(inf, -3.5)`` (NumPy: nan); lanes compute it as the
    ``//`` operator, Python's floor division (NumPy's algorithm).  Integers go to
    Numba's ``np.floor_divide`` unchanged.

    >>> float(floor_divide(-3.5, np.inf)), float(floor_divide(7.0, 2.0))
    (-1.0, 3.0)
    """
    return np.floor_divide(x1, x2)


def remainder(x1, x2):
    """``np.remainder(x1, x2)`` (``np.mod``); compiled, NumPy's values for floats too:
    a zero remainder has the divisor's sign (``np.remainder(-3.5, -3.5)`` is -0.0; Numba
    gave 0.0), as the ``%`` operator, which lanes compute it as.  Integers go to Numba's
    ``np.remainder`` unchanged.

    >>> float(remainder(-3.5, -3.5)), float(remainder(-1.0, 3.0))
    (-0.0, 2.0)
    """
    return np.remainder(x1, x2)


# Inlined into the lane, so the lane's error model applies: a zero divisor gives NumPy's
# inf or nan (docs/lanes.md, L10), not an exception.
@numba.njit(inline="always")
def _floor_divide_of(a, b, t):
    return t(a) // t(b)


@numba.njit(inline="always")
def _remainder_of(a, b, t):
    return t(a) % t(b)


def _float_result(x1, x2):
    """The float Numba type NumPy's binary ufuncs give for these operand types (scalars
    or arrays) when one of them is a float, or None (integers, complex, bools)."""
    d1, d2 = (x.dtype if isinstance(x, types.Array) else x for x in (x1, x2))
    if not all(isinstance(d, (types.Integer, types.Float)) for d in (d1, d2)) or not any(
            isinstance(d, types.Float) for d in (d1, d2)):
        return None
    return numba.from_dtype(np.result_type(numpy_support.as_dtype(d1), numpy_support.as_dtype(d2)))


@overload(floor_divide)
def _floor_divide(x1, x2):
    return _elementwise(x1, x2, _floor_divide_of, lambda x1, x2: np.floor_divide(x1, x2), _float_result)


@overload(remainder)
def _remainder(x1, x2):
    return _elementwise(x1, x2, _remainder_of, lambda x1, x2: np.remainder(x1, x2), _float_result)


def power(x1, x2):
    """``np.power(x1, x2)``; compiled, exact for integers (NumPy's result type,
    wrapping as NumPy does).  Floats go to Numba's ``np.power``.

    >>> int(power(np.int64(3), np.int64(39)))
    4052555153018976267
    """
    return np.power(x1, x2)


# In 64 bits of the result's signedness (the operator's exact power: intpower), then
# wrapped to the result type t, as NumPy's loop in t would.
@numba.njit(inline="always")
def _signed_power(a, b, t):
    return t(np.int64(a) ** np.int64(b))


@numba.njit(inline="always")
def _unsigned_power(a, b, t):
    return t(np.uint64(a) ** np.uint64(b))


@overload(power)
def _power(x1, x2):
    out = _integer_result(x1, x2)
    scalar = _unsigned_power if out is not None and not out.signed else _signed_power
    return _elementwise(x1, x2, scalar, lambda x1, x2: np.power(x1, x2))


def around(a, decimals=0, out=None):
    """``np.round(a, decimals)`` (``np.around``) by NumPy's algorithm; compiled, also
    right for integers (the integer itself for ``decimals >= 0``) and float32.
    Numba's rounded integers through a float (``np.round(123456789012345678, 2)``
    gave ...664), made uint64 values >= 2**63 negative, and rounded float32 in
    float64 (``np.round(np.float32(-2.675), 2)``: -2.67, NumPy -2.68).

    >>> int(around(np.int64(123456789012345678), 2)), float(around(np.float32(-2.675), 2))
    (123456789012345678, -2.680000066757202)
    """
    return np.round(a, decimals, out)


def round_(number, ndigits=None):
    """Python's ``round(number, ndigits)`` of NumPy scalars, the values lanes compute
    with: the integer itself for ``round(n)``, NumPy's ``np.round`` with ``ndigits``.
    Numba's rounded an integer through a float (``round(2**63 - 1)`` gave -2**63)
    and a float by Python's decimal rounding (``round(2.675, 2)``: 2.67, NumPy's
    float64 2.68).

    >>> round_(np.int64(2**63 - 1)) == 2**63 - 1, float(round_(np.float64(2.675), 2))
    (True, 2.68)
    """
    return round(number, ndigits)


# NumPy's round of a scalar of type t: a float is rint(x * 10**d) / 10**d in t (/ then * for a
# negative d); an integer is itself for d >= 0, else rounded so through a float64 and converted back.
@numba.njit(inline="always")
def _round_float(x, decimals, t):
    if decimals >= 0:
        f = t(10.0 ** decimals)
        return t(np.rint(x * f) / f)
    f = t(10.0 ** -decimals)
    return t(np.rint(x / f) * f)


@numba.njit(inline="always")
def _round_signed(x, decimals, t):
    if decimals >= 0:
        return x
    f = 10.0 ** -decimals
    return t(np.rint(x / f) * f)  # out of t's range: the CPU's conversion, as NumPy's cast


@numba.njit(inline="always")
def _round_unsigned(x, decimals, t):
    if decimals >= 0:
        return x
    f = 10.0 ** -decimals
    y = np.rint(x / f) * f
    # NumPy's cast of 2**64 and beyond gives 0 (AVX-512's conversion would give 2**64 - 1)
    return t(y) if y < 18446744073709551616.0 else t(0)


def _rounding(t):
    """The scalar round for numbers of Numba type ``t`` (None: not a real number)."""
    if isinstance(t, types.Float):
        return _round_float
    if isinstance(t, types.Integer):
        return _round_signed if t.signed else _round_unsigned
    return None


def _absent(t) -> bool:
    return t is None or isinstance(t, (types.NoneType, types.Omitted))


@overload(around)
def _around(a, decimals=0, out=None):
    element = a.dtype if isinstance(a, types.Array) else a
    scalar = _rounding(element)
    if scalar is None or not _absent(out):
        return lambda a, decimals=0, out=None: np.round(a, decimals, out)
    if not isinstance(a, types.Array):
        return lambda a, decimals=0, out=None: scalar(a, decimals, element)

    def each(a, decimals=0, out=None):
        result = np.empty_like(a)
        for index in np.ndindex(a.shape):
            result[index] = scalar(a[index], decimals, element)
        return result

    return each


@overload(round_)
def _round(number, ndigits=None):
    scalar = _rounding(number)
    if _absent(ndigits):
        if isinstance(number, types.Integer):
            return lambda number, ndigits=None: number
        return lambda number, ndigits=None: round(number)
    if scalar is None:
        return lambda number, ndigits=None: round(number, ndigits)
    t = number
    return lambda number, ndigits=None: scalar(number, ndigits, t)


def _at(x, index):
    """``x[index]`` of an array, ``x`` itself of a scalar (compiled only)."""


@overload(_at)
def _at_impl(x, index):
    if isinstance(x, types.Array):
        return lambda x, index: x[index]
    return lambda x, index: x


def _shape(x1, x2):
    """The shape of an elementwise result of ``x1`` and ``x2`` (compiled only)."""


@overload(_shape)
def _shape_impl(x1, x2):
    if isinstance(x1, types.Array) and isinstance(x2, types.Array):
        def both(x1, x2):
            if x1.shape != x2.shape:
                raise ValueError("an integer ufunc of two arrays of different shapes in a lane")
            return x1.shape
        return both
    if isinstance(x1, types.Array):
        return lambda x1, x2: x1.shape
    return lambda x1, x2: x2.shape


@overload(sign)
def _sign(x):
    if isinstance(getattr(x, "dtype", x), types.Float):
        return _implementation(x, _float_sign_of, np.sign, applies=lambda t: isinstance(t, types.Float))
    if isinstance(getattr(x, "dtype", x), types.Complex):
        return _implementation(x, _complex_sign_of, np.sign, applies=lambda t: isinstance(t, types.Complex))
    return _implementation(x, _sign_of, np.sign)


@overload(spacing)
def _spacing(x):
    return _implementation(x, _spacing_of, np.spacing, applies=lambda t: isinstance(t, types.Float))


@overload(reciprocal)
def _reciprocal(x):
    return _implementation(x, _reciprocal_of, np.reciprocal)
