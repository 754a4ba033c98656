"""lanewise's own bytecode kept in its cache directory when Python writes none
(runtime/bytecode.py): used when it matches the source, never when it does not."""

from __future__ import annotations

import importlib
import importlib.util
import json
import marshal
import os
import subprocess
import sys
from pathlib import Path

import pytest

from lanewise.runtime import bytecode


@pytest.fixture
def package(tmp_path, monkeypatch):
    """A package ``lwbc_pkg`` with a module ``mod`` (``VALUE = 1``), on sys.path,
    bytecode writing off; a function to import ``lwbc_pkg.mod`` afresh."""
    root = tmp_path / "src" / "lwbc_pkg"
    root.mkdir(parents=True)
    (root / "__init__.py").write_text("")
    (root / "mod.py").write_text("VALUE = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path / "src"))
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    monkeypatch.setattr(sys, "meta_path", list(sys.meta_path))
    cache = tmp_path / "cache"
    finder = bytecode.install("lwbc_pkg", str(root), str(cache))

    def fresh():
        for name in ("lwbc_pkg.mod", "lwbc_pkg"):
            sys.modules.pop(name, None)
        importlib.invalidate_caches()
        return importlib.import_module("lwbc_pkg.mod")

    yield root, finder, fresh
    for name in ("lwbc_pkg.mod", "lwbc_pkg"):
        sys.modules.pop(name, None)


def _pyc(finder) -> str:
    return os.path.join(finder.root, "lwbc_pkg.mod.pyc")


def test_first_import_compiles_and_keeps_the_code(package):
    root, finder, fresh = package
    mod = fresh()
    assert mod.VALUE == 1
    assert isinstance(mod.__spec__.loader, bytecode.CachedSourceLoader)
    assert os.path.isfile(_pyc(finder)) and mod.__cached__ == _pyc(finder)
    assert not (root / "__pycache__").exists()  # Python's own switch is still obeyed


def test_a_later_import_runs_the_kept_code(package):
    root, finder, fresh = package
    fresh()
    # Same header (it matches the source), other code: only a loader that reads the file sees 2.
    with open(_pyc(finder), "rb") as f:
        header = f.read(16)
    with open(_pyc(finder), "wb") as f:
        f.write(header + marshal.dumps(compile("VALUE = 2\n", str(root / "mod.py"), "exec")))
    assert fresh().VALUE == 2


def test_an_edited_source_is_never_run_from_stale_code(package):
    root, finder, fresh = package
    fresh()
    stat = os.stat(root / "mod.py")
    (root / "mod.py").write_text("VALUE = 7\n")  # same size, same modification time
    os.utime(root / "mod.py", ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert fresh().VALUE == 7
    assert fresh().VALUE == 7  # and the kept code is now the new one


@pytest.mark.parametrize("damage", [b"", b"\x00" * 40, "truncated"])
def test_a_damaged_file_is_compiled_again(package, damage):
    root, finder, fresh = package
    fresh()
    with open(_pyc(finder), "rb") as f:
        data = f.read()
    with open(_pyc(finder), "wb") as f:
        f.write(data[:20] if damage == "truncated" else damage)
    assert fresh().VALUE == 1


def test_an_unwritable_cache_only_costs_a_compile(package, monkeypatch):
    root, finder, fresh = package
    monkeypatch.setattr(finder, "root", str(root / "mod.py" / "not-a-directory"))
    assert fresh().VALUE == 1


def test_nothing_changes_while_python_writes_bytecode(package, monkeypatch):
    root, finder, fresh = package
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    mod = fresh()
    assert type(mod.__spec__.loader) is importlib.machinery.SourceFileLoader
    assert not os.path.exists(_pyc(finder))


def test_the_folders_are_private(package, tmp_path):
    root, finder, fresh = package
    fresh()
    cache = tmp_path / "cache"
    for folder in [cache, *Path(finder.root).relative_to(cache).parents[:-1]]:
        path = folder if folder.is_absolute() else cache / folder
        assert path.stat().st_mode & 0o077 == 0, path
    assert Path(finder.root).stat().st_mode & 0o077 == 0


def test_a_folder_others_can_write_is_not_used(tmp_path, monkeypatch):
    """Bytecode is code: a planted file with the right hash would run."""
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    monkeypatch.setattr(sys, "meta_path", list(sys.meta_path))
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    assert bytecode.install("lwbc_other", str(tmp_path), str(shared)) is None
    assert not any(isinstance(f, bytecode.BytecodeFinder) and f.prefix == "lwbc_other." for f in sys.meta_path)


def test_install_is_idempotent(package):
    root, finder, fresh = package
    assert bytecode.install("lwbc_pkg", str(root), "elsewhere") is finder
    assert sum(f is finder for f in sys.meta_path) == 1


_PROBE = """
import importlib.util, json, sys, lanewise, lanewise.api
from lanewise.runtime.bytecode import CachedSourceLoader
loader = lanewise.api.__spec__.loader
beside = importlib.util.cache_from_source(lanewise.api.__file__)
print(json.dumps({"cached_loader": isinstance(loader, CachedSourceLoader), "beside": beside,
                  "cached": lanewise.api.__cached__}))
"""


def test_lanewise_itself_under_pythondontwritebytecode(tmp_path):
    """A fresh process keeps lanewise's code in the cache directory unless the
    installer wrote ``.pyc`` files beside the sources."""
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1", LANEWISE_CACHE_DIR=str(tmp_path))
    env.pop("LANEWISE_DISK_CACHE", None)
    runs = [json.loads(subprocess.run([sys.executable, "-c", _PROBE], env=env, check=True,
                                      capture_output=True, text=True).stdout) for _ in range(2)]
    for run in runs:
        if os.path.exists(run["beside"]):
            assert not run["cached_loader"] and run["cached"] == run["beside"]
        else:
            assert run["cached_loader"] and run["cached"].startswith(str(tmp_path / "bytecode"))
            assert os.path.isfile(run["cached"])


def _python_pyc(root: Path) -> str:
    """Write ``mod.py``'s ``__pycache__`` file as Python (timestamp-based) would."""
    import py_compile

    path = importlib.util.cache_from_source(str(root / "mod.py"))
    py_compile.compile(str(root / "mod.py"), cfile=path, doraise=True,
                       invalidation_mode=py_compile.PycInvalidationMode.TIMESTAMP)
    return path


def test_an_installed_pyc_is_read_by_python(package):
    root, finder, fresh = package
    beside = _python_pyc(root)
    mod = fresh()
    assert type(mod.__spec__.loader) is importlib.machinery.SourceFileLoader and mod.__cached__ == beside
    assert not os.path.exists(_pyc(finder))


def test_a_stale_pyc_beside_the_source_does_not_stop_the_cache(package):
    """A checkout edited after a process wrote ``__pycache__`` (without the switch):
    Python would compile that module from source in every process."""
    root, finder, fresh = package
    _python_pyc(root)
    (root / "mod.py").write_text("VALUE = 3  # edited\n")
    mod = fresh()
    assert mod.VALUE == 3
    assert isinstance(mod.__spec__.loader, bytecode.CachedSourceLoader) and os.path.isfile(_pyc(finder))


@pytest.mark.parametrize("checked", [True, False])
def test_hash_based_pycs_beside_the_source(package, checked):
    import py_compile

    root, finder, fresh = package
    mode = py_compile.PycInvalidationMode.CHECKED_HASH if checked else py_compile.PycInvalidationMode.UNCHECKED_HASH
    beside = importlib.util.cache_from_source(str(root / "mod.py"))
    py_compile.compile(str(root / "mod.py"), cfile=beside, doraise=True, invalidation_mode=mode)
    (root / "mod.py").write_text("VALUE = 5  # edited\n")
    mod = fresh()
    if checked:  # stale by its hash: ours
        assert mod.VALUE == 5 and isinstance(mod.__spec__.loader, bytecode.CachedSourceLoader)
    else:  # Python runs an unchecked one as it is, and so do we
        assert mod.VALUE == 1 and mod.__cached__ == beside
