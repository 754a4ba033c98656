"""Host-side pieces every compiled backend shares: one copy each.

* :func:`disk_key` and :func:`build_module` — the cached-build pipeline
  (fingerprint -> key -> lookup -> render -> store -> load) of a generated module;
* :func:`check_out` — ``out=`` validation;
* :func:`replay_lane`, :func:`lane_exception`, :func:`where` and
  :func:`shape_changed` — turning "lane
  ``index`` failed" (kernels report only which lane) into the lane's own
  exception, or the one error class for a per-lane array whose shape varies.

Example:
    >>> where((3, 4))
    'i0=3, i1=4'
"""

from __future__ import annotations

import linecache
import traceback
import weakref
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any, Callable

import numpy as np
from numba.core.errors import NumbaError

from .. import pytree
from ..config import config
from ..errors import LaneIndexError, LanewiseError, LaneTypeError, OutputError, function_location
from ..plan.program import Call, Program, lane_arguments, make_program
from ..lane.dependence import check_unmapped_outputs, unused_parameters
from ..plan.schedule import lane_work
from ..lane.fingerprint import fingerprint
from ..lane.lanefn import has_loops, jit_lane
from ..lane.scanning import reference_mode
from ..runtime import cache


# ----------------------------------------------------------------------------- programs


def program(call: Call, result, stored: dict | None = None) -> Program:
    """``call``'s program once the lane's result type is known, checked: an output with
    ``out_axes=None`` must not depend on the arguments mapped at that level.

    ``stored``: the lane's dependence answers kept with a cached kernel
    (:func:`program_and_answers`), under a key that covers the lane's code, helpers and
    globals (its fingerprint) and ``call``'s signature: a process that finds the kernel
    on disk builds no lane IR, and the ``out_axes`` check, which the same lane and
    signature passed before the kernel was stored, is not repeated."""
    if stored is None:
        return program_and_answers(call, result)[0]
    return make_program(call, result, lambda path: stored[path] if path in stored
                        else unused_parameters(call.lane, path))


def program_and_answers(call: Call, result) -> tuple[Program, dict]:
    """:func:`program`, checked, and the dependence answers it asked for (the unused
    parameters per output path): what a cached kernel keeps for :func:`program`'s
    ``stored``.

    Example:
        >>> import numpy as np, lanewise as lw
        >>> from lanewise.plan.program import ResultLeaf, bind_call
        >>> call = bind_call(lw.vmap(lambda a, k: a * 3.0, in_axes=(0, None)),
        ...                  (np.ones(2, np.float32), np.int64(2)), {})
        >>> built, answers = program_and_answers(call, ResultLeaf(np.dtype("float64"), 0))
        >>> answers, built.outputs[0].dtype  # k is not computed with: float32 stays float32
        ({(): frozenset({'k'})}, dtype('float32'))
    """
    answers: dict = {}

    def unused(path):
        answers[path] = found = unused_parameters(call.lane, path)
        return found

    built = make_program(call, result, unused)
    check_unmapped_outputs(built)
    return built, answers


# ----------------------------------------------------------------------------- cached build


def token(kind: str, functions, *parts) -> str | None:
    """A name for code generated from ``functions`` (lanes, Monoid combines) and
    ``parts`` (signature, spec, options): equal exactly when they are; None when
    a function cannot be fingerprinted."""
    prints = [fingerprint(f) for f in functions]
    if any(p is None for p in prints):
        return None
    return cache.key_of(kind, *prints, *parts)


def program_work(program: Program, values, sizes) -> int:
    """:func:`lane_work` of ``program``'s lanes on ``values`` (arrays passed whole
    count when the lane loops): what every backend blocks by, so they agree."""
    return lane_work(program.signature.leaves, values, sizes, loops=_loops(program.lane))


def may_be_heavy(program: Program) -> bool:
    """Whether a shape-based estimate may miss the cost of ``program``'s lanes (the
    CPU backend times their first lanes then): the lane loops, or receives arrays."""
    return _loops(program.lane) or any(leaf.is_array and leaf.lane_ndim for leaf in program.signature.leaves)


#: Whether a lane loops, per lane function: reading its bytecode again on every
#: call cost 100 us of a 65,536-lane launch.
_LOOPING: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def _loops(lane) -> bool:
    try:
        return _LOOPING[lane]
    except KeyError:
        _LOOPING[lane] = found = has_loops(lane)
        return found
    except TypeError:  # not weakly referenceable: asked each time
        return has_loops(lane)


def disk_key(kind: str, functions, *parts) -> str | None:
    """The disk-cache key of a module (:func:`token`); None keeps it in memory:
    the disk cache is off, or a function cannot be fingerprinted."""
    return token(kind, functions, *parts) if config.disk_cache else None


@dataclass
class Built:
    """A generated module, loaded: its source, file (None: in memory) and metadata."""

    module: ModuleType
    source: str
    path: Any
    meta: Any
    from_disk: bool


@dataclass(frozen=True)
class Deferred:
    """A global of a generated module that only a compile needs (a lane's dispatcher).

    Making one re-analyses the lane and each helper it calls (0.1-0.3 s for a lane
    with 40 helpers), and a module whose object code Numba's disk cache holds never
    looks at it: :func:`build_module` leaves it out of a module found on disk, and
    :func:`complete` puts it in before anything compiles there.
    """

    make: Callable[[], Any]


def build_module(kind: str, key: str | None, render: Callable[[], tuple[str, Any]],
                 inject: Callable[[Any], dict]) -> Built:
    """Find ``key``'s module on disk, or ``render()`` its (source, metadata) and store
    it; then load it with the globals ``inject(metadata)`` (lanes, classes).

    A :class:`Deferred` global is made now for a new module, and only when needed
    (:func:`complete`) for one found on disk.  ``config.debug`` prints every module
    as it is loaded."""
    found = cache.lookup(key) if key else None
    if found is not None:
        path, source, meta = found
    else:
        source, meta = render()
        path = cache.store(key, source, meta) if key else None
    if config.debug:
        print(f"# ---- lanewise {kind} ({path or 'in memory'})\n{source}")
    name, names = module_name(kind, key) or f"lw_{kind.replace(' ', '_')}_{id(source)}", inject(meta)
    if found is None or path is None:
        resolve(names)
    try:
        module = cache.load_module(name, path, source, ready(names))
    except OSError:  # the cache was deleted or cannot be read meanwhile: in memory
        resolve(names)
        path, module = None, cache.load_module(name, None, source, names)
    return Built(module, source, path, meta, found is not None)


def module_name(kind: str, key: str | None) -> str | None:
    """The name under which :func:`build_module` registers ``key``'s module (None
    without a key: an in-memory module is not registered)."""
    return f"lw_{kind.replace(' ', '_')}_{key}" if key else None


def resolve(names: dict) -> dict:
    """Make every :class:`Deferred` value of ``names``, in place; return ``names``."""
    for k, v in names.items():
        if isinstance(v, Deferred):
            names[k] = v.make()
    return names


def ready(names: dict) -> dict:
    """The values of ``names`` that are already made."""
    return {k: v for k, v in names.items() if not isinstance(v, Deferred)}


def complete(exe) -> bool:
    """Reload ``exe.module`` with the :class:`Deferred` globals of ``exe.inject`` made;
    whether there were any (a compile failed for want of them: try again).

    Reloaded, not patched: Numba remembers a failed compile of each function for
    its argument types, and only new dispatchers forget it."""
    if not any(isinstance(v, Deferred) for v in exe.inject.values()):
        return False
    resolve(exe.inject)
    try:
        exe.module = cache.load_module(exe.module.__name__, exe.path, exe.source, exe.inject)
    except OSError:
        exe.path, exe.module = None, cache.load_module(exe.module.__name__, None, exe.source, exe.inject)
    return True


def call_kernel(exe, name: str, *args):
    """Call kernel ``name`` of ``exe.module``, surviving faults of the disk cache.

    ``exe`` has ``module``, ``path``, ``source``, ``inject`` and ``reloaded``.  A
    module found on disk gets its :class:`Deferred` globals when a compile asks for
    them (:func:`complete`).  If
    Numba's cached object code will not load (corrupt files), it is dropped and
    the module reloaded, once; if Numba cannot write its cache (a full disk, a
    file-size limit, the folder deleted), the module is loaded in memory, where
    nothing is written.  A cache fault costs speed, never a result or an error.
    Numba's own compile errors pass through (the caller retells them).
    """
    try:
        return getattr(exe.module, name)(*args)
    except NumbaError:
        # A module found on disk lacks its Deferred globals, which only a compile
        # needs (Numba's cache missed: a new array layout, object code deleted).
        if not complete(exe):
            raise
        return getattr(exe.module, name)(*args)
    except Exception:
        if exe.path is None or exe.reloaded:
            raise
    exe.reloaded = True
    resolve(exe.inject)
    cache.discard_object_code(exe.path)
    try:
        exe.module = cache.load_module(exe.module.__name__, exe.path, exe.source, exe.inject)
        return getattr(exe.module, name)(*args)
    except OSError:
        pass
    exe.path = None
    exe.module = cache.load_module(exe.module.__name__, None, exe.source, exe.inject)
    return getattr(exe.module, name)(*args)


# ----------------------------------------------------------------------------- out=


def check_out(program: Program, shapes, out, is_device: Callable[[Any], bool] = lambda leaf: False) -> list:
    """The leaves of a user's ``out=`` pytree, checked against the lanes' outputs.

    Each must be an array (host, or ``is_device``) of the output's shape and
    dtype; host arrays must be writeable.  Raises :class:`lanewise.OutputError`.
    """
    leaves, tree = pytree.flatten(out)
    if tree != program.out_tree:
        raise OutputError(f"out= has structure {tree} but the lanes produce {program.out_tree}")
    for leaf, shape, o in zip(leaves, shapes, program.outputs, strict=True):
        array = isinstance(leaf, np.ndarray) or is_device(leaf)
        got = (np.dtype(leaf.dtype), tuple(leaf.shape)) if array else None
        if got != (o.dtype, tuple(shape)):
            text = f"{got[0]}{list(got[1])}" if got else type(leaf).__name__
            raise OutputError(f"out= for {o.name} must be a {o.dtype}{list(shape)} array, got {text}")
        if isinstance(leaf, np.ndarray) and not leaf.flags.writeable:
            raise OutputError(f"out= for {o.name} is read-only")
    return leaves


# ----------------------------------------------------------------------------- failed lanes


def where(index) -> str:
    """A lane's index as users read it: ``i0=3, i1=4`` (outermost level first)."""
    return ", ".join(f"i{lv}={i}" for lv, i in enumerate(index))


def replay_lane(call: Call, index: tuple[int, ...], raise_anyway: bool = True):
    """Run lane ``index`` alone (compiled) to re-raise its exception with a note.

    Kernels report only *which* lane failed; the exception itself comes from
    running that lane again, which is deterministic.  Returns the lane's result
    when it does not raise and ``raise_anyway`` is False.
    """
    args, kwargs = lane_arguments(call.signature, call.values, index)
    try:
        result = jit_lane(call.lane)(*args, **kwargs)
    except Exception as e:
        error = lane_exception(_as_python_raises(call.lane, args, kwargs, e), call.lane, index)
        if error is e:
            raise
        raise error from None
    if raise_anyway:
        raise LanewiseError(f"lane ({where(index)}) failed inside the compiled kernel but not when replayed")
    return result


def lane_exception(error: Exception, lane, index) -> Exception:
    """``error``, raised by lane ``index``, as every backend reports it: noted
    with the lane, and an ``IndexError`` as :class:`LaneIndexError` naming the
    lane's function and file."""
    name = getattr(lane, "__qualname__", lane)
    if isinstance(error, IndexError) and not isinstance(error, LanewiseError):
        wrapped = LaneIndexError(f"{error} (lane {where(index)} of {name}, {_raised_at(error, lane)})")
        wrapped.__cause__ = error
        return wrapped
    error.add_note(f"raised by lane ({where(index)}) of {name} (level indices, outermost first)")
    return error


def _raised_at(error: Exception, lane) -> str:
    """``file:line: source`` of the innermost frame of ``error`` outside lanewise
    (the user's line that raised), else where ``lane`` is defined."""
    frames = [f for f in traceback.extract_tb(error.__traceback__) if not f.filename.startswith(_PACKAGE)]
    if not frames:
        return function_location(lane)
    last = frames[-1]
    if last.filename.startswith("<lanewise"):  # a derivative's generated code: the user's line behind it
        from ..lane.ir.lines import user_line
        from ..lane.ir import nodes as ir

        at = user_line(ir.Loc(last.filename, last.lineno, 0))
        path, number = at.rsplit(":", 1)
        text = linecache.getline(path, int(number)).strip()
        return at + (f": {text}" if text else "")
    return f"{last.filename}:{last.lineno}" + (f": {last.line.strip()}" if last.line else "")


_PACKAGE = str(Path(__file__).resolve().parents[1])


def _as_python_raises(lane, args, kwargs, compiled: Exception) -> Exception:
    """The exception the lane raises when run as Python, if it is of the compiled
    one's type: its message is Python's (a compiled f-string message would read
    ``<object type:float64>``).  Otherwise the compiled exception."""
    try:
        with np.errstate(all="ignore"), reference_mode():
            lane(*args, **kwargs)
    except type(compiled) as e:
        return e
    except Exception:  # noqa: BLE001 - Python disagrees: the compiled exception stands
        return compiled
    return compiled


def shape_changed(index, name: str, got, want) -> LaneTypeError:
    """The error for a per-lane array output whose shape differs from lane 0's (every backend)."""
    return LaneTypeError(f"lane ({where(index)}) returned {name} of shape {got}, but lane 0 "
                         f"returned shape {want}; per-lane arrays must have one shape")


def at_path(value, path):
    """The leaf of a lane's (nested tuple) result at ``path``."""
    for i in path:
        value = value[i]
    return value
