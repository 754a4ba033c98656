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
    >>> node, count = lift(ast.parse(inspect.getsource(smooth)).body[0], smooth.__globals__)
    >>> count
    1
"""

from __future__ import annotations

import ast
import inspect  # noqa: F401 - the example
from dataclasses import replace

import numba

from .ir import nodes as ir
from .ir.passes.walk import own, stored, walk
from .source import own_nodes

CARRY, ENV, RESULT = "_lw_cc", "_lw_env", "_lw_r"


@numba.njit(inline="always")
def _lw_uncapture(result):
    """``(carry, ys)`` of a scan whose carry is ``(carry, captured values)``."""
    return result[0][0], result[1]


GLOBALS = {"_lw_uncapture": _lw_uncapture}


def lift(fdef: ast.FunctionDef, namespace: dict) -> tuple[ast.FunctionDef, int]:
    """``fdef`` with its closure steps lifted (module docstring), and how many were.

    ``namespace``: the lane's globals, to know which calls are ``lw.scan``'s."""
    steps = _closure_steps(fdef, namespace)
    if not steps:
        return fdef, 0
    return _Lift(steps, namespace).visit(fdef), len(steps)


def closure_steps(lane: ir.Function) -> dict[str, list[str]]:
    """The nested defs of ``lane`` (its IR) used only as ``lw.scan`` steps, each with the
    lane's locals it reads (sorted): the steps :func:`lift` rewrites.

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
    were: the rewrite :func:`lift` makes, on the IR.  Load the result with
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
    return ir.Prim("call:_lw_uncapture", (scan,), scan.loc)


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
    """Whether ``p`` calls ``lw.scan`` (by its module and name: module docstring of :func:`_is_scan`)."""
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


def _closure_steps(fdef: ast.FunctionDef, namespace: dict) -> dict[str, list[str]]:
    """Nested defs of ``fdef`` used only as scan steps -> the lane locals they read."""
    lane_locals = _bound_names(fdef)
    defs: dict[str, list[ast.FunctionDef]] = {}
    for node in own_nodes(fdef):
        if isinstance(node, ast.FunctionDef):
            defs.setdefault(node.name, []).append(node)
    steps = {}
    for name, found in defs.items():
        node = found[0]
        if len(found) > 1 or _rebound(fdef, name) or not _only_scan_steps(fdef, name, namespace):
            continue
        if any(isinstance(n, (ast.Nonlocal, ast.Global)) for n in ast.walk(node)) or node.decorator_list:
            continue
        captured = sorted(_free_names(node) & lane_locals)
        if set(captured) & set(defs):
            continue  # it calls another function of the lane: no value to carry
        if captured and len(node.args.args) == 2 and not node.args.posonlyargs and _plain_args(node.args):
            steps[name] = captured
    return steps


def _bound_names(fdef) -> set[str]:
    """Parameters and locals of ``fdef``."""
    a = fdef.args
    names = {p.arg for p in a.posonlyargs + a.args + a.kwonlyargs}
    names |= {p.arg for p in (a.vararg, a.kwarg) if p is not None}
    for node in own_nodes(fdef):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
    return names


def _rebound(fdef, name: str) -> bool:
    return any(isinstance(n, ast.Name) and n.id == name and not isinstance(n.ctx, ast.Load)
               for n in own_nodes(fdef))


def _is_scan(func, namespace: dict) -> bool:
    """Whether a call's function expression (``lw.scan``, ``scan``) is ``lw.scan``."""
    path = []
    while isinstance(func, ast.Attribute):
        path.append(func.attr)
        func = func.value
    if not isinstance(func, ast.Name) or func.id not in namespace:
        return False
    value = namespace[func.id]
    for attr in reversed(path):
        value = getattr(value, attr, None)
    # lw.scan by name, not by an import of lane.scanning: that imports the lane
    # compiler (lanefn), which imports this rewrite (an import cycle).
    return getattr(value, "__module__", None) == "lanewise.lane.scanning" and getattr(value, "__name__", "") == "scan"


def _only_scan_steps(fdef, name: str, namespace: dict) -> bool:
    """Every read of ``name`` is the step (first positional argument) of an ``lw.scan`` call."""
    steps = {id(n.args[0]) for n in own_nodes(fdef)
             if isinstance(n, ast.Call) and _is_scan(n.func, namespace) and n.args
             and isinstance(n.args[0], ast.Name) and n.args[0].id == name}
    reads = [n for n in ast.walk(fdef) if isinstance(n, ast.Name) and n.id == name]
    return bool(steps) and all(id(n) in steps for n in reads)


def _free_names(node: ast.FunctionDef) -> set[str]:
    """Names ``node`` reads without binding them (its free variables and globals)."""
    bound = _bound_names(node)
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)} - bound


def _plain_args(a: ast.arguments) -> bool:
    return not (a.vararg or a.kwarg or a.kwonlyargs or a.defaults)


def _names_tuple(names, ctx):
    return ast.Tuple([ast.Name(n, ctx()) for n in names], ctx())


class _Lift(ast.NodeTransformer):
    def __init__(self, steps: dict[str, list[str]], namespace: dict):
        self.steps, self.namespace = steps, namespace

    def visit_FunctionDef(self, node):
        if node.name not in self.steps:
            return self.generic_visit(node)
        captured = self.steps[node.name]
        carry = node.args.args[0].arg
        node.args.args[0] = ast.arg(CARRY)
        # The step's own nested functions may return: only this function's returns change.
        node.body = [ast.parse(f"{carry}, {ENV} = {CARRY}").body[0],
                     ast.Assign([_names_tuple(captured, ast.Store)], ast.Name(ENV, ast.Load())),
                     *[_Returns().visit(s) for s in node.body]]
        return ast.fix_missing_locations(ast.copy_location(node, node))

    def visit_Call(self, node):
        self.generic_visit(node)
        if not (_is_scan(node.func, self.namespace) and node.args and isinstance(node.args[0], ast.Name)
                and node.args[0].id in self.steps):
            return node
        captured = self.steps[node.args[0].id]
        env = _names_tuple(captured, ast.Load)
        if len(node.args) >= 2:
            node.args[1] = ast.Tuple([node.args[1], env], ast.Load())
        else:
            for k in node.keywords:
                if k.arg == "init":
                    k.value = ast.Tuple([k.value, env], ast.Load())
        return ast.copy_location(ast.Call(ast.Name("_lw_uncapture", ast.Load()), [node], []), node)


class _Returns(ast.NodeTransformer):
    """``return c, y`` -> ``return (c, _lw_env), y`` in one function (not nested ones)."""

    def visit_FunctionDef(self, node):
        return node

    visit_AsyncFunctionDef = visit_Lambda = visit_ClassDef = visit_FunctionDef

    def visit_Return(self, node):
        value = node.value
        if isinstance(value, ast.Tuple) and len(value.elts) == 2 and not any(
                isinstance(e, ast.Starred) for e in value.elts):
            carry, y = value.elts
            out = ast.Return(ast.Tuple([ast.Tuple([carry, ast.Name(ENV, ast.Load())], ast.Load()), y], ast.Load()))
            return ast.copy_location(out, node)
        # Any other value: (carry, y) held in a name first.
        held = ast.Assign([ast.Name(RESULT, ast.Store())], value or ast.Constant(None))
        out = ast.Return(ast.parse(f"(({RESULT}[0], {ENV}), {RESULT}[1])", mode="eval").body)
        return [ast.copy_location(held, node), ast.copy_location(out, node)]
