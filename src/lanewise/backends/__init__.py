"""Backends: each turns a lane program plus a call into results.

A backend is a module with ``NAME``, ``build(call) -> executable`` (compile or
look up; cached per signature by ``Mapped``) and ``run(executable, call, out)``.
``python`` is the reference (the executable spec); ``cpu`` compiles with Numba;
``cuda`` and ``dask`` live in their own modules and need their extras.

Example:
    >>> get("python").NAME
    'python'
"""

from __future__ import annotations

import importlib

from ..errors import BackendError

#: backend name -> (module, pip extra that provides its dependencies)
REGISTRY = {"cpu": ("cpu", None), "python": ("python", None),
            "cuda": ("cuda", "cuda"), "dask": ("dask", "dask")}
NAMES = tuple(REGISTRY)


def get(name: str):
    """The backend module called ``name`` (imported lazily)."""
    if name not in REGISTRY:
        raise BackendError(f"unknown backend {name!r}; choose one of {', '.join(map(repr, NAMES))}")
    module, extra = REGISTRY[name]
    path = f"{__name__}.{module}"
    try:
        return importlib.import_module(path)
    except ImportError as e:
        if e.name == path:
            raise BackendError(f"the {name!r} backend is not part of this lanewise build") from e
        if extra is None or (e.name or "").startswith("lanewise"):
            raise
        raise BackendError(f"the {name!r} backend needs {e.name}: pip install 'lanewise[{extra}]'") from e
