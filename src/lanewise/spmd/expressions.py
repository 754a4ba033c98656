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

import builtins
import math
import sys
import types

import numpy as np

from ..lane.ir import nodes as ir
from ..lane.ir.passes import unbound
from ..lane.ir.passes.reach import falls_through
from ..lane.ir.unparse import callee_text, python_text
from .arrays import RowsAndScans, is_scan
from .desugar import prepared
from .frames import Ctx, Frame
from .syntax import (Tup, Unsupported, bind_arguments, call_args, first_in_helpers, helper_function, is_call, rebuild,
                     where)
from .uniform import lockstep_loops

_MAX_INLINE_DEPTH = 8

_BINOPS = {"add": "v_add", "sub": "v_sub", "mul": "v_mul", "truediv": "v_truediv", "floordiv": "v_floordiv",
           "mod": "v_mod", "pow": "v_pow", "lshift": "v_lshift", "rshift": "v_rshift", "bitand": "v_bitand",
           "bitor": "v_bitor", "bitxor": "v_bitxor"}
_CMPOPS = {"lt": "v_lt", "le": "v_le", "gt": "v_gt", "ge": "v_ge", "eq": "v_eq", "ne": "v_ne"}
_UNARY = {"neg": "v_neg", "pos": "v_pos", "invert": "v_invert", "not": "m_not"}
#: Python's names for the operators and expressions the emitter refuses (its messages name them so).
_PYTHON_NAMES = {"matmul": "MatMult", "is": "Is", "isnot": "IsNot", "in": "In", "notin": "NotIn", "list": "List",
                 "set": "Set", "dict": "Dict", "slice": "Slice", "star": "Starred", "fstring": "JoinedStr",
                 "format": "FormattedValue", "walrus": "NamedExpr"}
_COMPS = {"list": "ListComp", "set": "SetComp", "dict": "DictComp", "genexp": "GeneratorExp"}
#: The front end's short names of modules (a dotted global's first names), back to the modules.
_MODULES = (("lw.random", "lanewise.random"), ("lw", "lanewise"), ("np", "numpy"))

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


def _unsafe_unevaluated(fn, function: ir.Function) -> str | None:
    """What of ``fn``'s own body must not run for lanes Python would not call it for
    (the outermost first, as Python's syntax tree lists them)."""
    level = list(function.body)
    while level:
        for s in level:
            if isinstance(s, ir.Loop):
                return "loops"
            if isinstance(s, (ir.Raise, ir.Assert)):
                return "may raise"
        level = [c for s in level for c in _substatements(s)]
    return None


def _substatements(s) -> tuple:
    if isinstance(s, ir.If):
        return s.then + s.orelse
    if isinstance(s, ir.Loop):
        return s.body + s.orelse
    if isinstance(s, ir.Try):
        return (*s.body, *(c for h in s.handlers for c in h.body), *s.orelse, *s.final)
    return ()


def _kind_name(e) -> str:
    """The name Python's syntax tree gives the expression ``e`` (for messages)."""
    if isinstance(e, ir.Comp):
        return _COMPS[e.kind]
    if isinstance(e, ir.Lambda):
        return "Lambda"
    if isinstance(e, ir.Prim):
        return _PYTHON_NAMES.get(e.op, "Call" if is_call(e) else e.op)
    return getattr(e, "what", type(e).__name__)


class Expressions(RowsAndScans):
    """Values, names, constants and calls (inlined helpers included) of the W-wide
    emitter; its statements, frames and masks are ``transform._Emitter``'s.  ``at``: the
    place of the nearest node around ``node`` that has one (names and constants have none)."""

    def value(self, node, ctx: Ctx, allow_tuple: bool = False, guarded: bool = False, at: ir.Loc = None):
        at = getattr(node, "loc", at)
        here = where(at)
        if isinstance(node, ir.Const):
            return self.constant(node.value, here)
        if isinstance(node, ir.Var) or (isinstance(node, ir.Global) and "." not in node.name):
            self.refuse_row(node, ctx, "used as a value", at)
            out = self.name(node.name, ctx, here)
            if isinstance(out, Tup) and not allow_tuple:
                raise Unsupported(f"the tuple {node.name!r} used as a value at {here}")
            return out
        if isinstance(node, ir.Global):  # a module's attribute (np.pi)
            return self.constant(self.resolve(node, ctx, at), here)
        if isinstance(node, ir.Prim) and node.op == unbound.CHECK:
            return self.unbound_check(node, ctx, guarded, at)
        if not isinstance(node, ir.Prim) or is_call(node):
            if isinstance(node, ir.Prim):
                return self.call(node, ctx, allow_tuple, guarded)
            raise Unsupported(f"the expression `{python_text(node)}` ({_kind_name(node)}) at {here}")
        op = node.op
        if op == "attr":
            base = node.args[0]
            row = self.row(base, ctx)
            if row is not None and dict(node.params)["name"] == "size":  # a 1-D row: its size is its length
                return row.length
            if isinstance(base, ir.Var):
                self.refuse_row(base, ctx, f"used as `{python_text(node)}`", at)
            return self.constant(self.resolve(node, ctx, at), here)
        if op in _BINOPS or op == "matmul":
            if op == "matmul":
                raise Unsupported(f"the operator MatMult at {here}")
            left = self.value(node.args[0], ctx, guarded=guarded, at=at)
            right = self.value(node.args[1], ctx, guarded=guarded, at=at)
            return f"{_BINOPS[op]}({left}, {right})"
        if op in _UNARY:
            return f"{_UNARY[op]}({self.value(node.args[0], ctx, guarded=guarded, at=at)})"
        if op in _CMPOPS or op in ("is", "isnot", "in", "notin") or (op == "and" and dict(node.params).get("chain")):
            return self.compare(node, ctx, guarded, at)
        if op in ("and", "or"):
            out = self.value(node.args[0], ctx, guarded=guarded, at=at)
            for v in node.args[1:]:
                rhs = self.value(v, ctx, guarded=True, at=at)
                out = self.materialise(out)
                if op == "and":  # a and b: b if a is true else a
                    out = f"v_select(m_truth({out}), {rhs}, {out})"
                else:
                    out = f"v_select(m_truth({out}), {out}, {rhs})"
            return out
        if op == "ifexp":
            test, body, orelse = node.args
            test = self.value(test, ctx, guarded=guarded, at=at)
            return (f"v_select(m_truth({test}), {self.value(body, ctx, guarded=True, at=at)}, "
                    f"{self.value(orelse, ctx, guarded=True, at=at)})")
        if op == "tuple":
            if not allow_tuple:
                raise Unsupported(f"a tuple used as a value at {here}")
            return Tup(tuple(self.value(e, ctx, allow_tuple=True, guarded=guarded, at=at) for e in node.args))
        if op == "getitem":
            return self.subscript(node, ctx, allow_tuple, guarded)
        raise Unsupported(f"the expression `{python_text(node)}` ({_kind_name(node)}) at {here}")

    def unbound_check(self, node: ir.Prim, ctx: Ctx, guarded: bool, at: ir.Loc) -> str:
        """A read of a local that may be unbound (lane.ir.passes.unbound): the group fails
        where a lane of the mask reads it unbound, and the host replays the group for
        Python's error.  Where Python may not evaluate the read (``a and y``) the W-wide
        lane has no mask of the lanes that do: the scalar path checks it."""
        if guarded:
            raise Unsupported(f"a local that may be unbound read where Python may not evaluate it at {where(at)}")
        var, bound, _ = node.args
        value = self.value(var, ctx, at=at)
        self.emit(f"m_raise(m_andnot({ctx.mask}, m_truth({self.value(bound, ctx, at=at)})))"
                  f"  # {var.name} may be unbound at {where(at)}")
        return value

    def compare(self, node: ir.Prim, ctx: Ctx, guarded: bool, at: ir.Loc) -> str:
        """``a < b`` or a chain ``a < b <= c`` (each operand evaluated once, those after
        the first comparison only where Python evaluates them)."""
        pairs = node.args if node.op == "and" else (node,)
        parts = []
        left = self.value(pairs[0].args[0], ctx, guarded=guarded, at=at)
        for pair in pairs:
            name = _CMPOPS.get(pair.op)
            if name is None:
                raise Unsupported(f"the comparison {_PYTHON_NAMES[pair.op]} at {where(at)}")
            right = self.value(pair.args[1], ctx, guarded=True if parts else guarded, at=at)
            if len(pairs) > 1:
                right = self.materialise(right)
            parts.append(f"{name}({left}, {right})")
            left = right
        out = parts[0]
        for p in parts[1:]:
            out = f"m_and({out}, {p})"
        return out

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

    def resolve(self, node, ctx: Ctx, at: ir.Loc):
        """The object a name or attribute chain (``math.pi``, ``np.float32``) refers to."""
        here = where(getattr(node, "loc", at))
        if isinstance(node, ir.Var):
            raise Unsupported(f"an attribute of the variable {node.name!r} at {here}")
        if isinstance(node, ir.Global) and "." not in node.name:
            return self.lookup(node.name, ctx.frame, here)
        if isinstance(node, ir.Global):  # a module's attribute: its module by its short name (np: numpy)
            return self.module_attribute(node.name, here)
        if isinstance(node, ir.Prim) and node.op == "attr" and not is_call(node):
            base = self.resolve(node.args[0], ctx, at)
            if not isinstance(base, types.ModuleType):
                raise Unsupported(f"the attribute {python_text(node)} at {here}")
            try:
                return getattr(base, dict(node.params)["name"])
            except AttributeError:
                raise Unsupported(f"{python_text(node)} does not exist ({here})") from None
        raise Unsupported(f"the expression {python_text(node)} at {here}")

    @staticmethod
    def module_attribute(path: str, here: str):
        """The object at the dotted ``path`` the front end wrote (a module's real name, NumPy
        and lanewise as ``np`` and ``lw``, then attributes, each of a module)."""
        for short, module in _MODULES:
            if path.startswith(short + "."):
                path = module + path[len(short):]
                break
        parts = path.split(".")
        k = next((k for k in range(len(parts) - 1, 0, -1) if ".".join(parts[:k]) in sys.modules), None)
        if k is None:
            raise Unsupported(f"the attribute {path} at {here}")
        obj = sys.modules[".".join(parts[:k])]
        for name in parts[k:]:
            if not isinstance(obj, types.ModuleType):
                raise Unsupported(f"the attribute {path} at {here}")
            try:
                obj = getattr(obj, name)
            except AttributeError:
                raise Unsupported(f"{path} does not exist ({here})") from None
        return obj

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
    def call(self, node: ir.Prim, ctx: Ctx, allow_tuple: bool, guarded: bool):
        here = where(node.loc)
        args = call_args(node)
        if any(isinstance(a, ir.Prim) and a.op == "star" for a in args) or any(k == "**" for k, _ in node.keywords):
            raise Unsupported(f"a call with * or ** arguments at {here}")
        if node.op == "spmd.range":
            values = [self.value(a, ctx, guarded=guarded, at=node.loc) for a in args]
            return f"v_range({', '.join(values)})"
        target = self.callee(node, ctx)
        passed = getattr(target, "_lw_spmd_passes", None)
        if passed is not None:  # a check the scalar typing of the lane made already (lw.grad's)
            return self.value(args[passed], ctx, allow_tuple=allow_tuple, guarded=guarded, at=node.loc)
        if getattr(target, "_lw_spmd_zero", False):  # a zero tangent: lanes hold scalars here
            return "0.0"
        if is_scan(target):
            return self.scan(node, ctx, allow_tuple, guarded)
        length = self.builtin_len(target, node, ctx)
        if length is not None:
            return length
        twin = getattr(target, "_lw_spmd_twin", None)
        if twin is not None:
            return self.twin_call(node, twin, ctx, allow_tuple, guarded, here)
        for a in [*args, *(v for _, v in node.keywords)]:
            self.refuse_row(a, ctx, f"passed to {callee_text(node)}", node.loc)
        helper = helper_function(target)
        if helper is not None:
            return self.inline(helper, node, ctx, allow_tuple, guarded)
        ref = self.function_ref(target, f"{python_text(node)} at {here}")
        if node.keywords:
            raise Unsupported(f"keyword arguments to {callee_text(node)} at {here}")
        values = [self.value(a, ctx, guarded=guarded, at=node.loc) for a in args]
        if not 1 <= len(values) <= 4:
            raise Unsupported(f"{callee_text(node)} called with {len(values)} arguments at {here}")
        return f"v_call{len(values)}({ref}, {', '.join(values)})"

    def callee(self, node: ir.Prim, ctx: Ctx):
        """The object a call calls (a local value's method or a local value: refused)."""
        if node.op == "call" or node.op.startswith("method."):
            base = node.args[0]
            if isinstance(base, ir.Var):
                raise Unsupported(f"an attribute of the variable {base.name!r} at {where(node.loc)}")
            if node.op == "call":
                raise Unsupported(f"the expression {python_text(base)} at {where(node.loc)}")
            return self.resolve(ir.Prim("attr", (base,), node.loc, params=(("name", node.op[len("method."):]),)),
                                ctx, node.loc)
        target = ir.called(node)
        if target is None:
            name = node.op if not node.op.startswith("call:") else callee_text(node)
            if "." in name:
                return self.module_attribute(name, where(node.loc))
            return self.lookup(name, ctx.frame, where(node.loc))
        return target

    def twin_call(self, node: ir.Prim, twin, ctx: Ctx, allow_tuple: bool, guarded: bool, here: str):
        """A call of a function with a W-wide twin (``_lw_spmd_twin``: lw.random's
        draws): the twin, lane by lane, with each key passed as its two words."""
        module, function, params, n_results = twin
        what = f"{callee_text(node)} at {here}"
        bound = bind_arguments(node, [p for p, _, _ in params], what)
        args = []
        for name, kind, default in params:
            arg = bound.get(name)
            if arg is None and default is None:
                raise Unsupported(f"the arguments of {what} ({name} is missing)")
            if arg is None:
                args.append(self.constant(default, here))
            elif kind == "key":
                args += self.key_words(arg, ctx, guarded, node.loc)
            else:
                args.append(self.value(arg, ctx, guarded=guarded, at=node.loc))
        call = f"v_call{len(args)}({TWIN_MODULES[module]}.{function}, {', '.join(args)})"
        if n_results == 1:
            return call
        if not allow_tuple:
            raise Unsupported(f"the tuple {what} gives, used as a value")
        result = self.materialise(call)
        return Tup(tuple(f"{result}[{k}]" for k in range(n_results)))

    def key_words(self, arg, ctx: Ctx, guarded: bool, at: ir.Loc) -> list[str]:
        """The two words of a key: a tuple value's items, or a row's (or table's) first two elements."""
        if self.row(arg, ctx) is not None:
            return [self.value(ir.Prim("getitem", (arg, ir.Const(k, "int")), at), ctx, guarded=guarded)
                    for k in (0, 1)]
        value = self.value(arg, ctx, allow_tuple=True, guarded=guarded, at=at)
        if isinstance(value, Tup) and len(value.items) == 2 and not any(isinstance(v, Tup) for v in value.items):
            return list(value.items)
        raise Unsupported(f"the key `{python_text(arg)}` at {where(at)} (a tuple of two words or a 1-D row)")

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

    def inline(self, fn, node: ir.Prim, ctx: Ctx, allow_tuple: bool, guarded: bool):
        here = where(node.loc)
        function = prepared(fn)
        what = first_in_helpers(fn, set(), _unsafe_unevaluated) if guarded else None
        if what:  # its body runs in every lane of the mask, not only those Python would call it for
            raise Unsupported(f"{fn.__qualname__}, which {what}, is called at {here} in a position "
                              "Python may not evaluate (after and/or, in a conditional expression)")
        # arguments, evaluated in the caller
        params = [p.name for p in function.params]
        args = call_args(node)
        if len(args) > len(params):
            raise Unsupported(f"{fn.__qualname__} called with too many arguments at {here}")
        bound = {}
        for p, a in zip(params, args):
            bound[p] = self.value(a, ctx, allow_tuple=True, guarded=guarded, at=node.loc)
        for k, v in node.keywords:
            if k not in params or k in bound:
                raise Unsupported(f"bad keyword argument {k!r} to {fn.__qualname__} at {here}")
            bound[k] = self.value(v, ctx, allow_tuple=True, guarded=guarded, at=node.loc)
        return self.inline_bound(fn, function, bound, ctx, allow_tuple, here)

    def inline_values(self, fn, values, ctx: Ctx, allow_tuple: bool, where: str):
        """``fn(*values)`` inlined, ``values`` already evaluated (lw.scan's step)."""
        function = prepared(fn)
        params = [p.name for p in function.params]
        if len(values) > len(params):
            raise Unsupported(f"{fn.__qualname__} takes fewer than {len(values)} arguments (at {where})")
        return self.inline_bound(fn, function, dict(zip(params, values)), ctx, allow_tuple, where)

    def inline_bound(self, fn, function: ir.Function, bound: dict, ctx: Ctx, allow_tuple: bool, where: str):
        """The inlined body of ``fn`` with its parameters bound to values (tuples included)."""
        if fn in self.stack:
            raise Unsupported(f"recursion: {fn.__qualname__} calls itself (at {where})")
        if falls_through(function.body):  # Python returns None there, which the scalar path checks
            raise Unsupported(f"{fn.__qualname__} may end without a return (at {where})")
        if len(self.stack) >= _MAX_INLINE_DEPTH:
            raise Unsupported(f"helpers nested deeper than {_MAX_INLINE_DEPTH} calls at {where}")
        params = [p.name for p in function.params]
        n_defaults = sum(p.default is not None for p in function.params)
        defaults = dict(zip(params[len(params) - n_defaults:], fn.__defaults__ or ()))
        self.n_helpers += 1
        self.inlined.append(fn)
        prefix = f"h{self.n_helpers}_"
        alive = f"_lw_h{self.n_helpers}_alive"
        self.emit(f"{alive} = {ctx.mask}")
        frame = self.new_frame(fn, function, prefix, alive, len(ctx.chain))
        frame.lockstep = lockstep_loops(fn, set(), set())  # its parameters: varying, for all it knows
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
        self.block(function.body, inner)
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
