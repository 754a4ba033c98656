"""Dict arguments inside compiled lanes, without a per-lane allocation.

A dict built inside Numba code is a hash table allocated on the heap, once per
lane.  Instead, a dict argument with string keys reaches a compiled lane as a
*record*: a namedtuple subclass whose ``p['key']`` is resolved at compile time
to a field access.  Lanes may index such a record with constant string keys and
take its ``len``; nothing else of the dict API is available.

Example:
    >>> import numba
    >>> Rec = record_class(("a", "b"))
    >>> numba.njit(lambda p: p["a"] * p["b"])(Rec(2.0, 3.0))
    6.0
"""

from __future__ import annotations

import collections
import functools
import operator

from numba.core import types
from numba.extending import overload


class Record(tuple):
    """Marker base of the record classes."""

    __slots__ = ()
    _lw_keys: tuple = ()


@functools.cache
def record_class(keys: tuple[str, ...]) -> type:
    """The record class for dicts with exactly these (sorted) keys."""
    base = collections.namedtuple("LaneRecord", [f"f{i}" for i in range(len(keys))])
    return type("LaneRecord", (base, Record), {"_lw_keys": keys, "__slots__": ()})


@overload(operator.getitem)
def record_getitem(record, key):
    if (isinstance(record, types.BaseNamedTuple) and issubclass(record.instance_class, Record)
            and isinstance(key, types.StringLiteral)):
        keys = record.instance_class._lw_keys
        if key.literal_value not in keys:
            raise KeyError(f"{key.literal_value!r} is not a key of this argument (keys: {keys})")
        index = keys.index(key.literal_value)
        return lambda record, key: record[index]
    return None
