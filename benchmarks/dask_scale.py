"""Issue 6's bars on this machine: W5 at 10^10 lanes on a 2-worker LocalCluster
against the single-process CPU backend, and a W1 grid larger than RAM streamed to zarr.

    python -m benchmarks.dask_scale [--n 100000] [--grid 60000] [--skip-grid] [--out DIR]

Prints a markdown table; ``--write`` keeps the run in ``benchmarks/results/dask_scale.json`` (date,
machine, command) and renders BENCHMARKS.md's section ``benchmarks/sections/60_dask_scale.md``
from it (``--render`` renders it again without measuring).  The W5 runs alternate CPU
and Dask (medians of ``--repeat``); results must be bitwise equal.  The zarr run
limits each worker's memory and reports every worker's peak resident memory
(``ru_maxrss`` read in the worker after the write) next to the chunk size.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

from .w1_grid import lane


def _grid(lw):
    return lw.vmap(lw.vmap(lane, in_axes=(None, 0)), in_axes=(0, None))


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def w5_at_scale(client, lw, da, n: int, row_chunks: int, repeat: int) -> dict:
    """The sum over an n x n grid: CPU backend vs the cluster, alternating."""
    x = np.linspace(-2.0, 2.0, n)
    total = lw.reduce(_grid(lw), "sum")
    dx = da.from_array(x, chunks=-(-n // row_chunks))
    cpu_t, dask_t, values = [], [], set()
    total(x[:1000], x[:1000]), total(dx[:1000], x[:1000]).compute()  # compile both sides
    for _ in range(repeat):
        t = time.perf_counter()
        values.add(float(total(x, x)).hex())
        cpu_t.append(time.perf_counter() - t)
        t = time.perf_counter()
        values.add(float(total(dx, x).compute()).hex())
        dask_t.append(time.perf_counter() - t)
    return {"n": n, "lanes": n * n, "cpu": statistics.median(cpu_t), "dask": statistics.median(dask_t),
            "cpu_all": cpu_t, "dask_all": dask_t, "bitwise_equal": len(values) == 1}


def grid_to_zarr(client, lw, da, n: int, chunk: int, path: str) -> dict:
    """An n x n float64 grid written chunk by chunk; workers' peak RSS afterwards."""
    x = da.linspace(-2.0, 2.0, n, chunks=chunk)
    z = _grid(lw)(x, x)
    t = time.perf_counter()
    z.to_zarr(path, overwrite=True)
    elapsed = time.perf_counter() - t
    peaks = client.run(_peak_rss_mb)
    import zarr
    stored = zarr.open_array(path, mode="r")
    probe = np.asarray(stored[n // 2, :5])  # spot check one row against the CPU backend
    xs = np.linspace(-2.0, 2.0, n)
    want = _grid(lw)(xs[n // 2:n // 2 + 1], xs[:5])[0]
    on_disk = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(path) for f in fs)
    return {"n": n, "bytes": 8 * n * n, "chunk": chunk, "chunk_mb": 8 * chunk * chunk / 2**20,
            "seconds": elapsed, "worker_peak_mb": sorted(peaks.values()),
            "disk_gb": on_disk / 1e9, "spot_check": bool(np.array_equal(probe, want))}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=100_000, help="W5 grid side (n^2 lanes)")
    ap.add_argument("--row-chunks", type=int, default=16)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--grid", type=int, default=60_000, help="zarr grid side")
    ap.add_argument("--chunk", type=int, default=4000, help="zarr chunk side")
    ap.add_argument("--memory-limit", default="1.5GiB", help="per worker, for the zarr run")
    ap.add_argument("--skip-grid", action="store_true")
    ap.add_argument("--out", default=None, help="zarr directory (default: a temporary one)")
    ap.add_argument("--write", action="store_true",
                    help="keep the run in benchmarks/results/dask_scale.json and render its BENCHMARKS.md section")
    ap.add_argument("--render", action="store_true", help="measure nothing: render the section from the results file")
    args = ap.parse_args(argv)
    results = Path(__file__).parent / "results" / "dask_scale.json"
    if args.render:
        _write_section(json.loads(results.read_text()))
        return
    import dask.array as da
    from distributed import Client, LocalCluster

    import lanewise as lw

    doc = {"date": time.strftime("%Y-%m-%dT%H:%M:%S"), "machine": f"{platform.machine()}, {os.cpu_count()} cores",
           "command": f"python -m benchmarks.dask_scale --n {args.n} --grid {args.grid} --chunk {args.chunk} "
                      f"--memory-limit {args.memory_limit}",
           "repeat": args.repeat, "memory_limit": args.memory_limit}
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                      memory_limit=args.memory_limit, dashboard_address=None) as cluster, Client(cluster) as client:
        doc["w5"] = w5_at_scale(client, lw, da, args.n, args.row_chunks, args.repeat)
        print(doc["w5"])
        if not args.skip_grid:
            out = args.out or tempfile.mkdtemp(prefix="lw-grid-")
            try:
                doc["grid"] = grid_to_zarr(client, lw, da, args.grid, args.chunk, os.path.join(out, "grid.zarr"))
            finally:
                if args.out is None:
                    shutil.rmtree(out, ignore_errors=True)
            print(doc["grid"])
    doc["load_after"] = os.getloadavg()[0]
    print(markdown(doc))
    if args.write:
        results.write_text(json.dumps(doc, indent=1) + "\n")
        _write_section(doc)


def markdown(doc: dict) -> str:
    """BENCHMARKS.md's section for one run (``benchmarks/results/dask_scale.json``).

    Example:
        >>> doc = {"date": "D", "machine": "M", "command": "C", "repeat": 1, "load_after": 2.5, "memory_limit": "1GiB",
        ...        "w5": {"lanes": 1e4, "cpu": 2.0, "dask": 3.0, "bitwise_equal": True}}
        >>> markdown(doc).splitlines()[-1].split(" | ")[1:4]
        ['CPU backend 2.0 s', 'Dask 2 workers 3.0 s', 'ratio 1.50 (target ≤ 1.3)']
    """
    r = doc["w5"]
    rows = [f"| W5 sum, {r['lanes']:.1e} lanes | CPU backend {r['cpu']:.1f} s | Dask 2 workers {r['dask']:.1f} s | "
            f"ratio {r['dask'] / r['cpu']:.2f} (target ≤ 1.3) | bitwise equal: {r['bitwise_equal']} |"]
    if g := doc.get("grid"):
        rows.append(f"| W1 grid {g['n']}² to zarr ({g['bytes'] / 1e9:.1f} GB) | {g['seconds']:.0f} s | "
                    f"chunk {g['chunk_mb']:.0f} MB, limit {doc['memory_limit']} | worker peak RSS "
                    f"{', '.join(f'{p:.0f}' for p in g['worker_peak_mb'])} MB | spot check: {g['spot_check']}, "
                    f"{g['disk_gb']:.1f} GB on disk |")
    note = f" {doc['note']}" if doc.get("note") else ""
    return "\n".join([
        "## Dask: W5 and W1 beyond one process", "",
        f"{doc['date']}, {doc['machine']}, {doc['load_after']:.1f} load after; `{doc['command']}`. A 2-worker "
        "LocalCluster (processes, one thread each) against the single-process CPU backend (prange "
        f"over both cores), alternating, median of {doc['repeat']}.{note}", "",
        "| run | | | | |", "|---|---|---|---|---|", *rows, ""])


def _write_section(doc: dict) -> None:
    (Path(__file__).parent / "sections" / "60_dask_scale.md").write_text(markdown(doc))


if __name__ == "__main__":
    main()
