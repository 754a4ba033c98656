"""W1 (grid cos(x²+y²)/(1+x²+y²)), W5 (its sum) and Newton at the defaults on the TPU chip, float32.

    python3 benchmarks/device/tpu_w1.py [N]     # on the device machine; writes $OUT/tpu_w1.json

W1: lanewise backend="tpu" (the two coordinates travel as a column and a row, one kernel,
blocks of lw.config.tpu_block: W1_BLOCKS sweeps them) against jax.jit of nested jax.vmap on the
same chip.  W5: lw.reduce(..., "sum") over a W5_N x W5_N grid (no lane's value stored: each
tile folds its lanes) against jax.jit(jnp.sum(nested jax.vmap)), which XLA fuses.  Newton:
tpu_w2.py's held-out kernel at the default tile and unroll (tpu_w2.py measures it at the best W2 setting).
W1 and W5 are also timed with every grid step on Mosaic's ``jnp.cos`` (``exact_trig_s``: no
bounded cos, backends/tpu/trig.py), the A/B of the bounded kernel.
"""
import contextlib
import json
import math
import os
import sys

import jax
import jax.numpy as jnp

import lanewise as lw
from benchmarks.device.tpu_w2 import grid, jax_newton, jax_of, mismatch, newton, timed
from lanewise.backends import tpu
from lanewise.backends.tpu import kernel as tpu_kernel
from lanewise.backends.tpu import trig

W1_BLOCKS = [tuple(map(int, b.split("x"))) for b in
             os.environ.get("W1_BLOCKS", "256x1024,128x1024,512x1024,256x2048,64x512").split(",")]


def w1(x, y):
    r = x * x + y * y
    return math.cos(r) / (1.0 + r)


def jax_w1(x, y):
    r = x * x + y * y
    return jnp.cos(r) / (1.0 + r)


@contextlib.contextmanager
def exact_trig():
    """Kernels built inside use ``jnp.cos``/``jnp.sin`` in every grid step (no guard)."""
    plan = trig.plan
    trig.plan = lambda *a, **k: None
    tpu_kernel.compiled.cache_clear()
    try:
        yield
    finally:
        trig.plan = plan
        tpu_kernel.compiled.cache_clear()


def grid_of(lane):
    """``lane`` over the (x, y) grid on the tpu backend: a new program (and kernel) each call."""
    return lw.vmap(lw.vmap(lane, in_axes=(None, 0)), in_axes=(0, None), backend="tpu")


def whole_of(f, *args):
    """The jitted whole call behind ``f(*args)`` (no lanewise Python around it): what the
    call's time would be with no binding or dispatch of lanewise's own."""
    call = tpu.bind_call(f, args, {})
    return f.executable(tpu, call).whole(call)[0]


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 6000
    x = jnp.linspace(-3.0, 3.0, n, dtype=jnp.float32)
    y = jnp.linspace(-3.0, 3.0, n, dtype=jnp.float32)
    rows = []
    t_jax, ref = timed(jax_of(jax_w1), x, y)
    for block in W1_BLOCKS:
        tpu_kernel.compiled.cache_clear()
        with lw.config.overridden(tpu_block=block):
            f = grid_of(w1)
            t_lw, got = timed(f, x, y)
            t_whole, _ = timed(whole_of(f, x, y), x, y)
            with exact_trig():  # a program of its own: f keeps the kernel it built
                t_exact, _ = timed(grid_of(w1), x, y)
        rows.append({"workload": "W1", "n": n, "block": block, "jax_s": t_jax, "lanewise_tpu_s": t_lw,
                     "ratio": t_lw / t_jax, "max_abs_diff": float(jnp.max(jnp.abs(got - ref))),
                     "whole_call_s": t_whole, "whole_ratio": t_whole / t_jax, "exact_trig_s": t_exact})
        print(json.dumps(rows[-1]), flush=True)
    m = int(os.environ.get("W5_N", "20000"))
    x5 = jnp.linspace(-3.0, 3.0, m, dtype=jnp.float32)
    t_jax, ref = timed(jax.jit(lambda a, b: jnp.sum(jax.vmap(jax.vmap(jax_w1, in_axes=(None, 0)),
                                                             in_axes=(0, None))(a, b))), x5, x5)
    tpu_kernel.compiled.cache_clear()
    s5 = lw.reduce(grid_of(w1), "sum")
    t_lw, got = timed(s5, x5, x5)
    with exact_trig():
        t_exact, _ = timed(lw.reduce(grid_of(w1), "sum"), x5, x5)
    rows.append({"workload": "W5", "n": m, "jax_s": t_jax, "lanewise_tpu_s": t_lw, "ratio": t_lw / t_jax,
                 "rel_diff": float(abs(got - ref) / abs(ref)), "exact_trig_s": t_exact})
    print(json.dumps(rows[-1]), flush=True)
    args = grid(1536, -1.5, 1.5, -1.5, 1.5)
    t_jax, ref = timed(jax_of(jax_newton), *args)
    g = lw.vmap(lw.vmap(newton, in_axes=(None, 0)), in_axes=(0, None), backend="tpu")
    t_lw, got = timed(g, *args)
    rows.append({"workload": "newton-defaults", "n": 1536, "jax_s": t_jax, "lanewise_tpu_s": t_lw,
                 "ratio": t_lw / t_jax, "mismatch": mismatch(got, ref)})
    print(json.dumps(rows[-1]), flush=True)
    with open(os.path.join(os.environ.get("OUT", "/tmp"), "tpu_w1.json"), "w") as fh:
        json.dump(rows, fh, indent=1)


if __name__ == "__main__":
    main()
