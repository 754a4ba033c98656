"""The expressions and calls of a lane in W-wide form (the emitter's half that
computes values; :mod:`.transform` emits the statements).

Every value is source text: a uniform scalar or a :class:`~lanewise.spmd.vector.Vec`
expression (:func:`~lanewise.spmd.vector.v_add` and the like accept both), or a
:class:`~lanewise.spmd.syntax.Tup` of them.  Calls of plain Python helpers are
inlined with their own masks; calls of math/NumPy/builtin scalar functions run
lane by lane (``v_callN``); lw.random's draws call their W-wide twins.

Example:
    >>> from lanewise.spmd.transform import transform
    >>> def lane(x):
    ...     return abs(x) + 1.0
    >>> "v_call1(abs, " in transform(lane, ("varying",), (((), "float64"),), 8)
    True
"""

from __future__ import annotations

import ast
import builtins
import math
import types

import numpy as np

from .arrays import RowsAndScans, is_scan
from .frames import Ctx, Frame
from .syntax import (Tup, Unsupported, bind_arguments, first_in_helpers, function_ast, helper_function, rebuild,
                     source_line)
from .uniform import lockstep_loops

_MAX_INLINE_DEPTH = 8

_BINOPS = {ast.Add: "v_add", ast.Sub: "v_sub", ast.Mult: "v_mul", ast.Div: "v_truediv",
           ast.FloorDiv: "v_floordiv", ast.Mod: "v_mod", ast.Pow: "v_pow", ast.LShift: "v_lshift",
           ast.RShift: "v_rshift", ast.BitAnd: "v_bitand", ast.BitOr: "v_bitor", ast.BitXor: "v_bitxor"}
_CMPOPS = {ast.Lt: "v_lt", ast.LtE: "v_le", ast.Gt: "v_gt", ast.GtE: "v_ge", ast.Eq: "v_eq", ast.NotEq: "v_ne"}
_UNARY = {ast.USub: "v_neg", ast.UAdd: "v_pos", ast.Invert: "v_invert", ast.Not: "m_not"}

#: Builtins a lane may call lane by lane (Numba implements them for scalars).
_BUILTINS = {"abs", "min", "max", "int", "float", "bool", "round", "pow"}


#: Modules of W-wide twins (``_lw_spmd_twin``), with the name the generated code gives them.
TWIN_MODULES = {"lanewise.random.spmd": "lw_random"}


def _float_text(value: float) -> str:
    if math.isnan(value):
        return "math.nan" if math.copysign(1.0, value) > 0 else "(-math.nan)"
    if math.isinf(value):
        return "math.inf" if value > 0 else "(-math.inf)"
    return repr(value)


def _unsafe_unevaluated(fn, fdef) -> str | None:
    """What of ``fn``'s own body must not run for lanes Python would not call it for."""
    for node in ast.walk(fdef):
        if isinstance(node, (ast.While, ast.For)):
            return "loops"
        if isinstance(node, (ast.Raise, ast.Assert)):
            return "may raise"
    return None



class Expressions(RowsAndScans):
    """Values, names, constants and calls (inlined helpers included) of the W-wide
    emitter; its statements, frames and masks are ``transform._Emitter``'s."""

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
        frame.lockstep = lockstep_loops(fn, fdef, set(), set())  # its parameters: varying, for all it knows
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
