"""Counter-based random numbers for lanes: JAX-like keys, Philox4x32-10 underneath.

There is no generator state.  A *key* names a stream; every draw is a pure
function of its key, so a lane's numbers depend only on the key it is given —
never on thread count, chunking, call order or backend.  To draw several
values in a lane, derive one key per draw with :func:`fold_in`::

    import numpy as np, lanewise as lw

    def path(k, n_steps):                 # one lane: one random walk
        x = 0.0
        for t in range(n_steps):
            x += lw.random.normal(lw.random.fold_in(k, t))
        return x

    keys = lw.random.split(lw.random.key(42), 10_000)    # (10000, 2) uint32
    ends = lw.vmap(path, in_axes=(0, None))(keys, 100)

Every function works on the host (plain Python) and inside lanes (any Numba
``njit`` code).  A key is either a ``(2,)`` integer array (what :func:`key`
gives; a row of :func:`split`'s ``(n, 2)`` array, which ``vmap`` hands a lane as
a view) or a tuple of two ints (what :func:`fold_in` gives).  Every function
accepts both, and gives the same bits for both, in both places.

API
---
``key(seed)``                 -> uint32 array (2,)     new key from an int seed
``split(key, num=2)``         -> uint32 array (num, 2) ``num`` independent keys
``fold_in(key, data)``        -> (uint32, uint32)      key for ``data`` (an int)
``uniform(key, lo=0., hi=1.)`` -> float64 in [lo, hi)  53 random bits
``uniform32(key, lo, hi)``    -> float32 in [lo, hi)   24 random bits
``normal(key)``               -> float64 standard normal (Box-Muller)
``exponential(key)``          -> float64 Exp(1)
``integers(key, lo, hi)``     -> int64 in [lo, hi), unbiased (Lemire)
``bits(key)``                 -> uint64, 64 random bits
``philox4x32(counter, key)``  -> 4 x uint32: the raw block function

Return types are the same in lanes and on the host (NumPy scalars there), so
``vmap(..., backend="python")`` and compiled backends agree.  Each public name
is a Numba dispatcher: Numba code calling it inlines the compiled version
(no call, no reference counting; LLVM can vectorise a lane loop of Philox
rounds), while a Python call runs a host version that checks its arguments
and calls the same compiled core.  ``fold_in``
returns a tuple, not an array, so a lane deriving keys never allocates;
``np.asarray(fold_in(k, i))`` gives the array form.  ``key`` and ``split``
allocate their array when called inside a lane: there, prefer ``fold_in``.
Draws from one key are not independent of each other (``uniform(k)`` and
``bits(k)`` share bits): use one key per draw.

Specification (what the CUDA and Dask backends must reproduce bit for bit)
-------------------------------------------------------------------------
Philox4x32-10 (Salmon, Moraes, Dror, Shaw, SC'11; Random123 1.14).  Counter
c = (c0, c1, c2, c3), key k = (k0, k1), uint32 words; ten rounds of::

    p0 = 0xD2511F53 * c0;  p1 = 0xCD9E8D57 * c2        (exact 64-bit products)
    c  = (hi(p1) ^ c1 ^ k0,  lo(p1),  hi(p0) ^ c3 ^ k1,  lo(p0))
    k  = (k0 + 0x9E3779B9,  k1 + 0xBB67AE85)  mod 2**32   (between rounds)

The output is c = (w0, w1, w2, w3).  Known answer: counter 0, key 0 ->
6627e8d5 e169c58d bc57ac4c 9b00dbd8.

Counters.  For a 64-bit unsigned n and a tag, ``C(n, tag) = (n mod 2**32,
n >> 32, 0, tag)``; tag 0 = draw, 1 = fold_in, 2 = split.  ``B_j = (w0..w3) =
philox(C(j, 0), k)`` is the j-th draw block of key k, and its two 64-bit
words are ``X_2j = w1 * 2**32 + w0`` and ``X_2j+1 = w3 * 2**32 + w2``.  Every
draw except a rejected ``integers`` attempt uses block B_0 only.

Keys.  Integers are taken modulo 2**64 (two's complement for negatives; seeds
and data outside [-2**63, 2**64) are an error on the host).
* key(seed): s = seed mod 2**64 -> (s mod 2**32, s >> 32).
* fold_in(k, d): (w0, w1) of philox(C(d mod 2**64, 1), k).
* split(k, num)[i]: (w0, w1) of philox(C(i, 2), k); so split(k, n)[i] does
  not depend on n, and differs from fold_in(k, i).
* Key words given as other integer types are reduced modulo 2**32.

Draws (all floating point is IEEE round-to-nearest, with no FMA contraction;
``a*b + c`` means a rounded product, then a rounded sum).
* bits(k) = X_0.
* uniform(k, lo, hi): u = (X_0 >> 11) * 2**-53 (exact, in [0, 1));
  v = lo + (hi - lo) * u in float64; if v >= hi and hi > lo, v = the largest
  double below hi.  With lo = 0, hi = 1 that is u itself.
* uniform32(k, lo, hi): u = (X_0 >> 40) * 2**-24 (float32, exact); lo, hi
  rounded to float32; v = lo + (hi - lo) * u in float32; same clamp.
  (uniform32(k) is uniform(k) truncated to 24 bits.)
* normal(k) = sqrt(-2 * ln53((X_0 >> 11) + 1)) * cos2pi(X_1 >> 11): the cosine
  branch of Box-Muller (the sine branch is discarded so one key gives one
  value from a fixed amount of randomness, branch-free).  |z| < 8.58.
* exponential(k) = 0.0 - ln53(2**53 - (X_0 >> 11)), i.e. -ln(1 - u), >= +0.
* integers(k, lo, hi), lo, hi int64: lo if hi <= lo.  Else r = hi - lo
  (in [1, 2**64)) and, for j = 0, 1, 2, ...: m = X_j * r (128-bit); return
  lo + (m >> 64) (mod 2**64, as int64) for the first j with
  (m mod 2**64) >= (2**64 mod r) (Lemire 2019, exactly unbiased; another
  attempt has probability < r / 2**64).
* ln53(n), integer 1 <= n <= 2**53, is ln(n 2**-53) by the exact recipe of
  ``_core.ln53`` (integer normalisation to m * 2**e, m in [sqrt(1/2),
  sqrt(2)]; fdlibm's log1p scheme, Taylor coefficients 2/(2i+1), i = 1..10,
  Horner; error <= 1 ulp).  cos2pi(n), 0 <= n < 2**53, is cos(2 pi n 2**-53)
  by ``_core.cos2pi`` (quadrant j and remainder f from integer arithmetic;
  Taylor polynomials of cos(pi f/2) and sin(pi f/2) of degree 16 and 17 in f,
  Horner; error <= 1.5 ulp).  Both use only + - * / and exact conversions (no
  libm), so any IEEE platform reproduces them; ``sqrt`` is correctly rounded.

Example:
    >>> import numpy as np, lanewise as lw
    >>> keys = lw.random.split(lw.random.key(0), 4)
    >>> u = lw.vmap(lambda k: lw.random.uniform(k))(keys)
    >>> bool(np.all(u == [lw.random.uniform(k) for k in keys]))
    True
"""

from __future__ import annotations

import operator

import numpy as np

from . import _core
from ._core import (  # by name: lanewise re-targets lanes' global callees
    bits as _core_bits,
    exponential as _core_exponential,
    fold_in as _core_fold_in,
    integers as _core_integers,
    normal as _core_normal,
    philox_words as _core_philox_words,
    split as _core_split,
    uniform as _core_uniform,
    uniform32 as _core_uniform32,
)
from ._host import MASK32, compiled_as, host_key, int64, int64ish, real
from ._lanes import (bits_lane, exponential_lane, fold_in_lane, integers_lane, key_lane, normal_lane, philox4x32_lane,
                     split_lane, uniform32_lane, uniform_lane)

#: The float64 and float32 products the draws use.  A target that may contract a
#: product into an FMA overloads these with a rounded product (the cuda backend:
#: libdevice's dmul_rn/fmul_rn), so draws match the CPU's bit for bit.
ROUNDED_PRODUCTS = (_core.mul, _core.mul32)

#: Philox4x32's multipliers and key increments (M0, M1, W0, W1), for a backend that
#: writes the block function in its own terms (backends/tpu/random.py: 32-bit words).
PHILOX = (_core.PHILOX_M0, _core.PHILOX_M1, _core.PHILOX_W0, _core.PHILOX_W1)

#: The generator's scalar functions shipped prebuilt, with their signatures
#: (lanewise/runtime/prebuilt.py).
PREBUILT = _core.PREBUILT

__all__ = ["key", "split", "fold_in", "uniform", "uniform32", "normal", "exponential",
           "integers", "bits", "philox4x32"]


# ----------------------------------------------------------------------------- public functions


@compiled_as(key_lane)
def key(seed) -> np.ndarray:
    """A new key from an integer seed in [-2**63, 2**64): uint32 array of shape (2,).

    The words are the seed's low and high 32 bits (negative seeds as two's
    complement), so distinct seeds give distinct keys.  Inside a lane it
    allocates the array; prefer passing keys in and using :func:`fold_in`.

    Example:
        >>> import lanewise as lw
        >>> lw.random.key(0), lw.random.key(2**32 + 5)
        (array([0, 0], dtype=uint32), array([5, 1], dtype=uint32))
    """
    s = int64ish(seed, "key", "seed")
    return np.array([s & MASK32, s >> 32], np.uint32)


@compiled_as(split_lane)
def split(key, num=2) -> np.ndarray:
    """``num`` new keys derived from ``key``: uint32 array of shape (num, 2).

    ``split(k, n)[i]`` does not depend on ``n``; the keys are independent of
    ``k``'s own draws and of ``fold_in(k, i)``.

    Example:
        >>> import lanewise as lw
        >>> ks = lw.random.split(lw.random.key(0), 3)
        >>> ks.shape, ks.dtype, len({tuple(r) for r in ks})
        ((3, 2), dtype('uint32'), 3)
    """
    num = operator.index(num)
    if num < 0:
        raise ValueError(f"lw.random.split: num must be >= 0, got {num}")
    return _core_split(host_key(key, "split"), num)


@compiled_as(fold_in_lane)
def fold_in(key, data):
    """The key for integer ``data`` (a step, a lane index, ...) under ``key``.

    Returns a tuple ``(np.uint32, np.uint32)`` — on the host and in lanes, so a
    lane deriving keys allocates nothing; every function here accepts it as a
    key.  ``data`` is an integer in [-2**63, 2**64), taken modulo 2**64.

    Example:
        >>> import lanewise as lw
        >>> k = lw.random.key(0)
        >>> k1 = lw.random.fold_in(k, 1)
        >>> type(k1).__name__, k1 == lw.random.fold_in(k, 1), k1 == lw.random.fold_in(k, 2)
        ('tuple', True, False)
    """
    a, b = _core_fold_in(host_key(key, "fold_in"), np.uint64(int64ish(data, "fold_in", "data")))
    return np.uint32(a), np.uint32(b)


@compiled_as(uniform_lane)
def uniform(key, lo=0.0, hi=1.0):
    """A float64 uniform in [lo, hi), from 53 random bits.

    Example:
        >>> import lanewise as lw
        >>> k = lw.random.key(0)
        >>> u = lw.random.uniform(k)
        >>> bool(0.0 <= u < 1.0), type(u).__name__, bool(u == lw.random.uniform(k))
        (True, 'float64', True)
        >>> bool(-1.0 <= lw.random.uniform(k, -1.0, 1.0) < 1.0)
        True
    """
    return np.float64(_core_uniform(host_key(key, "uniform"), real(lo, "uniform", "lo"),
                                    real(hi, "uniform", "hi")))


@compiled_as(uniform32_lane)
def uniform32(key, lo=0.0, hi=1.0):
    """A float32 uniform in [lo, hi), from 24 random bits (bounds rounded to float32).

    Example:
        >>> import lanewise as lw
        >>> k = lw.random.key(0)
        >>> u = lw.random.uniform32(k)
        >>> type(u).__name__, bool(u == float(lw.random.uniform(k)) // 2**-24 * 2**-24)
        ('float32', True)
    """
    return np.float32(_core_uniform32(host_key(key, "uniform32"),
                                      np.float32(real(lo, "uniform32", "lo")),
                                      np.float32(real(hi, "uniform32", "hi"))))


@compiled_as(normal_lane)
def normal(key):
    """A float64 standard normal: Box-Muller (cosine branch) on two 53-bit uniforms.

    Branch-free and the same cost for every key; |z| < 8.58 (tails beyond are
    cut off: probability 1e-17).

    Example:
        >>> import numpy as np, lanewise as lw
        >>> z = np.array([lw.random.normal(k) for k in lw.random.split(lw.random.key(1), 5000)])
        >>> bool(abs(z.mean()) < 0.05 and abs(z.std() - 1) < 0.05)
        True
    """
    return np.float64(_core_normal(host_key(key, "normal")))


@compiled_as(exponential_lane)
def exponential(key):
    """A float64 exponential with rate 1: ``-ln(1 - u)``, u uniform from 53 bits.

    Example:
        >>> import lanewise as lw
        >>> e = lw.random.exponential(lw.random.key(0))
        >>> bool(e >= 0.0), type(e).__name__
        (True, 'float64')
    """
    return np.float64(_core_exponential(host_key(key, "exponential")))


@compiled_as(integers_lane)
def integers(key, lo, hi):
    """An int64 uniform in [lo, hi), without modulo bias (Lemire's method).

    ``lo`` and ``hi`` are int64; any span up to 2**64 - 1 works.  ``hi <= lo``
    gives ``lo`` (as ``jax.random.randint`` does), never an error, so lanes
    cannot fail on it.

    Example:
        >>> import numpy as np, lanewise as lw
        >>> dice = lw.vmap(lambda i, k: lw.random.integers(lw.random.fold_in(k, i), 1, 7),
        ...                in_axes=(0, None))
        >>> d = dice(np.arange(1000), lw.random.key(0))
        >>> sorted(set(d.tolist())), d.dtype
        ([1, 2, 3, 4, 5, 6], dtype('int64'))
    """
    lo, hi = int64(lo, "integers", "lo"), int64(hi, "integers", "hi")
    return np.int64(_core_integers(host_key(key, "integers"), lo, hi))


@compiled_as(bits_lane)
def bits(key):
    """64 random bits as a uint64 (the word every other draw is made from).

    Example:
        >>> import lanewise as lw
        >>> hex(lw.random.bits((0, 0)))  # words 1 and 0 of Philox(0, 0)
        '0xe169c58d6627e8d5'
    """
    return np.uint64(_core_bits(host_key(key, "bits")))


@compiled_as(philox4x32_lane)
def philox4x32(counter, key):
    """Philox4x32-10 of four counter words under ``key``: a tuple of 4 uint32.

    The block function everything else is built on (module docstring).

    Example:
        >>> import lanewise as lw
        >>> [f"{w:08x}" for w in lw.random.philox4x32((0, 0, 0, 0), (0, 0))]
        ['6627e8d5', 'e169c58d', 'bc57ac4c', '9b00dbd8']
    """
    if len(counter) != 4:
        raise TypeError(f"lw.random.philox4x32: counter must have 4 words, got {len(counter)}")
    c = tuple(operator.index(w) & MASK32 for w in counter)
    return tuple(np.uint32(w) for w in _core_philox_words(c, host_key(key, "philox4x32")))


# ----------------------------------------------------------------------------- the SPMD path's forms

#: For each draw: its function in :mod:`.spmd` and its parameters as (name, kind,
#: default); a "key" parameter is passed there as its two words.  The SPMD
#: transformation (lanewise.spmd.transform) calls these instead of inlining the
#: draw's code, which is written with intrinsics it cannot widen.
SPMD_TWINS = {
    fold_in: (("key", "key", None), ("data", "int", None)),
    uniform: (("key", "key", None), ("lo", "real", 0.0), ("hi", "real", 1.0)),
    uniform32: (("key", "key", None), ("lo", "real", 0.0), ("hi", "real", 1.0)),
    normal: (("key", "key", None),),
    exponential: (("key", "key", None),),
    integers: (("key", "key", None), ("lo", "int", None), ("hi", "int", None)),
    bits: (("key", "key", None),),
}
for _fn, _params in SPMD_TWINS.items():  # (module, function, parameters, number of results)
    _fn._lw_spmd_twin = ("lanewise.random.spmd", _fn.__name__, _params, 2 if _fn is fold_in else 1)
del _fn, _params
