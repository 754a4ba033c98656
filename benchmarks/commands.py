"""The figures README.md gives for its two commands, measured: ``benchmarks/results/commands.json``.

* ``--demo``: command 1's demo (``python3 -m lanewise demo``) timed in a fresh
  process, its wall time from start to exit (the install is not in it);
* ``--count``: the number of tests command 2 runs (``pytest --collect-only -q``);
* ``--suite-log FILE``: the duration and counts of a full suite run, read from the
  summary line of its pytest output (``2100 passed, 30 skipped in 1452.31s``);
* ``--fast-log FILE``: the same of a fast tier run (command 2b, ``-m "not slow"``).

Each row keeps the machine, date and command of its own measurement; the rows of
a run replace those of the same name and keep the others.  README.md quotes them
through ``benchmarks/quote.py`` (source ``commands``).

    python -m benchmarks.commands --demo --count
    python -m benchmarks.commands --suite-log suite.log --suite-command "python3 -m pytest -q -n logical"
    python -m benchmarks.commands --fast-log fast.log

Example:
    >>> suite_summary("== 2100 passed, 31 skipped, 2 xfailed in 1452.31s (0:24:12) ==")
    {'passed_n': 2100, 'skipped_n': 31, 'xfailed_n': 2, 'wall': 1452.31}
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks import report
from benchmarks.quote import RESULTS, ROOT

PATH = RESULTS / "commands.json"
DEMO = [sys.executable, "-m", "lanewise", "demo"]
COLLECT = [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:xdist"]
SUMMARY = re.compile(r"(?P<counts>(?:\d+ \w+(?:, )?)+) in (?P<wall>[\d.]+)s")


def _stamp(command: list[str] | str) -> dict:
    """Where, when and how a row was measured (the other results files keep the same), and
    how busy the machine was (a demo timed beside other work takes longer)."""
    return {"machine": report.machine(), "load_average_at_start": round(os.getloadavg()[0], 2),
            "date": datetime.datetime.now().isoformat(timespec="minutes"),
            "command": command if isinstance(command, str) else " ".join(["python3", *command[1:]])}


def _this_checkout() -> dict:
    """The environment with this checkout's ``src`` first, so that the lanewise timed is this one."""
    paths = [str(ROOT / "src"), *filter(None, [os.environ.get("PYTHONPATH")])]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(paths)}


def time_demo() -> dict:
    """Command 1's demo in a fresh process, in a scratch folder (it saves its plot in the
    current folder) with an empty kernel cache, as on a fresh machine; a failed demo raises
    (the time of a failure is no figure)."""
    with tempfile.TemporaryDirectory() as scratch:
        env = {**_this_checkout(), "LANEWISE_CACHE_DIR": os.path.join(scratch, "kernel-cache")}
        start = time.perf_counter()
        subprocess.run(DEMO, cwd=scratch, env=env, check=True, capture_output=True)
        wall = time.perf_counter() - start
    return {"workload": "demo", **_stamp(DEMO), "median_s": {"wall": wall}}


def count_tests() -> dict:
    """The number of tests pytest collects, from its last line (``2134 tests collected in 9.1s``)."""
    out = subprocess.run(COLLECT, cwd=ROOT, env=_this_checkout(), check=True, capture_output=True,
                         text=True).stdout
    last = out.strip().splitlines()[-1]
    m = re.match(r"(\d+) tests? collected", last)
    if not m:
        raise ValueError(f"pytest --collect-only printed no count: {last!r}")
    return {"workload": "tests", **_stamp(COLLECT), "tests_n": int(m[1])}


def suite_summary(text: str) -> dict:
    """The counts (``passed_n``, ...) and wall time of pytest's last summary line in ``text``."""
    found = SUMMARY.findall(text)
    if not found:
        raise ValueError("no pytest summary line ('N passed ... in X s') in the suite log")
    counts, wall = found[-1]
    out = {f"{word}_n": int(n) for n, word in (part.split() for part in counts.split(", "))}
    return {**out, "wall": float(wall)}


def suite_row(log: Path, command: str, workload: str = "suite") -> dict:
    """The ``workload`` row (``suite``, or ``fast`` for the fast tier) of a run's pytest output."""
    summary = suite_summary(Path(log).read_text(errors="replace"))
    wall = summary.pop("wall")
    return {"workload": workload, **_stamp(command), **summary, "median_s": {"wall": wall}}


def merged(rows: list[dict], path: Path = PATH) -> dict:
    """The results file with ``rows`` replacing the rows of the same workload."""
    old = json.loads(path.read_text())["rows"] if path.exists() else []
    names = {r["workload"] for r in rows}
    return {"rows": [r for r in old if r["workload"] not in names] + rows}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--demo", action="store_true", help="time command 1's demo")
    p.add_argument("--count", action="store_true", help="count the tests (pytest --collect-only)")
    p.add_argument("--suite-log", type=Path, metavar="FILE", help="a full suite run's pytest output")
    p.add_argument("--suite-command", default="python3 -m pytest -q -n logical --maxprocesses 4",
                   help="the command that wrote --suite-log (recorded with it)")
    p.add_argument("--fast-log", type=Path, metavar="FILE", help="a fast tier run's pytest output")
    p.add_argument("--fast-command", default='python3 -m pytest -q -n logical --maxprocesses 4 -m "not slow"',
                   help="the command that wrote --fast-log (recorded with it)")
    args = p.parse_args(argv)
    rows = ([time_demo()] if args.demo else []) + ([count_tests()] if args.count else [])
    if args.suite_log:
        rows.append(suite_row(args.suite_log, args.suite_command))
    if args.fast_log:
        rows.append(suite_row(args.fast_log, args.fast_command, "fast"))
    if not rows:
        p.error("nothing to measure: pass --demo, --count, --suite-log FILE or --fast-log FILE")
    PATH.write_text(json.dumps(merged(rows), indent=1) + "\n")
    print(json.dumps(rows, indent=1), f"\nwrote {PATH.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
