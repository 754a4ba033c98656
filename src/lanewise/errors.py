"""The lanewise exception hierarchy.

Every error lanewise raises on purpose derives from :class:`LanewiseError`, and
also from the builtin exception a Python user would expect (``ValueError`` for
bad axes or sizes, ``TypeError`` for code lanewise cannot compile), so existing
``except ValueError`` handlers keep working.

An exception raised by the user's own lane code (``raise ValueError(...)`` inside
a lane) is re-raised as that same exception, with a note naming the lane.

Example:
    >>> import lanewise as lw, numpy as np
    >>> try:
    ...     lw.vmap(lambda a, b: a + b)(np.ones(3), np.ones(4))
    ... except lw.SizeMismatchError as e:
    ...     print(str(e).splitlines()[0])
    vmap got inconsistent sizes for the mapped axis:
"""

from __future__ import annotations

import linecache

import numpy as np


class LanewiseError(Exception):
    """Base class of every error raised by lanewise itself."""


class AxisSpecError(LanewiseError, ValueError):
    """``in_axes``/``out_axes``/``axis_size`` are malformed or out of range."""


class SizeMismatchError(LanewiseError, ValueError):
    """Arguments mapped by one ``vmap`` level disagree on the mapped size."""


class UnmappedOutputError(AxisSpecError):
    """``out_axes=None`` for an output that depends on the mapped axis."""


class LaneCompileError(LanewiseError, TypeError):
    """The lane function uses Python that the backend cannot compile.

    The message names the user's ``file:line`` and source line; the backend's
    own error (e.g. Numba's) is chained as ``__cause__`` for experts.
    """


class LaneTypeError(LanewiseError, TypeError):
    """The lane's results have a type lanewise cannot store (or that varies)."""


class OutputError(LanewiseError, ValueError):
    """A preallocated ``out=`` array has the wrong shape, dtype or flags."""


class EmptyReductionError(LanewiseError, ValueError):
    """``lw.reduce`` of ``min``/``max``/``argmin``/``argmax`` over zero lanes: they have
    no identity (NumPy raises the same ``ValueError``)."""


class LaneIndexError(LanewiseError, IndexError):
    """A lane indexed an array out of its bounds.

    Every backend raises it, with the lane, the index and the length; a
    compiled lane checks before it reads, so nothing out of bounds is ever
    read (docs/safety.md, "Indexing")."""


class LaneUnboundError(LanewiseError, UnboundLocalError):
    """A lane read a local that no statement had bound on the path it took.

    Python raises ``UnboundLocalError`` there (``y`` after ``for i in range(n): y = ...``
    for a lane whose ``n`` is 0); compiled lanes check such reads and raise this
    subclass with Python's words and the user's ``file:line`` (docs/safety.md,
    "Locals that may be unbound")."""


class ReverseMemoryError(LanewiseError, MemoryError):
    """A lane differentiated in reverse mode needs more memory for its records than
    ``lw.config.reverse_memory`` allows (docs/autodiff.md, "What is stored")."""


class BackendError(LanewiseError, ValueError):
    """An unknown or unavailable backend was requested."""


def source_line(filename: str, lineno: int) -> str:
    """The stripped source line at ``filename:lineno`` ('' if unavailable)."""
    return linecache.getline(filename, lineno).strip()


def format_location(filename: str, lineno: int, name: str = "") -> str:
    """Render a traceback-style location: ``File "f.py", line 3, in g`` + source."""
    where = f'  File "{filename}", line {lineno}' + (f", in {name}" if name else "")
    text = source_line(filename, lineno)
    return where + (f"\n    {text}" if text else "")


def scalar_kind(value) -> str:
    """How an error names a scalar argument: what it is, and its value.

    Example:
        >>> import numpy as np
        >>> scalar_kind(3.0), scalar_kind(np.float32(0.5)), scalar_kind(np.array(2))
        ('a Python float (3.0)', 'a NumPy float32 scalar (0.5)', 'a 0-d int64 array (2)')
    """
    if isinstance(value, np.ndarray):
        return f"a 0-d {value.dtype} array ({value.item()!r})"
    if isinstance(value, np.generic):
        return f"a NumPy {value.dtype} scalar ({value.item()!r})"
    return f"a Python {type(value).__name__} ({value!r})"


def function_location(fn) -> str:
    """``file:line`` of a Python function's ``def`` (or its repr if unknown); for a
    function lanewise generated from the user's (a derivative), the user's ``def``."""
    code = getattr(getattr(fn, "_lw_origin", fn), "__code__", None)
    if code is None:
        return repr(fn)
    return f"{code.co_filename}:{code.co_firstlineno}"
