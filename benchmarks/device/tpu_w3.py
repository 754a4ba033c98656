"""W3 (EMA-crossover backtest, a scan per series) on the TPU chip: lanewise backend="tpu" against
jax.jit(jax.vmap(lax.scan)), float32.

    python3 benchmarks/device/tpu_w3.py     # on the device machine; writes $OUT/tpu_w3.json

The lane is benchmarks/w3_backtest.py's: ``lw.scan(step, (p[0], p[0], 0.0, 0.0, p[0]), p)[0][3]``,
one kernel whose tiles scan their series' rows held in VMEM, the carry in registers (no launch
per step).  The reference is the same step in JAX (``jnp.where`` for the position flips),
``jax.vmap`` of ``lax.scan`` under ``jax.jit``: XLA's loop over time, one iteration per step.
Sizes: ``W3_SIZES`` (series x steps, default 2048x5000,16384x1000); the lanewise side over the
tiles of ``W3_TILES`` (lw.config.tpu_tile; the rows' blocks may shrink it to fit VMEM) and the
unrolls of ``W3_UNROLLS`` (scan steps per loop iteration).  Results are compared (float32:
the P&Ls are sums of thousands of terms that cancel, so the absolute difference is reported
against the P&Ls' scale).  Off a TPU, ``LANEWISE_TPU_INTERPRET=1 W3_SIZES=300x37`` checks that
it runs.
"""
import json
import os

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

import lanewise as lw
from benchmarks.device.tpu_w2 import timed
from benchmarks.w3_backtest import FAST, SLOW, setup, step
from lanewise.backends.tpu import kernel as tpu_kernel
from lanewise.backends.tpu import rows as tpu_rows

SIZES = [tuple(map(int, s.split("x"))) for s in os.environ.get("W3_SIZES", "2048x5000,16384x1000").split(",")]
TILES = [tuple(map(int, t.split("x"))) for t in os.environ.get("W3_TILES", "8x128,16x128,32x128").split(",")]
UNROLLS = [int(u) for u in os.environ.get("W3_UNROLLS", "4,8,16").split(",")]


def lane(p):
    return lw.scan(step, (p[0], p[0], 0.0, 0.0, p[0]), p)[0][3]


def jax_step(carry, price):
    fast, slow, pos, pnl, last = carry
    pnl = pnl + pos * (price - last)
    fast = fast + FAST * (price - fast)
    slow = slow + SLOW * (price - slow)
    pos = jnp.where(fast > slow, 1.0, jnp.where(fast < slow, -1.0, pos)).astype(pos.dtype)
    return (fast, slow, pos, pnl, price), None


def jax_lane(p):
    zero = jnp.zeros((), p.dtype)
    return lax.scan(jax_step, (p[0], p[0], zero, zero, p[0]), p)[0][3]


def main():
    rows = []
    for series, steps in SIZES:
        prices = jnp.asarray(setup(series, steps=steps)[0].astype(np.float32))
        t_jax, ref = timed(jax.jit(jax.vmap(jax_lane)), prices)
        scale = float(jnp.max(jnp.abs(ref)))
        for tile in TILES:
            for unroll in UNROLLS:
                tpu_kernel.compiled.cache_clear()
                with lw.config.overridden(tpu_tile=tile, tpu_unroll=unroll):
                    f = lw.vmap(lane, backend="tpu")
                    t_lw, got = timed(f, prices)
                rows.append({"workload": "W3", "series": series, "steps": steps, "tile": tile,
                             "tile_used": tpu_kernel.layout((series,), tpu_rows.fit_tile(tile, [steps])).tile,
                             "unroll": unroll,
                             "jax_s": t_jax, "lanewise_tpu_s": t_lw, "ratio": t_lw / t_jax,
                             "max_abs_diff": float(jnp.max(jnp.abs(got - ref))), "pnl_scale": scale})
                print(json.dumps(rows[-1]), flush=True)
    with open(os.path.join(os.environ.get("OUT", "/tmp"), "tpu_w3.json"), "w") as fh:
        json.dump(rows, fh, indent=1)


if __name__ == "__main__":
    main()
