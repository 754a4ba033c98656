"""lanewise's cuda backend on one GPU: W1, W2, W3, W5 and the copy bandwidth.

Run on a machine with an NVIDIA GPU (written for one H200, < 5 minutes):

    python benchmarks/gpu.py            # full sizes
    python benchmarks/gpu.py --tiny     # smoke test (also under NUMBA_ENABLE_CUDASIM=1)

On the lent H200 (no network; its image has numba-cuda, jax[cuda13] and CuPy):
``PYTHONPATH=src python3 benchmarks/gpu.py`` from the repository root.

Prints a short table last.  Every timing is the best of a few runs after a
warm-up (compile), inputs and outputs on the device, synchronised.  Results are
checked against the CPU backend on a sample of lanes.

* copy: a device-to-device copy of a large array; bandwidth = (bytes read +
  bytes written) / time.  Bars are relative to it.
* W1: cos(x²+y²)/(1+x²+y²) on an n×n grid (nested vmap); bytes = the output
  written (the inputs are cached); bar >= 70% of the copy bandwidth.
* W2: escape-time fractal, max_iter 500, divergent lanes.
* W3: EMA-crossover backtest, 10^5 series × 10^4 steps, time-major prices (one
  lw.scan per lane); against jax.vmap(jax.lax.scan) on the same GPU when
  jax[cuda] is installed.  Memory floor = bytes of prices / copy bandwidth
  (read once); bars: >= 20x faster than JAX, within 2x of the floor.
* W5: the sum of W1's f over 10^10 lanes (lw.reduce; nothing materialised).
* warm process: seconds from interpreter start to W1's first result in a fresh
  process, with an empty disk cache (cold) and again (warm: numba-cuda loads
  the kernel from lanewise's cache instead of compiling it).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

import lanewise as lw

# Run as a script (``python benchmarks/gpu.py``): the repository root makes the
# workload modules importable, so W3's step is the one benchmarks/w3_backtest.py times.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from benchmarks.w3_backtest import FAST, SLOW, step as w3_step  # noqa: E402

FULL = dict(w1=40_000, w2=8_000, w3=(100_000, 10_000), w5=100_000, copy_bytes=8 << 30)
TINY = dict(w1=64, w2=32, w3=(64, 50), w5=64, copy_bytes=1 << 16)
MAX_ITER = 500


# ----------------------------------------------------------------------------- lanes


def w1_lane(x, y):
    r = x * x + y * y
    return math.cos(r) / (1 + r)


def w2_lane(cr, ci):
    zr = zi = 0.0
    for n in range(MAX_ITER):
        zr, zi = zr * zr - zi * zi + cr, 2 * zr * zi + ci
        if zr * zr + zi * zi > 4.0:
            return n
    return MAX_ITER


def w3_lane(prices):
    p0 = prices[0]
    final, _ = lw.scan(w3_step, (p0, p0, 0.0, 0.0, p0), prices)
    return final[3]


# ----------------------------------------------------------------------------- helpers


def best_of(fn, repeats=3):
    from numba import cuda
    fn()  # warm-up: compile
    cuda.synchronize()
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        cuda.synchronize()
        times.append(time.perf_counter() - t)
    return min(times)


def copy_bandwidth(nbytes):
    from numba import cuda
    a = cuda.device_array(nbytes // 8, np.float64)
    b = cuda.device_array(nbytes // 8, np.float64)
    t = best_of(lambda: b.copy_to_device(a), repeats=5)
    return 2 * nbytes / t  # read + write


def grid(lane, **kw):
    return lw.vmap(lw.vmap(lane, in_axes=(None, 0)), in_axes=(0, None), **kw)


def sample_check(got_at, want_at, n_lanes, rng, k=200):
    """Max relative difference between the GPU and the CPU at k random lanes."""
    idx = rng.integers(0, n_lanes, size=k)
    worst = 0.0
    for i in idx:
        g, w = float(got_at(int(i))), float(want_at(int(i)))
        worst = max(worst, abs(g - w) / max(1.0, abs(w)))
    return worst


# ----------------------------------------------------------------------------- workloads


def run_w1(n, copy_bw, rng):
    from numba import cuda
    x = np.linspace(-2.0, 2.0, n)
    dx, dy = cuda.to_device(x), cuda.to_device(x)
    out = cuda.device_array((n, n))
    g = grid(w1_lane)
    t = best_of(lambda: g(dx, dy, out=out))
    host = out.copy_to_host()
    err = sample_check(lambda i: host.flat[i], lambda i: w1_lane(x[i // n], x[i % n]), n * n, rng)
    gbs = 8 * n * n / t
    return dict(name="W1 grid", size=f"{n}x{n}", seconds=t, gbs=gbs,
                bar=f"{gbs / copy_bw:.0%} of copy (bar >= 70%)", check=f"max rel diff vs CPU {err:.1e}")


def run_w2(n, rng):
    from numba import cuda
    re, im = np.linspace(-2.0, 0.6, n), np.linspace(-1.3, 1.3, n)
    dre, dim = cuda.to_device(re), cuda.to_device(im)
    out = cuda.device_array((n, n), np.int64)
    g = grid(w2_lane)
    t = best_of(lambda: g(dre, dim, out=out))
    host = out.copy_to_host()
    idx = rng.integers(0, n * n, size=500)
    bad = sum(int(host.flat[i]) != w2_lane(re[i // n], im[i % n]) for i in idx)
    return dict(name="W2 fractal", size=f"{n}x{n}, max_iter {MAX_ITER}", seconds=t, gbs=8 * n * n / t,
                bar="-", check=f"{bad}/500 sampled counts differ from CPU (FMA)")


def w3_prices(series, steps, seed=3):
    """Time-major (steps, series) geometric random walks from 100."""
    rng = np.random.default_rng(seed)
    logp = rng.standard_normal((steps, series))
    logp *= 0.01
    np.cumsum(logp, axis=0, out=logp)
    np.exp(logp, out=logp)
    logp *= 100.0
    return logp


def run_w3(series, steps, copy_bw, rng):
    from numba import cuda
    prices = w3_prices(series, steps)
    dp = cuda.to_device(prices)
    out = cuda.device_array(series)
    f = lw.vmap(w3_lane, in_axes=1)
    t = best_of(lambda: f(dp, out=out))
    host = out.copy_to_host()
    cols = rng.integers(0, series, size=50)
    want = lw.vmap(w3_lane, in_axes=1, backend="cpu")(np.ascontiguousarray(prices[:, cols]))
    err = float(np.max(np.abs(host[cols] - want) / np.maximum(1.0, np.abs(want))))
    floor = prices.nbytes / (copy_bw / 2)  # bytes read once at the copy's read rate
    rows = [dict(name="W3 backtest", size=f"{series} series x {steps} steps", seconds=t,
                 gbs=prices.nbytes / t, bar=f"{t / floor:.2f}x the memory floor (bar <= 2x)",
                 check=f"max rel diff vs CPU {err:.1e}")]
    jax_t = run_w3_jax(prices)
    if jax_t is None:
        rows.append(dict(name="W3 jax.vmap(lax.scan)", size="-", seconds=float("nan"), gbs=float("nan"),
                         bar="skipped: no jax GPU backend", check="-"))
    else:
        rows.append(dict(name="W3 jax.vmap(lax.scan)", size=f"{series} x {steps}", seconds=jax_t,
                         gbs=prices.nbytes / jax_t, bar=f"lanewise {jax_t / t:.1f}x faster (bar >= 20x)",
                         check="-"))
    return rows


def run_w3_jax(prices):
    try:
        import jax
        import jax.numpy as jnp
        gpus = jax.devices("gpu")
    except Exception:  # noqa: BLE001 - no jax, or no jax GPU backend
        return None
    jax.config.update("jax_enable_x64", True)

    def step(carry, price):
        fast, slow, pos, pnl, last = carry
        pnl = pnl + pos * (price - last)
        fast = fast + FAST * (price - fast)
        slow = slow + SLOW * (price - slow)
        pos = jnp.where(fast > slow, 1.0, jnp.where(fast < slow, -1.0, pos))
        return (fast, slow, pos, pnl, price), None

    def one(p):
        p0 = p[0]
        return jax.lax.scan(step, (p0, p0, 0.0, 0.0, p0), p)[0][3]

    f = jax.jit(jax.vmap(one, in_axes=1))
    dp = jax.device_put(prices, gpus[0])
    f(dp).block_until_ready()
    times = []
    for _ in range(2):
        t = time.perf_counter()
        f(dp).block_until_ready()
        times.append(time.perf_counter() - t)
    return min(times)


def run_w5(n, rng):
    from numba import cuda
    x = np.linspace(-2.0, 2.0, n)
    dx, dy = cuda.to_device(x), cuda.to_device(x)
    r = lw.reduce(grid(w1_lane), "sum")
    t = best_of(lambda: r(dx, dy))
    got = float(r(dx, dy))
    again = float(r(dx, dy))
    m = min(n, 2000)  # CPU check on a sub-grid
    sub = np.linspace(-2.0, 2.0, m)
    want = float(lw.reduce(grid(w1_lane, backend="cpu"), "sum")(sub, sub))
    gpu_sub = float(lw.reduce(grid(w1_lane), "sum")(cuda.to_device(sub), cuda.to_device(sub)))
    return dict(name="W5 map-reduce", size=f"{n}x{n} = {n * n:.0e} lanes", seconds=t,
                gbs=float("nan"), bar=f"{n * n / t / 1e9:.1f} G lanes/s",
                check=f"sub-grid rel diff {abs(gpu_sub - want) / abs(want):.1e}; "
                      f"reproducible: {got == again}")


WARM_CHILD = """
import time
t0 = time.perf_counter()
import json, sys
import numpy as np
from numba import cuda
sys.path.insert(0, sys.argv[1])
import gpu
x = cuda.to_device(np.linspace(-2.0, 2.0, 256))
g = gpu.grid(gpu.w1_lane)
z = g(x, x)
cuda.synchronize()
seconds = time.perf_counter() - t0
kernel = next(iter(g._executables.values())).module.kernel
print(json.dumps({"seconds": seconds, "hits": sum(getattr(kernel, "_cache_hits", {}).values()),
                  "check": float(z.copy_to_host()[3, 5] - gpu.w1_lane(-2.0 + 3 * 4.0 / 255, -2.0 + 5 * 4.0 / 255))}))
"""


def run_warm_start():
    """Two fresh processes sharing an empty disk cache: the second must not compile."""
    with tempfile.TemporaryDirectory() as cache_dir:
        env = dict(os.environ, LANEWISE_CACHE_DIR=cache_dir)
        runs = []
        for _ in range(2):
            proc = subprocess.run([sys.executable, "-c", WARM_CHILD, os.path.dirname(os.path.abspath(__file__))],
                                  env=env, capture_output=True, text=True, timeout=300)
            if proc.returncode:
                raise RuntimeError(proc.stderr[-300:])
            runs.append(json.loads(proc.stdout.strip().splitlines()[-1]))
    cold, warm = runs
    return dict(name="warm process", size="W1 256x256, start to result", seconds=warm["seconds"],
                gbs=float("nan"), bar=f"cold {cold['seconds']:.2f} s, warm {warm['seconds']:.2f} s",
                check=f"warm kernel cache hits {warm['hits']}; diff {abs(warm['check']):.0e}")


# ----------------------------------------------------------------------------- main


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tiny", action="store_true", help="tiny sizes (smoke test)")
    args = parser.parse_args(argv)
    sizes = TINY if args.tiny else FULL
    from numba import cuda
    if not cuda.is_available():
        print("no CUDA GPU (numba.cuda.is_available() is False); nothing to measure")
        return 1
    dev = cuda.get_current_device()
    name = getattr(dev, "name", "simulator")
    name = name.decode() if isinstance(name, bytes) else str(name)
    print(f"device: {name}, compute capability {dev.compute_capability}", flush=True)
    rng = np.random.default_rng(0)
    start = time.perf_counter()
    copy_bw = copy_bandwidth(sizes["copy_bytes"])
    rows = [dict(name="copy (device to device)", size=f"{sizes['copy_bytes'] / 2**30:.2f} GiB",
                 seconds=float("nan"), gbs=copy_bw, bar="reference", check="-")]
    for label, run in [("W1", lambda: [run_w1(sizes["w1"], copy_bw, rng)]),
                       ("W2", lambda: [run_w2(sizes["w2"], rng)]),
                       ("W3", lambda: run_w3(*sizes["w3"], copy_bw, rng)),
                       ("W5", lambda: [run_w5(sizes["w5"], rng)]),
                       ("warm process", lambda: [run_warm_start()])]:
        print(f"running {label} ...", flush=True)
        try:
            rows += run()
        except Exception as e:  # noqa: BLE001 - report and go on with the others
            rows.append(dict(name=label, size="-", seconds=float("nan"), gbs=float("nan"),
                             bar=f"FAILED: {type(e).__name__}: {e}"[:120], check="-"))
    print(f"\ntotal {time.perf_counter() - start:.0f} s on {name}\n")
    head = f"{'workload':<24} {'size':<34} {'seconds':>9} {'GB/s':>8}  {'bar':<40} check"
    print(head)
    print("-" * len(head))
    for r in rows:
        print(f"{r['name']:<24} {r['size']:<34} {r['seconds']:>9.4f} {r['gbs'] / 1e9:>8.1f}  "
              f"{r['bar']:<40} {r['check']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
