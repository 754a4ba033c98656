"""Does a loop-free kernel go faster when each grid step computes its block in strips?

    python3 benchmarks/device/tpu_strips.py     # on the device machine; writes $OUT/tpu_strips.json

lanewise's loop-free kernels compute a whole (256, 1024) block one operation at a time: each
intermediate is 256 vector registers, so every operation loads and stores VMEM.  A hand-written
kernel can instead loop (``lax.fori_loop``) over strips of the block a few registers in size, so
that a chain of operations stays in registers.  Measured here on hand-written kernels, the block
whole against strips of several shapes, for W1 (cos(r) / (1 + r) stored), W5 (its sum: partials
folded into one register per grid step) and MC's lane (one normal per lane from
``lw.random``'s Philox, the payoff summed), each beside XLA's fused version on the same chip.
``STRIPS`` (e.g. ``8x1024,8x512``) picks the strips; ``N`` the grid side (a multiple of 1024).
"""
import json
import os

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.experimental import pallas as pl

from benchmarks.device.tpu_w2 import timed
from benchmarks.mc_option import DRIFT, K, S0, VOL
from lanewise.backends.tpu import random as tpu_random

BLOCK = (256, 1024)
N = int(os.environ.get("N", "20480"))
STRIPS = [None] + [tuple(map(int, s.split("x"))) for s in
                   os.environ.get("STRIPS", "8x1024,16x1024,32x1024,8x512,16x512,8x256,8x128").split(",")]
INTERPRET = jax.devices()[0].platform != "tpu"


def w1(x, y):
    r = x * x + y * y
    return jnp.cos(r) / (1.0 + r)


def fold(v):
    """A strip's values summed into one (8, 128) register."""
    parts = [v[r:r + 8, c:c + 128] for r in range(0, v.shape[0], 8) for c in range(0, v.shape[1], 128)]
    while len(parts) > 1:
        parts = [a + b for a, b in zip(parts[::2], parts[1::2], strict=False)] + parts[len(parts) & ~1:]
    return parts[0]


def strips(strip, body, init):
    """``body(rows, cols, acc)`` over the block's strips (the block whole when ``strip`` is None)."""
    if strip is None:
        return body(slice(None), slice(None), init)
    nr, nc = BLOCK[0] // strip[0], BLOCK[1] // strip[1]

    def step(k, acc):
        i = pl.multiple_of((k // nc) * strip[0], strip[0])
        j = pl.multiple_of((k % nc) * strip[1], strip[1])
        return body(pl.ds(i, strip[0]), pl.ds(j, strip[1]), acc)
    return lax.fori_loop(0, nr * nc, step, init)


def w1_call(strip, total: bool):
    def kernel(x_ref, y_ref, o_ref):
        def body(rs, cs, acc):
            v = w1(x_ref[rs, :], y_ref[:, cs])
            if total:
                return acc + fold(v)
            o_ref[rs, cs] = v
            return acc
        acc = strips(strip, body, jnp.zeros((8, 128), jnp.float32))
        if total:
            o_ref[...] = acc
    grid = (N // BLOCK[0], N // BLOCK[1])
    out = (grid[0] * 8, grid[1] * 128) if total else (N, N)
    call = pl.pallas_call(
        kernel, grid=grid, interpret=INTERPRET,
        in_specs=[pl.BlockSpec((BLOCK[0], 1), lambda i, j: (i, 0)), pl.BlockSpec((1, BLOCK[1]), lambda i, j: (0, j))],
        out_specs=pl.BlockSpec((8, 128) if total else BLOCK, lambda i, j: (i, j)),
        out_shape=jax.ShapeDtypeStruct(out, jnp.float32))
    return jax.jit(lambda x, y: jnp.sum(call(x[:, None], y[None, :])) if total else call(x[:, None], y[None, :]))


def payoff(z):
    return jnp.maximum(S0 * jnp.exp(DRIFT + VOL * z) - K, 0.0)


def mc_call(strip, n: int, key):
    def kernel(o_ref):
        base = (pl.program_id(0) * BLOCK[0]) * BLOCK[1]

        def body(rs, cs, acc):
            shape = (BLOCK[0] if strip is None else strip[0], BLOCK[1] if strip is None else strip[1])
            r0 = 0 if strip is None else rs.start
            c0 = 0 if strip is None else cs.start
            i = base + (r0 + lax.broadcasted_iota(jnp.int32, shape, 0)) * BLOCK[1] + c0 + \
                lax.broadcasted_iota(jnp.int32, shape, 1)
            z = tpu_random.normal(tpu_random.fold_in(key, i))
            return acc + fold(payoff(z))
        o_ref[...] = strips(strip, body, jnp.zeros((8, 128), jnp.float32))
    grid = (n // (BLOCK[0] * BLOCK[1]),)
    call = pl.pallas_call(kernel, grid=grid, interpret=INTERPRET, in_specs=[],
                          out_specs=pl.BlockSpec((8, 128), lambda i: (i, 0)),
                          out_shape=jax.ShapeDtypeStruct((grid[0] * 8, 128), jnp.float32))
    return jax.jit(lambda: jnp.sum(call()))


def main():
    rows = []
    x = jnp.linspace(-3.0, 3.0, N, dtype=jnp.float32)
    xla_w1 = jax.jit(lambda a, b: w1(a[:, None], b[None, :]))
    xla_w5 = jax.jit(lambda a, b: jnp.sum(w1(a[:, None], b[None, :])))
    for name, xla, total in (("W1", xla_w1, False), ("W5", xla_w5, True)):
        t_xla, ref = timed(xla, x, x)
        for strip in STRIPS:
            t, got = timed(w1_call(strip, total), x, x)
            rows.append({"workload": name, "n": N, "strip": strip, "xla_s": t_xla, "pallas_s": t,
                         "ratio": t / t_xla, "max_abs_diff": float(jnp.max(jnp.abs(got - ref)))})
            print(json.dumps(rows[-1]), flush=True)
    n = int(os.environ.get("MC_N", str(100 * BLOCK[0] * BLOCK[1])))
    key = (np.uint32(12345), np.uint32(678))
    for strip in STRIPS:
        t, got = timed(mc_call(strip, n, key))
        rows.append({"workload": "MC-lane", "n": n, "strip": strip, "pallas_s": t, "mean": float(got) / n})
        print(json.dumps(rows[-1]), flush=True)
    with open(os.path.join(os.environ.get("OUT", "/tmp"), "tpu_strips.json"), "w") as fh:
        json.dump(rows, fh, indent=1)


if __name__ == "__main__":
    main()
