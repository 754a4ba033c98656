"""Compiled bytecode for lanewise's own modules when Python is told not to write any.

``PYTHONDONTWRITEBYTECODE=1`` (common in containers, and set on the machines
this library is measured on) stops Python writing ``__pycache__``.  An installed
wheel does not care (pip compiles its ``.pyc`` files at install time), but a
source checkout or an editable install then compiles every lanewise module from
source in every process: 60-90 ms of each warm start here, a sixth of the 0.6 s
a new process may take to reach its first compiled kernel.  So does a
checkout whose ``__pycache__`` is stale (written once without the switch, the
sources edited since): Python compiles and cannot write.

:func:`install` puts a finder in front of ``sys.meta_path`` for the submodules of
one package.  When bytecode writing is off and the module has no ``.pyc`` of its
own, its code is kept in lanewise's cache directory instead, under
``bytecode/<python tag>/<hash of the package's directory>/``.  Each file is a
standard hash-checked ``.pyc`` (PEP 552): it is used only when its stored hash
equals the hash of the source read now, so an edited module is never run from
stale bytecode, whatever its size or modification time.  The folders are made
for this user only, and none is used unless it is owned by this user and
writable by no one else (``runtime/private``: bytecode is code, and a planted
file with a matching hash would run).  Files are written
atomically (a temporary file, then a rename), so processes starting together
never read half a file; an unwritable cache directory only means compiling as
before.  ``LANEWISE_DISK_CACHE=0`` turns this off along with the kernel cache.

Example:
    >>> import sys
    >>> from lanewise.runtime.bytecode import BytecodeFinder
    >>> any(isinstance(f, BytecodeFinder) for f in sys.meta_path) in (True, False)
    True
"""

from __future__ import annotations

import hashlib
import importlib.machinery
import importlib.util
import marshal
import os
import sys
import tempfile

from .private import private_folders

_HASHED_CHECKED = (0b11).to_bytes(4, "little")  # PEP 552 flags: hash-based, check the source


class CachedSourceLoader(importlib.machinery.SourceFileLoader):
    """A source loader that keeps each module's code in ``root`` (a hash-checked ``.pyc``)."""

    def __init__(self, fullname: str, path: str, root: str):
        super().__init__(fullname, path)
        self.root = root

    def cached_path(self, fullname: str) -> str:
        return os.path.join(self.root, fullname + ".pyc")

    def get_code(self, fullname: str):
        source = self.get_data(self.path)
        header = importlib.util.MAGIC_NUMBER + _HASHED_CHECKED + importlib.util.source_hash(source)
        pyc = self.cached_path(fullname)
        code = _read(pyc, header)
        if code is None:
            code = self.source_to_code(source, self.path)
            _write(pyc, header + marshal.dumps(code))
        return code


def _read(pyc: str, header: bytes):
    """The code object in ``pyc`` if its header is ``header``, else None."""
    try:
        with open(pyc, "rb") as f:
            data = f.read()
    except OSError:
        return None
    if data[:len(header)] != header:
        return None
    try:
        return marshal.loads(memoryview(data)[len(header):])
    except (EOFError, ValueError, TypeError):  # a damaged file: compile again
        return None


def _write(pyc: str, data: bytes) -> None:
    try:
        fd, tmp = tempfile.mkstemp(dir=os.path.dirname(pyc), suffix=".tmp")
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, pyc)
    except OSError:  # a read-only or full cache directory costs a compile, nothing else
        pass


def _usable(pyc: str, source: str) -> bool:
    """Whether Python would run ``pyc`` for ``source`` rather than compile the source.
    A stale one (a checkout edited after some process wrote ``__pycache__``, for
    instance one run without ``PYTHONDONTWRITEBYTECODE``) would be compiled from
    source in every process, as if there were none.  Read as Python reads it
    (importlib's ``_validate_timestamp_pyc`` / ``_validate_hash_pyc``)."""
    try:
        with open(pyc, "rb") as f:
            head = f.read(16)
        stat = os.stat(source)
    except OSError:
        return False
    if len(head) < 16 or head[:4] != importlib.util.MAGIC_NUMBER:
        return False
    flags = int.from_bytes(head[4:8], "little")
    if flags & 0b01 == 0:  # timestamp-based: the source's modification time and size
        return (head[8:12] == (int(stat.st_mtime) & 0xFFFFFFFF).to_bytes(4, "little")
                and head[12:16] == (stat.st_size & 0xFFFFFFFF).to_bytes(4, "little"))
    if flags & 0b10 == 0:  # hash-based, unchecked: Python runs it as it is
        return True
    try:
        with open(source, "rb") as f:
            return head[8:16] == importlib.util.source_hash(f.read())
    except OSError:
        return False


class BytecodeFinder:
    """Finds ``<package>.*`` as the path finder does; when bytecode writing is off
    and a module has no up-to-date ``.pyc`` beside it, loads it with
    :class:`CachedSourceLoader`."""

    def __init__(self, package: str, root: str):
        self.prefix, self.root = package + ".", root

    def find_spec(self, fullname: str, path=None, target=None):
        if not fullname.startswith(self.prefix) or not sys.dont_write_bytecode:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path, target)
        if spec is None or type(spec.loader) is not importlib.machinery.SourceFileLoader:
            return spec
        if spec.cached and _usable(spec.cached, spec.origin):  # the installer compiled it: Python reads that
            return spec
        spec.loader = CachedSourceLoader(fullname, spec.origin, self.root)
        spec.cached = spec.loader.cached_path(fullname)
        return spec

    def invalidate_caches(self) -> None:
        """``importlib.invalidate_caches`` calls this; the path finder keeps no state of ours."""


def install(package: str, package_dir: str, cache_dir: str) -> BytecodeFinder | None:
    """Put a :class:`BytecodeFinder` for ``package`` first on ``sys.meta_path`` (once);
    None, and nothing installed, when Python writes bytecode itself or the cache
    folder is not private (see the module docstring).

    ``package_dir`` is the package's source directory: its hash names the cache
    subdirectory, so two checkouts never overwrite each other's files.
    """
    for finder in sys.meta_path:
        if isinstance(finder, BytecodeFinder) and finder.prefix == package + ".":
            return finder
    tag = sys.implementation.cache_tag
    if tag is None:  # an implementation without bytecode files
        return None
    digest = hashlib.sha1(os.path.abspath(package_dir).encode()).hexdigest()[:16]
    folder = os.path.join(cache_dir, "bytecode", tag, digest)
    if not sys.dont_write_bytecode or not private_folders(cache_dir, folder):
        return None  # Python keeps bytecode itself; or a folder we must not load code from
    finder = BytecodeFinder(package, folder)
    sys.meta_path.insert(0, finder)
    return finder
