"""The CPU backend of ``lw.reduce``: one parallel nest that folds lanes into partials.

Partials (one per block and output) are combined on the host in a fixed order —
NumPy's pairwise ``add.reduce`` along the contiguous chunk axis for sums — so
the result is the same for any number of threads.

Example:
    >>> import numpy as np, lanewise as lw
    >>> r = lw.reduce(lw.vmap(lambda x: x > 0.5), "any")
    >>> bool(r(np.array([0.1, 0.7])))
    True
"""

from __future__ import annotations

from dataclasses import dataclass
from types import ModuleType
from typing import Any

import numba
import numpy as np

from .. import pytree
from ..codegen import cpu_reduce as render_reduce
from ..codegen.cpu import injected_names
from ..codegen.plan import lane_work, reduce_blocking
from ..config import config
from ..errors import LanewiseError
from ..lanefn import fingerprint, jit_lane
from ..program import Call, Program, make_program
from ..reducing import OPS, Monoid, Reduced, reduced_levels
from ..runtime import cache
from . import cpu
from .cpu import result_type


@dataclass
class ReduceExecutable:
    program: Program
    spec: render_reduce.ReduceSpec
    result_dtypes: tuple
    module: ModuleType
    source: str
    path: Any
    monoid: Monoid | None


def build(reduced: Reduced, call: Call) -> ReduceExecutable:
    """Type the lane, plan the reduction, render and load (or find on disk) its kernel."""
    monoid = reduced.op if isinstance(reduced.op, Monoid) else None
    program = make_program(call, result_type(call))
    spec, result_dtypes = _spec(reduced, program, call)
    fp = fingerprint(call.lane) if config.disk_cache else None
    fp_monoid = fingerprint(monoid.combine) if monoid else ""
    vector_math = config.vector_math and spec.tiled
    key = cache.key_of("reduce", fp, fp_monoid, repr(monoid.identity) if monoid else "", call.signature,
                       spec, vector_math) if fp and fp_monoid is not None else None
    found = cache.lookup(key) if key else None
    source = found[1] if found else render_reduce.render(program, spec)
    path = found[0] if found else (cache.store(key, source, None) if key else None)
    if config.debug:
        print(f"# ---- lanewise reduce kernel ({path or 'in memory'})\n{source}")
    # A running fold (argmin/argmax, Monoid) keeps the lane loop scalar, where libm
    # is faster than lanewise's vector math (W5: 0.30 s vs 0.42 s); tiled folds
    # evaluate lanes in a vectorisable loop, where vector math pays.
    with config.overridden(vector_math=vector_math):
        lane = cpu.kernel_lane(call.lane)
        combine = jit_lane(monoid.combine) if monoid else None
    inject = {"lane": lane, **injected_names(call.signature), **_identities(spec, monoid)}
    for m, out in enumerate(program.outputs):  # tile buffers: lane values, padded with the identity
        inject[f"BT{m}"] = numba.from_dtype(out.dtype)
        if spec.tiled:
            inject[f"IDB{m}"] = np.asarray(inject[f"ID{m}"]).astype(out.dtype)[()]
    if monoid:
        inject["combine"] = combine
    module = cache.load_module(f"lw_r{key or id(spec)}", path, source, inject)
    return ReduceExecutable(program, spec, result_dtypes, module, source, path, monoid)


def _spec(reduced: Reduced, program: Program, call: Call):
    n_levels = len(call.sizes)
    per_leaf = {reduced_levels(o.level_dims, o.ndim, reduced.axis, n_levels) for o in program.outputs}
    if len(per_leaf) != 1:
        raise LanewiseError("lw.reduce: the outputs of this function map different axes; reduce "
                            "them with separate lw.reduce calls")
    if any(dim is None for o in program.outputs for dim in o.level_dims):
        raise LanewiseError("lw.reduce: an output with out_axes=None has no mapped axis to reduce")
    if any(o.lane_ndim for o in program.outputs):
        raise LanewiseError("lw.reduce folds scalar lane results; this lane returns arrays "
                            "(return a tuple of scalars instead)")
    levels = per_leaf.pop()
    kept = tuple(lv for lv in range(n_levels) if lv not in levels)
    op = "monoid" if isinstance(reduced.op, Monoid) else reduced.op
    results = tuple(o.dtype if op == "monoid" else OPS[op].result(o.dtype) for o in program.outputs)
    accs = tuple(_acc_dtype(op, o.dtype, r) for o, r in zip(program.outputs, results, strict=True))
    return render_reduce.ReduceSpec(op, kept, levels, accs), results


def _acc_dtype(op: str, value: np.dtype, result: np.dtype) -> np.dtype:
    if op in ("sum", "prod", "mean") and result == np.float32:
        return np.dtype(np.float64)  # float32 sums accumulate in float64: more accurate than NumPy
    if op in ("sum", "prod", "mean") and result == np.complex64:
        return np.dtype(np.complex128)
    if op in ("min", "max", "argmin", "argmax"):
        return value
    return result


def _identities(spec, monoid) -> dict:
    out = {}
    for m, dtype in enumerate(spec.acc_dtypes):
        if monoid is not None:
            value = monoid.identity
        else:
            text = OPS[spec.op].identity
            value = _extreme(dtype, text) if text in ("HIGH", "LOW") else eval(text)  # noqa: S307
        out[f"ID{m}"] = np.asarray(value).astype(dtype)[()] if monoid is None else value
    return out


def _extreme(dtype: np.dtype, which: str):
    if dtype.kind == "f":
        return np.inf if which == "HIGH" else -np.inf
    if dtype.kind == "b":
        return which == "HIGH"
    info = np.iinfo(dtype)
    return info.max if which == "HIGH" else info.min


# ----------------------------------------------------------------------------- run


def run(exe: ReduceExecutable, call: Call):
    spec, sizes = exe.spec, call.sizes
    n_kept = int(np.prod([sizes[lv] for lv in spec.kept]))
    n_red = int(np.prod([sizes[lv] for lv in spec.reduced]))
    plan = reduce_blocking(n_kept, n_red, lane_work(exe.program.signature.leaves, call.values, sizes))
    partials = []
    for dtype in spec.acc_dtypes:
        partials.append(np.empty(plan.n_blocks, dtype))
        if spec.indexed:
            partials.append(np.empty(plan.n_blocks, np.int64))
    strides = _index_strides(exe, sizes) if spec.indexed else []
    if plan.n_blocks:
        err = np.full(plan.n_blocks, -1, np.int64)
        small = cpu._is_small(sizes, call.values)
        kernel = exe.module.rkernel_serial if small else exe.module.rkernel
        args = (*call.values, *partials, *sizes, *strides, plan.n_chunks, plan.chunk, n_red, err)
        if small:
            kernel(*args)
        else:
            with cpu._PARALLEL:
                kernel(*args)
        failed = np.flatnonzero(err >= 0)
        if failed.size:
            _raise_lane_error(exe, call, plan, int(failed[0]), int(err[failed[0]]))
    results = [_combine(exe, plan, partials, m, n_red, call) for m in range(len(exe.program.outputs))]
    return pytree.unflatten(exe.program.out_tree, results)


def _index_strides(exe, sizes) -> list[int]:
    """Per reduced level, its stride in the C-order flat index NumPy's argmax gives."""
    out = exe.program.outputs[0]
    by_dim = sorted(exe.spec.reduced, key=lambda lv: out.level_dims[lv])
    strides, step = {}, 1
    for lv in reversed(by_dim):
        strides[lv] = step
        step *= sizes[lv]
    return [strides[lv] for lv in exe.spec.reduced]


def _combine(exe, plan, partials, m, n_red, call):
    spec = exe.spec
    width = 2 if spec.indexed else 1
    p = partials[m * width].reshape(plan.n_kept, plan.n_chunks)
    dtype = exe.result_dtypes[m]
    with np.errstate(all="ignore"):
        if spec.op == "monoid":
            flat = np.empty(plan.n_kept, spec.acc_dtypes[m])
            if plan.n_chunks:
                exe.module.rfinish(p, flat)
            else:
                flat[:] = exe.monoid.identity
        elif spec.indexed:
            if not plan.n_chunks:
                raise ValueError(f"attempt to get {spec.op} of an empty sequence")
            best = getattr(np, spec.op)(p, axis=1)
            flat = partials[m * 2 + 1].reshape(plan.n_kept, plan.n_chunks)[np.arange(plan.n_kept), best]
        else:
            flat = _numpy_combine(spec.op, p)
            if spec.op == "mean":
                flat = flat / n_red if n_red else np.full(plan.n_kept, np.nan)
    result = np.asarray(flat).astype(dtype, copy=False)
    return _place(exe, result, call.sizes, m)


_NUMPY_COMBINE = {"sum": np.add.reduce, "mean": np.add.reduce, "prod": np.multiply.reduce,
                  "min": np.minimum.reduce, "max": np.maximum.reduce,
                  "any": np.logical_or.reduce, "all": np.logical_and.reduce}


def _numpy_combine(op, p):
    if op in ("min", "max") and p.shape[1] == 0:
        name = "minimum" if op == "min" else "maximum"
        raise ValueError(f"zero-size array to reduction operation {name} which has no identity")
    return _NUMPY_COMBINE[op](p, axis=1)


def _place(exe, flat, sizes, m):
    """Kept results (level order, flat) -> the output's own axis order."""
    out = exe.program.outputs[m]
    kept = list(exe.spec.kept)
    shaped = flat.reshape([sizes[lv] for lv in exe.spec.kept])
    order = sorted(range(len(kept)), key=lambda i: out.level_dims[kept[i]])
    result = np.ascontiguousarray(np.transpose(shaped, order)) if kept else shaped
    return result[()] if result.ndim == 0 else result


def _raise_lane_error(exe, call, plan, block, lane):
    index = [0] * len(call.sizes)
    rem = block // plan.n_chunks
    for lv in reversed(exe.spec.kept):
        rem, index[lv] = divmod(rem, call.sizes[lv])
    rem = lane
    for lv in reversed(exe.spec.reduced):
        rem, index[lv] = divmod(rem, call.sizes[lv])
    cpu.replay_lane(call, tuple(index))
