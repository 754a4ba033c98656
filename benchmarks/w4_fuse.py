"""W4 and W1 written as NumPy code under ``@lw.fuse``, against the lane version and peers.

W4: ``sqrt(x²+y²)·e^{-x} + sin(3y)·[x>0.5] − 0.5xy`` on 1-D float64 arrays (n = 2×10⁷).
W1: ``cos(x²+y²)/(1+x²+y²)`` over a grid, written with broadcasting (``x[:, None]``).
Terabyte pattern (``--terabyte``): a chain of 20 elementwise ops and a sum over a
broadcast 31623×31623 (10⁹-element) domain, in constant memory.

Bars (issue #7): fuse within 1.1× of ``lw.vmap`` of the scalar lane, and
≤ 0.7× the fastest peer (numexpr, Numba vectorize(parallel), JAX jit); peak
memory = inputs + outputs.

Usage::

    python -m benchmarks.w4_fuse [--n 20000000] [--grid 6000] [--repeats 5] [--terabyte]

Timing: every tool runs once to warm up (compiles; its result is checked against
NumPy), then ``repeats`` interleaved rounds time each tool once; medians are
reported (the machine may be shared: interleaving spreads noise across tools).
"""

from __future__ import annotations

import argparse
import gc
import math
import statistics
import sys
import time
import tracemalloc

import numpy as np

from .harness import jax_x64
from .w1_grid import _numba as w1_numba


# ----------------------------------------------------------------------------- W4


def w4_numpy(x, y):
    return np.sqrt(x**2 + y**2) * np.exp(-x) + np.sin(3 * y) * (x > 0.5) - 0.5 * x * y


def w4_lane(x, y):
    return math.sqrt(x * x + y * y) * math.exp(-x) + math.sin(3 * y) * (x > 0.5) - 0.5 * x * y


def w4_tools():
    import lanewise as lw

    tools = {
        "lanewise-fuse": lw.fuse(w4_numpy),
        "lanewise-vmap (lane)": lw.vmap(w4_lane),
        "numpy": w4_numpy,
    }
    try:
        import numexpr as ne

        tools["numexpr"] = lambda x, y: ne.evaluate(
            "sqrt(x**2 + y**2) * exp(-x) + sin(3*y) * (x > 0.5) - 0.5*x*y", local_dict={"x": x, "y": y})
    except ImportError:
        pass
    import numba

    vec = numba.vectorize(["float64(float64, float64)"], target="parallel")(w4_lane)
    tools["numba-vectorize(parallel)"] = vec
    jax = jax_x64()
    jnp = jax.numpy

    @jax.jit
    def w4_jax(x, y):
        return jnp.sqrt(x**2 + y**2) * jnp.exp(-x) + jnp.sin(3 * y) * (x > 0.5) - 0.5 * x * y

    tools["jax-jit"] = lambda x, y: np.asarray(w4_jax(x, y).block_until_ready())
    return tools


# ----------------------------------------------------------------------------- W1 (broadcast form)


def w1_numpy(x, y):
    r = x[:, None] ** 2 + y[None, :] ** 2
    return np.cos(r) / (1 + r)


def w1_lane(x, y):
    r = x * x + y * y
    return math.cos(r) / (1 + r)


def w1_tools():
    import lanewise as lw

    tools = {
        "lanewise-fuse": lw.fuse(w1_numpy),
        "lanewise-vmap (lane)": lw.vmap(lw.vmap(w1_lane, in_axes=(None, 0)), in_axes=(0, None)),
        "numpy": w1_numpy,
    }
    try:
        import numexpr as ne

        tools["numexpr"] = lambda x, y: ne.evaluate(
            "cos(x**2 + y**2) / (1 + x**2 + y**2)", local_dict={"x": x[:, None], "y": y[None, :]})
    except ImportError:
        pass
    import numba

    tools["numba-prange"] = w1_numba(numba)  # (numba.vectorize(parallel) broadcasting a grid: ~80x slower, left out)
    jax = jax_x64()
    jnp = jax.numpy

    @jax.jit
    def w1_jax(x, y):
        r = x[:, None] ** 2 + y[None, :] ** 2
        return jnp.cos(r) / (1 + r)

    tools["jax-jit"] = lambda x, y: np.asarray(w1_jax(x, y).block_until_ready())
    return tools


# ----------------------------------------------------------------------------- measurement


def measure(tools: dict, args: tuple, repeats: int, ref) -> dict:
    """{tool: (median s, first-call s, max abs err, peak traced MB)}."""
    first, errors, peaks = {}, {}, {}
    for name, fn in tools.items():
        gc.collect()
        t0 = time.perf_counter()
        out = np.asarray(fn(*args))
        first[name] = time.perf_counter() - t0
        errors[name] = float(np.max(np.abs(out - ref)))
        del out
    for name, fn in tools.items():  # NumPy-side peak of one warm call (jax/numexpr allocate outside it)
        gc.collect()
        tracemalloc.start()
        fn(*args)
        peaks[name] = tracemalloc.get_traced_memory()[1] / 2**20
        tracemalloc.stop()
    times = {name: [] for name in tools}
    for _ in range(repeats):
        for name, fn in tools.items():
            gc.collect()
            t0 = time.perf_counter()
            fn(*args)
            times[name].append(time.perf_counter() - t0)
    return {name: (statistics.median(times[name]), first[name], errors[name], peaks[name]) for name in tools}


def report(title: str, rows: dict, inputs_mb: float, output_mb: float) -> None:
    peers = {k: v for k, v in rows.items() if not k.startswith("lanewise") and k != "numpy"}
    fastest = min(peers, key=lambda k: peers[k][0]) if peers else None
    fuse = rows["lanewise-fuse"][0]
    print(f"\n## {title}\ninputs {inputs_mb:.0f} MB, output {output_mb:.0f} MB\n")
    print("| tool | median s | first call s | vs fuse | max abs err | peak traced MB |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, (med, first, err, peak) in sorted(rows.items(), key=lambda kv: kv[1][0]):
        print(f"| {name} | {med:.4f} | {first:.2f} | {med / fuse:.2f}x | {err:.1e} | {peak:.0f} |")
    lane = rows["lanewise-vmap (lane)"][0]
    print(f"\nfuse / lane vmap = {fuse / lane:.3f} (bar <= 1.1)")
    if fastest:
        print(f"fuse / fastest peer ({fastest}) = {fuse / peers[fastest][0]:.3f} (bar <= 0.7)")
    print(f"fuse peak traced memory {rows['lanewise-fuse'][3]:.0f} MB = output {output_mb:.0f} MB "
          "(inputs are the caller's)")


def save(tables: dict, sizes: dict) -> None:
    """benchmarks/results/w4.json: the medians (what benchmarks.quote reads), with the run's context."""
    import datetime
    import json
    from pathlib import Path

    from .report import machine

    path = Path(__file__).resolve().parent / "results" / "w4.json"
    record = {"date": datetime.datetime.now().isoformat(timespec="seconds"), "machine": machine(), **sizes,
              "medians": {name: {tool: row[0] for tool, row in rows.items()} for name, rows in tables.items()}}
    path.write_text(json.dumps(record, indent=1) + "\n")
    print(f"\nwrote {path}")


def terabyte(n_side: int = 31623) -> None:
    """20 elementwise ops and a sum over an n_side² broadcast domain: memory independent of n."""
    import lanewise as lw

    def chain(x, y):
        a = x + y
        for k in range(19):
            a = [lambda a: a * x, lambda a: np.sin(a) + y, lambda a: a - 0.5 * x,
                 lambda a: np.sqrt(a * a + 1.0), lambda a: a / (1.0 + y * y)][k % 5](a)
        return a.sum()

    fused = lw.fuse(chain)
    small = np.linspace(0, 1, 1000)
    fused(small[:, None], small[None, :])  # compile (a parallel-sized problem: the kernel that will run)
    x, y = np.linspace(0, 1, n_side)[:, None], np.linspace(1, 2, n_side)[None, :]
    tracemalloc.start()
    t0 = time.perf_counter()
    total = fused(x, y)
    dt = time.perf_counter() - t0
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    n = n_side * n_side
    print(f"\n## terabyte pattern: 20-op chain + sum over {n:.2e} elements "
          f"({n * 8 / 2**30:.1f} GiB per float64 intermediate in NumPy)")
    print(f"time {dt:.2f} s ({n / dt / 1e9:.2f} G elements/s); peak traced memory during the call "
          f"{peak / 2**10:.0f} KiB; result {float(total):.6e}")
    print(f"explain: {len(lw.explain(fused, x, y).passes)} pass(es), no intermediate array")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=20_000_000)
    parser.add_argument("--grid", type=int, default=6000)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--terabyte", action="store_true")
    parser.add_argument("--terabyte-side", type=int, default=31623)
    opts = parser.parse_args(argv)
    import numba

    print(f"# lw.fuse benchmarks (python {sys.version.split()[0]}, numpy {np.__version__}, "
          f"numba {numba.__version__}, {numba.config.NUMBA_NUM_THREADS} threads)")
    rng = np.random.default_rng(0)
    x, y = rng.random(opts.n), rng.random(opts.n)
    w4 = measure(w4_tools(), (x, y), opts.repeats, w4_numpy(x, y))
    report(f"W4 (n = {opts.n:.1e})", w4, 2 * x.nbytes / 2**20, x.nbytes / 2**20)
    del x, y
    g = np.linspace(-2.0, 2.0, opts.grid)
    w1 = measure(w1_tools(), (g, g.copy()), opts.repeats, w1_numpy(g, g))
    report(f"W1 broadcast form ({opts.grid}x{opts.grid})", w1, 2 * g.nbytes / 2**20, opts.grid**2 * 8 / 2**20)
    if opts.n == 20_000_000 and opts.grid == 6000:  # the documented sizes: the figures the docs quote
        save({"W4": w4, "W1": w1}, dict(n=opts.n, grid=opts.grid, repeats=opts.repeats))
    if opts.terabyte:
        terabyte(opts.terabyte_side)


if __name__ == "__main__":
    main()
