"""Backends: each turns a lane program plus a call into results.

``python`` is the reference (the executable spec); ``cpu`` compiles with Numba.
"""

from __future__ import annotations

from ..errors import BackendError

NAMES = ("cpu", "python")


def get(name: str):
    """The backend module called ``name`` (imported lazily)."""
    if name == "cpu":
        from . import cpu
        return cpu
    if name == "python":
        from . import python
        return python
    raise BackendError(f"unknown backend {name!r}; choose one of {', '.join(map(repr, NAMES))}")
