"""``lw.reduce``: fused map-reduce over the mapped axes of a vmapped function.

``lw.reduce(mapped, "sum")(*args)`` equals ``mapped(*args).sum()`` taken over
the mapped axes, but no mapped value is ever stored: every block of lanes folds
its values into one partial, and the partials are combined in a fixed order.
Blocks depend on the sizes only, so results are bitwise identical for any
thread count.

Operations are rows of :data:`OPS` (a rule table, not an if-chain): how a value
enters the accumulator, how two accumulators combine, the identity, the result
dtype and the NumPy function that defines the meaning (the reference backend
applies it to the materialised values).

Example:
    >>> import math, numpy as np, lanewise as lw
    >>> f = lw.vmap(lw.vmap(lambda x, y: x * y, in_axes=(None, 0)), in_axes=(0, None))
    >>> x = np.arange(4.0)
    >>> float(lw.reduce(f, "sum")(x, x)), lw.reduce(f, "max", axis=1)(x, x)
    (36.0, array([0., 3., 6., 9.]))
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from . import pytree
from .config import config
from .errors import AxisSpecError, LanewiseError


@dataclass(frozen=True)
class Monoid:
    """A user reduction: an associative ``combine(a, b)`` with its ``identity``.

    ``combine`` is plain Python (compiled by lanewise).  Results are
    deterministic: partials always combine in the same order.

    Example:
      >>> import numpy as np, lanewise as lw
      >>> def bigger_abs(a, b):
      ...     return a if abs(a) >= abs(b) else b
      >>> float(lw.reduce(lw.vmap(lambda v: v), lw.Monoid(bigger_abs, 0.0))(np.array([1.0, -5.0, 3.0])))
      -5.0
    """

    combine: Callable
    identity: Any


@dataclass(frozen=True)
class Op:
    """One reduction: its source templates (``{a}``, ``{v}``) and NumPy meaning."""

    name: str
    fold: str  # new accumulator from accumulator {a} and lane value {v}
    identity: str  # Python expression of the identity, with {dtype} the acc dtype
    numpy: Callable | None  # the reference: numpy function(values, axis=...)
    result: Callable  # lane value dtype -> result dtype
    empty_error: bool = False  # NumPy raises on an empty reduction
    indexed: bool = False  # argmin/argmax: the accumulator carries an index too


def _sum_dtype(d: np.dtype) -> np.dtype:
    if d.kind in "b":
        return np.dtype(np.int64)
    if d.kind == "i":
        return np.dtype(np.int64)
    if d.kind == "u":
        return np.dtype(np.uint64)
    return d


def _mean_dtype(d: np.dtype) -> np.dtype:
    return d if d.kind in "fc" else np.dtype(np.float64)


_NAN_FIRST = "({a} if {a} != {a} else ({v} if ({v} {cmp} {a} or {v} != {v}) else {a}))"

OPS: dict[str, Op] = {op.name: op for op in [
    Op("sum", "{a} + {v}", "0", np.sum, _sum_dtype),
    Op("prod", "{a} * {v}", "1", np.prod, _sum_dtype),
    Op("mean", "{a} + {v}", "0", np.mean, _mean_dtype),
    Op("min", _NAN_FIRST.replace("{cmp}", "<"), "HIGH", np.min, lambda d: d, empty_error=True),
    Op("max", _NAN_FIRST.replace("{cmp}", ">"), "LOW", np.max, lambda d: d, empty_error=True),
    Op("argmin", "{v} < {a} or ({v} != {v} and {a} == {a})", "HIGH", np.argmin,
       lambda d: np.dtype(np.int64), empty_error=True, indexed=True),
    Op("argmax", "{v} > {a} or ({v} != {v} and {a} == {a})", "LOW", np.argmax,
       lambda d: np.dtype(np.int64), empty_error=True, indexed=True),
    Op("any", "{a} or ({v} != 0)", "False", np.any, lambda d: np.dtype(np.bool_)),
    Op("all", "{a} and ({v} != 0)", "True", np.all, lambda d: np.dtype(np.bool_)),
]}


def reduce(fun, op: str | Monoid, axis: int | tuple[int, ...] | None = None) -> "Reduced":
    """Reduce ``fun``'s mapped output axes with ``op``, without materialising them.

    Args:
      fun: a function returned by :func:`lanewise.vmap` (nested to any depth).
      op: ``"sum"``, ``"prod"``, ``"mean"``, ``"min"``, ``"max"``, ``"argmin"``,
        ``"argmax"``, ``"any"``, ``"all"``, or a :class:`Monoid`.
      axis: which axes of ``fun``'s output to reduce (ints, negative from the
        end); default: every mapped axis.  ``argmin``/``argmax`` take one axis
        or None, like NumPy, and return flat indices into the reduced axes.

    Returns:
      A callable with ``fun``'s arguments whose result equals
      ``numpy.<op>(fun(*args), axis=...)`` leaf by leaf (NaN handling included),
      within floating-point rounding: sums are blocked and pairwise, so usually
      more accurate than NumPy's.

    Example:
      >>> import numpy as np, lanewise as lw
      >>> hits = lw.vmap(lambda x: x * x <= 1.0)
      >>> int(lw.reduce(hits, "sum")(np.array([0.5, 2.0, -0.2])))
      2
    """
    if not getattr(fun, "_lw_vmap_spec", False):
        raise TypeError("lw.reduce expects a function returned by lw.vmap")
    if not isinstance(op, Monoid) and op not in OPS:
        raise LanewiseError(f"unknown reduction {op!r}; choose one of {', '.join(OPS)} or lw.Monoid")
    if OPS.get(op) is not None and OPS[op].indexed and isinstance(axis, tuple) and len(axis) != 1:
        raise AxisSpecError(f"{op} reduces one axis or all of them (axis=None), like NumPy")
    return Reduced(fun, op, axis)


class Reduced:
    """A map-reduce built by :func:`reduce` (call it like the mapped function)."""

    def __init__(self, fun, op, axis):
        self.fun, self.op, self.axis = fun, op, axis
        self._executables: dict = {}
        functools.update_wrapper(self, fun, updated=())

    def __repr__(self) -> str:
        return f"reduce({self.fun!r}, {self.op!r}, axis={self.axis!r})"

    def __call__(self, *args, **kwargs):
        from .api import dask_backend, device_backend
        from .program import bind_call

        backend = (self.fun.backend or device_backend(args, kwargs) or dask_backend(args, kwargs)
                   or config.backend)
        if backend == "cuda":
            from .backends import cuda_reduce
            return cuda_reduce.call_reduced(self, args, kwargs)
        if backend == "dask":  # lazy: a tree of partials that is bitwise chunking-independent
            from .backends import dask_reduce
            return dask_reduce.call_reduced(self, args, kwargs)
        call = bind_call(self.fun, args, kwargs)
        if backend == "python":
            return reference(self, call)
        from .backends import cpu_reduce

        key = call.signature
        exe = self._executables.get(key)
        if exe is None:
            exe = self._executables[key] = cpu_reduce.build(self, call)
        return cpu_reduce.run(exe, call)


def reduced_levels(out_level_dims, ndim: int, axis, n_levels: int) -> tuple[int, ...]:
    """Which vmap levels an output leaf's ``axis`` selection reduces."""
    level_of = {dim: lv for lv, dim in enumerate(out_level_dims) if dim is not None}
    if axis is None:
        return tuple(sorted(level_of.values()))
    axes = (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis)
    levels = []
    for a in axes:
        if not -ndim <= a < ndim:
            raise AxisSpecError(f"lw.reduce axis {a} is out of range for an output of rank {ndim}")
        if a % ndim not in level_of:
            raise AxisSpecError(f"lw.reduce axis {a} is an axis of the lane's own array output; "
                                "only mapped axes can be reduced")
        levels.append(level_of[a % ndim])
    return tuple(sorted(set(levels)))


# ----------------------------------------------------------------------------- reference


def reference(reduced: Reduced, call):
    """The spec: materialise ``fun`` on the python backend, then reduce with NumPy."""
    from .backends import python

    program = python.program_for(call)
    leaves, tree = pytree.flatten(python.run(python.build(call), call))
    out = []
    for value, spec in zip(leaves, program.outputs, strict=True):
        levels = reduced_levels(spec.level_dims, value.ndim, reduced.axis, len(call.sizes))
        axes = tuple(sorted(spec.level_dims[lv] for lv in levels))  # C order of the output
        out.append(_reduce_values(reduced.op, value, axes))
    return pytree.unflatten(tree, out)


def _reduce_values(op, value: np.ndarray, axes: tuple[int, ...]):
    if isinstance(op, Monoid):
        moved = np.moveaxis(value, axes, range(len(axes)))
        flat = moved.reshape((-1,) + moved.shape[len(axes):])
        acc = np.full(flat.shape[1:], op.identity, dtype=np.result_type(value.dtype, type(op.identity)))
        for item in flat:
            acc = np.vectorize(op.combine)(acc, item) if acc.ndim else op.combine(acc[()], item)
        return acc
    rule = OPS[op]
    if rule.indexed:
        if len(axes) > 1:
            moved = np.moveaxis(value, axes, range(len(axes)))
            return rule.numpy(moved.reshape((-1,) + moved.shape[len(axes):]), axis=0)
        return rule.numpy(value, axis=axes[0] if axes else None)
    if rule.name == "mean" and not value.size:
        return np.full(np.delete(value.shape, axes), np.nan, _mean_dtype(value.dtype))
    result = rule.numpy(value, axis=axes)
    return np.asarray(result, dtype=rule.result(value.dtype))
