"""The JAX primitives of lanewise ops, and their rules (JAX's own extension points).

``lanewise_call`` runs an :class:`~lanewise.jax.ops.Op` (one XLA FFI custom
call).  Its rules:

* abstract evaluation: the Op traced at the argument types;
* lowering (CPU): ``jax.ffi.ffi_lowering`` of the Op's handler, with its plan;
  for a ``backend="tpu"`` program (platform "tpu", or "cpu" in interpret mode):
  ``mlir.lower_fun`` of the tpu backend's jitted whole call, the ``pallas_call``
  inlined in the caller's program; a ``backend="auto"`` program's op lowers on the
  backend chosen when it was traced, or, where that one does not lower for the
  platform, on the other one if its result types are the same (:func:`_for_platform`);
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
import numpy as np

from ..backends import auto
from ..bridge import derive
from ..bridge.signature import Op
from ..config import config
from ..errors import LanewiseError
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
    op = _for_platform(op, ctx)
    if not op.on_tpu and "cpu" not in ctx.module_context.platforms:
        raise LanewiseError(f"lw.jax.op({op.name}) runs its program on lanewise's CPU backend, which XLA calls "
                            f"on the CPU only; this computation is for {', '.join(ctx.module_context.platforms)}: "
                            "give the lw.vmap program backend='tpu'")
    traced = trace(op, _types(ctx.avals_in))
    if op.on_tpu:  # its whole call, the pallas_call inlined: traced and lowered (Mosaic's
        with jax.enable_x64(False):  # rules included) under the chip's 32-bit rules
            return mlir.lower_fun(traced.run, multiple_results=True)(ctx, *leaves)
    if hasattr(traced, "run"):  # a reduction: the custom call, then JAX's combine of its partials
        return mlir.lower_fun(traced.run, multiple_results=True)(ctx, *leaves)
    return jax.ffi.ffi_lowering(traced.target)(ctx, *leaves, plan=traced.plan)


def _runs_on(op: Op, platforms) -> bool:
    """Whether ``op``'s backend lowers for ``platforms``: the tpu's Pallas kernel on a
    TPU (or interpreted on the CPU), the cpu backend's custom call on the CPU."""
    if op.on_tpu:
        return "tpu" in platforms or ("cpu" in platforms and config.tpu_interpret)
    return "cpu" in platforms


def _for_platform(op: Op, ctx) -> Op:
    """The op lowered for ``ctx``'s platforms: ``op``, unless ``backend="auto"`` chose
    (when the op was traced) a backend that does not lower there; then the same
    program on the other backend, provided its result types are those JAX already
    holds (the abstract evaluation's, from the choice): else a clear refusal."""
    platforms = ctx.module_context.platforms
    if op.auto is None or _runs_on(op, platforms):
        return op
    other = "cpu" if op.on_tpu else "tpu"
    where = ", ".join(platforms)
    twin = op.derived.get("twin")
    if twin is None:
        twin = op.derived["twin"] = Op(op.program, op.in_tree, op.name, auto.Choice(
            other, f"chose {op.auto.name} when traced ({op.auto.why}); lowered for {where}"))
    head = (f"lw.jax.op({op.name}): backend='auto' typed this op for the {op.auto.name} backend when it was "
            f"traced ({op.auto.why}), and this computation is lowered for {where}")
    types = _types(ctx.avals_in)
    try:
        theirs = [(o.shape, np.dtype(o.dtype)) for o in trace(twin, types).out]
    except auto.REFUSALS as e:
        raise LanewiseError(f"{head}, where the {other} backend cannot run it: {' '.join(str(e).split())}") from e
    ours = [(o.shape, np.dtype(o.dtype)) for o in trace(op, types).out]
    if theirs != ours:
        raise LanewiseError(f"{head}, where the {other} backend's results would be {_named(theirs)}, not "
                            f"{_named(ours)}; trace the op where it runs, or give the lw.vmap program "
                            f"backend={other!r}")
    return twin


def _named(types) -> str:
    return ", ".join(f"{dtype}{list(shape)}" for shape, dtype in types)


def _axes(dims) -> tuple:
    """JAX's batch dims as lanewise in_axes (not batched: None)."""
    return tuple(d if isinstance(d, int) else None for d in dims)


def _batch(leaves, dims, op: Op):
    axes = _axes(dims)
    if derive.reduced(op) and op.on_tpu:
        outs = _batch_tpu_reduction(leaves, axes, op)
    else:
        outs = call_p.bind(*leaves, op=derive.batched(op, axes))
    return outs, [0] * len(outs)


def _batch_tpu_reduction(leaves, axes, op: Op) -> list:
    """``jax.vmap`` of a tpu ``lw.reduce`` op (which folds every mapped axis in its
    kernel, none kept): the ``lw.vmap`` op batched, one more level of its kernel, then
    each batch's values reduced by jax.numpy (they are stored: batch x lanes).  Each
    result has the dtype the unbatched op gives (a count of bools, argmin's int32)."""
    one = _types([jax.core.ShapedArray(x.shape if a is None else x.shape[:a] + x.shape[a + 1:], x.dtype)
                  for x, a in zip(leaves, axes, strict=True)])
    values = call_p.bind(*leaves, op=derive.batched(derive.mapped(op), axes))
    return [v.astype(o.dtype) for v, o in zip(_fold_batches(values, op), trace(op, one).out, strict=True)]


def _fold_batches(values, op: Op) -> list:
    """Each of ``values`` (batch first, then the lanes) reduced per batch as ``op`` reduces."""
    fold = getattr(jax.numpy, op.program.op)
    return [fold(v.reshape(v.shape[0], -1), axis=1) for v in values]


def _jvp(primals, tangents, op: Op):
    primals = [p if hasattr(p, "dtype") else jax.numpy.asarray(p) for p in primals]  # JAX keeps Python scalars
    outs = call_p.bind(*primals, op=op)
    zeros = [ad.Zero(jax.typeof(o).to_tangent_aval()) for o in outs]
    lin, diff = derive.linearize(op, primals, tangents, lambda t: type(t) is ad.Zero)
    if lin is None or not any(derive.is_float(o.dtype) for o in outs):
        return outs, zeros
    if derive.reduced(op) and op.program.op not in derive.LINEAR_REDUCTIONS:
        touts = _tangents_of_values(op, primals, tangents, diff)
    else:
        touts = linear_p.bind(*primals, *(ad.instantiate_zeros(tangents[k]) for k in diff), lin=lin)
    return outs, [t if derive.is_float(o.dtype) else z for o, t, z in zip(outs, touts, zeros, strict=True)]


def _tangents_of_values(op: Op, primals, tangents, diff) -> list:
    """min, max, prod: JAX's derivative of the reduction of the lanes' values (the
    ``lw.vmap`` op, then jax.numpy's reduction), ties and zeros as JAX treats them.
    Unlike a sum's, these tangents need every lane's value: they are stored."""
    inner, fold = derive.mapped(op), _FOLD[op.program.op]
    axes = derive.reduced_axes(op, _types(primals))

    def values(*xs):
        leaves = list(primals)
        for k, x in zip(diff, xs, strict=True):
            leaves[k] = x
        return [fold(v, axis=a) for v, a in zip(call_p.bind(*leaves, op=inner), axes, strict=True)]

    return jax.jvp(values, [primals[k] for k in diff], [ad.instantiate_zeros(tangents[k]) for k in diff])[1]


_FOLD = {"min": jax.numpy.min, "max": jax.numpy.max, "prod": jax.numpy.prod}


def _linear_abstract(*avals, lin):
    """The tangent of every output of the op (lw.jvp's: one per output leaf)."""
    return _abstract(*avals, op=lin.forward())


def _linear_impl(*leaves, lin):
    return _impl(*leaves, op=lin.forward())


def _linear_lower(ctx, *leaves, lin):
    return _lower(ctx, *leaves, op=lin.forward())


def _linear_jvp(primals, tangents, lin):
    """Second derivatives: the tangent map is an op like any other (its program,
    ``lw.jvp`` of the lane, differentiated by lanewise once more)."""
    return _jvp(primals, tangents, op=lin.forward())


def _linear_batch(leaves, dims, lin):
    n = len(leaves) - len(lin.diff)
    leaves, dims = _align_tangents(list(leaves), list(dims), lin.diff, n)
    op = lin.op
    if derive.reduced(op) and op.on_tpu:  # as _batch_tpu_reduction: the lanes' tangents, folded per batch
        inner = derive.Linear(derive.batched(derive.mapped(op), _axes(dims[:n])), lin.active)
        outs = _fold_batches(linear_p.bind(*leaves, lin=inner), op)
    else:
        outs = linear_p.bind(*leaves, lin=derive.Linear(derive.batched(op, _axes(dims[:n])), lin.active))
    return outs, [0] * len(outs)


def _align_tangents(leaves: list, dims: list, diff, n: int) -> tuple[list, list]:
    """The tangent program maps each tangent as its primal: where JAX batched one
    of the pair only, or both along different axes, both get the batch axis first."""
    size = next(x.shape[d] for x, d in zip(leaves, dims, strict=True) if isinstance(d, int))
    for i, k in enumerate(diff):
        if dims[k] != dims[n + i]:
            for j in (k, n + i):
                leaves[j] = batching.bdim_at_front(leaves[j], dims[j], size)
                dims[j] = 0
    return leaves, dims


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
    if derive.reduced(op) and op.program.axis is not None:
        return _cotangents(derive.Linear(derive.mapped(op), lin.active), primals, _spread(op, types, cts))
    if derive.reduced(op) and op.program.op == "mean":  # each lane's share of a mean
        cts = [c / derive.lane_count(op, types) for c in cts]
    found = {}
    for group in derive.cotangent_programs(lin, types, _types(cts)):
        for k, r, summed in zip(group.leaves, bind(group.op, [*primals, *cts]), group.summed, strict=True):
            r = jax.numpy.sum(r, axis=tuple(range(summed))) if summed else r
            found[k] = r.astype(primals[k].dtype)
    return [found[k] for k in lin.diff]


def _spread(op: Op, types, cts) -> list:
    """A partial sum's or mean's result cotangents as those of the ``lw.vmap`` op's
    values: each the same for every lane it folded (a mean's divided by their count)."""
    inferred = derive.mapped(op).infer(*types)
    spread = []
    for ct, out, axes in zip(cts, inferred.out, derive.reduced_axes(op, types), strict=True):
        if not derive.is_float(out.dtype):  # no cotangent: a placeholder of the right type
            spread.append(jax.numpy.zeros(out.shape, out.dtype))
            continue
        ct = jax.numpy.broadcast_to(jax.numpy.expand_dims(ct, axes), out.shape)
        spread.append(ct / math.prod(out.shape[a] for a in axes) if op.program.op == "mean" else ct)
    return spread


call_p.def_impl(_impl)
call_p.def_abstract_eval(_abstract)
for _platform in ("cpu", "tpu"):  # on "tpu": backend="tpu" programs (a CPU one is refused, saying so)
    mlir.register_lowering(call_p, _lower, platform=_platform)
    mlir.register_lowering(linear_p, _linear_lower, platform=_platform)
batching.primitive_batchers[call_p] = _batch
ad.primitive_jvps[call_p] = _jvp

linear_p.def_impl(_linear_impl)
linear_p.def_abstract_eval(_linear_abstract)
batching.primitive_batchers[linear_p] = _linear_batch
ad.primitive_transposes[linear_p] = _linear_transpose
ad.primitive_jvps[linear_p] = _linear_jvp
