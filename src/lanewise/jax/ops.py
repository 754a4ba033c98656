"""What a traced call of a lanewise program needs: output types, handler, plan.

An :class:`Op` is one lanewise program (``lw.vmap``, nested to any depth) seen
from JAX: a function of the flat leaves of its positional arguments.  At trace
time it binds dummy NumPy values of the traced shapes and dtypes, which gives
lanewise's compiled executable (from the disk cache when warm), the output
shapes and dtypes, and the handler XLA calls.  Derived programs (batched under
``jax.vmap``, tangents, cotangents) are Ops too, built once and kept.

Example:
    >>> import numpy as np, lanewise as lw
    >>> op = Op.of(lw.vmap(lambda x, y: x * y), (np.ones(3), 2.0))
    >>> [(a.shape, str(a.dtype)) for a in op.trace((((3,), "float64"), ((), "float64"))).out]
    [((3,), 'float64')]
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

import numpy as np

from .. import backends, pytree
from ..api import Mapped
from ..backends import cpu
from ..dtypes import check_supported
from ..errors import LanewiseError
from . import handler

_REGISTERED: dict[str, Any] = {}  # XLA target name -> its cfunc (kept alive)
_LOCK = threading.Lock()


@dataclass(frozen=True)
class OutType:
    shape: tuple
    dtype: np.dtype


@dataclass(frozen=True)
class Traced:
    """A call's outputs (as JAX will hold them), its target and its plan."""

    out: tuple  # OutType per output leaf, JAX's dtypes
    out_tree: Any  # lanewise pytree structure of the result
    target: str
    plan: np.ndarray


class Op:
    """A lanewise program as a function of flat argument leaves.  Hashed by identity
    (a JAX primitive parameter); derived Ops are cached on it."""

    def __init__(self, program: Mapped, in_tree, name: str):
        self.program, self.in_tree, self.name = program, in_tree, name
        self._traced: dict = {}
        self.derived: dict = {}  # what lanewise.jax.derive builds from this Op, by key

    @classmethod
    def of(cls, program, args: tuple, name: str | None = None) -> "Op":
        if not isinstance(program, Mapped):
            raise TypeError(f"lw.jax.op takes a program made by lw.vmap, got {type(program).__name__}")
        _, tree = pytree.flatten(tuple(args))
        return cls(program, tree, name or program.__name__)

    def __repr__(self) -> str:
        return f"lw.jax.op({self.program!r})"

    def trace(self, types: tuple) -> Traced:
        """``types``: ((shape, dtype), ...) of the leaves, as traced."""
        key = tuple((tuple(s), str(d)) for s, d in types)
        found = self._traced.get(key)
        if found is None:
            with _LOCK:
                found = self._traced[key] = _trace(self, key)
        return found


def _dummy(shape, dtype):
    """A value lanewise binds like JAX's buffer: a scalar for rank 0, else a C array
    (zeros: untouched pages cost nothing, and a probed lane sees no NaNs)."""
    return np.dtype(dtype).type(0) if not shape else np.zeros(shape, dtype)


def _trace(op: Op, key) -> Traced:
    import jax  # lanewise.jax is only imported by a JAX user

    values = [_dummy(s, d) for s, d in key]
    for k, (_, d) in enumerate(key):
        check_supported(np.dtype(d), f"argument {k} of {op.name}")
    args = pytree.unflatten(op.in_tree, values)
    backend = backends.get("cpu")
    call = backend.bind_call(op.program, tuple(args), {})
    exe = op.program.executable(backend, call)
    if len(call.values) != len(values):  # lanewise flattened differently: never expected
        raise LanewiseError(f"lw.jax.op({op.name}): cannot match the arguments' leaves")
    lane_shapes = cpu.lane_output_shapes(exe, call)
    outs, temps = [], []
    for k, o in enumerate(exe.program.outputs):
        want = np.dtype(jax.dtypes.canonicalize_dtype(o.dtype))
        outs.append(OutType(tuple(o.shape(call.sizes, lane_shapes.get(k, ()))), want))
        temps.append(o.dtype if want != o.dtype else None)
    target = handler.build(exe, [np.dtype(d) for _, d in key], [len(s) for s, _ in key],
                           [o.dtype for o in outs], [len(o.shape) for o in outs], temps)
    _register(target)
    extra = tuple(lane_shapes[k] for k in exe.array_outputs)
    plan = handler.plan_of(exe, call, target.n_sizes, tuple(d for shape in extra for d in shape))
    return Traced(tuple(outs), exe.program.out_tree, target.name, plan)


def _register(target) -> None:
    import jax

    if target.name in _REGISTERED:
        return
    import numba

    numba.get_num_threads()  # starts Numba's thread pool: the handler launches on it
    jax.ffi.register_ffi_target(target.name, jax.ffi.pycapsule(target.handler.address), platform="cpu")
    _REGISTERED[target.name] = target.handler
