"""``lw.reduce``: fused map-reduce over the mapped axes of a vmapped function.

``lw.reduce(mapped, "sum")(*args)`` equals ``mapped(*args).sum()`` taken over
the mapped axes, but no mapped value is ever stored: every block of lanes folds
its values into one partial, and the partials are combined in a fixed order.
Blocks depend on the sizes only, so results are bitwise identical for any
thread count.

What a reduction computes is data in the plan layer (:mod:`lanewise.plan.reduction`:
the ops table, ``Monoid``, ``ReduceSpec``); each backend implements
``build_reduce``/``run_reduce`` of the backend protocol.

Example:
    >>> import math, numpy as np, lanewise as lw
    >>> f = lw.vmap(lw.vmap(lambda x, y: x * y, in_axes=(None, 0)), in_axes=(0, None))
    >>> x = np.arange(4.0)
    >>> float(lw.reduce(f, "sum")(x, x)), lw.reduce(f, "max", axis=1)(x, x)
    (36.0, array([0., 3., 6., 9.]))
"""

from __future__ import annotations

import functools

from . import backends
from .errors import AxisSpecError
from .plan.reduction import OPS, Monoid, Segments, check_op
from .lane.watch import watch
from .runtime import interop

__all__ = ["OPS", "Monoid", "Reduced", "reduce"]


def reduce(fun, op: str | Monoid, axis: int | tuple[int, ...] | None = None, *,
           segments: int | None = None) -> "Reduced":
    """Reduce ``fun``'s mapped output axes with ``op``, without materialising them.

    Args:
      fun: a function returned by :func:`lanewise.vmap` (nested to any depth).
      op: ``"sum"``, ``"prod"``, ``"mean"``, ``"min"``, ``"max"``, ``"argmin"``,
        ``"argmax"``, ``"any"``, ``"all"``, or a :class:`Monoid`.
      axis: which axes of ``fun``'s output to reduce (ints, negative from the
        end); default: every mapped axis.  ``argmin``/``argmax`` take one axis
        or None, like NumPy, and return flat indices into the reduced axes.
      segments: a scatter (histogram, bincount, segment sum): the lanes return
        ``(segment, value)`` and the result has ``segments`` rows, row ``g`` the
        ``op`` of the values of every lane whose segment is ``g`` (the identity
        for none: 0 for sum, -inf for max), like ``jax.ops.segment_sum``.  A
        segment outside ``[0, segments)`` is a :class:`lanewise.LaneIndexError`
        naming the lane.  Every mapped axis is reduced; ``op`` is sum, prod, min,
        max, any, all or a :class:`Monoid`.

    Lanes may return fixed-shape arrays: each element is reduced over the lanes
    (a gradient summed over data points, a per-lane histogram added up).

    Returns:
      A callable with ``fun``'s arguments whose result equals
      ``numpy.<op>(fun(*args), axis=...)`` leaf by leaf (NaN handling included),
      within floating-point rounding: sums are blocked and pairwise, so usually
      more accurate than NumPy's.  Results are bitwise identical for any thread
      count.

    Example:
      >>> import numpy as np, lanewise as lw
      >>> hits = lw.vmap(lambda x: x * x <= 1.0)
      >>> int(lw.reduce(hits, "sum")(np.array([0.5, 2.0, -0.2])))
      2
      >>> def bin_of(x):                        # a histogram of 4 bins over [0, 1)
      ...     return int(x * 4), 1
      >>> lw.reduce(lw.vmap(bin_of), "sum", segments=4)(np.array([0.1, 0.2, 0.9, 0.6, 0.65]))
      array([2, 0, 2, 1])
    """
    if not getattr(fun, "_lw_vmap_spec", False):
        raise TypeError("lw.reduce expects a function returned by lw.vmap")
    if segments is not None:
        if axis is not None:
            raise AxisSpecError("lw.reduce with segments= reduces every mapped axis; leave axis=None")
        axis = Segments(segments)
    check_op(op, axis)
    return Reduced(fun, op, axis)


#: A fast launcher's answer when the arguments differ from the call it was made for.
_MISS = object()


class Reduced:
    """A map-reduce built by :func:`reduce` (call it like the mapped function).

    Example:
      >>> import numpy as np, lanewise as lw
      >>> total = lw.reduce(lw.vmap(lambda x: 2 * x), "sum")
      >>> float(total(np.arange(4.0)))
      12.0
    """

    _lw_reduce_spec = True  # lets backends recognise a reduction without importing this layer

    def __init__(self, fun, op, axis):
        self.fun, self.op, self.axis = fun, op, axis
        self._executables: dict = {}
        self._watch = None  # what the kept executables froze (lane.watch); None: nothing
        self._last = None  # fast path: (backend in effect, the last call's launcher), or None
        functools.update_wrapper(self, fun, updated=())

    def __repr__(self) -> str:
        return f"reduce({self.fun!r}, {self.op!r}, axis={self.axis!r})"

    def __call__(self, *args, **kwargs):
        if self._watch is not None and self._watch.changed():
            self._executables.clear()  # a value the kernels froze changed: build afresh
            self._watch = self._last = None
        if self._last is not None and not kwargs and self._last[0] == backends.in_effect(self.fun.backend):
            result = self._last[1](args)  # checks the arguments' types itself
            if result is not _MISS:
                return result
        backend, call = backends.bind(self, self.fun, args, kwargs, self.fun.backend)
        exe = self.executable(backend, call)
        result = interop.to_library(backend.run_reduce(exe, call), call.library)
        self._remember(backend, exe, args, kwargs, call)
        return result

    def _remember(self, backend, exe, args: tuple, kwargs: dict, call) -> None:
        """Keep a launcher for the next calls like this one, where the backend makes one
        (the tpu backend's: the jitted whole call without binding again) and binding
        converted nothing (the launcher is given the caller's arguments)."""
        make = getattr(exe, "fast_launcher", None)
        if make is None or kwargs or backend.NAME not in backends.FAST or len(args) != len(call.values):
            return
        if all(a is v for a, v in zip(args, call.values, strict=True)):
            launcher = make(call, _MISS)
            self._last = None if launcher is None else (backends.in_effect(self.fun.backend), launcher)

    def executable(self, backend, call):
        """``backend``'s executable for ``call``'s signature (built once, then kept here)."""
        key = (backend.NAME, call.signature)
        exe = self._executables.get(key)
        if exe is None:
            if not self._executables:
                self._watch = watch(call.lane)  # before building: the values it freezes
            exe = self._executables[key] = backend.build_reduce(self.op, self.axis, call)
        return exe
