"""Thread scaling: every workload and real-world kernel at 1, 4 and all threads.

    python -m benchmarks.threads [--threads 1,4,all] [--only W1,W3,rw] [--quick] [--repeats 5]
                                 [--cold] [--out benchmarks/results/threads.json]

Each thread count runs in a fresh child process pinned to that many cores
(``os.sched_setaffinity``, so NumPy, JAX's and XLA's pools, Numba and lanewise all
see the same machine) with ``NUMBA_NUM_THREADS`` and ``OMP_NUM_THREADS`` set to it.
In a child, every workload times lanewise and each peer side by side
(:func:`benchmarks.harness.time_workload`: a checked warm-up call, then interleaved
rounds, medians); real-world kernels time the project's own Numba version against
the lane (:func:`benchmarks.realworld.run.measure`).  The children share one lanewise
cache, so only the first compiles.

``--cold`` also times, in fresh processes with empty caches at the largest thread
count, the first call of each real-world kernel against its hand-written ``prange``
loop (:func:`benchmarks.realworld.run.cold`): compile latency on many cores.

The parent writes the JSON and ``benchmarks/sections/75_threads.md`` (a table per
workload: median seconds per thread count, parallel efficiency T1 / (p·Tp), and
lanewise / the fastest peer at each count) and a scaling plot beside the JSON.
"""
from __future__ import annotations

import argparse
import datetime
import importlib
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

from benchmarks import harness

WORKLOADS = {"W1": "benchmarks.w1_grid", "W2": "benchmarks.w2_fractal", "W3": "benchmarks.w3_backtest",
             "W5": "benchmarks.w5_mapreduce", "W6": "benchmarks.w6_first_pass",
             "W7": "benchmarks.w7_csr_gather", "MC": "benchmarks.mc_option", "launch": "benchmarks.launch"}
SECTION = harness.REPO / "benchmarks" / "sections" / "75_threads.md"
#: The bars of issue 41 at the largest thread count: lanewise / the fastest peer.
BARS = {"W2": 0.4, "W5": 0.5}
BAR_DEFAULT, BAR_RW_WORST, BAR_RW_GEOMEAN, BAR_EFFICIENCY = 1.0, 1.25, 0.8, 0.7
#: Sizes where the full ones would keep the slowest peer minutes on one thread (JAX's
#: ``while_loop`` on W2, NumPy and JAX on W5, 10^8 paths of MC): still seconds of work
#: for the fastest tool at 1 thread, so 13 threads are not launch-bound.
THREAD_SIZES = {"W2": 800, "W5": 6000, "MC": 2 * 10**7}


def thread_counts(spec: str) -> list[int]:
    """"1,4,all" -> [1, 4, cores] (duplicates and counts above the cores dropped)."""
    cores = len(os.sched_getaffinity(0))
    counts = [cores if s.strip() == "all" else int(s) for s in spec.split(",") if s.strip()]
    return sorted({c for c in counts if 1 <= c <= cores})


def pin(p: int) -> None:
    """Run this process (and the pools it starts from now on) on its first ``p`` cores."""
    cores = sorted(os.sched_getaffinity(0))
    os.sched_setaffinity(0, cores[:p])


def selected(only: str) -> tuple[list[str], list[str]]:
    """(workload ids, real-world kernel names) named by ``--only`` ("rw": every kernel)."""
    from benchmarks.realworld import modules

    names = [m.NAME for m in modules()]
    picked = [s.strip() for s in only.split(",") if s.strip()] or [*WORKLOADS, "rw"]
    unknown = [s for s in picked if s not in WORKLOADS and s != "rw" and s not in names]
    if unknown:
        raise SystemExit(f"unknown in --only: {unknown}; choose from {[*WORKLOADS, 'rw', *names]}")
    kernels = names if "rw" in picked else [s for s in picked if s in names]
    return [s for s in picked if s in WORKLOADS], kernels


# ------------------------------------------------------------------ the child
def child(p: int, only: str, size: str, repeats: int, out: Path) -> None:
    """Measure everything selected at ``p`` threads; write ``{name: {tool: median s}}`` to ``out``."""
    pin(p)
    from benchmarks.realworld import modules
    from benchmarks.realworld import run as rw

    workloads, kernels = selected(only)
    lw_ok = harness.lanewise_state()
    result: dict = {}
    for wid in workloads:
        mod = importlib.import_module(WORKLOADS[wid])
        data = mod.setup(THREAD_SIZES.get(wid, mod.SIZES["full"]) if size == "full" else mod.SIZES[size])
        rows = harness.time_workload(mod, data, repeats, lw_ok)
        result[wid] = {r["tool"]: _cell(r) for r in rows}
        del data
    for mod in (m for m in modules() if m.NAME in kernels):
        try:
            rows = rw.measure(mod, size, repeats)["tools"]
        except Exception as exc:  # noqa: BLE001 - a broken kernel is a row, not a crash
            result[f"rw:{mod.NAME}"] = {"error": f"{type(exc).__name__}: {exc}"[:300]}
            continue
        result[f"rw:{mod.NAME}"] = {t: _cell(dict(r, status="ok" if r["check"]["ok"] else "wrong"))
                                    for t, r in rows.items()}
        print(f"  {mod.NAME}: " + ", ".join(f"{t} {r['median_s']:.4g} s" for t, r in rows.items()), flush=True)
    out.write_text(json.dumps(result))


def _cell(row: dict) -> dict:
    return {"median_s": row.get("median_s"), "status": row["status"], "note": row.get("note", "")}


def spawn(p: int, args, cache: str) -> dict:
    """One child at ``p`` threads: its results, or {"error": ...}."""
    env = dict(os.environ, NUMBA_NUM_THREADS=str(p), OMP_NUM_THREADS=str(p), LANEWISE_CACHE_DIR=cache)
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as fh:
        out = Path(fh.name)
    cmd = [sys.executable, "-m", "benchmarks.threads", "--child", str(p), "--only", args.only,
           "--repeats", str(args.repeats), "--out", str(out)] + (["--quick"] if args.quick else [])
    print(f"== {p} thread(s)", flush=True)
    proc = subprocess.run(cmd, cwd=harness.REPO, env=env, timeout=3600)
    if proc.returncode != 0 or not out.stat().st_size:
        return {"error": f"child exited {proc.returncode}"}
    data = json.loads(out.read_text())
    out.unlink()
    return data


def cold_all(kernels: list[str], p: int) -> dict:
    """Cold first calls at ``p`` threads (fresh processes, empty caches): lanewise / prange."""
    from benchmarks.realworld import modules
    from benchmarks.realworld import run as rw

    os.environ.update(NUMBA_NUM_THREADS=str(p), OMP_NUM_THREADS=str(p))
    return {m.NAME: rw.cold(m) for m in modules() if m.NAME in kernels}


# ------------------------------------------------------------------ the report
def measured(doc: dict) -> list[int]:
    """The thread counts whose child finished."""
    return [p for p in doc["threads"] if "error" not in doc["runs"].get(str(p), {"error": "not run"})]


def table(doc: dict) -> dict:
    """Per workload: {tool: {p: s}}, efficiency per tool and count, lanewise / fastest peer per count."""
    counts = measured(doc)
    out = {}
    for name in doc["names"]:
        tools: dict = {}
        for p in counts:
            for tool, cell in doc["runs"].get(str(p), {}).get(name, {}).items():
                if isinstance(cell, dict) and cell.get("median_s") and cell["status"] == "ok":
                    tools.setdefault(tool, {})[p] = cell["median_s"]
        ratio = {}
        for p in counts:
            lw = [t[p] for n, t in tools.items() if harness.is_lanewise(n) and p in t]
            peers = [t[p] for n, t in tools.items() if not harness.is_lanewise(n) and p in t]
            if lw and peers:
                ratio[p] = min(lw) / min(peers)
        eff = {n: {p: t[1] / (p * t[p]) for p in counts if p in t} for n, t in tools.items() if 1 in t}
        out[name] = {"tools": tools, "ratio": ratio, "efficiency": eff}
    return out


def verdict(doc: dict, rows: dict) -> dict:
    top = max(measured(doc))
    misses = []
    rw = []
    for name, row in rows.items():
        r = row["ratio"].get(top)
        if r is None:
            continue
        if name.startswith("rw:"):
            rw.append(r)
            if r > BAR_RW_WORST:
                misses.append(f"{name} {r:.2f}x > {BAR_RW_WORST}")
        elif name != "launch" and r > BARS.get(name, BAR_DEFAULT):
            misses.append(f"{name} {r:.2f}x > {BARS.get(name, BAR_DEFAULT)}")
    geo = math.exp(statistics.fmean(math.log(x) for x in rw)) if rw else None
    if geo is not None and geo > BAR_RW_GEOMEAN:
        misses.append(f"real-world geomean {geo:.2f}x > {BAR_RW_GEOMEAN}")
    return {"top": top, "rw_geomean": geo, "rw_worst": max(rw, default=None), "misses": misses}


def fmt(x, spec=".3g") -> str:
    return "–" if x is None else format(x, spec)


def markdown(doc: dict) -> str:
    counts, rows = measured(doc), table(doc)
    v = verdict(doc, rows)
    top = v["top"]
    rw = (f"real-world geomean {fmt(v['rw_geomean'], '.2f')}x (bar ≤ {BAR_RW_GEOMEAN}), worst "
          f"{fmt(v['rw_worst'], '.2f')}x (bar ≤ {BAR_RW_WORST}); " if v["rw_geomean"] is not None else "")
    lines = ["## Thread scaling", "",
             f"{doc['date']}, **{doc['machine']}**; commit {doc.get('commit', '?')}; `{doc['command']}`. "
             "Each thread count in a fresh process pinned to that many cores; medians of interleaved rounds. "
             "Efficiency: T1 / (p·Tp). Ratio: lanewise / the fastest peer at that thread count (lower is better).",
             "", f"At {top} threads: {rw}" + ("every bar met." if not v["misses"] else
                                               "misses: " + "; ".join(v["misses"]) + "."), "",
             "| workload | tool | " + " | ".join(f"{p} thr (s)" for p in counts) + " | "
             + " | ".join(f"eff {p}" for p in counts if p > 1) + " |",
             "|---|---|" + "---|" * (2 * len(counts) - 1)]
    for name, row in rows.items():
        for tool, times in sorted(row["tools"].items(), key=lambda kv: (not harness.is_lanewise(kv[0]), kv[0])):
            eff = row["efficiency"].get(tool, {})
            lines.append(f"| {name} | {tool} | " + " | ".join(fmt(times.get(p)) for p in counts) + " | "
                         + " | ".join(fmt(eff.get(p), ".2f") for p in counts if p > 1) + " |")
        lines.append(f"| {name} | **lanewise / fastest peer** | "
                     + " | ".join(f"**{fmt(row['ratio'].get(p), '.2f')}x**" for p in counts) + " |"
                     + " |" * (len(counts) - 1))
    if doc.get("before"):
        lines += before_after(doc, rows)
    if doc.get("cold"):
        lines += ["", f"Cold first call at {top} threads (fresh process, empty caches), lanewise / hand-written "
                  "`prange`:", "", "| kernel | lanewise (s) | prange (s) | ratio |", "|---|---|---|---|"]
        for name, c in doc["cold"].items():
            if "ratio" in c:
                lines.append(f"| {name} | {c['lanewise']['first_s']:.2f} | {c['hand_prange']['first_s']:.2f} | "
                             f"{c['ratio']:.2f}x |")
    if doc.get("plot"):
        lines += ["", f"![thread scaling]({doc['plot']})"]
    return "\n".join(lines) + "\n"


def before_after(doc: dict, rows: dict) -> list[str]:
    """Lanewise at the largest thread count against an earlier run's (``doc["before"]``:
    {"label", "doc"}) for the names both measured."""
    earlier = doc["before"]["doc"]
    top = max(measured(doc))
    if top not in measured(earlier):
        return []
    old = table(earlier)
    lines = ["", f"Before and after at {top} threads ({doc['before']['label']}; the same machine):", "",
             "| workload | lanewise before (s) | after (s) | lanewise / fastest peer before | after |",
             "|---|---|---|---|---|"]
    for name, row in rows.items():
        if name not in old:
            continue
        lw_old = min((t[top] for n, t in old[name]["tools"].items() if harness.is_lanewise(n) and top in t),
                     default=None)
        lw_new = min((t[top] for n, t in row["tools"].items() if harness.is_lanewise(n) and top in t), default=None)
        lines.append(f"| {name} | {fmt(lw_old)} | {fmt(lw_new)} | {fmt(old[name]['ratio'].get(top), '.2f')}x | "
                     f"{fmt(row['ratio'].get(top), '.2f')}x |")
    return lines


def plot(doc: dict, png: Path) -> bool:
    """Speed-up T1/Tp per workload, lanewise against the fastest peer at 1 thread."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    rows = table(doc)
    counts = measured(doc)
    names = [n for n in rows if len(rows[n]["tools"]) > 1]
    cols = 4
    fig, axes = plt.subplots(-(-len(names) // cols), cols, figsize=(4 * cols, 3 * -(-len(names) // cols)),
                             squeeze=False)
    for ax, name in zip(axes.flat, names):
        for tool, times in rows[name]["tools"].items():
            if 1 in times:
                ps = [p for p in counts if p in times]
                mine = harness.is_lanewise(tool)
                ax.plot(ps, [times[1] / times[p] for p in ps], marker="o", lw=2.5 if mine else 1, label=tool,
                        **({"color": "black", "zorder": 3} if mine else {}))
        ax.plot(counts, counts, ":", color="grey")
        ax.set_title(name, fontsize=9)
        ax.set_xlabel("threads")
        ax.set_ylabel("speed-up T1/Tp")
        ax.legend(fontsize=6)
    for ax in list(axes.flat)[len(names):]:
        ax.axis("off")
    fig.tight_layout()
    fig.savefig(png, dpi=80)
    return True


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.threads", description=__doc__.splitlines()[0])
    ap.add_argument("--threads", default="1,4,all")
    ap.add_argument("--only", default="")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--cold", nargs="?", const="all", default="",
                    help="also cold first calls at the largest count (of these kernels, comma-separated)")
    ap.add_argument("--out", type=Path, default=harness.RESULTS / "threads.json")
    ap.add_argument("--child", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--render", action="store_true", help="re-render --out without measuring")
    ap.add_argument("--before", type=Path, help="with --render: an earlier run's JSON to compare with")
    ap.add_argument("--label", default="", help="with --before: what the earlier run was")
    ap.add_argument("--append", metavar="TITLE", help="with --render: add to the section under this heading")
    args = ap.parse_args(argv)
    size = "quick" if args.quick else "full"
    if args.child:
        child(args.child, args.only, size, args.repeats, args.out)
        return 0
    if args.render:
        doc = json.loads(args.out.read_text())
        if args.before:
            doc["before"] = {"label": args.label, "doc": json.loads(args.before.read_text())}
    else:
        workloads, kernels = selected(args.only)
        counts = thread_counts(args.threads)
        t0 = time.perf_counter()
        doc = {"date": datetime.datetime.now().isoformat(timespec="minutes"),
               "machine": f"{len(os.sched_getaffinity(0))} cores ({platform.processor() or platform.machine()}, "
                          f"{_cpu_model()})",
               "command": "python -m benchmarks.threads " + " ".join(argv if argv is not None else sys.argv[1:]),
               "threads": counts, "names": workloads + [f"rw:{k}" for k in kernels], "runs": {}}
        with tempfile.TemporaryDirectory(prefix="lw-threads-") as cache:
            for p in counts:
                doc["runs"][str(p)] = spawn(p, args, cache)
                args.out.write_text(json.dumps(doc, indent=1))  # what is measured survives a time-out
        if args.cold:
            doc["cold"] = cold_all(kernels if args.cold == "all" else args.cold.split(","), max(counts))
        doc["wall_s"] = time.perf_counter() - t0
    png = args.out.with_suffix(".png")
    if not args.append and plot(doc, png):
        doc["plot"] = os.path.relpath(png, harness.REPO)  # the section is read in BENCHMARKS.md
    args.out.write_text(json.dumps({k: v for k, v in doc.items() if k != "before"}, indent=1))
    text = markdown(doc)
    if args.append:
        text = SECTION.read_text() + "\n" + text.replace("## Thread scaling", f"### {args.append}", 1)
    print(text)
    if args.out.resolve().parent == harness.RESULTS.resolve():
        SECTION.write_text(text)
    return 0


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as fh:
            return next(ln.split(":", 1)[1].strip() for ln in fh if ln.startswith("model name"))
    except (OSError, StopIteration):
        return "?"


if __name__ == "__main__":
    sys.exit(main())
