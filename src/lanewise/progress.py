"""``lw.vmap(..., progress=True)``: a long CPU run in chunks, with a progress bar.

The outermost loop level is cut into about :data:`CHUNKS` pieces; each piece is
an ordinary launch of the same compiled kernel on slices of the inputs, writing
into views of the full outputs (allocated once), so the result is bit for bit
the unchunked one.  The bar is ``tqdm``'s (the ``[progress]`` extra).

Example:
    >>> import numpy as np, lanewise as lw
    >>> f = lw.vmap(lambda x: x * 2, progress=True)  # the bar goes to stderr
    >>> f(np.arange(4.0))
    array([0., 2., 4., 6.])
"""

from __future__ import annotations

import dataclasses

from . import backends, pytree
from .errors import BackendError
from .plan.program import Call

#: Pieces per run: fine enough to watch, coarse enough that each is a full launch.
CHUNKS = 100
#: ... and at least this many lanes a piece (a parallel launch costs microseconds
#: on an idle machine, milliseconds on a busy one).
MIN_PIECE = 1 << 20


def bar(total: int, desc: str):
    """A tqdm progress bar (BackendError naming the extra when tqdm is missing)."""
    try:
        from tqdm.auto import tqdm
    except ImportError as e:
        raise BackendError("progress=True needs tqdm: pip install 'lanewise[progress]'") from e
    return tqdm(total=total, desc=desc, unit="lane", unit_scale=True, leave=False)


def run(backend, exe, call: Call, out=None):
    """``backend.run(exe, call, out)`` in chunks of the outermost loop level."""
    if backend.NAME not in backends.supporting("progress"):
        raise BackendError(f"progress=True runs on the {' or '.join(backends.supporting('progress'))} "
                           f"backend, not {backend.NAME!r}; "
                           "for dask use dask.diagnostics.ProgressBar or the distributed dashboard")
    level = exe.order[0]
    n = call.sizes[level] if call.sizes else 0
    if n < 2:
        return backend.run(exe, call, out)
    full = backend.allocate(exe, call, out)
    lanes_per_index = _product(call.sizes) // n
    step = max(-(-n // CHUNKS), -(-MIN_PIECE // max(lanes_per_index, 1)))
    name = getattr(call.lane, "__qualname__", "lanes")
    with bar(n * lanes_per_index, name) as progress:
        for lo in range(0, n, step):
            hi = min(lo + step, n)
            try:
                backend.run(exe, _piece(call, level, lo, hi), _views(exe, full, level, lo, hi))
            except Exception:  # noqa: BLE001 - rerun whole: the error then names the true lane index
                return backend.run(exe, call, out)
            progress.update((hi - lo) * lanes_per_index)
    return pytree.unflatten(exe.program.out_tree, full) if out is None else out


def _product(sizes) -> int:
    total = 1
    for s in sizes:
        total *= s
    return total


def _piece(call: Call, level: int, lo: int, hi: int) -> Call:
    """``call`` restricted to indices [lo, hi) of ``level``: inputs sliced along it."""
    values = []
    for leaf, v in zip(call.signature.leaves, call.values, strict=True):
        axis = leaf.axes[level]
        values.append(v if axis is None else v[(slice(None),) * axis + (slice(lo, hi),)])
    sizes = tuple(hi - lo if lv == level else s for lv, s in enumerate(call.sizes))
    return dataclasses.replace(call, values=tuple(values), sizes=sizes)


def _views(exe, full: list, level: int, lo: int, hi: int):
    """The slices of the full outputs that the piece writes (as an ``out=`` pytree)."""
    views = []
    for o, leaf in zip(exe.program.outputs, full, strict=True):
        dim = o.level_dims[level]
        views.append(leaf if dim is None else leaf[(slice(None),) * dim + (slice(lo, hi),)])
    return pytree.unflatten(exe.program.out_tree, views)
