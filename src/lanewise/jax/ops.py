"""What a traced call of an op needs: outputs as JAX holds them, handler, plan.

Example:
    >>> import numpy as np, lanewise as lw
    >>> from lanewise.bridge.signature import Op
    >>> op = Op.of(lw.vmap(lambda x, y: x * y, in_axes=(0, None)), (np.ones(3), 2.0))
    >>> trace(op, (((3,), "float64"), ((), "float64"))).target.startswith("lanewise_")
    True
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import jax
import numpy as np

from ..bridge.signature import Op, OutType
from ..bridge import kernel
from . import handler, reduce

_REGISTERED: dict[str, Any] = {}  # XLA target name -> its cfunc (kept alive: XLA holds its address)


@dataclass(frozen=True)
class Traced:
    """A call's outputs (JAX's dtypes), its target and its plan."""

    out: tuple  # OutType per output leaf
    out_tree: Any  # lanewise pytree structure of the result
    target: str
    plan: np.ndarray
    handler: Any  # the cfunc XLA calls (kept alive: XLA holds its address)


def trace(op: Op, types: tuple) -> Traced:
    """``op`` at leaf ``types`` ((shape, dtype), ...): compiled, its handler registered."""
    key = ("trace", tuple((tuple(s), str(np.dtype(d))) for s, d in types))
    found = op.derived.get(key)
    if found is None:
        if op.on_tpu:
            found = _trace_tpu(op, types)
        else:
            found = reduce.trace(op, types) if getattr(op.program, "_lw_reduce_spec", False) else _trace(op, types)
            _register(found.target, found.handler)
        op.derived[key] = found
    return found


@dataclass(frozen=True)
class TracedTpu:
    """A call of a ``backend="tpu"`` program: its outputs and the tpu backend's jitted
    whole call (layout, ``pallas_call``, placement), a pure JAX function of the
    argument leaves that the op's lowering inlines."""

    out: tuple  # OutType per output leaf (32-bit: the chip's)
    out_tree: Any
    whole: Any

    def run(self, *leaves) -> list:
        # the chip's 32-bit rules whatever the process chose, as the tpu backend's own calls
        with jax.enable_x64(False):
            return list(self.whole(*leaves))


def _trace_tpu(op: Op, types) -> TracedTpu:
    inferred = op.infer(*types)
    return TracedTpu(inferred.out, inferred.out_tree, inferred.whole)


def _trace(op: Op, types) -> Traced:
    inferred = op.infer(*types)
    exe, call = inferred.exe, inferred.call
    held, temps = handler.held_by_jax([o.dtype for o in inferred.out])
    outs = [OutType(o.shape, d) for o, d in zip(inferred.out, held, strict=True)]
    target = handler.build(exe, [np.dtype(d) for _, d in types], [len(s) for s, _ in types],
                           [o.dtype for o in outs], [len(o.shape) for o in outs], temps)
    extra = tuple(d for k in exe.array_outputs for d in inferred.lane_shapes[k])
    plan = kernel.plan_of(exe, call, target.n_sizes, extra)
    return Traced(tuple(outs), inferred.out_tree, target.name, plan, target.handler)


def _register(name: str, cfunc) -> None:
    if name in _REGISTERED:
        return
    jax.ffi.register_ffi_target(name, jax.ffi.pycapsule(cfunc.address), platform="cpu")
    _REGISTERED[name] = cfunc
