"""Alias classes over the lane IR: which locals may share storage, and which of them a
lane changes in place.

Forward mode carries a tangent beside each active value and updates it where the
primal is assigned.  When two names hold one array (``b = a``, a view
``v = a[1:]``, a tuple ``t = (a, 1.0)``, a helper's result, ``for row in a``...)
and the lane changes it in place through one of them (``b[0] = x``, ``v += x``,
a helper writing into its argument), the other name's value changes too, so its
tangent must change with it.  Both hold when the tangents alias as the primals
do: every name of such a class is active when one is (:func:`widen`), so
``b = a`` gives ``t_b = t_a``, ``v = a[1:]`` gives ``t_v = t_a[1:]``, and
``a += e`` updates the primal and each tangent in place (:func:`.intrinsics.update`).

The classes are flow-insensitive and over-approximate (a method call's result
shares storage with the receiver and arguments unless the method is known to
return a new value; a helper's result with all its arguments).  Reverse mode
does not follow storage shared through in-place updates: :func:`widen` refuses
those it cannot prove harmless, and asks for a check before ``a op= e``
where ``a`` has other names (harmless when ``a`` is a number).

Example:
    >>> import numpy as np
    >>> def f(x):
    ...     a = np.zeros(3)
    ...     b = a
    ...     b[0] = x
    ...     return a.sum() * x
    >>> facts = aliases(f)
    >>> sorted(facts.class_of("a")), [u.kind for u in facts.updates]
    (['a', 'b'], ['setitem'])
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import LaneCompileError
from ..lane.ir import nodes as ir
from ..lane.ir.build import build
from ..lane.ir.carried import reads as _reads
from .activity import active_names

#: Methods whose result is a new value (or a number), never the receiver's storage.
FRESH_METHODS = frozenset({
    "sum", "mean", "prod", "std", "var", "min", "max", "argmin", "argmax", "any", "all", "copy", "dot",
    "cumsum", "cumprod", "flatten", "tolist", "item", "trace", "round", "astype", "nonzero", "count", "index"})
#: Methods that change their receiver in place (arrays' and lists').
MUTATING_METHODS = frozenset({
    "fill", "sort", "resize", "put", "itemset", "partition", "setfield", "setflags", "byteswap",
    "append", "extend", "insert", "pop", "remove", "clear", "reverse", "update", "add", "discard",
    "setdefault", "popitem", "__setitem__", "__iadd__", "__isub__", "__imul__", "__itruediv__"})
#: Methods that store their arguments (not copies) in the receiver.
_STORING_METHODS = frozenset({"append", "extend", "insert", "setdefault", "add", "update"})
#: NumPy functions that write into their first argument.
MUTATING_NUMPY = frozenset({"np.copyto", "np.put", "np.place", "np.putmask", "np.fill_diagonal",
                            "np.random.shuffle", "np.put_along_axis"})
#: Calls whose result is a new value: operators, comparisons and the like.
_FRESH_OPS = frozenset({
    "add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "lshift", "rshift", "bitor", "bitand", "bitxor",
    "matmul", "neg", "pos", "not", "invert", "eq", "ne", "lt", "le", "gt", "ge", "is", "isnot", "in", "notin",
    "slice", "fstring", "format", "len", "range", "float", "int", "bool", "abs", "round", "str", "complex"})


class Refused(LaneCompileError):
    """Reverse mode and storage shared between names that the lane changes in place."""


@dataclass(frozen=True)
class Update:
    """An in-place change: ``kind`` "augassign" (``a op= e``), "setitem" (``b[i] = e``,
    ``b[i] op= e``, ``b.f = e``), "method" (``a.fill(e)``, ``np.copyto(a, e)``, ``out=a``)
    or "helper" (a helper writing into its argument); ``names``: the locals whose storage
    it changes; ``reads``: the locals its new value is computed from."""

    kind: str
    names: frozenset
    reads: frozenset
    loc: ir.Loc | None
    what: str


@dataclass(frozen=True)
class Aliases:
    """One function's alias classes (``classes``: name -> the class holding it) and in-place updates."""

    classes: dict
    updates: tuple
    params: tuple

    def class_of(self, name: str) -> frozenset:
        return self.classes.get(name, frozenset({name}))

    def mutated_params(self) -> frozenset:
        """Indices of the parameters whose storage the function may change in place."""
        changed = set().union(*(self.class_of(n) for u in self.updates for n in u.names))
        return frozenset(k for k, p in enumerate(self.params) if p in changed)


def aliases(fn) -> Aliases:
    """The alias classes and in-place updates of ``fn`` (its helpers read through the lane IR)."""
    module = build(fn)
    table = {f.name: f for f in module.functions()}
    return _analyse(module.entry, table, {})


def mutates(fn) -> bool:
    """Whether a helper may change one of its arguments in place."""
    return bool(aliases(fn).mutated_params())


def _analyse(fn: ir.Function, table: dict, done: dict) -> Aliases:
    if fn.name in done:
        return done[fn.name] or Aliases({}, (), ())  # recursion: lanewise refuses it where it transforms
    done[fn.name] = None
    walk = _Walk(table, done)
    walk.block(fn.body)
    params = tuple(p.name for p in fn.params)
    classes: dict = {}
    for name in walk.parent:
        classes.setdefault(walk.find(name), set()).add(name)
    found = Aliases({n: frozenset(classes[walk.find(n)]) for n in walk.parent}, tuple(walk.updates), params)
    done[fn.name] = found
    return found


class _Walk:
    """Union-find over locals, filled statement by statement (flow-insensitive)."""

    def __init__(self, table: dict, done: dict):
        self.table, self.done = table, done
        self.parent: dict = {}
        self.updates: list = []

    def find(self, n: str) -> str:
        self.parent.setdefault(n, n)
        while self.parent[n] != n:
            self.parent[n] = self.parent[self.parent[n]]
            n = self.parent[n]
        return n

    def union(self, names) -> None:
        names = list(names)
        for n in names[1:]:
            self.parent[self.find(n)] = self.find(names[0])
        for n in names[:1]:
            self.find(n)

    # -- statements

    def block(self, stmts) -> None:
        for s in stmts:
            self.stmt(s)

    def stmt(self, s) -> None:
        if isinstance(s, ir.Assign):
            self.assign(s.target, s.value, s.loc)
        elif isinstance(s, ir.Do):
            self.roots(s.expr)
        elif isinstance(s, ir.If):
            self.roots(s.cond)
            self.block(s.then)
            self.block(s.orelse)
        elif isinstance(s, ir.Loop):
            for part in (s.iter, s.cond):
                if part is not None:
                    self.roots(part)
            if s.target is not None:  # for row in a: row is a view of a
                self.bind(s.target, self.roots(s.iter) if s.iter is not None else set(), s.loc)
            self.block(s.body)
            self.block(s.orelse)
        elif isinstance(s, ir.Try):
            for part in (s.body, s.orelse, s.final, *(h.body for h in s.handlers)):
                self.block(part)
        elif isinstance(s, ir.Exit) and s.value is not None:
            self.roots(s.value)
        elif isinstance(s, (ir.Raise, ir.Assert)):
            for part in (getattr(s, "exc", None), getattr(s, "cause", None), getattr(s, "test", None),
                         getattr(s, "msg", None)):
                if part is not None:
                    self.roots(part)

    def assign(self, target, value, loc) -> None:
        if _pairs(target, value):  # s, n = x, 0: each name shares only its own item's storage
            for t, v in zip(target.items, value.args, strict=True):
                self.assign(t, v, loc)
            return
        shared = self.roots(value)
        if isinstance(target, ir.Var) and isinstance(value, ir.Prim) and dict(value.params).get("inplace"):
            self.updates.append(Update("augassign", frozenset({target.name}), frozenset(_reads(value.args[1:])),
                                       loc, target.name))
        self.bind(target, shared, loc)

    def bind(self, target, shared: set, loc) -> None:
        """``target = value`` where the value may share the storage of ``shared``."""
        if isinstance(target, (ir.Item, ir.Field)):  # an unpacking or loop target writing into a container
            base = self.roots(target.base)
            self.updates.append(Update("setitem", frozenset(base), frozenset(), loc, "an item"))
            return
        names = _bound(target)
        for item in (target.items if isinstance(target, ir.Unpack) else ()):
            if isinstance(item, (ir.Item, ir.Field)):
                self.bind(item, shared, loc)
        self.union(names | shared)

    # -- expressions: the locals whose storage a value may share

    def roots(self, e) -> set:
        if isinstance(e, ir.Var):
            self.find(e.name)
            return {e.name}
        if isinstance(e, ir.Lambda):
            return _reads(e.function.body)
        if isinstance(e, ir.Comp):
            for g in e.generators:
                self.bind(g.target, self.roots(g.iter), e.loc)
            return set().union(*(self.roots(x) for x in e.element), *(self.roots(c) for g in e.generators
                                                                      for c in g.conds))
        if not isinstance(e, ir.Prim):
            return set()
        parts = [self.roots(a) for a in e.args]
        keywords = {k: self.roots(v) for k, v in e.keywords}
        return self.prim(e, parts, keywords)

    def prim(self, e: ir.Prim, parts: list, keywords: dict) -> set:
        op, every = e.op, set().union(*parts, *keywords.values())
        if "out" in keywords:
            self._update("method", keywords["out"], e, "out=")
        if op == "setitem" or op == "setattr":
            # Not unioned with the value: an array's item store copies it; a list's (which
            # could hold the value itself) fails in a differentiated lane, whose list tangents are tuples.
            self._update("setitem", parts[0], e, "an item")
            return set()
        if op == "walrus":
            name = dict(e.params)["name"]
            self.union({name} | parts[0])
            return {name} | parts[0]
        if op.startswith("method."):
            method = op.removeprefix("method.")
            if method in MUTATING_METHODS:
                self._update("method", parts[0], e, f".{method}()")
                if method in _STORING_METHODS:  # the container now holds its arguments
                    self.union(every)
            return set() if method in FRESH_METHODS else every
        if op == _UPDATE and len(parts) == 2:  # a derivative program's a op= e, differentiated again
            self._update("augassign", parts[0], e, "an in-place update")
            return parts[0] | parts[1]
        if op in MUTATING_NUMPY and parts:
            self._update("method", parts[0], e, f"{op}()")
            return set()
        if op.startswith("call:"):
            self.helper(op.removeprefix("call:"), e, parts)
            return every  # a helper may return (part of) any argument
        if dict(e.params).get("inplace"):
            return parts[0]  # a op= e is a (an array's item values are copied; a list's tangent is a tuple)
        if op in _FRESH_OPS or op.startswith(("math.", "cmath.")) or _fresh_numpy(op):
            return set()
        if op in ("getitem", "attr"):
            return parts[0]
        if op == "ifexp":
            return parts[1] | parts[2]
        return every  # any other call: it may hand back its arguments (np.asarray, np.reshape...)

    def helper(self, name: str, e: ir.Prim, parts: list) -> None:
        fn = self.table.get(name)
        if fn is None:
            return
        changed = _analyse(fn, self.table, self.done).mutated_params()
        for k in sorted(changed):
            if k < len(parts):
                self._update("helper", parts[k], e, f"{name.split('.')[-1]}(...)")

    def _update(self, kind: str, names: set, e: ir.Prim, what: str) -> None:
        if names:  # what the new contents are computed from: every local the call reads
            self.updates.append(Update(kind, frozenset(names), frozenset(_reads((e.args, e.keywords))), e.loc, what))


#: How the front end names :func:`.intrinsics.update` (it writes into its first argument).
_UPDATE = "lw.autodiff.intrinsics.update"


def _fresh_numpy(op: str) -> bool:
    """NumPy functions that return a new array (ufuncs, constructors, reductions): not views."""
    import numpy as np

    if not op.startswith("np.") or op.count(".") != 1:
        return False
    obj = getattr(np, op[3:], None)
    return isinstance(obj, np.ufunc) or op[3:] in _NEW_NUMPY


_NEW_NUMPY = frozenset({"zeros", "ones", "empty", "full", "zeros_like", "ones_like", "empty_like", "full_like",
                        "array", "copy", "arange", "linspace", "sum", "mean", "prod", "dot", "cumsum", "diff",
                        "trace", "where", "outer", "concatenate", "stack", "vstack", "hstack", "eye", "identity",
                        "clip", "std", "var", "cross", "interp", "sort", "argsort", "max", "min", "amax", "amin"})


def _pairs(target, value) -> bool:
    """Whether ``target = value`` unpacks a tuple or list display item by item."""
    return (isinstance(target, ir.Unpack) and target.star is None and isinstance(value, ir.Prim)
            and value.op in ("tuple", "list") and not value.keywords and len(value.args) == len(target.items)
            and not any(isinstance(a, ir.Prim) and a.op == "star" for a in value.args))


def _bound(target) -> set:
    return set(ir.target_names(target))


# ----------------------------------------------------------------------------- what the emitters use


class Active(set):
    """An emitter's active names, with ``updated``: the names whose storage the lane changes
    in place (their tangents must share storage exactly as their values do), ``shared``: those
    of them another name (or a helper's parameter) reaches, whose zero tangent must be an
    array where the value is one (never the constant 0.0), ``inplace``: the names whose
    storage another name can observe changing (an item store, an in-place method or helper,
    or ``a op= e`` on a shared name), the only ones whose ``a op= e`` the emitters keep in
    place (elsewhere rebinding is the same, and a derivative program without
    :func:`.intrinsics.update` can be differentiated again), and ``guarded``: name -> the
    check reverse mode runs before ``name op= e``."""

    updated: frozenset = frozenset()
    shared: frozenset = frozenset()
    inplace: frozenset = frozenset()
    guarded: dict = {}


def widen(emitter, active: set) -> Active:
    """``active`` grown so that a class of aliases changed in place is active as a whole
    (and rerun through the emitter's activity); in reverse mode, the refusal of such a
    class unless every change is ``a op= e`` (then checked to rebind a number)."""
    out = Active(active)
    if getattr(emitter.fn, "_lw_jvp_rule", None) is not None:
        return out  # a custom rule's call: the body is never differentiated
    try:
        facts = aliases(emitter.fn)
    except (TypeError, LaneCompileError):
        return out
    changed = [(u, set().union(*(facts.class_of(n) for n in u.names))) for u in facts.updates]
    while True:
        grown = set(out)
        for u, names in changed:
            if names & grown or (u.kind in ("helper", "method") and u.reads & grown):
                grown |= names
        if grown <= out:
            break
        out = Active(active_names(emitter.ir, grown, emitter._called))
    out.updated = frozenset().union(*(names for _, names in changed))
    out.shared = frozenset().union(*(names for u, names in changed if len(names) > 1 or u.kind == "helper"))
    out.inplace = frozenset().union(*(names for u, names in changed if u.kind != "augassign")) | out.shared
    out.guarded = {}
    _refuse(emitter, changed, out)
    return out


def _refuse(emitter, changed: list, out: Active) -> None:
    for u, names in changed:
        if not names & out:
            continue
        if u.kind == "method":  # a.fill(x), np.copyto(a, b), out=a: no rule updates the derivative in place
            raise Refused(_message(emitter, u, sorted(u.names)[0], f"is changed in place by {u.what}",
                                   "assign the new value instead (a = np.full_like(a, v) for a.fill(v), "
                                   "a = b.copy() for np.copyto(a, b))"))
        if emitter.plan.mode == "forward":
            continue
        others = sorted(names - u.names) or sorted(names)
        if u.kind == "augassign" and len(names) > 1:
            name = next(iter(u.names))
            out.guarded[name] = _message(emitter, u, name, f"shares its storage with {others[0]} and is an array "
                                         "or a list here", _REVERSE)
        elif u.kind != "augassign" and (len(names) > 1 or u.kind == "helper"):
            name = sorted(u.names)[0]
            other = others[0] if others[0] != name else "a parameter of the helper it is passed to"
            raise Refused(_message(emitter, u, name, f"shares its storage with {other} and is changed in place "
                                   f"({u.what})", _REVERSE))


_REVERSE = ("reverse mode does not follow an array changed in place through another name. Make each name its own "
            "array where it is bound (b = a.copy(), v = a[1:].copy()), or use lw.jacfwd (forward mode)")


def _message(emitter, u: Update, name: str, how: str, fix: str) -> str:
    where = f"{u.loc.file}:{u.loc.line}" if u.loc is not None else emitter.fn.__code__.co_filename
    return f"{emitter.plan.transform} cannot differentiate {emitter.fn.__qualname__} at {where}: {name} {how}; {fix}"
