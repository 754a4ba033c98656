"""Turns a results document (a dict) into BENCHMARKS.md, JSON and a PNG.

The page is written for users: what is measured and how, the machine, the commands
that reproduce it and a legend of the runs merged into it; then a summary (lanewise
against the fastest other tool and docs/workloads.md's target, in words), one
section per workload with every tool, and the sections of ``benchmarks/sections/``.
It depends on the document alone (and those files), so re-rendering is idempotent.

A document holds one or more *runs*: a partial run (``--only``) is merged into the
saved results of its mode (:func:`merge`), replacing the workloads it measured and
keeping the others, and every workload, dispatch and startup section names the run
(date, command, conditions) that measured it.
"""
from __future__ import annotations

import copy
import json
import math
import platform
import shlex
import subprocess
import sys
import textwrap
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


def times(x: float | None) -> str:
    """A ratio of two times with two significant digits ("0.30×"): a third is below the machine's noise."""
    if x is None:
        return "—"
    return f"{x:.0f}×" if x >= 10 else f"{x:#.2g}".rstrip(".") + "×"


def factor(x: float) -> str:
    """A target's factor as docs/workloads.md writes it: 1.0, 0.5, 1.1."""
    return f"{x:.1f}" if x == round(x, 1) else f"{x:g}"


def ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a and b else None


def cell(text: str) -> str:
    """Free text made safe for a Markdown table cell."""
    return text.replace("|", "/")


def fmt_load(load) -> str:
    return "not recorded" if load is None else "/".join(f"{x:.1f}" for x in load)


def table(header: list[str], rows: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return lines + ["| " + " | ".join(r) + " |" for r in rows]


def bold(tool: str) -> str:
    """lanewise's rows stand out in every table."""
    return f"**{tool}**" if is_lanewise(tool) else tool


def with_run(cells: list[str], run_id: str, multi: bool) -> list[str]:
    """Prefixes the run id when the document merges several runs (the legend says which is which)."""
    return [run_id, *cells] if multi else cells


def run_note(item: dict, multi: bool) -> str:
    return f" (run {item.get('run', '?')})" if multi else ""


def lanewise_row(wl: dict) -> dict:
    return next((r for r in wl["rows"] if is_lanewise(r["tool"])), {})


def check_text(row: dict) -> str:
    if row["status"] in ("n/a", "error"):
        return cell(f"{row['status']}: {row.get('note', '')}")
    chk = row["check"]
    if chk.get("note") == "reference":
        return "reference"
    word = "ok" if chk["ok"] else "**WRONG**"
    word = f"{word} ({chk['mismatches']} differ)" if chk.get("mismatches") else word
    return cell(f"{word}: {chk['note']}") if chk.get("note") else word


def peak_cell(row: dict) -> str:
    mem = row.get("mem", {})
    return num(mem["peak_mb"], 4) if "peak_mb" in mem else cell(mem.get("error", "—")[:60])


# ------------------------------------------------------------------ targets
VERDICT = {"PASS": "met", "MISS": "**not met**", "n/a": "not measured"}


def tool_words(peer: str, found: str | None) -> str:
    """The tool a target names; "fastest" means whichever other tool was fastest in that run."""
    if peer != "fastest":
        return peer
    return f"the fastest other tool ({found})" if found else "the fastest other tool"


def goals(wl: dict) -> list[tuple[str, str, float | None, str]]:
    """(kind, target in words, lanewise's measured ratio, verdict) for each part of a workload's target.

    A harder factor against the same tool (W2 with SPMD on SIMD, W5 with vector math) stands
    for both: lanewise runs here as users run it, so the harder factor is the one that applies.
    """
    bar, s = wl["bar"], wl["summary"]
    if bar["factor"] is None:
        return []
    stretch, speer = bar.get("stretch"), bar.get("stretch_peer")
    own = stretch is not None and speer in (None, bar["peer"])
    x_stretch = s.get("x_stretch_peer", s["x_bar_peer"])  # documents before stretch_peer: the bar peer
    found = [("time", f"≤ {factor(stretch if own else bar['factor'])}× {tool_words(bar['peer'], s['bar_peer'])}",
              x_stretch if own else s["x_bar_peer"], s["stretch"] if own else s["time"])]
    if stretch is not None and not own:
        found.append(("time", f"≤ {factor(stretch)}× {speer}", x_stretch, s["stretch"]))
    return found + memory_goal(bar, s)


def memory_goal(bar: dict, s: dict) -> list[tuple[str, str, float | None, str]]:
    if bar.get("mem_factor") is not None:
        words = f"peak memory ≤ {factor(bar['mem_factor'])}× (output + interpreter baseline)"
    elif bar.get("mem_flat") is not None:
        words = f"peak memory independent of n (at the largest n within {bar['mem_flat'] - 1:.0%} of the smallest)"
    else:
        return []
    return [("memory", words, s["mem_ratio"], s["mem"])]


def target_words(wl: dict) -> str:
    return "; ".join(words for _, words, _, _ in goals(wl)) or "none yet"


def met_text(wl: dict) -> str:
    """"met", or a verdict per kind of target ("time met, memory not measured")."""
    kinds: dict[str, list[str]] = {}
    for kind, _, _, verdict in goals(wl):
        kinds.setdefault(kind, []).append(verdict)
    if not kinds:
        return "no target yet"
    worst = {k: "MISS" if "MISS" in v else "PASS" if set(v) == {"PASS"} else "n/a" for k, v in kinds.items()}
    if set(worst.values()) == {"PASS"}:
        return "met"
    return ", ".join(f"{kind} {VERDICT[v]}" for kind, v in worst.items())


def goal_line(wl: dict) -> str:
    """Each part of the target with lanewise's ratio and verdict, for the workload's section."""
    parts = [f"{words}: {VERDICT[verdict]}" + (f" ({times(x)})" if x is not None else "")
             for _, words, x, verdict in goals(wl)]
    return "Target (docs/workloads.md): " + ("; ".join(parts) if parts else "none yet") + "."


# ------------------------------------------------------------------- tables
def workload_name(wl: dict) -> str:
    return f"{wl['id']} {wl['title']}, {wl['size']}"


def summary_row(wl: dict) -> list[str]:
    s = wl["summary"]
    fastest = next((r for r in wl["rows"] if r["tool"] == s["fastest_peer"]), {})
    return [workload_name(wl), num(lanewise_row(wl).get("median_s")), s["fastest_peer"] or "—",
            num(fastest.get("median_s")), times(s["x_fastest"]), target_words(wl), met_text(wl)]


def summary_table(workloads: list[dict], multi: bool) -> list[str]:
    header = ["workload", "lanewise median s", "fastest other tool", "its median s", "lanewise ÷ fastest",
              "target (docs/workloads.md)", "target met?"]
    return table(with_run(header, "run", multi), [with_run(summary_row(wl), wl["run"], multi) for wl in workloads])


def tools_table(wl: dict) -> list[str]:
    """Every tool, fastest first; a peak-memory column only where the run measured memory."""
    lw = lanewise_row(wl).get("median_s")
    memory = any("mem" in r for r in wl["rows"])
    header = ["tool", "median s", "min s", "first call s", *(["peak MB"] if memory else []),
              "time ÷ lanewise", "result check"]
    rows = [[bold(r["tool"]), *(num(r.get(k)) for k in ("median_s", "min_s", "first_s")),
             *([peak_cell(r)] if memory else []), times(ratio(r.get("median_s"), lw)), check_text(r)]
            for r in sorted(wl["rows"], key=lambda r: r.get("median_s") or math.inf)]
    return table(header, rows)


def by_size_table(title: str, series: dict, show) -> list[str]:
    """Rows: tools, columns: sizes n; ``show`` turns one point into a cell."""
    if not series:
        return []
    sizes = sorted({int(n) for points in series.values() for n in points})
    rows = [[bold(tool), *(show(points.get(n)) for n in sizes)] for tool, points in series.items()]
    return ["", title, "", *table(["tool", *(f"n = {n}" for n in sizes)], rows)]


def scaling_table(wl: dict) -> list[str]:
    return by_size_table("Median s at each size n (the plot's time-vs-n panel):", wl["scaling"], num)


def memory_table(wl: dict) -> list[str]:
    def show(p):
        return num(p["peak_mb"], 4) if p and "peak_mb" in p else cell((p or {}).get("error", "—")[:40])

    title = "Peak MB at each size n (each a fresh process with an empty lanewise cache):"
    return by_size_table(title, wl.get("memory") or {}, show)


def dispatch_table(d: dict) -> list[str]:
    rows = [[bold(r["tool"]), num(r.get("us_per_call")), cell(r.get("note", r["status"]))] for r in d["rows"]]
    lines = [f"One call on {d['lanes']} lanes (`v * 2 + 1`), median µs:", "",
             *table(["call", "µs per call", "status"], rows)]
    if d.get("overhead_us") is not None:
        lines += ["", f"lanewise adds {d['overhead_us']:.2f} µs to a direct `numba.njit` call "
                      f"(it takes {d['ratio']:.2f}× as long)."]
    return lines


STARTUP = (
    "W1 at n = {n}, each row in new processes (the median of {runs}): \"cold\" starts with an empty "
    "lanewise cache, so the first result includes compiling; \"warm\" loads what the cold run cached on "
    "disk; the hand-written Numba kernel has no cache. Python's bytecode caching is on: the benchmark "
    "drops PYTHONDONTWRITEBYTECODE when set, which would recompile lanewise's own source in every process "
    "(about 0.07 s) while Numba's comes precompiled from pip.")


def startup_table(d: dict) -> list[str]:
    keys = ("import_s", "first_result_s", "second_call_s", "wall_s")
    rows = [[bold(r["tool"]), *(num(r.get(k)) for k in keys),
             str(r.get("cache_files") if r.get("cache_files") is not None else "—"),
             cell(r.get("note", r["status"]))] for r in d["rows"]]
    header = ["tool", "import s", "import → first result s", "second call s", "process wall s",
              "cache files", "status"]
    n_runs = max((len(r.get("runs") or ()) for r in d["rows"]), default=1)
    return [STARTUP.format(n=d.get("n", "?"), runs=n_runs or 1), "", *table(header, rows)]


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


# ----------------------------------------------------------------- document
INTRO = """\
Each workload runs lanewise and the tools its users would otherwise reach for (NumPy, numexpr, Numba,
JAX, scipy) on the same NumPy arrays, one workload at a time in one process; every tool returns a NumPy
array, so conversions are included. Each tool is first called once to warm up: that call's time, which
includes compilation, is the "first call s" column, and its result is checked against a reference
tool's (floats with `isclose`, integers exactly; the "result check" column counts the elements that
differ). Then {rounds}; the tables give the median ("median s") and the fastest ("min s") of those
timed calls. {memory} The machine is shared, so compare tools within one table (they ran in the same
minutes) rather than figures across runs. The targets are the ones docs/workloads.md sets for lanewise."""
MEMORY = {
    True: "Peak memory (\"peak MB\") is the peak resident set (VmHWM) of a fresh process that imports "
          "the tool, warms it up on a tiny input, loads the full inputs from `.npy` files and runs once.",
    False: "Peak memory was not measured in these runs (they ran with `--no-memory`); without that flag, "
           "each tool also runs once in a fresh process that reports its peak resident set.",
}
#: The commands that measure this page's figures, each with what it measures.
COMMANDS = (
    ('python -m pip install -e ".[bench]"', "lanewise, Numba, NumPy and the other tools: numexpr, JAX, scipy"),
    ("python -m benchmarks.run{quick}", "every workload below (several minutes): this page, {stem}.json and .png"),
    ("python -m benchmarks.spmd", 'the "SPMD on SIMD" section'),
    ("python -m benchmarks.w4_fuse", 'the "@lw.fuse" section (W4, and W1 written as NumPy code)'),
)
REPRODUCE = """\
Adding `--only W1,W3` re-measures some workloads and merges them into this page (each row then names
the run that measured it, see Runs); `--quick` runs small sizes in under two minutes (its page is
benchmarks/results/quick.md); `--render {stem}.json` rebuilds this page from the saved results
without measuring anything."""


def paragraph(text: str) -> str:
    """``text`` re-wrapped at 100 columns: the parts filled in vary in length from page to page."""
    return textwrap.fill(" ".join(text.split()), 100, break_on_hyphens=False, break_long_words=False)


def reproduce(doc: dict) -> list[str]:
    fill = {"quick": " --quick" if doc["quick"] else "",
            "stem": harness.RESULTS.relative_to(harness.REPO) / doc["mode"]}
    commands = [(cmd.format(**fill), what.format(**fill)) for cmd, what in COMMANDS]
    width = max(len(cmd) for cmd, _ in commands)
    block = [f"{cmd.ljust(width)}   # {what}" for cmd, what in commands]
    return ["## How to reproduce", "", "On a quiet machine:", "", "```sh", *block, "```", "",
            paragraph(REPRODUCE.format(**fill))]


#: Interleaved rounds call the tools in a seeded shuffled order since this commit time (bdad0dd):
#: before it, in a fixed order, the tool after JAX paid for JAX's freed memory.  Runs do not
#: record the order, so their date tells it.
SHUFFLED_SINCE = "2026-11-30T10:07"


def rounds_text(runs: dict) -> str:
    """How the timed calls ran: the number of rounds, per run where runs differ."""
    reps = sorted({r["repeats"] for r in runs.values()})
    count = f"{reps[0]} rounds" if len(reps) == 1 else f"{reps[0]} to {reps[-1]} rounds (per run, see Runs)"
    text = (f"the tools are timed in {count} that each call every tool once, so that background "
            "load falls on all tools alike")
    old = [rid for rid, r in runs.items() if r["timing"] != "rounds"]
    return text + (f" (runs {', '.join(old)} predate rounds: each tool's calls ran back to back)" if old else "")


def timing_cell(run: dict) -> str:
    if run["timing"] != "rounds":
        return f"{run['repeats']} calls per tool, back to back"
    order = "shuffled" if (run.get("date") or "") >= SHUFFLED_SINCE else "fixed order"
    return f"{run['repeats']} rounds, {order}"


def plain_command(command: str) -> str:
    """The command without its ``--remark`` (the runs table shows remarks in their own column)."""
    words = shlex.split(command)
    dropped = {i + 1 for i, w in enumerate(words) if w == "--remark"}
    return shlex.join(w for i, w in enumerate(words)
                      if w != "--remark" and i not in dropped and not w.startswith("--remark="))


def versions_text(run: dict) -> str:
    return ", ".join(f"{k} {v}" for k, v in run["versions"].items())


#: Facts of a run that the page states once when every run shares them, else per run.
SHARED = {"machine": lambda run: run["machine"], "versions": versions_text}


def shared_keys(runs: dict) -> list[str]:
    return [k for k, show in SHARED.items() if len({show(r) for r in runs.values()}) == 1]


def machine_lines(runs: dict) -> list[str]:
    first, shared = next(iter(runs.values())), shared_keys(runs)
    return [f"**{key.capitalize()}:** {SHARED[key](first) if key in shared else 'per run, see Runs'}.  "
            for key in SHARED]


def runs_section(doc: dict) -> list[str]:
    """The legend of run ids: date, command and conditions of every run the page shows."""
    runs, own = doc["runs"], [k for k in SHARED if k not in shared_keys(doc["runs"])]
    lead = (f"The page merges {len(runs)} runs: a later run replaces the workloads it re-measured, and the "
            "`run` column (or a section's heading) names the run that measured each figure."
            if len(runs) > 1 else "One run measured every figure on this page.")
    header = ["run", "date", "command", "source tree", "timed calls", "load average before → after",
              *own, "remarks"]
    rows = [[f"**{rid}**", (run["date"] or "?").replace("T", " ")[:16], f"`{plain_command(run['command'])}`",
             f"`{run['git']}`" if run.get("git") else "—", timing_cell(run),
             f"{fmt_load(run.get('load_before'))} → {fmt_load(run.get('load_after'))}",
             *(SHARED[k](run) for k in own), cell("; ".join(run.get("remarks") or ())) or "—"]
            for rid, run in runs.items()]
    return ["## Runs", "", lead, "", *table(header, rows),
            "", "Source tree: `git describe --always --dirty` of the measured checkout; "
                "load average: 1, 5 and 15 minutes."]


def intro(doc: dict) -> list[str]:
    memory = any("mem" in r for wl in doc["workloads"] for r in wl["rows"]) or \
        any(wl.get("memory") for wl in doc["workloads"])
    text = INTRO.format(rounds=rounds_text(doc["runs"]), memory=MEMORY[memory])
    return [paragraph(text), "", *machine_lines(doc["runs"]), "", *reproduce(doc)]


def summary_section(doc: dict, multi: bool) -> list[str]:
    lines = ["## Summary", "", "lanewise's median time against the fastest other tool in the same run, "
             "and the target docs/workloads.md sets for it (every tool's figures follow in Workloads).", "",
             *summary_table(doc["workloads"], multi)]
    if doc.get("plot"):
        scaled = [wl["id"] for wl in doc["workloads"] if wl["scaling"]]
        against = f", then time against size for {' and '.join(scaled)}" if scaled else ""
        lines += ["", f"Median time of every tool, one panel per workload (log scale, lanewise in red){against}:",
                  "", f"![median time of every tool per workload]({doc['plot']})"]
    return lines


#: Notes about a workload that the renderer knows and older results documents do not carry.
WORKLOAD_NOTES = {
    "W2": "JAX differs on a few points on the set's boundary: XLA on CPU contracts `a*b+c` into a fused "
          "multiply-add (Numba with `fastmath={\"contract\"}` reproduces JAX's counts exactly).",
}


def sentence(text: str) -> str:
    return text[:1].upper() + text[1:]


def workload_section(wl: dict, multi: bool) -> list[str]:
    notes = [sentence(n.removeprefix(f"{wl['id']}: ")) for n in (wl.get("note"), WORKLOAD_NOTES.get(wl["id"])) if n]
    source = f"From run {wl.get('run', '?')}. " if multi else ""
    return ["", f"### {wl['id']} — {wl['title']}, {wl['size']}", "", source + goal_line(wl), "",
            *tools_table(wl), *scaling_table(wl), *memory_table(wl), *(line for n in notes for line in ("", n))]


def overhead_sections(doc: dict, multi: bool) -> list[str]:
    parts = []
    for key, render, title in (("dispatch", dispatch_table, "Call overhead"),
                               ("startup", startup_table, "Start-up: compiling cold, loading warm from disk")):
        if doc.get(key):
            parts += ["", f"## {title}{run_note(doc[key], multi)}", "", *render(doc[key])]
    return parts


def markdown(doc: dict) -> str:
    doc = with_runs(doc)
    multi = len(doc["runs"]) > 1
    parts = [f"# lanewise benchmarks{' (QUICK sizes — not the benchmark)' if doc['quick'] else ''}", "",
             *intro(doc), "", *runs_section(doc)]
    if doc["workloads"]:
        parts += ["", *summary_section(doc, multi), "", "## Workloads"]
        parts += [line for wl in doc["workloads"] for line in workload_section(wl, multi)]
    parts += overhead_sections(doc, multi)
    parts += extra_sections(harness.REPO)
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
    """Median time per tool (one panel per workload) and W1 time vs n; False (no plot)
    without matplotlib, which only the figure needs."""
    try:
        import matplotlib
    except ImportError:
        return False

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


def save_rows(name: str, rows: list[dict], repeats: int) -> Path:
    """``benchmarks/results/<name>.json``: a standalone benchmark's rows, with the run's
    context: date, machine, threads (Numba's, as the run left them) and the command
    (``python -m benchmarks.<name>``)."""
    import datetime

    import numba

    threads = numba.get_num_threads()
    path = harness.RESULTS / f"{name}.json"
    command = shlex.join(["python", "-m", f"benchmarks.{name}", *sys.argv[1:]])
    record = {"date": datetime.datetime.now().isoformat(timespec="seconds"), "machine": machine(),
              "command": command, "threads": threads, "repeats": repeats, "rows": rows}
    path.write_text(json.dumps(record, indent=1) + "\n")
    print(f"wrote {path}")
    return path


def emit_rows(name: str, rows: list[dict], repeats: int, write: bool) -> None:
    """Print a standalone benchmark's rows; keep them (:func:`save_rows`) when ``write``
    (``--quick`` runs write nothing)."""
    for row in rows:
        print(row)
    if write:
        save_rows(name, rows, repeats)
