"""Operators between a ``uint64`` and a signed integer, exact wherever NumPy 2's answer is.

Numba types ``v // 3`` of a ``uint64`` ``v`` as int64 (the value is reinterpreted:
every ``v >= 2**63`` computes as a negative number) and compares a uint64 with a
signed integer through float64 (``n < 2**63`` was False for ``n = 2**63 - 1``,
``v == 2**60 + 1`` True for ``v = 2**60``).  NumPy 2 and a lane run by
``backend="python"`` (NumPy scalars) give the exact answers:

* a uint64 with a non-negative Python int written in the lane (``v // 3``, ``v %
  1000``, ``v * 6364136223846793005 + 1``, ``3 << v``, ``divmod(v, 10)``): the
  literal is weak and becomes a uint64, so the result is uint64, wrapping modulo
  2**64 as NumPy's does.  This module types these as the uint64 operation (the
  literal converted), which compiles to Numba's own uint64 code and vectorises as it.
  (``max(v, 1)`` stays refused: Python's ``max`` returns the int ``1`` itself, so the
  python backend's values have no one type.)
* a comparison of a uint64 with any signed integer (``n < 2**63``, ``v == k``): the
  mathematical answer, compiled as ``n < 0 or uint64(n) < v`` (two integer compares).

What stays refused (:mod:`lanewise.lane.signedness`): arithmetic of a uint64 with a
signed *variable* (NumPy gives float64, Numba int64), with a negative literal (NumPy
raises ``OverflowError``), and of a signed integer with a literal >= 2**63.

The typing templates are registered for the CPU target only and are tried before
Numba's generic ones (Numba orders templates by target specificity); they decline
every other case, which keeps Numba's typing.  They hold for any Numba code in the
process once :mod:`lanewise.lanemath` is imported (a lane's first compile imports
it), as :mod:`.intpower`'s implementations do.

Example:
    >>> import numba, numpy as np
    >>> int(numba.njit(lambda v: v // 3)(np.uint64(2**64 - 1)))
    6148914691236517205
    >>> bool(numba.njit(lambda n: n < 2**63)(np.int64(2**63 - 1)))
    True
"""

from __future__ import annotations

import operator

from numba.core import types
from numba.core.imputils import impl_ret_untracked, lower_builtin
from numba.core.typing.templates import AbstractTemplate, infer_global, signature

_ARITHMETIC = (operator.add, operator.iadd, operator.sub, operator.isub, operator.mul, operator.imul,
               operator.floordiv, operator.ifloordiv, operator.mod, operator.imod,
               operator.and_, operator.iand, operator.or_, operator.ior, operator.xor, operator.ixor,
               operator.lshift, operator.ilshift, operator.rshift, operator.irshift)

#: Each comparison, and the one that gives the same answer with its operands swapped.
_MIRROR = {operator.lt: operator.gt, operator.le: operator.ge, operator.gt: operator.lt,
           operator.ge: operator.le, operator.eq: operator.eq, operator.ne: operator.ne}
_LLVM = {operator.lt: "<", operator.le: "<=", operator.gt: ">", operator.ge: ">=",
         operator.eq: "==", operator.ne: "!="}


def _uint64(t) -> bool:
    return types.unliteral(t) == types.uint64


def _signed(t) -> bool:
    return isinstance(t, types.Integer) and types.unliteral(t).signed


def _weak_unsigned(t) -> bool:
    """A non-negative Python int written in the lane, which Numba types as a signed
    literal: NumPy converts it to the other operand's uint64."""
    return isinstance(t, types.IntegerLiteral) and _signed(t) and t.literal_value >= 0


def _with_small_literal(args) -> bool:
    """A uint64 and a non-negative signed literal, in either order."""
    return len(args) == 2 and any(_uint64(a) and _weak_unsigned(b) for a, b in (args, args[::-1]))


class _Template(AbstractTemplate):
    """Registered per target (:func:`_register`): tried before Numba's generic templates
    (target specificity); literals reach it as literals."""

    prefer_literal = True


class _Arithmetic(_Template):
    """``v // 3`` and its siblings: the uint64 operation."""

    def generic(self, args, kws):
        if not kws and _with_small_literal(args):
            return signature(types.uint64, types.uint64, types.uint64)
        return None


class _Divmod(_Template):
    key = divmod

    def generic(self, args, kws):
        if not kws and _with_small_literal(args):
            return signature(types.UniTuple(types.uint64, 2), types.uint64, types.uint64)
        return None


class _Compare(_Template):
    """A uint64 compared with a small literal as uint64; with any other signed integer, exactly
    (:func:`_exact_compare`)."""

    def generic(self, args, kws):
        if kws or len(args) != 2:
            return None
        if _with_small_literal(args):
            return signature(types.boolean, types.uint64, types.uint64)
        if _uint64(args[0]) and _signed(args[1]):
            return signature(types.boolean, types.uint64, types.int64)
        if _signed(args[0]) and _uint64(args[1]):
            return signature(types.boolean, types.int64, types.uint64)
        return None


def _exact_compare(op):
    """``op`` of an int64 and a uint64 (in either order): a negative int64 is below every
    uint64; otherwise both are compared as unsigned, which is exact."""

    def lower(context, builder, sig, args):
        a, b = args
        res = _compare(builder, op, a, b) if sig.args[0].signed else _compare(builder, _MIRROR[op], b, a)
        return impl_ret_untracked(context, builder, sig.return_type, res)

    return lower


def _compare(builder, op, signed, unsigned):
    """``signed op unsigned`` of an int64 and a uint64 held in two i64 registers."""
    negative = builder.icmp_signed("<", signed, signed.type(0))
    unsigned_answer = builder.icmp_unsigned(_LLVM[op], signed, unsigned)
    if op in (operator.lt, operator.le, operator.ne):  # a negative int64 is below, and unequal
        return builder.or_(negative, unsigned_answer)
    return builder.and_(builder.not_(negative), unsigned_answer)


#: The targets whose typing reads these templates: numba-cuda installs third-party
#: templates of Numba's registry for "cuda" (and "generic") targets, and the CPU
#: ignores the "cuda" ones; a CUDA lane is typed on the CPU for its program, so the
#: two must agree (the result's dtype, what is refused).
_TARGETS = ("cpu", "cuda")


def _register() -> None:
    for target in _TARGETS:
        for op in _ARITHMETIC:
            _declare(op, _Arithmetic, target)
        _declare(divmod, _Divmod, target)
        for op in _MIRROR:
            _declare(op, _Compare, target)
    for op in _MIRROR:
        lower_builtin(op, types.int64, types.uint64)(_exact_compare(op))
        lower_builtin(op, types.uint64, types.int64)(_exact_compare(op))


def _declare(op, base, target: str) -> None:
    name = f"_Mixed_{getattr(op, '__name__', op)}_{target}"
    infer_global(op)(type(name, (base,), {"key": op, "metadata": {"target": target}}))


_register()
