"""The package's layers, enforced: no import cycles, no private imports, no upward imports.

Every ``import`` in ``src/lanewise`` is read from the AST — function-local ones
included, since a cycle hidden inside a function is still a cycle.  The layer
order is the one ``docs/architecture.md`` describes; a module may import its own
layer or any layer below it.  Each rule is also checked to fail on a planted
violation, so the checker cannot silently pass.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent / "src" / "lanewise"

#: Lowest first.  A module belongs to the layer with the longest matching prefix (a
#: module name or a package); the package ``__init__`` (``lanewise``) matches only itself,
#: so a new package has no layer until it is given one here and in docs/architecture.md.
LAYERS = {
    "base": ("lanewise.version", "lanewise.errors", "lanewise.config", "lanewise.dtypes", "lanewise.pytree",
             "lanewise.runtime"),
    "plan": ("lanewise.plan",),
    "primitives": ("lanewise.primitives",),
    "lane": ("lanewise.lane", "lanewise.lanemath", "lanewise.random", "lanewise.spmd"),
    "autodiff": ("lanewise.autodiff",),
    "codegen": ("lanewise.codegen",),
    "backends": ("lanewise.backends",),
    "api": ("lanewise.api", "lanewise.reducing", "lanewise.progress", "lanewise.fuse"),
    "bridge": ("lanewise.bridge",),
    "frameworks": ("lanewise.jax", "lanewise.torch"),
    # the public surface imports every layer: lw.grad, lw.jax and lw.torch on first use
    "surface": ("lanewise", "lanewise.__main__", "lanewise.demo", "lanewise.demo_plot"),
}
ORDER = list(LAYERS)


def module_name(path: Path, root: Path = ROOT) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def layer_of(module: str) -> str | None:
    """The layer of ``module``, or None when no entry of :data:`LAYERS` names it."""
    matches = [p for names in LAYERS.values() for p in names
               if module == p or (p != "lanewise" and module.startswith(p + "."))]
    if not matches:
        return None
    best = max(matches, key=len)
    return next(layer for layer, names in LAYERS.items() if best in names)


def imports(sources: dict[str, tuple[str, bool]]):
    """``(importer, imported module, imported name or None, line)`` for every lanewise import."""
    modules = set(sources)
    for mod, (text, is_pkg) in sources.items():
        package = mod.split(".") if is_pkg else mod.split(".")[:-1]
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name.split(".")[0] == "lanewise":
                        yield mod, alias.name, None, node.lineno
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = ".".join(package[:len(package) - node.level + 1] + ([node.module] if node.module else []))
                else:
                    base = node.module or ""
                if base.split(".")[0] != "lanewise":
                    continue
                for alias in node.names:
                    full = f"{base}.{alias.name}"
                    if full in modules:
                        yield mod, full, None, node.lineno
                    else:
                        yield mod, base, alias.name, node.lineno


def read_sources(root: Path = ROOT) -> dict[str, tuple[str, bool]]:
    return {module_name(p, root): (p.read_text(), p.name == "__init__.py") for p in root.rglob("*.py")}


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def private_imports(sources) -> list[str]:
    """Imports of another module's private name (``from x import _y``), or of a private
    module from outside its own package."""
    bad = []
    for importer, module, name, line in imports(sources):
        if name is not None and _private(name) and module != importer:
            bad.append(f"{importer}:{line} imports {module}.{name}")
        hidden = [i for i, part in enumerate(module.split(".")) if _private(part)]
        if hidden:
            owner = ".".join(module.split(".")[:hidden[0]])  # the package the private module belongs to
            if not (importer == owner or importer.startswith(owner + ".")):
                bad.append(f"{importer}:{line} imports private module {module}")
    return bad


def upward_imports(sources) -> list[str]:
    bad = []
    for importer, module, _, line in imports(sources):
        if ORDER.index(layer_of(module)) > ORDER.index(layer_of(importer)):
            bad.append(f"{importer}:{line} ({layer_of(importer)}) imports {module} ({layer_of(module)})")
    return bad


def cycles(sources) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan), package
    ``__init__`` modules included (importing ``a.b`` runs ``a``)."""
    graph: dict[str, set[str]] = {m: set() for m in sources}
    for importer, module, _, _ in imports(sources):
        target = module
        while target not in graph and "." in target:
            target = target.rsplit(".", 1)[0]
        if target in graph and target != importer:
            graph[importer].add(target)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found = []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


# ----------------------------------------------------------------------------- the package


def test_every_module_has_a_layer():
    assert [mod for mod in read_sources() if layer_of(mod) is None] == []


def test_every_layer_entry_names_a_module():
    """An entry left behind by a move or a rename would give nothing a layer."""
    sources = read_sources()
    stale = [p for names in LAYERS.values() for p in names
             if not any(mod == p or mod.startswith(p + ".") for mod in sources)]
    assert stale == []


def test_layer_numbers_in_docstrings_are_the_order():
    """``Layer 4, renderers: ...`` opening a package's docstring counts from 0 as ORDER does."""
    stated = {mod: int(m[1]) for mod, (text, _) in read_sources().items()
              if (m := re.match(r"Layer (\d+),", ast.get_docstring(ast.parse(text)) or ""))}
    assert {"lanewise.plan", "lanewise.lane", "lanewise.codegen", "lanewise.backends"} <= set(stated)
    assert {mod: ORDER.index(layer_of(mod)) for mod in stated} == stated


def documented_layers(text: str) -> dict[str, tuple[str, ...]]:
    """The layer table of docs/architecture.md as :data:`LAYERS` spells it: a row
    ``| 2 lane | `lane/`, `lanemath/` | ...`` is ``"lane": ("lanewise.lane", "lanewise.lanemath")``,
    and `__init__` is the package itself."""
    rows = re.findall(r"^\| (\d+) (\w+) \| ([^|]*) \|", text, re.M)
    assert [int(n) for n, _, _ in rows] == list(range(len(rows))), "the table's layers are numbered 0, 1, ..."
    return {name: tuple("lanewise" if m == "__init__" else f"lanewise.{m.rstrip('/')}"
                        for m in re.findall(r"`([^`]+)`", modules))
            for _, name, modules in rows}


def test_the_documented_layers_are_the_enforced_ones():
    """docs/architecture.md's table is LAYERS, in order, module for module."""
    text = (ROOT.parent.parent / "docs" / "architecture.md").read_text()
    assert documented_layers(text) == LAYERS
    assert list(documented_layers(text)) == ORDER


def test_the_table_reader_sees_a_difference():
    row = "| 0 base | `version`, `runtime/` | x |\n| 1 api | `__init__`, `api` | y |\n"
    assert documented_layers(row) == {"base": ("lanewise.version", "lanewise.runtime"),
                                      "api": ("lanewise", "lanewise.api")}


def test_no_import_cycles():
    assert cycles(read_sources()) == []


def test_no_private_imports():
    assert private_imports(read_sources()) == []


def test_imports_follow_the_layer_order():
    assert upward_imports(read_sources()) == []


# ----------------------------------------------------------------------------- the checker itself


@pytest.fixture
def planted():
    sources = read_sources()
    return dict(sources)


def test_a_planted_cycle_is_found(planted):
    text, is_pkg = planted["lanewise.errors"]
    planted["lanewise.errors"] = (text + "\ndef f():\n    from .config import config\n", is_pkg)
    text, is_pkg = planted["lanewise.config"]
    planted["lanewise.config"] = (text + "\ndef g():\n    from . import errors\n", is_pkg)
    assert ["lanewise.config", "lanewise.errors"] in cycles(planted)


def test_a_planted_private_import_is_found(planted):
    text, is_pkg = planted["lanewise.api"]
    planted["lanewise.api"] = (text + "\nfrom .backends.cpu.map import _render\n", is_pkg)
    assert any("_render" in line for line in private_imports(planted))
    planted["lanewise.api"] = (text + "\nfrom .random import _core\n", is_pkg)
    assert any("private module lanewise.random._core" in line for line in private_imports(planted))


def test_a_planted_upward_import_is_found(planted):
    text, is_pkg = planted["lanewise.plan.schedule"]
    planted["lanewise.plan.schedule"] = (text + "\ndef h():\n    from ..backends import cpu\n", is_pkg)
    assert any(line.startswith("lanewise.plan.schedule:") for line in upward_imports(planted))
