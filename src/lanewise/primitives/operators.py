"""Python's operators and comparisons, their NumPy ufunc spellings, row access and selection.

A Python operator (``a + b`` in a lane) and its NumPy ufunc (``np.add``) are two
primitives: they differ on booleans (``True + True`` is 2, ``np.add`` of bools is
a logical or) and in typing (Python scalars vs NumPy's promotion).

Example:
    >>> import operator
    >>> from lanewise.primitives import lookup
    >>> lookup(operator.lt).rules["spmd"].compare, lookup(operator.add).spelling()
    ('<', 'the operator +')
"""

from __future__ import annotations

import operator

import numpy as np

from .functions import POW_JVP, REMAINDERS, op_template
from .table import LANES, NATIVE_CUDA, NATIVE_NUMBA, ZERO_JVP, Cuda, Jvp, Numba, Template, Vector, primitive


def _operator(fn, symbol, reference, vector, jvp=None, *, dtype="same", kinds="if", arity=2, **fields):
    rules = {"numba": NATIVE_NUMBA, "spmd": vector, "cuda": NATIVE_CUDA, "jvp": jvp}
    return primitive(f"operator.{fn.__name__}", reference, dtype, arity, kinds=kinds, objects=(fn,),
                     symbol=symbol, rules={k: v for k, v in rules.items() if v is not None}, **fields)


def _arith(float_op, int_op):
    return Vector("instruction", float=float_op, integer=int_op)


OPERATORS = (
    _operator(operator.add, "+", np.add, _arith("fadd", "add"), Jvp(2, left="{t}", right="{u}")),
    _operator(operator.sub, "-", np.subtract, _arith("fsub", "sub"), Jvp(2, left="{t}", right="-{u}")),
    _operator(operator.mul, "*", np.multiply, _arith("fmul", "mul"), Jvp(2, left="{t} * {y}", right="{x} * {u}")),
    _operator(operator.truediv, "/", np.true_divide, _arith("fdiv", None),
              Jvp(2, left="{t} / {y}", right="-{p} * {u} / {y}"), dtype="float"),
    # integer // and % are vector instructions with Python's floor conventions (spmd.instructions)
    _operator(operator.floordiv, "//", np.floor_divide, Vector("instruction")),
    _operator(operator.mod, "%", np.remainder, Vector("instruction"),
              Jvp(2, left="{t}", right="-{m}.floor({x} / {y}) * {u}"), domain=REMAINDERS),
    _operator(operator.pow, "**", np.power, LANES, POW_JVP),
    _operator(operator.lshift, "<<", np.left_shift, LANES, kinds="i"),
    _operator(operator.rshift, ">>", np.right_shift, LANES, kinds="i"),
    _operator(operator.and_, "&", np.bitwise_and, _arith(None, "and_"), kinds="bi"),
    _operator(operator.or_, "|", np.bitwise_or, _arith(None, "or_"), kinds="bi"),
    _operator(operator.xor, "^", np.bitwise_xor, _arith(None, "xor"), kinds="bi"),
    _operator(operator.neg, "unary -", np.negative, Vector("instruction"), Jvp(1, unary="-{t}"), arity=1),
    _operator(operator.pos, "unary +", np.positive, LANES, Jvp(1, unary="{t}"), arity=1),
    _operator(operator.invert, "~", np.invert, LANES, arity=1, kinds="i"),
    # an ordered fcmp (unordered for !=) or an icmp whose predicate is the operator's symbol
    *(_operator(fn, symbol, reference, Vector("instruction", compare=symbol), ZERO_JVP, dtype="bool")
      for fn, symbol, reference in ((operator.lt, "<", np.less), (operator.le, "<=", np.less_equal),
                                    (operator.gt, ">", np.greater), (operator.ge, ">=", np.greater_equal),
                                    (operator.eq, "==", np.equal), (operator.ne, "!=", np.not_equal))),
)


def _ufunc(name, template, *, dtype="same", kinds="if", arity=2, cuda=NATIVE_CUDA, numpy=None):
    """A NumPy ufunc spelling of an operator (autodiff has no rule for these calls)."""
    rules = {"numba": Numba(template), "spmd": LANES, "cuda": cuda}
    return primitive(name, getattr(np, name), dtype, arity, kinds=kinds, numpy=numpy or (name,),
                     rules=rules)


# Complex z / w as np.divide: NumPy's own loop (Smith's algorithm; IEEE inf/nan for w == 0,
# and Numba compiles the same), where Numba's operator is CPython's, which raises ZeroDivisionError.
_DIVIDE = Template({"c": "np.divide({0}, {1})", "": "({0} / {1})"}, "same")

UFUNCS = (
    # NumPy adds bools as a logical or (lanewise refuses + of NumPy bools in lanes)
    _ufunc("add", Template({"b": "({0} | {1})", "": "({0} + {1})"}, "same"),
           cuda=Cuda("binary", lambda x, y: x + y)),
    _ufunc("subtract", op_template("-"), cuda=Cuda("binary", lambda x, y: x - y)),
    _ufunc("multiply", op_template("*"), cuda=Cuda("binary", lambda x, y: x * y)),
    _ufunc("divide", _DIVIDE, numpy=("divide", "true_divide"), dtype="float"),
    *(_ufunc(name, op_template(symbol, "bool", "biuf"), dtype="bool")
      for name, symbol in (("less", "<"), ("less_equal", "<="), ("greater", ">"), ("greater_equal", ">="))),
    _ufunc("equal", op_template("==", "bool"), dtype="bool"),
    _ufunc("not_equal", op_template("!=", "bool"), dtype="bool"),
    *(_ufunc(f"logical_{name}", op_template(symbol, "bool", "b"), dtype="bool", kinds="b")
      for name, symbol in (("and", "&"), ("or", "|"), ("xor", "^"))),
    _ufunc("logical_not", Template({"": "(not {0})"}, "bool", "b"), dtype="bool", kinds="b", arity=1),
    *(_ufunc(f"bitwise_{name}", op_template(symbol, "same", "biu"), kinds="bi")
      for name, symbol in (("and", "&"), ("or", "|"), ("xor", "^"))),
    _ufunc("invert", Template({"b": "(not {0})", "": "(~{0})"}, "cast", "biu"), kinds="bi", arity=1),
    _ufunc("left_shift", op_template("<<", "cast", "iu"), kinds="i"),
    _ufunc("right_shift", op_template(">>", "cast", "iu"), kinds="i"),
)


def _other(name, reference, template, *, objects=(), numpy=(), dtype="same", kinds="f", arity=1, **fields):
    """An elementwise operation the fuser builds that is not a ufunc (selection, conversion, parts)."""
    rules = {"numba": Numba(template), "spmd": LANES, "cuda": NATIVE_CUDA}
    return primitive(name, reference, dtype, arity, kinds=kinds, objects=objects, numpy=numpy, rules=rules,
                     **fields)


def _as_is(value):
    """A value unchanged: the meaning of a conversion, whose target dtype is its parameter."""
    return value


#: The fuser's non-ufunc elements, by the names its graph uses.
ELEMENTS = (
    _other("where", np.where, Template({"": "({1} if {0} else {2})"}, "same"), numpy=("where",), arity=3,
           kinds="b", category="selection"),
    _other("cast", _as_is, Template({"": "{0}"}, "same"), category="conversion"),
    _other("real", np.real, Template({"": "({0}).real"}, "cast", "c"), numpy=("real",), dtype="real", kinds="c"),
    _other("imag", np.imag, Template({"": "({0}).imag"}, "cast", "c"), numpy=("imag",), dtype="real", kinds="c"),
)


def _row(name, *, arity=1, dtype="int64", corrected=None, builtins=(), jvp=ZERO_JVP, reference=None):
    """A function of a whole row (an array argument), not of one element."""
    numpy = () if builtins else (name,)
    rules = {"numba": Numba(None, None, corrected), "spmd": LANES, "cuda": NATIVE_CUDA, "jvp": jvp}
    reference = reference or getattr(np, name)
    return primitive(name, reference, dtype, arity, kinds="a", numpy=numpy, builtins=builtins,
                     category="row", rules={k: v for k, v in rules.items() if v is not None})


ROWS = (
    _row("len", builtins=("len",), reference=len),
    _row("argmin"),
    _row("argmax"),
    _row("median", dtype="float", corrected="median", jvp=None),
    _row("dot", arity=2, dtype="same", corrected="dot", jvp=None),
    primitive("range", np.arange, None, 1, kinds="i", builtins=("range",), category="iteration",
              rules={"numba": NATIVE_NUMBA, "spmd": LANES, "cuda": NATIVE_CUDA, "jvp": ZERO_JVP}),
)
