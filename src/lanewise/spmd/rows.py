"""Per-lane rows in the W-wide code: a lane's 1-D array view as W data pointers.

Every lane of a vmapped array receives a view with the same length and stride
(only its data pointer differs), so the W-wide lane takes the W data pointers
(a ``Vec`` of uint64) and one length and one stride, and ``p[i]`` reads lane
``w``'s element at ``ptr[w] + i[w] * stride`` where its mask bit is set.  Lanes
outside the mask read nothing, so an index that is out of bounds for them (a
loop that stopped, a tail lane) cannot fault.  Negative indices wrap as in
Numba (``i + len``); an index out of bounds in a lane of the mask raises
IndexError before anything is read (docs/safety.md, "Indexing").

A 1-D array that every lane of a group shares (passed whole, or mapped only at
an outer level: a table of coefficients, source positions, sample times) is a
*table*: one data pointer, and ``t[i]`` (:func:`v_table`) is one scalar load for
an index that is the same in every lane, else a gather from the one base.

Two ways to read a per-lane row (:func:`v_row` picks per access):

* a **gather** (:func:`v_gather`): W scalar loads put into a vector, for an
  index that differs between lanes, a strided row or a bool row;
* a **block** for an index that is the same in every lane (a ``for k in
  range(n)`` counter, a scan step) of a contiguous row: the W lanes' next B = W
  elements (64 bytes each) are loaded as W vectors and transposed in registers
  into a cache of B vectors, one per index; each read of an index in the block
  is then one vector load from it.  About 0.7 operations per element instead of
  3, and the rows are read in whole cache lines.

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

from .vector import Vec, any_lane, element, is_scalar, splat, vector_cast

_I32 = ir.IntType(32)
_I64 = ir.IntType(64)

#: The message of a row read out of bounds in the W-wide lane (the one exception
#: it may raise: :func:`lanewise.spmd.check.check_compiled` accepts it by this text).
OUT_OF_BOUNDS = "lanewise: row index out of bounds in the W-wide lane"


class RowIndexError(IndexError):
    """A row read out of bounds in the W-wide lane (replayed as Python's IndexError)."""


def _index_vector(context, builder, index, value, length, count):
    """The lanes' indices as ``<count x i64>``, negative ones wrapped by ``length``
    (Numba's wraparound for signed indices; unsigned ones never wrap)."""
    if not isinstance(index, Vec):  # wrapped once, then splat
        return splat(context, builder, Vec(types.int64, count), _index_scalar(context, builder, index, value, length))
    signed = index.dtype.signed
    idx = vector_cast(context, builder, value, index, types.int64 if signed else types.uint64)
    if signed:
        n = splat(context, builder, Vec(types.int64, count), length)
        negative = builder.icmp_signed("<", idx, ir.Constant(idx.type, None))
        idx = builder.select(negative, builder.add(idx, n), idx)
    return idx


def _index_scalar(context, builder, index, value, length=None):
    """A uniform index as i64, wrapped by ``length`` (i64) when negative and signed."""
    dtype = types.unliteral(index)
    idx = context.cast(builder, value, index, types.int64 if dtype.signed else types.uint64)
    if dtype.signed and length is not None:
        negative = builder.icmp_signed("<", idx, ir.Constant(_I64, 0))
        idx = builder.select(negative, builder.add(idx, length), idx)
    return idx


def _row_types(ptrs, length, stride, index, mask, dtype):
    """The element type of a row read, or None when the arguments do not type."""
    dt = getattr(dtype, "dtype", None)
    idx_dtype = index.dtype if isinstance(index, Vec) else types.unliteral(index)
    if not (isinstance(ptrs, Vec) and isinstance(ptrs.dtype, types.Integer) and ptrs.dtype.bitwidth == 64
            and isinstance(length, types.Integer) and isinstance(stride, types.Integer)
            and isinstance(idx_dtype, types.Integer) and dt is not None and is_scalar(dt)):
        return None
    count = ptrs.count
    if isinstance(index, Vec) and index.count != count:
        return None
    if isinstance(mask, Vec):
        if mask.count != count or not isinstance(mask.dtype, types.Boolean):
            return None
    elif not isinstance(mask, types.Boolean):
        return None
    return dt


def _gather(context, builder, tys, args):
    """Codegen of :func:`v_gather` (``tys``: the types of its first five
    arguments and the element type; ``args``: the first five arguments)."""
    ptrs, length, stride, index, mask, dt = tys
    vptrs, vlen, vstride, vidx, vmask = args
    count = ptrs.count
    n = context.cast(builder, vlen, length, types.int64)
    step = splat(context, builder, Vec(types.int64, count), context.cast(builder, vstride, stride, types.int64))
    idx = _index_vector(context, builder, index, vidx, n, count)
    bits = vmask if isinstance(mask, Vec) else splat(context, builder, Vec(types.boolean, count), vmask)
    # Bounds: one unsigned compare (a wrapped negative index is huge) and one
    # test of the lanes' bits; an index out of bounds in a lane of the mask
    # raises IndexError (the kernel reports the group, the host replays its
    # lanes for Python's message) and is never dereferenced.
    inside = builder.icmp_unsigned("<", idx, splat(context, builder, Vec(types.int64, count), n))
    outside = builder.and_(bits, builder.not_(inside))
    with builder.if_then(any_lane(builder, outside), likely=False):
        context.call_conv.return_user_exc(builder, RowIndexError, (OUT_OF_BOUNDS,))
    bits = builder.and_(bits, inside)
    offsets = builder.mul(idx, step)
    elem = element(context.data_model_manager, dt)
    addresses = builder.inttoptr(builder.add(vptrs, offsets), ir.VectorType(elem.as_pointer(), count))
    # Lanes outside the mask read a zero on the stack instead: no fault, no
    # branch.  W scalar loads, not llvm.masked.gather: on Zen 4 (AVX-512) the
    # gather made W3's scan 2x slower than the loads (0.0089 s vs 0.0047 s).
    dummy = cgutils.alloca_once_value(builder, ir.Constant(elem, None))
    safe = builder.select(bits, addresses, _broadcast(builder, addresses.type, dummy))
    vec = ir.Constant(ir.VectorType(elem, count), ir.Undefined)
    for w in range(count):
        at = ir.Constant(_I32, w)
        vec = builder.insert_element(vec, builder.load(builder.extract_element(safe, at)), at)
    return vec


@intrinsic
def v_gather(typingctx, ptrs, length, stride, index, mask, dtype):
    """``row[index]`` in every lane of ``mask``: lane ``w`` reads the ``dtype``
    element at byte address ``ptrs[w] + index[w] * stride`` (``index`` wrapped
    by ``length`` when negative); lanes outside the mask read nothing (zero)."""
    dt = _row_types(ptrs, length, stride, index, mask, dtype)
    if dt is None:
        return None

    def codegen(context, builder, sig, args):
        return _gather(context, builder, (*sig.args[:5], dt), args[:5])

    return Vec(dt, ptrs.count)(ptrs, length, stride, index, mask, dtype), codegen


def _table_types(ptr, length, stride, index, mask, dtype):
    """The type of a table read (a scalar for a uniform index and mask, else a
    Vec), or None when the arguments do not type."""
    dt = getattr(dtype, "dtype", None)
    idx_dtype = index.dtype if isinstance(index, Vec) else types.unliteral(index)
    counts = {t.count for t in (index, mask) if isinstance(t, Vec)}
    if not (isinstance(ptr, types.Integer) and ptr.bitwidth == 64 and isinstance(length, types.Integer)
            and isinstance(stride, types.Integer) and isinstance(idx_dtype, types.Integer)
            and dt is not None and is_scalar(dt) and not isinstance(dt, types.Boolean) and len(counts) <= 1):
        return None
    if not isinstance(mask.dtype if isinstance(mask, Vec) else mask, types.Boolean):
        return None
    return Vec(dt, index.count) if isinstance(index, Vec) else dt


@intrinsic
def v_table(typingctx, ptr, length, stride, index, mask, dtype):
    """``table[index]`` of a 1-D array every lane shares (one data pointer ``ptr``):
    for a uniform ``index``, one scalar load when a lane of ``mask`` is live (the
    value is the same in every lane; no lane live reads nothing and gives zero),
    else a gather from the one base.  An index out of bounds in a live lane
    raises, as :func:`v_gather` does."""
    out = _table_types(ptr, length, stride, index, mask, dtype)
    if out is None:
        return None
    sig = out(ptr, length, stride, index, mask, dtype)
    if isinstance(out, Vec):
        def gather(context, builder, s, args):
            vptrs = splat(context, builder, Vec(types.uint64, out.count),
                          context.cast(builder, args[0], ptr, types.uint64))
            return _gather(context, builder, (Vec(types.uint64, out.count), *s.args[1:5], out.dtype),
                           (vptrs, *args[1:5]))

        return sig, gather

    def codegen(context, builder, s, args):
        vptr, vlen, vstride, vidx, vmask = args[:5]
        n = context.cast(builder, vlen, length, types.int64)
        idx = _index_scalar(context, builder, index, vidx, n)
        live = any_lane(builder, vmask)
        inside = builder.icmp_unsigned("<", idx, n)
        with builder.if_then(builder.and_(live, builder.not_(inside)), likely=False):
            context.call_conv.return_user_exc(builder, RowIndexError, (OUT_OF_BOUNDS,))
        elem = element(context.data_model_manager, out)
        at = builder.add(context.cast(builder, vptr, ptr, types.int64),
                         builder.mul(idx, context.cast(builder, vstride, stride, types.int64)))
        dummy = cgutils.alloca_once_value(builder, ir.Constant(elem, None))  # no lane live: read a zero
        safe = builder.select(builder.and_(live, inside), builder.inttoptr(at, elem.as_pointer()), dummy)
        return builder.load(safe)

    return sig, codegen


def blocked(dtype, count: int) -> bool:
    """Whether reads of a ``dtype`` row with ``count`` lanes can go through a block
    (a square ``count`` x ``count`` transpose; bool rows are i1 in registers, i8 in memory)."""
    return not isinstance(dtype, types.Boolean) and count >= 2 and count & (count - 1) == 0


@intrinsic
def v_row(typingctx, ptrs, length, stride, index, mask, dtype, buf, state):
    """``row[index]`` as :func:`v_gather`, through a block of the rows when
    ``index`` is uniform (a scalar) and the row contiguous.

    ``buf`` (W*W elements of ``dtype``) and ``state`` (two int64: the block's
    first index, -1 for none, and the bits of the lanes it holds) are the
    block's storage, made once per row by the caller.  A block is refilled when
    the index leaves it or a lane of ``mask`` is not in it; it holds only lanes
    some read asked for, so lanes outside every mask are never dereferenced.
    """
    dt = _row_types(ptrs, length, stride, index, mask, dtype)
    if dt is None or not (isinstance(buf, types.Array) and buf.dtype == dt and isinstance(state, types.Array)
                          and state.dtype == types.int64):
        return None
    out = Vec(dt, ptrs.count)
    sig = out(ptrs, length, stride, index, mask, dtype, buf, state)
    if isinstance(index, Vec) or not blocked(dt, ptrs.count):
        return sig, lambda context, builder, s, args: _gather(context, builder, (*s.args[:5], dt), args[:5])

    def codegen(context, builder, s, args):
        return _block_read(context, builder, s.args, args, dt)

    return sig, codegen


def _block_read(context, builder, tys, args, dt):
    """The hit path is one subtraction, two tests and a vector load: a block is
    only ever filled where the index is in bounds and the row contiguous, so an
    index inside it needs no other check."""
    ptrs, length, stride, index, mask = tys[:5]
    vptrs, vlen, vstride, vidx, vmask, _, vbuf, vstate = args
    count = ptrs.count
    span = count  # elements of each lane's row in a block: 64 bytes
    memty = context.get_data_type(dt)
    size = context.get_abi_sizeof(memty)
    vecty = ir.VectorType(memty, count)
    n = context.cast(builder, vlen, length, types.int64)
    idx = _index_scalar(context, builder, index, vidx, n)
    data = context.make_array(tys[6])(context, builder, vbuf).data
    stp = context.make_array(tys[7])(context, builder, vstate).data
    have_at = builder.gep(stp, [ir.Constant(_I64, 1)])
    bits = _mask_bits(context, builder, mask, vmask, count)
    tag, have = builder.load(stp), builder.load(have_at)
    offset = builder.sub(idx, tag)
    hit = builder.and_(builder.icmp_unsigned("<", offset, ir.Constant(_I64, span)),
                       builder.icmp_unsigned("==", builder.and_(bits, builder.not_(have)), ir.Constant(_I64, 0)))

    def read(at):
        where = builder.gep(data, [builder.mul(at, ir.Constant(_I64, count))])
        return builder.load(builder.bitcast(where, vecty.as_pointer()), align=size)

    with builder.if_else(hit, likely=True) as (in_block, miss):
        with in_block:
            from_block, block_end = read(offset), builder.block
        with miss:
            step = context.cast(builder, vstride, stride, types.int64)
            ok = builder.and_(builder.icmp_signed("==", step, ir.Constant(_I64, size)),
                              builder.and_(builder.icmp_signed(">=", idx, ir.Constant(_I64, 0)),
                                           builder.icmp_signed("<", idx, n)))
            ok = builder.and_(ok, builder.icmp_signed(">=", n, ir.Constant(_I64, span)))
            with builder.if_else(ok, likely=True) as (refill, strided):
                with refill:
                    first = _block_of(builder, idx, n, span)
                    keep = builder.select(builder.icmp_signed("==", tag, first), have, ir.Constant(_I64, 0))
                    fill = builder.or_(bits, keep)
                    _fill(context, builder, vptrs, fill, first, data, memty, size, count)
                    builder.store(first, stp)
                    builder.store(fill, have_at)
                    filled, fill_end = read(builder.sub(idx, first)), builder.block
                with strided:
                    gathered = _gather(context, builder, (*tys[:5], dt), args[:5])
                    strided_end = builder.block
            missed = builder.phi(vecty)
            missed.add_incoming(filled, fill_end)
            missed.add_incoming(gathered, strided_end)
            miss_end = builder.block
    value = builder.phi(vecty)
    value.add_incoming(from_block, block_end)
    value.add_incoming(missed, miss_end)
    return value


def _block_of(builder, idx, n, span):
    """The first index of the block holding ``idx``: a multiple of ``span``,
    pulled back to ``n - span`` at the row's end so the block stays in bounds."""
    aligned = builder.and_(idx, ir.Constant(_I64, -span))
    last = builder.sub(n, ir.Constant(_I64, span))
    return builder.select(builder.icmp_signed("<", aligned, last), aligned, last)


def _mask_bits(context, builder, mask, vmask, count):
    """The lanes of ``mask`` as the low ``count`` bits of an i64."""
    if not isinstance(mask, Vec):
        full = ir.Constant(_I64, (1 << count) - 1 if count < 64 else -1)
        return builder.select(vmask, full, ir.Constant(_I64, 0))
    bits = builder.bitcast(vmask, ir.IntType(count))
    return bits if count == 64 else builder.zext(bits, _I64)


def _fill(context, builder, vptrs, fill, first, data, memty, size, count):
    """Load ``count`` elements from ``first`` on of the rows of the lanes in
    ``fill`` (zeros for the others) and store them transposed in ``data``:
    element ``first + j`` of lane ``w`` at ``data[j * count + w]``."""
    vecty = ir.VectorType(memty, count)
    zeros = cgutils.alloca_once(builder, vecty)
    builder.store(ir.Constant(vecty, None), zeros)
    low = fill if count == 64 else builder.trunc(fill, ir.IntType(count))
    lanes = builder.bitcast(low, ir.VectorType(ir.IntType(1), count))
    offset = _broadcast(builder, ir.VectorType(_I64, count), builder.mul(first, ir.Constant(_I64, size)))
    starts = builder.inttoptr(builder.add(vptrs, offset), ir.VectorType(vecty.as_pointer(), count))
    safe = builder.select(lanes, starts, _broadcast(builder, starts.type, zeros))
    rows = [builder.load(builder.extract_element(safe, ir.Constant(_I32, w)), align=size) for w in range(count)]
    for j, column in enumerate(transpose(builder, rows)):
        target = builder.bitcast(builder.gep(data, [ir.Constant(_I64, j * count)]), vecty.as_pointer())
        builder.store(column, target, align=size)


def transpose(builder, rows):
    """A square matrix of vectors transposed: one butterfly stage per index bit,
    each exchanging bit ``h`` of the row and the column (``len(rows)`` a power of 2)."""
    count = len(rows)
    rows = list(rows)
    h = 1
    while h < count:
        for i0 in range(count):
            if i0 & h:
                continue
            a, b = rows[i0], rows[i0 | h]
            low = [c if not c & h else count + c - h for c in range(count)]
            high = [c + h if not c & h else count + c for c in range(count)]
            rows[i0] = builder.shuffle_vector(a, b, ir.Constant(ir.VectorType(_I32, count), low))
            rows[i0 | h] = builder.shuffle_vector(a, b, ir.Constant(ir.VectorType(_I32, count), high))
        h *= 2
    return rows


def _broadcast(builder, vty, scalar):
    """``scalar`` in every element of a vector of type ``vty``."""
    out = ir.Constant(vty, ir.Undefined)
    for w in range(vty.count):
        out = builder.insert_element(out, scalar, ir.Constant(_I32, w))
    return out
