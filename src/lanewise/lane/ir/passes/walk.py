"""What the passes read off lane IR nodes: walks, calls and their operands, stores.

Example:
    >>> from lanewise.lane.ir.build import build
    >>> def lane(a, x):
    ...     a[0] = x
    ...     return np.sqrt(x)
    >>> import numpy as np
    >>> [c.op for c in calls(build(lane).entry.body)]
    ['np.sqrt']
"""

from __future__ import annotations

from dataclasses import replace

from .. import nodes as ir

#: Primitives that are operators, not calls (``pow`` is also a builtin: calling it changes nothing).
OPERATORS = frozenset({
    "add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "lshift", "rshift", "bitor", "bitand", "bitxor",
    "matmul", "neg", "pos", "not", "invert", "eq", "ne", "lt", "le", "gt", "ge", "is", "isnot", "in", "notin",
    "and", "or", "ifexp", "getitem", "attr", "slice", "star", "star2", "walrus", "fstring", "setitem"})


def fields(node) -> tuple:
    """The parts of an IR node (its expressions, statements, targets), not its place."""
    return tuple(getattr(node, f) for f in node.__dataclass_fields__ if f not in ("loc", "origin"))


def walk(node, opaque: tuple = (), reads: bool = False):
    """Every IR node in ``node`` (a node or a tuple of them); the insides of ``opaque``
    kinds are not visited (the nodes themselves are).  With ``reads``, not the targets
    an assignment, loop or comprehension binds, only what storing into them reads
    (``a[i] = v``'s ``a`` and ``i``, ``p.x = v``'s ``p``).

    Example:
        >>> from lanewise.lane.ir.build import function_ir
        >>> def lane(a, x):
        ...     y, a[0] = x, x
        ...     return y
        >>> sorted({n.name for n in walk(function_ir(lane).body, reads=True) if isinstance(n, ir.Var)})
        ['a', 'x', 'y']
        >>> [type(n).__name__ for n in walk(function_ir(lane).body[0], reads=True)]
        ['Assign', 'Var', 'Const', 'Prim', 'Var', 'Var']
    """
    todo = [node]
    while todo:
        n = todo.pop()
        if isinstance(n, (tuple, list)):
            todo.extend(reversed(n))
        elif hasattr(n, "__dataclass_fields__") and not isinstance(n, ir.Loc):
            yield n
            if not isinstance(n, opaque):
                todo.extend(reversed(_read_fields(n) if reads else fields(n)))


def _read_fields(node) -> tuple:
    """:func:`fields` with a binding's target replaced by what storing into it reads."""
    if not isinstance(node, (ir.Assign, ir.Loop, ir.Generator)):
        return fields(node)
    return tuple(_target_reads(getattr(node, f)) if f == "target" else getattr(node, f)
                 for f in node.__dataclass_fields__ if f not in ("loc", "origin"))


def _target_reads(t) -> tuple:
    """What storing into target ``t`` reads: the base and index of each item, the base of each field."""
    if isinstance(t, ir.Unpack):
        return tuple(r for item in t.items for r in _target_reads(item))
    if isinstance(t, ir.Item):
        return t.base, t.index
    return (t.base,) if isinstance(t, ir.Field) else ()


def mapped(node, change, made: dict | None = None):
    """``node`` (a node or a tuple of them) with each node ``n`` in it for which
    ``change(n)`` gives a node replaced by that node (whose parts are mapped in turn);
    a node met twice (``a = b = v`` shares ``v``: one evaluation) is made once.

    Example:
        >>> x = ir.Var("x")
        >>> mapped((ir.Do(ir.Prim("abs", (x,), ir.Loc("f.py", 2, 4)), ir.Loc("f.py", 2, 4)),),
        ...        lambda n: ir.Var("y") if n == x else None)[0].expr.args
        (Var(name='y'),)
    """
    made = {} if made is None else made
    if isinstance(node, (tuple, list)):
        return tuple(mapped(n, change, made) for n in node)
    if not hasattr(node, "__dataclass_fields__") or isinstance(node, ir.Loc):
        return node
    if id(node) not in made:
        new = change(node)
        new = node if new is None else new
        if hasattr(new, "__dataclass_fields__"):
            new = replace(new, **{f: mapped(getattr(new, f), change, made) for f in new.__dataclass_fields__
                                  if f not in ("loc", "origin")})
        made[id(node)] = new
    return made[id(node)]


def own(body):
    """The nodes of a function's own body: not inside nested functions (comprehensions are)."""
    return walk(body, (ir.Def, ir.Lambda))


def shape(n):
    """``n`` without its places: equal for the same code written twice."""
    if isinstance(n, (tuple, list)):
        return tuple(map(shape, n))
    if hasattr(n, "__dataclass_fields__") and not isinstance(n, ir.Loc):
        return (type(n).__name__, *map(shape, fields(n)))
    return n


def same_code(a: tuple, b: tuple) -> bool:
    """Whether two statement lists (or expressions) are the same code."""
    return len(a) == len(b) and bool(a) and shape(a) == shape(b)


def is_store(p) -> bool:
    """``x[i] = v`` / ``x.name = v`` (a ``setattr`` call has no ``name`` parameter)."""
    return isinstance(p, ir.Prim) and (p.op == "setitem" or (p.op == "setattr" and bool(p.params)))


def is_call(p: ir.Prim) -> bool:
    if p.op in OPERATORS or is_store(p):
        return False
    if p.op in ("tuple", "list", "set", "dict") and p.type is not None:  # a display
        return False
    return not (p.op == "format" and p.params)  # an f-string's field


def dict_items(node) -> set:
    """ids of the (key, value) pairs of dict displays in ``node``: parts of a display, not calls."""
    return {id(i) for n in walk(node) if isinstance(n, ir.Prim) and n.op == "dict" and n.type for i in n.args}


def calls(node):
    """The calls in ``node`` (nested functions' included)."""
    items = dict_items(node)
    return [n for n in walk(node) if isinstance(n, ir.Prim) and id(n) not in items and is_call(n)]


def call_args(p: ir.Prim) -> tuple:
    """(the positional arguments of call ``p``, the object a method is called on or None)."""
    if p.op.startswith("method."):
        return p.args[1:], p.args[0]
    return (p.args[1:] if p.op == "call" else p.args), None


def base_name(v) -> str | None:
    """The name under ``a[i]``, ``a.T``, ``*a`` (a module path's first name)."""
    while isinstance(v, ir.Prim) and v.op in ("getitem", "attr", "star"):
        v = v.args[0]
    if isinstance(v, ir.Var):
        return v.name
    return v.name.split(".")[0] if isinstance(v, ir.Global) else None


def call_operands(p: ir.Prim) -> list[str]:
    """Names of the objects a call could write into: its arguments (positional,
    starred, keyword; the array under ``a[1:]`` or ``a.T``) and the object a
    method is called on (or the module a function is reached through)."""
    argv, obj = call_args(p)
    values = [*argv, *(v for _, v in p.keywords)]
    names = [n for n in map(base_name, values) if n is not None]
    if obj is not None and base_name(obj) is not None:
        names.append(base_name(obj))
    elif "." in p.op and not p.op.startswith(("call:", "method.")):
        names.append(p.op.split(".")[0])
    return names


def store_names(t) -> list[str]:
    """The names a target assigns (``a, b``) or writes into (``a[i]``, ``a.x``: ``a``)."""
    if isinstance(t, ir.Var):
        return [t.name]
    if isinstance(t, ir.Unpack):
        return [n for i in t.items for n in store_names(i)]
    name = base_name(t.base) if isinstance(t, (ir.Item, ir.Field)) else None
    return [name] if name is not None else []


def target_read(t, loc) -> ir.Prim:
    """An item or field target as the expression that reads it."""
    if isinstance(t, ir.Item):
        return ir.Prim("getitem", (t.base, t.index), loc)
    return ir.Prim("attr", (t.base,), loc, params=(("name", t.name),))


def store_target(p: ir.Prim):
    """The target of a ``setitem``/``setattr`` store."""
    if p.op == "setitem":
        return ir.Item(p.args[0], p.args[1])
    return ir.Field(p.args[0], dict(p.params)["name"])


def stored(nodes, defs: bool) -> set:
    """Names bound in ``nodes``: assignment, loop and comprehension targets, walruses
    (and nested ``def`` names when ``defs``)."""
    out: set = set()
    for n in nodes:
        if isinstance(n, (ir.Assign, ir.Generator)) or (isinstance(n, ir.Loop) and n.target is not None):
            out |= ir.target_names(n.target)
        elif isinstance(n, ir.Prim) and n.op == "walrus":
            out.add(dict(n.params)["name"])
        elif defs and isinstance(n, ir.Def):
            out.add(n.function.name)
    return out


def written(node) -> list[str]:
    """Names whose memory ``node`` may write: stores under them, call operands."""
    names = []
    for n in walk(node):
        if isinstance(n, ir.Do) and is_store(n.expr):
            names += store_names(store_target(n.expr))
        elif isinstance(n, (ir.Item, ir.Field)):
            names += store_names(n)
    return names + [name for c in calls(node) for name in call_operands(c)]


def has_exit(node) -> bool:
    """A ``break``, ``continue`` or ``return`` anywhere in ``node`` (a lambda's value is none)."""
    return any(isinstance(n, ir.Exit) for n in walk(node, (ir.Lambda,)))


def inplace(v) -> bool:
    return isinstance(v, ir.Prim) and ("inplace", True) in v.params


def display(v) -> bool:
    """A tuple or list display without ``*`` (whose sizes the analysis cannot count)."""
    return isinstance(v, ir.Prim) and v.op in ("tuple", "list") and v.type is not None and not any(
        isinstance(a, ir.Prim) and a.op == "star" for a in v.args)

def view_sources(value) -> list[str]:
    """Names whose memory the value of ``value`` may share: the array itself (``a``),
    under an index or attribute (``a[0:1]``, ``a.T``), or a call's operands
    (``a.reshape(2)``, ``np.asarray(a)``); arithmetic makes new arrays."""
    if isinstance(value, ir.Var):
        return [value.name]
    if isinstance(value, ir.Global):
        return [value.name.split(".")[0]]
    if not isinstance(value, ir.Prim):
        return []
    if value.op in ("getitem", "attr", "star", "walrus"):
        return view_sources(value.args[0])
    if value.op == "ifexp":
        return view_sources(value.args[1]) + view_sources(value.args[2])
    if value.op in ("tuple", "list", "set") and value.type is not None:
        return [n for e in value.args for n in view_sources(e)]
    if value.op == "dict" and value.type is not None:
        return [n for item in value.args for n in view_sources(item.args[-1])]
    return call_operands(value) if is_call(value) else []


def spliced(stmts, each) -> tuple:
    """``each`` of ``stmts`` as one block: a statement may become several (a list) or one.

    Example:
        >>> spliced([1, 2], lambda s: [s, s] if s == 2 else s)
        (1, 2, 2)
    """
    out: list = []
    for s in stmts:
        made = each(s)
        out += made if isinstance(made, list) else [made]
    return tuple(out)
