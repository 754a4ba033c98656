"""Measured figures on README.md, docs/ and BENCHMARKS.md that no results file holds.

Every measured figure on the pages that quote (:data:`benchmarks.quote.PAGES`:
README.md, docs/*.md and BENCHMARKS.md's hand-written sections; the sections
in :data:`benchmarks.quote.WRITTEN` are a script's output from its results
file) -- a time, a ratio, a speed-up, a percentage, a measured size or
bandwidth, an ulp error, a test count -- must be quoted from ``benchmarks/results/``
through a marker of ``benchmarks/quote.py`` (``<!--q key-->0.0036 s<!--/q-->``), so that
two pages cannot give two values for one thing and a re-run changes every page at once.  This module finds the
ones that are not.

A *figure* is a number glued or spaced to a unit of :data:`UNITS`.  What is
*not* a measured figure, by these rules and nothing looser:

* text in fenced code blocks, in inline code spans, inside a quote marker, or
  inside a block a script renders from its results file (``<!-- name:begin -->`` ...
  ``<!-- name:end -->``: lanemath's accuracy and throughput tables, which
  ``python -m lanewise.lanemath.accuracy`` and ``.throughput`` render from
  ``benchmarks/results/lanemath_*.json``);
* a size written as a product: ``×``/``x`` followed by a number
  (``6000×6000``, ``200000 × 256``, ``2×10⁷``); a ratio is a number glued to
  ``×``/``x`` (``0.15×``, ``3x``) and not followed by a number;
* a bar or a bound, stated rather than measured: the number follows ``≤``,
  ``<=``, ``<``, ``≥``, ``>=``, ``within``, ``at most``, ``below``, ``above``, ``bar:`` or
  ``bar of`` (``≤ 0.5×``, ``within 1 ulp`` -- a bound a test enforces);
* an entry of :data:`ALLOWED`: a setting or an input size, each with its reason.

    python -m benchmarks.figures    # list unmarked figures; exit 1 if any

Example:
    >>> [f.text for f in unmarked_in("W2 ran 0.15× Numba; bar ≤ 0.4×; a 6000×6000 grid")]
    ['0.15×']
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from pathlib import Path

from benchmarks.quote import MARK, PAGES, ROOT

UNITS = r"(?:ms|µs|us|ns|s|min|minutes?|seconds?|hours?|×|x|%|[KMGT]i?B(?:/s)?|ulps?|tests)"
FIGURE = re.compile(r"(?<![\w.,·^*/])(?<!\*\*-)(?P<num>\d(?:[\d,]*\d)?(?:\.\d+)?)(?P<gap>\s?)(?P<unit>" + UNITS
                    + r")(?![\w⁰¹²³⁴⁵⁶⁷⁸⁹])")
PRODUCT = re.compile(r"\s?\d")
BOUND = re.compile(r"(?:≤|<=|<|≥|>=|\bwithin|\bat most|\bbelow|\babove|\bbar:|\bbar of)\s*(?:about\s+)?$")
FENCE = re.compile(r"^\s*```")
CODE_SPAN = re.compile(r"`[^`\n]*`")
RENDERED = re.compile(r"<!-- (?P<name>[\w-]+):begin -->.*?<!-- (?P=name):end -->", re.S)

#: (page, exact text, reason): figures that are settings or input sizes, not measurements.
ALLOWED = [
    ("README.md", "for an `a` under 1 MiB", "the prefetch's size threshold, a setting"),
    ("docs/cuda.md", "at most 1 MiB", "SMALL_HOST_BYTES, a setting"),
    ("docs/dask.md", "(128 MiB by default)", "Dask's default chunk size, a setting"),
    ("docs/dask.md", "1.35 GB grid with two workers limited to 450 MB each",
     "the test's input size and its memory limit (tests/test_dask.py), set, not measured"),
    ("docs/autodiff.md", "4096 values (32 KB)", "the reverse-mode stack's initial size, a setting"),
    ("docs/autodiff.md", "runs in a 64 KB\n  budget", "the budget the test sets (tests/test_autodiff_adjoint.py)"),
    ("docs/autodiff.md", "runs in a 256 KB budget", "the budget the test sets (tests/test_autodiff_adjoint.py)"),
    ("docs/lanes.md", "1 ulp of float32 |", "the exact distance between the row's two printed values"),
    ("docs/safety.md", "a 1 GB table", "an example input size"),
    ("docs/safety.md", "A global array over 1 MB", "the threshold for compiling a global in, a setting"),
    ("docs/random.md", "4 x uint32", "a type: four 32-bit words"),
    ("benchmarks/sections/80_autodiff.md", "take 5 GB (10^7 × 64 float64)", "arithmetic: 10^7 × 64 × 8 bytes"),
    ("benchmarks/sections/80_autodiff.md", "on this 24 GB, 2-core", "the machine's memory, a specification"),
    ("docs/lanemath.md", "exact 53 x 240-bit", "a product's widths in bits"),
]


@dataclass(frozen=True)
class Figure:
    page: str
    line: int
    text: str
    context: str

    def __str__(self) -> str:
        return f"{self.page}:{self.line}: {self.text!r} in {self.context!r}"


def _blank(m: re.Match) -> str:
    """The match's text as spaces, newlines kept, so that line numbers and offsets stay."""
    return re.sub(r"[^\n]", " ", m[0])


def prose(text: str, allowed: list[str] = ()) -> str:
    """``text`` with everything that is not a measured figure's context blanked out:
    code blocks and spans, quote markers, rendered blocks and the ``allowed`` phrases."""
    for phrase in allowed:
        text = text.replace(phrase, " " * len(phrase))
    lines, fenced = [], False
    for line in text.split("\n"):
        if FENCE.match(line):
            fenced = not fenced
            line = ""
        lines.append(" " * len(line) if fenced else line)
    text = "\n".join(lines)
    for pattern in (RENDERED, MARK, CODE_SPAN):
        text = pattern.sub(_blank, text)
    return text


def _is_figure(text: str, m: re.Match) -> bool:
    if m["unit"] in ("×", "x") and (m["gap"] or PRODUCT.match(text, m.end())):
        return False  # a product (6000×6000, 4 x uint32) or a spaced size, not a ratio
    return not BOUND.search(text, max(0, m.start() - 24), m.start())


def unmarked_in(text: str, page: str = "", allowed: list[str] = ()) -> list[Figure]:
    """The measured figures of ``text`` outside markers and outside the rules' exceptions."""
    clean = prose(text, allowed)
    found = []
    for m in FIGURE.finditer(clean):
        if _is_figure(clean, m):
            line = clean.count("\n", 0, m.start()) + 1
            found.append(Figure(page, line, m[0], text.split("\n")[line - 1].strip()[:120]))
    return found


def allowed_on(page: str) -> list[str]:
    return [phrase for p, phrase, _ in ALLOWED if p == page]


def unmarked(pages: list[Path] = PAGES) -> list[Figure]:
    """Every unmarked measured figure on ``pages`` (the pages that quote, by default)."""
    out = []
    for path in pages:
        name = str(path.relative_to(ROOT))
        out += unmarked_in(path.read_text(), name, allowed_on(name))
    return out


def stale_allowances() -> list[str]:
    """Entries of :data:`ALLOWED` whose text is no longer on their page (the list must not rot)."""
    return [f"{page}: {phrase!r}" for page, phrase, _ in ALLOWED
            if phrase not in (ROOT / page).read_text()]


def main() -> int:
    found = unmarked()
    print("\n".join(map(str, found)) or "every measured figure is quoted from a results file")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
