"""Per-lane array outputs without a per-lane allocation.

A lane that returns an array usually builds it with ``v = np.zeros(k)``, fills
it and returns ``v``.  Compiled naively, every lane allocates (and frees) ``v``.
This transformation rewrites such a lane to receive its slice of the output as
the hidden keyword ``__lw_out`` and to use it as ``v`` (filled as the
constructor would, shape checked), so the loop nest never allocates.

It applies only when it is certainly safe: a ``def`` whose every ``return`` is
``return v``, with ``v`` assigned exactly once, at the top level of the body,
from ``np.empty/zeros/ones/full`` or their ``*_like`` forms.  Anything else keeps
the ordinary (allocating) path.

Example:
    >>> import numpy as np
    >>> def lane(x):
    ...     v = np.zeros(3)
    ...     v[1] = x
    ...     return v
    >>> out = np.full(3, 7.0)
    >>> rewritten = rewrite(lane)
    >>> rewritten(2.0, __lw_out=out) is out, out
    (True, array([0., 2., 0.]))
"""

from __future__ import annotations

import ast
import types

import numba
import numpy as np

from .source import definition

OUT = "__lw_out"
_CTORS = {"empty": None, "zeros": 0, "ones": 1, "full": "arg1"}


def rewrite(fn, returns_array: bool = True) -> types.FunctionType | None:
    """``fn`` rewritten to fill ``__lw_out`` instead of allocating, or None.

    ``returns_array=False``: every ``return v`` becomes ``return True`` (numba-cuda
    device functions may not return an array, even one passed in).
    """
    node = definition(fn)
    if not isinstance(node, ast.FunctionDef) or node.args.vararg or node.args.kwarg:
        return None
    found = _allocation(node, fn.__globals__)
    if found is None:
        return None
    index, kind, call = found
    node.body[index:index + 1] = _fill_statements(node.body[index].targets[0].id, kind, call)
    if node.args.kwonlyargs:
        return None  # Numba does not take keyword-only parameters
    if not returns_array:
        for ret in (n for n in ast.walk(node) if isinstance(n, ast.Return)):
            ret.value = ast.copy_location(ast.Constant(True), ret.value)
    node.args.args.append(ast.arg(OUT))  # last, with a default: positions unchanged
    node.args.defaults.append(ast.Constant(None))
    node.decorator_list = []
    return _compile(node, fn)


def _allocation(node: ast.FunctionDef, globals_: dict):
    """(statement index, constructor, call) of the returned array, if safe."""
    returns = [n for n in ast.walk(node) if isinstance(n, ast.Return)]
    names = {r.value.id for r in returns if isinstance(r.value, ast.Name)}
    if len(names) != 1 or len(returns) == 0 or any(not isinstance(r.value, ast.Name) for r in returns):
        return None
    name = names.pop()
    stores = [n for n in ast.walk(node) if isinstance(n, ast.Name) and n.id == name
              and isinstance(n.ctx, ast.Store)]
    if len(stores) != 1 or any(isinstance(n, ast.Lambda) for n in ast.walk(node)):
        return None
    for i, stmt in enumerate(node.body):
        if (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1
                and isinstance(stmt.targets[0], ast.Name) and stmt.targets[0].id == name):
            kind = _constructor(stmt.value, globals_)
            return (i, kind, stmt.value) if kind else None
    return None


def _constructor(call, globals_) -> str | None:
    """'zeros', 'zeros_like', ... if ``call`` is ``np.<that>(...)`` with plain arguments."""
    if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute)
            and isinstance(call.func.value, ast.Name)
            and globals_.get(call.func.value.id) is np and call.args):
        return None
    kind = call.func.attr
    base = kind.removesuffix("_like")
    if base not in _CTORS or any(k.arg not in ("dtype", "fill_value") for k in call.keywords):
        return None
    return kind


def _fill_statements(name: str, kind: str, call: ast.Call) -> list[ast.stmt]:
    base = kind.removesuffix("_like")
    shape = (ast.Attribute(call.args[0], "shape", ast.Load()) if kind.endswith("_like")
             else call.args[0])
    fill = _CTORS[base]
    if fill == "arg1":
        fill_expr = call.args[1] if len(call.args) > 1 else next(
            k.value for k in call.keywords if k.arg == "fill_value")
    else:
        fill_expr = None if fill is None else ast.Constant(fill)
    check = ast.Expr(ast.Call(ast.Name("_lw_check_shape", ast.Load()),
                              [ast.Name(OUT, ast.Load()), shape], []))
    stmts = [check, ast.Assign([ast.Name(name, ast.Store())], ast.Name(OUT, ast.Load()))]
    if fill_expr is not None:
        target = ast.Subscript(ast.Name(name, ast.Load()), ast.Constant(Ellipsis), ast.Store())
        stmts.append(ast.Assign([target], fill_expr))
    for s in stmts:
        ast.copy_location(s, call)
        ast.fix_missing_locations(s)
    return stmts


def _compile(node: ast.FunctionDef, fn) -> types.FunctionType:
    code = fn.__code__
    free = list(code.co_freevars)
    # Closures: define the function inside a factory taking the free variables.
    factory = ast.FunctionDef("__lw_factory", ast.arguments([], [ast.arg(v) for v in free], None, [],
                                                            [], None, []),
                              [node, ast.Return(ast.Name(node.name, ast.Load()))], [])
    for n in (factory, factory.body[-1], factory.body[-1].value):
        ast.copy_location(n, node)
    module = ast.Module([factory], [])
    ast.increment_lineno(module, code.co_firstlineno - node.lineno)
    ast.fix_missing_locations(module)
    namespace = dict(fn.__globals__)
    namespace["_lw_check_shape"] = _check_shape
    exec(compile(module, code.co_filename, "exec"), namespace)
    cells = [c.cell_contents for c in fn.__closure__ or ()]
    new = namespace["__lw_factory"](*cells)
    new.__defaults__ = (*(fn.__defaults__ or ()), None)
    new.__qualname__ = fn.__qualname__
    new.__module__ = fn.__module__
    return new


def _check_shape(out, shape):
    """Raise if the output slice does not have the shape the lane asked for."""
    if isinstance(shape, (int, np.integer)):
        shape = (int(shape),)
    if out.shape != tuple(shape):
        raise ValueError("lane output shape changed")


_check_shape._lw_intrinsic = True
_check_shape._lw_may_raise = True  # raises when a lane's output shape changes


@numba.extending.overload(_check_shape, jit_options={"error_model": "numpy"})
def _check_shape_overload(out, shape):
    if isinstance(shape, numba.types.Integer):
        def impl(out, shape):
            if out.ndim != 1 or out.shape[0] != shape:
                raise ValueError("lane output shape changed")
        return impl

    def impl(out, shape):  # noqa: F811 - a tuple shape
        if out.shape != shape:
            raise ValueError("lane output shape changed")
    return impl
