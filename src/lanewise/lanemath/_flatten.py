"""Lanemath's public kernels with their helpers inlined in the Python source.

lanemath writes each function as small helpers (``two_prod``, ``reduce_cw``,
``sin_kernel`` ...), each an ``inline="always"`` njit function.  Numba's IR
inliner builds a helper's IR again from its bytecode, runs the untyped passes
on it and deep-copies it, at every call site and recursively: half of the
compile of ``cos`` (0.1 of 0.2 s), paid by every new lane that uses it on a
fresh cache.  :func:`flatten` does the same inlining once, in the Python
source: the public kernel compiles as one plain function.

The computation is the same: each helper's arguments are evaluated once,
left to right, into its renamed parameters, then its body runs, then its
``return`` value is taken.  Only calls that always run are inlined (not those
in a ``while`` test, in one branch of ``a if c else b`` or after the first
operand of ``and``/``or``): those stay calls, which Numba inlines as before.
A helper that is not a plain function with one ``return`` at its end stays a
call too.  ``if`` on a module constant (``HAS_FMA``) keeps only its taken
branch, as Numba's branch pruning would.

Example:
    >>> from lanewise.lanemath import trig
    >>> flat = flatten(trig.cos64.py_func)
    >>> flat.__qualname__, "reduce_cw" in flat.__globals__   # inlined, not called
    ('cos64', False)
"""

from __future__ import annotations

import ast
import builtins
import copy
import functools
import inspect
import itertools
import textwrap
import types

from numba.core.dispatcher import Dispatcher

_MISSING = object()


class _Unflattenable(Exception):
    """A construct :func:`flatten` does not handle: the function stays as it is."""


def flatten(fn: types.FunctionType) -> types.FunctionType:
    """``fn`` with its calls to inlined helpers replaced by their bodies (module
    docstring), or ``fn`` itself when it calls none or cannot be flattened."""
    tree = _parsed(fn)
    if tree is None or not any(_helper(_Scope(fn, {}).resolve(c.func.id)) is not None
                               for c in ast.walk(tree) if isinstance(c, ast.Call) and isinstance(c.func, ast.Name)):
        return fn
    try:
        return _Flattener(fn, tree).function()
    except _Unflattenable:
        return fn


@functools.lru_cache(maxsize=None)
def _parsed(fn):
    """The ``def`` of ``fn`` (line numbers as in its file), or None (a lambda, no
    source).  Parsed once; nothing here changes it (:class:`_Names` copies)."""
    try:
        source = textwrap.dedent(inspect.getsource(fn))
    except (OSError, TypeError):
        return None
    try:
        tree = ast.parse(source).body[0]
    except SyntaxError:  # a lambda's line is not a statement on its own
        return None
    if not isinstance(tree, ast.FunctionDef) or tree.name != fn.__name__:
        return None
    ast.increment_lineno(tree, fn.__code__.co_firstlineno - 1)
    return tree


def _locate(node, line: int, col: int) -> None:
    """Give every node a location, its parent's where it has none.  A location is
    a point, not a range: inlined code keeps the lines of its own file."""
    if "lineno" in node._attributes:
        line = getattr(node, "lineno", None) or line
        col = getattr(node, "col_offset", None) or col
        node.lineno, node.col_offset, node.end_lineno, node.end_col_offset = line, col, line, col
    for child in ast.iter_child_nodes(node):
        _locate(child, line, col)


def _helper(value):
    """The Python function of an ``inline="always"`` njit helper (else None)."""
    if isinstance(value, Dispatcher) and value.targetoptions.get("inline") == "always":
        return value.py_func
    return None


class _Scope:
    """One function's body being inlined: its local names' new names, and its free names."""

    def __init__(self, fn, rename: dict):
        self.fn, self.rename = fn, rename

    def resolve(self, name: str):
        """The value ``fn`` reads as the free name ``name`` (closure, globals, builtins)."""
        code = self.fn.__code__
        if name in code.co_freevars:
            return self.fn.__closure__[code.co_freevars.index(name)].cell_contents
        value = self.fn.__globals__.get(name, _MISSING)
        return getattr(builtins, name, _MISSING) if value is _MISSING else value


@functools.lru_cache(maxsize=None)
def _helper_body(helper):
    """(its ``def``, its local names) for a helper whose body can replace a call, else None."""
    tree = _parsed(helper)
    return None if tree is None or not _inlinable(tree) else (tree, _local_names(tree))


def _local_names(tree: ast.FunctionDef) -> list[str]:
    """Parameters and assigned names of ``tree`` (what Python makes local)."""
    names = [a.arg for a in tree.args.args]
    names += [n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)]
    return list(dict.fromkeys(names))


def _inlinable(tree) -> bool:
    """A helper whose body can replace a call: positional parameters only, one ``return``, last."""
    a = tree.args
    plain = not (a.vararg or a.kwarg or a.kwonlyargs or a.defaults or a.posonlyargs)
    returns = [n for n in ast.walk(tree) if isinstance(n, ast.Return)]
    return plain and len(returns) == 1 and returns[0] is tree.body[-1] and returns[0].value is not None


class _Flattener:
    """Builds the flattened function: its body, and the globals it reads."""

    def __init__(self, fn, tree: ast.FunctionDef):
        self.fn, self.tree = fn, tree
        self.reserved = set(_local_names(tree))
        self.globals = {"__builtins__": builtins}
        self.fresh = itertools.count()

    def function(self):
        scope = _Scope(self.fn, {name: name for name in self.reserved})
        body = self.block(self.tree.body, scope) or [ast.Pass()]
        node = ast.FunctionDef(self.tree.name, copy.deepcopy(self.tree.args), body, [], None, lineno=self.tree.lineno)
        _locate(node, node.lineno, 0)
        module = ast.Module([node], [])
        exec(compile(module, self.fn.__code__.co_filename, "exec"), self.globals)
        flat = self.globals.pop(self.tree.name)
        for attr in ("__module__", "__qualname__", "__doc__"):
            setattr(flat, attr, getattr(self.fn, attr))
        flat.__wrapped__ = self.fn
        return flat

    def bind(self, name: str, value) -> str:
        """The name the flattened code reads ``value`` by: ``name`` when it is free."""
        if self.globals.get(name, _MISSING) is value:
            return name
        if name in self.globals or name in self.reserved:
            name = f"{name}_lw{next(self.fresh)}"
        self.globals[name] = value
        return name

    # ---------------------------------------------------------------- statements

    def block(self, stmts: list, scope: _Scope) -> list:
        out = []
        for s in stmts:
            if isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant):
                continue  # a docstring
            out += self.statement(s, scope)
        return out

    def statement(self, s, scope: _Scope) -> list:
        if isinstance(s, ast.If):
            taken = self.constant_test(s.test, scope)
            if taken is not None:
                return self.block(s.body if taken else s.orelse, scope)
            pre, test = self.expression(s.test, scope)
            return pre + [ast.If(test, self.block(s.body, scope) or [ast.Pass()], self.block(s.orelse, scope))]
        if isinstance(s, ast.While):  # its test runs again each iteration: its calls stay calls
            test = _Names(self, scope).visit(s.test)
            return [ast.While(test, self.block(s.body, scope) or [ast.Pass()], self.block(s.orelse, scope))]
        if isinstance(s, ast.For):
            pre, it = self.expression(s.iter, scope)
            target = _Names(self, scope).visit(s.target)
            return pre + [ast.For(target, it, self.block(s.body, scope) or [ast.Pass()],
                                  self.block(s.orelse, scope), None)]
        if isinstance(s, (ast.Assign, ast.AugAssign, ast.Return, ast.Expr)):
            pre, value = self.expression(s.value, scope) if s.value is not None else ([], None)
            s = type(s)(**{**{f: getattr(s, f) for f in s._fields}, "value": value})
            if isinstance(s, ast.Assign):
                s.targets = [_Names(self, scope).visit(t) for t in s.targets]
            elif isinstance(s, ast.AugAssign):
                s.target = _Names(self, scope).visit(s.target)
            return pre + [s]
        if isinstance(s, (ast.Pass, ast.Break, ast.Continue)):
            return [s]
        raise _Unflattenable(type(s).__name__)

    def constant_test(self, test, scope: _Scope):
        """True/False for ``if NAME`` / ``if not NAME`` on a module's bool constant, else None."""
        negate = isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not)
        node = test.operand if negate else test
        if not isinstance(node, ast.Name) or node.id in scope.rename:
            return None
        value = scope.resolve(node.id)
        return (not value if negate else bool(value)) if isinstance(value, bool) else None

    def expression(self, node, scope: _Scope) -> tuple[list, ast.AST]:
        """(statements to run first, the expression): its helper calls inlined."""
        names = _Names(self, scope, inline=True)
        return names.pre, names.visit(node)

    def inline(self, helper, args: list, pre: list) -> ast.Name:
        """Append ``helper(*args)``'s body to ``pre``; the name holding its result."""
        known = _helper_body(helper)
        if known is None or len(args) != len(known[0].args.args):
            raise _Unflattenable(helper.__qualname__)
        tree, local_names = known
        k = next(self.fresh)
        scope = _Scope(helper, {name: f"{name}_lw{k}" for name in local_names})
        for param, arg in zip(tree.args.args, args, strict=True):
            pre.append(ast.Assign([ast.Name(scope.rename[param.arg], ast.Store())], arg))
        pre += self.block(tree.body[:-1], scope)
        more, value = self.expression(tree.body[-1].value, scope)
        result = f"_lw_t{k}"
        pre += more + [ast.Assign([ast.Name(result, ast.Store())], value)]
        return ast.Name(result, ast.Load())


class _Names(ast.NodeTransformer):
    """Renames one expression's names for the flattened function; with ``inline``,
    inlines the helper calls that always run into :attr:`pre`."""

    def __init__(self, flattener: _Flattener, scope: _Scope, inline: bool = False):
        self.flattener, self.scope, self.inline, self.pre = flattener, scope, inline, []

    def visit_Name(self, node):
        new = self.scope.rename.get(node.id)
        if new is None:
            value = self.scope.resolve(node.id)
            if value is _MISSING:
                raise _Unflattenable(node.id)
            new = self.flattener.bind(node.id, value)
        return ast.copy_location(ast.Name(new, node.ctx), node)

    def visit_Call(self, node):
        helper = None
        if self.inline and isinstance(node.func, ast.Name) and node.func.id not in self.scope.rename:
            helper = _helper(self.scope.resolve(node.func.id))
        if helper is None or node.keywords or any(isinstance(a, ast.Starred) for a in node.args):
            return self.generic_visit(node)
        args = [self.visit(a) for a in node.args]  # evaluated first, left to right
        return self.flattener.inline(helper, args, self.pre)

    def visit_IfExp(self, node):
        test = self.visit(node.test)
        return ast.copy_location(ast.IfExp(test, self.conditional(node.body), self.conditional(node.orelse)), node)

    def visit_BoolOp(self, node):
        first = self.visit(node.values[0])
        return ast.copy_location(ast.BoolOp(node.op, [first] + [self.conditional(v) for v in node.values[1:]]), node)

    def conditional(self, node):
        """A part evaluated only sometimes: renamed, its calls kept."""
        return _Names(self.flattener, self.scope).visit(node)

    def generic_visit(self, node):
        """A copy of ``node`` with its children visited (the parsed definitions are
        shared, so nothing is changed in place)."""
        if isinstance(node, (ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp, ast.NamedExpr)):
            raise _Unflattenable(type(node).__name__)
        fields = {}
        for name, value in ast.iter_fields(node):
            if isinstance(value, list):
                value = [self.visit(v) if isinstance(v, ast.AST) else v for v in value]
            elif isinstance(value, ast.AST):
                value = self.visit(value)
            fields[name] = value
        return ast.copy_location(type(node)(**fields), node)
