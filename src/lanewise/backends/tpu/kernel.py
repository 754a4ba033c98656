"""One Pallas kernel per lane: the lanes laid out in (8, 128) tiles, one grid step per tile.

The lanes of a call (every index of every vmap level, in C order) are flattened
and padded to a whole number of tiles of ``TILE`` = (8, 128) lanes, the shape of
a TPU vector register; each argument becomes a ``(tiles * 8, 128)`` array and the
kernel's grid walks its tiles.  Inside, the lane's tile function (:mod:`.lower`)
computes every lane of the tile; the padding lanes are outside ``valid``, so no
loop runs for them.  Arguments are 32-bit on the chip: bools travel as int32,
int8/int16/uint8/uint16 are widened to int32 (their values kept), and 64-bit or
complex arguments are refused (:func:`check_dtype`), never silently narrowed.

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

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.experimental import pallas as pl

from ...config import config
from ...errors import LaneTypeError
from .lower import lower

#: Lanes per tile: (sublanes, lanes) of a TPU vector register.
TILE = (8, 128)
#: Argument dtypes the chip computes, as they travel to it (bools as int32).
_CARRIED = {"b": np.dtype(np.int32), "f4": np.dtype(np.float32), "f2": np.dtype(np.float32)}
#: What to pass instead of a refused dtype.
_INSTEAD = {"f": "np.float32", "i": "np.int32", "u": "np.int32", "c": "two float32 arrays (real, imaginary)"}


def check_dtype(name: str, dtype: np.dtype) -> np.dtype:
    """The dtype argument ``name`` of ``dtype`` travels to the chip as; a LaneTypeError
    naming the argument and the fix for a dtype the TPU does not compute."""
    dtype = np.dtype(dtype)
    if dtype.kind == "b":
        return np.dtype(np.int32)
    if dtype.kind in "iu" and dtype.itemsize < 4 or dtype == np.int32:
        return np.dtype(np.int32)
    if dtype in (np.dtype(np.float32), np.dtype(np.float16)) or dtype.name == "bfloat16":
        return dtype
    instead = _INSTEAD.get(dtype.kind, "np.float32")
    fix = f"{name}.astype({instead})" if dtype.kind != "c" else instead
    raise LaneTypeError(f"argument {name} is {dtype}, which the tpu backend does not compute "
                        f"(TPUs compute 32-bit numbers): pass {fix}")


def tiles_for(lanes: int) -> int:
    """How many tiles hold ``lanes`` lanes (at least one, so a kernel always has a grid step)."""
    per = TILE[0] * TILE[1]
    return max(1, -(-lanes // per))


def as_tiles(values: np.ndarray | jax.Array, count: int):
    """Flat lane values padded (with their first value, or zero) to ``count`` tiles, shaped for the kernel."""
    flat = jnp.ravel(jnp.asarray(values))
    pad = count * TILE[0] * TILE[1] - flat.shape[0]
    if pad:
        fill = flat[:1] if flat.shape[0] else jnp.zeros(1, flat.dtype)
        flat = jnp.concatenate([flat, jnp.broadcast_to(fill, (pad,))])
    return flat.reshape(count * TILE[0], TILE[1])


@functools.lru_cache(maxsize=256)
def compiled(lane, dtypes: tuple, bools: tuple, interpret: bool, count_iterations: bool = False):
    """The jitted function of ``lane`` over tiled arguments of ``dtypes`` (``bools``: which
    are bools travelling as int32): ``f(lanes, *tiled) -> (results, iterations)``; its
    results are tiled (bools as int32) and ``iterations``, with ``count_iterations``,
    the loop iterations each tile ran, one per tile."""
    tile_fn = lower(lane, count_iterations)
    structure = {}

    def kernel(lanes_ref, *refs):
        ins, outs = refs[:len(dtypes)], refs[len(dtypes):]
        tile = pl.program_id(0)
        rows = lax.broadcasted_iota(jnp.int32, TILE, 0)
        cols = lax.broadcasted_iota(jnp.int32, TILE, 1)
        valid = (tile * TILE[0] + rows) * TILE[1] + cols < lanes_ref[0]
        args = [r[...] != 0 if b else r[...] for r, b in zip(ins, bools, strict=True)]
        results, _tree, iterations = tile_fn(valid, *args)
        values = list(results) + ([iterations] if count_iterations else [])
        for ref, value in zip(outs, values, strict=True):
            ref[...] = jnp.broadcast_to(jnp.asarray(value).astype(ref.dtype), TILE)

    def result_types(valid, *args):
        results, tree, iterations = tile_fn(valid, *args)
        structure["tree"] = tree
        return results

    def run(lanes, *tiled):
        count = tiled[0].shape[0] // TILE[0] if tiled else 1
        shapes = jax.eval_shape(result_types, jax.ShapeDtypeStruct(TILE, bool),
                                *(jax.ShapeDtypeStruct(TILE, bool if b else d)
                                  for d, b in zip(dtypes, bools, strict=True)))
        kinds = [s.dtype for s in shapes]
        stored = [jnp.int32 if k == jnp.bool_ else k for k in kinds] + ([jnp.int32] if count_iterations else [])
        spec = pl.BlockSpec(TILE, lambda i, *_: (i, 0))
        out = pl.pallas_call(
            kernel,
            out_shape=[jax.ShapeDtypeStruct((count * TILE[0], TILE[1]), k) for k in stored],
            grid=(count,),
            in_specs=[pl.BlockSpec(memory_space=_smem())] + [spec] * len(tiled),
            out_specs=[spec] * len(stored),
            interpret=interpret,
        )(lanes, *tiled)
        results = [o != 0 if k == jnp.bool_ else o for o, k in zip(out, kinds + [None] * count_iterations,
                                                                    strict=True)]
        iterations = results.pop()[::TILE[0], 0] if count_iterations else None
        return results, iterations

    jitted = jax.jit(run)
    printed = []

    def call(lanes, *tiled):
        lanes = jnp.asarray([lanes], jnp.int32)
        if config.debug and not printed:  # the kernel as JAX traced it, once (LANEWISE_DEBUG=1)
            printed.append(True)
            print(f"# ---- lanewise tpu kernel of {getattr(lane, '__qualname__', lane)}\n"
                  f"{jax.make_jaxpr(run)(lanes, *tiled)}")
        results, iterations = jitted(lanes, *tiled)
        return results, structure["tree"], iterations

    return call


def _smem():
    """Scalar memory, where the kernel reads the lane count (any memory in interpret mode)."""
    try:
        from jax.experimental.pallas import tpu as pltpu
    except ImportError:  # pragma: no cover - a jax without the TPU dialect
        return None
    return pltpu.SMEM
