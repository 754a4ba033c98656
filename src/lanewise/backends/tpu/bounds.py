"""Row reads out of range on the tpu backend: found in the kernel, raised on the host.

A lane's ``p[i]`` with an index computed at run time (a loop's counter, a lane's value)
is checked as Python checks it: a *live* lane (not masked off by a branch, a return, a
break or padding) whose index lies outside ``[-len(p), len(p))`` is recorded.  Each grid
step has an (8, 128) int32 block of records, zeroed as it starts; the first bad read of
a tile writes :data:`FIELDS` into its first row.  After the call the host reads the record
of the lane first in C order (one device sync, only for lanes with such reads) and raises the
``LaneIndexError`` the python backend raises: the index, the row's size, a lane that
failed and the user's ``file:line``.  Inside a caller's ``jax.jit`` (``lw.jax.op``, or
``lw.vmap`` of traced arrays) the record cannot be read while tracing: a
``jax.debug.callback`` reads it when the computation runs and raises the same error,
which JAX hands to the caller as a ``JaxRuntimeError`` whose message ends with it
(:func:`check`).  A call split over several devices gathers each device's record and
takes the first device's that names a site (``.sharded``).

Example:
    >>> sites = Sites()
    >>> sites.id("f.py:3"), sites.id("f.py:5"), sites.id("f.py:3"), sites.names
    (1, 2, 1, ['f.py:3', 'f.py:5'])
"""

from __future__ import annotations


import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.experimental import pallas as pl

#: A record's fields, in its first row: the read's site (its id, 0 for none), the index, the
#: row's length, and the lane's row and column in the kernel's arrays.
FIELDS = ("site", "index", "length", "row", "col")
#: The block of records each grid step writes (one register).
BLOCK = (8, 128)


class Sites:
    """The checked reads of a lane, numbered from 1 by their ``file:line`` as tracing meets
    them (the same numbers in every trace of the kernel); ``checked`` once one is met."""

    def __init__(self):
        self.names: list = []

    def id(self, at: str) -> int:
        if at not in self.names:
            self.names.append(at)
        return self.names.index(at) + 1

    @property
    def checked(self) -> bool:
        return bool(self.names)

    def read(self, live, index, length: int, at: str) -> None:
        """A read's site, while the kernel is only typed (nothing is recorded)."""
        self.id(at)


class Records(Sites):
    """The checks of one tile (or strip) of lanes: ``ref`` the grid step's record block,
    ``origin`` the (row, column) of the lanes' first one in the kernel's arrays."""

    def __init__(self, sites: Sites, ref, origin: tuple):
        self.names, self.ref, self.origin = sites.names, ref, origin

    def read(self, live, index, length: int, at: str) -> None:
        """Record ``row[index]`` if a lane of ``live`` reads outside the row's ``length``
        (``index`` a scalar, the same in every lane, or one per lane) and none is recorded.
        Only the test of the index runs on every read (for a scalar index, one scalar
        comparison); the record is computed in the branch that writes it."""
        site = self.id(at)
        index = jnp.asarray(index, jnp.int32)
        out = (index < -length) | (index >= length)
        if index.ndim:
            self.record(live & out, index, site, length)
            return

        @pl.when(out)
        def _uniform():
            self.record(live, jnp.broadcast_to(index, live.shape), site, length)

    def record(self, bad, index, site: int, length: int) -> None:
        """Write the record of the first lane of ``bad`` (reading ``index``), if any and if
        none is written yet: min and sum reductions (Mosaic lowers no argmax) and selects."""
        ref = self.ref

        @pl.when(jnp.any(bad) & (jnp.max(ref[...]) == 0))
        def _record():
            shape = bad.shape
            rows, cols = (lax.broadcasted_iota(jnp.int32, shape, k) for k in (0, 1))
            flat = rows * shape[1] + cols
            chosen = flat == jnp.min(jnp.where(bad, flat, jnp.int32(shape[0] * shape[1])))
            values = (jnp.int32(site), jnp.sum(jnp.where(chosen, index, 0)), jnp.int32(length),
                      self.origin[0] + jnp.sum(jnp.where(chosen, rows, 0)),
                      self.origin[1] + jnp.sum(jnp.where(chosen, cols, 0)))
            r, c = (lax.broadcasted_iota(jnp.int32, BLOCK, k) for k in (0, 1))
            block = jnp.zeros(BLOCK, jnp.int32)
            for k, value in enumerate(values):
                block = jnp.where((r == 0) & (c == k), value, block)
            ref[...] = block


def first(records, grid: tuple, shape: tuple):
    """Of the kernel's ``records`` ((grid rows * 8, grid columns * 128)), the one of the
    lane first in C order (:data:`FIELDS`, all 0 for none), in the jitted call; ``shape``:
    the kernel's arrays' (the lanes' row-major numbering)."""
    tiles = records.reshape(grid[0], BLOCK[0], grid[1], BLOCK[1])[:, 0, :, :len(FIELDS)].reshape(-1, len(FIELDS))
    lane = tiles[:, 3] * shape[1] + tiles[:, 4]
    return tiles[jnp.argmin(jnp.where(tiles[:, 0] > 0, lane, jnp.iinfo(jnp.int32).max))]


def check(record, sites: Sites, shape: tuple, sizes: tuple, lane) -> None:
    """Raise the python backend's LaneIndexError for a ``record`` of :func:`first` (a
    device array: read here, a sync) that names a site; ``shape``: the kernel's arrays'
    (:attr:`.kernel.Layout.shape`), ``sizes``: the call's lanes per vmap level.  A record
    of six fields adds its sixth to the outermost level's index (a device's share's
    first, ``.sharded``).  A traced record (inside a caller's jit, or a ``jax.vmap`` of
    it) is read by a ``jax.debug.callback`` when the computation runs: the error then
    reaches the caller inside JAX's ``JaxRuntimeError`` (the first batch's, under vmap)."""
    import jax

    if record is None:
        return
    if isinstance(record, jax.core.Tracer):
        jax.debug.callback(lambda r: _raise_first(r, sites, shape, sizes, lane), record)
        return
    _raise_first(record, sites, shape, sizes, lane)


def _raise_first(records, sites: Sites, shape: tuple, sizes: tuple, lane) -> None:
    """Raise the error of the first of ``records`` (one, or a batch of them) that names a site."""
    records = np.asarray(records).reshape(-1, np.shape(records)[-1])
    named = np.flatnonzero(records[:, 0] > 0)
    if named.size:
        raise _error(records[named[0]], sites, shape, sizes, lane)


def _error(record, sites: Sites, shape: tuple, sizes: tuple, lane):
    """The LaneIndexError of one ``record`` that names a site (:func:`check`)."""
    from ...errors import LaneIndexError, source_line
    from .. import host

    site, index, length, row, col, *outer = (int(v) for v in record)
    failed = tuple(int(i) for i in np.unravel_index(row * shape[1] + col, tuple(sizes))) if sizes else ()
    if outer and failed:
        failed = (failed[0] + outer[0],) + failed[1:]
    at = sites.names[site - 1]
    path, _, number = at.rpartition(":")
    text = source_line(path, int(number)) if number.isdigit() else ""
    name = getattr(lane, "__qualname__", lane)
    return LaneIndexError(f"index {index} is out of bounds for axis 0 with size {length} "
                          f"(lane {host.where(failed)} of {name}, {at}"
                          f"{': ' + text if text else ''})")
