"""The compiled core of :mod:`lanewise.random`: Philox4x32-10 and every output mapping.

Everything here is compiled: ``numba.njit`` functions (inlined into their
callers) over two intrinsics, ``intrinsics.philox`` (the block function) and
``intrinsics.bitcast``.  The public functions in ``lanewise/random/__init__.py``
call these same functions from Python (host) and from compiled lanes, so both
give the same bits.  The package docstring is the specification; this file is
its only implementation.

Integer words are carried in ``uint64`` variables (32-bit values are kept
masked) so that no Numba integer promotion (``int64`` mixed with ``uint64``
becomes ``float64``) can creep in; every constant is a typed NumPy scalar.

Floating point is plain IEEE binary64/binary32 ``+ - * /`` and ``sqrt``; every
product that feeds a sum goes through :func:`mul`, so no compiler may contract it
into an FMA (LLVM never does without fast-math; NVVM does unless told, see ``mul``).
The two transcendentals the samplers need, :func:`ln53` and :func:`cos2pi`,
are written out here instead of calling libm, so their results are defined
by this source alone (a CUDA port reproduces them bit for bit) and the
samplers stay branch-free and vectorisable.

Example:
    >>> [hex(w) for w in philox_words((0, 0, 0, 0), (0, 0))]
    ['0x6627e8d5', '0xe169c58d', '0xbc57ac4c', '0x9b00dbd8']
"""

from __future__ import annotations

import math
from types import ModuleType

import numba
import numpy as np
from llvmlite import ir
from numba.core import types as nt
from numba.extending import intrinsic, overload

from ..runtime import prebuilt

prebuilt.install()  # before any function here gets its disk cache: the shipped ones load from it

#: Compile options of every function here.  ``inline="always"`` inlines them
#: into the caller at Numba IR level, so a lane's loop holds no calls (and no
#: reference counting of key arrays) and LLVM can vectorise it: measured, an
#: njit loop of ``uniform(fold_in(k, i))`` runs 10x faster than with calls.
#: ``cache=True`` keeps the host-side specialisations on disk (everything they
#: depend on is in this file, so Numba's staleness check covers it).
JIT = dict(nogil=True, cache=True, error_model="numpy", inline="always")
jit = numba.njit(**JIT)

#: Options of the generator's larger functions of scalars only: inlined by LLVM
#: (``alwaysinline``), not by Numba.  Numba's IR inliner re-ran its front end and
#: deep-copied the callee's IR at every call site, in typing and again in the kernel:
#: a lane drawing three uniforms spent 0.8 s typing and 1 s compiling in it, a normal
#: draw 3.5 s of a Monte Carlo reduction's cold first call.  Compiled once per
#: signature (and shipped prebuilt for the signatures the draws use, :data:`PREBUILT`),
#: they reach the caller's loop as the same straight-line code (no arrays, so no
#: reference counts to keep out of the loop).  ``normal_words`` and
#: ``exponential_words`` stay IR-inlined: compiled on their own, the Monte Carlo
#: reduction ran 10% slower (same instructions, laid out differently).
SCALAR = dict(nogil=True, cache=True, error_model="numpy", forceinline=True)
scalar = numba.njit(**SCALAR)

U = np.uint64
_0, _1, _11, _32, _40, _51 = U(0), U(1), U(11), U(32), U(40), U(51)
_MASK32 = U(0xFFFFFFFF)
_HALF_QUADRANT = U(1 << 50)
_TWO_53 = U(1 << 53)
_NEG_TINY64 = np.int64(-(1 << 63) + 1)  # bit pattern of -5e-324, the float64 below 0
_NEG_TINY32 = np.int32(-(1 << 31) + 1)  # and of the float32 below 0

#: Counter word 3 separates the three uses of a key (package docstring, "Counters").
TAG_DRAW, TAG_FOLD, TAG_SPLIT = U(0), U(1), U(2)

_2M53 = 2.0 ** -53
_2M52 = 2.0 ** -52
_2M51 = 2.0 ** -51
_2M24_F32 = np.float32(2.0 ** -24)

# ln53: fdlibm's log(1 + f) scheme with Taylor coefficients 2/(2k+1), k = 1..10.
_SQRT2 = float.fromhex("0x1.6a09e667f3bcdp+0")          # fl(sqrt(2))
_LN2_HI = float.fromhex("0x1.62e42fee00000p-1")         # ln 2, 32 trailing zero bits
_LN2_LO = float.fromhex("0x1.a39ef35793c76p-33")        # fl(ln 2 - _LN2_HI)
_L1, _L2, _L3, _L4, _L5, _L6, _L7, _L8, _L9, _L10 = (2.0 / (2 * k + 1) for k in range(1, 11))

# cos2pi: Taylor coefficients of cos(pi/2 f) and sin(pi/2 f) / f in powers of f^2,
# each the double nearest the exact value (computed with mpmath at 200 bits).
_C1, _C2, _C3, _C4, _C5, _C6, _C7, _C8 = (float.fromhex(h) for h in (
    "-0x1.3bd3cc9be45dep+0", "0x1.03c1f081b5ac4p-2", "-0x1.55d3c7e3cbffap-6",
    "0x1.e1f506891babbp-11", "-0x1.a6d1f2a204a8cp-16", "0x1.f9d38a3763cc3p-22",
    "-0x1.b6e24f44b128fp-28", "0x1.20c62c2f2d7f5p-34"))
_S0, _S1, _S2, _S3, _S4, _S5, _S6, _S7, _S8 = (float.fromhex(h) for h in (
    "0x1.921fb54442d18p+0", "-0x1.4abbce625be53p-1", "0x1.466bc6775aae2p-4",
    "-0x1.32d2cce62bd86p-8", "0x1.50783487ee782p-13", "-0x1.e3074fde8871fp-19",
    "0x1.e8f434d018d63p-25", "-0x1.6fadb9f155744p-31", "0x1.aaec32af93359p-38"))


# ----------------------------------------------------------------------------- Philox

# Philox4x32 multipliers and Weyl key increments (Salmon et al. 2011, Random123).
PHILOX_M0, PHILOX_M1 = 0xD2511F53, 0xCD9E8D57
PHILOX_W0, PHILOX_W1 = 0x9E3779B9, 0xBB67AE85


@intrinsic
def _philox(typingctx, c0, c1, c2, c3, k0, k1):
    """Philox4x32-10 of counter (c0..c3) under key (k0, k1): four words.

    Arguments and results are ``uint64`` holding values below 2**32 (higher
    bits of the arguments are ignored).  An intrinsic: the ten rounds are
    emitted straight into the caller's LLVM IR (no call, nothing for Numba to
    inline or re-type), and LLVM vectorises them.
    """
    u64 = nt.uint64
    if (c0, c1, c2, c3, k0, k1) != (u64,) * 6:
        return None

    def codegen(context, builder, sig, args):
        i64 = ir.IntType(64)
        mask, shift = ir.Constant(i64, 0xFFFFFFFF), ir.Constant(i64, 32)
        m0, m1 = ir.Constant(i64, PHILOX_M0), ir.Constant(i64, PHILOX_M1)
        w0, w1 = ir.Constant(i64, PHILOX_W0), ir.Constant(i64, PHILOX_W1)
        # Masking the inputs tells LLVM every word is below 2**32: the products
        # become 32x32->64-bit multiplies (vpmuludq), on 64-bit vector lanes.
        c0, c1, c2, c3, k0, k1 = (builder.and_(a, mask) for a in args)
        for r in range(10):
            if r:
                k0 = builder.and_(builder.add(k0, w0), mask)
                k1 = builder.and_(builder.add(k1, w1), mask)
            p0, p1 = builder.mul(m0, c0), builder.mul(m1, c2)
            c0, c1, c2, c3 = (builder.xor(builder.xor(builder.lshr(p1, shift), c1), k0),
                              builder.and_(p1, mask),
                              builder.xor(builder.xor(builder.lshr(p0, shift), c3), k1),
                              builder.and_(p0, mask))
        return context.make_tuple(builder, sig.return_type, [c0, c1, c2, c3])
    return nt.UniTuple(u64, 4)(u64, u64, u64, u64, u64, u64), codegen


@intrinsic
def _bitcast(typingctx, x, target):
    """Reinterpret the bits of a scalar as the (same-width) type ``target``."""
    to = target.instance_type if isinstance(target, nt.NumberClass) else target.dtype

    def codegen(context, builder, sig, args):
        return builder.bitcast(args[0], context.get_value_type(to))
    return to(x, target), codegen


# The intrinsics are reached through a namespace module, not as globals here:
# lanewise fingerprints a lane's callees through the global names their code
# uses and stops at modules, and an intrinsic is not a value it can hash.
intrinsics = ModuleType(f"{__name__}.intrinsics", "Numba intrinsics of lanewise.random.")
intrinsics.philox, intrinsics.bitcast = _philox, _bitcast
del _philox, _bitcast


@jit
def words(key):
    """The two key words of a (2,) integer array or a 2-tuple of ints, as uint64."""
    return U(np.uint32(key[0])), U(np.uint32(key[1]))


@jit
def block(k0, k1, n, tag):
    """Philox of counter (n mod 2**32, n >> 32, 0, tag); ``n`` a uint64."""
    return intrinsics.philox(n & _MASK32, n >> _32, _0, tag, k0, k1)


@jit
def pair(lo, hi):
    """The 64-bit word ``hi * 2**32 + lo``."""
    return (hi << _32) | lo


@jit
def philox_words(counter, key):
    k0, k1 = words(key)
    c0, c1 = U(np.uint32(counter[0])), U(np.uint32(counter[1]))
    c2, c3 = U(np.uint32(counter[2])), U(np.uint32(counter[3]))
    o0, o1, o2, o3 = intrinsics.philox(c0, c1, c2, c3, k0, k1)
    return np.uint32(o0), np.uint32(o1), np.uint32(o2), np.uint32(o3)


# ----------------------------------------------------------------------------- keys


@jit
def key_array(seed):
    s = U(seed)
    out = np.empty(2, np.uint32)
    out[0] = s & _MASK32
    out[1] = s >> _32
    return out


@jit
def fold_in(key, data):
    k0, k1 = words(key)
    return fold_in_words(k0, k1, U(data))  # U(): a literal ``data`` would compile its own specialisation


@scalar
def fold_in_words(k0, k1, data):
    """:func:`fold_in` of the key (k0, k1), its words given as integers (see ``key_words``)."""
    o0, o1, _, _ = block(U(np.uint32(k0)), U(np.uint32(k1)), U(data), TAG_FOLD)
    return np.uint32(o0), np.uint32(o1)


@jit
def split(key, num):
    k0, k1 = words(key)
    out = np.empty((num, 2), np.uint32)
    for i in range(num):
        o0, o1, _, _ = block(k0, k1, U(i), TAG_SPLIT)
        out[i, 0] = o0
        out[i, 1] = o1
    return out


# ----------------------------------------------------------------------------- draws


# Each draw is written for the key's two words (``*_words``: what the SPMD path
# calls, one lane's words at a time, see lanewise.random.SPMD_TWINS); the key
# forms unpack the key and call it, so both give the same bits by construction.


@jit
def key_words(k0, k1):
    """The words of a key given as two integers of any type, as uint64 below 2**32."""
    return U(np.uint32(k0)), U(np.uint32(k1))


@jit
def bits(key):
    k0, k1 = words(key)
    return bits_words(k0, k1)


@scalar
def bits_words(k0, k1):
    k0, k1 = key_words(k0, k1)
    w0, w1, _, _ = block(k0, k1, _0, TAG_DRAW)
    return pair(w0, w1)


@jit
def uniform(key, lo, hi):
    """float64 in [lo, hi); ``lo``, ``hi`` float64."""
    k0, k1 = words(key)
    return uniform_words(k0, k1, lo, hi)


@scalar
def uniform_words(k0, k1, lo, hi):
    u = np.float64(np.int64(bits_words(k0, k1) >> _11)) * _2M53
    v = lo + mul(hi - lo, u)
    return below(hi) if v >= hi and hi > lo else v  # rounding reached hi


@jit
def uniform32(key, lo, hi):
    """float32 in [lo, hi); ``lo``, ``hi`` float32."""
    k0, k1 = words(key)
    return uniform32_words(k0, k1, lo, hi)


@scalar
def uniform32_words(k0, k1, lo, hi):
    u = np.float32(np.int64(bits_words(k0, k1) >> _40)) * _2M24_F32
    v = lo + mul32(hi - lo, u)
    return below32(hi) if v >= hi and hi > lo else v


@jit
def normal(key):
    """Box-Muller (cosine branch) on the two 53-bit halves of one block."""
    k0, k1 = words(key)
    return normal_words(k0, k1)


@jit
def normal_words(k0, k1):
    k0, k1 = key_words(k0, k1)
    w0, w1, w2, w3 = block(k0, k1, _0, TAG_DRAW)
    r = math.sqrt(-2.0 * ln53((pair(w0, w1) >> _11) + _1))
    return mul(r, cos2pi(pair(w2, w3) >> _11))  # a product the caller may add to


@jit
def exponential(key):
    """-ln(1 - u) with u the 53-bit uniform of the key (so 1 - u is exact)."""
    k0, k1 = words(key)
    return exponential_words(k0, k1)


@jit
def exponential_words(k0, k1):
    return 0.0 - ln53(_TWO_53 - (bits_words(k0, k1) >> _11))


@jit
def integers(key, lo, hi):
    """int64 uniform in [lo, hi) (``lo`` if hi <= lo): Lemire's multiply-and-reject."""
    k0, k1 = words(key)
    return integers_words(k0, k1, lo, hi)


@scalar
def integers_words(k0, k1, lo, hi):
    if hi <= lo:
        return lo
    k0, k1 = key_words(k0, k1)
    r = U(hi) - U(lo)  # 1 <= r < 2**64, exact modulo 2**64
    w0, w1, w2, w3 = block(k0, k1, _0, TAG_DRAW)
    m_hi, m_lo = mul128(pair(w0, w1), r)
    if m_lo < r:  # rare (probability < r / 2**64): maybe reject
        t = (_0 - r) % r  # 2**64 mod r
        j = _1
        while m_lo < t:
            if j & _1:
                x = pair(w2, w3)
            else:
                w0, w1, w2, w3 = block(k0, k1, j >> _1, TAG_DRAW)
                x = pair(w0, w1)
            m_hi, m_lo = mul128(x, r)
            j += _1
    return np.int64(U(lo) + m_hi)


@jit
def mul128(a, b):
    """(high, low) 64-bit halves of the 128-bit product of uint64 ``a`` and ``b``."""
    a0, a1, b0, b1 = a & _MASK32, a >> _32, b & _MASK32, b >> _32
    p00, p01, p10, p11 = a0 * b0, a0 * b1, a1 * b0, a1 * b1
    mid = (p00 >> _32) + (p01 & _MASK32) + (p10 & _MASK32)
    return p11 + (p01 >> _32) + (p10 >> _32) + (mid >> _32), a * b


# ----------------------------------------------------------------------------- exact math


def mul(a, b):
    """``a * b`` (float64) rounded on its own, never fused with an add.

    A stub with one implementation per target.  On the CPU it is plain ``*``
    (Numba compiles without fast-math, so LLVM never contracts).  NVVM contracts
    ``a * b + c`` into an FMA by default, which changes the last bit, so the CUDA
    backend registers libdevice's ``dmul_rn``, a product NVVM never contracts
    (backends.cuda_numpy): draws are then bit-identical on both.
    """
    return a * b


def mul32(a, b):
    """:func:`mul` for float32 (``fmul_rn`` on CUDA)."""
    return a * b


@overload(mul, target="cpu", inline="always")
def _mul_cpu(a, b):
    return lambda a, b: a * b


@overload(mul32, target="cpu", inline="always")
def _mul32_cpu(a, b):
    return lambda a, b: a * b


@jit
def below(x):
    """The largest float64 below ``x`` (not NaN or -inf): ``np.nextafter(x, -inf)``
    by an integer step on the bit pattern (no libm call, so it vectorises)."""
    b = intrinsics.bitcast(x, np.int64)
    b = b - np.int64(1) if x > 0.0 else (b + np.int64(1) if x < 0.0 else _NEG_TINY64)
    return intrinsics.bitcast(b, np.float64)


@jit
def below32(x):
    """The largest float32 below ``x`` (not NaN or -inf)."""
    b = intrinsics.bitcast(x, np.int32)
    b = np.int32(b - 1) if x > 0.0 else (np.int32(b + 1) if x < 0.0 else _NEG_TINY32)
    return intrinsics.bitcast(b, np.float32)


@jit
def bit_length(x):
    """Number of significant bits of a uint64 ``x`` > 0 (branch-free ladder)."""
    n = 1
    for s in (32, 16, 8, 4, 2, 1):
        big = x >> U(s) != _0
        n += s if big else 0
        x = x >> U(s) if big else x
    return n


@scalar
def ln53(n):
    """ln(n * 2**-53) for an integer 1 <= n <= 2**53 (uint64), within 1 ulp.

    n * 2**-53 = m * 2**e with m in [sqrt(1/2), sqrt(2)], found with integer
    shifts; then fdlibm's log(1 + f) = f - (f²/2 - s (f²/2 + R(s²))), s = f/(2+f).
    """
    b = min(bit_length(n), 53)
    m = np.float64(np.int64(n << U(53 - b))) * _2M52  # in [1, 2], exact
    e = np.float64(b - 54)
    if m > _SQRT2:
        m = m * 0.5
        e = e + 1.0
    f = m - 1.0  # exact
    hfsq = mul(0.5 * f, f)  # 0.5 * f is exact
    s = np.true_divide(f, 2.0 + f)  # never raises, whatever the caller's error_model
    z = s * s
    r = mul(z, _L1 + mul(z, _L2 + mul(z, _L3 + mul(z, _L4 + mul(z, _L5 + mul(z, (
        _L6 + mul(z, _L7 + mul(z, _L8 + mul(z, _L9 + mul(z, _L10)))))))))))
    t = mul(s, hfsq + r) + mul(e, _LN2_LO)
    return mul(e, _LN2_HI) - ((hfsq - t) - f)


@scalar
def cos2pi(n):
    """cos(2 pi n 2**-53) for an integer 0 <= n < 2**53 (uint64), within 1.5 ulp.

    4 n 2**-53 = j + f with j = round(4 n 2**-53) (ties up) and f in [-1/2, 1/2)
    exactly (integer arithmetic); cos(j pi/2 + pi f/2) from Taylor polynomials
    of cos(pi f/2) and sin(pi f/2) in f.
    """
    j = (n + _HALF_QUADRANT) >> _51
    f = np.float64(np.int64(n) - np.int64(j << _51)) * _2M51
    x = f * f
    c = 1.0 + mul(x, _C1 + mul(x, _C2 + mul(x, _C3 + mul(x, _C4 + mul(x, _C5 + mul(x, (
        _C6 + mul(x, _C7 + mul(x, _C8)))))))))
    s = mul(f, _S0 + mul(x, _S1 + mul(x, _S2 + mul(x, _S3 + mul(x, _S4 + mul(x, _S5 + mul(x, (
        _S6 + mul(x, _S7 + mul(x, _S8))))))))))
    q = j & U(3)
    v = c if q == _0 else -s
    v = -c if q == U(2) else v
    return s if q == U(3) else v


_u64, _i64, _f64, _f32 = nt.uint64, nt.int64, nt.float64, nt.float32

#: The scalar functions lanewise ships prebuilt (lanewise/runtime/prebuilt.py), with
#: the signatures the public draws call them with: on a fresh cache they are loaded,
#: not compiled (a lane drawing uniforms compiled them for 0.6 s of its first call).
PREBUILT = {
    fold_in_words: [(_u64, _u64, _u64), (_u64, _u64, _i64)], bits_words: [(_u64, _u64)],
    uniform_words: [(_u64, _u64, _f64, _f64)], uniform32_words: [(_u64, _u64, _f32, _f32)],
    integers_words: [(_u64, _u64, _i64, _i64)], ln53: [(_u64,)], cos2pi: [(_u64,)],
}
