"""SPMD on SIMD: divergent lanes run W at a time in CPU vector registers.

A scalar-per-lane loop nest leaves the vector units idle when the lane has
data-dependent control flow (a ``while``, a ``break``, an early ``return``):
LLVM cannot vectorise the loop over lanes around it.  Here the lane function is
rewritten (:mod:`.transform`) into a W-wide version whose values are vectors of
W lanes (:mod:`.vector`) and whose control flow is execution masks, as ISPC
does.  The CPU backend then runs the innermost level W lanes per call, with a
masked tail.

:func:`choose` decides, per compiled program, which path runs and why
(``lw.explain`` prints it):

* ``lw.config.spmd = "auto"`` (default): lanes with divergent control flow take
  the SPMD path when the transformation supports them; other lanes keep the
  scalar path, which LLVM already vectorises;
* ``True``: the SPMD path whenever supported; ``False``: never.

Lanes may read per-lane 1-D rows (``p[i]``, ``len(p)``, ``lw.scan(f, init, p)``;
see :mod:`.arrays`).  Anything the transformation does not handle — other array
arguments, array outputs, writes, unknown calls, recursion, raising lanes —
keeps the scalar path, with the reason.  Results are bit for bit those of the scalar path.

Example:
    >>> import numpy as np, lanewise as lw
    >>> def steps(x):
    ...     n = 0
    ...     while x > 1.0:
    ...         x = x * 0.5
    ...         n += 1
    ...     return n
    >>> f = lw.vmap(steps)
    >>> f(np.array([0.5, 3.0, 1000.0]))
    array([ 0,  2, 10])
    >>> "lane path: SPMD" in lw.explain(f, np.ones(3))
    True
"""

from __future__ import annotations

import ast
import copy
import functools
import platform
import re
import sys
import types
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..config import config
from .failure import LANE_RAISED
from .rows import OUT_OF_BOUNDS
from .stream import STREAM, transform_stream
from .syntax import Desugar, Unsupported, callee, first_in_helpers, function_ast
from .transform import FUNCTION, TWIN_MODULES, transform
from .uniform import uniform_reads

#: Names the generated module imports for the W-wide lane.
RUNTIME = ("stack_empty", "vload", "vstore", "v_undef", "v_select", "v_as", "v_range", "m_const",
           "m_bits", "m_count", "m_from_bits",
           "v_add", "v_sub", "v_mul", "v_truediv", "v_floordiv", "v_mod", "v_pow", "v_lshift",
           "v_rshift", "v_bitand", "v_bitor", "v_bitxor", "v_lt", "v_le", "v_gt", "v_ge", "v_eq",
           "v_ne", "v_neg", "v_pos", "v_invert", "v_call1", "v_call2", "v_call3", "v_call4",
           "m_and", "m_or", "m_andnot", "m_truth", "m_uniform", "m_not", "m_any")

#: ... and from :mod:`.rows`, for lanes that index a per-lane row.
ROW_RUNTIME = ("v_row", "v_gather", "v_table")


@dataclass(frozen=True)
class Plan:
    """How the kernel calls the W-wide lane."""

    width: int
    kinds: tuple  # per lane parameter: "varying", "uniform", "row" (a per-lane 1-D view), "table" (one 1-D
    #               array every lane shares), "tuple" (a flat tuple of scalars passed whole) or "default"
    leaves: tuple  # per lane parameter: the signature leaf passed (a tuple of them for "tuple"; None for "default")
    results: tuple  # ((path, numba result dtype name), ...) in program.outputs order
    source: str  # the module text defining lane_spmd (or lane_stream)
    stream: bool = False  # lane_stream: slots refilled as lanes finish
    gathered: bool = False  # a table is read at an index that differs between lanes (gathers_tables)


@dataclass(frozen=True)
class Choice:
    """The lane path of one program: ``plan`` is None for the scalar path."""

    plan: Plan | None
    reason: str
    #: The W-wide lane compiled by :func:`check_compiled` (a streamed lane: only when
    #: compiled with the kernel's own ``_lw_load``/``_lw_store``, :class:`StreamIO`):
    #: the kernel module may call it instead of compiling its own copy.
    checked: Any = field(default=None, compare=False, repr=False)

    def describe(self) -> str:
        if self.plan is None:
            return f"scalar (one lane per iteration): {self.reason}"
        how = (f"{self.plan.width} lanes per vector step, a lane's slot refilled when it returns"
               if self.plan.stream else f"{self.plan.width} lanes per vector step")
        return f"SPMD on SIMD, {how}: {self.reason}"


# ----------------------------------------------------------------------------- width


@functools.cache
def vector_bits() -> int:
    """Width in bits of the vector registers Numba compiles for (AVX-512: 512,
    AVX/AVX2: 256, NEON and SSE: 128)."""
    import numba
    import llvmlite.binding as ll

    features = numba.config.CPU_FEATURES
    if features is None:
        try:
            flags = ll.get_host_cpu_features()
            features = ",".join(("+" if v else "-") + k for k, v in flags.items())
        except Exception:  # noqa: BLE001 - some platforms cannot report features
            features = ""
    enabled = set(re.findall(r"\+([\w.-]+)", features))
    if "avx512f" in enabled:
        return 512
    if "avx2" in enabled or "avx" in enabled:
        return 256
    return 128  # NEON (aarch64), SSE2 (x86-64 baseline)


def registers_per_value() -> int:
    """Vector registers per W-wide value: 4 where the register file has 32 of them
    (AVX-512, AArch64), else 2 (AVX2, SSE: 16 registers).  Several independent
    registers per value hide the latency of a loop-carried computation."""
    return 4 if vector_bits() == 512 or platform.machine().lower() in ("arm64", "aarch64") else 2


def width_for(itemsize: int, rows: bool = False) -> int:
    """W for lanes whose widest value is ``itemsize`` bytes: ``lw.config.spmd_width``,
    else :func:`registers_per_value` vector registers' worth (AVX-512: 32 float64
    lanes, 64 float32; AVX2: 8 float64; NEON: 8 float64), at most 64.

    Lanes that read per-lane rows (``rows``) get one register's worth (AVX-512:
    8 float64 lanes; AVX2: 4): every read of a row is W scalar loads inserted
    into a vector, and beyond one register the inserts, not the arithmetic,
    set the pace.  W3's scan over 2000 rows of 5000 prices on Zen 4: 0.0046 s
    at W=8, 0.0052 s at 4, 0.0077 s at 16, 0.016 s at 32 (scalar path 0.0155 s)."""
    if config.spmd_width:
        return max(2, min(64, int(config.spmd_width)))
    if rows:
        return max(2, vector_bits() // (8 * max(itemsize, 4)))
    return max(4, min(64, registers_per_value() * vector_bits() // (8 * max(itemsize, 4))))


#: Stream lanes of the form ``prologue; loop; epilogue`` (slots refilled as lanes
#: finish); False runs every lane in fixed groups of W (tests switch it).
STREAMING = True


def cache_key() -> tuple:
    """What of the SPMD settings the generated code depends on."""
    # python -O drops the lanes' asserts, and the W-wide lane's with them
    return ("spmd", _mode(), config.spmd_width or vector_bits(), STREAMING, sys.flags.optimize)


def _mode():
    mode = config.spmd
    if isinstance(mode, str):
        mode = mode.strip().lower()
        if mode in ("auto", ""):
            return "auto"
        return mode not in ("0", "false", "off", "no", "never")
    return bool(mode)


# ----------------------------------------------------------------------------- choice


@dataclass(frozen=True)
class StreamIO:
    """How the kernel module feeds a streamed W-wide lane: the source of its
    ``_lw_load``/``_lw_store`` (with their imports) and the Numba types of the
    ``_lw_ctx`` tuple it passes, as the caller predicts them."""

    source: str
    context: tuple


def choose(program, call, result, inplace: bool = False, module: str | None = None,
           stream: bool = True, stream_io=None) -> Choice:
    """The lane path for ``program`` (see the module docstring), never raising.

    ``module``: the name of the kernel module that will call the W-wide lane
    (see :func:`check_compiled`); ``stream``: whether the caller can run the
    streamed form (``lw.vmap`` can; ``lw.reduce``'s tiles take groups of W);
    ``stream_io(plan)``: the kernel's :class:`StreamIO` for a streamed plan, or
    None (the check then compiles with stand-ins, and the kernel its own copy)."""
    from ..lane.lanefn import python_function

    mode = _mode()
    if mode is False:
        return Choice(None, "SPMD disabled (lw.config.spmd = False)")
    lane = python_function(program.lane)
    if not isinstance(lane, types.FunctionType):
        return Choice(None, f"the lane {lane!r} is not a Python function")
    if mode == "auto":
        why = divergence(lane) or long_fixed_loop(lane)
        if why is None:
            return Choice(None, "no divergent control flow (no while loop, no for loop with a variable trip "
                                "count, no break or return out of a loop): the scalar nest, which LLVM may "
                                "vectorise")
        arms = branch_loops(lane)
        if arms is not None:
            return Choice(None, f"{why}, but {arms}: W lanes that take different branches run every branch's "
                                "loop, one after the other, on the SPMD path (lw.config.spmd = True forces it)")
    else:
        why = "lw.config.spmd = True"
    try:
        if inplace:
            raise Unsupported("the lane writes a per-lane array output")
        plan = make_plan(program, call, result, lane, stream)
        declined = _too_little_work(plan, program, lane, why) if mode == "auto" else None
        if declined is not None:  # decided before compiling a variant that would not run
            return declined
        checked = _checked(plan, program, call, module, stream_io(plan) if plan.stream and stream_io else None)
    except Unsupported as e:
        return Choice(None, f"{why}, but the SPMD transformation does not handle {e}")
    except Exception as e:  # noqa: BLE001 - a defect here must cost speed, never a result
        return Choice(None, f"{why}, but the SPMD path failed to build ({type(e).__name__}: "
                            f"{str(e).splitlines()[0] if str(e) else ''})")
    return Choice(plan, why, checked)


def _checked(plan, program, call, module, io: "StreamIO | None"):
    """:func:`check_compiled`'s W-wide lane, or None for a streamed lane compiled with
    stand-ins.  With the kernel's ``io``, a rejection is checked again with stand-ins:
    a mispredicted context type must not cost the SPMD path."""
    if io is not None:
        try:
            return check_compiled(plan, program, call, module, io)
        except Unsupported:
            pass
    checked = check_compiled(plan, program, call, module)
    return None if plan.stream else checked


def _too_little_work(plan, program, lane, why) -> "Choice | None":
    """Auto mode's refusal of a lane whose loops do too little per row element read
    (see MIN_OPS_PER_ROW_READ), or None.  Tables count when some read of one is a
    gather (W loads, as for a row: W7's CSR rows ran 12x slower on the SPMD path)."""
    if "row" in plan.kinds or plan.gathered:
        counted = ("row", "table") if plan.gathered else ("row",)
        rows = {a.arg for a, kind in zip(function_ast(lane).args.args, plan.kinds) if kind in counted}
        work = row_work(lane, rows)
        contiguous = all(b is True for b in row_blocks(program.signature, plan.kinds, plan.leaves))
        blocks = contiguous and not plan.gathered and block_reads(lane, plan.kinds)
        least = MIN_OPS_PER_BLOCK_READ if blocks else MIN_OPS_PER_ROW_READ
        if work is not None and work < least:
            how = "a block read" if blocks else "W loads (its rows may be strided)" if not contiguous \
                else "W loads (it reads its rows at indices that differ between lanes)"
            return Choice(None, f"{why}, but its loop does {work:g} operation(s) per row element it reads "
                                f"(< {least}): {how} per vector step would cost more than the lanes' "
                                "arithmetic gains")
    return None


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


def make_plan(program, call, result, lane, stream: bool = True) -> Plan:
    """Transform the lane for this program's parameters and results."""
    sig = program.signature
    inner = _inner_level(program)
    fdef = function_ast(lane)
    names = [a.arg for a in fdef.args.args]
    kinds, leaves = ["default"] * len(names), [None] * len(names)
    for k, param in enumerate(sig.params):
        index = k if param.keyword is None else (names.index(param.keyword) if param.keyword in names else None)
        if index is None or index >= len(names):
            raise Unsupported(f"the argument {param.keyword or k} (it does not name a parameter)")
        if not param.tree.is_leaf():
            kinds[index], leaves[index] = "tuple", _scalar_tuple_leaves(sig, param, inner)
            continue
        leaf = sig.leaves[param.first_leaf]
        if leaf.dtype.kind not in "biuf":
            raise Unsupported(f"the {leaf.dtype} argument {leaf.name}")
        if leaf.is_array and leaf.lane_ndim:
            kinds[index] = _row_kind(leaf, inner)
        else:
            varying = leaf.is_array and leaf.axes[inner] is not None
            kinds[index] = "varying" if varying else "uniform"
        leaves[index] = param.first_leaf
    flat = _result_leaves(result)
    if not flat or len(flat) != len(program.outputs):
        raise Unsupported("a lane without a result, or with None in its result")
    results = []
    for out, (path, leaf) in zip(program.outputs, flat):
        if leaf.ndim or out.lane_ndim:
            raise Unsupported(f"the per-lane array output {out.name}")
        if np.dtype(leaf.dtype).kind not in "biuf":
            raise Unsupported(f"the {leaf.dtype} output {out.name}")
        results.append((tuple(path), np.dtype(leaf.dtype).name))
    itemsizes = [np.dtype(d).itemsize for _, d in results]
    itemsizes += [sig.leaves[leaves[i]].dtype.itemsize for i, k in enumerate(kinds)
                  if k in ("varying", "row", "table")]
    varying_dtypes = tuple(sig.leaves[leaves[i]].element_dtype.name for i, k in enumerate(kinds) if k == "varying")
    row_dtypes = tuple(sig.leaves[leaves[i]].dtype.name for i, k in enumerate(kinds) if k == "row")
    table_dtypes = {names[i]: sig.leaves[leaves[i]].dtype.name for i, k in enumerate(kinds) if k == "table"}
    gathered = gathers_tables(lane, kinds)
    width = width_for(max(itemsizes), rows=bool(row_dtypes) or gathered)
    # Rows and tables run in groups only: every lane of a group shares the row
    # length, and the streamed form would have to refill pointers slot by slot.
    if stream and STREAMING and any(k == "varying" for k in kinds) and not row_dtypes and not table_dtypes \
            and "tuple" not in kinds:
        try:
            body = transform_stream(lane, tuple(kinds), varying_dtypes, tuple(results), width, refill(width))
            return Plan(width, tuple(kinds), tuple(leaves), tuple(results), module_text(body), True)
        except Unsupported:
            pass  # not of the form prologue; loop; epilogue: groups of W lanes
    tuple_sizes = {names[i]: len(leaves[i]) for i, k in enumerate(kinds) if k == "tuple"}
    body = transform(lane, tuple(kinds), tuple(results), width, row_dtypes=row_dtypes,
                     row_blocks=row_blocks(sig, kinds, leaves), table_dtypes=table_dtypes, tuple_sizes=tuple_sizes)
    return Plan(width, tuple(kinds), tuple(leaves), tuple(results), module_text(body), gathered=gathered)


def _scalar_tuple_leaves(sig, param, inner: int) -> tuple:
    """The leaves of a tuple argument the SPMD path takes: a flat tuple of scalars,
    the same for every lane of the innermost level (an lw.random key, constants)."""
    import optree

    tree = param.tree
    if tree.kind != optree.PyTreeKind.TUPLE or tree.num_leaves != tree.num_children or not tree.num_leaves:
        raise Unsupported(f"the argument {param.keyword or param.first_leaf}: a {tree} (the SPMD path takes "
                          "scalars, 1-D rows and flat tuples of scalars)")
    out = tuple(range(param.first_leaf, param.first_leaf + tree.num_leaves))
    for j in out:
        leaf = sig.leaves[j]
        if leaf.dtype.kind not in "biuf" or (leaf.is_array and (leaf.lane_ndim or leaf.axes[inner] is not None)):
            raise Unsupported(f"the tuple argument holding {leaf.name} (only tuples of scalars passed whole)")
    return out


def _row_kind(leaf, inner: int) -> str:
    """``"row"`` for an array argument whose lanes each receive their own 1-D view
    along the innermost level, ``"table"`` for the same 1-D array shared by the
    level's lanes (passed whole or mapped at outer levels only: coefficients,
    sources, sample times: one data pointer, see :func:`.rows.v_table`), else refused."""
    if leaf.lane_ndim != 1:
        raise Unsupported(f"the array argument {leaf.name}: its lanes receive {leaf.lane_ndim}-D views "
                          "(only 1-D rows are supported)")
    if leaf.dtype.kind not in "iuf":
        raise Unsupported(f"the {leaf.dtype} array argument {leaf.name} (rows of integers or floats only)")
    return "table" if leaf.axes[inner] is None else "row"


def gathers_tables(lane, kinds) -> bool:
    """Whether the lane reads a table at an index that differs between lanes (a
    gather: W scalar loads, which cap W as rows do; :func:`width_for`)."""
    if "table" not in kinds:
        return False
    return not _uniform_reads_of(lane, kinds, "table")


def row_blocks(sig, kinds, leaves) -> tuple:
    """Per ``"row"`` parameter, whether its rows are contiguous, so that a read at
    a uniform index goes through a block (:func:`.rows.v_row`, which checks the
    stride again at run time): True when the row axis is the last of a C array or
    the first of an F array, None for an "A" array (either; ``x[::2]`` has
    contiguous rows, ``x[:, ::2]`` not), else False."""
    out = []
    for kind, leaf_index in zip(kinds, leaves, strict=True):
        if kind == "row":
            leaf = sig.leaves[leaf_index]
            axis = (set(range(leaf.ndim)) - {a for a in leaf.axes if a is not None}).pop()
            out.append(None if leaf.layout == "A" else axis == (leaf.ndim - 1 if leaf.layout == "C" else 0))
    return tuple(out)


def block_reads(lane, kinds) -> bool:
    """Whether the lane reads its rows only at uniform indices (block reads)."""
    return _uniform_reads_of(lane, kinds, "row")


def _uniform_reads_of(lane, kinds, kind: str) -> bool:
    """Whether the lane reads its parameters of ``kind`` ("row" or "table") only at
    uniform indices."""
    fdef = Desugar(lane).visit(copy.deepcopy(function_ast(lane)))
    names = [a.arg for a in fdef.args.args]
    pick = {n for n, k in zip(names, kinds) if k in ("uniform", "default")}
    arrays = {n for n, k in zip(names, kinds) if k in ("row", "table")}
    return uniform_reads(fdef, pick, arrays, {n for n, k in zip(names, kinds) if k == kind})


def refill(width: int) -> int:
    """Free slots that trigger a refill of a streamed lane: refilling costs a pass
    over the slots, so it waits until a quarter of them are free."""
    return max(1, width // 4)


def _inner_level(program) -> int:
    from ..plan.schedule import loop_order

    return loop_order(program)[-1]


def _result_leaves(result, path=()):
    from ..plan.program import ResultLeaf

    if result is None:
        return [(path, None)] if path else []
    if isinstance(result, ResultLeaf):
        return [(path, result)]
    out = []
    for i, child in enumerate(result.children):
        sub = _result_leaves(child, path + (i,))
        if any(leaf is None for _, leaf in sub):
            raise Unsupported("None in the lane's result")
        out += sub
    if result.cls is not None:
        raise Unsupported(f"the {result.cls.__name__} result (return a plain tuple)")
    return out


#: Options of the W-wide lane, which only the kernels call (never Python): no
#: wrappers for calls from Python or as a C function, which took 15% of its IR
#: and 0.1 s of an SPMD lane's cold first call.  Calling it from Python crashes.
LINK_ONLY = ", no_cpython_wrapper=True, no_cfunc_wrapper=True"


def module_text(body: str) -> str:
    """The part of a generated kernel module that defines the W-wide lane."""
    jit = f'numba.njit(error_model="numpy", nogil=True, cache=True{LINK_ONLY})'
    return "\n".join([
        "import math",
        "import numpy as np",
        "from lanewise import lanemath",
        f"from lanewise.spmd.vector import ({', '.join(RUNTIME)})",
        *([f"from lanewise.spmd.rows import ({', '.join(ROW_RUNTIME)},)"]
          if any(f"{name}(" in body for name in ROW_RUNTIME) else []),
        *(["from lanewise.spmd.failure import m_raise"] if "m_raise(" in body else []),
        *[f"from {module.rpartition('.')[0]} import {module.rpartition('.')[2]} as {alias}"
          for module, alias in TWIN_MODULES.items() if f"{alias}." in body],
        "",
        "",
        f"@{jit}",
        body.rstrip("\n"),
    ])


def argument_types(plan: Plan, program, call, context: tuple | None = None) -> tuple:
    """Numba types of the W-wide lane's arguments for this call (for ``lane_stream``:
    ``context``, the types of the kernel's ``_lw_ctx``, or a stand-in context of
    1-D arrays, see :func:`check_compiled`)."""
    import numba
    from numba.core import types as nt

    sig = program.signature
    uniform, varying = [], []
    for kind, leaf_index in zip(plan.kinds, plan.leaves):
        if kind in ("default", "row", "table"):  # rows and tables: see below
            continue
        if kind == "tuple":
            uniform += [numba.typeof(call.values[j]) for j in leaf_index]
            continue
        leaf = sig.leaves[leaf_index]
        dtype = numba.from_dtype(leaf.element_dtype)
        if kind == "varying":
            varying.append(nt.Array(dtype, 1, "C"))
        elif leaf.is_array:
            uniform.append(dtype)
        else:
            uniform.append(numba.typeof(call.values[leaf_index]))
    outs = [nt.Array(numba.from_dtype(np.dtype(d)), 1, "C") for _, d in plan.results]
    if plan.stream:
        return (nt.Tuple(list(context) if context is not None else varying + outs), nt.int64, nt.int64, *uniform)
    params = iter(varying)
    args = [nt.Array(nt.boolean, 1, "C")]
    for kind, leaf_index in zip(plan.kinds, plan.leaves):
        if kind == "row":  # data pointers, length, stride (bytes)
            args += [nt.Array(nt.uint64, 1, "C"), nt.int64, nt.int64]
        elif kind == "table":  # one data pointer, length, stride (bytes)
            args += [nt.uint64, nt.int64, nt.int64]
        elif kind == "varying":
            args.append(next(params))
        elif kind == "uniform":
            args.append(uniform.pop(0))
        elif kind == "tuple":
            args += [uniform.pop(0) for _ in leaf_index]
    return (*args, *outs)


def _stand_ins(plan: Plan) -> str:
    """``_lw_load``/``_lw_store`` over a context of 1-D arrays (the kernel module's
    own read the lanes' leaves and write the outputs)."""
    nv = sum(k == "varying" for k in plan.kinds)
    values = [f"v{j}" for j in range(len(plan.results))]
    return "\n".join([
        "@numba.njit",
        "def _lw_load(ctx, i):",
        f"    return ({''.join(f'ctx[{k}][i], ' for k in range(nv))})",
        "@numba.njit",
        f"def _lw_store(ctx, i, {', '.join(values)}):",
        *[f"    ctx[{nv + j}][i] = {v}" for j, v in enumerate(values)],
        ""])


_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def _numba_reason(error) -> str:
    """The telling lines of a Numba compile error: its first statement and the
    call it could not type, without colour codes and the "During:" trail."""
    lines = [line.strip() for line in _ANSI.sub("", str(error)).splitlines()]
    keep = [line for line in lines if line and not line.startswith(("During:", "Failed in ", "File ", "^"))]
    call = next((line for line in keep if line.startswith(">>>")), "")
    head = next((line for line in keep if not line.startswith(">>>")), str(error))
    return f"{head} {call}".strip()


def check_compiled(plan: Plan, program, call, module: str | None = None, io: StreamIO | None = None):
    """Compile the W-wide lane once and check it cannot raise or allocate; return
    its dispatcher (compiled for this call's argument types).

    With ``module`` (the kernel module's name, disk cache on), the lane is
    compiled as a function of that module, registered under its name until the
    module itself is loaded: the kernel then links this compile instead of
    compiling its own copy, and Numba's disk cache, which records a linked
    function's module by name, finds the kernel module when it reloads.  A
    streamed lane is compiled with the kernel's ``io`` (so calling it from the
    kernel reads and writes what the kernel's own copy would, whatever types it
    is called with), else with stand-ins that only a check may use."""
    home = types.ModuleType(module or "lanewise._spmd_check")
    feed = (io.source if io is not None else _stand_ins(plan)) if plan.stream else ""
    source = "import numba\n" + feed + "\n" + plan.source
    exec(compile(source.replace(", cache=True", ""), "<lanewise spmd check>", "exec"), home.__dict__)
    if module is not None and (not plan.stream or io is not None):
        sys.modules.setdefault(module, home)
    dispatcher = home.__dict__[STREAM if plan.stream else FUNCTION]
    argtypes = argument_types(plan, program, call, io.context if io is not None else None)
    try:
        dispatcher.compile(argtypes)
    except Exception as e:  # noqa: BLE001 - any rejection: the lane keeps the scalar path
        raise Unsupported(f"a construct Numba rejects in the W-wide form: {_numba_reason(e)}") from None
    llvm = dispatcher.inspect_llvm(argtypes)
    for body in _numba_functions(llvm):
        # "store ptr null" clears the slot a call to a compiled function (lw.random's
        # twins) reports through: no exception; a callee's exception is propagated
        # with a store of its pointer, which is refused.
        if any(not _is_replayed_error(store, llvm) for store in re.findall(r"store [^\n]*, ptr %excinfo", body)
               if not store.startswith("store ptr null,")):
            raise Unsupported("an operation that may raise inside the W-wide lane")
        if "NRT_MemInfo_alloc" in body or "NRT_Allocate" in body:
            raise Unsupported("an allocation inside the W-wide lane")
    return dispatcher


def _is_replayed_error(store: str, llvm: str) -> bool:
    """Whether an exception store of the W-wide lane raises a row read's bounds
    error (:data:`.rows.OUT_OF_BOUNDS`) or a lane's ``raise``/``assert``
    (:data:`.failure.LANE_RAISED`): the exceptions it may raise, since the host
    replays the failed group's lanes on the scalar path for the exception Python
    raises."""
    buf = re.match(r"store ptr (@\.const\.picklebuf\.\w+), ptr %excinfo", store)
    if buf is None:
        return False
    data = buf.group(1).replace("picklebuf", "pickledata")
    return any(re.search(re.escape(data) + r" = [^\n]*" + re.escape(text), llvm) is not None
               for text in (OUT_OF_BOUNDS, LANE_RAISED))


#: Mangled-name marks of lanewise's own vector math: its rare slow paths (trig
#: arguments beyond 2**30) hold exception branches that no input reaches.
_TRUSTED = ("8lanewise8lanemath",)


def _numba_functions(llvm: str) -> list[str]:
    """Bodies of the functions of a module that follow Numba's calling convention
    (they take ``%excinfo``, where a raised exception would be stored), except
    lanewise's vector math."""
    out = []
    for chunk in llvm.split("\ndefine ")[1:]:
        head, _, body = chunk.partition("\n")
        if "%excinfo" in head and not any(mark in head for mark in _TRUSTED):
            out.append(body.split("\n}\n", 1)[0])
    return out


__all__ = ["Choice", "Plan", "StreamIO", "Unsupported", "cache_key", "choose", "divergence", "refill",
           "registers_per_value", "transform", "transform_stream", "vector_bits", "width_for"]
