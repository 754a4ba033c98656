"""The operations W lanes compute with one LLVM vector instruction, and why each is exact.

Which operators and functions qualify is each primitive's ``"spmd"`` rule
(:mod:`lanewise.primitives`); this module holds the instructions themselves:
IEEE arithmetic and ordered comparisons, integer ``//`` and ``%`` with Python's
floor conventions, ``//``/``%`` by a power of two as a shift and a mask, and
``x ** k`` for a small literal ``k`` as Numba's unrolled multiplications.

Example:
    >>> import math, operator
    >>> _NATIVE[operator.add], _CMP[operator.le], math.sqrt in INSTRUCTIONS
    (('fadd', 'add'), '<=', True)
"""

from __future__ import annotations

import operator

from llvmlite import ir
from numba.core import types

from .. import primitives


def literal_int(t):
    """The value of an integer literal type, else None."""
    return t.literal_value if isinstance(t, types.IntegerLiteral) else None


def _operators() -> tuple[dict, dict]:
    """From the operators' spmd rules: operator -> (IRBuilder method for floats, for
    integers/booleans), and comparison -> its predicate."""
    arithmetic, compare = {}, {}
    for prim in primitives.with_rule("spmd"):
        vector = prim.rules["spmd"]
        for fn in prim.objects if prim.symbol is not None else ():
            if vector.float or vector.integer:
                arithmetic[fn] = (vector.float, vector.integer)
            if vector.compare:
                compare[fn] = vector.compare
    return arithmetic, compare


_NATIVE, _CMP = _operators()

#: math/NumPy functions Numba lowers to LLVM instructions, which vectorise.
INSTRUCTIONS = frozenset(fn for prim in primitives.with_rule("spmd") if prim.symbol is None
                         and prim.rules["spmd"].how == "instruction" for fn in prim.denoting())


def native(context, builder, fn, sig, vals):
    """One vector instruction for ``fn`` on same-typed lanes, or None."""
    dt = sig.args[0]
    if any(a != dt for a in sig.args):
        return None
    if fn in _NATIVE and sig.return_type == dt:
        fop, iop = _NATIVE[fn]
        op = fop if isinstance(dt, types.Float) else iop
        return None if op is None else getattr(builder, op)(*vals)
    if fn in _CMP and isinstance(sig.return_type, types.Boolean):
        if isinstance(dt, types.Float):  # Numba: ordered compares, unordered !=
            return (builder.fcmp_unordered("!=", *vals) if fn is operator.ne
                    else builder.fcmp_ordered(_CMP[fn], *vals))
        if isinstance(dt, types.Integer):
            cmp = builder.icmp_signed if dt.signed else builder.icmp_unsigned
            return cmp(_CMP[fn], *vals)
        if isinstance(dt, types.Boolean) and fn in (operator.eq, operator.ne):
            return builder.icmp_unsigned(_CMP[fn], *vals)
    if fn in (operator.floordiv, operator.mod) and isinstance(dt, types.Integer) and sig.return_type == dt:
        return int_divmod(builder, dt, *vals)[fn is operator.mod]
    if fn is operator.neg and isinstance(dt, types.Float):
        return builder.fsub(ir.Constant(vals[0].type, [ir.Constant(vals[0].type.element, -0.0)]
                                        * vals[0].type.count), vals[0])
    if fn is operator.neg and isinstance(dt, types.Integer):
        return builder.neg(vals[0])
    return None


def int_divmod(builder, dt, a, b):
    """Numba's integer ``(a // b, a % b)`` on vectors: Python's floor semantics,
    0 for a zero divisor and for ``MIN // -1`` (numba.cpython.numbers)."""
    vt = a.type
    count, width = vt.count, dt.bitwidth

    def const(v):
        return ir.Constant(vt, [ir.Constant(vt.element, v)] * count)

    zero, one = const(0), const(1)
    special = builder.icmp_unsigned("==", b, zero)
    if dt.signed:
        overflow = builder.and_(builder.icmp_signed("==", a, const(-(1 << (width - 1)))),
                                builder.icmp_signed("==", b, const(-1)))
        special = builder.or_(special, overflow)
    b1 = builder.select(special, one, b)
    if dt.signed:
        q, r = builder.sdiv(a, b1), builder.srem(a, b1)
        fix = builder.and_(builder.icmp_signed("!=", r, zero),
                           builder.icmp_signed("<", builder.xor(b1, r), zero))
        q = builder.sub(q, builder.zext(fix, vt))
        r = builder.add(r, builder.select(fix, b1, zero))
    else:
        q, r = builder.udiv(a, b1), builder.urem(a, b1)
    return builder.select(special, zero, q), builder.select(special, zero, r)


def power_of_two(builder, fn, sig, args, vals):
    """``x // 2**k`` and ``x % 2**k`` for a literal divisor: an arithmetic shift and
    a mask are exactly Python's floor division and modulo (negative x included)."""
    if fn not in (operator.floordiv, operator.mod) or len(args) != 2:
        return None
    divisor = literal_int(args[1])
    dt = sig.return_type
    if divisor is None or divisor <= 0 or divisor & (divisor - 1) or not isinstance(dt, types.Integer) \
            or sig.args != (dt, dt):
        return None
    vt = vals[0].type
    if fn is operator.mod:
        return builder.and_(vals[0], ir.Constant(vt, [ir.Constant(vt.element, divisor - 1)] * vt.count))
    shift = ir.Constant(vt, [ir.Constant(vt.element, divisor.bit_length() - 1)] * vt.count)
    return builder.ashr(vals[0], shift) if dt.signed else builder.lshr(vals[0], shift)


def static_power(builder, fn, sig, args, vals):
    """``x ** k`` for a literal ``0 <= k <= 64``: the multiplications Numba's scalar
    ``static_power_impl`` unrolls, on whole vectors, so every lane gets the scalar
    path's bits without a call per lane.  ``k < 0`` stays a call per lane: ``0.0 **
    -2`` raises ZeroDivisionError in Python, and in the lanes."""
    k = literal_int(args[1]) if fn is operator.pow and len(args) == 2 else None
    dt = sig.return_type
    if k is None or not 0 <= k <= 64 or sig.args[0] != dt or not isinstance(dt, (types.Float, types.Integer)):
        return None
    mul = builder.fmul if isinstance(dt, types.Float) else builder.mul
    val, res, e = vals[0], None, abs(k)
    while e:
        if e & 1:
            res = val if res is None else mul(res, val)  # Numba's 1 * val folds to val
        e >>= 1
        val = mul(val, val)
    vt = vals[0].type
    if res is None:  # x ** 0
        return ir.Constant(vt, [ir.Constant(vt.element, 1.0 if isinstance(dt, types.Float) else 1)] * vt.count)
    return res
