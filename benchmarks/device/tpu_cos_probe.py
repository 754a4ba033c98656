"""Is a cos of lanewise's own faster than Mosaic's ``jnp.cos`` on the TPU?

    python3 benchmarks/device/tpu_cos_probe.py          # on the device machine; writes $OUT/tpu_cos.json
    PARTS=accuracy,w5 python3 benchmarks/device/tpu_cos_probe.py   # some of 1. 2. 3. (accuracy, w5, mc)

1. Accuracy (float32 ulps against float64 NumPy) of a Cody-Waite reduction by pi/4 with
   Cephes' polynomials (``cos_fast``: trig.cos_bounded; trig.sin_bounded) and of ``jnp.cos``
   and ``jnp.sin``, on arguments up to 18..100 (and at the multiples of pi/4 there).
2. W5's hand-written Pallas sum (tpu_strips.py's, whole (256, 1024) blocks) with ``jnp.cos``,
   ``cos_fast`` unguarded (right for |x| < 64 only) and guarded two ways (a block max and
   ``lax.cond``; a fix-up of the large elements; ``pallas-split``: the whole step's kernel picked
   by the interval of ``x² + y²`` from the argument blocks, as lanewise's .trig does), against
   XLA's fused sum.
3. MC's lane (a normal per lane, strips of 16x512) with the polynomials lanewise's
   ``trig.cos_sin_quarter`` uses for the argument ``_cos2pi`` has reduced, against
   ``jnp.cos``/``jnp.sin`` of it.
Measured 2026-12-07 (TPU v5e): 2. XLA 0.0122 s, jnp.cos 1.04x, unguarded 0.86x, guarded
1.01x (either way: the guard costs the gain), split 0.88x (the guard reads the small argument
blocks, no intermediate crosses a branch); 3. 0.0053 s -> 0.0047 s.
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
from lanewise.backends.tpu import trig  # Cody-Waite and Cephes' polynomials, as lanewise lowers them

BLOCK = (256, 1024)
N = int(os.environ.get("N", "20480"))
INTERPRET = jax.devices()[0].platform != "tpu"
cos_fast = trig.cos_bounded


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

def call(f, fast=None):
    def kernel(x_ref, y_ref, o_ref):
        if fast is None:
            o_ref[...] = fold(f(x_ref[...], y_ref[...]))
            return
        # r's interval from the blocks' extremes: the guard costs two small reductions
        x, y = x_ref[...], y_ref[...]
        ok = jnp.max(x * x) + jnp.max(y * y) < 64.0

        @pl.when(ok)
        def _():
            o_ref[...] = fold(fast(x_ref[...], y_ref[...]))

        @pl.when(jnp.logical_not(ok))
        def _():
            o_ref[...] = fold(f(x_ref[...], y_ref[...]))
    grid = (N // BLOCK[0], N // BLOCK[1])
    c = pl.pallas_call(kernel, grid=grid, interpret=INTERPRET,
        in_specs=[pl.BlockSpec((BLOCK[0], 1), lambda i, j: (i, 0)), pl.BlockSpec((1, BLOCK[1]), lambda i, j: (0, j))],
        out_specs=pl.BlockSpec((8, 128), lambda i, j: (i, j)),
        out_shape=jax.ShapeDtypeStruct((grid[0] * 8, grid[1] * 128), jnp.float32))
    return jax.jit(lambda x, y: jnp.sum(c(x[:, None], y[None, :])))

def accuracy(rows):
    rng = np.random.default_rng(0)
    for hi in (18.0, 48.0, 64.0, 100.0):
        r = np.concatenate([np.linspace(-hi, hi, 2_000_001, dtype=np.float32),
                            rng.uniform(-hi, hi, 2_000_000).astype(np.float32),
                            np.float32(np.pi / 4) * np.arange(-int(hi * 1.3), int(hi * 1.3), dtype=np.float32)])
        for name, fn, ref in (("fast", cos_fast, np.cos), ("jnp", jnp.cos, np.cos),
                              ("sin-fast", trig.sin_bounded, np.sin), ("sin-jnp", jnp.sin, np.sin)):
            exact = ref(r.astype(np.float64))
            ulp = np.spacing(np.abs(exact).astype(np.float32)).astype(np.float64)
            got = np.asarray(jax.jit(fn)(jnp.asarray(r))).astype(np.float64)
            err = np.abs(got - exact) / ulp
            rows.append({"cos": name, "range": hi, "max_ulp": float(err.max()),
                         "p999_ulp": float(np.quantile(err, 0.999)), "max_abs": float(np.abs(got - exact).max())})
            print(json.dumps(rows[-1]), flush=True)


def w5(rows):
    x = jnp.linspace(-3.0, 3.0, N, dtype=jnp.float32)
    xla = jax.jit(lambda a, b: jnp.sum(w1(jnp.cos)(a[:, None], b[None, :])))
    kernels = (("xla", xla), ("pallas-jnp.cos", call(w1(jnp.cos))), ("pallas-fast", call(w1(cos_fast))),
               ("pallas-folded", call(w1(cos_folded))), ("pallas-fixup", call(w1(cos_fixup))),
               ("pallas-split", call(w1(jnp.cos), w1(cos_fast))))
    if os.environ.get("W5_FEW"):
        kernels = kernels[:3] + kernels[-1:]
    for name, f in kernels + kernels:  # twice, in turn
        t, out = timed(f, x, x)
        rows.append({"kernel": name, "s": t, "sum": float(out)})
        print(json.dumps(rows[-1]), flush=True)


def mc(rows):
    from benchmarks.device import tpu_strips
    key = (np.uint32(12345), np.uint32(678))
    n = 100 * 256 * 1024
    polynomials = trig.cos_sin_quarter
    for name in ("poly", "jnp", "poly", "jnp"):
        trig.cos_sin_quarter = polynomials if name == "poly" else (lambda a: (jnp.cos(a), jnp.sin(a)))
        t, got = timed(tpu_strips.mc_call((16, 512), n, key))
        rows.append({"mc_lane": name, "s": t, "mean": float(got) / n})
        print(json.dumps(rows[-1]), flush=True)
    trig.cos_sin_quarter = polynomials


def main():
    rows = []
    parts = os.environ.get("PARTS", "accuracy,w5,mc").split(",")
    for name, part in (("accuracy", accuracy), ("w5", w5), ("mc", mc)):
        if name in parts:
            part(rows)
    json.dump(rows, open(os.path.join(os.environ.get("OUT", "/tmp"), "tpu_cos.json"), "w"), indent=1)


if __name__ == "__main__":
    main()
