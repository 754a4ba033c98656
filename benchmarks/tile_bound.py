"""How fast per-tile early exit can be, from the lanes' own iteration counts (no chip needed).

    python -m benchmarks.tile_bound      # writes benchmarks/results/tile_bound.json

``jax.vmap`` of a ``while_loop`` runs every lane for as many iterations as the slowest lane
of the whole array.  A kernel that leaves its loop tile by tile (the tpu backend) runs each
tile for as many iterations as the slowest lane of that tile.  So, whatever the kernel's
speed per iteration, the best it can do against ``jax.vmap`` is the mean over tiles of each
tile's most iterations, over the most of all lanes: this bound, per tile shape.  The mean
over lanes is the bound of a kernel that refills finished lanes with new ones (each lane
costs its own iterations).  The counts come from the CPU backend on the chip benchmarks'
grids (``benchmarks/device/tpu_w2.py``: W2's escape time and the held-out Newton kernel,
float32 coordinates), laid out as the tpu backend lays out a plane.

Example:
    >>> import numpy as np
    >>> tile_means(np.array([[1, 1, 4, 4], [1, 2, 4, 4]]), (1, 2))
    2.75
"""
from __future__ import annotations

import argparse
import datetime
import json
import platform

import numpy as np

import lanewise as lw

from .device.tpu_w2 import MAX_ITER, escape, newton

RESULTS = "benchmarks/results/tile_bound.json"
TILES = ((8, 128), (32, 128), (8, 512), (64, 128))


def tile_means(counts: np.ndarray, tile: tuple) -> float:
    """The mean over ``tile``-shaped blocks of ``counts`` (edge blocks cut) of each block's most."""
    rows, cols = counts.shape
    maxima = [counts[i:i + tile[0], j:j + tile[1]].max()
              for i in range(0, rows, tile[0]) for j in range(0, cols, tile[1])]
    return float(np.mean(maxima))


def counts_of(workload: str, n: int) -> np.ndarray:
    """Each lane's loop iterations on the chip benchmark's n x n grid (CPU backend, float32 coordinates)."""
    if workload == "W2":
        re, im = np.linspace(-2.0, 0.6, n, dtype=np.float32), np.linspace(-1.3, 1.3, n, dtype=np.float32)
        grid = lw.vmap(lw.vmap(escape, in_axes=(None, 0)), in_axes=(0, None))(re, im)
        return np.minimum(np.asarray(grid) + 1, MAX_ITER)  # escaping at n took n + 1 iterations
    axis = np.linspace(-1.5, 1.5, n, dtype=np.float32)
    return np.asarray(lw.vmap(lw.vmap(newton, in_axes=(None, 0)), in_axes=(0, None))(axis, axis)[1])


def row(workload: str, n: int) -> dict:
    counts = counts_of(workload, n)
    slowest = int(counts.max())
    out = {"workload": workload, "size": f"{n}x{n}", "slowest_iterations": slowest,
           "lane_mean_iterations": float(counts.mean())}
    for tile in TILES:
        out[f"tile_{tile[0]}x{tile[1]}_iterations"] = tile_means(counts, tile)
    return out


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1536)
    args = parser.parse_args(argv)
    data = {"date": datetime.date.today().isoformat(), "machine": platform.node() or "local",
            "command": "python -m benchmarks.tile_bound", "rows": [row(w, args.n) for w in ("W2", "newton")]}
    with open(RESULTS, "w") as fh:
        json.dump(data, fh, indent=1)
    for r in data["rows"]:
        print(r["workload"], {k: round(v / r["slowest_iterations"], 3) for k, v in r.items()
                              if k.endswith("_iterations") and k != "slowest_iterations"})


if __name__ == "__main__":
    main()
