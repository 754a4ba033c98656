"""Where lanemath's measurements go: a results file per measurement, and its table in docs/lanemath.md.

``python -m lanewise.lanemath.accuracy`` and ``python -m lanewise.lanemath.throughput``
merge their rows into ``benchmarks/results/lanemath_<name>.json`` (each row with the
date, machine and command that measured it, since a run may measure a few functions
only), then render the whole table from that file between the ``<!-- name:begin -->``
and ``<!-- name:end -->`` markers of docs/lanemath.md, so the page shows what the
file holds (tests/test_docs.py renders it again and compares).

Example:
    >>> sorted(stamp("python -m lanewise.lanemath.accuracy"))
    ['command', 'date', 'machine']
"""

from __future__ import annotations

import datetime
import json
import os
import platform
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]  # the repository of a source checkout
RESULTS = ROOT / "benchmarks" / "results"
DOC = ROOT / "docs" / "lanemath.md"


def machine() -> str:
    """The CPU's model and count, as the benchmark results record a machine."""
    model = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as fh:
            model = next((line.split(":", 1)[1].strip() for line in fh if line.startswith("model name")), model)
    except OSError:  # not Linux: the platform's name will do
        pass
    return f"{model}, {os.cpu_count()} CPUs"


def stamp(command: str) -> dict:
    return {"date": datetime.datetime.now().isoformat(timespec="minutes"), "machine": machine(),
            "command": command}


def path(name: str) -> Path:
    return RESULTS / f"lanemath_{name}.json"


def load(name: str) -> dict:
    """``{row key: row}`` of a results file (empty when it does not exist yet)."""
    return json.loads(path(name).read_text())["rows"] if path(name).exists() else {}


def merge(name: str, rows: dict, command: str) -> dict:
    """The results file with ``rows`` (stamped with this run) replacing those of the same key."""
    merged = {**load(name), **{key: {**row, **stamp(command)} for key, row in rows.items()}}
    RESULTS.mkdir(parents=True, exist_ok=True)
    path(name).write_text(json.dumps({"rows": merged}, indent=1) + "\n")
    return merged


def runs_line(rows: dict) -> str:
    """Which runs the table's rows come from: their dates, machines and commands."""
    runs = sorted({(r["date"], r["machine"], r["command"]) for r in rows.values()})
    return "Measured " + "; ".join(f"{d} on {m} (`{c}`)" for d, m, c in runs) + "."


def write_block(name: str, lines: list[str], doc: Path = DOC) -> None:
    """``lines`` between the ``name`` markers of ``doc`` (added at its end if missing)."""
    begin, end = f"<!-- {name}:begin -->", f"<!-- {name}:end -->"
    text = doc.read_text() if doc.exists() else "# lanemath\n"
    if begin not in text:
        text += f"\n{begin}\n{end}\n"
    head, rest = text.split(begin, 1)
    tail = rest.split(end, 1)[1]
    doc.write_text(head + begin + "\n" + "\n".join(lines) + "\n" + end + tail)


def block(name: str, doc: Path = DOC) -> str:
    """The text between the ``name`` markers of ``doc``."""
    return doc.read_text().split(f"<!-- {name}:begin -->", 1)[1].split(f"<!-- {name}:end -->", 1)[0].strip("\n")
