"""The Dask backend: dask arrays in, lazy dask arrays out; every chunk runs the CPU kernel.

:mod:`.map` turns ``lw.vmap`` into one ``blockwise`` layer; :mod:`.reduce` turns
``lw.reduce`` into partial tasks whose combination is bitwise independent of the
chunking.  This package is the backend (:class:`lanewise.backends.protocol.Backend`).
"""

from __future__ import annotations

from .map import DaskExecutable, bind_call, build, run, stats
from .reduce import build_reduce, run_reduce

NAME = "dask"
SCAN = "compiled"


def usable() -> bool:
    """Whenever dask imports (chunks run the CPU kernel on the workers)."""
    return True


def explain(exe, call) -> list[str]:
    """The schedule: one task per chunk of lanes, each running the CPU kernel serially."""
    return ["schedule: one dask task per chunk of the mapped axes; each runs the CPU kernel on its "
            "worker thread (kernel_blocks)"]


__all__ = ["NAME", "SCAN", "DaskExecutable", "bind_call", "build", "build_reduce", "explain", "run",
           "run_reduce", "stats", "usable"]
