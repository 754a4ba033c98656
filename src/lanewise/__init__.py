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
from .api import Explanation, Mapped, explain, map, vmap  # noqa: A004 - jax.lax.map's name
from .config import config
from . import random
from .reducing import Monoid, reduce
from .lane.scanning import scan
from .fuse import fuse
from .autodiff import custom_jvp, grad, hessian, jacfwd, jacrev, jvp, stop_gradient, value_and_grad, vjp
from .errors import (
    AxisSpecError,
    BackendError,
    LaneCompileError,
    LaneIndexError,
    LanewiseError,
    LaneTypeError,
    OutputError,
    SizeMismatchError,
    UnmappedOutputError,
)

__all__ = [
    "__version__", "vmap", "scan", "map", "reduce", "Monoid", "fuse", "random", "explain", "Mapped",
    "jvp", "vjp", "grad", "value_and_grad", "jacfwd", "jacrev", "hessian", "stop_gradient", "custom_jvp",
    "Explanation", "config",
    "LanewiseError", "AxisSpecError", "SizeMismatchError", "UnmappedOutputError",
    "LaneCompileError", "LaneIndexError", "LaneTypeError", "OutputError", "BackendError",
]


def __getattr__(name: str):
    """``lw.jax`` and ``lw.torch``, imported on first use: ``import lanewise`` stays free
    of JAX and PyTorch."""
    if name in ("jax", "torch"):
        import importlib

        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
