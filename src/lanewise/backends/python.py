"""The reference backend: a plain Python loop over lanes — the executable spec.

It implements ``vmap`` literally as JAX defines it: for each index of a level,
slice the mapped arguments and call the inner function; then stack the results
along ``out_axes`` (or keep lane 0's result for ``out_axes=None``).  It shares
only argument binding and validation (program.py) with the compiled backends;
the placement of output axes is its own, so diff tests can catch either side.

Example:
    >>> import numpy as np, lanewise as lw
    >>> lw.vmap(lambda x: (x, x > 1), backend="python")(np.arange(3))
    (array([0, 1, 2]), array([False, False,  True]))
"""

from __future__ import annotations

import numpy as np

from .. import pytree
from ..dtypes import storage_dtype
from ..errors import AxisSpecError, LaneTypeError, LanewiseError
from ..plan import reduction
from ..plan.program import Call, ResultLeaf, ResultNode, dummy_values, lane_arguments, strong_dtypes
from ..plan.program import bind_call as bind_call  # the protocol's binding: program.bind_call
from ..lane.scanning import reference_mode
from . import host

NAME = "python"
SCAN = "reference"


def usable() -> bool:
    """Always: it is plain Python."""
    return True


def explain(exe, call: Call) -> list[str]:
    """The reference has no schedule: one Python call per lane."""
    return ["schedule: a Python loop over every lane (the reference backend; nothing is compiled)"]


def build(call: Call):
    """Nothing to compile: the 'executable' is the call's lane itself."""
    return call.lane


def run(lane, call: Call, out=None):
    try:
        sample = _call_lane(lane, call, (0,) * len(call.sizes), dummy_values(call))
    except Exception:
        # No lane exists to run, and the lane rejects the made-up values (its own
        # argument check): the compiler's type gives the empty result's structure.
        sample = None if all(call.sizes) else _template(_static_result_type(call))
        if sample is None:
            raise
    program = program_for(call, sample)  # also the static checks: out_axes=None
    with np.errstate(all="ignore"), reference_mode():  # IEEE results; lw.scan in Python too
        result = _map(lane, call, (), sample)
    leaves, tree = pytree.flatten(result)
    if len(leaves) == len(program.outputs):
        leaves = [_as_compiled(np.asarray(v), o) for v, o in zip(leaves, program.outputs, strict=True)]
    else:  # the static type disagrees with the values: trust the values
        strong = strong_dtypes(call)
        leaves = [np.asarray(v).astype(storage_dtype(np.asarray(v).dtype, strong), copy=False)
                  for v in leaves]
    if out is not None:
        targets = host.check_out(program, [v.shape for v in leaves], out)  # as compiled backends
        for t, v in zip(targets, leaves, strict=True):
            t[...] = v
        return out
    return pytree.unflatten(tree, leaves)


def _as_compiled(values: np.ndarray, out) -> np.ndarray:
    """The lane's values in the output's (compiled) dtype; a LaneTypeError when that
    would change them in kind: Python and compiled code disagree on this lane
    (a complex power of a negative float, ``~`` of a bool), and a silent cast hid it."""
    if not np.can_cast(values.dtype, out.dtype, casting="same_kind"):
        raise LaneTypeError(
            f"the lane's output {out.name} is {values.dtype} when run as Python but {out.dtype} when "
            "compiled (for example a fractional power of a negative float is complex in Python and nan "
            "compiled); make the lane's result type the same on every path, e.g. with an explicit "
            "float()/complex()")
    return values.astype(out.dtype, copy=False)


def _template(result):
    """A value of the structure and dtypes of a scalar-leaved result type (None: none, or
    a leaf is an array, whose shape only a run tells)."""
    if isinstance(result, ResultLeaf):
        return result.dtype.type(0) if result.ndim == 0 else None
    if not isinstance(result, ResultNode):
        return None
    children = [_template(c) for c in result.children]
    if any(c is None for c in children):
        return None
    return result.cls(*children) if result.cls is not None else tuple(children)


def program_for(call: Call, sample=None):
    """The program of ``call``: output dtypes and axes (static types preferred).  With
    no lanes (``sample`` None) the lane runs on made-up values only when it cannot be
    typed: run first, a lane checking its argument (``a <= 0: raise``) failed a call
    of zero lanes."""
    static = _static_result_type(call)
    if static is not None:
        return host.program(call, static)
    if sample is None:
        sample = _call_lane(call.lane, call, (0,) * len(call.sizes), dummy_values(call))
    return host.program(call, _result_type(sample))


def _static_result_type(call: Call):
    """The lane's result type as a compiler infers it over *all* paths, if it can.

    A lane returning ``0`` on one path and ``0.5`` on another has a float result
    (as in Numba and JAX) even if every lane of this call took the int path;
    only the values come from running Python.  Lanes Numba cannot type fall
    back to the types of the values.
    """
    from . import cpu  # Numba's typing of the lane, not its kernels

    try:
        return cpu.result_type(call)
    except LanewiseError as e:
        if getattr(e, "every_backend", False):  # a refusal, not a lane Numba cannot type
            raise
        return None


def _call_lane(lane, call, index, values=None):
    args, kwargs = lane_arguments(call.signature, call.values if values is None else values, index)
    try:
        with np.errstate(all="ignore"), reference_mode():  # IEEE results; lw.scan in Python too
            return lane(*args, **kwargs)
    except Exception as e:
        error = host.lane_exception(e, lane, index)
        if error is e:
            raise
        raise error from e


def _map(lane, call: Call, prefix: tuple, sample):
    """vmap's definition, one level at a time: map, then stack along out_axes."""
    depth = len(prefix)
    if depth == len(call.sizes):
        return _call_lane(lane, call, prefix)
    level = call.signature.levels[depth]
    parts = [_map(lane, call, prefix + (i,), sample) for i in range(call.sizes[depth])]
    template = parts[0] if parts else _inner_template(call, depth, sample)
    leaves, tree = pytree.flatten(template)
    out_axes = pytree.broadcast_axes(pytree.thaw(level.out_axes), template, "vmap out_axes")
    columns = []
    for i, part in enumerate(parts):
        values, part_tree = pytree.flatten(part)
        if part_tree != tree:
            raise LaneTypeError(
                f"lanes return different structures: index {i} of vmap level {depth} gave "
                f"{part_tree}, index 0 gave {tree}; every lane must return the same kind of value")
        columns.append(values)
    stacked = []
    for k, axis in enumerate(out_axes):
        if axis is None:
            if not parts:
                raise AxisSpecError("out_axes=None needs at least one lane to take the value from")
            stacked.append(columns[0][k])
        elif parts:
            stacked.append(_stack([np.asarray(c[k]) for c in columns], axis, depth))
        else:
            empty = np.asarray(leaves[k])
            stacked.append(np.moveaxis(np.empty((0,) + empty.shape, empty.dtype), 0, axis))
    return pytree.unflatten(tree, stacked)


def _stack(values, axis, depth):
    for i, v in enumerate(values):
        if v.shape != values[0].shape:
            raise LaneTypeError(
                f"lane results differ in shape: index {i} of vmap level {depth} gave shape "
                f"{v.shape}, index 0 gave {values[0].shape}; per-lane arrays must have one shape")
    return np.stack(values, axis=axis)


def _inner_template(call: Call, depth: int, sample):
    """What one index of a size-0 level would produce: run that level at size 1
    on zero-filled inputs (deeper size-0 levels recurse the same way).  The innermost
    level's is ``sample``: the lane at index 0 of those inputs (or the template of
    the lane's type, when the lane rejects them)."""
    if depth == len(call.sizes) - 1:
        return sample
    sizes = call.sizes[:depth] + (1,) + call.sizes[depth + 1:]
    dummy = Call(call.lane, call.signature, dummy_values(call), sizes)
    return _map(call.lane, dummy, (0,) * (depth + 1), sample)


def _result_type(value):
    if isinstance(value, tuple):
        cls = type(value) if hasattr(value, "_fields") else None
        return ResultNode(tuple(_result_type(v) for v in value), cls)
    if value is None:
        return None
    arr = np.asarray(value)
    if arr.dtype.kind not in "biufc":
        raise LaneTypeError(f"lane returned a {type(value).__name__}; lanes return scalars, "
                            "fixed-shape arrays, or tuples/namedtuples of them")
    return ResultLeaf(arr.dtype, arr.ndim)


# ----------------------------------------------------------------------------- reductions


def build_reduce(op, axis, call: Call):
    """Nothing to compile: the reduction's op and axis."""
    return op, axis


def run_reduce(exe, call: Call):
    """The spec: materialise the lanes with :func:`run`, then reduce with NumPy."""
    op, axis = exe
    program = program_for(call)
    leaves, tree = pytree.flatten(run(build(call), call))
    if isinstance(axis, reduction.Segments):
        return _reduce_segments(op, axis.count, program, call, leaves)
    out = []
    for value, spec in zip(leaves, program.outputs, strict=True):
        levels = reduction.reduced_levels(spec.level_dims, value.ndim, axis, len(call.sizes))
        axes = tuple(sorted(spec.level_dims[lv] for lv in levels))  # C order of the output
        out.append(reduction.reduce_values(op, value, axes))
    return pytree.unflatten(tree, out)


def _reduce_segments(op, count: int, program, call: Call, leaves):
    """Segment reduction of the materialised (segment, value) lanes, in lane order."""
    spec = reduction.reduce_spec(op, reduction.Segments(count), program)
    flat = []
    for value, out in zip(leaves, program.outputs, strict=True):  # mapped axes first, level order
        moved = np.moveaxis(value, list(out.level_dims), list(range(len(out.level_dims))))
        flat.append(moved.reshape((-1,) + moved.shape[len(out.level_dims):]))
    segments, values = flat
    bad = np.flatnonzero((segments < 0) | (segments >= count))
    if bad.size:
        index = np.unravel_index(int(bad[0]), call.sizes)
        raise reduction.segment_out_of_range(int(segments[bad[0]]), count, f"({host.where(index)})", call.lane)
    monoid = op if isinstance(op, reduction.Monoid) else None
    return reduction.reduce_segments(op, segments.astype(np.int64), values, count, spec, monoid)
