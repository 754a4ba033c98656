"""The classic vectorisation tutorial, five or six ways: ``python -m lanewise demo``.

``f(x, y) = cos(x² + y²) / (1 + x² + y²)`` over the grid ``linspace(-2, 2, n)²``
computed by

1. a pure Python double loop (on a small grid; its time at the full ``n`` is
   extrapolated, and labelled so),
2. NumPy with ``meshgrid`` (the classic tutorial's way: two ``n × n`` coordinate
   grids, and every intermediate a full ``n × n`` array),
3. NumPy broadcasting (``x[:, None]``, ``y[None, :]``: no coordinate grids, but
   still full-size intermediates),
4. a hand-written Numba kernel (``@njit(parallel=True)``, ``prange`` over rows):
   what you would write without lanewise,
5. JAX, when it is installed (it is not in the ``demo`` extra): the same
   lane in ``jax.numpy`` under two nested ``jax.vmap`` s and ``jax.jit``,
6. lanewise: the same one-lane ``f`` under two nested ``vmap`` s, compiled into
   one multithreaded loop nest.

Every method runs in a fresh Python process, so its peak memory is its own:
each process reports the resident set after its imports (the baseline) and its
high-water mark at the end.  The demo then checks that the methods agree with
NumPy (``meshgrid``) on the same grid and saves one picture: the surface, and
beside it each method's time and peak memory (drawn by :mod:`lanewise.demo_plot`).
The table's header names the machine and the threads the Numba and lanewise
workers ran on.

Example:
    >>> from lanewise import demo
    >>> z = demo.grid_meshgrid(demo.axis(3), demo.axis(3))
    >>> round(float(z[1, 1]), 6)  # f(0, 0)
    1.0
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

LO, HI = -2.0, 2.0
TOLERANCE = 1e-12
FULL_N, QUICK_N, PYTHON_N = 6000, 1000, 300
PLOT_POINTS = 500  # the plot shows at most this many points per side
METHODS = ("python", "meshgrid", "broadcast", "numba", "jax", "lanewise")  # the table's order
OPTIONAL = {"jax": "jax"}  # method -> the module it needs; without it the method is skipped, saying why
COMPILED = ("numba", "jax", "lanewise")  # the methods that compile, on threads of their own
REFERENCE = "meshgrid"  # the others are checked against it
LABELS = {"python": "python loops", "meshgrid": "numpy meshgrid", "broadcast": "numpy broadcasting",
          "numba": "numba prange loop", "jax": "jax vmap under jit", "lanewise": "lanewise nested vmap"}


# ----------------------------------------------------------------- the methods
def f(x, y):
    """One lane: the tutorial's function at one point.

    Example:
        >>> f(0.0, 0.0)
        1.0
    """
    r = x * x + y * y
    return math.cos(r) / (1 + r)


def axis(n: int) -> np.ndarray:
    """The grid's coordinates along one axis: ``linspace(-2, 2, n)``.

    Example:
        >>> axis(3)
        array([-2.,  0.,  2.])
    """
    return np.linspace(LO, HI, n)


def grid_python(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """``z[i, j] = f(x[i], y[j])`` by a pure Python double loop.

    Example:
        >>> grid_python(axis(3), axis(2)).shape
        (3, 2)
    """
    xs, ys = x.tolist(), y.tolist()  # Python floats: the loop's fastest form
    z = np.empty((len(xs), len(ys)))
    for i, xi in enumerate(xs):
        for j, yj in enumerate(ys):
            z[i, j] = f(xi, yj)
    return z


def grid_meshgrid(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """``z[i, j] = f(x[i], y[j])`` the tutorial's NumPy way: ``meshgrid``, then whole-array operations.

    Example:
        >>> grid_meshgrid(axis(3), axis(2)).shape
        (3, 2)
    """
    xx, yy = np.meshgrid(x, y, indexing="ij")
    r = xx * xx + yy * yy
    return np.cos(r) / (1 + r)


def grid_broadcast(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """``z[i, j] = f(x[i], y[j])`` by NumPy broadcasting: a column against a row, no coordinate grids.

    Example:
        >>> grid_broadcast(axis(3), axis(2)).shape
        (3, 2)
    """
    r = x[:, None] ** 2 + y[None, :] ** 2
    return np.cos(r) / (1 + r)


def grid_numba():
    """A hand-written Numba kernel for ``z[i, j] = f(x[i], y[j])``: ``prange`` over rows, a loop over columns.

    What one writes without lanewise: the formula inlined, the loops and the
    output spelled out.  Its ``math.cos`` is Numba's scalar libm call, so the
    inner loop does not vectorise (in a lane, lanewise compiles the same
    ``math.cos`` to :mod:`lanewise.lanemath`'s vectorisable one).

    It compiles at its first call, in every process: no ``cache=True``, which
    would write its cache beside this file, inside the installed package (with
    it, a later process would load the kernel, as lanewise loads its own from
    its disk cache).

    Example:
        >>> grid_numba()(axis(3), axis(2)).shape
        (3, 2)
    """
    import numba  # here, not at the top: the Python and NumPy workers must not load it

    @numba.njit(parallel=True)
    def grid(x, y):
        z = np.empty((x.shape[0], y.shape[0]))
        for i in numba.prange(x.shape[0]):
            for j in range(y.shape[0]):
                r = x[i] * x[i] + y[j] * y[j]
                z[i, j] = math.cos(r) / (1 + r)
        return z

    return grid


def f_jax(x, y):
    """:func:`f` for JAX: the same lane, with ``jnp.cos`` (``math.cos`` cannot take JAX's tracers).

    Example:
        >>> float(f_jax(0.0, 0.0))
        1.0
    """
    import jax.numpy as jnp

    r = x * x + y * y
    return jnp.cos(r) / (1 + r)


def grid_jax():
    """``f_jax`` under ``jax.vmap`` over ``y`` (inner) and ``x`` (outer), all under ``jax.jit``.

    The natural JAX form of the workload.  It turns on ``jax_enable_x64`` (for
    the whole process: the demo runs it in a process of its own), since the
    demo is float64 and JAX computes in float32 otherwise.  Each call waits for
    JAX's result (``block_until_ready``) and hands back a NumPy array, as the
    other methods do, so the time is the whole computation's.

    Example:
        >>> grid_jax()(axis(3), axis(2)).shape
        (3, 2)
    """
    import jax

    jax.config.update("jax_enable_x64", True)
    grid = jax.jit(jax.vmap(jax.vmap(f_jax, in_axes=(None, 0)), in_axes=(0, None)))

    def run(x, y):
        return np.asarray(grid(x, y).block_until_ready())

    return run


def grid_lanewise():
    """``f`` mapped over ``y`` (inner) and then ``x`` (outer): one compiled loop nest.

    Example:
        >>> grid_lanewise()(axis(3), axis(2)).shape
        (3, 2)
    """
    import lanewise as lw
    from lanewise.demo import f as lane  # this module's f, even when run from its file

    return lw.vmap(lw.vmap(lane, in_axes=(None, 0)), in_axes=(0, None))


# ------------------------------------------------- measuring, in a fresh process
def rss_mb(field: str = "VmRSS") -> float:
    """This process's resident set (``"VmRSS"``) or its peak (``"VmHWM"``), in MB.

    The peak is read from ``/proc/self/status`` rather than ``ru_maxrss``
    because on Linux a child's ``ru_maxrss`` starts at its *parent's* peak
    (the kernel carries the high-water mark across fork + exec).  Elsewhere,
    ``ru_maxrss`` is the only (peak) figure there is.

    Example:
        >>> rss_mb("VmHWM") >= rss_mb("VmRSS") > 0
        True
    """
    try:
        with open("/proc/self/status") as fh:
            line = next(ln for ln in fh if ln.startswith(field + ":"))
        return int(line.split()[1]) * 1024 / 1e6  # kB (KiB) -> MB
    except (OSError, StopIteration):
        import resource

        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return peak / 1e6 if sys.platform == "darwin" else peak * 1024 / 1e6


def implementation(method: str):
    """The grid function of ``method`` (one of ``METHODS``), with its imports done.

    :func:`measure` calls it before it reads the baseline, so that the imports
    count in the baseline rather than in the method's memory.

    Example:
        >>> implementation("broadcast")(axis(3), axis(2)).shape
        (3, 2)
    """
    if method == "numba":
        return grid_numba()
    if method == "lanewise":
        return grid_lanewise()
    if method == "jax":
        return grid_jax()
    return {"python": grid_python, "meshgrid": grid_meshgrid, "broadcast": grid_broadcast}[method]


def _time_calls(grid, x, y, repeats: int):
    """The last result and the time of each of ``repeats`` calls."""
    z, times = None, []
    for _ in range(repeats):
        z = None  # free the previous result first: at most one result is alive
        t0 = time.perf_counter()
        z = grid(x, y)
        times.append(time.perf_counter() - t0)
    return z, times


def measure(method: str, n: int, repeats: int, save: str = "") -> dict:
    """Time and memory of ``method`` on an ``n × n`` grid, measured in this process.

    Run it in a fresh process (as :func:`run_worker` does) for honest memory
    figures.  The first call (for numba: the compile; for lanewise: the compile
    or the disk-cache load; plus one run) is timed apart from the ``repeats``
    calls after it.  ``max_abs_diff`` compares the result with the
    ``REFERENCE`` method's on the same grid (``None`` for the reference itself);
    ``save`` names an ``.npy`` file for a downsampled copy.  ``threads`` is
    ``numba.get_num_threads()`` for the methods that run on Numba's threads
    (numba, lanewise), else ``None``.

    Example:
        >>> r = measure("broadcast", 50, repeats=2)
        >>> r["n"], len(r["times_s"]), r["peak_mb"] >= r["base_mb"]
        (50, 2, True)
    """
    grid = implementation(method)
    x, y = axis(n), axis(n)
    base = rss_mb()
    t0 = time.perf_counter()
    z = grid(x, y)
    first = time.perf_counter() - t0
    z = None
    after_first = rss_mb()  # what the first call kept (numba, lanewise: the JIT runtime)
    z, times = _time_calls(grid, x, y, repeats)
    peak = rss_mb("VmHWM")  # before the check below allocates the reference's copy
    reference = implementation(REFERENCE)
    diff = None if method == REFERENCE else float(np.max(np.abs(z - reference(x, y)), initial=0.0))
    if save:
        np.save(save, downsample(z))
    return {"method": method, "n": n, "first_s": first, "times_s": times, "base_mb": base,
            "kept_mb": after_first - base, "peak_mb": peak, "out_mb": z.nbytes / 1e6,
            "max_abs_diff": diff, "threads": numba_threads() if method in ("numba", "lanewise") else None}


def numba_threads() -> int | None:
    """The threads Numba runs parallel loops on (lanewise's CPU backend runs on Numba's), if Numba is loaded.

    Asked only where the method has loaded Numba: the Python and NumPy workers
    must not load it just to answer.

    Example:
        >>> import numba
        >>> numba_threads() == numba.get_num_threads()
        True
    """
    numba = sys.modules.get("numba")
    return None if numba is None else numba.get_num_threads()


def missing(method: str) -> str | None:
    """Why ``method`` cannot run here (its optional module does not import), else ``None``.

    Asked in the demo's own process: the workers inherit its environment, so
    what imports here imports there.

    Example:
        >>> missing("numba") is None
        True
    """
    module = OPTIONAL.get(method)
    if module is None:
        return None
    try:
        __import__(module)
    except ImportError as e:
        return f"{module} is not installed ({e})"
    return None


def machine() -> str:
    """The machine in words: CPU model, architecture and logical CPUs.

    The model is ``/proc/cpuinfo``'s ``model name`` (Linux), else
    ``platform.processor()``, else the architecture alone.

    Example:
        >>> f"{os.cpu_count()} logical CPUs" in machine()
        True
    """
    model = ""
    try:
        with open("/proc/cpuinfo") as fh:
            model = next((ln.split(":", 1)[1].strip() for ln in fh if ln.startswith("model name")), "")
    except OSError:
        pass  # not Linux: platform.processor() below
    model = model or platform.processor() or "unknown CPU"
    return f"{model}, {platform.machine() or 'unknown architecture'}, {os.cpu_count()} logical CPUs"


def downsample(z: np.ndarray, points: int = PLOT_POINTS) -> np.ndarray:
    """Every k-th row and column of ``z``, so that at most ``points`` remain per side.

    Example:
        >>> downsample(np.zeros((1000, 1000)), 300).shape
        (250, 250)
    """
    step = max(1, -(-max(z.shape) // points))
    return np.ascontiguousarray(z[::step, ::step])


def _worker_main(argv: list[str]) -> int:
    """Entry point of a measuring process: ``METHOD N REPEATS [SAVE]`` -> one JSON line."""
    method, n, repeats, save = argv[0], int(argv[1]), int(argv[2]), (argv[3:] or [""])[0]
    print(json.dumps(measure(method, n, repeats, save)))
    return 0


# The worker runs this file without importing the lanewise package (which loads
# Numba), so that the Python and NumPy baselines hold only what they use.
_WORKER = ("import runpy, sys; demo = runpy.run_path(sys.argv[1], run_name='lanewise_demo_worker'); "
           "sys.exit(demo['_worker_main'](sys.argv[2:]))")


def run_worker(method: str, n: int, repeats: int, save: str = "") -> dict:
    """:func:`measure` in a fresh Python process; its JSON result as a dict.

    Example:
        >>> run_worker("meshgrid", 40, 1)["n"]
        40
    """
    cmd = [sys.executable, "-c", _WORKER, __file__, method, str(n), str(repeats), save]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    lines = proc.stdout.strip().splitlines()
    if proc.returncode != 0 or not lines:
        raise RuntimeError(f"measuring {method} (n={n}) failed (exit {proc.returncode}):\n"
                           + proc.stderr[-3000:])
    return json.loads(lines[-1])


# ------------------------------------------------------------------- reporting
def fmt_s(seconds: float) -> str:
    """A duration for the table.

    Example:
        >>> fmt_s(0.000123), fmt_s(0.0123), fmt_s(41.64)
        ('0.123 ms', '0.012 s', '41.6 s')
    """
    if seconds < 0.001:
        return f"{seconds * 1e3:.3f} ms"
    return f"{seconds:.3f} s" if seconds < 10 else f"{seconds:,.1f} s"


def fmt_mb(mb: float) -> str:
    """A memory size for the table.

    Example:
        >>> fmt_mb(1786.4), fmt_mb(0.72)
        ('1,786 MB', '0.7 MB')
    """
    return f"{mb:.1f} MB" if mb < 10 else f"{mb:,.0f} MB"


def format_table(header: list[str], rows: list[list[str]]) -> str:
    """Plain aligned columns: the first left-aligned, the others right-aligned.

    Example:
        >>> print(format_table(["a", "bb"], [["xyz", "1"]]))
        a    bb
        xyz   1
    """
    widths = [max(len(r[k]) for r in [header, *rows]) for k in range(len(header))]

    def line(cells):
        return "  ".join(c.ljust(w) if k == 0 else c.rjust(w)
                         for k, (c, w) in enumerate(zip(cells, widths, strict=True))).rstrip()

    return "\n".join(line(r) for r in [header, *rows])


def median_s(result: dict) -> float:
    """The median of a measurement's timed calls (after the first).

    Example:
        >>> median_s({"times_s": [3.0, 1.0, 2.0]})
        2.0
    """
    return statistics.median(result["times_s"])


def extrapolated_s(result: dict, n: int) -> float:
    """The time at ``n × n`` points, scaling a measurement linearly in the number of points.

    Example:
        >>> extrapolated_s({"n": 300, "times_s": [0.1]}, 6000)
        40.0
    """
    return median_s(result) * (n / result["n"]) ** 2


def time_at(result: dict, n: int) -> float:
    """A measurement's median time at ``n × n`` points: measured there, else extrapolated.

    Example:
        >>> time_at({"n": 300, "times_s": [0.1]}, 300), time_at({"n": 300, "times_s": [0.1]}, 600)
        (0.1, 0.4)
    """
    return median_s(result) if result["n"] >= n else extrapolated_s(result, n)


def peak_at(result: dict, n: int) -> float:
    """A measurement's peak RSS at ``n × n`` points: measured there, else estimated as baseline + output.

    The estimate is what the Python loop holds at ``n``: its imports and inputs
    (the baseline) and the ``n × n`` float64 result it fills in place; the
    floats it makes on the way are freed point by point.

    Example:
        >>> peak_at({"n": 300, "base_mb": 30.0, "peak_mb": 31.0}, 1000)
        38.0
    """
    return result["peak_mb"] if result["n"] >= n else result["base_mb"] + n * n * 8 / 1e6


def fmt_ratio(ratio: float) -> str:
    """A ratio of two times, for the table.

    Example:
        >>> fmt_ratio(2.71), fmt_ratio(0.8), fmt_ratio(1234.5)
        ('2.7x', '0.8x', '1,234x')
    """
    if ratio >= 10:
        return f"{ratio:,.0f}x"
    return f"{ratio:.1f}x" if ratio >= 1 else f"{ratio:.2g}x"


def speed(other_s: float, lanewise_s: float) -> str:
    """lanewise's time against another method's, in words.

    Example:
        >>> speed(2.7, 1.0), speed(1.0, 1.5)
        ('2.7x faster', '1.5x slower')
    """
    if other_s >= lanewise_s:
        return f"{fmt_ratio(other_s / lanewise_s)} faster"
    return f"{fmt_ratio(lanewise_s / other_s)} slower"


def fastest_other(results: dict, n: int) -> str:
    """The method, other than lanewise, with the shortest time at ``n`` (extrapolated times included).

    Example:
        >>> fastest_other({"a": {"n": 9, "times_s": [2.0]}, "b": {"n": 9, "times_s": [1.0]},
        ...                "lanewise": {"n": 9, "times_s": [0.5]}}, 9)
        'b'
    """
    return min((m for m in results if m != "lanewise"), key=lambda m: time_at(results[m], n))


def measured(results: dict) -> list[str]:
    """The methods that ran (the keys of ``results``), in the table's order.

    Example:
        >>> measured({"lanewise": {}, "python": {}})
        ['python', 'lanewise']
    """
    return [m for m in METHODS if m in results]


def table_rows(results: dict, n: int) -> list[list[str]]:
    """The table's rows: each measurement, plus the Python loop extrapolated to ``n``."""
    lw_s = median_s(results["lanewise"])
    rows = []
    for method in measured(results):
        r = results[method]
        ratio = fmt_ratio(median_s(r) / lw_s) if r["n"] == n else "-"  # times compare only on equal grids
        rows.append([LABELS[method], str(r["n"]), fmt_s(r["first_s"]), fmt_s(median_s(r)), ratio,
                     fmt_mb(r["out_mb"]), fmt_mb(r["peak_mb"]), fmt_mb(r["base_mb"]),
                     fmt_mb(r["peak_mb"] - r["base_mb"])])
        if r["n"] < n:
            t, peak = time_at(r, n), peak_at(r, n)
            rows.append([f"{LABELS[method]} (extrapolated*)", str(n), "-", fmt_s(t) + "*",
                         fmt_ratio(t / lw_s) + "*", fmt_mb(n * n * 8 / 1e6), fmt_mb(peak) + "*", "-",
                         fmt_mb(peak - r["base_mb"]) + "*"])
    return rows


def threads_text(results: dict) -> str:
    """The threads each parallel method ran on: Numba's count in the numba and lanewise workers; JAX's is XLA's.

    Example:
        >>> threads_text({"numba": {"threads": 2}, "jax": {"threads": None}, "lanewise": {"threads": 2}})
        "numba 2, jax: XLA's own pool, lanewise 2"
    """
    return ", ".join(f"{m}: XLA's own pool" if m == "jax" else f"{m} {results[m]['threads']}"
                     for m in measured(results) if m in COMPILED)


def machine_line(results: dict) -> str:
    """The table's first line: the machine, and the threads each parallel method ran on.

    Example:
        >>> machine_line({"lanewise": {"threads": 2}}).endswith("; threads: lanewise 2 (numba.get_num_threads())")
        True
    """
    return f"machine: {machine()}; threads: {threads_text(results)} (numba.get_num_threads())"


def report(results: dict, n: int, repeats: int, skipped: dict | None = None) -> str:
    """The machine line, the table and its notes; ``skipped`` maps a method that did not run to why."""
    header = ["method", "n", "first call", f"median of {repeats}", "vs lanewise", "output", "peak RSS",
              "baseline", "peak - baseline"]
    py = results["python"]
    kept = ", ".join(f"{m} {fmt_mb(results[m]['kept_mb'])}" for m in measured(results)
                     if m in COMPILED)
    notes = [
        "vs lanewise: the method's median time / lanewise's (above 1: lanewise is faster).",
        "first call: in a fresh process; for numba and jax it includes the compile (in every process: no cache),",
        "  for lanewise the compile or, once compiled, the load from its disk cache.",
        "numba: its math.cos is a scalar libm call, so its loop does not vectorise; lanewise compiles",
        "  the lane's math.cos to a vectorisable one (lanewise.lanemath).",
        "baseline: RSS after imports and inputs; peak RSS: the process's high-water mark (VmHWM).",
        f"of the peak, the JIT runtime kept after the first call: {kept}.",
    ]
    if py["n"] < n:
        notes.insert(0, f"* extrapolated from n={py['n']}: time x ({n}/{py['n']})^2, peak RSS as baseline + "
                        "output; not run.")
    notes += [f"{LABELS[m]}: skipped, {why}" for m, why in (skipped or {}).items()]
    return "\n".join([machine_line(results), format_table(header, table_rows(results, n)), *notes])


def summary(results: dict, n: int) -> str:
    """lanewise against the fastest other method (time and memory), then against each of the others."""
    lw_s = median_s(results["lanewise"])
    best = fastest_other(results, n)

    def above(method):  # peak above baseline, at n
        return fmt_mb(peak_at(results[method], n) - results[method]["base_mb"])

    def against(method, sep=" "):
        how = " (extrapolated)" if results[method]["n"] < n else ""
        return f"{LABELS[method]}{how}{sep}{speed(time_at(results[method], n), lw_s)}"

    others = [against(m) for m in measured(results) if m not in (best, "lanewise")]
    return (f"lanewise vs the fastest other method, {against(best, ': ')} ({fmt_s(lw_s)} vs "
            f"{fmt_s(time_at(results[best], n))}), {above('lanewise')} vs {above(best)} above baseline\n"
            f"lanewise vs the others: {', '.join(others)}")


def agreement(results: dict) -> tuple[bool, str]:
    """Whether every method matches the reference on its own grid to ``TOLERANCE``, and the line saying so.

    Example:
        >>> ok, line = agreement({"python": {"n": 3, "max_abs_diff": 0.0},
        ...                       "lanewise": {"n": 9, "max_abs_diff": 2e-16}})
        >>> ok, line
        (True, 'agree: max |method - numpy meshgrid|: python 0 (n=3), lanewise 2e-16 (n=9); all < 1e-12')
    """
    checked = [m for m in measured(results) if m != REFERENCE]
    ok = all(results[m]["max_abs_diff"] < TOLERANCE for m in checked)
    parts = [f"{m} {results[m]['max_abs_diff']:.2g} (n={results[m]['n']})" for m in checked]
    verdict = f"all < {TOLERANCE:g}" if ok else f"NOT all < {TOLERANCE:g}: the methods DISAGREE"
    return ok, (f"{'agree' if ok else 'disagree'}: max |method - {LABELS[REFERENCE]}|: "
                + ", ".join(parts) + "; " + verdict)


# -------------------------------------------------------------------- the picture
def bars(results: dict, n: int) -> list[dict]:
    """The figure's numbers and words, one dict per method (the keys :mod:`lanewise.demo_plot` describes).

    Example:
        >>> rs = {m: {"n": 9, "times_s": [0.2], "peak_mb": 40.0, "base_mb": 30.0} for m in METHODS}
        >>> [b["time_text"] for b in bars(rs, 9)][-2:]
        ['0.200 s (1.0x)', '0.200 s']
    """
    lw_s = median_s(results["lanewise"])
    out = []
    for method in measured(results):
        r = results[method]
        t, peak, guessed = time_at(r, n), peak_at(r, n), r["n"] < n
        ratio = "" if method == "lanewise" else f" ({fmt_ratio(t / lw_s)})"
        out.append({"label": LABELS[method], "time_s": t, "peak_mb": peak, "base_mb": r["base_mb"],
                    "time_text": fmt_s(t) + (", extrapolated" if guessed else "") + ratio,
                    "peak_text": fmt_mb(peak) + (", estimated" if guessed else ""),
                    "guessed": guessed, "highlight": method == "lanewise"})
    return out


def build_figure(z: np.ndarray, results: dict, n: int):
    """The demo's picture, a matplotlib ``Figure``: the surface ``z`` beside each method's time and peak memory.

    Example:
        >>> rs = {m: {"n": 20, "times_s": [0.1], "peak_mb": 40.0, "base_mb": 30.0, "threads": 2} for m in METHODS}
        >>> len(build_figure(grid_meshgrid(axis(20), axis(20)), rs, 20).axes)  # surface, colour bar, 2 x bars
        4
    """
    from lanewise import demo_plot  # matplotlib is loaded only when a picture is wanted

    title = (f"f(x, y) = cos(x²+y²)/(1+x²+y²) on a {n}×{n} grid, float64: {len(results)} methods, "
             f"each in a fresh process\n{machine()}; threads: {threads_text(results)}")
    surface = f"the surface (lanewise's result, shown at {z.shape[0]}×{z.shape[1]})"
    return demo_plot.figure(z, bars(results, n), title, surface, extent=(LO, HI, LO, HI))


def save_plot(z: np.ndarray, results: dict, n: int, out: Path) -> Path:
    """Save :func:`build_figure` as a PNG at ``out``; the path.

    Example:
        >>> import tempfile, pathlib
        >>> rs = {m: {"n": 20, "times_s": [0.1], "peak_mb": 40.0, "base_mb": 30.0, "threads": 2} for m in METHODS}
        >>> with tempfile.TemporaryDirectory() as tmp:
        ...     out = save_plot(grid_meshgrid(axis(20), axis(20)), rs, 20, pathlib.Path(tmp) / "s.png")
        ...     out.read_bytes()[:4]
        b'\\x89PNG'
    """
    from lanewise import demo_plot

    return demo_plot.save(build_figure(z, results, n), out)


# ------------------------------------------------------------------ the command
def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``demo`` command's options.

    Example:
        >>> p = argparse.ArgumentParser(); add_arguments(p)
        >>> p.parse_args(["--quick"]).quick
        True
    """
    parser.add_argument("--n", type=_positive_int, default=None,
                        help=f"grid size n (n × n points; default {FULL_N})")
    parser.add_argument("--quick", action="store_true",
                        help=f"a small run (n={QUICK_N}, unless --n is given), e.g. for tests")
    parser.add_argument("--python-n", type=_positive_int, default=PYTHON_N,
                        help=f"grid size for the pure Python loop (default {PYTHON_N}); "
                             "its time at n is extrapolated from this")
    parser.add_argument("--repeats", type=_positive_int, default=3,
                        help="timed calls after the first one (default 3); the median is reported")
    parser.add_argument("--out", type=Path, default=Path("lanewise_demo.png"),
                        help="where to save the plot (default ./lanewise_demo.png)")
    parser.add_argument("--no-plot", action="store_true", help="do not save a plot")


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text}")
    return value


def run(args: argparse.Namespace) -> int:
    """Run the demo with parsed ``args``; the exit status (0: the methods agree).

    Example:
        >>> p = argparse.ArgumentParser(); add_arguments(p)
        >>> run(p.parse_args(["--n", "64", "--python-n", "16", "--no-plot"]))  # doctest: +SKIP
        0
    """
    start = time.perf_counter()
    n = args.n or (QUICK_N if args.quick else FULL_N)
    sizes = {**dict.fromkeys(METHODS, n), "python": min(args.python_n, n)}
    print(f"f(x, y) = cos(x²+y²)/(1+x²+y²) on linspace({LO:g}, {HI:g}, n)², float64; "
          f"{os.cpu_count()} CPU cores; each method in a fresh process")
    skipped = {m: why for m in METHODS if (why := missing(m))}
    with tempfile.TemporaryDirectory(prefix="lanewise-demo-") as tmp:
        save = "" if args.no_plot else str(Path(tmp) / "surface.npy")
        results = {}
        for method in METHODS:
            if method in skipped:
                print(f"  skipping {LABELS[method]}: {skipped[method]}", flush=True)
                continue
            print(f"  running {LABELS[method]} (n={sizes[method]}) ...", flush=True)
            results[method] = run_worker(method, sizes[method], args.repeats,
                                         save if method == "lanewise" else "")
        print()
        print(report(results, n, args.repeats, skipped))
        print(summary(results, n))
        ok, line = agreement(results)
        print(line)
        if save:
            print(f"plot: {save_plot(np.load(save), results, n, args.out)}")
    print(f"total: {time.perf_counter() - start:.1f} s")
    return 0 if ok else 1
