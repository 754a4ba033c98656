"""Generated source: turning lines of a transformed lane into a function, and small
text helpers the transformations share.

Example:
    >>> f = build("# demo", "def twice(x):", ["    return 2 * x"], {}, {})
    >>> f(3), "def twice(x):" in f._lw_source
    (6, True)
"""

from __future__ import annotations

import ast
import hashlib
import linecache
import re
import types

import builtins
from dataclasses import replace

from ..lane.ir import nodes as ir
from ..lane.ir.passes.walk import mapped
from ..lane.ir.unparse import call_args, callee_text, is_call, python_text
from ..lane.source import LANE_MODULE
from . import intrinsics
from .activity import INERT_ATTRIBUTES, SYNTAX_OPS, inert_callee


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
    return ast.unparse(node).splitlines()[0][:80]


class ActiveNodes:
    """Whether an expression the emitters write from may have a nonzero tangent: the
    activity rules of :mod:`.activity` (which finds the active locals on the lane IR),
    asked of one AST node.  ``resolve(func)``: the object a called name or attribute
    chain refers to.

    Example:
        >>> ActiveNodes({"x"}, lambda func: None).expr(ast.parse("x * k > 0", mode="eval").body)
        False
    """

    def __init__(self, active: set, resolve):
        self.active, self.resolve = active, resolve

    def expr(self, node) -> bool:
        if isinstance(node, ast.Name):
            return node.id in self.active
        if isinstance(node, ast.Lambda):
            # A lambda closing over a differentiated value: what its calls return depends
            # on that value.  Active, so its use is refused where the lane is transformed
            # (counted constant, g = lambda t: t * x; g(2.0) had a derivative of 0).
            own = {a.arg for a in (*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs)}
            return any(isinstance(n, ast.Name) and n.id in self.active and n.id not in own
                       for n in ast.walk(node.body))
        if isinstance(node, (ast.Constant, ast.Compare, ast.BoolOp, ast.JoinedStr)):
            return False
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.Not, ast.Invert)):
            return False
        if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.FloorDiv, ast.BitAnd, ast.BitOr, ast.BitXor,
                                                               ast.LShift, ast.RShift)):
            return False
        if isinstance(node, ast.Attribute):
            return node.attr not in INERT_ATTRIBUTES and self.expr(node.value)
        if isinstance(node, ast.Subscript):
            return self.expr(node.value)
        if isinstance(node, ast.IfExp):
            return self.expr(node.body) or self.expr(node.orelse)
        if isinstance(node, ast.Call):
            return self._call(node)
        return any(self.expr(child) for child in ast.iter_child_nodes(node))

    def _call(self, node) -> bool:
        obj = self.resolve(node.func)
        if inert_callee(obj):  # lw.stop_gradient is one
            return False
        if isinstance(node.func, ast.Attribute) and obj is None and self.expr(node.func.value):
            return True  # a method of an active array
        return any(self.expr(a) for a in node.args) or any(self.expr(k.value) for k in node.keywords)


def shares_as_tangents(node) -> bool:
    """Whether ``node``'s tangent shares storage exactly as its value does, by construction:
    a name, a view of one (``a[1:]``, ``a.T``), a tuple of those or constants, a choice of them."""
    if isinstance(node, (ast.Name, ast.Constant)):
        return True
    if isinstance(node, ast.Subscript) or (isinstance(node, ast.Attribute) and node.attr in ("T", "real", "imag")):
        return shares_as_tangents(node.value)
    if isinstance(node, (ast.Tuple, ast.List)):
        return all(shares_as_tangents(e) for e in node.elts)
    if isinstance(node, ast.IfExp):
        return shares_as_tangents(node.body) and shares_as_tangents(node.orelse)
    return False


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
        names = (n for node in (*targets, value) for n in ast.walk(node))
        return any(isinstance(n, ast.Name) and n.id in self.active.inplace for n in names)

    def _mirrored(self, value, p: str, ts):
        """``value``'s tangents, copied where one shares an argument's that ``p`` does not (``b = a + 0.0``)."""
        read = sorted({n.id for n in ast.walk(value) if isinstance(n, ast.Name) and n.id in self.active})
        out = []
        for j, t in enumerate(ts):
            for name in read:
                t = self.temp(f"{self.pre}ad.mirror({p}, {t}, {name}, {self.tan(name, j)})")
            out.append(t)
        return p, out

