"""Where does W1's time go on the chip?  Hand-written Pallas kernels of W1's pieces against XLA.

    python3 benchmarks/device/tpu_w1_probe.py [N]     # on the device machine; writes $OUT/tpu_w1_probe.json

lanewise's W1 kernel (cos(r) / (1 + r), r = x^2 + y^2, x a column and y a row of an N x N
grid) ran 2.2x XLA's fused nested jax.vmap on the v5e, whatever its block size.  Each variant
here is one piece of that arithmetic, written once as a Pallas kernel over (256, 1024)
blocks laid out as lanewise lays them out, and once as the same jnp expression that XLA
fuses: if Pallas' ``cos`` or ``/`` is what costs, the ratio shows on that piece alone.
"""
import json
import math
import os
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import pallas as pl

BLOCK = (256, 1024)


def _cos_poly(r):
    """cos by Cody-Waite reduction modulo pi/2 and Cephes' float32 polynomials (|r| < 8192 pi)."""
    j = jnp.floor(r * (2.0 / math.pi) + 0.5)
    q = j.astype(jnp.int32)
    y = ((r - j * 1.5703125) - j * 4.837512969970703125e-4) - j * 7.549789948768648e-8
    z = y * y
    c = ((2.443315711809948e-5 * z - 1.388731625493765e-3) * z + 4.166664568298827e-2) * z * z - 0.5 * z + 1.0
    s = ((-1.9515295891e-4 * z + 8.3321608736e-3) * z - 1.6666654611e-1) * z * y + y
    quadrant = q & 3
    v = jnp.where((quadrant & 1) == 0, c, s)
    return jnp.where((quadrant == 1) | (quadrant == 2), -v, v)


VARIANTS = {
    "store x+y": lambda r, x, y: x + y,
    "r/(1+r)": lambda r, x, y: r / (1.0 + r),
    "cos(r)": lambda r, x, y: jnp.cos(r),
    "W1 cos(r)/(1+r)": lambda r, x, y: jnp.cos(r) / (1.0 + r),
    "cos(r)*recip(1+r) approx": lambda r, x, y: jnp.cos(r) * pl.reciprocal(1.0 + r, approx=True),
    "poly cos(r)": lambda r, x, y: _cos_poly(r),
    "poly cos(r)/(1+r)": lambda r, x, y: _cos_poly(r) / (1.0 + r),
}

#: The variant whose XLA result a variant's result is compared with (itself otherwise).
REFERENCE = {"cos(r)*recip(1+r) approx": "W1 cos(r)/(1+r)", "poly cos(r)": "cos(r)",
             "poly cos(r)/(1+r)": "W1 cos(r)/(1+r)"}


def pallas_of(expr, n):
    rows = pl.cdiv(n, BLOCK[0])
    cols = pl.cdiv(n, BLOCK[1])

    def kernel(x_ref, y_ref, o_ref):
        x, y = x_ref[...], y_ref[...]
        o_ref[...] = expr(x * x + y * y, x + 0.0 * y, y + 0.0 * x)

    call = pl.pallas_call(
        kernel, grid=(rows, cols), out_shape=jax.ShapeDtypeStruct((n, n), jnp.float32),
        in_specs=[pl.BlockSpec((BLOCK[0], 1), lambda i, j: (i, 0)), pl.BlockSpec((1, BLOCK[1]), lambda i, j: (0, j))],
        out_specs=pl.BlockSpec(BLOCK, lambda i, j: (i, j)), interpret=os.environ.get("INTERPRET") == "1")
    return jax.jit(lambda x, y: call(x[:, None], y[None, :]))


def xla_of(expr):
    return jax.jit(lambda x, y: expr(x[:, None] ** 2 + y[None, :] ** 2, x[:, None] + 0 * y[None, :],
                                     y[None, :] + 0 * x[:, None]))


def timed(fn, *args, repeats=15):
    out = jax.block_until_ready(fn(*args))
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        jax.block_until_ready(fn(*args))
        times.append(time.perf_counter() - t)
    return float(np.median(times)), out


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 6000
    x = jnp.linspace(-3.0, 3.0, n, dtype=jnp.float32)
    rows = []
    for name, expr in VARIANTS.items():
        try:
            t_x, ref = timed(xla_of(expr), x, x)
            t_p, got = timed(pallas_of(expr, n), x, x)
            exact = np.asarray(xla_of(VARIANTS[REFERENCE.get(name, name)])(x, x))
            row = {"variant": name, "n": n, "xla_s": t_x, "pallas_s": t_p, "ratio": t_p / t_x,
                   "max_abs_vs_xla": float(np.max(np.abs(np.asarray(got) - exact)))}
        except Exception as exc:  # noqa: BLE001 - a variant Mosaic refuses is a finding, not a crash
            row = {"variant": name, "n": n, "error": f"{type(exc).__name__}: {str(exc)[:200]}"}
        rows.append(row)
        print(json.dumps(row), flush=True)
    with open(os.path.join(os.environ.get("OUT", "/tmp"), "tpu_w1_probe.json"), "w") as fh:
        json.dump(rows, fh, indent=1)


if __name__ == "__main__":
    main()
