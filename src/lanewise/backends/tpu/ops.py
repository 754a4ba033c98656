"""The TPU lowerings the primitive table's ``"tpu"`` rules name, on 32-bit tile values.

Each entry takes JAX values (tiles of lanes, or Python scalars, which JAX treats
as weakly typed) and gives what the Python operator or function gives one lane,
in JAX's 32-bit types: a bool in arithmetic counts as an int (``True + True`` is
2), ``//`` and ``%`` floor as Python's do, ``math.floor`` gives an int where
``np.floor`` gives a float (the lowering is told which was called), ``float()``
is float32 and ``int()`` int32 (truncating).  Integer overflow wraps at 32 bits.

Example:
    >>> import jax.numpy as jnp
    >>> int(OPS["add"](jnp.asarray(True), True))
    2
"""

from __future__ import annotations

import math

import jax.numpy as jnp
from jax import lax

from . import trig

#: Functions of ``math`` that return a Python int where their NumPy namesakes return a float.
INT_RESULT = frozenset({math.floor, math.ceil, math.trunc})
#: Functions of ``math`` that return a float where their other spellings keep ints (``pow``).
FLOAT_RESULT = frozenset({math.pow})


def _int(v):
    """Bools counted as ints (Python arithmetic); anything else unchanged."""
    if isinstance(v, bool):  # a literal: a Python int, weakly typed as JAX types ints
        return int(v)
    return v.astype(jnp.int32) if jnp.result_type(v) == jnp.bool_ else v


def _arith(fn):
    return lambda *args: fn(*map(_int, args))


def _float(v):
    return jnp.asarray(v).astype(jnp.float32) if jnp.result_type(v) != jnp.float32 else v


def _as_int(v):
    """``int(v)``: truncation toward zero, int32."""
    v = jnp.asarray(v)
    return (jnp.trunc(v) if jnp.issubdtype(v.dtype, jnp.floating) else v).astype(jnp.int32)


def _pow(x, y):
    """``x ** y``: float unless both are ints (a negative int exponent then gives 0
    or +-1 where Python gives a float: refused by no rule; see docs/lanes.md)."""
    return jnp.power(_int(x), _int(y))


def _py_max(a, b):
    """Python's ``max(a, b)``: ``b`` where ``b > a``, else ``a`` -- the first of equal values
    (``max(-0.0, 0.0)`` is -0.0) and a NaN only where it comes first (``max(1.0, nan)`` is
    1.0, ``max(nan, 1.0)`` nan); ``jnp.maximum`` is NumPy's (NaN wins, zeros ordered)."""
    return jnp.where(jnp.greater(b, a), b, a)


def _py_min(a, b):
    """Python's ``min(a, b)``: ``b`` where ``b < a``, else ``a`` (see :func:`_py_max`)."""
    return jnp.where(jnp.less(b, a), b, a)


def _rint(v):
    """Halves to even (``np.round``, ``np.rint``): an int stays itself."""
    v = jnp.asarray(v)
    return lax.round(v, lax.RoundingMethod.TO_NEAREST_EVEN) if jnp.issubdtype(v.dtype, jnp.floating) else v


def _round(v):
    """Python's ``round(v)``: an int (int32), halves to even (``round(2.5)`` is 2)."""
    return _as_int(_rint(_int(v)))


def _floor_divide(a, b):
    """``a // b``; an int divided by 0 gives 0, as NumPy's int32 (XLA's integer division
    by zero gives -1, which the floor's correction made -2; Python raises)."""
    if jnp.issubdtype(jnp.result_type(a, b), jnp.integer):
        zero = jnp.asarray(b) == 0
        return jnp.where(zero, 0, jnp.floor_divide(a, jnp.where(zero, 1, b)))
    return jnp.floor_divide(a, b)


def _fmod(x, y):
    """C's fmod (the sign of ``x``), unlike ``%``: lax.rem on floats."""
    x, y = jnp.asarray(x), jnp.asarray(y)
    dtype = jnp.result_type(x, y, 1.0)
    return lax.rem(x.astype(dtype), y.astype(dtype))


def where(mask, a, b):
    """``a`` in the lanes of ``mask``, ``b`` elsewhere.  Two bools by logic operations:
    Mosaic cannot select between i1 vectors (it widens them to i8 and fails)."""
    if jnp.result_type(a) == jnp.bool_ and jnp.result_type(b) == jnp.bool_:
        return (mask & a) | (~mask & b)
    return jnp.where(mask, a, b)


def some(mask):
    """Whether any lane of ``mask`` is set, as a scalar bool.  Mosaic lowers ``jnp.any`` of
    bools through ``jnp.where(mask, 1.0, 0.0)``, float64 when the process enables x64 and the
    kernel is lowered in a caller's ``jax.jit`` (outside the backend's 32-bit context), which
    Mosaic refuses: the same reduction, its constants float32."""
    mask = mask if jnp.result_type(mask) == jnp.bool_ else mask != 0
    return jnp.max(jnp.where(mask, jnp.float32(1), jnp.float32(0))) > 0


def _expm1(x):
    """``exp(x) - 1`` without cancellation near 0 (Kahan's formula: Mosaic has no expm1)."""
    u = jnp.exp(x)
    um1 = u - 1.0
    return jnp.where(u == 1.0, x, jnp.where(um1 == -1.0, -1.0, um1 * x / jnp.log(jnp.where(u == 1.0, 2.0, u))))


# Functions Mosaic (jax 0.10) does not lower, written with ones it does (measured on the
# chip by benchmarks/device/tpu_ops.py); interpret mode runs the same formulas, so CI
# tests what the chip computes.
_LN2 = 0.6931471805599453


def _arctan(x):
    return jnp.arctan2(x, jnp.ones_like(x))


def _arcsin(x):
    return jnp.arctan2(x, jnp.sqrt((1.0 - x) * (1.0 + x)))


def _arccos(x):
    return jnp.arctan2(jnp.sqrt((1.0 - x) * (1.0 + x)), x)


def _half_exp(a):
    """e^a / 2 for a >= 0, finite up to cosh's own overflow (e^a alone overflows sooner)."""
    e = jnp.exp(0.5 * a)
    return (e * 0.5) * e


def _cosh(x):
    h = _half_exp(jnp.abs(x))
    return h + 0.25 / h


def _sinh(x):
    a = jnp.abs(x)
    h = _half_exp(a)
    a2 = a * a  # below 0.5 the difference of exponentials cancels: Taylor to x^9 instead
    small = a * (1.0 + a2 / 6.0 * (1.0 + a2 / 20.0 * (1.0 + a2 / 42.0 * (1.0 + a2 / 72.0))))
    return jnp.sign(x) * jnp.where(a < 0.5, small, h - 0.25 / h)


def _arcsinh(x):
    a = jnp.abs(x)
    big = a > 1e18  # a*a overflows: asinh(a) = log(2a)
    safe = jnp.where(big, 0.0, a)
    near = jnp.log1p(safe + safe * safe / (1.0 + jnp.sqrt(1.0 + safe * safe)))
    return jnp.sign(x) * jnp.where(big, jnp.log(a) + _LN2, near)


def _arccosh(x):
    big = x > 1e18
    safe = jnp.where(big, 1.0, x)
    t = safe - 1.0
    near = jnp.log1p(t + jnp.sqrt(t * (safe + 1.0)))
    return jnp.where(big, jnp.log(x) + _LN2, near)


def _arctanh(x):
    return 0.5 * (jnp.log1p(x) - jnp.log1p(-x))


def _cbrt(x):
    a = jnp.abs(x)
    y = jnp.exp(jnp.log(jnp.where(a == 0, 1.0, a)) / 3.0)
    y = y - (y * y * y - a) / (3.0 * y * y)  # one Newton step
    return jnp.where((a == 0) | jnp.isinf(a), x, jnp.sign(x) * y)


def _erfc(x):
    """Numerical Recipes' erfcc (fractional error < 1.2e-7), no cancellation for large x."""
    z = jnp.abs(x)
    t = 1.0 / (1.0 + 0.5 * z)
    poly = -1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (0.09678418 + t * (
        -0.18628806 + t * (0.27886807 + t * (-1.13520398 + t * (1.48851587 + t * (-0.82215223 + t * 0.17087277))))))))
    r = t * jnp.exp(-z * z + poly)
    return jnp.where(x >= 0, r, 2.0 - r)


def _float_fn(fn):
    """A math function: ints (and bools) are converted to float32 first, as Python does."""
    return lambda *args: fn(*(_float(a) if not jnp.issubdtype(jnp.result_type(a), jnp.floating) else a
                              for a in args))


_SAME = ("exp", "exp2", "log", "log1p", "log10", "log2", "sqrt", "tan", "tanh", "degrees", "radians",
         "rad2deg", "deg2rad", "copysign", "arctan2", "hypot", "rint", "reciprocal", "signbit")

OPS = {
    **{name: _float_fn(getattr(jnp, name)) for name in _SAME},
    # bounded where the kernel's guard allows it (.trig), else jnp's
    "cos": _float_fn(trig.cos), "sin": _float_fn(trig.sin),
    "expm1": _float_fn(_expm1), "erf": _float_fn(lax.erf), "erfc": _float_fn(_erfc),
    **{name: _float_fn(fn) for name, fn in (("arctan", _arctan), ("arcsin", _arcsin), ("arccos", _arccos),
                                            ("sinh", _sinh), ("cosh", _cosh), ("arcsinh", _arcsinh),
                                            ("arccosh", _arccosh), ("arctanh", _arctanh), ("cbrt", _cbrt))},
    "fabs": _float_fn(jnp.abs),
    # operators
    "add": _arith(jnp.add), "sub": _arith(jnp.subtract), "mul": _arith(jnp.multiply),
    "truediv": _arith(jnp.true_divide), "floordiv": _arith(_floor_divide), "mod": _arith(jnp.remainder),
    "pow": _pow, "lshift": _arith(jnp.left_shift), "rshift": _arith(jnp.right_shift),
    "and_": jnp.bitwise_and, "or_": jnp.bitwise_or, "xor": jnp.bitwise_xor,
    "neg": _arith(jnp.negative), "pos": _arith(jnp.positive), "invert": _arith(jnp.invert),
    "lt": jnp.less, "le": jnp.less_equal, "gt": jnp.greater, "ge": jnp.greater_equal,
    "eq": jnp.equal, "ne": jnp.not_equal,
    # NumPy's spellings (NumPy's meaning: a bool stays a bool where the ufunc keeps it)
    "add_np": jnp.add, "subtract": jnp.subtract, "multiply": jnp.multiply, "divide": jnp.true_divide,
    "less": jnp.less, "less_equal": jnp.less_equal, "greater": jnp.greater, "greater_equal": jnp.greater_equal,
    "equal": jnp.equal, "not_equal": jnp.not_equal, "logical_and": jnp.logical_and,
    "logical_or": jnp.logical_or, "logical_xor": jnp.logical_xor, "logical_not": jnp.logical_not,
    "absolute": _arith(jnp.abs), "abs": _arith(jnp.abs), "sign": _arith(jnp.sign),
    "negative": _arith(jnp.negative), "positive": _arith(jnp.positive), "square": _arith(jnp.square),
    "floor": _arith(jnp.floor), "ceil": _arith(jnp.ceil), "trunc": _arith(jnp.trunc),
    "floor_divide": _arith(_floor_divide), "remainder": _arith(jnp.remainder), "fmod": _fmod,
    "power": _pow, "maximum": _arith(jnp.maximum), "fmax": _arith(jnp.fmax), "max": _arith(_py_max),
    "minimum": _arith(jnp.minimum), "fmin": _arith(jnp.fmin), "min": _arith(_py_min),
    "isnan": jnp.isnan, "isinf": jnp.isinf, "isfinite": jnp.isfinite,
    "round": _round, "around": _rint,
    "float": _float, "int": _as_int, "int32": _as_int, "bool": lambda v: jnp.asarray(v) != 0,
    "where": lambda c, a, b: where(jnp.asarray(c) != 0, a, b),
}


def loop_forms(carry, int_masks: bool):
    """(encode, decode) of a loop's carry in the form Mosaic compiles: with ``int_masks``,
    bools cross the loop as int32 (Mosaic cannot carry a vector of bools), and come back
    as bools of the carry's own kinds."""
    import jax

    kinds = jax.tree.map(lambda c: c.dtype, carry)

    def encode(tree):
        return jax.tree.map(lambda v: v.astype(jnp.int32) if int_masks and v.dtype == jnp.bool_ else v, tree)

    def decode(tree):
        return jax.tree.map(lambda v, k: v != 0 if k == jnp.bool_ and v.dtype != jnp.bool_ else v, tree, kinds)

    return encode, decode


def lowering(op: str):
    """The lowering a primitive's ``Tpu(op)`` rule names: an entry of :data:`OPS`, else
    the ``jax.numpy`` function ``op`` on float tiles (ints converted first, as Python
    does), so that a new elementwise primitive whose meaning is jnp's needs no row here.

    Example:
        >>> float(lowering("sinc")(jnp.asarray(0.5)))
        0.6366...
    """
    found = OPS.get(op)
    if found is None:
        found = OPS[op] = _float_fn(getattr(jnp, op))
    return found
