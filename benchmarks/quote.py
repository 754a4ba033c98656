"""Figures quoted in README.md and docs/*.md, from the results files of ``benchmarks/``.

A quoted figure sits between two markers that name where it comes from::

    W3 takes <!--q full|W3|lanewise-->0.0036 s<!--/q--> against ...
    about <!--q w4|W4|jax-jit/lanewise-fuse-->3.5×<!--/q--> faster

The key is ``results file | workload | name``; the name says what is printed,
one formatting rule per unit (:func:`formatted`):

* ``tool``: a median time in seconds, two significant digits (``0.0036 s``);
  100 s and over in minutes (``24 minutes``); ``tool@first``: its first call,
  compilation included;
* ``tool/tool``: the ratio of two medians, two significant digits (``3.5×``);
* ``name_us``: a time in microseconds, two significant digits (``0.23 µs``);
* an integer (a count: ``tests_n``, ``threads``), with thousands separators (``2,134``);
* ``run|date`` (``machine``, ``command``, ``threads``): the run's record, as text.

Results files (:data:`SOURCES`): ``full`` (``python -m benchmarks.run``),
``spmd`` (``python -m benchmarks.spmd``), ``w4`` (``python -m benchmarks.w4_fuse``),
``autodiff``, ``jax_bridge``, ``torch_bridge`` and ``random_draws`` (their
``benchmarks/*.py``), ``tpu`` (``benchmarks/device/tpu_all.sh`` on a TPU, then
``python -m benchmarks.device.tpu_results``), ``tile_bound`` (``python -m benchmarks.tile_bound``),
and ``commands`` (``python -m benchmarks.commands``: README's two commands).
Each results file records the machine, date and command of its run.

    python -m benchmarks.quote           # rewrite every quoted figure, then BENCHMARKS.md
    python -m benchmarks.quote --check   # list the figures that differ (tests/test_docs.py)

Example:
    >>> quoted("W3 <!--q full|W3|lanewise-->?<!--/q-->", {"full": {"W3": {"lanewise": 0.00361}}})
    'W3 <!--q full|W3|lanewise-->0.0036 s<!--/q-->'
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
SECTIONS = ROOT / "benchmarks" / "sections"
#: BENCHMARKS.md's sections that a benchmark script writes from its own results file
#: (re-run the script to change them; tests/test_docs.py renders 70 and 75 again from
#: theirs); the other sections are written by hand and quote.
WRITTEN = {"60_dask_scale.md": "python -m benchmarks.dask_scale --write",
           "70_realworld.md": "python -m benchmarks.realworld.run",
           "75_threads.md": "python -m benchmarks.threads"}
#: The pages that quote: README.md, docs/*.md and BENCHMARKS.md's hand-written sections.
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")),
         *(p for p in sorted(SECTIONS.glob("*.md")) if p.name not in WRITTEN)]
MARK = re.compile(r"<!--q (?P<key>[^>]*?)-->(?P<text>.*?)<!--/q-->")


def _full(data: dict) -> dict:
    """Medians by tool; ``tool@first`` is the tool's first call (compilation included)."""
    out = {}
    for w in data["workloads"]:
        rows = [r for r in w["rows"] if r.get("median_s")]
        out[w["id"]] = {**{r["tool"]: r["median_s"] for r in rows},
                        **{f"{r['tool']}@first": r["first_s"] for r in rows if r.get("first_s")}}
    return out


def _rows(data: dict) -> dict:
    """Rows of a workload, its medians by tool and its other numeric fields (``overhead_us``);
    ``run``: the run's date, machine, command and threads, as the file records them."""
    run = {k: data[k] for k in ("date", "machine", "command", "threads") if k in data}
    return {"run": run, **{r["workload"]: {**{k: v for k, v in r.items() if isinstance(v, (int, float, str))},
                                         **r.get("median_s", {})} for r in data["rows"]}}


def _w4(data: dict) -> dict:
    run = {k: data[k] for k in ("date", "machine", "command") if k in data}
    return {"run": run, **{name: dict(tools) for name, tools in data["medians"].items()}}


#: results file -> (path, loader to {workload: {tool: median seconds}}).
SOURCES = {
    "full": (RESULTS / "full.json", _full),
    "spmd": (RESULTS / "spmd.json", _rows),
    "w4": (RESULTS / "w4.json", _w4),
    "autodiff": (RESULTS / "autodiff.json", _rows),  # the same layout: rows of workload and medians
    "jax_bridge": (RESULTS / "jax_bridge.json", _rows),
    "torch_bridge": (RESULTS / "torch_bridge.json", _rows),
    "commands": (RESULTS / "commands.json", _rows),
    "random_draws": (RESULTS / "random_draws.json", _rows),
    "tpu": (RESULTS / "tpu.json", _rows),  # benchmarks/device/tpu_all.sh on the chip, via tpu_results.py
    "tile_bound": (RESULTS / "tile_bound.json", _rows),  # python -m benchmarks.tile_bound (iteration counts)
}


def load() -> dict:
    """Every results file that exists, as ``{file: {workload: {tool: median s}}}``."""
    out = {}
    for name, (path, loader) in SOURCES.items():
        if path.exists():
            out[name] = loader(json.loads(path.read_text()))
    return out


def formatted(name: str, values: dict) -> str:
    """The figure ``name`` of one workload's ``values``, printed by its unit's one rule.

    >>> formatted("a/b", {"a": 1.0, "b": 8.0}), formatted("x_us", {"x_us": 0.2304})
    ('0.12×', '0.23 µs')
    >>> formatted("tests_n", {"tests_n": 2134}), formatted("t", {"t": 36.6}), formatted("t", {"t": 1452.0})
    ('2,134', '37 s', '24 minutes')
    """
    if "/" in name:
        a, b = name.split("/")
        return f"{values[a] / values[b]:.2g}×"
    value = values[name]
    if isinstance(value, str):  # the run's date, machine or command
        return value
    if name.endswith("_us"):
        return f"{value:.2g} µs"
    if isinstance(value, int):  # a count: tests, threads
        return f"{value:,}"
    return f"{value / 60:.0f} minutes" if value >= 100 else f"{value:.2g} s"


def figure(key: str, results: dict) -> str:
    """The text of the figure ``key`` names (KeyError naming the key when it is missing)."""
    source, workload, name = (part.strip() for part in key.split("|"))
    try:
        return formatted(name, results[source][workload])
    except KeyError as e:
        raise KeyError(f"no figure for {key!r} in the {source} results ({e})") from None


def quoted(text: str, results: dict, missing: list | None = None) -> str:
    """``text`` with every marked figure rewritten from ``results`` (a figure
    they do not hold is left as it is and its key added to ``missing``)."""
    def one(m):
        try:
            return f"<!--q {m['key']}-->{figure(m['key'], results)}<!--/q-->"
        except KeyError:
            if missing is None:
                raise
            missing.append(m["key"])
            return m[0]
    return MARK.sub(one, text)


def differences(results: dict | None = None) -> list[str]:
    """``page: key: quoted -> from results`` for every figure that disagrees."""
    results = load() if results is None else results
    out = []
    for page in PAGES:
        for m in MARK.finditer(page.read_text()):
            try:
                want = figure(m["key"], results)
            except (KeyError, ValueError) as e:
                out.append(f"{page.relative_to(ROOT)}: {m['key']}: {e}")
                continue
            if m["text"] != want:
                out.append(f"{page.relative_to(ROOT)}: {m['key']}: {m['text']!r} -> {want!r}")
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="list differing figures; exit 1 if any")
    args = parser.parse_args(argv)
    results = load()
    if args.check:
        diff = differences(results)
        print("\n".join(diff) or "every quoted figure matches the results")
        return 1 if diff else 0
    missing: list = []
    for page in PAGES:
        text = page.read_text()
        new = quoted(text, results, missing)
        if new != text:
            page.write_text(new)
            print(f"updated {page.relative_to(ROOT)}")
    render_benchmarks()
    if missing:
        print(f"no results for {sorted(set(missing))}: run the benchmark that writes them")
    return 1 if missing else 0


def render_benchmarks() -> None:
    """BENCHMARKS.md again from ``results/full.json`` and the sections, as
    ``python -m benchmarks.run --render`` writes it (without redrawing the plot)."""
    from benchmarks import report

    text = report.markdown(report.with_runs(report.read_json(RESULTS / "full.json")))
    page = ROOT / "BENCHMARKS.md"
    if page.read_text() != text:
        page.write_text(text)
        print("updated BENCHMARKS.md")


if __name__ == "__main__":
    sys.exit(main())
