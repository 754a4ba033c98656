"""The repository is self-contained (issue 16, item 4): every relative link in
README, BENCHMARKS and docs/ resolves to a file in the repository, and no text
file refers to a place outside it (the ../shared/ folder of the developers'
machines, a DESIGN.md or WORKLOADS.md that a clone does not have)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", ROOT / "BENCHMARKS.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def tracked_text_files() -> list[Path]:
    try:
        names = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):  # not a git checkout: the source tree
        return [p for p in ROOT.rglob("*") if p.suffix in (".py", ".md", ".toml") and ".git" not in p.parts]
    return [ROOT / n for n in names.split() if n.endswith((".py", ".md", ".toml", ".cfg", ".txt"))]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve_inside_the_repository(page):
    for target in LINK.findall(page.read_text()):
        if re.match(r"[a-z]+:", target) or target.startswith("#"):
            continue  # a URL or an anchor in the page
        path = (page.parent / target.split("#")[0]).resolve()
        assert path.is_relative_to(ROOT), f"{page.name} links outside the repository: {target}"
        assert path.exists(), f"{page.name} links to {target}, which does not exist"


def test_no_file_refers_outside_the_repository():
    outside = re.compile(r"\.\./shared|\bDESIGN\.md|(?<!docs/)\bWORKLOADS\.md")
    found = [f"{p.relative_to(ROOT)}:{n}" for p in tracked_text_files() if p.exists() and p != Path(__file__)
             for n, line in enumerate(p.read_text(errors="replace").splitlines(), 1) if outside.search(line)]
    assert not found, f"references to files outside the repository: {found}"


def test_every_quoted_figure_is_the_one_in_the_results_files():
    """README and docs quote benchmark figures through markers (benchmarks/quote.py);
    each must equal the figure its results file holds (they disagreed before)."""
    import sys

    sys.path.insert(0, str(ROOT))
    from benchmarks import quote

    assert sum(len(quote.MARK.findall(p.read_text())) for p in quote.PAGES) >= 20
    assert quote.differences() == [], "run python -m benchmarks.quote after the benchmarks"
