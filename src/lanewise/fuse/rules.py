"""Rule tables: which NumPy ufunc becomes which scalar expression in the lane.

The element templates are the ``"numba"`` rules of :mod:`lanewise.primitives`.

A ufunc's *meaning* (result dtype, loop dtypes, errors such as an int8 constant
that overflows) is always taken from NumPy itself, by calling it on 0-d stand-ins
(:func:`ufunc_dtypes`); a rule only says how one element is computed, from
operands already converted to NumPy's loop dtypes.  A ufunc (or a dtype kind)
with no rule is not guessed: the tracer runs it as a materialisation boundary.

Transcendental functions are written ``np.<name>(...)``: on the CPU backend
lanewise substitutes its vectorisable lane math for them
(``lw.config.vector_math``); the python backend runs NumPy's scalar functions.

Example:
    >>> UFUNCS["add"].template_for(np.dtype("float64"))
    '({0} + {1})'
    >>> convert("a0", np.dtype("int8"), np.dtype("float32")), literal(0.5, np.dtype("float64"))
    ('float32(a0)', '0.5')
"""

from __future__ import annotations

import math

import numpy as np

from .. import primitives
from ..dtypes import check_supported
from ..errors import LaneTypeError
from ..primitives import Template


#: How one element of a ufunc is computed: a primitive's element template.
Rule = Template

#: ufunc name (aliases included) -> its element template, from :mod:`lanewise.primitives`.
UFUNCS: dict[str, Rule] = {name: numba.template for name, numba in primitives.numpy_names("numba").items()
                           if numba.template is not None and isinstance(getattr(np, name, None), np.ufunc)}

#: Elementwise operations that are not ufuncs (built by the tracer), by the graph's names.
OTHER: dict[str, Rule] = {name: primitives.named(name).rules["numba"].template
                          for name in ("where", "cast", "real", "imag")}

#: Loop dtypes whose arithmetic Numba does in that very type (64-bit: no promotion),
#: so a "same" result needs no explicit conversion (keeps the generated lane readable).
_NATIVE = {np.dtype(t) for t in (np.float64, np.int64, np.complex128)}


def needs_cast(rule: Rule, loop: tuple, out: np.dtype) -> bool:
    """Must the rule's result be converted to ``out`` explicitly?"""
    if rule.natural == "bool":
        return out.kind != "b"
    if rule.natural == "same":
        return not (out in _NATIVE and all(d == out for d in loop))
    return True


# ----------------------------------------------------------------------------- conversions


def convert(expr: str, src: np.dtype, dst: np.dtype) -> str:
    """``expr`` (of dtype ``src``) as a ``dst`` value, as NumPy's ``astype`` does."""
    if src == dst:
        return expr
    if dst.kind == "b":
        return f"({expr} != 0)"
    if src.kind == "c" and dst.kind != "c":
        expr = f"({expr}).real"  # NumPy drops the imaginary part (ComplexWarning)
    return f"{dst.name}({expr})"


def to(expr: str, dst: np.dtype) -> str:
    """``expr`` (of whatever type Numba or Python computes it in) as a ``dst`` value."""
    return f"({expr} != 0)" if dst.kind == "b" else f"{dst.name}({expr})"


def literal(value, dtype: np.dtype) -> str:
    """A Python literal for ``value`` computed in ``dtype`` (deterministic text)."""
    if dtype.kind == "b":
        return repr(bool(value))
    if dtype.kind in "iu":
        text = repr(int(value))
        return text if dtype == np.int64 else f"{dtype.name}({text})"
    if dtype.kind == "f":
        text = _float(float(value))
        return text if dtype == np.float64 else f"{dtype.name}({text})"
    value = complex(value)
    return f"{dtype.name}(complex({_float(value.real)}, {_float(value.imag)}))"


def _float(v: float) -> str:
    if math.isnan(v):
        return "np.nan"
    if math.isinf(v):
        return "np.inf" if v > 0 else "(-np.inf)"
    return repr(v)


def cast_names(python: bool) -> dict:
    """The conversion functions a generated lane calls by dtype name.

    Compiled lanes use NumPy's scalar types (Numba wraps integers as C does, like
    ``astype``).  The python backend's lanes see Python ints, which ``np.int8(300)``
    rejects: there, integer conversions wrap through a 0-d array.
    """
    names = {}
    for t in (np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64,
              np.float32, np.float64, np.complex64, np.complex128):
        dt = np.dtype(t)
        names[dt.name] = _wrapping(dt) if python and dt.kind in "iu" else t
    return names


def _wrapping(dtype: np.dtype):
    def convert_int(value):
        with np.errstate(all="ignore"):
            return np.asarray(value).astype(dtype)[()]
    convert_int.__name__ = dtype.name
    return convert_int


# ----------------------------------------------------------------------------- dtypes


def stand_in(dtype: np.dtype, weak: bool, value=None):
    """A NumPy value with ``dtype``'s promotion behaviour: a Python scalar when weak
    (NumPy 2 lets it adopt the other operand's precision), else a 0-d array.
    ``value``: a constant's own value (so NumPy checks e.g. that it fits an int8)."""
    if weak:
        return value if value is not None else {"f": 1.0, "c": 1j, "i": 1, "u": 1, "b": True}[dtype.kind]
    return np.asarray(0 if value is None else value, dtype)


def stand_in_of(node):
    """:func:`stand_in` for a traced node."""
    from .graph import is_weak

    return stand_in(node.dtype, is_weak(node), getattr(node, "value", None))


def loop_key(dtype: np.dtype, weak: bool):
    """How ``ufunc.resolve_dtypes`` spells an operand (Python types are weak)."""
    if weak and dtype.kind in "fci":
        return {"f": float, "c": complex, "i": int}[dtype.kind]
    return dtype


_COMPARISONS = frozenset("less less_equal greater greater_equal equal not_equal".split())


def constant_comparison(ufunc: np.ufunc, operands) -> bool | None:
    """The answer of comparing an integer array with a Python int no value of its dtype
    reaches, which is the same for every element; None for any other operation.

    NumPy 2 compares the true values (``int8_array < 300`` is True everywhere,
    ``uint64_array == -1`` False); converting the int to the loop dtype would wrap
    it (300 is 44 in int8).  ``operands`` are (dtype, weak, constant value or None)
    triples, as for :func:`ufunc_dtypes`.

    Example:
        >>> int8, weak_int = (np.dtype(np.int8), False, None), (np.dtype(np.int64), True, 300)
        >>> constant_comparison(np.less, [int8, weak_int]), constant_comparison(np.less, [weak_int, int8])
        (True, False)
    """
    if ufunc.__name__ not in _COMPARISONS:
        return None
    for (dtype, weak, _), (_, other_weak, value) in ((operands[0], operands[1]), (operands[1], operands[0])):
        if not weak and dtype.kind in "iu" and other_weak and type(value) is int \
                and not np.iinfo(dtype).min <= value <= np.iinfo(dtype).max:
            # Beyond the dtype, every value compares alike: NumPy's answer on a stand-in is the answer.
            return bool(ufunc(*[stand_in(d, w, v) for d, w, v in operands]))
    return None


def ufunc_dtypes(ufunc: np.ufunc, operands, what: str, dtype=None) -> tuple[tuple, tuple]:
    """(loop dtypes of the inputs, result dtypes) of ``ufunc`` on ``operands``.

    ``operands`` are (dtype, weak, constant value or None) triples.  NumPy decides;
    its errors (an overflowing int constant, a dtype with no loop) surface as is.
    """
    kw = {} if dtype is None else {"dtype": dtype}
    with np.errstate(all="ignore"):
        result = ufunc(*[stand_in(d, w, v) for d, w, v in operands], **kw)
    results = result if isinstance(result, tuple) else (result,)
    outs = tuple(check_supported(np.asarray(r).dtype, f"the result of np.{ufunc.__name__} ({what})")
                 for r in results)
    try:
        keys = tuple(loop_key(d, w) for d, w, _ in operands)
        resolved = ufunc.resolve_dtypes(keys + ((np.dtype(dtype),) if dtype is not None else (None,))
                                        * ufunc.nout)
        loop = tuple(resolved[:ufunc.nin])
    except (TypeError, ValueError):  # no explicit loop (e.g. mixed weak types): NumPy's common type
        common = np.result_type(*[stand_in(d, w, v) for d, w, v in operands])
        loop = (common,) * ufunc.nin
    for d in loop:
        if d.kind not in "biufc" or d == np.float16:
            raise LaneTypeError(f"np.{ufunc.__name__} ({what}) computes in {d}, which lanes do not support")
    return loop, outs
