"""Layer 2, primitives: one table of the primitives a lane may call, every rule side by side.

Each primitive (operators, comparisons, conversions, ``math``/NumPy functions,
row access) is registered once, with its reference meaning, dtype rule and one
rule per target: ``"numba"`` (Numba's scalar code, the fuser's element template,
lanemath's substitutes), ``"spmd"`` (W lanes at once), ``"cuda"``, ``"tpu"``,
``"jvp"`` and ``"transpose"``.  The consumers (autodiff, the fuser, the CUDA and
SPMD backends, lanemath) read their rules from here, so adding a function is one
entry, and a missing rule is one clear error:

    >>> import numpy as np
    >>> from lanewise.primitives import lookup, rule
    >>> rule(lookup(np.logaddexp), "tpu", "model.py:12")
    Traceback (most recent call last):
    ...
    lanewise.primitives.table.UnsupportedPrimitive: np.logaddexp is not supported on the tpu backend (model.py:12)

Transpose rules: reverse mode linearises each jvp rule with a unit tangent (every
jvp template is linear in its tangents), so no primitive has its own transpose yet;
the slot is for one whose jvp cannot serve.  TPU rules are listed by primitive name in
:mod:`lanewise.primitives.tpu` and joined to their primitives here.

This package imports only NumPy and the standard library (no Numba): it sits
below the lane layer.
"""

from __future__ import annotations

from .functions import FUNCTIONS
from .operators import ELEMENTS, OPERATORS, ROWS, UFUNCS
from .table import (BACKENDS, NATIVE_CUDA, TARGETS, ZERO_JVP, Cuda, Jvp, Numba, Primitive, Registry, Template,
                    Tpu, UnsupportedPrimitive, Vector, missing, result_dtype, rule)
from .tpu import TPU, with_tpu

REGISTRY = Registry()
for _prim in (*FUNCTIONS, *OPERATORS, *UFUNCS, *ELEMENTS, *ROWS):
    REGISTRY.register(with_tpu(_prim))


def lookup(obj) -> Primitive | None:
    """The primitive ``obj`` (``math.exp``, ``np.add``, ``operator.lt`` ...) denotes, or None.

    >>> import math, numpy as np
    >>> lookup(math.exp) is lookup(np.exp), lookup(print)
    (True, None)
    """
    return REGISTRY.lookup(obj)


def named(name: str) -> Primitive:
    """The primitive called ``name`` (``"exp"``, ``"operator.add"``, a ufunc's name).

    >>> named("floor_divide").spelling()
    'np.floor_divide'
    """
    return REGISTRY.named(name)


def with_rule(target: str) -> list[Primitive]:
    """The primitives that have a ``target`` rule, in registration order.

    >>> "exp" in [p.name for p in with_rule("jvp")]
    True
    """
    return [p for p in REGISTRY if p.rules.get(target) is not None]


def numpy_names(target: str, keep=lambda found: True) -> dict:
    """``{NumPy attribute name: rule}`` of every primitive whose ``target`` rule satisfies
    ``keep`` (aliases included): how the consumers keyed by NumPy names read the table.

    >>> numpy_names("cuda", lambda c: c.kind != "native")["abs"].kind
    'number'
    """
    return {name: p.rules[target] for p in with_rule(target) if keep(p.rules[target]) for name in p.numpy}


__all__ = ["BACKENDS", "NATIVE_CUDA", "REGISTRY", "TARGETS", "ZERO_JVP", "Cuda", "Jvp", "Numba", "Primitive",
           "TPU", "Template", "Tpu", "UnsupportedPrimitive", "Vector", "lookup", "missing", "named", "numpy_names",
           "result_dtype", "rule", "with_rule"]
