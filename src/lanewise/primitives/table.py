"""The primitive record, its rule kinds, the registry and the one "not supported" error.

A :class:`Primitive` is one operation a lane may perform (``exp``, ``+``, ``<``,
``np.floor_divide`` ...): the Python/NumPy objects that denote it, its reference
meaning (a NumPy callable), its dtype rule, and one rule slot per target.  A
consumer (a backend, autodiff, the fuser) asks :func:`rule` for its slot; an
empty slot raises :class:`UnsupportedPrimitive` naming the primitive, the target
and the user's ``file:line``, so a gap never surfaces as a confusing error from
deeper in a backend.

Example:
    >>> import math
    >>> from lanewise.primitives import lookup, rule
    >>> rule(lookup(math.exp), "jvp", "model.py:3").unary
    '{p} * {t}'
    >>> import numpy as np
    >>> rule(lookup(np.spacing), "tpu", "model.py:3", np.spacing)
    Traceback (most recent call last):
    ...
    lanewise.primitives.table.UnsupportedPrimitive: np.spacing is not supported on the tpu backend (model.py:3)
"""

from __future__ import annotations

import builtins as _builtins
import math as _math
from dataclasses import dataclass, field
from types import MappingProxyType

import numpy as np

from ..errors import LaneCompileError

#: Rule slots, one per target: the compiled backends, then the derivative rules.
TARGETS = ("numba", "spmd", "cuda", "tpu", "jvp", "transpose")
#: Slots whose absence means "this backend cannot compile it" (the others are transformations).
BACKENDS = ("numba", "spmd", "cuda", "tpu")


class UnsupportedPrimitive(LaneCompileError):
    """A lane calls a primitive whose rule for the target it is compiled for is missing."""


# ----------------------------------------------------------------------------- rule kinds


@dataclass(frozen=True)
class Jvp:
    """How a call's tangent is formed (the ``"jvp"`` slot).  ``unary``: the tangent for
    one argument; ``left``/``right``: the contributions of the first and second argument
    (summed when both are active); ``zero``: the result has zero derivative everywhere
    it is defined (integer-valued or boolean).  Templates are read by
    :mod:`lanewise.autodiff.rules`, which documents their placeholders."""

    arity: int
    unary: str | None = None
    left: str | None = None
    right: str | None = None
    zero: bool = False


#: The jvp slot of an integer- or boolean-valued primitive.
ZERO_JVP = Jvp(0, zero=True)


@dataclass(frozen=True)
class Template:
    """How one element of a NumPy ufunc is computed in generated Numba lane code.

    ``templates`` maps a loop dtype kind (``"b"``, ``"f"`` ...; ``""`` = any) to a
    format string over the converted operands ``{0}``, ``{1}``; ``natural`` is what
    Numba computes it as: ``"same"`` (the loop dtype, for 64-bit types), ``"bool"``,
    or ``"cast"`` (anything: the result is converted explicitly).
    """

    templates: dict = field(default_factory=dict)
    natural: str = "cast"
    kinds: str = "biufc"  # loop dtype kinds the templates are right for

    def template_for(self, loop_dtype: np.dtype) -> str | None:
        if loop_dtype.kind not in self.kinds:
            return None
        return self.templates.get(loop_dtype.kind, self.templates.get(""))


@dataclass(frozen=True)
class Numba:
    """The ``"numba"`` slot: Numba's own scalar implementation, plus what lanewise prints
    or substitutes for it.  ``template``: the element template of the fused-expression
    lowering (:mod:`lanewise.fuse`); ``vector_math``: the lanemath function the math and
    NumPy spellings become under ``lw.config.vector_math``; ``corrected``: the lanemath
    function they become always (Numba computes them wrongly for some arguments).  Both
    are paths inside :mod:`lanewise.lanemath` (``"exp"``, ``"integers.power"``), resolved
    there: the table does not import Numba."""

    template: Template | None = None
    vector_math: str | None = None
    corrected: str | None = None


@dataclass(frozen=True)
class Vector:
    """The ``"spmd"`` slot: how W lanes compute it at once.  ``"instruction"``: one
    LLVM vector instruction (``float``/``integer`` name the IRBuilder method for each
    element kind, ``compare`` the predicate); ``"loop"``: its vector-math substitute,
    inlined in a loop over the lanes that LLVM vectorises (a libm call per lane when
    ``lw.config.vector_math`` is off); ``"lanes"``: Numba's scalar code once per lane.
    The SPMD backend reads the instructions (:mod:`lanewise.spmd.instructions`)."""

    how: str
    float: str | None = None
    integer: str | None = None
    compare: str | None = None


@dataclass(frozen=True)
class Cuda:
    """The ``"cuda"`` slot.  ``"native"``: numba-cuda lowers it as is; any other kind
    names the builder of :mod:`lanewise.backends.cuda.npmath` that makes a device
    version (numba-cuda types these NumPy functions but cannot lower them), with its
    scalar implementation ``impl`` (and ``complex_`` for complex arguments, ``constant``
    for a predicate's answer on integers)."""

    kind: str = "native"
    impl: object = None
    complex_: object = None
    constant: object = None


@dataclass(frozen=True)
class Tpu:
    """The ``"tpu"`` slot: ``op`` names the lowering in :mod:`lanewise.backends.tpu.ops`
    (a ``jax.numpy``/``lax`` function with Python's meaning on 32-bit tile values).
    A name, not the function: the table imports neither JAX nor the backend."""

    op: str


NATIVE_NUMBA = Numba()
NATIVE_CUDA = Cuda()
LOOP = Vector("loop")
LANES = Vector("lanes")


# ----------------------------------------------------------------------------- the record


@dataclass(frozen=True, eq=False)
class Primitive:
    """One primitive and all of its rules, side by side.

    ``numpy``/``math``/``builtins``: the attribute names that denote it in those
    modules (the first is how errors spell it); ``objects``: any other denoting
    objects (``operator.add``); ``reference``: its meaning, a NumPy callable
    (elementwise unless ``category`` says otherwise); ``dtype``: the result dtype
    rule of the reference (:func:`result_dtype`);
    ``kinds``: the dtype kinds of its arguments; ``arity``: its argument count;
    ``domain``: sample values inside its domain (tests); ``rules``: target -> rule.
    """

    name: str
    reference: object
    dtype: str | None
    arity: int
    kinds: str = "f"
    numpy: tuple = ()
    math: tuple = ()
    builtins: tuple = ()
    objects: tuple = ()
    domain: tuple = ()
    category: str = "elementwise"
    symbol: str | None = None
    rules: MappingProxyType = field(default_factory=lambda: MappingProxyType({}))

    def denoting(self) -> tuple:
        """Every object that denotes this primitive (attributes that exist only)."""
        modules = ((np, self.numpy), (_math, self.math), (_builtins, self.builtins))
        found = [getattr(module, n) for module, names in modules for n in names if hasattr(module, n)]
        found += list(self.objects)
        unique = {id(obj): obj for obj in found}  # np.asin is np.arcsin: one object, two names
        return tuple(unique.values())

    def spelling(self, obj=None) -> str:
        """How an error names it: as ``obj`` spells it if given (``math.exp``), else
        ``np.foo``, ``math.foo``, ``foo`` or its operator."""
        if self.symbol is not None:
            return f"the operator {self.symbol}"
        modules = (("np.", np, self.numpy), ("math.", _math, self.math), ("", _builtins, self.builtins))
        spellings = [(prefix, module, n) for prefix, module, names in modules for n in names if hasattr(module, n)]
        for prefix, module, n in spellings:
            if obj is not None and getattr(module, n) is obj:
                return prefix + n
        return spellings[0][0] + spellings[0][2] if spellings else self.name


def primitive(name: str, reference, dtype: str | None, arity: int, *, rules: dict | None = None,
              **fields) -> Primitive:
    """A :class:`Primitive` whose rules are given as a dict (kept read-only)."""
    unknown = set(rules or {}) - set(TARGETS)
    if unknown:
        raise ValueError(f"primitive {name}: unknown targets {sorted(unknown)}")
    return Primitive(name, reference, dtype, arity, rules=MappingProxyType(dict(rules or {})), **fields)


# ----------------------------------------------------------------------------- registry


class Registry:
    """Primitives by name and by the objects that denote them (an object denotes one)."""

    def __init__(self):
        self._by_name: dict[str, Primitive] = {}
        self._by_object: dict[int, tuple[object, Primitive]] = {}

    def register(self, prim: Primitive) -> Primitive:
        if prim.name in self._by_name:
            raise ValueError(f"primitive {prim.name!r} is registered twice")
        for obj in prim.denoting():
            if id(obj) in self._by_object:
                raise ValueError(f"{obj!r} denotes both {self._by_object[id(obj)][1].name!r} and {prim.name!r}")
            self._by_object[id(obj)] = (obj, prim)  # the object is kept alive, so its id stays its own
        self._by_name[prim.name] = prim
        return prim

    def named(self, name: str) -> Primitive:
        return self._by_name[name]

    def lookup(self, obj) -> Primitive | None:
        found = self._by_object.get(id(obj))
        return found[1] if found is not None and found[0] is obj else None

    def __iter__(self):
        return iter(self._by_name.values())

    def __len__(self) -> int:
        return len(self._by_name)


def result_dtype(rule_name: str, dtypes) -> np.dtype | None:
    """The result dtype a primitive's reference gives for arguments of ``dtypes``.

    ``"same"``: NumPy's common type; ``"float"``: the common type, integers and
    booleans becoming float64; ``"bool"``; ``"real"``: the real part's type; a dtype
    name (``"float64"``, ``"int64"``): always that; None: not a scalar (``range``).

    Example:
        >>> result_dtype("float", [np.dtype("int32")]), result_dtype("same", [np.dtype("float32")] * 2)
        (dtype('float64'), dtype('float32'))
    """
    if rule_name is None:
        return None
    common = np.result_type(*dtypes)
    if rule_name == "same":
        return common
    if rule_name == "float":
        return np.dtype(np.float64) if common.kind in "biu" else common
    if rule_name == "real":
        return np.empty(0, common).real.dtype
    return np.dtype(rule_name)


def missing(prim: Primitive, target: str, obj=None) -> str:
    """The message for ``prim`` (as ``obj`` spells it) lacking its ``target`` rule, without the location."""
    what = prim.spelling(obj)
    if target in BACKENDS:
        return f"{what} is not supported on the {target} backend"
    kind = "derivative (jvp)" if target == "jvp" else "transpose (reverse-mode)"
    return f"{what} has no {kind} rule"


def rule(prim: Primitive, target: str, loc: str, obj=None):
    """``prim``'s rule for ``target``; a missing one raises :class:`UnsupportedPrimitive`
    naming the primitive (as ``obj``, the object the lane called, spells it), the target
    and ``loc`` (the user's ``file:line``)."""
    if target not in TARGETS:
        raise ValueError(f"unknown target {target!r} (one of {', '.join(TARGETS)})")
    found = prim.rules.get(target)
    if found is None:
        raise UnsupportedPrimitive(f"{missing(prim, target, obj)} ({loc})")
    return found
