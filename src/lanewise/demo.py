"""The classic vectorisation tutorial, three ways: ``python -m lanewise demo``.

``f(x, y) = cos(x² + y²) / (1 + x² + y²)`` over the grid ``linspace(-2, 2, n)²``
computed by

1. a pure Python double loop (on a small grid; its time at the full ``n`` is
   extrapolated, and labelled so),
2. NumPy with ``meshgrid`` (every intermediate is a full ``n × n`` array),
3. lanewise: the same one-lane ``f`` under two nested ``vmap`` s, compiled into
   one multithreaded loop nest.

Every method runs in a fresh Python process, so its peak memory is its own:
each process reports the resident set after its imports (the baseline) and its
high-water mark at the end.  The demo then checks that the methods agree with
NumPy on the same grid and saves a picture of the surface.

Example:
    >>> from lanewise import demo
    >>> z = demo.grid_numpy(demo.axis(3), demo.axis(3))
    >>> round(float(z[1, 1]), 6)  # f(0, 0)
    1.0
"""

from __future__ import annotations

import argparse
import json
import math
import os
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
METHODS = ("python", "numpy", "lanewise")
LABELS = {"python": "python loops", "numpy": "numpy meshgrid", "lanewise": "lanewise nested vmap"}


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


def grid_numpy(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """``z[i, j] = f(x[i], y[j])`` the NumPy way: ``meshgrid``, then whole-array operations.

    Example:
        >>> grid_numpy(axis(3), axis(2)).shape
        (3, 2)
    """
    xx, yy = np.meshgrid(x, y, indexing="ij")
    r = xx * xx + yy * yy
    return np.cos(r) / (1 + r)


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


def _implementation(method: str):
    """The grid function of ``method``, with its imports done."""
    if method == "lanewise":
        import numba  # noqa: F401  (an import: part of the baseline, like NumPy)

        return grid_lanewise()
    return {"python": grid_python, "numpy": grid_numpy}[method]


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
    figures.  The first call (for lanewise: the compile or the disk-cache load,
    plus one run) is timed apart from the ``repeats`` calls after it.
    ``max_abs_diff`` compares the result with NumPy's on the same grid (``None``
    for NumPy itself); ``save`` names an ``.npy`` file for a downsampled copy.

    Example:
        >>> r = measure("numpy", 50, repeats=2)
        >>> r["n"], len(r["times_s"]), r["peak_mb"] >= r["base_mb"]
        (50, 2, True)
    """
    grid = _implementation(method)
    x, y = axis(n), axis(n)
    base = rss_mb()
    t0 = time.perf_counter()
    z = grid(x, y)
    first = time.perf_counter() - t0
    z = None
    after_first = rss_mb()  # what the first call kept (lanewise: Numba's JIT)
    z, times = _time_calls(grid, x, y, repeats)
    peak = rss_mb("VmHWM")  # before the check below allocates NumPy's copy
    diff = None if method == "numpy" else float(np.max(np.abs(z - grid_numpy(x, y)), initial=0.0))
    if save:
        np.save(save, downsample(z))
    return {"method": method, "n": n, "first_s": first, "times_s": times, "base_mb": base,
            "kept_mb": after_first - base, "peak_mb": peak, "out_mb": z.nbytes / 1e6,
            "max_abs_diff": diff}


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
        >>> run_worker("numpy", 40, 1)["n"]
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


def table_rows(results: dict, n: int) -> list[list[str]]:
    """The table's rows: each measurement, plus the Python loop extrapolated to ``n``."""
    rows = []
    for method in METHODS:
        r = results[method]
        rows.append([LABELS[method], str(r["n"]), fmt_s(r["first_s"]), fmt_s(median_s(r)),
                     fmt_mb(r["out_mb"]), fmt_mb(r["peak_mb"]), fmt_mb(r["base_mb"]),
                     fmt_mb(r["peak_mb"] - r["base_mb"])])
        if method == "python" and r["n"] < n:
            rows.append([f"{LABELS[method]} (extrapolated*)", str(n), "-",
                         fmt_s(extrapolated_s(r, n)) + "*", fmt_mb(n * n * 8 / 1e6), "-", "-", "-"])
    return rows


def report(results: dict, n: int, repeats: int) -> str:
    """The table and its notes."""
    header = ["method", "n", "first call", f"median of {repeats}", "output", "peak RSS",
              "baseline", "peak - baseline"]
    py, lw_ = results["python"], results["lanewise"]
    notes = [
        "first call: in a fresh process; for lanewise it includes the compile (or the disk-cache load).",
        "baseline: RSS after imports and inputs; peak RSS: the process's high-water mark (VmHWM).",
        f"lanewise: {fmt_mb(lw_['kept_mb'])} of its peak is Numba's JIT runtime, kept after the first call.",
    ]
    if py["n"] < n:
        notes.insert(0, f"* extrapolated from n={py['n']} as time x ({n}/{py['n']})^2; not run.")
    return format_table(header, table_rows(results, n)) + "\n" + "\n".join(notes)


def summary(results: dict, n: int) -> str:
    """How lanewise compares with NumPy and with the (extrapolated) Python loop."""
    np_, lw_, py = results["numpy"], results["lanewise"], results["python"]
    how = " extrapolated" if py["n"] < n else ""
    return (f"lanewise vs numpy: speed-up {median_s(np_) / median_s(lw_):.1f}x, "
            f"{fmt_mb(lw_['peak_mb'] - lw_['base_mb'])} vs {fmt_mb(np_['peak_mb'] - np_['base_mb'])} "
            f"above baseline; vs python loops: speed-up ~{extrapolated_s(py, n) / median_s(lw_):,.0f}x{how}")


def agreement(results: dict) -> tuple[bool, str]:
    """Whether every method matches NumPy on its own grid to ``TOLERANCE``, and the line saying so.

    Example:
        >>> ok, line = agreement({"python": {"n": 3, "max_abs_diff": 0.0},
        ...                       "lanewise": {"n": 9, "max_abs_diff": 2e-16}})
        >>> ok, line
        (True, 'agree: max |python - numpy| = 0 (n=3), max |lanewise - numpy| = 2e-16 (n=9); all < 1e-12')
    """
    parts, ok = [], True
    for method in ("python", "lanewise"):
        diff = results[method]["max_abs_diff"]
        ok = ok and diff < TOLERANCE
        parts.append(f"max |{method} - numpy| = {diff:.2g} (n={results[method]['n']})")
    verdict = f"all < {TOLERANCE:g}" if ok else f"NOT all < {TOLERANCE:g}: the methods DISAGREE"
    return ok, ("agree: " if ok else "disagree: ") + ", ".join(parts) + "; " + verdict


def plot_surface(z: np.ndarray, n: int, out: Path) -> Path:
    """Save an image of the (downsampled) surface ``z`` of an ``n × n`` grid as a PNG.

    Example:
        >>> import tempfile, pathlib
        >>> with tempfile.TemporaryDirectory() as tmp:
        ...     out = plot_surface(grid_numpy(axis(20), axis(20)), 20, pathlib.Path(tmp) / "s.png")
        ...     out.read_bytes()[:4]
        b'\\x89PNG'
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(6.4, 5.2), dpi=100)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    image = ax.imshow(z.T, origin="lower", extent=(LO, HI, LO, HI), cmap="viridis")
    fig.colorbar(image, ax=ax, label="f(x, y)")
    ax.set(xlabel="x", ylabel="y",
           title=f"cos(x²+y²)/(1+x²+y²) on a {n}×{n} grid (lanewise)\n"
                 f"shown at {z.shape[0]}×{z.shape[1]}")
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, format="png")
    return out


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
    sizes = {"python": min(args.python_n, n), "numpy": n, "lanewise": n}
    print(f"f(x, y) = cos(x²+y²)/(1+x²+y²) on linspace({LO:g}, {HI:g}, n)², float64; "
          f"{os.cpu_count()} CPU cores; each method in a fresh process")
    with tempfile.TemporaryDirectory(prefix="lanewise-demo-") as tmp:
        save = "" if args.no_plot else str(Path(tmp) / "surface.npy")
        results = {}
        for method in METHODS:
            print(f"  running {LABELS[method]} (n={sizes[method]}) ...", flush=True)
            results[method] = run_worker(method, sizes[method], args.repeats,
                                         save if method == "lanewise" else "")
        print()
        print(report(results, n, args.repeats))
        print(summary(results, n))
        ok, line = agreement(results)
        print(line)
        if save:
            print(f"plot: {plot_surface(np.load(save), n, args.out)}")
    print(f"total: {time.perf_counter() - start:.1f} s")
    return 0 if ok else 1
