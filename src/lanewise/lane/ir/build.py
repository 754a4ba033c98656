"""The lane IR's front end: a lane and its helpers, parsed once, as :mod:`.nodes`.

The text comes from :func:`lanewise.lane.source.definition` (files, cells, the
REPL, ``python -c``: the ``def`` or ``lambda`` that *is* the code that runs); a
function with no text is rebuilt from its bytecode by
:func:`lanewise.lane.fromcode.function_def` (and where even that is refused, the
function's body is one :class:`.Unsupported` naming why and where).  Names are
resolved as the lane compiler resolves them (:func:`lanewise.spmd.syntax.resolve`
reads the same closure cells, globals and builtins): a call's primitive name
comes from the object called,

* a builtin by its name (``len``, ``range``, ``abs``);
* a Python helper (or a Numba dispatcher's ``py_func``) as ``call:<name>``, and
  the helper is parsed too, once;
* anything else by its dotted path from the module it is reached through, with
  NumPy, lanewise and ``lanewise.random`` written as ``np``, ``lw`` and
  ``lw.random`` (``np.exp``, ``lw.random.normal``, ``math.sqrt``);
* a method of a local value as ``method.<name>``; a local value called as ``call``.

Example:
    >>> import math
    >>> def lane(x):
    ...     return math.sqrt(x) + 1.0
    >>> build(lane).entry.body[0].value.op
    'add'
"""

from __future__ import annotations

import ast
import builtins
import inspect
import sys
import threading
import types
import weakref
from dataclasses import replace

from ...errors import LaneCompileError
from ..callables import as_lane_function
from ..refusals import def_line
from ..source import definition
from . import nodes as ir
from .carried import carry as _carry
from .passes.walk import spliced

_BINARY = {ast.Add: "add", ast.Sub: "sub", ast.Mult: "mul", ast.Div: "truediv", ast.FloorDiv: "floordiv",
           ast.Mod: "mod", ast.Pow: "pow", ast.LShift: "lshift", ast.RShift: "rshift", ast.BitOr: "bitor",
           ast.BitAnd: "bitand", ast.BitXor: "bitxor", ast.MatMult: "matmul"}
_UNARY = {ast.USub: "neg", ast.UAdd: "pos", ast.Not: "not", ast.Invert: "invert"}
_COMPARE = {ast.Eq: "eq", ast.NotEq: "ne", ast.Lt: "lt", ast.LtE: "le", ast.Gt: "gt", ast.GtE: "ge",
            ast.Is: "is", ast.IsNot: "isnot", ast.In: "in", ast.NotIn: "notin"}
_COMPS = {ast.ListComp: "list", ast.SetComp: "set", ast.GeneratorExp: "genexp", ast.DictComp: "dict"}
_LITERALS = {ast.Tuple: "tuple", ast.List: "list", ast.Set: "set"}
#: Modules written by their usual short names, longest first (``lw.random`` before ``lw``).
_ALIASES = (("lanewise.random", "lw.random"), ("lanewise", "lw"), ("numpy", "np"))


def build(fn) -> ir.LaneModule:
    """The lane IR of ``fn`` (a Python function, lambda or Numba dispatcher) and of every
    Python helper it calls.

    Example:
        >>> def lane(x, n):
        ...     s = 0.0
        ...     for k in range(n):
        ...         s += x
        ...     return s
        >>> build(lane).entry.body[1].carried
        ('s',)
    """
    return build_with_functions(fn)[0]


def build_with_functions(fn) -> tuple[ir.LaneModule, dict]:
    """:func:`build`'s module, and the Python function each of its functions was read
    from, by IR name (what a caller needs to run text rendered from the IR: each
    function's globals and closure, and the helper each ``call:<name>`` means).

    Example:
        >>> def lane(x):
        ...     return abs(x)
        >>> module, functions = build_with_functions(lane)
        >>> functions[module.entry.name] is lane
        True
    """
    fn = _lane_python_function(fn)
    module, held = _memoised(_MODULES, fn, lambda reads: _module(fn, reads))
    return module, {name: hold() for name, hold in held.items()}


def function_ir(fn) -> ir.Function:
    """The IR of ``fn`` alone (its helpers appear as ``call:`` primitives, not built),
    for passes that look at one function at a time; memoised like :func:`build`.

    Example:
        >>> def lane(x):
        ...     return -x if x < 0.0 else x
        >>> function_ir(lane).body[0].kind
        'return'
    """
    fn = _lane_python_function(fn)
    return _memoised(_FUNCTIONS, fn, lambda reads: _function(fn, _name_for(fn, {}), {}, [], reads))


def library_function_ir(fn) -> ir.Function | None:
    """The IR of ``fn`` alone, as :func:`function_ir` gives it, for a function of a
    library's file (lanemath's kernels and helpers): read from its own lines
    (``inspect.getsource``) instead of by compiling its whole file, which
    :func:`function_ir` does to find any lane's text (a cell, ``python -c``) and which
    costs a cold first call tens of milliseconds a file where a few functions of
    several large files are read once.  None when its text is not a ``def`` of it.

    Example:
        >>> def helper(x):
        ...     return x * 2.0
        >>> library_function_ir(helper) == function_ir(helper)
        True
    """
    fn = _lane_python_function(fn)
    return _memoised(_LIBRARY, fn, lambda reads: _library_function(fn, reads))


def _library_function(fn, reads: list) -> ir.Function | None:
    reads.append(("code", fn, None, fn.__code__))
    try:
        text = inspect.getsource(fn)
        # a nested def's lines keep their indentation under an ``if``: its columns stay the file's
        indented = text[:1].isspace()
        tree = ast.parse("if 1:\n" + text if indented else text).body[0]
        tree = tree.body[0] if indented else tree
    except (OSError, TypeError, SyntaxError):  # no text; a lambda's line is not a statement on its own
        return None
    if not isinstance(tree, ast.FunctionDef) or tree.name != fn.__name__:
        return None
    offset = fn.__code__.co_firstlineno - def_line(tree)
    made = _Builder(fn, fn.__code__.co_filename, offset, {}, [], reads).function(tree, _name_for(fn, {}))
    return replace(made, origin=weakref.ref(fn))


def _lane_python_function(fn):
    fn = _python_function(as_lane_function(fn))  # a ufunc or partial: the wrapper lw.vmap compiles
    if fn is None:
        raise TypeError("the lane IR is built from a Python function (a def, a lambda or a Numba dispatcher)")
    return fn


def _module(fn, reads: list) -> tuple[ir.LaneModule, dict]:
    names: dict = {}  # code object -> the name calls use
    todo, seen, done, objects = [fn], {fn.__code__}, [], {}
    while todo:  # breadth first: helpers in the order the lane reaches them
        called: list = []
        f = todo.pop(0)
        done.append(_function(f, _name_for(f, names), names, called, reads))
        objects[done[-1].name] = _hold(f)  # weakly: the memo must not keep the lane alive
        for c in called:
            if c.__code__ not in seen:
                seen.add(c.__code__)
                todo.append(c)
    return ir.LaneModule(done[0], tuple(done[1:])), objects


# A lane's IR is built once and read by several passes per compile (and again when a
# kept lw.vmap recompiles for new types).  What the IR says depends on the code objects
# and on every closure cell, global, builtin and module attribute the builder resolved,
# so an entry is reused only while each of those still holds the very object it held
# (``is``): a rebound helper or global gives a fresh build, never a stale one.
_MODULES: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()
_FUNCTIONS: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()
_LIBRARY: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()
_MEMO_LOCK = threading.Lock()


def _memoised(table, fn, make):
    with _MEMO_LOCK:
        hit = table.get(fn)
    if hit is not None and all(_still(*read) for read in hit[0]):
        return hit[1]
    reads: list = []
    made = make(reads)
    # Held weakly where they can be (functions, modules): an entry must not keep its own
    # key alive (a lane that calls itself reads itself) nor what the user dropped.
    held = tuple((kind, _hold(where), key, _hold(found)) for kind, where, key, found in reads)
    with _MEMO_LOCK:
        table[fn] = (held, made)
    return made


def _hold(obj):
    """A callable giving ``obj`` back, through a weak reference where ``obj`` takes one
    (once it is gone: ``_DEAD``, which nothing now bound is)."""
    try:
        ref = weakref.ref(obj)
    except TypeError:
        return lambda: obj
    return lambda: _DEAD if (alive := ref()) is None else alive


def _still(kind, where, key, found) -> bool:
    """Whether what the builder read is still there: ``kind`` "code" (``where``'s code),
    "cell" (closure cell ``key`` of function ``where``), "global" (name ``key`` in function
    ``where``'s globals), "builtin" or "attr" (attribute ``key`` of the module or class
    ``where``); ``where`` and ``found`` as :func:`_hold` keeps them."""
    where, found = where(), found()
    if where is _DEAD:
        return False  # the function or module it was read from is gone
    if kind == "code":
        return where.__code__ is found
    if kind == "cell":
        try:
            return where.__closure__[key].cell_contents is found
        except ValueError:  # an empty cell
            return found is _EMPTY
    if kind == "global":
        return where.__globals__.get(key, _EMPTY) is found
    if kind == "builtin":
        return getattr(builtins, key, None) is found
    return getattr(where, key, None) is found


_EMPTY = object()
_DEAD = object()  # what a weak reference gives once its object is gone: equal to nothing


def function_of_tree(fn, tree) -> ir.Function:
    """The IR of ``tree``, a ``def`` standing for ``fn`` (a rewritten copy of its text, or
    one written for it, as autodiff's reverse mode writes its lane with exits as flags),
    names resolved in ``fn``; helpers it calls are not parsed.

    Example:
        >>> import ast
        >>> def lane(x):
        ...     return x
        >>> tree = ast.parse("def lane(x):\\n    y = abs(x)\\n    return y").body[0]
        >>> ir.called(function_of_tree(lane, tree).body[0].value) is abs
        True
    """
    fn = _python_function(fn)
    offset = fn.__code__.co_firstlineno - def_line(tree)
    return _Builder(fn, fn.__code__.co_filename, offset, {}, [], []).function(tree, fn.__qualname__)


def _python_function(obj):
    """The Python function a lane object runs: itself, or a dispatcher's ``py_func``."""
    obj = getattr(obj, "py_func", obj)
    return obj if isinstance(obj, types.FunctionType) else None


def _name_for(fn, names: dict) -> str:
    """The name ``call:`` uses for ``fn``: its qualified name, made unique per code object."""
    if fn.__code__ not in names:
        taken = set(names.values())
        name, k = fn.__qualname__, 2
        while name in taken:
            name, k = f"{fn.__qualname__}#{k}", k + 1
        names[fn.__code__] = name
    return names[fn.__code__]


def _function(fn, name: str, names: dict, called: list, reads: list) -> ir.Function:
    reads.append(("code", fn, None, fn.__code__))
    tree, source = definition(fn), "source"
    if tree is None:
        from numba.core.errors import UnsupportedBytecodeError

        from ..fromcode import function_def

        source = "bytecode"
        try:
            tree = function_def(fn)
        # no text and no structure (UnsupportedBytecodeError: an opcode Numba cannot read,
        # which fromcode lets through): the IR says why, where
        except (LaneCompileError, UnsupportedBytecodeError) as err:
            loc = ir.Loc(fn.__code__.co_filename, fn.__code__.co_firstlineno, 0)
            return ir.Function(name, _code_params(fn.__code__), (ir.Unsupported(str(err), loc),), loc, "bytecode",
                               origin=weakref.ref(fn))
    offset = fn.__code__.co_firstlineno - def_line(tree)
    builder = _Builder(fn, fn.__code__.co_filename, offset, names, called, reads)
    made = builder.function(tree, name)
    # a derivative of a rebuilt lane is generated text, but keeps the rebuilt lane's dispatch loop
    blocks = source == "bytecode" or getattr(fn, "_lw_blocks", False)
    return replace(made, source=source, blocks=blocks, origin=weakref.ref(fn))


def _code_params(code) -> tuple:
    return tuple(ir.Param(p) for p in code.co_varnames[:code.co_argcount])


def _bound(node) -> set:
    """Names a ``def``/``lambda`` binds: parameters, stores and nested defs of its own body."""
    a = node.args
    names = {p.arg for p in a.posonlyargs + a.args + a.kwonlyargs}
    names |= {p.arg for p in (a.vararg, a.kwarg) if p is not None}
    todo = list(node.body) if isinstance(node.body, list) else [node.body]
    while todo:
        n = todo.pop()
        if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load):
            names.add(n.id)
        elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(n.name)
            continue
        elif isinstance(n, ast.ExceptHandler) and n.name:
            names.add(n.name)
        if not isinstance(n, (ast.Lambda, *_COMPS)):
            todo.extend(ast.iter_child_nodes(n))
    return names


class _Builder:
    """AST -> IR for one function of the lane (and the functions nested in it)."""

    def __init__(self, fn, file: str, offset: int, names: dict, called: list, reads: list):
        self.fn, self.file, self.offset, self.names, self.called = fn, file, offset, names, called
        self.reads = reads  # what names resolved to, for the memo's check (_still)
        self.scopes: list[set] = []  # locals of the function being built and of those around it

    def loc(self, node) -> ir.Loc:
        return ir.Loc(self.file, getattr(node, "lineno", 1) + self.offset, getattr(node, "col_offset", 0))

    # ------------------------------------------------------------------ functions

    def function(self, node, name: str) -> ir.Function:
        self.scopes.append(_bound(node))
        try:
            params = self.params(node.args)
            if isinstance(node, ast.Lambda):
                body = (ir.Exit("return", self.expr(node.body), self.loc(node.body)),)
            else:
                body = self.block(node.body)
        finally:
            self.scopes.pop()
        return ir.Function(name, params, _carry(body, frozenset(p.name for p in params), frozenset()),
                           self.loc(node), posonly=len(node.args.posonlyargs))

    def params(self, a: ast.arguments) -> tuple:
        positional = a.posonlyargs + a.args
        defaults = [None] * (len(positional) - len(a.defaults)) + list(a.defaults)
        out = [ir.Param(p.arg, "positional", None if d is None else self.expr(d))
               for p, d in zip(positional, defaults, strict=True)]
        if a.vararg:
            out.append(ir.Param(a.vararg.arg, "vararg"))
        out += [ir.Param(p.arg, "keyword", None if d is None else self.expr(d))
                for p, d in zip(a.kwonlyargs, a.kw_defaults, strict=True)]
        if a.kwarg:
            out.append(ir.Param(a.kwarg.arg, "kwarg"))
        return tuple(out)

    # ------------------------------------------------------------------ statements

    def block(self, stmts) -> tuple:
        return spliced(stmts, self.stmt)

    def stmt(self, s):
        loc = self.loc(s)
        method = getattr(self, "stmt_" + type(s).__name__, None)
        if method is not None:
            return method(s, loc)
        if isinstance(s, ast.Pass):
            return []
        if isinstance(s, ast.Expr):  # a lone constant (a docstring) does nothing
            return [] if isinstance(s.value, ast.Constant) else ir.Do(self.expr(s.value), loc)
        if isinstance(s, (ast.Break, ast.Continue)):
            return ir.Exit(type(s).__name__.lower(), None, loc)
        if isinstance(s, ast.Return):
            return ir.Exit("return", None if s.value is None else self.expr(s.value), loc)
        if isinstance(s, ast.Raise):
            return ir.Raise(self.opt(s.exc), self.opt(s.cause), loc)
        if isinstance(s, ast.Assert):
            return ir.Assert(self.expr(s.test), self.opt(s.msg), loc)
        names = tuple(s.names) if isinstance(s, (ast.Global, ast.Nonlocal)) else ()
        return ir.Unsupported(_DESCRIBED.get(type(s), type(s).__name__), loc, names=names, parts=self.parts(s))

    def parts(self, node) -> tuple:
        """The statements and expressions written inside ``node`` (a construct the IR does
        not model), as IR, in the order written (through ``with`` items, ``case`` clauses
        and the like)."""
        out: list = []
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.stmt):
                made = self.stmt(child)
                out += made if isinstance(made, list) else [made]
            elif isinstance(child, ast.expr):
                out.append(self.expr(child))
            elif isinstance(child, ast.ExceptHandler):  # of a try/except* statement
                out.append(ir.Handler(self.opt(child.type), child.name, self.block(child.body), self.loc(child)))
            else:
                out += self.parts(child)
        return tuple(out)

    def stmt_Assign(self, s, loc):
        value = self.expr(s.value)
        return [self.store(t, value, loc) for t in s.targets]

    def stmt_AnnAssign(self, s, loc):
        return [] if s.value is None else self.store(s.target, self.expr(s.value), loc)

    def stmt_AugAssign(self, s, loc):
        op = _BINARY[type(s.op)]
        params = (("inplace", True),)
        if isinstance(s.target, ast.Name):
            return ir.Assign(ir.Var(s.target.id), ir.Prim(op, (ir.Var(s.target.id), self.expr(s.value)), loc,
                                                          params=params), loc)
        read = ast.copy_location(type(s.target)(**{**_fields(s.target), "ctx": ast.Load()}), s.target)
        return self.store(s.target, ir.Prim(op, (self.expr(read), self.expr(s.value)), loc, params=params), loc)

    def store(self, target, value, loc):
        """``target = value``: an :class:`.Assign`, or ``setitem``/``setattr`` for one item or field."""
        if isinstance(target, ast.Subscript):
            return ir.Do(ir.Prim("setitem", (self.expr(target.value), self.expr(target.slice), value), loc), loc)
        if isinstance(target, ast.Attribute):
            return ir.Do(ir.Prim("setattr", (self.expr(target.value), value), loc, params=(("name", target.attr),)),
                         loc)
        return ir.Assign(self.target(target), value, loc)

    def target(self, t):
        if isinstance(t, ast.Name):
            return ir.Var(t.id)
        if isinstance(t, (ast.Tuple, ast.List)):
            star = next((k for k, e in enumerate(t.elts) if isinstance(e, ast.Starred)), None)
            return ir.Unpack(tuple(self.target(e.value if isinstance(e, ast.Starred) else e) for e in t.elts), star)
        if isinstance(t, ast.Subscript):
            return ir.Item(self.expr(t.value), self.expr(t.slice))
        if isinstance(t, ast.Attribute):
            return ir.Field(self.expr(t.value), t.attr)
        return ir.Var(ast.unparse(t))  # not reachable from code that compiles

    def stmt_If(self, s, loc):
        return ir.If(self.expr(s.test), self.block(s.body), self.block(s.orelse), loc)

    def stmt_While(self, s, loc):
        return ir.Loop("while", None, None, self.expr(s.test), self.block(s.body), self.block(s.orelse), (), loc)

    def stmt_For(self, s, loc):
        it = self.expr(s.iter)
        kind = "range" if isinstance(it, ir.Prim) and it.op == "range" else "iter"
        return ir.Loop(kind, self.target(s.target), it, None, self.block(s.body), self.block(s.orelse), (), loc)

    def stmt_Try(self, s, loc):
        handlers = tuple(ir.Handler(self.opt(h.type), h.name, self.block(h.body), self.loc(h)) for h in s.handlers)
        return ir.Try(self.block(s.body), handlers, self.block(s.orelse), self.block(s.finalbody), loc)

    def stmt_FunctionDef(self, s, loc):
        if s.decorator_list:
            return ir.Unsupported("a decorated nested def", loc,
                                  parts=(*self.exprs(s.decorator_list), ir.Def(self.function(s, s.name), loc)))
        return ir.Def(self.function(s, s.name), loc)

    # ------------------------------------------------------------------ expressions

    def opt(self, node):
        return None if node is None else self.expr(node)

    def exprs(self, nodes) -> tuple:
        return tuple(self.expr(n) for n in nodes)

    def expr(self, e):
        method = getattr(self, "expr_" + type(e).__name__, None)
        if method is not None:
            return method(e, self.loc(e))
        return ir.Unsupported(_DESCRIBED.get(type(e), type(e).__name__), self.loc(e), parts=self.parts(e))

    def expr_Constant(self, e, loc):
        return ir.Const(e.value, _kind(e.value))

    def expr_Name(self, e, loc):
        if any(e.id in scope for scope in self.scopes):
            return ir.Var(e.id)
        kind, _ = self.lookup(e.id)
        return ir.Global(e.id, kind)

    def expr_Attribute(self, e, loc):
        path = self.module_path(e)
        if path is not None:
            return ir.Global(path, "global", _dotted(e))
        return ir.Prim("attr", (self.expr(e.value),), loc, params=(("name", e.attr),))

    def expr_Subscript(self, e, loc):
        return ir.Prim("getitem", (self.expr(e.value), self.expr(e.slice)), loc)

    def expr_Slice(self, e, loc):
        none = ir.Const(None, "None")
        return ir.Prim("slice", tuple(none if p is None else self.expr(p) for p in (e.lower, e.upper, e.step)), loc)

    def expr_BinOp(self, e, loc):
        return ir.Prim(_BINARY[type(e.op)], (self.expr(e.left), self.expr(e.right)), loc)

    def expr_UnaryOp(self, e, loc):
        op = _UNARY[type(e.op)]
        return ir.Prim(op, (self.expr(e.operand),), loc, type="bool" if op == "not" else None)

    def expr_BoolOp(self, e, loc):  # evaluated left to right, stopping early (as Python does)
        return ir.Prim("and" if isinstance(e.op, ast.And) else "or", self.exprs(e.values), loc)

    def expr_Compare(self, e, loc):
        operands = self.exprs([e.left, *e.comparators])
        pairs = [ir.Prim(_COMPARE[type(op)], (a, b), loc, type="bool")
                 for op, a, b in zip(e.ops, operands[:-1], operands[1:], strict=True)]
        # a < b < c: each middle operand appears in two comparisons (Python evaluates it once)
        return pairs[0] if len(pairs) == 1 else ir.Prim("and", tuple(pairs), loc, params=(("chain", True),),
                                                        type="bool")

    def expr_IfExp(self, e, loc):  # only the branch taken is evaluated
        return ir.Prim("ifexp", self.exprs([e.test, e.body, e.orelse]), loc)

    def expr_Tuple(self, e, loc):
        return ir.Prim(_LITERALS[type(e)], self.exprs(e.elts), loc, type=_LITERALS[type(e)])

    expr_List = expr_Set = expr_Tuple

    def expr_Dict(self, e, loc):
        items = [ir.Prim("star2", (v,), loc) if k is None else ir.Prim("tuple", (self.expr(k), v), loc)
                 for k, v in zip(e.keys, self.exprs(e.values), strict=True)]
        return ir.Prim("dict", tuple(items), loc, type="dict")

    def expr_Starred(self, e, loc):
        return ir.Prim("star", (self.expr(e.value),), loc)

    def expr_JoinedStr(self, e, loc):
        return ir.Prim("fstring", self.exprs(e.values), loc, type="str")

    def expr_FormattedValue(self, e, loc):
        params = (("conversion", e.conversion),)
        args = (self.expr(e.value),) + (() if e.format_spec is None else (self.expr(e.format_spec),))
        return ir.Prim("format", args, loc, params=params, type="str")

    def expr_NamedExpr(self, e, loc):
        return ir.Prim("walrus", (self.expr(e.value),), loc, params=(("name", e.target.id),))

    def expr_Lambda(self, e, loc):
        return ir.Lambda(self.function(e, "<lambda>"))

    def _comp(self, e, loc):
        self.scopes.append({n.id for g in e.generators for n in ast.walk(g.target) if isinstance(n, ast.Name)})
        try:
            gens = tuple(ir.Generator(self.target(g.target), self.expr(g.iter), self.exprs(g.ifs))
                         for g in e.generators)
            element = self.exprs([e.key, e.value] if isinstance(e, ast.DictComp) else [e.elt])
        finally:
            self.scopes.pop()
        return ir.Comp(_COMPS[type(e)], element, gens, loc)

    expr_ListComp = expr_SetComp = expr_GeneratorExp = expr_DictComp = _comp

    def expr_Call(self, e, loc):
        args = self.exprs(e.args)
        keywords = tuple((k.arg or "**", self.expr(k.value)) for k in e.keywords)
        op, head = self.callee(e.func)
        found = self.resolved(e.func)
        return ir.Prim(op, head + args, loc, keywords=keywords, type="int" if op == "len" else None,
                       callee=None if found is None else ir.Callee(found[1], _hops(e.func), _dotted(e.func)))

    # ------------------------------------------------------------------ names

    def lookup(self, name: str):
        """(kind, object) of a name the function does not bind: closure, global or builtin."""
        code = self.fn.__code__
        if name in code.co_freevars and self.fn.__closure__:
            index = code.co_freevars.index(name)
            try:
                found = self.fn.__closure__[index].cell_contents
            except ValueError:  # an empty cell
                self.reads.append(("cell", self.fn, index, _EMPTY))
                return "closure", None
            self.reads.append(("cell", self.fn, index, found))
            return "closure", found
        if name in self.fn.__globals__:
            found = self.fn.__globals__[name]
            self.reads.append(("global", self.fn, name, found))
            return "global", found
        found = getattr(builtins, name, None)
        self.reads.append(("global", self.fn, name, _EMPTY))  # a global of that name would shadow it
        self.reads.append(("builtin", None, name, found))
        return "builtin", found

    def resolved(self, node):
        """(kind, object) of a name or attribute chain that is not a local's, else None."""
        if isinstance(node, ast.Name):
            return None if any(node.id in scope for scope in self.scopes) else self.lookup(node.id)
        if isinstance(node, ast.Attribute):
            base = self.resolved(node.value)
            if base is not None and isinstance(base[1], (types.ModuleType, type)):
                found = getattr(base[1], node.attr, None)
                self.reads.append(("attr", base[1], node.attr, found))
                return base[0], found
        return None

    def module_path(self, node) -> str | None:
        """``np.linalg.norm`` for an attribute chain rooted at a module (its short name), else None."""
        attrs = []
        while isinstance(node, ast.Attribute):
            attrs.append(node.attr)
            node = node.value
        found = self.resolved(node) if isinstance(node, ast.Name) and attrs else None
        if found is None or not isinstance(found[1], types.ModuleType):
            return None
        return ".".join([_short(found[1].__name__), *reversed(attrs)])

    def callee(self, func) -> tuple[str, tuple]:
        """(primitive name, leading arguments) of a call of ``func``."""
        found = self.resolved(func)
        if found is None:
            if isinstance(func, ast.Attribute):  # a method of a value: the value is its first argument
                return f"method.{func.attr}", (self.expr(func.value),)
            return "call", (self.expr(func),)
        kind, obj = found
        helper = _helper(obj)
        if helper is not None:
            self.called.append(helper)
            return f"call:{_name_for(helper, self.names)}", ()
        if kind == "builtin" and isinstance(func, ast.Name):
            return func.id, ()
        path = self.module_path(func)
        return (path or _object_path(obj, ast.unparse(func))), ()


def _hops(func) -> int:
    """How many attribute names a call's name chain has after its first name."""
    hops = 0
    while isinstance(func, ast.Attribute):
        func, hops = func.value, hops + 1
    return hops


def _dotted(func) -> str | None:
    """A name or attribute chain as written (``numpy.linalg.norm``), else None."""
    attrs = []
    while isinstance(func, ast.Attribute):
        attrs.append(func.attr)
        func = func.value
    return ".".join([func.id, *reversed(attrs)]) if isinstance(func, ast.Name) else None


def _helper(obj):
    """The Python function a call of ``obj`` runs as lane code (a helper), or None."""
    from numba.core.dispatcher import Dispatcher

    if getattr(obj, "_lw_intrinsic", False):  # lw.random's draws and the like: primitives, not code to read
        return None
    if isinstance(obj, Dispatcher):
        return obj.py_func
    module = getattr(obj, "__module__", "") or ""
    if isinstance(obj, types.FunctionType) and not getattr(obj, "_lw_intrinsic", False) \
            and (not module.startswith("lanewise") or module == "lanewise._lanes"):  # generated lanes are helpers
        return obj
    return None


def _short(module: str) -> str:
    for name, alias in _ALIASES:
        if module == name or module.startswith(name + "."):
            return alias + module[len(name):]
    return module


def _object_path(obj, written: str) -> str:
    """A called object reached by a bare name (``from math import sqrt``): where it lives
    publicly (``math.sqrt``, ``lw.scan``), else the name the lane wrote."""
    name = getattr(obj, "__name__", None)
    for module, alias in _ALIASES + (("math", "math"), ("cmath", "cmath")):
        if name and getattr(sys.modules.get(module), name, None) is obj:
            return f"{alias}.{name}"
    module = getattr(obj, "__module__", None)
    if name and module and module not in ("builtins", "__main__") and getattr(sys.modules.get(module), name,
                                                                               None) is obj:
        return f"{_short(module)}.{name}"
    return written


def _kind(value) -> str | None:
    if value is None:
        return "None"
    return type(value).__name__ if isinstance(value, (bool, int, float, complex, str, bytes, tuple)) else None


def _fields(node) -> dict:
    return {f: getattr(node, f) for f in node._fields}


_DESCRIBED = {ast.With: "a with statement", ast.AsyncWith: "an async with statement", ast.Delete: "del",
              ast.Global: "a global statement", ast.Nonlocal: "a nonlocal statement", ast.ClassDef: "a class",
              ast.Import: "an import", ast.ImportFrom: "an import", ast.AsyncFor: "an async for loop",
              ast.AsyncFunctionDef: "an async def", ast.Match: "a match statement", ast.Yield: "yield",
              ast.YieldFrom: "yield from", ast.Await: "await"}
