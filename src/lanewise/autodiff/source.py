"""Generated source: turning lines of a transformed lane into a function, and small
text helpers the transformations share.

Example:
    >>> f = build("# demo", "def twice(x):", ["    return 2 * x"], {}, {})
    >>> f(3), "def twice(x):" in f._lw_source
    (6, True)
"""

from __future__ import annotations

import hashlib
import linecache
import re
import types

import builtins
from dataclasses import replace

from ..lane.ir import nodes as ir
from ..lane.ir.passes.walk import mapped, walk
from ..lane.ir.unparse import call_args, callee_text, is_call, python_text
from ..lane.source import LANE_MODULE
from . import intrinsics
from .activity import SYNTAX_OPS


def build(comment: str, header: str, lines: list[str], closure: dict, namespace: dict):
    """A function from generated lines (indented one level), its free names bound to
    ``closure`` and its globals ``namespace`` (the user's module: globals stay live);
    the text is registered with ``linecache`` under a name hashed from it."""
    free = sorted(closure)
    name = header.split("(")[0].removeprefix("def ").strip()
    text = "\n".join([comment, f"def _lw_factory({', '.join(free)}):", f"  {header}"]
                     + ["  " + line for line in lines] + [f"  return {name}"]) + "\n"
    filename = f"<lanewise.autodiff {hashlib.sha256(text.encode()).hexdigest()[:16]}>"
    linecache.cache[filename] = (len(text), None, text.splitlines(True), filename)
    module = compile(text, filename, "exec")
    factory_code = next(c for c in module.co_consts if isinstance(c, types.CodeType))
    made = types.FunctionType(factory_code, namespace, "_lw_factory")(*(closure[n] for n in free))
    made.__module__ = LANE_MODULE
    made._lw_source = text
    return made


def inlinable(fun):
    """``fun`` under a ``__qualname__`` that is an identifier (made once per function).
    Numba names the variables of an inlined function after it and array expressions
    make them parameters: "jvp(f)" failed as "'jvp(f)_v4_r_1' is not a valid parameter
    name"."""
    made = fun.__dict__.get("_lw_inlinable")
    if made is None:
        made = types.FunctionType(fun.__code__, fun.__globals__, fun.__name__, fun.__defaults__, fun.__closure__)
        made.__dict__.update(fun.__dict__)
        made.__kwdefaults__, made.__module__ = fun.__kwdefaults__, fun.__module__
        made.__qualname__ = re.sub(r"\W", "_", fun.__qualname__)
        fun._lw_inlinable = made
    return made


# ----------------------------------------------------------------------------- IR expressions as the emitters read them

#: The emitters' visitor of each primitive written as syntax (``_ex_<kind>``); a call is "call".
_KINDS = {**dict.fromkeys(("add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "lshift", "rshift", "bitor",
                           "bitand", "bitxor", "matmul"), "binary"),
          "neg": "unary", "pos": "unary", "ifexp": "ifexp", "getitem": "getitem", "attr": "attr"}
#: Python's names of the constructs an error names (as the lane's syntax tree calls them).
_SYNTAX = {"add": "Add", "sub": "Sub", "mul": "Mult", "truediv": "Div", "floordiv": "FloorDiv", "mod": "Mod",
           "pow": "Pow", "lshift": "LShift", "rshift": "RShift", "bitor": "BitOr", "bitand": "BitAnd",
           "bitxor": "BitXor", "matmul": "MatMult", "set": "Set", "dict": "Dict", "star": "Starred",
           "slice": "Slice", "walrus": "NamedExpr", "tuple": "Tuple", "list": "List"}
_COMPS = {"list": "ListComp", "set": "SetComp", "dict": "DictComp", "genexp": "GeneratorExp"}
#: Operators whose value is a number where their operands are (their zero derivative is 0.0).
_SCALAR_OPS = frozenset(_KINDS) - {"ifexp", "getitem", "attr"} | {
    "not", "invert", "eq", "ne", "lt", "le", "gt", "ge", "is", "isnot", "in", "notin", "and", "or"}


def kind(e) -> str:
    """Which ``_ex_`` visitor of the emitters reads the IR expression ``e``.

    Example:
        >>> at = ir.Loc("f.py", 1, 0)
        >>> kind(ir.Prim("mul", (ir.Var("x"), ir.Var("x")), at)), kind(ir.Prim("np.exp", (ir.Var("x"),), at))
        ('binary', 'call')
    """
    if isinstance(e, (ir.Var, ir.Global)):
        return "var"
    if not isinstance(e, ir.Prim):
        return type(e).__name__.lower()
    if e.op not in SYNTAX_OPS or e.callee is not None:
        return "call"
    if e.op in ("tuple", "list") and e.type == e.op:
        return "literal"
    return _KINDS.get(e.op, e.op)


def syntax_name(e) -> str:
    """The construct ``e`` was written as, for an error (``MatMult``, ``ListComp``)."""
    if isinstance(e, ir.Comp):
        return _COMPS[e.kind]
    if isinstance(e, ir.Unsupported):
        return e.what
    return _SYNTAX.get(e.op, e.op) if isinstance(e, ir.Prim) else type(e).__name__


def is_scalar(e) -> bool:
    """Whether ``e`` is a constant or an operator's value: a number where its operands are."""
    return isinstance(e, ir.Const) or (isinstance(e, ir.Prim) and e.op in _SCALAR_OPS and not is_call(e))


def _as_written(n):
    """A module path or a callee by the name the lane wrote (``numpy.pi``, ``sqrt``), else None."""
    if isinstance(n, ir.Global) and n.written is not None:
        return replace(n, name=n.written)
    if isinstance(n, ir.Prim) and n.callee is not None and n.callee.written is not None:
        named = replace(n, op=n.callee.written)
        return named if is_call(named) else None  # a helper called ``add``: its op already prints it
    return None


def text(e) -> str:
    """The IR expression ``e`` as Python text, names as the lane wrote them.

    Example:
        >>> text(ir.Prim("add", (ir.Var("x"), ir.Const(1.0, "float")), ir.Loc("f.py", 1, 0)))
        'x + 1.0'
    """
    return python_text(mapped(e, _as_written))


def called_text(call: ir.Prim) -> str:
    """What a call calls, as the lane wrote it (``np.exp``, ``sqrt``, ``row.sum``)."""
    return callee_text(mapped(call, _as_written))


def method_name(call: ir.Prim) -> str | None:
    """The method a call of a value's method calls (``sum`` of ``w.sum()``), else None."""
    return call.op.removeprefix("method.") if call.op.startswith("method.") else None


def arguments(call: ir.Prim) -> tuple:
    """A call's positional arguments as written (without a method's value)."""
    return call_args(call)


def pairwise(call: ir.Prim) -> ir.Prim:
    """``max(a, b, c)`` as ``max(max(a, b), c)``."""
    args = call_args(call)
    made = args[0]
    for arg in args[1:]:
        made = replace(call, args=(made, arg), keywords=())
    return made


def value_of(fn, e):
    """The object a global, closure or builtin name (or a module's attribute) ``e`` of ``fn`` holds, else None."""
    if not isinstance(e, ir.Global):
        return None
    root, *attrs = (e.written or e.name).split(".")
    code = fn.__code__
    if root in code.co_freevars and fn.__closure__:
        try:
            found = fn.__closure__[code.co_freevars.index(root)].cell_contents
        except ValueError:  # an empty cell
            return None
    else:
        found = fn.__globals__[root] if root in fn.__globals__ else getattr(builtins, root, None)
    for attr in attrs:
        found = getattr(found, attr, None)
    return found


def is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def number(value) -> str:
    return repr(float(value))


def exponent(value: float) -> str:
    """An exponent as the user would write it: ``2`` (an integer power stays one)."""
    return repr(int(value)) if value == int(value) else repr(value)


def first_line(node) -> str:
    """The first line of a statement as written (an IR group of stores of one value)."""
    return statement_text(node).splitlines()[0][:80]


# ----------------------------------------------------------------------------- IR statements as the emitters read them

_SIGNS = {"add": "+", "sub": "-", "mul": "*", "truediv": "/", "floordiv": "//", "mod": "%", "pow": "**",
          "lshift": "<<", "rshift": ">>", "bitor": "|", "bitand": "&", "bitxor": "^", "matmul": "@"}


def is_store(e) -> bool:
    """Whether ``e`` (a :class:`.Do`'s expression) stores: ``a[i] = v`` or ``p.x = v``."""
    return isinstance(e, ir.Prim) and e.op in ("setitem", "setattr")


def is_inplace(value) -> bool:
    """Whether an assigned value is an in-place operator's (``x op= e``)."""
    return isinstance(value, ir.Prim) and ("inplace", True) in value.params


def grouped(statements) -> list[tuple]:
    """The statements, each a tuple, the stores of one value together (``a = b = v``: one
    value node, stored twice), as the emitters write them: one statement as written."""
    out: list[tuple] = []
    for s in statements:
        value = stored_value(s)
        if out and value is not None and not is_inplace(value) and stored_value(out[-1][0]) is value:
            out[-1] += (s,)
        else:
            out.append((s,))
    return out


def stored_value(s):
    """What an assignment or store statement stores, else None."""
    if isinstance(s, ir.Assign):
        return s.value
    return s.expr.args[-1] if isinstance(s, ir.Do) and is_store(s.expr) else None


def target(s):
    """A store statement's target: ``x``, ``a, b``, ``a[i]`` (an :class:`.Item`), ``p.x``."""
    if isinstance(s, ir.Assign):
        return s.target
    base, *rest = s.expr.args
    return ir.Item(base, rest[0]) if s.expr.op == "setitem" else ir.Field(base, dict(s.expr.params)["name"])


def target_text(t, outer: bool = True) -> str:
    """A target as Python writes it alone (``(a, b)``); ``outer=False``: as an assignment
    writes it (``a, b = ...``)."""
    if isinstance(t, ir.Unpack):
        items = [("*" if k == t.star else "") + target_text(i) for k, i in enumerate(t.items)]
        inner = ", ".join(items) + ("," if len(items) == 1 else "")
        return f"({inner})" if outer else inner
    if isinstance(t, ir.Item):
        return text(ir.Prim("getitem", (t.base, t.index), _NOWHERE))
    if isinstance(t, ir.Field):
        return f"{text(t.base)}.{t.name}"
    return t.name


_NOWHERE = ir.Loc("", 0, 0)


def statement_text(group) -> str:
    """A statement (a group of stores of one value) as ``ast.unparse`` writes it."""
    s = group[0]
    value = stored_value(s)
    if value is not None and is_inplace(value):
        return f"{target_text(target(s), False)} {_SIGNS[value.op]}= {text(value.args[1])}"
    if value is not None:
        return " = ".join(target_text(target(x), False) for x in group) + f" = {text(value)}"
    if isinstance(s, ir.Do):
        return text(s.expr)
    if isinstance(s, ir.If):
        return f"if {text(s.cond)}:"
    if isinstance(s, ir.Loop):
        return f"while {text(s.cond)}:" if s.kind == "while" else \
            f"for {target_text(s.target, False)} in {text(s.iter)}:"
    if isinstance(s, ir.Exit):
        return s.kind + ("" if s.value is None else f" {text(s.value)}")
    if isinstance(s, ir.Raise):
        return "raise" + ("" if s.exc is None else f" {text(s.exc)}") + ("" if s.cause is None else
                                                                       f" from {text(s.cause)}")
    if isinstance(s, ir.Assert):
        return f"assert {text(s.test)}" + ("" if s.msg is None else f", {text(s.msg)}")
    return statement_name(s)


_LIST_METHODS = frozenset({"append", "extend", "insert", "pop", "remove", "clear", "sort", "reverse"})


def list_write(function: ir.Function):
    """The first IR node that changes a list the lane built from a literal (``a = [x, 1.0]``), else None."""
    nodes = list(walk(function))
    lists = {n.target.name for n in nodes if isinstance(n, ir.Assign) and isinstance(n.target, ir.Var)
             and kind(n.value) == "literal" and n.value.op == "list"}
    deleted = _deleted(nodes)
    for n in nodes:
        base = n.base if isinstance(n, ir.Item) else n.args[0] if isinstance(n, ir.Prim) and (
            n.op == "setitem" or method_name(n) in _LIST_METHODS
            or n.op == "getitem" and n in deleted) else None
        if isinstance(base, ir.Var) and base.name in lists:
            return n
    return None


def _deleted(nodes) -> list:
    """The items ``del`` statements name."""
    return [p for n in nodes if isinstance(n, ir.Unsupported) and n.what == "del" for p in n.parts]


def statement_lines(statements, depth: int = 0) -> list[str]:
    """IR statements as ``ast.unparse`` writes them (an ``if`` within an ``else`` as ``else: if``),
    for code written again as the lane wrote it (a checkpointed loop's plain body)."""
    out: list[str] = []
    pad = "    " * depth
    for group in grouped(statements):
        s = group[0]
        out.append(pad + statement_text(group))
        if isinstance(s, ir.If):
            out += statement_lines(s.then, depth + 1) or [pad + "    pass"]
            if s.orelse:
                out += [pad + "else:"] + statement_lines(s.orelse, depth + 1)
        elif isinstance(s, ir.Loop):
            out += statement_lines(s.body, depth + 1) or [pad + "    pass"]
            if s.orelse:
                out += [pad + "else:"] + statement_lines(s.orelse, depth + 1)
        elif isinstance(s, (ir.Try, ir.Def, ir.Unsupported)):
            raise ValueError(f"{statement_name(s)} is not written again")
    return out


def statement_name(s) -> str:
    """What a statement the emitters do not take is, for an error."""
    if isinstance(s, ir.Unsupported):
        return s.what
    return {ir.Try: "Try", ir.Def: "FunctionDef"}.get(type(s), type(s).__name__)


def place(fn, node) -> str:
    """``file:line`` of an IR node (of ``fn``'s first line where the node has no place)."""
    loc = getattr(node, "loc", None) or getattr(getattr(node, "function", None), "loc", None)
    return f"{loc.file}:{loc.line}" if loc is not None else f"{fn.__code__.co_filename}:{fn.__code__.co_firstlineno}"


def shares_as_tangents(node) -> bool:
    """Whether the IR expression ``node``'s tangent shares storage exactly as its value does, by
    construction: a name, a view of one (``a[1:]``, ``a.T``), a tuple of those or constants, a choice of them."""
    if isinstance(node, (ir.Var, ir.Global, ir.Const)):
        return True
    what = kind(node)
    if what == "getitem" or (what == "attr" and dict(node.params)["name"] in ("T", "real", "imag")):
        return shares_as_tangents(node.args[0])
    if what == "literal":
        return all(shares_as_tangents(e) for e in node.args)
    if what == "ifexp":
        return shares_as_tangents(node.args[1]) and shares_as_tangents(node.args[2])
    return False


def _names(nodes):
    """The names read or bound anywhere in the IR ``nodes``."""
    return (n.name for n in walk(tuple(nodes)) if isinstance(n, (ir.Var, ir.Global)))


class InPlace:
    """The forward emitter's part for storage changed in place (:mod:`.aliasing` finds
    it): ``a op= e`` kept in place, tangents that share storage exactly as their values
    do, and ``ad.update`` of a derivative program differentiated again."""

    def _update_call(self, node, callee, obj):
        """``ad.update`` or ``ad.mirror`` of a derivative program differentiated again
        (forward mode): each tangent updated, or aliased, as the value is."""
        arity = 2 if obj is intrinsics.update else 4
        if self.plan.mode != "forward" or len(call_args(node)) != arity or node.keywords:
            self._fail(node, f"{callee} (an array changed in place through another name, in a derivative lane) "
                             f"cannot be differentiated again by {self.plan.transform}; make each name its own "
                             "array where it is bound (b = a.copy()), or take the outer derivative in forward "
                             "mode (jax.jvp, lw.jacfwd)")
        values = [self.ex(a) for a in call_args(node)]
        atoms = [self.atom(p) for p, _ in values]
        p = self.temp(f"{self.pre}ad.{obj.__name__}({', '.join(atoms)})")
        ts = []
        for j in range(self.plan.k):
            d = [t[j] if t is not None else None for _, t in values]
            if obj is intrinsics.update:  # linear in both: the tangent written where the value is
                text = f"ad.update({d[0] or self._zero_of(atoms[0])}, {d[1] or self._zero_of(atoms[1])})"
            else:  # mirror(v, t, a, ta) is t or its copy: its tangent shares as it shares with ta
                text = f"ad.mirror({p}, {d[1] or self._zero_of(p)}, {atoms[3]}, {d[3] or self._zero_of(atoms[3])})"
            ts.append(self.temp(self.pre + text))
        return p, ts

    def _zero_of(self, value: str) -> str:
        return f"{self.pre}ad.{self.ZERO_OF}({value})"

    def _update(self, name: str, value) -> None:
        """``name op= e`` as Python runs it: an array (and its tangents) changed in place, a number rebound."""
        guard = self.active.guarded.get(name)
        if guard is not None:  # reverse mode: a number is rebound, an array shared with another name refused
            self.emit(f"{self.pre}ad.unshared({name}, {guard!r})")
        p, ts = self.ex(value)
        for j in range(self.plan.k):
            self.emit(f"{self.tan(name, j)} = {self.pre}ad.update({self.tan(name, j)}, "
                      f"{ts[j] if ts is not None else self._zero_of(name)})")
        self.emit(f"{name} = {self.pre}ad.update({name}, {p})")

    def _reaches_update(self, targets, value) -> bool:
        """Whether a name these targets bind, or one the value reads, is one an in-place update
        may reach (:mod:`.aliasing`): then a tangent shared where the values are not is copied."""
        return any(name in self.active.inplace for name in _names((*targets, value)))

    def _mirrored(self, value, p: str, ts):
        """``value``'s tangents, copied where one shares an argument's that ``p`` does not (``b = a + 0.0``)."""
        read = sorted({name for name in _names((value,)) if name in self.active})
        out = []
        for j, t in enumerate(ts):
            for name in read:
                t = self.temp(f"{self.pre}ad.mirror({p}, {t}, {name}, {self.tan(name, j)})")
            out.append(t)
        return p, out

