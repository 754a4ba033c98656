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
import types

from ..lane.source import LANE_MODULE
from .activity import INERT_ATTRIBUTES, inert_callee


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


def pairwise(node: ast.Call) -> ast.Call:
    """``max(a, b, c)`` as ``max(max(a, b), c)``."""
    call = node.args[0]
    for arg in node.args[1:]:
        call = ast.copy_location(ast.Call(node.func, [call, arg], []), node)
    return call


def as_load(target):
    copy = ast.parse(ast.unparse(target), mode="eval").body
    return ast.copy_location(copy, target)


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
