"""The repository is self-contained (issue 16, item 4): every relative link in
README, BENCHMARKS and docs/ resolves to a file in the repository, and no text
file refers to a place outside it (the ../shared/ folder of the developers'
machines, a DESIGN.md or WORKLOADS.md that a clone does not have)."""

from __future__ import annotations

import ast
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


def _benchmarks():
    import sys

    sys.path.insert(0, str(ROOT))
    import benchmarks.commands
    import benchmarks.figures
    import benchmarks.quote
    import benchmarks.report

    return benchmarks


def test_no_measured_figure_is_left_unquoted():
    """Every measured figure on README.md and docs/ comes from a results file through
    a quote marker (benchmarks/figures.py states what is not a measured figure);
    two pages gave two values for one thing before (issue 45)."""
    figures = _benchmarks().figures
    assert figures.unmarked() == [], "quote these from benchmarks/results/ (benchmarks/quote.py) or drop them"
    assert figures.stale_allowances() == [], "an ALLOWED phrase left its page: remove the entry"


@pytest.mark.parametrize("text, found", [
    ("W2 ran 0.15× Numba", ["0.15×"]),
    ("took 0.1-0.3 s and 1–2 ms", ["0.3 s", "2 ms"]),
    ("22 GB/s, 16% off, 2,134 tests, 5.1 ns, 0.52 ulp, 3x faster", ["22 GB/s", "16%", "2,134 tests", "5.1 ns",
                                                                     "0.52 ulp", "3x"]),
    ("bar ≤ 0.4×, within 1 ulp, < 1 ulp, bar: 0.2×, a bar of 20 µs", []),
    ("a 6000×6000 grid, 200000 × 256 rows, 2×10⁷ lanes, 4 x uint32", []),
    ("`x * 2 in 5 s` and <!--q full|W3|lanewise-->0.0036 s<!--/q-->", []),
    ("```\nt = 5 s\n```\nafter 3 s", ["3 s"]),
    ("<!-- accuracy:begin -->\n| sin | 0.5 ulp |\n<!-- accuracy:end -->", []),
])
def test_the_figure_scanner_finds_measured_figures_only(text, found):
    assert [f.text for f in _benchmarks().figures.unmarked_in(text)] == found


def test_benchmarks_md_is_the_rendering_of_its_results_file():
    """BENCHMARKS.md is rendered from benchmarks/results/full.json and benchmarks/sections/:
    a hand edit, or a results file it was not rendered from, fails here."""
    report = _benchmarks().report
    doc = report.with_runs(report.read_json(ROOT / "benchmarks" / "results" / "full.json"))
    assert report.markdown(doc) == (ROOT / "BENCHMARKS.md").read_text(), \
        "run python -m benchmarks.run --render benchmarks/results/full.json"


def test_every_commands_figure_names_its_machine_date_and_command():
    import json

    path = ROOT / "benchmarks" / "results" / "commands.json"
    rows = json.loads(path.read_text())["rows"]
    assert {"demo", "tests"} <= {r["workload"] for r in rows}
    for row in rows:
        assert row["machine"] and row["date"] and row["command"], row


def test_the_figure_modules_examples_hold():
    """quote's one rule per unit, the scanner's rules and the suite-log parser, as their docstrings show them."""
    import doctest

    b = _benchmarks()
    for module in (b.quote, b.figures, b.commands):
        failed, tried = doctest.testmod(module)
        assert tried and not failed, module.__name__


def test_a_suite_log_gives_its_counts_and_duration_and_replaces_only_its_row(tmp_path):
    commands = _benchmarks().commands
    log = tmp_path / "suite.log"
    log.write_text("....\n= 2 failed, 2131 passed, 40 skipped, 3 warnings in 1402.55s (0:23:22) =\n")
    row = commands.suite_row(log, "python3 -m pytest -q")
    assert row["passed_n"] == 2131 and row["failed_n"] == 2 and row["median_s"] == {"wall": 1402.55}
    path = tmp_path / "commands.json"
    path.write_text('{"rows": [{"workload": "demo", "x": 1}, {"workload": "suite", "x": 2}]}')
    assert commands.merged([row], path)["rows"] == [{"workload": "demo", "x": 1}, row]
    with pytest.raises(ValueError, match="no pytest summary"):
        commands.suite_summary("collected 3 items\n")


#: benchmarks/sections/75_threads.md: benchmarks.threads's render of threads.json (against the run
#: before it), then each later run appended with ``--render --out FILE --append TITLE``, in this order.
THREADS_APPENDED = ["threads-realworld13", "threads-public", "threads-cold", "threads-realworld", "threads-2core"]


def test_the_sections_scripts_write_are_the_rendering_of_their_results_files():
    """60_dask_scale.md, 70_realworld.md and 75_threads.md hold no figure of their own: rendered
    again from benchmarks/results/, they come out the same."""
    import json
    import re

    _benchmarks()
    from benchmarks import dask_scale, threads
    from benchmarks.realworld import run

    results, sections = ROOT / "benchmarks" / "results", ROOT / "benchmarks" / "sections"
    load = lambda name: json.loads((results / f"{name}.json").read_text())  # noqa: E731
    assert run.markdown(load("realworld")) == (sections / "70_realworld.md").read_text()
    assert dask_scale.markdown(load("dask_scale")) == (sections / "60_dask_scale.md").read_text()
    written = (sections / "75_threads.md").read_text()
    doc = load("threads")
    label = re.search(r"^Before and after at \d+ threads \((.*); the same machine\):$", written, re.M)[1]
    doc["before"] = {"label": label, "doc": load("threads-6eb9c30")}
    text = threads.markdown(doc)
    for name, title in zip(THREADS_APPENDED, re.findall(r"^### (.*)$", written, re.M), strict=True):
        text += "\n" + threads.markdown(load(name)).replace("## Thread scaling", f"### {title}", 1)
    assert text == written


@pytest.mark.parametrize("name", ["accuracy", "throughput"])
def test_lanemath_tables_are_the_rendering_of_their_results_files(name):
    """docs/lanemath.md's accuracy and throughput tables (and BENCHMARKS.md's copies) are
    rendered from benchmarks/results/lanemath_<name>.json by the script that measures them."""
    import importlib

    from lanewise.lanemath import _results

    if not _results.path(name).exists():
        pytest.skip(f"no {_results.path(name).name} yet: python -m lanewise.lanemath.{name} writes it")
    script = importlib.import_module(f"lanewise.lanemath.{name}")
    assert _results.block(name) == "\n".join(script.table(_results.load(name)))


# ----------------------------------------------------------------------------- docs/architecture.md names what exists

ARCHITECTURE = ROOT / "docs" / "architecture.md"
PACKAGE = ROOT / "src" / "lanewise"

#: Names the page describes ahead of the code (work on another branch).  Each must still
#: be missing here: once it exists the entry goes, and the page's name is checked.
PENDING: set[str] = set()


def _top_level(pending=PENDING) -> list[str]:
    """Top-level modules and packages of lanewise, and those pending names start with."""
    here = {p.stem for p in PACKAGE.iterdir() if p.suffix == ".py" or (p / "__init__.py").exists()}
    return sorted(here | {name.split("/")[0] for name in pending})


def references(text: str, pending=PENDING) -> set[str]:
    """What a page names in the package or the repository: paths (``lane/source.py``,
    ``backends/cpu/``, ``plan/program.bind_call``, ``tests/corpus.py``, with or without
    ``src/lanewise/``) anywhere, ``lanewise.x.y`` anywhere, and ``module.name`` in code
    spans whose first part is a top-level module or package (``backends.select``; not
    ``jax.`` or ``torch.``, which name the frameworks).  Placeholders (``backends/<name>/``) are skipped."""
    tops = "|".join(_top_level(pending))
    found = set(re.findall(rf"(?<![\w./<-])(?:src/lanewise/)?((?:{tops})/[\w./*<>]*)", text))
    found |= set(re.findall(r"(?<![\w./-])((?:tests|docs|benchmarks)/[\w./*<>]*)", text))
    found |= set(re.findall(r"(?<![\w./-])(lanewise(?:\.\w+)+)", text))
    spans = "|".join(t for t in _top_level(pending) if t not in ("jax", "torch"))  # jax.vmap: JAX's own
    for span in re.findall(r"`([^`\n]+)`", text):
        dotted = re.fullmatch(rf"((?:{spans})(?:\.\w+)+)(?:\(.*\))?", span)
        if dotted:
            found.add(dotted[1])
    return {r.rstrip(".") for r in found if "<" not in r and r.rstrip(".")}


def _names(path: Path) -> dict[str, ast.AST]:
    """A module's top-level names (definitions, assignments, imports; under ``if``/``try`` too)."""
    names: dict[str, ast.AST] = {}
    body = list(ast.parse(path.read_text()).body)
    while body:
        node = body.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names[node.name] = node
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                for name in ast.walk(target):
                    if isinstance(name, ast.Name):
                        names[name.id] = node
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                names[(alias.asname or alias.name).split(".")[0]] = node
        elif isinstance(node, (ast.If, ast.Try)):
            body += node.body + node.orelse + getattr(node, "handlers", []) + getattr(node, "finalbody", [])
        elif isinstance(node, ast.ExceptHandler):
            body += node.body
    return names


def _has_attributes(module: Path, attributes: list[str]) -> bool:
    """``module`` (a file or a package folder) has ``attributes[0]`` (a name or a
    submodule), and a class so named has ``attributes[1]``."""
    if not attributes:
        return True
    first, rest = attributes[0], attributes[1:]
    if module.is_dir():
        if (module / f"{first}.py").exists() or (module / first / "__init__.py").exists():
            return _has_attributes(module / first if (module / first).is_dir() else module / f"{first}.py", rest)
        module = module / "__init__.py"
    node = _names(module).get(first)
    if node is None:
        return False
    if rest and isinstance(node, ast.ClassDef):
        return rest[0] in {n.name for n in node.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))} | {
            t.id for n in node.body if isinstance(n, (ast.Assign, ast.AnnAssign))
            for t in (n.targets if isinstance(n, ast.Assign) else [n.target]) if isinstance(t, ast.Name)}
    return True


def resolves(reference: str, package: Path = PACKAGE, root: Path = ROOT) -> bool:
    """Whether a reference of :func:`references` names a file, folder or name that exists."""
    if reference.startswith("lanewise."):
        parts = reference.split(".")[1:]
        return _has_attributes(package, parts)
    if "/" not in reference and reference.endswith(".py"):  # a top-level module's file
        return (package / reference).exists()
    if "/" not in reference:  # module.name from a code span
        first, *attributes = reference.split(".")
        module = package / first if (package / first).is_dir() else package / f"{first}.py"
        return module.exists() and _has_attributes(module, attributes)
    base = root if reference.split("/")[0] in ("tests", "docs", "benchmarks") else package
    folders, last = reference.rsplit("/", 1)
    where = base / folders
    if "*" in last:
        return any(where.glob(last))
    if last == "" or last.endswith((".py", ".md", ".cpp", ".json", ".bin", ".ipynb")):
        return (where / last).exists()
    stem, *attributes = last.split(".")
    module = where / stem if (where / stem).is_dir() else where / f"{stem}.py"
    return module.exists() and _has_attributes(module, attributes)


def test_architecture_names_only_what_exists():
    """Every module, folder, test file and name docs/architecture.md mentions exists: the page
    omitted four packages and named moved modules before (issue 43)."""
    found = references(ARCHITECTURE.read_text())
    assert len(found) > 100  # the pattern reads the page
    assert sorted(r for r in found - PENDING if not resolves(r)) == []
    assert sorted(PENDING - found) == [], "a pending name left the page: drop it from PENDING"
    assert sorted(r for r in PENDING if resolves(r)) == [], "now merged: drop it from PENDING"


def test_the_reference_check_fails_on_missing_names():
    text = ("`plan/program.Call` `lanewise.api.vmap` `backends.select` `api.Mapped.__call__` lane/source.py "
            "tests/corpus.py `plan/program.NoSuch` lane/nothere.py `api.Mapped.nothing` lanewise.api.nothing "
            "tests/nothere.py `backends.nothing` backends/<name>/")
    found = references(text)
    assert "backends/<name>/" not in found
    assert {r for r in found if not resolves(r)} == {
        "plan/program.NoSuch", "lane/nothere.py", "api.Mapped.nothing", "lanewise.api.nothing", "tests/nothere.py",
        "backends.nothing"}


def _section(text: str, heading: str) -> str:
    start = text.index(heading)
    return text[start:text.find("\n## ", start + 1)]


def test_architecture_tree_has_every_top_level_module_and_package():
    """The folder tree names every module and package of lanewise (it lacked autodiff/,
    bridge/, jax/ and torch/)."""
    tree = _section(ARCHITECTURE.read_text(), "## The folder tree")
    listed = {m for m in re.findall(r"^  ([\w.]+?)(?:\.py|/)", tree, re.M)}
    assert sorted(set(_top_level({})) - listed) == []


def test_architecture_lists_the_modules_that_read_the_ast():
    """The page's list of modules importing ``ast`` is ``grep -rl "import ast" src/lanewise``."""
    section = _section(ARCHITECTURE.read_text(), "## Where the lane's Python is read today")
    bullets = section[section.index("\n- "):]
    listed = {r for r in references(bullets[:bullets.index("\n\n")]) if r.endswith(".py")}
    readers = {str(p.relative_to(PACKAGE)) for p in PACKAGE.rglob("*.py") if "import ast" in p.read_text()}
    assert sorted(listed ^ readers) == []
    assert re.search(r"That is (\d+) modules", section).group(1) == str(len(readers))  # the count it states
