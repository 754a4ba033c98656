"""The JAX primitives of lanewise ops, and their rules (JAX's own extension points).

``lanewise_call`` runs an :class:`~lanewise.jax.ops.Op` (one XLA FFI custom
call).  Its rules:

* abstract evaluation: the Op traced at the argument types;
* lowering (CPU): ``jax.ffi.ffi_lowering`` of the Op's handler, with its plan;
* batching (``jax.vmap``): the same call of ``lw.vmap(program, in_axes=<the
  batched axes>)``: one more level of the same fused nest, not a loop of calls;
* JVP: the primal call, plus ``lanewise_linear`` for the tangents.

``lanewise_linear`` is the tangent map: linear in its tangent arguments, run by
the Op's forward-mode program (``lw.jvp`` of the lane).  Its transpose (what
``jax.grad`` needs) is the Op's cotangent program (:mod:`lanewise.jax.derive`).

Example:
    >>> import jax, numpy as np, lanewise as lw
    >>> square = lw.jax.op(lw.vmap(lambda x: x * x))
    >>> jax.make_jaxpr(square)(np.ones(3, np.float32)).eqns[0].primitive.name
    'lanewise_call'
"""

from __future__ import annotations

import math

import jax
from jax.extend.core import Primitive
from jax.interpreters import ad, batching, mlir

from ..bridge import derive
from ..bridge.signature import Op
from .ops import trace

call_p = Primitive("lanewise_call")
call_p.multiple_results = True
linear_p = Primitive("lanewise_linear")
linear_p.multiple_results = True


def bind(op: Op, leaves) -> list:
    """Run ``op`` on its argument leaves (JAX arrays or tracers)."""
    return call_p.bind(*leaves, op=op)


def _types(avals) -> tuple:
    return tuple((tuple(a.shape), a.dtype) for a in avals)


def _abstract(*avals, op: Op):
    return [jax.core.ShapedArray(o.shape, o.dtype) for o in trace(op, _types(avals)).out]


def _impl(*leaves, op: Op):
    """Outside ``jax.jit``: the same custom call, compiled once per Op."""
    run = op.derived.get("jit")
    if run is None:
        run = op.derived["jit"] = jax.jit(lambda *a: call_p.bind(*a, op=op))
    return run(*leaves)


def _lower(ctx, *leaves, op: Op):
    traced = trace(op, _types(ctx.avals_in))
    if hasattr(traced, "run"):  # a reduction: the custom call, then JAX's combine of its partials
        return mlir.lower_fun(traced.run, multiple_results=True)(ctx, *leaves)
    return jax.ffi.ffi_lowering(traced.target)(ctx, *leaves, plan=traced.plan)


def _axes(dims) -> tuple:
    """JAX's batch dims as lanewise in_axes (not batched: None)."""
    return tuple(d if isinstance(d, int) else None for d in dims)


def _plain(op: Op, what: str) -> None:
    if getattr(op.program, "_lw_reduce_spec", False):
        raise NotImplementedError(f"lw.jax.op({op.name}): {what} of a lw.reduce op is not supported yet; use the "
                                  "op of its lw.vmap program and reduce in JAX")


def _batch(leaves, dims, op: Op):
    _plain(op, "jax.vmap")
    axes = _axes(dims)
    outs = call_p.bind(*leaves, op=derive.batched(op, axes))
    return outs, [0] * len(outs)


def _jvp(primals, tangents, op: Op):
    primals = [p if hasattr(p, "dtype") else jax.numpy.asarray(p) for p in primals]  # JAX keeps Python scalars
    outs = call_p.bind(*primals, op=op)
    zeros = [ad.Zero(jax.typeof(o).to_tangent_aval()) for o in outs]
    lin, diff = derive.linearize(op, primals, tangents, lambda t: type(t) is ad.Zero)
    if lin is None or not any(derive.is_float(o.dtype) for o in outs):
        return outs, zeros
    touts = linear_p.bind(*primals, *(ad.instantiate_zeros(tangents[k]) for k in diff), lin=lin)
    return outs, [t if derive.is_float(o.dtype) else z for o, t, z in zip(outs, touts, zeros, strict=True)]


def _linear_abstract(*avals, lin):
    """The tangent of every output of the op (lw.jvp's: one per output leaf)."""
    return _abstract(*avals, op=lin.forward())


def _linear_impl(*leaves, lin):
    return _impl(*leaves, op=lin.forward())


def _linear_lower(ctx, *leaves, lin):
    return _lower(ctx, *leaves, op=lin.forward())


def _linear_batch(leaves, dims, lin):
    n = len(leaves) - len(lin.diff)
    leaves, dims = derive.align_tangent_dims(list(leaves), list(dims), lin.diff, n)
    axes = _axes(dims[:n])
    outs = linear_p.bind(*leaves, lin=derive.Linear(derive.batched(lin.op, axes), lin.diff))
    return outs, [0] * len(outs)


def _linear_transpose(cts, *leaves, lin):
    n = len(leaves) - len(lin.diff)
    primals = [p if hasattr(p, "shape") else jax.numpy.asarray(p) for p in leaves[:n]]
    if any(ad.is_undefined_primal(p) for p in primals):
        raise NotImplementedError("lanewise.jax: an op's tangent map is linear in its tangents only")
    cts = [ad.instantiate_zeros(c) for c in cts]
    return [None] * n + _cotangents(lin, primals, cts)


def _cotangents(lin, primals, cts) -> list:
    """The cotangent of each tangent argument of ``lin``: the cotangent programs'
    results, summed over the levels that do not map their leaf."""
    op, types = lin.op, _types(primals)
    if derive.reduced(op) and op.program.op == "mean":  # each lane's share of a mean
        n = math.prod(derive.mapped(op).infer(*types).call.sizes)
        cts = [c / n for c in cts]
    found = {}
    for group in derive.cotangent_programs(lin, types):
        for k, r, summed in zip(group.leaves, bind(group.op, [*primals, *cts]), group.summed, strict=True):
            r = jax.numpy.sum(r, axis=tuple(range(summed))) if summed else r
            found[k] = r.astype(primals[k].dtype)
    return [found[k] for k in lin.diff]


call_p.def_impl(_impl)
call_p.def_abstract_eval(_abstract)
mlir.register_lowering(call_p, _lower, platform="cpu")
batching.primitive_batchers[call_p] = _batch
ad.primitive_jvps[call_p] = _jvp

linear_p.def_impl(_linear_impl)
linear_p.def_abstract_eval(_linear_abstract)
mlir.register_lowering(linear_p, _linear_lower, platform="cpu")
batching.primitive_batchers[linear_p] = _linear_batch
ad.primitive_transposes[linear_p] = _linear_transpose
