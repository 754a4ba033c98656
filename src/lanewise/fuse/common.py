"""What the tracer's modules share: :class:`FuseError`, the user's line, NumPy axis
arguments and the base of traced arrays.

:mod:`.trace` (the proxies) imports :mod:`.functions` (the NumPy functions they
dispatch to), and both need these: they live here, below both, so that neither
imports the other back.

Example:
    >>> normalise_axes(-1, 3, "sum"), normalise_axis(-3, 3, "swapaxes")
    ((2,), 0)
"""

from __future__ import annotations

import os
import sys

import numpy as np

from ..errors import LanewiseError

_HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # the lanewise package
_NUMPY = os.path.dirname(os.path.abspath(np.__file__))


class FuseError(LanewiseError, TypeError):
    """Code that ``@lw.fuse`` cannot trace; the message names the operation and line."""


def user_location() -> str:
    """``file:line`` of the innermost frame outside lanewise and NumPy."""
    frame = sys._getframe(1)
    while frame is not None:
        name = frame.f_code.co_filename
        if not (name.startswith(_HERE) or name.startswith(_NUMPY) or name.startswith("<__array_function__")):
            return f"{name}:{frame.f_lineno}"
        frame = frame.f_back
    return "<unknown>"


class Traced:
    """The base of :class:`.trace.Proxy` (a traced array): lets :mod:`.functions`
    recognise one without importing :mod:`.trace`, which imports it."""

    __slots__ = ()  # Proxy keeps its own slots and no __dict__


def normalise_axis(a, ndim: int, what: str) -> int:
    """NumPy's axis argument ``a`` of ``what`` over ``ndim`` axes, as 0..ndim-1."""
    a = int(a)
    if not -ndim <= a < ndim:
        raise np.exceptions.AxisError(a, ndim, what)
    return a % ndim


def normalise_axes(axis, ndim: int, what: str) -> tuple[int, ...]:
    """An int or a sequence of them (NumPy's ``axis=``) as sorted, distinct axes."""
    axes = (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis)
    out = tuple(sorted(normalise_axis(a, ndim, what) for a in axes))
    if len(set(out)) != len(out):
        raise ValueError("duplicate value in 'axis'")
    return out
