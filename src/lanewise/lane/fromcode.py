"""A lane with no source text, as a ``def`` rebuilt from what ``lw.vmap`` compiles.

Code exec'd from a string or piped into ``python`` keeps no text anywhere, yet
``lw.vmap`` compiles it: Numba reads the bytecode.  Transformations that read a
lane's AST (``lw.grad``, ``lw.jvp``...) take the same road: Numba's interpreter
turns the bytecode into basic blocks of simple statements (the same on every
Python it supports), and this module writes them back as one Python ``def``:

* each basic block is an arm of ``if _bc_block == <label>:`` inside ``while True``,
  ending in an assignment of the next block (a jump or an ``if``) or a ``return``;
  the lane's own variables keep their names, Numba's temporaries get ``_bc_`` ones;
* globals, closure variables, constants and attributes of them are written where
  they are used (``math.sin(x)``), so the transformations find their rules;
* ``for`` over ``range`` becomes a counter (anything else that iterates, a
  ``raise``, a nested function or a ``with`` is refused, naming the construct).

The result runs as the lane does (tests/test_round3_pythons.py checks this on
every backend); it is slower to run than the lane's own structure would be.

Example:
    >>> namespace = {}
    >>> exec(compile("def f(x):\\n    return x * x if x > 0 else -x", "<string>", "exec"), namespace)
    >>> g = namespace["f"]
    >>> body = ast.unparse(function_def(g))
    >>> "while True:" in body, "_bc_block" in body
    (True, True)
"""

from __future__ import annotations

import ast
import copy
import operator
import re
import types

from ..errors import LaneCompileError, function_location
from .ir.passes.dataflow import fixed_point

_BINARY = {operator.add: ast.Add, operator.sub: ast.Sub, operator.mul: ast.Mult, operator.truediv: ast.Div,
           operator.floordiv: ast.FloorDiv, operator.mod: ast.Mod, operator.pow: ast.Pow,
           operator.lshift: ast.LShift, operator.rshift: ast.RShift, operator.and_: ast.BitAnd,
           operator.or_: ast.BitOr, operator.xor: ast.BitXor, operator.matmul: ast.MatMult}
_COMPARE = {operator.lt: ast.Lt, operator.le: ast.LtE, operator.gt: ast.Gt, operator.ge: ast.GtE,
            operator.eq: ast.Eq, operator.ne: ast.NotEq, operator.is_: ast.Is, operator.is_not: ast.IsNot,
            operator.contains: ast.In}
_UNARY = {operator.neg: ast.USub, operator.pos: ast.UAdd, operator.not_: ast.Not, operator.invert: ast.Invert}

BLOCK = "_bc_block"
#: What the user wrote, by the Numba IR statement it became (for refusals).
_STATEMENTS = {"Raise": "raise", "StaticRaise": "raise", "TryRaise": "raise", "StaticTryRaise": "raise",
               "SetAttr": "an attribute assignment", "DelAttr": "del", "DelItem": "del", "Print": "print",
               "EnterWith": "with", "PopBlock": "with", "Yield": "yield"}


def function_def(fn: types.FunctionType) -> ast.FunctionDef:
    """``fn`` as a ``def`` rebuilt from its bytecode (lines counted from
    ``co_firstlineno``, as :func:`lanewise.lane.source.definition` counts them).

    Raises LaneCompileError naming the construct it cannot write back."""
    from numba.core import errors as numba_errors
    from numba.core.compiler import run_frontend

    try:
        func_ir = run_frontend(fn)
    except numba_errors.NumbaError as err:
        raise _refused(fn, None, f"Numba cannot read its bytecode ({str(err).splitlines()[0]})") from None
    writer = _Writer(fn)
    arms = [writer.block(label, func_ir.blocks[label]) for label in sorted(func_ir.blocks)]
    test = ast.Compare(ast.Name(BLOCK, ast.Load()), [ast.Eq()], [ast.Constant(arms[0][0])])
    chain = ast.If(test, arms[0][1], [])
    tail = chain
    for label, body in arms[1:]:
        arm = ast.If(ast.Compare(ast.Name(BLOCK, ast.Load()), [ast.Eq()], [ast.Constant(label)]), body, [])
        tail.orelse = [arm]
        tail = arm
    start = ast.Assign([ast.Name(BLOCK, ast.Store())], ast.Constant(min(func_ir.blocks)))
    params = fn.__code__.co_varnames[:fn.__code__.co_argcount]
    node = ast.FunctionDef(name=fn.__name__, args=ast.arguments([], [ast.arg(p) for p in params], None, [], [], None,
                                                                  []),
                           body=[start, ast.While(ast.Constant(True), [chain], [])], decorator_list=[], returns=None,
                           type_comment=None, lineno=1, col_offset=0)
    _set_lines(node, 1)
    return ast.fix_missing_locations(node)


def unbound_reads(fn: types.FunctionType) -> list:
    """(name, line) of each read of a local of ``fn`` that some path of its bytecode
    reaches with the local unbound (Python raises UnboundLocalError there; code compiled
    from the bytecode reads a zero): a dataflow over the basic blocks Numba's frontend
    reads, exception edges included, of what is surely bound on entry to each block
    (the meet of its predecessors' exits), iterated to its fixed point.

    Example:
        >>> namespace = {}
        >>> exec(compile("def f(x):\\n    if x > 0:\\n        y = x\\n    return y", "<string>", "exec"), namespace)
        >>> unbound_reads(namespace["f"])
        [('y', 4)]
    """
    from numba.core import ir as nir
    from numba.core.compiler import run_frontend

    blocks = run_frontend(fn).blocks
    # a cell variable (a lambda's or a comprehension's closure reads it) is a local too: the
    # closure's tuple is built from it where the lambda is made (Numba binds it there)
    local = set(fn.__code__.co_varnames) | set(fn.__code__.co_cellvars)
    found: dict = {}

    def exits(label, state):
        bound = set(state)
        for stmt in blocks[label].body:
            value = stmt.value if isinstance(stmt, nir.Assign) else stmt
            reads = [] if isinstance(value, (nir.Del, nir.Arg, nir.Const, nir.Global, nir.FreeVar)) else \
                [value] if isinstance(value, nir.Var) else value.list_vars()
            for var in reads:
                if var.name in local and var.name not in bound:
                    found.setdefault((var.name, stmt.loc.line), None)
            if isinstance(stmt, nir.Assign):
                bound.add(stmt.target.name)
        return [(target, bound) for target in blocks[label].terminator.get_targets()]

    fixed_point(min(blocks), frozenset(), exits)
    return sorted(found)


def _refused(fn, loc, why: str) -> LaneCompileError:
    where = f"{fn.__code__.co_filename}:{loc.line}" if loc is not None and loc.line else function_location(fn)
    return LaneCompileError(
        f"{fn.__qualname__} ({where}) has no source text, and its bytecode cannot be written back as a lane: "
        f"{why}. Define it in a file, a notebook cell, python -c or the interactive interpreter (whose text "
        "lanewise reads), or register its text with linecache under the file name it was compiled with")


def _set_lines(node, line: int) -> None:
    for child in ast.walk(node):
        if "lineno" in child._attributes and not hasattr(child, "lineno"):
            child.lineno = line


def _name(var: str) -> str:
    """A Numba temporary (``$38for_iter.2``) as an identifier; the lane's own names stay."""
    if not var.startswith("$") and "." not in var:
        return var
    return "_bc_" + re.sub(r"\W", "_", var.lstrip("$"))


def _return_tuples_as_written(body: list) -> None:
    """``t = (a, b); r = t; return r`` (a tuple through Numba's temporaries) ends in
    ``return (a, b)`` as the lane wrote it: the transformations read a returned tuple's
    structure from the return statement (lw.jacfwd of several outputs).  A tuple is
    written in only where none of its items' variables is assigned between it and the
    return (so each still holds its value)."""
    if not body or not isinstance(body[-1], ast.Return) or not isinstance(body[-1].value, ast.Name):
        return
    made = {s.targets[0].id: k for k, s in enumerate(body)
            if isinstance(s, ast.Assign) and isinstance(s.targets[0], ast.Name)}
    # a copy: the names in it are also nodes of the statements that made the tuple
    body[-1].value = copy.deepcopy(_written_in(body[-1].value, body, made, len(body) - 1))


def _written_in(node: ast.expr, body: list, made: dict, before: int) -> ast.expr:
    """``node`` (a name or a tuple of them, read by statement ``before``) with each name
    that holds a tuple replaced by that tuple, where the statement that made it comes
    first and none of its items' variables is assigned again before the return."""
    if isinstance(node, ast.Tuple):
        return ast.Tuple([_written_in(e, body, made, before) for e in node.elts], ast.Load())
    k = made.get(node.id) if isinstance(node, ast.Name) else None
    if k is None or k >= before or not isinstance(body[k].value, (ast.Tuple, ast.Name)):
        return node
    value = body[k].value
    later = {t.id for s in body[k + 1:] if isinstance(s, ast.Assign) for t in ast.walk(s.targets[0])
             if isinstance(t, ast.Name)}
    if {n.id for n in ast.walk(value) if isinstance(n, ast.Name)} & later:
        return node
    written = _written_in(value, body, made, k)
    return node if isinstance(written, ast.Name) else written


class _Writer:
    """Writes Numba IR blocks as statements (one per IR assignment, inlining only values
    that cannot change between their definition and their use)."""

    def __init__(self, fn):
        self.fn = fn
        self.static: dict[str, ast.expr] = {}  # temporaries standing for globals, constants, attributes of them
        self.ranges: dict[str, tuple[str, str]] = {}  # iterator temporary -> (counter, step) names
        self.pairs: dict[str, str] = {}  # iternext temporary -> the counter value it yields
        self.calls: dict[str, ast.Call] = {}  # temporary -> the range(...) call it holds (for getiter)

    def block(self, label: int, block) -> tuple[int, list]:
        body: list = []
        for stmt in block.body:
            body.extend(self.statement(stmt))
        _return_tuples_as_written(body)
        return label, body or [ast.Pass()]

    def statement(self, stmt) -> list:
        from numba.core import ir

        line = self._line(stmt.loc)
        if isinstance(stmt, ir.Assign):
            made = self.assign(stmt)
        elif isinstance(stmt, ir.Del):
            made = []
        elif isinstance(stmt, ir.Return):
            made = [ast.Return(self.load(stmt.value.name))]
        elif isinstance(stmt, ir.Jump):
            made = [self._goto(stmt.target)]
        elif isinstance(stmt, ir.Branch):
            made = [ast.If(self.load(stmt.cond.name), [self._goto(stmt.truebr)], [self._goto(stmt.falsebr)])]
        elif isinstance(stmt, (ir.SetItem, ir.StaticSetItem)):
            index = stmt.index_var if isinstance(stmt, ir.StaticSetItem) and stmt.index_var is not None \
                else stmt.index
            target = ast.Subscript(self.load(stmt.target.name), self._value(index), ast.Store())
            made = [ast.Assign([target], self.load(stmt.value.name))]
        else:
            what = _STATEMENTS.get(type(stmt).__name__, type(stmt).__name__)
            raise _refused(self.fn, stmt.loc, f"it uses {what} ({stmt})")
        for node in made:
            _set_lines(node, line)
        return made

    def _line(self, loc) -> int:
        return max(1, (loc.line or self.fn.__code__.co_firstlineno) - self.fn.__code__.co_firstlineno + 1)

    @staticmethod
    def _goto(label: int):
        return ast.Assign([ast.Name(BLOCK, ast.Store())], ast.Constant(label))

    def load(self, var: str) -> ast.expr:
        return self.static.get(var) or ast.Name(_name(var), ast.Load())

    def _value(self, value) -> ast.expr:
        from numba.core import ir

        if isinstance(value, ir.Var):
            return self.load(value.name)
        return self._constant(value, None)

    def _constant(self, value, loc) -> ast.expr:
        if isinstance(value, slice):
            return ast.Slice(*(None if v is None else ast.Constant(v) for v in (value.start, value.stop, value.step)))
        if isinstance(value, (int, float, complex, bool, str, bytes, type(None), tuple)):
            return ast.Constant(value)
        raise _refused(self.fn, loc, f"it uses the constant {value!r}")

    def assign(self, stmt) -> list:
        from numba.core import ir

        target, value = stmt.target.name, stmt.value
        if isinstance(value, ir.Arg):
            return [] if value.name == target else [self._store(target, ast.Name(value.name, ast.Load()))]
        if isinstance(value, (ir.Global, ir.FreeVar)):
            self.static[target] = ast.Name(value.name, ast.Load())
            return []
        if isinstance(value, ir.Const):
            expr = self._constant(value.value, stmt.loc)
            if target.startswith("$"):
                self.static[target] = expr
                return []
            return [self._store(target, expr)]
        if isinstance(value, ir.Var):
            if value.name in self.ranges:  # the iterator, carried into the loop's header block
                self.ranges[target] = self.ranges[value.name]
                return []
            return [self._store(target, self.load(value.name))]
        if isinstance(value, ir.Expr):
            return self.expression(target, value, stmt.loc)
        raise _refused(self.fn, stmt.loc, f"it uses {value}")

    def _store(self, target: str, expr: ast.expr):
        return ast.Assign([ast.Name(_name(target), ast.Store())], expr)

    def expression(self, target: str, expr, loc) -> list:
        op = expr.op
        if op == "getattr":
            base = self.load(expr.value.name)
            attribute = ast.Attribute(base, expr.attr, ast.Load())
            if expr.value.name in self.static:  # math.sin, np.pi: written where used
                self.static[target] = attribute
                return []
            return [self._store(target, attribute)]
        if op in ("getiter", "iternext", "pair_first", "pair_second"):
            return self.iteration(target, expr, loc)
        if op == "call" and self._calls_builtin(expr, "range"):
            self.calls[target] = self.value_expression(expr, loc)  # becomes a counter at getiter
            return []
        if op == "inplace_binop":
            # ``x += e`` updates a mutable x (an array) in place, which every alias of it
            # sees: written as Python does it, never as ``x = x + e`` (a new array)
            if expr.immutable_fn not in _BINARY:
                raise _refused(self.fn, loc, f"it uses the operator {expr.immutable_fn}")
            return [self._store(target, self.load(expr.lhs.name)),
                    ast.AugAssign(ast.Name(_name(target), ast.Store()), _BINARY[expr.immutable_fn](),
                                  self.load(expr.rhs.name))]
        if op == "call" and target.endswith("pred") and self._calls_builtin(expr, "bool") and len(expr.args) == 1:
            return [self._store(target, self.load(expr.args[0].name))]  # Numba's bool() of a branch condition
        return [self._store(target, self.value_expression(expr, loc))]

    def _calls_builtin(self, expr, name: str) -> bool:
        func = self.static.get(expr.func.name)
        return isinstance(func, ast.Name) and func.id == name and func.id not in self.fn.__globals__

    def value_expression(self, expr, loc) -> ast.expr:
        op = expr.op
        if op == "binop" and expr.fn in _COMPARE:
            return ast.Compare(self.load(expr.lhs.name), [_COMPARE[expr.fn]()], [self.load(expr.rhs.name)])
        if op == "binop":
            if expr.fn not in _BINARY:
                raise _refused(self.fn, loc, f"it uses the operator {expr.fn}")
            return ast.BinOp(self.load(expr.lhs.name), _BINARY[expr.fn](), self.load(expr.rhs.name))
        if op == "unary" and expr.fn in _UNARY:
            return ast.UnaryOp(_UNARY[expr.fn](), self.load(expr.value.name))
        if op == "call":
            if expr.vararg is not None or getattr(expr, "varkwarg", None) is not None:
                raise _refused(self.fn, loc, "it calls with *args or **kwargs")
            return ast.Call(self.load(expr.func.name), [self.load(a.name) for a in expr.args],
                            [ast.keyword(k, self.load(v.name)) for k, v in expr.kws])
        if op in ("getitem", "static_getitem", "typed_getitem"):
            index = expr.index_var if op == "static_getitem" and expr.index_var is not None else expr.index
            return ast.Subscript(self.load(expr.value.name), self._value(index), ast.Load())
        if op in ("build_tuple", "build_list"):
            items = [self.load(v.name) for v in expr.items]
            return ast.Tuple(items, ast.Load()) if op == "build_tuple" else ast.List(items, ast.Load())
        if op == "exhaust_iter":  # a, b = t: the items are read by index
            return self.load(expr.value.name)
        if op == "cast":
            return self.load(expr.value.name)
        raise _refused(self.fn, loc, f"it uses {op.replace('_', ' ')} ({expr})")

    def iteration(self, target: str, expr, loc) -> list:
        """``for k in range(...)``: a counter, its step and bound (else refused)."""
        op = expr.op
        if op == "getiter":
            call = self.calls.get(expr.value.name)
            if call is None:
                raise _refused(self.fn, loc, "it iterates over something other than range(...) (write the loop "
                                             "with an index: for k in range(len(xs)))")
            args = call.args if len(call.args) > 1 else [ast.Constant(0), *call.args]
            start, stop, step = args[0], args[1], args[2] if len(args) > 2 else ast.Constant(1)
            names = [f"{_name(target)}_{part}" for part in ("at", "stop", "step")]
            self.ranges[target] = (names[0], names[1], names[2])
            return [ast.Assign([ast.Name(n, ast.Store())], v) for n, v in zip(names, (start, stop, step), strict=True)]
        if op == "iternext":
            at, stop, step = self.ranges[expr.value.name]
            value = f"{_name(target)}_value"
            self.pairs[target] = value
            more = ast.IfExp(ast.Compare(ast.Name(step, ast.Load()), [ast.Gt()], [ast.Constant(0)]),
                             ast.Compare(ast.Name(at, ast.Load()), [ast.Lt()], [ast.Name(stop, ast.Load())]),
                             ast.Compare(ast.Name(at, ast.Load()), [ast.Gt()], [ast.Name(stop, ast.Load())]))
            return [ast.Assign([ast.Name(value, ast.Store())], ast.Name(at, ast.Load())),
                    ast.Assign([ast.Name(f"{_name(target)}_more", ast.Store())], more),
                    ast.Assign([ast.Name(at, ast.Store())],
                               ast.BinOp(ast.Name(at, ast.Load()), ast.Add(), ast.Name(step, ast.Load())))]
        pair = expr.value.name
        if pair not in self.pairs:
            raise _refused(self.fn, loc, "it unpacks an iterator")
        source = self.pairs[pair] if op == "pair_first" else f"{_name(pair)}_more"
        return [self._store(target, ast.Name(source, ast.Load()))]
