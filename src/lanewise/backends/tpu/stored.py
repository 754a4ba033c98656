"""``lw.reduce`` on the tpu backend over the map's values: ``axis=`` keeping levels, a
``lw.Monoid``, ``segments=``, per-lane arrays, argmin and argmax.

The map's kernel writes every lane's value, and the reduction of those values is
traced into the same jitted call (one XLA program, one dispatch): ``jnp``'s reductions
over the reduced axes for the built-in ops, a fold in lane order for a Monoid, scatters
for segments.  Why not the kernel's per-tile partials (:func:`.kernel.fold_tile`), as
a built-in op over every axis, or keeping one side of the lane plane, has
(:func:`folded_side`): a tile does not line up with other kept levels (the flat
layout cuts rows of the lane grid anywhere, the plane puts every level but the last
along its rows), a Monoid is associative but not commutative (the CPU and the
reference fold in lane order, which the register-sized slices of a tile do not
keep), and a segment is named by each lane's value.  The values cost one write and
one read of HBM; XLA fuses the reduction into that read.

A Monoid's ``combine`` is lowered from its IR like a lane (:func:`.lower.lower`) and
applied to whole arrays of accumulators: pairs of neighbours in lane order, then
pairs of those (a tree of depth log2 of the lanes, each level one elementwise
combine), so that ``((a0 + a1) + (a2 + a3)) + ...`` is the reference's left fold
for any associative ``combine``.

Example:
    >>> import numpy as np, lanewise as lw
    >>> def first_nonzero(a, b):
    ...     return a if a != 0 else b
    >>> with lw.config.overridden(tpu_interpret=True):
    ...     float(lw.reduce(lw.vmap(lambda v: v - 2.0, backend="tpu"), lw.Monoid(first_nonzero, 0.0))(
    ...         np.array([2.0, 5.0, 7.0], np.float32)))
    3.0
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np

from ... import pytree
from ...errors import EmptyReductionError, LaneTypeError
from ...plan import reduction
from ...plan.reduction import Monoid
from .bounds import checked_call
from .lower import lower

#: The built-in ops as reductions of ``values`` over ``axes`` (bools counted as int32).
_REDUCE = {
    "sum": lambda v, axes: jnp.sum(_counted(v), axis=axes),
    "prod": lambda v, axes: jnp.prod(_counted(v), axis=axes),
    "mean": lambda v, axes: jnp.mean(v.astype(jnp.float32) if v.dtype == jnp.bool_ else v, axis=axes),
    "min": lambda v, axes: jnp.min(v, axis=axes),
    "max": lambda v, axes: jnp.max(v, axis=axes),
    "any": lambda v, axes: jnp.any(v != 0, axis=axes),
    "all": lambda v, axes: jnp.all(v != 0, axis=axes),
}


def _counted(values):
    """Bools as int32: a sum or product of bools counts (NumPy's is an int)."""
    return values.astype(jnp.int32) if values.dtype == jnp.bool_ else values


def folded_side(op, spec: reduction.ReduceSpec, where, folds):
    """Where the kernel's tiles fold ``lw.reduce(..., op)`` of ``spec`` (a built-in op of
    ``folds``, scalar lanes): None over every mapped axis; on the lane plane
    (:class:`.kernel.Layout`), ``"rows"`` keeping every level but the last (the plane's
    rows: each tile folds its columns) or ``"cols"`` keeping the last level only.  False:
    no tile lines up with the kept levels (the flat layout cuts the lane grid's rows
    anywhere; some levels of the rows kept), or the op is no fold: the map's values are
    reduced after the kernel (:func:`whole`)."""
    if isinstance(op, Monoid) or op not in folds or spec.arrays:
        return False
    if not spec.kept:
        return None
    levels = len(spec.kept) + len(spec.reduced)
    if where.plane and spec.kept == tuple(range(levels - 1)):
        return "rows"
    if where.plane and spec.kept == (levels - 1,):
        return "cols"
    return False


def whole(exe, call, fold: tuple, where, fn, mapped, place):
    """The jitted whole call of ``lw.reduce(..., *fold)`` of ``call`` (``fn``: the map's
    kernel for ``where``; ``mapped``: its program; ``place(values, leaf)``: lane values
    where ``out_axes`` puts them) and the program its results unflatten by."""
    sizes = tuple(call.sizes)
    spreads = exe.spreads(call, where)
    found = []  # the kernel's bounds record of the trace under way (.bounds)

    def lanes(given):
        results, _, record = fn.inline(where, *exe.carried(call, given, where, spreads))
        found.append(record)
        return [exe.kernel.from_tiles(r, where, sizes) for r in results]

    return reducing(call, fold, mapped, lanes, place, checks=(found, lambda record: fn.check(record, where, sizes)))


def reducing(call, fold: tuple, mapped, lanes, place, jit=jax.jit, checks=None):
    """:func:`whole` from ``lanes``: a function of ``call``'s argument leaves (traced) to
    the map's values in level order (``call.sizes``, then a lane's own axes), computed
    on one device or split over several (:mod:`.sharded`); ``jit`` makes the call of
    the traced reduction (``jax.jit``, or jit with the arguments moved onto a mesh).
    ``checks``: (the list ``lanes`` appends its kernel's bounds record to, the check that
    raises a record's LaneIndexError), or None (:func:`_checking`)."""
    jit = _checking(jit, checks)
    op, axis = fold
    monoid = op if isinstance(op, Monoid) else None
    combine = _Combiner(monoid) if monoid else None
    spec = reduction.reduce_spec(op, axis, mapped, combine.result_type if combine else None)
    sizes = tuple(call.sizes)
    if spec.segmented:
        return _segmented(lanes, op, axis.count, spec, combine, call, jit), _Single()

    def pipeline(*given):
        out = []
        for value, leaf, acc in zip(lanes(given), mapped.outputs, spec.acc_dtypes, strict=True):
            levels = reduction.reduced_levels(leaf.level_dims, leaf.ndim, axis, len(sizes))
            axes = tuple(sorted(leaf.level_dims[lv] for lv in levels))  # C order of the output, as NumPy's
            out.append(reduce_leaf(op, place(value, leaf), axes, combine, _narrow(acc)))
        return out

    return jit(pipeline), mapped


def _checking(jit, checks):
    """``jit`` of a pipeline, its call then raising the LaneIndexError of a row read out of
    range that its kernel recorded (:mod:`.bounds`): the jitted pipeline returns the record
    ``lanes`` left in ``found`` too.  ``checks`` None: ``jit`` itself."""
    if checks is None:
        return jit
    found, check = checks

    def checking(pipeline):
        def recorded(*given):
            found.clear()
            out = pipeline(*given)
            return out, next((r for r in found if r is not None), None)

        return checked_call(jit(recorded), check)

    return checking


def reduce_leaf(op, values, axes: tuple, combine=None, acc=None):
    """``op`` of ``values`` (an output leaf as ``out_axes`` places it) over ``axes``:
    NumPy's meaning (:func:`lanewise.plan.reduction.reduce_values`) in 32 bits."""
    if isinstance(op, Monoid):
        flat = _reduced_first(values, axes).astype(acc)
        return combine.fold(flat, combine.identity(flat.shape[1:], acc))
    if op in ("min", "max", "argmin", "argmax") and any(values.shape[a] == 0 for a in axes):
        raise EmptyReductionError(f"lw.reduce: {op} over zero lanes: it has no identity (use lw.Monoid with one)")
    if op in ("argmin", "argmax"):  # NumPy's flat index into the reduced axes (C order), the first of ties
        return getattr(jnp, op)(_reduced_first(values, axes), axis=0).astype(jnp.int32)
    return _REDUCE[op](values, axes)


def _reduced_first(values, axes: tuple):
    """``values`` with the reduced ``axes`` moved first and flattened into one, in C order
    (the order the reference folds in): (reduced, *kept)."""
    moved = jnp.moveaxis(values, axes, list(range(len(axes))))
    return moved.reshape((math.prod(moved.shape[:len(axes)]),) + moved.shape[len(axes):])


class _Combiner:
    """A Monoid's ``combine`` lowered to JAX (:func:`.lower.lower`), applied elementwise to
    arrays of accumulators; its identity; the fold in lane order."""

    def __init__(self, monoid: Monoid):
        self.monoid = monoid
        self.tile = lower(monoid.combine)

    def __call__(self, a, b):
        results, _tree, _ = self.tile(jnp.ones(a.shape, bool), a, b)
        if len(results) != 1:
            raise LaneTypeError(f"lw.Monoid's combine {getattr(self.monoid.combine, '__qualname__', '')} "
                                f"returns {len(results)} values; it returns one (the combination of a and b)")
        return jnp.broadcast_to(jnp.asarray(results[0]), a.shape).astype(a.dtype)

    def result_type(self, _combine, a, b):
        """The dtype ``combine`` returns for ``a`` and ``b`` (for the accumulator's:
        :func:`lanewise.plan.reduction.monoid_dtype`), in 32 bits."""
        a, b = (jax.ShapeDtypeStruct((1,), _narrow(d)) for d in (a, b))
        results = jax.eval_shape(lambda x, y: self.tile(jnp.ones((1,), bool), x, y)[0], a, b)
        return np.dtype(results[0].dtype) if len(results) == 1 else None

    def identity(self, shape: tuple, dtype):
        return jnp.full(shape, self.monoid.identity, dtype)

    def fold(self, values, identity):
        """The left fold from ``identity`` of ``values`` along axis 0 (lane order), as a
        tree of pairs of neighbours: one elementwise combine per level."""
        while values.shape[0] > 1:
            n = values.shape[0]
            paired = self(values[0:n - 1:2], values[1:n:2])
            values = jnp.concatenate([paired, values[n - 1:]]) if n % 2 else paired
        return self(identity, values[0]) if values.shape[0] else identity


def _narrow(dtype) -> np.dtype:
    """A dtype as the chip computes it: 64-bit numbers as 32-bit."""
    dtype = np.dtype(dtype)
    return {"f": np.dtype(np.float32), "i": np.dtype(np.int32), "u": np.dtype(np.uint32)}.get(
        dtype.kind, dtype) if dtype.itemsize == 8 else dtype


def _segmented(lanes, op, count: int, spec, combine, call, jit):
    """The segment reduction's function: the jitted call, then the check that every lane's
    segment lies in [0, count) (a LaneIndexError naming the first lane outside, as the
    reference's), from the first such lane's index the call returns."""
    from .. import host

    acc = spec.acc_dtypes[1]

    def pipeline(*given):
        segment, values = lanes(given)
        segment = segment.reshape(-1)
        values = values.reshape(segment.shape + values.shape[len(call.sizes):])  # (lanes, *a lane's value)
        bad = (segment < 0) | (segment >= count)
        first = jnp.where(jnp.any(bad), jnp.argmax(bad), -1).astype(jnp.int32) if bad.size else jnp.int32(-1)
        ids = jnp.where(bad, count, segment)  # past the last segment: dropped
        if combine is not None:
            out = _segment_fold(combine, ids, values.astype(_narrow(acc)), count)
        else:
            out = _segment_op(op, ids, values, count)
        return out, first, segment[jnp.maximum(first, 0)] if segment.shape[0] else first

    jitted = jit(pipeline)

    def checked(*given):
        out, first, segment = jitted(*given)
        if int(first) >= 0:
            index = np.unravel_index(int(first), tuple(call.sizes))
            raise reduction.segment_out_of_range(int(segment), count, f"({host.where(index)})", call.lane)
        return [out]

    checked.jitted = jitted  # what LANEWISE_DEBUG prints: the call as JAX traced it
    return checked


def _segment_op(op: str, ids, values, count: int):
    """A built-in op per segment (``ids`` in [0, count], ``count`` dropped); an empty
    segment holds the op's identity (0, 1, +inf, -inf, False, True; a bool's min and max
    are all and any)."""
    if values.dtype == jnp.bool_ or op in ("any", "all"):
        if op in ("sum", "prod"):
            values = values.astype(jnp.int32)
        else:  # any, all, and a bool's max and min: a count of the lanes that say otherwise
            truth = values != 0
            against = jax.ops.segment_sum((~truth if op in ("all", "min") else truth).astype(jnp.int32),
                                          ids, count + 1)[:count]
            return against == 0 if op in ("all", "min") else against > 0
    scatter = {"sum": jax.ops.segment_sum, "prod": jax.ops.segment_prod, "min": jax.ops.segment_min,
               "max": jax.ops.segment_max}[op]
    return scatter(values, ids, count + 1)[:count]


def _segment_fold(combine: _Combiner, ids, values, count: int):
    """A Monoid per segment in lane order: the lanes sorted by segment (stable, so each
    segment's lanes keep their order), a segmented scan of ``combine`` (a lane starting
    its segment restarts the fold), each segment's last lane's value combined with the
    identity (the reference's first step); an empty segment holds the identity."""
    if not ids.shape[0]:  # no lanes: every segment empty
        return combine.identity((count,) + values.shape[1:], values.dtype)
    order = jnp.argsort(ids, stable=True)
    ids, values = ids[order], values[order]
    rest = (1,) * (values.ndim - 1)
    starts = jnp.concatenate([jnp.ones(1, bool), ids[1:] != ids[:-1]])

    def step(x, y):
        (x_start, x_value), (y_start, y_value) = x, y
        restart = jnp.reshape(y_start, y_start.shape + rest)
        return x_start | y_start, jnp.where(restart, y_value, combine(x_value, y_value))

    _, scanned = jax.lax.associative_scan(step, (starts, values))
    last = jnp.concatenate([ids[1:] != ids[:-1], jnp.ones(1, bool)])
    identity = combine.identity((count + 1,) + values.shape[1:], values.dtype)
    folded = identity.at[jnp.where(last, ids, count)].set(scanned)[:count]
    present = jnp.zeros(count + 1, bool).at[ids].set(True)[:count].reshape((count,) + rest)
    return jnp.where(present, combine(identity[:count], folded), identity[:count])


class _Single:
    """The program a segment reduction's result unflattens by: one array."""

    out_tree = pytree.flatten(0)[1]
