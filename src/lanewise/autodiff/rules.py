"""Derivative rules of the math, NumPy and builtin functions a lane may call.

The rules are the ``"jvp"`` slots of :mod:`lanewise.primitives`, here keyed by
the function object (``math.exp`` and ``np.exp`` share a rule), as JAX's
``defjvp`` and autograd's ``defvjp`` tables are.  A rule is a
template of the tangent in terms of the arguments ``{x}``/``{y}``, the result
``{p}``, the argument tangents ``{t}``/``{u}`` and ``{m}``, the module the call
came from (so a float32 NumPy call keeps NumPy's float32 arithmetic).  Every
template is itself plain lane code made of ruled functions, so derivatives of
derivatives (``lw.hessian``) need no other rules.

Non-differentiable points follow JAX (see :mod:`lanewise.primitives.functions`).

Example:
    >>> import math
    >>> rule_for(math.exp).unary
    '{p} * {t}'
    >>> math.floor in ZERO
    True
"""

from __future__ import annotations

import numpy as np

from .. import primitives
from ..primitives import Jvp
from . import intrinsics


#: A rule: ``arity``, and ``unary`` (the tangent for one argument) or ``left``/``right``
#: (the contributions of the first and second argument, summed when both are active).
Rule = Jvp


def _table() -> tuple[dict, frozenset]:
    """The jvp rules of the function primitives (math, NumPy, builtins), by denoting object.
    Python's operators are differentiated by the emitters from the same templates."""
    rules, zero = {}, set()
    for prim in primitives.with_rule("jvp"):
        if prim.symbol is not None:
            continue
        for fn in prim.denoting():
            if prim.rules["jvp"].zero:
                zero.add(fn)
            else:
                rules[fn] = prim.rules["jvp"]
    return rules, frozenset(zero)


RULES, ZERO = _table()
RULES[intrinsics.out] = Rule(1, unary="{t}")  # the identity that returns Python floats


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
