"""W1 6000² on the chip: XLA's nested jax.vmap, the lanewise call and its jitted whole call, interleaved.

    python3 benchmarks/device/tpu_w1_interleaved.py     # on the device machine; writes $OUT/w1_interleaved.json

Each round times the three one after the other (60 rounds, medians), so the chip's drift
between two separate timing loops does not enter the ratios: lanewise's call against its
own jitted whole call is what lanewise's Python around the kernel costs.
"""
import json
import os
import time

import jax
import jax.numpy as jnp
import numpy as np

import lanewise as lw
from benchmarks.device.tpu_w1 import jax_w1, w1
from lanewise.backends import tpu


def main(n=6000, rounds=60):
    x = jnp.linspace(-3.0, 3.0, n, dtype=jnp.float32)
    f = lw.vmap(lw.vmap(w1, in_axes=(None, 0)), in_axes=(0, None), backend="tpu")
    call = tpu.bind_call(f, (x, x), {})
    fns = {"xla": jax.jit(jax.vmap(jax.vmap(jax_w1, in_axes=(None, 0)), in_axes=(0, None))),
           "lanewise": f, "whole": f.executable(tpu, call).whole(call)[0]}
    for g in fns.values():
        jax.block_until_ready(g(x, x))
    times = {k: [] for k in fns}
    for _ in range(rounds):
        for k, g in fns.items():
            t = time.perf_counter()
            jax.block_until_ready(g(x, x))
            times[k].append(time.perf_counter() - t)
    med = {k: float(np.median(v)) for k, v in times.items()}
    out = {"n": n, "median_s": med, "lanewise/xla": med["lanewise"] / med["xla"],
           "whole/xla": med["whole"] / med["xla"]}
    print(json.dumps(out))
    with open(os.path.join(os.environ.get("OUT", "/tmp"), "w1_interleaved.json"), "w") as fh:
        json.dump(out, fh)


if __name__ == "__main__":
    main()
