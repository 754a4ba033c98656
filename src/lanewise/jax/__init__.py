"""lanewise programs inside JAX programs: ``lw.jax.op``.

``lw.jax.op(program)`` turns a ``lw.vmap`` program into a function JAX can
trace.  Inside ``jax.jit`` it is one XLA FFI custom call on the CPU: XLA calls
a compiled handler (a Numba ``cfunc``) that runs the program's compiled,
multithreaded kernel on XLA's buffers, with no Python and no GIL on the way.
A ``backend="tpu"`` program is the tpu backend's Pallas kernel, inlined; a
``backend="auto"`` program is either, as ``backend="auto"`` chooses.
``jax.vmap`` adds a level to the same fused nest; ``jax.jvp``/``jax.grad`` use
lanewise's own derivatives of the lane (docs/jax.md).

This module imports JAX; ``import lanewise`` does not (``lw.jax`` is loaded on
first use).

Example:
    >>> import jax, jax.numpy as jnp, lanewise as lw
    >>> def escape(cr, ci):
    ...     zr = zi = 0.0
    ...     for n in range(50):
    ...         zr, zi = zr * zr - zi * zi + cr, 2 * zr * zi + ci
    ...         if zr * zr + zi * zi > 4.0:
    ...             return n
    ...     return 50
    >>> op = lw.jax.op(lw.vmap(escape))
    >>> jax.jit(lambda c: op(c, c * 0) + 1)(jnp.array([0.0, 1.0, 2.0])).tolist()
    [51, 3, 2]
"""

from __future__ import annotations

import functools
from typing import Callable

from .. import pytree
from ..api import Mapped
from ..reducing import Reduced
from ..backends import auto
from ..errors import LanewiseError
from . import primitives
from ..bridge.signature import Op
from .ops import trace

__all__ = ["op"]


def op(program: Mapped) -> Callable:
    """``program`` (made by ``lw.vmap``, nested to any depth, or ``lw.reduce``) as a
    JAX-traceable function.

    Args:
      program: the lanewise program.  Its ``backend=`` is None or ``"cpu"``
        (lanewise's CPU backend, one XLA FFI custom call) or ``"tpu"``: the tpu
        backend's Pallas kernel inlined in the JAX program (on a TPU, or in
        interpret mode with ``lw.config.tpu_interpret``), 32-bit arguments only
        (a float64 or int64 array is refused naming it; Python scalars are
        float32/int32), ``lw.reduce`` folding every mapped axis (under
        ``jax.vmap``, the batched ``lw.vmap`` op's values reduced by JAX) and
        gradients in forward mode (none with respect to a per-lane array);
        docs/jax.md, "On a TPU".  A ``lw.reduce`` op runs the fused
        map-reduce (nothing mapped is stored), is batched by ``jax.vmap`` (the
        reduction keeps the new level) and differentiated over any axes (min,
        max and prod through the lanes' values, as JAX differentiates them);
        segmented or ``lw.Monoid`` reductions are refused.  ``"auto"``: the tpu
        backend where a TPU is in use (JAX's default device, or an argument on
        one) and the call qualifies (32-bit arguments, a lane that lowers), else
        the cpu backend; chosen when the op is traced, per argument types, and
        kept by its ``jax.vmap``, ``jax.jvp`` and ``jax.grad`` forms.  Lowered for
        the other platform (``jax.jit(..., device=...)``, ``jax.export``), it runs
        on the other backend where that gives the same result types, and is
        refused, saying why, where it does not.

    Returns:
      A function of the program's positional arguments (JAX arrays, NumPy arrays
      or Python scalars, in pytrees) returning JAX arrays shaped as ``program``'s
      results.  It works inside and outside ``jax.jit``, under ``jax.vmap``
      (one more mapped level of the same kernel), ``jax.jvp`` and ``jax.grad``
      (float arguments; each differentiated argument one array), to any order
      (``jax.hessian``).  Output dtypes
      are the lane's, as JAX holds them: without ``jax_enable_x64`` a float64
      lane result arrives as float32.

    Example:
      >>> import jax, jax.numpy as jnp, lanewise as lw
      >>> cube = lw.jax.op(lw.vmap(lambda x: x * x * x))
      >>> jax.jit(lambda x: cube(x).sum())(jnp.array([1.0, 2.0])).tolist()
      9.0
    """
    if not isinstance(program, (Mapped, Reduced)):
        raise TypeError(f"lw.jax.op takes a program made by lw.vmap or lw.reduce, got {type(program).__name__}")
    backend = program.fun.backend if isinstance(program, Reduced) else program.backend
    if backend not in (None, "cpu", "tpu", auto.AUTO):
        raise LanewiseError(f"lw.jax.op runs programs on lanewise's CPU or tpu backend; {program!r} asks for "
                            f"backend={backend!r}")
    ops: dict = {}

    @functools.wraps(program)
    def call(*args, **kwargs):
        if kwargs:
            raise TypeError(f"lw.jax.op({program.__name__}) takes positional arguments only, got "
                            f"{sorted(kwargs)}")
        leaves, tree = pytree.flatten(tuple(args))
        if backend == auto.AUTO:
            found, leaves = _chosen(program, ops, tree, leaves)
        else:
            leaves = [_as_jax(x, backend == "tpu") for x in leaves]
            found = ops.get(tree)
            if found is None:
                found = ops[tree] = Op(program, tree, program.__name__)
        outs = primitives.bind(found, leaves)
        traced = trace(found, tuple((tuple(x.shape), x.dtype) for x in leaves))
        return pytree.unflatten(traced.out_tree, outs)

    call._lw_program = program
    return call


def _chosen(program, ops: dict, tree, given: list) -> tuple:
    """``(op, leaves)``: the op of a ``backend="auto"`` program for the ``given`` leaves'
    types, on the tpu backend where a TPU is in use and the call qualifies (32-bit, its
    lane lowers), else on the cpu backend, and the leaves as JAX values for it (a
    Python scalar 32-bit for the tpu, as ``jax.numpy`` makes it for the cpu: never
    narrowed for a call the cpu runs).  Chosen once per argument structure and types
    (and whether JAX's default device is a TPU).  The choice fixes the op's result
    types (its abstract evaluation), its derivatives' and batched forms'."""
    leaves = [_as_jax(x, auto.default_is_tpu()) for x in given]
    types = tuple((tuple(x.shape), str(x.dtype)) for x in leaves)
    key = (tree, types, auto.state())
    found = ops.get(key)
    if found is None:
        name = program.__name__
        probe = Op(program, tree, name, auto.Choice("tpu", "qualifying"))
        choice = auto.choose_typed(leaves, lambda: probe.infer(*types))
        probe.auto = choice  # typed (and kept) for the tpu; a refused one cached nothing
        found = ops[key] = probe if choice.name == "tpu" else Op(program, tree, name, choice)
    return found, leaves if found.on_tpu else [_as_jax(x) for x in given]


def _as_jax(x, chip: bool = False):
    """A JAX array or tracer as it is; NumPy arrays and Python scalars converted (for
    the tpu, ``chip``, a Python scalar is 32-bit whatever ``jax_enable_x64`` says, as
    the tpu backend types it; a 64-bit array is refused by the backend, naming it)."""
    import jax
    import numpy as np

    if isinstance(x, jax.Array):
        return x
    if chip and isinstance(x, (bool, int, float)):
        return jax.numpy.asarray(x, np.bool_ if isinstance(x, bool) else np.int32 if isinstance(x, int) else
                                 np.float32)
    return jax.numpy.asarray(x)
