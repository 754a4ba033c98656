"""Command line: ``python -m benchmarks.run [--quick] [--only W1,W2,dispatch,startup]``.

Runs the workloads' peers and lanewise side by side, prints the tables and writes
``BENCHMARKS.md`` (full suite) or ``benchmarks/results/<mode>.md`` (quick or partial
runs), raw JSON and a PNG under ``benchmarks/results/``.  A partial run (``--only``)
also merges into the saved results of its mode (``benchmarks/results/<mode>.json``,
replacing what it re-measured, each row keeping its own run stamp) and re-renders
that mode's document from the merged results: ``BENCHMARKS.md`` at full size,
``benchmarks/results/quick.md`` for ``--quick`` (``--no-merge`` skips this).  ``--render JSON`` re-renders
saved results without measuring (``--remark`` adds a line about the run's conditions).  Exit status 1 when a peer's
result disagrees with the reference (the benchmark itself would be wrong).
"""
from __future__ import annotations

import argparse
import datetime
import importlib
import os
import shlex
import shutil
import sys
import tempfile
import time
from pathlib import Path

if __package__ in (None, ""):  # `python benchmarks/run.py`
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    __package__ = "benchmarks"  # noqa: A001

from benchmarks import dispatch, harness, report, startup  # noqa: E402

WORKLOADS = {"W1": "benchmarks.w1_grid", "W2": "benchmarks.w2_fractal", "W3": "benchmarks.w3_backtest",
             "W5": "benchmarks.w5_mapreduce", "W6": "benchmarks.w6_first_pass",
             "W7": "benchmarks.w7_csr_gather", "MC": "benchmarks.mc_option"}
EXTRAS = {"dispatch": dispatch, "startup": startup}


def parse(argv) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m benchmarks.run", description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="small sizes (whole run < 2 min)")
    p.add_argument("--only", default="", help="comma list of " + ",".join([*WORKLOADS, *EXTRAS]))
    p.add_argument("--repeats", type=int, default=5, help="timed calls per tool (>= 5)")
    p.add_argument("--no-memory", action="store_true", help="skip the per-tool memory subprocesses")
    p.add_argument("--md", type=Path, help="Markdown output (default: see module doc)")
    p.add_argument("--render", type=Path, metavar="JSON", help="measure nothing: re-render a results JSON")
    p.add_argument("--remark", help="a line about the run's conditions, shown in the Markdown")
    p.add_argument("--no-merge", action="store_true", help="partial runs: do not merge into <mode>.json")
    args = p.parse_args(argv)
    args.repeats = max(args.repeats, 5)
    return args


def selected(only: str) -> list[str]:
    known = {k.lower(): k for k in [*WORKLOADS, *EXTRAS]}
    picked = [s.strip().lower() for s in only.split(",") if s.strip()] or list(known)
    unknown = [s for s in picked if s not in known]
    if unknown:
        raise SystemExit(f"unknown in --only: {unknown}; choose from {list(known.values())}")
    return [known[s] for s in picked]


def ensure_cache_dir() -> str | None:
    """A private, initially empty LANEWISE_CACHE_DIR unless the caller set one."""
    if "LANEWISE_CACHE_DIR" in os.environ:
        return None
    folder = tempfile.mkdtemp(prefix="lw-bench-cache-")
    os.environ["LANEWISE_CACHE_DIR"] = folder
    return folder


def measure(names: list[str], mode: str, args, lw_ok) -> dict:
    doc = {"workloads": [], "dispatch": None, "startup": None}
    for name in names:
        if name in WORKLOADS:
            mod = importlib.import_module(WORKLOADS[name])
            doc["workloads"].append(harness.run_workload(mod, mode, args.repeats, lw_ok, not args.no_memory))
        else:
            doc[name] = EXTRAS[name].run(args.repeats, lw_ok, mode)
    return doc


def outputs(doc: dict, args) -> tuple[Path, Path]:
    """Markdown and JSON paths: BENCHMARKS.md only for the full suite at full size."""
    names = doc["selected"]
    whole = is_whole(names)
    stem = doc["mode"] if whole else f"{doc['mode']}-{'-'.join(names)}"
    md = args.md or (harness.REPO / "BENCHMARKS.md" if whole and not doc["quick"] else harness.RESULTS / f"{stem}.md")
    return md, harness.RESULTS / f"{stem}.json"


def is_whole(names: list[str]) -> bool:
    return set(names) >= {*WORKLOADS, *EXTRAS}


def merged_outputs(mode: str) -> tuple[Path, Path]:
    """Where a mode's merged results live: its JSON, and BENCHMARKS.md or <mode>.md."""
    md = harness.REPO / "BENCHMARKS.md" if mode == "full" else harness.RESULTS / f"{mode}.md"
    return md, harness.RESULTS / f"{mode}.json"


def peer_failures(doc: dict) -> list[str]:
    return [f"{wl['id']} {r['tool']}" for wl in doc["workloads"] for r in wl["rows"]
            if r["status"] in ("wrong", "error") and not harness.is_lanewise(r["tool"])]


def run_suite(args, argv) -> dict:
    names, mode = selected(args.only), "quick" if args.quick else "full"
    own_cache = ensure_cache_dir()
    t0, load0 = time.perf_counter(), os.getloadavg()
    lw_ok = harness.lanewise_state()
    print(f"lanewise: {'available ' + lw_ok[1] if lw_ok[0] else lw_ok[1]}", flush=True)
    try:
        doc = measure(names, mode, args, lw_ok)
    finally:
        if own_cache:
            shutil.rmtree(own_cache, ignore_errors=True)
    doc.update(mode=mode, quick=args.quick, selected=names, repeats=args.repeats, timing="rounds",
               wall_s=time.perf_counter() - t0, load_before=load0, load_after=os.getloadavg(),
               date=datetime.datetime.now().isoformat(timespec="seconds"), machine=report.machine(),
               versions=report.versions(), git=report.git_state(), lanewise=lw_ok[1] if not lw_ok[0]
               else f"importable ({lw_ok[1]})",
               command=shlex.join(["python", "-m", "benchmarks.run", *argv]))
    return doc


def write(doc: dict, md: Path, js: Path, show: bool = True) -> None:
    png = js.with_suffix(".png")
    doc.pop("plot", None)
    if report.plot(doc, png):
        doc["plot"] = os.path.relpath(png, md.parent)
    report.write_json(doc, js)
    text = report.markdown(doc)
    md.write_text(text)
    print(("\n" + text if show else "") + f"\nwrote {md}, {js}" + (f", {png}" if doc.get("plot") else ""))


def publish(doc: dict, args) -> None:
    doc = report.with_runs(doc)
    write(doc, *outputs(doc, args))
    if args.render or args.no_merge or is_whole(doc["selected"]):
        return
    md, js = merged_outputs(doc["mode"])
    merged = report.merge(report.read_json(js), doc, list(WORKLOADS)) if js.exists() else doc
    write(merged, md, js, show=False)


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parse(argv)
    doc = report.read_json(args.render) if args.render else run_suite(args, argv)
    if args.remark:  # about this run, or about the latest run of a merged document
        target = doc["runs"][max(doc["runs"], key=lambda r: int(r[1:]))] if doc.get("runs") else doc
        target["remarks"] = [*(target.get("remarks") or []), args.remark]
    publish(doc, args)
    failures = peer_failures(doc)
    if failures:
        print("PEER RESULTS DISAGREE OR FAILED:", ", ".join(failures), file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
