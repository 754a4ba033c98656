"""The on-disk cache of generated kernel modules.

Numba cannot cache ``exec``-generated code, so each kernel is a real module file
``lw_<key>.py`` (Numba keeps its object code beside it in ``__pycache__``, or under
``NUMBA_CACHE_DIR`` when that is set) plus
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
import warnings
from pathlib import Path
from types import ModuleType

import numba
import numpy as np

from ..version import __version__
from ..config import config
from .private import private_folders
from .warm import lighten_cache_load
from . import vector_width


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


#: Numba settings that change the code it generates (a kernel compiled with bounds
#: checks is not the one compiled without): part of every key.
_NUMBA_SETTINGS = ("BOUNDSCHECK", "OPT", "FASTMATH", "LOOP_VECTORIZE", "SLP_VECTORIZE", "ENABLE_AVX",
                   "CPU_NAME", "CPU_FEATURES")


def key_of(*parts: object) -> str:
    """A short hash of the parts' reprs (all deterministic by construction), the
    NumPy version and the Numba settings that change generated code."""
    settings = tuple(repr(getattr(numba.config, name, None)) for name in _NUMBA_SETTINGS)
    text = repr((parts, np.__version__, settings, vector_width.setting()))
    return hashlib.sha256(text.encode()).hexdigest()[:24]


def _checksum(source: str) -> str:
    return hashlib.sha256(source.encode()).hexdigest()


def private_folder(folder: Path) -> bool:
    """Create ``folder`` for this user only and say whether it is safe to load code
    from (:func:`lanewise.runtime.private.private_folders`): owned by this user,
    writable by no one else.  Such a folder is not used: kernels then stay in memory."""
    return private_folders(config.cache_dir, folder)


def store(key: str, source: str, meta: object) -> Path | None:
    """Write the module and its metadata (first writer wins); its path, or None."""
    folder = entry_dir()
    if not private_folder(folder):
        return None
    try:
        path = folder / f"lw_{key}.py"
        _create(path, source.encode())
        payload = pickle.dumps((_checksum(source), meta))
        _create(path.with_suffix(".meta"), _MAGIC + hashlib.sha256(payload).digest() + payload)
    except OSError:
        return None  # a read-only or full disk costs speed, never correctness
    return path


#: The first bytes of a metadata file, then the SHA-256 of the pickled payload: the
#: payload is unpickled only once its checksum matches (a truncated or altered file
#: is rebuilt, never deserialised).
_MAGIC = b"LWMETA1\n"


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
    folder = entry_dir()
    path = folder / f"lw_{key}.py"
    if not path.exists() or not private_folder(folder):
        return None
    try:
        source = path.read_text()
        blob = path.with_suffix(".meta").read_bytes()
        head, digest, payload = blob[:len(_MAGIC)], blob[len(_MAGIC):len(_MAGIC) + 32], blob[len(_MAGIC) + 32:]
        if head != _MAGIC or hashlib.sha256(payload).digest() != digest:
            raise ValueError("metadata checksum mismatch")
        checksum, meta = pickle.loads(payload)
    except FileNotFoundError:
        return None
    except Exception:  # noqa: BLE001 - truncated, altered or unreadable: rebuild
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
    for folder in _object_code_dirs(path):
        _unlink(folder.glob(f"{path.stem}.*"))


def _object_code_dirs(path: Path) -> list[Path]:
    """Where Numba keeps object code for functions of the module at ``path``: beside
    it, or under ``NUMBA_CACHE_DIR`` when that is set (then only there: missing it
    left a corrupt entry in place, so recovering from it failed)."""
    folders = [path.parent / "__pycache__"]
    if numba.config.CACHE_DIR:
        try:
            sub = numba.core.caching._CacheLocator.get_suitable_cache_subpath(str(path))
        except Exception:  # noqa: BLE001 - another Numba: its own layout, not known here
            return folders
        folders.append(Path(numba.config.CACHE_DIR) / sub)
    return folders


def _unlink(paths) -> None:
    for p in paths:
        try:
            p.unlink()
        except OSError:
            pass


# Numba compiles a global array over 1 MB, or a non-contiguous one, into a kernel by
# its address ("dynamic globals"), and cannot cache that kernel on disk.  Its warning
# names lanewise's generated function and file, which mean nothing to the user:
# lw.explain says it instead (memory_only_reason), naming the user's arrays.  (".*":
# Numba may wrap the message in terminal colour codes.)
_UNCACHABLE = r".*Cannot cache compiled function .* as it uses dynamic globals"


def _quiet_uncachable(dispatcher) -> None:
    """Silence that warning where a generated dispatcher saves to the cache.  (Per
    call, not a filter set at import: ``catch_warnings`` blocks, pytest's among
    them, drop filters added inside them.  Numba saves under its compiler lock.)"""
    cache = getattr(dispatcher, "_cache", None)
    if callable(getattr(cache, "save_overload", None)):
        cache.save_overload = _quietly(cache.save_overload)


def _quietly(save):
    def save_overload(sig, data):
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", _UNCACHABLE, numba.NumbaWarning)
            return save(sig, data)

    return save_overload


def memory_only_reason(module: ModuleType | None) -> str | None:
    """Why the kernels of generated ``module`` stay in memory though it is on disk:
    a compiled function froze a global by its address (None: nothing did)."""
    dispatchers = [v for v in vars(module).values() if isinstance(v, numba.core.dispatcher.Dispatcher)] \
        if module is not None else []
    if any(cres.library.has_dynamic_globals for d in dispatchers for cres in list(d.overloads.values())):
        return "Numba compiled a global array over 1 MB, or a non-contiguous one, into the kernel by its address"
    return None


def load_module(name: str, path: Path | None, source: str, inject: dict) -> ModuleType:
    """Execute a generated module with ``inject`` already in its globals."""
    vector_width.install()  # before its kernels compile: they are tagged with the width
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
    for value in vars(module).values():
        # The module's own functions: lanewise's helpers it imports are shared by every
        # generated module, and wrapping them at each load would nest without end.
        if isinstance(value, numba.core.dispatcher.Dispatcher) and value.py_func.__module__ == name:
            lighten_cache_load(value, name)
            _quiet_uncachable(value)
    return module


# ----------------------------------------------------------------------------- lanewise's own Numba functions


class _OwnFunctionLocator(numba.core.caching._SourceFileBackedLocatorMixin, numba.core.caching._CacheLocator):
    """Numba's disk cache for lanewise's own ``cache=True`` functions (lanemath: the
    vector math every vectorised lane inlines, seconds to compile) lives in
    :func:`entry_dir`, keyed by the hash of all of lanewise's source.  Numba keys
    a cache on its function's own file only, and lanemath functions inline code
    from other files: beside the source, an upgrade that changed one file could
    reuse another's stale code.  Here any change starts afresh, and deleting the
    cache folder is safe, as for kernels."""

    def __init__(self, py_func, py_file, relative: str):
        self._py_file = py_file
        self._lineno = py_func.__code__.co_firstlineno
        self._cache_path = os.path.join(entry_dir(), "lanewise-numba", relative)

    def get_cache_path(self):
        return self._cache_path

    def ensure_cache_path(self):
        _writable_dir(self._cache_path)  # once per folder: lanemath has 100 functions

    @classmethod
    def from_function(cls, py_func, py_file):
        relative = _own_relative_dir(py_file)
        if relative is None:
            return None
        self = cls(py_func, py_file, relative)
        try:
            self.ensure_cache_path()
        except OSError:  # not writable: Numba's next locator decides
            return None
        return self


@functools.cache
def _own_relative_dir(py_file: str) -> str | None:
    """The folder of ``py_file`` relative to lanewise's package, or None outside it."""
    path = Path(py_file).resolve()
    return str(path.relative_to(_PACKAGE_ROOT).parent) if path.is_relative_to(_PACKAGE_ROOT) else None


@functools.cache
def _writable_dir(path: str) -> None:
    """Create ``path`` and check that a file can be written there (OSError if not).
    The cache root is created for this user only, as :func:`private_folder` does:
    the first of lanewise's own functions to compile may come before any kernel."""
    Path(config.cache_dir).mkdir(mode=0o700, parents=True, exist_ok=True)
    os.makedirs(path, mode=0o700, exist_ok=True)
    tempfile.TemporaryFile(dir=path).close()


_PACKAGE_ROOT = Path(__file__).resolve().parent.parent
if _OwnFunctionLocator not in numba.core.caching.CacheImpl._locator_classes:
    numba.core.caching.CacheImpl._locator_classes.insert(0, _OwnFunctionLocator)


def own_cache() -> bool:
    """``cache=`` for lanewise's own Numba functions: the disk cache setting at import."""
    return config.disk_cache
