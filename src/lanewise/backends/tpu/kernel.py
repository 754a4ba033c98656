"""One Pallas kernel per lane: the lanes laid out in (8, 128) tiles, one grid step per tile.

The lanes of a call (every index of every vmap level, in C order) are flattened
and padded to a whole number of tiles of ``TILE`` = (8, 128) lanes, the shape of
a TPU vector register; each argument becomes a ``(tiles * 8, 128)`` array and the
kernel's grid walks its tiles.  Inside, the lane's tile function (:mod:`.lower`)
computes every lane of the tile; the padding lanes are outside ``valid``, so no
loop runs for them.  Arguments are 32-bit on the chip: bools travel as int32,
int8/int16/uint8/uint16 are widened to int32 (their values kept), uint32 (lw.random's
key words) stays uint32, and 64-bit or complex arguments are refused
(:func:`check_dtype`), never silently narrowed.

Example:
    >>> import numpy as np
    >>> try:
    ...     check_dtype("x", np.dtype("float64"))
    ... except LaneTypeError as e:
    ...     print(str(e).split(": ")[-1])
    pass x.astype(np.float32)
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.experimental import pallas as pl

from ...config import config
from ...errors import BackendError, LaneTypeError
from . import bounds as _bounds
from . import rows as _rows
from . import trig as _trig
from .lower import lower

#: Lanes per tile: (sublanes, lanes) of a TPU vector register.
TILE = (8, 128)
#: Operations (JAX equations, those of nested ones counted) from which a loop-free lane
#: computes its block in strips of ``lw.config.tpu_strip`` lanes: on a TPU v5e, strips ran
#: a lane of about 1,000 (a normal draw) 2.1x faster than whole (256, 1024) blocks, and W1's
#: lane of about 10 (a cos, a division) 1.3x slower (benchmarks/device/tpu_strips.py, BENCHMARKS.md).
LONG = 100
#: Argument dtypes the chip computes, as they travel to it (bools as int32).
_CARRIED = {"b": np.dtype(np.int32), "f4": np.dtype(np.float32), "f2": np.dtype(np.float32)}
#: What to pass instead of a refused dtype.
_INSTEAD = {"f": "np.float32", "i": "np.int32", "u": "np.uint32", "c": "two float32 arrays (real, imaginary)"}


def check_dtype(name: str, dtype: np.dtype) -> np.dtype:
    """The dtype argument ``name`` of ``dtype`` travels to the chip as; a LaneTypeError
    naming the argument and the fix for a dtype the TPU does not compute."""
    dtype = np.dtype(dtype)
    if dtype.kind == "b":
        return np.dtype(np.int32)
    if dtype.kind in "iu" and dtype.itemsize < 4 or dtype == np.int32:
        return np.dtype(np.int32)
    if dtype == np.uint32:  # lw.random's key words: the chip computes uint32 (wrapping, logical shifts)
        return dtype
    if dtype in (np.dtype(np.float32), np.dtype(np.float16)) or dtype.name == "bfloat16":
        return dtype
    instead = _INSTEAD.get(dtype.kind, "np.float32")
    fix = f"{name}.astype({instead})" if dtype.kind != "c" else instead
    raise LaneTypeError(f"argument {name} is {dtype}, which the tpu backend does not compute "
                        f"(TPUs compute 32-bit numbers): pass {fix}")


def check_tile(tile, name: str = "tpu_tile") -> tuple:
    """``lw.config.<name>`` (``tpu_tile`` or ``tpu_block``) as (rows, columns), or a
    BackendError: a whole number of (8, 128) registers."""
    try:
        rows, cols = (int(v) for v in tile)
    except (TypeError, ValueError):
        rows = cols = 0
    if rows <= 0 or cols <= 0 or rows % TILE[0] or cols % TILE[1]:
        raise BackendError(f"lw.config.{name} = {tile!r}: the tile must be (rows, columns), multiples of "
                          f"{TILE} (the TPU's vector register), e.g. (8, 512)")
    return rows, cols


@dataclass(frozen=True)
class Layout:
    """Where a call's lanes sit in the kernel's tiles.

    ``plane`` (2-D): with two or more vmap levels and a last level at least a
    register (128 lanes) wide, lane (i, j) of the (rows, cols) grid -- the last level along columns, the
    others flattened into rows -- sits at (i, j): a tile holds a block of
    neighbouring lanes, which a divergent loop finishes together more often than a
    strip of one row (the set of a fractal crosses fewer 8 x 512 blocks than
    1 x 4096 strips).  The plane's arrays keep their exact shape: the edge tiles
    hang over it, and Pallas reads undefined values there and drops their
    writes (no padded copy of an input or result).  Otherwise the lanes, flattened
    in C order, fill the tiles row by row (``plane`` False), padded to whole tiles.
    ``shape``: the arrays' shape; ``grid``: the tiles along each axis; ``tile``:
    the lanes of one grid step, never more rows or columns than the lanes need."""

    rows: int
    cols: int
    lanes: int
    plane: bool
    shape: tuple
    grid: tuple
    tile: tuple


def layout(sizes: tuple, tile: tuple = TILE) -> Layout:
    """The layout of lanes of ``sizes`` (one per vmap level) in tiles of at most ``tile``.

    Example:
        >>> where = layout((1536, 1000), (8, 512))
        >>> where.grid, where.shape, layout((10,), (256, 1024)).tile
        ((192, 2), (1536, 1000), (8, 1024))
    """
    lanes = int(np.prod(sizes)) if sizes else 1
    plane = len(sizes) >= 2 and sizes[-1] >= TILE[1] and lanes > 0
    rows, cols = (lanes // sizes[-1], sizes[-1]) if plane else (max(1, -(-lanes // tile[1])), tile[1])
    tile = tuple(min(t, -(-n // r) * r) for t, n, r in zip(tile, (rows, cols), TILE, strict=True))
    grid = (max(1, -(-rows // tile[0])), max(1, -(-cols // tile[1])))
    shape = (rows, cols) if plane else (grid[0] * tile[0], tile[1])
    return Layout(rows, cols, lanes, plane, shape, grid, tile)


#: How an argument's values spread over the lane plane, and the array that carries them:
#: ``scalar`` one value for every lane (scalar memory, shape (1,)); ``row`` one value per
#: row of the plane (rows, 1); ``col`` one per column (1, cols); ``lanes`` one per lane.
SPREADS = ("scalar", "row", "col", "lanes")


def spread(axes: tuple | None, where: Layout) -> str:
    """How an argument mapped at ``axes`` (one entry per vmap level, None where
    unmapped; None for a Python scalar) spreads over ``where``'s lanes: an
    argument that varies along one side of the plane only travels as that side
    (W1's coordinates: two vectors instead of two planes of the grid's size).

    Example:
        >>> where = layout((300, 400), (8, 128))
        >>> [spread(a, where) for a in (None, (None, 0), (0, None), (0, 1))]
        ['scalar', 'col', 'row', 'lanes']
    """
    levels = [lv for lv, a in enumerate(axes or ()) if a is not None]
    if not levels:
        return "scalar"
    if not where.plane:
        return "lanes"
    last = levels[-1] == len(axes) - 1
    return "col" if levels == [len(axes) - 1] else "lanes" if last else "row"


def carried(values, how: str, where: Layout, sizes: tuple):
    """An argument's lane values as the array that carries them to the kernel (see
    :data:`SPREADS`): ``values`` has one axis per vmap level, of size 1 where the
    argument is not mapped, so that only a ``lanes`` argument is broadcast to every lane."""
    values = jnp.asarray(values)
    if how == "scalar":
        return jnp.ravel(values)[:1]
    if how == "row":
        return jnp.broadcast_to(values, tuple(sizes[:-1]) + (1,)).reshape(where.rows, 1)
    if how == "col":
        return values.reshape(1, where.cols)
    return as_tiles(jnp.broadcast_to(values, tuple(sizes)), where)


def as_tiles(values, where: Layout):
    """Lane values (shaped as the call's lanes) as ``where.shape``: the plane itself,
    or the flattened lanes padded with their last value (padding lanes compute on
    real numbers, and run no loop)."""
    flat = jnp.ravel(jnp.asarray(values))
    if where.plane:
        return flat.reshape(where.shape)
    pad = where.shape[0] * where.shape[1] - flat.shape[0]
    fill = flat[-1:] if flat.shape[0] else jnp.zeros(1, flat.dtype)
    return jnp.concatenate([flat, jnp.broadcast_to(fill, (pad,))]).reshape(where.shape)


def from_tiles(values, where: Layout, sizes: tuple):
    """The kernel's results back in the call's lane shape (a row result's index last)."""
    if values.ndim == 3:  # a row result (rows.Stacked): a plane per index of the rows
        return jnp.moveaxis(jax.vmap(lambda v: from_tiles(v, where, sizes))(values), 0, -1)
    if where.plane:
        return values.reshape(sizes)
    return values.reshape(-1)[:where.lanes].reshape(sizes)


#: ``lw.reduce`` ops the kernel folds: (the identity for a dtype, the combination).
FOLDS = {
    "sum": (lambda d: 0, jnp.add), "mean": (lambda d: 0, jnp.add), "prod": (lambda d: 1, jnp.multiply),
    "min": (lambda d: jnp.inf if jnp.issubdtype(d, jnp.floating) else jnp.iinfo(d).max, jnp.minimum),
    "max": (lambda d: -jnp.inf if jnp.issubdtype(d, jnp.floating) else jnp.iinfo(d).min, jnp.maximum),
    "any": (lambda d: 0, jnp.maximum), "all": (lambda d: 1, jnp.minimum),
}
#: Folds of truth values (the lanes' values compared with 0 first).
_TRUTH = ("any", "all")
#: What the host does with the partials: one per op.
_FINISH = {"sum": jnp.sum, "mean": jnp.sum, "prod": jnp.prod, "min": jnp.min, "max": jnp.max, "any": jnp.max,
           "all": jnp.min}


def fold_tile(value, op: str, valid, keep: str | None = None):
    """A tile's values of ``valid`` lanes folded with ``op`` into one (8, 128) register
    of partials (the others count as the identity): a balanced tree of register-sized
    slices, so that a float sum's rounding grows with the log of the tile's size.
    ``keep``: ``"rows"`` folds only along the columns, a partial per row of the tile
    (rows, 128); ``"cols"`` only along the rows (8, columns) (:func:`folded_block`)."""
    identity, combine = FOLDS[op]
    if valid is not None:  # None: every lane of the tile is real
        value = jnp.where(valid, value, jnp.asarray(identity(value.dtype), value.dtype))
    step = folded_block(value.shape, keep)
    parts = [value[r:r + step[0], c:c + step[1]] for r in range(0, value.shape[0], step[0])
             for c in range(0, value.shape[1], step[1])]
    while len(parts) > 1:
        parts = [combine(a, b) for a, b in zip(parts[::2], parts[1::2], strict=False)] + parts[len(parts) & ~1:]
    return parts[0]


def folded_block(tile: tuple, keep: str | None) -> tuple:
    """The partials a folding tile writes: one register, or with ``keep`` a register
    column per row of the tile (``"rows"``) or a register row per column (``"cols"``)."""
    return {"rows": (tile[0], TILE[1]), "cols": (TILE[0], tile[1])}.get(keep, TILE)


def _finish(out, op: str, keep: str | None, lanes, plane: tuple):
    """One reduction of the tiles' partials ``out``: a 0-d result, or with ``keep`` one per
    row (column) of the ``plane`` (its (rows, columns)); a mean divided by its lanes."""
    axis = {"rows": 1, "cols": 0}.get(keep)
    result = _FINISH[op](out, axis=axis)
    if keep:
        result = result[:plane[1 - axis]]
    if op == "mean":
        count = lanes[axis].astype(jnp.float32) if keep else jnp.prod(lanes.astype(jnp.float32))
        result = result / count
    return result


def _store_folded(ref, value, op: str, lanes_ref, ids, valid, keep: str | None = None):
    """``ref[...]`` = the tile's partials of ``value``: only a tile that overhangs the
    lanes masks its values (``valid()``, computed in that branch only), so that an
    inner tile of a loop-free lane folds at the cost of the additions alone."""
    shape = value.shape
    ends = [(ids[k] + 1) * shape[k] for k in (0, 1)]
    edge = (ends[0] > lanes_ref[0]) | (ends[1] > lanes_ref[1]) if lanes_ref.shape[0] == 2 else \
        ends[0] * shape[1] > lanes_ref[0]

    @pl.when(edge)
    def _masked():
        ref[...] = fold_tile(value, op, valid(), keep)

    @pl.when(jnp.logical_not(edge))
    def _inner():
        ref[...] = fold_tile(value, op, None, keep)


@functools.lru_cache(maxsize=256)
def compiled(lane, dtypes: tuple, bools: tuple, spreads: tuple, interpret: bool, count_iterations: bool = False,
             tile: tuple = TILE, unroll: int = 1, plane: bool = False, fold: str | None = None,
             keep: str | None = None, params: tuple | None = None, windows: tuple | None = None,
             drains: tuple = (), strip: tuple | None = None):
    """The jitted function of ``lane`` over arguments of ``dtypes`` carried as
    ``spreads`` (:func:`carried`; ``bools``: which are bools travelling as int32):
    ``f(where, *carried) -> (results, structure, iterations)``; its results have
    ``where.shape`` (bools as int32) and ``iterations``, with ``count_iterations``,
    the loop iterations each tile ran, one per tile.  ``tile``: lanes per grid step
    (rows, columns); ``unroll``: loop iterations per "any lane active" check;
    ``plane``: the :class:`Layout` kind (``lanes``, read from scalar memory, is then
    (rows, cols) of the lane grid; else the lane count).  ``fold``: an op of
    :data:`FOLDS` (``lw.reduce``): each tile writes its register of partials and the
    results are the lanes' reductions, 0-d (bools as bools); with ``keep`` (a plane's
    ``"rows"`` or ``"cols"``), one per row (column) of the plane, its other side reduced.
    ``params``: the lane's tuple parameters (:func:`.lower.lower`), None when each is one leaf.
    ``windows``: per argument, the planes of a streamed row's VMEM window (:func:`.rows.windows`),
    None for one that travels whole (the default for every argument); ``drains``: the same for
    each row result (a scan's stacked ys, in result order), streamed out (:class:`.rows.Drain`).
    ``strip``: ``lw.config.tpu_strip``, the lanes a grid step computes at a time when the lane is
    long (:data:`LONG`) and has no loop, rows or iteration count (:func:`_in_strips`).
    A lane that reads a row at an index computed at run time has one more result, a
    block of :mod:`.bounds` records per grid step: ``f`` then gives the first lane's record
    (:func:`.bounds.first`) after ``iterations``, else None."""
    shape = tuple(tile)
    block = folded_block(shape, keep) if fold else shape
    tile_fn = lower(lane, count_iterations, unroll, params)
    structure = {"sites": _bounds.Sites()}  # the checked row reads, met as the kernel is typed
    windows = windows or (None,) * len(dtypes)
    streamed = [k for k, w in enumerate(windows) if w]  # each has 3 scratch refs (rows.scratch)

    def valid_of(lanes_ref, ids):
        """The tile's real lanes (not the padding or the overhang past the plane's edges);
        ``ids``: the tile's program ids (read outside any branch: interpret mode reads
        them only there)."""
        rows = ids[0] * shape[0] + lax.broadcasted_iota(jnp.int32, shape, 0)
        cols = ids[1] * shape[1] + lax.broadcasted_iota(jnp.int32, shape, 1)
        if plane:
            return (rows < lanes_ref[0]) & (cols < lanes_ref[1])
        return rows * shape[1] + cols < lanes_ref[0]

    def valid_at(lanes_ref, ids, at: tuple, part: tuple):
        """The real lanes of the ``part``-shaped piece of the tile at offset ``at`` in it."""
        rows = ids[0] * shape[0] + at[0] + lax.broadcasted_iota(jnp.int32, part, 0)
        cols = ids[1] * shape[1] + at[1] + lax.broadcasted_iota(jnp.int32, part, 1)
        if plane:
            return (rows < lanes_ref[0]) & (cols < lanes_ref[1])
        return rows * shape[1] + cols < lanes_ref[0]

    def records_of(outs: list):
        """The grid step's block of bounds records (the last result), or None."""
        return outs.pop() if structure["sites"].checked else None

    def kernel(lanes_ref, *refs):
        ids = (pl.program_id(0), pl.program_id(1))  # outside any branch: interpret mode reads them only there
        guard = structure["guard"]
        if guard is None:
            return body(lanes_ref, ids, refs)
        # a grid step whose trig arguments stay bounded runs the cheaper kernel (.trig)
        ok = guard.ok([_interval(refs[k - 1], spreads[k - 1]) for k in guard.needed])
        ok = jnp.min(jnp.where(ok, 1.0, 0.0)) > 0.5  # one register of answers, all equal: a scalar

        # the exact kernel traced first: a trace JAX might cache and reuse is then never the bounded one
        @pl.when(jnp.logical_not(ok))
        def _exact():
            body(lanes_ref, ids, refs)

        @pl.when(ok)
        def _bounded():
            with _trig.bounded():
                body(lanes_ref, ids, refs)

    def body(lanes_ref, ids, refs):
        if structure["strip"]:
            # no records: a lane with rows, the only reads checked (.bounds), is never in strips
            ins, outs = refs[:len(dtypes)], refs[len(dtypes):]
            return _in_strips(tile_fn, structure["strip"], shape, ins, outs, spreads, bools, fold, keep,
                              lambda at, part: valid_at(lanes_ref, ids, at, part))
        drained = [j for j, w in enumerate(structure["drains"]) if w]
        checked = structure["sites"].checked
        # scratch refs: rows.scratch's three per stream, then bounds.scratch's two
        count = 3 * (len(streamed) + len(drained)) + 2 * checked
        refs, scratch = refs[:len(refs) - count], iter(refs[len(refs) - count:])
        ins, outs = refs[:len(dtypes)], list(refs[len(dtypes):])
        at = (ids[0] * shape[0], ids[1] * shape[1])
        records = records_of(outs)
        valid = valid_of(lanes_ref, ids)
        args = [_read(r, how, b, shape) for r, how, b in zip(ins, spreads, bools, strict=True)]
        for k in streamed:
            args[k] = _rows.Streamed(bools[k], shape, _rows.Window(ins[k], *_take(scratch, 3), at))
        drains = {j: _rows.Drain(_rows.Window(outs[j], *_take(scratch, 3), at)) for j in drained}
        checks = _bounds.Records(structure["sites"], records, *_take(scratch, 2), at) if checked else None
        # scans write their stacked ys into the row results (through a window where they stream)
        sinks = {k: drains.get(j, outs[j]) for j, k in structure["rows"].items()}
        results, _tree, iterations = tile_fn(valid, *args, sinks=sinks, checks=checks)
        for drain in drains.values():
            drain.flush()
        if checks is not None:
            checks.finish()
        values = list(results) + ([iterations] if count_iterations else [])
        for ref, value in zip(outs, values, strict=True):
            if isinstance(value, _rows.Stacked):
                continue
            if fold in _TRUTH:
                value = jnp.asarray(value) != 0
            value = jnp.broadcast_to(jnp.asarray(value).astype(ref.dtype), shape)
            if fold:
                _store_folded(ref, value, fold, lanes_ref, ids, lambda: valid_of(lanes_ref, ids), keep)
            else:
                ref[...] = value

    def result_types(valid, *args):
        args = [_rows.row_argument(a, how, b, shape) if how in _rows.ROWS else a
                for a, how, b in zip(args, spreads, bools, strict=True)]
        results, tree, iterations = tile_fn(valid, *args, checks=structure["sites"])
        structure["tree"] = tree
        structure["rows"] = {j: r.index for j, r in enumerate(results) if isinstance(r, _rows.Stacked)}
        return [jnp.zeros((r.length,) + shape, r.dtype) if isinstance(r, _rows.Stacked) else r for r in results]

    def traced(lengths):
        """The result leaves of a tile, traced (not run): ShapeDtypeStructs (``lengths``: the
        rows' lengths, None for the scalar arguments)."""
        def given(d, b, how, n):
            if how in _rows.ROWS:  # rows travel as they are carried, bools as int32
                return jax.ShapeDtypeStruct((n,) + (shape if how == "rows" else ()), jnp.int32 if b else d)
            return jax.ShapeDtypeStruct(shape, bool if b else d)

        return jax.eval_shape(result_types, jax.ShapeDtypeStruct(shape, bool),
                              *(given(d, b, how, n) for d, b, how, n in zip(dtypes, bools, spreads, lengths,
                                                                              strict=True)))

    def lengths_of(values):
        return tuple(v.shape[0] if how in _rows.ROWS else None for v, how in zip(values, spreads, strict=True))

    def run(lanes, grid, array, *values):
        lengths = lengths_of(values)
        values = [_rows.padded(v, shape, grid) if w else v for v, w in zip(values, windows, strict=True)]
        shapes = traced(lengths)
        kinds = [s.dtype for s in shapes]
        if fold in _TRUTH:  # any and all ask whether a value is nonzero, whatever its dtype
            kinds = [jnp.dtype(jnp.bool_)] * len(kinds)
        stored = [jnp.int32 if k == jnp.bool_ else k for k in kinds] + ([jnp.int32] if count_iterations else [])
        spec = pl.BlockSpec(block, lambda i, j, *_: (i, j))
        out_array = (grid[0] * block[0], grid[1] * block[1]) if fold else array
        planes = [s.shape[0] if s.ndim == 3 else None for s in shapes] + [None] * count_iterations
        outlets = iter(drains)
        structure["strip"] = _strip_of(strip, shape, spreads, windows, drains, count_iterations, planes,
                                       lambda part: _operations(result_types, part, dtypes, bools))
        structure["drains"] = [next(outlets, None) if n else None for n in planes]
        checked = structure["sites"].checked
        rowed = any(how in _rows.ROWS for how in spreads) or any(windows) or any(structure["drains"])
        structure["guard"] = None if checked or rowed else _guard(result_types, shape, dtypes, bools)
        records = [jax.ShapeDtypeStruct((grid[0] * _bounds.BLOCK[0], grid[1] * _bounds.BLOCK[1]), jnp.int32)]
        out = pl.pallas_call(
            kernel,
            out_shape=[jax.ShapeDtypeStruct(_out_shape(out_array, n, w, shape, grid), k)
                       for k, n, w in zip(stored, planes, structure["drains"], strict=True)] + records * checked,
            grid=grid,
            in_specs=[pl.BlockSpec(memory_space=_smem())] + [
                _rows.spec(how, shape, n, _smem(), w) if how in _rows.ROWS else _spec(how, shape)
                for how, n, w in zip(spreads, lengths, windows, strict=True)],
            scratch_shapes=[s for v, w in zip(values, windows, strict=True) if w
                            for s in _rows.scratch(w, shape, v.dtype)] +
                           [s for k, w in zip(stored, structure["drains"], strict=True) if w
                            for s in _rows.scratch(w, shape, k)] + (_bounds.scratch(shape) if checked else []),
            out_specs=[spec if n is None else _rows.spec("rows", shape, n, None, w)
                       for n, w in zip(planes, structure["drains"], strict=True)] +
                      [pl.BlockSpec(_bounds.BLOCK, lambda i, j, *_: (i, j))] * checked,
            interpret=interpret,
            **_rows.compiler_params(spreads + ("rows",) * any(planes), interpret),
        )(lanes, *values)
        out = list(out)
        record = _bounds.first(out.pop(), grid, array) if checked else None
        out = [o[:n, :array[0], :array[1]] if w else o for o, n, w in zip(out, planes, structure["drains"],
                                                                           strict=True)]
        if fold:
            out = [_finish(o, fold, keep, lanes, array) for o in out]
        # a sum, mean or product of bools counts (NumPy's np.prod of bools is an int too)
        results = [o != 0 if k == jnp.bool_ and fold not in ("sum", "mean", "prod") else o
                   for o, k in zip(out, kinds + [None] * count_iterations, strict=True)]
        iterations = results.pop()[::shape[0], ::shape[1]].reshape(-1) if count_iterations else None
        return results, iterations, record

    jitted = jax.jit(run, static_argnums=(1, 2))
    printed = []

    def lanes_of(where: Layout):
        return jnp.asarray([where.rows, where.cols] if plane else [where.lanes], jnp.int32)

    def text(where: Layout, *values) -> str:
        """The kernel as JAX traces it: the Pallas call, its tile's masks and loops."""
        return str(jax.make_jaxpr(run, static_argnums=(1, 2))(lanes_of(where), where.grid, where.shape, *values))

    def call(where: Layout, *values, sizes: tuple | None = None):
        """The lane's (results, tree, iterations) for ``where``'s lanes (``sizes``: per vmap
        level, which a LaneIndexError of a row read out of range names; else the flat lanes)."""
        if config.debug and not printed:  # the kernel as JAX traced it, once (LANEWISE_DEBUG=1)
            printed.append(True)
            print(f"# ---- lanewise tpu kernel of {getattr(lane, '__qualname__', lane)}\n{text(where, *values)}")
        results, iterations, record = jitted(lanes_of(where), where.grid, where.shape, *values)
        check(record, where, sizes or (where.lanes,))
        return results, structure["tree"], iterations

    def check(record, where: Layout, sizes: tuple) -> None:
        """Raise the LaneIndexError of a row read out of range that ``record`` names
        (:func:`.bounds.check`; None or traced: nothing)."""
        _bounds.check(record, structure["sites"], where.shape, sizes, lane)

    def inline(where: Layout, *values, lanes=None):
        """The kernel's (results, iterations, record) inside a caller's own trace (one jitted
        whole call): ``record`` the first bounds record (:func:`check` raises it), or None.
        ``lanes``: the lanes it computes, as :func:`lanes_of` gives them, when fewer than
        ``where``'s (a device's share of a sharded call, traced: :mod:`.sharded`)."""
        return jitted(lanes_of(where) if lanes is None else lanes, where.grid, where.shape, *values)

    def types(where: Layout, *values):
        """The lane's result leaves (ShapeDtypeStructs of a tile) and their tree, traced, not run."""
        return traced(lengths_of(values)), structure["tree"]

    def lowered(where: Layout, *values) -> str:
        """The kernel lowered for a TPU on any machine (Pallas' Mosaic lowering rules, not
        Mosaic's compiler): the StableHLO text, the kernel one ``tpu_custom_call``."""
        exported = jax.export.export(jitted, platforms=["tpu"])(lanes_of(where), where.grid, where.shape, *values)
        return exported.mlir_module()

    def strip_of(where: Layout, *values):
        """The strip the kernel computes its tiles in (None: whole), as a trace of it decides."""
        text(where, *values)
        return structure["strip"]

    call.text, call.types, call.inline, call.lowered, call.strip = text, types, inline, lowered, strip_of
    call.check = check
    return call


def _strip_of(strip, tile: tuple, spreads: tuple, windows: tuple, drains: tuple, count_iterations: bool,
              planes: list, operations) -> tuple | None:
    """The strip a kernel computes its tiles in, or None (the whole tile at once): only a
    tile larger than the strip and made of whole strips, of a lane with no rows, no row
    results, no iteration count, and at least :data:`LONG` operations (``operations(part)``
    counts them for a ``part``-shaped piece)."""
    if not strip or any(tile[k] % strip[k] for k in (0, 1)) or tile[0] * tile[1] <= strip[0] * strip[1]:
        return None
    if any(how in _rows.ROWS for how in spreads) or any(windows) or any(drains) or any(planes) \
            or count_iterations:
        return None
    return tuple(strip) if operations(tuple(strip)) >= LONG else None


def _guard(result_types, tile: tuple, dtypes: tuple, bools: tuple):
    """The :class:`.trig.Guard` of a lane (with no rows) whose ``cos``/``sin`` arguments
    follow from its number arguments (not bools or key words) by arithmetic, else None."""
    args = [jax.ShapeDtypeStruct(tile, bool if b else d) for d, b in zip(dtypes, bools, strict=True)]
    known = [False] + [not b and np.dtype(d).kind in "fi" for d, b in zip(dtypes, bools, strict=True)]
    return _trig.plan(jax.make_jaxpr(result_types)(jax.ShapeDtypeStruct(tile, bool), *args), known)


def _interval(ref, how: str) -> tuple:
    """The (lowest, highest) of an argument's block, float32 (a NaN in it: NaN), each
    spread over a register: the guard's arithmetic runs on the vector unit, which has the
    division, square root and exponential the scalar unit lacks."""
    block = ref[0] if how == "scalar" else ref[...]
    if block.dtype not in (jnp.float32, jnp.int32):  # a half float: reduced as float32 (v5e's vector unit)
        block = block.astype(jnp.float32)
    return tuple(jnp.full(TILE, f(block).astype(jnp.float32)) for f in (jnp.min, jnp.max))


def _operations(result_types, part: tuple, dtypes: tuple, bools: tuple) -> int:
    """The JAX equations of the lane's tile function on a ``part``-shaped piece, those
    of nested jaxprs (a loop's or a branch's body) counted too."""
    args = [jax.ShapeDtypeStruct(part, bool if b else d) for d, b in zip(dtypes, bools, strict=True)]
    return _count(jax.make_jaxpr(result_types)(jax.ShapeDtypeStruct(part, bool), *args).jaxpr)


def _count(jaxpr) -> int:
    """Equations of ``jaxpr`` and of the jaxprs in its equations' parameters."""
    total = 0
    for eqn in jaxpr.eqns:
        total += 1
        for value in eqn.params.values():
            for inner in value if isinstance(value, (tuple, list)) else (value,):
                inner = getattr(inner, "jaxpr", inner)
                if hasattr(inner, "eqns"):
                    total += _count(inner)
    return total


def _in_strips(tile_fn, strip: tuple, tile: tuple, ins, outs, spreads: tuple, bools: tuple, fold, keep,
               valid_at):
    """A grid step's tile computed ``strip`` lanes at a time (a ``fori_loop`` over the
    tile's strips): each strip reads its part of the argument blocks and writes its part
    of the results, or folds its lanes into the partials (the result blocks, which start
    at the fold's identity).  ``valid_at(at, part)``: the real lanes of the strip at
    ``at``, masked in every fold (the cost of a select in a long lane)."""
    across = tile[1] // strip[1]
    if fold:
        for ref in outs:
            ref[...] = jnp.full(ref.shape, FOLDS[fold][0](ref.dtype), ref.dtype)

    def step(k, carry):
        # lax.div/rem (k >= 0): jnp's floor division lowers through sign, which Mosaic asks the chip about
        at = (pl.multiple_of(lax.div(k, across) * strip[0], strip[0]),
              pl.multiple_of(lax.rem(k, across) * strip[1], strip[1]))
        rows, cols = pl.ds(at[0], strip[0]), pl.ds(at[1], strip[1])
        valid = valid_at(at, strip)
        args = [_read_part(r, how, b, strip, rows, cols) for r, how, b in zip(ins, spreads, bools, strict=True)]
        results, _tree, _ = tile_fn(valid, *args, sinks={})
        for ref, value in zip(outs, results, strict=True):
            if fold in _TRUTH:
                value = jnp.asarray(value) != 0
            value = jnp.broadcast_to(jnp.asarray(value).astype(ref.dtype), strip)
            if not fold:
                ref[rows, cols] = value
                continue
            part = {"rows": (rows, slice(None)), "cols": (slice(None), cols)}.get(keep, (slice(None), slice(None)))
            ref[part] = FOLDS[fold][1](ref[part], fold_tile(value, fold, valid, keep))
        return carry

    lax.fori_loop(0, (tile[0] // strip[0]) * across, step, 0)


def _read_part(ref, how: str, is_bool: bool, part: tuple, rows, cols):
    """An argument's values for the ``part``-shaped strip at ``rows``, ``cols`` of the tile."""
    if how == "scalar":
        value = jnp.full(part, ref[0], ref.dtype)
    else:
        value = jnp.broadcast_to(ref[{"row": (rows, slice(None)), "col": (slice(None), cols)}.get(how, (rows, cols))],
                                 part)
    return value != 0 if is_bool else value


def _take(items, count: int) -> list:
    """The next ``count`` items of an iterator."""
    return [next(items) for _ in range(count)]


def _out_shape(array: tuple, length: int | None, window: int | None, tile: tuple, grid: tuple) -> tuple:
    """The shape of a result: ``array``, a row result's (length, *array), or a streamed row
    result's whole windows of whole tiles (:func:`.rows.drained`)."""
    if window:
        return _rows.drained(length, window, tile, grid)
    return array if length is None else (length,) + tuple(array)


def _spec(how: str, tile: tuple):
    """The BlockSpec of an argument carried as ``how`` (:data:`SPREADS`)."""
    if how == "scalar":
        return pl.BlockSpec(memory_space=_smem())
    if how == "row":
        return pl.BlockSpec((tile[0], 1), lambda i, j, *_: (i, 0))
    if how == "col":
        return pl.BlockSpec((1, tile[1]), lambda i, j, *_: (0, j))
    return pl.BlockSpec(tile, lambda i, j, *_: (i, j))


def _read(ref, how: str, is_bool: bool, tile: tuple):
    """An argument's values for every lane of the tile, from its block (a row: the block itself)."""
    if how in _rows.ROWS:
        return _rows.row_argument(ref, how, is_bool, tile)
    value = jnp.full(tile, ref[0], ref.dtype) if how == "scalar" else jnp.broadcast_to(ref[...], tile)
    return value != 0 if is_bool else value


def _smem():
    """Scalar memory, where the kernel reads the lane count (any memory in interpret mode)."""
    try:
        from jax.experimental.pallas import tpu as pltpu
    except ImportError:  # pragma: no cover - a jax without the TPU dialect
        return None
    return pltpu.SMEM


def place(values, out):
    """Lane results (levels in order, then a row result's own axis) where ``out_axes`` puts
    them (index 0 of an unmapped level): ``out`` the program's output leaf."""
    level_dims = out.level_dims
    keep = [lv for lv, d in enumerate(level_dims) if d is not None]
    if len(keep) < len(level_dims):  # an unmapped level: no slice of the whole result (a copy)
        values = values[tuple(slice(None) if d is not None else 0 for d in level_dims)]
    dims = [level_dims[lv] for lv in keep] + list(out.lane_dims)
    order = sorted(range(len(dims)), key=lambda k: dims[k])
    return jnp.transpose(values, order) if order != sorted(order) else values
