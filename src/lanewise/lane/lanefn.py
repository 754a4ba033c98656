"""Turning a user's plain-Python lane function into something Numba compiles.

Users write no decorators: helper functions the lane calls (by global name or
through a closure) are compiled too, by rebinding the lane's globals and closure
cells to ``njit`` versions (docs/architecture.md, "Facts the design rests on").  A
compiled variant is kept per fingerprint of the lane (:mod:`.fingerprint`), so
editing a global it reads compiles it again.

Example:
    >>> def helper(v): return v + 1
    >>> def lane(x): return helper(x) * 2
    >>> jit_lane(lane)(3)
    8
"""

from __future__ import annotations

import builtins
import dis
import inspect
import keyword
import sys
import threading
import tokenize
import types
import weakref
from typing import Any, Callable

import numba
import numpy as np
from numba.core.dispatcher import Dispatcher

from ..config import config
from ..dtypes import code_names
from ..errors import LaneCompileError, function_location
from . import kept_reads, pybuiltins, refusals, unsupported, versioning  # noqa: F401 - pybuiltins: float(bool) for lanes
from .fingerprint import PINNED_MODULES, fingerprint, python_function
from .ir import build
from .ir import nodes as ir
from .ir.passes import unbound
from .source import source_text

#: Options every lane and generated kernel is compiled with.  ``error_model``
#: "numpy" makes ``x / 0.0`` give inf/nan (as NumPy and JAX do) and removes the
#: zero checks that would stop LLVM vectorising the nest.  ``boundscheck``: an
#: index out of bounds raises IndexError instead of reading outside the array
#: (docs/safety.md, "Indexing"); kernels that inline the lane get it only when
#: the lane :func:`indexes` (their own reads are in bounds by construction, and
#: a checked kernel loop does not vectorise: W1 ran 5x slower).
JIT_OPTIONS = dict(error_model="numpy", nogil=True, boundscheck=True)
kept_reads.install()  # a read whose value is unused keeps its bounds check (Numba's DCE dropped it)

_SUBSCRIPTS = frozenset({"BINARY_SUBSCR", "STORE_SUBSCR", "DELETE_SUBSCR", "BINARY_SLICE", "STORE_SLICE"})


def indexes(fn: Callable) -> bool:
    """Whether ``fn``'s own code subscripts anything (nested functions and
    comprehensions included); True when it has no Python code to look at.

    Example:
        >>> indexes(lambda row, k: row[k]), indexes(lambda x: x * 2.0)
        (True, False)
    """
    code = getattr(python_function(fn), "__code__", None)
    return code is None or _code_indexes(code)


_LOOPS = frozenset({"FOR_ITER", "JUMP_BACKWARD", "JUMP_BACKWARD_NO_INTERRUPT", "JUMP_ABSOLUTE"})


def has_loops(fn: Callable) -> bool:
    """Whether ``fn`` or a function it calls by name loops (so one lane's cost may
    be large); True when there is no Python code to look at.

    Example:
        >>> def count(n):
        ...     return sum(1 for _ in range(n))
        >>> has_loops(count), has_loops(lambda x: x + 1.0)
        (True, False)
    """
    return _has_loops(python_function(fn), set())


def _has_loops(fn, seen: set) -> bool:
    code = getattr(fn, "__code__", None)
    if code is None:
        return True
    if id(fn) in seen:
        return False
    seen.add(id(fn))
    if _code_has(code, _LOOPS):
        return True
    callees = (python_function(fn.__globals__.get(n)) for n in _global_loads(code))
    return any(_has_loops(c, seen) for c in callees if isinstance(c, types.FunctionType))


def _code_has(code: types.CodeType, opnames: frozenset) -> bool:
    return any(i.opname in opnames for i in dis.get_instructions(code)) or any(
        _code_has(c, opnames) for c in code.co_consts if isinstance(c, types.CodeType))


def _code_indexes(code: types.CodeType) -> bool:
    return _code_has(code, _SUBSCRIPTS)


#: CPython compiles a call of more than 30 arguments (a keyword counting twice,
#: STACK_USE_GUIDELINE in its compiler) to CALL_FUNCTION_EX: ``fn(*args)``, or
#: ``fn(*args, **kwargs)`` when some are keywords.  Numba's inliner rejects the first
#: ("Calling a closure with *args is unsupported"); the second its own peephole
#: (``peep_hole_call_function_ex_to_call_function_kw``) turns back into a plain call,
#: so generated code passes the arguments past this many by keyword
#: (:func:`lanewise.codegen.common.call`; issue 42: a lane of 36 parameters).
CALL_LIMIT = 30


def _star_calls(code: types.CodeType) -> bool:
    """Whether ``code`` calls something with ``*args``/``**kwargs`` (``func(x, *args)``,
    the calling convention of QuantEcon's and SciPy-style solvers): Numba's inliner
    cannot inline such a call ("Calling a closure with *args is unsupported")."""
    return _code_has(code, frozenset({"CALL_FUNCTION_EX"}))

_STANDIN = sys.modules.setdefault("lanewise._lanes", types.ModuleType("lanewise._lanes"))

_jitted: "weakref.WeakKeyDictionary[Callable, Dispatcher]" = weakref.WeakKeyDictionary()
_inlined: "weakref.WeakKeyDictionary[Callable, Dispatcher]" = weakref.WeakKeyDictionary()


def jit_lane(fn: Callable) -> Dispatcher:
    """An ``njit`` dispatcher for ``fn`` whose helper calls are compiled too.

    With ``lw.config.vector_math`` (the default) the lane's ``math``/``numpy``
    calls use :mod:`lanewise.lanemath` (<= 1 ulp, vectorisable) instead of libm.
    """
    if isinstance(fn, Dispatcher):
        return fn
    return _cached(_jitted, fn, lambda: _jitted_clone(fn, _rebind(fn)))


def _jitted_clone(fn: types.FunctionType, clone: types.FunctionType) -> Dispatcher:
    """``clone`` (``fn`` rebound) compiled, LLVM-inlined into its callers when one of
    its loops was versioned (lane.versioning): the two copies of the loop can put
    it over LLVM's inline threshold (W7's max-gather lane, called: 98 ms, inlined:
    91 ms on one thread, 50 -> 46 ms on two; the sum lane was inlined either way).
    Not a recursive function: LLVM cannot inline that into itself."""
    options = JIT_OPTIONS
    if getattr(clone, "_lw_versioned", False) and _inlinable(fn):
        options = dict(JIT_OPTIONS, forceinline=True)
    return _compiled(fn, clone, numba.njit(**options))


def _compiled(fn, clone, decorator):
    """``decorator(clone)``, with ``fn``'s calls to itself bound to the result."""
    return _bind_self(fn, clone, decorator(clone))


def _cached(table, fn, make):
    """One compiled variant per (function, vector-math setting, fingerprint).

    The fingerprint is part of the key because a compiled variant freezes the
    globals it read: after ``G = 2`` a lane reading ``G`` needs a new one (the
    old one kept computing with ``G = 1`` while its kernel was stored under the
    new key).  A lane that cannot be fingerprinted gets a new variant each time.
    """
    variants = table.get(fn)
    if variants is None:
        variants = table[fn] = {}
    key = (config.vector_math, fingerprint(fn))
    if key[1] is not None and key in variants:
        return variants[key]
    building = _BUILDING.__dict__.setdefault("made", set())
    marker = (id(table), id(fn))
    if marker in building:
        raise LaneCompileError(
            f"{getattr(fn, '__qualname__', fn)} ({function_location(fn)}) calls itself through another "
            "function (mutual recursion); compiled lanes support a function calling itself directly, "
            "not through a chain of helpers")
    building.add(marker)
    try:
        made = make()
    finally:
        building.discard(marker)
    if key[1] is not None:
        variants[key] = made
    return made


#: Per thread, the (table, function) pairs whose compiled variant this thread is
#: making: a second request in the same thread is mutual recursion (Python would
#: recurse forever); another thread building the same lane is not.
_BUILDING = threading.local()


def inlined_lane(fn: Callable) -> Dispatcher:
    """Like :func:`jit_lane`, but inlined into the kernel by Numba itself.

    LLVM declines to inline a large lane (20 Philox rounds, say), and a call
    in the innermost loop stops it vectorising: inlined, such a lane ran 7x
    faster.  Only the lane itself is forced; its helpers stay LLVM's choice.
    """
    fn = python_function(fn)
    if not _inlinable(fn):
        return jit_lane(fn)
    return _cached(_inlined, fn, lambda: _compiled(fn, _rebind(fn), numba.njit(inline="always", **JIT_OPTIONS)))


def typing_lane(fn: Callable) -> Dispatcher:
    """``fn`` as :func:`inlined_lane` makes it, but with its small helpers inlined too,
    also those that subscript (:func:`jit_helper` compiles them, for their own bounds
    checks): for typing alone, which then compiles nothing the kernel may never run
    (the SPMD path runs the lane's W-wide form, helpers inlined there: equivalent
    sources' helper cost 0.19 s of its cold call).  Large helpers are compiled: Numba's
    IR inliner on them took seconds (a normal quantile's typing 1.2 s -> 5 s)."""
    fn = python_function(fn)
    if not isinstance(fn, types.FunctionType) or not _inlinable(fn):
        return jit_lane(fn)
    return _cached(_typing, fn, lambda: _compiled(fn, _rebind(fn, helper=_typing_helper),
                                                  numba.njit(inline="always", **JIT_OPTIONS)))


_typing: "weakref.WeakKeyDictionary[Callable, Dispatcher]" = weakref.WeakKeyDictionary()


def _typing_helper(fn: Callable) -> Dispatcher:
    """A helper as :func:`typing_lane`'s lane calls it: a small one is typed as
    :func:`typing_lane` makes it, so the helpers it calls are inlined too (equivalent
    sources' lane -> Green's function -> distance, which subscripts: compiled for
    typing alone, 0.14 s of a 1.5 s cold call)."""
    code = getattr(fn, "__code__", None)
    if code is None or _star_calls(code) or not _small(code):
        return jit_helper(fn)
    return typing_lane(fn)


def _inlinable(fn: types.FunctionType) -> bool:
    """Whether Numba's inliner takes ``fn``: not when it calls itself (recursion), nor
    when it takes ``*args`` ("Stararg not supported in inliner"), nor when more than
    :data:`CALL_LIMIT` of its parameters are positional-only: a call passing them all
    is a ``*args`` call (issue 42), which the inliner rejects, and the kernels cannot
    pass them by keyword (codegen.common.call)."""
    recursive = fn.__name__ in _global_loads(fn.__code__) and fn.__globals__.get(fn.__name__) is fn
    code = fn.__code__
    return not recursive and not code.co_flags & inspect.CO_VARARGS and code.co_posonlyargcount <= CALL_LIMIT


#: Helpers of at most this many bytecode instructions are inlined by Numba
#: into the lane that calls them (larger ones stay LLVM's choice).  A cumulative
#: normal around ``exp`` (about 60) left to LLVM was not inlined once lanemath
#: was inlined into it, and the lane loop ran scalar: 0 packed instructions
#: instead of 68, 3.7x slower.
HELPER_INLINE_LIMIT = 200


def jit_helper(fn: Callable) -> Dispatcher:
    """A helper a lane calls, compiled: inlined by Numba into its caller when it is
    small and never subscripts anything (its caller's bounds checks are decided
    by the caller's own code, :func:`indexes`), else as :func:`jit_lane`.  A helper
    that calls with ``*args`` is compiled, not inlined (:func:`_star_calls`)."""
    code = getattr(fn, "__code__", None)
    if code is None or indexes(fn) or _star_calls(code) or not _small(code):
        return jit_lane(fn)
    return inlined_lane(fn)


def _small(code) -> bool:
    """Whether a helper's code is small enough to inline (:data:`HELPER_INLINE_LIMIT`)."""
    return sum(1 for _ in dis.get_instructions(code)) <= HELPER_INLINE_LIMIT


_cuda_jitted: "weakref.WeakKeyDictionary[Callable, Any]" = weakref.WeakKeyDictionary()

#: id(value) -> its replacement in a CUDA lane's globals (filled by backends.cuda:
#: NumPy and the ufuncs numba-cuda cannot lower, by device versions).
CUDA_SUBSTITUTES: dict[int, Any] = {}


def jit_lane_cuda(fn: Callable):
    """The numba-cuda counterpart of :func:`jit_lane`: a device function for ``fn``
    whose helpers (plain functions, and CPU ``njit`` dispatchers, recompiled from
    their Python source) are device functions too.  Under numba-cuda's simulator,
    ``fn`` itself (the simulator runs Python).  Imports ``numba.cuda``."""
    from numba import cuda

    fn = python_function(fn)
    if not isinstance(fn, types.FunctionType):
        return fn  # already a device function (or something numba-cuda types itself)
    if cuda.config.ENABLE_CUDASIM:
        return fn  # the simulator runs lanes as the Python they are
    return _cached(_cuda_jitted, fn, lambda: _compiled(fn, _rebind(fn, jit_lane_cuda),
                                                       cuda.jit(device=True, forceinline=True)))


def _rebind(fn: types.FunctionType, jit: Callable = jit_lane, helper: Callable | None = None) -> types.FunctionType:
    """A copy of ``fn`` whose plain-Python callees are replaced by ``jit(callee)``
    (for the cuda target, CPU dispatchers too); on the CPU by ``helper(callee)``,
    :func:`jit_helper` unless given."""
    lane = build.function_ir(fn)  # built once for both checks (from bytecode where there is no trustworthy source)
    unsupported.check(fn, lane)  # Python Numba cannot compile: named, with what to write instead
    refusals.check(fn, lane)  # Python that would compile to a wrong or irreproducible result
    _register_operators()
    retarget = jit is not jit_lane
    new_globals = dict(fn.__globals__)
    # The CPU: indirect reads a[b[k]] in loops prefetched ahead, loops reading a[k + c]
    # versioned (one range test at entry instead of a bounds check per read); the
    # names the rewritten code reads are rebound below as the user's are.  A GPU: reads of
    # locals that may be unbound and subscripts checked (a failing check fails the lane).
    rewrite = versioning.rewritten(fn) if not retarget else versioning.checked_for_gpu(fn)
    code = fn.__code__ if rewrite is None else rewrite.code
    if rewrite is not None:
        new_globals.update(rewrite.globals)
    names = code_names(code)
    if not retarget:
        # The CPU: small helpers are inlined into the lane, unless the lane calls
        # with *args (what it calls that way cannot be inlined: _star_calls).
        jit = jit_lane if _star_calls(fn.__code__) else (helper or jit_helper)
    # Only names the code loads as globals are callees: ``sqrt`` in ``np.sqrt(x)`` is an
    # attribute, and rebinding the global of that name (a helper *called* sqrt) recursed
    # forever.  A function calling itself is bound to its own dispatcher (_bind_self).
    for name in _global_loads(code):
        value = new_globals.get(name)
        if value is fn:
            continue
        if retarget and id(value) in CUDA_SUBSTITUTES:
            new_globals[name] = CUDA_SUBSTITUTES[id(value)]
        elif _is_plain_function(value) or (retarget and isinstance(value, Dispatcher)):
            new_globals[name] = jit(value)
        elif _is_user_module(value):
            new_globals[name] = _with_jitted_helpers(value, names, jit, retarget)
        elif not retarget and name in new_globals:
            new_globals[name] = _stand_in(value)
        elif not retarget and (corrected := _corrected_builtin(name)) is not None:
            new_globals[name] = corrected  # a global shadows the builtin: round(n)
    closure = fn.__closure__
    if rewrite is not None:
        closure = versioning.closure_for(code, fn)
        new_globals.update(versioning.GLOBALS)
    if closure:
        closure = tuple(_rebind_cell(c, jit, retarget) for c in closure)
    clone = types.FunctionType(code, new_globals, fn.__name__, fn.__defaults__, closure)
    clone.__kwdefaults__ = fn.__kwdefaults__
    clone.__qualname__ = fn.__qualname__
    clone._lw_original = fn  # lane transformations (lw.jvp inside a lane) work on the user's function
    clone._lw_versioned = rewrite is not None and rewrite.versioned
    # Numba records a function's module by name and re-imports it when it loads
    # cached code; functions from unimportable places get a stand-in module.
    clone.__module__ = fn.__module__ if inspect.getmodule(fn) is not None else _STANDIN.__name__
    return clone


def _register_operators() -> None:
    """lanemath registers Numba typing and implementations of operators (exact integer
    powers, NumPy's complex division, uint64 with signed integers): they must be in place
    before a lane is typed, also a lane that names no math function (whose stand-ins
    would import lanemath)."""
    from .. import lanemath  # noqa: F401  (imported on first use: 0.1 s, paid by a compile only)


def _is_user_module(value) -> bool:
    return isinstance(value, types.ModuleType) and value.__name__.split(".")[0] not in PINNED_MODULES


def _with_jitted_helpers(module: types.ModuleType, names, jit: Callable, retarget: bool) -> types.ModuleType:
    """A stand-in for a user module whose plain functions among ``names`` are
    ``jit(function)``: a lane may call ``helpers.f(x)`` as it calls ``f(x)``
    (Numba compiles only jitted callees).  Other attributes are the module's."""
    attrs = vars(module)
    swap = {n: attrs[n] for n in names if n in attrs
            and (_is_plain_function(attrs[n]) or (retarget and isinstance(attrs[n], Dispatcher)))}
    if not swap:
        return module
    stand_in = types.ModuleType(module.__name__, module.__doc__)
    stand_in.__dict__.update(attrs)
    stand_in.__dict__.update({n: jit(v) for n, v in swap.items()})
    return stand_in


def _rebind_cell(cell: types.CellType, jit: Callable = jit_lane, retarget: bool = False) -> types.CellType:
    try:
        value = cell.cell_contents
    except ValueError:  # an empty cell (variable not yet bound): leave as is
        return cell
    if _is_plain_function(value) or (retarget and isinstance(value, Dispatcher)):
        return types.CellType(jit(value))
    stand_in = _stand_in(value) if not retarget else value
    if stand_in is not value:
        return types.CellType(stand_in)
    return cell


def _corrected_builtin(name: str):
    """lanemath's replacement for the builtin ``name`` (``round``: Numba's rounds an
    integer through a float), or None."""
    value = getattr(builtins, name, None)
    stand_in = _stand_in(value) if value is not None else None
    return stand_in if stand_in is not value else None


def _stand_in(value):
    """lanemath's stand-in for ``math``/``numpy`` (or one of their functions); with
    vector math off, only the stand-ins that correct Numba (``np.sign`` of unsigned
    integers: lanemath.integers)."""
    from .. import lanemath  # imported on first use: it registers many overloads

    return lanemath.replacement(value) if config.vector_math else lanemath.corrected(value)


def _is_plain_function(value: Any) -> bool:
    # Functions lanewise implements for Numba itself (via @overload) stay as they are.
    return isinstance(value, types.FunctionType) and not getattr(value, "_lw_intrinsic", False)


def _global_loads(code: types.CodeType) -> set[str]:
    """Names ``code`` (and the code nested in it) reads as globals."""
    names = {i.argval for i in dis.get_instructions(code) if i.opname in ("LOAD_GLOBAL", "LOAD_NAME")}
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _global_loads(const)
    return names


def _bind_self(fn: types.FunctionType, clone: types.FunctionType, dispatcher):
    """A recursive lane (``fib`` calling ``fib``) calls its own compiled version."""
    for name in _global_loads(fn.__code__):
        if fn.__globals__.get(name) is fn:
            clone.__globals__[name] = dispatcher
    return dispatcher


# --------------------------------------------------------------------------- may raise


def may_raise(fn: Callable) -> bool:
    """Can ``fn`` (or anything it calls) raise at run time? Conservative.

    An inlined lane is fast but Numba lets a ``raise`` inlined into a ``try``
    escape it, and kernels rely on ``try`` to report failing lanes: only lanes
    with no ``raise``/``assert`` in their own source or their helpers' are
    inlined.  lanewise's own functions are trusted unless marked
    ``_lw_may_raise`` (``lw.scan`` is: it checks lengths).
    """
    return _may_raise(python_function(fn), set())


def _may_raise(fn, seen: set[int]) -> bool:
    if id(fn) in seen:
        return False
    seen.add(id(fn))
    if getattr(fn, "_lw_may_raise", False):
        return True
    if (getattr(fn, "__module__", None) or "").startswith("lanewise") or not isinstance(fn, types.FunctionType):
        return False
    lane = build.function_ir(fn)
    if lane.source == "bytecode":  # no trustworthy source: assume it may
        return True
    if any(isinstance(node, (ir.Raise, ir.Assert)) for node, _ in refusals.walk(lane)):
        return True
    if unbound.has_checks(unbound.checked(lane)):  # a read that may be unbound raises (ir.passes.unbound)
        return True
    return any(_value_may_raise(v, seen) for v in _referenced(fn) + _decorators_referenced(fn, lane))


#: Instructions that read a name, and those that read an attribute of what is on the stack.
_NAME_LOADS = frozenset({"LOAD_GLOBAL", "LOAD_NAME", "LOAD_DEREF", "LOAD_CLASSDEREF", "LOAD_FAST", "LOAD_CLOSURE",
                         "LOAD_FAST_CHECK", "LOAD_FAST_AND_CLEAR", "LOAD_FAST_LOAD_FAST"})
_ATTRIBUTES = frozenset({"LOAD_ATTR", "LOAD_METHOD", "STORE_ATTR", "DELETE_ATTR"})
_GLOBALS = frozenset({"LOAD_GLOBAL", "LOAD_NAME", "STORE_GLOBAL", "DELETE_GLOBAL"})


def _referenced(fn) -> list:
    """Objects ``fn`` reaches by global name, closure, or attribute chains on them (the
    objects its own names are bound to outside it, locals' names included, as a reader of
    the source would look them up), from its code and the code nested in it."""
    scope = _scope(fn)
    found = []
    for code in (fn.__code__, *refusals.nested_codes(fn.__code__)):
        names = set(code.co_varnames) | set(code.co_cellvars) | set(code.co_freevars)
        value = None  # the value an attribute chain has reached
        for instr in dis.get_instructions(code):
            if instr.opname in _ATTRIBUTES and value is not None:
                value = getattr(value, instr.argval, None)
                found.append(value)
                continue
            value = None
            # 3.13's LOAD_FAST_LOAD_FAST reads two names (argval: their tuple); a chain
            # of attributes starts at the second, the one left on top of the stack
            name = instr.argval[-1] if isinstance(instr.argval, tuple) else instr.argval
            if instr.opname in _NAME_LOADS and isinstance(name, str) and name in scope:
                value = scope[name]
            if instr.opname in _GLOBALS:
                names.add(instr.argval)
        found += [scope[n] for n in sorted(names) if n in scope]
    return found


def _scope(fn) -> dict:
    """The values ``fn``'s free names are bound to: its closure cells, globals and builtins."""
    scope = dict(builtins.__dict__)
    scope.update(fn.__globals__)
    for name, cell in zip(fn.__code__.co_freevars, fn.__closure__ or (), strict=True):
        try:
            scope[name] = cell.cell_contents
        except ValueError:
            pass
    return scope


def _decorators_referenced(fn, lane: ir.Function) -> list:
    """Objects the decorators above ``fn``'s ``def`` name (``numba.njit``: each dotted
    name and its prefixes), read from their lines.  They run once, in Python, but what
    they name counted as the function's (a helper decorated ``@numba.njit`` may raise,
    and is not inlined), as it did when the check read the source."""
    first = fn.__code__.co_firstlineno
    text = source_text(fn) if first < lane.loc.line else None  # the def is below its decorators
    if text is None:
        return []
    lines = iter(text.splitlines(True)[first - 1:lane.loc.line - 1])
    scope = _scope(fn)
    try:
        tokens = list(tokenize.generate_tokens(lambda: next(lines, "")))
    except (tokenize.TokenError, SyntaxError):
        return []
    found, chain = [], []
    for k, tok in enumerate(tokens):
        after = tokens[k + 1].string if k + 1 < len(tokens) else ""
        if tok.type != tokenize.NAME or keyword.iskeyword(tok.string) or after == "=":  # not a name (cache=)
            chain = chain if tok.string == "." else []
            continue
        chain = [*chain, tok.string] if chain and tokens[k - 1].string == "." else [tok.string]
        if chain[0] in scope:
            value = scope[chain[0]]
            for attr in chain[1:]:
                value = getattr(value, attr, None)
            found.append(value)
    return found


_SAFE_MODULES = ("math", "cmath")


def _value_may_raise(value, seen) -> bool:
    if isinstance(value, Dispatcher):
        value = value.py_func
    if isinstance(value, types.FunctionType):
        return _may_raise(value, seen)
    if isinstance(value, (types.ModuleType, type, np.ufunc)) or value is None:
        return False
    if isinstance(value, types.BuiltinFunctionType):
        module = getattr(value, "__module__", None) or ""
        return not (module in _SAFE_MODULES or module == "builtins")
    return False
