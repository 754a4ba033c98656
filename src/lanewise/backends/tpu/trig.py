"""cos and sin of bounded arguments: a cheaper kernel where a grid step's arguments allow it.

Mosaic's ``jnp.cos`` reduces any float32 argument exactly (about 3 ulps on the TPU v5e);
a Cody-Waite reduction by pi/4 with Cephes' polynomials (:func:`cos_bounded`) costs less
and is as accurate (within 2.1 ulps of float64 on the chip) while ``|x| <= 64``, but
wrong far beyond.  A lane qualifies when every ``cos``/``sin`` it computes takes an
argument whose interval follows from the lane's arguments by arithmetic (:func:`plan`:
an interval interpreter over the tile function's jaxpr, no loop or branch in between).
Such a kernel is built twice: each grid step computes the intervals from its argument
blocks (their minimum and maximum: a column and a row of W5's plane cost two short
reductions) and runs the bounded version when every argument lies within
:data:`GUARD`, else the exact one (``.kernel``).  A NaN or an infinity in a block fails
the guard; the bounded functions give NaN for them anyway.

On W5 (a sum of ``cos(x² + y²) / (1 + x² + y²)``) a hand-written kernel guarded this way
ran 0.88x XLA's fused sum where ``jnp.cos`` gave 1.04x (benchmarks/device/tpu_cos_probe.py).

Example:
    >>> import jax, jax.numpy as jnp
    >>> f = lambda x, y: jnp.cos(x * x + y * y) / (1.0 + x * y)
    >>> jaxpr = jax.make_jaxpr(f)(jnp.zeros(4), jnp.zeros(4)).jaxpr
    >>> guard = plan(jaxpr)
    >>> guard.needed, bool(guard.ok([(-3.0, 3.0), (0.0, 2.0)])), bool(guard.ok([(-9.0, 3.0), (0.0, 2.0)]))
    ((0, 1), True, False)
    >>> round(float(cos_bounded(jnp.float32(10.0))), 6), round(float(sin_bounded(jnp.float32(-10.0))), 6)
    (-0.839072, 0.544021)
"""

from __future__ import annotations

import contextlib
import contextvars
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

#: Arguments the bounded cos and sin are measured within (2.1 ulps at 64 on the chip, 6.2 at 100).
LIMIT = 64.0
#: The bound a grid step's intervals are checked against: below :data:`LIMIT` by far more
#: than float32 interval arithmetic can round (a relative 1e-7 an operation).
GUARD = 48.0
#: Cody-Waite's pi/4 in three float32 pieces, the first two of 17 bits: their products with
#: an octant count below 2**7 are exact, so that the remainder near a zero of cos or sin
#: keeps its ulps (Cephes' DP1-DP3, whose third product rounds, lost 14 there).
_PIECES = (0.785400390625, -2.22722883336246e-06, 1.2816720341285448e-12)
_FOUR_OVER_PI = 1.27323954473516
#: Cephes' single-precision minimax polynomials of cos and sin on [-pi/4, pi/4] (cosf.c, sinf.c).
_COS = (2.443315711809948e-5, -1.388731625493765e-3, 4.166664568298827e-2)
_SIN = (-1.9515295891e-4, 8.3321608736e-3, -1.6666654611e-1)

_BOUNDED = contextvars.ContextVar("lanewise_tpu_bounded_trig", default=False)


def horner(x, coefficients):
    """The polynomial of ``coefficients`` (highest power first) at ``x``, in float32."""
    value = jnp.float32(coefficients[0])
    for k in coefficients[1:]:
        value = value * x + jnp.float32(k)
    return value


def cos_sin_quarter(a):
    """(cos a, sin a) for |a| <= pi/4, by Cephes' polynomials (within 2 float32 ulps)."""
    zz = a * a
    c = jnp.float32(1.0) - jnp.float32(0.5) * zz + zz * zz * horner(zz, _COS)
    return c, a + a * zz * horner(zz, _SIN)


def _reduced(x):
    """``|x|`` reduced by pi/4: (the remainder in [-pi/4, pi/4], the octant pair 0..3,
    whether the octant was past pi), as Cephes' cosf/sinf reduce."""
    x = jnp.abs(x)
    j = (x * jnp.float32(_FOUR_OVER_PI)).astype(jnp.int32)
    j = j + (j & 1)  # an odd octant rounds up: the remainder is then in [-pi/4, pi/4]
    y = j.astype(jnp.float32)
    z = x
    for piece in _PIECES:
        z = z - y * jnp.float32(piece)
    j = j & 7
    past = j > 3
    return z, jnp.where(past, j - 4, j), past


def cos_bounded(x):
    """cos(x), float32, within 2.1 ulps for ``|x| <= LIMIT`` (not beyond: :func:`plan`)."""
    z, j, past = _reduced(x)
    c, s = cos_sin_quarter(z)
    r = jnp.where((j == 1) | (j == 2), s, c)
    return jnp.where(past != (j > 1), -r, r)


def sin_bounded(x):
    """sin(x), float32, within 2.1 ulps for ``|x| <= LIMIT`` (not beyond: :func:`plan`)."""
    z, j, past = _reduced(x)
    c, s = cos_sin_quarter(z)
    r = jnp.where((j == 1) | (j == 2), c, s)
    negative = lax.bitcast_convert_type(x, jnp.int32) < 0  # -0.0 too: sin(-0.0) is -0.0
    return jnp.where(past != negative, -r, r)


def cos(x):
    """The lowering of ``cos``: bounded inside :func:`bounded`, else ``jnp.cos``."""
    return cos_bounded(x) if _BOUNDED.get() else jnp.cos(x)


def sin(x):
    """The lowering of ``sin``: bounded inside :func:`bounded`, else ``jnp.sin``."""
    return sin_bounded(x) if _BOUNDED.get() else jnp.sin(x)


@contextlib.contextmanager
def bounded():
    """Trace the lane's ``cos`` and ``sin`` as :func:`cos_bounded` and :func:`sin_bounded`."""
    token = _BOUNDED.set(True)
    try:
        yield
    finally:
        _BOUNDED.reset(token)


@dataclass(frozen=True)
class Guard:
    """What a grid step checks before it runs the bounded kernel: ``needed``, the
    positions of the tile function's inputs whose intervals the check reads, and the
    closed jaxpr it interprets (:meth:`ok`)."""

    jaxpr: object
    needed: tuple

    def ok(self, intervals: list):
        """Whether every ``cos``/``sin`` argument lies within :data:`GUARD`, given the
        (lowest, highest) of each input in :attr:`needed` (traced scalars or numbers;
        the others are not read)."""
        given = dict(zip(self.needed, (_float32(i) for i in intervals), strict=True))
        sites: list = []
        _interpret(self.jaxpr, [given.get(k) for k in range(len(_open(self.jaxpr).invars))], sites)
        ok = True
        for lo, hi in sites:
            ok = ok & (lo > -GUARD) & (hi < GUARD)  # False for a NaN bound
        return ok


class _Unfollowed(Exception):
    """A ``cos`` or ``sin`` inside a loop or a branch: no interval for its argument."""


def plan(jaxpr, known: list | None = None) -> Guard | None:
    """The :class:`Guard` of a tile function's (closed) ``jaxpr``, or None: it computes no
    ``cos`` or ``sin``, or one whose argument's interval does not follow from its inputs'
    by arithmetic.  ``known``: per input, whether the kernel can give its interval (every
    input by default)."""
    count = len(_open(jaxpr).invars)
    needed = _reads(_open(jaxpr))
    if needed is None or not _has_trig(_open(jaxpr)):
        return None
    known = [True] * count if known is None else list(known)
    if not all(known[k] for k in needed):
        return None
    sites: list = []
    with jax.ensure_compile_time_eval():  # numbers, not a trace: which sites have intervals
        try:
            _interpret(jaxpr, [_float32((0.0, 0.0)) if k in needed else None for k in range(count)], sites)
        except _Unfollowed:
            return None
    if any(site is None for site in sites):
        return None
    return Guard(jaxpr, tuple(sorted(needed)))


#: Primitives whose inner jaxpr runs once, on the call's own inputs, in line.
_CALLS = frozenset({"pjit", "jit", "closed_call", "core_call", "custom_jvp_call", "custom_vjp_call",
                    "custom_vjp_call_jaxpr", "remat", "checkpoint"})
_TRIG = ("cos", "sin")


def _open(jaxpr):
    return getattr(jaxpr, "jaxpr", jaxpr)


def _inner(eqn) -> list:
    """The jaxprs inside ``eqn``'s parameters (a call's body, a loop's, a branch's)."""
    found = []
    for value in eqn.params.values():
        for item in value if isinstance(value, (tuple, list)) else (value,):
            if hasattr(_open(item), "eqns"):
                found.append(item)
    return found


def _has_trig(jaxpr) -> bool:
    return any(e.primitive.name in _TRIG or any(_has_trig(_open(j)) for j in _inner(e)) for e in jaxpr.eqns)


def _reads(jaxpr) -> set | None:
    """The positions of ``jaxpr``'s inputs a trig argument depends on; None where a trig
    sits inside a loop or a branch."""
    wanted: set = set()
    for eqn in reversed(jaxpr.eqns):
        inner = [j for j in _inner(eqn) if _has_trig(_open(j))]
        if inner and eqn.primitive.name not in _CALLS:
            return None
        if eqn.primitive.name in _TRIG or inner or any(v in wanted for v in eqn.outvars):
            wanted.update(v for v in eqn.invars if not hasattr(v, "val"))
    return {k for k, v in enumerate(jaxpr.invars) if v in wanted}


def _interpret(closed, intervals: list, sites: list) -> list:
    """The intervals of ``closed``'s outputs from its inputs' (None: unknown); each
    trig argument's interval appended to ``sites``.  Raises :class:`_Unfollowed` where a
    trig sits inside a loop or a branch."""
    jaxpr = _open(closed)
    env = dict(zip(jaxpr.invars, intervals, strict=True))
    env.update(zip(jaxpr.constvars, map(_of_const, getattr(closed, "consts", ())), strict=False))

    def read(atom):
        return _of_const(atom.val) if hasattr(atom, "val") else env.get(atom)

    for eqn in jaxpr.eqns:
        name, ins = eqn.primitive.name, [read(a) for a in eqn.invars]
        inner = _inner(eqn)
        if name in _TRIG:
            sites.append(ins[0])
            outs = [(-1.0, 1.0)]
        elif name in _CALLS and len(inner) == 1:
            outs = _interpret(inner[0], ins[-len(_open(inner[0]).invars):], sites)
        elif any(_has_trig(_open(j)) for j in inner):
            raise _Unfollowed(name)
        else:
            outs = [_rule(eqn, ins)] + [None] * (len(eqn.outvars) - 1)
        env.update(zip(eqn.outvars, outs, strict=True))
    return [read(v) for v in jaxpr.outvars]


def _rule(eqn, ins: list):
    """An equation's output interval by :data:`_RULES`, or None (no rule, or an input unknown)."""
    name = eqn.primitive.name
    if name == "select_n":  # any case may be picked: their union (the predicate is not read)
        ins = ins[1:]
        if any(i is None for i in ins):
            return None
        return _low(*(i[0] for i in ins)), _high(*(i[1] for i in ins))
    rule = _RULES.get(name)
    kind = np.dtype(eqn.outvars[0].aval.dtype).kind
    if rule is None or any(i is None for i in ins) or not ins or kind == "u":  # unsigned: wraps below 0 too
        return None
    same = len(eqn.invars) == 2 and eqn.invars[0] is eqn.invars[1] and not hasattr(eqn.invars[0], "val")
    out = rule(*ins, params=eqn.params, same=same)
    if out is not None and kind == "i":
        # an int the chip may have wrapped at 32 bits (its true value past int32): anything
        wrapped = (out[0] <= -2.0 ** 31) | (out[1] >= 2.0 ** 31)
        out = jnp.where(wrapped, -jnp.inf, out[0]), jnp.where(wrapped, jnp.inf, out[1])
    return out


def _float32(interval) -> tuple:
    """An input's interval as float32 values (a division by a zero bound gives an infinity)."""
    return tuple(jnp.asarray(v).astype(jnp.float32) for v in interval)


def _of_const(value):
    """A constant's interval (its lowest and highest value), None where it has no numbers."""
    try:
        a = np.asarray(value)
    except Exception:  # a tracer  # noqa: BLE001
        return None
    if a.size == 0 or a.dtype.kind not in "biuf":
        return None
    return float(a.min()), float(a.max())


def _low(*values):
    out = values[0]
    for v in values[1:]:
        out = jnp.minimum(out, v)  # NaN wins: a NaN bound fails the guard
    return out


def _high(*values):
    out = values[0]
    for v in values[1:]:
        out = jnp.maximum(out, v)
    return out


def _square(a):
    lo, hi = a
    ends = (lo * lo, hi * hi)
    return jnp.where((lo <= 0) & (hi >= 0), 0.0, _low(*ends)), _high(*ends)


def _mul(a, b, same=False, **_):
    if same:  # x * x is never negative
        return _square(a)
    ends = (a[0] * b[0], a[0] * b[1], a[1] * b[0], a[1] * b[1])
    return _low(*ends), _high(*ends)


def _div(a, b, **_):
    ends = (a[0] / b[0], a[0] / b[1], a[1] / b[0], a[1] / b[1])
    zero = (b[0] <= 0) & (b[1] >= 0)  # a divisor that may be 0: anything
    return jnp.where(zero, -jnp.inf, _low(*ends)), jnp.where(zero, jnp.inf, _high(*ends))


def _abs(a, **_):
    lo, hi = a
    return jnp.where(lo >= 0, lo, jnp.where(hi <= 0, -hi, 0.0)), _high(-lo, hi)


def _integer_pow(a, params, **_):
    y = params["y"]
    if y < 0:
        return None
    if y % 2 == 0:  # |x| ** y
        lo, hi = _abs(a)
        return lo ** y, hi ** y
    return a[0] ** y, a[1] ** y


def _increasing(fn):
    """The rule of a non-decreasing function: its values at the ends."""
    return lambda a, **_: (fn(a[0]), fn(a[1]))


def _converted(a, params, **_):
    """A conversion's interval: a float's rounding is within the guard's margin; an int
    truncates (the interval widened to whole ends); a bool or an unsigned word is not followed."""
    kind = np.dtype(params["new_dtype"]).kind
    if kind == "f":
        return a
    return (jnp.floor(a[0]), jnp.ceil(a[1])) if kind == "i" else None


def _same_as(a, *_, **__):
    return a


_RULES = {
    "add": lambda a, b, **_: (a[0] + b[0], a[1] + b[1]),
    "sub": lambda a, b, **_: (a[0] - b[1], a[1] - b[0]),
    "mul": _mul, "div": _div, "abs": _abs, "integer_pow": _integer_pow,
    "square": lambda a, **_: _square(a),
    "neg": lambda a, **_: (-a[1], -a[0]),
    "max": lambda a, b, **_: (_high(a[0], b[0]), _high(a[1], b[1])),
    "min": lambda a, b, **_: (_low(a[0], b[0]), _low(a[1], b[1])),
    "clamp": lambda lo, x, hi, **_: (_high(lo[0], _low(x[0], hi[0])), _high(lo[1], _low(x[1], hi[1]))),
    # sqrt and log of a bound below 0: NaN or -inf, which fails the guard
    **{name: _increasing(getattr(jnp, fn)) for name, fn in (
        ("sqrt", "sqrt"), ("exp", "exp"), ("exp2", "exp2"), ("log", "log"), ("log1p", "log1p"),
        ("tanh", "tanh"), ("expm1", "expm1"), ("cbrt", "cbrt"), ("atan", "arctan"), ("floor", "floor"),
        ("ceil", "ceil"), ("round", "round"), ("sign", "sign"))},
    "erf": _increasing(lax.erf),
    "logistic": _increasing(lambda v: 1.0 / (1.0 + jnp.exp(-v))),
    "convert_element_type": _converted,
    **{name: _same_as for name in ("broadcast_in_dim", "reshape", "squeeze",
                                   "expand_dims", "copy", "copy_p", "reduce_precision", "transpose",
                                   "optimization_barrier")},
}
