"""lanewise programs inside ``jax.jit`` (``lw.jax.op``) against the same program in JAX.

Three rows, the bars of the bridge issue (docs/jax.md):

* the escape-time fractal (W2: 1500², 500 iterations) as an op inside a jitted
  program, against ``jax.vmap`` of ``lax.while_loop`` in the same program;
* the W3 backtest (2000 series × 5000 steps, a scan per series) as an op,
  against ``jax.vmap(lax.scan)``;
* the per-call cost of a tiny op (8 lanes of ``x + 1``) inside ``jax.jit``,
  against the same jitted program with ``x + 1`` written in JAX: the difference
  is what the custom call adds.

Each jitted program is compiled and checked once, then the tools are timed in
``--repeats`` interleaved rounds; medians are reported.  ``lanewise-direct`` is the same
program called on NumPy arrays outside JAX: the difference is what the op adds.

    python -m benchmarks.jax_bridge            # documented sizes (writes results/jax_bridge.json)
    python -m benchmarks.jax_bridge --quick    # small sizes, nothing written
"""
from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

import lanewise as lw

from . import w2_fractal, w3_backtest
from .harness import jax_x64
from .report import emit_rows


def _timed(fn, *args) -> float:
    start = time.perf_counter()
    out = fn(*args)
    getattr(out, "block_until_ready", lambda: None)()
    return time.perf_counter() - start


def compare(name: str, size: str, tools: dict, args, repeats: int, check) -> dict:
    """Median seconds of each tool (after one checked warm-up call each)."""
    results = {k: f(*args) for k, f in tools.items()}
    check(*results.values())
    times = {k: [] for k in tools}
    for _ in range(repeats):
        for k, f in tools.items():
            times[k].append(_timed(f, *args))
    return {"workload": name, "size": size, "median_s": {k: statistics.median(v) for k, v in times.items()}}


def fractal(jax, n: int, repeats: int) -> dict:
    program = w2_fractal._lanewise(lw)
    grid = lw.jax.op(program)
    tools = {"lanewise-op": jax.jit(lambda re, im: grid(re, im) + 0),
             "jax-vmap-while_loop": jax.jit(lambda re, im: w2_fractal._jax(jax)(re, im) + 0),
             "lanewise-direct": lambda re, im: program(np.asarray(re), np.asarray(im))}
    re, im = (jax.numpy.asarray(a) for a in w2_fractal.setup(n))

    def check(a, b, direct):  # XLA contracts a*b+c into FMA: a few boundary points move by one step
        assert np.mean(np.asarray(a) != np.asarray(b)) <= 1e-4 and np.array_equal(np.asarray(a), direct)

    row = compare("fractal", f"{n}x{n}, {w2_fractal.MAX_ITER} iterations", tools, (re, im), repeats, check)
    row["ratio"] = row["median_s"]["lanewise-op"] / row["median_s"]["jax-vmap-while_loop"]
    row["bar"] = "<= 0.1x jax.vmap(lax.while_loop)"
    return row


def backtest(jax, n: int, repeats: int) -> dict:
    program = w3_backtest._lanewise(lw)
    op = lw.jax.op(program)
    twin = w3_backtest._jax(jax)
    tools = {"lanewise-op": jax.jit(lambda p: op(p) * 1.0), "jax-vmap-scan": jax.jit(lambda p: twin(p) * 1.0),
             "lanewise-direct": lambda p: program(np.asarray(p))}
    (prices,) = w3_backtest.setup(n)

    def check(a, b, direct):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-9, atol=1e-9)
        np.testing.assert_array_equal(np.asarray(a), direct)

    row = compare("backtest", f"{n} series x {w3_backtest.STEPS} steps", tools, (jax.numpy.asarray(prices),),
                   repeats, check)
    row["ratio"] = row["median_s"]["lanewise-op"] / row["median_s"]["jax-vmap-scan"]
    row["bar"] = "<= 0.2x jax.vmap(lax.scan)"
    return row


def overhead(jax, repeats: int) -> dict:
    op = lw.jax.op(lw.vmap(lambda x: x + 1.0))
    tools = {"lanewise-op": jax.jit(lambda x: op(x) * 2.0), "jax": jax.jit(lambda x: (x + 1.0) * 2.0)}
    x = jax.numpy.arange(8.0)

    def check(a, b):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))

    calls = 2000  # per round: one call is ~10 µs, below the timer's useful resolution
    row = compare("tiny op", "8 lanes of x + 1", {k: loop(f, calls) for k, f in tools.items()}, (x,),
                   repeats, lambda a, b: check(tools["lanewise-op"](x), tools["jax"](x)))
    row["median_s"] = {k: v / calls for k, v in row["median_s"].items()}
    row["overhead_us"] = (row["median_s"]["lanewise-op"] - row["median_s"]["jax"]) * 1e6
    row["bar"] = "<= 20 us per call"
    return row


def loop(f, calls: int):
    """``f`` called ``calls`` times on one argument (a call is too short to time alone)."""
    def run(x):
        for _ in range(calls):
            out = f(x)
        return getattr(out, "block_until_ready", lambda: out)()
    return run


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes; nothing written")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)
    jax = jax_x64()
    rows = [fractal(jax, 300 if args.quick else 1500, args.repeats),
            backtest(jax, 200 if args.quick else 2000, args.repeats),
            overhead(jax, args.repeats)]
    emit_rows("jax_bridge", rows, args.repeats, write=not args.quick)


if __name__ == "__main__":
    main()
