"""Shared measurement machinery for every workload.

A workload module (``benchmarks/w*.py``) exposes::

    ID, TITLE            "W1", "grid cos(x²+y²)/(1+x²+y²)"
    SIZES                {"full": n, "quick": n, "tiny": n}   (tiny: memory-probe warm-up)
    REF                  name of the tool whose result the others are checked against
    TOL                  Tolerance for that check
    BAR                  Bar: the figure lanewise must reach (docs/workloads.md)
    check(out) -> dict   (optional) checks every result on its own instead (MC: the closed form)
    MEMORY_SIZES         (optional) {"full": sizes, "quick": sizes}: peak RSS probed at each n
    NOTE                 (optional) a paragraph for the notes of BENCHMARKS.md
    setup(n) -> data     a tuple of NumPy arrays, built once and shared by every tool
    tools() -> {name: callable(data) -> NumPy array}
    describe(data) -> str          (optional) size label for the table
    SCALING              (optional) {"full": sizes, "quick": sizes} for a time-vs-n plot

Tools whose name starts with ``lanewise`` are lanewise rows; all others are peers.
A tool that cannot run here (not enough memory, an optional API missing) raises
:class:`Skip` and becomes an "n/a" row with the reason.
Every tool gets NumPy arrays in and returns a NumPy array, so conversions count.

Timing: one warm-up call per tool (reported as "first call", it includes
compilation, and its result is checked), then ``repeats`` (>= 5) rounds that
each time every tool once, interleaved so that background load on a shared
machine hits all tools alike; the median over rounds is reported.  Memory: a fresh subprocess per
(workload, tool) imports the tool, warms it up on a tiny input (imports and
compilation), records its RSS (the baseline), loads the full data from ``.npy``
files (no generator temporaries), runs once and reports its peak RSS (VmHWM;
see ``peak_rss_mb`` for why not the raw ``ru_maxrss``).
"""
from __future__ import annotations

import dataclasses
import functools
import gc
import importlib
import json
import os
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
RESULTS = REPO / "benchmarks" / "results"
LANEWISE = "lanewise"
PROBE_TIMEOUT_S = 900


# ----------------------------------------------------------------- declarations
@dataclasses.dataclass(frozen=True)
class Bar:
    """What docs/workloads.md asks of lanewise: time <= factor x the peer's time."""

    peer: str  # a tool name, or "fastest" (the fastest peer in this run)
    factor: float
    text: str  # the bar in docs/workloads.md's words
    stretch: float | None = None  # second, harder factor (e.g. SPMD-on-SIMD)
    mem_factor: float | None = None  # peak <= mem_factor x (output + baseline)
    stretch_peer: str | None = None  # the stretch factor's peer when not ``peer`` (W3: JAX)
    mem_flat: float | None = None  # peak at the largest MEMORY_SIZES n <= mem_flat x at the smallest


@dataclasses.dataclass(frozen=True)
class Tolerance:
    rtol: float = 0.0
    atol: float = 0.0
    max_mismatch_frac: float = 0.0  # fraction of elements allowed to differ


class Skip(Exception):
    """Raised by a tool that cannot run here (memory, a missing optional API): an "n/a" row."""


def available_mb() -> float:
    """MemAvailable from /proc/meminfo."""
    with open("/proc/meminfo") as fh:
        line = next(ln for ln in fh if ln.startswith("MemAvailable:"))
    return int(line.split()[1]) / 1024  # kB


def is_lanewise(tool: str) -> bool:
    return tool.startswith(LANEWISE)


# ------------------------------------------------------------- tool factories
def lanewise_tool(make):
    """A tool from ``make(lw) -> callable(*data)``; lanewise imported on first use."""

    @functools.cache
    def build():
        import lanewise as lw

        return make(lw)

    return lambda data: np.asarray(build()(*data))


def numba_tool(make):
    """A tool from ``make(numba) -> callable(*data)``; numba imported on first use."""

    @functools.cache
    def build():
        import numba

        return make(numba)

    return lambda data: np.asarray(build()(*data))


def jax_x64():
    import jax

    jax.config.update("jax_enable_x64", True)
    return jax


def jax_tool(make):
    """A tool from ``make(jax) -> fun(*data)``, jitted; float64 enabled."""

    @functools.cache
    def build():
        return jax_x64().jit(make(jax_x64()))

    return lambda data: np.asarray(build()(*data).block_until_ready())


def lanewise_state() -> tuple[bool, str]:
    """(importable, reason).  Imports lanewise in this process if it can."""
    try:
        import lanewise as lw

        lw.vmap  # noqa: B018 - the API the benchmarks use
    except Exception as exc:  # noqa: BLE001 - any failure means "n/a"
        return False, f"lanewise not importable: {type(exc).__name__}: {exc}"
    return True, getattr(lw, "__version__", "?")


# ------------------------------------------------------------------- timing
def timed(fn, data):
    """(result, seconds) of one call."""
    t0 = time.perf_counter()
    out = fn(data)
    return out, time.perf_counter() - t0


def compare(ref: np.ndarray, out: np.ndarray, tol: Tolerance) -> dict:
    """Element-wise agreement with the reference result."""
    out = np.asarray(out)
    if out.shape != ref.shape:
        return {"ok": False, "mismatches": None, "note": f"shape {out.shape} != {ref.shape}"}
    if ref.dtype.kind in "biu":  # booleans and integers: exact
        bad, err = out != ref, None
    else:
        bad = ~np.isclose(out, ref, rtol=tol.rtol, atol=tol.atol, equal_nan=True)
        err = float(np.max(np.abs(out - ref), initial=0.0))
    n_bad = int(np.count_nonzero(bad))
    ok = n_bad <= tol.max_mismatch_frac * ref.size
    return {"ok": ok, "mismatches": n_bad, "max_abs_err": err, "note": ""}


def error_row(name: str, status: str, note: str) -> dict:
    return {"tool": name, "status": status, "note": note}


def failed(row: dict, exc: Exception) -> dict:
    traceback.print_exc(limit=3)
    return dict(row, status="error", note=f"{type(exc).__name__}: {exc}"[:300])


def first_call(name, fn, data, ref, tol, check=None) -> tuple[dict, np.ndarray | None]:
    """The warm-up call (compilation included), checked by ``check(out)`` if given, else
    against ``ref`` (None: it *is* the reference)."""
    row = {"tool": name, "status": "ok", "times_s": []}
    try:
        out, row["first_s"] = timed(fn, data)
    except Skip as exc:
        return error_row(name, "n/a", str(exc)), None
    except Exception as exc:  # noqa: BLE001 - a failing tool is a row, not a crash
        return failed(row, exc), None
    row["out_dtype"] = str(out.dtype)
    if check is not None:
        row["check"] = check(out)
    elif ref is not None:
        row["check"] = compare(ref, out, tol)
    else:
        row["check"] = {"ok": True, "mismatches": 0, "note": "reference"}
    if not row["check"]["ok"]:
        row["status"] = "wrong"
    return row, out


def tool_order(mod) -> list[str]:
    names = list(mod.tools())
    return [mod.REF] + [t for t in names if t != mod.REF]


def warm_up(mod, tools, data, lw_ok) -> list[dict]:
    """First call of every tool; the reference runs first and the others are checked against it."""
    rows, ref = [], None
    for name in tool_order(mod):
        if is_lanewise(name) and not lw_ok[0]:
            rows.append(error_row(name, "n/a", lw_ok[1]))
            continue
        row, out = first_call(name, tools[name], data, ref, mod.TOL, getattr(mod, "check", None))
        print(f"  {mod.ID} {name}: first call {row.get('first_s', float('nan')):.3g} s [{row['status']}]", flush=True)
        if ref is None and row["status"] == "ok":
            ref = out
        rows.append(row)
        del out
        gc.collect()
    return rows


#: Pause before each timed call.  JAX's CPU thread pool keeps spinning for a few
#: milliseconds after a call returns: measured on W3, whichever tool ran right
#: after JAX took 0.026 s instead of 0.015 s (numba and lanewise alike).
SETTLE_S = 0.05


#: Each round times the tools in its own order (seeded, so runs repeat).  In a
#: fixed order one tool always ran right after JAX and paid for what JAX leaves
#: behind (hundreds of MB freed, the kernel reclaiming it) for longer than any
#: pause: on W6, with a 1 s pause, the tool after JAX took 0.019-0.029 s and
#: 0.019 s steadily after Numba.  Shuffled, that cost falls on every tool alike.
ORDER_SEED = 0


def rounds(tools, data, rows: list[dict], repeats: int) -> None:
    """``repeats`` rounds, each timing every live tool once, in a shuffled order:
    background load and the wake of the previous tool hit all alike."""
    order = random.Random(ORDER_SEED)
    for _ in range(repeats):
        for row in order.sample(rows, len(rows)):
            if row["status"] in ("ok", "wrong"):
                time.sleep(SETTLE_S)
                try:
                    row["times_s"].append(timed(tools[row["tool"]], data)[1])
                except Exception as exc:  # noqa: BLE001
                    row.update(failed(row, exc))
    for row in rows:
        if row.get("times_s") and row["status"] in ("ok", "wrong"):
            row["median_s"], row["min_s"] = statistics.median(row["times_s"]), min(row["times_s"])


def time_workload(mod, data, repeats: int, lw_ok: tuple[bool, str]) -> list[dict]:
    """Rows for every tool of ``mod`` on ``data``: checked warm-up, then interleaved timed rounds."""
    tools = mod.tools()
    rows = warm_up(mod, tools, data, lw_ok)
    rounds(tools, data, rows, repeats)
    for row in rows:
        print(f"  {mod.ID} {row['tool']}: median {row.get('median_s', float('nan')):.4g} s", flush=True)
    return rows


def scaling(mod, mode: str, repeats: int, lw_ok, skip_n: int) -> dict:
    """{tool: {n: median s}} over mod.SCALING[mode] (the main size is measured already)."""
    res: dict = {}
    for n in getattr(mod, "SCALING", {}).get(mode, ()):
        if n == skip_n:
            continue
        data, tools = mod.setup(n), mod.tools()
        rows = [{"tool": t, "status": "ok", "times_s": []} for t in tools if lw_ok[0] or not is_lanewise(t)]
        rounds(tools, data, rows, 1)  # warm-up (compiles for the new shape)
        rows = [dict(r, times_s=[]) for r in rows if r["status"] == "ok"]
        rounds(tools, data, rows, repeats)
        for r in rows:
            if r["status"] == "ok":
                res.setdefault(r["tool"], {})[n] = r["median_s"]
        del data
        gc.collect()
    return res


# ------------------------------------------------------------------- memory
def current_rss_mb() -> float:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def peak_rss_mb() -> float:
    """This process's peak RSS (VmHWM).

    Not ``ru_maxrss`` alone: on Linux it carries the *parent's* peak over
    fork/vfork + exec (the kernel folds the old mm's high-water mark into the
    signal struct at exec), so every probe would report the harness's own peak.
    """
    with open("/proc/self/status") as fh:
        line = next(ln for ln in fh if ln.startswith("VmHWM:"))
    return int(line.split()[1]) / 1024  # kB


def maxrss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def save_data(data, folder: Path) -> None:
    for i, arr in enumerate(data):
        np.save(folder / f"{i:02d}.npy", np.asarray(arr))


def load_data(folder: Path) -> tuple:
    return tuple(np.load(p) for p in sorted(Path(folder).glob("*.npy")))


def probe(module: str, tool: str, folder: str, tiny_n: int) -> dict:
    """Runs in the fresh subprocess: baseline after warm-up, then peak of one run."""
    mod = importlib.import_module(module)
    fn = mod.tools()[tool]
    fn(mod.setup(tiny_n))  # imports and compilation happen here
    gc.collect()
    base = current_rss_mb()
    data = load_data(Path(folder))
    in_mb = sum(a.nbytes for a in data) / 2**20
    out = fn(data)
    return {"base_mb": base, "peak_mb": peak_rss_mb(), "ru_maxrss_mb": maxrss_mb(),
            "in_mb": in_mb, "out_mb": out.nbytes / 2**20}


def measure_memory(module: str, tool: str, folder: Path, tiny_n: int, env: dict | None = None) -> dict:
    cmd = [sys.executable, "-m", "benchmarks.harness", "probe", module, tool, str(folder), str(tiny_n)]
    try:
        p = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=PROBE_TIMEOUT_S,
                           env=None if env is None else {**os.environ, **env})
    except subprocess.TimeoutExpired:
        return {"error": f"timeout after {PROBE_TIMEOUT_S}s"}
    lines = p.stdout.strip().splitlines()
    if p.returncode != 0 or not lines:
        sys.stderr.write(p.stderr[-2000:])  # the probe's traceback, for the log
        return {"error": (p.stderr.strip().splitlines() or ["?"])[-1][:300]}
    return json.loads(lines[-1])


def memory_workload(mod, data, rows: list[dict], cold: bool = False) -> None:
    """Adds a ``mem`` entry to every row that ran, one subprocess each.

    ``cold``: every probe gets its own empty ``LANEWISE_CACHE_DIR``, so lanewise
    compiles in the probe as the Numba peers do, whatever earlier probes cached
    (loading from the disk cache instead moves the baseline by tens of MB).
    """
    folder = Path(tempfile.mkdtemp(prefix=f"lw-bench-{mod.ID}-"))
    try:
        save_data(data, folder)
        for row in rows:
            if row["status"] in ("ok", "wrong"):
                print(f"  {mod.ID} {row['tool']} memory{' (empty cache)' if cold else ''} ...", end=" ", flush=True)
                cache = Path(tempfile.mkdtemp(prefix="lw-bench-probe-cache-")) if cold else None
                try:
                    env = {"LANEWISE_CACHE_DIR": str(cache)} if cold else None
                    row["mem"] = measure_memory(mod.__name__, row["tool"], folder, mod.SIZES["tiny"], env)
                finally:
                    if cache is not None:
                        shutil.rmtree(cache, ignore_errors=True)
                print(row["mem"].get("peak_mb", row["mem"].get("error")), flush=True)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def memory_sizes(mod, mode: str, rows: list[dict]) -> dict:
    """{tool: {n: probe}} over mod.MEMORY_SIZES[mode], every probe with an empty lanewise cache
    (the main size is probed again: the rows' own probes share the run's warm cache)."""
    res: dict = {}
    for m in getattr(mod, "MEMORY_SIZES", {}).get(mode, ()):
        sized = [{"tool": r["tool"], "status": r["status"]} for r in rows]
        data = mod.setup(m)
        try:
            memory_workload(mod, data, sized, cold=True)
        finally:
            del data
            gc.collect()
        for row in sized:
            if "mem" in row:
                res.setdefault(row["tool"], {})[m] = row["mem"]
    return res


# ------------------------------------------------------------------ summary
def fastest_peer(rows: list[dict]) -> dict | None:
    peers = [r for r in rows if r["status"] == "ok" and not is_lanewise(r["tool"])]
    return min(peers, key=lambda r: r["median_s"], default=None)


def bar_peer(rows: list[dict], bar: Bar) -> dict | None:
    if bar.peer == "fastest":
        return fastest_peer(rows)
    return next((r for r in rows if r["tool"] == bar.peer and r["status"] == "ok"), None)


def verdict(ratio: float | None, factor: float | None) -> str:
    if factor is None:
        return ""
    return "n/a" if ratio is None else ("PASS" if ratio <= factor else "MISS")


def mem_verdict(row: dict, bar: Bar) -> tuple[float | None, str]:
    """Peak / (output + baseline) for a lanewise row, and the verdict."""
    mem = row.get("mem", {})
    if bar.mem_factor is None or "peak_mb" not in mem:
        return None, "" if bar.mem_factor is None else "n/a"
    ratio = mem["peak_mb"] / (mem["out_mb"] + mem["base_mb"])
    return ratio, verdict(ratio, bar.mem_factor)


def mem_flat_verdict(lw: dict | None, memory: dict, bar: Bar) -> tuple[float | None, str]:
    """Peak at the largest probed n / peak at the smallest, for lanewise, and the verdict."""
    if bar.mem_flat is None:
        return None, ""
    peaks = {int(m): p["peak_mb"] for m, p in memory.get((lw or {}).get("tool"), {}).items() if "peak_mb" in p}
    if len(peaks) < 2:
        return None, "n/a"
    ratio = peaks[max(peaks)] / peaks[min(peaks)]
    return ratio, verdict(ratio, bar.mem_flat)


def summarize(rows: list[dict], bar: Bar, memory: dict | None = None) -> dict:
    """Ratios of every row to the bar peer; lanewise's verdict against the bar."""
    fast, peer = fastest_peer(rows), bar_peer(rows, bar)
    speer = bar_peer(rows, dataclasses.replace(bar, peer=bar.stretch_peer)) if bar.stretch_peer else peer
    for r in rows:
        if r["status"] == "ok" and peer is not None:
            r["x_bar_peer"] = r["median_s"] / peer["median_s"]
            r["x_fastest"] = r["median_s"] / fast["median_s"]
    lw = next((r for r in rows if is_lanewise(r["tool"])), None)
    ok = lw is not None and lw["status"] == "ok" and peer is not None
    x_bar = lw["x_bar_peer"] if ok else None
    mem_ratio, mem_pass = mem_verdict(lw, bar) if ok else (None, "n/a" if bar.mem_factor else "")
    if bar.mem_flat is not None:
        mem_ratio, mem_pass = mem_flat_verdict(lw, memory or {}, bar) if ok else (None, "n/a")
    x_stretch = lw["median_s"] / speer["median_s"] if ok and speer is not None else None
    return {
        "fastest_peer": fast and fast["tool"], "bar_peer": peer and peer["tool"],
        "lanewise_status": lw["status"] if lw else "absent",
        "lanewise_note": (lw or {}).get("note", ""),
        "x_fastest": lw["x_fastest"] if ok else None, "x_bar_peer": x_bar,
        "time": verdict(x_bar, bar.factor) if lw is not None else "n/a",
        "stretch_peer": speer and speer["tool"], "x_stretch_peer": x_stretch,
        "stretch": verdict(x_stretch, bar.stretch),
        "mem_ratio": mem_ratio, "mem": mem_pass,
    }


def run_workload(mod, mode: str, repeats: int, lw_ok, memory: bool = True) -> dict:
    n = mod.SIZES[mode]
    data = mod.setup(n)
    label = mod.describe(data) if hasattr(mod, "describe") else f"n={n}"
    print(f"{mod.ID} {mod.TITLE} [{label}]", flush=True)
    rows = time_workload(mod, data, repeats, lw_ok)
    if memory:
        memory_workload(mod, data, rows)
    del data
    gc.collect()
    by_n = memory_sizes(mod, mode, rows) if memory else {}
    return {"id": mod.ID, "title": mod.TITLE, "n": n, "size": label, "bar": dataclasses.asdict(mod.BAR),
            "rows": rows, "summary": summarize(rows, mod.BAR, by_n), "memory": by_n,
            "note": getattr(mod, "NOTE", ""),
            "scaling": with_main_size(scaling(mod, mode, repeats, lw_ok, n), rows, n)}


def with_main_size(series: dict, rows: list[dict], n: int) -> dict:
    """Adds the main run's medians at size ``n`` to a non-empty scaling series."""
    for r in rows if series else ():
        if r["status"] == "ok":
            series.setdefault(r["tool"], {})[n] = r["median_s"]
    return series


if __name__ == "__main__" and sys.argv[1:2] == ["probe"]:
    _module, _tool, _folder, _tiny = sys.argv[2:6]
    print(json.dumps(probe(_module, _tool, _folder, int(_tiny))))
