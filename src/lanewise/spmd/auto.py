"""Auto mode's judgement of a lane (``lw.config.spmd = "auto"``): whether its control
flow diverges between lanes (:func:`divergence`, :func:`long_fixed_loop`), whether
branches would serialise its loops (:func:`branch_loops`), and how much arithmetic
its loops do per row element read (:func:`row_work`).  Each question is answered
from the lane IR (:mod:`lanewise.lane.ir`), built once per function and memoised
(the lane compiler built the lane's and its helpers' already).

Example:
    >>> def steps(x):
    ...     while x > 1.0:
    ...         x = x * 0.5
    ...     return x
    >>> divergence(steps).startswith("steps has a while loop")
    True
"""

from __future__ import annotations

import inspect
import sys
import types
from collections import deque

from ..lane.ir import nodes as ir
from ..lane.ir.build import function_ir
from ..lane.ir.passes.walk import fields, inplace, is_call
from .syntax import Unsupported


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

#: Operators counted as one operation each (a comparison chain: one per comparison).
_OPERATIONS = frozenset({"add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "lshift", "rshift", "bitor",
                         "bitand", "bitxor", "matmul", "neg", "pos", "not", "invert", "and", "or", "ifexp",
                         "eq", "ne", "lt", "le", "gt", "ge", "is", "isnot", "in", "notin"})
_ASYNC = inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR
#: Modules the IR writes by short names (:mod:`lanewise.lane.ir.build`), to find the
#: object a dotted :class:`~lanewise.lane.ir.nodes.Global` names.
_MODULES = (("lw.random", "lanewise.random"), ("lw", "lanewise"), ("np", "numpy"))


def row_work(lane, rows: set) -> float | None:
    """Operations per row element read, the least over the lane's loops and its
    ``lw.scan`` steps over rows (helpers called in them counted in); None when no
    loop reads a row.

    Example:
        >>> def total(row, n):
        ...     s = 0.0
        ...     for k in range(n):
        ...         s += row[k] * row[k]
        ...     return s
        >>> row_work(total, {"row"})  # a multiply, an add and range's call per two reads
        1.5
    """
    function = _source_ir(lane)
    if function is None:
        raise Unsupported(f"the source of {lane.__qualname__} is not available, or is not the code "
                          "that runs (exec'd from a string, or edited since import)")
    ratios = []
    for node in _breadth(function):
        if isinstance(node, ir.Loop):
            reads = _row_reads(node, rows)
            if reads:
                ratios.append(_ops(node, set()) / reads)
        elif _is_call(node):
            step = _row_scan_step(lane, node, rows)
            if step is not None:  # one row element per step
                steps = _source_ir(step)
                if steps is not None:
                    ratios.append(_ops(steps, set()))
    return min(ratios) if ratios else None


def _row_reads(loop: ir.Loop, rows: set) -> int:
    """Reads and writes of an element of a row (``row[i]``) in ``loop``, as written:
    ``row[i] += v`` once."""
    count = 0
    for n in _breadth(loop):
        store = _store(n)
        if isinstance(n, ir.Prim) and n.op == "getitem":
            count += _row(n.args[0], rows)
        elif store is not None and store.op == "setitem" and not inplace(store.args[-1]):
            count += _row(store.args[0], rows)  # (an augmented store's read is its value's first operand)
        elif isinstance(n, ir.Item):
            count += _row(n.base, rows)
    return count


def _row(v, rows: set) -> bool:
    return isinstance(v, ir.Var) and v.name in rows


def _row_scan_step(fn, call: ir.Prim, rows: set):
    """The step function of ``call`` when it is ``lw.scan(f, init, row)``, else None."""
    from .arrays import is_scan

    if not is_scan(ir.called(call)):
        return None
    xs, f = _scan_operand(call, 2, "xs"), _scan_operand(call, 0, "f")
    if not _row(xs, rows) or f is None:
        return None
    step = _value(fn, f)
    step = getattr(step, "py_func", step)
    return step if isinstance(step, types.FunctionType) else None


def _scan_operand(call: ir.Prim, index: int, keyword: str):
    """``lw.scan``'s argument at position ``index`` (or passed as ``keyword``), or None."""
    argv = _positional(call)
    if len(argv) > index:
        return argv[index]
    return next((v for k, v in call.keywords if k == keyword), None)


def _ops(node, seen) -> int:
    """Arithmetic, comparisons and calls in ``node`` as written, with the bodies of plain
    helpers it calls."""
    count = 0
    for n in _breadth(node):
        if _is_call(n):
            target = ir.called(n)
            target = getattr(target, "py_func", target)
            if isinstance(target, types.FunctionType) and target not in seen \
                    and not (target.__module__ or "").startswith("lanewise"):
                seen.add(target)
                helper = _source_ir(target)
                count += 1 if helper is None else _ops(helper, seen)
            else:
                count += 1  # math.exp, abs, ...: at least one operation
        elif isinstance(n, ir.Prim):
            # a chain ``a < b < c`` is its comparisons (the breadth-first walk does not
            # enter them: it goes to the operands)
            count += len(n.args) if _chain(n) else n.op in _OPERATIONS
        elif isinstance(n, ir.Assign) and inplace(n.value) or _store(n) is not None and inplace(_store(n).args[-1]):
            count += 1  # ``x += v``, ``a[i] += v``: the operation the IR keeps in the value
    return count


def divergence(lane) -> str | None:
    """Why ``lane`` (or a helper it calls by name) has divergent control flow, or None.

    Example:
        >>> def capped(x, n):
        ...     for k in range(n):
        ...         if x > 9.0:
        ...             break
        ...         x = x * x
        ...     return x
        >>> divergence(capped).startswith("capped leaves a for loop early")
        True
    """
    return _first_in_helpers(lane, set(), _own_divergence)


def _own_divergence(fn, function: ir.Function) -> str | None:
    scan = _row_scan(function)
    if scan is not None:
        return (f"{fn.__qualname__} runs lw.scan (line {scan.loc.line}): a carried loop over a per-lane "
                "row: LLVM cannot vectorise it across lanes")
    for node in _breadth(function):
        why = _loop_divergence(fn, node)
        if why:
            return f"{fn.__qualname__} {why}"
    return None


def _loop_divergence(fn, node) -> str | None:
    """Why the loop ``node`` of ``fn`` is divergent, or None (not a loop, or a fixed ``for``)."""
    if not isinstance(node, ir.Loop):
        return None
    if node.kind == "while":
        return f"has a while loop (line {node.loc.line})"
    exit_ = next((n for n in _breadth(node) if isinstance(n, ir.Exit)), None)
    if exit_ is not None:
        return f"leaves a for loop early (line {exit_.loc.line})"
    it = node.iter
    if not (_is_call(it) and all(_fixed_value(fn, a) is not None for a in _positional(it))):
        return f"has a for loop whose trip count is not a constant (line {node.loc.line})"
    return None


def branch_loops(lane) -> str | None:
    """Auto mode: where two or more branches of one ``if``/``elif`` chain in ``lane``
    (or a helper it calls) each run a divergent loop, or None.  Lanes are W to a
    vector step, so when they take different branches the SPMD path runs each
    branch's loop in turn with the lanes that took it: Kepler propagation with
    70% elliptic and 30% near-parabolic or hyperbolic orbits, mixed at random,
    ran 1.9x slower than the scalar path (1.8x faster with one kind of orbit).

    Example:
        >>> def solve(x):
        ...     if x > 1.0:
        ...         while x > 1.0:
        ...             x = x * 0.5
        ...     else:
        ...         while x < 1.0:
        ...             x = x * 2.0
        ...     return x
        >>> branch_loops(solve).startswith("solve's branches each run a loop")
        True
    """
    return _first_in_helpers(lane, set(), _own_branch_loops)


def _own_branch_loops(fn, function: ir.Function) -> str | None:
    for node in _breadth(function):
        if isinstance(node, ir.If):
            lines = [line for line in (_arm_loop(fn, arm) for arm in _arms(node)) if line is not None]
            if len(lines) >= 2:
                return f"{fn.__qualname__}'s branches each run a loop (lines {', '.join(map(str, lines))})"
    return None


def _arms(node: ir.If) -> list:
    """The statement lists of an ``if``/``elif``/``else`` chain."""
    arms = [node.then]
    while len(node.orelse) == 1 and isinstance(node.orelse[0], ir.If):
        node = node.orelse[0]
        arms.append(node.then)
    return arms + ([node.orelse] if node.orelse else [])


def _arm_loop(fn, stmts) -> int | None:
    """The line of a divergent loop in ``stmts``, or of a call there to a helper with one."""
    for stmt in stmts:
        for node in _breadth(stmt):
            if _loop_divergence(fn, node) is not None or (
                    _is_call(node) and _first_in_helpers(_callee(node), set(), _own_divergence) is not None):
                return node.loc.line
    return None


def _row_scan(function: ir.Function):
    """The first ``lw.scan(f, init, xs)`` call in ``function`` whose ``xs`` is a
    parameter (a per-lane row when the argument is an array), or None."""
    from .arrays import is_scan

    # the parameters a call binds by position or name (not positional-only, keyword-only or starred)
    params = {p.name for p in function.params[function.posonly:] if p.kind == "positional"}
    for node in _breadth(function):
        if _is_call(node):
            xs = _scan_operand(node, 2, "xs")
            if isinstance(xs, ir.Var) and xs.name in params and is_scan(ir.called(node)):
                return node
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
    :data:`MIN_FIXED_TRIPS` iterations, or None.

    Example:
        >>> def path(x, n=64):
        ...     return sum(x * 0.99 ** k for k in range(n)) if n else x
        >>> long_fixed_loop(path) is None  # a comprehension is no for loop, and n is the caller's
        True
        >>> def fixed(x):
        ...     for k in range(64): x = x * 0.99
        ...     return x
        >>> long_fixed_loop(fixed).startswith("fixed runs a for loop of 64 iterations")
        True
    """
    return _first_in_helpers(lane, set(), _own_long_loop)


def _own_long_loop(fn, function: ir.Function) -> str | None:
    for node in _breadth(function):
        if not (isinstance(node, ir.Loop) and node.kind != "while" and _is_call(node.iter)
                and not node.iter.keywords and ir.called(node.iter) is range):
            continue
        bounds = [_fixed_value(fn, a) for a in _positional(node.iter)]
        if None in bounds or not 1 <= len(bounds) <= 3 or (len(bounds) == 3 and bounds[2] == 0):
            continue
        trips = len(range(*bounds))
        if trips >= MIN_FIXED_TRIPS:
            return (f"{fn.__qualname__} runs a for loop of {trips} iterations (line {node.loc.line}): LLVM "
                    "vectorises only a lane loop with no loop inside, so the scalar nest runs one lane at a time")
    return None


def _fixed_value(fn, node) -> int | None:
    """The integer ``node`` is when it is known before the lanes run (a literal, or a
    global int), else None."""
    if isinstance(node, ir.Const):
        value = node.value
    elif isinstance(node, ir.Prim) and node.op == "neg" and node.callee is None:
        value = _fixed_value(fn, node.args[0])
        return None if value is None else -value
    elif isinstance(node, ir.Global) and "." not in node.name:
        value = fn.__globals__.get(node.name)
    else:
        return None
    return value if isinstance(value, int) and not isinstance(value, bool) else None


# ----------------------------------------------------------------------------- the lane IR, read


def _source_ir(fn) -> ir.Function | None:
    """The memoised IR of ``fn`` read from its text, or None when it has none that is the
    code that runs (then it is judged as a call: the IR rebuilt from bytecode is a block
    dispatch loop, not the loops the user wrote)."""
    if fn.__code__.co_flags & _ASYNC:  # an async def: not lane code to read
        return None
    try:
        function = function_ir(fn)
    except Exception:  # noqa: BLE001 - a defect of the IR's front end must cost speed, never a result
        return None
    return function if function.source == "source" else None


def _first_in_helpers(fn, seen: set, find) -> str | None:
    """``find(fn, its IR)`` for ``fn``, else for the helpers it calls by name (depth
    first, in the order the calls are written): the first answer that is not None."""
    if not isinstance(fn, types.FunctionType) or fn in seen:  # (a call of an array, say: unhashable)
        return None
    seen.add(fn)
    function = _source_ir(fn)
    if function is None:
        return None
    found = find(fn, function)
    if found:
        return found
    for node in _breadth(function):
        if _is_call(node):
            found = _first_in_helpers(_callee(node), seen, find)
            if found:
                return found
    return None


def _callee(call: ir.Prim):
    """The Python function ``call`` calls by name (a helper, a dispatcher's ``py_func``),
    else what it calls; None for lw.random's draws, which are called whole, never read."""
    if call.callee is None or (call.callee.hops or 0) > 1:  # ``a.b.f(x)`` is not followed
        return None
    target = ir.called(call)
    if hasattr(target, "_lw_spmd_twin"):
        return None
    return getattr(target, "py_func", target)


def _is_call(node) -> bool:
    """A call as written: a builtin called by an operator's name (``pow``, ``slice``)
    too, which the IR resolves (an operator has no callee)."""
    return isinstance(node, ir.Prim) and (node.callee is not None or is_call(node))


def _positional(call: ir.Prim) -> tuple:
    """The positional arguments of a call as written (a method's object and a called
    local are not among them)."""
    return call.args[1:] if call.op == "call" or call.op.startswith("method.") else call.args


def _chain(p: ir.Prim) -> bool:
    """``a < b < c``: the comparisons are counted, not the ``and`` that joins them."""
    return ("chain", True) in p.params


def _value(fn, node):
    """What a name or module attribute in ``fn`` refers to (None if unknown): a global or
    closure value, never a local's."""
    if not isinstance(node, ir.Global):
        return None
    if "." not in node.name:
        code = fn.__code__
        if node.name in code.co_freevars and fn.__closure__:
            try:
                return fn.__closure__[code.co_freevars.index(node.name)].cell_contents
            except ValueError:  # an empty cell
                return None
        return fn.__globals__.get(node.name)
    # ``np.linalg.norm``: the IR names a module's attribute from the module's own name
    parts = node.name.split(".")
    for k in range(len(parts) - 1, 0, -1):
        module = ".".join(parts[:k])
        module = next((full + module[len(short):] for short, full in _MODULES
                       if module == short or module.startswith(short + ".")), module)
        found = sys.modules.get(module)
        if found is not None:
            for attr in parts[k:]:
                found = getattr(found, attr, None)
            return found
    return None


class _Level:
    """A node Python's syntax tree has where the IR has none (a call's keyword, a
    method's attribute, a function's arguments): it holds the parts below it."""

    __slots__ = ("parts",)

    def __init__(self, parts):
        self.parts = tuple(parts)


def _breadth(node):
    """``node`` and the IR nodes in it, breadth first in the order of the code as
    written (as Python's syntax tree lists it): "the first" loop, exit or call of a
    function is the one the user would point at, and a judgement names it."""
    todo, met = deque([node]), set()
    while todo:
        n = todo.popleft()
        if isinstance(n, _Level):
            todo.extend(n.parts)
        elif id(n) not in met:  # ``a = b = f(x)`` and ``a < f(x) < b`` share f(x): one call
            met.add(id(n))
            yield n
            todo.extend(_written_parts(n))


def _store(n) -> ir.Prim | None:
    """The ``setitem``/``setattr`` store of a :class:`~lanewise.lane.ir.nodes.Do` (``a[i] = v``), else None."""
    if isinstance(n, ir.Do) and isinstance(n.expr, ir.Prim) and n.expr.op in ("setitem", "setattr") \
            and n.expr.callee is None:
        return n.expr
    return None


def _written_parts(n) -> list:
    """The parts of IR node ``n`` in the shape of the code as written."""
    if isinstance(n, (ir.Function, ir.Def, ir.Lambda)):
        function = n if isinstance(n, ir.Function) else n.function
        defaults = _Level(p.default for p in function.params if p.default is not None)
        return [defaults, function.body[0].value] if isinstance(n, ir.Lambda) else [defaults, *function.body]
    if isinstance(n, ir.Assign) and inplace(n.value) and isinstance(n.target, ir.Var):
        return [n.target, n.value.args[1]]  # ``x += v``
    if _store(n) is not None:
        *target, value = n.expr.args
        if inplace(value):  # ``a[i] += v``: the target is the read the value starts from
            return [value.args[0], value.args[1]]
        return [_Level(target), value]
    if isinstance(n, ir.Prim):
        kept = [_Level((v,)) for _, v in n.keywords]
        if n.op.startswith("method."):
            return [_Level(n.args[:1]), *n.args[1:], *kept]
        if _chain(n):
            return [n.args[0].args[0], *(p.args[1] for p in n.args)]
        if n.op == "dict" and n.type is not None:
            keys = [i.args[0] for i in n.args if i.op == "tuple"]
            return keys + [i.args[-1] for i in n.args]
        return [*n.args, *kept]
    return [p for p in _flat(fields(n)) if hasattr(p, "__dataclass_fields__") and not isinstance(p, ir.Loc)]


def _flat(parts) -> list:
    out = []
    for p in parts:
        out += _flat(p) if isinstance(p, (tuple, list)) else [p]
    return out
