"""``lw.reduce(f, "argmin")`` and ``"argmax"`` on the tpu backend: the map's kernel, then
the index of the first least (greatest) lane in the mapped result, NumPy's flat index.

Unlike the folds of :mod:`.kernel` (each tile folds its lanes into a register of
partials), every lane's value is stored, then ``jnp.argmin``/``jnp.argmax`` take
NumPy's index over the result as ``out_axes`` places it (C order, the first of equal
values, the first NaN).  Every mapped axis is reduced, as by the other folds.

Example:
    >>> import numpy as np, lanewise as lw
    >>> with lw.config.overridden(tpu_interpret=True):
    ...     int(lw.reduce(lw.vmap(lambda v: (v - 2.0) ** 2, backend="tpu"), "argmin")(
    ...         np.arange(5, dtype=np.float32)))
    2
"""

from __future__ import annotations

from ...errors import EmptyReductionError

#: The reductions this module computes.
OPS = ("argmin", "argmax")


def index_of(op: str, values):
    """NumPy's ``np.argmin(values)`` (or argmax) of a mapped result, as an int32 0-d array; an
    EmptyReductionError, as the reference's, over zero lanes."""
    import jax.numpy as jnp

    if values.size == 0:
        raise EmptyReductionError(f"lw.reduce: {op} over zero lanes: it has no identity (use lw.Monoid with one)")
    return getattr(jnp, op)(values).astype(jnp.int32)
