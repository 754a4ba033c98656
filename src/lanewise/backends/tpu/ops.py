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


def _fmod(x, y):
    """C's fmod (the sign of ``x``), unlike ``%``: lax.rem on floats."""
    x, y = jnp.asarray(x), jnp.asarray(y)
    dtype = jnp.result_type(x, y, 1.0)
    return lax.rem(x.astype(dtype), y.astype(dtype))


def _float_fn(fn):
    """A math function: ints (and bools) are converted to float32 first, as Python does."""
    return lambda *args: fn(*(_float(a) if not jnp.issubdtype(jnp.result_type(a), jnp.floating) else a
                              for a in args))


_SAME = ("exp", "expm1", "exp2", "log", "log1p", "log10", "log2", "sqrt", "cbrt", "sin", "cos", "tan", "arcsin",
         "arccos", "arctan", "sinh", "cosh", "tanh", "arcsinh", "arccosh", "arctanh", "degrees", "radians",
         "rad2deg", "deg2rad", "copysign", "arctan2", "hypot", "rint", "reciprocal", "signbit")

OPS = {
    **{name: _float_fn(getattr(jnp, name)) for name in _SAME},
    "erf": _float_fn(lax.erf), "erfc": _float_fn(lax.erfc),
    "fabs": _float_fn(jnp.abs),
    # operators
    "add": _arith(jnp.add), "sub": _arith(jnp.subtract), "mul": _arith(jnp.multiply),
    "truediv": _arith(jnp.true_divide), "floordiv": _arith(jnp.floor_divide), "mod": _arith(jnp.remainder),
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
    "floor_divide": _arith(jnp.floor_divide), "remainder": _arith(jnp.remainder), "fmod": _fmod,
    "power": _pow, "maximum": _arith(jnp.maximum), "fmax": _arith(jnp.fmax), "max": _arith(jnp.maximum),
    "minimum": _arith(jnp.minimum), "fmin": _arith(jnp.fmin), "min": _arith(jnp.minimum),
    "isnan": jnp.isnan, "isinf": jnp.isinf, "isfinite": jnp.isfinite,
    "float": _float, "int": _as_int, "int32": _as_int, "bool": lambda v: jnp.asarray(v) != 0,
    "where": lambda c, a, b: jnp.where(jnp.asarray(c) != 0, a, b),
}
