"""``lw.random`` inside lanes on the tpu backend: Philox4x32-10 on uint32 tiles.

The chip computes 32-bit words only, so Philox's 32x32 -> 64-bit products are
built from 16-bit halves (:func:`mulhilo`: four products below 2**32 each) and
every draw reads the block's words with 32-bit shifts.  The bits are the CPU
backends' (the specification is ``lanewise/random/__init__.py``'s docstring):

* ``philox4x32``, ``fold_in`` and ``key`` (its two words) equal the CPU's bit for bit;
* ``uniform32`` equals the CPU's bit for bit;
* the draws the CPU computes in float64 give float32 here (docs/tpu.md, rows
  ``R01``-``R08``): ``uniform(k)`` is the float32 nearest the CPU's uniform,
  rounded from the same 53 bits (a value that rounds up to 1.0 gives the float32
  below 1.0), and with bounds ``lo + (hi - lo) * u`` in float32; ``normal`` and
  ``exponential`` compute the CPU's formulas in float32 from the same words
  (``sqrt(-2 ln u1) cos(2 pi u2)``, ``-ln(1 - u)``), within a few float32 ulps;
* ``integers`` on int32 bounds is the CPU's value exactly (Lemire's method with
  the 64-bit product from 32-bit words, rejections included), as int32;
* ``bits`` (a uint64) and ``split`` (an array per lane) are refused with the fix.

A key in a lane is a tuple of two words: ``fold_in``'s and ``key``'s results, two
uint32 (or int32) arguments, or an int seed passed to ``key``.

Example:
    >>> import jax.numpy as jnp
    >>> [f"{int(w):08x}" for w in philox4x32(*(jnp.uint32(0),) * 6)]
    ['6627e8d5', 'e169c58d', 'bc57ac4c', '9b00dbd8']
"""

from __future__ import annotations

import math

import jax.numpy as jnp
import numpy as np
from jax import lax

from ... import random as lw_random
from ...errors import LaneCompileError, LaneTypeError
from .ops import some
from . import trig

PHILOX_M0, PHILOX_M1, PHILOX_W0, PHILOX_W1 = lw_random.PHILOX

_U = np.uint32
_MASK16 = _U(0xFFFF)
#: Counter word 3 of each use of a key (package docstring, "Counters").
_TAG_DRAW, _TAG_FOLD = 0, 1


# ----------------------------------------------------------------------------- words


def words(v, what: str):
    """``v`` (a tile or a Python int) as uint32 words, modulo 2**32: int32 tiles are
    bit-cast, bools widened; a float is an error naming ``what``."""
    if isinstance(v, (bool, int, np.integer)):
        return jnp.asarray(int(v) & 0xFFFFFFFF, jnp.uint32)
    v = jnp.asarray(v)
    if v.dtype == jnp.uint32:
        return v
    if v.dtype == jnp.bool_:
        return v.astype(jnp.uint32)
    if v.dtype == jnp.int32:
        return lax.bitcast_convert_type(v, jnp.uint32)
    raise LaneTypeError(f"{what} must be an integer, got {v.dtype}")


def high_word(v):
    """The high word of the 64-bit value of an integer ``v`` (taken modulo 2**64, as the
    CPU takes seeds and fold_in data): the sign extension of an int32, 0 for a uint32."""
    if isinstance(v, (bool, int, np.integer)):
        return jnp.asarray((int(v) >> 32) & 0xFFFFFFFF, jnp.uint32)
    v = jnp.asarray(v)
    if v.dtype == jnp.int32:
        return jnp.where(v < 0, _U(0xFFFFFFFF), _U(0))
    return jnp.zeros(v.shape, jnp.uint32)


def mulhilo(a, b):
    """(high, low) words of the 64-bit product of uint32 ``a`` and ``b`` (tiles or constants).

    From 16-bit halves, each partial product below 2**32 and each partial sum too
    ((2**16 - 1)**2 + 2**16 - 1 < 2**32): only 32-bit multiplies, shifts and adds (the
    chip has no 32x32 -> 64-bit multiply).  The low word is the 32-bit product itself
    (multiplication wraps modulo 2**32): two operations fewer than from the halves.  The
    halves of a constant fold at trace time, and a constant whose halves are small
    enough (Philox's M0) adds both middle products at once (:func:`_short`)."""
    if isinstance(b, int) and _short(b):
        b_lo, b_hi = _U(b & 0xFFFF), _U(b >> 16)
        a_lo, a_hi = a & _MASK16, a >> _U(16)
        middle = a_hi * b_lo + a_lo * b_hi + ((a_lo * b_lo) >> _U(16))
        return a_hi * b_hi + (middle >> _U(16)), a * jnp.asarray(b, jnp.uint32)
    b = jnp.asarray(b, jnp.uint32) if isinstance(b, int) else b
    a_lo, a_hi, b_lo, b_hi = a & _MASK16, a >> _U(16), b & _MASK16, b >> _U(16)
    t = a_lo * b_lo
    u = a_hi * b_lo + (t >> _U(16))
    v = a_lo * b_hi + (u & _MASK16)
    return a_hi * b_hi + (u >> _U(16)) + (v >> _U(16)), a * b


def _short(b: int) -> bool:
    """Whether ``a_hi * b_lo + a_lo * b_hi + (a_lo * b_lo >> 16)`` stays below 2**32 for
    every uint32 ``a`` (the halves of a constant ``b``): one sum and shift where the general
    form needs two (13 operations instead of 15 per product, Philox's rounds take one)."""
    b_lo, b_hi = b & 0xFFFF, b >> 16
    return 0 <= b < 1 << 32 and 0xFFFF * (b_lo + b_hi) + ((0xFFFF * b_lo) >> 16) < 1 << 32


def philox4x32(c0, c1, c2, c3, k0, k1):
    """Philox4x32-10 of counter (c0..c3) under key (k0, k1), uint32 tiles or scalars: 4 words."""
    for r in range(10):
        if r:
            k0, k1 = k0 + _U(PHILOX_W0), k1 + _U(PHILOX_W1)
        h0, l0 = mulhilo(c0, PHILOX_M0)
        h1, l1 = mulhilo(c2, PHILOX_M1)
        c0, c1, c2, c3 = h1 ^ c1 ^ k0, l1, h0 ^ c3 ^ k1, l0
    return c0, c1, c2, c3


def _block(key):
    """Block B_0 of ``key``: the words every draw reads."""
    zero = _U(0)
    return philox4x32(zero, zero, zero, _U(_TAG_DRAW), *key)


def fold_in(key, data):
    """The key for integer ``data`` under ``key``: (w0, w1) of philox(C(data, 1), key)."""
    w0, w1, _, _ = philox4x32(words(data, "data"), high_word(data), _U(0), _U(_TAG_FOLD), *key)
    return w0, w1


def key(seed):
    """``key(seed)``'s two words: the seed modulo 2**64, low word first."""
    return words(seed, "seed"), high_word(seed)


# ----------------------------------------------------------------------------- float32 from words


def _leading_zeros(x):
    """Leading zero bits of a uint32 ``x`` > 0 (a ladder of compares: no clz needed)."""
    z = jnp.zeros(jnp.shape(x), jnp.uint32)
    for s in (16, 8, 4, 2, 1):
        small = (x >> _U(32 - s)) == _U(0)
        z = jnp.where(small, z + _U(s), z)
        x = jnp.where(small, x << _U(s), x)
    return z


def nearest_f32(high, low):
    """The float32 nearest ``(high * 2**32 + low) * 2**-53`` (ties to even), for the
    integer from 0 to 2**53 (``high`` < 2**22): the CPU's 53-bit uniform rounded,
    exactly, with 32-bit integer operations only."""
    big = high != _U(0)
    zh = _leading_zeros(jnp.where(big, high, _U(1)))  # 10..31: high < 2**22
    zl = _leading_zeros(jnp.where(low != _U(0), low, _U(1)))
    # the 32 bits from the leading one down, and whether any bit below them is set
    top = jnp.where(big, (high << zh) | (low >> (_U(32) - zh)), low << zl)
    rest = jnp.where(big, low << zh, _U(0))
    lead = jnp.where(big, _U(63) - zh, _U(31) - zl)  # the leading one's bit
    sig = top >> _U(8)
    half = (top >> _U(7)) & _U(1)
    sticky = ((top & _U(0x7F)) | rest) != _U(0)
    up = half & (sticky | (sig & _U(1)) != _U(0)).astype(jnp.uint32)
    # exponent field (lead - 53 + 127) << 23 plus the 23 fraction bits: a carry of the
    # rounding moves into the exponent, as it should
    bits = ((lead + _U(74)) << _U(23)) + (sig & _U(0x7FFFFF)) + up
    value = lax.bitcast_convert_type(bits, jnp.float32)
    return jnp.where((high | low) == _U(0), jnp.float32(0.0), value)


def close_f32(high, low):
    """``(high * 2**32 + low) * 2**-53`` in float32 within an ulp (``high`` < 2**22), not
    always the nearest: three pieces, each exact in float32, summed small first (two
    roundings).  The logarithms of the normal and exponential draws read it: about ten
    operations where :func:`nearest_f32` takes about eighty."""
    def f(w):
        return lax.bitcast_convert_type(w, jnp.int32).astype(jnp.float32)  # < 2**24: exact
    low_part = f(low >> _U(8)) * jnp.float32(2.0 ** -45) + f(low & _U(0xFF)) * jnp.float32(2.0 ** -53)
    return f(high) * jnp.float32(2.0 ** -21) + low_part


def _m53(w_low, w_high):
    """The 53-bit integer ``X >> 11`` of the 64-bit word ``X = w_high * 2**32 + w_low``, as (high, low)."""
    return w_high >> _U(11), (w_high << _U(21)) | (w_low >> _U(11))


def _plus_one(high, low):
    low = low + _U(1)
    return high + (low == _U(0)).astype(jnp.uint32), low


def _complement(high, low):
    """``2**53 - 1 - m`` of a 53-bit ``m`` as (high, low)."""
    return ~high & _U((1 << 21) - 1), ~low


def below32(x):
    """The largest float32 below ``x`` (not NaN or -inf), by a step of its bits."""
    b = lax.bitcast_convert_type(x, jnp.int32)
    b = jnp.where(x > 0, b - 1, jnp.where(x < 0, b + 1, jnp.int32(-(1 << 31) + 1)))
    return lax.bitcast_convert_type(b, jnp.float32)


def _f32(v, what: str):
    v = jnp.asarray(v)
    if not (jnp.issubdtype(v.dtype, jnp.floating) or jnp.issubdtype(v.dtype, jnp.integer)):
        raise LaneTypeError(f"{what} must be a real number, got {v.dtype}")
    return v.astype(jnp.float32)


def _rounded(a, b, word):
    """``a * b`` rounded on its own, never fused with the sum it feeds (the CPU's mul32).

    XLA on the CPU (interpret mode) contracts ``a * b + c`` into an FMA, which rounds
    once: the CPU's uniform32 rounds twice.  The product reaches the sum through an
    integer ``or`` with ``(w * w + w) & 1`` of a Philox ``word``: always 0 (w(w + 1) is
    even), which neither XLA nor LLVM proves, so no compiler sees a product feeding a
    sum (a select on ``p != p`` is removed where LLVM proves the product is no NaN)."""
    zero = (word * word + word) & _U(1)
    p = lax.bitcast_convert_type(a * b, jnp.uint32) | zero
    return lax.bitcast_convert_type(p, jnp.float32)


def _scaled(u, lo, hi, word):
    """``lo + (hi - lo) * u`` in float32, the CPU's clamp below ``hi`` included."""
    lo, hi = _f32(lo, "lo"), _f32(hi, "hi")
    v = lo + _rounded(hi - lo, u, word)
    return jnp.where((v >= hi) & (hi > lo), below32(hi), v)


# ----------------------------------------------------------------------------- draws


def uniform32(key, lo=0.0, hi=1.0):
    """The CPU's uniform32, bit for bit: ``(X_0 >> 40) * 2**-24`` is ``w1 >> 8``, exact in float32."""
    _, w1, _, _ = _block(key)
    u = lax.bitcast_convert_type(w1 >> _U(8), jnp.int32).astype(jnp.float32) * jnp.float32(2.0 ** -24)
    return _scaled(u, lo, hi, w1)


def uniform(key, lo=0.0, hi=1.0):
    """float32: the CPU's 53-bit uniform rounded to the nearest float32, then scaled as
    :func:`uniform32` scales (the clamp keeps it below ``hi``)."""
    w0, w1, _, _ = _block(key)
    return _scaled(nearest_f32(*_m53(w0, w1)), lo, hi, w1)


def _ln_unit(m_high, m_low):
    """``ln((m + 1) 2**-53)`` for a 53-bit ``m``, in float32: ``log1p(-(1 - u))`` where
    ``u`` is near 1 (``1 - u`` from the bits, within an ulp), ``log(u)`` elsewhere."""
    u = close_f32(*_plus_one(m_high, m_low))
    rest = close_f32(*_complement(m_high, m_low))  # 1 - u, from the bits (no cancellation)
    return jnp.where(u >= 0.5, jnp.log1p(-rest), jnp.log(u))


def _cos2pi(w2, w3):
    """cos(2 pi n 2**-53), ``n = X_1 >> 11`` of the words (w2, w3), as the CPU's cos2pi:
    quadrant ``j`` and remainder ``f`` in [-1/2, 1/2) from the integer, then
    cos/sin(pi f / 2) in float32."""
    shifted = w3 + _U(1 << 29)  # j = round(4 n 2**-53): the top two bits after adding half a quadrant
    q = shifted >> _U(30)       # j mod 4 (a carry past 2**32 is j = 4, quadrant 0)
    d_high = lax.bitcast_convert_type(w3 - (q << _U(30)), jnp.int32)  # (n - j 2**51) >> 21, signed
    f = d_high.astype(jnp.float32) * jnp.float32(2.0 ** -30) + \
        lax.bitcast_convert_type(w2 >> _U(11), jnp.int32).astype(jnp.float32) * jnp.float32(2.0 ** -51)
    # the polynomials alone (jnp.cos/jnp.sin would reduce again): a normal draw's kernel 1.13x
    # faster on the TPU v5e chip (MC's lane, benchmarks/device/tpu_cos_probe.py)
    c, s = trig.cos_sin_quarter(f * jnp.float32(math.pi / 2))
    return jnp.where(q == _U(0), c, jnp.where(q == _U(1), -s, jnp.where(q == _U(2), -c, s)))


def normal(key):
    """float32 Box-Muller (cosine branch) on the CPU's two 53-bit words of block B_0."""
    w0, w1, w2, w3 = _block(key)
    r = jnp.sqrt(jnp.float32(-2.0) * _ln_unit(*_m53(w0, w1)))
    return r * _cos2pi(w2, w3)


def exponential(key):
    """float32 ``-ln(1 - u)``, ``u`` the CPU's 53-bit uniform: ``-log1p(-u)`` below 1/2,
    ``-log(1 - u)`` above (``1 - u`` exact from the bits); >= +0 as on the CPU."""
    w0, w1, _, _ = _block(key)
    m = _m53(w0, w1)
    u = close_f32(*m)
    rest = close_f32(*_plus_one(*_complement(*m)))  # 2**53 - m: 1 - u
    return jnp.float32(0.0) - jnp.where(u < 0.5, jnp.log1p(-u), jnp.log(rest))


def _product_words(x_low, x_high, r):
    """Words 2 (bits 64..95), 1 and 0 of the 96-bit product of the 64-bit
    ``x_high * 2**32 + x_low`` and a uint32 ``r``."""
    p0h, p0l = mulhilo(x_low, r)
    p1h, p1l = mulhilo(x_high, r)
    mid = p1l + p0h
    return p1h + (mid < p0h).astype(jnp.uint32), mid, p0l


def _two64_mod(r):
    """``2**64 mod r`` for uint32 ``r`` >= 1: 64 modular doublings of 1 (no division on
    the chip's vector unit)."""
    def double(_, x):
        gap = r - x  # x < r, so x + x >= r exactly when x >= r - x
        return jnp.where(x >= gap, x - gap, x + x)
    return lax.fori_loop(0, 64, double, jnp.where(r == _U(1), _U(0), _U(1)))


def integers(key, lo, hi):
    """int32 in [lo, hi) (``lo`` if hi <= lo): the CPU's Lemire draw for int32 bounds,
    exactly.  ``r = hi - lo`` < 2**32, so the high word of the 96-bit ``X_0 * r`` is
    the draw, accepted for sure where the product's low 64 bits are >= r (> 2**64 mod r);
    a tile with a lane that may reject (probability < r / 2**64) resolves it in
    :func:`_retried`."""
    lo, hi = _int32(lo, "lo"), _int32(hi, "hi")
    empty = hi <= lo
    r = jnp.where(empty, _U(1), words(hi, "hi") - words(lo, "lo"))  # exact modulo 2**32
    w0, w1, _, _ = _block(key)
    top, mid, low = _product_words(w0, w1, r)
    sure = empty | (mid != _U(0)) | (low >= r)
    shape = jnp.broadcast_shapes(*(jnp.shape(v) for v in (top, r, *key)))
    top, mid, low, sure, r = (jnp.broadcast_to(v, shape) for v in (top, mid, low, sure, r))
    top = lax.cond(some(~sure), lambda: _retried(key, r, top, low, sure), lambda: top)
    return jnp.where(empty, lo, lax.bitcast_convert_type(words(lo, "lo") + top, jnp.int32))


def _retried(key, r, top, low, sure):
    """The accepted attempt's high word: attempt 0 judged against ``t = 2**64 mod r``,
    then attempts j = 1, 2, ... (the CPU's word X_j: words 2, 3 of block j >> 1 for odd
    j, words 0, 1 for even j) while some lane of the tile rejects."""
    t = _two64_mod(r)
    # the loop carries "done" as int32: Mosaic cannot carry a vector of bools through a
    # loop ("failed to legalize scf.yield", measured on the chip)
    done = (sure | (low >= t)).astype(jnp.int32)  # a lane not sure has product words (top, 0, low)

    def rejected(state):
        return some(state[2] == 0)

    def attempt(state):
        j, top, done = state
        b0, b1, b2, b3 = philox4x32(words(j >> 1, "j"), _U(0), _U(0), _U(_TAG_DRAW), *key)
        odd = (j & 1) == 1
        new_top, mid, low = _product_words(jnp.where(odd, b2, b0), jnp.where(odd, b3, b1), r)
        accept = (mid != _U(0)) | (low >= t)
        return j + 1, jnp.where(done != 0, top, new_top), jnp.where(accept, 1, done)

    return lax.while_loop(rejected, attempt, (jnp.int32(1), top, done))[1]


def _int32(v, what: str):
    """An integers bound as int32 (the TPU has no int64): a literal outside int32 is an error."""
    if isinstance(v, (bool, int, np.integer)):
        if not -(1 << 31) <= int(v) < (1 << 31):
            raise LaneTypeError(f"{what} = {int(v)} does not fit int32 (the tpu backend computes 32-bit integers)")
        return jnp.int32(v)
    v = jnp.asarray(v)
    if v.dtype == jnp.bool_:
        return v.astype(jnp.int32)
    if v.dtype != jnp.int32:
        raise LaneTypeError(f"{what} must be an int32 integer on the tpu backend, got {v.dtype}")
    return v


# ----------------------------------------------------------------------------- the lowering's table


def _philox_call(counter, key):
    if not (isinstance(counter, tuple) and len(counter) == 4):
        raise LaneTypeError("lw.random.philox4x32's counter must be a tuple of four integers on the tpu backend")
    return philox4x32(*(words(c, "a counter word") for c in counter), *key)


#: Parameters of the functions the SPMD twins do not list: (name, kind, default).
_OWN_PARAMS = {lw_random.key: (("seed", "int", None),),
               lw_random.philox4x32: (("counter", "counter", None), ("key", "key", None))}
#: lw.random's public functions -> their lowering here.
_LOWERINGS = {lw_random.key: key, lw_random.fold_in: fold_in, lw_random.uniform: uniform,
              lw_random.uniform32: uniform32, lw_random.normal: normal, lw_random.exponential: exponential,
              lw_random.integers: integers, lw_random.philox4x32: _philox_call}
#: The functions refused on the chip, with the fix.
REFUSED = {
    lw_random.bits: "gives a uint64, which the TPU does not compute: draw uint32 words with "
                    "lw.random.philox4x32(counter, key), or use uniform32/integers",
    lw_random.split: "allocates an array per lane: derive keys with lw.random.fold_in(key, i) instead",
}


def lowers(fn) -> bool:
    """Whether ``fn`` (a lane's callee) is an lw.random function this module lowers or refuses."""
    return any(fn is f for f in (*_LOWERINGS, *REFUSED))


def _parameters(fn):
    own = _OWN_PARAMS.get(fn)
    return own if own is not None else lw_random.SPMD_TWINS[fn]


def _key(value, name: str, at: str):
    """A key in a lane, as its two uint32 words: a tuple of two words, or a (2,) row (a
    row of lw.random.split's keys, or one key array given to every lane)."""
    from .rows import Row, read

    if isinstance(value, Row) and value.length == 2:
        value = (read(value, 0, at), read(value, 1, at))
    if isinstance(value, tuple) and len(value) == 2 and not any(isinstance(v, tuple) for v in value):
        return tuple(words(v, f"a word of the {name}") for v in value)
    raise LaneCompileError(
        f"the {name} passed to lw.random on the tpu backend must be a key: a tuple of two integer words "
        f"(lw.random.fold_in's or lw.random.key's result, or two uint32 arguments) or a (2,) key array "
        f"({at})")


def call(fn, args: list, keywords: dict, at: str):
    """``fn(*args, **keywords)`` (``fn`` an lw.random function, the arguments tile values
    of the lane) on the chip; ``at``: the user's file:line, for errors."""
    name = f"lw.random.{fn.__name__}"
    if any(fn is f for f in REFUSED):
        raise LaneCompileError(f"{name} is not supported on the tpu backend: it "
                               f"{next(v for f, v in REFUSED.items() if f is fn)} ({at})")
    params = _parameters(fn)
    if len(args) > len(params) or set(keywords) - {p for p, _, _ in params}:
        raise LaneCompileError(f"{name} takes the arguments ({', '.join(p for p, _, _ in params)}) ({at})")
    bound = dict(zip((p for p, _, _ in params), args, strict=False))
    for p, value in keywords.items():
        if p in bound:
            raise LaneCompileError(f"{name} got two values for {p} ({at})")
        bound[p] = value
    missing = [p for p, _, default in params if p not in bound and default is None]
    if missing:
        raise LaneCompileError(f"{name} is called without its argument {missing[0]} ({at})")
    try:
        values = [_key(bound.get(p, default), p, at) if kind == "key" else bound.get(p, default)
                  for p, kind, default in params]
        return next(f for g, f in _LOWERINGS.items() if g is fn)(*values)
    except LaneTypeError as e:
        raise LaneTypeError(f"{name}: {e} ({at})") from None
