"""Throughput of lanemath against NumPy and against libm called from Numba.

    python -m lanewise.lanemath.throughput [--n 10000000] [--func cos ...]
                                           [--dtype float64|float32] [--no-write]

For each function, on ``n`` arguments drawn uniformly from a typical range, one
thread, best of ``--repeat`` runs after a warm-up:

* ``numpy``    — the NumPy ufunc on the whole array (``scipy.special`` for erf/erfc);
* ``libm``     — ``out[i] = math.f(x[i])`` in an ``njit`` loop (what a lane does today);
* ``lanemath`` — ``out[i] = lanemath.f(x[i])`` in the same loop.

Numbers are elements per second (millions).  Without ``--no-write`` the table goes into
``docs/lanemath.md`` between the ``throughput`` markers.
"""

from __future__ import annotations

import argparse
import math
import os
import re
import time

import numba
import numpy as np

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


DOC = os.path.join(os.path.dirname(__file__), "..", "..", "..", "docs", "lanemath.md")
BEGIN, END = "<!-- throughput:begin -->", "<!-- throughput:end -->"


def _fmt(v):
    return "—" if v is None else f"{v / 1e6:,.0f}"


def _write_table(results, dtype_names, path=DOC):
    path = os.path.abspath(path)
    text = open(path).read() if os.path.exists(path) else "# lanemath\n"
    if BEGIN not in text:
        text += f"\n{BEGIN}\n{END}\n"
    head, rest = text.split(BEGIN, 1)
    old, tail = rest.split(END, 1)
    rows = {}
    for line in old.splitlines():
        m = re.match(r"\|\s*`(\w+)`\s*\|\s*(\w+)\s*\|", line)
        if m:
            rows[(m.group(1), m.group(2))] = line
    for name, per in results.items():
        for dt, r in per.items():
            sp_np = r["lanemath"] / r["numpy"] if r["numpy"] else None
            sp_lm = r["lanemath"] / r["libm"] if r["libm"] else None
            rows[(name, dt)] = (f"| `{name}` | {dt} | {_fmt(r['numpy'])} | {_fmt(r['libm'])} | "
                                f"{_fmt(r['lanemath'])} | "
                                f"{'—' if sp_np is None else f'{sp_np:.1f}x'} | "
                                f"{'—' if sp_lm is None else f'{sp_lm:.1f}x'} |")
    order = list(RANGES)
    table = ["", "| function | dtype | NumPy (M/s) | libm in njit loop (M/s) | lanemath (M/s) "
                 "| vs NumPy | vs libm |", "|---|---|---:|---:|---:|---:|---:|"]
    keys = sorted(rows, key=lambda k: (order.index(k[0]) if k[0] in order else 99, k[1]))
    table += [rows[k] for k in keys]
    with open(path, "w") as fh:
        fh.write(head + BEGIN + "\n".join(table) + "\n" + END + tail)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--n", type=int, default=10_000_000)
    p.add_argument("--func", action="append")
    p.add_argument("--dtype", action="append", choices=["float64", "float32"])
    p.add_argument("--repeat", type=int, default=10)
    p.add_argument("--no-write", action="store_true")
    a = p.parse_args(argv)
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
        _write_table(results, dtypes)
    return results


if __name__ == "__main__":
    main()
