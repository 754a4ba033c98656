"""A lane function's IR -> the source of its W-wide (SPMD on SIMD) version.

The W-wide function runs W lanes in lock-step.  Every value is either uniform
(a Numba scalar, the same in every lane: constants, arguments not mapped at the
innermost level, and what is computed from them only) or varying (a
:class:`~lanewise.spmd.vector.Vec`); Numba's type inference decides which, since
every operation of :mod:`lanewise.spmd.vector` accepts both.  Control flow
becomes execution masks (ISPC's model):

* ``if``/``elif``/``else``: both branches run, each under its mask (skipped when
  no lane takes it); an assignment under a mask is ``x = select(mask, new, x)``;
* ``while``/``for ... in range(...)``: the loop runs while any lane is active;
  ``break`` and ``continue`` clear lanes from the loop's and the iteration's
  masks, ``return`` stores the lanes' results and clears them from every mask
  of the function;
* calls of plain Python helpers (and ``numba.njit`` ones) are inlined, with their
  own masks and result slots; calls of math/NumPy/builtin scalar functions run
  lane by lane through Numba's own implementation (lanewise's vector math when
  ``lw.config.vector_math``);
* tuples: unpacking assignments, tuple returns (the lane's result tree),
  helpers taking and returning tuples, constant indices;
* per-lane 1-D rows (masked gathers) and ``lw.scan`` over them, inlined as a
  loop (:mod:`.arrays`).

Each lane executes exactly the operations of the scalar lane, in the same order
and with the same types, so the results are bit for bit those of the scalar path.
Anything outside this subset raises :class:`Unsupported` with the reason; the CPU
backend then keeps the scalar path.

Example:
    >>> def clamp_steps(x):
    ...     n = 0
    ...     while x > 1.0:
    ...         x = x / 2
    ...         n += 1
    ...     return n
    >>> src = transform(clamp_steps, ("varying",), (((), "int64"),), 8)
    >>> "while True:" in src and "m_any(" in src
    True
"""

from __future__ import annotations

import sys

from ..config import config
from ..lane.ir import nodes as ir
from ..lane.ir.passes import unbound
from ..lane.ir.unparse import python_text
from .arrays import Row
from .desugar import prepared
from .expressions import Expressions
from .frames import Ctx, Frame
from .syntax import (Tup, Unsupported, block_temps, cheap_branch, flat_branch, grouped, leaf_paths, leaves_of,
                     local_names, name_counts, result_shape, shape_of, target_text, where)
from .uniform import lockstep_loops

#: What the lane IR calls the statements it does not model, as Python's syntax tree names them.
_STATEMENTS = {"a with statement": "with", "an async with statement": "asyncwith", "del": "delete",
               "an import": "import", "an async for loop": "asyncfor", "a match statement": "match"}


#: Name of the generated function.
FUNCTION = "lane_spmd"

#: Loop counters of desugared ``for`` loops: only the loop reads them, so lanes that
#: left the loop never need their values and their stores need no select.
_PRIVATE = ("_lw_k", "_lw_stop", "_lw_rs", "_lw_re")


class _Emitter(Expressions):
    """Emits the W-wide lane: its statements under execution masks, and the frames
    of the functions inlined (its expressions are :class:`.expressions.Expressions`')."""

    def __init__(self, width: int, vector_math: bool):
        self.width, self.vector_math = width, vector_math
        self.lines: list[str] = []
        self.indent = 1
        self.n = 0
        self.n_helpers = 0
        self.stack: list = []  # functions being inlined (recursion check)
        self.inlined: list = []  # every helper inlined
        self.constants: dict = {}

    # -- plumbing
    def emit(self, line: str) -> None:
        self.lines.append("    " * self.indent + line)

    def fresh(self, kind: str) -> str:
        self.n += 1
        return f"_lw_{kind}{self.n}"

    # -- functions
    def new_frame(self, fn, function: ir.Function, prefix, alive, base) -> Frame:
        frame = Frame(fn, prefix, local_names(function), alive, base)
        frame.counts = {name: n for name, n in name_counts(function).items() if name in frame.locals}
        return frame

    # -- statements
    def block(self, stmts, ctx: Ctx) -> bool:
        """Emit ``stmts``; True if the block ends in an unconditional exit."""
        for group in grouped(stmts):
            if self.statement(group, ctx):
                return True
        return False

    def statement(self, group: list, ctx: Ctx) -> bool:
        """Emit one statement (``group``: its IR statements, the assignments of ``a = b = v``)."""
        stmt = group[0]
        here = where(stmt.loc)
        if isinstance(stmt, ir.Assign):
            self.assign(group, ctx)
        elif isinstance(stmt, ir.If):
            self.if_(stmt, ctx)
        elif isinstance(stmt, ir.Loop):
            self.while_(stmt, ctx)
        elif isinstance(stmt, ir.Exit) and stmt.kind == "return":
            self.return_(stmt, ctx)
            return True
        elif isinstance(stmt, ir.Exit):
            if ctx.loop is None:
                raise Unsupported(f"{stmt.kind} outside a loop at {here}")
            self.exit(ctx, ctx.loop[0 if stmt.kind == "break" else 1])
            return True
        elif isinstance(stmt, ir.Raise):  # the group fails; the host replays it (spmd.failure)
            self.emit(f"m_raise({ctx.mask})  # raise at {here}")
            self.exit(ctx, ctx.frame.base)
            return True
        elif isinstance(stmt, ir.Assert):  # the message is built by the replay, never here
            if not sys.flags.optimize:  # python -O: Numba's lane has no assert either
                test = self.value(stmt.test, ctx, at=stmt.loc)
                self.emit(f"m_raise(m_andnot({ctx.mask}, m_truth({test})))  # assert at {here}")
        elif isinstance(stmt, ir.Do) and isinstance(stmt.expr, ir.Prim) and stmt.expr.op == unbound.CHECK:
            self.value(stmt.expr, ctx, at=stmt.loc)  # x += e reads x: checked before it
        elif isinstance(stmt, ir.Do) and isinstance(stmt.expr, ir.Prim) and stmt.expr.op in ("setitem", "setattr"):
            self.store_into(stmt, ctx)
        elif isinstance(stmt, ir.Do):  # a call may have effects
            raise Unsupported(f"the expression statement `{python_text(stmt.expr)}` at {here}")
        else:
            raise Unsupported(f"the statement `{_statement_name(stmt)}` at {here}")
        return False

    def store(self, name: str, value: str, ctx: Ctx) -> None:
        frame = ctx.frame
        if ctx.renames is not None:  # the branch's value, merged after both branches
            if name not in ctx.renames:
                ctx.renames[name] = self.fresh("v")
            self.emit(f"{ctx.renames[name]} = {value}")
            return
        target = frame.name(name) if name in frame.locals else name
        if value == "None":  # no lane computes with it: every lane holds the same None
            self.emit(f"{target} = None")
        elif ctx.plain or ctx.whole or name in ctx.temps or (ctx.private_plain and name.startswith(_PRIVATE)):
            self.emit(f"{target} = {value}")
        else:
            frame.selected.add(target)
            self.emit(f"{target} = v_select({ctx.mask}, {value}, {target})")

    def assign(self, group: list, ctx: Ctx) -> None:
        value = self.value(group[0].value, ctx, allow_tuple=True, at=group[0].loc)
        targets = [s.target for s in group]
        if len(targets) > 1 or isinstance(value, Tup) and len(targets) == 1 and not isinstance(targets[0], ir.Var):
            value = self.materialise(value)  # evaluated once, stored to each target
        for target in targets:
            self.assign_target(target, value, ctx, group[0].loc)

    def store_into(self, stmt: ir.Do, ctx: Ctx) -> None:
        """``x[i] = v`` or ``x.a = v``: refused (after ``v``, as Python evaluates it first)."""
        *place, value = stmt.expr.args
        self.value(value, ctx, allow_tuple=True, at=stmt.loc)
        name = dict(stmt.expr.params).get("name")
        target = ir.Item(*place) if stmt.expr.op == "setitem" else ir.Field(place[0], name)
        self.assign_target(target, None, ctx, stmt.loc)

    def materialise(self, value):
        if isinstance(value, Tup):
            return Tup(tuple(self.materialise(v) for v in value.items))
        if value.isidentifier():
            return value
        tmp = self.fresh("t")
        self.emit(f"{tmp} = {value}")
        return tmp

    def assign_target(self, target, value, ctx: Ctx, at: ir.Loc) -> None:
        here = where(at)
        if isinstance(target, ir.Var):
            if target.name in ctx.frame.rows or target.name in ctx.frame.tuples:
                held = "an array" if target.name in ctx.frame.rows else "a tuple"
                raise Unsupported(f"assigning to {target.name!r}, which holds {held}, at {here}")
            if isinstance(value, Tup):
                self.store_tuple(target.name, value, ctx, here)
            else:
                self.store(target.name, value, ctx)
        elif isinstance(target, ir.Unpack):
            if not isinstance(value, Tup) or len(value.items) != len(target.items):
                raise Unsupported(f"unpacking {target_text(target)} at {here} from a value that is not "
                                  "a tuple of the same length")
            if target.star is not None:
                raise Unsupported(f"starred unpacking at {here}")
            value = self.materialise(value)  # all right-hand sides before any store
            for t, v in zip(target.items, value.items):
                self.assign_target(t, v, ctx, at)
        elif isinstance(target, ir.Item) and self.row(target.base, ctx) is not None:
            raise Unsupported(f"writing into the array {target.base.name!r} at {here} (rows are read-only "
                              "on the SPMD path)")
        else:
            raise Unsupported(f"assignment to {target_text(target)} at {here} (only local variables)")

    def if_(self, stmt: ir.If, ctx: Ctx) -> None:
        test = self.value(stmt.cond, ctx, at=stmt.loc)
        t = self.fresh("c")
        self.emit(f"{t} = m_truth({test})")
        m_then, m_else = self.fresh("m"), self.fresh("m")
        self.emit(f"{m_then} = m_and({ctx.mask}, {t})")
        if stmt.orelse:
            self.emit(f"{m_else} = m_andnot({ctx.mask}, {t})")
        if flat_branch(stmt.then) and flat_branch(stmt.orelse):
            self.merged_if(stmt, ctx, t, m_then, m_else)
            return
        for body, mask in ((stmt.then, m_then), (stmt.orelse, m_else)):
            if not body:
                continue
            inner = Ctx(ctx.chain + (mask,), False, block_temps(body, ctx.frame.counts), ctx.loop, ctx.frame)
            if cheap_branch(body):  # a few masked operations: cheaper than a branch around them
                self.block(body, inner)
                continue
            self.emit(f"if m_any({mask}):  # skipped when no lane takes it")
            self.indent += 1
            self.block(body, inner)
            self.indent -= 1

    def merged_if(self, stmt: ir.If, ctx: Ctx, test: str, m_then: str, m_else: str) -> None:
        """Both branches computed from the values before the ``if`` (each into its
        own temporaries), then one select per variable: the branches no longer
        wait for each other.  A variable both branches assign is chosen by the
        test, then kept outside the mask: two selects instead of two masks and
        two selects (Collatz's ``n = n // 2 if even else 3 * n + 1``: 0.43x ->
        0.37x Numba)."""
        branches = []
        for body in (stmt.then, stmt.orelse):
            renames: dict = {}
            inner = Ctx(ctx.chain, False, frozenset(), ctx.loop, ctx.frame, ctx.private_plain, renames)
            self.block(body, inner)
            branches.append(renames)
        for name in dict.fromkeys([*branches[0], *branches[1]]):
            current = ctx.frame.name(name) if name in ctx.frame.locals else name
            if name in branches[0] and name in branches[1]:  # one select on the test, one on the mask
                value = f"v_select({ctx.mask}, v_select({test}, {branches[0][name]}, {branches[1][name]}), {current})"
            elif name in branches[0]:
                value = f"v_select({m_then}, {branches[0][name]}, {current})"
            else:
                value = f"v_select({m_else}, {branches[1][name]}, {current})"
            if ctx.renames is not None:  # (not reached: flat branches hold no if)
                raise Unsupported("a nested merged branch")
            ctx.frame.selected.add(current)  # may be read before any assignment: declared
            self.emit(f"{current} = {value}")  # lanes outside both branches keep their value

    def while_(self, stmt: ir.Loop, ctx: Ctx) -> None:
        frame = ctx.frame
        lmask, bmask = self.fresh("L"), self.fresh("B")
        self.emit(f"{lmask} = {ctx.mask}")
        self.emit("while True:")
        self.indent += 1
        loop_ctx = Ctx(ctx.chain + (lmask,), False, frozenset(), ctx.loop, frame)
        test = self.value(stmt.cond, loop_ctx, at=stmt.loc)  # helper calls in the test run under the loop mask
        lockstep = ((ctx.plain or ctx.whole) and ctx.renames is None
                    and (stmt.loc.line, stmt.loc.col) in frame.lockstep)
        if lockstep:  # every live lane passes the test or none: a branch, no mask
            # m_uniform: typing fails (the SPMD path is refused) if the test is a vector after all
            self.emit(f"if not m_uniform({test}) or not m_any({lmask}):")
        else:
            self.emit(f"{lmask} = m_and({lmask}, m_truth({test}))")
            self.emit(f"if not m_any({lmask}):")
        self.emit("    break")
        self.emit(f"{bmask} = {lmask}")
        n = len(ctx.chain)
        inner = Ctx(ctx.chain + (lmask, bmask), False, block_temps(stmt.body, frame.counts),
                    (n, n + 1), frame, whole=lockstep)
        self.block(stmt.body, inner)
        self.indent -= 1

    def exit(self, ctx: Ctx, first: int) -> None:
        """Lanes of the current mask leave every mask from ``chain[first]`` inward."""
        e = self.fresh("e")
        self.emit(f"{e} = {ctx.mask}")
        for mask in ctx.chain[first:]:
            self.emit(f"{mask} = m_andnot({mask}, {e})")

    def return_(self, stmt: ir.Exit, ctx: Ctx) -> None:
        frame = ctx.frame
        here = where(stmt.loc)
        if stmt.value is None:
            raise Unsupported(f"a return without a value at {here}")
        value = self.value(stmt.value, ctx, allow_tuple=True, at=stmt.loc)
        shape = shape_of(value)
        if frame.shape == "unknown":
            frame.shape = shape
            frame.slots = [self.fresh("r") for _ in leaves_of(value)]
            self.declare(frame.slots)
        elif frame.shape != shape:
            raise Unsupported(f"returns of different tuple structures ({here})")
        for slot, leaf in zip(frame.slots, leaves_of(value)):
            if leaf == "None" and frame.base != 0:  # a helper's None (a scan's ys): nothing to select
                frame.nones.add(slot)
                self.emit(f"{slot} = None")
                continue
            frame.valued.add(slot)
            if frame.base == 0:  # the lane: converted to its result type, as Numba's return does
                self.emit(f"{slot} = v_select({ctx.mask}, v_as({leaf}, {slot}), {slot})")
            else:  # a helper: Numba unifies the types of its returns (v_select does the same)
                self.emit(f"{slot} = v_select({ctx.mask}, {leaf}, {slot})")
        self.exit(ctx, frame.base)

    def declare(self, names) -> None:
        """A helper's result slots, declared where its inlined body starts."""
        self.pending_declarations.extend(names)


def start(fn, params, width, vector_math):
    """Emitter, desugared IR, parameter names and the lane's frame."""
    if vector_math is None:
        vector_math = config.vector_math
    em = _Emitter(width, vector_math)
    em.pending_declarations = []
    function = prepared(fn)
    names = [p.name for p in function.params]
    if len(params) != len(names):
        raise Unsupported(f"the lane takes {len(names)} parameters, the call binds {len(params)}")
    frame = em.new_frame(fn, function, "l_", "_lw_alive", 0)
    em.stack.append(fn)
    return em, function, names, frame


def defaults(em, fn, function, names, params, frame) -> list[str]:
    n_defaults = sum(p.default is not None for p in function.params)
    defaults = dict(zip(names[len(names) - n_defaults:], fn.__defaults__ or ()))
    out = []
    for name, kind in zip(names, params):
        if kind == "default":
            if name not in defaults:
                raise Unsupported(f"parameter {name!r} is neither passed nor defaulted")
            out.append(f"    {frame.name(name)} = {em.constant(defaults[name], where(function.loc))}")
    return out


def _statement_name(stmt) -> str:
    """A statement the emitter refuses, as Python's syntax tree names it (``try``, ``with``)."""
    if isinstance(stmt, ir.Unsupported):
        return _STATEMENTS.get(stmt.what, stmt.what)
    return type(stmt).__name__.lower()




def finish(frame, results, names):
    """The result slots in output order, their initial values and the declarations."""
    shape = result_shape(results)
    if frame.shape == "unknown":
        raise Unsupported("the lane never returns a value")
    if frame.shape != shape:
        raise Unsupported(f"the lane's return structure {frame.shape} is not the result's {shape}")
    by_path = dict(zip(leaf_paths(shape), frame.slots))
    slots = [by_path[path] for path, _ in results]
    inits = [f"    {slot} = {'False' if dtype == 'bool' else f'np.{dtype}(0)'}"
             for slot, (_, dtype) in zip(slots, results)]
    decls = [f"    {n} = v_undef()" for n in sorted(frame.selected - {frame.name(p) for p in names})]
    return slots, inits, decls


def transform(fn, params, results, width: int, vector_math: bool | None = None, row_dtypes=(),
              row_blocks=None, table_dtypes=None, tuple_sizes=None) -> str:
    """Source of ``lane_spmd``, the W-wide version of the lane ``fn``.

    Args:
      fn: the lane (a plain Python function).
      params: per parameter of ``fn``, in order: ``"varying"`` (a W-array of lane
        values is passed), ``"uniform"`` (one scalar for all lanes) or
        ``"default"`` (not passed: its default value), ``"row"`` (a per-lane
        1-D array: W data pointers as a W-array of uint64, its length and its
        stride in bytes are passed) or ``"table"`` (a 1-D array every lane
        shares: one data pointer, its length and its stride in bytes).
      results: the lane's result leaves: ``(path, dtype name)`` in the order of
        the output arrays; path ``()`` for a scalar result.
      width: W, the number of lanes per call.
      vector_math: use lanewise.lanemath for math calls (default: the config).
      row_dtypes: the dtype name of each ``"row"`` parameter, in order.
      row_blocks: per ``"row"`` parameter, False when its rows are strided (every
        read gathers), else reads at a uniform index go through a block; default all.
      table_dtypes: the dtype name of each ``"table"`` parameter, by name.
      tuple_sizes: the length of each ``"tuple"`` parameter (a flat tuple of
        scalars, the same for every lane, passed as one scalar per item), by name.

    The function is ``lane_spmd(mask, *args, *outs)``: ``mask`` a W-array of
    bool (lanes to compute), varying args W-arrays, uniform args scalars, and
    one W-array per result leaf to receive the lanes' results.
    """
    em, function, names, frame = start(fn, params, width, vector_math)
    table_dtypes = table_dtypes or {}
    head = [f"    _lw_alive = vload(_lw_mask, {width})"]
    args = ["_lw_mask"]
    dtypes = iter(row_dtypes)
    blocks = iter(row_blocks if row_blocks is not None else [True] * len(row_dtypes))
    for k, (name, kind) in enumerate(zip(names, params)):
        if kind == "row":
            args += [f"_lw_p{k}", f"_lw_n{k}", f"_lw_s{k}"]
            head.append(f"    _lw_pv{k} = vload(_lw_p{k}, {width})")
            block = next(blocks) is not False
            row = Row(f"_lw_pv{k}", f"_lw_n{k}", f"_lw_s{k}", next(dtypes),
                      f"_lw_rb{k}" if block else None, f"_lw_rt{k}" if block else None)
            head += [f"    {line}" for line in row.declare(width)]
            frame.rows[name] = row
        elif kind == "table":  # one data pointer for every lane: reads are scalar loads or gathers
            args += [f"_lw_p{k}", f"_lw_n{k}", f"_lw_s{k}"]
            frame.rows[name] = Row(f"_lw_p{k}", f"_lw_n{k}", f"_lw_s{k}", table_dtypes[name], shared=True)
        elif kind == "varying":
            args.append(f"_lw_a{k}")
            head.append(f"    {frame.name(name)} = vload(_lw_a{k}, {width})")
        elif kind == "uniform":
            args.append(frame.name(name))
        elif kind == "tuple":
            items = tuple(f"_lw_t{k}_{j}" for j in range((tuple_sizes or {})[name]))
            args += items
            frame.tuples[name] = Tup(items)
    head += defaults(em, fn, function, names, params, frame)
    frame.lockstep = lockstep_loops(fn, {n for n, k in zip(names, params) if k in ("uniform", "default")},
                                    set(frame.rows))
    em.block(function.body, Ctx(("_lw_alive",), True, frozenset(), None, frame))
    slots, inits, decls = finish(frame, results, names)
    outs = [f"_lw_o{j}" for j in range(len(results))]
    tail = [f"    vstore({o}, {slot})" for o, slot in zip(outs, slots)]
    lines = [f"def {FUNCTION}({', '.join(args + outs)}):",
             f'    """W-wide {fn.__qualname__} ({width} lanes, SPMD on SIMD)."""',
             *head, *inits, *decls, *em.lines, *tail]
    return "\n".join(lines) + "\n"
