"""Measure the real-world corpus: lanewise against each project's own fast version.

    python -m benchmarks.realworld.run [--only kde,julia] [--quick] [--repeats 7] [--no-cold]

Per kernel, in this process: one first call per tool (checked against the kernel's
independent ``reference``), then ``repeats`` interleaved rounds; the median is reported.
Cold first call: a fresh process per tool with empty lanewise and Numba caches, timing
from after the imports to the first result on the ``tiny`` input (compilation, not the
run); lanewise is compared with the lane ``njit``-ed into a hand-written ``prange`` loop.
Warm start: a second fresh process on lanewise's now populated disk cache, timed from
before ``import lanewise`` to the first result, in this machine's environment as it is.

Writes ``benchmarks/results/realworld.json`` and ``benchmarks/sections/70_realworld.md``.
Bars (issue 15): geomean of lanewise / project <= 0.8, none > 1.25; cold <= 1.5x the
hand-written prange kernel; warm start <= 0.6 s.
"""
from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

from .. import harness
from . import modules

TOOLS = ("project", "lanewise")
BAR_GEOMEAN, BAR_WORST, BAR_COLD, BAR_WARM_S = 0.8, 1.25, 1.5, 0.6


def build(mod, tool):
    """The callable(*data) of ``tool`` for kernel ``mod`` (imports its library)."""
    if tool == "lanewise":
        import lanewise as lw

        return mod.lanewise(lw)
    import numba

    return getattr(mod, tool)(numba)


def as_arrays(out):
    return [np.asarray(o) for o in (out if isinstance(out, tuple) else (out,))]


def agree(ref, out, tol) -> dict:
    ref, out = as_arrays(ref), as_arrays(out)
    if len(ref) != len(out):
        return {"ok": False, "mismatches": None, "note": f"{len(out)} results, expected {len(ref)}"}
    checks = [harness.compare(r, o, tol) for r, o in zip(ref, out, strict=True)]
    bad = [c for c in checks if not c["ok"]]
    return bad[0] if bad else checks[0]


def measure(mod, size: str, repeats: int) -> dict:
    data = mod.setup(mod.SIZES[size])
    ref = mod.reference(*data)
    fns = {t: build(mod, t) for t in TOOLS}
    rows = {}
    for tool, fn in fns.items():
        t0 = time.perf_counter()
        out = fn(*data)
        rows[tool] = {"first_s": time.perf_counter() - t0, "check": agree(ref, out, mod.TOL),
                      "times_s": []}
    for _ in range(repeats):
        for tool, fn in fns.items():
            t0 = time.perf_counter()
            fn(*data)
            rows[tool]["times_s"].append(time.perf_counter() - t0)
    for row in rows.values():
        row["median_s"] = statistics.median(row["times_s"])
    return {"n": mod.SIZES[size], "tools": rows,
            "ratio": rows["lanewise"]["median_s"] / rows["project"]["median_s"],
            "path": explain(mod)}


def explain(mod) -> str:
    """lw.explain's one-line summary of the lanewise version (which path ran)."""
    import lanewise as lw

    try:
        data = mod.setup(mod.SIZES["tiny"])
        fn = mod.lanewise(lw)
        text = str(lw.explain(fn, *data)) if isinstance(fn, lw.Mapped) else ""
    except Exception as exc:  # noqa: BLE001 - a report line, not a failure
        text = f"explain failed: {type(exc).__name__}: {exc}"
    lines = [ln.strip() for ln in text.splitlines() if "path" in ln.lower()]
    return lines[0][:160] if lines else ""


# --------------------------------------------------------------- fresh processes
def child(name: str, tool: str) -> None:
    """In a fresh process: seconds to import, and from there to the first result."""
    t0 = time.perf_counter()
    import numba  # noqa: F401 - both tools import it; the project's import counts alike

    mod = next(m for m in modules() if m.NAME == name)
    if tool == "lanewise":
        import lanewise  # noqa: F401
    t1 = time.perf_counter()
    data = mod.setup(mod.SIZES["tiny"])
    t2 = time.perf_counter()
    build(mod, tool)(*data)
    t3 = time.perf_counter()
    print(json.dumps({"import_s": t1 - t0, "first_s": t3 - t2, "start_s": t3 - t0 - (t2 - t1)}))


def spawn(name: str, tool: str, lw_cache: str, nb_cache: str) -> dict:
    env = dict(os.environ, LANEWISE_CACHE_DIR=lw_cache, NUMBA_CACHE_DIR=nb_cache)
    cmd = [sys.executable, "-m", "benchmarks.realworld.run", "child", name, tool]
    p = subprocess.run(cmd, cwd=harness.REPO, env=env, capture_output=True, text=True, timeout=900)
    if p.returncode != 0:
        return {"error": (p.stderr.strip().splitlines() or ["?"])[-1][:300]}
    return json.loads(p.stdout.strip().splitlines()[-1])


#: Warm starts are short and this host is noisy: the median of this many new processes.
WARM_RUNS = 3


def _median_run(runs: list[dict]) -> dict:
    """The run with the median start time (an error if any run failed)."""
    bad = [r for r in runs if "error" in r]
    return bad[0] if bad else sorted(runs, key=lambda r: r["start_s"])[len(runs) // 2]


def cold(mod) -> dict:
    with tempfile.TemporaryDirectory() as lw_cache, tempfile.TemporaryDirectory() as nb_cache:
        lane = spawn(mod.NAME, "lanewise", lw_cache, nb_cache)
        warm = _median_run([spawn(mod.NAME, "lanewise", lw_cache, nb_cache) for _ in range(WARM_RUNS)])
    with tempfile.TemporaryDirectory() as lw_cache, tempfile.TemporaryDirectory() as nb_cache:
        hand = spawn(mod.NAME, "hand_prange", lw_cache, nb_cache)
    out = {"lanewise": lane, "hand_prange": hand, "warm": warm}
    if not any("error" in r for r in out.values()):
        out["ratio"] = lane["first_s"] / hand["first_s"]
    return out


# ----------------------------------------------------------------------- report
def verdict(results: list[dict]) -> dict:
    ratios = [r["ratio"] for r in results if "ratio" in r]
    colds = [r["cold"]["ratio"] for r in results if "ratio" in r.get("cold", {})]
    warms = [r["cold"]["warm"]["start_s"] for r in results if "start_s" in r.get("cold", {}).get("warm", {})]
    geo = math.exp(statistics.fmean(math.log(x) for x in ratios)) if ratios else None
    return {"geomean": geo, "worst": max(ratios, default=None),
            "all_correct": all(r["tools"][t]["check"]["ok"] for r in results if "tools" in r for t in TOOLS),
            "cold_worst": max(colds, default=None), "warm_worst_s": max(warms, default=None)}


def fmt(x, spec=".3g"):
    return "–" if x is None else format(x, spec)


def markdown(doc: dict) -> str:
    v = doc["verdict"]
    lines = [
        "## Real-world corpus: kernels from public projects",
        "",
        "Each kernel is copied from a public project that uses Numba, with the project's own fast "
        "version beside the lane a user would write for it (`benchmarks/realworld/`, sources named "
        "in each file). Ratio: lanewise time / the project's own version (lower is better). Cold: "
        "first call in a fresh process with empty caches, lanewise / the lane `njit`-ed into a "
        "hand-written `prange` loop. Warm start: a new process on the populated disk cache, from "
        "`import numba` and `import lanewise` to the first result (the median of 3 processes).",
        "",
        f"{doc['date']}, {doc['machine']}; `{doc['command']}`. "
        f"Geomean **{fmt(v['geomean'], '.2f')}x** (bar ≤ {BAR_GEOMEAN}), worst "
        f"**{fmt(v['worst'], '.2f')}x** (bar ≤ {BAR_WORST}), all correct: "
        f"**{'yes' if v['all_correct'] else 'NO'}**; cold worst {fmt(v['cold_worst'], '.2f')}x "
        f"(bar ≤ {BAR_COLD}); warm start worst {fmt(v['warm_worst_s'], '.2f')} s (bar ≤ {BAR_WARM_S}).",
        "",
        "| kernel | domain | n | project (s) | lanewise (s) | ratio | cold lanewise / prange (s) "
        "| warm start (s) | source |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in doc["kernels"]:
        if "tools" not in r:
            lines.append(f"| {r['title']} | {r['domain']} | | error | | | | | {r.get('error', '')[:80]} |")
            continue
        t, c = r["tools"], r.get("cold", {})
        bad = "" if all(t[k]["check"]["ok"] for k in TOOLS) else " **wrong**"
        coldtxt = (f"{fmt(c['lanewise']['first_s'])} / {fmt(c['hand_prange']['first_s'])} "
                   f"({fmt(c['ratio'], '.2f')}x)" if "ratio" in c else "–")
        warm = fmt(c.get("warm", {}).get("start_s"), ".2f")
        lines.append(f"| {r['title']}{bad} | {r['domain']} | {r['n']:,} | {fmt(t['project']['median_s'])} | "
                     f"{fmt(t['lanewise']['median_s'])} | {r['ratio']:.2f}x | {coldtxt} | {warm} | {r['source']} |")
    lines += ["", "Paths lanewise took (`lw.explain`):", ""]
    lines += [f"- {r['title']}: {r['path']}" for r in doc["kernels"] if r.get("path")]
    return "\n".join(lines) + "\n"


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", default="")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--no-cold", action="store_true")
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args(argv)
    only = {s for s in args.only.split(",") if s}
    results = []
    for mod in modules():
        if only and mod.NAME not in only:
            continue
        print(f"{mod.NAME}: ", end="", flush=True)
        row = {"name": mod.NAME, "title": mod.TITLE, "domain": mod.DOMAIN, "source": mod.SOURCE_SHORT}
        try:
            row.update(measure(mod, "quick" if args.quick else "full", args.repeats))
        except Exception as exc:  # noqa: BLE001 - one broken kernel is a row, not a crash
            row["error"] = f"{type(exc).__name__}: {exc}"
            print(row["error"])
            results.append(row)
            continue
        if not args.no_cold:
            row["cold"] = cold(mod)
        print(f"ratio {row['ratio']:.2f}x", "cold", fmt(row.get("cold", {}).get("ratio"), ".2f"), flush=True)
        results.append(row)
    doc = {"date": datetime.datetime.now().isoformat(timespec="minutes"),
           "machine": f"{os.cpu_count()} cores, {platform.machine()}, load {os.getloadavg()[0]:.1f}",
           "command": "python -m benchmarks.realworld.run " + " ".join(argv or sys.argv[1:]),
           "kernels": results}
    doc["verdict"] = verdict(results)
    print(json.dumps(doc["verdict"]))
    if not args.no_write and not only:
        (harness.RESULTS / "realworld.json").write_text(json.dumps(doc, indent=1))
        (harness.REPO / "benchmarks" / "sections" / "70_realworld.md").write_text(markdown(doc))
    else:
        print(markdown(doc))


if __name__ == "__main__":
    if sys.argv[1:2] == ["child"]:
        child(*sys.argv[2:4])
    else:
        main()
