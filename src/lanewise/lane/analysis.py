"""Which lane parameters each lane output depends on (for ``out_axes=None``).

JAX rejects ``out_axes=None`` for an output that depends on the mapped axis; it
knows by tracing.  lanewise knows by a conservative taint analysis of the lane's
source: a value is tainted by a parameter when it is computed from it, or
assigned/returned under control flow (``if``, loop, ``break``) that depends on
it.  "Conservative" means it may say "depends" for a value that does not, never
the reverse.

Example:
    >>> def lane(x, y):
    ...     s = x + 1
    ...     return s, y * 2
    >>> output_dependencies(lane)
    (frozenset({'x'}), frozenset({'y'}))
"""

from __future__ import annotations

import ast
from typing import Callable

from ..errors import UnmappedOutputError
from ..ir.program import Program
from .source import compile_like, definition  # noqa: F401 - compile_like: the lane modules import it from here

Deps = frozenset


def output_dependencies(fn: Callable) -> tuple[Deps, ...] | Deps | None:
    """Per returned tuple element (or one set for any return) the params used.

    ``None`` means the source could not be analysed: assume everything depends.
    """
    node = definition(fn)
    if node is None:
        return None
    if isinstance(node, ast.Lambda):
        node = ast.FunctionDef(name="<lambda>", args=node.args,
                               body=[ast.Return(node.body)], decorator_list=[])
    return _Taint(node).run()


class _Taint:
    def __init__(self, fn: ast.FunctionDef):
        self.fn = fn
        a = fn.args
        params = [p.arg for p in a.posonlyargs + a.args + a.kwonlyargs]
        params += [p.arg for p in (a.vararg, a.kwarg) if p is not None]
        self.env: dict[str, Deps] = {p: Deps({p}) for p in params}
        self.returns: list[list[Deps]] = []  # one entry per return statement
        self.sticky = Deps()  # taint of "did we get here" after tainted exits
        self.unsure = False  # a construct the analysis does not model: every output depends
        # Names that may share memory (b = a, a[0:1], a.T, a.reshape(2)): a write
        # through one taints them all.  Groups only grow (conservative).
        self.groups: dict[str, set[str]] = {}

    def run(self):
        # Loops and sticky control taint need passes until nothing changes; taints
        # only grow over a finite set of names, so this ends (the cap is a guard).
        for _ in range(MAX_PASSES):
            before = dict(self.env), list(map(tuple, self.returns)), self.sticky
            self.returns = []
            self.block(self.fn.body, Deps())
            if (dict(self.env), list(map(tuple, self.returns)), self.sticky) == before:
                break
        else:
            return None
        if self.unsure:
            return None
        if not self.returns:
            return Deps()
        widths = {len(r) for r in self.returns}
        if len(widths) == 1 and widths != {1}:
            return tuple(Deps().union(*col) for col in zip(*self.returns, strict=True))
        return Deps().union(*(d for r in self.returns for d in r))

    # -- statements -------------------------------------------------------------
    def block(self, body, ctl: Deps) -> None:
        for stmt in body:
            self.stmt(stmt, ctl | self.sticky)

    def stmt(self, s, ctl: Deps) -> None:
        handler = getattr(self, "s_" + type(s).__name__, None)
        if handler is None:  # unknown statement: taint everything it assigns
            for name in _assigned_names(s):
                self.assign(name, ctl | self.all_taint())
            # A return, break or raise inside it (try, with, match) is a path the
            # analysis does not follow: it cannot say what the outputs depend on.
            self.unsure |= _has_own_exit(s)
            return
        handler(s, ctl)

    def s_Return(self, s, ctl):
        value = s.value
        if isinstance(value, ast.Tuple):
            self.returns.append([self.expr(e) | ctl for e in value.elts])
        else:
            self.returns.append([(self.expr(value) if value else Deps()) | ctl])
        self.sticky |= ctl

    def s_Assign(self, s, ctl):
        for target in s.targets:
            self.target(target, s.value, ctl)

    def s_AnnAssign(self, s, ctl):
        if s.value is not None:
            self.target(s.target, s.value, ctl)

    def s_AugAssign(self, s, ctl):
        self.bind(s.target, self.expr(s.value) | self.expr(s.target) | ctl)

    def s_Expr(self, s, ctl):
        self.expr(s.value, ctl)

    def s_If(self, s, ctl):
        test = self.expr(s.test)
        # Both branches the same code: which one runs changes nothing (JAX's
        # ``y if x < 0 else y`` under out_axes=None).
        inner = ctl if _same(s.body, s.orelse) else ctl | test
        self.block(s.body, inner)
        self.block(s.orelse, inner)

    def s_While(self, s, ctl):
        self.loop(s, ctl | self.expr(s.test))

    def s_For(self, s, ctl):
        it = self.expr(s.iter)
        self.bind(s.target, it | ctl)
        self.loop(s, ctl | it)

    def loop(self, s, ctl):
        # A break/continue under a tainted condition makes every later value of
        # the loop (and after it) depend on that condition.
        exits = self.exit_taint(s.body)
        for _ in range(2):
            self.block(s.body, ctl | exits)
        self.sticky |= exits
        self.block(s.orelse, ctl | exits)

    def exit_taint(self, body) -> Deps:
        taint = Deps()
        for node in body:
            for sub in ast.walk(node):
                if isinstance(sub, (ast.If, ast.While)) and _has_exit(sub):
                    taint |= self.expr(sub.test)
        return taint

    def s_FunctionDef(self, s, ctl):
        # A nested function may read any variable when called: conservatively,
        # it is computed from everything.
        self.assign(s.name, ctl | self.all_taint())

    s_AsyncFunctionDef = s_ClassDef = s_FunctionDef

    def s_Pass(self, s, ctl):
        pass

    s_Break = s_Continue = s_Pass

    def s_Assert(self, s, ctl):
        self.sticky |= self.expr(s.test)

    def s_Raise(self, s, ctl):
        self.sticky |= ctl

    # -- assignment ---------------------------------------------------------------
    def target(self, target, value, ctl):
        if isinstance(target, (ast.Tuple, ast.List)) and isinstance(value, (ast.Tuple, ast.List)) \
                and len(target.elts) == len(value.elts):
            for t, v in zip(target.elts, value.elts, strict=True):
                self.target(t, v, ctl)
            return
        if isinstance(target, ast.Name):
            for source in _view_sources(value):
                if source in self.env:
                    self.share(target.id, source)
        self.bind(target, self.expr(value) | ctl)

    def bind(self, target, taint: Deps):
        if isinstance(target, (ast.Subscript, ast.Attribute)):
            taint = taint | self.expr(target)  # a[i] = v taints a by i and v
            for name in _target_names(target):
                self.write(name, taint)
            return
        for name in _target_names(target):
            self.assign(name, taint)

    def share(self, a: str, b: str) -> None:
        """``a`` may be a view of ``b``'s memory (or the reverse)."""
        group = self.groups.get(a, {a}) | self.groups.get(b, {b})
        for name in group:
            self.groups[name] = group

    def write(self, name: str, taint: Deps) -> None:
        """A write into the memory of ``name``: every name sharing it is tainted."""
        for alias in self.groups.get(name, {name}):
            self.assign(alias, taint)

    def assign(self, name: str, taint: Deps):
        # Union, not overwrite: a name assigned in several branches keeps all.
        self.env[name] = self.env.get(name, Deps()) | taint

    def all_taint(self) -> Deps:
        return Deps().union(*self.env.values())

    # -- expressions --------------------------------------------------------------
    def expr(self, e, ctl: Deps = Deps()) -> Deps:
        if e is None:
            return Deps()
        taint = self.read(e)
        for node in ast.walk(e):
            if isinstance(node, ast.NamedExpr):  # (y := f(x)) binds y inside an expression
                self.assign(node.target.id, taint | ctl)
            elif isinstance(node, ast.Call):
                # A callee may write into the arrays it is given, or (a method:
                # a.fill(x), a.sort()) into the object it is called on.
                for name in _call_operands(node):
                    if name in self.env:  # locals and parameters (np in np.sqrt(x) is a module)
                        self.write(name, taint | ctl)
        return taint

    def read(self, e) -> Deps:
        """The parameters the value of ``e`` is computed from."""
        if isinstance(e, ast.Name):
            return self.env.get(e.id, Deps())
        if isinstance(e, ast.IfExp) and _same([e.body], [e.orelse]):
            return self.read(e.body)
        return Deps().union(*(self.read(c) for c in ast.iter_child_nodes(e)))


#: Passes of the taint analysis before it gives up (unsure: every output depends).
MAX_PASSES = 100


def _has_exit(node) -> bool:
    return any(isinstance(n, (ast.Break, ast.Continue, ast.Return)) for n in ast.walk(node))


def _has_own_exit(node) -> bool:
    """A return/break/continue/raise of this function (not of a nested def or lambda) inside ``node``."""
    if isinstance(node, (ast.Return, ast.Break, ast.Continue, ast.Raise)):
        return True
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
        return False
    return any(_has_own_exit(c) for c in ast.iter_child_nodes(node))


def _same(a: list, b: list) -> bool:
    """Whether two statement lists (or expressions) are the same code."""
    return len(a) == len(b) and bool(a) and all(ast.dump(x) == ast.dump(y) for x, y in zip(a, b, strict=True))


def _call_operands(call: ast.Call) -> list[str]:
    """Names of the objects a call could write into: its arguments (positional,
    starred, keyword; the array under ``a[1:]`` or ``a.T``) and the object a
    method is called on."""
    values = [*call.args, *(k.value for k in call.keywords)]
    if isinstance(call.func, ast.Attribute):
        values.append(call.func.value)
    names = []
    for v in values:
        while isinstance(v, (ast.Subscript, ast.Attribute, ast.Starred)):
            v = v.value
        if isinstance(v, ast.Name):
            names.append(v.id)
    return names


def _view_sources(value) -> list[str]:
    """Names whose memory the value of ``value`` may share: the array itself (``a``),
    under an index or attribute (``a[0:1]``, ``a.T``), or a call's operands
    (``a.reshape(2)``, ``np.asarray(a)``); arithmetic makes new arrays."""
    if isinstance(value, (ast.Subscript, ast.Attribute, ast.Starred)):
        return _view_sources(value.value)
    if isinstance(value, ast.Name):
        return [value.id]
    if isinstance(value, ast.Call):
        return _call_operands(value)
    if isinstance(value, ast.IfExp):
        return _view_sources(value.body) + _view_sources(value.orelse)
    if isinstance(value, (ast.Tuple, ast.List)):
        return [n for e in value.elts for n in _view_sources(e)]
    return []


def _target_names(target) -> list[str]:
    if isinstance(target, ast.Name):
        return [target.id]
    if isinstance(target, (ast.Tuple, ast.List)):
        return [n for t in target.elts for n in _target_names(t)]
    if isinstance(target, ast.Starred):
        return _target_names(target.value)
    if isinstance(target, (ast.Subscript, ast.Attribute)):
        base = target.value
        while isinstance(base, (ast.Subscript, ast.Attribute)):
            base = base.value
        return [base.id] if isinstance(base, ast.Name) else []
    return []


def _assigned_names(stmt) -> list[str]:
    return [n.id for n in ast.walk(stmt) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)]


# ----------------------------------------------------------------------------- out_axes=None


def check_unmapped_outputs(program: Program) -> None:
    """``out_axes=None`` is only allowed for outputs independent of the level."""
    sig = program.signature
    deps = None
    for out in program.outputs:
        for depth, dim in enumerate(out.level_dims):
            if dim is not None or not sig.mapped_at(depth):
                continue
            if deps is None:
                deps = output_dependencies(program.lane)
            used = _deps_for(deps, out.path)
            for k in sig.mapped_at(depth):
                leaf = sig.leaves[k]
                if used is None or leaf.param in used:
                    raise UnmappedOutputError(
                        f"vmap({sig.levels[depth].fun_name}) has out_axes=None for output "
                        f"{out.name}, but that output depends on argument {leaf.param}, "
                        f"which is mapped at that level (leaf {leaf.name}, axis "
                        f"{leaf.axes[depth]}). Use an integer out_axes, or make the output "
                        "independent of it.")


def _deps_for(deps, path):
    if deps is None or isinstance(deps, frozenset):
        return deps
    return deps[path[0]] if path and path[0] < len(deps) else frozenset().union(*deps)
