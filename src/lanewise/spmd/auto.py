"""Auto mode's judgement of a lane (``lw.config.spmd = "auto"``): whether its control
flow diverges between lanes (:func:`divergence`, :func:`long_fixed_loop`), whether
branches would serialise its loops (:func:`branch_loops`), and how much arithmetic
its loops do per row element read (:func:`row_work`).

Example:
    >>> def steps(x):
    ...     while x > 1.0:
    ...         x = x * 0.5
    ...     return x
    >>> divergence(steps).startswith("steps has a while loop")
    True
"""

from __future__ import annotations

import ast
import types

from .syntax import Unsupported, callee, first_in_helpers, function_ast


#: Auto mode: a lane reading per-lane rows takes the SPMD path only if its loops do
#: at least this many operations per row element read.  For strided rows each read
#: is W scalar loads inserted into a vector, while the scalar path streams its row;
#: measured on Zen 4 (2 threads, 200000 rows of 256 or 2000 of 5000): W6's
#: first-passage loop (3 operations per read) 1.3x slower on the SPMD path, a scan
#: summing its row (1) 1.2x slower; a scan of two EMAs (6) 3x faster, W3's
#: backtest (11) 3.2x faster.
MIN_OPS_PER_ROW_READ = 4

#: ... and for contiguous rows, read through blocks (a transposed load per W
#: elements, :func:`.rows.v_row`): W6's loop (3 per read) 0.64x the scalar path,
#: a for loop summing its row (2) still 1.14x slower (both stream memory: W rows
#: in lock-step are read at 22 GB/s, one row after another at 25 GB/s).
MIN_OPS_PER_BLOCK_READ = 3

_OPS = (ast.BinOp, ast.AugAssign, ast.UnaryOp, ast.Compare, ast.BoolOp, ast.IfExp)


def row_work(lane, rows: set) -> float | None:
    """Operations per row element read, the least over the lane's loops and its
    ``lw.scan`` steps over rows (helpers called in them counted in); None when no
    loop reads a row."""
    fdef = function_ast(lane)
    ratios = []
    for node in ast.walk(fdef):
        if isinstance(node, (ast.While, ast.For)):
            reads = sum(1 for n in ast.walk(node) if isinstance(n, ast.Subscript)
                        and isinstance(n.value, ast.Name) and n.value.id in rows)
            if reads:
                ratios.append(_ops(lane, node, set()) / reads)
        elif isinstance(node, ast.Call):
            step = _row_scan_step(lane, node, rows)
            if step is not None:  # one row element per step
                try:
                    ratios.append(_ops(step, function_ast(step), set()))
                except Unsupported:
                    pass
    return min(ratios) if ratios else None


def _row_scan_step(fn, call: ast.Call, rows: set):
    """The step function of ``call`` when it is ``lw.scan(f, init, row)``, else None."""
    from .arrays import is_scan

    if not is_scan(_static_target(fn, call.func)):
        return None
    kw = {k.arg: k.value for k in call.keywords}
    xs = call.args[2] if len(call.args) > 2 else kw.get("xs")
    f = call.args[0] if call.args else kw.get("f")
    if not (isinstance(xs, ast.Name) and xs.id in rows) or f is None:
        return None
    step = _static_target(fn, f)
    step = getattr(step, "py_func", step)
    return step if isinstance(step, types.FunctionType) else None


def _ops(fn, tree, seen) -> int:
    """Arithmetic, comparisons and calls in ``tree``, with the bodies of plain helpers it calls."""
    count = 0
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            count += len(node.ops)
        elif isinstance(node, _OPS):
            count += 1
        elif isinstance(node, ast.Call):
            target = _static_target(fn, node.func)
            target = getattr(target, "py_func", target)
            if isinstance(target, types.FunctionType) and target not in seen \
                    and not (target.__module__ or "").startswith("lanewise"):
                seen.add(target)
                try:
                    count += _ops(target, function_ast(target), seen)
                except Unsupported:
                    count += 1
            else:
                count += 1  # math.exp, abs, ...: at least one operation
    return count


def divergence(lane) -> str | None:
    """Why ``lane`` (or a helper it calls by name) has divergent control flow, or None."""
    return _divergence(lane, set())


def _divergence(fn, seen) -> str | None:
    return first_in_helpers(fn, seen, _own_divergence)


def _own_divergence(fn, fdef) -> str | None:
    scan = _row_scan(fn, fdef)
    if scan is not None:
        return (f"{fn.__qualname__} runs lw.scan (line {_line(fn, scan)}): a carried loop over a per-lane "
                "row: LLVM cannot vectorise it across lanes")
    for node in ast.walk(fdef):
        why = _loop_divergence(fn, node)
        if why:
            return f"{fn.__qualname__} {why}"
    return None


def _loop_divergence(fn, node) -> str | None:
    """Why the loop ``node`` of ``fn`` is divergent, or None (not a loop, or a fixed ``for``)."""
    if isinstance(node, ast.While):
        return f"has a while loop (line {_line(fn, node)})"
    if not isinstance(node, ast.For):
        return None
    exits = [n for n in ast.walk(node) if isinstance(n, (ast.Break, ast.Continue, ast.Return))]
    if exits:
        return f"leaves a for loop early (line {_line(fn, exits[0])})"
    it = node.iter
    if not (isinstance(it, ast.Call) and all(_fixed(fn, a) for a in it.args)):
        return f"has a for loop whose trip count is not a constant (line {_line(fn, node)})"
    return None


def branch_loops(lane) -> str | None:
    """Auto mode: where two or more branches of one ``if``/``elif`` chain in ``lane``
    (or a helper it calls) each run a divergent loop, or None.  Lanes are W to a
    vector step, so when they take different branches the SPMD path runs each
    branch's loop in turn with the lanes that took it: Kepler propagation with
    70% elliptic and 30% near-parabolic or hyperbolic orbits, mixed at random,
    ran 1.9x slower than the scalar path (1.8x faster with one kind of orbit)."""
    return _branch_loops(lane, set())


def _branch_loops(fn, seen) -> str | None:
    return first_in_helpers(fn, seen, _own_branch_loops)


def _own_branch_loops(fn, fdef) -> str | None:
    for node in ast.walk(fdef):
        if isinstance(node, ast.If):
            lines = [line for line in (_arm_loop(fn, arm) for arm in _arms(node)) if line is not None]
            if len(lines) >= 2:
                return f"{fn.__qualname__}'s branches each run a loop (lines {', '.join(map(str, lines))})"
    return None


def _arms(node: ast.If) -> list:
    """The statement lists of an ``if``/``elif``/``else`` chain."""
    arms = [node.body]
    while len(node.orelse) == 1 and isinstance(node.orelse[0], ast.If):
        node = node.orelse[0]
        arms.append(node.body)
    return arms + ([node.orelse] if node.orelse else [])


def _arm_loop(fn, stmts) -> int | None:
    """The line of a divergent loop in ``stmts``, or of a call there to a helper with one."""
    for stmt in stmts:
        for node in ast.walk(stmt):
            if _loop_divergence(fn, node) is not None or (
                    isinstance(node, ast.Call) and _divergence(callee(fn, node.func), set()) is not None):
                return _line(fn, node)
    return None


def _row_scan(fn, fdef):
    """The first ``lw.scan(f, init, xs)`` call in ``fdef`` whose ``xs`` is a
    parameter (a per-lane row when the argument is an array), or None."""
    from .arrays import is_scan

    params = {a.arg for a in fdef.args.args}
    for node in ast.walk(fdef):
        if not isinstance(node, ast.Call):
            continue
        xs = node.args[2] if len(node.args) > 2 else next((k.value for k in node.keywords if k.arg == "xs"), None)
        if isinstance(xs, ast.Name) and xs.id in params and is_scan(_static_target(fn, node.func)):
            return node
    return None


def _static_target(fn, node):
    """What a ``name`` or ``module.attr`` chain refers to in ``fn`` (None if unknown)."""
    if isinstance(node, ast.Attribute):
        base = _static_target(fn, node.value)
        return getattr(base, node.attr, None) if isinstance(base, types.ModuleType) else None
    if isinstance(node, ast.Name):
        if node.id in fn.__code__.co_freevars and fn.__closure__:
            try:
                return fn.__closure__[fn.__code__.co_freevars.index(node.id)].cell_contents
            except ValueError:
                return None
        return fn.__globals__.get(node.id)
    return None


def _fixed(fn, node) -> bool:
    """Is ``node`` an integer known before the lanes run (a literal or a global int)?"""
    return _fixed_value(fn, node) is not None


def _fixed_value(fn, node) -> int | None:
    """The integer ``node`` is when it is known before the lanes run, else None."""
    if isinstance(node, ast.Constant):
        return node.value if isinstance(node.value, int) and not isinstance(node.value, bool) else None
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        value = _fixed_value(fn, node.operand)
        return None if value is None else -value
    if isinstance(node, ast.Name) and node.id not in fn.__code__.co_varnames:
        value = fn.__globals__.get(node.id)
        return value if isinstance(value, int) and not isinstance(value, bool) else None
    return None


#: Auto mode: a lane (or helper) with a ``for`` loop of at least this many
#: iterations, fixed before the lanes run, takes the SPMD path.  LLVM vectorises
#: only innermost loops, so a lane loop holding such a loop runs one lane at a
#: time unless LLVM unrolls the inner loop completely, which it does for a few
#: iterations of a small body.  Measured: an Asian-option path of 64 steps with
#: lw.random draws, 4.1x faster W-wide.
MIN_FIXED_TRIPS = 16


def long_fixed_loop(lane) -> str | None:
    """Where ``lane`` (or a helper it calls) runs a fixed ``for`` loop of at least
    :data:`MIN_FIXED_TRIPS` iterations, or None."""
    return first_in_helpers(lane, set(), _own_long_loop)


def _own_long_loop(fn, fdef) -> str | None:
    for node in ast.walk(fdef):
        if not (isinstance(node, ast.For) and isinstance(node.iter, ast.Call) and not node.iter.keywords):
            continue
        func = node.iter.func
        if not (_static_target(fn, func) is range or (isinstance(func, ast.Name) and func.id == "range"
                                                      and _static_target(fn, func) is None)):
            continue
        bounds = [_fixed_value(fn, a) for a in node.iter.args]
        if None in bounds or not 1 <= len(bounds) <= 3 or (len(bounds) == 3 and bounds[2] == 0):
            continue
        trips = len(range(*bounds))
        if trips >= MIN_FIXED_TRIPS:
            return (f"{fn.__qualname__} runs a for loop of {trips} iterations (line {_line(fn, node)}): LLVM "
                    "vectorises only a lane loop with no loop inside, so the scalar nest runs one lane at a time")
    return None


def _line(fn, node) -> int:
    return fn.__code__.co_firstlineno + node.lineno - 1

