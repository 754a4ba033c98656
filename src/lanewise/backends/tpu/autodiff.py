"""Lanes made by lanewise's autodiff (``lw.grad``, ``lw.jvp``, ...) on the tpu backend.

A derived lane is plain lane code (:mod:`lanewise.autodiff.forward` writes it) that
calls a few intrinsics of :mod:`lanewise.autodiff.intrinsics` besides the user's
operations.  On the chip every value of a lane is a number (a tile of lanes) or a
tuple of them, so each intrinsic is a check made while the kernel is traced, an
identity or a constant: :data:`RULES` holds one rule per intrinsic, in one place.
The checks raise the errors the CPU backends raise (an int argument of ``lw.grad``
is the same ``lw.LaneTypeError``, naming the argument), with the dtype the chip sees
(``int32``).

Reverse mode (``lw.jacrev``) keeps per-lane records on a stack: in a lane without
loops a fixed set of tiles (:mod:`.adjoint`); a loop's records grow with each lane's
trip count, and such a lane is refused with the loop's line and the fix, forward mode
(``lw.grad``, ``lw.jacfwd``, ``lw.jvp``), which stores nothing.

Example:
    >>> import jax.numpy as jnp
    >>> from lanewise.autodiff import intrinsics
    >>> rule = RULES[intrinsics.seed]
    >>> rule([jnp.zeros(2, jnp.float32), 1.0, "x", "lw.grad"], "f.py:1", None, None)
    1.0
    >>> try:
    ...     rule([jnp.zeros(2, jnp.int32), 1.0, "n", "lw.grad"], "f.py:1", None, None)
    ... except TypeError as e:
    ...     print(str(e).split(";")[0])
    lw.grad: argument n is int32
"""

from __future__ import annotations

import jax.numpy as jnp

from ... import autodiff as _autodiff
from ...autodiff import intrinsics as ad
from ...errors import LaneCompileError, LaneTypeError
from ...lane.ir import nodes as ir
from . import adjoint as _adjoint
from . import rows as _rows
from ...lane.ir.lines import user_line


def _kind(x) -> str | None:
    """What makes ``x`` no float scalar on the chip (``"int32"``, ``"a row"``, ...), or None."""
    if isinstance(x, tuple):
        return "tuple"
    if isinstance(x, (_rows.Row, _rows.Stacked)):
        return "a row (a per-lane array)"
    if isinstance(x, bool):
        return "bool"
    if isinstance(x, int):
        return "int"
    if isinstance(x, float) or x is None:
        return None
    dtype = jnp.result_type(x)
    return None if jnp.issubdtype(dtype, jnp.floating) else str(dtype)


def _not_scalar(x) -> str | None:
    """What makes ``x`` no scalar (a tuple, a row), or None."""
    kind = _kind(x)
    return kind if kind == "tuple" or (kind or "").startswith("a row") else None


def require_float(x, name: str, transform: str) -> None:
    """:func:`intrinsics.require_float` on tile values: the same errors, at trace time."""
    kind = _kind(x)
    if kind is None:
        return
    if _not_scalar(x):
        raise LaneTypeError(ad.shape_message(name, kind, transform))
    raise LaneTypeError(ad.float_message(name, kind, transform))


def require_scalar(value, transform: str) -> None:
    kind = _not_scalar(value)
    if kind:
        raise LaneTypeError(ad.scalar_message(kind, transform))


def _seed(args, at, st, lowering):
    x, value, name, transform = args
    require_float(x, name, transform)
    return value


def _zero_tangent_of(args, at, st, lowering):
    x, tangent, name = args
    kind = _kind(x)
    if kind is not None and not _not_scalar(x):  # an int or bool argument: no tangent (JAX's float0)
        if tangent is not None:
            raise LaneTypeError(ad.tangent_message(name, kind))
        return 0.0
    return tangent


def _zero(value):
    return tuple(_zero(v) for v in value) if isinstance(value, tuple) else 0.0


def _scalar_result(args, at, st, lowering):
    value, transform = args
    require_scalar(value, transform)
    return value


def _unit_cotangent(args, at, st, lowering):
    out, name = args
    kind = _not_scalar(out)
    if kind:
        raise LaneTypeError(ad.unit_message(kind, name))
    return 1.0


def _cotangents(args, at, st, lowering):
    c, arguments, name = args
    if not isinstance(c, tuple) or len(c) != len(arguments):
        raise LaneTypeError(ad.cotangents_message(_kind(c) or "a number", len(arguments), name))
    return c


def _unshared(args, at, st, lowering):
    value, what = args
    if isinstance(value, (_rows.Row, _rows.Stacked)):  # tuples and numbers are immutable
        raise LaneTypeError(what)


def _unpacks(args, at, st, lowering):
    value, n, what = args
    if not (isinstance(value, tuple) and len(value) == n):
        raise LaneTypeError(what)


def _number(args, at, st, lowering):
    value, what = args
    if _not_scalar(value):
        raise LaneTypeError(what)


def _times_cotangent(args, at, st, lowering):
    c, t = args
    return 0.0 if c is None else c * t


def _reverse(args, at, st, lowering):
    """Reverse mode's loop checkpoints and per-lane arrays' adjoints: records of a size each
    lane decides (a loop is refused before them, :func:`.adjoint.no_loop`)."""
    raise LaneCompileError(f"this reverse-mode lane (lw.jacrev) is not lowered on the tpu backend ({at}): "
                           f"{_adjoint.FIX}")


#: One rule per intrinsic a derived lane calls: ``rule(args, at, st, lowering) -> value``
#: with ``args`` the lowered arguments (string literals as str), ``at`` the user's
#: file:line, ``st`` the lowering's state (its live lanes) and ``lowering`` the lane's.
RULES = {
    ad.seed: _seed,
    ad.require_float: lambda args, *_: require_float(*args),
    ad.require_scalar: lambda args, *_: require_scalar(*args),
    ad.zero_tangent_of: _zero_tangent_of,
    ad.zero: lambda args, *_: _zero(args[0]),
    ad.update: lambda args, *_: args[1],  # a number or a tuple: immutable, so the new value
    ad.unshared: _unshared,
    ad.mirror: lambda args, *_: args[1],  # no storage shared between lanes' values
    ad.scalar_result: _scalar_result,
    ad.out: lambda args, *_: args[0],  # float32 tiles already
    ad.times_cotangent: _times_cotangent,
    ad.unit_cotangent: _unit_cotangent,
    ad.cotangents: _cotangents,
    ad.stop_gradient: lambda args, *_: args[0],
    ad.unpacks: _unpacks,
    ad.number: _number,
    **_adjoint.RULES,  # reverse mode's stack: slots of tiles in a loop-free lane
    **{f: _reverse for f in (ad.thin, ad.restore, ad.trips, ad.spread_all, ad.spread_along)},
}


def _rule(fn):
    try:
        return RULES.get(fn)
    except TypeError:  # an unhashable callee
        return None


def _transform(p: ir.Prim):
    """The transformation ``p`` applies where it is ``lw.grad(f, ...)(args)`` (a call of a
    transformation's result, written in a lane), else None."""
    if p.op != "call" or not p.args or not isinstance(p.args[0], ir.Prim):
        return None
    fn = ir.called(p.args[0])
    return fn if any(fn is t for t in _TRANSFORMS) else None


_TRANSFORMS = (_autodiff.grad, _autodiff.value_and_grad, _autodiff.jacfwd, _autodiff.jacrev, _autodiff.hessian)


def lowers(p: ir.Prim) -> bool:
    """Whether this module lowers the call ``p``: an autodiff intrinsic (a derived lane's),
    ``lw.jvp(f, primals, tangents)`` or ``lw.grad(f, ...)(args)`` written in a lane."""
    return _rule(ir.called(p)) is not None or ir.called(p) is _autodiff.jvp or _transform(p) is not None


def call(lowering, p: ir.Prim, st):
    """The call ``p`` (:func:`lowers`) lowered in the lane: an intrinsic by its rule
    (string literals, argument names and messages, stay str; the other arguments are
    lowered), a transformation by inlining the lane it derives."""
    at = user_line(p.loc)
    if ir.called(p) is _autodiff.jvp:
        return _jvp(lowering, p, st, at)
    transform = _transform(p)
    if transform is not None:
        return _derived(lowering, transform, p, st, at)
    if p.keywords:
        raise LaneCompileError(f"keyword arguments to {ir.called(p).__name__} ({at})")
    args = [a.value if isinstance(a, ir.Const) and isinstance(a.value, str) else lowering.expr(a, st)
            for a in p.args]
    return _rule(ir.called(p))(args, at, st, lowering)


def _jvp(lowering, p: ir.Prim, st, at: str):
    """``lw.jvp(f, primals, tangents)`` in a lane: ``f``'s jvp lane, inlined."""
    if len(p.args) != 3 or p.keywords:
        raise LaneCompileError(f"lw.jvp takes (fun, primals, tangents) ({at})")
    fn = lowering.python_object(p.args[0], st, "the function lw.jvp differentiates", p.loc)
    primals, tangents = (lowering.expr(a, st) for a in p.args[1:])
    if not isinstance(primals, tuple) or not isinstance(tangents, tuple) or len(primals) != len(tangents):
        raise LaneTypeError(f"lw.jvp: primals and tangents must be tuples of equal length, one tangent per "
                            f"primal ({at})")
    return lowering.inline(_autodiff.jvp_lane(fn, len(primals)), [*primals, *tangents], st.live, p.loc)


def _derived(lowering, transform, p: ir.Prim, st, at: str):
    """``lw.grad(f, argnums, has_aux)(args)`` in a lane: the derived lane, inlined (its
    options must be literals: they decide the lane's code)."""
    head = p.args[0]
    name = f"lw.{transform.__name__}"
    fn = lowering.python_object(head.args[0] if head.args else None, st, f"the function {name} differentiates",
                                head.loc)
    options = [lowering.expr(a, st) for a in head.args[1:]]
    keywords = {k: lowering.expr(v, st) for k, v in head.keywords}
    if not all(_literal(v) for v in (*options, *keywords.values())):
        raise LaneCompileError(f"{name} called inside a lane takes literal options (argnums=0, argnums=(0, 1), "
                               f"has_aux=True) on the tpu backend ({at})")
    if p.keywords:
        raise LaneCompileError(f"keyword arguments to the function {name} makes ({at})")
    derived = transform(fn, *options, **keywords)
    return lowering.inline(derived, [lowering.expr(a, st) for a in p.args[1:]], st.live, p.loc)


def _literal(value) -> bool:
    """Whether ``value`` is a Python int or bool, or a tuple of them (not a lane's value)."""
    return isinstance(value, (bool, int)) or isinstance(value, tuple) and all(map(_literal, value))
