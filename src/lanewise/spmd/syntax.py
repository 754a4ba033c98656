r"""The AST side of the SPMD transformation: the lane's source, its desugaring
(``for`` over ``range`` -> ``while``, ``x += e`` -> ``x = x + e``) and the small
analyses the emitter (:mod:`.transform`) asks of statements.

Example:
    >>> import ast
    >>> tree = ast.parse("def f(x):\n    for k in range(3):\n        x += k\n    return x").body[0]
    >>> has_loop(tree), sorted(local_names(tree))
    (True, ['k', 'x'])
"""

from __future__ import annotations

import ast
import builtins
import copy
import types
from dataclasses import dataclass

from numba.core.dispatcher import Dispatcher

from ..lane.source import definition


class Unsupported(Exception):
    """The lane uses something the SPMD transformation does not handle (the message says what)."""


@dataclass(frozen=True)
class Tup:
    """A tuple value of the W-wide code: its items are expressions or Tups."""

    items: tuple


def shape_of(value):
    return tuple(shape_of(v) for v in value.items) if isinstance(value, Tup) else None


def leaves_of(value) -> list[str]:
    if isinstance(value, Tup):
        return [leaf for v in value.items for leaf in leaves_of(v)]
    return [value]


def rebuild(shape, leaves):
    it = iter(leaves)

    def build(s):
        return Tup(tuple(build(c) for c in s)) if isinstance(s, tuple) else next(it)

    return build(shape)


# ----------------------------------------------------------------------------- source


def function_ast(fn) -> ast.FunctionDef:
    """The ``def`` of ``fn``; a lambda as the ``def`` of one ``return`` (when its
    source is found: :func:`lanewise.lane.source.definition` checks it is the code that runs)."""
    node = definition(fn)
    if isinstance(node, ast.Lambda):
        body = [ast.copy_location(ast.Return(node.body), node.body)]
        node = ast.copy_location(ast.FunctionDef(name=fn.__name__, args=node.args, body=body, decorator_list=[],
                                                 returns=None, type_comment=None), node)
        return ast.fix_missing_locations(node)
    if not isinstance(node, ast.FunctionDef):
        raise Unsupported(f"the source of {fn.__qualname__} is not available, or is not the code "
                          "that runs (exec'd from a string, or edited since import)")
    if node.decorator_list:  # a pasted @numba.njit(...): not the lane's code, and its calls are not helpers
        node = copy.copy(node)
        node.decorator_list = []
    return node


def resolve(fn, node):
    """The object a name or attribute chain in ``fn`` refers to (``math.exp``,
    ``helper``, ``np``): a closure variable, a global or a builtin; None if unknown."""
    if isinstance(node, ast.Name):
        if node.id in fn.__code__.co_varnames or node.id in fn.__code__.co_cellvars:
            return None  # a local (a lambda bound in the lane, say), not the global of that name
        if node.id in fn.__code__.co_freevars and fn.__closure__:
            try:
                return fn.__closure__[fn.__code__.co_freevars.index(node.id)].cell_contents
            except ValueError:  # an empty cell
                return None
        if node.id in fn.__globals__:
            return fn.__globals__[node.id]
        return getattr(builtins, node.id, None)
    if isinstance(node, ast.Attribute):
        base = resolve(fn, node.value)
        if isinstance(base, (types.ModuleType, type)):
            return getattr(base, node.attr, None)
    return None


def helper_function(obj):
    """The Python function to inline for a call of ``obj``, or None (a call of
    anything else: a builtin, a NumPy or math function, lanewise's own)."""
    if isinstance(obj, Dispatcher):
        options = getattr(obj, "targetoptions", {}) or {}
        if options.get("fastmath"):
            raise Unsupported(f"the helper {obj.py_func.__qualname__} is compiled with fastmath")
        return obj.py_func
    module = getattr(obj, "__module__", "") or ""
    if isinstance(obj, types.FunctionType) and not getattr(obj, "_lw_intrinsic", False) \
            and (not module.startswith("lanewise") or module == "lanewise._lanes"):  # generated lanes are inlined
        return obj
    return None


def bind_arguments(node: ast.Call, params, what: str) -> dict:
    """The argument expressions of ``node`` by parameter name (``params`` in order):
    positional, then keywords; Unsupported for * arguments, too many, or unknown or
    repeated keywords (``what`` names the call in the message)."""
    if len(node.args) > len(params) or any(isinstance(a, ast.Starred) for a in node.args):
        raise Unsupported(f"{what} with * or too many arguments")
    bound = dict(zip(params, node.args))
    for k in node.keywords:
        if k.arg not in params or k.arg in bound:
            raise Unsupported(f"{what} with the keyword argument {k.arg!r}")
        bound[k.arg] = k.value
    return bound


def source_line(fn, node) -> str:
    try:
        line = fn.__code__.co_firstlineno + getattr(node, "lineno", 1) - 1
        return f"{fn.__code__.co_filename}:{line}"
    except AttributeError:
        return "?"


def local_names(fdef: ast.FunctionDef) -> set[str]:
    """Names assigned in the function (its locals, Python's scoping rule), params included."""
    names = {a.arg for a in fdef.args.posonlyargs + fdef.args.args + fdef.args.kwonlyargs}
    for node in ast.walk(fdef):
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            names.add(node.id)
    return names


# ----------------------------------------------------------------------------- desugaring


def folded(node):
    """``node`` (a BinOp or UnaryOp) as the constant CPython folds it to, when its operands
    are number constants and the result an int of at most 64 bits or a float (a wider
    int is refused: lane.refusals), else ``node``.

    Example:
        >>> ast.unparse(folded(ast.parse("2**63 - 1", mode="eval").body.left))
        '9223372036854775808'
    """
    operands = [node.left, node.right] if isinstance(node, ast.BinOp) else [node.operand]
    values = [o.value for o in operands if isinstance(o, ast.Constant)]
    if len(values) != len(operands) or not all(isinstance(v, (int, float, complex)) for v in values):
        return node
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Pow, ast.LShift)) and all(
            type(v) is int for v in values) and abs(values[0]) > 1 and values[1] > 128:
        return node  # CPython leaves a huge result unfolded (and computing it would take long)
    try:
        value = eval(compile(ast.Expression(node), "<constant>", "eval"), {"__builtins__": {}})  # noqa: S307
    except Exception:  # noqa: BLE001 - 1 / 0 and friends: left to run time, as CPython does
        return node
    if isinstance(value, int) and not -2**63 <= value < 2**64:
        return node
    return ast.copy_location(ast.Constant(value), node)


class Desugar(ast.NodeTransformer):
    """``for v in range(...)`` -> ``while`` over a hidden counter; ``x += e`` -> ``x = x + e``."""

    def __init__(self, fn):
        self.fn, self.n = fn, 0

    def visit_AugAssign(self, node):
        if not isinstance(node.target, ast.Name):
            raise Unsupported(f"augmented assignment to {ast.unparse(node.target)} at {source_line(self.fn, node)}")
        load = ast.Name(node.target.id, ast.Load())
        value = ast.BinOp(load, node.op, self.visit(node.value))
        return ast.copy_location(ast.Assign([node.target], value), node)

    def visit_BinOp(self, node):
        # CPython folds an operation of constants when it compiles the lane (``2**63`` is
        # one constant in the bytecode Numba types for the scalar path: a uint64); the
        # W-wide form would compute it at run time in int64 (-2**63), so it is folded here.
        return folded(self.generic_visit(node))

    visit_UnaryOp = visit_BinOp

    def visit_AnnAssign(self, node):
        if node.value is None:
            return None
        return ast.copy_location(ast.Assign([node.target], self.visit(node.value)), node)

    def visit_For(self, node):
        where = source_line(self.fn, node)
        if node.orelse:
            raise Unsupported(f"a for ... else loop at {where}")
        it = node.iter
        if not (isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and it.func.id == "range"
                and not it.keywords and 1 <= len(it.args) <= 3):
            raise Unsupported(f"a for loop over something other than range(...) at {where}")
        if not isinstance(node.target, ast.Name):
            raise Unsupported(f"a for loop with target {ast.unparse(node.target)} at {where}")
        args = [self.visit(a) for a in it.args]
        start, stop = (ast.Constant(0), args[0]) if len(args) == 1 else (args[0], args[1])
        step = args[2] if len(args) == 3 else ast.Constant(1)
        step_value = int_literal(step)
        if step_value is None or step_value == 0:
            raise Unsupported(f"a range with a step that is not a non-zero integer literal at {where}")
        self.n += 1
        k, e, rs, re_ = (f"_lw_k{self.n}", f"_lw_stop{self.n}", f"_lw_rs{self.n}", f"_lw_re{self.n}")

        def name(n):
            return ast.Name(n, ast.Load())

        def as_range(value):  # value as the type Numba's range(start, stop, step) yields
            return ast.Call(name("_lw_range"), [value, name(rs), name(re_), step], [])

        init = [ast.Assign([ast.Name(rs, ast.Store())], start),
                ast.Assign([ast.Name(re_, ast.Store())], stop),
                ast.Assign([ast.Name(e, ast.Store())], as_range(name(re_))),
                ast.Assign([ast.Name(k, ast.Store())], as_range(name(rs)))]
        cmp = ast.Lt() if step_value > 0 else ast.Gt()
        test = ast.Compare(name(k), [cmp], [name(e)])
        body = [ast.Assign([ast.Name(node.target.id, ast.Store())], name(k)),
                ast.Assign([ast.Name(k, ast.Store())], as_range(ast.BinOp(name(k), ast.Add(), step)))]
        for s in node.body:  # a nested for becomes a list of statements: flattened
            out = self.visit(s)
            body += out if isinstance(out, list) else [] if out is None else [out]
        loop = ast.While(test, body, [])
        out = init + [loop]
        for s in out:
            ast.copy_location(s, node)
            ast.fix_missing_locations(s)
        return out

    def visit_While(self, node):
        if node.orelse:
            raise Unsupported(f"a while ... else loop at {source_line(self.fn, node)}")
        return self.generic_visit(node)


def int_literal(node):
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        inner = int_literal(node.operand)
        return None if inner is None else -inner
    return None


# ----------------------------------------------------------------------------- analysis


def block_temps(stmts: list, frame_counts: dict) -> frozenset:
    """Names whose every use is inside ``stmts`` and whose first use there is a
    store by one of its top-level statements: such a variable is always assigned
    before it is read in the block, so lanes outside the block's mask never need
    its value and the store needs no select."""
    seen: set[str] = set()
    candidates: set[str] = set()
    counts: dict[str, int] = {}
    for stmt in stmts:
        for node in ast.walk(stmt):
            if isinstance(node, ast.Name):
                counts[node.id] = counts.get(node.id, 0) + 1
        if isinstance(stmt, ast.Assign):
            for name in _names(stmt.value, ast.Load):
                seen.add(name)
            for target in stmt.targets:
                for name in _names(target, ast.Store):
                    if name not in seen:
                        candidates.add(name)
                        seen.add(name)
        else:
            for name in _names(stmt, (ast.Load, ast.Store)):
                seen.add(name)
    return frozenset(n for n in candidates if counts.get(n) == frame_counts.get(n))


def _names(node, ctx) -> list[str]:
    out = []
    for n in ast.walk(node):
        if isinstance(n, ast.Name) and isinstance(n.ctx, ctx):
            out.append(n.id)
    return out


def cheap_branch(stmts) -> bool:
    """A branch body of a few simple statements (no loop, no call, no exit): run it
    masked without testing whether any lane takes it.  A body that leaves (return,
    break, continue) keeps its test: a lane leaves once, so the branch is nearly
    never taken and predicted, while the masked form puts the exit's mask updates
    on every iteration's dependency chain (W2 0.15x -> 0.12x Numba, W6's search
    5.1 -> 4.4 ns per 8-lane step)."""
    nodes = [n for s in stmts for n in ast.walk(s)]
    heavy = (ast.While, ast.For, ast.Call, ast.If, ast.Return, ast.Break, ast.Continue)
    return len(stmts) <= 4 and not any(isinstance(n, heavy) for n in nodes) and len(nodes) <= 40


def flat_branch(stmts) -> bool:
    """A branch of a few assignments to local names (no exit, no call, no nesting, no
    indexing: a merged branch runs outside its mask, and a row's gather must not)."""
    return cheap_branch(stmts) and not any(isinstance(n, ast.Subscript) for s in stmts for n in ast.walk(s)) \
        and all(isinstance(s, ast.Assign) and all(
        isinstance(t, ast.Name) or (isinstance(t, ast.Tuple) and all(isinstance(e, ast.Name) for e in t.elts))
        for t in s.targets) for s in stmts)


def first_in_helpers(fn, seen, find) -> str | None:
    """``find(fn, fdef)`` for ``fn``, else for the helpers it calls by name (depth
    first): the first answer that is not None."""
    if not isinstance(fn, types.FunctionType) or fn in seen:  # (a call of an array, say: unhashable)
        return None
    seen.add(fn)
    try:
        fdef = function_ast(fn)
    except Unsupported:
        return None
    found = find(fn, fdef)
    if found:
        return found
    for node in ast.walk(fdef):
        if isinstance(node, ast.Call):
            found = first_in_helpers(callee(fn, node.func), seen, find)
            if found:
                return found
    return None


def callee(fn, func: ast.expr):
    """The function a call in ``fn`` names: ``helper(...)`` (a global or closure
    variable) or ``module.helper(...)``; None when it is neither."""
    if isinstance(func, ast.Attribute) and not isinstance(func.value, ast.Name):
        return None
    target = resolve(fn, func) if isinstance(func, (ast.Name, ast.Attribute)) else None
    if hasattr(target, "_lw_spmd_twin"):  # lw.random's draws: called as a whole, not inlined
        return None
    return getattr(target, "py_func", target)


def split_at_loop(stmts: list) -> tuple[list, ast.While, list]:
    r"""A desugared body with one top-level ``while`` loop as (the statements before
    it, the loop, the statements after it): the parts a streamed lane emits apart.

    Example:
        >>> body = ast.parse("n = 0\nwhile n < 3:\n    n = n + 1\nreturn n").body
        >>> [len(part) for part in (split_at_loop(body)[0], split_at_loop(body)[2])]
        [1, 1]
    """
    loops = [k for k, st in enumerate(stmts) if isinstance(st, ast.While)]
    if len(loops) != 1:
        raise Unsupported("streaming needs exactly one top-level loop")
    return stmts[:loops[0]], stmts[loops[0]], stmts[loops[0] + 1:]


def has_loop(fdef) -> bool:
    return any(isinstance(n, (ast.While, ast.For)) for n in ast.walk(fdef))


def leaf_paths(shape, prefix=()):
    """Paths of the leaves of a result shape, depth first (the order of its slots)."""
    if shape is None:
        return [prefix]
    return [p for k, s in enumerate(shape) for p in leaf_paths(s, prefix + (k,))]


def result_shape(results):
    """The nested tuple shape of the result leaves' paths."""
    if len(results) == 1 and results[0][0] == ():
        return None

    def build(prefix):
        children = sorted({p[len(prefix)] for p, _ in results if p[:len(prefix)] == prefix and len(p) > len(prefix)})
        out = []
        for c in children:
            sub = prefix + (c,)
            out.append(None if any(p == sub for p, _ in results) else build(sub))
        return tuple(out)

    return build(())
