"""Python that compiled lanes cannot say, named before Numba is asked, with what to write instead.

Numba refuses these constructs too, but its words are about its own machinery
("The use of yield in a closure is unsupported", "Exception object cannot be
stored into variable (e)", "No implementation of function mod(Literal[str],
float64)").  lanewise finds them in the lane's IR (:mod:`lanewise.lane.ir`, read
from its source) first and says which construct, where (``file:line`` and the
source line) and what to write instead:

* ``except E as name`` and ``except ValueError:``: a compiled lane catches
  only ``Exception`` (or a bare ``except:``), and cannot bind what it caught;
* ``"%d" % x``: a compiled lane cannot compute strings;
* generator expressions (``sum(v * v for v in r)``, ``any(...)``): a loop;
* ``np.array`` of a ragged list literal (``[[1.0, 2.0], [3.0]]``): rows of one
  length.

Each is refused only where Numba would refuse it as well, so nothing that
compiles today is refused; the ``python`` backend runs the lane as the Python
it is (docs/lanes.md).  Constructs are quoted as ``ast.unparse`` writes them
(:mod:`lanewise.lane.ir.unparse`; a callee as the line writes it).  A lane with
no source text is checked by its bytecode, where only generator expressions can
be told apart (Numba's words remain for the others).

Example:
    >>> def lane(r):
    ...     return sum(v * v for v in r)
    >>> from lanewise.lane.ir.build import build
    >>> try:
    ...     check(lane, build(lane).entry)
    ... except Exception as e:
    ...     print(type(e).__name__, "uses a generator expression" in str(e))
    LaneCompileError True
"""

from __future__ import annotations

import re
import types

from .ir import nodes as ir
from .ir.unparse import call_args, callee_text, is_call, python_text
from .refusals import lane_error, nested_codes, walk
from .source import source_text

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


def check(fn: types.FunctionType, lane: ir.Function) -> None:
    """Raise :class:`lanewise.LaneCompileError` naming the first construct of ``fn``
    that a compiled lane cannot say, its line and what to write instead (``lane``:
    the lane IR of ``fn``, :class:`lanewise.lane.ir.nodes.Function`)."""
    if lane.source == "bytecode":  # no trustworthy source: generator expressions show in the bytecode
        for code in nested_codes(fn.__code__):
            if code.co_name == "<genexpr>":
                raise lane_error(fn, code.co_firstlineno, "uses a generator expression", _GENERATOR_HINT)
        return
    for node, parent in walk(lane):
        found = _construct(fn, node, parent)
        if found is not None:
            raise lane_error(fn, node.loc.line, *found)


def _construct(fn, node, parent) -> tuple[str, str] | None:
    """(what, hint) when IR ``node`` is a construct compiled lanes cannot say, else None."""
    if isinstance(node, ir.Handler):
        return _handler(node)
    if isinstance(node, ir.Comp) and node.kind == "genexp":
        called = is_call(parent) and any(a is node for a in call_args(parent))
        shown = _written_callee(fn, parent) + "(... for ...)" if called else python_text(node)
        return f"uses a generator expression ({shown})", _GENERATOR_HINT
    if isinstance(node, ir.Prim) and node.op == "mod" and not is_call(node) and _is_string(node.args[0]):
        return f"formats a string with % ({python_text(node)})", _PERCENT_HINT
    if isinstance(node, ir.Prim) and node.op in ("np.array", "np.asarray") and is_call(node) and node.args:
        lengths = _ragged(node.args[0])
        if lengths is not None:
            return f"builds an array from a ragged list ({lengths}: {python_text(node.args[0])})", _RAGGED_HINT
    return None


def _handler(node: ir.Handler) -> tuple[str, str] | None:
    caught = python_text(node.type) if node.type is not None else ""
    named = caught not in ("", "Exception")
    if node.name is not None:
        also = f" and catch `Exception` (a named class such as {caught} cannot be caught)" if named else ""
        return (f"binds the exception it catches to a name (except {caught or 'Exception'} as {node.name})",
                _EXCEPT_AS_HINT.format(name=node.name, named=also))
    if named:
        return f"catches a named exception class (except {caught})", _NAMED_CLASS_HINT
    return None


def _is_string(e) -> bool:
    return (isinstance(e, ir.Prim) and e.op == "fstring") or (isinstance(e, ir.Const) and isinstance(e.value, str))


#: A callee written as a (dotted) name, then the call's parenthesis.
_DOTTED_CALL = re.compile(r"([A-Za-z_]\w*(?:\s*\.\s*[A-Za-z_]\w*)*)\s*\(")


def _written_callee(fn, call: ir.Prim) -> str:
    """What ``call`` calls, as the lane's line writes it (``numpy.sum``, ``total``: a name
    the IR resolves to ``np.sum`` or ``call:helper``), else as the IR names it."""
    head = call.args[0] if call.op == "call" or call.op.startswith("method.") else None
    if head is None or _is_name_chain(head):
        text = source_text(fn)
        lines = text.splitlines() if text is not None else []
        if 0 < call.loc.line <= len(lines):
            written = lines[call.loc.line - 1].encode()[call.loc.col:].decode(errors="replace")  # col: bytes
            match = _DOTTED_CALL.match(written)
            if match is not None:
                return re.sub(r"\s", "", match.group(1))
    return callee_text(call)


def _is_name_chain(e) -> bool:
    """A name (``r``) or a field chain on one (``self.rows``)."""
    while isinstance(e, ir.Prim) and e.op == "attr":
        e = e.args[0]
    return isinstance(e, (ir.Var, ir.Global))


def _ragged(e) -> str | None:
    """'rows of lengths 2 and 1' (or 'a number beside rows of length 1') when the list/tuple
    literal ``e`` has rows of different lengths, at any depth; else None."""
    if not _is_row(e):
        return None
    lengths = [len(v.args) for v in e.args if _is_row(v)]
    numbers = len(lengths) < len(e.args)
    if lengths and (numbers or len(set(lengths)) > 1):
        shown = [str(n) for n in dict.fromkeys(lengths)]
        rows = ", ".join(shown[:-1]) + (" and " if len(shown) > 1 else "") + shown[-1]
        return f"a number beside rows of length {rows}" if numbers else f"rows of lengths {rows}"
    return next((inner for v in e.args if (inner := _ragged(v)) is not None), None)


def _is_row(e) -> bool:
    return isinstance(e, ir.Prim) and e.op in ("list", "tuple") and not is_call(e)
