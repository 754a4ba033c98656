"""Turns a results document (a dict) into Markdown tables, BENCHMARKS.md, JSON and a PNG."""
from __future__ import annotations

import json
import platform
import subprocess
from importlib import metadata
from pathlib import Path

from .harness import is_lanewise

PACKAGES = ("lanewise", "numpy", "numba", "llvmlite", "numexpr", "jax", "jaxlib", "scipy")


# ------------------------------------------------------------- environment
def machine() -> str:
    info = dict(line.split(":", 1) for line in subprocess.run(
        ["lscpu"], capture_output=True, text=True).stdout.splitlines() if ":" in line)
    get = lambda key: info.get(key, "?").strip()  # noqa: E731
    avx512 = "avx512f" in get("Flags")
    return f"{get('Model name')}, {get('CPU(s)')} CPUs, AVX-512: {'yes' if avx512 else 'no'}"


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
    return f"{word} ({chk['mismatches']} differ)" if chk.get("mismatches") else word


def mem_cells(row: dict) -> list[str]:
    mem = row.get("mem", {})
    if "peak_mb" not in mem:
        return [mem.get("error", "—")[:60].replace("|", "/"), "—", "—"]
    return [num(mem["peak_mb"], 4), num(mem["base_mb"], 4), num(mem["in_mb"] + mem["out_mb"], 4)]


def tool_cells(wl: dict, row: dict) -> list[str]:
    name = f"**{row['tool']}**" if is_lanewise(row["tool"]) else row["tool"]
    times = [num(row.get(k)) for k in ("median_s", "min_s", "first_s")]
    return [wl["id"], name, *times, *mem_cells(row), num(row.get("x_bar_peer")), check_text(row)]


def results_table(workloads: list[dict]) -> list[str]:
    header = ["WL", "tool", "median s", "min s", "1st call s", "peak MB", "base MB",
              "in+out MB", "× bar peer", "check"]
    return table(header, [tool_cells(wl, r) for wl in workloads for r in wl["rows"]])


def summary_cells(wl: dict) -> list[str]:
    s, bar = wl["summary"], wl["bar"]
    lw = next((r for r in wl["rows"] if is_lanewise(r["tool"])), {})
    verdicts = [s["time"] or "—", s["stretch"] or "—", s["mem"] or "—"]
    if s["mem_ratio"] is not None:
        verdicts[2] = f"{s['mem']} ({s['mem_ratio']:.2f}×)"
    return [wl["id"], wl["size"], bar["text"], str(s["bar_peer"]), num(lw.get("median_s")),
            num(s["x_fastest"]), num(s["x_bar_peer"]), *verdicts]


def summary_table(workloads: list[dict]) -> list[str]:
    header = ["WL", "size", "bar (WORKLOADS.md)", "bar peer", "lanewise s", "× fastest peer",
              "× bar peer", "time bar", "stretch bar", "memory bar"]
    return table(header, [summary_cells(wl) for wl in workloads])


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


def scaling_table(wl: dict) -> list[str]:
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
result's size. "× bar peer" divides by the median of the peer that WORKLOADS.md names for the
bar (the fastest peer where the bar says so). Checks compare against the reference tool
(W1 NumPy, W2 Numba, W6 Numba, W7 SciPy): floats with `isclose`, integers exactly, and the
number of differing elements is shown. In W2, JAX differs on a few boundary points because
XLA on CPU contracts `a*b+c` into FMA (Numba with `fastmath={{"contract"}}` reproduces JAX's
counts exactly). The machine is shared and noisy: compare ratios within one run, not across runs.
"""


TIMING = {
    "rounds": "the timed calls run in rounds\nthat call every tool once, so background load falls on all tools alike.",
    "back-to-back": "each tool's timed calls ran\nback to back (this run predates interleaved rounds), so background load can favour a tool.",
}


def markdown(doc: dict) -> str:
    parts = [f"# lanewise benchmarks{' (QUICK sizes — not the benchmark)' if doc['quick'] else ''}",
             "", f"- date: {doc['date']}", f"- machine: {doc['machine']}",
             f"- versions: {', '.join(f'{k} {v}' for k, v in doc['versions'].items())}",
             f"- lanewise: {doc['lanewise']}", f"- command: `{doc['command'].strip()}`",
             f"- wall time of the run: {doc['wall_s']:.0f} s; load average (1/5/15 min) "
             f"before {fmt_load(doc.get('load_before'))}, after {fmt_load(doc.get('load_after'))}",
             *(f"- remark: {r}" for r in doc.get("remarks", ())), ""]
    if doc["workloads"]:
        parts += ["## Against the bar", "", *summary_table(doc["workloads"]), "",
                  "## All tools", "", *results_table(doc["workloads"]), ""]
        parts += [line for wl in doc["workloads"] for line in scaling_table(wl)]
    for key, render, title in (("dispatch", dispatch_table, "Dispatch overhead"),
                               ("startup", startup_table, "Compile: cold and warm from disk")):
        if doc.get(key):
            parts += ["", f"## {title}", "", *render(doc[key])]
    if doc.get("plot"):
        parts += ["", f"![median times]({doc['plot']})"]
    parts += ["", "## Notes", "", NOTES.format(repeats=doc["repeats"], timing=TIMING[doc.get("timing", "back-to-back")])]
    return "\n".join(parts) + "\n"


def read_json(path: Path) -> dict:
    """A saved results document; JSON turned the scaling sizes into strings."""
    doc = json.loads(Path(path).read_text())
    for wl in doc["workloads"]:
        wl["scaling"] = {t: {int(n): v for n, v in pts.items()} for t, pts in wl["scaling"].items()}
    doc.setdefault("selected", [wl["id"] for wl in doc["workloads"]] + [k for k in ("dispatch", "startup") if doc.get(k)])
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
    fig, axes = plt.subplots(1, len(wls) + len(scaled), figsize=(3.2 * (len(wls) + len(scaled)), 3.2))
    axes = list(getattr(axes, "flat", [axes]))
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
