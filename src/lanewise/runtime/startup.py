"""Start-up cost that lanewise does not need to pay: Numba's BLAS probe.

When Numba first loads its implementation registries (the first compile, or the
first load from the disk cache) it imports ``numba.np.arraymath``, whose module
body probes for BLAS with ``import scipy.linalg.cython_blas``.  That imports the
whole ``scipy.linalg`` package first: 0.15-0.18 s here, a quarter of a warm start
(new process, compiled kernels on disk), spent for a module no lane uses unless
it calls ``np.dot`` or ``np.linalg``.

:func:`probe_on_import` answers the probe with the real ``cython_blas``
extension module, loaded from its file without running ``scipy.linalg``'s
``__init__``, and removes it from ``sys.modules`` as soon as the probe is done.
Nothing else changes: Numba's compiled code imports ``scipy.linalg.cython_blas``
by name when a lane first calls a BLAS routine, which then imports
``scipy.linalg`` normally and gets the same extension module object back
(Cython hands out one module per process).  If anything about this is not as
expected (no SciPy, ``scipy.linalg`` or ``numba.np.arraymath`` already imported,
a layout we do not know), it does nothing and Numba probes the usual way.
``LANEWISE_EAGER_SCIPY=1`` turns it off.

It does so when anything first imports ``numba.np.arraymath`` (a meta-path
hook), not at ``import lanewise``: the module costs 70-140 ms, and a warm
process, whose kernels load from disk without Numba's registries
(:mod:`lanewise.runtime.warm`), often never imports it.

Example:
    >>> import sys
    >>> from lanewise.runtime.startup import probe_on_import
    >>> probe_on_import()       # imported already, or the hook waits for it
    >>> "numba.np.arraymath" in sys.modules or any(type(f).__name__ == "_ProbeOnImport" for f in sys.meta_path)
    True
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys

_BLAS = "scipy.linalg.cython_blas"


def _extension_path() -> str | None:
    spec = importlib.util.find_spec("scipy")
    if spec is None or not spec.submodule_search_locations:
        return None
    for root in spec.submodule_search_locations:
        for suffix in importlib.machinery.EXTENSION_SUFFIXES:
            path = os.path.join(root, "linalg", "cython_blas" + suffix)
            if os.path.isfile(path):
                return path
    return None


def _load_extension(path: str):
    spec = importlib.util.spec_from_file_location(_BLAS, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _stub_blas() -> bool:
    """Put the bare ``cython_blas`` extension in ``sys.modules`` for the probe; whether
    it was (nothing when SciPy's BLAS is loaded already, the switch is on, or
    anything is unexpected)."""
    already = "scipy.linalg" in sys.modules or _BLAS in sys.modules or "numba.np.arraymath" in sys.modules
    if already or os.environ.get("LANEWISE_EAGER_SCIPY", "").strip() not in ("", "0"):
        return False
    try:
        path = _extension_path()
        if path is None:
            return False
        sys.modules[_BLAS] = _load_extension(path)
    except Exception:  # noqa: BLE001 - any surprise: let Numba probe the usual way
        sys.modules.pop(_BLAS, None)
        return False
    return True


def _unstub_blas() -> None:
    # Why remove it: a later ``import scipy.linalg.cython_blas`` must run the
    # package's __init__ (and bind the attribute on ``scipy.linalg``).
    sys.modules.pop(_BLAS, None)


class _Unstubbing:
    """``numba.np.arraymath``'s loader, which takes the stub out once the module ran."""

    def __init__(self, loader):
        self._loader = loader

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module):
        try:
            self._loader.exec_module(module)
        finally:
            _unstub_blas()

    def __getattr__(self, name):  # get_source, get_filename, ...: the real loader's
        return getattr(self._loader, name)


class _ProbeOnImport(importlib.abc.MetaPathFinder):
    """Answers the probe cheaply when ``numba.np.arraymath`` is first imported, by
    whatever imports it: Numba's registries (a compile), or a cached kernel's
    environment that names one of its globals.  Removes itself on that import."""

    def find_spec(self, name, path, target=None):
        if name != "numba.np.arraymath":
            return None
        _remove_finder()
        spec = importlib.machinery.PathFinder.find_spec(name, path, target)
        if spec is None or spec.loader is None or not _stub_blas():
            return spec
        spec.loader = _Unstubbing(spec.loader)
        return spec


def _remove_finder() -> None:
    sys.meta_path[:] = [f for f in sys.meta_path if not isinstance(f, _ProbeOnImport)]


def probe_on_import() -> None:
    """Answer the probe cheaply when ``numba.np.arraymath`` is first imported, not now
    (70-140 ms that a warm process, whose kernels load without Numba's registries,
    need not pay).  Nothing when it is imported already."""
    if "numba.np.arraymath" not in sys.modules and not any(isinstance(f, _ProbeOnImport) for f in sys.meta_path):
        sys.meta_path.insert(0, _ProbeOnImport())
