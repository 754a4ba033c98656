"""Loop-carried names: which locals each loop of a function brings from one iteration to the next.

The front end (:mod:`.build`) fills :attr:`~.nodes.Loop.carried` when it builds a
function; a pass that rewrites a function's statements (autodiff's structured loops
and scans) finds them again with :func:`with_carried`.  These read the IR only.

Example:
    >>> from lanewise.lane.ir.build import function_ir
    >>> def lane(x, n):
    ...     s, t = 0.0, 1.0
    ...     for k in range(n):
    ...         s += x * t
    ...     return s
    >>> function_ir(lane).body[1].carried
    ('s',)
"""

from __future__ import annotations

from dataclasses import replace

from . import nodes as ir


def assigned(stmts) -> set:
    """Names the statements bind (loop targets, handlers and nested defs included; not
    inside nested functions)."""
    out: set = set()
    for s in stmts:
        if isinstance(s, ir.Assign):
            out |= ir.target_names(s.target)
        elif isinstance(s, ir.Def):
            out.add(s.function.name)
        elif isinstance(s, ir.If):
            out |= assigned(s.then) | assigned(s.orelse)
        elif isinstance(s, ir.Loop):
            out |= (ir.target_names(s.target) if s.target is not None else set()) | assigned(s.body) \
                | assigned(s.orelse)
        elif isinstance(s, ir.Try):
            out |= assigned(s.body) | assigned(s.orelse) | assigned(s.final)
            for h in s.handlers:
                out |= assigned(h.body) | ({h.name} if h.name else set())
    return out


def with_carried(function: ir.Function) -> ir.Function:
    """``function`` with each loop's :attr:`~.nodes.Loop.carried` names found again, for a
    pass that rewrote its statements (autodiff's structured loops).

    Example:
        >>> from dataclasses import replace
        >>> from lanewise.lane.ir.build import function_ir
        >>> def lane(x, n):
        ...     s = 0.0
        ...     for k in range(n):
        ...         s += x
        ...     return s
        >>> f = function_ir(lane)
        >>> with_carried(replace(f, body=f.body[:1] + (replace(f.body[1], carried=()),) + f.body[2:])) == f
        True
    """
    defined = frozenset(p.name for p in function.params)
    return replace(function, body=carry(function.body, defined, frozenset()))


def carry(stmts: tuple, defined: frozenset, around: frozenset) -> tuple:
    """``stmts`` with each loop's carried names: assigned in the loop and live into it
    (bound before it in the text, or anywhere in a loop around it, whose next iteration
    brings the value back, or read in the loop before it assigns them: a value the
    previous iteration left, as between the blocks of a function rebuilt from bytecode)."""
    out = []
    for s in stmts:
        if isinstance(s, ir.Loop):
            inside = assigned(s.body)
            own = ir.target_names(s.target) if s.target is not None else set()
            exposed = _exposed(s.body, frozenset(own))[0] | reads((s.cond,))
            carried = tuple(sorted(inside & (defined | around | exposed)))  # the target alone is the loop's own
            s = replace(s, body=carry(s.body, defined | own, around | inside | own),
                        orelse=carry(s.orelse, defined | inside | own, around), carried=carried)
        elif isinstance(s, ir.If):
            s = replace(s, then=carry(s.then, defined, around), orelse=carry(s.orelse, defined, around))
        elif isinstance(s, ir.Try):
            s = replace(s, body=carry(s.body, defined, around), orelse=carry(s.orelse, defined, around),
                        final=carry(s.final, defined, around),
                        handlers=tuple(replace(h, body=carry(h.body, defined, around)) for h in s.handlers))
        out.append(s)
        defined = defined | assigned([s])
    return tuple(out)


def exposed(stmts) -> set:
    """The names ``stmts`` read on some path before assigning them: the values they take
    from before them.

    Example:
        >>> from lanewise.lane.ir.build import function_ir
        >>> def lane(x, z):
        ...     y = x + 1.0
        ...     return y * z
        >>> sorted(exposed(function_ir(lane).body))
        ['x', 'z']
    """
    return _exposed(stmts, frozenset())[0]


def _exposed(stmts, bound: frozenset | None) -> tuple[set, frozenset | None]:
    """(names read in ``stmts`` on some path before any assignment of them, the names
    surely bound after them); ``bound`` None: the statements are not reached (after an exit)."""
    exposed: set = set()
    for s in stmts:
        if bound is None:
            break
        if isinstance(s, ir.If):
            exposed |= reads((s.cond,)) - bound
            (e1, b1), (e2, b2) = _exposed(s.then, bound), _exposed(s.orelse, bound)
            exposed |= e1 | e2
            bound = b2 if b1 is None else b1 if b2 is None else b1 & b2
        elif isinstance(s, ir.Loop):  # its body may not run: nothing it binds is sure after it
            own = ir.target_names(s.target) if s.target is not None else set()
            exposed |= reads((s.iter, s.cond)) - bound
            exposed |= _exposed(s.body, bound | own)[0] | _exposed(s.orelse, bound)[0]
        elif isinstance(s, ir.Try):
            for part in (s.body, s.orelse, s.final, *(h.body for h in s.handlers)):
                exposed |= _exposed(part, bound)[0]
        else:
            exposed |= reads(_parts(s)) - bound
            if isinstance(s, (ir.Exit, ir.Raise)):
                bound = None
            else:
                bound = bound | assigned([s])
    return exposed, bound


def _parts(s) -> tuple:
    """What a simple statement reads: its expressions (and an item or field target's)."""
    if isinstance(s, ir.Assign):
        return (s.value, *_target_parts(s.target))
    if isinstance(s, ir.Def):
        return (s.function,)
    return tuple(getattr(s, f) for f in ("expr", "value", "exc", "cause", "test", "msg") if hasattr(s, f))


def _target_parts(t) -> tuple:
    """The expressions an assignment target reads (an item's base and index), not the names it binds."""
    if isinstance(t, ir.Unpack):
        return tuple(p for item in t.items for p in _target_parts(item))
    if isinstance(t, ir.Item):
        return (t.base, t.index)
    return (t.base,) if isinstance(t, ir.Field) else ()


def reads(parts) -> set:
    """The :class:`.Var` names anywhere in ``parts``, a node or a sequence of them (nested
    functions' included: a closure reads what it names)."""
    out, todo = set(), list(parts) if isinstance(parts, (tuple, list)) else [parts]
    while todo:
        n = todo.pop()
        if isinstance(n, (tuple, list)):
            todo.extend(n)
        elif isinstance(n, ir.Var):
            out.add(n.name)
        elif n is not None and hasattr(n, "__dataclass_fields__") and not isinstance(n, ir.Loc):
            todo.extend(getattr(n, f) for f in n.__dataclass_fields__)
    return out
