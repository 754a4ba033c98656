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

from collections.abc import Iterable

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

