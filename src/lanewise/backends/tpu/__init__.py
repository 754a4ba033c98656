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
from ...errors import BackendError, LaneTypeError, OutputError
from ...plan.program import Call, ResultLeaf, ResultNode
from ...plan.program import bind_keeping
from .. import host

NAME = "tpu"
#: Jitted whole calls kept per executable (per argument shapes; the oldest dropped first).
MAX_WHOLES = 64
SCAN = "reference"


def bind_call(mapped, args: tuple, kwargs: dict) -> Call:
    """program.bind_call, with JAX arrays kept as they are: an array already on the
    chip is read there, not copied to the host and back."""
    return bind_keeping(mapped, args, kwargs, _is_jax_array)


def _is_jax_array(value) -> bool:
    return type(value).__module__.startswith("jax") and hasattr(value, "devices")


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
        from . import kernel, lower, rows

        self.interpret = _interpret()  # no TPU (and no interpret mode): say so before anything else
        leaves = call.signature.leaves
        self.rows = tuple(rows.spread(leaf) for leaf in leaves)  # None: a scalar lane argument
        self.travel = tuple(kernel.check_dtype(leaf.name, leaf.dtype if leaf.is_array else _scalar_dtype(leaf))
                            for leaf in leaves)
        self.bools = tuple(leaf.dtype.kind == "b" for leaf in leaves)
        self.loops = lower.has_loops(call.lane)
        self.tile = kernel.check_tile(config.tpu_tile if self.loops else config.tpu_block,
                                      "tpu_tile" if self.loops else "tpu_block")
        self.unroll = max(1, int(config.tpu_unroll))
        # a loop's lanes leave it tile by tile: only a loop-free lane's block is computed in strips
        self.strip = None if self.loops or config.tpu_strip is None else \
            kernel.check_tile(config.tpu_strip, "tpu_strip")
        self.made = {}  # the row results' lengths per layout and argument shapes (prepared)
        self.kernel = kernel
        self._wholes: dict = {}

    def __call__(self, call: Call, count_iterations: bool = False):
        import jax

        # JAX's 32-bit rules whatever the process chose (jax_enable_x64 would make Python
        # literals 64-bit, which the TPU does not compute)
        with jax.enable_x64(False):
            return self._run(call, count_iterations)

    def prepared(self, call: Call, count_iterations: bool = False, fold: str | None = None, made=None,
                 keep: str | None = None):
        """``call``'s layout, its compiled kernel and the arrays that carry its arguments.
        ``made``: the lengths of the row results (a scan's stacked ys), whose blocks take
        VMEM too: found by tracing the kernel once per layout (:attr:`made`).  ``fold``,
        ``keep``: an ``lw.reduce`` the kernel folds (:func:`.kernel.compiled`)."""
        where = self.layout(call, made or ())
        # the kernel numbers its lanes, padding and overhang included, in int32
        if where.grid[0] * where.tile[0] * where.grid[1] * where.tile[1] >= 2**31:
            raise BackendError(f"the tpu backend runs fewer than 2**31 lanes per call; this call has {where.lanes}")
        spreads = self.spreads(call, where)
        fn = self.kernel.compiled(call.lane, self.travel, self.bools, spreads, self.interpret, count_iterations,
                                  where.tile, self.unroll, where.plane, fold, keep, _tuple_params(call),
                                  *self.windows(call, made or ()), strip=self.strip)
        values = self.carried(call, call.values, where, spreads)
        if made is None and self.loops:
            key = (where, tuple(v.shape for v in values))
            if key not in self.made:
                self.made[key] = tuple(s.shape[0] for s in fn.types(where, *values)[0] if s.ndim == 3)
            if self.made[key]:
                return self.prepared(call, count_iterations, fold, self.made[key], keep)
        return where, fn, values

    def spreads(self, call: Call, where) -> tuple:
        """How each argument travels (:data:`.kernel.SPREADS`, or a row kind of :mod:`.rows`)."""
        return tuple(row or self.kernel.spread(leaf.axes if leaf.is_array else None, where)
                     for leaf, row in zip(call.signature.leaves, self.rows, strict=True))

    def carried(self, call: Call, values, where, spreads) -> list:
        """The arrays that carry ``values`` (the call's argument leaves) to the kernel."""
        from . import rows

        sizes = tuple(call.sizes)
        return [rows.carried(leaf, value, dtype, how, where, sizes, self.kernel.as_tiles) if how in rows.ROWS else
                self.kernel.carried(_levels(leaf, value, sizes, dtype), how, where, sizes)
                for leaf, value, dtype, how in zip(call.signature.leaves, values, self.travel, spreads, strict=True)]

    def whole(self, call: Call, fold: tuple | None = None):
        """One jitted function from ``call``'s argument leaves, as the user gave them, to
        its result leaves, placed where ``out_axes`` puts them (or, with ``fold``, an
        ``lw.reduce`` ``(op, axis)``: the reductions), and the program they belong to.
        Laying the arguments out, the kernel and placing the results are one XLA
        program, so that a call costs one dispatch: each eager ``jnp`` step would cost
        its own.  Cached per signature, argument shapes (a row's length), ``fold`` and the
        devices the call is split over (:mod:`.sharded`)."""
        from . import sharded

        key = (call.signature, tuple(np.shape(v) for v in call.values), tuple(call.sizes), fold, sharded.key(call))
        found = self._wholes.get(key)
        if found is None:
            if len(self._wholes) >= MAX_WHOLES:  # a new length per call must not pile up compiled calls
                self._wholes.pop(next(iter(self._wholes)))
            found = self._wholes[key] = self._whole(call, fold)
            if config.debug:  # the kernel as JAX traced it, with the call around it (LANEWISE_DEBUG=1)
                import jax

                print(f"# ---- lanewise tpu kernel of {getattr(call.lane, '__qualname__', call.lane)}\n"
                      f"{jax.make_jaxpr(getattr(found[0], 'jitted', found[0]))(*call.values)}")
        return found

    def _whole(self, call: Call, fold: tuple | None):
        import jax

        from . import bounds, sharded, stored

        split = sharded.whole(self, call, fold)  # over several devices (lw.config.tpu_devices)
        if split is not None:
            return split
        keep = None
        if fold:
            where, fn, values = self.prepared(call)
            mapped = self.mapped(call, where, fn, values)
            keep = stored.folded_side(fold[0], _reduction_spec(call, mapped, fold), where, self.kernel.FOLDS)
            if keep is False:  # the map's values, reduced after the kernel
                return stored.whole(self, call, fold, where, fn, mapped, self.kernel.place)
        run, program, _ = self.pipeline(call, fold, fold and fold[0], keep=keep)

        def pipeline(*given):
            found = []  # the kernel's bounds record, if it checks row reads
            out = run(given, found)
            return out, (found[0] if found else None)

        # a row read out of range: its LaneIndexError; .jitted is what LANEWISE_DEBUG prints
        return bounds.checked_call(jax.jit(pipeline), run.check), program

    def pipeline(self, call: Call, fold: tuple | None, folds: str | None, lanes=None, keep: str | None = None,
                 placed: bool = True):
        """``call``'s kernel with its arguments' layout around it, as a function of the
        argument leaves (traced in a caller's jit) to the reductions of ``folds`` (the
        op the kernel folds, over every lane or keeping the side ``keep`` of the plane)
        or, without, the lanes' results placed by ``out_axes`` (``placed=False``: in level
        order, as :mod:`.stored` reduces them); the program of the results (the map's,
        whose tree a reduction keeps) and the map's.  ``lanes``: of the layout, the lanes
        the kernel computes (a device's share, :mod:`.sharded`).  ``run(given, found)`` appends
        to ``found`` the kernel's bounds record (:mod:`.bounds`), if it checks row reads,
        which ``run.check(record)`` raises as the lane's LaneIndexError."""
        import jax

        from ...plan import reduction

        where, fn, values = self.prepared(call)
        mapped = self.mapped(call, where, fn, values)
        spec = _reduction_spec(call, mapped, fold) if fold else None  # refuses sums int32 would wrap
        if folds:
            where, fn, values = self.prepared(call, fold=folds, keep=keep)  # folded in the kernel
        spreads = self.spreads(call, where)
        sizes = tuple(call.sizes)

        def run(given, found: list | None = None):
            results, _, record = fn.inline(where, *self.carried(call, given, where, spreads),
                                           lanes=None if lanes is None else lanes(where))
            if found is not None and record is not None:
                found.append(record)
            if folds:  # a side of the plane kept: its results where out_axes puts the kept levels
                return [reduction.place(spec, o, r, sizes, xp=jax.numpy) if keep else r
                        for r, o in zip(results, mapped.outputs, strict=True)]
            return [self.kernel.place(self.kernel.from_tiles(r, where, sizes), o) if placed else
                    self.kernel.from_tiles(r, where, sizes) for r, o in zip(results, mapped.outputs, strict=True)]

        run.check = lambda record: fn.check(record, where, sizes)
        return run, mapped, mapped

    def mapped(self, call: Call, where, fn, values):
        """``call``'s program, its result types those of its kernel ``fn`` traced for
        ``where`` and ``values`` (:meth:`prepared`; a tile's shapes)."""
        shapes, tree = fn.types(where, *values)
        return host.program(call, _result_type(tree, shapes, 2))

    def layout(self, call: Call, made: tuple = ()):
        """Where ``call``'s lanes sit: tiles of ``self.tile``, fewer rows where row blocks
        (of the arguments' rows and the ``made`` row results) need it."""
        from . import rows

        lengths = self.lengths(call)
        fits = rows.fit_tile(self.tile, lengths, made=made) if lengths or made else self.tile
        return self.kernel.layout(tuple(call.sizes), fits)

    def lengths(self, call: Call) -> list:
        """The lengths of ``call``'s row arguments, in argument order."""
        from . import rows

        return [rows.length(leaf, v) for leaf, v, how in zip(call.signature.leaves, call.values, self.rows,
                                                             strict=True) if how == "rows"]

    def windows(self, call: Call, made: tuple = ()) -> tuple:
        """The planes of the VMEM window (:func:`.rows.windows`) of each argument (None where it
        does not stream) and of each row result (``made``, their lengths)."""
        from . import rows

        given, results = rows.windows(self.lengths(call), made)
        streams = iter(given)
        return tuple(next(streams) if how == "rows" else None for how in self.rows), results

    def _run(self, call: Call, count_iterations: bool):
        where, fn, values = self.prepared(call, count_iterations)
        results, tree, iterations = fn(where, *values, sizes=tuple(call.sizes))
        return [self.kernel.from_tiles(r, where, tuple(call.sizes)) for r in results], tree, iterations

    def lowered(self, call: Call) -> str:
        """``call``'s kernel lowered for a TPU, on any machine (:func:`.kernel.compiled`'s
        ``lowered``): what CI checks of Mosaic without a chip.  An executable built off
        interpret mode (a TPU's)."""
        import jax

        with jax.enable_x64(False):
            where, fn, values = self.prepared(call)
            return fn.lowered(where, *values)

    def kernel_text(self, call: Call) -> str:
        """The kernel of ``call`` as JAX traces it (``lw.explain``'s "generated kernel")."""
        import jax

        with jax.enable_x64(False):
            where, fn, values = self.prepared(call)
            return fn.text(where, *values)


def _tuple_params(call: Call) -> tuple | None:
    """The pytree structure of each lane parameter when one takes a tuple (the kernel gets
    one value per leaf and regroups them), else None."""
    params = call.signature.params
    if all(p.tree.num_leaves == 1 and p.tree.is_leaf() for p in params) or any(p.keyword for p in params):
        return None
    return tuple(p.tree for p in params)


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
        raise OutputError("out= is not supported on the tpu backend: its results are new jax.Arrays")
    return _called(exe, call)


def _called(exe: Executable, call: Call, fold: tuple | None = None):
    """``call`` run through ``exe``'s jitted whole call, its results unflattened."""
    import jax

    with jax.enable_x64(False):  # JAX's 32-bit rules (see Executable.__call__)
        fn, program = exe.whole(call, fold)
        return pytree.unflatten(program.out_tree, fn(*call.values))


def trace(exe, call: Call) -> None:
    """Trace ``exe``'s whole call of ``call`` (an :class:`Executable` or a :class:`Reduction`),
    without running it; kept for the run.  A construct this backend does not lower
    raises here: ``backend="auto"`` then chooses the cpu backend (:mod:`..auto`)."""
    import jax

    with jax.enable_x64(False):  # JAX's 32-bit rules (see Executable.__call__)
        if isinstance(exe, Reduction):
            exe.exe.whole(call, (exe.op, exe.axis))
        else:
            exe.whole(call)


def fast_launcher(exe: Executable, call: Call, miss, fold: tuple | None = None):
    """A launcher for the next calls whose arguments have ``call``'s exact types,
    shapes and dtypes: the jitted whole call (:meth:`Executable.whole`, of ``fold``
    for a reduction) without binding again, which costs a few hundred microseconds
    of Python, a third of W1's kernel time on the chip.  Only top-level NumPy or JAX
    arrays (no pytrees, keywords or Python scalars, whose values binding checks);
    for any other argument, or any difference, it returns ``miss`` and the slow path
    binds properly (and raises the right error).  None when ``call`` is not eligible."""
    if any(p.keyword is not None or p.tree.num_nodes != 1 for p in call.signature.params):
        return None
    if not all(type(v) is np.ndarray or (_is_jax_array(v) and not _is_tracer(v)) for v in call.values):
        return None
    import jax

    fn, program = exe.whole(call, fold)
    tree, x64, config_ = program.out_tree, jax.enable_x64, jax.config
    # the dtype compares its byte order too: a big-endian array binds as a converted copy
    want = tuple((type(v), tuple(v.shape), np.dtype(v.dtype)) for v in call.values)

    def launch(args: tuple):
        if len(args) != len(want):
            return miss
        for a, (kind, shape, dtype) in zip(args, want, strict=True):
            if type(a) is not kind or a.shape != shape or a.dtype != dtype:
                return miss
        if not config_.jax_enable_x64:  # entering x64(False) costs ten microseconds
            return pytree.unflatten(tree, fn(*args))
        with x64(False):  # JAX's 32-bit rules (see Executable.__call__)
            return pytree.unflatten(tree, fn(*args))

    return launch


def _is_tracer(value) -> bool:
    """A JAX tracer (a lanewise call inside ``jax.jit``): bound afresh on every call."""
    import jax

    return isinstance(value, jax.core.Tracer)


def iterations(exe: Executable, call: Call):
    """The loop iterations each tile of ``call`` ran (a debugging aid: per-tile early exit)."""
    return exe(call, count_iterations=True)[2]


def _result_type(tree, flat, levels: int):
    """The lane's result type from the lowered kernel's results (``levels`` axes of them
    are the lanes': a row result has one more; a lane's constant result is traced 0-d,
    and stored broadcast to its tile)."""
    import jax

    def node(value):
        return ResultNode(tuple(map(node, value)), None) if isinstance(value, tuple) else value

    return node(jax.tree.unflatten(tree, [ResultLeaf(np.dtype(v.dtype), max(0, len(v.shape) - levels)) for v in flat]))


def _strips(exe, call: Call) -> str:
    """How a loop-free kernel computes each tile: in strips (a long lane) or whole."""
    import jax

    if exe.strip is None:
        return ""
    with jax.enable_x64(False):
        where, fn, values = exe.prepared(call)
        strip = fn.strip(where, *values)
    return (f", each computed {strip[0]} x {strip[1]} lanes at a time (a long lane: lw.config.tpu_strip)"
            if strip else "")


def explain(exe, call: Call) -> list[str]:
    from . import sharded

    split = sharded.explain(call)  # the devices the outer level is split over, if several
    where = exe.layout(sharded.local(call))  # one device's share
    rows, cols = where.tile
    placed = (f"the lanes as a {where.rows} x {where.cols} plane (the last vmap level along columns), "
              f"each tile a block of it" if where.plane else "the lanes in C order, filling each tile row by row")
    spreads = [f"{leaf.name} as {row or exe.kernel.spread(leaf.axes if leaf.is_array else None, where)}"
               for leaf, row in zip(call.signature.leaves, exe.rows, strict=True)]
    looping = (f"a loop leaves a tile when all of its lanes are done, checked every {exe.unroll} iteration(s)"
               if exe.loops else "no loop: tiles of lw.config.tpu_block" + _strips(exe, call))
    return [f"schedule: one Pallas kernel over a {where.grid[0]} x {where.grid[1]} grid of ({rows}, {cols}) tiles; "
            f"{placed}; {looping}" + (" (interpret mode: on the CPU)" if exe.interpret else ""),
            "arguments carried: " + (", ".join(spreads) or "none") + " (scalar: one value; row/col: one per "
            "row/column of the plane; lanes: one per lane; rows: a plane per index of the lanes' 1-D rows; "
            "table: an unmapped 1-D array in scalar memory)"] + ([split] if split else [])


def build_reduce(op, axis, call: Call):
    """``lw.reduce`` of ``call``'s lanes, in the map's jitted whole call.  Every mapped
    axis of scalar lanes with an op of :data:`.kernel.FOLDS`: each tile folds its lanes
    into a register of partials (no lane's value is stored), then one reduction of the
    partials.  ``axis=`` keeping levels, argmin/argmax, a ``lw.Monoid``, ``segments=``
    and per-lane arrays: the map's values, reduced by XLA after the kernel (:mod:`.stored`)."""
    return Reduction(Executable(call), op, axis)


class Reduction:
    """A reduction's kernel: the map's :class:`Executable`, folding."""

    def __init__(self, exe: Executable, op, axis):
        self.exe, self.op, self.axis = exe, op, axis

    def __call__(self, call: Call):
        return _called(self.exe, call, (self.op, self.axis))

    def fast_launcher(self, call: Call, miss):
        """:func:`fast_launcher` of the reduction (``lw.reduce``'s repeated calls)."""
        return fast_launcher(self.exe, call, miss, (self.op, self.axis))


def _reduction_spec(call: Call, program, fold: tuple):
    """The spec of ``lw.reduce(..., op, axis)`` (``fold``) of ``call``'s ``program``
    (its traced kernel's result types), with the sums the TPU's int32 would wrap refused."""
    from ...plan import reduction

    op, axis = fold
    spec = reduction.reduce_spec(op, axis, program)
    values = program.outputs[1:] if spec.segmented else program.outputs  # a segment is no value
    wraps = [o.name for o in values if o.dtype.kind in "iu" and op in ("sum", "prod", "mean")]
    if wraps:
        raise LaneTypeError(f"lw.reduce(..., {op!r}) of integer lane results ({', '.join(wraps)}) on the "
                            "tpu backend would wrap at 2**31 (the TPU has no int64): return float32 (or a "
                            "bool, which counts), or reduce on the cpu backend")
    return spec


def run_reduce(exe: Reduction, call: Call):
    return exe(call)
