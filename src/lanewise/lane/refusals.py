"""Python that compiles inside a lane but would give a wrong or irreproducible result: refused.

Numba compiles some things a lane can say with other meanings than Python's:

* ``random.random()``, ``np.random.normal()`` and friends draw from a per-thread
  generator that ``random.seed``/``np.random.seed`` outside the lane never
  seed: every run differs, and the draws depend on the thread count.  Lanes
  draw with ``lw.random`` instead (counter-based: the same numbers on every
  backend, thread count and chunking).
* an integer constant wider than 64 bits (``n + 2**70``) is wrapped modulo
  2**64 by Numba (``2**70`` became 0).
* a local read where some path leaves it unbound, in a lane with no source text whose
  bytecode lanewise cannot write back (a ``raise``, ``try``): Numba reads a zero where
  Python raises ``UnboundLocalError`` (other lanes get the check: lane.ir.passes.unbound).
* ``f"{x}"``, ``str(x)``, ``repr(x)``, ``format(x)`` of a number format it as
  ``<object type:float64>`` (``len(f"v={x}")`` was 23 for every lane).  A
  formatted message of a ``raise`` is allowed: the host re-raises a failing
  lane's exception from a Python run of that lane, with the right text.

Each is a table row (what to look for, why, what to use instead); the checks
read the lane's bytecode, and its lane IR (:mod:`lanewise.lane.ir`) where it was
read from source (to tell a ``raise`` message from other strings).  Every function compiled for a lane —
the lane and each helper — is checked, and the error names its file and line.

Example:
    >>> def lane(x):
    ...     return len(str(x))
    >>> from lanewise.lane.ir.build import build
    >>> try:
    ...     check(lane, build(lane).entry)
    ... except Exception as e:
    ...     print(type(e).__name__)
    LaneCompileError
"""

from __future__ import annotations

import dis
import heapq
import itertools
import random as _py_random
import types

import numpy as np

from ..errors import LaneCompileError, format_location
from .ir import nodes as ir
from .ir.unparse import is_call

#: Builtins that format a value as text: refused outside a ``raise`` message.
FORMATTERS = {"str": str, "repr": repr, "format": format, "ascii": ascii}

_RANDOM_HINT = ("Python's and NumPy's random generators are not reproducible inside compiled lanes "
                "(per-thread state that random.seed / np.random.seed never reach, draws that depend on the "
                "thread count); draw with lw.random instead, e.g. lw.random.uniform(lw.random.fold_in(key, i))")
_FORMAT_HINT = ("compiled lanes cannot format numbers as text (Numba gives '<object type:float64>'); compute "
                "numbers in the lane and format them outside it (a raise message may use an f-string: the "
                "failing lane is re-run in Python to raise it)")


_WIDE_INT_HINT = ("compiled lanes compute integers in 64 bits, and Numba wraps a wider constant modulo 2**64 "
                  "(2**70 became 0); use a float (2.0**70) or keep the arithmetic outside the lane")


_UNBOUND_HINT = ("this lane has no source text, and its bytecode (which lanewise cannot write back as a lane) "
                 "compiles a read of an unbound local to a silent 0 where Python raises UnboundLocalError; "
                 "bind {name} on every path before the read (e.g. {name} = 0.0 first), or define the lane in a file, "
                 "a notebook cell or python -c (whose text lanewise reads and checks)")


def _instructions(code):
    """(instruction, line) of ``code`` and the code nested in it, with the previous one's context."""
    line = code.co_firstlineno
    previous = None
    for instr in dis.get_instructions(code):
        if instr.positions is not None and instr.positions.lineno is not None:
            line = instr.positions.lineno
        yield (instr, previous), line
        previous = instr
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from _instructions(const)


#: Constant integer operations Numba folds at compile time (in 64 bits).
_FOLDED = {"**": lambda a, b: a ** b if b <= 128 or abs(a) <= 1 else 2 ** 128,
           "<<": lambda a, b: a << min(b, 128), "*": lambda a, b: a * b}


def _wide_constants(code):
    """(text, line) of each int constant outside int64/uint64, or constant expression of
    two int constants (``2**70``, ``1 << 70``) that Python leaves unfolded and Numba folds."""
    def wide(v):
        return type(v) is int and not -2**63 <= v < 2**64

    instrs = [pair[0] for pair, _ in _instructions(code)]
    lines = [line for _, line in _instructions(code)]
    for k, ins in enumerate(instrs):
        if ins.opname == "LOAD_CONST" and wide(ins.argval):
            yield str(ins.argval), lines[k]
        if ins.opname in ("BINARY_OP", "BINARY_POWER", "BINARY_LSHIFT", "BINARY_MULTIPLY") and k >= 2:
            a, b = instrs[k - 2], instrs[k - 1]
            op = ins.argrepr.rstrip("=") if ins.opname == "BINARY_OP" else {
                "BINARY_POWER": "**", "BINARY_LSHIFT": "<<", "BINARY_MULTIPLY": "*"}[ins.opname]
            if a.opname == b.opname == "LOAD_CONST" and type(a.argval) is type(b.argval) is int \
                    and op in _FOLDED and b.argval >= 0 and wide(_FOLDED[op](a.argval, b.argval)):
                yield f"{a.argval} {op} {b.argval}", lines[k]


def _random_use(fn, pair) -> str | None:
    """What random generator the instruction pair loads, if any."""
    instr, previous = pair
    if instr.opname in ("LOAD_ATTR", "LOAD_METHOD") and instr.argval == "random" and previous is not None \
            and previous.opname == "LOAD_GLOBAL" and fn.__globals__.get(previous.argval) is np:
        return f"{previous.argval}.random"
    if instr.opname != "LOAD_GLOBAL":
        return None
    value = fn.__globals__.get(instr.argval)
    if value is _py_random or value is np.random:
        return f"the {value.__name__} module"
    owner = getattr(value, "__self__", None)
    if isinstance(owner, (_py_random.Random, np.random.RandomState, np.random.Generator)):
        return f"{instr.argval}() of {type(owner).__module__}.{type(owner).__name__}"
    if (getattr(value, "__module__", None) or "").startswith("numpy.random"):
        return f"{instr.argval}() of numpy.random"
    return None


def check(fn: types.FunctionType, lane: ir.Function) -> None:
    """Raise :class:`lanewise.LaneCompileError` if ``fn`` uses Python that compiles wrong
    (``lane``: the lane IR of ``fn``, :class:`lanewise.lane.ir.nodes.Function`)."""
    code = fn.__code__
    for instr, line in _instructions(code):
        what = _random_use(fn, instr)
        if what is not None:
            raise lane_error(fn, line, f"calls {what}", _RANDOM_HINT)
    for text, line in _wide_constants(code):
        raise lane_error(fn, line, f"uses the integer constant {text}, wider than 64 bits", _WIDE_INT_HINT)
    for what, line in _formatting(fn, lane):
        raise lane_error(fn, line, f"formats a value as text ({what})", _FORMAT_HINT)
    for name, line in _unbound_reads(fn, lane):
        raise lane_error(fn, line, f"reads the local {name!r}, which some paths may leave unbound",
                         _UNBOUND_HINT.format(name=name))


def _unbound_reads(fn, lane: ir.Function) -> list:
    """(name, line) of the reads of a local that may be unbound, in a lane compiled from its
    bytecode as it is: one with no source text whose bytecode lanewise cannot write back
    (a lane it can write back is compiled from that, its reads checked: lane.versioning)."""
    if lane.source != "bytecode" or lane.blocks:
        return []
    from numba.core.errors import NumbaError

    from .fromcode import unbound_reads

    try:
        return unbound_reads(fn)
    except NumbaError:  # Numba cannot read it: compiling it fails with Numba's own words
        return []


def _formatting(fn, lane: ir.Function):
    """(what, line) of each formatting of a value outside a ``raise`` message."""
    if lane.source == "bytecode":  # no trustworthy source: the bytecode alone (any formatting)
        yield from _bytecode_formatting(fn)
        return
    for node, _ in walk(lane, skip=(ir.Raise,)):  # a raise message may be formatted
        if not isinstance(node, ir.Prim):
            continue
        if node.op == "fstring" and any(isinstance(v, ir.Prim) and v.op == "format" for v in node.args):
            yield "an f-string", node.loc.line
        elif node.op in FORMATTERS and is_call(node) and _formatter(fn, node.op):
            yield f"{node.op}()", node.loc.line
        elif node.op == "method.format" and isinstance(node.args[0], ir.Const) \
                and isinstance(node.args[0].value, str):
            yield "str.format()", node.loc.line


#: What an f-string's field compiles to: FORMAT_VALUE up to 3.12, FORMAT_SIMPLE and
#: FORMAT_WITH_SPEC from 3.13 (missing those let 3.13 compile what 3.11 refuses).
_FORMAT_OPCODES = frozenset({"FORMAT_VALUE", "FORMAT_SIMPLE", "FORMAT_WITH_SPEC"})


def _bytecode_formatting(fn):
    for (instr, _), line in _instructions(fn.__code__):
        if instr.opname in _FORMAT_OPCODES:
            yield "an f-string", line
        elif instr.opname == "LOAD_GLOBAL" and _formatter(fn, instr.argval):
            yield f"{instr.argval}()", line


def walk(node, skip: tuple = ()):
    """(node, its parent) for every IR node under ``node`` (a function, statement or
    expression), in the order :func:`ast.walk` visits the source it was built from
    (breadth first: shallow before deep, then in the order written); not into the
    nodes of the kinds ``skip`` (which are visited themselves).

    Depth is counted as in the ``ast`` tree, so that a function with two constructs
    to refuse names the one the ``ast`` walk named: a keyword argument is one level
    deeper than the IR keeps it, and the IR nodes with no ``ast`` counterpart (a dict
    literal's key-value pairs, the pairs of a chained comparison, an in-place
    operator's primitive, a nested function's :class:`.Function`) add no level.

    Example:
        >>> def lane(x):
        ...     return abs(x) + 1.0
        >>> from lanewise.lane.ir.build import build
        >>> [type(n).__name__ for n, _ in walk(build(lane).entry)][:4]
        ['Function', 'Param', 'Exit', 'Prim']
    """
    order = itertools.count()
    todo = [(0, next(order), node, None, False)]
    while todo:
        depth, _, n, parent, flat = heapq.heappop(todo)
        yield n, parent
        if isinstance(n, skip):
            continue
        for child, step, child_flat in _children(n):
            heapq.heappush(todo, (depth + step - flat, next(order), child, n, child_flat))


def _children(n) -> list:
    """(child, levels below ``n`` in the ``ast`` tree, whether it has no ``ast`` node of its
    own) for the IR nodes in ``n``'s fields, in field order."""
    if isinstance(n, (ir.Def, ir.Lambda)):
        return [(n.function, 1, True)]
    if isinstance(n, ir.Function) and n.name == "<lambda>":  # its body is the lambda's expression
        return [(p, 1, False) for p in n.params] + [(n.body[0], 1, True)]
    if isinstance(n, ir.Assign) and isinstance(n.value, ir.Prim) and ("inplace", True) in n.value.params:
        return [(c, 1, False) for c in _nodes(n.target)] + [(n.value, 1, True)]
    if isinstance(n, ir.Prim):
        return _prim_children(n)
    return [(c, 1, False) for f in n.__dataclass_fields__ for c in _nodes(getattr(n, f))]


def _prim_children(n: ir.Prim) -> list:
    params = dict(n.params)
    args = [(c, 1, False) for c in _nodes(n.args)]
    if n.op == "dict" and n.type == "dict" or params.get("chain"):  # pairs (key, value), comparisons
        args = [(c, 1, True) for c, _, _ in args]
    elif n.op.startswith("method."):  # the value is the called attribute's: one level down
        args[0] = (args[0][0], 2, False)
    elif n.op in ("setitem", "setattr"):  # the value assigned is the statement's own
        args[-1] = (args[-1][0], 0, False)
    return args + [(c, 2, False) for c in _nodes(tuple(v for _, v in n.keywords))]  # under a keyword


def _nodes(v) -> list:
    """The IR nodes in a field's value (tuples flattened), in order."""
    if isinstance(v, (tuple, list)):
        return [c for item in v for c in _nodes(item)]
    return [v] if hasattr(v, "__dataclass_fields__") and not isinstance(v, ir.Loc) else []


def nested_codes(code: types.CodeType):
    """``code``'s nested code objects (comprehensions, lambdas, inner functions), depth first.

    Example:
        >>> def lane(x):
        ...     def inner(y):
        ...         return lambda z: z + y
        ...     return inner(x)(1.0)
        >>> [c.co_name for c in nested_codes(lane.__code__)]
        ['inner', '<lambda>']
    """
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield const
            yield from nested_codes(const)


def def_line(tree) -> int:
    """The line of the ``def`` (decorators excluded), as ``co_firstlineno`` counts it."""
    decorators = getattr(tree, "decorator_list", [])
    return min([d.lineno for d in decorators] + [tree.lineno])


def _formatter(fn, name: str) -> bool:
    value = fn.__globals__.get(name, FORMATTERS.get(name))
    return name in FORMATTERS and value is FORMATTERS[name]


def lane_error(fn, line: int, what: str, hint: str) -> LaneCompileError:
    """The error for a construct of ``fn`` at ``line``: ``file:line`` (to search for, and
    which editors open) in its first line, the source line below it, then ``hint``."""
    name = getattr(fn, "__qualname__", repr(fn))
    filename = fn.__code__.co_filename
    where = format_location(filename, line, getattr(fn, "__name__", ""))
    return LaneCompileError(f"lane function {name} ({filename}:{line}) {what}:\n{where}\n{hint}")
