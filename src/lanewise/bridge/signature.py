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
from ..errors import LaneTypeError, LanewiseError
from . import kernel

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
    exe: Any  # the backend's executable
    call: Any  # the call bound to dummy values of those types
    lane_shapes: dict  # per-lane array output shapes, by output index (CPU)
    program: Any  # the typed program (its outputs' levels, lane ranks and dtypes)
    whole: Any = None  # tpu: the jitted JAX function of the argument leaves (the kernel inlined)


class Op:
    """A lanewise program as a function of flat argument leaves.  Hashed by identity
    (a JAX primitive parameter); what bridges derive from it is kept in ``derived``."""

    def __init__(self, program: Mapped, in_tree, name: str, auto=None):
        self.program, self.in_tree, self.name = program, in_tree, name
        # backend="auto"'s choice (lanewise.backends.auto.Choice) for a ``backend="auto"``
        # program's op: the backend it runs on, and why; None: the program's own backend
        self.auto = auto
        self.derived: dict = {}

    def like(self, program, in_tree, name: str) -> "Op":
        """An op derived from this one (batched, its tangents, its cotangents): on the
        same backend, ``backend="auto"``'s choice kept (a derivative runs where its op runs)."""
        return Op(program, in_tree, name, self.auto)

    @classmethod
    def of(cls, program, args: tuple, name: str | None = None) -> "Op":
        if not isinstance(program, Mapped) and not getattr(program, "_lw_reduce_spec", False):
            raise TypeError(f"expected a program made by lw.vmap or lw.reduce, got {type(program).__name__}")
        _, tree = pytree.flatten(tuple(args))
        return cls(program, tree, name or program.__name__)

    def __repr__(self) -> str:
        return f"Op({self.program!r})"

    @property
    def on_tpu(self) -> bool:
        """Whether the program runs on the tpu backend (its outermost ``backend=``, or
        ``backend="auto"``'s choice)."""
        if self.auto is not None:
            return self.auto.name == "tpu"
        program = self.program.fun if getattr(self.program, "_lw_reduce_spec", False) else self.program
        return program.backend == "tpu"

    def infer(self, *types) -> Inferred:
        """``types``: (shape, dtype) of each leaf.  Compiles (or loads) the program."""
        key = ("infer", tuple((tuple(s), str(np.dtype(d))) for s, d in types))
        found = self.derived.get(key)
        if found is None:
            with _LOCK:
                found = self.derived[key] = (_infer_tpu if self.on_tpu else _infer)(self, key[1])
        return found


def dummy(shape, dtype, fill: int = 0):
    """A value lanewise binds like a framework's buffer: a scalar for rank 0, else a C
    array (zeros: untouched pages cost nothing, and a probed lane sees no NaNs)."""
    if not shape:
        return np.dtype(dtype).type(fill)
    return np.zeros(shape, dtype) if fill == 0 else np.full(shape, fill, dtype)


def build(op: Op, types) -> tuple:
    """The CPU backend's executable of ``op``'s program (``lw.vmap`` or ``lw.reduce``)
    for leaves of ``types`` ((shape, dtype) each), and the call bound to dummies of
    them.  Compiled or loaded once: the program keeps its executables.

    Example:
        >>> import lanewise as lw
        >>> op = Op.of(lw.reduce(lw.vmap(lambda x: x * x), "sum"), (np.ones(3),))
        >>> build(op, (((3,), "float64"),))[1].sizes
        (3,)
    """
    call = _bind(op, types)
    return op.program.executable(backends.get("cpu"), call), call


def _bind(op: Op, types, fill: int = 0):
    """The call of ``op``'s program on dummies of ``types`` filled with ``fill``."""
    args = tuple(pytree.unflatten(op.in_tree, [dummy(s, d, fill) for s, d in types]))
    reduces = getattr(op.program, "_lw_reduce_spec", False)
    return backends.get("cpu").bind_call(op.program.fun if reduces else op.program, args, {})


def _check_fixed_shapes(op: Op, exe, types, lane_shapes: dict) -> None:
    """A bridge fixes the shape of each per-lane array result when it traces, with no
    data: lane 0, run on zeros, sets it.  A lane whose result shape visibly depends
    on the values (it differs for ones) is refused here, at trace time, rather than
    when the op runs (jax.eval_shape would otherwise claim a shape)."""
    try:
        other = cpu.lane_output_shapes(exe, _bind(op, types, fill=1))
    except Exception:  # noqa: BLE001 - the lane cannot run on ones: nothing to compare with
        return
    for k, shape in lane_shapes.items():
        if other[k] != shape:
            out = exe.program.outputs[k]
            raise LaneTypeError(
                f"{op.name}: {kernel.lane_name(exe)} returned {out.name} of shape {shape} on zeros and "
                f"{other[k]} on ones; a per-lane array result of a JAX or torch op has one shape, fixed "
                "when the op is traced without the data: return a fixed shape (pad to the largest, "
                "and return the length as another result), or call the lw.vmap program outside the op")


def _infer(op: Op, types) -> Inferred:
    for k, (_, d) in enumerate(types):
        check_supported(np.dtype(d), f"argument leaf {k} of {op.name}")
    exe, call = build(op, types)
    if len(call.values) != len(types):  # lanewise flattened differently: never expected
        raise LanewiseError(f"{op.name}: cannot match the arguments' leaves")
    lane_shapes = cpu.lane_output_shapes(exe, call)
    if lane_shapes:
        _check_fixed_shapes(op, exe, types, lane_shapes)
    out = tuple(OutType(tuple(o.shape(call.sizes, lane_shapes.get(k, ()))), np.dtype(o.dtype))
                for k, o in enumerate(exe.program.outputs))
    return Inferred(out, exe.program.out_tree, exe, call, lane_shapes, exe.program)


def _infer_tpu(op: Op, types) -> Inferred:
    """The tpu backend's jitted whole call of ``op``'s program (``lw.vmap`` or
    ``lw.reduce``) for leaves of ``types``, and its results' types (32-bit: the chip's).
    A dtype the chip does not compute (float64, int64) is refused naming the argument
    (never narrowed)."""
    from ..backends.tpu.typed import typed

    reduces = getattr(op.program, "_lw_reduce_spec", False)
    args = tuple(pytree.unflatten(op.in_tree, [dummy(s, d) for s, d in types]))
    tpu = backends.get("tpu")
    call = tpu.bind_call(op.program.fun if reduces else op.program, args, {})
    whole, program, results = typed(op.program, call, types)
    out = tuple(OutType(shape, dtype) for shape, dtype in results)
    return Inferred(out, program.out_tree, op.program.executable(tpu, call), call, {}, program, whole)
