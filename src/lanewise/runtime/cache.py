"""The on-disk cache of generated kernel modules.

Numba cannot cache ``exec``-generated code, so each kernel is a real module file
``lw_<key>.py`` (Numba keeps its object code beside it, in ``__pycache__``) plus
``lw_<key>.meta`` (the lane's result type and a checksum of the source).  The
key hashes everything the code depends on: the lane's fingerprint, the program
signature, and the versions of lanewise, Numba, NumPy and Python.

Files are created atomically (write a temporary file, then ``os.link`` it into
place, which fails if another process got there first), so concurrent writers
are safe and a reader never sees half a file.  An entry that does not load —
truncated, unpicklable, checksum mismatch — is deleted and rebuilt.

Example:
    >>> p = entry_dir()
    >>> p.name.startswith("py3")
    True
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import os
import pickle
import sys
import tempfile
from pathlib import Path
from types import ModuleType

import numba
import numpy as np

from ..version import __version__
from ..config import config


def entry_dir() -> Path:
    """The folder for this interpreter and these library versions."""
    tag = f"py{sys.version_info[0]}{sys.version_info[1]}-numba{numba.__version__}-lw{__version__}"
    return Path(config.cache_dir) / f"{tag}-{_code_hash()}"


@functools.cache
def _code_hash() -> str:
    """A hash of lanewise's own source: a changed code generator never reuses old kernels."""
    h = hashlib.sha256()
    root = Path(__file__).resolve().parent.parent
    for path in sorted(root.rglob("*.py")):
        h.update(path.relative_to(root).as_posix().encode())
        h.update(path.read_bytes())
    return h.hexdigest()[:12]


def key_of(*parts: object) -> str:
    """A short hash of the parts' reprs (all deterministic by construction)."""
    text = repr((parts, np.__version__))
    return hashlib.sha256(text.encode()).hexdigest()[:24]


def _checksum(source: str) -> str:
    return hashlib.sha256(source.encode()).hexdigest()


def store(key: str, source: str, meta: object) -> Path | None:
    """Write the module and its metadata (first writer wins); its path, or None."""
    folder = entry_dir()
    try:
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"lw_{key}.py"
        _create(path, source.encode())
        _create(path.with_suffix(".meta"), pickle.dumps((_checksum(source), meta)))
    except OSError:
        return None  # a read-only or full disk costs speed, never correctness
    return path


def _create(path: Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        try:
            os.link(tmp, path)
        except FileExistsError:
            pass
    finally:
        os.unlink(tmp)


def lookup(key: str) -> tuple[Path, str, object] | None:
    """The stored (path, source, meta) for ``key``, or None (bad entries removed)."""
    path = entry_dir() / f"lw_{key}.py"
    try:
        source = path.read_text()
        checksum, meta = pickle.loads(path.with_suffix(".meta").read_bytes())
    except FileNotFoundError:
        return None
    except Exception:  # noqa: BLE001 - truncated or unreadable: rebuild
        discard(path)
        return None
    if checksum != _checksum(source):
        discard(path)
        return None
    return path, source, meta


def discard(path: Path) -> None:
    """Remove an entry (module, metadata and Numba's object files for it)."""
    _unlink([path, path.with_suffix(".meta")])
    discard_object_code(path)


def discard_object_code(path: Path) -> None:
    """Remove Numba's cached object code for a module (it recompiles)."""
    _unlink(path.parent.glob(f"__pycache__/{path.stem}.*"))


def _unlink(paths) -> None:
    for p in paths:
        try:
            p.unlink()
        except OSError:
            pass


def load_module(name: str, path: Path | None, source: str, inject: dict) -> ModuleType:
    """Execute a generated module with ``inject`` already in its globals."""
    if path is None:  # no disk: an in-memory module (Numba cannot cache it)
        module = ModuleType(name)
        module.__dict__.update(inject)
        source = source.replace(", cache=True", "")
        exec(compile(source, f"<lanewise {name}>", "exec"), module.__dict__)
        return module
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    module.__dict__.update(inject)
    # Registered like any import: Numba's cache finds a kernel's globals by
    # module name when it reloads object code in a new process.
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
