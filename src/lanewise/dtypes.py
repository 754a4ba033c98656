"""Which dtype a lane's result is stored as: one rule shared by every backend.

Python scalars and literals are *weak* (NumPy 2 / JAX semantics): ``x * 2.0``
with ``x`` float32 stays float32.  Numba types such literals as float64, so a
backend reports the lane's *natural* dtype and :func:`storage_dtype` demotes a
float/complex/int result to the width of the strong (array) inputs when the
extra width can only have come from weak values.

Example:
    >>> import numpy as np
    >>> storage_dtype(np.dtype("float64"), [np.dtype("float32")])
    dtype('float32')
    >>> storage_dtype(np.dtype("float64"), [np.dtype("float32"), np.dtype("float64")])
    dtype('float64')
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from .errors import LaneTypeError

SUPPORTED_KINDS = frozenset("biufc")  # bool, int, uint, float, complex


def check_supported(dtype: np.dtype, what: str) -> np.dtype:
    """Reject dtypes no backend can compute with, naming the user's value."""
    dtype = np.dtype(dtype)
    if dtype.kind not in SUPPORTED_KINDS or dtype == np.float16:
        raise LaneTypeError(
            f"{what} has dtype {dtype}; lanewise lanes take bool, int, uint, "
            "float32/float64 and complex64/complex128 values"
        )
    return dtype


def storage_dtype(natural: np.dtype, strong: Iterable[np.dtype]) -> np.dtype:
    """The dtype to store a lane result of dtype ``natural`` in (see module doc)."""
    natural = np.dtype(natural)
    strong = [np.dtype(d) for d in strong]
    if natural.kind == "b" or not strong:
        return natural
    widest = np.result_type(*strong)
    if _family(natural) == _family(widest) and natural.itemsize > widest.itemsize:
        return widest
    if natural.kind == "c" and widest.kind == "f" and natural.itemsize > 2 * widest.itemsize:
        return np.result_type(widest, np.complex64)
    return natural


def _family(dtype: np.dtype) -> str:
    # Signed and unsigned ints demote alike: NumPy keeps uint8 + 1 as uint8.
    return "i" if dtype.kind in "iu" else dtype.kind
