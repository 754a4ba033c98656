"""``lw.jax.op`` of a ``lw.reduce`` program: partials by a custom call, combined by JAX.

The reduction's kernel folds every block of lanes into one partial per output
(lanewise's fixed blocking: the same blocks for any thread count).  Inside
``jax.jit`` the handler runs that kernel into partial buffers XLA allocated,
and the partials are combined by JAX in the same fixed order, then laid out as
``lw.reduce`` lays them out (``plan.reduction.place``); the whole is lowered as
one piece of the JAX program (:meth:`TracedReduce.run`).  The mapped values are
never stored.  Results equal ``lw.reduce``'s within the rounding of the final
combine (NumPy's pairwise sum there, XLA's reduction here).

Example:
    >>> import jax, jax.numpy as jnp, lanewise as lw
    >>> total = lw.jax.op(lw.reduce(lw.vmap(lambda x: x * x), "sum"))
    >>> float(jax.jit(total)(jnp.arange(4.0)))
    14.0
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np

from ..backends import cpu
from ..backends.cpu.reduce import lane_array_shapes
from ..bridge import derive, kernel
from ..bridge.signature import Op, OutType, build
from ..errors import EmptyReductionError, LanewiseError
from ..plan import reduction
from . import handler

@dataclass(frozen=True)
class TracedReduce:
    out: tuple  # OutType per result leaf, as JAX holds it
    out_tree: Any  # lanewise pytree structure of the result
    target: str
    plan: np.ndarray
    handler: Any
    partials: tuple  # OutType per partials buffer the handler fills
    finish: Callable[[list], list]  # partials -> the result leaves (JAX arrays)

    def run(self, *leaves) -> list:
        """The reduction as JAX code: the custom call, then the combine."""
        shapes = [jax.ShapeDtypeStruct(o.shape, o.dtype) for o in self.partials]
        return self.finish(jax.ffi.ffi_call(self.target, shapes)(*leaves, plan=self.plan))


def trace(op: Op, types) -> TracedReduce:
    red = op.program
    if derive.refused_by_ops(red):  # before anything is compiled
        raise LanewiseError(f"lw.jax.op({op.name}): segmented reductions and lw.Monoid are not supported "
                            "as JAX ops yet; reduce the lw.vmap op's results in JAX")
    exe, call = build(op, types)
    spec = exe.spec
    plan = cpu.plan_of(exe, call)
    lane_shapes = lane_array_shapes(exe, call)
    outs = []
    for m, shape in enumerate(lane_shapes):
        width = () if not spec.arrays else (math.prod(shape) if shape is not None else 1,)
        outs.append(OutType((plan.n_blocks, *width), np.dtype(spec.acc_dtypes[m])))
        if spec.indexed:
            outs.append(OutType((plan.n_blocks, *width), np.dtype(np.int64)))
    strides = reduction.index_strides(spec, exe.program.outputs[0], call.sizes) if spec.indexed else []
    shapes = [s for s in lane_shapes if s is not None]
    identities = [exe.inject[f"ID{m}"] if spec.arrays else None for m in range(len(lane_shapes))]
    target, jax_dtypes = handler.build_reduce(exe, types, outs, identities, spec.indexed, len(strides),
                                              [len(s) for s in shapes])
    outs = [OutType(o.shape, d) for o, d in zip(outs, jax_dtypes, strict=True)]
    words = [plan.n_blocks, plan.n_chunks, plan.chunk, plan.n_reduced]  # handler.N_BLOCKS...
    mode = kernel.EMPTY if not plan.n_blocks else kernel.SERIAL if cpu.is_small(call.sizes, call.values) \
        else kernel.PARALLEL
    attribute = np.array([mode, *words, *call.sizes, *strides, *(d for s in shapes for d in s)], np.int64)
    finish = _finisher(exe, plan, call.sizes, lane_shapes)
    results = jax.eval_shape(finish, [jax.ShapeDtypeStruct(o.shape, o.dtype) for o in outs])
    return TracedReduce(tuple(OutType(r.shape, np.dtype(r.dtype)) for r in results), exe.program.out_tree,
                        target.name, attribute, target.handler, tuple(outs), finish)


def _finisher(exe, plan, sizes, lane_shapes):
    spec, program = exe.spec, exe.program
    if spec.op in ("min", "max", "argmin", "argmax") and plan.n_chunks == 0:
        raise EmptyReductionError(f"lw.reduce: {spec.op} over zero lanes: zero-size array to reduction operation "
                                  f"{spec.op} which has no identity (use lw.Monoid with one)")

    def finish(partials):
        width = 2 if spec.indexed else 1
        results = []
        for m, (out, shape) in enumerate(zip(program.outputs, lane_shapes, strict=True)):
            grid = (plan.n_kept, plan.n_chunks) + partials[m * width].shape[1:]
            p = partials[m * width].reshape(grid)
            if spec.indexed:
                best = getattr(jnp, spec.op)(p, axis=1)
                flat = jnp.take_along_axis(partials[m * width + 1].reshape(grid), best[:, None], axis=1)[:, 0]
            else:
                flat = _COMBINE[spec.op](p, axis=1)
                if spec.op == "mean":
                    flat = flat / plan.n_reduced if plan.n_reduced else jnp.full(flat.shape, jnp.nan)
            flat = flat.astype(jax.dtypes.canonicalize_dtype(spec.result_dtypes[m]))
            results.append(reduction.place(spec, out, flat, sizes, shape or (), xp=jnp))
        return results
    return finish


_COMBINE = {"sum": jnp.sum, "mean": jnp.sum, "prod": jnp.prod, "min": jnp.min, "max": jnp.max,
            "any": jnp.any, "all": jnp.all}
