"""Row reads out of range on the tpu backend: found in the kernel, raised on the host.

A lane's ``p[i]`` with an index computed at run time (a loop's counter, a lane's value)
is checked as Python checks it: a *live* lane (not masked off by a branch, a return, a
break or padding) whose index lies outside ``[-len(p), len(p))`` is recorded.  An index
the kernel knows in range before it runs (:class:`Intervals`) is not checked at all.
Each lane's first bad read is kept in two tile-shaped VMEM scratch arrays (its site and
index: a few vector operations per read, no branch and no reduction); at the end of a
grid step, if some lane has one, the first lane in C order writes :data:`FIELDS` into
the first row of the step's (8, 128) int32 record block.  After the call the host reads
the record of the lane first in C order (one device sync, only for lanes with such reads)
and raises the ``LaneIndexError`` the python backend raises: the index, the row's size,
the first lane that failed and the user's ``file:line``.  Inside a caller's ``jax.jit``
(``lw.jax.op``, or ``lw.vmap`` of traced arrays) the record cannot be read while
tracing: a ``jax.debug.callback`` reads it when the computation runs and raises the
same error, which JAX hands to the caller as a ``JaxRuntimeError`` whose message ends
with it (:func:`check`).  A call split over several devices gathers each device's record
and takes the first device's that names a site (``.sharded``).  A read of a local that may
be unbound (lane.ir.passes.unbound) is recorded the same way, its site naming the local.

Example:
    >>> sites = Sites()
    >>> sites.id("f.py:3", 6), sites.id("f.py:5", 6), sites.id("f.py:3", 6), sites.id("f.py:3", 9)
    (1, 2, 1, 3)
    >>> sites.names, sites.lengths
    (['f.py:3', 'f.py:5', 'f.py:3'], [6, 6, 9])
"""

from __future__ import annotations


import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.experimental import pallas as pl

from ...lane.ir import nodes as ir
from .ops import some
from .rows import Row

#: A record's fields, in its first row: the read's site (its id, 0 for none), the index,
#: and the lane's row and column in the kernel's arrays (the row's length is the site's).
FIELDS = ("site", "index", "row", "col")
#: The block of records each grid step writes (one register).
BLOCK = (8, 128)


class Sites:
    """The checked reads of a lane, numbered from 1 by their ``file:line`` and the row's
    length as tracing meets them (the same numbers in every trace of the kernel);
    ``checked`` once one is met."""

    def __init__(self):
        self.ids: dict = {}  # (file:line, length) -> id
        self.names: list = []
        self.lengths: list = []

    def id(self, at: str, length: int) -> int:
        if (at, length) not in self.ids:
            self.ids[(at, length)] = len(self.names) + 1
            self.names.append(at)
            self.lengths.append(length)
        return self.ids[(at, length)]

    @property
    def checked(self) -> bool:
        return bool(self.names)

    def read(self, live, index, length: int, at: str) -> None:
        """A read's site, while the kernel is only typed (nothing is recorded)."""
        self.id(at, length)

    def unbound(self, unset, name: str, at: str) -> None:
        """A read of a local that may be unbound: its site (the local's name in place of a
        row's length), while the kernel is only typed."""
        self.id(at, name)


def scratch(tile: tuple) -> list:
    """The kernel's scratch of a lane with checked reads: each lane's first bad read's
    site (0: none yet) and index (:class:`Records`)."""
    from jax.experimental.pallas import tpu as pltpu

    return [pltpu.VMEM(tuple(tile), jnp.int32), pltpu.VMEM(tuple(tile), jnp.int32)]


class Records(Sites):
    """The checks of one tile of lanes: ``ref`` the grid step's record block, ``found`` and
    ``indices`` the :func:`scratch` arrays (zeroed here), ``origin`` the (row, column) of the
    tile's first lane in the kernel's arrays."""

    def __init__(self, sites: Sites, ref, found, indices, origin: tuple):
        self.ids, self.names, self.lengths = sites.ids, sites.names, sites.lengths
        self.ref, self.origin = ref, origin
        self.found, self.indices = found, indices
        found[...] = jnp.zeros(found.shape, jnp.int32)

    def read(self, live, index, length: int, at: str) -> None:
        """Keep ``row[index]`` as the first bad read of each lane of ``live`` that reads
        outside the row's ``length`` and has none yet (``index`` a scalar, the same in every
        lane, or one per lane): selects, no branch."""
        index = jnp.asarray(index, jnp.int32)
        self._keep(live & ((index < -length) | (index >= length)), self.id(at, length), index)

    def unbound(self, unset, name: str, at: str) -> None:
        """Keep a read of the local ``name`` as the first error of each lane of ``unset``
        (live lanes whose flag says no statement bound it) that has none yet."""
        self._keep(unset, self.id(at, name), jnp.int32(0))

    def _keep(self, bad, site: int, index) -> None:
        found = self.found[...]
        first = bad & (found == 0)
        self.found[...] = jnp.where(first, jnp.int32(site), found)
        self.indices[...] = jnp.where(first, index, self.indices[...])

    def finish(self) -> None:
        """Write the record of the tile's first lane (C order) with a bad read, if any, into
        the record block (zeroed otherwise): min and max reductions (Mosaic lowers no
        argmax) and selects, run only where a lane read out of range."""
        ref = self.ref
        ref[...] = jnp.zeros(ref.shape, ref.dtype)
        found = self.found[...]

        @pl.when(some(found != 0))
        def _record():
            shape = found.shape
            rows, cols = (lax.broadcasted_iota(jnp.int32, shape, k) for k in (0, 1))
            flat = rows * shape[1] + cols
            chosen = flat == jnp.min(jnp.where(found != 0, flat, jnp.int32(shape[0] * shape[1])))

            def at_chosen(v):  # a max, not a sum: Mosaic lowers an int32 sum with x64 on as int64
                return jnp.max(jnp.where(chosen, v, jnp.iinfo(jnp.int32).min))

            values = (at_chosen(found), at_chosen(self.indices[...]),
                      self.origin[0] + at_chosen(rows), self.origin[1] + at_chosen(cols))
            r, c = (lax.broadcasted_iota(jnp.int32, BLOCK, k) for k in (0, 1))
            block = jnp.zeros(BLOCK, jnp.int32)
            for k, value in enumerate(values):
                block = jnp.where((r == 0) & (c == k), value, block)
            ref[...] = block


class Intervals:
    """What the kernel knows of an index before it runs: a range loop's counter has a
    static interval where its bounds have one (literals, ``len(p)``, an outer counter and
    arithmetic of them), kept by the traced value itself, so a counter reassigned, or a
    helper's local of the same name, has none; an index made of such counters and int
    literals (or ``len`` of a row) by ``+ - *`` (and ``//``, ``%`` by a positive one) has the interval
    Python's integers give it.  A read whose interval lies inside the row needs no check
    (``for i in range(1, len(p)): p[i] - p[i - 1]``: none).

    Example:
        >>> known = Intervals()
        >>> i = object()  # stands for the counter's traced value
        >>> known.note(i, (1, 1), (6, 6), 1)
        >>> index = ir.Prim("sub", (ir.Var("i"), ir.Const(1, "int")), None)
        >>> known.of(index, {"i": i}), known.within(index, {"i": i}, 6), known.within(index, {"i": i}, 4)
        ((0, 4), True, False)
    """

    def __init__(self):
        self._known: dict = {}

    def note(self, value, start: tuple | None, stop: tuple | None, step: int) -> None:
        """``value`` (a loop's counter this iteration) runs over ``range(start, stop, step)``,
        ``start`` and ``stop`` given by their spans (:meth:`spans`): from the start towards
        the stop, never reaching it."""
        if start is None or stop is None:
            return
        lo, hi = (start[0], stop[1] - 1) if step > 0 else (stop[0] + 1, start[1])
        self._known[id(value)] = (value, lo, hi)

    def spans(self, args: tuple, bounds: tuple, env: dict) -> tuple:
        """The spans of a range's (start, stop) ``bounds`` (evaluated) written as ``args``
        (its IR arguments): a Python int's own, else its expression's (:meth:`of`) or None."""
        written = (None, args[0]) if len(args) == 1 else args[:2]
        return tuple((b, b) if isinstance(b, int) else None if e is None else self.of(e, env)
                     for b, e in zip(bounds, written, strict=True))

    def of(self, expr, env: dict) -> tuple | None:
        """The (lowest, highest) of the int expression ``expr`` over the noted counters of
        ``env``, or None where it is not known (or leaves int32, where the chip wraps)."""
        if isinstance(expr, ir.Const):
            found = (expr.value, expr.value) if type(expr.value) is int else None
        elif isinstance(expr, ir.Var):
            entry = self._known.get(id(env.get(expr.name)))
            found = entry[1:] if entry is not None and entry[0] is env.get(expr.name) else None
        elif isinstance(expr, ir.Prim) and expr.op == "len" and isinstance(expr.args[0], ir.Var) \
                and isinstance(row := env.get(expr.args[0].name), Row):
            found = (row.length, row.length)
        elif isinstance(expr, ir.Prim) and expr.op in _SPANS and not expr.keywords:
            parts = [self.of(a, env) for a in expr.args]
            found = None if None in parts else _SPANS[expr.op](*parts)
        else:
            found = None
        return found if found is not None and -2 ** 31 <= found[0] and found[1] < 2 ** 31 else None

    def within(self, expr, env: dict, length: int) -> bool:
        """Whether ``row[expr]`` is known in range for a row of ``length`` (Python's
        ``[-length, length)``) in every lane and iteration."""
        span = self.of(expr, env)
        return span is not None and -length <= span[0] and span[1] < length


def _product(a: tuple, b: tuple) -> tuple:
    ends = [x * y for x in a for y in b]
    return min(ends), max(ends)


def _by_literal(op):
    """``op`` (floor division, modulo) of an interval by a positive literal, else None."""
    def span(a: tuple, b: tuple):
        if b[0] != b[1] or b[0] <= 0:
            return None
        return (a[0] // b[0], a[1] // b[0]) if op == "floordiv" else (0, b[0] - 1)
    return span


#: Interval arithmetic of the index expressions :class:`Intervals` follows.
_SPANS = {"add": lambda a, b: (a[0] + b[0], a[1] + b[1]), "sub": lambda a, b: (a[0] - b[1], a[1] - b[0]),
          "neg": lambda a: (-a[1], -a[0]), "pos": lambda a: a, "mul": _product,
          "floordiv": _by_literal("floordiv"), "mod": _by_literal("mod")}


def first(records, grid: tuple, shape: tuple):
    """Of the kernel's ``records`` ((grid rows * 8, grid columns * 128)), the one of the
    lane first in C order (:data:`FIELDS`, all 0 for none), in the jitted call; ``shape``:
    the kernel's arrays' (the lanes' row-major numbering)."""
    tiles = records.reshape(grid[0], BLOCK[0], grid[1], BLOCK[1])[:, 0, :, :len(FIELDS)].reshape(-1, len(FIELDS))
    lane = tiles[:, 2] * shape[1] + tiles[:, 3]
    return tiles[jnp.argmin(jnp.where(tiles[:, 0] > 0, lane, jnp.iinfo(jnp.int32).max))]


def check(record, sites: Sites, shape: tuple, sizes: tuple, lane) -> None:
    """Raise the python backend's LaneIndexError for a ``record`` of :func:`first` (a
    device array: read here, a sync) that names a site; ``shape``: the kernel's arrays'
    (:attr:`.kernel.Layout.shape`), ``sizes``: the call's lanes per vmap level.  A record
    of one field more adds it to the outermost level's index (a device's share's
    first, ``.sharded``).  A traced record (inside a caller's jit, or a ``jax.vmap`` of
    it) is read by a ``jax.debug.callback`` when the computation runs: the error then
    reaches the caller inside JAX's ``JaxRuntimeError`` (the first batch's, under vmap)."""
    import jax

    if record is None:
        return
    if isinstance(record, jax.core.Tracer):
        def report(r):
            jax.debug.callback(lambda v: _raise_first(v, sites, shape, sizes, lane), r)

        # the host is called only for a record that names a read (a call to it costs
        # milliseconds on a TPU); under jax.vmap the cond is a select: called every time
        jax.lax.cond(jnp.any(record[..., 0] > 0), report, lambda r: None, record)
        return
    _raise_first(record, sites, shape, sizes, lane)


def checked_call(jitted, check):
    """``jitted`` (of the argument leaves, to the results and a bounds record) as a call
    that raises the record's LaneIndexError (``check``, :func:`check` bound to a kernel)
    and returns the results; ``.jitted`` and ``.lower`` are ``jitted``'s."""
    def called(*given):
        out, record = jitted(*given)
        check(record)
        return out

    called.jitted, called.lower = jitted, jitted.lower
    return called


def _raise_first(records, sites: Sites, shape: tuple, sizes: tuple, lane) -> None:
    """Raise the error of the first of ``records`` (one, or a batch of them) that names a site."""
    records = np.asarray(records).reshape(-1, np.shape(records)[-1])
    named = np.flatnonzero(records[:, 0] > 0)
    if named.size:
        raise _error(records[named[0]], sites, shape, sizes, lane)


def _error(record, sites: Sites, shape: tuple, sizes: tuple, lane):
    """The error of one ``record`` that names a site (:func:`check`): LaneIndexError for a
    row read, LaneUnboundError for a local read unbound (:meth:`Records.unbound`)."""
    from ...errors import LaneIndexError, LaneUnboundError, source_line
    from .. import host

    site, index, row, col, *outer = (int(v) for v in record)
    length = sites.lengths[site - 1]  # or the name of a local read unbound
    failed = tuple(int(i) for i in np.unravel_index(row * shape[1] + col, tuple(sizes))) if sizes else ()
    if outer and failed:
        failed = (failed[0] + outer[0],) + failed[1:]
    at = sites.names[site - 1]
    path, _, number = at.rpartition(":")
    text = source_line(path, int(number)) if number.isdigit() else ""
    name = getattr(lane, "__qualname__", lane)
    place = f"(lane {host.where(failed)} of {name}, {at}{': ' + text if text else ''})"
    if isinstance(length, str):
        return LaneUnboundError(f"cannot access local variable {length!r} where it is not associated with a value "
                                f"{place}")
    return LaneIndexError(f"index {index} is out of bounds for axis 0 with size {length} {place}")
