"""The lane IR as text: one line per statement, regions indented, loop-carried names shown.

Deterministic (the same text on every Python lanewise supports): primitives print as
``op(args)``, globals with an ``@`` (``@np.pi``), constants as Python writes them;
``lines=True`` ends each statement with ``# line N``.

Example:
    >>> from lanewise.lane.ir.build import build
    >>> def lane(x, n):
    ...     s = 0.0
    ...     for k in range(n):
    ...         if x > k:
    ...             s += x
    ...     return s
    >>> print(pretty(build(lane)))
    lane lane(x, n):
      s = 0.0
      for k in range(n) carry (s):
        if gt(x, k):
          s = add(s, x)
      return s
"""

from __future__ import annotations

from . import nodes as ir

_INDENT = "  "


def pretty(module: ir.LaneModule, lines: bool = False) -> str:
    """The text of ``module``: the lane, then each helper."""
    out: list[str] = []
    for k, fn in enumerate(module.functions()):
        _function(fn, "lane" if k == 0 else "helper", 0, out, lines)
    return "\n".join(out)


def _function(fn: ir.Function, word: str, depth: int, out: list, lines: bool) -> None:
    rebuilt = "  [rebuilt from bytecode]" if fn.source == "bytecode" else ""
    out.append(f"{_INDENT * depth}{word} {fn.name}({', '.join(_param(p) for p in fn.params)}):{rebuilt}"
               + _line(fn.loc, lines))
    _block(fn.body, depth + 1, out, lines)


def _param(p: ir.Param) -> str:
    name = {"vararg": "*", "kwarg": "**"}.get(p.kind, "") + p.name
    return name if p.default is None else f"{name}={expr(p.default)}"


def _line(loc: ir.Loc, lines: bool) -> str:
    return f"  # line {loc.line}" if lines else ""


def _block(stmts, depth: int, out: list, lines: bool) -> None:
    if not stmts:
        out.append(_INDENT * depth + "pass")
    for s in stmts:
        _stmt(s, depth, out, lines)


def _stmt(s, depth: int, out: list, lines: bool) -> None:
    pad = _INDENT * depth
    end = _line(s.loc, lines)
    if isinstance(s, ir.Assign):
        out.append(f"{pad}{target(s.target)} = {expr(s.value)}{end}")
    elif isinstance(s, ir.Do):
        out.append(f"{pad}{expr(s.expr)}{end}")
    elif isinstance(s, ir.If):
        out.append(f"{pad}if {expr(s.cond)}:{end}")
        _block(s.then, depth + 1, out, lines)
        if s.orelse:
            out.append(f"{pad}else:")
            _block(s.orelse, depth + 1, out, lines)
    elif isinstance(s, ir.Loop):
        head = f"while {expr(s.cond)}" if s.kind == "while" else f"for {target(s.target)} in {expr(s.iter)}"
        carry = f" carry ({', '.join(s.carried)})" if s.carried else ""
        out.append(f"{pad}{head}{carry}:{end}")
        _block(s.body, depth + 1, out, lines)
        if s.orelse:
            out.append(f"{pad}else:")
            _block(s.orelse, depth + 1, out, lines)
    elif isinstance(s, ir.Exit):
        out.append(f"{pad}{s.kind}{'' if s.value is None else ' ' + expr(s.value)}{end}")
    elif isinstance(s, ir.Raise):
        cause = "" if s.cause is None else f" from {expr(s.cause)}"
        out.append(f"{pad}raise{'' if s.exc is None else ' ' + expr(s.exc)}{cause}{end}")
    elif isinstance(s, ir.Assert):
        out.append(f"{pad}assert {expr(s.test)}{'' if s.msg is None else ', ' + expr(s.msg)}{end}")
    elif isinstance(s, ir.Try):
        _try(s, depth, out, lines)
    elif isinstance(s, ir.Def):
        _function(s.function, "def", depth, out, lines)
    else:
        out.append(f"{pad}unsupported: {s.what}{end}")


def _try(s: ir.Try, depth: int, out: list, lines: bool) -> None:
    pad = _INDENT * depth
    out.append(f"{pad}try:{_line(s.loc, lines)}")
    _block(s.body, depth + 1, out, lines)
    for h in s.handlers:
        caught = "" if h.type is None else " " + expr(h.type)
        out.append(f"{pad}except{caught}{'' if h.name is None else ' as ' + h.name}:")
        _block(h.body, depth + 1, out, lines)
    for word, part in (("else", s.orelse), ("finally", s.final)):
        if part:
            out.append(f"{pad}{word}:")
            _block(part, depth + 1, out, lines)


def target(t) -> str:
    if isinstance(t, ir.Var):
        return t.name
    if isinstance(t, ir.Unpack):
        items = [("*" if k == t.star else "") + target(i) for k, i in enumerate(t.items)]
        return f"({', '.join(items)}{',' if len(items) == 1 else ''})"
    if isinstance(t, ir.Item):
        return f"{expr(t.base)}[{expr(t.index)}]"
    return f"{expr(t.base)}.{t.name}"


def expr(e) -> str:
    """One expression's text.

    Example:
        >>> expr(ir.Prim("lt", (ir.Var("k"), ir.Global("n", "global")), ir.Loc("f.py", 1, 0)))
        'lt(k, @n)'
    """
    if isinstance(e, ir.Var):
        return e.name
    if isinstance(e, ir.Const):
        return repr(e.value)
    if isinstance(e, ir.Global):
        return "@" + e.name
    if isinstance(e, ir.Prim):
        items = [expr(a) for a in e.args] + [f"{k}={expr(v)}" for k, v in e.keywords]
        items += [f"{k}:{v!r}" for k, v in e.params if k != "inplace"]
        return f"{e.op}({', '.join(items)})"
    if isinstance(e, ir.Lambda):
        params = ", ".join(_param(p) for p in e.function.params)
        return f"lambda({params}: {expr(e.function.body[0].value)})"
    if isinstance(e, ir.Comp):
        gens = " ".join(f"for {target(g.target)} in {expr(g.iter)}" + "".join(f" if {expr(c)}" for c in g.conds)
                        for g in e.generators)
        return f"{e.kind}comp({', '.join(expr(x) for x in e.element)} {gens})"
    return f"unsupported({e.what})"
