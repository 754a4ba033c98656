"""The math, NumPy and builtin functions a lane may call, each with all of its rules.

Each entry is one primitive: the names that denote it, its reference meaning (a
NumPy callable), its dtype rule, and its rules per target (see
:mod:`lanewise.primitives.table`).  A rule a target does not list is missing:
asking for it raises the one "not supported" error.

Non-differentiable points of the jvp rules follow JAX: ``abs`` at 0 has slope +1,
``max``/``min`` ties split the tangent evenly, ``floor``/``round``/comparisons have
zero derivative, ``x ** y`` with ``x == 0`` takes ``log(x)`` as 0.

Example:
    >>> from lanewise.primitives import named
    >>> named("arcsin").spelling(), named("arcsin").rules["numba"].vector_math
    ('np.arcsin', 'asin')
"""

from __future__ import annotations

import cmath
import math

import numpy as np

from .table import (LANES, LOOP, NATIVE_CUDA, ZERO_JVP, Cuda, Jvp, Numba, Template, Tpu, Vector, primitive)

# ----------------------------------------------------------------------------- element templates (fuse)


def op_template(symbol: str, natural: str = "same", kinds: str = "biufc") -> Template:
    """``({0} <symbol> {1})``: a Python operator as a fused element."""
    return Template({"": f"({{0}} {symbol} {{1}})"}, natural, kinds)


def _np1(name: str, kinds: str = "f", natural: str = "same") -> Template:
    return Template({"": f"np.{name}({{0}})"}, natural, kinds)


def _np2(name: str, kinds: str = "f") -> Template:
    return Template({"": f"np.{name}({{0}}, {{1}})"}, "same", kinds)


# NaN-propagating selection exactly as NumPy's loops write it (a >= b || isnan(a) ? a : b),
# signed zeros included; operands are always names or literals, so repeating them is free.
_MAX = "({0} if ({0} >= {1} or {0} != {0}) else {1})"
_MIN = "({0} if ({0} <= {1} or {0} != {0}) else {1})"
_FMAX = "({0} if ({0} >= {1} or {1} != {1}) else {1})"
_FMIN = "({0} if ({0} <= {1} or {1} != {1}) else {1})"

# ----------------------------------------------------------------------------- jvp templates

_LN10 = repr(math.log(10.0))
_LN2 = repr(math.log(2.0))
_TWO_OVER_SQRT_PI = repr(2.0 / math.sqrt(math.pi))
_ABS = Jvp(1, unary="({t} if {x} >= 0 else -{t})")
_ASIN = "{t} / {m}.sqrt(1.0 - {x} * {x})"
_TO_DEGREES = Jvp(1, unary=f"{{t}} * {repr(180.0 / math.pi)}")
_TO_RADIANS = Jvp(1, unary=f"{{t}} * {repr(math.pi / 180.0)}")
#: ``x ** y`` (operator, math.pow and np.power alike).
POW_JVP = Jvp(2, left="(0.0 if {y} == 0 else {y} * {x} ** ({y} - 1)) * {t}",
              right="{p} * {m}.log({x} if {x} != 0 else 1.0) * {u}")
#: JAX's tie rule for max/min: equal arguments share the tangent evenly.
_MAX_JVP = Jvp(2, left="({t} if {x} > {y} else (0.5 * {t} if {x} == {y} else 0.0))",
               right="({u} if {y} > {x} else (0.5 * {u} if {x} == {y} else 0.0))")
_MIN_JVP = Jvp(2, left="({t} if {x} < {y} else (0.5 * {t} if {x} == {y} else 0.0))",
               right="({u} if {y} < {x} else (0.5 * {u} if {x} == {y} else 0.0))")

_SIGNED = (-1.5, 0.25, 2.0)  # samples on both sides of 0
_UNIT = (-0.5, 0.25, 0.75)  # inside (-1, 1)
_ABOVE_ONE = (1.5, 2.0, 3.0)
#: No value a multiple of another: remainders away from their jumps.
REMAINDERS = (1.7, 2.3, 3.1)


def _math(name, jvp, *, numpy=None, math_name=None, vector_math=None, cuda=NATIVE_CUDA, spmd=None,
          template=None, dtype="float", kinds="f", arity=1, corrected=None, tpu=None, **fields):
    """A float function spelt ``np.<numpy>`` and ``math.<math_name>`` (either may be absent);
    ``tpu``: its :class:`~.table.Tpu` rule, where :mod:`.tpu`'s rows do not give it one."""
    numpy = (name,) if numpy is None else numpy
    math_names = (name,) if math_name is None else math_name
    if template is None and numpy:
        template = (_np1 if arity == 1 else _np2)(numpy[0])
    if spmd is None:
        spmd = LOOP if vector_math else LANES
    rules = {"numba": Numba(template, vector_math, corrected), "spmd": spmd, "cuda": cuda, "jvp": jvp, "tpu": tpu}
    reference = getattr(np, numpy[0]) if numpy else np.vectorize(getattr(math, math_names[0]), otypes=[float])
    return primitive(name, reference, dtype, arity, kinds=kinds, numpy=numpy, math=math_names,
                     rules={k: v for k, v in rules.items() if v is not None}, **fields)


def _numpy(name, template, jvp=None, *, dtype="same", kinds="if", arity=1, cuda=NATIVE_CUDA, spmd=LANES,
           corrected=None, vector_math=None, numpy=None, **fields):
    """A NumPy-only function (a ufunc unless ``category`` says otherwise)."""
    numpy = (name,) if numpy is None else numpy
    rules = {"numba": Numba(template, vector_math, corrected), "spmd": spmd, "cuda": cuda, "jvp": jvp}
    return primitive(name, getattr(np, numpy[0]), dtype, arity, kinds=kinds, numpy=numpy,
                     rules={k: v for k, v in rules.items() if v is not None}, **fields)


def _builtin(name, reference, jvp, *, dtype="same", kinds="if", arity=1, corrected=None, **fields):
    """A Python builtin (Numba compiles it; no fused template)."""
    rules = {"numba": Numba(None, None, corrected), "spmd": LANES, "cuda": NATIVE_CUDA, "jvp": jvp}
    return primitive(name, reference, dtype, arity, kinds=kinds, builtins=(name,), rules=rules, **fields)


_INSTRUCTION = Vector("instruction")
_PI = repr(math.pi)


def _sinc(x):
    """NumPy's normalised sinc, ``sin(pi x) / (pi x)`` and 1 at 0, as a scalar function (CUDA)."""
    if x == 0.0:
        return 1.0
    y = math.pi * x
    return math.sin(y) / y


FUNCTIONS = (
    # exponentials and logarithms
    _math("exp", Jvp(1, unary="{p} * {t}"), vector_math="exp", cuda=Cuda("unary", math.exp, cmath.exp)),
    _math("expm1", Jvp(1, unary="({p} + 1.0) * {t}"), vector_math="expm1", cuda=Cuda("unary", math.expm1)),
    _math("exp2", Jvp(1, unary=f"{{p}} * {_LN2} * {{t}}"), vector_math="exp2"),
    _math("log", Jvp(1, unary="{t} / {x}"), vector_math="log"),
    _math("log1p", Jvp(1, unary="{t} / (1.0 + {x})"), vector_math="log1p", cuda=Cuda("unary", math.log1p)),
    _math("log10", Jvp(1, unary=f"{{t}} / ({{x}} * {_LN10})"), vector_math="log10"),
    _math("log2", Jvp(1, unary=f"{{t}} / ({{x}} * {_LN2})"), vector_math="log2"),
    _math("sqrt", Jvp(1, unary="{t} / (2.0 * {p})"), vector_math="sqrt", spmd=_INSTRUCTION,
          cuda=Cuda("unary", math.sqrt, cmath.sqrt)),
    _math("cbrt", Jvp(1, unary="{t} / (3.0 * {p} * {p})"), vector_math="cbrt"),
    # trigonometric and hyperbolic
    _math("sin", Jvp(1, unary="{m}.cos({x}) * {t}"), vector_math="sin", domain=_SIGNED),
    _math("cos", Jvp(1, unary="-{m}.sin({x}) * {t}"), vector_math="cos", domain=_SIGNED),
    _math("tan", Jvp(1, unary="(1.0 + {p} * {p}) * {t}"), vector_math="tan", domain=_SIGNED),
    _math("sinc", Jvp(1, unary=f"(0.0 if {{x}} == 0 else ({{m}}.cos({_PI} * {{x}}) - {{p}}) / {{x}}) * {{t}}"),
          math_name=(), cuda=Cuda("unary", _sinc), tpu=Tpu("sinc"), domain=_SIGNED),
    _math("arcsin", Jvp(1, unary=_ASIN), numpy=("arcsin", "asin"), math_name=("asin",), vector_math="asin",
          domain=_UNIT),
    _math("arccos", Jvp(1, unary="-" + _ASIN), numpy=("arccos", "acos"), math_name=("acos",),
          vector_math="acos", domain=_UNIT),
    _math("arctan", Jvp(1, unary="{t} / (1.0 + {x} * {x})"), numpy=("arctan", "atan"), math_name=("atan",),
          vector_math="atan", domain=_SIGNED),
    _math("sinh", Jvp(1, unary="{m}.cosh({x}) * {t}"), vector_math="sinh", domain=_SIGNED),
    _math("cosh", Jvp(1, unary="{m}.sinh({x}) * {t}"), vector_math="cosh", domain=_SIGNED),
    _math("tanh", Jvp(1, unary="(1.0 - {p} * {p}) * {t}"), vector_math="tanh", domain=_SIGNED),
    _math("arcsinh", Jvp(1, unary="{t} / {m}.sqrt({x} * {x} + 1.0)"), numpy=("arcsinh", "asinh"),
          math_name=("asinh",), vector_math="asinh", domain=_SIGNED),
    _math("arccosh", Jvp(1, unary="{t} / {m}.sqrt({x} * {x} - 1.0)"), numpy=("arccosh", "acosh"),
          math_name=("acosh",), vector_math="acosh", domain=_ABOVE_ONE),
    _math("arctanh", Jvp(1, unary="{t} / (1.0 - {x} * {x})"), numpy=("arctanh", "atanh"),
          math_name=("atanh",), vector_math="atanh", domain=_UNIT),
    _math("erf", Jvp(1, unary=f"{_TWO_OVER_SQRT_PI} * {{m}}.exp(-{{x}} * {{x}}) * {{t}}"), numpy=(),
          vector_math="erf", dtype="float64", domain=_SIGNED),
    _math("erfc", Jvp(1, unary=f"-{_TWO_OVER_SQRT_PI} * {{m}}.exp(-{{x}} * {{x}}) * {{t}}"), numpy=(),
          vector_math="erfc", dtype="float64", domain=_SIGNED),
    _math("degrees", _TO_DEGREES, domain=_SIGNED),
    _math("radians", _TO_RADIANS, domain=_SIGNED),
    _math("rad2deg", _TO_DEGREES, math_name=(), domain=_SIGNED),
    _math("deg2rad", _TO_RADIANS, math_name=(), domain=_SIGNED),
    _math("spacing", None, math_name=(), corrected="spacing", domain=_SIGNED),
    # absolute values and signs
    _math("fabs", _ABS, template=Template({"": "abs({0})"}, "same", "f"), spmd=_INSTRUCTION,
          cuda=Cuda("unary", math.fabs), kinds="if", domain=_SIGNED),
    _numpy("absolute", Template({"": "abs({0})"}, "cast", "biuf"), _ABS, numpy=("absolute", "abs"),
           spmd=_INSTRUCTION, cuda=Cuda("number", lambda x: abs(x)), domain=_SIGNED),
    _builtin("abs", np.absolute, _ABS, domain=_SIGNED),
    _math("copysign", Jvp(2, left="({t} if ({x} >= 0) == ({p} >= 0) else -{t})", right="0.0"), arity=2,
          spmd=_INSTRUCTION, cuda=Cuda("binary", lambda x, y: math.copysign(x, y)), domain=_SIGNED),
    _numpy("sign", _np1("sign", "iuf"), ZERO_JVP, corrected="sign", domain=_SIGNED),
    _numpy("negative", Template({"": "(-{0})"}, "same"), Jvp(1, unary="-{t}"), spmd=_INSTRUCTION),
    _numpy("positive", Template({"": "(+{0})"}, "same"), Jvp(1, unary="{t}")),
    _numpy("square", Template({"": "({0} * {0})"}, "same"), Jvp(1, unary="2.0 * {x} * {t}"),
           cuda=Cuda("number", lambda x: x * x)),
    _numpy("reciprocal", _np1("reciprocal", "f"), Jvp(1, unary="-({p} * {p}) * {t}"), kinds="f",
           corrected="reciprocal"),
    _numpy("conjugate", Template({"c": "({0}).conjugate()", "": "{0}"}, "same"), numpy=("conjugate", "conj"),
           kinds="fc"),
    # rounding (integer-valued: zero derivative)
    _math("floor", ZERO_JVP, template=_np1("floor", "iuf"), spmd=_INSTRUCTION,
          cuda=Cuda("rounding", math.floor), dtype="same", kinds="if", domain=_SIGNED),
    _math("ceil", ZERO_JVP, template=_np1("ceil", "iuf"), spmd=_INSTRUCTION, cuda=Cuda("rounding", math.ceil),
          dtype="same", kinds="if", domain=_SIGNED),
    _math("trunc", ZERO_JVP, template=_np1("trunc", "iuf"), spmd=_INSTRUCTION,
          cuda=Cuda("rounding", math.trunc), dtype="same", kinds="if", domain=_SIGNED),
    _numpy("rint", _np1("rint", "f"), ZERO_JVP, kinds="f", domain=_SIGNED),
    _numpy("around", None, ZERO_JVP, numpy=("round", "around"), corrected="around", domain=_SIGNED),
    _builtin("round", np.round, ZERO_JVP, corrected="integers.round_", domain=_SIGNED),
    _numpy("floor_divide", op_template("//", kinds="iuf"), ZERO_JVP, arity=2, corrected="floor_divide"),
    _numpy("remainder", op_template("%", kinds="iuf"), numpy=("remainder", "mod"), arity=2,
           corrected="remainder"),
    # powers and other functions of two arguments
    _math("pow", POW_JVP, numpy=(), builtins=("pow",), arity=2, vector_math="pow", dtype="float64", kinds="f"),
    _numpy("power", Template({"f": "np.power({0}, {1})", "": "({0} ** {1})"}, "same", "iuf"), POW_JVP,
           numpy=("power", "pow"), arity=2, vector_math="power", corrected="integers.power", spmd=LOOP,
           cuda=Cuda("binary", lambda x, y: x ** y)),
    _numpy("float_power", _np2("power"), dtype="float64", arity=2),
    _math("arctan2", Jvp(2, left="{y} * {t} / ({x} * {x} + {y} * {y})", right="-{x} * {u} / ({x} * {x} + {y} * {y})"),
          numpy=("arctan2", "atan2"), math_name=("atan2",), vector_math="atan2", arity=2, domain=_SIGNED),
    _math("hypot", Jvp(2, left="{x} * {t} / {p}", right="{y} * {u} / {p}"), vector_math="hypot", arity=2,
          domain=_SIGNED),
    _math("fmod", Jvp(2, left="{t}", right="-{m}.trunc({x} / {y}) * {u}"), arity=2, corrected="fmod",
          cuda=Cuda("binary", lambda x, y: math.fmod(x, y)), dtype="same", kinds="if", domain=REMAINDERS),
    _numpy("logaddexp", _np2("logaddexp"), dtype="float", arity=2, kinds="f"),
    _numpy("logaddexp2", _np2("logaddexp2"), dtype="float", arity=2, kinds="f"),
    _numpy("nextafter", _np2("nextafter"), dtype="float", arity=2, kinds="f"),
    _numpy("maximum", Template({"": _MAX}, "same", "biuf"), _MAX_JVP, arity=2),
    _numpy("fmax", Template({"": _FMAX}, "same", "biuf"), _MAX_JVP, arity=2),
    _builtin("max", np.maximum, _MAX_JVP, arity=2),
    _numpy("minimum", Template({"": _MIN}, "same", "biuf"), _MIN_JVP, arity=2),
    _numpy("fmin", Template({"": _FMIN}, "same", "biuf"), _MIN_JVP, arity=2),
    _builtin("min", np.minimum, _MIN_JVP, arity=2),
    # tests (boolean: zero derivative)
    _math("isnan", ZERO_JVP, template=Template({"": "({0} != {0})"}, "bool", "biufc"), dtype="bool"),
    _math("isinf", ZERO_JVP, template=_np1("isinf", "biuf", "bool"), cuda=Cuda("predicate", math.isinf,
                                                                                  constant=False),
          dtype="bool", kinds="if"),
    _math("isfinite", ZERO_JVP, template=_np1("isfinite", "biuf", "bool"),
          cuda=Cuda("predicate", math.isfinite, constant=True), dtype="bool", kinds="if"),
    _numpy("signbit", _np1("signbit", "f", "bool"), ZERO_JVP, dtype="bool", kinds="f", domain=_SIGNED),
    _numpy("isclose", None, ZERO_JVP, dtype="bool", arity=2, kinds="f", math=("isclose",)),
    # conversions
    _builtin("float", np.float64, Jvp(1, unary="{t}"), dtype="float64", category="conversion"),
    _numpy("float64", None, Jvp(1, unary="{t}"), dtype="float64", category="conversion"),
    _builtin("int", np.int64, ZERO_JVP, dtype="int64", category="conversion"),
    _numpy("int64", None, ZERO_JVP, dtype="int64", category="conversion"),
    _numpy("int32", None, ZERO_JVP, dtype="int32", category="conversion"),
    _builtin("bool", np.bool_, ZERO_JVP, dtype="bool", kinds="bif", numpy=("bool",), category="conversion"),
)
