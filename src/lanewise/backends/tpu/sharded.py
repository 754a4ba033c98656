"""A tpu call's lanes split over several JAX devices: the outermost vmap level sharded.

With ``lw.config.tpu_devices`` (``LANEWISE_TPU_DEVICES``) giving two or more devices
of JAX's default backend (a host's TPU chips; CPU devices in interpret mode), the
indices of the call's outermost vmap level are split into equal shares, one per
device (at most one device per index): ``jax.shard_map`` over a one-axis ``Mesh``
runs the same Pallas kernel, laid out for one share, on every device.  A level
whose size is not a multiple of the device count is padded (each argument by its
last index) to whole shares; the kernel of a device whose share holds padding
computes those lanes as padding (no loop runs for them, a fold leaves them out,
their results are cut off).  Everything is one jitted call per signature, as on one
device: arguments are padded and sharded, each device runs its kernel, results are
placed by ``out_axes`` on each device and come back as one ``jax.Array`` with a
``NamedSharding`` over the devices, split along the outermost level's axis.  JAX
0.10 has no uneven shards: with padding, the cut result is whatever XLA makes of it
(gathered onto every device).  An argument already sharded that way is read in place.

``lw.reduce`` folds each device's lanes in its kernel, gathers the devices' partials
(one number each) and finishes them (``mean``: the sum over all lanes, then one
division).  The reductions that are not folded in the kernel (``argmin``/``argmax``, a
``lw.Monoid``, ``axis=`` keeping levels, ``segments=``, per-lane arrays: :mod:`.stored`)
reduce the map's values split the same way, their padding cut off, in the same jitted
call: XLA's SPMD partitioner reduces each device's share where it lies and combines
the shares with collectives, so the result is the one-device program's (the lowest
index of ties, a Monoid's lane order).  A call whose outermost level has fewer than two indices runs on
one device, as does a map whose result is not mapped along it (``out_axes=None`` there).

A lane whose row reads are checked (:mod:`.bounds`) gives one record per device; the
call takes the first device's that names a read (the devices hold the outer level's
indices in order, so that is the lane first in C order) and raises its LaneIndexError,
the device's share's first index added to the lane's outermost one.

Example:
    >>> import numpy as np, lanewise as lw
    >>> with lw.config.overridden(tpu_interpret=True, tpu_devices=1):  # one device: unsharded
    ...     lw.vmap(lambda x: x + 1, backend="tpu")(np.zeros(3, np.float32))
    Array([1., 1., 1.], dtype=float32)
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from ...config import config
from ...errors import BackendError

#: The mesh axis the outermost level's indices are split along.
AXIS = "lanes"
#: The fewest devices a call is split over (1 on a one-chip host runs the split path on
#: that chip: how the path is tried there; otherwise one device takes the unsplit path).
SPLIT_FROM = 2


def devices(call=None) -> list:
    """The devices ``lw.config.tpu_devices`` asks for (JAX's default backend's), at most one
    per index of ``call``'s outermost level."""
    import jax

    found = jax.devices()
    wanted = config.tpu_devices
    if wanted != "all":
        if isinstance(wanted, bool) or not isinstance(wanted, int) or wanted < 1:
            raise BackendError(f"lw.config.tpu_devices = {wanted!r}: expected 'all' or a positive number")
        if wanted > len(found):
            raise BackendError(f"lw.config.tpu_devices = {wanted}: JAX has {len(found)} "
                               f"{found[0].platform} device(s)")
        found = found[:wanted]
    if call is not None:
        found = found[:call.sizes[0] if call.sizes else 1]
    return list(found)


def key(call) -> tuple:
    """The devices ``call`` is split over, as a part of its whole call's cache key (() on one)."""
    chosen = devices(call)
    return tuple(d.id for d in chosen) if len(chosen) >= SPLIT_FROM else ()


def whole(exe, call, fold: tuple | None):
    """``exe``'s jitted whole call of ``call`` (:meth:`Executable.whole`) split over the
    devices, and its program; None where the call runs on one device."""
    chosen = devices(call)
    if len(chosen) < SPLIT_FROM:
        return None
    if fold and not _folded_whole(exe, call, fold):
        return _reduced_after(exe, call, fold, chosen)
    op = fold[0] if fold else None
    # a mean is the devices' sums over the lanes' count: each device's own mean would round twice
    folds = ("sum" if op == "mean" else op) if fold else None
    split = _Split.of(exe, call, chosen, fold, folds)
    if not folds and None in split.dims:  # an output unmapped at the outer level is no device's share
        return None
    size = call.sizes[0]

    def pipeline(*given):
        results, record = split(call, given)
        if folds:
            return [_finished(exe.kernel, op, folds, r, call.sizes) for r in results], record
        return [_cut(r, k, size) for r, k in zip(results, split.dims, strict=True)], record

    from .bounds import checked_call

    return checked_call(split.placing(pipeline), split.check), split.program


def _reduced_after(exe, call, fold: tuple, chosen: list):
    """The reductions not folded in the kernel (:func:`.stored.reducing`) of the map's
    values computed split over ``chosen``: each device's share in level order (the outer
    level first, so split along axis 0 whatever ``out_axes`` says), the padding cut off
    before any reduction sees it, then the reduction traced into the same jitted call on
    the split values: XLA's SPMD partitioner reduces each device's share where it lies
    and inserts the collectives that combine them (its results are the unsplit
    program's: a Monoid's fold keeps lane order, argmin/argmax the lowest of ties)."""
    import jax
    from jax.sharding import NamedSharding

    from . import stored
    from .kernel import place

    split = _Split.of(exe, call, chosen, fold, None, placed=False)
    size, along = call.sizes[0], NamedSharding(split.mesh, _spec(0))
    found = []  # the devices' first bounds record of the trace under way

    def lanes(given):
        results, record = split(call, given)
        found.append(record)
        # split once cut too (unevenly: XLA pads each share and masks the padding out of
        # every reduction itself), said rather than left to XLA's sharding propagation,
        # which could gather every lane's value onto each device
        return [jax.lax.with_sharding_constraint(_cut(r, 0, size), along) for r in results]

    return stored.reducing(call, fold, split.program, lanes, place, jit=split.placing,
                           checks=(found, split.check))


@dataclass(frozen=True)
class _Split:
    """A call's kernel under ``jax.shard_map`` (:func:`_split`): ``run`` of the padded
    arguments gives each result split along its axis ``dims`` (or folded, one partial per
    device) and the devices' bounds records (or None); ``program`` the results';
    ``check`` raises a record's LaneIndexError (:func:`.bounds.check`); ``share``: the
    outer level's indices per device."""

    run: object
    mesh: object
    specs: tuple
    pad: int
    dims: list
    program: object
    check: object
    share: int

    @classmethod
    def of(cls, exe, call, chosen: list, fold: tuple | None, folds: str | None, placed: bool = True):
        """``call`` split over ``chosen``: :meth:`Executable.pipeline` of one share, of
        ``fold`` folding ``folds`` in the kernel (None: the map's values, ``placed`` by
        ``out_axes`` or in level order)."""
        count, size = len(chosen), call.sizes[0]
        share = -(-size // count)
        run, program, mapped = exe.pipeline(_share(call, share), fold, folds, placed=placed,
                                            lanes=lambda where: _lanes(where, size, share))
        dims = [_outer_dim(o) if placed else 0 for o in mapped.outputs]
        split, mesh, specs = _split(run, call, chosen, dims, folds)
        return cls(split, mesh, specs, share * count - size, dims, program, run.check, share)

    def __call__(self, call, given: tuple) -> tuple:
        """The devices' results from ``call``'s argument leaves ``given`` (traced), and the
        record of the first device whose kernel recorded a row read out of range (one
        field more: :func:`.bounds.check` adds it to the outer level's index), or None
        when the lane's reads are not checked."""
        padded = (_padded(v, leaf, self.pad) for v, leaf in zip(given, call.signature.leaves, strict=True))
        results, records = self.run(*padded)
        return results, (None if records is None else _first_device(records, self.share))

    def placing(self, pipeline):
        """``pipeline`` jitted, its arguments moved onto the mesh (:func:`_placing`)."""
        import jax

        return _placing(jax.jit(pipeline), self.mesh, self.specs, self.pad)


def _folded_whole(exe, call, fold: tuple) -> bool:
    """A reduction every device folds in its kernel: an op of :data:`.kernel.FOLDS` over
    every lane of scalar lanes.  The others (argmin/argmax, a ``lw.Monoid``, ``axis=``
    keeping levels, ``segments=``, per-lane arrays, which the kernel does not fold on one
    device either: :func:`.stored.folded_side`) reduce the map's values after the kernel
    (:func:`_reduced_after`)."""
    from ...plan import reduction

    op, axis = fold
    if not (isinstance(op, str) and op in exe.kernel.FOLDS and axis is None):
        return False
    share = local(call)
    return not reduction.reduce_spec(op, axis, exe.mapped(share, *exe.prepared(share))).arrays


def _placing(jitted, mesh, specs: tuple, pad: int):
    """``jitted``, its arguments committed to other devices first moved onto ``mesh``
    (:func:`_moved`); ``.lower`` as jax.jit's (what XLA makes of the call)."""
    def moved(given):
        return [_moved(v, mesh, spec, pad) for v, spec in zip(given, specs, strict=True)]

    def called(*given):
        return jitted(*moved(given))

    called.lower = lambda *given: jitted.lower(*moved(given))
    return called


def _moved(value, mesh, spec, pad: int):
    """A JAX array committed to other devices than ``mesh``'s put on them (jit refuses to
    move it): split as the kernel reads it, or whole on each where its outer level pads.
    Any other argument goes to the jitted call as it is (one already split so: in place)."""
    import jax
    from jax.sharding import NamedSharding, PartitionSpec

    if (not isinstance(value, jax.Array) or isinstance(value, jax.core.Tracer)  # traced: the caller's jit places it
            or not value.committed or value.sharding.device_set == set(mesh.devices.flat)):
        return value
    return jax.device_put(value, NamedSharding(mesh, PartitionSpec() if pad else spec))


def _split(run, call, chosen: list, dims: list, folds: str | None):
    """``run`` (a share's kernel and layout) under ``jax.shard_map`` over ``chosen``:
    arguments mapped at the outer level split along that axis, the others whole on every
    device; results split along their outer level's axis (``dims``), or, folded, one
    partial per device.  With the mesh and the arguments' PartitionSpecs."""
    import jax
    from jax.sharding import Mesh

    def body(*given):
        found = []  # this device's bounds record, if the kernel checks row reads
        results = run(given, found)
        results = [r[None] for r in results] if folds else results
        return results, (found[0][None] if found else None)

    mesh = Mesh(np.array(chosen), (AXIS,))
    ins = tuple(_spec(leaf.axes[0] if leaf.is_array else None) for leaf in call.signature.leaves)
    outs = [_spec(0) for _ in dims] if folds else [_spec(k) for k in dims]
    # check_vma=False: pallas_call's results carry no varying-axes type (JAX asks for one otherwise);
    # the records' spec is a prefix of None too (a kernel without checked reads)
    return (jax.shard_map(body, mesh=mesh, in_specs=ins, out_specs=(outs, _spec(0)), check_vma=False),
            mesh, ins)


def _first_device(records, share: int):
    """Of the devices' ``records`` (one row each, :func:`.bounds.first`), the first that
    names a read (all 0 for none) and, last, its device's first outer index."""
    import jax.numpy as jnp

    device = jnp.argmax(records[:, 0] > 0)  # the first named, or the first device's (none)
    return jnp.concatenate([records[device], (device * share).astype(jnp.int32)[None]])


def _spec(axis: int | None):
    """The PartitionSpec of an array split along ``axis`` (None: whole on every device)."""
    from jax.sharding import PartitionSpec

    return PartitionSpec() if axis is None else PartitionSpec(*([None] * axis), AXIS)


def _share(call, share: int):
    """``call`` as one device sees it: ``share`` indices of its outer level (the first ones:
    the kernel is laid out and traced for them)."""
    def first(value, leaf):
        axis = leaf.axes[0] if leaf.is_array else None
        return value if axis is None else value[(slice(None),) * axis + (slice(0, share),)]

    values = tuple(first(v, leaf) for v, leaf in zip(call.values, call.signature.leaves, strict=True))
    return replace(call, values=values, sizes=(share,) + tuple(call.sizes[1:]))


def local(call):
    """``call`` as each device runs it (itself on one device)."""
    chosen = devices(call)
    return call if len(chosen) < SPLIT_FROM else _share(call, -(-call.sizes[0] // len(chosen)))


def _lanes(where, size: int, share: int):
    """The lanes this device's kernel computes, as :func:`.kernel.compiled`'s ``lanes_of``
    gives them: its share of the outer level's ``size`` indices (the last devices' shares
    hold the padding), of ``where``, the layout of one share."""
    import jax.numpy as jnp
    from jax import lax

    real = jnp.clip(size - lax.axis_index(AXIS) * share, 0, share).astype(jnp.int32)
    if where.plane:  # the outer level is the slowest part of the plane's rows
        return jnp.stack([real * (where.rows // share), jnp.int32(where.cols)])
    return (real * (where.lanes // share))[None]


def _outer_dim(out) -> int | None:
    """The axis of a placed result (:func:`.kernel.place`) that the outermost level maps to."""
    level_dims = out.level_dims
    if not level_dims or level_dims[0] is None:
        return None
    dims = [d for d in level_dims if d is not None] + list(out.lane_dims)
    return sorted(dims).index(level_dims[0])


def _padded(value, leaf, pad: int):
    """``value`` with ``pad`` more indices of the outer level: its last one repeated
    (padding lanes compute on real numbers, as :func:`.kernel.as_tiles` pads)."""
    axis = leaf.axes[0] if leaf.is_array else None
    if not pad or axis is None:
        return value
    import jax.numpy as jnp

    widths = [(0, 0)] * np.ndim(value)
    widths[axis] = (0, pad)
    return jnp.pad(value, widths, mode="edge")


def _cut(value, axis: int, size: int):
    """A result without the padding's indices along ``axis``."""
    from jax import lax

    return value if value.shape[axis] == size else lax.slice_in_dim(value, 0, size, axis=axis)


def _finished(kernel, op: str, folds: str, partials, sizes):
    """The reduction from the devices' ``partials`` (one each), as one device finishes its
    tiles' (:data:`.kernel._FINISH`); ``mean`` divides the sum by every lane's count."""
    import jax.numpy as jnp

    value = kernel._FINISH[folds](partials)
    return value / jnp.float32(np.prod(sizes)) if op == "mean" else value


def explain(call) -> str | None:
    """``lw.explain``'s line on the devices a call is split over (None: one device)."""
    chosen = devices(call)
    if len(chosen) < SPLIT_FROM:
        return None
    share = -(-call.sizes[0] // len(chosen))
    return (f"devices: the outermost vmap level's {call.sizes[0]} indices split over {len(chosen)} "
            f"{chosen[0].platform} devices ({share} each, the schedule above is one device's; "
            "jax.shard_map; lw.config.tpu_devices)")
