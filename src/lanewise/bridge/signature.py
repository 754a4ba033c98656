"""A lanewise program as a function of flat leaves, typed without data.

Example:
    >>> import numpy as np, lanewise as lw
    >>> op = Op.of(lw.vmap(lambda x, y: x * y, in_axes=(0, None)), (np.ones(3), 2.0))
    >>> [(o.shape, str(o.dtype)) for o in op.infer(((3,), "float64"), ((), "float64")).out]
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

_LOCK = threading.Lock()


@dataclass(frozen=True)
class OutType:
    shape: tuple
    dtype: np.dtype


@dataclass(frozen=True)
class Inferred:
    """A program's compiled executable and outputs for some argument types."""

    out: tuple  # OutType per output leaf: the lane's dtypes
    out_tree: Any  # lanewise pytree structure of the result
    exe: Any  # the CPU backend's executable
    call: Any  # the call bound to dummy values of those types
    lane_shapes: dict  # per-lane array output shapes, by output index


class Op:
    """A lanewise program as a function of flat argument leaves.  Hashed by identity
    (a JAX primitive parameter); what bridges derive from it is kept in ``derived``."""

    def __init__(self, program: Mapped, in_tree, name: str):
        self.program, self.in_tree, self.name = program, in_tree, name
        self.derived: dict = {}

    @classmethod
    def of(cls, program, args: tuple, name: str | None = None) -> "Op":
        if not isinstance(program, Mapped) and not getattr(program, "_lw_reduce_spec", False):
            raise TypeError(f"expected a program made by lw.vmap or lw.reduce, got {type(program).__name__}")
        _, tree = pytree.flatten(tuple(args))
        return cls(program, tree, name or program.__name__)

    def __repr__(self) -> str:
        return f"Op({self.program!r})"

    def infer(self, *types) -> Inferred:
        """``types``: (shape, dtype) of each leaf.  Compiles (or loads) the program."""
        key = ("infer", tuple((tuple(s), str(np.dtype(d))) for s, d in types))
        found = self.derived.get(key)
        if found is None:
            with _LOCK:
                found = self.derived[key] = _infer(self, key[1])
        return found


def dummy(shape, dtype):
    """A value lanewise binds like a framework's buffer: a scalar for rank 0, else a C
    array (zeros: untouched pages cost nothing, and a probed lane sees no NaNs)."""
    return np.dtype(dtype).type(0) if not shape else np.zeros(shape, dtype)


def _infer(op: Op, types) -> Inferred:
    values = [dummy(s, d) for s, d in types]
    for k, (_, d) in enumerate(types):
        check_supported(np.dtype(d), f"argument leaf {k} of {op.name}")
    args = pytree.unflatten(op.in_tree, values)
    backend = backends.get("cpu")
    call = backend.bind_call(op.program, tuple(args), {})
    exe = op.program.executable(backend, call)
    if len(call.values) != len(values):  # lanewise flattened differently: never expected
        raise LanewiseError(f"{op.name}: cannot match the arguments' leaves")
    lane_shapes = cpu.lane_output_shapes(exe, call)
    out = tuple(OutType(tuple(o.shape(call.sizes, lane_shapes.get(k, ()))), np.dtype(o.dtype))
                for k, o in enumerate(exe.program.outputs))
    return Inferred(out, exe.program.out_tree, exe, call, lane_shapes)
