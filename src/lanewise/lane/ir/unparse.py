"""An IR expression as Python writes it: the text :func:`ast.unparse` gives for the
expression the user wrote, so that errors can quote the user's construct.

Constants print as ``repr`` (``'%d'``, ``1.0``), operators with the spacing and the
parentheses (only where precedence needs them) of ``ast.unparse``.  Globals print by
their IR name: a module attribute by its usual short path (``np.pi``), whatever
name the lane's module gave the module.

Example:
    >>> from lanewise.lane.ir import nodes as ir
    >>> at = ir.Loc("f.py", 1, 0)
    >>> python_text(ir.Prim("mod", (ir.Const("%d", "str"), ir.Prim("tuple", (ir.Var("x"), ir.Var("n")), at,
    ...                                                                  type="tuple")), at))
    "'%d' % (x, n)"
"""

from __future__ import annotations

from . import nodes as ir

# ast.unparse's precedences (ast._Precedence), lowest first
_TUPLE, _TEST, _OR, _AND, _NOT, _CMP, _BOR, _BXOR, _BAND, _SHIFT, _ARITH, _TERM, _FACTOR, _POWER, _ATOM = \
    1, 3, 4, 5, 6, 7, 9, 10, 11, 12, 13, 14, 15, 16, 18
_NAMED = 0
_BINARY = {"add": ("+", _ARITH), "sub": ("-", _ARITH), "mul": ("*", _TERM), "truediv": ("/", _TERM),
           "floordiv": ("//", _TERM), "mod": ("%", _TERM), "matmul": ("@", _TERM), "pow": ("**", _POWER),
           "lshift": ("<<", _SHIFT), "rshift": (">>", _SHIFT), "bitor": ("|", _BOR), "bitand": ("&", _BAND),
           "bitxor": ("^", _BXOR)}
_UNARY = {"neg": ("-", _FACTOR), "pos": ("+", _FACTOR), "invert": ("~", _FACTOR), "not": ("not ", _NOT)}
_COMPARE = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">=", "is": "is", "isnot": "is not",
            "in": "in", "notin": "not in"}
#: Primitives the front end makes from operators and literals; any other primitive is a call.
_NOT_CALLS = set(_BINARY) | set(_UNARY) | set(_COMPARE) | {"and", "or", "attr", "getitem", "slice", "ifexp",
                                                          "star", "star2", "fstring", "format", "walrus"}
_LITERALS = {"list": "[]", "tuple": "()", "set": "{}", "dict": "{}"}


def is_call(e) -> bool:
    """Whether ``e`` is a primitive the lane wrote as a call (``sum(...)``, ``np.array(...)``,
    ``tuple(...)``), not as an operator or a literal.

    Example:
        >>> from lanewise.lane.ir import nodes as ir
        >>> at = ir.Loc("f.py", 1, 0)
        >>> is_call(ir.Prim("tuple", (), at)), is_call(ir.Prim("tuple", (), at, type="tuple"))
        (True, False)
    """
    if not isinstance(e, ir.Prim):
        return False
    if e.op in _LITERALS:
        return e.type != e.op  # a literal's type is its own kind; a call's (tuple(g)) is unknown
    # format(v) is a call; an f-string's {v} keeps its conversion (pow(a, b) reads as a ** b)
    return e.op not in _NOT_CALLS or (e.op == "format" and not e.params)


def callee_text(e: ir.Prim) -> str:
    """What a call primitive calls, as the lane wrote it (``np.sum``, ``helper``, ``row.sum``)."""
    if e.op.startswith("method."):
        return f"{_text(e.args[0], _ATOM)}.{e.op[len('method.'):]}"
    if e.op == "call":
        return _text(e.args[0], _ATOM)
    if e.op.startswith("call:"):
        return e.op[len("call:"):].split("#")[0].rsplit(".", 1)[-1]
    return e.op


def call_args(e: ir.Prim) -> tuple:
    """A call primitive's arguments as the lane wrote them (without the method's value or the callee)."""
    return e.args[1:] if e.op == "call" or e.op.startswith("method.") else e.args


def python_text(e) -> str:
    """``e`` as Python text, as :func:`ast.unparse` writes the expression it was built from."""
    return _text(e, _TEST)


def _text(e, outer: int) -> str:
    text, own = _atom(e)
    return f"({text})" if own < outer else text


def _atom(e) -> tuple[str, int]:
    """(text, precedence) of ``e``."""
    if isinstance(e, ir.Var):
        return e.name, _ATOM
    if isinstance(e, ir.Global):
        return e.name, _ATOM
    if isinstance(e, ir.Const):
        return _constant(e.value), _ATOM
    if isinstance(e, ir.Comp):
        return _comprehension(e), _ATOM
    if isinstance(e, ir.Lambda):
        params = ", ".join(p.name for p in e.function.params)
        return f"lambda {params}: {_text(e.function.body[0].value, _TEST)}" if params else \
            f"lambda: {_text(e.function.body[0].value, _TEST)}", _TEST
    if isinstance(e, ir.Prim):
        return _primitive(e)
    return getattr(e, "what", type(e).__name__), _ATOM


def _constant(value) -> str:
    if value is Ellipsis:
        return "..."
    if isinstance(value, float) and value in (float("inf"), float("-inf")):
        return "1e309" if value > 0 else "-1e309"
    return repr(value)


def _primitive(e: ir.Prim) -> tuple[str, int]:
    op, a = e.op, e.args
    if op in _BINARY and not is_call(e):
        sign, prec = _BINARY[op]
        left, right = (prec + 1, prec) if op == "pow" else (prec, prec + 1)
        return f"{_text(a[0], left)} {sign} {_text(a[1], right)}", prec
    if op in _UNARY:
        sign, prec = _UNARY[op]
        return f"{sign}{_text(a[0], prec)}", prec
    if op in _COMPARE:
        return f"{_text(a[0], _CMP + 1)} {_COMPARE[op]} {_text(a[1], _CMP + 1)}", _CMP
    if op in ("and", "or") and dict(e.params).get("chain"):
        first = _text(a[0].args[0], _CMP + 1)
        return first + "".join(f" {_COMPARE[p.op]} {_text(p.args[1], _CMP + 1)}" for p in a), _CMP
    if op in ("and", "or"):
        prec = _AND if op == "and" else _OR
        # ast.unparse asks each operand for one level more than the one before (a and (not b))
        return f" {op} ".join(_text(v, prec + 1 + k) for k, v in enumerate(a)), prec
    if op == "ifexp":
        return f"{_text(a[1], _TEST + 1)} if {_text(a[0], _TEST + 1)} else {_text(a[2], _TEST)}", _TEST
    if op == "attr":
        return f"{_text(a[0], _ATOM)}.{dict(e.params)['name']}", _ATOM
    if op == "getitem":
        return f"{_text(a[0], _ATOM)}[{_index(a[1])}]", _ATOM
    if op == "slice":
        return _slice(e), _ATOM
    if op == "star":
        return f"*{_text(a[0], _ATOM)}", _ATOM
    if op == "walrus":
        return f"{dict(e.params)['name']} := {_text(a[0], _ATOM)}", _NAMED
    if op == "fstring" or (op == "format" and not is_call(e)):
        return "f" + repr(_fstring(e)), _ATOM
    if op in _LITERALS and not is_call(e):
        return _literal(e)
    args = [_text(v, _TEST) for v in call_args(e)]
    args += [f"**{_text(v, _TEST)}" if k == "**" else f"{k}={_text(v, _TEST)}" for k, v in e.keywords]
    return f"{callee_text(e)}({', '.join(args)})", _ATOM


def _literal(e: ir.Prim) -> tuple[str, int]:
    if e.op == "dict":
        items = [f"**{_text(i.args[0], _BOR)}" if i.op == "star2" else
                 f"{_text(i.args[0], _TEST)}: {_text(i.args[1], _TEST)}" for i in e.args]
        return "{" + ", ".join(items) + "}", _ATOM
    inner = ", ".join(_text(v, _TEST) for v in e.args)
    if e.op == "tuple":
        return ("(" + inner + ("," if len(e.args) == 1 else "") + ")"), _ATOM
    if e.op == "set" and not e.args:
        return "{*()}", _ATOM
    return _LITERALS[e.op][0] + inner + _LITERALS[e.op][1], _ATOM


def _index(e) -> str:
    """A subscript's index: a tuple without its parentheses (``a[i, j]``)."""
    if isinstance(e, ir.Prim) and e.op == "tuple" and e.type == "tuple" and e.args:
        return ", ".join(_slice(v) if isinstance(v, ir.Prim) and v.op == "slice" else _text(v, _TEST)
                         for v in e.args) + ("," if len(e.args) == 1 else "")
    return _text(e, _TUPLE)


def _slice(e: ir.Prim) -> str:
    lower, upper, step = (("" if isinstance(p, ir.Const) and p.value is None else _text(p, _TEST))
                          for p in e.args)
    return f"{lower}:{upper}" + (f":{step}" if step else "")


def _fstring(e) -> str:
    """The text inside an f-string's quotes."""
    if isinstance(e, ir.Const):
        return str(e.value).replace("{", "{{").replace("}", "}}")
    if e.op == "format":
        conversion = {-1: "", 115: "!s", 114: "!r", 97: "!a"}[dict(e.params)["conversion"]]
        spec = f":{_fstring(e.args[1])}" if len(e.args) > 1 else ""
        return "{" + _text(e.args[0], _TEST + 1) + conversion + spec + "}"
    return "".join(_fstring(v) for v in e.args)


def _comprehension(e: ir.Comp) -> str:
    clauses = "".join(f" for {_target(g.target)} in {_text(g.iter, _TEST + 1)}"
                      + "".join(f" if {_text(c, _TEST + 1)}" for c in g.conds) for g in e.generators)
    if e.kind == "dict":
        return "{" + f"{_text(e.element[0], _TEST)}: {_text(e.element[1], _TEST)}{clauses}" + "}"
    opening, closing = {"list": "[]", "set": "{}", "genexp": "()"}[e.kind]
    return f"{opening}{_text(e.element[0], _TEST)}{clauses}{closing}"


def _target(t) -> str:
    if isinstance(t, ir.Unpack):
        items = [("*" if k == t.star else "") + _target(i) for k, i in enumerate(t.items)]
        return ", ".join(items) + ("," if len(items) == 1 else "")
    if isinstance(t, ir.Item):
        return f"{_text(t.base, _ATOM)}[{_index(t.index)}]"
    if isinstance(t, ir.Field):
        return f"{_text(t.base, _ATOM)}.{t.name}"
    return _text(t, _TEST)
