"""Derivative rules of the math, NumPy and builtin functions a lane may call.

One table, keyed by the function object (``math.exp`` and ``np.exp`` share a
rule), as JAX's ``defjvp`` and autograd's ``defvjp`` tables are.  A rule is a
template of the tangent in terms of the arguments ``{x}``/``{y}``, the result
``{p}``, the argument tangents ``{t}``/``{u}`` and ``{m}``, the module the call
came from (so a float32 NumPy call keeps NumPy's float32 arithmetic).  Every
template is itself plain lane code made of ruled functions, so derivatives of
derivatives (``lw.hessian``) need no other rules.

Non-differentiable points follow JAX: ``abs`` at 0 has slope +1, ``max``/``min``
ties split the tangent evenly, ``floor``/``round``/comparisons have zero
derivative, ``x ** y`` with ``x == 0`` takes ``log(x)`` as 0.

Example:
    >>> import math
    >>> rule_for(math.exp).unary
    '{p} * {t}'
    >>> math.floor in ZERO
    True
"""

from __future__ import annotations

import builtins
import math
from dataclasses import dataclass

import numpy as np

from . import intrinsics


@dataclass(frozen=True)
class Rule:
    """How a call's tangent is formed.  ``unary``: the tangent for one argument;
    ``left``/``right``: the contributions of the first and second argument
    (summed when both are active).  ``arity``: the number of arguments."""

    arity: int
    unary: str | None = None
    left: str | None = None
    right: str | None = None


_LN10 = repr(math.log(10.0))
_LN2 = repr(math.log(2.0))
_TWO_OVER_SQRT_PI = repr(2.0 / math.sqrt(math.pi))

#: Functions of one argument: name -> tangent template.
_UNARY = {
    "exp": "{p} * {t}",
    "expm1": "({p} + 1.0) * {t}",
    "exp2": f"{{p}} * {_LN2} * {{t}}",
    "log": "{t} / {x}",
    "log1p": "{t} / (1.0 + {x})",
    "log10": f"{{t}} / ({{x}} * {_LN10})",
    "log2": f"{{t}} / ({{x}} * {_LN2})",
    "sqrt": "{t} / (2.0 * {p})",
    "cbrt": "{t} / (3.0 * {p} * {p})",
    "sin": "{m}.cos({x}) * {t}",
    "cos": "-{m}.sin({x}) * {t}",
    "tan": "(1.0 + {p} * {p}) * {t}",
    "asin": "{t} / {m}.sqrt(1.0 - {x} * {x})",
    "arcsin": "{t} / {m}.sqrt(1.0 - {x} * {x})",
    "acos": "-{t} / {m}.sqrt(1.0 - {x} * {x})",
    "arccos": "-{t} / {m}.sqrt(1.0 - {x} * {x})",
    "atan": "{t} / (1.0 + {x} * {x})",
    "arctan": "{t} / (1.0 + {x} * {x})",
    "sinh": "{m}.cosh({x}) * {t}",
    "cosh": "{m}.sinh({x}) * {t}",
    "tanh": "(1.0 - {p} * {p}) * {t}",
    "asinh": "{t} / {m}.sqrt({x} * {x} + 1.0)",
    "arcsinh": "{t} / {m}.sqrt({x} * {x} + 1.0)",
    "acosh": "{t} / {m}.sqrt({x} * {x} - 1.0)",
    "arccosh": "{t} / {m}.sqrt({x} * {x} - 1.0)",
    "atanh": "{t} / (1.0 - {x} * {x})",
    "arctanh": "{t} / (1.0 - {x} * {x})",
    "erf": f"{_TWO_OVER_SQRT_PI} * {{m}}.exp(-{{x}} * {{x}}) * {{t}}",
    "erfc": f"-{_TWO_OVER_SQRT_PI} * {{m}}.exp(-{{x}} * {{x}}) * {{t}}",
    "fabs": "({t} if {x} >= 0 else -{t})",
    "abs": "({t} if {x} >= 0 else -{t})",
    "absolute": "({t} if {x} >= 0 else -{t})",
    "square": "2.0 * {x} * {t}",
    "reciprocal": "-({p} * {p}) * {t}",
    "negative": "-{t}",
    "positive": "{t}",
    "float": "{t}",
    "float64": "{t}",
    "degrees": f"{{t}} * {repr(180.0 / math.pi)}",
    "radians": f"{{t}} * {repr(math.pi / 180.0)}",
    "rad2deg": f"{{t}} * {repr(180.0 / math.pi)}",
    "deg2rad": f"{{t}} * {repr(math.pi / 180.0)}",
}

#: JAX's tie rule for max/min: equal arguments share the tangent evenly.
_MAX_LEFT = "({t} if {x} > {y} else (0.5 * {t} if {x} == {y} else 0.0))"
_MAX_RIGHT = "({u} if {y} > {x} else (0.5 * {u} if {x} == {y} else 0.0))"
_MIN_LEFT = "({t} if {x} < {y} else (0.5 * {t} if {x} == {y} else 0.0))"
_MIN_RIGHT = "({u} if {y} < {x} else (0.5 * {u} if {x} == {y} else 0.0))"

#: Functions of two arguments: name -> (first argument's part, second argument's part).
_BINARY = {
    "atan2": ("{y} * {t} / ({x} * {x} + {y} * {y})", "-{x} * {u} / ({x} * {x} + {y} * {y})"),
    "arctan2": ("{y} * {t} / ({x} * {x} + {y} * {y})", "-{x} * {u} / ({x} * {x} + {y} * {y})"),
    "hypot": ("{x} * {t} / {p}", "{y} * {u} / {p}"),
    "pow": ("(0.0 if {y} == 0 else {y} * {x} ** ({y} - 1)) * {t}",
            "{p} * {m}.log({x} if {x} != 0 else 1.0) * {u}"),
    "power": ("(0.0 if {y} == 0 else {y} * {x} ** ({y} - 1)) * {t}",
              "{p} * {m}.log({x} if {x} != 0 else 1.0) * {u}"),
    "fmod": ("{t}", "-{m}.trunc({x} / {y}) * {u}"),
    "copysign": ("({t} if ({x} >= 0) == ({p} >= 0) else -{t})", "0.0"),
    "maximum": (_MAX_LEFT, _MAX_RIGHT),
    "fmax": (_MAX_LEFT, _MAX_RIGHT),
    "max": (_MAX_LEFT, _MAX_RIGHT),
    "minimum": (_MIN_LEFT, _MIN_RIGHT),
    "fmin": (_MIN_LEFT, _MIN_RIGHT),
    "min": (_MIN_LEFT, _MIN_RIGHT),
}

#: Functions whose result has zero derivative (integer-valued or boolean), by name.
_ZERO_NAMES = ("floor", "ceil", "trunc", "rint", "round", "sign", "isnan", "isinf", "isfinite", "int", "bool",
               "len", "range", "int64", "int32", "floor_divide", "signbit", "isclose", "argmin", "argmax")


def _functions(name: str) -> list:
    """``math.<name>``, ``numpy.<name>`` and ``builtins.<name>`` where they exist."""
    found = [getattr(module, name) for module in (math, np, builtins) if hasattr(module, name)]
    return [f for f in found if callable(f)]


def _table() -> dict:
    table = {}
    for name, template in _UNARY.items():
        for fn in _functions(name):
            table[fn] = Rule(1, unary=template)
    for name, (left, right) in _BINARY.items():
        for fn in _functions(name):
            table[fn] = Rule(2, left=left, right=right)
    return table


RULES: dict = _table()
RULES[intrinsics.out] = Rule(1, unary="{t}")  # the identity that returns Python floats
ZERO: frozenset = frozenset(f for name in _ZERO_NAMES for f in _functions(name))


def rule_for(fn) -> Rule | None:
    """The rule for ``fn``, or None."""
    return RULES.get(fn) if _hashable(fn) else None


def is_zero(fn) -> bool:
    """Whether ``fn``'s result has zero derivative everywhere it is defined."""
    return _hashable(fn) and fn in ZERO


def _hashable(obj) -> bool:
    try:
        hash(obj)
    except TypeError:
        return False
    return True


def module_of(fn) -> str:
    """``"np"`` for NumPy's functions (their float32 arithmetic is kept), else ``"math"``."""
    return "np" if isinstance(fn, np.ufunc) or (getattr(fn, "__module__", "") or "").startswith("numpy") else "math"
