"""Throughput of lanemath against NumPy and against libm called from Numba.

    python -m lanewise.lanemath.throughput [--n 10000000] [--func cos ...]
                                           [--dtype float64|float32] [--no-write]

For each function, on ``n`` arguments drawn uniformly from a typical range, one
thread, best of ``--repeat`` runs after a warm-up:

* ``numpy``    — the NumPy ufunc on the whole array (``scipy.special`` for erf/erfc);
* ``libm``     — ``out[i] = math.f(x[i])`` in an ``njit`` loop (what a lane does today);
* ``lanemath`` — ``out[i] = lanemath.f(x[i])`` in the same loop.

Numbers are elements per second (millions).  Without ``--no-write`` they go into
``benchmarks/results/lanemath_throughput.json`` (the rows measured replace theirs; each
keeps the date, machine and command of its run) and the table rendered from that file
into ``docs/lanemath.md`` between the ``throughput`` markers.
"""

from __future__ import annotations

import argparse
import math
import shlex
import sys
import time

import numba
import numpy as np

from . import _results

#: name -> (argument ranges, numpy function, math function)
RANGES = {
    "sin": [(-10, 10)], "cos": [(-10, 10)], "tan": [(-10, 10)], "sincos": [(-10, 10)],
    "exp": [(-50, 50)], "exp2": [(-50, 50)], "expm1": [(-5, 5)],
    "log": [(1e-3, 1e3)], "log2": [(1e-3, 1e3)], "log10": [(1e-3, 1e3)], "log1p": [(-0.5, 10)],
    "pow": [(0.1, 10), (-20, 20)], "sqrt": [(0, 100)], "cbrt": [(-100, 100)],
    "hypot": [(-10, 10), (-10, 10)], "sinh": [(-10, 10)], "cosh": [(-10, 10)],
    "tanh": [(-5, 5)], "asinh": [(-10, 10)], "acosh": [(1, 10)], "atanh": [(-0.99, 0.99)],
    "atan": [(-10, 10)], "atan2": [(-10, 10), (-10, 10)], "asin": [(-1, 1)], "acos": [(-1, 1)],
    "erf": [(-4, 4)], "erfc": [(-4, 10)],
}


def _numpy_func(name):
    if name in ("erf", "erfc"):
        try:
            import scipy.special as sp
            return getattr(sp, name)
        except ImportError:  # pragma: no cover
            return None
    if name == "sincos":
        return lambda x: (np.sin(x), np.cos(x))
    if name == "pow":
        return np.power
    return getattr(np, {"asinh": "arcsinh", "acosh": "arccosh", "atanh": "arctanh",
                        "atan": "arctan", "atan2": "arctan2", "asin": "arcsin",
                        "acos": "arccos"}.get(name, name))


def _math_func(name):
    if name == "sincos":
        return None
    return getattr(math, name, None)


_LOOPS = {}


def _loop(fn, nargs, pair=False):
    key = (fn, nargs, pair)
    if key in _LOOPS:
        return _LOOPS[key]
    if pair:
        @numba.njit(error_model="numpy", nogil=True)
        def loop(x, out, out2):
            for i in range(numba.uint64(x.shape[0])):
                a, b = fn(x[i])
                out[i] = a
                out2[i] = b
    elif nargs == 1:
        @numba.njit(error_model="numpy", nogil=True)
        def loop(x, out):
            for i in range(numba.uint64(x.shape[0])):
                out[i] = fn(x[i])
    else:
        @numba.njit(error_model="numpy", nogil=True)
        def loop(x, y, out):
            for i in range(numba.uint64(x.shape[0])):
                out[i] = fn(x[i], y[i])
    _LOOPS[key] = loop
    return loop


def measure(name, dtype=np.float64, n=10_000_000, repeat=10, seed=0):
    """Elements per second for numpy / libm loop / lanemath loop (None where absent).

    The three variants run interleaved, ``repeat`` rounds, best time of each: on a
    shared machine, contention then hits all three alike.
    """
    from lanewise import lanemath
    rng = np.random.default_rng(seed)
    args = [rng.uniform(a, b, n).astype(dtype) for a, b in RANGES[name]]
    out = np.empty(n, dtype)
    out2 = np.empty(n, dtype)
    runs = {}
    npf = _numpy_func(name)
    if npf is not None:
        runs["numpy"] = lambda: npf(*args)
    mf = _math_func(name)
    if mf is not None:
        loop = _loop(mf, len(args))
        try:
            loop(*args, out)
            runs["libm"] = lambda: loop(*args, out)
        except numba.core.errors.TypingError:  # e.g. math.cbrt: not supported by Numba
            pass
    fn = lanemath.FUNCTIONS[name]
    if name == "sincos":
        lm_loop = _loop(fn, 1, pair=True)
        runs["lanemath"] = lambda: lm_loop(*args, out, out2)
    else:
        lm_loop = _loop(fn, len(args))
        runs["lanemath"] = lambda: lm_loop(*args, out)
    for f in runs.values():  # warm-up (and compile)
        f()
    best = {k: math.inf for k in runs}
    for _ in range(repeat):
        for k, f in runs.items():
            t = time.perf_counter()
            f()
            best[k] = min(best[k], time.perf_counter() - t)
    return {k: (n / best[k] if k in best else None) for k in ("numpy", "libm", "lanemath")}


def _fmt(v):
    return "—" if v is None else f"{v / 1e6:,.0f}"


def _ratio(a, b):
    return "—" if a is None or b is None else f"{a / b:.1f}x"


def table(rows: dict) -> list[str]:
    """The throughput table of ``rows`` (``{"cos/float64": {"numpy": ..., "libm": ...,
    "lanemath": ...}}`` in elements per second, a results file's), with the runs it comes from."""
    order = list(RANGES)
    keys = sorted(rows, key=lambda k: (order.index(k.split("/")[0]) if k.split("/")[0] in order else 99, k))
    out = ["| function | dtype | NumPy (M/s) | libm in njit loop (M/s) | lanemath (M/s) | vs NumPy | vs libm |",
           "|---|---|---:|---:|---:|---:|---:|"]
    for key in keys:
        r = rows[key]
        name, dtype = key.split("/")
        out.append(f"| `{name}` | {dtype} | {_fmt(r['numpy'])} | {_fmt(r['libm'])} | {_fmt(r['lanemath'])} | "
                   f"{_ratio(r['lanemath'], r['numpy'])} | {_ratio(r['lanemath'], r['libm'])} |")
    return out + ["", _results.runs_line(rows)]


def _write_table(results, command):
    """Merge ``results`` into benchmarks/results/lanemath_throughput.json and render its table."""
    rows = {f"{name}/{dt}": dict(r) for name, per in results.items() for dt, r in per.items()}
    _results.write_block("throughput", table(_results.merge("throughput", rows, command)))


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--n", type=int, default=10_000_000)
    p.add_argument("--func", action="append")
    p.add_argument("--dtype", action="append", choices=["float64", "float32"])
    p.add_argument("--repeat", type=int, default=10)
    p.add_argument("--no-write", action="store_true")
    a = p.parse_args(argv)
    command = shlex.join(["python", "-m", "lanewise.lanemath.throughput", *(sys.argv[1:] if argv is None else argv)])
    names = a.func or list(RANGES)
    dtypes = a.dtype or ["float64"]
    results = {}
    for name in names:
        results[name] = {}
        for dt in dtypes:
            r = measure(name, np.dtype(dt).type, a.n, a.repeat)
            results[name][dt] = r
            print(f"{name:6s} {dt}: numpy {_fmt(r['numpy'])}  libm {_fmt(r['libm'])}  "
                  f"lanemath {_fmt(r['lanemath'])} M/s", flush=True)
    if not a.no_write:
        _write_table(results, command)
    return results


if __name__ == "__main__":
    main()
