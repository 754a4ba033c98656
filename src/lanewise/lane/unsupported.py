"""Python that compiled lanes cannot say, named before Numba is asked, with what to write instead.

Numba refuses these constructs too, but its words are about its own machinery
("The use of yield in a closure is unsupported", "Exception object cannot be
stored into variable (e)", "No implementation of function mod(Literal[str],
float64)").  lanewise finds them in the lane's source first and says which
construct, where (``file:line`` and the source line) and what to write instead:

* ``except E as name`` and ``except ValueError:``: a compiled lane catches
  only ``Exception`` (or a bare ``except:``), and cannot bind what it caught;
* ``"%d" % x``: a compiled lane cannot compute strings;
* generator expressions (``sum(v * v for v in r)``, ``any(...)``): a loop;
* ``np.array`` of a ragged list literal (``[[1.0, 2.0], [3.0]]``): rows of one
  length.

Each is refused only where Numba would refuse it as well, so nothing that
compiles today is refused; the ``python`` backend runs the lane as the Python
it is (docs/lanes.md).  A lane with no source text is checked by its bytecode,
where only generator expressions can be told apart (Numba's words remain for
the others).

Example:
    >>> def lane(r):
    ...     return sum(v * v for v in r)
    >>> from lanewise.lane.source import definition
    >>> try:
    ...     check(lane, definition(lane))
    ... except Exception as e:
    ...     print(type(e).__name__, "uses a generator expression" in str(e))
    LaneCompileError True
"""

from __future__ import annotations

import ast
import types

import numpy as np

from .refusals import def_line, lane_error

_EXCEPT_AS_HINT = ("a compiled lane can catch an exception (`except Exception:` or a bare `except:`) but cannot "
                   "bind it to a name: Numba has no exception objects. Drop `as {name}`{named}; where the "
                   "handler needs to know what failed, test the condition with `if` before the operation instead")
_NAMED_CLASS_HINT = ("a compiled lane catches only `Exception` (or a bare `except:`): write `except Exception:` "
                     "(which also catches anything else the `try` body raises), or test the condition with `if` "
                     "before the operation instead of catching")
_PERCENT_HINT = ("a compiled lane cannot compute strings (Numba has no %-formatting, and formats numbers in "
                 "f-strings as '<object type:float64>'): return the number from the lane and format it outside, "
                 "e.g. ['%d' % v for v in lw.vmap(lane)(x)]; a raise message may be an f-string "
                 "(the failing lane is re-run in Python to raise it)")
_GENERATOR_HINT = ("Numba cannot compile generator expressions (closures that yield); write a `for` loop with an "
                   "accumulator: `total = 0.0` then `for v in r: total += v * v` (for any/all: set a flag and "
                   "`break`; for min/max: `m = max(m, v)`). A list comprehension `sum([v * v for v in r])` "
                   "compiles too, but builds a list in each lane (any/all/min/max of a list do not compile)")
_RAGGED_HINT = ("an array's rows must all have the same length: pad the short rows to one length (e.g. with "
                "np.nan, keeping the true lengths in another array), or make one array per row")


def check(fn: types.FunctionType, tree: ast.AST | None) -> None:
    """Raise :class:`lanewise.LaneCompileError` naming the first construct of ``fn``
    that a compiled lane cannot say, its line and what to write instead (``tree``:
    :func:`lanewise.lane.source.definition` of ``fn``)."""
    if tree is None:  # no trustworthy source: generator expressions show in the bytecode
        for code in _nested_codes(fn.__code__):
            if code.co_name == "<genexpr>":
                raise lane_error(fn, code.co_firstlineno, "uses a generator expression", _GENERATOR_HINT)
        return
    offset = fn.__code__.co_firstlineno - def_line(tree)
    parents = {id(child): node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    for node in ast.walk(tree):
        found = _construct(fn, node, parents)
        if found is not None:
            raise lane_error(fn, node.lineno + offset, *found)


def _construct(fn, node, parents) -> tuple[str, str] | None:
    """(what, hint) when ``node`` is a construct compiled lanes cannot say, else None."""
    if isinstance(node, ast.ExceptHandler):
        return _handler(node)
    if isinstance(node, ast.GeneratorExp):
        call = parents.get(id(node))
        called = ast.unparse(call.func) if isinstance(call, ast.Call) else ""
        return f"uses a generator expression ({called + '(... for ...)' if called else ast.unparse(node)})", \
            _GENERATOR_HINT
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod) and _is_string(node.left):
        return f"formats a string with % ({ast.unparse(node)})", _PERCENT_HINT
    if isinstance(node, ast.Call) and _is_numpy_array(fn, node.func) and node.args:
        lengths = _ragged(node.args[0])
        if lengths is not None:
            return f"builds an array from a ragged list ({lengths}: {ast.unparse(node.args[0])})", \
                _RAGGED_HINT
    return None


def _handler(node: ast.ExceptHandler) -> tuple[str, str] | None:
    caught = ast.unparse(node.type) if node.type is not None else ""
    named = caught not in ("", "Exception")
    if node.name is not None:
        also = f" and catch `Exception` (a named class such as {caught} cannot be caught)" if named else ""
        return (f"binds the exception it catches to a name (except {caught or 'Exception'} as {node.name})",
                _EXCEPT_AS_HINT.format(name=node.name, named=also))
    if named:
        return f"catches a named exception class (except {caught})", _NAMED_CLASS_HINT
    return None


def _is_string(node) -> bool:
    return isinstance(node, ast.JoinedStr) or (isinstance(node, ast.Constant) and isinstance(node.value, str))


def _is_numpy_array(fn, func) -> bool:
    """Whether ``func`` is ``np.array``/``np.asarray`` (NumPy under any name the lane's module gives it)."""
    return isinstance(func, ast.Attribute) and func.attr in ("array", "asarray") \
        and isinstance(func.value, ast.Name) and fn.__globals__.get(func.value.id) is np


def _ragged(node) -> str | None:
    """'rows of lengths 2 and 1' (or 'a number beside rows of length 1') when the list/tuple
    literal ``node`` has rows of different lengths, at any depth; else None."""
    if not isinstance(node, (ast.List, ast.Tuple)):
        return None
    lengths = [len(e.elts) for e in node.elts if isinstance(e, (ast.List, ast.Tuple))]
    numbers = len(lengths) < len(node.elts)
    if lengths and (numbers or len(set(lengths)) > 1):
        shown = [str(n) for n in dict.fromkeys(lengths)]
        rows = ", ".join(shown[:-1]) + (" and " if len(shown) > 1 else "") + shown[-1]
        return f"a number beside rows of length {rows}" if numbers else f"rows of lengths {rows}"
    return next((inner for e in node.elts if (inner := _ragged(e)) is not None), None)


def _nested_codes(code: types.CodeType):
    """``code``'s nested code objects (comprehensions, lambdas, inner functions), depth first."""
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield const
            yield from _nested_codes(const)
