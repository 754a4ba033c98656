"""Which locals of a (desugared) lane are uniform — one scalar for all W lanes —
read from its syntax, and which loops keep every live lane in step.

The emitter asks this to drop selects: a ``while`` loop reached where the mask
is the frame's live lanes, whose test is uniform and which no ``break`` or
``continue`` leaves, runs its body in every live lane or in none.  Lanes that
returned never read the frame's locals again, so stores in its body need no
``select``; for W6's running sum that removes the mask from the carried
dependency (``s = select(m, s + x, s)`` waited for the previous comparison).

A local is uniform when every store of it is plain (at the frame's top level
or in such a loop) and stores a uniform value: constants, uniform parameters,
globals, ``len(row)``, ``row.shape[0]``, ``row.size``, and arithmetic, comparisons and
scalar builtins of uniform values.  The greatest fixed point is taken (a loop
counter ``k = k + 1`` stays uniform).  Numba's typing is the judge: the
emitter marks each such loop test with ``m_uniform``, which does not type for
a vector, so a mistake here costs the SPMD path, never a result.

Example:
    >>> import ast
    >>> fdef = ast.parse('''
    ... def f(x, n):
    ...     s = 0.0
    ...     k = 0
    ...     while k < n:
    ...         s = s + x
    ...         k = k + 1
    ...     return s''').body[0]
    >>> sorted(uniform_names(fdef, {"n"}, set()))
    ['k', 'n']
"""

from __future__ import annotations

import ast

from .syntax import local_names

#: Builtins whose result is uniform when their arguments are (lanewise's
#: desugared ``range`` conversion included).
_PURE = {"min", "max", "int", "float", "bool", "abs", "round", "_lw_range"}


def uniform_names(fdef: ast.FunctionDef, params: set, rows: set) -> frozenset:
    """Locals of ``fdef`` (and the ``params`` given as uniform) that hold one scalar for all lanes."""
    local = local_names(fdef)
    names = set(params) | (local - {a.arg for a in fdef.args.args})
    while True:
        varying: set = set()
        _walk(fdef.body, True, names, local, rows, varying)
        if not varying & names:
            return frozenset(names)
        names -= varying


def lockstep_loop(loop: ast.While, names, local, rows) -> bool:
    """Whether every live lane runs ``loop``'s body together: a uniform test, no
    ``break`` or ``continue`` of this loop (``return`` is fine)."""
    return is_uniform(loop.test, names, local, rows) and not _leaves(loop.body)


def is_uniform(node, names, local, rows) -> bool:
    """Whether the expression ``node`` has one value for all lanes."""
    rule = _RULES.get(type(node))
    return rule is not None and rule(node, names, local, rows)


def _walk(stmts, plain: bool, names, local, rows, varying: set) -> None:
    for s in stmts:
        if isinstance(s, ast.Assign):
            for target in s.targets:
                _store(target, s.value if plain and is_uniform(s.value, names, local, rows) else None, varying)
        elif isinstance(s, ast.If):  # stores under a branch are selects: vectors
            _walk(s.body, False, names, local, rows, varying)
            _walk(s.orelse, False, names, local, rows, varying)
        elif isinstance(s, ast.While):
            _walk(s.body, plain and lockstep_loop(s, names, local, rows), names, local, rows, varying)


def _store(target, uniform_value, varying: set) -> None:
    """Mark the names ``target`` binds varying unless ``uniform_value`` is given."""
    if uniform_value is None:
        varying.update(n.id for n in ast.walk(target) if isinstance(n, ast.Name))
    elif not isinstance(target, ast.Name):  # unpacking: conservatively varying
        varying.update(n.id for n in ast.walk(target) if isinstance(n, ast.Name))


def _leaves(stmts) -> bool:
    """A ``break`` or ``continue`` in ``stmts`` that belongs to the loop around them."""
    for s in stmts:
        if isinstance(s, (ast.Break, ast.Continue)):
            return True
        if isinstance(s, ast.If) and (_leaves(s.body) or _leaves(s.orelse)):
            return True
    return False


def _all(nodes, names, local, rows) -> bool:
    return all(is_uniform(n, names, local, rows) for n in nodes)


def _name(node, names, local, rows) -> bool:
    # a global or closure constant is the same in every lane; a row is not a value
    return node.id in names or (node.id not in local and node.id not in rows)


def _attribute(node, names, local, rows) -> bool:
    if not isinstance(node.value, ast.Name):
        return False
    if node.value.id in rows:  # row.size: every lane's row has the same length
        return node.attr == "size"
    return node.value.id not in local


def _subscript(node, names, local, rows) -> bool:
    base = node.value  # row.shape[0]: every lane's row has the same length
    return (isinstance(base, ast.Attribute) and base.attr == "shape" and isinstance(base.value, ast.Name)
            and base.value.id in rows)


def _call(node, names, local, rows) -> bool:
    f = node.func
    if node.keywords or not isinstance(f, ast.Name) or f.id in local:
        return False
    if f.id == "len":
        return len(node.args) == 1 and isinstance(node.args[0], ast.Name) and node.args[0].id in rows
    return f.id in _PURE and _all(node.args, names, local, rows)


_RULES = {
    ast.Constant: lambda node, *env: True,
    ast.Name: _name,
    ast.Attribute: _attribute,
    ast.Subscript: _subscript,
    ast.Call: _call,
    ast.BinOp: lambda node, *env: _all((node.left, node.right), *env),
    ast.UnaryOp: lambda node, *env: is_uniform(node.operand, *env),
    ast.BoolOp: lambda node, *env: _all(node.values, *env),
    ast.Compare: lambda node, *env: _all((node.left, *node.comparators), *env),
    ast.IfExp: lambda node, *env: _all((node.test, node.body, node.orelse), *env),
}


def uniform_reads(fdef: ast.FunctionDef, params: set, rows: set, checked: set | None = None) -> bool:
    """Whether every ``row[i]`` in the desugared ``fdef`` has a uniform index (a
    block read of a contiguous row, :func:`.rows.v_row`, rather than a gather).
    ``rows``: every array parameter (rows and tables, whose lengths are uniform);
    ``checked``: those whose reads are asked about (default: all of ``rows``)."""
    names, local = uniform_names(fdef, params, rows), local_names(fdef)
    checked = rows if checked is None else checked
    return all(is_uniform(n.slice, names, local, rows) for n in ast.walk(fdef)
               if isinstance(n, ast.Subscript) and isinstance(n.value, ast.Name) and n.value.id in checked)
