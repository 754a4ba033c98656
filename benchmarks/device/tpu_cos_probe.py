"""Is a cos of lanewise's own faster than Mosaic's ``jnp.cos`` on the TPU?

    python3 benchmarks/device/tpu_cos_probe.py          # on the device machine; writes $OUT/tpu_cos.json
    MC_ONLY=1 python3 benchmarks/device/tpu_cos_probe.py

1. Accuracy (float32 ulps against float64 NumPy) of a Cody-Waite reduction by pi/4 with
   Cephes' polynomials (``cos_fast``) and of ``jnp.cos``, on arguments up to 18..100.
2. W5's hand-written Pallas sum (tpu_strips.py's, whole (256, 1024) blocks) with ``jnp.cos``,
   ``cos_fast`` unguarded (right for |x| < 64 only) and guarded two ways (a block max and
   ``lax.cond``; a fix-up of the large elements), against XLA's fused sum.
3. MC's lane (a normal per lane, strips of 16x512) with the polynomials lanewise's
   ``_cos_sin_quarter`` uses for the argument ``_cos2pi`` has reduced, against
   ``jnp.cos``/``jnp.sin`` of it.
Measured 2026-12-07 (TPU v5e): 2. XLA 0.0122 s, jnp.cos 1.04x, unguarded 0.86x, guarded
1.01x (either way: the guard costs the gain); 3. 0.0053 s -> 0.0047 s.
"""
import json
import os

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.experimental import pallas as pl

from benchmarks.device.tpu_strips import fold  # a block's values summed into one (8, 128) register
from benchmarks.device.tpu_w2 import timed
from lanewise.backends.tpu.random import _cos_sin_quarter  # Cephes' polynomials on [-pi/4, pi/4]

BLOCK = (256, 1024)
N = int(os.environ.get("N", "20480"))
INTERPRET = jax.devices()[0].platform != "tpu"
DP1, DP2, DP3 = 0.78515625, 2.4187564849853515625e-4, 3.77489497744594108e-8
FOPI = 1.27323954473516  # 4/pi

def cos_fast(x):
    x = jnp.abs(x)
    j = (x * jnp.float32(FOPI)).astype(jnp.int32)
    j = j + (j & 1)
    y = j.astype(jnp.float32)
    j = j & 7
    swap = j > 3
    j = jnp.where(swap, j - 4, j)
    sign = swap != (j > 1)
    z = ((x - y * jnp.float32(DP1)) - y * jnp.float32(DP2)) - y * jnp.float32(DP3)
    c, s = _cos_sin_quarter(z)
    r = jnp.where((j == 1) | (j == 2), s, c)
    return jnp.where(sign, -r, r)

def cos_guarded(x):
    big = jnp.max(jnp.abs(x)) >= 8192.0
    return lax.cond(big, jnp.cos, cos_fast, x)

def fold_max(v):
    parts = [v[r:r + 8, c:c + 128] for r in range(0, v.shape[0], 8) for c in range(0, v.shape[1], 128)]
    while len(parts) > 1:
        parts = [jnp.maximum(a, b) for a, b in zip(parts[::2], parts[1::2])] + parts[len(parts) & ~1:]
    return parts[0]

def cos_folded(x):
    big = jnp.max(fold_max(jnp.abs(x))) >= 64.0
    return lax.cond(big, jnp.cos, cos_fast, x)

def cos_fixup(x):
    r = cos_fast(x)
    bad = jnp.abs(x) >= 64.0
    anybad = jnp.max(fold_max(bad.astype(jnp.float32))) > 0
    return lax.cond(anybad, lambda: jnp.where(bad, jnp.cos(x), r), lambda: r)

def w1(cos):
    def f(x, y):
        r = x * x + y * y
        return cos(r) / (1.0 + r)
    return f

def call(f):
    def kernel(x_ref, y_ref, o_ref):
        o_ref[...] = fold(f(x_ref[...], y_ref[...]))
    grid = (N // BLOCK[0], N // BLOCK[1])
    c = pl.pallas_call(kernel, grid=grid, interpret=INTERPRET,
        in_specs=[pl.BlockSpec((BLOCK[0], 1), lambda i, j: (i, 0)), pl.BlockSpec((1, BLOCK[1]), lambda i, j: (0, j))],
        out_specs=pl.BlockSpec((8, 128), lambda i, j: (i, j)),
        out_shape=jax.ShapeDtypeStruct((grid[0] * 8, grid[1] * 128), jnp.float32))
    return jax.jit(lambda x, y: jnp.sum(c(x[:, None], y[None, :])))

def accuracy(rows):
    rng = np.random.default_rng(0)
    for hi in (18.0, 32.0, 64.0, 100.0):
        r = np.concatenate([np.linspace(0, hi, 2_000_001, dtype=np.float32),
                            rng.uniform(0, hi, 2_000_000).astype(np.float32)])
        exact = np.cos(r.astype(np.float64))
        ulp = np.spacing(np.abs(exact).astype(np.float32)).astype(np.float64)
        for name, fn in (("fast", cos_fast), ("jnp", jnp.cos)):
            got = np.asarray(jax.jit(fn)(jnp.asarray(r))).astype(np.float64)
            err = np.abs(got - exact) / ulp
            rows.append({"cos": name, "range": hi, "max_ulp": float(err.max()),
                         "p999_ulp": float(np.quantile(err, 0.999)), "max_abs": float(np.abs(got - exact).max())})
            print(json.dumps(rows[-1]), flush=True)


def w5(rows):
    x = jnp.linspace(-3.0, 3.0, N, dtype=jnp.float32)
    xla = jax.jit(lambda a, b: jnp.sum(w1(jnp.cos)(a[:, None], b[None, :])))
    kernels = (("xla", xla), ("pallas-jnp.cos", call(w1(jnp.cos))), ("pallas-fast", call(w1(cos_fast))),
               ("pallas-folded", call(w1(cos_folded))), ("pallas-fixup", call(w1(cos_fixup))))
    for name, f in kernels + kernels:  # twice, in turn
        t, out = timed(f, x, x)
        rows.append({"kernel": name, "s": t, "sum": float(out)})
        print(json.dumps(rows[-1]), flush=True)


def mc(rows):
    from benchmarks.device import tpu_strips
    from lanewise.backends.tpu import random as tr
    key = (np.uint32(12345), np.uint32(678))
    n = 100 * 256 * 1024
    polynomials = tr._cos_sin_quarter
    for name in ("poly", "jnp", "poly", "jnp"):
        tr._cos_sin_quarter = polynomials if name == "poly" else (lambda a: (jnp.cos(a), jnp.sin(a)))
        t, got = timed(tpu_strips.mc_call((16, 512), n, key))
        rows.append({"mc_lane": name, "s": t, "mean": float(got) / n})
        print(json.dumps(rows[-1]), flush=True)
    tr._cos_sin_quarter = polynomials


def main():
    rows = []
    if not os.environ.get("MC_ONLY"):
        accuracy(rows)
        w5(rows)
    mc(rows)
    json.dump(rows, open(os.path.join(os.environ.get("OUT", "/tmp"), "tpu_cos.json"), "w"), indent=1)


if __name__ == "__main__":
    main()
