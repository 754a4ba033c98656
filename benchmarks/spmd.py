"""SPMD on SIMD (lanewise.spmd) against the scalar path and hand-written Numba.

Four divergent workloads — every lane runs its own data-dependent loop:

* W2: the escape-time fractal of benchmarks/w2_fractal.py (its Numba peer is reused);
* Newton fractal: Newton's method for z**3 = 1 on a grid, iterations to converge;
* root finding: Kepler's equation E - e sin E = M by Newton's method to a tolerance;
* Collatz: the number of steps to reach 1 for n = 1 .. N (integer lanes).

Each runs three ways — lanewise with the SPMD path (the default for these
lanes), lanewise with ``lw.config.spmd = False`` (the scalar path), and a
hand-written ``numba.njit(parallel=True)`` loop nest — and every result is
checked bit for bit against the Numba peer (Kepler: the lanes use lanewise's
vector math, so its E is compared to 1e-12 and its iteration counts exactly).
Timing: one warm-up call each, then ``--repeats`` rounds that time every tool
once, interleaved; the median per tool is reported with its ratio to Numba.

    python -m benchmarks.spmd            # full sizes
    python -m benchmarks.spmd --quick    # small sizes (a smoke test: launches of a few ms
                                         # are dominated by thread wake-up, not by the lanes)
"""
from __future__ import annotations

import argparse
import math
import statistics
import time

import numba
import numpy as np

import lanewise as lw
from lanewise import spmd as lw_spmd

from . import w2_fractal

# ---------------------------------------------------------------------------- lanes

NEWTON_MAX = 64


def newton(x, y):
    """Iterations of Newton's method for z**3 = 1 from x + iy until |z**3 - 1| < 1e-10."""
    for k in range(NEWTON_MAX):
        x2, y2 = x * x, y * y
        fr = x * (x2 - 3 * y2) - 1.0  # z**3 - 1
        fi = y * (3 * x2 - y2)
        if fr * fr + fi * fi < 1e-20:
            return k
        dr, di = 3 * (x2 - y2), 6 * x * y  # 3 z**2
        den = dr * dr + di * di
        if den == 0.0:
            return NEWTON_MAX
        x, y = x - (fr * dr + fi * di) / den, y - (fi * dr - fr * di) / den
    return NEWTON_MAX


def kepler(m, e):
    """Eccentric anomaly E with E - e sin E = M (Newton, |step| < 1e-13), and the iterations."""
    big = m + e * math.sin(m)
    n = 0
    while n < 50:
        f = big - e * math.sin(big) - m
        step = f / (1.0 - e * math.cos(big))
        big = big - step
        n += 1
        if abs(step) < 1e-13:
            break
    return big, n


def collatz(n):
    steps = 0
    while n != 1:
        if n % 2 == 0:
            n = n // 2
        else:
            n = 3 * n + 1
        steps += 1
    return steps


# ---------------------------------------------------------------------------- Numba peers


@numba.njit(parallel=True, error_model="numpy")
def newton_numba(xs, ys):
    out = np.empty((xs.size, ys.size), np.int64)
    for i in numba.prange(xs.size):
        for j in range(ys.size):
            x, y = xs[i], ys[j]
            res = NEWTON_MAX
            for k in range(NEWTON_MAX):
                x2, y2 = x * x, y * y
                fr = x * (x2 - 3 * y2) - 1.0
                fi = y * (3 * x2 - y2)
                if fr * fr + fi * fi < 1e-20:
                    res = k
                    break
                dr, di = 3 * (x2 - y2), 6 * x * y
                den = dr * dr + di * di
                if den == 0.0:
                    break
                x, y = x - (fr * dr + fi * di) / den, y - (fi * dr - fr * di) / den
            out[i, j] = res
    return out


@numba.njit(parallel=True, error_model="numpy")
def kepler_numba(ms, es):
    big_out = np.empty((es.size, ms.size))
    n_out = np.empty((es.size, ms.size), np.int64)
    for i in numba.prange(es.size):
        e = es[i]
        for j in range(ms.size):
            m = ms[j]
            big = m + e * math.sin(m)
            n = 0
            while n < 50:
                f = big - e * math.sin(big) - m
                step = f / (1.0 - e * math.cos(big))
                big = big - step
                n += 1
                if abs(step) < 1e-13:
                    break
            big_out[i, j] = big
            n_out[i, j] = n
    return big_out, n_out


@numba.njit(parallel=True, error_model="numpy")
def collatz_numba(ns):
    out = np.empty(ns.size, np.int64)
    chunk = 4096
    for c in numba.prange((ns.size + chunk - 1) // chunk):
        for j in range(c * chunk, min((c + 1) * chunk, ns.size)):
            n = ns[j]
            steps = 0
            while n != 1:
                if n % 2 == 0:
                    n = n // 2
                else:
                    n = 3 * n + 1
                steps += 1
            out[j] = steps
    return out


# ---------------------------------------------------------------------------- workloads


def _grid(lane):
    return lw.vmap(lw.vmap(lane, in_axes=(None, 0)), in_axes=(0, None))


def _kepler_grid():
    return lw.vmap(lw.vmap(kepler, in_axes=(0, None)), in_axes=(None, 0))


WORKLOADS = {
    # name: (sizes {full, quick}, data(n), lanewise factory, Numba peer, check)
    "W2 escape fractal": ({"full": 1500, "quick": 300}, w2_fractal.setup, lambda: _grid(w2_fractal.escape),
                          w2_fractal._numba(numba), "exact"),
    "Newton fractal z^3=1": ({"full": 1200, "quick": 300},
                             lambda n: (np.linspace(-2, 2, n), np.linspace(-2, 2, n)),
                             lambda: _grid(newton), newton_numba, "exact"),
    "Kepler root finding": ({"full": 2000, "quick": 400},
                            lambda n: (np.linspace(0, 2 * np.pi, n), np.linspace(0, 0.99, n // 2)),
                            _kepler_grid, kepler_numba, "kepler"),
    "Collatz steps": ({"full": 4_000_000, "quick": 400_000}, lambda n: (np.arange(1, n + 1),),
                      lambda: lw.vmap(collatz), collatz_numba, "exact"),
}


def _check(kind, got, want):
    if kind == "kepler":  # vector math vs libm: E to 1e-12, a rare iteration count off by one
        np.testing.assert_allclose(got[0], want[0], rtol=0, atol=1e-12)
        assert np.mean(got[1] != want[1]) < 1e-3 and np.abs(got[1] - want[1]).max() <= 1
        return
    if isinstance(want, tuple):
        for g, w in zip(got, want):
            _check(kind, g, w)
        return
    assert np.array_equal(np.asarray(got), np.asarray(want)), "result differs from the Numba peer"


def _scalar(factory):
    with lw.config.overridden(spmd=False):
        mapped = factory()

    def run(*data):
        with lw.config.overridden(spmd=False):
            return mapped(*data)

    return run


def run(size: str = "full", repeats: int = 7) -> list[dict]:
    rows = []
    for name, (sizes, setup, factory, peer, check) in WORKLOADS.items():
        data = setup(sizes[size])
        tools = {"lanewise SPMD": factory(), "lanewise scalar path": _scalar(factory), "numba prange": peer}
        want = peer(*data)
        for tool, fn in tools.items():
            _check(check, fn(*data), want)  # warm-up (compiles) and check
        path = next(line for line in str(lw.explain(tools["lanewise SPMD"], *data)).splitlines()
                    if line.startswith("lane path"))
        times = {tool: [] for tool in tools}
        for _ in range(repeats):
            for tool, fn in tools.items():
                t0 = time.perf_counter()
                fn(*data)
                times[tool].append(time.perf_counter() - t0)
        med = {tool: statistics.median(ts) for tool, ts in times.items()}
        rows.append({"workload": name, "n": sizes[size], "median_s": med, "path": path})
    return rows


def table(rows) -> str:
    lines = ["| workload | lanewise SPMD (s) | lanewise scalar path (s) | Numba prange (s) | "
             "SPMD / Numba | SPMD / scalar path |",
             "|---|---|---|---|---|---|"]
    for r in rows:
        m = r["median_s"]
        spmd, scalar, peer = m["lanewise SPMD"], m["lanewise scalar path"], m["numba prange"]
        lines.append(f"| {r['workload']} (n={r['n']}) | {spmd:.4f} | {scalar:.4f} | {peer:.4f} | "
                     f"{spmd / peer:.2f}x | {spmd / scalar:.2f}x |")
    return "\n".join(lines)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes")
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args(argv)
    rows = run("quick" if args.quick else "full", args.repeats)
    print(f"threads: {numba.get_num_threads()}; SPMD width for float64: {lw_spmd.width_for(8)} "
          f"({lw_spmd.vector_bits()}-bit vectors)")
    print(table(rows))
    for r in rows:
        print(f"{r['workload']}: {r['path']}")
    if not args.quick:  # the documented sizes: the figures the docs quote (benchmarks.quote)
        save(rows, args.repeats)


def save(rows: list[dict], repeats: int) -> None:
    """benchmarks/results/spmd.json: the rows, with the run's context."""
    from .report import save_rows

    save_rows("spmd", rows, repeats)


if __name__ == "__main__":
    main()
