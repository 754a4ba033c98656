"""Loop versioning: one range test at loop entry instead of a bounds check per read.

Every subscript in a compiled lane is bounds-checked (lanefn.JIT_OPTIONS).  In a
loop ``for k in range(a, b)`` that reads ``w[k]`` or ``w[k + c]`` the check is
the same question each iteration, answerable once: are ``a + c`` and
``b - 1 + c`` inside ``w``?  This pass copies such a loop::

    if not (_lw_within(w, a, b, 0, 1) and _lw_within(idx, a, b, 0, 1)):
        for k in range(a, b):
            s += w[k] * x[idx[k]]                       # the user's loop, checked
    else:
        for k in range(a, b):
            s += _lw_get(w, k) * x[_lw_get(idx, k)]     # unchecked loads

Data-dependent reads (``x[idx[k]]``) and stores stay checked in both copies; a
range that would read outside an array (or wrap around: a negative start) runs
the checked copy, so errors are exactly the user's.  Both copies are the same
``for`` over the same range, so ``k`` after the loop, ``break``, ``continue``
and ``return`` behave as written.  Only innermost loops with a positive literal
step are versioned, and only when ``k``, the arrays and the offsets are not
assigned in the body; anything else is left as it is.  The pass changes the lane's
IR (lane.ir); the rewritten lane is printed and compiled as the user's code, at the
user's lines (lane.ir.render.compile_code).

W7 (10^6 nodes, 1.6*10^7 edges, ``s += w[k] * x[indices[k]]``): 41 instructions
per edge in the inner loop before, 22 after; 115 -> 92 ms on one thread, 58 -> 45
ms on two, where Numba's ``prange`` takes 99 and 50 ms without checks (121 and 60
with); a max-gather likewise (112 -> 91 ms, 58 -> 46 ms).  A versioned lane is
LLVM-inlined into the kernel (lanefn._jitted_clone).  :data:`VERSIONING` off
restores the checked loops.

Example:
    >>> def total(start, stop, w):
    ...     s = 0.0
    ...     for k in range(start, stop):
    ...         s += w[k]
    ...     return s
    >>> from lanewise.lane.ir.render import render
    >>> print(render(versioned(total)), end="")
    def total(start, stop, w):
        s = 0.0
        if not _lw_within(w, start, stop, 0, 1):
            for k in range(start, stop):
                s += w[k]
        else:
            for k in range(start, stop):
                s += _lw_get(w, k)
        return s
"""

from __future__ import annotations

import operator
import types
import weakref
from dataclasses import replace
from typing import NamedTuple

from llvmlite import ir as llvm
from numba.core import cgutils
from numba.core import types as nbtypes
from numba.extending import intrinsic
from numba.np.arrayobj import load_item

from . import closures, prefetch
from . import indexing
from . import unbound as unbound_check
from .ir.passes import unbound
from ..errors import LaneCompileError, function_location
from .ir import nodes as ir
from .ir.build import function_ir
from .ir.render import compile_code
from .ir.passes.walk import mapped, stored, walk
from .prefetch import array_name, each_loop, loads, prefetch_loops, range_step

#: Whether lanes' loops are versioned (off: every read checked, as before; for
#: measuring the difference).  Read when a function is first compiled: it is not
#: part of the cache keys, so set it before the lanes it should apply to run.
VERSIONING = True

_I128 = llvm.IntType(128)


# --------------------------------------------------------------------------- intrinsics


@intrinsic
def _lw_within(typingctx, a, start, stop, shift, sign):
    """Whether every ``k + sign * shift`` for ``k`` in ``range(start, stop)`` indexes
    1-D array ``a`` without wrapping around (``0 <= i < len(a)``); True for an empty
    range.  Computed in 128 bits: no overflow, and no float promotion of a uint64
    mixed with a signed integer.  A constant False for anything else (other types,
    ``start``/``stop`` of mixed signedness, which Numba's ``range`` reinterprets)."""
    sig = nbtypes.boolean(a, start, stop, shift, sign)
    ints = (start, stop, shift, sign)
    if not (isinstance(a, nbtypes.Array) and a.ndim == 1 and all(isinstance(t, nbtypes.Integer) for t in ints)
            and start.signed == stop.signed):
        return sig, lambda context, builder, s, args: context.get_constant(nbtypes.boolean, False)

    def codegen(context, builder, s, args):
        lo, hi, by, times = (_wide(builder, v, t) for v, t in zip(args[1:], ints, strict=True))
        n = _wide(builder, cgutils.unpack_tuple(builder, context.make_array(a)(context, builder, args[0]).shape)[0],
                  nbtypes.intp)
        off = builder.mul(by, times)
        empty = builder.icmp_signed(">=", lo, hi)
        first_ok = builder.icmp_signed(">=", builder.add(lo, off), llvm.Constant(_I128, 0))
        last_ok = builder.icmp_signed("<=", builder.add(hi, off), n)
        return builder.or_(empty, builder.and_(first_ok, last_ok))

    return sig, codegen


def _wide(builder, value, ty):
    """``value`` of integer type ``ty`` as an exact 128-bit integer."""
    return builder.sext(value, _I128) if ty.signed else builder.zext(value, _I128)


@intrinsic
def _lw_get(typingctx, a, i):
    """``a[i]`` without the bounds check, for a 1-D array of scalars (any layout: the
    caller, :func:`_lw_within`, proved ``0 <= i < len(a)``); anything else is the
    ordinary ``a[i]``, checked as the lane is."""
    if isinstance(a, nbtypes.Array) and a.ndim == 1 and isinstance(a.dtype, (nbtypes.Number, nbtypes.Boolean)) \
            and isinstance(i, nbtypes.Integer):
        def load(context, builder, s, args):
            arr = context.make_array(a)(context, builder, args[0])
            j = context.cast(builder, args[1], i, nbtypes.intp)
            ptr = cgutils.get_item_pointer2(context, builder, arr.data, cgutils.unpack_tuple(builder, arr.shape),
                                            cgutils.unpack_tuple(builder, arr.strides), a.layout, [j])
            return load_item(context, builder, a, ptr)

        return a.dtype(a, i), load
    # Reached only in the copy a False _lw_within never runs, but typed all the same.
    sig = typingctx.resolve_function_type(operator.getitem, (a, i), {})
    if sig is None:
        return None

    def getitem(context, builder, s, args):
        values = [context.cast(builder, v, t, want) for v, t, want in zip(args, (a, i), sig.args, strict=True)]
        return context.get_function(operator.getitem, sig)(builder, values)

    return sig.return_type(a, i), getitem


#: The globals a rewritten lane needs: the intrinsics under the names the rewrites call.
GLOBALS = {**prefetch.GLOBALS, **closures.GLOBALS, **unbound_check.GLOBALS, **indexing.GLOBALS,
           "_lw_within": _lw_within, "_lw_get": _lw_get}


# --------------------------------------------------------------------------- the pass


def versioned(fn) -> ir.Function | None:
    """The IR of ``fn`` with its affine reads versioned, or None when no loop
    qualifies (or there is no source text to rewrite)."""
    lane = function_ir(fn)
    if lane.source != "source":
        return None
    lane, count = version_loops(lane)
    return lane if count else None


def version_loops(fn: ir.Function) -> tuple[ir.Function, int]:
    """``fn`` with every innermost ``for k in range(...)`` loop (positive literal step)
    that reads ``a[k]``, ``a[k + c]`` or ``a[k - c]`` versioned (module docstring), and
    how many loops were."""
    count = 0

    def change(loop: ir.Loop) -> list:
        nonlocal count
        if not (range_step(loop) or 0) > 0 or any(isinstance(n, _UNSURE) for n in walk(loop.body)):
            return [loop]
        k, assigned = loop.target.name, stored(walk(loop.body), False)
        if k in assigned:
            return [loop]
        reads: dict = {}  # (array, sign, shift) -> guard operands, in source order (dicts keep it)
        affine = {}
        for read in sorted(loads(loop.body), key=lambda n: (n.loc.line, n.loc.col)):
            found = _affine_read(read, k, assigned)
            if found is not None:
                affine[id(read)] = read
                reads.setdefault((array_name(found[0]), *found[1:]), found)
        if not reads:
            return [loop]
        count += 1
        hoisted, bounds = _hoisted_bounds(loop, count)
        guards = [ir.Prim("_lw_within", (array, *bounds, ir.Const(0, "int") if shift is None else shift,
                                         ir.Const(sign, "int")), loop.loc) for array, sign, shift in reads.values()]
        test = guards[0] if len(guards) == 1 else ir.Prim("and", tuple(guards), loop.loc)
        fast = _unchecked(loop.body, affine)
        # The user's loop first: Numba reports the first typing error in code order,
        # so a subscript that does not type (x[k] of a float) reads as it did.
        branches = ir.If(ir.Prim("not", (test,), loop.loc, type="bool"), (_over(loop, bounds, loop.body),),
                         (_over(loop, bounds, fast),), loop.loc)
        return [*hoisted, branches]

    return replace(fn, body=each_loop(fn.body, change)), count


#: IR nodes a versioned loop's body may not hold (scopes of their own, other loops: only
#: innermost loops are versioned; constructs the IR does not model).
_UNSURE = (ir.Loop, ir.Def, ir.Lambda, ir.Comp, ir.Try, ir.Unsupported)


def _affine_read(read: ir.Prim, k: str, assigned: set):
    """``(array, sign, shift)`` when ``read`` is ``array[k]`` (shift None),
    ``array[k + c]``/``array[c + k]`` (sign 1) or ``array[k - c]`` (sign -1), ``c`` an
    int literal or a name the loop does not assign; else None."""
    array, index = read.args
    name = array_name(array)
    if name is None or name == k or name in assigned:
        return None
    if index == ir.Var(k):
        return array, 1, None
    if not (isinstance(index, ir.Prim) and index.op in ("add", "sub") and len(index.args) == 2
            and not index.params and not index.keywords):
        return None
    left, right = index.args
    if index.op == "add" and right == ir.Var(k):
        left, right = right, left  # c + k
    if not (left == ir.Var(k) and _invariant(right, k, assigned)):
        return None
    return array, 1 if index.op == "add" else -1, right


def _invariant(e, k: str, assigned: set) -> bool:
    """An int literal, or a name other than ``k`` that the loop does not assign."""
    if isinstance(e, ir.Const):
        return type(e.value) is int
    name = array_name(e)
    return name is not None and name != k and name not in assigned


def _hoisted_bounds(loop: ir.Loop, count: int) -> tuple[list, list]:
    """``range``'s start and stop as names or literals, read by the guard and the
    loop: an expression (``indptr[i + 1]``, a call that draws random numbers) is
    assigned to a name first, so it is evaluated once, as in the user's loop."""
    args = loop.iter.args
    bounds = [ir.Const(0, "int"), args[0]] if len(args) == 1 else list(args[:2])
    hoisted = []
    for i, bound in enumerate(bounds):
        if not (isinstance(bound, ir.Const) or array_name(bound) is not None):
            name = ir.Var(f"_lw_{'stop' if i else 'start'}{count}")
            hoisted.append(ir.Assign(name, bound, loop.loc))
            bounds[i] = name
    return hoisted, bounds


def _over(loop: ir.Loop, bounds: list, body: tuple) -> ir.Loop:
    """``loop`` over the (hoisted) bounds with ``body``; its place is the user's."""
    kept = bounds[1:] if len(loop.iter.args) == 1 else bounds  # range(stop) stays range(stop)
    return replace(loop, iter=replace(loop.iter, args=(*kept, *loop.iter.args[2:])), body=body)


def _unchecked(body: tuple, affine: dict) -> tuple:
    """``body`` with the reads in ``affine`` (by id) as ``_lw_get(a, k + c)``."""
    return mapped(body, lambda n: ir.Prim("_lw_get", n.args, n.loc) if id(n) in affine else None)


class Rewrite(NamedTuple):
    """A lane's code after prefetching and versioning; ``versioned``: whether any
    loop was versioned (the lane then has two copies of it: lanefn inlines it);
    ``globals``: names the code reads that the lane's globals must gain (helpers the
    text calls by another name than the lane wrote, modules: render.compile_code)."""

    code: types.CodeType
    versioned: bool
    globals: dict


_done: "weakref.WeakKeyDictionary[types.FunctionType, dict]" = weakref.WeakKeyDictionary()


def rewritten(fn: types.FunctionType) -> Rewrite | None:
    """``fn``'s code with its closure scan steps lifted (lane.closures), prefetches
    (lane.prefetch), then versioned loops, or None when none applies; cached per
    function (and :data:`VERSIONING` setting)."""
    per_setting = _done.setdefault(fn, {})
    if VERSIONING not in per_setting:
        per_setting[VERSIONING] = _rewrite(fn, VERSIONING)
    return per_setting[VERSIONING]


def checked_for_gpu(fn: types.FunctionType) -> Rewrite | None:
    """``fn``'s code for a GPU kernel, or None when nothing in it needs checking: its reads
    of locals that may be unbound checked (lane.ir.passes.unbound) and its subscripts at
    computed indices checked against the row's length (lane.indexing), none of the CPU's
    prefetching or versioning.  A failing check fails the lane, which the host replays on
    the CPU to raise the error."""
    per_setting = _done.setdefault(fn, {})
    if "gpu" not in per_setting:
        per_setting["gpu"] = _checked_for_gpu(fn)
    return per_setting["gpu"]


def _checked_for_gpu(fn: types.FunctionType) -> Rewrite | None:
    lane = function_ir(fn)
    if fn.__code__.co_name == "<lambda>":
        return None
    checked = indexing.checked_indexing(unbound.checked(lane))
    if checked is lane:
        return None
    rewrite = _compiled(checked, fn, versioned=False)
    if rewrite is None and lane.source != "source" and unbound.has_checks(checked):
        raise _uncheckable(fn)
    return rewrite


def _uncheckable(fn: types.FunctionType) -> LaneCompileError:
    return LaneCompileError(f"{fn.__qualname__} ({function_location(fn)}) has no source text and reads a local "
                            "some paths may leave unbound, and its rebuilt text cannot be compiled with the check; "
                            "bind the local on every path, or define the lane in a file")


def _rewrite(fn: types.FunctionType, versioning: bool) -> Rewrite | None:
    lane = function_ir(fn)  # built already by the checks lanefn runs first
    if fn.__code__.co_name == "<lambda>":
        return None  # no statements to rewrite
    if lane.source != "source":
        # no text the user wrote: the lane is compiled from its bytecode, unless a read
        # may be unbound (Numba would read a zero): then its rebuilt def, checked
        checked = unbound.checked(lane)
        if checked is lane:
            return None
        rewrite = _compiled(checked, fn, versioned=False)
        if rewrite is None:
            raise _uncheckable(fn)
        return rewrite
    lane, lifted = closures.lift_ir(lane)
    checked = unbound.checked(lane)  # reads of locals that may be unbound: checked as Python checks them
    lane, checks = checked, checked is not lane
    lane, prefetches = prefetch_loops(lane)  # first: both copies of a versioned loop prefetch
    lane, versions = version_loops(lane) if versioning else (lane, 0)
    if not (lifted or checks or prefetches or versions):
        return None
    return _compiled(lane, fn, versions > 0)


def _compiled(lane, fn: types.FunctionType, versioned: bool) -> Rewrite | None:
    """The rewritten ``lane`` of ``fn`` compiled, or None where the IR cannot print it back."""
    functions = {p.op.removeprefix("call:"): ir.called(p) for p in walk(lane)
                 if isinstance(p, ir.Prim) and p.op.startswith("call:")}  # the helpers each call: names
    try:
        code, more = compile_code(lane, fn, functions)
    except LaneCompileError:  # a construct the IR cannot print back: the lane is compiled as written
        return None
    return Rewrite(code, versioned, more)


def closure_for(code: types.CodeType, fn: types.FunctionType):
    """``fn``'s closure cells in the order ``code`` names its free variables."""
    if not code.co_freevars:
        return None
    cells = dict(zip(fn.__code__.co_freevars, fn.__closure__ or (), strict=True))
    return tuple(cells[name] for name in code.co_freevars)
