"""Per-lane rows and ``lw.scan`` on the tpu backend: how rows travel, and how a lane reads them.

A lane parameter whose argument gives each lane a 1-D row (``lw.vmap(lane)(prices)``
with prices of shape (series, T)) travels as a ``rows`` argument: an array of shape
(T, *plane), one plane of the lanes' (rows, cols) tile layout per index of the row, so
that the kernel's block of it is (T, tile_rows, tile_cols) and ``p[t]`` is one tile
read from VMEM.  Rows too long for VMEM (more than :func:`fit_tile`'s limit per lane in
all) stream instead (:func:`windows`): each longer than :data:`WINDOW` stays in HBM and
the kernel reads it through a VMEM window of that many planes of the tile's lanes
(:class:`Streamed`), one DMA per chunk the reads move into; a scan's stacked ys that long
are written through such a window and copied out a chunk at a time (:class:`Drain`).
An unmapped 1-D array (a coefficient table, a key) travels as a ``table`` in scalar
memory: ``k[i]`` is one number broadcast over the tile.

In the lane (:class:`Row` values of :mod:`.lower`): ``p[i]`` with an integer literal
or an index that is the same for every lane of the tile (a range loop's counter, and
arithmetic of it) is one plane read; an index that varies from lane to lane selects
among the row's planes (rows of at most :data:`ONE_HOT` values), else it is refused;
``len(p)``, ``p.shape[0]`` and ``p.size`` are the row's length; ``lw.scan(step, init,
xs)`` over rows (:func:`scan`) is a ``fori_loop`` over the planes with the carry in
registers (the step lowered like any helper); its stacked ys (:class:`Stacked`), from a
scan at the lane's top level, are written plane by plane into the kernel's row outputs
and returned as per-lane rows.  Any other use of a row is refused.

Example:
    >>> fit_tile((32, 128), [5000], 4)  # 5000 planes of (32, 128) float32 would not fit VMEM
    (8, 128)
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import jax
import jax.numpy as jnp
from jax import lax
from jax.experimental import pallas as pl

from ...errors import BackendError, LaneCompileError
from .ops import loop_forms

#: The spreads of :mod:`.kernel` that carry arrays the lanes index (:data:`.kernel.SPREADS` + these).
ROWS = ("rows", "table")
#: A varying index into a row is a select over its planes: only for rows this short.
ONE_HOT = 64
#: VMEM the row blocks may take (Pallas double-buffers each): v5e has 128 MiB of VMEM,
#: of which a kernel gets 16 MiB unless it asks for more (``vmem_limit_bytes``).
BUDGET = 64 * 2**20
VMEM_LIMIT = 100 * 2**20
#: The planes of a streamed row's VMEM window: one DMA from HBM per this many steps of a
#: sequential read (:class:`Streamed`).
WINDOW = 512
#: The most numbers a table holds (scalar memory is small).
TABLE = 4096


def spread(leaf) -> str | None:
    """``rows`` or ``table`` for an argument giving each lane a 1-D array, None for a
    scalar lane argument; a LaneCompileError for arrays of more dimensions."""
    if not leaf.is_array or leaf.lane_ndim == 0:
        return None
    if leaf.lane_ndim > 1:
        raise LaneCompileError(f"argument {leaf.name} gives each lane a {leaf.lane_ndim}-D array; the tpu backend "
                               "lowers per-lane 1-D rows only (map the other axes with lw.vmap)")
    return "rows" if any(a is not None for a in leaf.axes) else "table"


def length(leaf, value) -> int:
    """The length of the rows a row argument gives its lanes (its one unmapped axis)."""
    mapped = {a % len(value.shape) for a in leaf.axes if a is not None}
    return next(n for k, n in enumerate(value.shape) if k not in mapped)


def levels(leaf, value, dtype):
    """A row argument with its mapped axes first, in level order, then the row's axis."""
    arr = jnp.asarray(value)
    mapped = [a for a in leaf.axes if a is not None]
    return jnp.moveaxis(arr, mapped, list(range(len(mapped)))).astype(dtype)


def carried(leaf, value, dtype, how: str, where, sizes: tuple, as_tiles):
    """The array that carries a row argument: (T, *where.shape) for ``rows`` (each index
    of the row a plane laid out as the scalar arguments' lanes by ``as_tiles``,
    :func:`.kernel.as_tiles`), the 1-D array for a ``table``."""
    arr = levels(leaf, value, dtype)
    if how == "table":
        if arr.shape[0] > TABLE:
            raise LaneCompileError(f"argument {leaf.name}: an unmapped array of {arr.shape[0]} numbers; the tpu "
                                   f"backend keeps one of at most {TABLE} in scalar memory")
        return arr
    shape = [1] * len(sizes)
    for lv, n in zip([lv for lv, a in enumerate(leaf.axes) if a is not None], arr.shape, strict=False):
        shape[lv] = n
    return _planes(arr, tuple(shape), tuple(sizes), where, as_tiles)


@functools.partial(jax.jit, static_argnums=(1, 2, 3, 4))
def _planes(arr, shape: tuple, sizes: tuple, where, as_tiles):
    """Rows (mapped axes first, then the row's) as (T, *where.shape): one XLA transpose."""
    arr = jnp.broadcast_to(arr.reshape(shape + arr.shape[-1:]), sizes + arr.shape[-1:])
    return jax.vmap(lambda plane: as_tiles(plane, where))(jnp.moveaxis(arr, -1, 0))


def windows(lengths, made=()) -> tuple:
    """The planes of the VMEM window of each argument row (``lengths``) and each row result
    (``made``), None for one that stays whole in VMEM: all stay whole when they fit
    :data:`BUDGET` at the smallest tile, else each longer than :data:`WINDOW` streams
    (:class:`Streamed`, :class:`Drain`).

    Example:
        >>> windows([100, 200_000]), windows([100, 9000], made=[100])
        (((None, 512), ()), ((None, 512), (None,)))
    """
    if sum(lengths) + sum(made) <= _most():
        return (None,) * len(lengths), (None,) * len(made)
    return tuple(_window(n) for n in lengths), tuple(_window(n) for n in made)


def _window(length: int) -> int | None:
    return WINDOW if length > WINDOW else None


def _most(itemsize: int = 4) -> int:
    """The most planes a lane's rows may hold in VMEM (double-buffered, at one register row)."""
    return BUDGET // (2 * 8 * 128 * itemsize)


def fit_tile(tile: tuple, lengths, itemsize: int = 4, made=()) -> tuple:
    """``tile`` with as many of its rows as keep the row blocks (``lengths`` planes per argument
    row and ``made`` per row result, or the :func:`windows` of those that stream, each
    double-buffered) within :data:`BUDGET`; at least one (8, 128) register row.  Refused (a
    BackendError) where even the windows do not fit: too many long rows."""
    rows, cols = tile
    given, results = windows(lengths, made)
    planes = sum(w or n for n, w in zip(list(lengths) + list(made), given + results, strict=True))
    most = _most(itemsize)
    if planes > most:
        raise BackendError(f"the tpu backend holds a lane's rows in VMEM, each row longer than {WINDOW} values "
                           f"through a window of {WINDOW}: at most {most} values per lane in all, and these rows "
                           f"need {planes}; pass fewer rows (stack short ones into one), or use the cpu backend")
    while rows > 8 and 2 * planes * rows * cols * itemsize > BUDGET:
        rows //= 2
    rows = max(8, rows - rows % 8)
    if 2 * planes * rows * cols * itemsize > BUDGET and cols > 128:
        cols = 128
    return rows, cols


def spec(how: str, tile: tuple, length: int, smem, window: int | None = None):
    """The BlockSpec of a row argument: every plane of the tile's lanes, the table whole
    in ``smem`` (scalar memory), or with a ``window`` the rows left in HBM (:class:`Streamed`)."""
    if how == "table":
        return pl.BlockSpec(memory_space=smem)
    if window:
        return pl.BlockSpec(memory_space=pl.ANY)
    return pl.BlockSpec((length,) + tuple(tile), lambda i, j, *_: (0, i, j))


def scratch(window: int, tile: tuple, dtype) -> list:
    """The kernel's scratch of a streamed row or row result: its VMEM window of ``window``
    planes, the chunk it holds (scalar memory) and the DMA's semaphore (:class:`Window`)."""
    from jax.experimental.pallas import tpu as pltpu

    return [pltpu.VMEM((window,) + tuple(tile), dtype), pltpu.SMEM((1,), jnp.int32), pltpu.SemaphoreType.DMA(())]


def padded(array, tile: tuple, grid: tuple):
    """A streamed row's (T, rows, cols) array padded to whole tiles: a DMA copies whole
    tiles, where a block of a plane's edge tile may hang over the array."""
    pad = [(0, 0)] + [(0, g * t - n) for g, t, n in zip(grid, tile, array.shape[1:], strict=True)]
    return jnp.pad(array, pad) if any(after for _, after in pad) else array


class Row:
    """A row argument inside the tile function: ``data`` (a ref in the kernel, an array
    when traced) of shape (T, *tile), or (T,) for a table; ``boolean``: bools carried as int32."""

    def __init__(self, data, shared: bool, boolean: bool, shape: tuple):
        self.data, self.shared, self.boolean, self.shape = data, shared, boolean, shape
        self.length = int(data.shape[0])

    def plane(self, t):
        """Every lane's value at index ``t`` (an int or an int32 scalar, in range)."""
        value = jnp.full(self.shape, self.data[t], self.data.dtype) if self.shared else self.data[t]
        return value != 0 if self.boolean else value


class Window:
    """A VMEM ``window`` of a row's planes for the tile's lanes, over the row in HBM (``hbm``:
    the whole (T, *array) ref): the scratch of :func:`scratch` -- the window, the chunk it
    holds (``held``, in scalar memory; -1 for none, as each grid step starts) and the DMA's
    semaphore.  ``at``: the tile's offsets in the array (its program ids times the tile)."""

    def __init__(self, hbm, window, held, semaphore, at: tuple):
        self.hbm, self.window, self.held, self.semaphore, self.at = hbm, window, held, semaphore, at
        self.size = int(window.shape[0])
        held[0] = jnp.int32(-1)

    def chunk(self, t):
        """The chunk of plane ``t`` (t >= 0: a division without floor's sign fix, which Mosaic lacks)."""
        return lax.div(jnp.asarray(t, jnp.int32), jnp.int32(self.size))

    def planes(self, start):
        """The tile's lanes of the window's planes from ``start`` on, in HBM."""
        rows, cols = self.window.shape[1:]
        return self.hbm.at[pl.ds(start, self.size), pl.ds(self.at[0], rows), pl.ds(self.at[1], cols)]

    def copy(self, source, target):
        """One DMA, waited for."""
        from jax.experimental.pallas import tpu as pltpu

        copy = pltpu.make_async_copy(source, target, self.semaphore)
        copy.start()
        copy.wait()


class Streamed(Row):
    """A row left in HBM, read through a :class:`Window`: ``plane(t)`` copies (one DMA) the
    chunk of ``t`` into the window unless it holds it already, so any order of reads is
    right and a sequential one costs a DMA per window.  The last chunk starts early enough
    to end at the row's end."""

    def __init__(self, boolean: bool, shape: tuple, window: Window):
        super().__init__(window.hbm, False, boolean, shape)
        self.through = window

    def plane(self, t):
        w = self.through
        chunk = w.chunk(t)
        start = jnp.minimum(chunk * w.size, self.length - w.size)

        @pl.when(w.held[0] != chunk)
        def _fetch():
            w.copy(w.planes(start), w.window)
            w.held[0] = chunk

        value = w.window[t - start]
        return value != 0 if self.boolean else value


class Drain:
    """A row result (a scan's stacked ys) left in HBM (its array whole windows long),
    written through a :class:`Window`: storing plane ``t`` first copies the window out
    (one DMA) to the chunk it holds, if another, and :meth:`flush` copies out the last
    one.  Right for a scan, which writes each plane once, chunk after chunk (forwards or
    backwards); the planes past the row's end are dropped by the caller."""

    def __init__(self, window: Window):
        self.through = window
        self.dtype, self.shape = window.hbm.dtype, (window.hbm.shape[0],) + tuple(window.window.shape[1:])

    def __setitem__(self, t, value):
        w = self.through
        chunk = w.chunk(t)

        @pl.when(w.held[0] != chunk)
        def _switch():
            self.flush()
            w.held[0] = chunk

        w.window[t - chunk * w.size] = value

    def flush(self):
        """Copy the window out to the chunk it holds (none: nothing to copy)."""
        w = self.through
        held = w.held[0]

        @pl.when(held >= 0)
        def _copy():
            w.copy(w.window, w.planes(held * w.size))


def drained(length: int, window: int, tile: tuple, grid: tuple) -> tuple:
    """The shape of a streamed row result in HBM: whole windows of planes of whole tiles
    (the caller keeps its first ``length`` planes of the array's lanes)."""
    return (-(-length // window) * window, grid[0] * tile[0], grid[1] * tile[1])


def row_argument(arg, how: str, boolean: bool, shape: tuple):
    """A row argument's ref (or traced array) as the lane reads it."""
    return Row(arg, how == "table", boolean, shape)


def compiler_params(spreads, interpret: bool) -> dict:
    """The pallas_call's VMEM limit where rows travel (their blocks exceed the default)."""
    if interpret or not any(how == "rows" for how in spreads):
        return {}
    from jax.experimental.pallas import tpu as pltpu

    return {"compiler_params": pltpu.CompilerParams(vmem_limit_bytes=VMEM_LIMIT)}


def _position(row: Row, index: int, at: str, check=None) -> int:
    """A literal index as Python reads it (negative from the end).  Out of range, it is
    told to ``check`` (:func:`read`; a live lane reading it raises, as in Python, where a
    branch no lane takes reads nothing) and any plane is read; without ``check``, or
    beyond int32, it is refused when the kernel is built."""
    if -row.length <= index < row.length:
        return index % row.length
    if check is None or not -2 ** 31 <= index < 2 ** 31:
        raise LaneCompileError(f"index {index} is out of range for a row of {row.length} ({at})")
    check(jnp.int32(index), row.length)
    return 0


def read(row: Row, index, at: str, check=None):
    """``row[index]`` for every lane of the tile: ``index`` an int literal, an int32 scalar
    (the same in every lane; negative counts from the end, others are clamped), or a tile
    of indices (a select over the planes: rows of at most :data:`ONE_HOT`).  ``check(index,
    length)``: told of every index computed at run time, before it is wrapped and clamped,
    and of a literal out of range (:mod:`.bounds` records a live lane's out of range)."""
    if isinstance(index, bool) or jnp.result_type(index) not in (jnp.int32, jnp.int64) and \
            not isinstance(index, int):
        raise LaneCompileError(f"a row indexed with a non-integer ({at})")
    if isinstance(index, int):
        return row.plane(_position(row, index, at, check))
    index = jnp.asarray(index, jnp.int32)
    if check is not None:
        check(index, row.length)
    index = jnp.where(index < 0, index + row.length, index)
    if index.ndim == 0:
        return row.plane(jnp.clip(index, 0, row.length - 1))
    if row.length > ONE_HOT:
        raise LaneCompileError(f"a row of {row.length} indexed with a value that differs from lane to lane is not "
                               f"supported on the tpu backend ({at}); index it with a literal or a range loop's "
                               f"counter (or use rows of at most {ONE_HOT})")
    value = row.plane(0)
    for t in range(1, row.length):
        value = jnp.where(index == t, row.plane(t), value)
    return value


def as_range(loop, row: Row):
    """``for v in row:`` as the range loop over the row's indices that reads ``row[k]`` into
    ``v`` (:meth:`.lower._Lowering.loop`): the loop's kind "range", its bounds (0, len)."""
    import dataclasses

    return dataclasses.replace(loop, kind="range")


def attribute(row: Row, name: str, at: str):
    """``row.shape`` and ``row.size``."""
    if name == "shape":
        return (row.length,)
    if name == "size":
        return row.length
    raise LaneCompileError(f"the attribute .{name} of a row is not supported on the tpu backend ({at}); a row "
                           "supports row[i], len(row), row.shape[0], row.size and lw.scan over it")


# ----------------------------------------------------------------------------- lw.scan

_SCAN_PARAMS = ("f", "init", "xs", "length", "reverse", "unroll")


def scan(lowering, p, st, at: str):
    """``lw.scan(f, init, xs, length=, reverse=)`` in a lane: a ``fori_loop`` over the
    rows' planes, ``f`` inlined (its branches as selects), the carry in registers.
    ``(carry, ys)``: ys None, or :class:`Stacked` row results (``unroll=`` changes nothing)."""
    if len(p.args) > len(_SCAN_PARAMS):
        raise LaneCompileError(f"lw.scan with {len(p.args)} arguments ({at})")
    nodes = dict(zip(_SCAN_PARAMS, p.args, strict=False))
    for name, node in p.keywords:
        if name not in _SCAN_PARAMS or name in nodes:
            raise LaneCompileError(f"lw.scan with the argument {name}= ({at})")
        nodes[name] = node
    if "f" not in nodes or "init" not in nodes:
        raise LaneCompileError(f"lw.scan without f and init ({at})")
    step = lowering.python_object(nodes["f"], st, "lw.scan's step function", p.loc)
    init = lowering.expr(nodes["init"], st)
    xs = None if "xs" not in nodes else lowering.expr(nodes["xs"], st)
    length = None if "length" not in nodes else lowering.expr(nodes["length"], st)
    reverse = False if "reverse" not in nodes else lowering.expr(nodes["reverse"], st)
    if not isinstance(reverse, bool):
        raise LaneCompileError(f"lw.scan with reverse= other than True or False ({at})")
    rows, tree = jax.tree.flatten(xs, is_leaf=lambda v: isinstance(v, Row))
    if not all(isinstance(r, Row) for r in rows):
        raise LaneCompileError(f"lw.scan over something other than per-lane rows (or a tuple of them) is not "
                               f"supported on the tpu backend ({at})")
    lengths = {r.length for r in rows} | ({length} if length is not None else set())
    if not rows and not isinstance(length, int):
        raise LaneCompileError(f"lw.scan without xs needs length= an integer literal on the tpu backend ({at})")
    if len(lengths) != 1:
        raise LaneCompileError(f"lw.scan over rows of different lengths {sorted(lengths)} ({at})")
    (trips,) = lengths

    def body(carry, t, fix=True):
        """The carry after step ``t``, the step's y, and the row index it read."""
        index = trips - 1 - t if reverse else t
        x = jax.tree.unflatten(tree, [r.plane(index) for r in rows]) if rows else None
        out = lowering.inline(step, [carry, x], st.live, p.loc)
        if not (isinstance(out, tuple) and len(out) == 2):
            raise LaneCompileError(f"lw.scan's step {step.__qualname__} does not return (carry, y) ({at})")
        new, y = out
        if jax.tree.structure(new) != jax.tree.structure(carry):
            raise LaneCompileError(f"lw.scan's step {step.__qualname__} changes the carry's structure ({at})")
        return (lowering.fixed(new, carry) if fix else new), y, index

    carry = _settled(lowering, lambda c: body(c, jnp.int32(0), fix=False)[0], lowering.tiles(init), at)
    ys = jax.eval_shape(lambda c: jax.tree.map(jnp.asarray, body(c, jnp.int32(0))[1]), carry)
    stacked = _stacked(lowering, st, ys, trips, at)

    def advance(c, t):
        new, y, index = body(c, t)
        sinks = getattr(lowering, "sinks", None)
        if stacked is not None and sinks is not None:  # each y is one plane of the kernel's row output
            for s, v in zip(jax.tree.leaves(stacked), jax.tree.leaves(y), strict=True):
                sink = sinks.get(s.index)
                if sink is None:  # ys the lane does not return are not stored
                    continue
                sink[index] = jnp.broadcast_to(jnp.asarray(v).astype(sink.dtype), sink.shape[1:])
        return new

    return _loop(lowering, advance, carry, trips), stacked


@dataclass(frozen=True)
class Stacked:
    """A scan's stacked ys: a per-lane row result of ``length`` values of ``dtype``, which the
    scan writes plane by plane into the kernel's row output ``index`` (``lowering.sinks``)."""

    index: int
    dtype: object
    length: int


def _stacked(lowering, st, ys, trips: int, at: str):
    """The scan's ys as a tree of :class:`Stacked` (None if the step's y is None)."""
    if not jax.tree.leaves(ys):
        return None
    if st.live is not lowering.valid or st.loop is not None:
        raise LaneCompileError(f"lw.scan with stacked ys inside a branch or loop, or after a return, is not "
                               f"supported on the tpu backend ({at}): scan at the lane's top level")
    made = getattr(lowering, "stacked", None)
    if made is None:
        made = lowering.stacked = []

    def one(y):
        made.append(y.dtype)
        return Stacked(len(made) - 1, y.dtype, trips)

    return jax.tree.map(one, ys)


def _settled(lowering, step, carry, at: str):
    """The carry in the dtypes ``step`` (a carry's next, uncast) keeps (``0.0`` then ``+ price``
    stays float32)."""
    for _ in range(4):
        out = jax.eval_shape(lambda c: jax.tree.map(jnp.asarray, step(c)), carry)
        wider = jax.tree.map(lambda c, o: jnp.promote_types(c.dtype, o.dtype), carry, out)
        if jax.tree.all(jax.tree.map(lambda c, w: c.dtype == w, carry, wider)):
            return carry
        carry = jax.tree.map(lambda c, w: c.astype(w), carry, wider)
    raise LaneCompileError(f"the types of lw.scan's carry do not settle ({at})")


def _loop(lowering, body, carry, trips: int):
    """``trips`` steps of ``body``: a ``fori_loop`` of rounds of ``lowering.unroll`` steps,
    then the rest; bools cross the loop as int32 and the first carry is computed from
    the tile's lanes (the forms Mosaic compiles, :data:`.lower.LOWERING`)."""
    encode, decode = loop_forms(carry, lowering.options["int_masks"])

    counting, lowering.counting = lowering.counting, False  # a scan's steps are not loop iterations
    iterations = lowering.iterations
    try:
        unroll = max(1, min(lowering.unroll, trips))
        rounds = trips // unroll

        def round_(k, c):
            c = decode(c)
            for j in range(unroll):
                c = body(c, k * unroll + j)
            return encode(c)

        start = encode(carry)
        if lowering.options["materialise"]:
            start = jax.tree.map(lowering.materialised, start)
        c = decode(lax.fori_loop(0, rounds, round_, start)) if rounds else carry  # ys: written as a side effect
        for t in range(rounds * unroll, trips):
            c = body(c, t)
        return c
    finally:
        lowering.counting, lowering.iterations = counting, iterations
