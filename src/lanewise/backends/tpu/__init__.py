"""The tpu backend: a lane lowered from the lane IR to one Pallas kernel over tiles of lanes.

``lw.vmap(lane, backend="tpu")`` flattens the call's lanes, lays them out in
(8, 128) tiles (:mod:`.kernel`) and runs one ``pl.pallas_call`` whose grid walks
the tiles; the kernel body is the lane lowered SPMD style from its IR
(:mod:`.lower`): branches as selects under masks, loops as ``lax.while_loop``
that a tile leaves when all of its own lanes are done.  Results are
``jax.Array``; arguments may be NumPy or JAX arrays and Python scalars.

The TPU computes float32 and int32: a float64 or int64 argument is refused with
the fix (pass float32), Python literals and integer overflow follow JAX's 32-bit
rules (docs/lanes.md).  Without a TPU, ``LANEWISE_TPU_INTERPRET=1`` (or
``lw.config.tpu_interpret``) runs the same kernels in Pallas' interpret mode on
the CPU, as CI does.  JAX is imported only when this backend is used.

Example:
    >>> import numpy as np, lanewise as lw
    >>> with lw.config.overridden(tpu_interpret=True):
    ...     lw.vmap(lambda x: x * 2 if x > 1 else -x, backend="tpu")(np.arange(4, dtype=np.float32))
    Array([-0., -1.,  4.,  6.], dtype=float32)
"""

from __future__ import annotations

import numpy as np

from ... import pytree
from ...config import config
from ...errors import BackendError, LaneCompileError, LaneTypeError
from ...plan.program import Call, ResultLeaf, ResultNode
from ...plan.program import bind_call as bind_call  # the protocol's binding: program.bind_call
from .. import host

NAME = "tpu"
SCAN = "reference"


def usable() -> bool:
    """JAX imports and either a TPU is attached or interpret mode is on."""
    try:
        import jax
    except ImportError:
        return False
    return config.tpu_interpret or jax.default_backend() == "tpu"


def _interpret() -> bool:
    import jax

    if config.tpu_interpret:
        return True
    if jax.default_backend() != "tpu":
        raise BackendError(f"backend='tpu' found no TPU (JAX's default backend is {jax.default_backend()!r}); "
                           "set LANEWISE_TPU_INTERPRET=1 (or lw.config.tpu_interpret = True) to run the same "
                           "Pallas kernels in interpret mode on the CPU")
    return False


class Executable:
    """A lane's kernel for one signature: the argument dtypes as they travel, and the jitted call."""

    def __init__(self, call: Call):
        from . import kernel, lower

        self.interpret = _interpret()  # no TPU (and no interpret mode): say so before anything else
        leaves = call.signature.leaves
        for leaf in leaves:
            if leaf.lane_ndim:
                raise LaneCompileError(f"argument {leaf.name} gives each lane an array; the tpu backend "
                                       "lowers scalar lanes only (for now)")
        self.travel = tuple(kernel.check_dtype(leaf.name, leaf.dtype if leaf.is_array else _scalar_dtype(leaf))
                            for leaf in leaves)
        self.bools = tuple(leaf.dtype.kind == "b" for leaf in leaves)
        self.loops = lower.has_loops(call.lane)
        self.tile = kernel.check_tile(config.tpu_tile if self.loops else config.tpu_block,
                                      "tpu_tile" if self.loops else "tpu_block")
        self.unroll = max(1, int(config.tpu_unroll))
        self.kernel = kernel

    def __call__(self, call: Call, count_iterations: bool = False):
        import jax

        # JAX's 32-bit rules whatever the process chose (jax_enable_x64 would make Python
        # literals 64-bit, which the TPU does not compute)
        with jax.enable_x64(False):
            return self._run(call, count_iterations)

    def prepared(self, call: Call, count_iterations: bool = False, fold: str | None = None):
        """``call``'s layout, its compiled kernel and the arrays that carry its arguments."""
        sizes = tuple(call.sizes)
        where = self.kernel.layout(sizes, self.tile)
        if where.lanes >= 2**31:  # the kernel numbers its lanes in int32
            raise BackendError(f"the tpu backend runs fewer than 2**31 lanes per call; this call has {where.lanes}")
        leaves = call.signature.leaves
        spreads = tuple(self.kernel.spread(leaf.axes if leaf.is_array else None, where) for leaf in leaves)
        fn = self.kernel.compiled(call.lane, self.travel, self.bools, spreads, self.interpret, count_iterations,
                                  where.tile, self.unroll, where.plane, fold)
        values = [self.kernel.carried(_levels(leaf, value, sizes, dtype), how, where, sizes)
                  for leaf, value, dtype, how in zip(leaves, call.values, self.travel, spreads, strict=True)]
        return where, fn, values

    def _run(self, call: Call, count_iterations: bool):
        where, fn, values = self.prepared(call, count_iterations)
        results, tree, iterations = fn(where, *values)
        return [self.kernel.from_tiles(r, where, tuple(call.sizes)) for r in results], tree, iterations

    def kernel_text(self, call: Call) -> str:
        """The kernel of ``call`` as JAX traces it (``lw.explain``'s "generated kernel")."""
        import jax

        with jax.enable_x64(False):
            where, fn, values = self.prepared(call)
            return fn.text(where, *values)


def _scalar_dtype(leaf) -> np.dtype:
    """A Python scalar argument computes as JAX types it: int32, float32, bool."""
    if leaf.dtype == np.uint32:  # a key word (lw.random) keeps its 32 bits
        return leaf.dtype
    return {"b": np.dtype(bool), "i": np.dtype(np.int32), "u": np.dtype(np.int32),
            "f": np.dtype(np.float32)}.get(leaf.dtype.kind, leaf.dtype)


def _levels(leaf, value, sizes, dtype):
    """``value`` with one axis per vmap level (in level order), of size 1 where the
    argument is not mapped: not broadcast, so that an argument varying along one
    side of the lanes travels as that side only (:func:`.kernel.carried`)."""
    import jax.numpy as jnp

    if not leaf.is_array:
        return jnp.full((1,) * len(sizes), value, dtype)
    arr = jnp.asarray(value)
    mapped = [(lv, a) for lv, a in enumerate(leaf.axes) if a is not None]
    arr = jnp.moveaxis(arr, [a for _, a in mapped], list(range(len(mapped))))
    shape = [1] * len(sizes)
    for k, (lv, _) in enumerate(mapped):
        shape[lv] = arr.shape[k]
    return arr.reshape(shape).astype(dtype)


def build(call: Call):
    """The lane's kernel for this call's signature (lowered and compiled on first run)."""
    return Executable(call)


def run(exe: Executable, call: Call, out=None):
    if out is not None:
        raise BackendError("out= is not supported on the tpu backend: its results are new jax.Arrays")
    flat, tree, _ = exe(call)
    program = host.program(call, _result_type(tree, flat))
    placed = [_place(v, o.level_dims) for v, o in zip(flat, program.outputs, strict=True)]
    return pytree.unflatten(program.out_tree, placed)


def iterations(exe: Executable, call: Call):
    """The loop iterations each tile of ``call`` ran (a debugging aid: per-tile early exit)."""
    return exe(call, count_iterations=True)[2]


def _result_type(tree, flat):
    """The lane's result type from the lowered kernel's results."""
    import jax

    def node(value):
        return ResultNode(tuple(map(node, value)), None) if isinstance(value, tuple) else value

    return node(jax.tree.unflatten(tree, [ResultLeaf(np.dtype(v.dtype), 0) for v in flat]))


def _place(values, level_dims):
    """Lane results (levels in order) where ``out_axes`` puts them (index 0 of an unmapped level)."""
    import jax.numpy as jnp

    keep = [lv for lv, d in enumerate(level_dims) if d is not None]
    if len(keep) < len(level_dims):  # an unmapped level: no slice of the whole result (a copy)
        values = values[tuple(slice(None) if d is not None else 0 for d in level_dims)]
    order = sorted(range(len(keep)), key=lambda k: level_dims[keep[k]])
    return jnp.transpose(values, order) if order != sorted(order) else values


def explain(exe, call: Call) -> list[str]:
    where = exe.kernel.layout(tuple(call.sizes), exe.tile)
    rows, cols = where.tile
    placed = (f"the lanes as a {where.rows} x {where.cols} plane (the last vmap level along columns), "
              f"each tile a block of it" if where.plane else "the lanes in C order, filling each tile row by row")
    spreads = [f"{leaf.name} as {exe.kernel.spread(leaf.axes if leaf.is_array else None, where)}"
               for leaf in call.signature.leaves]
    looping = (f"a loop leaves a tile when all of its lanes are done, checked every {exe.unroll} iteration(s)"
               if exe.loops else "no loop: tiles of lw.config.tpu_block")
    return [f"schedule: one Pallas kernel over a {where.grid[0]} x {where.grid[1]} grid of ({rows}, {cols}) tiles; "
            f"{placed}; {looping}" + (" (interpret mode: on the CPU)" if exe.interpret else ""),
            "arguments carried: " + (", ".join(spreads) or "none") + " (scalar: one value; row/col: one per "
            "row/column of the plane; lanes: one per lane)"]


def build_reduce(op, axis, call: Call):
    """``lw.reduce`` of ``call``'s lanes: the map's kernel, each tile folding its lanes
    into a register of partials (no lane's value is stored), then one reduction of
    the partials, in the same jitted call.  Every mapped axis is reduced; the ops of
    :data:`.kernel.FOLDS`."""
    from . import kernel

    name = op if isinstance(op, str) else type(op).__name__
    if name not in kernel.FOLDS:
        raise BackendError(f"lw.reduce(..., {op!r}) is not supported on the tpu backend yet "
                           f"(it folds {', '.join(kernel.FOLDS)})")
    if axis is not None and not isinstance(axis, (int, tuple)):
        raise BackendError("lw.reduce with segments= is not supported on the tpu backend yet")
    return Reduction(Executable(call), op, axis)


class Reduction:
    """A reduction's kernel: the map's :class:`Executable`, folding."""

    def __init__(self, exe: Executable, op: str, axis):
        self.exe, self.op, self.axis = exe, op, axis

    def spec(self, call: Call, where, fn, values):
        """The plan layer's spec of this reduction (its checks included), from the traced kernel."""
        from ...plan import reduction

        shapes, tree = fn.types(where, *values)
        program = host.program(call, _result_type(tree, shapes))
        spec = reduction.reduce_spec(self.op, self.axis, program)
        if spec.kept or any(spec.lane_ndims):
            raise BackendError("lw.reduce on the tpu backend reduces every mapped axis of scalar lanes "
                               f"(axis={self.axis!r} keeps some): reduce on the cpu backend, or reduce the "
                               "mapped result with jnp")
        wraps = [o.name for o in program.outputs if o.dtype.kind in "iu" and self.op in ("sum", "prod", "mean")]
        if wraps:
            raise LaneTypeError(f"lw.reduce(..., {self.op!r}) of integer lane results ({', '.join(wraps)}) on the "
                                "tpu backend would wrap at 2**31 (the TPU has no int64): return float32, or "
                                "reduce on the cpu backend")
        return program

    def __call__(self, call: Call):
        import jax

        with jax.enable_x64(False):
            where, fn, values = self.exe.prepared(call, fold=self.op)
            program = self.spec(call, where, fn, values)
            results, _tree, _ = fn(where, *values)
            return pytree.unflatten(program.out_tree, results)


def run_reduce(exe: Reduction, call: Call):
    return exe(call)
