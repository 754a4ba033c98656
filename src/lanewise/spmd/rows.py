"""Per-lane rows in the W-wide code: a lane's 1-D array view as W data pointers.

Every lane of a vmapped array receives a view with the same length and stride
(only its data pointer differs), so the W-wide lane takes the W data pointers
(a ``Vec`` of uint64) and one length and one stride, and ``p[i]`` is a masked
gather: lane ``w`` loads ``ptr[w] + i[w] * stride`` where its mask bit is set.
Lanes outside the mask load a zero from the stack instead, so an index that is
out of bounds for them (a loop that stopped, a tail lane) cannot fault.  Negative indices wrap as
in Numba (``i + len``); like Numba's default, there is no bounds check.

Example:
    >>> import numba, numpy as np
    >>> from lanewise.spmd.vector import vload, vstore
    >>> @numba.njit
    ... def second(ptrs, n, stride, out):
    ...     vstore(out, v_gather(vload(ptrs, 2), n, stride, 1, True, np.float64))
    >>> rows = np.arange(6.0).reshape(2, 3)
    >>> ptrs = np.array([rows[0].ctypes.data, rows[1].ctypes.data], np.uint64)
    >>> out = np.empty(2); second(ptrs, 3, 8, out); out
    array([1., 4.])
"""

from __future__ import annotations

from llvmlite import ir
from numba.core import cgutils, types
from numba.extending import intrinsic

from .vector import Vec, _element, _is_scalar, _splat, _vector_cast

_I64 = ir.IntType(64)


def _index_vector(context, builder, index, value, length, count):
    """The lanes' indices as ``<count x i64>``, negative ones wrapped by ``length``
    (Numba's wraparound for signed indices; unsigned ones never wrap)."""
    dtype = index.dtype if isinstance(index, Vec) else types.unliteral(index)
    if isinstance(index, Vec):
        idx = _vector_cast(context, builder, value, index, types.int64 if dtype.signed else types.uint64)
    else:
        scalar = context.cast(builder, value, index, types.int64 if dtype.signed else types.uint64)
        idx = _splat(context, builder, Vec(types.int64, count), scalar)
    if dtype.signed:
        n = _splat(context, builder, Vec(types.int64, count), length)
        negative = builder.icmp_signed("<", idx, ir.Constant(idx.type, None))
        idx = builder.select(negative, builder.add(idx, n), idx)
    return idx


@intrinsic
def v_gather(typingctx, ptrs, length, stride, index, mask, dtype):
    """``row[index]`` in every lane of ``mask``: lane ``w`` reads the ``dtype``
    element at byte address ``ptrs[w] + index[w] * stride`` (``index`` wrapped
    by ``length`` when negative); lanes outside the mask read nothing (zero)."""
    dt = getattr(dtype, "dtype", None)
    idx_dtype = index.dtype if isinstance(index, Vec) else types.unliteral(index)
    if not (isinstance(ptrs, Vec) and isinstance(ptrs.dtype, types.Integer) and ptrs.dtype.bitwidth == 64
            and isinstance(length, types.Integer) and isinstance(stride, types.Integer)
            and isinstance(idx_dtype, types.Integer) and dt is not None and _is_scalar(dt)):
        return None
    count = ptrs.count
    if isinstance(index, Vec) and index.count != count:
        return None
    if isinstance(mask, Vec):
        if mask.count != count or not isinstance(mask.dtype, types.Boolean):
            return None
    elif not isinstance(mask, types.Boolean):
        return None
    out = Vec(dt, count)

    def codegen(context, builder, sig, args):
        vptrs, vlen, vstride, vidx, vmask, _ = args
        n = context.cast(builder, vlen, length, types.int64)
        step = _splat(context, builder, Vec(types.int64, count), context.cast(builder, vstride, stride, types.int64))
        offsets = builder.mul(_index_vector(context, builder, index, vidx, n, count), step)
        elem = _element(context.data_model_manager, dt)
        addresses = builder.inttoptr(builder.add(vptrs, offsets), ir.VectorType(elem.as_pointer(), count))
        bits = vmask if isinstance(mask, Vec) else _splat(context, builder, Vec(types.boolean, count), vmask)
        # Lanes outside the mask read a zero on the stack instead: no fault, no
        # branch.  W scalar loads, not llvm.masked.gather: on Zen 4 (AVX-512) the
        # gather made W3's scan 2x slower than the loads (0.0089 s vs 0.0047 s).
        dummy = cgutils.alloca_once_value(builder, ir.Constant(elem, None))
        safe = builder.select(bits, addresses, _splat_ptr(builder, addresses.type, count, dummy))
        vec = ir.Constant(ir.VectorType(elem, count), ir.Undefined)
        for w in range(count):
            at = ir.Constant(ir.IntType(32), w)
            vec = builder.insert_element(vec, builder.load(builder.extract_element(safe, at)), at)
        return vec

    return out(ptrs, length, stride, index, mask, dtype), codegen


def _splat_ptr(builder, vty, count, scalar):
    out = ir.Constant(vty, ir.Undefined)
    for w in range(count):
        out = builder.insert_element(out, scalar, ir.Constant(ir.IntType(32), w))
    return out
