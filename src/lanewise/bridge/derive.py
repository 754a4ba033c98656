"""Programs derived from an op's program: batched (``jax.vmap``), tangent, cotangent.

Each is an ordinary lanewise program, the user's lane transformed by lanewise
(``lw.jvp``, ``lw.grad``/``lw.jacrev`` of the lane) and mapped by the same
levels as the original, so it runs as one fused nest like any other op:

* batched: ``lw.vmap(program, in_axes=<JAX's batch axes>)``, one more level;
* tangent: per lane, ``lw.jvp(lane, args, tangents)[1]``;
* cotangent: per lane, the gradient of ``sum(lane(args) * ct)`` with respect to
  the differentiated arguments.  An argument no level maps (a parameter shared
  by the lanes) is summed over the lanes by a ``lw.reduce`` (never stored per
  lane); one that some levels do not map gets a leading axis per such level,
  summed by the bridge (:func:`cotangent_programs`).

Example:
    >>> import numpy as np, lanewise as lw
    >>> from lanewise.bridge.signature import Op
    >>> op = Op.of(lw.vmap(lambda x: x * x), (np.ones(3),))
    >>> batched(op, (1,)).program.in_axes
    (1,)
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import optree

from .. import autodiff, pytree
from ..api import vmap
from ..reducing import reduce
from ..autodiff.source import build, inlinable as _inlinable
from ..errors import LaneCompileError, LanewiseError
from ..plan.program import unwrap_nest
from ..plan.reduction import Monoid, Outer, Segments, reduced_levels
from .signature import Op, build as build_op


def is_float(dtype) -> bool:
    """Differentiable: a real floating dtype (JAX gives the rest float0 tangents)."""
    return np.issubdtype(np.dtype(dtype), np.floating)


def reduced(op: Op) -> bool:
    """Whether ``op`` is a ``lw.reduce`` program."""
    return getattr(op.program, "_lw_reduce_spec", False)


def refused_by_ops(program) -> bool:
    """Whether a ``lw.reduce`` program is segmented or folds with a ``lw.Monoid``:
    reductions that JAX and PyTorch operators do not take yet."""
    return isinstance(program.axis, Segments) or isinstance(program.op, Monoid)


def mapped(op: Op) -> Op:
    """The op of ``op``'s ``lw.vmap`` program (itself, unless ``op`` reduces)."""
    if not reduced(op):
        return op
    if "mapped" not in op.derived:
        op.derived["mapped"] = op.like(op.program.fun, op.in_tree, op.name)
    return op.derived["mapped"]


def batched(op: Op, axes: tuple) -> Op:
    """``op`` under ``jax.vmap``: leaf ``k`` batched along ``axes[k]`` (None: not batched).
    A reduction keeps the new level: it reduces what it reduced, batch by batch."""
    key = ("batch", axes)
    if key not in op.derived:
        in_axes = tuple(optree.tree_unflatten(op.in_tree, list(axes)))
        if reduced(op):
            red = op.program
            if refused_by_ops(red):
                raise NotImplementedError(f"lw.jax.op({op.name}): jax.vmap of a segmented or lw.Monoid reduction "
                                          "is not supported; use the op of its lw.vmap program and reduce in JAX")
            program = reduce(vmap(red.fun, in_axes=in_axes, out_axes=0), red.op, axis=Outer(red.axis))
        else:  # the outermost level's backend runs the nest: the op's, kept
            program = vmap(op.program, in_axes=in_axes, out_axes=0, backend=op.program.backend)
        op.derived[key] = op.like(program, op.in_tree, op.name)
    return op.derived[key]


def lane_count(op: Op, types) -> int:
    """How many lanes ``op``'s ``lw.vmap`` program has for arguments of ``types``."""
    return math.prod(mapped(op).infer(*types).call.sizes)


def reduced_axes(op: Op, types) -> list[tuple]:
    """Per result leaf of ``op``'s ``lw.vmap`` program, the axes the reduction ``op``
    folds (``types``: each argument leaf's (shape, dtype))."""
    outputs = mapped(op).infer(*types).program.outputs
    n = len(outputs[0].level_dims) if outputs else 0
    return [tuple(sorted(o.level_dims[lv] for lv in reduced_levels(o.level_dims, o.ndim, op.program.axis, n)))
            for o in outputs]


def arg_leaves(op: Op) -> list[list[int]]:
    """The leaf indices of each positional argument (computed once per op)."""
    if "arg_leaves" not in op.derived:
        index_tree = optree.tree_unflatten(op.in_tree, list(range(op.in_tree.num_leaves)))
        op.derived["arg_leaves"] = [pytree.flatten(arg)[0] for arg in index_tree]
    return op.derived["arg_leaves"]


@dataclass(frozen=True)
class Linear:
    """The tangent map of ``op`` at its primals, linear in the tangents of ``active``
    arguments (each one float leaf: ``diff`` lists those leaves)."""

    op: Op
    active: tuple  # positional arguments that have tangents

    @property
    def diff(self) -> tuple:
        groups = arg_leaves(self.op)
        return tuple(groups[j][0] for j in self.active)

    def forward(self) -> Op:
        """The program ``(args..., tangents of active args...) -> tangents of the outputs``."""
        key = ("tangent", self.active)
        if key not in self.op.derived:
            self.op.derived[key] = tangent_program(self.op, self.active)
        return self.op.derived[key]


def linearize(op: Op, primals, tangents, is_zero) -> tuple[Linear | None, list]:
    """The Linear map for JAX's tangents (``is_zero(t)``: a symbolic zero) and its
    tangent arguments; arguments with only zero tangents are left out."""
    active, leaves = [], []
    for j, group in enumerate(arg_leaves(op)):
        if all(is_zero(tangents[k]) or not is_float(primals[k].dtype) for k in group):
            continue
        if len(group) != 1:
            raise LanewiseError(f"lw.jax.op({op.name}): differentiating argument {j}, a pytree of {len(group)} "
                                "leaves, is not supported; pass its arrays as separate arguments")
        active.append(j)
        leaves.append(group[0])
    return (Linear(op, tuple(active)), leaves) if active else (None, [])


def _per_arg(in_axes, n: int) -> list:
    """``in_axes`` of one level as one entry per positional argument."""
    if isinstance(in_axes, (tuple, list)) and len(in_axes) == n:
        return list(in_axes)
    return [in_axes] * n


def _renest(op: Op, lane, in_axes_at, out_axes_at) -> Op:
    """``lane`` mapped by ``op``'s levels, with each level's axes from the callbacks."""
    _, nest = unwrap_nest(mapped(op).program)
    fun = lane
    for depth in reversed(range(len(nest))):
        fun = vmap(fun, in_axes=in_axes_at(depth, nest[depth]), out_axes=out_axes_at(depth, nest[depth]),
                   axis_size=nest[depth].axis_size, backend=nest[depth].backend)  # a tpu op's stay on the tpu
    return fun


def _arity(op: Op) -> int:
    return len(arg_leaves(op))


def tangent_program(op: Op, active: tuple) -> Op:
    """``(args..., tangents of the active args) -> tangents of the results``: per lane
    ``lw.jvp``; for a sum or mean reduction, the same reduction of the lanes' tangents."""
    lane, _ = unwrap_nest(mapped(op).program)
    n = _arity(op)
    params = ", ".join([f"a{j}" for j in range(n)] + [f"t{j}" for j in active])
    fun = build(f"# lanewise bridge: tangents of {op.name}", f"def _lw_tangent({params}):",
                [f"    return _lw_jvp({params})[1]"], {}, {"_lw_jvp": _inlinable(autodiff.jvp_lane(lane, n, active))})
    def in_axes(depth, level):  # a tangent is mapped as its primal
        axes = _per_arg(level.in_axes, n)
        return tuple(axes + [axes[j] for j in active])

    program = _renest(op, fun, in_axes, lambda d, m: m.out_axes)
    if reduced(op):
        if op.program.op not in LINEAR_REDUCTIONS:
            raise NotImplementedError(f"lw.jax.op({op.name}): only sum and mean reductions are differentiated, "
                                      f"not {op.program.op!r}")
        program = reduce(program, op.program.op, axis=op.program.axis)
    return op.like(program, _args_and(op, [object()] * len(active)), f"tangents of {op.name}")


def _args_and(op: Op, extra: list):
    """The pytree structure of ``op``'s arguments followed by ``extra`` ones (a derived
    program takes each argument as the op does: a tuple argument stays a tuple)."""
    args = pytree.unflatten(op.in_tree, [object()] * op.in_tree.num_leaves)
    return pytree.flatten((*args, *extra))[1]


#: Reductions that are linear in the lanes' values: their tangent is the reduction of the tangents.
LINEAR_REDUCTIONS = ("sum", "mean")


def _leaf_axes(op: Op, k: int) -> list:
    """Leaf ``k``'s axis at each level (outermost first; None: not mapped there)."""
    _, nest = unwrap_nest(mapped(op).program)
    j = next(j for j, g in enumerate(arg_leaves(op)) if k in g)
    return [_per_arg(m.in_axes, _arity(op))[j] for m in nest]


def _out_axes(axes: list, ndim: int) -> list:
    """Each level's out_axis for a leaf's cotangent such that the levels that do not map
    the leaf come first (to be summed) and the rest is laid out as the leaf itself."""
    rank, normal = ndim, []
    for a in axes:  # outermost first: each mapped level removes one axis
        normal.append(None if a is None else a % rank)
        rank -= a is not None
    return [0 if a is None else a + sum(1 for b in axes[d + 1:] if b is None) for d, a in enumerate(normal)]


@dataclass(frozen=True)
class Cotangents:
    """One program giving the cotangents of some active arguments' leaves."""

    op: Op  # its inputs: the arguments' leaves, then the output cotangents
    leaves: tuple  # the argument leaf of each of its results
    summed: tuple  # per result, leading axes to sum (levels that do not map that leaf)


def cotangent_programs(lin: Linear, types, ct_types) -> list[Cotangents]:
    """The programs giving the cotangent of each active argument (``types``: the
    (shape, dtype) of each argument leaf, ``ct_types``: of each output cotangent):
    per lane, the gradient of ``sum(lane(args) * ct)``.

    Arguments no level maps (parameters shared by every lane) are summed over the
    lanes by a ``lw.reduce``: per-lane gradients are never stored.  The others get
    a ``lw.vmap`` laid out as the argument, with a leading axis per level that does
    not map them (to be summed by the caller).  A reduction of every axis has one
    output cotangent for all its lanes (a mean's divided by the count: the caller's
    part); the caller spreads that of a partial reduction over the lanes it folded
    and transposes the ``lw.vmap`` op instead."""
    types = _canonical(types)
    key = ("cotangents", lin.active, types, _canonical(ct_types))
    op = lin.op
    if key not in op.derived:
        leaves = {j: arg_leaves(op)[j][0] for j in lin.active}
        shared = tuple(j for j in lin.active if all(a is None for a in _leaf_axes(op, leaves[j])))
        own = tuple(j for j in lin.active if j not in shared)
        structure = _lane_results(mapped(op).infer(*types))
        op.derived[key] = [_cotangent_program(op, group, key[2] + key[3], structure, reduce_lanes=group == shared)
                           for group in (own, shared) if group]
    return op.derived[key]


def _canonical(types) -> tuple:
    return tuple((tuple(shape), str(np.dtype(dtype))) for shape, dtype in types)


def _cotangent_program(op: Op, group: tuple, types, structure, reduce_lanes: bool) -> Cotangents:
    """``types``: the program's leaves', the arguments' then the output cotangents'."""
    ndims = [len(shape) for shape, _ in types]
    leaves = [arg_leaves(op)[j][0] for j in group]
    axes = [_leaf_axes(op, k) for k in leaves]
    lane_ranks = [ndims[k] - sum(a is not None for a in ax) for k, ax in zip(leaves, axes, strict=True)]
    out_axes = [[0] * len(nest_axes) if reduce_lanes else _out_axes(nest_axes, ndims[k])
                for k, nest_axes in zip(leaves, axes, strict=True)]
    summed = tuple(0 if reduce_lanes else sum(1 for b in ax if b is None) for ax in axes)

    def made(fun) -> Op:
        return Cotangents(_mapped_like(op, _inlinable(fun), out_axes, structure, reduce_lanes), tuple(leaves), summed)

    if not any(lane_ranks):  # forward mode: one tangent per scalar argument, nothing stored
        return made(autodiff.grad(_dot_lane(op, structure), argnums=group))
    if op.on_tpu:  # reverse mode's stack and forward mode's basis arrays: neither lowers on the tpu
        rows = ", ".join(str(j) for j, rank in zip(group, lane_ranks, strict=True) if rank)
        raise LaneCompileError(f"lw.jax.op({op.name}): the gradient with respect to argument(s) {rows}, a "
                               "per-lane array (a row), is not lowered on the tpu backend (reverse mode is "
                               "refused there, docs/tpu.md \"Gradients\"); use jax.jvp or jax.jacfwd (forward "
                               "mode), differentiate with respect to other arguments, or run the op on the CPU "
                               "backend")
    # Reverse mode for per-lane arrays: one sweep for all their elements.  It takes
    # arrays read element by element; where it refuses the lane (an array used whole,
    # r * 2.0 or r.sum()), forward mode, one tangent per element, as lw.jvp.
    try:
        reverse = made(autodiff.jacrev(_dot_lane(op, structure), argnums=group))
        build_op(reverse.op, types)  # compiled now, kept for the bridge's call of it
    except LaneCompileError:
        return made(_forward_cotangents(op, group, lane_ranks, structure))
    return reverse


def _mapped_like(op: Op, fun, out_axes, structure, reduce_lanes: bool) -> Op:
    """The per-lane cotangent function ``fun`` mapped by ``op``'s levels, taking the
    arguments then the output cotangent (mapped as the outputs unless ``op`` reduces),
    summed over the lanes when ``reduce_lanes``."""
    n = _arity(op)
    ct_mapped = not reduced(op)
    program = _renest(op, fun, lambda d, m: tuple(_per_arg(m.in_axes, n) + [m.out_axes if ct_mapped else None]),
                      lambda d, m: tuple(o[d] for o in out_axes))
    if reduce_lanes:
        program = reduce(program, "sum")
    out_value = pytree.unflatten(structure.tree, [object()] * len(structure.ranks))
    return op.like(program, _args_and(op, [out_value]), f"cotangents of {op.name}")


def _dot_lane(op: Op, structure):
    """The lane ``(args..., ct) -> sum(lane(args) * ct)``."""
    lane, _ = unwrap_nest(mapped(op).program)
    a = ", ".join(f"a{j}" for j in range(_arity(op)))
    return build(f"# lanewise bridge: <output, cotangent> of {op.name}", f"def _lw_dot({a}, ct):",
                 [f"    out = _lw_lane({a})", *_dot(structure)], {}, {"_lw_lane": lane})


def _forward_cotangents(op: Op, group: tuple, lane_ranks, structure):
    """The lane ``(args..., ct) -> cotangents of the group's arguments`` by forward
    mode: ``lw.jvp`` of the lane along each element of an argument in turn (a basis
    tangent), its output tangent dotted with ``ct``."""
    lane, _ = unwrap_nest(mapped(op).program)
    n = _arity(op)
    a = ", ".join(f"a{j}" for j in range(n))
    dot = build(f"# lanewise bridge: <tangent, cotangent> of {op.name}", "def _lw_dot(out, ct):", _dot(structure),
                {}, {})
    namespace, lines = {"np": np, "_lw_dot": dot}, []
    for j, rank in zip(group, lane_ranks, strict=True):
        namespace[f"_lw_jvp{j}"] = _inlinable(autodiff.jvp_lane(lane, n, (j,)))
        if not rank:
            lines.append(f"    g{j} = _lw_dot(_lw_jvp{j}({a}, 1.0)[1], ct)")
            continue
        lines += [f"    g{j} = np.zeros(a{j}.shape)", f"    _lw_e = np.zeros(a{j}.shape, a{j}.dtype)",
                  f"    for _lw_k in np.ndindex(a{j}.shape):", "        _lw_e[_lw_k] = 1.0",
                  f"        g{j}[_lw_k] = _lw_dot(_lw_jvp{j}({a}, _lw_e)[1], ct)", "        _lw_e[_lw_k] = 0.0"]
    lines.append(f"    return ({''.join(f'g{j}, ' for j in group)})")
    return build(f"# lanewise bridge: cotangents of {op.name} by forward mode", f"def _lw_cotangents({a}, ct):",
                 lines, {}, namespace)


@dataclass(frozen=True)
class _Results:
    tree: object  # the lane's result structure
    ranks: tuple  # per result leaf: its per-lane rank
    floats: tuple  # per result leaf: differentiable


def _lane_results(inferred) -> _Results:
    """The lane's result structure, from its program as typed (:meth:`Op.infer`)."""
    outs = inferred.program.outputs
    return _Results(inferred.out_tree, tuple(o.lane_ndim for o in outs), tuple(is_float(o.dtype) for o in outs))


def _dot(results: _Results) -> list[str]:
    """Lane source for ``sum(out * ct)`` over the float output leaves.  Per-lane arrays
    are summed by loops, which reverse mode differentiates (it refuses NumPy
    reductions of differentiated arrays)."""
    paths = pytree.leaf_paths(pytree.unflatten(results.tree, list(range(len(results.ranks)))))
    lines = ["    _lw_s = 0.0"]
    for path, rank, differentiable in zip(paths, results.ranks, results.floats, strict=True):
        if not differentiable:
            continue
        at = "".join(f"[{p!r}]" for p in path)
        idx = ", ".join(f"_lw_i{d}" for d in range(rank))
        for d in range(rank):
            lines.append("    " * (d + 1) + f"for _lw_i{d} in range(out{at}.shape[{d}]):")
        item = f"[{idx}]" if rank else ""
        lines.append("    " * (rank + 1) + f"_lw_s += out{at}{item} * ct{at}{item}")
    return lines + ["    return _lw_s"]
