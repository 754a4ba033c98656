"""Turns a results document (a dict) into Markdown tables, BENCHMARKS.md, JSON and a PNG.

A document holds one or more *runs*: a partial run (``--only``) is merged into the
saved results of its mode (:func:`merge`), replacing the workloads it measured and
keeping the others, and every workload, dispatch and startup section names the run
(date, command, conditions) that measured it.
"""
from __future__ import annotations

import copy
import json
import platform
import subprocess
from importlib import metadata
from pathlib import Path

from . import harness
from .harness import is_lanewise

PACKAGES = ("lanewise", "numpy", "numba", "llvmlite", "numexpr", "jax", "jaxlib", "scipy")


# ------------------------------------------------------------- environment
def machine() -> str:
    info = dict(line.split(":", 1) for line in subprocess.run(
        ["lscpu"], capture_output=True, text=True).stdout.splitlines() if ":" in line)
    get = lambda key: info.get(key, "?").strip()  # noqa: E731
    avx512 = "avx512f" in get("Flags")
    return f"{get('Model name')}, {get('CPU(s)')} CPUs, AVX-512: {'yes' if avx512 else 'no'}"


def git_state() -> str | None:
    """The lanewise tree measured: ``git describe --always --dirty`` of the repository."""
    try:
        out = subprocess.run(["git", "describe", "--always", "--dirty"], capture_output=True, text=True,
                             cwd=Path(__file__).resolve().parent, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None


def versions() -> dict:
    found = {"python": platform.python_version()}
    for name in PACKAGES:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            found[name] = "n/a"
    return found


# --------------------------------------------------------------- formatting
def num(x, digits: int = 3) -> str:
    if x is None:
        return "—"
    return f"{x:.{digits}g}" if abs(x) < 1000 else f"{x:.0f}"


def fmt_load(load) -> str:
    return "not recorded" if load is None else "/".join(f"{x:.1f}" for x in load)


def table(header: list[str], rows: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return lines + ["| " + " | ".join(r) + " |" for r in rows]


def check_text(row: dict) -> str:
    if row["status"] in ("n/a", "error"):
        return f"{row['status']}: {row.get('note', '')}".replace("|", "/")
    chk = row["check"]
    if chk.get("note") == "reference":
        return "reference"
    word = "ok" if chk["ok"] else "**WRONG**"
    word = f"{word} ({chk['mismatches']} differ)" if chk.get("mismatches") else word
    return f"{word}: {chk['note']}".replace("|", "/") if chk.get("note") else word


def mem_cells(row: dict) -> list[str]:
    mem = row.get("mem", {})
    if "peak_mb" not in mem:
        return [mem.get("error", "—")[:60].replace("|", "/"), "—", "—"]
    return [num(mem["peak_mb"], 4), num(mem["base_mb"], 4), num(mem["in_mb"] + mem["out_mb"], 4)]


def tool_cells(wl: dict, row: dict) -> list[str]:
    name = f"**{row['tool']}**" if is_lanewise(row["tool"]) else row["tool"]
    times = [num(row.get(k)) for k in ("median_s", "min_s", "first_s")]
    return [wl["id"], name, *times, *mem_cells(row), num(row.get("x_bar_peer")), check_text(row)]


def with_run(cells: list[str], item: dict, runs: bool) -> list[str]:
    """Prefixes the run id when the document holds more than one run."""
    return [item.get("run", "?"), *cells] if runs else cells


def results_table(workloads: list[dict], runs: bool = False) -> list[str]:
    header = ["WL", "tool", "median s", "min s", "1st call s", "peak MB", "base MB",
              "in+out MB", "× bar peer", "check"]
    return table(with_run(header, {"run": "run"}, runs),
                 [with_run(tool_cells(wl, r), wl, runs) for wl in workloads for r in wl["rows"]])


def summary_cells(wl: dict) -> list[str]:
    s, bar = wl["summary"], wl["bar"]
    lw = next((r for r in wl["rows"] if is_lanewise(r["tool"])), {})
    verdicts = [s["time"] or "—", s["stretch"] or "—", s["mem"] or "—"]
    if s.get("stretch_peer") and s["stretch_peer"] != s["bar_peer"] and s["stretch"]:
        verdicts[1] = f"{s['stretch']} ({num(s['x_stretch_peer'])}× {s['stretch_peer']})"
    if s["mem_ratio"] is not None:
        across = " at largest/smallest n" if bar.get("mem_flat") is not None else ""
        verdicts[2] = f"{s['mem']} ({s['mem_ratio']:.2f}×{across})"
    return [wl["id"], wl["size"], bar["text"], str(s["bar_peer"]), num(lw.get("median_s")),
            num(s["x_fastest"]), num(s["x_bar_peer"]), *verdicts]


def summary_table(workloads: list[dict], runs: bool = False) -> list[str]:
    header = ["WL", "size", "bar (docs/workloads.md)", "bar peer", "lanewise s", "× fastest peer",
              "× bar peer", "time bar", "stretch bar", "memory bar"]
    return table(with_run(header, {"run": "run"}, runs),
                 [with_run(summary_cells(wl), wl, runs) for wl in workloads])


def memory_table(wl: dict) -> list[str]:
    """Peak RSS (MB) of each tool at every probed n (MEMORY_SIZES)."""
    series = wl.get("memory") or {}
    if not series:
        return []
    sizes = sorted({int(n) for s in series.values() for n in s})
    cell = lambda p: num(p["peak_mb"], 4) if p and "peak_mb" in p else (p or {}).get("error", "—")[:40]  # noqa: E731
    rows = [[tool, *(cell(series[tool].get(n)) for n in sizes)] for tool in series]
    title = f"\n{wl['id']} peak RSS MB (fresh process, empty lanewise cache) vs n:\n"
    return [title, *table(["tool", *map(str, sizes)], rows)]


def dispatch_table(d: dict) -> list[str]:
    rows = [[r["tool"], num(r.get("us_per_call")), r.get("note", r["status"])] for r in d["rows"]]
    lines = table([f"call on {d['lanes']} lanes", "µs per call (median)", "status"], rows)
    if d.get("overhead_us") is not None:
        lines.append(f"\nlanewise overhead over a direct njit call: {d['overhead_us']:.2f} µs "
                     f"({d['ratio']:.2f}× the njit call).")
    return lines


def startup_table(d: dict) -> list[str]:
    keys = ("import_s", "first_result_s", "second_call_s", "wall_s")
    rows = [[r["tool"], *(num(r.get(k)) for k in keys),
             str(r.get("cache_files") if r.get("cache_files") is not None else "—"),
             r.get("note", r["status"]).replace("|", "/")] for r in d["rows"]]
    header = ["W1, fresh process", "import s", "import → 1st result s", "2nd call s",
              "process wall s", "cache files", "status"]
    return table(header, rows)


def scaling_table(wl: dict) -> list[str]:  # noqa: D103 - rows: tools, columns: n
    series = wl["scaling"]
    if not series:
        return []
    sizes = sorted({n for s in series.values() for n in s})
    rows = [[tool, *(num(series[tool].get(n)) for n in sizes)] for tool in series]
    return [f"\n{wl['id']} median s vs n:\n", *table(["tool", *map(str, sizes)], rows)]


# ----------------------------------------------------------------- document
NOTES = """\
How to read this: medians of {repeats} timed calls after one warm-up call (the warm-up,
which includes compilation, is the "1st call" column); {timing} Every tool gets the same NumPy
arrays and returns a NumPy array, so conversions are included. "peak MB" is the peak RSS of a fresh
subprocess (VmHWM, which is `ru_maxrss` without the parent's peak that Linux carries
over fork+exec) that imports the tool, warms it up on a tiny input ("base MB" is its RSS then),
loads the full inputs from `.npy` files and runs once; "in+out MB" is the inputs' plus the
result's size. "× bar peer" divides by the median of the peer that docs/workloads.md names for the
bar (the fastest peer where the bar says so). Checks compare against the reference tool
({refs}): floats with `isclose`, integers exactly, and the
number of differing elements is shown.{w2} The machine is shared and noisy: compare ratios within one run,
not across runs.
Startup runs each tool in fresh processes with Python's default bytecode caching (the sandbox's
PYTHONDONTWRITEBYTECODE=1 is dropped: it made every process recompile lanewise's source, about
0.07 s, while Numba's files came precompiled from pip).
"""
W2_NOTE = """ In W2, JAX differs on a few boundary points because
XLA on CPU contracts `a*b+c` into FMA (Numba with `fastmath={"contract"}` reproduces JAX's
counts exactly)."""


TIMING = {
    "rounds": "the timed calls run in rounds\nthat call every tool once (from R9 on in a seeded shuffled order), "
              "so background load and the\nwake of the previous tool (JAX's freed memory) fall on all tools alike.",
    "back-to-back": "each tool's timed calls ran\nback to back (this run predates interleaved rounds), "
                    "so background load can favour a tool.",
}
RUN_KEYS = ("date", "command", "machine", "versions", "lanewise", "git", "wall_s", "load_before",
            "load_after", "repeats", "timing", "remarks", "selected")
SECTIONS = ("dispatch", "startup")


# --------------------------------------------------------------------- runs
def stamp(doc: dict) -> dict:
    """The run-level facts of a single-run document (what a row's run stamp points to)."""
    run = {k: doc.get(k) for k in RUN_KEYS}
    run["timing"] = run["timing"] or "back-to-back"  # documents before interleaved rounds
    run["remarks"] = list(run["remarks"] or ())
    return run


def items(doc: dict) -> list[dict]:
    """Every part of a document that a run measured: workloads, dispatch, startup."""
    return [*doc["workloads"], *(doc[k] for k in SECTIONS if doc.get(k))]


def with_runs(doc: dict) -> dict:
    """``doc`` with a ``runs`` table and every item tagged with its run (R1 for old documents)."""
    if not doc.get("runs"):
        doc["runs"] = {"R1": stamp(doc)}
        for item in items(doc):
            item["run"] = "R1"
    return doc


def merge(base: dict, part: dict, order: list[str]) -> dict:
    """``base`` with ``part``'s workloads/sections replacing or joining it.

    Each item keeps the stamp of the run that measured it; runs no longer
    referenced are dropped.  ``order`` is the registry order of workload ids.
    """
    doc, part = with_runs(copy.deepcopy(base)), copy.deepcopy(part)
    run_id = f"R{1 + max(int(r[1:]) for r in doc['runs'])}"
    for key in ("runs", "plot"):
        part.pop(key, None)
    new_run = stamp(part)
    new = {wl["id"]: dict(wl, run=run_id) for wl in part["workloads"]}
    kept = {wl["id"]: wl for wl in doc["workloads"] if wl["id"] not in new}
    both = {**kept, **new}
    doc["workloads"] = [both[i] for i in sorted(both, key=lambda i: order.index(i) if i in order else len(order))]
    for key in SECTIONS:
        if part.get(key):
            doc[key] = dict(part[key], run=run_id)
    doc["runs"][run_id] = new_run
    used = {item["run"] for item in items(doc)}
    doc["runs"] = {r: v for r, v in doc["runs"].items() if r in used}
    doc["selected"] = [wl["id"] for wl in doc["workloads"]] + [k for k in SECTIONS if doc.get(k)]
    for k in RUN_KEYS:  # the top level describes the latest run
        if k != "selected":
            doc[k] = part.get(k)
    doc["wall_s"] = sum(r["wall_s"] or 0 for r in doc["runs"].values())
    return doc


def run_lines(run_id: str | None, run: dict, shared: set[str]) -> list[str]:
    """A run's header lines; ``shared`` keys are printed once for the document instead."""
    lead = f"  - **{run_id}**: " if run_id else "- "
    sub = "    - " if run_id else "- "
    lines = [f"{lead}date: {run['date']}" + (f"; command: `{run['command'].strip()}`" if run_id else "")]
    if not run_id:
        lines.append(f"- command: `{run['command'].strip()}`")
    if "machine" not in shared:
        lines.append(f"{sub}machine: {run['machine']}")
    if "versions" not in shared:
        lines.append(f"{sub}versions: {', '.join(f'{k} {v}' for k, v in run['versions'].items())}")
    if "lanewise" not in shared:
        lines.append(f"{sub}lanewise: {run['lanewise']}")
    if run.get("git"):
        lines.append(f"{sub}source tree: `{run['git']}` (git describe --dirty)")
    lines.append(f"{sub}wall time of the run: {run['wall_s']:.0f} s; load average (1/5/15 min) before "
                 f"{fmt_load(run.get('load_before'))}, after {fmt_load(run.get('load_after'))}"
                 + (f"; {run['repeats']} timed calls per tool, "
                    f"{'interleaved rounds' if run['timing'] == 'rounds' else 'back to back'}" if run_id else ""))
    return lines + [f"{sub}remark: {r}" for r in run.get("remarks") or ()]


def header(doc: dict) -> list[str]:
    runs = doc["runs"]
    same = lambda k: len({json.dumps(r.get(k), sort_keys=True) for r in runs.values()}) == 1  # noqa: E731
    shared = {k for k in ("machine", "versions", "lanewise") if same(k)}
    first = next(iter(runs.values()))
    lines = [f"- machine: {first['machine']}"] if "machine" in shared else []
    if "versions" in shared:
        lines.append(f"- versions: {', '.join(f'{k} {v}' for k, v in first['versions'].items())}")
    if "lanewise" in shared:
        lines.append(f"- lanewise: {first['lanewise']}")
    if len(runs) == 1:
        single = run_lines(None, first, shared)
        return single[:1] + lines + single[1:]
    return lines + [f"- runs merged here ({len(runs)}; the `run` column of each row names its run):",
                    *(ln for rid, run in runs.items() for ln in run_lines(rid, run, shared))]


def timing_text(doc: dict) -> tuple[str, str]:
    """(how many timed calls, how they were ordered), per run where runs differ."""
    runs = doc["runs"]
    reps = {r["repeats"] for r in runs.values()}
    repeats = str(reps.pop()) if len(reps) == 1 else "the (per run: " + ", ".join(
        f"{rid} {r['repeats']}" for rid, r in runs.items()) + ")"
    groups: dict[str, list[str]] = {}
    for rid, run in runs.items():
        groups.setdefault(run["timing"], []).append(rid)
    if len(groups) == 1:
        return repeats, TIMING[next(iter(groups))]
    return repeats, " ".join(f"In {', '.join(rids)} {TIMING[t]}" for t, rids in groups.items())


def reference_text(doc: dict) -> str:
    refs = []
    for wl in doc["workloads"]:
        ref = next((r["tool"] for r in wl["rows"] if r.get("check", {}).get("note") == "reference"), None)
        refs.append(f"{wl['id']} {ref}" if ref else f"{wl['id']} its own check, see below")
    return ", ".join(refs)


def markdown(doc: dict) -> str:
    doc = with_runs(doc)
    multi = len(doc["runs"]) > 1
    parts = [f"# lanewise benchmarks{' (QUICK sizes — not the benchmark)' if doc['quick'] else ''}",
             "", *header(doc), ""]
    if doc["workloads"]:
        parts += ["## Against the bar", "", *summary_table(doc["workloads"], multi), "",
                  "## All tools", "", *results_table(doc["workloads"], multi), ""]
        parts += [line for wl in doc["workloads"] for line in scaling_table(wl)]
        parts += [line for wl in doc["workloads"] for line in memory_table(wl)]
    for key, render, title in (("dispatch", dispatch_table, "Dispatch overhead"),
                               ("startup", startup_table, "Compile: cold and warm from disk")):
        if doc.get(key):
            run = f" (run {doc[key].get('run')})" if multi else ""
            parts += ["", f"## {title}{run}", "", *render(doc[key])]
    if doc.get("plot"):
        parts += ["", f"![median times]({doc['plot']})"]
    parts += extra_sections(harness.REPO)
    repeats, timing = timing_text(doc)
    w2 = W2_NOTE if any(wl["id"] == "W2" for wl in doc["workloads"]) else ""
    parts += ["", "## Notes", "", NOTES.format(repeats=repeats, timing=timing, refs=reference_text(doc), w2=w2)]
    parts += [wl["note"] + "\n" for wl in doc["workloads"] if wl.get("note")]
    return "\n".join(parts) + "\n"


def extra_sections(repo: Path) -> list[str]:
    """Sections measured by their own scripts: ``benchmarks/sections/*.md`` (each
    says its date, machine and command), and lanemath's accuracy and throughput
    tables, taken from docs/lanemath.md (where ``python -m lanewise.lanemath.*``
    writes them) so the two never disagree."""
    parts = []
    lanemath = repo / "docs" / "lanemath.md"
    if lanemath.exists():
        text = lanemath.read_text()
        parts += ["", "## Vector math (lanemath): ulp error and throughput against NumPy", "",
                  "Measured by `python -m lanewise.lanemath.accuracy` (mpmath reference, 10^6 points "
                  "per function) and `python -m lanewise.lanemath.throughput` (10^7 float64 "
                  "arguments, one thread); method and notes in docs/lanemath.md.", ""]
        for name in ("accuracy", "throughput"):
            begin, end = f"<!-- {name}:begin -->", f"<!-- {name}:end -->"
            if begin in text and end in text:
                parts += [text.split(begin, 1)[1].split(end, 1)[0].strip(), ""]
    for path in sorted((repo / "benchmarks" / "sections").glob("*.md")):
        parts += ["", path.read_text().rstrip()]
    return parts


def read_json(path: Path) -> dict:
    """A saved results document; JSON turned the integer sizes (scaling, memory) into strings."""
    doc = json.loads(Path(path).read_text())
    for wl in doc["workloads"]:
        wl["scaling"] = {t: {int(n): v for n, v in pts.items()} for t, pts in wl["scaling"].items()}
        wl["memory"] = {t: {int(n): v for n, v in pts.items()} for t, pts in (wl.get("memory") or {}).items()}
    doc.setdefault("selected", [wl["id"] for wl in doc["workloads"]] + [k for k in SECTIONS if doc.get(k)])
    return doc


def write_json(doc: dict, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=1, default=str))


# --------------------------------------------------------------------- plot
def plot(doc: dict, path: Path) -> bool:
    """Median time per tool (one panel per workload) and W1 time vs n."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    wls = doc["workloads"]
    scaled = [wl for wl in wls if wl["scaling"]]
    if not wls:
        return False
    panels = len(wls) + len(scaled)
    cols = min(panels, 5)
    rows = -(-panels // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(3.2 * cols, 3.2 * rows), squeeze=False)
    axes = list(axes.flat)
    for ax in axes[panels:]:
        ax.set_visible(False)
    for ax, wl in zip(axes, wls):
        bars_panel(ax, wl)
    for ax, wl in zip(axes[len(wls):], scaled):
        scaling_panel(ax, wl)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=72)
    plt.close(fig)
    return True


def bars_panel(ax, wl: dict) -> None:
    import matplotlib.ticker
    rows = [r for r in wl["rows"] if r["status"] in ("ok", "wrong")]
    if not rows:
        return
    names = [r["tool"] for r in rows]
    colors = ["tab:red" if is_lanewise(n) else "tab:gray" for n in names]
    times = [r["median_s"] for r in rows]
    ax.barh(names, times, color=colors)
    ax.set_xscale("log")
    ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    for y, t in enumerate(times):
        ax.text(t, y, f" {t:.3g}", va="center", fontsize=7)
    ax.set_xlim(min(times) / 2, max(times) * 6)
    ax.set_title(f"{wl['id']} ({wl['size'][:24]})", fontsize=9)
    ax.set_xlabel("median s (log)", fontsize=8)
    ax.tick_params(labelsize=7)


def scaling_panel(ax, wl: dict) -> None:
    import matplotlib.ticker
    for tool, pts in wl["scaling"].items():
        ns = sorted(int(n) for n in pts)
        ax.plot(ns, [pts[n] for n in ns], "o-", label=tool, lw=2.5 if is_lanewise(tool) else 1)
    ax.set_xscale("log")
    ax.set_yscale("log")
    sizes = sorted({int(n) for pts in wl["scaling"].values() for n in pts})
    ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    ax.set_xticks(sizes, [str(n) for n in sizes])
    ax.set_title(f"{wl['id']} time vs n", fontsize=9)
    ax.set_xlabel("n", fontsize=8)
    ax.tick_params(labelsize=7)
    ax.legend(fontsize=6)
