"""A lane's IR lowered to JAX on one tile of lanes, SPMD style.

:func:`lower` reads the lane IR (:mod:`lanewise.lane.ir`) and gives a function of
tile values (every lane argument as a tile of lanes) that, traced inside the
Pallas kernel, emits the JAX operations of every lane of the tile at once:

* a value is a tile (or a Python scalar, weakly typed as JAX types it); a local
  holds one value per lane;
* ``live``: the lanes executing the current statement.  A store writes only them
  (``where(live, new, old)``); ``if``/``elif``/``else`` runs both branches under
  ``live & cond`` and ``live & ~cond`` and merges with ``where(cond, ...)``;
* ``break``, ``continue`` and ``return`` take lanes out of ``live``; a ``return``
  writes the function's result for its lanes and marks them returned;
* ``while`` and ``for ... in range`` become one ``lax.while_loop`` whose condition is
  "some lane of this tile is still active": a tile leaves its loop as soon as all
  of *its* lanes are done (per-tile early exit), and lanes that are not (yet)
  done carry their values unchanged;
* helpers (``call:<name>``) are inlined under the caller's ``live``;
* primitives are applied through the primitive table's ``"tpu"`` rules
  (:mod:`.ops`); a primitive without one raises the table's own error, and
  constructs outside this slice raise a LaneCompileError naming the user's line.

Example:
    >>> import jax.numpy as jnp
    >>> def lane(x):
    ...     return x * 2 if x > 0 else -x
    >>> tile = lower(lane)
    >>> results, structure, iterations = tile(jnp.ones(2, bool), jnp.asarray([1.5, -3.0]))
    >>> [float(v) for v in results[0]]
    [3.0, 3.0]
"""

from __future__ import annotations

import builtins
import math
import sys
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np
import optree

from ... import primitives
from ...lane.ir.lines import user_line
from ...errors import LaneCompileError, LaneTypeError
from ...lane.ir import nodes as ir
from ...lane.ir.build import build_with_functions
from ...lane.ir.carried import exposed
from ...lane.ir.passes import unbound
from ...lane.ir.passes.reach import falls_through
from ...lane.ir.passes.walk import walk
from . import autodiff as lanes_autodiff
from . import bounds as _bounds
from . import literals
from .literals import OPERATORS
from . import random as lanes_random
from . import rows as _rows
from .carry import Carry
from .ops import FLOAT_RESULT, INT_RESULT, lowering
from .ops import where as lanes_where
from .placeholders import placeholders

#: Module names a Global's dotted name starts with (the IR writes numpy as np).
_MODULES = {"np": np, "math": math}
#: Python's scalar types as the TPU computes them (JAX's 32-bit rules).
_SCALARS = (bool, int, float, np.bool_, np.integer, np.floating)


def where(loc: ir.Loc) -> str:
    """The user's ``file:line`` of a node (of the user's statement behind a line of a lane
    lanewise's autodiff derived)."""
    return user_line(loc)


def refuse(what: str, loc: ir.Loc) -> LaneCompileError:
    """The error of a construct this backend does not lower."""
    return LaneCompileError(f"{what} is not supported on the tpu backend ({where(loc)})")


#: How loops are lowered for Mosaic (the TPU compiler); the device probe
#: (benchmarks/device/tpu_probe.py) measures which forms compile.  ``int_masks``: masks
#: and bool locals cross a loop boundary as int32 (Mosaic cannot yield i1 vectors);
#: ``scalar_counter``: a range loop counts its iterations in one int32 scalar (the same
#: for every lane of a tile) instead of a tile; ``materialise``: a carried tile made
#: from a constant is computed from the tile's lanes (a splat has a layout Mosaic
#: cannot yield).  ``LANEWISE_TPU_LOWERING="int_masks=0,materialise=0"`` overrides them.
LOWERING = {"int_masks": True, "scalar_counter": True, "materialise": True}


def _lowering() -> dict:
    import os

    options = dict(LOWERING)
    for item in filter(None, os.environ.get("LANEWISE_TPU_LOWERING", "").split(",")):
        key, _, value = item.partition("=")
        options[key.strip()] = value.strip() not in ("0", "false", "")
    return options


def has_loops(lane) -> bool:
    """Whether ``lane`` or a helper it calls has a loop: without one no lane of a tile
    waits for another, so the kernel may take bigger tiles (``lw.config.tpu_block``).

    Example:
        >>> has_loops(lambda x: x + 1), has_loops(lambda n: sum(i for i in range(n)))
        (False, True)
    """
    module, _ = build_with_functions(lane)
    kinds = (ir.Loop, ir.Comp)
    return any(isinstance(n, kinds) or isinstance(n, ir.Prim) and n.op == "lw.scan"
               for f in module.functions() for n in walk(f.body))


def lower(lane, count_iterations: bool = False, unroll: int = 1, params: tuple | None = None):
    """The tile function of ``lane``: ``tile(valid, *args) -> (results, structure, iterations)``.

    ``valid``: the tile's real lanes (padding lanes are never active in a loop);
    ``args``: one value per lane parameter, or with ``params`` (the pytree structure
    of each positional parameter) one per argument leaf, regrouped into the
    parameters' tuples; ``results``: the tuple of result leaves
    (a lane returning one value gives a 1-tuple); ``structure``: their JAX tree;
    ``iterations``: with ``count_iterations``, how many loop iterations the tile ran
    (an int32 scalar, summed over its loops), else None.  ``unroll``: loop
    iterations per check of "some lane of the tile is still active" (the check is a
    reduction over the tile; iterations after a tile's last lane is done change
    nothing, since no lane is live in them, but they are counted)."""
    module, _ = build_with_functions(lane)
    functions = {f.name: f for f in module.functions()}
    options = _lowering()

    def tile(valid, *args, sinks=None, checks=None):
        lowering = _Lowering(functions, valid, count_iterations, max(1, int(unroll)), options)
        lowering.sinks = sinks  # the kernel's row outputs, where scans write their stacked ys (rows.Stacked)
        lowering.checks = checks  # where row reads out of range are told (.bounds), or None
        if params is not None:
            leaves, args = list(args), []
            for tree in params:
                args.append(optree.tree_unflatten(tree, leaves[:tree.num_leaves]))
                del leaves[:tree.num_leaves]
        result = lowering.call(module.entry, list(args), valid, module.entry.loc)
        leaves, tree = jax.tree.flatten(result)
        if any(isinstance(v, _rows.Row) for v in leaves):
            raise refuse("returning a row (a per-lane array result)", module.entry.loc)
        return tuple(leaves), tree, lowering.iterations

    return tile


@dataclass
class _Frame:
    """One function being inlined: its result so far and the lanes that returned."""

    result: object = None
    returned: object = None


@dataclass
class _State:
    """Where the lowering stands in one function: its locals, the live lanes, the
    enclosing loop (None outside a loop).

    ``full``: every lane outside ``live`` is dead here -- it returned, is padding, or
    sits in the other branch of an ``if`` (whose merge selects by the condition) --
    so a store need not keep the other lanes' values (no select).  A lane that
    ``break``, ``continue`` or leaves a loop by a condition of its own is not
    dead (its locals are read later): ``full`` is False from there on."""

    function: ir.Function
    env: dict
    live: object
    frame: _Frame
    loop: "_Loop | None" = None
    full: bool = True
    #: locals whose value is the same in every live lane of the tile, as int32 scalars (a range
    #: loop's counter, whatever ``env`` holds after a select): a row's index read as one plane
    uniform: dict | None = None

    def branch(self, live) -> "_State":
        return _State(self.function, dict(self.env), live, self.frame, self.loop, self.full, dict(self.uniform or {}))


@dataclass
class _Loop:
    """The innermost loop being lowered: the lanes that left it by ``break`` and those
    waiting for its next iteration after ``continue`` (None: no lane)."""

    broke: object = None
    continued: object = None


class _Unplaced(LaneCompileError):
    """A :func:`_select` error, before :meth:`Lowering.stmt` adds the statement's line."""


def _select(mask, new, old):
    """``new`` in the lanes of ``mask``, ``old`` elsewhere (tuples item by item)."""
    if old is None or new is old:
        return new
    if isinstance(new, _rows.Stacked) or isinstance(old, _rows.Stacked):
        raise _Unplaced("a scan's stacked ys chosen by a branch or a return on the tpu backend: "
                        "return them from the lane's top level")
    if new is None:  # jnp.where cannot hold None: say so (a lane rebuilt from bytecode meets it first)
        raise _Unplaced("a local holds None on one path and a value on another; the tpu backend needs "
                        "one structure per local")
    if isinstance(new, tuple) or isinstance(old, tuple):
        if not (isinstance(new, tuple) and isinstance(old, tuple) and len(new) == len(old)):
            raise _Unplaced("a local holds a tuple on one path and another value on another; "
                            "the tpu backend needs one structure per local")
        return tuple(_select(mask, n, o) for n, o in zip(new, old, strict=True))
    return lanes_where(mask, new, old)


def _truth(v):
    """A value as Python's ``bool(v)``, lane by lane."""
    if isinstance(v, tuple):
        raise LaneCompileError("the truth of a tuple is not supported on the tpu backend")
    return v if jnp.result_type(v) == jnp.bool_ else jnp.asarray(v) != 0


class _Lowering(Carry):
    def __init__(self, functions: dict, valid, count_iterations: bool, unroll: int = 1, options=None):
        self.functions = functions
        self.unroll = unroll
        self.options = options if options is not None else dict(LOWERING)
        self.valid = valid
        self.nobody = jnp.zeros(valid.shape, bool)  # the live lanes after an exit: known to be none
        self.shape = valid.shape
        self.counting = count_iterations
        self.iterations = jnp.int32(0) if count_iterations else None
        self.at = None  # the statement being lowered: where an error about one of its names points
        self.checks = None  # where row reads out of range are told (.bounds), or None
        self.intervals = _bounds.Intervals()  # range counters' static spans: reads known in range
        self.made: dict = {}  # id(function) -> (function, its reads checked): .checked_reads
        self.after: list = []  # the statements after each enclosing one, innermost last: .live_after
        self.around: list = []  # the loops around the statement being lowered, innermost last

    # ------------------------------------------------------------------ functions

    def call(self, fn: ir.Function, args: list, live, loc: ir.Loc):
        """``fn`` inlined for the lanes of ``live``: its result."""
        fn = self.checked_reads(fn)
        params = [p for p in fn.params]
        if any(p.kind != "positional" for p in params):
            raise refuse(f"the *args/**kwargs parameters of {fn.name}", fn.loc)
        if len(args) > len(params):
            raise LaneCompileError(f"{fn.name} takes {len(params)} arguments, {len(args)} given ({where(loc)})")
        env = {}
        for k, p in enumerate(params):
            if k < len(args):
                env[p.name] = args[k]
            elif p.default is not None:
                env[p.name] = self.default(fn, k, live)
            else:
                raise LaneCompileError(f"{fn.name} is called without its argument {p.name} ({where(loc)})")
        state = _State(fn, env, live, _Frame())
        outer, self.after, self.around = (self.after, self.around), [], []  # the helper's own scope
        try:
            self.block(fn.body, state)
        finally:
            self.after, self.around = outer
        if state.frame.result is None:
            raise refuse(f"a lane or helper ({fn.name}) that returns no value", fn.loc)
        if falls_through(fn.body):  # Python returns None there: no lane may get another path's value
            raise LaneTypeError(f"{fn.name} returns None on some paths and a value on others (a missing return?); "
                                f"every path must return the same kind of value ({where(fn.loc)})")
        return state.frame.result

    def checked_reads(self, fn: ir.Function) -> ir.Function:
        """``fn`` with its reads of locals that may be unbound checked (lane.ir.passes.unbound),
        made once per lowering (the loops' bodies are traced several times)."""
        made = self.made.get(id(fn))
        if made is None or made[0] is not fn:
            made = self.made[id(fn)] = (fn, unbound.checked(fn))
        return made[1]

    def default(self, fn: ir.Function, k: int, live):
        """The default of ``fn``'s parameter ``k``: the number Python bound when the def ran
        (a derived lane's default, ``max_iter=_lw0_default0``, names a local of the code that
        made it, no global), else its expression lowered."""
        defaults = getattr(fn.python_function(), "__defaults__", None) or ()
        at = k - (len(fn.params) - len(defaults))
        if 0 <= at < len(defaults) and isinstance(defaults[at], _SCALARS):
            value = defaults[at]
            return value.item() if isinstance(value, np.generic) else value
        return self.expr(fn.params[k].default, _State(fn, {}, live, _Frame()))

    def union(self, a, b):
        """``a | b`` of two masks, without an operation where one is known to hold no lane."""
        return b if a is self.nobody else a if b is self.nobody else a | b

    # ------------------------------------------------------------------ statements

    def block(self, stmts, st: _State) -> None:
        for k, s in enumerate(stmts):
            self.after.append(stmts[k + 1:])  # what runs after s, for .live_after
            try:
                self.stmt(s, st)
            finally:
                self.after.pop()

    def live_after(self) -> set:
        """The names the statement being lowered may hand on: read before assigned in
        the statements after it, in its block and the blocks around it, or in the body
        of a loop around it (the next iteration).  Conservative: a name assigned after
        the statement on every path is still counted where an outer block reads it."""
        names = set()
        for rest in self.after:
            names |= exposed(rest)
        for loop in self.around:
            names |= exposed(loop.body) | exposed((loop.cond,) if loop.cond is not None else ())
        return names

    def stmt(self, s, st: _State) -> None:
        outer, self.at = self.at, s.loc
        try:
            self.statement(s, st)
        except _Unplaced as e:  # _select knows no line: the innermost statement names it
            raise LaneCompileError(f"{e} ({self.place(st)})") from None
        self.at = outer

    def place(self, st: _State) -> str:
        """The function and the user's file:line of the statement being lowered."""
        return st.function.name + (f", {where(self.at)}" if self.at is not None else "")

    def statement(self, s, st: _State) -> None:
        if isinstance(s, ir.Assign):
            self.assign(s.target, self.expr(s.value, st), st, s.loc)
        elif isinstance(s, ir.Do):
            self.expr(s.expr, st)  # a helper called for nothing: no effects to keep
        elif isinstance(s, ir.If):
            self.if_(s, st)
        elif isinstance(s, ir.Loop):
            self.loop(s, st)
        elif isinstance(s, ir.Exit):
            self.exit(s, st)
        elif isinstance(s, ir.Unsupported):
            raise refuse(s.what, s.loc)
        elif isinstance(s, ir.Def):
            raise refuse("a def inside a lane (define the function at module level: lw.scan's step too)", s.loc)
        else:
            raise refuse(f"the statement {type(s).__name__.lower()}", s.loc)

    def assign(self, target, value, st: _State, loc: ir.Loc) -> None:
        if isinstance(target, ir.Var):
            if st.uniform:
                st.uniform.pop(target.name, None)
            st.env[target.name] = value if st.full and not isinstance(value, tuple) \
                else _select(st.live, value, st.env.get(target.name))
        elif isinstance(target, ir.Unpack) and target.star is None:
            if not isinstance(value, tuple) or len(value) != len(target.items):
                raise LaneCompileError(f"cannot unpack into {len(target.items)} names ({where(loc)})")
            for t, v in zip(target.items, value, strict=True):
                self.assign(t, v, st, loc)
        else:
            raise refuse("storing into an item, attribute or starred target", loc)

    def if_(self, s: ir.If, st: _State) -> None:
        cond = self.expr(s.cond, st)
        if isinstance(cond, (bool, int, float)):  # a condition the lane's text fixes: one branch
            self.block(s.then if cond else s.orelse, st)
            return
        cond = _truth(cond)
        taken = st.live & cond
        untaken = st.live ^ taken  # xor: one operation, not ~ and &
        then, other = st.branch(taken), st.branch(untaken)
        self.block(s.then, then)
        self.block(s.orelse, other)
        for name in then.env.keys() | other.env.keys():
            a, b = then.env.get(name), other.env.get(name)
            # a local bound on one path only is undefined on the other: Python would raise there
            st.env[name] = a if b is None else b if a is None else _select(cond, a, b)
        if then.live is not taken or other.live is not untaken:  # else no lane left: live stays as it was
            st.live = self.union(then.live, other.live)
        st.full = then.full and other.full
        st.uniform = {k: v for k, v in (st.uniform or {}).items()
                      if (then.uniform or {}).get(k) is v and (other.uniform or {}).get(k) is v}

    def exit(self, s: ir.Exit, st: _State) -> None:
        if s.kind == "return":
            if s.value is None:
                raise refuse("a return without a value", s.loc)
            value = self.expr(s.value, st)
            frame = st.frame
            frame.result = _select(st.live, value, frame.result)
            frame.returned = st.live if frame.returned is None else frame.returned | st.live
        elif st.loop is None:
            raise LaneCompileError(f"{s.kind} outside a loop ({where(s.loc)})")
        else:  # the lanes wait after the loop (break) or for its next iteration (continue)
            kind = "broke" if s.kind == "break" else "continued"
            before = getattr(st.loop, kind)
            setattr(st.loop, kind, st.live if before is None else before | st.live)
            st.full = False
        st.live = self.nobody

    # ------------------------------------------------------------------ loops

    def loop(self, s: ir.Loop, st: _State) -> None:
        if s.orelse:
            raise refuse("a loop's else clause", s.loc)
        row = self.expr(s.iter, st) if s.kind == "iter" and isinstance(s.iter, ir.Var) else None
        if isinstance(row, _rows.Row):  # for v in p: a range over the row's planes
            s = _rows.as_range(s, row)
        if s.kind == "range":
            start, stop, step = self.range_bounds(s, st) if row is None else (0, row.length, 1)
            spans = self.intervals.spans(s.iter.args, (start, stop), st.env) if row is None else \
                ((0, 0), (row.length, row.length))
            if not isinstance(s.target, ir.Var):
                raise refuse("a range loop whose target is not one name", s.loc)
        elif s.kind != "while":
            raise refuse("a for loop over anything but range() or a row", s.loc)
        stored = {n for node in walk(s.body) if isinstance(node, ir.Assign) for n in ir.target_names(node.target)}
        # a lane rebuilt from bytecode (or its derivative) is one `while True` over its basic blocks: a
        # local assigned in one block and read in a later one crosses iterations,
        # first assigned inside the loop; the bytecode assigns before every read, so
        # it enters the loop as a placeholder whose type the body settles.  So does a
        # local first assigned in the loop and read after it (its reads check its flag
        # where some lane may not have bound it: lane.ir.passes.unbound)
        late = stored - st.env.keys()
        late = late if st.function.blocks else late & self.live_after()
        if late:
            st.env.update(placeholders(s.body, late, self.functions,
                                        lambda e: self.python_object(e, st, "lw.scan's step function", s.loc)))
        names = sorted(n for n in stored | ({s.target.name} if s.kind == "range" else set()) if n in st.env)
        frame = st.frame
        entry = st.live
        # a lane rebuilt from bytecode is one loop over all its basic blocks: unrolled, the
        # kernel would hold every block `unroll` times (minutes of compile, no faster loop)
        unroll = 1 if st.function.blocks else self.unroll
        if s.kind == "range" and all(isinstance(b, int) for b in (start, stop)):
            unroll = max(1, min(unroll, len(range(start, stop, step))))  # no round past a known end
        # the lanes of a tile leave the loop together (a range of bounds the same for all
        # of them, no break)
        together = st.full and not _breaks(s.body) and s.kind == "range" and self.options["scalar_counter"] \
            and all(jnp.ndim(b) == 0 for b in (start, stop))
        # counted: a range of literal bounds whose trip count a round of the unroll divides
        # runs whole rounds while "k < trips"; no lane leaves it but by return, so neither
        # the bound nor a returned mask is kept per iteration
        chunk = _chunk(len(range(start, stop, step)), self.unroll) \
            if together and all(isinstance(b, int) for b in (start, stop)) else None
        # the body's stores need no select if every lane not live in it is dead: the lanes
        # leave together and no iteration runs past the end (whole rounds, or one iteration
        # per check); a round of several that overshoots runs its last iterations with no
        # lane live, and unselected stores would keep what they computed there
        full = together and (chunk is not None or unroll == 1)

        def going(env, live, i):
            """The lanes of ``live`` that (re-)enter the loop's body: its condition, evaluated
            before the first iteration and after each (a tile's loop ends when none does)."""
            if chunk is not None:
                return live  # the bound is the loop's condition
            if s.kind == "range":
                return live & ((i > stop) if step < 0 else (i < stop))
            return live & _truth(self.expr(s.cond, _State(st.function, env, live, frame)))

        def counter(carry):
            """The range loop's value of this iteration: start + k * step."""
            if "k" in carry:
                return start + carry["k"] * step if not (isinstance(start, int) and start == 0 and step == 1) \
                    else carry["k"]
            return carry.get("i")

        def body(carry):
            env = dict(st.env)
            env.update(carry["vars"])
            inner = _State(st.function, env, carry["active"], _Frame(carry["result"], carry.get("returned")),
                           _Loop(), full, {k: v for k, v in (st.uniform or {}).items() if k not in stored})
            self.iterations = carry.get("iterations")
            if isinstance(row, _rows.Row):
                self.assign(s.target, _rows.read(row, counter(carry), where(s.loc)), inner, s.loc)
            elif s.kind == "range":
                value = counter(carry)
                self.assign(s.target, value, inner, s.loc)
                self.intervals.note(value, *spans, step)
                if jnp.ndim(value) == 0:  # the same in every lane of the tile
                    inner.uniform[s.target.name] = value
            self.around.append(s)
            try:
                self.block(s.body, inner)
            finally:
                self.around.pop()
            returned = inner.frame.returned
            # the lanes that ran to the end of the body, and those that continued
            stays = inner.live if inner.loop.continued is None else self.union(inner.live, inner.loop.continued)
            out = {"vars": {n: inner.env[n] for n in names}, "result": inner.frame.result}
            if "returned" in carry:
                out["returned"] = returned
            if "k" in carry:
                out["k"] = carry["k"] + 1
            elif s.kind == "range":
                out["i"] = carry["i"] + step
            out["active"] = going(inner.env, stays, counter(out))
            if self.counting:
                out["iterations"] = self.iterations + 1  # inner loops' iterations included
            return out

        if chunk == 0:
            return  # range() of no iterations
        carry = {"vars": {n: st.env[n] for n in names}, "result": frame.result}
        if chunk is None:
            carry["returned"] = frame.returned
        if s.kind == "range" and self.options["scalar_counter"]:
            carry["k"] = jnp.int32(0)  # the lanes of a tile enter together: one count serves them all
        elif s.kind == "range":
            carry["i"] = jnp.broadcast_to(jnp.asarray(start, jnp.int32), self.shape)
        carry["active"] = going(st.env, entry & self.valid, counter(carry))
        if self.counting:
            carry["iterations"] = self.iterations
        carry = self.settle(body, carry, s.loc)
        trips = None
        if chunk is not None:
            unroll, trips = chunk, len(range(start, stop, step))
        final = self.while_loop(body, carry, unroll, trips)
        st.env.update(final["vars"])
        st.uniform = {k: v for k, v in (st.uniform or {}).items() if k not in stored and k not in names}
        if chunk is not None:  # the lanes that entered and are not active at the end returned
            gone = entry & ~final["active"]
            if final["result"] is not None:
                frame.returned = gone if frame.returned is None else frame.returned | gone
            frame.result = final["result"]
            st.live = entry & final["active"]
            if self.counting:
                self.iterations = final["iterations"]
            return
        frame.result, frame.returned = final["result"], final["returned"]
        if frame.returned is not None:
            st.live = entry & ~frame.returned
        if self.counting:
            self.iterations = final["iterations"]

    def range_bounds(self, s: ir.Loop, st: _State):
        p = s.iter
        if p.keywords or not 1 <= len(p.args) <= 3:
            raise refuse("this form of range()", s.loc)
        args = [self.expr(a, st) for a in p.args]
        for a in args:
            if jnp.result_type(a) not in (jnp.int32, jnp.bool_) and not isinstance(a, int):
                raise LaneCompileError(f"range() of a non-integer ({where(s.loc)})")
        start, stop, step = (0, args[0], 1) if len(args) == 1 else (*args, 1) if len(args) == 2 else args
        if not isinstance(step, int):
            raise refuse("a range() step that is not a literal", s.loc)
        if step == 0:
            raise LaneCompileError(f"range() step must not be zero ({where(s.loc)})")
        return start, stop, step

    # ------------------------------------------------------------------ expressions

    def expr(self, e, st: _State):
        if isinstance(e, ir.Var):
            if e.name not in st.env:
                raise LaneCompileError(f"{e.name} may be undefined here on the tpu backend (a local first "
                                       f"assigned inside a loop is not kept after it: assign it before the "
                                       f"loop) ({self.place(st)})")
            return st.env[e.name]
        if isinstance(e, ir.Const):
            if e.type == "tuple":
                return tuple(e.value)
            if e.value is None:  # a value nothing computes with (a scan step's y)
                return None
            if not isinstance(e.value, (bool, int, float)):
                raise LaneCompileError(f"the constant {e.value!r} is not supported on the tpu backend "
                                       f"({self.place(st)})")
            return e.value
        if isinstance(e, ir.Global):
            return self.global_(e, st)
        if isinstance(e, ir.Prim):
            return self.prim(e, st)
        loc = getattr(e, "loc", st.function.loc)
        raise refuse(getattr(e, "what", None) or type(e).__name__.lower(), loc)

    def global_(self, e: ir.Global, st: _State):
        value = self.lookup(e, st)
        if isinstance(value, bool | int | float | np.generic) and isinstance(value, _SCALARS):
            return value.item() if isinstance(value, np.generic) else value
        raise LaneCompileError(f"the global {e.name} is not a number: the tpu backend reads only numbers "
                               f"from globals ({self.place(st)})")

    def python_object(self, e, st: _State, what: str, loc: ir.Loc):
        """The Python function a global names (``lw.scan``'s step, passed at ``loc``)."""
        value = self.lookup(e, st) if isinstance(e, ir.Global) else None
        if not callable(value):
            raise LaneCompileError(f"{what} must be a function defined at module level (or a closure) on the tpu "
                                   f"backend ({where(loc)} in {st.function.name})")
        return value

    def inline(self, fn, args: list, live, loc: ir.Loc):
        """The Python function ``fn`` (not a helper of the lane's module: ``lw.scan``'s step)
        inlined like a helper, with its own helpers."""
        module, _ = build_with_functions(fn)
        functions = self.functions
        self.functions = {**functions, **{f.name: f for f in module.functions()}}
        try:
            return self.call(module.entry, args, live, loc)
        finally:
            self.functions = functions

    def lookup(self, e: ir.Global, st: _State):
        """The value a global, closure or builtin name has for the function being lowered."""
        head, *rest = e.name.split(".")
        fn = st.function.python_function()
        scope = {}
        if fn is not None:
            scope = dict(fn.__globals__)
            scope.update(zip(fn.__code__.co_freevars, (c.cell_contents for c in fn.__closure__ or ()),
                             strict=True))
        # a module's attribute is named by the module's path (``helpers.step``), which the
        # function's scope may not hold: the imported module then
        value = scope.get(head, _MODULES.get(head, getattr(builtins, head, sys.modules.get(head))))
        for part in rest:
            value = getattr(value, part, None)
        return value

    def prim(self, p: ir.Prim, st: _State):
        op = p.op
        if op == "tuple":
            return tuple(self.expr(a, st) for a in p.args)
        if op == "ifexp":  # each side read by the lanes Python evaluates it in (.bounds checks them)
            cond = self.expr(p.args[0], st)
            a = self.expr(p.args[1], self.narrowed(st, cond, True))
            b = self.expr(p.args[2], self.narrowed(st, cond, False))
            return _select(_truth(cond), a, b)
        if op in ("and", "or"):
            return self.boolean(p, st)
        if op == "not":
            return jnp.logical_not(_truth(self.expr(p.args[0], st)))
        if op == "getitem":
            return self.getitem(p, st)
        if op == unbound.CHECK:
            return self.unbound(p, st)
        if op == "lw.scan":
            return _rows.scan(self, p, st, where(p.loc))
        row = self.expr(p.args[0], st) if op in ("attr", "len", "setitem") and p.args \
            and isinstance(p.args[0], ir.Var) else None  # rows are parameters and locals
        if isinstance(row, _rows.Row) and op == "setitem":
            raise refuse("storing into a row (rows are read-only: keep values in locals or a scan's carry)", p.loc)
        if isinstance(row, _rows.Row):
            return row.length if op == "len" else _rows.attribute(row, dict(p.params)["name"], where(p.loc))
        if op.startswith("call:"):
            if p.keywords:
                raise refuse(f"keyword arguments to {op[5:]}", p.loc)
            return self.call(self.functions[op[5:]], [self.expr(a, st) for a in p.args], st.live, p.loc)
        if lanes_autodiff.lowers(p):  # a derived lane's intrinsics, lw.jvp and lw.grad(f)(x): .autodiff
            return lanes_autodiff.call(self, p, st)
        if lanes_random.lowers(ir.called(p)):  # lw.random: Philox on the tile's words (.random)
            return lanes_random.call(ir.called(p), [self.expr(a, st) for a in p.args],
                                     {k: self.expr(v, st) for k, v in p.keywords}, where(p.loc))
        if op in OPERATORS:
            prim, obj = primitives.named(f"operator.{OPERATORS[op]}"), None
        else:
            obj = ir.called(p)
            prim = primitives.lookup(obj) if obj is not None else None
            if prim is None:
                what = f"the attribute .{dict(p.params)['name']}" if op == "attr" else f"calling {op}"
                raise refuse(what, p.loc)
        if p.keywords:
            raise refuse(f"keyword arguments to {op}", p.loc)
        rule = primitives.rule(prim, "tpu", where(p.loc), obj)
        args = [self.expr(a, st) for a in p.args]
        if any(isinstance(a, (_rows.Row, _rows.Stacked)) for a in args):
            raise refuse(f"a row as an operand of {op} (a row supports row[i], len(row), row.shape[0], row.size, "
                         "for v in row and lw.scan over it)", p.loc)
        if len(args) != (2 if prim.name in ("max", "min") else prim.arity):  # max(a, b, c): not yet
            raise refuse(f"{op} with {len(args)} arguments", p.loc)
        folded = literals.folded(op, args) if obj is None else None
        if folded is not None:
            return folded
        args = literals.wide(op, args, where(p.loc))
        if not isinstance(args, list):
            return args  # a comparison that a literal beyond int32 decides
        literals.negative_int_power(rule.op, args, where(p.loc))
        value = lowering(rule.op)(*args)
        if obj in INT_RESULT:
            value = value.astype(jnp.int32)
        elif obj in FLOAT_RESULT:
            value = jnp.asarray(value).astype(jnp.float32)
        return value

    def boolean(self, p: ir.Prim, st: _State):
        """``a and b`` / ``a or b``: Python's value (one operand or the other), lane by lane;
        each operand evaluated for the lanes Python evaluates it in."""
        values, at = [], st
        for a in p.args:
            values.append(self.expr(a, at))
            at = self.narrowed(at, values[-1], p.op == "and")
        out = values[-1]
        for v in reversed(values[:-1]):
            out = _select(_truth(v), out, v) if p.op == "and" else _select(_truth(v), v, out)
        return out

    def narrowed(self, st: _State, cond, truth: bool) -> _State:
        """``st`` for the lanes of its live ones where ``cond``'s truth is ``truth`` (those that
        evaluate one side of ``if``-``else``, ``and``, ``or``): only where row reads are
        checked (:mod:`.bounds`); the values are the same in every lane, only which lanes may
        read out of range differs."""
        if self.checks is None or isinstance(cond, tuple):
            return st
        if isinstance(cond, (bool, int, float)):
            return st if bool(cond) == truth else st.branch(self.nobody)
        taken = _truth(cond)
        return st.branch(st.live & (taken if truth else jnp.logical_not(taken)))

    def unbound(self, p: ir.Prim, st: _State):
        """A read of a local that may be unbound (lane.ir.passes.unbound): a live lane whose
        flag is False is recorded (.bounds, as a row read out of range), and the call
        raises Python's error for the first such lane."""
        var, flag, _ = p.args
        bound = self.expr(flag, st)
        if bound is True:
            return self.expr(var, st)
        if self.checks is not None:
            unset = st.live if bound is False else st.live & jnp.logical_not(_truth(bound))
            self.checks.unbound(unset, var.name, where(p.loc))
        return st.env.get(var.name, 0)  # unset in every lane that reads it here: any value

    def getitem(self, p: ir.Prim, st: _State):
        base, index = p.args
        value = self.expr(base, st)
        if isinstance(value, tuple) and isinstance(index, ir.Const) and isinstance(index.value, int):
            return value[index.value]
        if isinstance(value, tuple) and type(at := self.expr(index, st)) is int:
            return value[at]  # an index every lane knows at trace time (reverse mode's node ids)
        if isinstance(value, _rows.Row):
            if st.uniform:  # in the live lanes a uniform local equals its scalar: read one plane
                st = st.branch(st.live)
                st.env.update(st.uniform)
            at = where(p.loc)
            checks = self.checks  # a live lane's index out of range: .bounds (not one known in range)
            check = None if checks is None or self.intervals.within(index, st.env, value.length) else \
                lambda i, n: checks.read(st.live, i, n, at)
            return _rows.read(value, self.expr(index, st), at, check)
        raise refuse("indexing (only a tuple by a literal index is lowered)", p.loc)


def _chunk(trips: int, unroll: int):
    """Iterations per round of a counted loop of ``trips``: the largest divisor of ``trips``
    up to ``unroll``, so that no round runs past the end; None where that would check
    more than twice as often as ``unroll`` asks (the loop then checks its bound per
    iteration); 0 for no trips."""
    if trips == 0:
        return 0
    best = max(d for d in range(1, min(unroll, trips) + 1) if trips % d == 0)
    return best if 2 * best >= min(unroll, trips) else None


def _breaks(stmts) -> bool:
    """Whether a loop body breaks out of its own loop (not of a nested one)."""
    for s in stmts:
        if isinstance(s, ir.Exit) and s.kind == "break":
            return True
        if isinstance(s, ir.If) and (_breaks(s.then) or _breaks(s.orelse)):
            return True
    return False
