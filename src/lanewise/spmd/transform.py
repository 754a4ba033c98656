"""A lane function's AST -> the source of its W-wide (SPMD on SIMD) version.

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

import ast
import builtins
import copy
import math
import sys
import types
from dataclasses import dataclass, field

import numpy as np

from ..config import config
from .arrays import Row, RowsAndScans, is_scan
from .syntax import (Desugar, Tup, Unsupported, bind_arguments, block_temps, cheap_branch, first_in_helpers,
                     flat_branch, function_ast, helper_function, leaf_paths, leaves_of, local_names, rebuild,
                     result_shape, shape_of, source_line)
from .uniform import lockstep_loop, uniform_names


#: Name of the generated function.
FUNCTION = "lane_spmd"

_MAX_INLINE_DEPTH = 8

#: Loop counters of desugared ``for`` loops: only the loop reads them, so lanes that
#: left the loop never need their values and their stores need no select.
_PRIVATE = ("_lw_k", "_lw_stop", "_lw_rs", "_lw_re")

_BINOPS = {ast.Add: "v_add", ast.Sub: "v_sub", ast.Mult: "v_mul", ast.Div: "v_truediv",
           ast.FloorDiv: "v_floordiv", ast.Mod: "v_mod", ast.Pow: "v_pow", ast.LShift: "v_lshift",
           ast.RShift: "v_rshift", ast.BitAnd: "v_bitand", ast.BitOr: "v_bitor", ast.BitXor: "v_bitxor"}
_CMPOPS = {ast.Lt: "v_lt", ast.LtE: "v_le", ast.Gt: "v_gt", ast.GtE: "v_ge", ast.Eq: "v_eq", ast.NotEq: "v_ne"}
_UNARY = {ast.USub: "v_neg", ast.UAdd: "v_pos", ast.Invert: "v_invert", ast.Not: "m_not"}

#: Builtins a lane may call lane by lane (Numba implements them for scalars).
_BUILTINS = {"abs", "min", "max", "int", "float", "bool", "round", "pow"}


# ----------------------------------------------------------------------------- values


# ----------------------------------------------------------------------------- frames


@dataclass
class Frame:
    """One function activation being emitted (the lane, or an inlined helper)."""

    fn: types.FunctionType
    prefix: str  # "l_" for the lane's locals, "h3_" for the third inlined helper
    locals: set
    alive: str  # mask of lanes that have not returned yet
    base: int  # index of ``alive`` in the mask chain
    shape: object = "unknown"  # result shape: None (scalar), tuple of shapes, "unknown" before the first return
    slots: list = field(default_factory=list)  # result slot variables (one per result leaf)
    counts: dict = field(default_factory=dict)  # uses of each (renamed) local in the frame
    selected: set = field(default_factory=set)  # locals stored under a mask somewhere (need a declaration)
    rows: dict = field(default_factory=dict)  # parameter -> Row (a per-lane 1-D array)
    tuples: dict = field(default_factory=dict)  # local -> Tup of variables (a tuple bound to a name)
    nones: set = field(default_factory=set)  # result slots some return sets to None
    valued: set = field(default_factory=set)  # result slots some return sets to a value
    uniform: frozenset = frozenset()  # locals that hold one scalar for all lanes (.uniform)

    def name(self, local: str) -> str:
        return self.prefix + local


@dataclass(frozen=True)
class Ctx:
    """Where a statement is emitted: its mask and the masks around it."""

    chain: tuple  # mask variables, the frame's alive mask at frame.base, the current mask last
    plain: bool  # stores need no select (frame top level)
    temps: frozenset  # block temporaries (plain stores) of the current block
    loop: tuple | None  # (index of the loop mask, index of the iteration mask) in chain
    frame: Frame
    private_plain: bool = True  # loop counters stored without select (not in a streamed prologue)
    renames: dict | None = None  # a branch computed into temporaries: local -> its temporary
    whole: bool = False  # the mask is the frame's live lanes (a lockstep loop): stores need no select

    @property
    def mask(self) -> str:
        return self.chain[-1]


# ----------------------------------------------------------------------------- emitter


def _unsafe_unevaluated(fn, fdef) -> str | None:
    """What of ``fn``'s own body must not run for lanes Python would not call it for."""
    for node in ast.walk(fdef):
        if isinstance(node, (ast.While, ast.For)):
            return "loops"
        if isinstance(node, (ast.Raise, ast.Assert)):
            return "may raise"
    return None


class _Emitter(RowsAndScans):
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
    def prepare(self, fn, fdef) -> ast.FunctionDef:
        """The desugared copy of ``fdef`` (for -> while, augmented assignments)."""
        a = fdef.args
        if a.vararg or a.kwarg or a.kwonlyargs or a.posonlyargs:
            raise Unsupported(f"{fn.__qualname__} has *args, **kwargs, keyword-only or positional-only parameters")
        fdef = Desugar(fn).visit(copy.deepcopy(fdef))
        ast.fix_missing_locations(fdef)
        for node in ast.walk(fdef):
            if isinstance(node, (ast.Global, ast.Nonlocal)):
                raise Unsupported(f"{fn.__qualname__} declares global/nonlocal names")
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)) and node is not fdef:
                raise Unsupported(f"{fn.__qualname__} defines a function or class inside the lane")
        return fdef

    def new_frame(self, fn, fdef, prefix, alive, base) -> Frame:
        frame = Frame(fn, prefix, local_names(fdef), alive, base)
        for node in ast.walk(fdef):
            if isinstance(node, ast.Name) and node.id in frame.locals:
                frame.counts[node.id] = frame.counts.get(node.id, 0) + 1
        return frame

    # -- statements
    def block(self, stmts, ctx: Ctx) -> bool:
        """Emit ``stmts``; True if the block ends in an unconditional exit."""
        for stmt in stmts:
            if self.statement(stmt, ctx):
                return True
        return False

    def statement(self, stmt, ctx: Ctx) -> bool:
        fn = ctx.frame.fn
        where = source_line(fn, stmt)
        if isinstance(stmt, ast.Assign):
            self.assign(stmt, ctx)
        elif isinstance(stmt, ast.If):
            self.if_(stmt, ctx)
        elif isinstance(stmt, ast.While):
            self.while_(stmt, ctx)
        elif isinstance(stmt, ast.Return):
            self.return_(stmt, ctx)
            return True
        elif isinstance(stmt, ast.Break):
            if ctx.loop is None:
                raise Unsupported(f"break outside a loop at {where}")
            self.exit(ctx, ctx.loop[0])
            return True
        elif isinstance(stmt, ast.Continue):
            if ctx.loop is None:
                raise Unsupported(f"continue outside a loop at {where}")
            self.exit(ctx, ctx.loop[1])
            return True
        elif isinstance(stmt, ast.Raise):  # the group fails; the host replays it (spmd.failure)
            self.emit(f"m_raise({ctx.mask})  # raise at {where}")
            self.exit(ctx, ctx.frame.base)
            return True
        elif isinstance(stmt, ast.Assert):  # the message is built by the replay, never here
            if not sys.flags.optimize:  # python -O: Numba's lane has no assert either
                test = self.value(stmt.test, ctx)
                self.emit(f"m_raise(m_andnot({ctx.mask}, m_truth({test})))  # assert at {where}")
        elif isinstance(stmt, ast.Pass):
            pass
        elif isinstance(stmt, ast.Expr):
            if not isinstance(stmt.value, ast.Constant):  # a docstring is fine; a call may have effects
                raise Unsupported(f"the expression statement `{ast.unparse(stmt)}` at {where}")
        else:
            raise Unsupported(f"the statement `{type(stmt).__name__.lower()}` at {where}")
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

    def assign(self, stmt: ast.Assign, ctx: Ctx) -> None:
        value = self.value(stmt.value, ctx, allow_tuple=True)
        targets = stmt.targets
        if len(targets) > 1 or isinstance(value, Tup) and len(targets) == 1 and not isinstance(targets[0], ast.Name):
            value = self.materialise(value)  # evaluated once, stored to each target
        for target in targets:
            self.assign_target(target, value, ctx)

    def materialise(self, value):
        if isinstance(value, Tup):
            return Tup(tuple(self.materialise(v) for v in value.items))
        if value.isidentifier():
            return value
        tmp = self.fresh("t")
        self.emit(f"{tmp} = {value}")
        return tmp

    def assign_target(self, target, value, ctx: Ctx) -> None:
        where = source_line(ctx.frame.fn, target)
        if isinstance(target, ast.Name):
            if target.id in ctx.frame.rows or target.id in ctx.frame.tuples:
                held = "an array" if target.id in ctx.frame.rows else "a tuple"
                raise Unsupported(f"assigning to {target.id!r}, which holds {held}, at {where}")
            if isinstance(value, Tup):
                self.store_tuple(target.id, value, ctx, where)
            else:
                self.store(target.id, value, ctx)
        elif isinstance(target, (ast.Tuple, ast.List)):
            if not isinstance(value, Tup) or len(value.items) != len(target.elts):
                raise Unsupported(f"unpacking {ast.unparse(target)} at {where} from a value that is not "
                                  "a tuple of the same length")
            if any(isinstance(t, ast.Starred) for t in target.elts):
                raise Unsupported(f"starred unpacking at {where}")
            value = self.materialise(value)  # all right-hand sides before any store
            for t, v in zip(target.elts, value.items):
                self.assign_target(t, v, ctx)
        elif isinstance(target, ast.Subscript) and self.row(target.value, ctx) is not None:
            raise Unsupported(f"writing into the array {target.value.id!r} at {where} (rows are read-only "
                              "on the SPMD path)")
        else:
            raise Unsupported(f"assignment to {ast.unparse(target)} at {where} (only local variables)")

    def if_(self, stmt: ast.If, ctx: Ctx) -> None:
        test = self.value(stmt.test, ctx)
        t = self.fresh("c")
        self.emit(f"{t} = m_truth({test})")
        m_then, m_else = self.fresh("m"), self.fresh("m")
        self.emit(f"{m_then} = m_and({ctx.mask}, {t})")
        if stmt.orelse:
            self.emit(f"{m_else} = m_andnot({ctx.mask}, {t})")
        if flat_branch(stmt.body) and flat_branch(stmt.orelse):
            self.merged_if(stmt, ctx, t, m_then, m_else)
            return
        for body, mask in ((stmt.body, m_then), (stmt.orelse, m_else)):
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

    def merged_if(self, stmt: ast.If, ctx: Ctx, test: str, m_then: str, m_else: str) -> None:
        """Both branches computed from the values before the ``if`` (each into its
        own temporaries), then one select per variable: the branches no longer
        wait for each other.  A variable both branches assign is chosen by the
        test, then kept outside the mask: two selects instead of two masks and
        two selects (Collatz's ``n = n // 2 if even else 3 * n + 1``: 0.43x ->
        0.37x Numba)."""
        branches = []
        for body in (stmt.body, stmt.orelse):
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

    def while_(self, stmt: ast.While, ctx: Ctx) -> None:
        frame = ctx.frame
        lmask, bmask = self.fresh("L"), self.fresh("B")
        self.emit(f"{lmask} = {ctx.mask}")
        self.emit("while True:")
        self.indent += 1
        loop_ctx = Ctx(ctx.chain + (lmask,), False, frozenset(), ctx.loop, frame)
        test = self.value(stmt.test, loop_ctx)  # helper calls in the test run under the loop mask
        lockstep = ((ctx.plain or ctx.whole) and ctx.renames is None
                    and lockstep_loop(stmt, frame.uniform, frame.locals, set(frame.rows)))
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

    def return_(self, stmt: ast.Return, ctx: Ctx) -> None:
        frame = ctx.frame
        where = source_line(frame.fn, stmt)
        if stmt.value is None:
            raise Unsupported(f"a return without a value at {where}")
        value = self.value(stmt.value, ctx, allow_tuple=True)
        shape = shape_of(value)
        if frame.shape == "unknown":
            frame.shape = shape
            frame.slots = [self.fresh("r") for _ in leaves_of(value)]
            self.declare(frame.slots)
        elif frame.shape != shape:
            raise Unsupported(f"returns of different tuple structures ({where})")
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

    # -- expressions
    def value(self, node, ctx: Ctx, allow_tuple: bool = False, guarded: bool = False):
        fn = ctx.frame.fn
        where = source_line(fn, node)
        if isinstance(node, ast.Constant):
            return self.constant(node.value, where)
        if isinstance(node, ast.Name):
            self.refuse_row(node, ctx, "used as a value")
            out = self.name(node.id, ctx, where)
            if isinstance(out, Tup) and not allow_tuple:
                raise Unsupported(f"the tuple {node.id!r} used as a value at {where}")
            return out
        if isinstance(node, ast.Attribute):
            row = self.row(node.value, ctx)
            if row is not None and node.attr == "size":  # a 1-D row: its size is its length
                return row.length
            if isinstance(node.value, ast.Name):
                self.refuse_row(node.value, ctx, f"used as `{ast.unparse(node)}`")
            return self.constant(self.resolve(node, ctx), where)
        if isinstance(node, ast.BinOp):
            op = _BINOPS.get(type(node.op))
            if op is None:
                raise Unsupported(f"the operator {type(node.op).__name__} at {where}")
            left, right = self.value(node.left, ctx, guarded=guarded), self.value(node.right, ctx, guarded=guarded)
            return f"{op}({left}, {right})"
        if isinstance(node, ast.UnaryOp):
            return f"{_UNARY[type(node.op)]}({self.value(node.operand, ctx, guarded=guarded)})"
        if isinstance(node, ast.Compare):
            parts = []
            left = self.value(node.left, ctx, guarded=guarded)
            for op, right_node in zip(node.ops, node.comparators):
                name = _CMPOPS.get(type(op))
                if name is None:
                    raise Unsupported(f"the comparison {type(op).__name__} at {where}")
                right = self.value(right_node, ctx, guarded=True if parts else guarded)
                if len(node.ops) > 1:
                    right = self.materialise(right)
                parts.append(f"{name}({left}, {right})")
                left = right
            out = parts[0]
            for p in parts[1:]:
                out = f"m_and({out}, {p})"
            return out
        if isinstance(node, ast.BoolOp):
            out = self.value(node.values[0], ctx, guarded=guarded)
            for v in node.values[1:]:
                rhs = self.value(v, ctx, guarded=True)
                out = self.materialise(out)
                if isinstance(node.op, ast.And):  # a and b: b if a is true else a
                    out = f"v_select(m_truth({out}), {rhs}, {out})"
                else:
                    out = f"v_select(m_truth({out}), {out}, {rhs})"
            return out
        if isinstance(node, ast.IfExp):
            test = self.value(node.test, ctx, guarded=guarded)
            return (f"v_select(m_truth({test}), {self.value(node.body, ctx, guarded=True)}, "
                    f"{self.value(node.orelse, ctx, guarded=True)})")
        if isinstance(node, ast.Call):
            return self.call(node, ctx, allow_tuple, guarded)
        if isinstance(node, ast.Tuple):
            if not allow_tuple:
                raise Unsupported(f"a tuple used as a value at {where}")
            return Tup(tuple(self.value(e, ctx, allow_tuple=True, guarded=guarded) for e in node.elts))
        if isinstance(node, ast.Subscript):
            return self.subscript(node, ctx, allow_tuple, guarded)
        raise Unsupported(f"the expression `{ast.unparse(node)}` ({type(node).__name__}) at {where}")

    def name(self, name: str, ctx: Ctx, where: str) -> str:
        frame = ctx.frame
        if ctx.renames and name in ctx.renames:
            return ctx.renames[name]
        if name in frame.tuples:
            return frame.tuples[name]
        if name in frame.locals:
            return frame.name(name)
        if name.startswith("_lw_"):
            return name
        return self.constant(self.lookup(name, frame, where), where)

    def lookup(self, name: str, frame: Frame, where: str):
        fn = frame.fn
        code = fn.__code__
        if name in code.co_freevars:
            cell = fn.__closure__[code.co_freevars.index(name)]
            try:
                return cell.cell_contents
            except ValueError:
                raise Unsupported(f"{name!r} is not bound yet at {where}") from None
        if name in fn.__globals__:
            return fn.__globals__[name]
        if hasattr(builtins, name):
            return getattr(builtins, name)
        raise Unsupported(f"the name {name!r} at {where} is not defined")

    def resolve(self, node, ctx: Ctx):
        """The object an attribute chain (``math.pi``, ``np.float32``) refers to."""
        where = source_line(ctx.frame.fn, node)
        if isinstance(node, ast.Name):
            if node.id in ctx.frame.locals:
                raise Unsupported(f"an attribute of the variable {node.id!r} at {where}")
            return self.lookup(node.id, ctx.frame, where)
        if isinstance(node, ast.Attribute):
            base = self.resolve(node.value, ctx)
            if not isinstance(base, types.ModuleType):
                raise Unsupported(f"the attribute {ast.unparse(node)} at {where}")
            try:
                return getattr(base, node.attr)
            except AttributeError:
                raise Unsupported(f"{ast.unparse(node)} does not exist ({where})") from None
        raise Unsupported(f"the expression {ast.unparse(node)} at {where}")

    def constant(self, value, where: str) -> str:
        """A global/closure/literal value as source text (Numba sees it as a constant)."""
        if value is None:  # a value nothing computes with (a scan's ys); Numba refuses any other use
            return "None"
        if isinstance(value, (bool, np.bool_)):
            return repr(bool(value))
        if isinstance(value, int) and not isinstance(value, bool):
            if not -(1 << 63) <= value < (1 << 63):
                raise Unsupported(f"the integer {value} at {where} does not fit in 64 bits")
            return repr(value)
        if isinstance(value, float):
            return _float_text(value)
        if isinstance(value, np.generic) and value.dtype.kind in "iuf" and value.shape == ():
            inner = _float_text(float(value)) if value.dtype.kind == "f" else repr(int(value))
            return f"np.{value.dtype.name}({inner})"
        raise Unsupported(f"the value {value!r} at {where} (only int, float and bool constants, "
                          "and calls of math functions)")

    # -- calls
    def call(self, node: ast.Call, ctx: Ctx, allow_tuple: bool, guarded: bool):
        where = source_line(ctx.frame.fn, node)
        if any(isinstance(a, ast.Starred) for a in node.args) or any(k.arg is None for k in node.keywords):
            raise Unsupported(f"a call with * or ** arguments at {where}")
        if isinstance(node.func, ast.Name) and node.func.id == "_lw_range":
            args = [self.value(a, ctx, guarded=guarded) for a in node.args]
            return f"v_range({', '.join(args)})"
        target = self.resolve(node.func, ctx)
        passed = getattr(target, "_lw_spmd_passes", None)
        if passed is not None:  # a check the scalar typing of the lane made already (lw.grad's)
            return self.value(node.args[passed], ctx, allow_tuple=allow_tuple, guarded=guarded)
        if getattr(target, "_lw_spmd_zero", False):  # a zero tangent: lanes hold scalars here
            return "0.0"
        if is_scan(target):
            return self.scan(node, ctx, allow_tuple, guarded)
        length = self.builtin_len(target, node, ctx)
        if length is not None:
            return length
        twin = getattr(target, "_lw_spmd_twin", None)
        if twin is not None:
            return self.twin_call(node, twin, ctx, allow_tuple, guarded, where)
        for a in [*node.args, *(k.value for k in node.keywords)]:
            self.refuse_row(a, ctx, f"passed to {ast.unparse(node.func)}")
        helper = helper_function(target)
        if helper is not None:
            return self.inline(helper, node, ctx, allow_tuple, guarded)
        ref = self.function_ref(target, f"{ast.unparse(node)} at {where}")
        if node.keywords:
            raise Unsupported(f"keyword arguments to {ast.unparse(node.func)} at {where}")
        args = [self.value(a, ctx, guarded=guarded) for a in node.args]
        if not 1 <= len(args) <= 4:
            raise Unsupported(f"{ast.unparse(node.func)} called with {len(args)} arguments at {where}")
        return f"v_call{len(args)}({ref}, {', '.join(args)})"

    def twin_call(self, node: ast.Call, twin, ctx: Ctx, allow_tuple: bool, guarded: bool, where: str):
        """A call of a function with a W-wide twin (``_lw_spmd_twin``: lw.random's
        draws): the twin, lane by lane, with each key passed as its two words."""
        module, function, params, n_results = twin
        what = f"{ast.unparse(node.func)} at {where}"
        bound = bind_arguments(node, [p for p, _, _ in params], what)
        args = []
        for name, kind, default in params:
            arg = bound.get(name)
            if arg is None and default is None:
                raise Unsupported(f"the arguments of {what} ({name} is missing)")
            if arg is None:
                args.append(self.constant(default, where))
            elif kind == "key":
                args += self.key_words(arg, ctx, guarded, where)
            else:
                args.append(self.value(arg, ctx, guarded=guarded))
        call = f"v_call{len(args)}({TWIN_MODULES[module]}.{function}, {', '.join(args)})"
        if n_results == 1:
            return call
        if not allow_tuple:
            raise Unsupported(f"the tuple {what} gives, used as a value")
        result = self.materialise(call)
        return Tup(tuple(f"{result}[{k}]" for k in range(n_results)))

    def key_words(self, arg, ctx: Ctx, guarded: bool, where: str) -> list[str]:
        """The two words of a key: a tuple value's items, or a row's (or table's) first two elements."""
        if self.row(arg, ctx) is not None:
            return [self.value(ast.copy_location(ast.Subscript(arg, ast.Constant(k), ast.Load()), arg), ctx,
                               guarded=guarded) for k in (0, 1)]
        value = self.value(arg, ctx, allow_tuple=True, guarded=guarded)
        if isinstance(value, Tup) and len(value.items) == 2 and not any(isinstance(v, Tup) for v in value.items):
            return list(value.items)
        raise Unsupported(f"the key `{ast.unparse(arg)}` at {where} (a tuple of two words or a 1-D row)")

    def function_ref(self, obj, call: str) -> str:
        """How the generated module names a scalar function the lane calls
        (``call``: the call's source and place, for messages)."""
        from .. import lanemath  # registers its overloads

        obj = lanemath.replacement(obj) if self.vector_math else lanemath.corrected(obj)
        name = getattr(obj, "__name__", None)
        if name and lanemath.FUNCTIONS.get(name) is obj:
            return f"lanemath.{name}"
        if any(obj is f for f in (*lanemath.CORRECTIONS.values(), *lanemath.BUILTIN_CORRECTIONS.values())):
            return f"{obj.__module__.removeprefix('lanewise.')}.{name}"  # np.power without vector math, round
        if name in _BUILTINS and getattr(builtins, name) is obj:
            return name
        if name and getattr(math, name, None) is obj and callable(obj):
            return f"math.{name}"
        if name and getattr(np, name, None) is obj and isinstance(obj, (np.ufunc, type)):
            if isinstance(obj, type) and not issubclass(obj, np.generic):
                raise Unsupported(f"the call {call}")
            return f"np.{name}"
        raise Unsupported(f"the call {call} (only math/NumPy scalar functions, builtins and plain "
                          "Python helpers are vectorised)")

    def inline(self, fn, node: ast.Call, ctx: Ctx, allow_tuple: bool, guarded: bool):
        where = source_line(ctx.frame.fn, node)
        fdef = self.prepare(fn, function_ast(fn))
        what = first_in_helpers(fn, set(), _unsafe_unevaluated) if guarded else None
        if what:  # its body runs in every lane of the mask, not only those Python would call it for
            raise Unsupported(f"{fn.__qualname__}, which {what}, is called at {where} in a position "
                              "Python may not evaluate (after and/or, in a conditional expression)")
        # arguments, evaluated in the caller
        params = [a.arg for a in fdef.args.args]
        if len(node.args) > len(params):
            raise Unsupported(f"{fn.__qualname__} called with too many arguments at {where}")
        bound = {}
        for p, a in zip(params, node.args):
            bound[p] = self.value(a, ctx, allow_tuple=True, guarded=guarded)
        for k in node.keywords:
            if k.arg not in params or k.arg in bound:
                raise Unsupported(f"bad keyword argument {k.arg!r} to {fn.__qualname__} at {where}")
            bound[k.arg] = self.value(k.value, ctx, allow_tuple=True, guarded=guarded)
        return self.inline_bound(fn, fdef, bound, ctx, allow_tuple, where)

    def inline_values(self, fn, values, ctx: Ctx, allow_tuple: bool, where: str):
        """``fn(*values)`` inlined, ``values`` already evaluated (lw.scan's step)."""
        fdef = self.prepare(fn, function_ast(fn))
        params = [a.arg for a in fdef.args.args]
        if len(values) > len(params):
            raise Unsupported(f"{fn.__qualname__} takes fewer than {len(values)} arguments (at {where})")
        return self.inline_bound(fn, fdef, dict(zip(params, values)), ctx, allow_tuple, where)

    def inline_bound(self, fn, fdef, bound: dict, ctx: Ctx, allow_tuple: bool, where: str):
        """The inlined body of ``fn`` with its parameters bound to values (tuples included)."""
        if fn in self.stack:
            raise Unsupported(f"recursion: {fn.__qualname__} calls itself (at {where})")
        if len(self.stack) >= _MAX_INLINE_DEPTH:
            raise Unsupported(f"helpers nested deeper than {_MAX_INLINE_DEPTH} calls at {where}")
        params = [a.arg for a in fdef.args.args]
        defaults = dict(zip(params[len(params) - len(fdef.args.defaults):], fn.__defaults__ or ()))
        self.n_helpers += 1
        self.inlined.append(fn)
        prefix = f"h{self.n_helpers}_"
        alive = f"_lw_h{self.n_helpers}_alive"
        self.emit(f"{alive} = {ctx.mask}")
        frame = self.new_frame(fn, fdef, prefix, alive, len(ctx.chain))
        frame.uniform = uniform_names(fdef, set(), set())  # its parameters: varying, for all it knows
        for p in params:
            if p in bound:
                v = bound[p]
            elif p in defaults:
                v = self.constant(defaults[p], where)
            else:
                raise Unsupported(f"{fn.__qualname__} called without argument {p!r} at {where}")
            if isinstance(v, Tup):
                frame.tuples[p] = self.bind_tuple(v)
            else:
                self.emit(f"{frame.name(p)} = {v}")
        self.stack.append(fn)
        inner = Ctx(ctx.chain + (alive,), True, frozenset(), None, frame)
        declared_at = len(self.lines)  # after the parameters' assignments
        saved, self.pending_declarations = self.pending_declarations, []
        self.block(fdef.body, inner)
        self.stack.pop()
        if frame.shape == "unknown":
            raise Unsupported(f"{fn.__qualname__} never returns a value")
        decls = [f"{n} = v_undef()" for n in self.pending_declarations
                 + sorted(frame.selected - {frame.name(p) for p in params})]
        self.lines[declared_at:declared_at] = ["    " * self.indent + d for d in decls]
        self.pending_declarations = saved
        # a slot only ever None is the value None (so that a caller can tell)
        result = rebuild(frame.shape, ["None" if s in frame.nones - frame.valued else s for s in frame.slots])
        if isinstance(result, Tup) and not allow_tuple:
            raise Unsupported(f"{fn.__qualname__} returns a tuple, used as a value at {where}")
        return result


#: Modules of W-wide twins (``_lw_spmd_twin``), with the name the generated code gives them.
TWIN_MODULES = {"lanewise.random.spmd": "lw_random"}


def _float_text(value: float) -> str:
    if math.isnan(value):
        return "math.nan" if math.copysign(1.0, value) > 0 else "(-math.nan)"
    if math.isinf(value):
        return "math.inf" if value > 0 else "(-math.inf)"
    return repr(value)


def start(fn, params, width, vector_math):
    """Emitter, desugared definition, parameter names and the lane's frame."""
    if vector_math is None:
        vector_math = config.vector_math
    em = _Emitter(width, vector_math)
    em.pending_declarations = []
    fdef = em.prepare(fn, function_ast(fn))
    names = [a.arg for a in fdef.args.args]
    if len(params) != len(names):
        raise Unsupported(f"the lane takes {len(names)} parameters, the call binds {len(params)}")
    frame = em.new_frame(fn, fdef, "l_", "_lw_alive", 0)
    em.stack.append(fn)
    return em, fdef, names, frame


def defaults(em, fn, fdef, names, params, frame) -> list[str]:
    defaults = dict(zip(names[len(names) - len(fdef.args.defaults):], fn.__defaults__ or ()))
    out = []
    for name, kind in zip(names, params):
        if kind == "default":
            if name not in defaults:
                raise Unsupported(f"parameter {name!r} is neither passed nor defaulted")
            out.append(f"    {frame.name(name)} = {em.constant(defaults[name], source_line(fn, fdef))}")
    return out


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
    em, fdef, names, frame = start(fn, params, width, vector_math)
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
    head += defaults(em, fn, fdef, names, params, frame)
    frame.uniform = uniform_names(fdef, {n for n, k in zip(names, params) if k in ("uniform", "default")},
                                  set(frame.rows))
    em.block(fdef.body, Ctx(("_lw_alive",), True, frozenset(), None, frame))
    slots, inits, decls = finish(frame, results, names)
    outs = [f"_lw_o{j}" for j in range(len(results))]
    tail = [f"    vstore({o}, {slot})" for o, slot in zip(outs, slots)]
    lines = [f"def {FUNCTION}({', '.join(args + outs)}):",
             f'    """W-wide {fn.__qualname__} ({width} lanes, SPMD on SIMD)."""',
             *head, *inits, *decls, *em.lines, *tail]
    return "\n".join(lines) + "\n"
