"""The public transformations: ``vmap``, ``map`` (jax.lax.map) and ``explain``.

Example:
    >>> import math, numpy as np, lanewise as lw
    >>> def f(x, y):
    ...     r = x * x + y * y
    ...     return math.cos(r) / (1 + r)
    >>> grid = lw.vmap(lw.vmap(f, in_axes=(None, 0)), in_axes=(0, None))
    >>> grid(np.linspace(-2, 2, 4), np.linspace(-2, 2, 5)).shape
    (4, 5)
"""

from __future__ import annotations

import functools
from typing import Any, Callable

import numpy as np

from . import backends, progress
from .config import config
from .errors import AxisSpecError, LaneCompileError, LaneTypeError
from .plan.program import in_axes_without, unwrap_nest
from .lane.callables import as_lane_function, bind_arguments
from .lane.watch import watch
from .reducing import Reduced
from .runtime import interop

#: What a fast-path launcher returns when it cannot handle a call (types, sizes).
MISS = object()


def vmap(fun: Callable, in_axes: Any = 0, out_axes: Any = 0, *, axis_size: int | None = None,
         backend: str | None = None, progress: bool = False) -> "Mapped":
    """Map ``fun`` over an axis of its arguments, with :func:`jax.vmap`'s semantics.

    ``fun`` computes one lane in plain Python (``if``/``for``/``while``/``break``,
    early ``return``, helper calls, math).  Nested ``vmap`` s compose into one
    compiled loop nest; nothing intermediate is materialised.

    Args:
      fun: the lane function, or another ``vmap`` of one.
      in_axes: int, None, or a pytree prefix of the positional arguments whose
        leaves are ints (axis to map; negative counts from the end) or None
        (pass whole).  Keyword arguments are mapped over axis 0.
      out_axes: int, None or pytree prefix of the output: where the mapped axis
        goes.  None is allowed only for outputs that do not depend on it.
      axis_size: the number of lanes when no argument is mapped.
      backend: ``"cpu"`` (default: Numba, all cores), ``"cuda"`` (numba-cuda; also
        chosen when an argument is a CUDA device array), ``"tpu"`` (Pallas; JAX),
        ``"auto"`` (``"tpu"`` where JAX's default device is a TPU and the call's
        lane qualifies, else ``"cpu"``; ``lw.explain`` says which and why) or
        ``"python"`` (the reference).  The outermost ``vmap``'s backend runs the whole nest.
      progress: show a progress bar (tqdm, the ``[progress]`` extra) for a long
        CPU run: the outermost loop level runs in about 100 pieces, each a
        launch of the same kernel into views of the outputs (same bits).
        Set it on the outermost ``vmap``.

    Returns:
      A callable; ``mapped(*args, out=None, **kwargs)``.  ``out=`` (a pytree of
      arrays matching the result) receives the result instead of new arrays.

    Example:
      >>> import numpy as np, lanewise as lw
      >>> def first_above(row, t):
      ...     for i in range(row.shape[0]):
      ...         if row[i] > t:
      ...             return i
      ...     return -1
      >>> lw.vmap(first_above, in_axes=(0, None))(np.array([[0, 5], [9, 0], [0, 0]]), 4)
      array([ 1,  0, -1])
    """
    return Mapped(fun, in_axes, out_axes, axis_size, backend, progress)


def map(f: Callable, xs: Any):  # noqa: A001 - jax.lax.map's name
    """``jax.lax.map``: ``f`` applied to each slice of ``xs`` along its leading axis, stacked.

    The same result as ``lw.scan(lambda c, x: (c, f(x)), None, xs)[1]``; the
    slices are independent, so it runs as ``lw.vmap(f)(xs)`` (one compiled,
    parallel loop).  ``xs`` may be a pytree of arrays with one leading size.

    Example:
      >>> import numpy as np, lanewise as lw
      >>> lw.map(lambda row: row.sum(), np.arange(6.0).reshape(3, 2))
      array([1., 5., 9.])
    """
    return vmap(f)(xs)


class Mapped:
    """A function mapped by :func:`vmap` (call it like the original).

    Example:
      >>> import numpy as np, lanewise as lw
      >>> double = lw.vmap(lambda x: 2 * x)
      >>> double(np.arange(3.0), out=np.empty(3))
      array([0., 2., 4.])
    """

    _lw_vmap_spec = True

    def __init__(self, fun, in_axes, out_axes, axis_size, backend, progress=False):
        if not callable(fun):
            raise TypeError(f"vmap expects a callable lane function, got {type(fun).__name__}")
        if axis_size is not None and (not isinstance(axis_size, int) or axis_size < 0):
            raise AxisSpecError(f"axis_size must be a non-negative int, got {axis_size!r}")
        backends.check(backend)  # fail early on a typo
        if not getattr(fun, "_lw_vmap_spec", False):
            fun = as_lane_function(fun)  # builtins, ufuncs, functools.partial: a generated Python lane
        self.fun, self.in_axes, self.out_axes = fun, in_axes, out_axes
        self.axis_size, self.backend, self.progress = axis_size, backend, bool(progress)
        self._executables: dict = {}
        self._launchers: dict = {}  # fast path: argument types -> generated launcher
        self._last = _miss
        self._fast_backend = None  # the backend the kept launchers run on
        self._watch = None  # what the kept executables froze (lane.watch); None: nothing
        self._derived: dict = {}  # functions passed as arguments -> the nest with them bound
        functools.update_wrapper(self, unwrap_nest(fun)[0], updated=())

    def __repr__(self) -> str:
        return f"vmap({self.fun!r}, in_axes={self.in_axes!r}, out_axes={self.out_axes!r})"

    def __call__(self, *args, out=None, **kwargs):
        if any(callable(a) for a in args):  # functions passed unmapped: constants of a derived lane
            mapped, args = self._with_functions(args)
            return mapped(*args, out=out, **kwargs)
        if self._watch is not None and self._watch.changed():
            self._forget()  # a value the kernels froze changed: build afresh
        chosen = backends.in_effect(self.backend)
        fast = out is None and not kwargs and not self.progress and chosen in backends.FAST
        if fast:
            if chosen != self._fast_backend:  # lw.config.backend (or auto's TPU use) changed: old launchers
                self._launchers.clear()
                self._last, self._fast_backend = _miss, chosen
            # The last launcher checks its argument types itself; others by key.
            result = self._last(args)
            if result is MISS:
                launcher = self._launchers.get(_fast_key(args))
                result = MISS if launcher is None else launcher(args)
            if result is not MISS:
                return result
        if any(getattr(a, "_lw_fuse_proxy", False) for a in args):  # called inside @lw.fuse: fused there
            from .fuse.functions import call_mapped
            return call_mapped(self, args, kwargs)
        # cuda, dask, tpu: device/lazy arrays stay as they are; "auto" chooses per signature
        backend, call = backends.bind(self, self, args, kwargs, self.backend, out)
        exe = self.executable(backend, call)
        given, out = out, None if out is None else interop.host_out(out)  # torch out=: NumPy views of it
        if self.progress:
            result = progress.run(backend, exe, call, out)
        else:
            result = backend.run(exe, call, out)
        if out is not given:
            return given  # the caller's torch tensors, now filled
        if fast and backend.NAME in backends.FAST:
            launcher = backend.fast_launcher(exe, call, MISS)
            if launcher is not None:
                self._remember(args, call, launcher)
        return interop.to_library(result, call.library) if out is None else result

    def _with_functions(self, args: tuple) -> tuple["Mapped", tuple]:
        """The nest with the functions among ``args`` bound into its lane (kept per
        function, as JAX keeps a trace per static argument), and the other arguments.

        Numba compiles a function as a constant, not as a value that changes from
        call to call: each function gets its own lane (bind_arguments) and kernel."""
        fixed = {k: a for k, a in enumerate(args) if callable(a)}
        rest = tuple(a for k, a in enumerate(args) if k not in fixed)
        key = (len(args), tuple(fixed.items()))
        try:
            derived = self._derived.get(key)
        except TypeError:  # an unhashable callable object: bound afresh
            key, derived = None, None
        if derived is None:
            derived = _bind_functions(self, fixed, len(args))
            if key is not None:
                if len(self._derived) >= MAX_DERIVED:  # a new lambda per call must not pile up kernels
                    self._derived.pop(next(iter(self._derived)))
                self._derived[key] = derived
        return derived, rest

    def _remember(self, args: tuple, call, launcher) -> None:
        """Keep ``launcher`` for the next calls with ``args``' types.  It checks for
        NumPy arrays: for torch/JAX arrays it goes behind a :class:`_Converting`;
        for anything else converted (lists) it would miss on every call, and be
        rebuilt on every call, so it is not kept."""
        if len(args) != len(call.values):
            return
        key, converted = _fast_key(args), [a is not v for a, v in zip(args, call.values, strict=True)]
        if not any(converted):
            self._launchers[key] = self._last = launcher
        elif all(interop.origin(a) in ("torch", "jax") for a, c in zip(args, converted, strict=True) if c):
            wrapper = self._launchers.get(key)
            if not isinstance(wrapper, _Converting):
                wrapper = _Converting(tuple(type(a) for a in args), converted, call.library)
            wrapper.launchers[_fast_key(call.values)] = launcher
            self._launchers[key] = self._last = wrapper

    def executable(self, backend, call):
        """``backend``'s executable for ``call``'s signature (built once, then kept here)."""
        key = (backend.NAME, call.signature)
        exe = self._executables.get(key)
        if exe is None:
            if not self._executables:
                self._watch = watch(call.lane)  # before building: the values it freezes
            exe = self._executables[key] = backend.build(call)
        return exe

    def _forget(self) -> None:
        self._executables.clear()
        self._launchers.clear()
        self._last, self._watch = _miss, None


#: Nests kept per Mapped for the functions passed to it (oldest dropped first).
MAX_DERIVED = 32


def _bind_functions(mapped: Mapped, fixed: dict, nargs: int) -> Mapped:
    """``mapped``'s nest around a lane with ``fixed`` (position -> function) bound."""
    lane, nest = unwrap_nest(mapped)
    per_level = [in_axes_without(m, fixed, nargs) for m in nest]
    fun = bind_arguments(lane, fixed, nargs)
    for m, in_axes in reversed(list(zip(nest, per_level, strict=True))):
        fun = Mapped(fun, in_axes, m.out_axes, m.axis_size, m.backend, m.progress)
    return fun


def _fast_key(args: tuple):
    """Cheap signature of plain array/scalar arguments."""
    return tuple([(a.dtype, a.ndim) if type(a) is np.ndarray else type(a) for a in args])


class _Converting:
    """The fast path for calls with torch or JAX arrays: their NumPy views go to
    the launcher for the views' dtypes and ranks, and the results back to the
    caller's library (a few microseconds, where binding again costs a hundred).

    Example:
      >>> import numpy as np
      >>> conv = _Converting((np.ndarray,), [False], None)
      >>> conv.launchers[_fast_key((np.ones(2),))] = lambda args: args[0] * 2
      >>> conv((np.ones(2),)), conv((1.0,)) is MISS
      (array([2., 2.]), True)
    """

    def __init__(self, types: tuple, converted: list[bool], library: str | None):
        self.types, self.converted, self.library = types, converted, library
        self.launchers: dict = {}  # _fast_key of the NumPy views -> the launcher for them

    def __call__(self, args: tuple):
        if len(args) != len(self.types) or any(type(a) is not t for a, t in zip(args, self.types, strict=True)):
            return MISS  # another call's types: the slow path (or another launcher) serves it
        try:
            host = tuple([interop.as_host_array(a, "argument") if c else a
                          for a, c in zip(args, self.converted, strict=True)])
        except LaneTypeError:
            return MISS  # requires grad, a dtype NumPy lacks: the slow path raises, naming the argument
        launcher = self.launchers.get(_fast_key(host))
        result = MISS if launcher is None else launcher(host)
        return result if result is MISS else interop.to_library(result, self.library)


def _miss(args):
    return MISS


class Explanation(str):
    """The text of :func:`explain`; also carries ``.source`` and ``.program``.

    Example:
      >>> import numpy as np, lanewise as lw
      >>> e = lw.explain(lw.vmap(lambda x: x + 1), np.arange(3.0))
      >>> e.source.count("def kernel(")
      1
    """

    source: str
    program: Any

    def __repr__(self) -> str:
        return str(self)


def explain(fn, *args, **kwargs) -> Explanation:
    """Describe how ``fn(*args, **kwargs)`` runs: lane program, schedule, lane IR, generated source.

    ``fn`` is a function returned by :func:`vmap`, :func:`lanewise.reduce` or
    :func:`lanewise.fuse`.  The description is of the CPU backend's nest,
    whichever backend the function runs on, except for a ``backend="tpu"``
    function (or ``lw.config.backend = "tpu"``): then it is the Pallas kernel's
    (tile shape and grid, how each argument travels, the kernel's masks and loops as
    JAX traces it).  With ``backend="auto"`` a ``backend:`` line says which backend
    the call runs on and why, and the description is that backend's.  Compiles (or
    loads from cache) but does not run the lanes.

    Example:
      >>> import numpy as np, lanewise as lw
      >>> text = lw.explain(lw.vmap(lambda x: 2 * x), np.arange(4.0))
      >>> "loop order" in text
      True
      >>> text.split("lane IR:")[1].splitlines()[1:3]  # the lane as lanewise reads it
      ['  lane <lambda>(x):', '    return mul(2, x)']
    """
    if hasattr(fn, "_lw_explain"):  # @lw.fuse functions describe their own passes
        return fn._lw_explain(*args, **kwargs)
    if not isinstance(fn, (Mapped, Reduced)):
        raise TypeError("explain expects a function returned by lw.vmap or lw.reduce")
    if isinstance(fn, Mapped) and any(callable(a) for a in args):  # the derived lane the call runs
        fn, args = fn._with_functions(args)
    mapped = fn.fun if isinstance(fn, Reduced) else fn
    chosen = backends.auto_choice(fn, mapped, args, kwargs)
    lines = [f"lanewise program: {fn!r}"] + ([chosen.line()] if chosen else [])
    if isinstance(fn, Mapped) and (chosen.name if chosen else fn.backend or config.backend) == "tpu":
        return _explain_tpu(fn, args, kwargs, lines)
    backend = backends.get(backends.EXPLAINED)
    call = backend.bind_call(mapped, args, kwargs)
    try:
        exe = fn.executable(backend, call)
    except LaneCompileError as e:  # explain what can be known without the compiled lane
        return _explanation(lines + _inputs(call) + _not_compiled(call, e), None, call)
    if isinstance(fn, Reduced):
        lines += backend.explain(exe, call) + _describe(exe.program, call)
    else:
        lines += _describe(exe.program, call) + backend.explain(exe, call)
    return _explanation(lines, exe, call)


def _explain_tpu(fn, args, kwargs, head: list[str]) -> Explanation:
    """:func:`explain` of a function that runs on the tpu backend: its Pallas kernel
    (``head``: the lines before its inputs)."""
    backend = backends.get("tpu")
    call = backend.bind_call(fn, args, kwargs)
    exe = fn.executable(backend, call)
    kernel = exe.kernel_text(call)
    lines = [*head, *_inputs(call), *backend.explain(exe, call), *_lane_ir(call.lane),
             "generated kernel (the Pallas kernel as JAX traces it):", kernel]
    text = Explanation("\n".join(lines))
    text.source, text.program = kernel, None
    return text


def _not_compiled(call, error: LaneCompileError) -> list[str]:
    """The lane path a lane that does not compile would have wanted, and why it cannot run."""
    from .spmd import divergence

    why = divergence(call.lane) if callable(call.lane) else None
    wanted = f"SPMD on SIMD would be tried ({why})" if why else "scalar (no divergent control flow)"
    return ["outputs: unknown (the lane does not compile)",
            f"lane path: none: the lane does not compile for the {backends.EXPLAINED} backend; "
            f"once it does, {wanted}",
            "compile error:", *("  " + line for line in str(error).splitlines())]


def _inputs(call) -> list[str]:
    lines = ["inputs:"]
    for leaf, value in zip(call.signature.leaves, call.values, strict=True):
        shape = list(getattr(value, "shape", ()))
        axes = ", ".join(f"level {lv}: axis {a}" for lv, a in enumerate(leaf.axes) if a is not None)
        lines.append(f"  {leaf.describe(shape)}  mapped at {axes or 'no level (passed whole)'}")
    lines.append("levels (outermost first):")
    for level, size in zip(call.signature.levels, call.sizes, strict=True):
        lines.append(f"  level {level.depth}: vmap({level.fun_name}), {size} lanes")
    return lines


def _describe(program, call) -> list[str]:
    lines = _inputs(call)
    lines.append("outputs:")
    for out in program.outputs:
        dims = ", ".join(f"level {lv} -> axis {d}" for lv, d in enumerate(out.level_dims) if d is not None)
        lines.append(f"  {out.name}: {out.dtype}, lane rank {out.lane_ndim}; {dims or 'unmapped'}")
    return lines


def _explanation(lines, exe, call) -> Explanation:
    source = getattr(exe, "source", "")
    lines = lines + _lane_ir(call.lane) + [f"cache: {_cache_line(exe, call)}", "generated source:", source]
    text = Explanation("\n".join(lines))
    text.source, text.program = source, getattr(exe, "program", None)
    return text


def _lane_ir(lane) -> list[str]:
    """The "lane IR:" section: the lane and its helpers as the lane IR prints them."""
    from .lane.ir.build import build
    from .lane.ir.printer import pretty

    try:
        module = build(lane)
    except TypeError as e:  # not a Python function (a builtin or ufunc mapped directly): no IR
        return [f"lane IR: none ({e})"]
    return ["lane IR:", *("  " + line for line in pretty(module).splitlines())]


def _cache_line(exe, call) -> str:
    from .lane.watch import big_global_arrays
    from .runtime.cache import memory_only_reason

    path = getattr(exe, "path", None)
    why = memory_only_reason(getattr(exe, "module", None)) if path else None
    if why is None:
        return str(path or "memory only")
    names = ", ".join(big_global_arrays(call.lane)) or "one a helper reads"
    return (f"memory only: {why} ({names}), so it cannot be cached on disk and each new process compiles it "
            "again; pass the array as an argument (in_axes=None) to cache the kernel")
