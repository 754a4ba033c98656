"""NumPy functions ``@lw.fuse`` traces (a table from function to handler), and calls
of vmapped lane functions on traced arrays.

``HANDLERS`` maps a NumPy function to ``handler(tracer, *args, **kwargs)`` with
NumPy's own signature; a function that is not in the table runs as a
materialisation boundary (NumPy on the computed operands).  Unsupported keywords
(``out=``, ``where=``, ``initial=``) raise :class:`~.common.FuseError` naming them.

Example:
    >>> import numpy as np
    >>> np.where in HANDLERS, np.sum in HANDLERS, np.sort in HANDLERS
    (True, True, False)
"""

from __future__ import annotations

import numpy as np

from .. import pytree
from ..errors import AxisSpecError, SizeMismatchError
from . import rules
from .common import FuseError, Traced, normalise_axes, normalise_axis, user_location
from .graph import Index, Slice, Transpose

_NO = np._NoValue


def _fuse_error(message):
    return FuseError(f"{message} (at {user_location()})")


#: Why a keyword is refused, and what to write instead (the message's second half).
_INSTEAD = {
    "out": "fused functions return new arrays: use the result",
    "initial": "combine it with the result instead (np.maximum(x.max(), v), x.sum() + v)",
    "where": "mask the operand instead (np.where(mask, x, 0).sum())",
}


def _reject(what: str, **given):
    for name, value in given.items():
        if value is not None and value is not _NO:
            instead = _INSTEAD.get(name)
            raise _fuse_error(f"lw.fuse does not support {name}= in {what}" + (f"; {instead}" if instead else ""))


#: NumPy 2's parameters of each reduction after the array (the same for ``np.<op>(a, ...)``
#: and ``a.<op>(...)``): the positional ones in order, then the keyword-only ones.
_REDUCTION_PARAMS = {
    **dict.fromkeys(("sum", "prod"), (("axis", "dtype", "out", "keepdims", "initial", "where"), ())),
    "mean": (("axis", "dtype", "out", "keepdims"), ("where",)),
    **dict.fromkeys(("min", "max"), (("axis", "out", "keepdims", "initial", "where"), ())),
    **dict.fromkeys(("any", "all"), (("axis", "out", "keepdims"), ("where",))),
    **dict.fromkeys(("argmin", "argmax"), (("axis", "out"), ("keepdims",))),
}
#: ``a.any(...)``/``a.all(...)`` differ: NumPy's methods take a dtype second (bool only).
_METHOD_PARAMS = {**_REDUCTION_PARAMS,
                  **dict.fromkeys(("any", "all"), (("axis", "dtype", "out", "keepdims"), ("where",)))}


def bind_reduction(what: str, params: tuple, args: tuple, kwargs: dict) -> dict:
    """``args``/``kwargs`` of a reduction by parameter name, as NumPy binds them to
    ``params`` (positional names, keyword-only names): a keyword given twice, too
    many positional arguments or an unknown keyword is a TypeError.

    Example:
        >>> bind_reduction("x.max()", _REDUCTION_PARAMS["max"], (1, None, True), {})
        {'axis': 1, 'out': None, 'keepdims': True}
    """
    positional, keyword_only = params
    if len(args) > len(positional):
        raise TypeError(f"{what} takes at most {len(positional)} positional arguments after the array, "
                        f"got {len(args)}")
    bound = dict(zip(positional[:len(args)], args, strict=True))
    for name, value in kwargs.items():
        if name not in positional + keyword_only:
            raise TypeError(f"{what} got an unexpected keyword argument {name!r}")
        if name in bound:
            raise TypeError(f"{what} got multiple values for argument {name!r}")
        bound[name] = value
    return bound


def reduction(op: str, method: bool = False):
    """Handler for ``np.<op>(a, ...)`` or, ``method``, ``a.<op>(...)``: NumPy's own
    parameters (:data:`_REDUCTION_PARAMS`, :data:`_METHOD_PARAMS`), positional or keyword."""
    what = f"x.{op}()" if method else f"np.{op}"
    params = (_METHOD_PARAMS if method else _REDUCTION_PARAMS)[op]

    def handler(tracer, a, *args, **kwargs):
        bound = bind_reduction(what, params, args, kwargs)
        if bound.get("where") is True:  # NumPy's default, written out
            del bound["where"]
        _reject(what, **{k: bound.get(k) for k in ("out", "initial", "where")})
        keepdims = bound.get("keepdims", False)
        keepdims = False if keepdims is _NO else bool(keepdims)
        return tracer.reduce(op, a, bound.get("axis"), bound.get("dtype"), keepdims)

    handler.__name__ = op
    return handler


def _where(tracer, condition, x=None, y=None):
    if x is None and y is None:  # np.where(c) is np.nonzero: a data-dependent shape
        return tracer.boundary("np.where(condition) (np.nonzero)", np.where, (condition,), {})
    if x is None or y is None:
        raise ValueError("either both or neither of x and y should be given")
    return tracer.where(condition, x, y)


def _clip(tracer, a, a_min=_NO, a_max=_NO, out=None, *, min=_NO, max=_NO, **kwargs):  # noqa: A002
    _reject("np.clip", out=out, **kwargs)
    lo = min if a_min is _NO else a_min
    hi = max if a_max is _NO else a_max
    lo, hi = (None if v is _NO else v for v in (lo, hi))
    lo, hi = _clip_bounds(tracer.lift(a).dtype, lo, hi)
    dtype = np.clip(*[None if v is None else rules.stand_in_of(tracer.lift(v)) for v in (a, lo, hi)]).dtype
    if dtype.kind == "c":
        return tracer.boundary("np.clip on complex values", np.clip, (a, lo, hi), {})
    result = tracer.lift(a)
    # NumPy's definition: minimum(maximum(a, lo), hi), NaN-propagating, in the result dtype.
    for op, bound in (("maximum", lo), ("minimum", hi)):
        if bound is not None:
            result = tracer.elem(op, [result, tracer.lift(bound)], (dtype, dtype), dtype)
    if result is tracer.lift(a):
        return tracer.cast(a, dtype)
    return tracer.wrap(result)


def _clip_bounds(dtype: np.dtype, lo, hi):
    """NumPy 2's ``np.clip`` of an integer array drops a Python int bound that no value
    of the dtype can cross (``lo`` <= its minimum, ``hi`` >= its maximum): clipping
    ``int8`` at 300 keeps 127, where converting 300 to int8 would clip at 44.  A bound
    beyond the dtype on the other side stays, and raises OverflowError as in NumPy.

    Example:
        >>> _clip_bounds(np.dtype(np.uint8), -1, 256), _clip_bounds(np.dtype(np.int8), 3, 100)
        ((None, None), (3, 100))
    """
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        lo = None if type(lo) is int and lo <= info.min else lo
        hi = None if type(hi) is int and hi >= info.max else hi
    return lo, hi


def _transpose(tracer, a, axes=None):
    return tracer.transpose(tracer.wrap(tracer.lift(a)), axes)


def _reshape(tracer, a, shape=None, order="C", *, newshape=None, copy=None):
    if order not in ("C", "A"):
        raise _fuse_error("lw.fuse supports np.reshape(order='C') only")
    return tracer.reshape(tracer.wrap(tracer.lift(a)), newshape if shape is None else shape)


def _squeeze(tracer, a, axis=None):
    p = tracer.wrap(tracer.lift(a))
    if axis is None:
        axes = tuple(d for d, n in enumerate(p.shape) if n == 1)
    else:
        axes = normalise_axes(axis, p.ndim, "squeeze")
    if any(p.shape[d] != 1 for d in axes):
        raise ValueError("cannot select an axis to squeeze out which has size not equal to one")
    return p.reshape(tuple(n for d, n in enumerate(p.shape) if d not in axes))


def _expand_dims(tracer, a, axis):
    p = tracer.wrap(tracer.lift(a))
    ndim = p.ndim + (1 if isinstance(axis, (int, np.integer)) else len(axis))
    axes = normalise_axes(axis, ndim, "expand_dims")
    dims = iter(p.shape)
    return p.reshape(tuple(1 if d in axes else next(dims) for d in range(ndim)))


def _swapaxes(tracer, a, axis1, axis2):
    p = tracer.wrap(tracer.lift(a))
    perm = list(range(p.ndim))
    i, j = normalise_axis(axis1, p.ndim, "swapaxes"), normalise_axis(axis2, p.ndim, "swapaxes")
    perm[i], perm[j] = perm[j], perm[i]
    return tracer.transpose(p, perm)


def _moveaxis(tracer, a, source, destination):
    p = tracer.wrap(tracer.lift(a))
    src = [normalise_axis(s, p.ndim, "moveaxis") for s in np.atleast_1d(source).tolist()]
    dst = [normalise_axis(d, p.ndim, "moveaxis") for d in np.atleast_1d(destination).tolist()]
    if len(src) != len(dst):
        raise ValueError("`source` and `destination` arguments must have the same number of elements")
    order = [n for n in range(p.ndim) if n not in src]
    for d, s in sorted(zip(dst, src, strict=True)):  # NumPy's own construction of the permutation
        order.insert(d, s)
    return tracer.transpose(p, order)


def _broadcast_to(tracer, array, shape, subok=False):
    return tracer.broadcast_to(array, shape)


def _broadcast_arrays(tracer, *args, subok=False):
    shape = np.broadcast_shapes(*[np.shape(tracer.wrap(tracer.lift(a))) for a in args])
    return tuple(tracer.broadcast_to(a, shape) for a in args)


def _like(fill):
    def handler(tracer, a, *args, dtype=None, order="K", subok=True, shape=None, device=None):
        value = fill
        if fill is None:  # full_like(a, fill_value, dtype=None, ...)
            value, args = args[0], args[1:]
        if args:
            dtype = args[0]
        node = tracer.lift(a)
        dtype = np.dtype(dtype) if dtype is not None else node.dtype
        shape = node.shape if shape is None else tuple(np.atleast_1d(shape).tolist())
        return tracer.wrap(tracer.const(np.asarray(value).astype(dtype).item(), dtype, False, tuple(shape)))
    return handler


def _round(tracer, a, decimals=0, out=None):
    _reject("np.round", out=out)
    p = tracer.wrap(tracer.lift(a))
    if p.dtype.kind in "biu" and decimals >= 0:
        return tracer.cast(p, p.dtype)
    if p.dtype.kind not in "f":
        return tracer.boundary("np.round", np.round, (p, decimals), {})
    if decimals == 0:
        return np.rint(p)
    f = 10.0 ** abs(decimals)  # NumPy's algorithm: a Python float, so weak (float32 stays float32)
    return np.rint(p * f) / f if decimals > 0 else np.rint(p / f) * f


def _result_type(tracer, *arrays_and_dtypes):
    def stand_in(v):
        return rules.stand_in_of(v._node) if isinstance(v, Traced) else v
    return np.result_type(*[stand_in(v) for v in arrays_and_dtypes])


def _astype(tracer, x, dtype, /, *, copy=True, device=None):
    return tracer.wrap(tracer.lift(x)).astype(dtype, copy=copy)


HANDLERS = {
    np.where: _where, np.clip: _clip, np.transpose: _transpose, np.reshape: _reshape,
    np.squeeze: _squeeze, np.expand_dims: _expand_dims, np.swapaxes: _swapaxes,
    np.moveaxis: _moveaxis, np.broadcast_to: _broadcast_to, np.broadcast_arrays: _broadcast_arrays,
    np.zeros_like: _like(0), np.ones_like: _like(1), np.empty_like: _like(0), np.full_like: _like(None),
    np.round: _round, np.around: _round,
    np.real: lambda tracer, val: tracer.part(tracer.wrap(tracer.lift(val)), "real"),
    np.imag: lambda tracer, val: tracer.part(tracer.wrap(tracer.lift(val)), "imag"),
    np.shape: lambda tracer, a: tracer.lift(a).shape,
    np.ndim: lambda tracer, a: len(tracer.lift(a).shape),
    np.size: lambda tracer, a, axis=None: int(np.prod(tracer.lift(a).shape)) if axis is None
    else tracer.lift(a).shape[axis],
    np.result_type: _result_type,
    np.iscomplexobj: lambda tracer, x: tracer.lift(x).dtype.kind == "c",
    np.isrealobj: lambda tracer, x: tracer.lift(x).dtype.kind != "c",
    np.astype: _astype,
    np.copy: lambda tracer, a, order="K", subok=False: tracer.cast(a, tracer.lift(a).dtype),
    **{getattr(np, op): reduction(op) for op in
       ("sum", "prod", "mean", "min", "max", "any", "all", "argmin", "argmax")},
}
HANDLERS[np.amin], HANDLERS[np.amax] = reduction("min"), reduction("max")


# ----------------------------------------------------------------------------- vmapped lanes


def call_mapped(mapped, args: tuple, kwargs: dict):
    """``lw.vmap(lane)(*traced)`` inside ``@lw.fuse``: one elementwise node calling ``lane``.

    Every lane must receive scalars (each array argument mapped down to rank 0),
    every ``out_axes`` must be 0: then the nest's output axes are its levels in
    order, and each argument is a (transposed, broadcast) view of itself.
    """
    from ..plan.program import unwrap_nest

    lane, nest = unwrap_nest(mapped)
    name = getattr(lane, "__name__", "lane")
    if kwargs:
        raise _fuse_error(f"lw.fuse: vmap({name}) inside a fused function takes positional arguments only")
    tracer = next(a._tracer for a in args if isinstance(a, Traced))
    proxies = [a if isinstance(a, Traced) else tracer.wrap(tracer.lift(a)) for a in args]
    levels = []
    dims = [list(range(p.ndim)) for p in proxies]
    placed = [[None] * len(nest) for _ in proxies]
    for depth, m in enumerate(nest):
        if pytree.freeze(m.out_axes) != pytree.freeze(0):
            raise _fuse_error(f"lw.fuse: vmap({name}) with out_axes={m.out_axes!r}; inside a fused "
                              "function use out_axes=0 and transpose the result")
        axes = pytree.broadcast_axes(tuple(m.in_axes) if isinstance(m.in_axes, list) else m.in_axes,
                                     tuple(range(len(proxies))), "vmap in_axes")
        sizes = {}
        for k, axis in enumerate(axes):
            if axis is None:
                continue
            if not -len(dims[k]) <= axis < len(dims[k]):
                raise AxisSpecError(f"vmap({name}) maps argument {k} along axis {axis}, but it has "
                                    f"only {len(dims[k])} axes left at level {depth}")
            placed[k][depth] = dims[k].pop(axis % len(dims[k]))
            sizes[k] = proxies[k].shape[placed[k][depth]]
        if m.axis_size is not None:
            sizes["axis_size"] = m.axis_size
        if len(set(sizes.values())) > 1:
            raise SizeMismatchError(f"vmap({name}) got inconsistent sizes for the mapped axis: {sizes}")
        if not sizes:
            raise AxisSpecError(f"vmap({name}) maps no argument and has no axis_size")
        levels.append(next(iter(sizes.values())))
    for k, left in enumerate(dims):
        if left:
            raise _fuse_error(f"lw.fuse: vmap({name}) hands argument {k} to each lane as an array of "
                              f"rank {len(left)}; inside a fused function lanes must receive scalars")
    operands = [_aligned(tracer, p, where) for p, where in zip(proxies, placed, strict=True)]
    dtypes, out_tree = _lane_result(mapped, lane, operands, name)
    call = tracer.elem("lane", operands, (), dtypes[0], shape=tuple(levels), fn=lane, dtypes=dtypes)
    items = [tracer.wrap(tracer.elem("item", [call], (), d, shape=call.shape, item=k))
             for k, d in enumerate(dtypes)]
    return pytree.unflatten(out_tree, items)


def _aligned(tracer, proxy, placed):
    """``proxy`` with one axis per vmap level (size 1 where the level does not map it)."""
    mapped = [d for d in placed if d is not None]
    node = tracer.lift(proxy)
    if not mapped:
        return node
    node = tracer.view(node, Transpose(tuple(mapped)))
    shape = iter(node.shape)
    items = tuple(Slice(0, 1, next(shape)) if d is not None else None for d in placed)
    return tracer.view(node, Index(items))


def _lane_result(mapped, lane, operands, name):
    """dtypes and pytree structure of the lane's results, as lw.vmap stores them.

    Found by running the lane once on zeros through lw.vmap (its kernel is cached
    on disk, so a warm process compiles nothing); a lane that fails on zeros is
    typed by Numba instead.
    """
    dummies = [np.zeros(1, n.dtype) if n.shape else rules.stand_in_of(n) for n in operands]
    in_axes = tuple(0 if n.shape else None for n in operands)
    # lw.vmap(lane, in_axes=in_axes, axis_size=1), built by the class of ``mapped``
    # (lanewise.api's Mapped): lanewise.api calls this module, which must not import it back.
    probe = type(mapped)(lane, in_axes, 0, axis_size=1, backend=None)
    try:
        with np.errstate(all="ignore"):
            leaves, tree = pytree.flatten(probe(*dummies))
        dtypes, ranks = [leaf.dtype for leaf in leaves], [leaf.ndim - 1 for leaf in leaves]
    except Exception:  # noqa: BLE001 - the lane raised on zeros: type it without running it
        from ..backends.cpu import map as cpu
        from ..plan.program import bind_call, make_program

        call = bind_call(probe, tuple(dummies), {})
        program = make_program(call, cpu.result_type(call))
        dtypes, ranks = [o.dtype for o in program.outputs], [o.lane_ndim for o in program.outputs]
        tree = program.out_tree
    if any(ranks):
        raise _fuse_error(f"lw.fuse: lane {name} returns arrays; inside a fused function lanes return scalars")
    return tuple(dtypes), tree
