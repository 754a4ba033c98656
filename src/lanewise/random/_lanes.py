"""The in-lane versions of lw.random's public functions: plain Python that Numba
compiles (inlined into the caller).  The first line of each is a compile-time
type check that fails with lanewise's message (:func:`_checker`).

Example:
    >>> import numba
    >>> numba.njit(bits_lane)((0, 0)) == 0xe169c58d6627e8d5  # words 1 and 0 of Philox(0, 0)
    True
"""

from __future__ import annotations

import numpy as np
from numba.core import types as nt
from numba.core.errors import TypingError
from numba.extending import overload

from ._core import (  # by name: lanewise re-targets lanes' global callees
    bits as _core_bits,
    exponential as _core_exponential,
    fold_in as _core_fold_in,
    integers as _core_integers,
    key_array as _core_key_array,
    normal as _core_normal,
    philox_words as _core_philox_words,
    split as _core_split,
    uniform as _core_uniform,
    uniform32 as _core_uniform32,
)


def _is_key(t, n=2) -> bool:
    if isinstance(t, nt.Array):
        return t.ndim == 1 and isinstance(t.dtype, nt.Integer)
    return isinstance(t, nt.BaseTuple) and len(t.types) == n and all(
        isinstance(e, nt.Integer) for e in t.types)


_KINDS = {
    "key": (_is_key, "a key (key/split's uint32 array row or fold_in's tuple of two ints)"),
    "counter": (lambda t: _is_key(t, 4), "a 1-d integer array or a tuple of four ints"),
    "int": (lambda t: isinstance(t, (nt.Integer, nt.Omitted, int)) and not isinstance(t, nt.Boolean),
            "an integer"),
    "real": (lambda t: isinstance(t, (nt.Integer, nt.Float, nt.Omitted, int, float))
             and not isinstance(t, nt.Boolean), "a real number"),
}


def _checker(fn: str, **params: str):
    """A no-op function whose typing checks lw.random.``fn``'s arguments.

    Compiled ``forceinline`` (LLVM's ``alwaysinline``), so no call of it is left in a
    lane by the time Numba prunes reference counts.  A call that is left there (its
    error-status branch between a key array's incref and decref) keeps the pair: a
    ``NRT_incref``/``NRT_decref`` call per lane that is only removed after LLVM's
    loop vectoriser has run, so every loop of draws from a key *array* stayed scalar
    (the Monte Carlo reduction ``normal(fold_in(key, i))``: 61 -> 16 ns a path).
    """
    def check(*args):
        pass
    # Numba's error names the function: make it read lw.random.<fn>(<argument types>).
    check.__name__ = check.__qualname__ = f"lw.random.{fn}"

    @overload(check, jit_options={"forceinline": True})
    def _typing(*args):
        for (name, kind), t in zip(params.items(), args):
            accepts, what = _KINDS[kind]
            if not accepts(t):
                raise TypingError(f"lw.random.{fn}: {name} must be {what}, got {t}")
        return lambda *args: None
    return check


_check_key = _checker("key", seed="int")
_check_split = _checker("split", key="key", num="int")
_check_fold_in = _checker("fold_in", key="key", data="int")
_check_uniform = _checker("uniform", key="key", lo="real", hi="real")
_check_uniform32 = _checker("uniform32", key="key", lo="real", hi="real")
_check_normal = _checker("normal", key="key")
_check_exponential = _checker("exponential", key="key")
_check_integers = _checker("integers", key="key", lo="int", hi="int")
_check_bits = _checker("bits", key="key")
_check_philox4x32 = _checker("philox4x32", counter="counter", key="key")


def key_lane(seed):
    _check_key(seed)
    return _core_key_array(seed)


def split_lane(key, num=2):
    _check_split(key, num)
    return _core_split(key, max(num, 0))


def fold_in_lane(key, data):
    _check_fold_in(key, data)
    a, b = _core_fold_in(key, data)
    return np.uint32(a), np.uint32(b)


def uniform_lane(key, lo=0.0, hi=1.0):
    _check_uniform(key, lo, hi)
    return np.float64(_core_uniform(key, np.float64(lo), np.float64(hi)))


def uniform32_lane(key, lo=0.0, hi=1.0):
    _check_uniform32(key, lo, hi)
    return np.float32(_core_uniform32(key, np.float32(lo), np.float32(hi)))


def normal_lane(key):
    _check_normal(key)
    return np.float64(_core_normal(key))


def exponential_lane(key):
    _check_exponential(key)
    return np.float64(_core_exponential(key))


def integers_lane(key, lo, hi):
    _check_integers(key, lo, hi)
    return np.int64(_core_integers(key, np.int64(lo), np.int64(hi)))


def bits_lane(key):
    _check_bits(key)
    return np.uint64(_core_bits(key))


def philox4x32_lane(counter, key):
    _check_philox4x32(counter, key)
    a, b, c, d = _core_philox_words(counter, key)
    return np.uint32(a), np.uint32(b), np.uint32(c), np.uint32(d)
