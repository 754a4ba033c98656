"""Typed operations Numba compiles to another value than Python's: refused, on every backend.

uint64 values that Numba would compute as int64, and ``~`` of a bool (below).

Numba types an operation between a ``uint64`` and a signed integer variable
(``v + k``) as ``int64``: the uint64 is reinterpreted, so every value >= 2**63
computes as a negative number (``(2**64 - 1) // k`` gave -1 for ``k = 2``), where
NumPy 2 computes in float64.  No cheap rewrite keeps Numba's speed and NumPy's
answer, so the compiled lane is read after typing and such a conversion is a
:class:`~lanewise.errors.LaneTypeError` naming the file and line, with the fix
(an unsigned operand, ``np.uint64(k)``, or an explicit ``int(v)``/``float(v)``).
With a non-negative int constant (``v // 3``, ``v % 1000``) NumPy's answer is
exact and uint64, and :mod:`lanewise.lanemath.mixedints` types it so: not refused;
a negative constant (``v + -1``, which NumPy refuses with OverflowError) still is.
Comparisons are exact (lanemath.mixedints) and explicit conversions are the
user's choice.

``max(v, k)``/``min`` of a uint64 and a signed integer variable is computed in
float64 when compiled, which rounds values above 2**53: refused the same way.

Arithmetic of a signed integer with an int constant in [2**63, 2**64) (``n + 2**63``):
Numba types the constant uint64 and computes in int64 (it wraps to a negative number),
NumPy raises OverflowError; refused, pointing at ``np.uint64(n)`` or a float constant.

``~b`` of a bool is Python's int ``-2``/``-1`` but Numba's logical not: refused
the same way, pointing at ``not b``.

A NumPy ufunc of a bool or an 8-bit integer (``np.exp(x > 0)``, ``np.sin(np.int8(v))``)
that NumPy computes in float16 (``np.exp(True)`` is ``2.719``): compiled code has no
float16 and computes it in float32 or float64 (``2.718281828``), so the reference and
compiled backends would disagree in the fourth digit; refused, with ``np.exp(float(b))``
as the fix.

``a + b`` of two bools, one a comparison or a NumPy function's result (``(x > 0) +
(y > 0)``): NumPy's bools, which lanes get on the reference backend, add as a
logical or (``np.True_ + np.True_`` is ``True``) and refuse ``a - b``; compiled code
adds them as integers (2).  Refused, with ``int(a) + int(b)`` as the fix.  Python's
bools (a bool array's elements) add as integers everywhere and are left alone.

``a - b`` of two unsigned integers narrower than 64 bits (``np.uint8(v) -
np.uint8(5)``, two elements of a uint8 row): Numba computes it in uint64, so
``2 - 5`` is 18446744073709551613, where NumPy wraps at the operands' width (253)
and Python gives -3.  Neither answer can be had from that value: refused, with
``np.int64(a) - np.int64(b)`` (and ``% 256`` for NumPy's wrap) as the fix.  The other
operations on such values agree with NumPy or give the exact value, as every
narrow integer does in a lane (``docs/lanes.md``, L06).

Example:
    >>> import numba, numpy as np
    >>> @numba.njit
    ... def half(v, k):
    ...     return v // k
    >>> _ = half(np.uint64(7), 2)
    >>> try:
    ...     check_unsigned_mixing(half)
    ... except LaneTypeError as e:
    ...     print(type(e).__name__)
    UnsignedMixingError
"""

from __future__ import annotations

import operator

import numpy as np
from numba.core import ir
from numba.core import types as nt
from numba.core.dispatcher import Dispatcher
from numba.np import numpy_support

from ..errors import LaneTypeError, source_line


class UnsignedMixingError(LaneTypeError):
    """A lane computes something Numba gives another value than Python (see the module doc)."""

    #: Every backend refuses it, the python reference included: its NumPy
    #: scalars would compute the value the compiled backends cannot.
    every_backend = True


def check_unsigned_mixing(dispatcher: Dispatcher, typed=None) -> None:
    """Raise :class:`UnsignedMixingError` if a compiled overload of ``dispatcher``
    (or of a lanewise-jitted helper it calls) converts a uint64 value to a signed integer.
    ``typed``: typed IR that inlined ``dispatcher``'s code (lane.typing_only.Typed),
    checked too, its lines named after ``dispatcher``."""
    if typed is not None:
        _check(typed, dispatcher, typed.inlined)
    for disp in reachable(dispatcher):
        for cres in list(disp.overloads.values()):
            annotation = getattr(cres, "type_annotation", None)  # a str for code loaded from a cache
            if hasattr(annotation, "typemap") and hasattr(annotation, "calltypes"):
                _check(annotation, disp)


def _check(annotation, disp, read=lambda expr: True) -> None:
    """Raise for the first typed expression that ``read`` selects and a rule refuses."""
    typemap, named = annotation.typemap, _Names(annotation, disp)
    for expr, sig in annotation.calltypes.items():
        if sig is None or not isinstance(expr, ir.Expr) or not read(expr):
            continue
        for applies, what in _RULES:
            if applies(expr, sig, typemap, named):
                loc = expr.loc
                text = source_line(loc.filename, loc.line)
                raise UnsignedMixingError(f"{loc.filename}:{loc.line}: {text + ': ' if text else ''}"
                                          f"{what.format(getattr(disp.py_func, '__qualname__', disp))}")


class _Names:
    """The rules' view of the user's names in typed IR: ``named(var)`` is what the
    user's code named as ``var`` (:func:`_named`), ``named.definition(var)`` the one
    expression that defines it (None: defined on several paths, or an argument)."""

    def __init__(self, annotation, disp):
        self.annotation, self.disp, self._definitions = annotation, disp, None

    def definition(self, var):
        if self._definitions is None:
            self._definitions = {}
            for block in self.annotation.blocks.values():
                for stmt in block.find_insts(ir.Assign):
                    self._definitions.setdefault(stmt.target.name, []).append(stmt.value)
        where = self._definitions.get(getattr(var, "name", None), ())
        return where[0] if len(where) == 1 else None

    def __call__(self, var):
        return _named(self.annotation, self.definition(var), self.disp)


def _named(annotation, where, disp):
    """What the user's code named as the variable ``where`` defines: ``np.exp`` for a
    callee the compiled code calls the lanemath stand-in of, a constant's value
    (None: neither a constant, a global nor a module attribute)."""
    if isinstance(where, ir.Expr) and where.op == "getattr":
        module = _module_of(annotation.typemap, where.value)
        stands_for = getattr(module, "__lw_shadows__", getattr(module, "__name__", ""))
        return getattr(np, where.attr, None) if stands_for == "numpy" else None
    if isinstance(where, ir.Const):
        return where.value
    if isinstance(where, ir.Global):
        original = getattr(disp.py_func, "_lw_original", disp.py_func)  # its globals before the rebinding
        return original.__globals__.get(where.name, where.value)
    return getattr(where, "value", None) if isinstance(where, ir.FreeVar) else None


def _module_of(typemap, var):
    """The Python module a typed variable holds (None: not a module)."""
    return getattr(typemap.get(getattr(var, "name", None)), "pymod", None)


def _reinterprets(expr: ir.Expr, sig, typemap, named) -> bool:
    """Whether ``expr`` turns a uint64 operand into a signed integer: arithmetic of
    uint64 with a signed integer giving a signed integer, or a uint64 passed to a
    signed parameter."""
    if expr.op in ("binop", "inplace_binop"):
        have = _operand_types(expr, typemap)
        return nt.uint64 in have and any(_signed(t) for t in have) and _signed(sig.return_type)
    if expr.op == "call":
        return any(_unliteral(typemap.get(getattr(a, "name", None))) == nt.uint64 and _signed(want)
                   for a, want in zip(expr.args, sig.args, strict=False))  # sig may add omitted defaults
    return False


def _wide_literal_arithmetic(expr: ir.Expr, sig, typemap, named) -> bool:
    """Arithmetic of a signed integer with an int constant in [2**63, 2**64) (``n + 2**63``):
    Numba types the constant uint64 and computes in int64, which wraps it to a negative
    number; NumPy and the python backend raise OverflowError (the constant does not fit
    the int64).  Comparisons are exact (lanemath.mixedints)."""
    if expr.op not in ("binop", "inplace_binop") or expr.fn in _COMPARES:
        return False
    operands = [typemap.get(expr.lhs.name), typemap.get(expr.rhs.name)]
    wide = [isinstance(t, nt.IntegerLiteral) and t.literal_value >= 2**63 for t in operands]
    return any(wide) and any(_signed(t) for t in operands)


def _operand_types(expr: ir.Expr, typemap) -> list:
    """The types of a binary operation's operands, a literal as its type (``3`` as int64)."""
    return [_unliteral(typemap.get(expr.lhs.name)), _unliteral(typemap.get(expr.rhs.name))]


def _unliteral(t):
    return None if t is None else nt.unliteral(t)


def _orders_through_float(expr: ir.Expr, sig, typemap, named) -> bool:
    """``max(v, 1)``/``min`` of a uint64 and a signed integer: Numba unifies the two as
    float64 (2**53 + 1 came back as 2**53), where Python returns one of the values."""
    if expr.op != "call" or getattr(typemap.get(expr.func.name), "typing_key", None) not in (max, min):
        return False
    have = [_unliteral(typemap.get(getattr(a, "name", None))) for a in expr.args]
    return nt.uint64 in have and any(_signed(t) for t in have) and isinstance(sig.return_type, nt.Float)


def _inverts_a_bool(expr: ir.Expr, sig, typemap, named) -> bool:
    """``~b`` with ``b`` a bool: Python's int ``~True == -2``, Numba's logical not."""
    return expr.op == "unary" and expr.fn is operator.invert and isinstance(typemap.get(expr.value.name),
                                                                           nt.Boolean)


def _adds_bools(expr: ir.Expr, sig, typemap, named) -> bool:
    """``a + b`` (or ``-``) of two bools, one of them NumPy's (a comparison, or what a
    NumPy function returns: lanes get NumPy scalars on the reference backend), whose
    bools add as a logical or (``np.True_ + np.True_`` is ``True``) and refuse ``-``;
    compiled code adds integers.  Python's bools (elements of a bool array, ``not x``)
    add as integers everywhere (docs/lanes.md, L04)."""
    if expr.op not in ("binop", "inplace_binop") or expr.fn not in _ADDS:
        return False
    operands = (expr.lhs, expr.rhs)
    return (all(isinstance(typemap.get(v.name), nt.Boolean) for v in operands)
            and any(_numpy_bool(named.definition(v), named) for v in operands))


_ADDS = (operator.add, operator.iadd, operator.sub, operator.isub)
_COMPARES = (operator.lt, operator.le, operator.gt, operator.ge, operator.eq, operator.ne)


def _numpy_bool(where, named) -> bool:
    """Whether an expression gives a NumPy bool on the reference backend: a comparison
    (of its NumPy scalars) or a call of a NumPy function."""
    if not isinstance(where, ir.Expr):
        return False
    if where.op == "binop":
        return where.fn in _COMPARES
    if where.op == "call":
        callee = named(where.func)
        return isinstance(callee, np.ufunc) or (getattr(callee, "__module__", None) or "").startswith("numpy")
    return False


def _subtracts_narrow_unsigned(expr: ir.Expr, sig, typemap, named) -> bool:
    """``a - b`` with both operands unsigned and narrower than 64 bits (computed in uint64)."""
    if expr.op not in ("binop", "inplace_binop") or expr.fn not in (operator.sub, operator.isub):
        return False
    have = [typemap.get(expr.lhs.name), typemap.get(expr.rhs.name)]
    return all(isinstance(t, nt.Integer) and not t.signed for t in have) and max(t.bitwidth for t in have) < 64


def _float16_ufunc(expr: ir.Expr, sig, typemap, named) -> bool:
    """A NumPy ufunc whose NumPy loop for these arguments is float16 (a bool or 8-bit integer
    argument of ``np.exp``, ``np.arctan2``, ...): compiled code computes it wider."""
    if expr.op != "call" or expr.kws:
        return False
    have = [_numpy_dtype(typemap.get(getattr(a, "name", None))) for a in expr.args]
    if any(d is None for d in have) or not any(d.kind == "b" or d.itemsize == 1 for d in have):
        return False  # the common case: nothing narrow enough for a float16 loop
    # A Python number written in the lane is weak in NumPy: np.arctan2(np.int8(v), 2) is float16.
    have = [_weak(named(a), d) for a, d in zip(expr.args, have, strict=True)]
    ufunc = named(expr.func)
    if not isinstance(ufunc, np.ufunc) or len(have) != ufunc.nin:
        return False
    try:
        loop = ufunc.resolve_dtypes(tuple(have) + (None,) * ufunc.nout)
    except (TypeError, ValueError):  # no NumPy loop: Numba's own typing decided
        return False
    return any(d == np.float16 for d in loop[ufunc.nin:])


def _weak(constant, dtype):
    """NumPy's weak Python type for a Python int/float/complex constant, else ``dtype``."""
    return type(constant) if type(constant) in (int, float, complex) else dtype


def _numpy_dtype(t):
    """The NumPy dtype of a Numba scalar or array type (None: neither)."""
    if t is None:
        return None
    t = t.dtype if isinstance(t, nt.Array) else nt.unliteral(t)
    try:
        return numpy_support.as_dtype(t)
    except Exception:  # noqa: BLE001 - any type NumPy has no dtype for
        return None


#: (does this typed expression compile to another value than Python's?, the error's text).
_RULES = (
    (_wide_literal_arithmetic, "arithmetic of a signed integer with an integer constant >= 2**63 in {}: the "
                               "constant does not fit an int64, so NumPy raises OverflowError and compiled code "
                               "would wrap it to a negative number. Make the other operand unsigned "
                               "(np.uint64(n) + 2**63), or use a float constant (2.0**63)."),
    (_reinterprets, "a uint64 value is combined with a signed integer in {}; compiled, it would be computed "
                    "as int64, which makes every value >= 2**63 negative (NumPy keeps uint64). Make the other "
                    "operand unsigned (np.uint64(2)) or convert explicitly (int(v), float(v))."),
    (_orders_through_float, "max()/min() of a uint64 value and a signed integer in {}: compiled, both are "
                            "converted to float64, which rounds values above 2**53 (Python returns one of them "
                            "unchanged). Make the other operand unsigned (np.uint64(1)) or convert explicitly."),
    (_inverts_a_bool, "~ of a bool in {}: Python gives an int (~True == -2) but compiled code a logical not; "
                      "write `not b` for the logical not, or ~int(b) for Python's value."),
    (_float16_ufunc, "a NumPy function of a bool or 8-bit integer in {}: NumPy computes it in float16 "
                     "(np.exp(True) == 2.719) but compiled code in float32 or float64 (2.718281828), so results "
                     "would differ between backends. Convert the argument first: np.exp(float(b)) (or "
                     "b.astype(np.float64) for an array)."),
    (_adds_bools, "a + b (or a - b) of two bools in {}: NumPy adds its bools as a logical or "
                  "(np.True_ + np.True_ is True) and refuses a - b, but compiled code computes with "
                  "integers (2), so results would differ between backends. Write int(a) + int(b) to count, "
                  "or np.logical_or(a, b)."),
    (_subtracts_narrow_unsigned, "a - b of two unsigned integers narrower than 64 bits in {}: NumPy wraps at "
                                 "their width (np.uint8(2) - np.uint8(5) == 253) but compiled code computes in "
                                 "uint64 (18446744073709551613). Write np.int64(a) - np.int64(b) for the "
                                 "difference (-3; int(a) keeps a's type when compiled), and take it % 256 (for "
                                 "uint8) for NumPy's wrapped value."),
)


def _signed(t) -> bool:
    return isinstance(t, nt.Integer) and t.signed


def reachable(dispatcher: Dispatcher) -> list[Dispatcher]:
    """``dispatcher`` and the dispatchers its function's globals and closure
    hold (lanewise binds a lane's helpers there), transitively."""
    seen, todo = {}, [dispatcher]
    while todo:
        disp = todo.pop()
        if id(disp) in seen:
            continue
        seen[id(disp)] = disp
        fn = disp.py_func
        cells = [c.cell_contents for c in (fn.__closure__ or ()) if _filled(c)]
        names = fn.__code__.co_names
        values = [fn.__globals__.get(n) for n in names] + cells
        todo += [v for v in values if isinstance(v, Dispatcher)]
    return list(seen.values())


def _filled(cell) -> bool:
    try:
        _ = cell.cell_contents
    except ValueError:
        return False
    return True
