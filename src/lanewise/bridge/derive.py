"""Programs derived from an op's program: batched (``jax.vmap``), tangent, cotangent.

Each is an ordinary lanewise program, the user's lane transformed by lanewise
(``lw.jvp``, ``lw.grad``/``lw.jacrev`` of the lane) and mapped by the same
levels as the original, so it runs as one fused nest like any other op:

* batched: ``lw.vmap(program, in_axes=<JAX's batch axes>)``, one more level;
* tangent: per lane, ``lw.jvp(lane, args, tangents)[1]``;
* cotangent: per lane, the gradient of ``sum(lane(args) * ct)`` with respect to
  the differentiated arguments.  An argument that some level does not map (a
  parameter shared by the lanes) gets one cotangent per lane of that level,
  summed over those lanes by the bridge afterwards (:func:`summed_levels`).

Example:
    >>> import numpy as np, lanewise as lw
    >>> from lanewise.bridge.signature import Op
    >>> op = Op.of(lw.vmap(lambda x: x * x), (np.ones(3),))
    >>> batched(op, (1,)).program.in_axes
    (1,)
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import optree

from .. import autodiff, pytree
from ..api import vmap
from ..autodiff.source import build
from ..errors import LanewiseError
from ..ir.program import unwrap_nest
from .signature import Op


def is_float(dtype) -> bool:
    """Differentiable: a real floating dtype (JAX gives the rest float0 tangents)."""
    return np.issubdtype(np.dtype(dtype), np.floating)


def batched(op: Op, axes: tuple) -> Op:
    """``op`` under ``jax.vmap``: leaf ``k`` batched along ``axes[k]`` (None: not batched)."""
    key = ("batch", axes)
    if key not in op.derived:
        in_axes = tuple(optree.tree_unflatten(op.in_tree, list(axes)))
        op.derived[key] = Op(vmap(op.program, in_axes=in_axes, out_axes=0), op.in_tree, op.name)
    return op.derived[key]


def arg_leaves(op: Op) -> list[list[int]]:
    """The leaf indices of each positional argument."""
    index_tree = optree.tree_unflatten(op.in_tree, list(range(op.in_tree.num_leaves)))
    return [pytree.flatten(arg)[0] for arg in index_tree]


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
    _, nest = unwrap_nest(op.program)
    fun = lane
    for depth in reversed(range(len(nest))):
        fun = vmap(fun, in_axes=in_axes_at(depth, nest[depth]), out_axes=out_axes_at(depth, nest[depth]),
                   axis_size=nest[depth].axis_size)
    return fun


def _arity(op: Op) -> int:
    return len(optree.tree_unflatten(op.in_tree, [0] * op.in_tree.num_leaves))


def tangent_program(op: Op, active: tuple) -> Op:
    lane, _ = unwrap_nest(op.program)
    n = _arity(op)
    params = ", ".join([f"a{j}" for j in range(n)] + [f"t{j}" for j in active])
    fun = build(f"# lanewise bridge: tangents of {op.name}", f"def _lw_tangent({params}):",
                [f"    return _lw_jvp({params})[1]"], {}, {"_lw_jvp": autodiff.jvp_lane(lane, n, active)})
    program = _renest(op, fun, lambda d, m: tuple(_per_arg(m.in_axes, n) + [_per_arg(m.in_axes, n)[j]
                                                                              for j in active]),
                      lambda d, m: m.out_axes)
    args = [object()] * n + [object()] * len(active)
    return Op(program, pytree.flatten(tuple(args))[1], f"tangents of {op.name}")


def summed_levels(op: Op, k: int) -> int:
    """How many leading axes of leaf ``k``'s cotangent (from :func:`cotangent_program`)
    are levels that do not map it, to be summed."""
    return sum(1 for axes in _leaf_axes(op, k) if axes is None)


def _leaf_axes(op: Op, k: int) -> list:
    """Leaf ``k``'s axis at each level (outermost first; None: not mapped there)."""
    _, nest = unwrap_nest(op.program)
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


def cotangent_program(lin: Linear, inferred, ndims) -> Op:
    """The program ``(args..., output cotangents) -> cotangent of each active argument``
    (``inferred``: the op at the arguments' types, ``ndims``: each leaf's rank); leaf
    ``k``'s result has :func:`summed_levels` leading axes more than the leaf."""
    key = ("cotangent", lin.active, tuple(ndims))
    op = lin.op
    if key not in op.derived:
        op.derived[key] = _cotangent_program(lin, inferred, ndims)
    return op.derived[key]


def _cotangent_program(lin: Linear, inferred, ndims) -> Op:
    op = lin.op
    lane, nest = unwrap_nest(op.program)
    n = _arity(op)
    leaves = [arg_leaves(op)[j][0] for j in lin.active]
    axes = [_leaf_axes(op, k) for k in leaves]
    lane_ranks = [ndims[k] - sum(a is not None for a in ax) for k, ax in zip(leaves, axes, strict=True)]
    a = [f"a{j}" for j in range(n)]
    dot = build(f"# lanewise bridge: <output, cotangent> of {op.name}", f"def _lw_dot({', '.join(a)}, ct):",
                [f"    out = _lw_lane({', '.join(a)})", *_dot(inferred, len(nest))], {}, {"_lw_lane": lane})
    # Reverse mode for per-lane arrays (one sweep for all their elements), else
    # forward mode (one tangent per scalar argument, nothing stored).
    transform = autodiff.jacrev if any(lane_ranks) else autodiff.grad
    fun = transform(dot, argnums=tuple(lin.active))
    out_axes = [_out_axes(ax, ndims[k]) for k, ax in zip(leaves, axes, strict=True)]
    program = _renest(op, fun, lambda d, m: tuple(_per_arg(m.in_axes, n) + [m.out_axes]),
                      lambda d, m: tuple(o[d] for o in out_axes))
    out_value = pytree.unflatten(inferred.out_tree, [object()] * len(inferred.out))
    return Op(program, pytree.flatten(tuple([object()] * n + [out_value]))[1], f"cotangents of {op.name}")


def _dot(inferred, n_levels: int) -> list[str]:
    """Lane source for ``sum(out * ct)`` over the float output leaves.  Per-lane arrays
    are summed by loops, which reverse mode differentiates (it refuses NumPy
    reductions of differentiated arrays)."""
    paths = pytree.leaf_paths(pytree.unflatten(inferred.out_tree, list(range(len(inferred.out)))))
    lines = ["    _lw_s = 0.0"]
    for path, o in zip(paths, inferred.out, strict=True):
        if not is_float(o.dtype):
            continue
        at = "".join(f"[{p!r}]" for p in path)
        rank = len(o.shape) - n_levels
        idx = ", ".join(f"_lw_i{d}" for d in range(rank))
        for d in range(rank):
            lines.append("    " * (d + 1) + f"for _lw_i{d} in range(out{at}.shape[{d}]):")
        item = f"[{idx}]" if rank else ""
        lines.append("    " * (rank + 1) + f"_lw_s += out{at}{item} * ct{at}{item}")
    return lines + ["    return _lw_s"]
