"""Which dtype a lane's result is stored as: one rule shared by every backend.

Python float literals are *weak* (NumPy 2 / JAX semantics): ``x * 2.0`` with
``x`` float32 stays float32.  Numba types such literals as float64, so a backend
reports the lane's *natural* dtype and :func:`storage_dtype` demotes a float or
complex result to the width of the strong (array) inputs when those are all
narrower.  Integer results are never demoted: narrowing an int64 the lane
computed could silently wrap its value (``int32`` lanes doing ``x + 1`` store
int64, as the compiled code computes).

Example:
    >>> import numpy as np
    >>> storage_dtype(np.dtype("float64"), [np.dtype("float32")])
    dtype('float32')
    >>> storage_dtype(np.dtype("float64"), [np.dtype("float32"), np.dtype("float64")])
    dtype('float64')
    >>> storage_dtype(np.dtype("int64"), [np.dtype("uint32")])
    dtype('int64')
"""

from __future__ import annotations

import types
from collections.abc import Callable, Iterable

import numpy as np

from .errors import LaneTypeError

SUPPORTED_KINDS = frozenset("biufc")  # bool, int, uint, float, complex


def check_supported(dtype: np.dtype, what: str) -> np.dtype:
    """Reject dtypes no backend can compute with, naming the user's value."""
    dtype = np.dtype(dtype)
    if dtype.kind not in SUPPORTED_KINDS or dtype == np.float16 or dtype in (np.longdouble, np.clongdouble) \
            and dtype.itemsize > {"f": 8, "c": 16}[dtype.kind]:
        raise LaneTypeError(
            f"{what} has dtype {dtype}; lanewise lanes take bool, int, uint, "
            "float32/float64 and complex64/complex128 values"
        )
    if not dtype.isnative:
        raise LaneTypeError(f"{what} has dtype {dtype.str}, in non-native byte order; lanewise converts a "
                            "top-level array argument itself, convert this one with "
                            "x.astype(x.dtype.newbyteorder('='))")
    return dtype


def storage_dtype(natural: np.dtype, strong: Iterable[np.dtype]) -> np.dtype:
    """The dtype to store a lane result of dtype ``natural`` in (see module doc)."""
    natural = np.dtype(natural)
    strong = [np.dtype(d) for d in strong]
    if natural.kind == "b" or not strong:
        return natural
    widest = np.result_type(*strong)
    if natural.kind in "fc" and widest.kind == natural.kind and natural.itemsize > widest.itemsize:
        return widest
    if natural.kind == "c" and widest.kind == "f" and natural.itemsize > 2 * widest.itemsize:
        return np.result_type(widest, np.complex64)
    return natural


#: NumPy's strong wide types, by the names a lane writes them with (``np.float64(x)``,
#: ``dtype=np.complex128``) and as dtype strings (``astype("f8")``).  Not ``double``:
#: a user's helper of that name is common, and ``np.double`` is found by its value.
_WIDE_NAMES = {"float64": np.dtype(np.float64), "complex128": np.dtype(np.complex128)}
_WIDE_TEXT = {**_WIDE_NAMES, "f8": np.dtype(np.float64), "c16": np.dtype(np.complex128)}


def named_wide_dtypes(fn: Callable) -> frozenset:
    """The 64-bit float and complex dtypes ``fn`` (or a helper it calls) names: values
    it makes in them are strong, as in NumPy 2 and JAX (``np.float64(x) / 3`` of a
    float32 ``x`` is float64), so its results are not demoted to float32 as the
    results of weak Python literals are (:mod:`lanewise.dtypes`).

    Example:
        >>> sorted(map(str, named_wide_dtypes(lambda x: x * np.float64(0.1))))
        ['float64']
        >>> def double(x):
        ...     return 2.0 * x
        >>> named_wide_dtypes(lambda x: double(x) * 0.1)
        frozenset()
    """
    found: set = set()
    _named_wide(_python_function(fn), set(), found)
    return frozenset(found)


def _named_wide(fn, seen: set[int], found: set) -> None:
    code = getattr(fn, "__code__", None)
    if code is None or id(fn) in seen:
        return
    seen.add(id(fn))
    names = code_names(code)
    found.update(_WIDE_NAMES[n] for n in names if n in _WIDE_NAMES)
    found.update(_WIDE_TEXT[c] for c in _all_consts(code) if isinstance(c, str) and c in _WIDE_TEXT)
    cells = [cell_contents(c) for c in fn.__closure__ or ()]
    for value in [fn.__globals__.get(n) for n in names] + cells:
        if isinstance(value, type) and value in (np.float64, np.complex128):
            found.add(np.dtype(value))
        elif isinstance(_python_function(value), types.FunctionType) and not _lanewise_own(_python_function(value)):
            _named_wide(_python_function(value), seen, found)


def _lanewise_own(fn) -> bool:
    """lanewise's own helpers (``lw.scan``, lanemath): their internal float64 is not the user's."""
    return (getattr(fn, "__module__", None) or "").startswith("lanewise.")


def _all_consts(code: types.CodeType) -> list:
    return [c for k in code.co_consts for c in (_all_consts(k) if isinstance(k, types.CodeType) else [k])]


def _python_function(fn):
    """The Python function behind a Numba dispatcher (its ``py_func``), or ``fn``."""
    return getattr(fn, "py_func", fn)


def code_names(code: types.CodeType) -> set[str]:
    """Global/attribute names used by ``code`` and the code objects nested in it."""
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= code_names(const)
    return names


def cell_contents(cell, empty=None):
    """What a closure cell holds, or ``empty`` for a cell not yet bound.

    Example:
        >>> def outer():
        ...     late = lambda: value
        ...     before = cell_contents(late.__closure__[0], "unbound")
        ...     value = 1
        ...     return before, cell_contents(late.__closure__[0])
        >>> outer()
        ('unbound', 1)
    """
    try:
        return cell.cell_contents
    except ValueError:
        return empty
