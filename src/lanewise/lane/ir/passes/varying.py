"""Uniform/varying analysis over the lane IR: which locals hold one scalar for all lanes.

The rules are those of :mod:`lanewise.spmd.uniform` (which reads the desugared
AST), stated on the IR, so the two can be compared lane by lane
(tests/test_lane_ir.py does, on the corpus): a local is uniform when every
store of it is *plain* — at the function's top level, or in a loop that every
live lane runs together — and stores a uniform value: constants, globals,
uniform parameters, ``len(row)``, ``row.shape[0]``, ``row.size``, and
arithmetic, comparisons and scalar builtins of uniform values.  A loop runs in
lockstep when its test (a ``while``'s condition, a ``range``'s bounds) is
uniform and no ``break`` or ``continue`` of its own leaves it (a ``range`` loop
also needs a plain place: its counter is a store).  The greatest fixed point is
taken, so a counter ``k = k + 1`` stays uniform.

The SPMD emitter asks :func:`analyse` for its lockstep loops (by location) and
:func:`uniform_reads` whether a row's reads are block reads.  Where the AST
analysis this replaced did not look, this pass is conservative: stores in a
``try``, a walrus or a ``for`` loop over anything but ``range`` are varying, a
``break`` inside a ``try`` leaves its loop (the SPMD path refuses all three).

Example:
    >>> from lanewise.lane.ir.build import build
    >>> def f(x, n):
    ...     s = 0.0
    ...     k = 0
    ...     while k < n:
    ...         s = s + x
    ...         k = k + 1
    ...     return s
    >>> sorted(uniform_names(build(f).entry, {"n"}, set()))
    ['k', 'n']
"""

from __future__ import annotations

from dataclasses import dataclass

from .. import nodes as ir

#: Builtins whose result is uniform when their arguments are.
PURE_CALLS = frozenset({"min", "max", "int", "float", "bool", "abs", "round"})
#: Operators: uniform when their operands are.
OPERATORS = frozenset({"add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "lshift", "rshift", "bitor",
                       "bitand", "bitxor", "matmul", "neg", "pos", "not", "invert", "eq", "ne", "lt", "le", "gt",
                       "ge", "is", "isnot", "in", "notin", "and", "or", "ifexp"})


@dataclass(frozen=True)
class Uniformity:
    """What :func:`analyse` finds in one function: ``names``, the uniform locals;
    ``lockstep``, the :class:`~lanewise.lane.ir.nodes.Loc` of each loop whose body every live lane
    runs together (a uniform test, no ``break``/``continue`` of its own)."""

    names: frozenset
    lockstep: frozenset


def analyse(fn: ir.Function, params: set, rows: set) -> Uniformity:
    """The uniform locals and lockstep loops of ``fn``; ``params``: the parameters
    given as uniform; ``rows``: array parameters (each lane's row has the same length).

    Example:
        >>> from lanewise.lane.ir.build import build
        >>> def f(x, n):
        ...     for k in range(n):
        ...         x = x + k
        ...     return x
        >>> [loc.line for loc in analyse(build(f).entry, {"n"}, set()).lockstep] == [f.__code__.co_firstlineno + 1]
        True
    """
    local = local_names(fn)
    positional = {p.name for p in fn.params if p.kind == "positional"}
    names = set(params) | (local - positional)
    while True:
        varying: set = set()
        lockstep: set = set()
        _walk(fn.body, True, (names, local, rows), varying, lockstep)
        if not varying & names:  # this walk read the final names: its loop answers stand
            return Uniformity(frozenset(names), frozenset(lockstep))
        names -= varying


def uniform_names(fn: ir.Function, params: set, rows: set) -> frozenset:
    """Locals of ``fn`` (and the ``params`` given as uniform) that hold one scalar for all
    lanes; ``rows``: array parameters (each lane's row has the same length)."""
    return analyse(fn, params, rows).names


def varying_names(fn: ir.Function, params: set, rows: set) -> frozenset:
    """The locals of ``fn`` that may differ between lanes (the complement of :func:`uniform_names`)."""
    return frozenset(local_names(fn) - uniform_names(fn, params, rows))


def local_names(fn: ir.Function) -> set:
    """Parameters and every name the function's body stores, nested functions' included
    (Python's rule for what is local, as :func:`lanewise.spmd.syntax.local_names` reads it)."""
    names = {p.name for p in fn.params if p.kind in ("positional", "keyword")}
    for node in _walk_nodes(fn.body):
        if isinstance(node, ir.Assign):
            names |= ir.target_names(node.target)
        elif isinstance(node, ir.Loop) and node.target is not None:
            names |= ir.target_names(node.target)
        elif isinstance(node, ir.Generator):
            names |= ir.target_names(node.target)
        elif isinstance(node, ir.Prim) and node.op == "walrus":
            names.add(dict(node.params)["name"])
    return names


def lockstep(loop: ir.Loop, names, local, rows) -> bool:
    """Whether every live lane runs ``loop``'s body together."""
    if loop.kind == "while":
        test = (loop.cond,)
    elif loop.kind == "range" and isinstance(loop.target, ir.Var) and not loop.iter.keywords:
        test = loop.iter.args  # the counter's bounds and step
    else:
        return False
    return all(is_uniform(e, names, local, rows) for e in test) and not _leaves(loop.body)


def is_uniform(e, names, local, rows) -> bool:
    """Whether the expression ``e`` has one value for all lanes."""
    if isinstance(e, (ir.Const, ir.Global)):
        return True
    if isinstance(e, ir.Var):
        return e.name in names or (e.name not in local and e.name not in rows)
    if not isinstance(e, ir.Prim) or e.keywords:
        return False
    if e.op in OPERATORS or e.op in PURE_CALLS:
        return all(is_uniform(a, names, local, rows) for a in e.args)
    if e.op == "attr":
        return _attribute(e, local, rows)
    if e.op == "getitem":  # row.shape[k]: every lane's row has the same length
        base = e.args[0]
        return (isinstance(base, ir.Prim) and base.op == "attr" and dict(base.params)["name"] == "shape"
                and isinstance(base.args[0], ir.Var) and base.args[0].name in rows)
    if e.op == "len":
        return len(e.args) == 1 and isinstance(e.args[0], ir.Var) and e.args[0].name in rows
    return False


def _attribute(e: ir.Prim, local, rows) -> bool:
    base = e.args[0]
    if isinstance(base, ir.Global):
        return True
    if not isinstance(base, ir.Var):
        return False
    if base.name in rows:  # row.size
        return dict(e.params)["name"] == "size"
    return base.name not in local


def _walk(stmts, plain: bool, env: tuple, varying: set, steps: set) -> None:
    """Mark the names ``stmts`` store other than plainly and uniformly ``varying``; add the
    loops that run in lockstep to ``steps``.  ``env``: (uniform names, locals, rows)."""
    for s in stmts:
        if isinstance(s, ir.Assign):
            uniform = plain and isinstance(s.target, ir.Var) and is_uniform(s.value, *env)
            if not uniform:
                varying.update(ir.target_names(s.target) | _read_names(s.target))
        elif isinstance(s, ir.Do) and isinstance(s.expr, ir.Prim) and s.expr.op in ("setitem", "setattr"):
            varying.update(_read_names(s.expr.args[:-1]))  # as the AST analysis treats a store's target
        elif isinstance(s, ir.If):  # stores under a branch are selects: vectors
            _walk(s.then, False, env, varying, steps)
            _walk(s.orelse, False, env, varying, steps)
        elif isinstance(s, ir.Loop):
            together = plain and lockstep(s, *env)
            # a while loop's answer does not depend on where it is (the emitter judges the place);
            # a range loop's does: its counter is a store, a vector outside a plain place
            if together or (s.kind == "while" and lockstep(s, *env)):
                steps.add(s.loc)
            if s.target is not None and not together:
                varying.update(ir.target_names(s.target))
            _walk(s.body, together, env, varying, steps)
            _walk(s.orelse, False, env, varying, steps)
        elif isinstance(s, ir.Try):
            for part in (s.body, s.orelse, s.final, *(h.body for h in s.handlers)):
                _walk(part, False, env, varying, steps)
            varying.update(h.name for h in s.handlers if h.name)
        if not isinstance(s, (ir.Def, ir.Unsupported)):
            varying.update(_walrus_names(s))


def _leaves(stmts) -> bool:
    """A ``break`` or ``continue`` in ``stmts`` that belongs to the loop around them."""
    for s in stmts:
        if isinstance(s, ir.Exit) and s.kind in ("break", "continue"):
            return True
        if isinstance(s, ir.If) and (_leaves(s.then) or _leaves(s.orelse)):
            return True
        if isinstance(s, ir.Try) and any(_leaves(part) for part in (s.body, s.orelse, s.final,
                                                                    *(h.body for h in s.handlers))):
            return True
    return False


def uniform_reads(fn: ir.Function, params: set, rows: set, checked: set | None = None) -> bool:
    """Whether every ``row[i]`` in ``fn`` (read or stored, nested functions included) has a
    uniform index: a block read of a contiguous row rather than a gather.  ``rows``: every
    array parameter (rows and tables, whose lengths are uniform); ``checked``: those whose
    reads are asked about (default: all of ``rows``).

    Example:
        >>> from lanewise.lane.ir.build import build
        >>> def f(row, x):
        ...     return row[0] + row[int(x)]
        >>> uniform_reads(build(f).entry, set(), {"row"}), uniform_reads(build(f).entry, {"x"}, {"row"})
        (False, True)
    """
    names, local = uniform_names(fn, params, rows), local_names(fn)
    checked = rows if checked is None else checked
    return all(is_uniform(index, names, local, rows) for index in _indices(fn.body, checked))


def _indices(body, checked) -> list:
    """The index of every read or store of an item of a ``checked`` parameter in ``body``."""
    out = []
    for n in _walk_nodes(body):
        if isinstance(n, ir.Prim) and n.op in ("getitem", "setitem"):
            base, index = n.args[0], n.args[1]
        elif isinstance(n, ir.Item):
            base, index = n.base, n.index
        else:
            continue
        if isinstance(base, ir.Var) and base.name in checked:
            out.append(index)
    return out


def _read_names(node) -> set:
    """Locals read in ``node`` (an expression, target or tuple of them)."""
    return {n.name for n in _walk_nodes(node) if isinstance(n, ir.Var)}


def _walrus_names(s) -> set:
    return {dict(n.params)["name"] for n in _walk_nodes(_own_parts(s))
            if isinstance(n, ir.Prim) and n.op == "walrus"}


def _own_parts(s) -> tuple:
    """The expressions of statement ``s`` itself (not of the statements nested in it)."""
    if isinstance(s, ir.Loop):
        return (s.iter, s.cond)
    if isinstance(s, ir.If):
        return (s.cond,)
    return tuple(getattr(s, f) for f in ("value", "expr", "exc", "cause", "test", "msg") if hasattr(s, f))


def _walk_nodes(node):
    """Every IR node in ``node`` (a node, or a tuple of nodes), depth first."""
    todo = [node]
    while todo:
        n = todo.pop()
        if isinstance(n, (tuple, list)):
            todo.extend(n)
        elif n is not None and hasattr(n, "__dataclass_fields__") and not isinstance(n, ir.Loc):
            yield n
            todo.extend(getattr(n, f) for f in n.__dataclass_fields__ if f != "loc")
