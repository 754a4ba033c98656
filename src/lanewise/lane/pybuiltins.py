"""Python builtins Numba does not type for a lane's values, given Python's meaning.

``float(x > 0.5)`` and ``complex(flag)`` are Python (``1.0``, ``(1+0j)``), and the
``python`` backend runs them, but Numba has no typing for ``float``/``complex``
of a bool: the cpu backend refused a lane the docs list as supported
(``docs/lanes.md``, L11).  These overloads only add the missing signatures, so
no code that compiled before changes; importing lanewise makes them visible to
any Numba code in the process, like lanemath's.

Example:
    >>> import numba
    >>> numba.njit(lambda x: float(x > 0.5) / 4.0)(0.9)
    0.25
"""

from __future__ import annotations

from numba.core import types
from numba.extending import overload


@overload(float)
def _float_of_bool(value):
    if isinstance(value, types.Boolean):
        return lambda value: 1.0 if value else 0.0
    return None


@overload(complex)
def _complex_of_bool(value):
    if isinstance(value, types.Boolean):
        return lambda value: complex(1.0 if value else 0.0)
    return None
