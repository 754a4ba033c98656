"""``lw.scan`` steps that close over the lane's values, made compilable.

A per-lane filter is naturally written with a step that reads a lane value::

    def smooth(row, alpha):
        def step(c, v):
            c = alpha * v + (1 - alpha) * c
            return c, c
        return lw.scan(step, 0.0, row)[1]

Python runs it; Numba refuses it ("Cannot capture the non-constant value
associated with variable 'alpha' in a function that may escape"): a closure
passed to another function must capture constants only.  This pass makes the
captured values travel in the carry, untouched by the step, so the step
captures nothing::

    def step(_lw_cc, v):
        c, _lw_env = _lw_cc
        alpha, = _lw_env
        c = alpha * v + (1 - alpha) * c
        return (c, _lw_env), c
    ... _lw_uncapture(lw.scan(step, (0.0, (alpha,)), row))[1]

The values are read when the scan starts, as the closure would read them
during the scan (the step cannot rebind them: a step with ``nonlocal`` is left
as it is).  Only a ``def`` bound once in the lane and used only as the step of
``lw.scan`` calls is rewritten; anything else is left to Numba (and its error).

Example:
    >>> import lanewise as lw
    >>> def smooth(row, alpha):
    ...     def step(c, v):
    ...         return alpha * v + (1 - alpha) * c, c
    ...     return lw.scan(step, 0.0, row)
    >>> from lanewise.lane.ir.build import function_ir
    >>> lifted, count = lift_ir(function_ir(smooth))
    >>> count
    1
"""

from __future__ import annotations

from dataclasses import replace

import numba

from .ir import nodes as ir
from .ir.passes.walk import own, stored, walk

CARRY, ENV, RESULT = "_lw_cc", "_lw_env", "_lw_r"


@numba.njit(inline="always")
def _lw_uncapture(result):
    """``(carry, ys)`` of a scan whose carry is ``(carry, captured values)``."""
    return result[0][0], result[1]


GLOBALS = {"_lw_uncapture": _lw_uncapture}


def closure_steps(lane: ir.Function) -> dict[str, list[str]]:
    """The nested defs of ``lane`` (its IR) used only as ``lw.scan`` steps, each with the
    lane's locals it reads (sorted): the steps :func:`lift_ir` rewrites.

    Example:
        >>> import lanewise as lw
        >>> from lanewise.lane.ir.build import function_ir
        >>> def smooth(row, alpha):
        ...     def step(c, v):
        ...         return alpha * v + (1 - alpha) * c, c
        ...     return lw.scan(step, 0.0, row)
        >>> closure_steps(function_ir(smooth))
        {'step': ['alpha']}
    """
    mine = list(own(lane.body))
    lane_locals = {p.name for p in lane.params} | stored(mine, defs=True)
    defs: dict[str, list[ir.Def]] = {}
    for node in mine:
        if isinstance(node, ir.Def):
            defs.setdefault(node.function.name, []).append(node)
    decorated = {id(d) for n in mine if isinstance(n, ir.Unsupported) for d in n.parts if isinstance(d, ir.Def)}
    steps = {}
    for name, found in defs.items():
        step = found[0].function
        if len(found) > 1 or id(found[0]) in decorated or _rebound_ir(mine, name) \
                or not _only_scan_steps_ir(lane, mine, name):
            continue
        if any(isinstance(n, ir.Unsupported) for n in walk(step.body)):
            continue  # nonlocal, global: the step may rebind what it reads
        captured = sorted(_free_ir(step) & lane_locals)
        if set(captured) & set(defs):
            continue  # it calls another function of the lane: no value to carry
        plain = all(p.kind == "positional" and p.default is None for p in step.params)
        if captured and len(step.params) == 2 and not step.posonly and plain:
            steps[name] = captured
    return steps


def lift_ir(lane: ir.Function) -> tuple[ir.Function, int]:
    """``lane`` (its IR) with its closure steps lifted (module docstring), and how many
    were.  Load the result with
    :func:`~lanewise.lane.ir.render.load_function`, adding :data:`GLOBALS` to the
    functions (``call:_lw_uncapture``).

    Example:
        >>> import lanewise as lw
        >>> from lanewise.lane.ir.build import function_ir
        >>> from lanewise.lane.ir.render import render
        >>> def smooth(row, alpha):
        ...     def step(c, v):
        ...         return alpha * v + (1 - alpha) * c, c
        ...     return lw.scan(step, 0.0, row)
        >>> lifted, count = lift_ir(function_ir(smooth))
        >>> print(render(lifted), end="")
        def smooth(row, alpha):
            def step(_lw_cc, v):
                (c, _lw_env) = _lw_cc
                (alpha,) = _lw_env
                return (((alpha * v) + ((1 - alpha) * c), _lw_env), c)
            return _lw_uncapture(lw.scan(step, (0.0, (alpha,)), row))
    """
    steps = closure_steps(lane)
    if not steps:
        return lane, 0
    return replace(lane, body=_lifted(lane.body, steps)), len(steps)


def _lifted(node, steps: dict):
    """``node`` with every step's ``def`` and every ``lw.scan`` of a step rewritten (a
    step's body keeps its own scans, as the AST lift leaves them)."""
    if isinstance(node, tuple):
        return tuple(_lifted(n, steps) for n in node)
    if isinstance(node, ir.Def) and node.function.name in steps:
        return replace(node, function=_step(node.function, steps[node.function.name]))
    if not hasattr(node, "__dataclass_fields__") or isinstance(node, ir.Loc):
        return node
    changes = {f: _lifted(getattr(node, f), steps) for f in node.__dataclass_fields__ if f not in ("loc", "origin")}
    node = replace(node, **{f: v for f, v in changes.items() if v is not getattr(node, f)})
    if _is_scan_ir(node) and node.args and isinstance(node.args[0], ir.Var) and node.args[0].name in steps:
        return _uncaptured(node, steps[node.args[0].name])
    return node


def _env(captured: list, loc: ir.Loc) -> ir.Prim:
    return ir.Prim("tuple", tuple(ir.Var(n) for n in captured), loc, type="tuple")


def _uncaptured(scan: ir.Prim, captured: list) -> ir.Prim:
    """``_lw_uncapture(lw.scan(step, (init, (captured...)), xs))``."""
    pair = lambda init: ir.Prim("tuple", (init, _env(captured, scan.loc)), scan.loc, type="tuple")  # noqa: E731
    if len(scan.args) >= 2:
        scan = replace(scan, args=(scan.args[0], pair(scan.args[1]), *scan.args[2:]))
    else:
        scan = replace(scan, keywords=tuple((k, pair(v) if k == "init" else v) for k, v in scan.keywords))
    return ir.Prim("call:_lw_uncapture", (scan,), scan.loc, callee=ir.Callee(_lw_uncapture))


def _step(step: ir.Function, captured: list) -> ir.Function:
    """``def step(_lw_cc, v): c, _lw_env = _lw_cc; captured... = _lw_env`` and its returns."""
    loc = step.body[0].loc if step.body and hasattr(step.body[0], "loc") else step.loc  # the user's first line
    carry = step.params[0].name
    prologue = (ir.Assign(ir.Unpack((ir.Var(carry), ir.Var(ENV))), ir.Var(CARRY), loc),
                ir.Assign(ir.Unpack(tuple(ir.Var(n) for n in captured)), ir.Var(ENV), loc))
    return replace(step, params=(replace(step.params[0], name=CARRY), *step.params[1:]),
                   body=prologue + _returns(step.body))


def _returns(stmts: tuple) -> tuple:
    """``return c, y`` -> ``return (c, _lw_env), y`` in one function (not nested ones)."""
    out: list = []
    for s in stmts:
        if isinstance(s, ir.Exit) and s.kind == "return":
            out += _return(s)
        elif isinstance(s, ir.If):
            out.append(replace(s, then=_returns(s.then), orelse=_returns(s.orelse)))
        elif isinstance(s, ir.Loop):
            out.append(replace(s, body=_returns(s.body), orelse=_returns(s.orelse)))
        elif isinstance(s, ir.Try):
            handlers = tuple(replace(h, body=_returns(h.body)) for h in s.handlers)
            out.append(replace(s, body=_returns(s.body), handlers=handlers, orelse=_returns(s.orelse),
                               final=_returns(s.final)))
        else:
            out.append(s)
    return tuple(out)


def _return(s: ir.Exit) -> list:
    value, loc, env = s.value, s.loc, ir.Var(ENV)
    pair = lambda c, y: ir.Prim("tuple", (ir.Prim("tuple", (c, env), loc, type="tuple"), y), loc,  # noqa: E731
                                type="tuple")
    if isinstance(value, ir.Prim) and value.op == "tuple" and value.type == "tuple" and len(value.args) == 2 \
            and not any(isinstance(a, ir.Prim) and a.op == "star" for a in value.args):
        return [replace(s, value=pair(*value.args))]
    # Any other value: (carry, y) held in a name first.
    held = ir.Assign(ir.Var(RESULT), value if value is not None else ir.Const(None, "None"), loc)
    item = lambda k: ir.Prim("getitem", (ir.Var(RESULT), ir.Const(k, "int")), loc)  # noqa: E731
    return [held, replace(s, value=pair(item(0), item(1)))]


def _rebound_ir(mine: list, name: str) -> bool:
    """Whether the lane's own statements bind ``name`` (beside its ``def``)."""
    return name in stored(mine, defs=False)


def _is_scan_ir(p) -> bool:
    """Whether ``p`` calls ``lw.scan`` (by the object called: a renamed or closure-held ``lw`` too)."""
    fn = ir.called(p) if isinstance(p, ir.Prim) else None
    return getattr(fn, "__module__", None) == "lanewise.lane.scanning" and getattr(fn, "__name__", "") == "scan"


def _only_scan_steps_ir(lane: ir.Function, mine: list, name: str) -> bool:
    """Every mention of ``name`` is the step (first positional argument) of an ``lw.scan`` call."""
    steps = {id(n.args[0]) for n in mine if _is_scan_ir(n) and n.args and n.args[0] == ir.Var(name)}
    mentions = [n for n in walk(lane.body) if n == ir.Var(name)]
    return bool(steps) and all(id(n) in steps for n in mentions)


def _free_ir(step: ir.Function) -> set:
    """The names ``step`` (or a function in it) reads that ``step`` does not bind."""
    mine = list(own(step.body))
    bound = {p.name for p in step.params} | stored(mine, defs=True)
    targets = {id(v) for n in walk(step.body) for v in _target_vars(n)}
    return {n.name for n in walk(step.body) if isinstance(n, ir.Var) and id(n) not in targets} - bound


def _target_vars(n) -> list:
    """The :class:`Var` nodes a statement or clause binds (its targets' names)."""
    if isinstance(n, (ir.Assign, ir.Generator)) or (isinstance(n, ir.Loop) and n.target is not None):
        return list(_vars_of(n.target))
    return []


def _vars_of(t):
    if isinstance(t, ir.Var):
        yield t
    elif isinstance(t, ir.Unpack):
        for item in t.items:
            yield from _vars_of(item)
