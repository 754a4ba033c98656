"""Reductions as data: what ``lw.reduce`` computes, independent of any backend.

Operations are rows of :data:`OPS` (a rule table, not an if-chain): how a value
enters the accumulator, how two accumulators combine, the identity, the result
dtype and the NumPy function that defines the meaning (the reference backend
applies it to the materialised values).  A :class:`ReduceSpec` says which vmap
levels a call reduces and in which dtypes it accumulates; the helpers below turn
per-block partials into results.  Every backend (CPU, CUDA, Dask, the python
reference) uses these same definitions, so results agree bit for bit where the
combination order does.

Example:
    >>> import numpy as np
    >>> OPS["sum"].fold.format(a="acc", v="x")
    'acc + x'
    >>> acc_dtype("sum", np.dtype(np.float32), np.dtype(np.float32))
    dtype('float64')
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from ..errors import AxisSpecError, BackendError, EmptyReductionError, LaneIndexError, LaneTypeError, LanewiseError


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
class Segments:
    """The ``axis`` of a segment reduction (``lw.reduce(..., segments=count)``): every
    mapped axis, each lane's value folded into the segment its lane names.

    Example:
      >>> Segments(10).count
      10
    """

    count: int


@dataclass(frozen=True)
class Outer:
    """The ``axis`` of a reduction whose function gained an outer vmap level with
    ``out_axes=0`` (``jax.vmap`` of a ``lw.jax.op`` reduction): ``axis`` as it
    selected the inner function's axes, and the new level kept.

    Example:
      >>> reduced_levels((0, 1), 2, Outer(None), 2), reduced_levels((0, 2, 1), 3, Outer(-1), 3)
      ((1,), (1,))
    """

    axis: Any


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
    if d.kind in "bi":
        return np.dtype(np.int64)
    if d.kind == "u":
        return np.dtype(np.uint64)
    return d


def mean_dtype(d: np.dtype) -> np.dtype:
    """The dtype of a mean of values of dtype ``d`` (NumPy's rule)."""
    return d if d.kind in "fc" else np.dtype(np.float64)


_NAN_FIRST = "({a} if {a} != {a} else ({v} if ({v} {cmp} {a} or {v} != {v}) else {a}))"

OPS: dict[str, Op] = {op.name: op for op in [
    Op("sum", "{a} + {v}", "0", np.sum, _sum_dtype),
    Op("prod", "{a} * {v}", "1", np.prod, _sum_dtype),
    Op("mean", "{a} + {v}", "0", np.mean, mean_dtype),
    Op("min", _NAN_FIRST.replace("{cmp}", "<"), "HIGH", np.min, lambda d: d, empty_error=True),
    Op("max", _NAN_FIRST.replace("{cmp}", ">"), "LOW", np.max, lambda d: d, empty_error=True),
    Op("argmin", "{v} < {a} or ({v} != {v} and {a} == {a})", "HIGH", np.argmin,
       lambda d: np.dtype(np.int64), empty_error=True, indexed=True),
    Op("argmax", "{v} > {a} or ({v} != {v} and {a} == {a})", "LOW", np.argmax,
       lambda d: np.dtype(np.int64), empty_error=True, indexed=True),
    Op("any", "{a} or ({v} != 0)", "False", np.any, lambda d: np.dtype(np.bool_)),
    Op("all", "{a} and ({v} != 0)", "True", np.all, lambda d: np.dtype(np.bool_)),
]}


@dataclass(frozen=True)
class ReduceSpec:
    """What a reduction kernel computes (everything its source depends on)."""

    op: str  # a key of OPS, or "monoid"
    kept: tuple[int, ...]  # levels kept, level order (last fastest in k)
    reduced: tuple[int, ...]  # levels reduced, level order (last fastest in r)
    acc_dtypes: tuple[np.dtype, ...]  # accumulator dtype per output
    result_dtypes: tuple[np.dtype, ...] = ()  # result dtype per output
    lane_ndims: tuple[int, ...] = ()  # rank of each output's per-lane value (0: scalar)
    segmented: bool = False  # lanes return (segment, value): output 0 names the segment

    @property
    def indexed(self) -> bool:
        return self.op in OPS and OPS[self.op].indexed

    @property
    def arrays(self) -> bool:
        """Accumulators are arrays folded element by element: some lane returns an
        array, or the reduction is segmented (an accumulator per segment)."""
        return any(self.lane_ndims) or self.segmented

    @property
    def tiled(self) -> bool:
        """Lanes evaluated in vectorisable tiles (W at a time on the SPMD path), then
        folded: into interleaved slots, or in lane order for argmin/argmax."""
        return self.op in OPS and not self.arrays


def check_op(op, axis) -> None:
    """A :class:`lanewise.LanewiseError` unless ``op`` names a reduction valid for ``axis``."""
    if not isinstance(op, Monoid) and op not in OPS:
        raise LanewiseError(f"unknown reduction {op!r}; choose one of {', '.join(OPS)} or lw.Monoid")
    if OPS.get(op) is not None and OPS[op].indexed and isinstance(axis, tuple) and len(axis) != 1:
        raise AxisSpecError(f"{op} reduces one axis or all of them (axis=None), like NumPy")
    if isinstance(axis, Segments):
        count = axis.count
        if isinstance(count, (bool, np.bool_)) or not isinstance(count, (int, np.integer)) or count < 0:
            raise LanewiseError(f"lw.reduce segments= must be a count of segments (an int >= 0), got {count!r}")
        if op in ("mean", "argmin", "argmax"):
            raise LanewiseError(f"lw.reduce with segments= folds with sum, prod, min, max, any, all or a "
                                f"lw.Monoid, not {op!r} (a segment mean: reduce the values and ones with 'sum')")


def reduced_levels(out_level_dims, ndim: int, axis, n_levels: int) -> tuple[int, ...]:
    """Which vmap levels an output leaf's ``axis`` selection reduces."""
    if isinstance(axis, Outer):  # the inner output: the leading axis and level 0 removed
        inner = [None if dim is None else dim - 1 for dim in out_level_dims[1:]]
        return tuple(lv + 1 for lv in reduced_levels(inner, ndim - 1, axis.axis, n_levels - 1))
    level_of = {dim: lv for lv, dim in enumerate(out_level_dims) if dim is not None}
    if axis is None or isinstance(axis, Segments):
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


def reduce_spec(op, axis, program, combine_type: Callable | None = None) -> ReduceSpec:
    """The spec of reducing ``program``'s outputs with ``op`` over ``axis``.

    ``combine_type(combine, a, b)``: the dtype a ``lw.Monoid``'s ``combine`` returns
    for arguments of dtypes ``a`` and ``b`` (None: unknown), which a backend that
    compiles ``combine`` supplies (:func:`monoid_dtype`)."""
    n_levels = len(program.signature.levels)
    per_leaf = {reduced_levels(o.level_dims, o.ndim, axis, n_levels) for o in program.outputs}
    if len(per_leaf) != 1:
        raise LanewiseError("lw.reduce: the outputs of this function map different axes; reduce "
                            "them with separate lw.reduce calls")
    if any(dim is None for o in program.outputs for dim in o.level_dims):
        raise LanewiseError("lw.reduce: an output with out_axes=None has no mapped axis to reduce")
    name = "monoid" if isinstance(op, Monoid) else op
    segmented = isinstance(axis, Segments)
    if segmented:
        check_segmented(program)
    ordered = [o.name for o in program.outputs[int(segmented):] if o.dtype.kind == "c"]
    if name in ("min", "max", "argmin", "argmax") and ordered:
        raise LaneTypeError(f"lw.reduce: {name} of complex values ({', '.join(ordered)}) is not defined "
                            "here; reduce abs(z) or z.real instead, or write the order you mean as a lw.Monoid")
    levels = per_leaf.pop()
    kept = tuple(lv for lv in range(n_levels) if lv not in levels)
    # A Monoid folds an array result element by element: its accumulator is typed as a scalar one's.
    results = tuple(monoid_dtype(op, o.dtype, combine_type) if name == "monoid"
                    else OPS[name].result(o.dtype) for o in program.outputs)
    accs = tuple(acc_dtype(name, o.dtype, r) for o, r in zip(program.outputs, results, strict=True))
    return ReduceSpec(name, kept, levels, accs, results, tuple(o.lane_ndim for o in program.outputs), segmented)


def check_segmented(program) -> None:
    """A :class:`lanewise.LaneTypeError` unless the lanes return ``(segment, value)``:
    an integer scalar and one scalar or fixed-shape array."""
    from .. import pytree

    outs, name = program.outputs, getattr(program.lane, "__qualname__", program.lane)
    if program.out_tree != pytree.flatten((0, 0))[1] or outs[0].lane_ndim or outs[0].dtype.kind not in "iu":
        got = ", ".join(f"{o.dtype}{'[...]' if o.lane_ndim else ''}" for o in outs)
        raise LaneTypeError(f"lw.reduce with segments=: lane {name} must return (segment, value), an integer "
                            f"segment and one scalar or array value; it returns ({got})")


def require_scalar_lanes(spec: ReduceSpec, backend: str) -> None:
    """A :class:`lanewise.BackendError` when ``backend`` is asked to reduce per-lane arrays
    or into segments (the CPU and python backends do)."""
    if spec.arrays:
        what = "into segments" if spec.segmented else "of per-lane arrays"
        raise BackendError(f"lw.reduce {what} runs on the cpu and python backends, not {backend}; "
                           f"reduce on backend='cpu', or map with lw.vmap on {backend} and reduce its result")


def monoid_dtype(monoid: Monoid, value: np.dtype, combine_type: Callable | None) -> np.dtype:
    """The accumulator dtype of a ``lw.Monoid`` folding lane values of dtype ``value``:
    the identity's and the values' common dtype, widened until ``combine`` returns it
    (a float identity, or ``(a + b) / 2``, over int lanes accumulates in float64; the
    lane's dtype alone truncated such a fold to int).

    Example:
      >>> monoid_dtype(Monoid(max, 0.5), np.dtype(np.int64), None)
      dtype('float64')
    """
    acc = np.result_type(np.asarray(monoid.identity).dtype, value)
    for _ in range(4):  # int -> float -> complex at most
        returned = combine_type(monoid.combine, acc, value) if combine_type is not None else None
        if returned is None or np.result_type(acc, returned) == acc:
            return acc
        acc = np.result_type(acc, returned)
    return acc


def acc_dtype(op: str, value: np.dtype, result: np.dtype) -> np.dtype:
    """The accumulator dtype of ``op`` for lane values of dtype ``value``."""
    if op in ("sum", "prod", "mean") and result == np.float32:
        return np.dtype(np.float64)  # float32 sums accumulate in float64: more accurate than NumPy
    if op in ("sum", "prod", "mean") and result == np.complex64:
        return np.dtype(np.complex128)
    if op in ("min", "max", "argmin", "argmax"):
        return value
    return result


def identities(spec: ReduceSpec, monoid: Monoid | None) -> list:
    """The identity of each output's accumulator (NumPy scalars of its dtype for built-in ops)."""
    out = []
    for dtype in spec.acc_dtypes:
        if monoid is not None:
            identity = monoid.identity
            out.append(np.asarray(identity).astype(dtype)[()] if np.isscalar(identity) else identity)
            continue
        text = OPS[spec.op].identity
        value = extreme(dtype, text) if text in ("HIGH", "LOW") else eval(text)  # noqa: S307
        out.append(np.asarray(value).astype(dtype)[()])
    return out


def extreme(dtype: np.dtype, which: str):
    """The largest (``"HIGH"``) or smallest (``"LOW"``) value of ``dtype``."""
    if dtype.kind == "f":
        return np.inf if which == "HIGH" else -np.inf
    if dtype.kind == "b":
        return which == "HIGH"
    info = np.iinfo(dtype)
    return info.max if which == "HIGH" else info.min


def index_strides(spec: ReduceSpec, out, sizes) -> list[int]:
    """Per reduced level, its stride in the C-order flat index NumPy's argmax gives
    (``out``: the output leaf whose axis order defines that index)."""
    by_dim = sorted(spec.reduced, key=lambda lv: out.level_dims[lv])
    strides, step = {}, 1
    for lv in reversed(by_dim):
        strides[lv] = step
        step *= sizes[lv]
    return [strides[lv] for lv in spec.reduced]


def place(spec: ReduceSpec, out, flat, sizes, lane_shape=(), xp=np):
    """Kept results (level order, flat; then the lane's own axes) -> the output leaf
    ``out``'s own axis order (``xp``: the array module of ``flat``, NumPy or jax.numpy)."""
    kept = list(spec.kept)
    shaped = flat.reshape([sizes[lv] for lv in spec.kept] + list(lane_shape))
    own = [d for d in range(out.ndim) if d not in out.level_dims]  # the lane's axes in the output
    dims = [out.level_dims[lv] for lv in kept] + own[:len(lane_shape)]
    order = sorted(range(len(dims)), key=dims.__getitem__)
    result = xp.transpose(shaped, order) if len(dims) > 1 else shaped
    if len(dims) > 1 and xp is np:  # a C-ordered result, as a NumPy user expects from a reduction
        result = np.ascontiguousarray(result)
    return result[()] if result.ndim == 0 else result


_NUMPY_COMBINE = {"sum": np.add.reduce, "mean": np.add.reduce, "prod": np.multiply.reduce,
                  "min": np.minimum.reduce, "max": np.maximum.reduce,
                  "any": np.logical_or.reduce, "all": np.logical_and.reduce}


def combine_partials(spec: ReduceSpec, m: int, partials: np.ndarray, indices: np.ndarray | None,
                     n_red: int, monoid: Monoid | None = None, finish: Callable | None = None):
    """Output ``m``'s results, flat over the kept lanes, from its ``(n_kept, n_chunks)``
    partials (``(n_kept, n_chunks, K)`` for per-lane arrays of K elements, each
    element reduced alike), combined in a fixed order (NumPy's pairwise reduce
    along the chunks).

    ``indices``: argmin/argmax partial indices; ``finish(p, out)``: a Monoid's
    compiled in-order fold of each row of partials.
    """
    n_kept, n_chunks = partials.shape[:2]
    rest = partials.shape[2:]
    with np.errstate(all="ignore"):
        if spec.op == "monoid":
            flat = np.empty((n_kept,) + rest, spec.acc_dtypes[m])
            if n_chunks:  # element by element: rows of (kept, element) pairs
                rows = np.ascontiguousarray(np.moveaxis(partials, 1, -1)).reshape(-1, n_chunks)
                finish(rows, flat.reshape(-1))
            else:
                flat[...] = monoid.identity
        elif spec.indexed:
            if not n_chunks:
                raise EmptyReductionError(f"lw.reduce: {spec.op} over zero lanes: attempt to get {spec.op} of an "
                                          "empty sequence (it has no identity; use lw.Monoid with one)")
            best = getattr(np, spec.op)(partials, axis=1)
            flat = np.take_along_axis(indices, best[:, None], axis=1)[:, 0]
        else:
            if spec.op in ("min", "max") and n_chunks == 0:
                name = "minimum" if spec.op == "min" else "maximum"
                raise EmptyReductionError(f"lw.reduce: {spec.op} over zero lanes: zero-size array to reduction "
                                          f"operation {name} which has no identity (use lw.Monoid with one)")
            flat = _NUMPY_COMBINE[spec.op](partials, axis=1)
            if spec.op == "mean":
                flat = flat / n_red if n_red else np.full((n_kept,) + rest, np.nan)
    return np.asarray(flat).astype(spec.result_dtypes[m], copy=False)


def reduce_values(op, value: np.ndarray, axes: tuple[int, ...]):
    """The meaning of a reduction: ``op`` over ``axes`` of materialised ``value`` (NumPy)."""
    if isinstance(op, Monoid):
        moved = np.moveaxis(value, axes, range(len(axes)))
        flat = moved.reshape((-1,) + moved.shape[len(axes):])
        acc = np.full(flat.shape[1:], op.identity, dtype=np.result_type(value.dtype, type(op.identity)))
        for item in flat:
            acc = np.vectorize(op.combine)(acc, item) if acc.ndim else op.combine(acc[()], item)
        return acc
    rule = OPS[op]
    if op in ("min", "max", "argmin", "argmax") and any(value.shape[a] == 0 for a in axes):
        raise EmptyReductionError(f"lw.reduce: {op} over zero lanes: it has no identity (use lw.Monoid with one)")
    if rule.indexed:
        if len(axes) > 1:
            moved = np.moveaxis(value, axes, range(len(axes)))
            return rule.numpy(moved.reshape((-1,) + moved.shape[len(axes):]), axis=0)
        return rule.numpy(value, axis=axes[0] if axes else None)
    if rule.name == "mean" and not value.size:
        return np.full(np.delete(value.shape, axes), np.nan, mean_dtype(value.dtype))
    result = rule.numpy(value, axis=axes)
    return np.asarray(result, dtype=rule.result(value.dtype))


_AT = {"sum": np.add, "prod": np.multiply, "min": np.minimum, "max": np.maximum,
       "any": np.logical_or, "all": np.logical_and}


def segment_out_of_range(segment: int, count: int, where: str, lane) -> LaneIndexError:
    """The error for a lane naming a segment outside [0, count) (every backend)."""
    name = getattr(lane, "__qualname__", lane)
    return LaneIndexError(f"segment {segment} is out of range for lw.reduce(..., segments={count}) "
                          f"(lane {where} of {name}); segments are 0 .. {count - 1}")


def reduce_segments(op, segments: np.ndarray, values: np.ndarray, count: int, spec: ReduceSpec,
                    monoid: Monoid | None = None) -> np.ndarray:
    """The meaning of a segment reduction (NumPy, lane order): ``out[g]`` folds the
    values of the lanes whose segment is ``g``; empty segments hold the identity.
    ``segments``: the lanes' segments, flat in lane order; ``values``: their values,
    ``(lanes, *value shape)``.  Out-of-range segments are the caller's to check."""
    identity = identities(spec, monoid)[1]
    acc = np.full((count,) + values.shape[1:], identity, dtype=spec.acc_dtypes[1])
    with np.errstate(all="ignore"):
        if monoid is not None:
            combine = np.vectorize(monoid.combine) if values.ndim > 1 else monoid.combine
            for g, v in zip(segments.tolist(), values, strict=True):
                acc[g] = combine(acc[g], v)
        else:
            _AT[spec.op].at(acc, segments, values.astype(acc.dtype, copy=False))
    return acc.astype(spec.result_dtypes[1], copy=False)
