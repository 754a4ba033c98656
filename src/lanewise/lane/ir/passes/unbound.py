"""Reads of locals that may be unbound: checked per lane, as Python checks them.

Python raises ``UnboundLocalError`` when a lane reads a local no statement has bound
yet on the path it took (``y`` below for a lane whose ``n`` is 0, or whose ``x`` is at
most 1).  Compiled code has no such check: Numba reads a zero and the tpu backend the
other branch's value, a silently wrong result.  This pass finds, by a definite
assignment analysis of the structured IR, the reads that may be unbound, and makes
each exact at run time: the local gets a flag (``_lw_bound_y``, False at entry, True
after each statement that binds it) and the read becomes
``_lw_unbound(y, _lw_bound_y, message)``, which raises :class:`~lanewise.errors.LaneUnboundError`
(an ``UnboundLocalError``) with Python's words and the user's ``file:line`` where the
flag is False, and is ``y`` otherwise.  The analysis may be conservative (a check
where Python never raises costs a test, never a result); the flags make the check
itself exact.  A lane rebuilt from bytecode (no source text: one ``while True`` over its
basic blocks, lane.fromcode) gets the same flags from a dataflow over the jumps between
its blocks (:func:`_checked_blocks`).  A comprehension's reads are checked where it runs;
a ``lambda``'s in its body, where the flag says what is bound when it is called.  A
name bound by ``:=``, an ``except ... as`` or a nested ``def`` is left as written.

Example:
    >>> from lanewise.lane.ir.build import function_ir
    >>> from lanewise.lane.ir.render import render
    >>> def lane(x, n):
    ...     for i in range(n):
    ...         y = x * i
    ...     return y
    >>> print(render(checked(function_ir(lane))), end="")  # doctest: +ELLIPSIS
    def lane(x, n):
        _lw_bound_y = False
        for i in range(n):
            y = x * i
            _lw_bound_y = True
        return _lw_unbound(y, _lw_bound_y, "cannot access local variable 'y' where it is not associated ...:4)")
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field, replace

from .. import nodes as ir
from ..carried import assigned, with_carried
from ..lines import user_line
from .dataflow import fixed_point
from .walk import walk

#: The primitive a checked read becomes (its arguments: the local, its flag, the message).
CHECK = "_lw_unbound"
#: The flag of a local's name.
FLAG = "_lw_bound_{}"


def flag(name: str) -> str:
    """The name of the flag that says whether ``name`` is bound."""
    return FLAG.format(name)


def message(name: str, loc: ir.Loc, free: bool = False) -> str:
    """Python's words for reading ``name`` unbound, with the user's ``file:line`` (``free``:
    read inside a ``lambda``, where Python's ``NameError`` calls it a free variable)."""
    if free:
        return (f"cannot access free variable {name!r} where it is not associated with a value in enclosing "
                f"scope ({user_line(loc)})")
    return f"cannot access local variable {name!r} where it is not associated with a value ({user_line(loc)})"


def checked(function: ir.Function) -> ir.Function:
    """``function`` with its reads that may be unbound checked (the module docstring);
    ``function`` itself when it has none."""
    if function.blocks:
        return _checked_blocks(function)
    if function.source != "source":
        return function
    candidates = _candidates(function)
    if not candidates:
        return function
    found = _Walk(candidates, frozenset()).function(function)
    if not found.wrapped:
        return function
    done = _Walk(frozenset(found.wrapped), frozenset(found.wrapped)).function(function)
    inits = tuple(ir.Assign(ir.Var(flag(n)), ir.Const(False, "bool"), function.loc) for n in sorted(found.wrapped))
    return with_carried(replace(function, body=inits + done.body_out))


def _checked_blocks(function: ir.Function) -> ir.Function:
    """:func:`checked` for a lane rebuilt from bytecode (lane.fromcode): its locals cross
    the arms of one ``while True`` that dispatches on ``_bc_block``, so what is bound on
    entry to each arm comes from a dataflow over the jumps between them (the meet of
    what its predecessors bound where they jump to it), iterated to its fixed point;
    each arm is then walked as structured code from there.  A body of any other form
    is returned as it is (not checked)."""
    form = _dispatch(function.body)
    candidates = frozenset(n for n in _candidates(function) if not n.startswith(_TEMPORARY))
    if form is None or not candidates:
        return function
    prelude, loop, arms = form
    params = frozenset(p.name for p in function.params)
    found = _Blocks(candidates, frozenset())
    found.block(prelude, params)
    if len(found.jumps) != 1:
        return function
    states = found.fixed_point({label: arm.then for label, arm in arms}, *found.jumps[0])
    if not found.wrapped:
        return function
    done = _Blocks(frozenset(found.wrapped), frozenset(found.wrapped))
    chain = ()
    for label, arm in reversed(arms):
        then = arm.then if states.get(label) is None else done.block(arm.then, states[label])[0]
        chain = (replace(arm, then=then, orelse=chain),)
    inits = tuple(ir.Assign(ir.Var(flag(n)), ir.Const(False, "bool"), function.loc) for n in sorted(found.wrapped))
    return with_carried(replace(function, body=(*inits, *done.block(prelude, params)[0], replace(loop, body=chain))))


#: The prefix of the names lane.fromcode gives Numba's temporaries (and its dispatch variable).
_TEMPORARY = "_bc_"
_BLOCK = "_bc_block"


def _label(test) -> int | None:
    """The label an arm's test ``_bc_block == label`` names, or None."""
    if isinstance(test, ir.Prim) and test.op == "eq" and len(test.args) == 2 \
            and test.args[0] == ir.Var(_BLOCK) and isinstance(test.args[1], ir.Const):
        return test.args[1].value
    return None


def _dispatch(body):
    """(the statements before the loop, the loop, its arms as (label, the arm's ``if``)) of a
    rebuilt body, or None where ``body`` is not a prelude and one ``while True`` of a
    chain of ``if _bc_block == label`` arms."""
    if not body or not isinstance(body[-1], ir.Loop):
        return None
    loop = body[-1]
    if not (loop.kind == "while" and isinstance(loop.cond, ir.Const) and loop.cond.value is True
            and len(loop.body) == 1 and not loop.orelse):
        return None
    arms, arm = [], loop.body[0]
    while arm is not None:
        if not isinstance(arm, ir.If) or _label(arm.cond) is None or len(arm.orelse) > 1:
            return None
        arms.append((_label(arm.cond), arm))
        arm = arm.orelse[0] if arm.orelse else None
    return body[:-1], loop, arms


def has_checks(function: ir.Function) -> bool:
    """Whether ``function`` (after :func:`checked`) checks a read."""
    return any(isinstance(n, ir.Prim) and n.op == CHECK for n in walk(function.body))


def _candidates(function: ir.Function) -> frozenset:
    """The locals whose reads may be checked: bound by assignments or loops, not
    parameters, not bound by ``:=``, ``except ... as``, a nested ``def`` or a statement
    the IR does not model."""
    params = {p.name for p in function.params}
    excluded = set()
    for n in walk(function.body):
        if isinstance(n, ir.Prim) and n.op == "walrus":
            excluded.add(dict(n.params)["name"])
        elif isinstance(n, ir.Def):
            excluded.add(n.function.name)
        elif isinstance(n, ir.Handler) and n.name:
            excluded.add(n.name)
        elif isinstance(n, ir.Unsupported):
            excluded.update(n.names)
    return frozenset(assigned(function.body) - params - excluded)


@dataclass
class _Loop:
    """The bound sets where a loop's ``break``s and ``continue``s leave it."""

    breaks: list = field(default_factory=list)
    continues: list = field(default_factory=list)


def _meet(states) -> frozenset | None:
    """What is bound on every path that reaches a point (None: no path does)."""
    reached = [s for s in states if s is not None]
    return frozenset.intersection(*reached) if reached else None


class _Walk:
    """One walk of a function: with ``checked`` the names whose reads may be wrapped,
    ``flagged`` the names whose bindings set their flag; ``wrapped`` collects the names
    of the reads wrapped."""

    def __init__(self, checked: frozenset, flagged: frozenset):
        self.checked, self.flagged = checked, flagged
        self.wrapped: set = set()
        self.loops: list = []
        self.body_out: tuple = ()
        self.loc = None  # the place of the innermost statement or expression being walked
        self.free = False  # inside a lambda: Python's words for its reads

    def function(self, function: ir.Function) -> _Walk:
        self.body_out, _ = self.block(function.body, frozenset(p.name for p in function.params))
        return self

    def block(self, stmts, bound):
        out = []
        for s in stmts:
            if bound is None:  # after an exit: Python never runs it, nothing to check
                out.append(s)
                continue
            new, bound = self.statement(s, bound)
            out.extend(new)
        return tuple(out), bound

    def sets(self, names, loc) -> list:
        return [ir.Assign(ir.Var(flag(n)), ir.Const(True, "bool"), loc) for n in sorted(names & self.flagged)]

    def statement(self, s, bound):
        """(the statements ``s`` becomes, the names surely bound after it)."""
        self.loc = s.loc
        if isinstance(s, ir.If):
            cond, bound = self.value(s.cond, bound)
            then, b1 = self.block(s.then, bound)
            orelse, b2 = self.block(s.orelse, bound)
            return [replace(s, cond=cond, then=then, orelse=orelse)], _meet((b1, b2))
        if isinstance(s, ir.Loop):
            return self.loop(s, bound)
        if isinstance(s, ir.Try):
            return self.try_(s, bound)
        if isinstance(s, ir.Assign):
            return self.assign(s, bound)
        if isinstance(s, ir.Exit):
            value, bound = self.value(s.value, bound)
            if s.kind != "return" and self.loops:
                getattr(self.loops[-1], "breaks" if s.kind == "break" else "continues").append(bound)
            return [replace(s, value=value)], None
        if isinstance(s, ir.Raise):
            exc, bound = self.value(s.exc, bound)
            cause, bound = self.value(s.cause, bound)
            return [replace(s, exc=exc, cause=cause)], None
        if isinstance(s, ir.Assert):
            test, bound = self.value(s.test, bound)
            msg, _ = self.value(s.msg, bound, sure=False)
            return [replace(s, test=test, msg=msg)], bound
        if isinstance(s, ir.Do):
            expr, bound = self.value(s.expr, bound)
            return [replace(s, expr=expr)], bound
        return [s], bound | assigned([s])  # a def, or a statement the IR does not model

    def assign(self, s: ir.Assign, bound):
        value = s.value
        guard = []
        if isinstance(value, ir.Prim) and ("inplace", True) in value.params and value.args \
                and value.args[0] == s.target and isinstance(s.target, ir.Var):
            # x += e stays an augmented assignment: its read of x is checked by a statement before it
            name = s.target.name
            if name in self.checked and name not in bound:
                self.wrapped.add(name)
                guard = [ir.Do(self.check(s.target, s.loc), s.loc)]
                bound = bound | {name}
            rest, bound = self.values(value.args[1:], bound)
            value = replace(value, args=(value.args[0], *rest))
        else:
            value, bound = self.value(value, bound)
        target, bound = self.target(s.target, bound)
        names = ir.target_names(s.target)
        return [*guard, replace(s, target=target, value=value), *self.sets(names, s.loc)], bound | names

    def loop(self, s: ir.Loop, bound):
        iter_, bound = self.value(s.iter, bound)
        cond, bound = self.value(s.cond, bound)
        own = ir.target_names(s.target) if s.target is not None else set()
        target, _ = self.target(s.target, bound) if s.target is not None else (None, bound)
        self.loops.append(_Loop())
        body, end = self.block(s.body, bound | own)
        exits = self.loops.pop()
        # how the loop ends without break: its test fails, before any iteration (unless
        # it surely runs one: while True, or a range of literal bounds that is not empty)
        # or after one (at the body's end or a continue)
        after_iteration = _meet((end, *exits.continues))
        if s.kind == "while" and isinstance(s.cond, ir.Const) and s.cond.value:
            done = None
        elif _runs_once(s):
            done = after_iteration
        else:
            done = bound if after_iteration is None else bound & after_iteration
        orelse, done = self.block(s.orelse, done)
        sets = self.sets(own, s.loc)
        return [replace(s, iter=iter_, cond=cond, target=target, body=(*sets, *body), orelse=orelse)], \
            _meet((done, *exits.breaks))

    def try_(self, s: ir.Try, bound):
        # any statement of the body may be the one that raised: a handler starts from
        # what was bound before the try (conservative, and exact at run time by the flags)
        body, b = self.block(s.body, bound)
        orelse, b = self.block(s.orelse, b)
        handlers = []
        ends = [b]
        for h in s.handlers:
            hbody, hb = self.block(h.body, bound)
            handlers.append(replace(h, body=hbody))
            ends.append(hb)
        final, after = self.block(s.final, bound)
        reached = _meet(ends)
        out = replace(s, body=body, orelse=orelse, handlers=tuple(handlers), final=final)
        if after is None or reached is None:
            return [out], None
        return [out], reached | after

    def target(self, t, bound):
        """An assignment target's reads (an item's base and index, a field's base)."""
        if isinstance(t, ir.Unpack):
            items = []
            for item in t.items:
                item, bound = self.target(item, bound)
                items.append(item)
            return replace(t, items=tuple(items)), bound
        if isinstance(t, ir.Item):
            base, bound = self.value(t.base, bound)
            index, bound = self.value(t.index, bound)
            return replace(t, base=base, index=index), bound
        if isinstance(t, ir.Field):
            base, bound = self.value(t.base, bound)
            return replace(t, base=base), bound
        return t, bound

    def values(self, items, bound, sure=True):
        out = []
        for e in items:
            e, bound = self.value(e, bound, sure)
            out.append(e)
        return tuple(out), bound

    def value(self, e, bound, sure=True):
        """(``e`` with its reads checked, the names bound after it: a read evaluated
        whenever ``e`` is (``sure``) leaves its name bound, or Python raised there)."""
        if e is None or isinstance(e, (ir.Const, ir.Global, ir.Unsupported)):
            return e, bound
        if isinstance(e, ir.Lambda):
            return self.lambda_(e, bound)
        if isinstance(e, ir.Comp):
            return self.comp(e, bound, sure)
        if isinstance(e, ir.Var):
            if e.name in self.checked and e.name not in bound:
                self.wrapped.add(e.name)
                return self.check(e, None), (bound | {e.name}) if sure else bound
            return e, bound
        if isinstance(e, ir.Prim):
            return self.prim(e, bound, sure)
        if isinstance(e, (ir.Unpack, ir.Item, ir.Field)):
            return self.target(e, bound)
        return e, bound

    def lambda_(self, e: ir.Lambda, bound):
        """A lambda's body reads the lane's locals when it is called, not here: each read of
        one not surely bound here is checked in the body, where its flag says what is bound
        at the call (a lambda written before ``y = ...`` and called after it reads ``y`` fine)."""
        fn = e.function
        params = []
        for p in fn.params:  # defaults are read here, where the lambda is made
            default, bound = self.value(p.default, bound)
            params.append(replace(p, default=default))
        fn = replace(fn, params=tuple(params))
        with self.scoped((p.name for p in fn.params), free=True):
            body = []
            for s in fn.body:
                if isinstance(s, ir.Exit) and s.value is not None:
                    s = replace(s, value=self.value(s.value, bound, sure=False)[0])
                body.append(s)
        return replace(e, function=replace(fn, body=tuple(body))), bound

    def comp(self, e: ir.Comp, bound, sure):
        """A comprehension runs where it is written: its first iterable always, its element,
        conditions and later iterables only when an item comes (their reads checked, none of
        them sure); the names its ``for`` clauses bind are its own, never the lane's."""
        first, bound = self.value(e.generators[0].iter, bound, sure)
        own = {n.name for g in e.generators for n in walk(g.target) if isinstance(n, ir.Var)}
        with self.scoped(own):
            gens = []
            for k, g in enumerate(e.generators):
                it = first if k == 0 else self.value(g.iter, bound, sure=False)[0]
                gens.append(replace(g, iter=it, conds=self.values(g.conds, bound, sure=False)[0]))
            element = self.values(e.element, bound, sure=False)[0]
        return replace(e, element=element, generators=tuple(gens)), bound

    @contextlib.contextmanager
    def scoped(self, own, free: bool = False):
        """Inside a lambda (``free``) or a comprehension: its own names are not the lane's locals."""
        outer = self.checked, self.free
        self.checked, self.free = outer[0] - frozenset(own), free or self.free
        try:
            yield
        finally:
            self.checked, self.free = outer

    def prim(self, e: ir.Prim, bound, sure):
        outer, self.loc = self.loc, e.loc
        try:
            return self.operands(e, bound, sure)
        finally:
            self.loc = outer

    def operands(self, e: ir.Prim, bound, sure):
        if e.op in ("and", "or", "ifexp"):  # operands after the first: only where Python evaluates them
            first, bound = self.value(e.args[0], bound, sure)
            rest, _ = self.values(e.args[1:], bound, sure=False)
            return replace(e, args=(first, *rest)), bound
        args, bound = self.values(e.args, bound, sure)
        keywords = []
        for k, v in e.keywords:
            v, bound = self.value(v, bound, sure)
            keywords.append((k, v))
        return replace(e, args=args, keywords=tuple(keywords)), bound

    def check(self, var: ir.Var, loc) -> ir.Prim:
        at = loc or self.loc
        return ir.Prim(CHECK, (var, ir.Var(flag(var.name)), ir.Const(message(var.name, at, self.free), "str")), at,
                       params=(("name", var.name),))


class _Blocks(_Walk):
    """A walk of a rebuilt lane's arms that also records, at each jump
    (``_bc_block = label``), what is bound there (:meth:`jumps`)."""

    def __init__(self, checked: frozenset, flagged: frozenset):
        super().__init__(checked, flagged)
        self.jumps: list = []

    def assign(self, s: ir.Assign, bound):
        if s.target == ir.Var(_BLOCK) and isinstance(s.value, ir.Const):
            self.jumps.append((s.value.value, bound))
        return super().assign(s, bound)

    def fixed_point(self, arms: dict, start: int, entry: frozenset) -> dict:
        """What is surely bound on entry to each arm (absent: no jump reaches it), from
        ``entry`` bound at the jump to ``start`` (:func:`.dataflow.fixed_point`)."""
        def exits(label, state):
            self.jumps = []
            if label in arms:
                self.block(arms[label], state)
            return self.jumps

        return fixed_point(start, entry, exits)


def _runs_once(s: ir.Loop) -> bool:
    """Whether the loop surely runs its body once: a ``range`` of literal int bounds, not empty."""
    if s.kind != "range" or not isinstance(s.iter, ir.Prim):
        return False
    args = s.iter.args
    if not args or not all(isinstance(a, ir.Const) and type(a.value) is int for a in args):
        return False
    try:
        return len(range(*(a.value for a in args))) > 0
    except (TypeError, ValueError):
        return False


__all__ = ["CHECK", "checked", "flag", "has_checks", "message"]
