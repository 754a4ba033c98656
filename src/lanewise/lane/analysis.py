"""A lane's source: its ``def``/``lambda`` node, checked to be the code that runs.

Lane transformations (SPMD, versioning, in-place outputs, the dependence analysis
of :mod:`lanewise.lane.dependence`) read a lane's AST from :func:`definition` and
compile their rewrite with :func:`compile_like`, which keeps the user's file,
lines and closure cells.

Example:
    >>> def lane(x):
    ...     return x + 1
    >>> type(definition(lane)).__name__
    'FunctionDef'
"""

from __future__ import annotations

import ast
import dis
import inspect
import textwrap
from typing import Callable


def definition(fn: Callable):
    """The ``def``/``lambda`` node of ``fn``, or None when its source is unavailable,
    ambiguous, or not the code that runs.

    ``inspect.getsource`` reads the file *now* at the function's line: for code
    exec'd from a string with a file name (a README block, a notebook cell), or
    a file edited since import, that is other code.  The node is therefore
    compiled again and compared with ``fn``'s code (names, locals, constants)
    before anyone analyses or rewrites it.
    """
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(fn)))
    except (OSError, TypeError, SyntaxError, ValueError):
        return None
    node = _find_definition(tree, fn)
    return node if node is not None and _same_code(node, fn) else None


def _same_code(node, fn) -> bool:
    """Does ``node``, compiled with ``fn``'s free variables, give ``fn``'s code (see _shape)?"""
    made = compile_like(node, fn.__code__)
    return made is not None and _shape(made) == _shape(fn.__code__)


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


def _shape(code) -> tuple:
    """What compiling the same source always reproduces: names, locals, constants
    and the instruction stream (operations and their resolved arguments, not
    line numbers or caches).  An edit of one operator (``>`` to ``>=``) changes
    the stream: comparing names and constants alone let an edited file pass and
    its kernel be stored under the running code's key."""
    consts = tuple(_shape(c) if hasattr(c, "co_code") else (type(c).__name__, repr(c)) for c in code.co_consts)
    return code.co_argcount, code.co_names, code.co_varnames, code.co_freevars, consts, _instructions(code)


#: Opcodes the compiler chooses by context, not by the source: ``np.zeros(4)`` is
#: LOAD_ATTR where ``np`` was imported in the same module (CPython 3.11's
#: is_import_originated), LOAD_METHOD when the function is compiled alone.
_SAME_OP = {"LOAD_METHOD": "LOAD_ATTR"}
_JUMPS = set(dis.hasjrel) | set(dis.hasjabs)


def _instructions(code) -> tuple:
    """The instruction stream: operations and resolved arguments, jump targets as
    instruction indices (byte offsets shift with the inline caches of each op)."""
    instructions = list(dis.get_instructions(code))
    index = {i.offset: k for k, i in enumerate(instructions)}
    out = []
    for i in instructions:
        if i.opcode in _JUMPS:
            arg = ("->", index.get(i.argval))
        elif hasattr(i.argval, "co_code"):
            arg = None
        else:
            arg = repr(i.argval)
        out.append((_SAME_OP.get(i.opname, i.opname), arg))
    return tuple(out)


def _find_definition(tree, fn):
    """The def/lambda node of ``fn`` in the source lines ``inspect`` gave."""
    code = getattr(fn, "__code__", None)
    if code is None:
        return None
    params = list(code.co_varnames[:code.co_argcount + code.co_kwonlyargcount])
    found = [n for n in ast.walk(tree)
             if isinstance(n, (ast.FunctionDef, ast.Lambda))
             and (not isinstance(n, ast.FunctionDef) or n.name == code.co_name)
             and [a.arg for a in n.args.posonlyargs + n.args.args + n.args.kwonlyargs] == params]
    if len(found) > 1:  # lambdas on one line: the one whose compiled code is fn's
        found = [n for n in found if _same_code(n, fn)]
        if len({ast.dump(n) for n in found}) == 1:
            return found[0]  # identical definitions: either is the code that runs
    return found[0] if len(found) == 1 else None  # ambiguous: assume the worst
