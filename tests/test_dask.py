"""The dask backend: lazy dask arrays in and out, every chunk run by the CPU kernel.

First part: Dask's local (threaded) scheduler — results equal the CPU backend
bit for bit (vmap, nested vmap, scan inside lanes, pytrees, per-lane arrays,
lw.random), chunking follows the mapped axes, unmapped arrays and the lane
program are one graph key each, and ``lw.reduce`` is bitwise identical for any
chunking.  Second part: a real ``LocalCluster`` with two worker processes
(started here): the same results, one kernel build per worker process, a worker
killed mid-computation, and a grid three times the workers' memory limit
streamed to zarr.

Lane functions live at module level: workers unpickle them by reference (this
module is importable there, as the spawned workers inherit ``sys.path``); one
test uses a lambda, which travels by value (cloudpickle).
"""

from __future__ import annotations

import io
import math
import os
import pickle
import time
from contextlib import redirect_stdout

import numpy as np
import pytest

import lanewise as lw

da = pytest.importorskip("dask.array")
dask = pytest.importorskip("dask")

from lanewise.backends import cpu  # noqa: E402, F401 - loaded before any cluster starts
from lanewise.backends import dask as ldask  # noqa: E402, F401 - loaded before any cluster starts

try:
    from lanewise import random as lwr
    lwr.uniform(lwr.fold_in(lwr.key(0), 1))
except Exception:  # noqa: BLE001 - lw.random is optional here
    lwr = None


# ----------------------------------------------------------------------------- lanes


def wave(x, y):
    r = x * x + y * y
    return math.cos(r) / (1 + r)


GRID = lw.vmap(lw.vmap(wave, in_axes=(None, 0)), in_axes=(0, None))


def first_above(row, t):
    for i in range(row.shape[0]):
        if row[i] > t:
            return i
    return -1


def lookup(x, table):
    i = min(int(abs(x) * (table.shape[0] - 1)), table.shape[0] - 1)
    return table[i] * x


def sum_prod(x, y):
    return x + y, x * y


def features(x):
    out = np.empty(3)
    out[0] = x
    out[1] = x * x
    out[2] = -x
    return out


def ema_step(s, p):
    return 0.75 * s + 0.25 * p, None


def ema(series):  # lw.scan inside a lane: each lane runs its own sequential loop
    return lw.scan(ema_step, series[0], series)[0]


def affine(p, x, scale=1.0):
    return (p["a"] * x + p["b"]) * scale


def triple(x, y, z):
    return x * 100.0 + y * 10.0 + math.sin(z)


def escape(cr, ci):
    zr = zi = 0.0
    for n in range(200):
        zr, zi = zr * zr - zi * zi + cr, 2 * zr * zi + ci
        if zr * zr + zi * zi > 4.0:
            return n
    return 200


def bigger_abs(a, b):
    return a if abs(a) >= abs(b) else b


def draw(key, i, j):
    k = lwr.fold_in(lwr.fold_in(key, i), j)
    return lwr.uniform(k) + lwr.normal(lwr.fold_in(k, 7))


def slow(x, y):  # ~25 us a lane (a chain of 10**4 dependent steps): tasks of ~0.2 s
    s = 0.0
    for _ in range(10_000):
        s = s * 0.999 + x * y
    return s


def ro(a):
    """Read-only, as the dask backend hands chunks to kernels: the CPU reference then runs
    the same compiled kernel (one compile per test instead of two)."""
    a = np.ascontiguousarray(a)
    a.flags.writeable = False
    return a


def xs(n, lo=-2.0, hi=2.0):
    return ro(np.linspace(lo, hi, n))


def rechunk_all(arrays, chunks):
    return [da.from_array(a, chunks=c) for a, c in zip(arrays, chunks)]


def same(got, want):
    """Bitwise equality of two pytrees of arrays (dtype included)."""
    import optree
    g, gt = optree.tree_flatten(got)
    w, wt = optree.tree_flatten(want)
    assert gt == wt
    for a, b in zip(g, w):
        a, b = np.asarray(a), np.asarray(b)
        assert a.dtype == b.dtype and a.shape == b.shape
        assert np.array_equal(a, b, equal_nan=True), np.max(np.abs(a - b))


@pytest.fixture
def local():
    with dask.config.set(scheduler="threads", num_workers=2):
        yield


@pytest.fixture(autouse=True)
def serial_cpu_reference(restore_config):
    """The CPU references run their serial kernel (a compile half as long as the parallel
    one; the same blocks, so the same bits: results never depend on the thread count).
    ``test_reduce_bitwise_for_any_chunking[sum-None]`` keeps the parallel kernel."""
    restore_config.serial_below = 10**12


# ----------------------------------------------------------------------------- vmap


@pytest.mark.parametrize("chunks", [(300, 200), (1000, 700), (97, 700), (1, 350)])
def test_grid_equals_cpu_and_follows_chunks(local, chunks):
    x, y = xs(1000), xs(700, -1, 1)
    z = GRID(*rechunk_all([x, y], chunks))
    assert isinstance(z, da.Array)
    assert z.chunks == tuple(da.from_array(v, chunks=c).chunks[0] for v, c in zip((x, y), chunks))
    same(z.compute(), GRID(x, y))


def test_mixed_numpy_and_dask_and_scalars(local):
    x, y = xs(500), xs(300)
    g = lw.vmap(lw.vmap(escape, in_axes=(None, 0)), in_axes=(0, None))
    z = g(da.from_array(x, chunks=128), y)  # NumPy y: chunked like the level's default
    assert z.chunks[0] == (128, 128, 128, 116)
    same(z.compute(), g(x, y))
    f = lw.vmap(first_above, in_axes=(0, None))
    rows = ro(np.random.default_rng(0).random((50, 40)))
    same(f(da.from_array(rows, chunks=(7, 9)), 0.9).compute(), f(rows, 0.9))


def test_backend_dask_with_numpy_inputs_is_lazy(local):
    g = lw.vmap(lw.vmap(wave, in_axes=(None, 0)), in_axes=(0, None), backend="dask")
    x = xs(400)
    z = g(x, x)
    assert isinstance(z, da.Array) and z.shape == (400, 400)
    same(z.compute(), GRID(x, x))
    with dask.config.set({"array.chunk-size": "64KiB"}):  # the documented default: "auto"
        assert g(x, x).numblocks != (1, 1)


def test_unmapped_axes_kept_whole(local):
    rows = ro(np.random.default_rng(1).random((60, 50)))
    f = lw.vmap(first_above, in_axes=(1, None))  # a column per lane
    z = f(da.from_array(rows, chunks=(13, 11)), 0.95)
    assert z.chunks == ((11, 11, 11, 11, 6),)  # the mapped axis' chunks survive
    same(z.compute(), f(rows, 0.95))


def test_out_axes_multiple_outputs_and_unmapped_output(local):
    x, y = xs(90), xs(70)
    g = lw.vmap(lw.vmap(sum_prod, in_axes=(None, 0)), in_axes=(0, None), out_axes=(1, 0))
    got = g(*rechunk_all([x, y], [40, 25]))
    assert got[0].shape == (70, 90) and got[0].chunks == ((25, 25, 20), (40, 40, 10))
    same(dask.compute(*got), g(x, y))
    h = lw.vmap(lambda a, b: (a * 2.0, a + b), in_axes=(None, 0), out_axes=(None, 0))
    got = h(3.0, da.from_array(y, chunks=30))
    same(dask.compute(*got), h(3.0, y))


def test_per_lane_array_output_and_scan_in_lanes(local):
    x = xs(101)
    f = lw.vmap(features)
    z = f(da.from_array(x, chunks=30))
    assert z.chunks == ((30, 30, 30, 11), (3,))
    same(z.compute(), f(x))
    series = ro(np.random.default_rng(2).random((40, 25)))
    g = lw.vmap(ema)
    same(g(da.from_array(series, chunks=(9, 5))).compute(), g(series))


def test_pytrees_keywords_and_three_levels(local):
    p = {"a": xs(30), "b": np.float64(0.5)}
    f = lw.vmap(lw.vmap(affine, in_axes=({"a": 0, "b": None}, None)), in_axes=(None, 0))
    x = xs(20)
    scale = ro(np.random.default_rng(6).random((20, 30)))  # keywords map axis 0 at every level
    got = f({"a": da.from_array(p["a"], chunks=7), "b": p["b"]}, da.from_array(x, chunks=6),
            scale=da.from_array(scale, chunks=(5, 10)))
    same(got.compute(), f(p, x, scale=scale))
    g3 = lw.vmap(lw.vmap(lw.vmap(triple, in_axes=(None, None, 0)), in_axes=(None, 0, None)),
                 in_axes=(0, None, None))
    a, b, c = xs(12), xs(9), xs(31)
    got = g3(*rechunk_all([a, b, c], [5, 4, 8]))
    assert got.numblocks == (3, 3, 4)
    same(got.compute(), g3(a, b, c))


@pytest.mark.skipif(lwr is None, reason="lw.random not available")
def test_random_same_numbers_for_any_chunking(local):
    g = lw.vmap(lw.vmap(draw, in_axes=(None, None, 0)), in_axes=(None, 0, None))
    key, i, j = ro(lwr.key(42)), ro(np.arange(64)), ro(np.arange(48))
    want = g(key, i, j)
    for ci, cj in [(64, 48), (10, 7), (1, 48)]:
        same(g(key, da.from_array(i, chunks=ci), da.from_array(j, chunks=cj)).compute(), want)


def test_unmapped_argument_and_program_are_one_graph_key_each(local):
    table = ro(np.random.default_rng(3).random(200_000))  # 1.6 MB
    f = lw.vmap(lookup, in_axes=(0, None))
    x = xs(2000, -1, 1)
    z = f(da.from_array(x, chunks=100), table)
    graph = dict(z.__dask_graph__())
    sizes = {key: len(pickle.dumps(task)) for key, task in graph.items()}
    big = [key for key, n in sizes.items() if n > table.nbytes]
    assert len(big) == 1  # the table, once
    chunk_keys = [k for k in graph if isinstance(k, tuple) and k[0] == z.name]
    assert len(chunk_keys) == 20
    for k in chunk_keys:
        task = graph[k]
        assert sizes[k] < 10_000  # no array, no lane program inside a task
        assert big[0] in task.dependencies or any(big[0] in graph[d].dependencies for d in task.dependencies)
    runners = {d for k in chunk_keys for d in graph[k].dependencies if "runner" in str(d).lower()}
    assert len(runners) == 1
    same(z.compute(), f(x, table))


def test_auto_selected_only_for_dask_arrays():
    x = xs(10)
    assert isinstance(GRID(x, x), np.ndarray)
    assert isinstance(GRID(da.from_array(x), x), da.Array)
    with pytest.raises(lw.OutputError):
        GRID(da.from_array(x), x, out=np.empty((10, 10)))


def test_lane_errors_surface_on_compute(local):
    def picky(v):
        if v > 0.5:
            raise ValueError("too big")
        return v
    z = lw.vmap(picky)(da.from_array(xs(20, 0, 1), chunks=5))
    with pytest.raises(ValueError, match="too big"):
        z.compute()


def test_progress_bar(local):
    from dask.diagnostics import ProgressBar
    x = xs(300)
    buf = io.StringIO()
    with redirect_stdout(buf), ProgressBar(out=buf):
        GRID(da.from_array(x, chunks=50), x).compute()
    assert "100%" in buf.getvalue()


# ----------------------------------------------------------------------------- reduce


CHUNKINGS = [(1500, 1300), (700, 400), (333, 1300), (97, 211), (1500, 50), (7, 1300)]


@pytest.mark.parametrize("op,axis", [("sum", None), ("argmax", None), ("mean", 0)])
def test_reduce_bitwise_for_any_chunking(local, op, axis, restore_config):
    x, y = xs(1500), xs(1300, -1, 1)
    r = lw.reduce(GRID, op, axis=axis)
    if op == "sum":
        restore_config.serial_below = 32768  # against the parallel CPU kernel too
    want = r(x, y)
    for cx, cy in CHUNKINGS:
        got = r(da.from_array(x, chunks=cx), da.from_array(y, chunks=cy))
        assert isinstance(got, da.Array)
        same(got.compute(), want)
    on_dask = lw.reduce(lw.vmap(GRID.fun, in_axes=(0, None), backend="dask"), op, axis=axis)
    with dask.config.set({"array.chunk-size": "1MiB"}):  # NumPy in, backend="dask": auto chunks
        same(on_dask(x, y).compute(), want)


def test_reduce_random_chunkings_float32_and_monoid(local):
    rng = np.random.default_rng(4)
    x = ro(rng.standard_normal(20_000).astype(np.float32))
    f = lw.vmap(lambda v: v * v - 1)
    r_sum, r_mon = lw.reduce(f, "sum"), lw.reduce(f, lw.Monoid(bigger_abs, np.float32(0)))
    want_sum, want_mon = r_sum(x), r_mon(x)
    for _ in range(4):
        cuts = np.sort(rng.choice(np.arange(1, x.size), size=rng.integers(1, 30), replace=False))
        chunks = tuple(np.diff(np.concatenate([[0], cuts, [x.size]])).tolist())
        same(r_sum(da.from_array(x, chunks=(chunks,))).compute(), want_sum)
        with dask.config.set(split_every=3):  # a deeper concatenation tree: the same bits
            same(r_mon(da.from_array(x, chunks=(chunks,))).compute(), want_mon)


def test_reduce_outputs_levels_and_bools(local):
    a, b, c = xs(40), xs(30), xs(50)
    g3 = lw.vmap(lw.vmap(lw.vmap(triple, in_axes=(None, None, 0)), in_axes=(None, 0, None)),
                 in_axes=(0, None, None))
    r = lw.reduce(g3, "sum", axis=(0, 2))  # keeps the middle level
    want = r(a, b, c)
    for ch in [(40, 30, 50), (7, 4, 9), (13, 30, 1)]:
        same(r(*rechunk_all([a, b, c], ch)).compute(), want)
    g2 = lw.vmap(lw.vmap(sum_prod, in_axes=(None, 0)), in_axes=(0, None))
    r2 = lw.reduce(g2, "min", axis=1)
    same(dask.compute(*r2(*rechunk_all([a, c], [9, 11]))), r2(a, c))
    hits = lw.reduce(lw.vmap(lambda v: v * v <= 0.25), "any")
    same(hits(da.from_array(c, chunks=7)).compute(), hits(c))


def test_reduce_empty_matches_cpu(local):
    f = lw.vmap(lambda v: v * 2.0)
    same(lw.reduce(f, "sum")(da.from_array(np.empty(0))).compute(), lw.reduce(f, "sum")(np.empty(0)))


# ----------------------------------------------------------------------------- a real cluster


MEMORY_LIMIT = 450 * 2**20


@pytest.fixture(scope="module")
def client():
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(n_workers=2, processes=True, threads_per_worker=1,
                                  dashboard_address=None, memory_limit=MEMORY_LIMIT) as cluster, \
            distributed.Client(cluster) as client:
        yield client


async def _exit_now():  # runs on the worker's event loop: the process dies mid-task
    os._exit(1)


def _reset_peak_memory():
    with open("/proc/self/clear_refs", "w") as f:  # Linux: reset this process's peak RSS
        f.write("5")


def _peak_memory() -> int:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmHWM:"))


def _worker_stats():
    from lanewise.backends import cpu, dask as ldask  # noqa: F811 - imported where the worker runs it
    return {**ldask.stats, **cpu.stats}


def test_cluster_one_kernel_per_worker_process(client):
    before = client.run(_worker_stats)
    x, y = xs(2400), xs(1800)
    z = GRID(da.from_array(x, chunks=300), da.from_array(y, chunks=300))  # 48 chunks
    same(z.compute(), GRID(x, y))
    after = client.run(_worker_stats)
    chunks = sum(after[w]["chunks"] - before[w]["chunks"] for w in after)
    assert chunks == 48
    for w in after:
        if after[w]["chunks"] > before[w]["chunks"]:
            assert after[w]["builds"] - before[w]["builds"] <= 1
            built = (after[w]["typed"] + after[w]["disk"]) - (before[w]["typed"] + before[w]["disk"])
            assert built <= 1  # typed on the client, so workers find the kernel on disk
            assert after[w]["typed"] == before[w]["typed"]
    events = [e for _, e in client.get_events("lanewise") if e["lane"] == "wave" and e["kind"] == "map"]
    assert 1 <= len(events) <= 2 and len({e["pid"] for e in events}) == len(events)


def test_cluster_results_equal_cpu(client, restore_config):
    x, y = xs(900), xs(700)
    same(GRID(*rechunk_all([x, y], [200, 300])).compute(), GRID(x, y))
    r = lw.reduce(GRID, "sum")
    restore_config.serial_below = 32768  # the parallel kernel the local tests compiled
    same(r(*rechunk_all([x, y], [101, 700])).compute(), r(x, y))
    series = ro(np.random.default_rng(5).random((64, 30)))
    g = lw.vmap(ema)
    same(g(da.from_array(series, chunks=(16, 30))).compute(), g(series))
    shifted = lw.vmap(lambda v, c: v * c + 1.0, in_axes=(0, None))  # by value: cloudpickle
    same(shifted(da.from_array(x, chunks=100), 3.0).compute(), shifted(x, 3.0))


def test_cluster_killed_worker_does_not_change_result(client):
    x, y = xs(64), xs(1000, 0, 1)
    r = lw.reduce(lw.vmap(lw.vmap(slow, in_axes=(None, 0)), in_axes=(0, None)), "sum")
    want = r(x, y)
    future = client.compute(r(da.from_array(x, chunks=4), da.from_array(y, chunks=1000)))
    victim = None
    deadline = time.time() + 60
    while victim is None and time.time() < deadline:  # kill a worker once it has done some work
        done = client.run(lambda: __import__("lanewise.backends.dask").backends.dask.stats["partials"])
        busy = [w for w, n in done.items() if n >= 1]
        if busy and not future.done():
            victim = busy[0]
        time.sleep(0.05)
    assert victim is not None, "no partial finished in time"
    client.run(_exit_now, workers=[victim], wait=False)
    same(future.result(timeout=120), want)
    assert victim not in client.scheduler_info()["workers"]
    client.wait_for_workers(2, timeout=60)


def test_cluster_streams_a_grid_larger_than_worker_memory_to_zarr(client, tmp_path):
    zarr = pytest.importorskip("zarr")
    n = 13_000  # 1.35 GB of float64: three times a worker's memory limit
    x = xs(n)
    z = GRID(da.from_array(x, chunks=1000), da.from_array(x, chunks=1000))
    assert z.nbytes > 2.8 * MEMORY_LIMIT
    workers = set(client.scheduler_info()["workers"])
    client.run(_reset_peak_memory)
    z.to_zarr(str(tmp_path / "grid.zarr"), compressors=None)
    peaks = client.run(_peak_memory)
    assert all(p < MEMORY_LIMIT for p in peaks.values()), peaks
    assert set(client.scheduler_info()["workers"]) == workers  # nobody restarted for memory
    stored = zarr.open_array(str(tmp_path / "grid.zarr"), mode="r")
    rows = [0, 4321, n - 1]
    same(stored[rows], GRID(ro(x[rows]), x))
    same(stored[:, 777], GRID(x, ro(x[[777]]))[:, 0])
