"""Start-up cost that lanewise does not need to pay: Numba's BLAS probe.

When Numba first loads its implementation registries (the first compile, or the
first load from the disk cache) it imports ``numba.np.arraymath``, whose module
body probes for BLAS with ``import scipy.linalg.cython_blas``.  That imports the
whole ``scipy.linalg`` package first: 0.15-0.18 s here, a quarter of a warm start
(new process, compiled kernels on disk), spent for a module no lane uses unless
it calls ``np.dot`` or ``np.linalg``.

:func:`probe_blas_cheaply` answers the probe with the real ``cython_blas``
extension module, loaded from its file without running ``scipy.linalg``'s
``__init__``, and removes it from ``sys.modules`` as soon as the probe is done.
Nothing else changes: Numba's compiled code imports ``scipy.linalg.cython_blas``
by name when a lane first calls a BLAS routine, which then imports
``scipy.linalg`` normally and gets the same extension module object back
(Cython hands out one module per process).  If anything about this is not as
expected (no SciPy, ``scipy.linalg`` or ``numba.np.arraymath`` already imported,
a layout we do not know), it does nothing and Numba probes the usual way.
``LANEWISE_EAGER_SCIPY=1`` turns it off.

Example:
    >>> from lanewise.runtime.startup import probe_blas_cheaply
    >>> probe_blas_cheaply() in (True, False)
    True
"""

from __future__ import annotations

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


def probe_blas_cheaply() -> bool:
    """Import ``numba.np.arraymath`` with its BLAS probe answered without ``scipy.linalg``.

    Returns whether the cheap path was taken.
    """
    already = ("scipy.linalg" in sys.modules or _BLAS in sys.modules
               or "numba.np.arraymath" in sys.modules)
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
    try:
        import numba.np.arraymath  # noqa: F401 - the probe runs in its module body
    finally:
        # Why remove it: a later ``import scipy.linalg.cython_blas`` must run the
        # package's __init__ (and bind the attribute on ``scipy.linalg``).
        del sys.modules[_BLAS]
    return True
