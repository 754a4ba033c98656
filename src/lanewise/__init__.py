"""lanewise: write the computation for one lane in plain Python; run it over every lane.

Example:
    >>> import math, numpy as np, lanewise as lw
    >>> def f(x, y):
    ...     r = x * x + y * y
    ...     return math.cos(r) / (1 + r)
    >>> x = np.linspace(-2, 2, 3)
    >>> lw.vmap(lw.vmap(f, in_axes=(None, 0)), in_axes=(0, None))(x, x).shape
    (3, 3)
"""

from .version import __version__
from .config import config
from .runtime.bytecode import install as _install_bytecode_cache

if config.disk_cache:  # before the other submodules: they are what it caches
    _install_bytecode_cache(__name__, __path__[0], str(config.cache_dir))

from .runtime.startup import probe_on_import as _probe_on_import
from .runtime.slow_symbols import register_symbols as _register_slow_symbols
from .api import Explanation, Mapped, explain, map, vmap  # noqa: A004 - jax.lax.map's name
from . import random
from .reducing import Monoid, reduce
from .lane.scanning import scan
from .fuse import fuse
from .errors import (
    AxisSpecError,
    BackendError,
    EmptyReductionError,
    LaneCompileError,
    LaneIndexError,
    LaneUnboundError,
    LanewiseError,
    LaneTypeError,
    OutputError,
    ReverseMemoryError,
    SizeMismatchError,
    UnmappedOutputError,
)

__all__ = [
    "__version__", "vmap", "scan", "map", "reduce", "Monoid", "fuse", "random", "explain", "Mapped",
    "jvp", "vjp", "grad", "value_and_grad", "jacfwd", "jacrev", "hessian", "stop_gradient", "custom_jvp", "custom_vjp",
    "Explanation", "config",
    "LanewiseError", "AxisSpecError", "SizeMismatchError", "UnmappedOutputError",
    "LaneCompileError", "LaneIndexError", "LaneUnboundError", "LaneTypeError", "OutputError", "BackendError",
    "ReverseMemoryError", "EmptyReductionError",
]


_probe_on_import()  # when numba.np.arraymath is first imported: 0.15 s off every start
_register_slow_symbols()  # before any kernel loads: its object code links them by name

#: Public names imported on first use: a process that only maps lanes does not pay
#: for the autodiff transformation (and the SPMD transformation it imports) in
#: ``import lanewise``: 0.18 of 1.06 s, measured on a busy machine.
_LAZY = dict.fromkeys(("custom_jvp", "custom_vjp", "grad", "hessian", "jacfwd", "jacrev", "jvp", "stop_gradient",
                       "value_and_grad", "vjp"), ".autodiff")


def __getattr__(name: str):
    """``lw.jax`` and ``lw.torch``, imported on first use: ``import lanewise`` stays free
    of JAX and PyTorch; and the names of :data:`_LAZY`."""
    import importlib

    if name in ("jax", "torch"):
        return importlib.import_module(f"{__name__}.{name}")
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name], __name__), name)
        globals()[name] = value  # looked up once
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_LAZY) | {"jax", "torch"})
