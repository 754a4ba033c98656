"""Per-lane array outputs without a per-lane allocation.

A lane that returns an array usually builds it with ``v = np.zeros(k)``, fills
it and returns ``v``.  Compiled naively, every lane allocates (and frees) ``v``.
This transformation rewrites such a lane to receive its slice of the output as
the hidden keyword ``__lw_out`` and to use it as ``v`` (filled as the
constructor would, shape checked), so the loop nest never allocates.

It applies only when it is certainly safe: a ``def`` whose every ``return`` is
``return v``, with ``v`` assigned exactly once, at the top level of the body,
from ``np.empty/zeros/ones/full`` or their ``*_like`` forms.  Anything else keeps
the ordinary (allocating) path.  The rewrite is one of the lane IR
(:mod:`lanewise.lane.ir`): the allocation's statement becomes
``_lw_check_shape(__lw_out, k); v = __lw_out; v[...] = 0`` on the user's line,
and the function is rendered and loaded at the user's lines
(:func:`~lanewise.lane.ir.render.load_function`), so errors name them.

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

import types
from dataclasses import replace

import numba
import numpy as np

from ..errors import LaneCompileError
from .ir import nodes as ir
from .ir.build import function_ir
from .ir.passes.walk import walk
from .ir.render import load_function

OUT = "__lw_out"
CHECK = "_lw_check_shape"
_CTORS = {"empty": None, "zeros": 0, "ones": 1, "full": "arg1"}
_KINDS = {id(getattr(np, kind)): kind for base in _CTORS for kind in (base, base + "_like")}


def rewrite(fn, returns_array: bool = True) -> types.FunctionType | None:
    """``fn`` rewritten to fill ``__lw_out`` instead of allocating, or None.

    ``returns_array=False``: every ``return v`` becomes ``return True`` (numba-cuda
    device functions may not return an array, even one passed in).
    """
    lane = function_ir(fn)  # memoised: the lane compiler built it already
    found = None if fn.__code__.co_name == "<lambda>" else _allocation(lane)
    if found is None:
        return None
    index, call = found
    body = (*lane.body[:index], *_fill_statements(lane.body[index].target.name, call), *lane.body[index + 1:])
    if not returns_array:
        body = _returns_true(body)
    out = ir.Param(OUT, "positional", ir.Const(None, "None"))  # last, with a default: positions unchanged
    rewritten = replace(lane, params=(*lane.params, out), body=body)
    # The helpers as the calls hold them (not build_with_functions: that parses every
    # helper, NumPy's own np.full_like included, on the lane's cold first call).
    functions = {p.op.removeprefix("call:"): ir.called(p) for p in walk(lane.body)
                 if isinstance(p, ir.Prim) and p.op.startswith("call:")}
    if None in functions.values():
        return None  # a helper already gone: nothing to call
    try:
        new = load_function(rewritten, fn, {**functions, CHECK: _check_shape}, lines=True)
    except LaneCompileError:  # the renderer cannot print it (a name it would invent is taken): allocate
        return None
    new.__defaults__ = (*(fn.__defaults__ or ()), None)  # the original's default values, not re-evaluated
    new.__module__ = fn.__module__
    return new


def _allocation(lane: ir.Function):
    """(statement index, constructor call) of the returned array, if safe."""
    if lane.source != "source" or any(p.kind != "positional" for p in lane.params):
        return None  # no trustworthy text; Numba does not take keyword-only parameters
    nodes = list(walk(lane.body))
    if any(isinstance(n, (ir.Lambda, ir.Unsupported)) for n in nodes):
        return None  # a construct the IR does not model cannot be rendered
    returned = [_name(n.value) for n in nodes if isinstance(n, ir.Exit) and n.kind == "return"]
    if len(set(returned)) != 1 or returned[0] is None:
        return None
    name = returned[0]
    if sum(_binds(n).count(name) for n in nodes) != 1:
        return None
    for i, s in enumerate(lane.body):
        if isinstance(s, ir.Assign) and s.target == ir.Var(name) and not _chained(lane.body, i):
            return (i, s.value) if _constructor(s.value) else None
    return None


def _name(value) -> str | None:
    """The name ``return name`` returns (a local, or a global of that name), else None."""
    if isinstance(value, ir.Var) or (isinstance(value, ir.Global) and "." not in value.name):
        return value.name
    return None


def _binds(n) -> list:
    """The names node ``n`` binds, once per binding (``a, a = ...`` binds ``a`` twice)."""
    if isinstance(n, (ir.Assign, ir.Generator)) or (isinstance(n, ir.Loop) and n.target is not None):
        return _target_names(n.target)
    if isinstance(n, ir.Prim) and n.op == "walrus":
        return [dict(n.params)["name"]]
    return []


def _target_names(t) -> list:
    if isinstance(t, ir.Var):
        return [t.name]
    return [name for item in t.items for name in _target_names(item)] if isinstance(t, ir.Unpack) else []


def _chained(body: tuple, i: int) -> bool:
    """Whether ``body[i]`` is one store of ``a = v = ...`` (the IR shares the value between them)."""
    value = body[i].value
    return any(_stored(body[j]) is value for j in (i - 1, i + 1) if 0 <= j < len(body))


def _stored(s):
    if isinstance(s, ir.Assign):
        return s.value
    if isinstance(s, ir.Do) and isinstance(s.expr, ir.Prim) and s.expr.op in ("setitem", "setattr"):
        return s.expr.args[-1]
    return None


def _constructor(call) -> str | None:
    """'zeros', 'zeros_like', ... if ``call`` calls NumPy's function of that name with plain arguments."""
    if not (isinstance(call, ir.Prim) and call.args):
        return None
    kind = _KINDS.get(id(ir.called(call)))  # np.zeros is a builtin, np.full a Python function (call:full)
    if kind is None or ir.called(call) is not getattr(np, kind):
        return None
    if any(isinstance(a, ir.Prim) and a.op == "star" for a in call.args):
        return None
    if any(k not in ("dtype", "fill_value") for k, _ in call.keywords) or _fill(kind, call) is _MISSING:
        return None
    return kind


_MISSING = object()


def _fill(kind: str, call: ir.Prim):
    """The value the constructor fills its array with (None: left as it is)."""
    fill = _CTORS[kind.removesuffix("_like")]
    if fill != "arg1":
        return None if fill is None else ir.Const(fill, "int")
    if len(call.args) > 1:
        return call.args[1]
    return next((v for k, v in call.keywords if k == "fill_value"), _MISSING)


def _fill_statements(name: str, call: ir.Prim) -> list:
    """``_lw_check_shape(__lw_out, shape); name = __lw_out; name[...] = fill``, at the call's place."""
    kind, loc, out = _constructor(call), call.loc, ir.Var(OUT)
    shape = ir.Prim("attr", (call.args[0],), loc, params=(("name", "shape"),)) if kind.endswith("_like") \
        else call.args[0]
    stmts = [ir.Do(ir.Prim(f"call:{CHECK}", (out, shape), loc), loc), ir.Assign(ir.Var(name), out, loc)]
    fill = _fill(kind, call)
    if fill is not None:
        stmts.append(ir.Do(ir.Prim("setitem", (ir.Var(name), ir.Const(Ellipsis), fill), loc), loc))
    return stmts


def _returns_true(node):
    """``node`` with every ``return v`` (in nested functions too) a ``return True``."""
    if isinstance(node, tuple):
        return tuple(_returns_true(n) for n in node)
    if isinstance(node, ir.Exit) and node.kind == "return":
        return replace(node, value=ir.Const(True, "bool"))
    if isinstance(node, ir.If):
        return replace(node, then=_returns_true(node.then), orelse=_returns_true(node.orelse))
    if isinstance(node, ir.Loop):
        return replace(node, body=_returns_true(node.body), orelse=_returns_true(node.orelse))
    if isinstance(node, ir.Try):
        handlers = tuple(replace(h, body=_returns_true(h.body)) for h in node.handlers)
        return replace(node, body=_returns_true(node.body), handlers=handlers, orelse=_returns_true(node.orelse),
                       final=_returns_true(node.final))
    if isinstance(node, ir.Def):
        return replace(node, function=replace(node.function, body=_returns_true(node.function.body)))
    return node


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
