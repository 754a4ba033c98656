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

__version__ = "0.1.0"

from .api import Explanation, Mapped, explain, vmap  # noqa: E402
from .config import config  # noqa: E402
from . import random  # noqa: E402
from .reducing import Monoid, reduce  # noqa: E402
from .scanning import scan  # noqa: E402
from .fuse import fuse  # noqa: E402
from .errors import (  # noqa: E402
    AxisSpecError,
    BackendError,
    LaneCompileError,
    LanewiseError,
    LaneTypeError,
    OutputError,
    SizeMismatchError,
    UnmappedOutputError,
)

__all__ = [
    "vmap", "scan", "reduce", "Monoid", "fuse", "random", "explain", "Mapped", "Explanation", "config",
    "LanewiseError", "AxisSpecError", "SizeMismatchError", "UnmappedOutputError",
    "LaneCompileError", "LaneTypeError", "OutputError", "BackendError",
]
