"""Building blocks of lanewise's vector math: LLVM intrinsics and double-double helpers.

Everything here is a scalar function compiled with ``numba.njit`` (:func:`kernel`:
inlined into the public kernel that calls it, in its source: :mod:`._flatten`).  A public kernel has
the options in :data:`KERNEL` (:func:`public`) — ``forceinline=True`` puts LLVM's
``alwaysinline`` on it, so it is inlined into whatever loop calls it (however large
it is) and the loop vectoriser sees straight-line code; ``fastmath=False`` is set
explicitly so a caller compiled with ``fastmath=True`` cannot re-associate the
error-free transformations below.

Conventions used by every module of :mod:`lanewise.lanemath`:

* a *double-double* (dd) value is a pair ``(hi, lo)`` with ``|lo| <= ulp(hi)/2``; the
  helpers below are the classical error-free transformations (Knuth two-sum, Dekker
  fast-two-sum, FMA two-product);
* integer tricks work on the IEEE bits through :func:`f2i` / :func:`i2f` (bitcasts,
  free in registers); float -> int conversions use the ``1.5 * 2**52`` "magic number"
  instead of ``fptosi`` so they vectorise on AVX2 as well as AVX-512;
* branches are written as conditional expressions on values that are cheap to
  compute both ways, which LLVM turns into ``select`` instructions.
"""

from __future__ import annotations

import functools

import numba
from llvmlite import ir
from numba import types
from numba.extending import intrinsic


from ..runtime.cache import own_cache
from ..runtime.prebuilt import install as _install_prebuilt, target_has_fma
from ._flatten import flatten

#: Options of every lanemath kernel (see the module docstring).
#: ``cache``: compiled once, not in every process, in lanewise's versioned cache
#: folder (runtime.cache._OwnFunctionLocator); off with ``LANEWISE_DISK_CACHE=0``.
#: No wrappers for calls from Python or as a C function: only compiled code calls
#: a kernel (the public functions' interpreter path compiles its own caller).
KERNEL = dict(forceinline=True, error_model="numpy", fastmath=False, nogil=True, cache=own_cache(),
              no_cpython_wrapper=True, no_cfunc_wrapper=True)


#: Options of the internal helpers: inlined into the public kernels (in their source,
#: :mod:`._flatten`; calls it leaves by Numba's IR inliner), so a public function
#: compiles as one function, not as a chain of dispatchers each optimised, emitted
#: and saved on its own (cos: 1.7 s cold against 1 s).
HELPER = dict(inline="always", error_model="numpy", fastmath=False, nogil=True)


def kernel(fn):
    """``numba.njit`` with :data:`HELPER` options; :func:`public` makes the cached
    dispatcher a public function calls."""
    return numba.njit(**HELPER)(fn)


@functools.lru_cache(maxsize=None)  # one dispatcher per kernel: pow and power share pow64
def public(k):
    """The disk-cached, LLVM-inlined dispatcher (:data:`KERNEL`) of kernel ``k``,
    its helpers inlined in its source (:mod:`._flatten`: compiled in half the time)."""
    return numba.njit(**KERNEL)(flatten(k.py_func))


#: Exact products use the FMA instruction (else Dekker's algorithm); fixed when the
#: module is imported, so Numba sees a compile-time constant and drops the other path.
HAS_FMA = target_has_fma()

_install_prebuilt()  # kernels a fresh cache lacks load from the shipped bitcode (runtime.prebuilt)


# --------------------------------------------------------------------------- intrinsics

def _float_ir(ty):
    return ir.DoubleType() if ty.bitwidth == 64 else ir.FloatType()


def _int_ir(ty):
    return ir.IntType(ty.bitwidth)


def _same_floats(*tys):
    return all(isinstance(t, types.Float) for t in tys) and len({t.bitwidth for t in tys}) == 1


@intrinsic
def fma(typingctx, a, b, c):
    """``a * b + c`` with one rounding (``llvm.fma``)."""
    if not _same_floats(a, b, c):
        return None

    def codegen(context, builder, sig, args):
        ft = _float_ir(sig.return_type)
        fn = builder.module.declare_intrinsic("llvm.fma", [ft], ir.FunctionType(ft, [ft] * 3))
        return builder.call(fn, args)

    return a(a, b, c), codegen


@intrinsic
def fmuladd(typingctx, a, b, c):
    """``a * b + c``, fused where the target has FMA (``llvm.fmuladd``)."""
    if not _same_floats(a, b, c):
        return None

    def codegen(context, builder, sig, args):
        ft = _float_ir(sig.return_type)
        fn = builder.module.declare_intrinsic("llvm.fmuladd", [ft], ir.FunctionType(ft, [ft] * 3))
        return builder.call(fn, args)

    return a(a, b, c), codegen


def _unary_intrinsic(llvm_name, doc):
    @intrinsic
    def _impl(typingctx, x):
        if not isinstance(x, types.Float):
            return None

        def codegen(context, builder, sig, args):
            ft = _float_ir(sig.return_type)
            fn = builder.module.declare_intrinsic(llvm_name, [ft], ir.FunctionType(ft, [ft]))
            return builder.call(fn, args)

        return x(x), codegen

    _impl.__doc__ = doc
    return _impl


fabs = _unary_intrinsic("llvm.fabs", "``|x|`` (clears the sign bit; NaN stays NaN).")
sqrt = _unary_intrinsic("llvm.sqrt", "Correctly rounded square root (hardware ``sqrt``).")
rint = _unary_intrinsic("llvm.rint", "Round to nearest, ties to even.")
floor = _unary_intrinsic("llvm.floor", "Round toward minus infinity.")
trunc = _unary_intrinsic("llvm.trunc", "Round toward zero.")


@intrinsic
def copysign(typingctx, mag, sgn):
    """``|mag|`` with the sign bit of ``sgn`` (``llvm.copysign``)."""
    if not _same_floats(mag, sgn):
        return None

    def codegen(context, builder, sig, args):
        ft = _float_ir(sig.return_type)
        fn = builder.module.declare_intrinsic("llvm.copysign", [ft], ir.FunctionType(ft, [ft] * 2))
        return builder.call(fn, args)

    return mag(mag, sgn), codegen


@intrinsic
def f2i(typingctx, x):
    """The IEEE bits of a float as a signed integer of the same width (a bitcast)."""
    if not isinstance(x, types.Float):
        return None
    out = types.int64 if x.bitwidth == 64 else types.int32

    def codegen(context, builder, sig, args):
        return builder.bitcast(args[0], _int_ir(out))

    return out(x), codegen


@intrinsic
def i2f(typingctx, x):
    """The float whose IEEE bits are the integer ``x`` (int64 -> float64, int32 -> float32)."""
    if not isinstance(x, types.Integer) or x.bitwidth not in (32, 64):
        return None
    out = types.float64 if x.bitwidth == 64 else types.float32

    def codegen(context, builder, sig, args):
        return builder.bitcast(args[0], _float_ir(out))

    return out(x), codegen


# ------------------------------------------------------------------ double-double algebra

@kernel
def two_sum(a, b):
    """``(s, e)`` with ``s = fl(a + b)`` and ``s + e == a + b`` exactly (Knuth)."""
    s = a + b
    bb = s - a
    e = (a - (s - bb)) + (b - bb)
    return s, e


@kernel
def fast_two_sum(a, b):
    """Like :func:`two_sum` when ``|a| >= |b|`` (or ``a == 0``): three flops (Dekker)."""
    s = a + b
    e = b - (s - a)
    return s, e


_SPLIT = 134217729.0  # 2**27 + 1


@kernel
def _split(a):
    """Veltkamp split of ``a`` into two 26-bit halves (scaled so huge ``a`` cannot overflow)."""
    big = fabs(a) > 6.69692879491417e+299           # 2**996
    s = a * 3.725290298461914e-09 if big else a      # 2**-28
    c = _SPLIT * s
    hi = c - (c - s)
    hi = hi * 268435456.0 if big else hi             # 2**28
    return hi, a - hi


@kernel
def two_prod(a, b):
    """``(p, e)`` with ``p = fl(a * b)`` and ``p + e == a * b`` exactly (barring under/overflow)."""
    p = a * b
    if HAS_FMA:
        e = fma(a, b, -p)
    else:
        ah, al = _split(a)
        bh, bl = _split(b)
        e = ((ah * bh - p) + ah * bl + al * bh) + al * bl
    return p, e


@kernel
def mla(a, b, c):
    """``a * b + c`` for polynomial evaluation: one FMA where the target has one."""
    return fmuladd(a, b, c)


@kernel
def dd_add(ah, al, bh, bl):
    """Double-double sum (accurate two-sum version)."""
    s, e = two_sum(ah, bh)
    t, f = two_sum(al, bl)
    e += t
    s, e = fast_two_sum(s, e)
    e += f
    return fast_two_sum(s, e)


@kernel
def dd_mul(ah, al, bh, bl):
    """Double-double product (relative error about 2**-102)."""
    p, e = two_prod(ah, bh)
    e += ah * bl + al * bh
    return fast_two_sum(p, e)


@kernel
def dd_mul_d(ah, al, b):
    """Double-double times double."""
    p, e = two_prod(ah, b)
    e = mla(al, b, e)
    return fast_two_sum(p, e)


@kernel
def dd_div(ah, al, bh, bl):
    """Double-double quotient ``(ah + al) / (bh + bl)`` (relative error about 2**-100).

    One division: ``q = ah * (1/bh)`` may be off by an ulp, the exact residual
    ``ah - q*bh`` (FMA/Dekker) corrects it.
    """
    inv = 1.0 / bh
    q = ah * inv
    p, e = two_prod(q, bh)
    r = ((ah - p) - e + al - q * bl) * inv
    return fast_two_sum(q, r)


# ------------------------------------------------------------------- integer/bit helpers

#: 1.5 * 2**52: adding it to |t| < 2**51 rounds t to an integer held in the low bits.
MAGIC = 6755399441055744.0
_MAGIC_BITS = 0x4338000000000000


@kernel
def round_to_int(t):
    """``(n, k)``: ``n = rint(t)`` as a float and as an int64, for ``|t| < 2**51``.

    The magic-number trick avoids ``cvtpd2qq`` (AVX-512DQ only); NaN gives garbage
    ``k`` but never poison.
    """
    s = t + MAGIC
    n = s - MAGIC
    k = f2i(s) - _MAGIC_BITS
    return n, k


@kernel
def int_to_float(k):
    """``float(k)`` for ``|k| < 2**51`` without ``cvtqq2pd``."""
    return i2f(k + _MAGIC_BITS) - MAGIC


@kernel
def pow2i(k):
    """``2.0 ** k`` for integer ``-1022 <= k <= 1023`` (builds the exponent bits)."""
    return i2f((k + 1023) << 52)


@kernel
def ldexp_k(x, k):
    """``x * 2**k`` for ``|k| <= 2098``, correct through overflow and gradual underflow.

    Two exact power-of-two factors (as in musl's ``scalbn``), so the only rounding is
    the final one when the result is subnormal.
    """
    k1 = k >> 1
    k2 = k - k1
    return (x * pow2i(k1)) * pow2i(k2)
