"""A lane's source: the ``def``/``lambda`` node that *is* the code that runs.

Transformations (``lw.grad``, the SPMD path, prefetching, the out_axes analysis)
read the lane's AST; the node they read must be the code Python runs, or their
result is another function's.  The node is found from the code object itself:

* the text comes from ``linecache`` (files, IPython and Jupyter cells, Python
  3.13's REPL, lanewise's own generated code), else from where a sourceless
  name points: ``python -c``'s command (``sys.orig_argv``), a script redirected
  into ``python``'s standard input, the interactive interpreter's history;
* that text is compiled whole, as Python compiled it, and the lane's code object
  must be among what it makes (code objects compare by bytecode, constants,
  names and positions): a file edited since import, code exec'd from another
  string, or a different compiler's choices can never pass for the lane;
* the node is the one at the columns of the instruction that loads that code
  object (Python >= 3.11's ``co_positions``), so a lambda in a list, in a ``for``
  header or sharing its line with another of the same parameters is located
  exactly.

Comparing the code objects Python makes from the same text is version-proof:
a re-compiled ``def`` alone differs from the module's by the compiler's
contextual choices (``np.sin`` in 3.13: one more ``PUSH_NULL`` when ``np`` is
not imported in the same unit), a whole text never does.

Example:
    >>> def lane(x):
    ...     return x * 2.0
    >>> type(definition(lane)).__name__, definition(lane).lineno
    ('FunctionDef', 1)
"""

from __future__ import annotations

import __future__
import builtins
import ast
import copy
import functools
import dis
import linecache
import operator
import os
import stat
import sys
import threading
import tokenize
import types
from collections import OrderedDict
from typing import Callable, Iterator

#: Texts compiled lately, by (file name, text): (the parsed tree, code -> its position).
_COMPILED: "OrderedDict[tuple[str, str, int], tuple | None]" = OrderedDict()
_COMPILED_MAX = 64
_LOCK = threading.Lock()

#: Lines of the interactive interpreter's history searched for a lane typed there.
HISTORY_LINES = 500

#: The module lanewise's lanes written from text claim (``@lw.fuse``'s lowered lanes, the
#: derivatives ``lw.grad`` and its kin generate): lanewise names, but the user's computation.
LANE_MODULE = "lanewise._lanes"

_DEFINITIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)
#: The ``__future__`` features' flags (a code object's and the compiler's are the same bits).
_FUTURE_FLAGS = functools.reduce(operator.or_, (getattr(__future__, name).compiler_flag
                                                 for name in __future__.all_feature_names))


def definition(fn: Callable):
    """The ``def``/``lambda`` node of ``fn`` (a fresh copy: callers rewrite it), its
    lines counted from ``fn``'s first line (1 = ``co_firstlineno``, as for the text
    ``inspect.getsource`` gives); None when no source text compiles to ``fn``'s code."""
    code = getattr(fn, "__code__", None)
    if not isinstance(code, types.CodeType):
        return None
    for text in _texts(code.co_filename, getattr(fn, "__globals__", None)):
        node = _located(code, text)
        if node is not None:
            node = copy.deepcopy(node)
            ast.increment_lineno(node, 1 - code.co_firstlineno)
            return node
    return None


def source_text(fn: Callable) -> str | None:
    """The whole text ``fn`` was compiled from (its file, cell or command), or None.

    Example:
        >>> def lane(x):
        ...     return x + 1.0
        >>> "return x + 1.0" in source_text(lane)
        True
    """
    code = getattr(fn, "__code__", None)
    if not isinstance(code, types.CodeType):
        return None
    return next((t for t in _texts(code.co_filename, getattr(fn, "__globals__", None))
                 if _located(code, t) is not None), None)


def _located(code: types.CodeType, text: str):
    """The node of ``code`` in ``text`` (compiled as the file ``code`` names), or None."""
    compiled = _compile(code.co_filename, text, code.co_flags & _FUTURE_FLAGS)
    if compiled is None:
        return None
    nodes, positions = compiled
    where = positions.get(code)
    if where is None:
        return None
    found = nodes.get(where)
    return found if found is not None and _named(found, code) else None


def _named(node, code: types.CodeType) -> bool:
    return getattr(node, "name", "<lambda>") == code.co_name


def _compile(filename: str, text: str, flags: int):
    """(definition nodes by span, code objects -> the span of the instruction loading
    them) for ``text`` compiled as ``filename`` with the ``__future__`` ``flags`` the
    code was compiled with (code compiled by a module with ``from __future__ import
    annotations`` inherits it); None if it does not compile."""
    key = (filename, text, flags)
    with _LOCK:
        if key in _COMPILED:
            _COMPILED.move_to_end(key)
            return _COMPILED[key]
    try:
        tree = ast.parse(text, filename)
        module = compile(text, filename, "exec", flags=flags, dont_inherit=True)  # not this module's flags
    except (SyntaxError, ValueError, TypeError, MemoryError, RecursionError):
        made = None
    else:
        nodes = {_span(n): n for n in ast.walk(tree) if isinstance(n, _DEFINITIONS)}
        made = nodes, dict(_code_positions(module))
    with _LOCK:
        _COMPILED[key] = made
        while len(_COMPILED) > _COMPILED_MAX:
            _COMPILED.popitem(last=False)
    return made


def _span(node) -> tuple:
    return node.lineno, node.end_lineno, node.col_offset, node.end_col_offset


def _code_positions(code: types.CodeType) -> Iterator[tuple[types.CodeType, tuple]]:
    """Each code object nested in ``code`` with the position of the instruction that
    loads it: the span of its ``def`` (from ``def``, decorators excluded) or ``lambda``."""
    for const, position in zip(code.co_consts, _const_positions(code), strict=True):
        if isinstance(const, types.CodeType):
            if position is not None:
                yield const, position
            yield from _code_positions(const)


def _const_positions(code: types.CodeType) -> list:
    """Per constant of ``code``, the position of the first instruction loading it."""
    found = [None] * len(code.co_consts)
    for instruction in dis.get_instructions(code):
        if instruction.opname == "LOAD_CONST" and found[instruction.arg] is None and instruction.positions:
            p = instruction.positions
            found[instruction.arg] = (p.lineno, p.end_lineno, p.col_offset, p.end_col_offset)
    return found


# --------------------------------------------------------------------------- where the text is


def _texts(filename: str, module_globals) -> Iterator[str]:
    """Candidate texts ``filename``'s code may have been compiled from, most likely
    first; each is checked by compiling it (:func:`_located`), so a wrong one costs
    only time."""
    linecache.checkcache(filename)  # a file edited since: read anew (cells have no mtime: kept)
    lines = linecache.getlines(filename, module_globals)
    if lines:
        yield "".join(lines)
    if filename == "<string>":
        yield from _command()
    elif filename == "<stdin>":
        yield from _redirected_stdin()
        yield from _history_blocks()


def _command() -> Iterator[str]:
    """``python -c COMMAND``'s command: its code is ``<string>`` and nothing keeps its text."""
    argv = getattr(sys, "orig_argv", [])
    for k, arg in enumerate(argv[1:-1], start=1):
        if arg == "-c":
            yield argv[k + 1]
            return
        if not arg.startswith("-") or arg in ("-m", "-"):
            return  # a script or module: no -c command


def _redirected_stdin() -> Iterator[str]:
    """``python < script.py``: standard input is the file, which can be read again."""
    try:
        if not stat.S_ISREG(os.fstat(0).st_mode):
            return
        data = os.pread(0, os.fstat(0).st_size, 0)
    except (OSError, AttributeError, ValueError):
        return
    try:
        encoding, _ = tokenize.detect_encoding(iter(data.splitlines(True)).__next__)
        yield data.decode(encoding)
    except (SyntaxError, UnicodeDecodeError, LookupError):
        return


def _history_blocks() -> Iterator[str]:
    """The statements typed at the interactive interpreter (Python < 3.13 keeps no text
    of them; readline keeps the lines), most recent first.  Each statement was compiled
    on its own from line 1: a block starts at a line with no indent, and runs on over
    indented lines, ``else``/``elif``/``except``/``finally`` and, after a decorator,
    the ``def``."""
    readline = sys.modules.get("readline")
    if readline is None or not hasattr(readline, "get_history_item"):
        return
    try:
        count = readline.get_current_history_length()
        lines = [readline.get_history_item(k) or "" for k in range(max(1, count - HISTORY_LINES + 1), count + 1)]
    except Exception:  # noqa: BLE001 - a readline replacement (pyreadline, libedit) may lack or break these
        return
    blocks: list[list[str]] = []
    for line in lines:
        if blocks and (line[:1].isspace() or not line.strip() or _continues(line) or blocks[-1][-1].startswith("@")):
            blocks[-1].append(line)
        else:
            blocks.append([line])
    for block in reversed(blocks):
        yield "\n".join(block) + "\n"


def _continues(line: str) -> bool:
    return line.split(None, 1)[0].rstrip(":") in ("else", "elif", "except", "finally", "case") if line else False


def compile_like(node, code):
    """The code object of ``node`` (a ``def`` or ``lambda``) compiled as ``code``
    was: in its file, inside a factory taking its free variables (so they stay
    free variables), a ``def`` renamed so that a recursive call stays a global
    lookup; None if it does not compile."""
    inner = ast.copy_location(ast.FunctionDef(name="__lw_inner", args=node.args, body=node.body,
                                              decorator_list=[], returns=None, type_comment=None),
                              node) if isinstance(node, ast.FunctionDef) else node
    body = [inner] if isinstance(node, ast.FunctionDef) else [ast.copy_location(ast.Return(inner), node)]
    factory = ast.copy_location(ast.FunctionDef(name="__lw_factory", args=ast.arguments(
        posonlyargs=[], args=[ast.arg(v) for v in code.co_freevars], vararg=None, kwonlyargs=[],
        kw_defaults=[], kwarg=None, defaults=[]), body=body, decorator_list=[], returns=None,
        type_comment=None), node)
    module = ast.fix_missing_locations(ast.Module(body=[factory], type_ignores=[]))
    try:
        compiled = compile(module, code.co_filename, "exec")
    except (SyntaxError, ValueError, TypeError):
        return None
    made = next(c for c in compiled.co_consts if hasattr(c, "co_code"))
    name = "__lw_inner" if isinstance(node, ast.FunctionDef) else "<lambda>"
    found = [c for c in made.co_consts if hasattr(c, "co_code") and c.co_name == name]
    return found[0] if len(found) == 1 else None


def own_nodes(fdef):
    """The nodes of a function's body, not descending into nested functions (the
    statements and names that are the function's own)."""
    todo = list(fdef.body)
    while todo:
        node = todo.pop()
        yield node
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            todo.extend(ast.iter_child_nodes(node))


def function_ast(fn, error: type = ValueError) -> ast.FunctionDef:
    """The ``def`` of ``fn``; a lambda as the ``def`` of one ``return`` (when its
    source is found: :func:`definition` checks it is the code that runs); ``error``
    (raised with the reason) when there is none.  For the passes that still read
    Python's syntax tree (autodiff's emitters); the others read the lane IR.

    Example:
        >>> function_ast(lambda x: x + 1.0).body[0].value.op.__class__.__name__
        'Add'
    """
    node = definition(fn)
    if isinstance(node, ast.Lambda):
        body = [ast.copy_location(ast.Return(node.body), node.body)]
        node = ast.copy_location(ast.FunctionDef(name=fn.__name__, args=node.args, body=body, decorator_list=[],
                                                 returns=None, type_comment=None), node)
        return ast.fix_missing_locations(node)
    if not isinstance(node, ast.FunctionDef):
        raise error(f"the source of {fn.__qualname__} is not available, or is not the code "
                    "that runs (exec'd from a string, or edited since import)")
    if node.decorator_list:  # a pasted @numba.njit(...): not the lane's code, and its calls are not helpers
        node = copy.copy(node)
        node.decorator_list = []
    return node


def resolve(fn, node):
    """The object a name or attribute chain (a syntax-tree node) in ``fn`` refers to
    (``math.exp``, ``helper``, ``np``): a closure variable, a global or a builtin; None
    if unknown.

    Example:
        >>> import math
        >>> resolve(resolve, ast.parse("math.exp", mode="eval").body) is None  # no math in this module
        True
    """
    if isinstance(node, ast.Name):
        if node.id in fn.__code__.co_varnames or node.id in fn.__code__.co_cellvars:
            return None  # a local (a lambda bound in the lane, say), not the global of that name
        if node.id in fn.__code__.co_freevars and fn.__closure__:
            try:
                return fn.__closure__[fn.__code__.co_freevars.index(node.id)].cell_contents
            except ValueError:  # an empty cell
                return None
        if node.id in fn.__globals__:
            return fn.__globals__[node.id]
        return getattr(builtins, node.id, None)
    if isinstance(node, ast.Attribute):
        base = resolve(fn, node.value)
        if isinstance(base, (types.ModuleType, type)):
            return getattr(base, node.attr, None)
    return None
