"""The lane IR as Python source that behaves as the code it was built from.

The IR's way back to a function, for the passes that rewrite a lane
(loop versioning, prefetching, in-place updates, closures, structured
autodiff, the SPMD desugaring): they change nodes, :func:`render` prints the
function and :func:`load` runs the text as the user's code.

* **Precedence** by parentheses: every operand that is not an atom (a name, a
  literal, a call, an index) is parenthesised; simple and correct before pretty.
* **Python's own forms are kept** where rewriting them would change what runs:
  a chained comparison evaluates its middle operand once, ``and``/``or`` and
  ``x if c else y`` stop early, an augmented assignment stays one (``x += e``
  updates an array in place; ``a[f()] += 1`` calls ``f`` once), ``a = b = v``
  evaluates ``v`` once (the IR shares the value node: one object, two stores).
* **Constants** by ``repr``, except those with no literal: ``inf`` is
  ``1e999``, a negative number or ``-0.0`` is parenthesised, NaN is ``float('nan')``.
* **Names**: a global, closure or builtin prints as its name and a module's
  attribute as its dotted path (``np.exp``: the front end's short names), a
  ``call:<helper>`` as the helper's Python name (:func:`python_name`; another
  made from it where the function has a local of that name).  The text
  runs in the original function's globals with those names bound:
  :func:`load` does it (each function's closure values, the helpers and the
  modules the paths start at become the closure of the rendered function).
* **Refusals**: a node the IR does not model (:class:`.nodes.Unsupported`) is not
  rendered: :func:`render` raises :class:`~lanewise.errors.LaneCompileError` naming
  it and the user's line, as it does for a name it would have to invent that the
  function binds (a local ``np`` beside a call of ``numpy.exp``).  Rendering it as
  a ``raise`` would turn code that runs into code that fails when run.

Example:
    >>> from lanewise.lane.ir.build import build
    >>> def lane(x, n):
    ...     s = t = 0.0
    ...     for k in range(n):
    ...         s += -x ** 2 if 0 < k < n else (-x) ** 2
    ...     return s
    >>> print(render(build(lane).entry), end="")
    def lane(x, n):
        s = t = 0.0
        for k in range(n):
            s += (-(x ** 2)) if (0 < k < n) else ((-x) ** 2)
        return s
"""

from __future__ import annotations

import builtins
import keyword
import linecache
import math
import re
import sys
import types
import zlib
from dataclasses import replace

from ...errors import LaneCompileError
from . import nodes as ir
from .linetable import relined
from .passes.walk import mapped, walk

_INDENT = "    "
_BINARY = {"add": "+", "sub": "-", "mul": "*", "truediv": "/", "floordiv": "//", "mod": "%", "pow": "**",
           "lshift": "<<", "rshift": ">>", "bitor": "|", "bitand": "&", "bitxor": "^", "matmul": "@"}
_UNARY = {"neg": "-", "pos": "+", "invert": "~", "not": "not "}
_COMPARE = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">=", "is": "is",
            "isnot": "is not", "in": "in", "notin": "not in"}
_LITERALS = {"tuple": ("(", ")"), "list": ("[", "]"), "set": ("{", "}")}
_COMPS = {"list": ("[", "]"), "set": ("{", "}"), "dict": ("{", "}"), "genexp": ("(", ")")}
_CONVERSIONS = {-1: "", 115: "!s", 114: "!r", 97: "!a"}
#: The front end's short names for modules (build._ALIASES), back to the modules.
_MODULES = {"np": "numpy", "lw": "lanewise"}
#: The short name of each of those modules (numpy: np): built once, not per call rewritten.
_SHORT = {module: short for short, module in _MODULES.items()}


def render(fn: ir.Function, local_names: frozenset | None = None) -> str:
    """The source of ``fn``: a ``def`` (named :func:`python_name` of ``fn.name``) that
    behaves as the code the IR was built from, run as :func:`load` runs it.  One
    statement a line; what runs at the user's lines is compiled by :func:`load_function`
    and :func:`compile_code`, which move the code's lines (:func:`.linetable.relined`).
    ``local_names``: every name ``fn`` binds, where a pass that made ``fn`` knows them
    (lanemath's flatten: a walk of the thousands of nodes of a flattened kernel, saved).

    Example:
        >>> from lanewise.lane.ir.build import build
        >>> print(render(build(lambda a, b: a - (b - 1) < a < b).entry), end="")
        def _lw_lambda_3a2acbf0(a, b):
            return (a - (b - 1)) < a < b
    """
    out: list[str] = []
    _Renderer(fn, local_names).function(fn, python_name(fn.name), 0, out)
    return "\n".join(out) + "\n"


def render_module(module: ir.LaneModule) -> str:
    """The source of the lane and each of its helpers, one ``def`` each, the lane first.

    Example:
        >>> from lanewise.lane.ir.build import build
        >>> print(render_module(build(lambda x: abs(x) + 1)), end="")
        def _lw_lambda_3a2acbf0(x):
            return abs(x) + 1
    """
    return "\n".join(render(fn) for fn in module.functions())


def python_name(name: str) -> str:
    """The Python name a function of the IR is rendered and called by: its own when it is
    one, else a name made from it (``make.<locals>.f``, ``f#2``, ``<lambda>``) that no
    user name is (``_lw_``, with a hash of the whole name).

    Example:
        >>> python_name("rownorm"), python_name("f#2")
        ('rownorm', '_lw_f_2_c5654861')
    """
    if name.isidentifier() and not keyword.iskeyword(name):
        return name
    plain = re.sub(r"\W+", "_", name.replace("<locals>", "")).strip("_")
    return f"_lw_{plain}_{zlib.crc32(name.encode()):08x}"


def load(lane, helpers: bool = True) -> dict:
    """The lane and its helpers rendered and run: ``{IR name: function}``.  Each is
    compiled from its text (registered with ``linecache``, as lanewise reads any lane)
    in the original's globals, its closure the original's closure values, the
    rendered helpers and the modules its dotted names start at.  ``helpers=False``:
    the lane alone is rendered, calling the original helpers (a pass that rewrites
    the lane and leaves its helpers as they are).

    Example:
        >>> def lane(x):
        ...     return max(x, 0.0) ** 2
        >>> rendered = load(lane)
        >>> rendered["lane"](-3.0), rendered["lane"](3.0)
        (0.0, 9.0)
    """
    from .build import build_with_functions

    module, originals = build_with_functions(lane)
    rendered: dict = {}
    cells: dict = {}  # per function: the cells of the helpers it calls, filled once all are made
    for fn in module.functions() if helpers else (module.entry,):
        rendered[fn.name], cells[fn.name] = _compile(fn, originals[fn.name], originals)
    if not helpers:
        return rendered  # its cells keep the original helpers
    for name, by_helper in cells.items():
        for helper, cell in by_helper.items():
            cell.cell_contents = rendered[helper]
    return rendered


def load_function(fn: ir.Function, original: types.FunctionType, functions: dict,
                  lines: bool = False) -> types.FunctionType:
    """``fn`` (a function of the IR, rewritten or not) rendered and compiled as
    ``original``'s code: in its globals, with its closure values; ``functions`` (as
    :func:`~lanewise.lane.ir.build.build_with_functions` gives them) says which Python
    function each ``call:<name>`` calls.  What a pass that rewrites a lane returns.
    ``lines=True``: compiled in the user's file at the user's lines (tracebacks and
    Numba's errors name them), each text line at the line of the user's statement
    printed on it (:func:`.linetable.relined`: a pass's several statements at one user
    line share it); its text is then nowhere to be read again.

    Example:
        >>> from dataclasses import replace
        >>> from lanewise.lane.ir.build import build_with_functions
        >>> def lane(x):
        ...     return x * 3
        >>> module, functions = build_with_functions(lane)
        >>> ret = module.entry.body[0]
        >>> tripled = replace(ret, value=replace(ret.value, op="add"))  # a rewrite: x + 3
        >>> load_function(replace(module.entry, body=(tripled,)), lane, functions)(2)
        5
    """
    return _compile(fn, original, functions, lines)[0]


def compile_code(fn: ir.Function, original: types.FunctionType, functions: dict) -> tuple[types.CodeType, dict]:
    """``fn`` (a rewrite of ``original``) rendered and compiled as ``original``'s code, to
    run in a copy of its globals with its closure cells: (the code, named as
    ``original`` and at the user's lines even where the rewrite wrote a statement twice
    (:func:`.linetable.relined`), whose free variables are among ``original``'s; the
    names the text reads that ``original``'s globals must gain: the helpers of
    ``functions`` it calls by another name, the modules its dotted names start at).
    Not run: the caller makes the function (lanewise.lane.lanefn compiles the lane).

    Example:
        >>> from lanewise.lane.ir.build import function_ir
        >>> def lane(x):
        ...     return x * 3
        >>> code, more = compile_code(function_ir(lane), lane, {})
        >>> types.FunctionType(code, {**lane.__globals__, **more})(2), code.co_name
        (6, 'lane')
    """
    fn = mapped(fn, lambda n: _as_written(n, original, functions))
    out, placed, local_names = _in_factory(fn)
    free = original.__code__.co_freevars
    source = "\n".join([f"def _lw_factory({', '.join(free)}):", *out, f"{_INDENT}return {python_name(fn.name)}"])
    factory = next(c for c in compile(source + "\n", original.__code__.co_filename, "exec").co_consts
                   if isinstance(c, types.CodeType))
    code = next(c for c in factory.co_consts if isinstance(c, types.CodeType) and c.co_name == python_name(fn.name))
    code = relined(code, placed, original.__code__.co_firstlineno)
    names = {h: _call_name(h, local_names) for h in sorted(_helpers(fn))}
    bound = _closure(fn, original, {names[h]: functions[h] for h in names})
    more = {name: value for name, value in bound.items() if name not in free}
    return code.replace(co_name=original.__code__.co_name, co_qualname=original.__code__.co_qualname), more


def _as_written(n, original: types.FunctionType, functions: dict):
    """A call of a helper the original reaches through a module (``np.full``, a function
    of NumPy's written in Python; ``helpers.f``) as a call of that module's attribute,
    as the lane wrote it: the name alone would call it as a helper of the lane's own,
    which the compiled lane treats otherwise.  None for any other node."""
    if not (isinstance(n, ir.Prim) and n.op.startswith("call:")):
        return None
    helper = functions[n.op.removeprefix("call:")]
    name = python_name(n.op.removeprefix("call:"))
    closure = dict(zip(original.__code__.co_freevars, original.__closure__ or (), strict=True))
    held = closure[name].cell_contents if name in closure and _full(closure[name]) else original.__globals__.get(name)
    if held is helper or getattr(held, "py_func", None) is helper:
        return None  # the lane calls it by this very name
    attr = getattr(helper, "__name__", None)
    if attr is None:
        return None
    for root, value in original.__globals__.items():  # a module of the lane's, as it wrote it (np.full)
        if isinstance(value, types.ModuleType) and getattr(value, attr, None) is helper \
                and sys.modules.get(_MODULES.get(root, root)) in (None, value):  # the text's root means it
            return replace(n, op=f"{root}.{attr}")
    module = sys.modules.get(getattr(helper, "__module__", None) or "")
    if module is None or getattr(module, attr, None) is not helper:
        return None
    short = _SHORT.get(module.__name__, module.__name__)
    return replace(n, op=f"{short}.{attr}")


def _in_factory(fn: ir.Function) -> tuple[list, dict, set]:
    """``fn``'s text as the body of a factory whose ``def`` is the first line: (its lines,
    {text line: the user's line of the statement printed on it}, the names ``fn`` binds)."""
    renderer = _Renderer(fn)
    out: list = []
    renderer.function(fn, python_name(fn.name), 1, out)
    placed = {k + 2: line for k, line in enumerate(renderer.placed) if line is not None}  # the text starts at line 2
    return out, placed, renderer.locals


def _compile(fn: ir.Function, original: types.FunctionType, originals: dict, lines: bool = False):
    """``fn`` rendered and compiled inside a factory whose arguments are the names the text
    reads beyond the original's globals; (the function, {helper: its still empty cell})."""
    out, placed, local_names = _in_factory(fn)
    names = {h: _call_name(h, local_names) for h in sorted(_helpers(fn))}
    bound = _closure(fn, original, {names[h]: originals[h] for h in names})
    free = sorted(bound)
    name = python_name(fn.name)
    source = "\n".join([f"def _lw_factory({', '.join(free)}):", *out, f"{_INDENT}return {name}"]) + "\n"
    if lines:  # each text line at its statement's user line, the def at the user's
        code = relined(compile(source, original.__code__.co_filename, "exec"), placed, fn.loc.line)
    else:
        filename = f"<lanewise render {fn.name} {zlib.crc32(source.encode()):08x}>"
        linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
        code = compile(source, filename, "exec")
    namespace: dict = {}
    exec(code, original.__globals__, namespace)  # noqa: S102 - the lane's text
    made = namespace["_lw_factory"](*(bound.get(n) for n in free))
    made.__name__, made.__qualname__, made.__doc__ = original.__name__, original.__qualname__, original.__doc__
    cells = dict(zip(made.__code__.co_freevars, made.__closure__ or (), strict=True))
    return made, {h: cells[name] for h, name in names.items() if name in cells}


def _closure(fn: ir.Function, original: types.FunctionType, helpers: dict) -> dict:
    """The values the rendered text reads that the original's globals do not hold: the
    original's closure values, the helpers it calls (by :func:`python_name`) and the
    modules its dotted names start at."""
    code = original.__code__
    closure = {name: cell.cell_contents for name, cell in zip(code.co_freevars, original.__closure__ or (),
                                                              strict=True) if _full(cell)}
    glob = original.__globals__
    bound = {**closure, **{name: _held(helper, closure, glob) for name, helper in helpers.items()}}
    for root in sorted(_roots(fn) - set(helpers)):
        module = sys.modules.get(_MODULES.get(root, root))
        current = closure[root] if root in closure else glob.get(root)
        if module is None or current is module:
            continue
        if current is None or isinstance(current, types.ModuleType):
            bound[root] = module  # the module the path names (np: NumPy), whatever the lane's np holds
        # else: a path through a class or object, written as the lane wrote it
    for g in _globals(fn):  # a bare name the text reads must still mean what the original read
        meant = closure.get(g.name) if g.kind == "closure" else _global(glob, g.name)
        if "." not in g.name and g.name in bound and bound[g.name] is not meant:
            raise _refusal(fn, fn.loc, f"the name {g.name!r} would mean both {meant!r} and {bound[g.name]!r}")
    return bound


def _held(helper, closure: dict, glob: dict):
    """The Numba dispatcher of ``helper`` the original reaches (kept as it was: the
    front end reads a dispatcher's ``py_func``), else the helper."""
    from numba.core.dispatcher import Dispatcher

    return next((held for held in (*closure.values(), *glob.values())
                 if isinstance(held, Dispatcher) and held.py_func is helper), helper)


def _call_name(helper: str, local_names: set) -> str:
    """The name a function calls ``helper`` by: its :func:`python_name`, or one made from
    it where the function binds that name (``dtypes.dtype(x)`` beside a local ``dtype``)."""
    name = python_name(helper)
    return name if name not in local_names else python_name(helper + "#call")


def _full(cell) -> bool:
    try:
        cell.cell_contents  # noqa: B018 - an empty cell raises
    except ValueError:
        return False
    return True


def _global(glob: dict, name: str):
    return glob[name] if name in glob else getattr(builtins, name, None)


# ----------------------------------------------------------------------------- what a function reads


def _globals(fn: ir.Function) -> list:
    return [n for n in walk(fn) if isinstance(n, ir.Global)]


def _helpers(fn: ir.Function) -> set:
    return {n.op.removeprefix("call:") for n in walk(fn) if isinstance(n, ir.Prim) and n.op.startswith("call:")}


def _named(op: str) -> bool:
    """Whether ``op`` is a call of a name or dotted path (``len``, ``np.exp``), not an operator."""
    return op not in _SPECIAL and not op.startswith(("call:", "method.")) and op != "call"


def _roots(fn: ir.Function) -> set:
    """The first name of every dotted path the text writes (``np`` of ``np.exp``)."""
    paths = [g.name for g in _globals(fn)]
    paths += [n.op for n in walk(fn) if isinstance(n, ir.Prim) and _named(n.op)]
    return {p.split(".")[0] for p in paths if "." in p}


def _locals(fn: ir.Function) -> set:
    """Every name the function (or anything nested in it) binds: parameters, stores,
    loop and comprehension targets, handlers, nested defs, walruses."""
    names = set()
    for n in walk(fn):
        if isinstance(n, (ir.Var, ir.Param)):
            names.add(n.name)
        elif isinstance(n, ir.Def) or (isinstance(n, ir.Handler) and n.name):
            names.add(n.function.name if isinstance(n, ir.Def) else n.name)
        elif isinstance(n, ir.Prim) and n.op == "walrus":
            names.add(dict(n.params)["name"])
    return names


def _refusal(fn: ir.Function, loc: ir.Loc, what: str) -> LaneCompileError:
    return LaneCompileError(f"lane function {fn.name} ({loc.file}:{loc.line}) cannot be rendered from the "
                            f"lane IR: {what}")


# ----------------------------------------------------------------------------- statements


class _Renderer:
    """Text of one function of the IR (and of the functions nested in it)."""

    def __init__(self, fn: ir.Function, local_names: frozenset | None = None):
        self.fn = fn
        self.locals = _locals(fn) if local_names is None else local_names
        self.placed: list = []  # per line of text: the user's line of the statement on it (None: no statement)

    def emit(self, out: list, depth: int, text: str, loc=None) -> None:
        """One line of text, and the user's line of its statement (``placed``: where
        :func:`.linetable.relined` moves it)."""
        self.placed.append(None if loc is None else loc.line)
        out.append(_INDENT * depth + text)

    def refuse(self, loc, what: str):
        raise _refusal(self.fn, loc or self.fn.loc, what)

    def function(self, fn: ir.Function, name: str, depth: int, out: list) -> None:
        self.emit(out, depth, f"def {name}({self.params(fn)}):", fn.loc)
        self.block(fn.body, depth + 1, out)

    def params(self, fn: ir.Function) -> str:
        items, starred = [], False
        for k, p in enumerate(fn.params):
            if k == fn.posonly and k:
                items.append("/")  # the parameters before it are positional-only
            if p.kind == "keyword" and not starred:
                items.append("*")  # keyword-only parameters after a bare star
            starred = starred or p.kind in ("vararg", "keyword")
            text = {"vararg": "*", "kwarg": "**"}.get(p.kind, "") + p.name
            items.append(text if p.default is None else f"{text}={self.operand(p.default)}")
        if fn.posonly == len(fn.params) and fn.posonly:
            items.append("/")
        return ", ".join(items)

    def block(self, stmts, depth: int, out: list) -> None:
        if not stmts:
            self.emit(out, depth, "pass")
        k = 0
        while k < len(stmts):
            group = [stmts[k]]
            value = _stored(stmts[k])
            while value is not None and k + len(group) < len(stmts) and _stored(stmts[k + len(group)]) is value:
                group.append(stmts[k + len(group)])  # a = b = v: one value, one evaluation
            if len(group) > 1:
                targets = " = ".join(self.store_target(s) for s in group)
                self.emit(out, depth, f"{targets} = {self.expr(value)}", group[0].loc)
            else:
                self.stmt(stmts[k], depth, out)
            k += len(group)

    def stmt(self, s, depth: int, out: list) -> None:
        line = getattr(self, "stmt_" + type(s).__name__)(s, depth, out)
        if line is not None:  # a simple statement; a compound one wrote its lines
            self.emit(out, depth, line, s.loc)

    def stmt_Assign(self, s, depth, out):
        augmented = self.augmented(s)
        return augmented or f"{self.target(s.target)} = {self.expr(s.value)}"

    def stmt_Do(self, s, depth, out):
        augmented = self.augmented(s)
        if augmented:
            return augmented
        if _stored(s) is not None:
            return f"{self.store_target(s)} = {self.expr(_stored(s))}"
        return self.expr(s.expr)

    def stmt_If(self, s, depth, out):
        word = "if"
        while True:
            self.emit(out, depth, f"{word} {self.expr(s.cond)}:", s.loc)
            self.block(s.then, depth + 1, out)
            if len(s.orelse) == 1 and isinstance(s.orelse[0], ir.If):
                s, word = s.orelse[0], "elif"
                continue
            break
        self.part("else", s.orelse, depth, out)

    def stmt_Loop(self, s, depth, out):
        head = f"while {self.expr(s.cond)}" if s.kind == "while" else \
            f"for {self.target(s.target)} in {self.expr(s.iter)}"
        self.emit(out, depth, f"{head}:", s.loc)
        self.block(s.body, depth + 1, out)
        self.part("else", s.orelse, depth, out)

    def stmt_Exit(self, s, depth, out):
        return s.kind if s.value is None else f"{s.kind} {self.expr(s.value)}"

    def stmt_Raise(self, s, depth, out):
        exc = "" if s.exc is None else " " + self.expr(s.exc)
        return f"raise{exc}{'' if s.cause is None else ' from ' + self.expr(s.cause)}"

    def stmt_Assert(self, s, depth, out):
        return f"assert {self.expr(s.test)}{'' if s.msg is None else ', ' + self.expr(s.msg)}"

    def stmt_Try(self, s, depth, out):
        self.emit(out, depth, "try:", s.loc)
        self.block(s.body, depth + 1, out)
        for h in s.handlers:
            caught = "" if h.type is None else " " + self.expr(h.type)
            self.emit(out, depth, f"except{caught}{'' if h.name is None else ' as ' + h.name}:", h.loc)
            self.block(h.body, depth + 1, out)
        self.part("else", s.orelse, depth, out)
        self.part("finally", s.final, depth, out)

    def stmt_Def(self, s, depth, out):
        self.function(s.function, s.function.name, depth, out)

    def stmt_Unsupported(self, s, depth, out):
        self.refuse(s.loc, s.what)

    def part(self, word: str, stmts, depth: int, out: list) -> None:
        if stmts:
            self.emit(out, depth, f"{word}:")
            self.block(stmts, depth + 1, out)

    def augmented(self, s) -> str | None:
        """``x += e`` / ``a[i] += e`` / ``o.f += e`` for a store of an in-place operator
        whose first operand reads what the store writes; None for any other statement."""
        value = _stored(s)
        if not (isinstance(value, ir.Prim) and ("inplace", True) in value.params):
            return None
        read, operand = value.args
        if isinstance(s, ir.Assign):
            fits = isinstance(s.target, ir.Var) and read == s.target
        elif s.expr.op == "setitem":
            fits = isinstance(read, ir.Prim) and read.op == "getitem" and read.args == s.expr.args[:2]
        else:
            fits = isinstance(read, ir.Prim) and read.op == "attr" and read.args == s.expr.args[:1] \
                and read.params == s.expr.params
        if not fits or value.op not in _BINARY:
            self.refuse(value.loc, f"an in-place {value.op} that does not update what it reads")
        return f"{self.store_target(s)} {_BINARY[value.op]}= {self.expr(operand)}"

    def store_target(self, s) -> str:
        if isinstance(s, ir.Assign):
            return self.target(s.target)
        base = self.receiver(s.expr.args[0])
        if s.expr.op == "setitem":
            return f"{base}[{self.index(s.expr.args[1])}]"
        return f"{base}.{dict(s.expr.params)['name']}"

    def target(self, t) -> str:
        if isinstance(t, ir.Var):
            return t.name
        if isinstance(t, ir.Unpack):
            items = [("*" if k == t.star else "") + self.target(i) for k, i in enumerate(t.items)]
            return f"({', '.join(items)}{',' if len(items) == 1 else ''})"
        if isinstance(t, ir.Item):
            return f"{self.receiver(t.base)}[{self.index(t.index)}]"
        return f"{self.receiver(t.base)}.{t.name}"

    # ------------------------------------------------------------------ expressions

    def operand(self, e) -> str:
        """``e`` where an operator reads it: parenthesised unless it is an atom."""
        text = self.expr(e)
        return text if _atom(e) else f"({text})"

    def receiver(self, e) -> str:
        """``e`` before ``.name``, ``[i]`` or ``(args)``: an atom, and a number in parentheses (``(1).real``)."""
        text = self.operand(e)
        return f"({text})" if isinstance(e, ir.Const) and not text.startswith("(") else text

    def expr(self, e) -> str:
        if isinstance(e, ir.Var):
            return e.name
        if isinstance(e, ir.Const):
            return self.const(e.value)
        if isinstance(e, ir.Global):
            if "." in e.name:  # a module path: its first name is the module's, not the lane's own
                self.free(e.name.split(".")[0], None)
            return e.name
        if isinstance(e, ir.Prim):
            return self.prim(e)
        if isinstance(e, ir.Lambda):
            return self.lambda_(e.function)
        if isinstance(e, ir.Comp):
            return self.comp(e)
        if isinstance(e, ir.Unsupported):
            self.refuse(e.loc, e.what)
        self.refuse(None, f"a {type(e).__name__} where an expression belongs")

    def free(self, name: str, loc) -> None:
        """A name the renderer writes where the lane wrote another (a module path's first
        name, a helper's name) must not be one the function (or anything in it) binds."""
        if name in self.locals:
            self.refuse(loc, f"the name {name!r} is both a local and a name the text must read from outside")

    def const(self, v) -> str:
        if v is None or v is Ellipsis or isinstance(v, (bool, str, bytes)):
            return "..." if v is Ellipsis else repr(v)
        if type(v) is int:
            return repr(v) if v >= 0 else f"({v!r})"
        if type(v) is float:
            if math.isnan(v):
                return "float('nan')" if math.copysign(1.0, v) > 0 else "(-float('nan'))"
            text = "1e999" if math.isinf(v) else repr(abs(v))
            return text if math.copysign(1.0, v) > 0 else f"(-{text})"
        if type(v) is complex:
            if v.real == 0 and math.copysign(1.0, v.real) > 0 and not math.isnan(v.imag) \
                    and math.copysign(1.0, v.imag) > 0:
                return ("1e999" if math.isinf(v.imag) else repr(v.imag)) + "j"  # 2j, as written
            return f"complex({self.const(v.real)}, {self.const(v.imag)})"
        if type(v) is tuple:
            return f"({', '.join(self.const(x) for x in v)}{',' if len(v) == 1 else ''})"
        self.refuse(None, f"a constant with no literal ({type(v).__name__})")

    def prim(self, e: ir.Prim) -> str:
        op, args = e.op, e.args
        if op in _BINARY and len(args) == 2 and not e.keywords and ("inplace", True) not in e.params:
            return f"{self.operand(args[0])} {_BINARY[op]} {self.operand(args[1])}"
        if op in _UNARY and len(args) == 1 and not e.keywords:
            return f"{_UNARY[op]}{self.operand(args[0])}"
        if op in _COMPARE and len(args) == 2:
            return f"{self.operand(args[0])} {_COMPARE[op]} {self.operand(args[1])}"
        method = _PRIMS.get(op)
        if method is not None and _is_syntax(e):
            return method(self, e)
        if ("inplace", True) in e.params:
            self.refuse(e.loc, f"an in-place {op} outside an augmented assignment")
        if op.startswith("method."):
            return f"{self.receiver(args[0])}.{op.removeprefix('method.')}({self.arguments(args[1:], e.keywords)})"
        if op == "call":
            return f"{self.receiver(args[0])}({self.arguments(args[1:], e.keywords)})"
        if op.startswith("call:"):
            name = _call_name(op.removeprefix("call:"), self.locals)
            return f"{name}({self.arguments(args, e.keywords)})"
        if "." in op:
            self.free(op.split(".")[0], e.loc)
        return f"{op}({self.arguments(args, e.keywords)})"

    def arguments(self, args, keywords) -> str:
        items = [self.expr(a) if not _is(a, "star") else "*" + self.operand(a.args[0]) for a in args]
        items += [("**" if k == "**" else k + "=") + (self.operand(v) if k == "**" else self.expr(v))
                  for k, v in keywords]
        return ", ".join(items)

    def index(self, e) -> str:
        """A subscript: slices as ``a:b:c``, a tuple of them without parentheses."""
        if _is(e, "slice") and _is_syntax(e) and len(e.args) == 3:  # slice(a) alone is slice(None, a, None)
            return ":".join("" if _is_none(p) else self.operand(p) for p in e.args).removesuffix(":")
        if _is(e, "tuple") and _is_syntax(e) and e.args:
            items = [self.index(a) if not _is(a, "star") else "*" + self.operand(a.args[0]) for a in e.args]
            return ", ".join(items) + ("," if len(items) == 1 else "")
        return self.expr(e)

    def literal(self, e: ir.Prim) -> str:
        if e.op == "set" and not e.args:
            return "{*()}"  # an empty set literal
        left, right = _LITERALS[e.op]
        items = self.arguments(e.args, ())
        return f"{left}{items}{',' if e.op == 'tuple' and len(e.args) == 1 else ''}{right}"

    def dict_(self, e: ir.Prim) -> str:
        items = ["**" + self.operand(i.args[0]) if _is(i, "star2") else
                 f"{self.expr(i.args[0])}: {self.expr(i.args[1])}" for i in e.args]
        return "{" + ", ".join(items) + "}"

    def and_or(self, e: ir.Prim) -> str:
        chained = ("chain", True) in e.params and all(
            a.args[1] == b.args[0] for a, b in zip(e.args[:-1], e.args[1:], strict=True))
        if chained:  # a < b < c: the middle operand once, as Python evaluates it
            first = self.operand(e.args[0].args[0])
            return first + "".join(f" {_COMPARE[c.op]} {self.operand(c.args[1])}" for c in e.args)
        return f" {e.op} ".join(self.operand(a) for a in e.args)

    def ifexp(self, e: ir.Prim) -> str:
        test, then, orelse = (self.operand(a) for a in e.args)
        return f"{then} if {test} else {orelse}"

    def attr(self, e: ir.Prim) -> str:
        return f"{self.receiver(e.args[0])}.{dict(e.params)['name']}"

    def getitem(self, e: ir.Prim) -> str:
        return f"{self.receiver(e.args[0])}[{self.index(e.args[1])}]"

    def slice_(self, e: ir.Prim) -> str:
        return f"slice({self.arguments(e.args, ())})"  # a slice outside a subscript: the builtin's call

    def walrus(self, e: ir.Prim) -> str:
        return f"({dict(e.params)['name']} := {self.expr(e.args[0])})"

    def star(self, e: ir.Prim) -> str:
        self.refuse(e.loc, "a starred value outside a call or a display")

    def field(self, e: ir.Prim) -> str:
        self.refuse(e.loc, "an f-string field outside an f-string")

    def fstring(self, e: ir.Prim) -> str:
        fields: list = []
        body = self.fparts(e.args, fields)
        nests = sys.version_info >= (3, 12)  # PEP 701: any quote, any backslash
        if nests or not any("\\" in f for f in fields):
            for quote in ("'", '"', "'''", '"""'):
                if nests or not any(quote in f for f in fields):
                    return "f" + quote + body + quote
        self.refuse(e.loc, "an f-string whose expressions hold quotes or backslashes this Python cannot nest")

    def fparts(self, parts, fields: list) -> str:
        """The inside of an f-string; ``fields`` gets the expressions' texts (before
        Python 3.12 the f-string's quotes must differ from theirs)."""
        out = []
        for p in parts:
            if isinstance(p, ir.Const) and isinstance(p.value, str):
                out.append("".join(_fchar(c) for c in p.value))
                continue
            if not (_is(p, "format") and _is_syntax(p)):
                self.refuse(getattr(p, "loc", None), "an f-string part that is neither text nor a field")
            text = self.expr(p.args[0])
            fields.append(text)
            conversion = _CONVERSIONS[dict(p.params)["conversion"]]
            spec = "" if len(p.args) == 1 else ":" + self.fparts(p.args[1].args, fields)
            out.append(f"{{({text}){conversion}{spec}}}")
        return "".join(out)

    def lambda_(self, fn: ir.Function) -> str:
        body = fn.body
        if len(body) != 1 or not isinstance(body[0], ir.Exit) or body[0].kind != "return" or body[0].value is None:
            self.refuse(fn.loc, "a lambda whose body is not one returned expression")
        params = self.params(fn)
        return f"(lambda{' ' if params else ''}{params}: {self.expr(body[0].value)})"

    def comp(self, e: ir.Comp) -> str:
        left, right = _COMPS[e.kind]
        element = f"{self.expr(e.element[0])}: {self.expr(e.element[1])}" if e.kind == "dict" \
            else self.expr(e.element[0])
        gens = "".join(f" for {self.target(g.target)} in {self.operand(g.iter)}"
                       + "".join(f" if {self.operand(c)}" for c in g.conds) for g in e.generators)
        return f"{left}{element}{gens}{right}"


#: Primitives printed as Python's syntax (when :func:`_is_syntax`: not a call of a builtin of that name).
_PRIMS = {"tuple": _Renderer.literal, "list": _Renderer.literal, "set": _Renderer.literal, "dict": _Renderer.dict_,
          "and": _Renderer.and_or, "or": _Renderer.and_or, "ifexp": _Renderer.ifexp, "attr": _Renderer.attr,
          "getitem": _Renderer.getitem, "slice": _Renderer.slice_, "walrus": _Renderer.walrus,
          "star": _Renderer.star, "star2": _Renderer.star, "fstring": _Renderer.fstring,
          "format": _Renderer.field}
_OPERATORS = set(_BINARY) | set(_UNARY) | set(_COMPARE) | {"and", "or", "ifexp"}
_SPECIAL = set(_PRIMS) | set(_BINARY) | set(_UNARY) | set(_COMPARE) | {"setitem", "setattr"}


def _is_syntax(e: ir.Prim) -> bool:
    """Whether ``e`` is the syntax its op names, not a call of the builtin of the same name
    (``tuple(x)``, ``format(x, s)``, ``slice(a, b)``): the front end marks a display by its
    type, an attribute, walrus or f-string field by its params, and a call has neither."""
    if e.op in _LITERALS or e.op == "dict":
        return e.type == e.op
    if e.op in ("attr", "walrus", "format"):
        return bool(e.params)
    return not e.keywords


def _is(e, op: str) -> bool:
    return isinstance(e, ir.Prim) and e.op == op


def _is_none(e) -> bool:
    return isinstance(e, ir.Const) and e.value is None


def _atom(e) -> bool:
    """Whether ``e`` prints as one primary (a name, literal, display, call or index) that an
    operator can take without parentheses."""
    if isinstance(e, (ir.Var, ir.Global, ir.Const, ir.Lambda, ir.Comp)):
        return True  # a negative constant prints in parentheses, a lambda too
    return isinstance(e, ir.Prim) and e.op not in _OPERATORS


def _stored(s):
    """The value a store statement writes (``x = v``, ``a[i] = v``, ``o.f = v``), else None."""
    if isinstance(s, ir.Assign):
        return s.value
    if isinstance(s, ir.Do) and isinstance(s.expr, ir.Prim) and s.expr.op in ("setitem", "setattr"):
        return s.expr.args[-1]
    return None


def _fchar(c: str) -> str:
    """One character of an f-string's literal text."""
    if c in "{}":
        return c * 2
    if c in "'\"":
        return "\\" + c  # valid within either quote
    if c == "\\":
        return "\\\\"
    return c if c.isprintable() else repr(c)[1:-1]
