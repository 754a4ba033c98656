"""lw.random's throughput (docs/random.md, "Performance"): ``benchmarks/results/random_draws.json``.

10**7 values of each kind of draw on one thread, three ways: NumPy's own
generator (``default_rng()``, for scale: a sequential stream, not a key per
value), an ``njit`` loop of ``draw(fold_in(key, i))``, and the same as an
``lw.vmap`` lane.  Each lanewise value costs two Philox blocks, one for
``fold_in`` and one for the draw.  Median seconds of interleaved rounds, after a
warm-up call whose results are checked equal between the two lanewise forms.

    python -m benchmarks.random_draws              # writes results/random_draws.json
    python -m benchmarks.random_draws --quick      # 10**5 values; nothing written
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import numba
import numpy as np

import lanewise as lw
from lanewise import random as R

from .report import emit_rows

DRAWS = {"uniform": (R.uniform, lambda g, n: g.random(n)),
         "normal": (R.normal, lambda g, n: g.standard_normal(n)),
         "exponential": (R.exponential, lambda g, n: g.standard_exponential(n))}


def _njit_loop(draw):
    @numba.njit
    def loop(key, n):
        out = np.empty(n)
        for i in range(n):
            out[i] = draw(R.fold_in(key, i))
        return out
    return loop


def _lane(draw):
    def lane(i, key):
        return draw(R.fold_in(key, i))
    return lw.vmap(lane, in_axes=(0, None))


def tools(kind: str, n: int) -> dict:
    """The three ways to make ``n`` values of ``kind``, each a function of no arguments."""
    draw, numpy_draw = DRAWS[kind]
    key = tuple(R.key(0))  # two uint32 words: the form docs/random.md recommends for an unmapped key
    loop, lane, idx = _njit_loop(draw), _lane(draw), np.arange(n)
    return {"numpy-default_rng": lambda: numpy_draw(np.random.default_rng(0), n),
            "njit-loop": lambda: loop(key, n),
            "lw-vmap": lambda: lane(idx, key)}


def measure(kind: str, n: int, repeats: int) -> dict:
    load = round(os.getloadavg()[0], 2)  # a shared machine's seconds grow; the record says how busy it was
    ways = tools(kind, n)
    warm = {k: f() for k, f in ways.items()}
    np.testing.assert_array_equal(warm["njit-loop"], warm["lw-vmap"])  # same bits in both forms
    times = {k: [] for k in ways}
    for _ in range(repeats):
        for k, f in ways.items():
            start = time.perf_counter()
            f()
            times[k].append(time.perf_counter() - start)
    return {"workload": kind, "size": f"{n} values, one thread", "load_average_at_start": load,
            "median_s": {k: statistics.median(v) for k, v in times.items()}}


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="10**5 values; nothing written")
    p.add_argument("--repeats", type=int, default=7)
    args = p.parse_args(argv)
    numba.set_num_threads(1)  # the table is per thread: the generator's cost, not the machine's width
    rows = [measure(kind, 10**5 if args.quick else 10**7, args.repeats) for kind in DRAWS]
    emit_rows("random_draws", rows, args.repeats, write=not args.quick)


if __name__ == "__main__":
    main()
