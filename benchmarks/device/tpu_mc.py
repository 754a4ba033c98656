"""MC (a European call by Monte Carlo, benchmarks/mc_option.py) on the TPU chip: lw.random in lanes
against jax.random on the same chip, float32.

    python3 benchmarks/device/tpu_mc.py        # on the device machine; writes $OUT/tpu_mc.json

lanewise: ``lw.reduce(lw.vmap(payoff, backend="tpu"), "sum")``, each lane one path drawing
``lw.random.normal(lw.random.fold_in(key, i))`` (Philox4x32-10 in the kernel, mc_option.py's
lane in float32), and a second form whose lanes each sum ``MC_PER`` paths in a loop (fewer
lanes, the same paths).  JAX: ``jax.random.normal`` in chunks of ``MC_CHUNK`` draws in a
``fori_loop``, with the threefry and rbg generators.  Every price must be within
mc_option.N_SE standard errors of Black-Scholes.  Sizes: ``MC_N`` paths (default 10**8),
``MC_CHUNK``, ``MC_PER`` (a run on the CPU: ``JAX_PLATFORMS=cpu LANEWISE_TPU_INTERPRET=1
MC_N=8192 MC_CHUNK=4096 MC_PER=8``).
"""
import json
import math
import os

import jax
import jax.numpy as jnp
import numpy as np

import lanewise as lw
from benchmarks.device.tpu_w2 import timed
from benchmarks.mc_option import BS_PRICE, DRIFT, K, N_SE, S0, SEED, VOL, check, price_and_se

N = int(os.environ.get("MC_N", str(10**8)))
CHUNK = int(os.environ.get("MC_CHUNK", str(10**7)))
#: Paths per lane of the looping form: a literal bound (a module global), so the loop is counted.
PER = int(os.environ.get("MC_PER", "64"))


def payoff(k0, k1, i):
    """One path: its normal from the key folded with the path index (mc_option.py's lane)."""
    z = lw.random.normal(lw.random.fold_in((k0, k1), i))
    p = max(S0 * math.exp(DRIFT + VOL * z) - K, 0.0)
    return p, p * p


def payoffs(k0, k1, lane):
    """PER paths (lane * PER + j: the same paths as ``payoff``'s) summed in the lane."""
    s = 0.0
    s2 = 0.0
    for j in range(PER):
        z = lw.random.normal(lw.random.fold_in((k0, k1), lane * PER + j))
        p = max(S0 * math.exp(DRIFT + VOL * z) - K, 0.0)
        s += p
        s2 += p * p
    return s, s2


def jax_mc(n: int, impl: str):
    """jax.random.normal in chunks, summed in a fori_loop (float32)."""
    chunk = min(n, CHUNK)
    if n % chunk:
        raise ValueError(f"MC_N must be a multiple of MC_CHUNK ({chunk}), got {n}")

    def run(key):
        def body(c, acc):
            z = jax.random.normal(jax.random.fold_in(key, c), (chunk,), jnp.float32)
            p = jnp.maximum(S0 * jnp.exp(DRIFT + VOL * z) - K, 0.0)
            return acc[0] + p.sum(), acc[1] + (p * p).sum()
        return jnp.stack(jax.lax.fori_loop(0, n // chunk, body, (jnp.float32(0), jnp.float32(0))))

    f = jax.jit(run)
    key = jax.random.key(SEED, impl=impl)
    return lambda: f(key)


def priced(sums, n: int) -> dict:
    total, total_sq = (float(v) for v in np.asarray(sums))
    return check(price_and_se(total, total_sq, n))


def main():
    k0, k1 = (np.uint32(w) for w in lw.random.key(SEED))
    rows = []
    jax_s = {}
    for impl in ("threefry2x32", "rbg"):
        t, out = timed(jax_mc(N, impl))
        jax_s[impl] = t
        rows.append({"workload": "MC", "tool": f"jax.random-{impl}", "n": N, "chunk": min(N, CHUNK), "s": t,
                     **priced(out, N)})
        print(json.dumps(rows[-1]), flush=True)
    one = lw.reduce(lw.vmap(payoff, in_axes=(None, None, 0), backend="tpu"), "sum")
    looped = lw.reduce(lw.vmap(payoffs, in_axes=(None, None, 0), backend="tpu"), "sum")
    for tool, f, per in (("lanewise-tpu-path-per-lane", one, 1), (f"lanewise-tpu-{PER}-paths-per-lane", looped, PER)):
        i = jnp.arange(N // per, dtype=jnp.int32)  # built before the timing: 4 bytes a lane
        t, out = timed(lambda: f(k0, k1, i))  # noqa: B023 (timed calls it at once)
        n = N // per * per
        rows.append({"workload": "MC", "tool": tool, "n": n, "s": t,
                     **{f"ratio_vs_{impl}": t / s for impl, s in jax_s.items()}, **priced(out, n)})
        print(json.dumps(rows[-1]), flush=True)
    print(json.dumps({"black_scholes": BS_PRICE, "n_se": N_SE}))
    with open(os.path.join(os.environ.get("OUT", "/tmp"), "tpu_mc.json"), "w") as fh:
        json.dump(rows, fh, indent=1)


if __name__ == "__main__":
    main()
