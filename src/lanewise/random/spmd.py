"""The forms of :mod:`lanewise.random`'s draws that the SPMD path calls.

A W-wide lane (:mod:`lanewise.spmd`) holds a key as its two words, each a
vector of W integers.  It calls these functions with one lane's words at a time,
in a loop over the W lanes that LLVM vectorises (``spmd.vector.v_callN``), so
Philox and the samplers run W lanes per instruction.  Each gives the bits of
the public function of the same name for the key ``(k0, k1)``: both are the same
word-level code of :mod:`._core`, with the same argument conversions as the
public functions' in-lane versions.

Example:
    >>> import lanewise as lw
    >>> k = lw.random.key(3)
    >>> bool(normal(int(k[0]), int(k[1])) == lw.random.normal(k))
    True
"""

from __future__ import annotations

import numba
import numpy as np

from . import _core

#: ``forceinline``: LLVM's ``alwaysinline``, so the twin's code is in the lane loop
#: when LLVM's loop vectoriser runs (a call would keep the loop scalar).
jit = numba.njit(forceinline=True, **_core.JIT)


@jit
def fold_in(k0, k1, data):
    return _core.fold_in_words(k0, k1, data)


@jit
def uniform(k0, k1, lo, hi):
    return np.float64(_core.uniform_words(k0, k1, np.float64(lo), np.float64(hi)))


@jit
def uniform32(k0, k1, lo, hi):
    return np.float32(_core.uniform32_words(k0, k1, np.float32(lo), np.float32(hi)))


@jit
def normal(k0, k1):
    return np.float64(_core.normal_words(k0, k1))


@jit
def exponential(k0, k1):
    return np.float64(_core.exponential_words(k0, k1))


@jit
def integers(k0, k1, lo, hi):
    return np.int64(_core.integers_words(k0, k1, np.int64(lo), np.int64(hi)))


@jit
def bits(k0, k1):
    return np.uint64(_core.bits_words(k0, k1))
