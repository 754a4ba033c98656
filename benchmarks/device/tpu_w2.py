"""W2 on the TPU chip: lanewise backend="tpu" against jax.vmap(lax.while_loop), float32.

    python3 benchmarks/device/tpu_w2.py [N]     # on the device machine; writes $OUT/tpu_w2.json

First try (2026-12-06, commit 38469f6): Mosaic refused the kernel (scf.yield of a while_loop
carry: an int32 splat with layout {*,*} and i1 masks); see the commit message.
"""
import json
import os
import statistics
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

import lanewise as lw

MAX_ITER = 500

def escape(cr, ci):
    zr = zi = 0.0
    for n in range(MAX_ITER):
        zr, zi = zr * zr - zi * zi + cr, 2 * zr * zi + ci
        if zr * zr + zi * zi > 4.0:
            return n
    return MAX_ITER

def jax_esc(cr, ci):
    def cond(s):
        return (s[0] < MAX_ITER) & (s[3] == MAX_ITER)
    def body(s):
        n, zr, zi, res = s
        zr, zi = zr * zr - zi * zi + cr, 2 * zr * zi + ci
        return n + 1, zr, zi, jnp.where(zr * zr + zi * zi > 4.0, n, res)
    init = (jnp.int32(0), jnp.float32(0.0), jnp.float32(0.0), jnp.int32(MAX_ITER))
    return lax.while_loop(cond, body, init)[3]

def timed(f, *a, reps=7):
    out = f(*a)
    jax.block_until_ready(out)
    ts = []
    for _ in range(reps):
        t = time.perf_counter()
        jax.block_until_ready(f(*a))
        ts.append(time.perf_counter() - t)
    return statistics.median(ts), out

def main():
    print("devices", jax.devices())
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 1536
    re = jnp.asarray(np.linspace(-2.0, 0.6, n, dtype=np.float32))
    im = jnp.asarray(np.linspace(-1.3, 1.3, n, dtype=np.float32))
    jv = jax.jit(jax.vmap(jax.vmap(jax_esc, in_axes=(None, 0)), in_axes=(0, None)))
    t_jax, ref = timed(jv, re, im)
    rows = {"n": n, "jax_vmap_while_s": t_jax}
    t0 = time.perf_counter()
    grid = lw.vmap(lw.vmap(escape, in_axes=(None, 0)), in_axes=(0, None), backend="tpu")
    jax.block_until_ready(grid(re, im))
    rows["lanewise_first_call_s"] = time.perf_counter() - t0
    t_lw, got = timed(grid, re, im)
    rows["lanewise_tpu_s"] = t_lw
    rows["ratio"] = t_lw / t_jax
    got, ref = np.asarray(got), np.asarray(ref)
    rows["mismatch_frac"] = float((got != ref).mean())
    print(json.dumps(rows))
    with open(os.path.join(os.environ.get("OUT", "/tmp"), "tpu_w2.json"), "w") as f:
        json.dump(rows, f)

if __name__ == "__main__":
    main()
