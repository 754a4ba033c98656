"""The ``"tpu"`` rules: which primitives the TPU backend lowers, and to what.

One row per primitive (by its table name): the :class:`~.table.Tpu` rule names
the lowering in :mod:`lanewise.backends.tpu.ops`.  :func:`with_tpu` joins a row
to its primitive when the registry is filled, so the TPU rule sits in the
primitive's ``rules`` beside the others; a primitive without a row has no TPU
rule, and a lane calling it gets the table's one "not supported" error.

Example:
    >>> import math
    >>> from lanewise.primitives import lookup, rule
    >>> rule(lookup(math.sqrt), "tpu", "model.py:3").op
    'sqrt'
"""

from __future__ import annotations

from dataclasses import replace
from types import MappingProxyType

from .table import Primitive, Tpu

#: Operators (Python's meaning: bools computed as ints, floor division and modulo).
_OPERATORS = {f"operator.{n}": n for n in (
    "add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "lshift", "rshift", "and_", "or_", "xor",
    "neg", "pos", "invert", "lt", "le", "gt", "ge", "eq", "ne")}

#: Functions whose lowering is the ``jax.numpy`` function of the same name.
_SAME_NAME = (
    "exp", "expm1", "exp2", "log", "log1p", "log10", "log2", "sqrt", "cbrt", "sin", "cos", "tan", "arcsin",
    "arccos", "arctan", "sinh", "cosh", "tanh", "arcsinh", "arccosh", "arctanh", "degrees", "radians",
    "rad2deg", "deg2rad", "fabs", "absolute", "abs", "copysign", "sign", "negative", "positive", "square",
    "reciprocal", "floor", "ceil", "trunc", "rint", "floor_divide", "remainder", "pow", "power", "arctan2",
    "hypot", "fmod", "maximum", "fmax", "max", "minimum", "fmin", "min", "isnan", "isinf", "isfinite",
    "signbit", "float", "int", "int32", "bool", "erf", "erfc", "where", "round", "around",
    "subtract", "multiply", "divide", "less", "less_equal", "greater", "greater_equal", "equal",
    "not_equal", "logical_and", "logical_or", "logical_xor", "logical_not")

#: Primitive name -> its TPU rule.
TPU = MappingProxyType({**{name: Tpu(op) for name, op in _OPERATORS.items()},
                        **{name: Tpu(name) for name in _SAME_NAME},
                        "add": Tpu("add_np")})  # np.add: NumPy's meaning (a logical or of bools)


def with_tpu(prim: Primitive) -> Primitive:
    """``prim`` with its TPU rule from :data:`TPU` (unchanged when it has none here, or
    names its own: a primitive may carry its ``"tpu"`` rule in its entry)."""
    if prim.name not in TPU or "tpu" in prim.rules:
        return prim
    return replace(prim, rules=MappingProxyType({**prim.rules, "tpu": TPU[prim.name]}))
