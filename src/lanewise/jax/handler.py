"""The XLA FFI handler of a compiled ``lw.vmap`` program: generated, cached, registered.

A handler is a Numba ``cfunc``: it reads the buffers of XLA's call frame as
arrays and runs the program's compiled kernel on them, with no Python and no
GIL on the way.  Its module is generated from the kernel's signature (which
argument is an array of which rank and dtype, which a scalar) and stored in
lanewise's disk cache beside the kernel, so a new process loads it compiled.

Sizes, blocking and the parallel/serial choice are decided at trace time and
reach the handler as one int64 array attribute, ``plan``
(:func:`lanewise.bridge.kernel.plan_of`): one handler serves every shape of its signature.

Example:
    >>> import numpy as np, lanewise as lw
    >>> from lanewise.jax.handler import render
    >>> "def handler(frame)" in render([np.dtype("f8")], [1], [np.dtype("f8")], [1], [None], "lane f")
    True
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Any

import jax
import numba
import numpy as np

from ..bridge import kernel
# The plan's layout is lanewise.bridge.kernel's, shared with lw.torch.op's handlers.
from ..bridge.kernel import EMPTY, MODE, SERIAL

#: A reduction's plan: MODE, then blocks, chunks per kept lane, lanes per chunk,
#: reduced lanes, then sizes, argmin/argmax strides and per-lane array shapes.
N_BLOCKS, N_CHUNKS, CHUNK, N_REDUCED, REDUCE_SIZES = range(1, 6)


def render(in_dtypes, in_ranks, out_dtypes, out_ranks, temp_dtypes, lane_name: str,
           sizes: str = f"plan[{kernel.SIZES}]") -> str:
    """The handler module's source.  ``temp_dtypes[k]``: the dtype the kernel writes
    output ``k`` in when XLA's buffer has another (JAX without x64), else None;
    ``sizes``: the kernels' trailing arguments (:func:`lanewise.bridge.kernel.sizes_args`)."""
    reads, casts, values = _buffers(in_dtypes, in_ranks, out_dtypes, out_ranks, temp_dtypes)
    return _TEMPLATE.format(lane=lane_name, imports=kernel.IMPORTS, prefix=_message(lane_name), suffix=_SUFFIX,
                            reads=reads, casts=casts, run=kernel.RUN.format(ok=0, values=values, sizes=sizes))


def held_by_jax(dtypes) -> tuple[list, list]:
    """The dtype JAX holds each buffer in, and the dtype the kernel must write it in
    where the two differ (JAX without x64 holds float64 as float32: the handler
    writes a temporary and casts), else None."""
    held = [np.dtype(jax.dtypes.canonicalize_dtype(d)) for d in dtypes]
    return held, [np.dtype(d) if h != d else None for d, h in zip(dtypes, held, strict=True)]


def _message(lane_name: str) -> bytes:
    return f"lanewise: {lane_name} raised inside a jax.jit op, at lane number ".encode()


_SUFFIX = (b" of the lanes in loop order (on the SPMD path, the first of the lanes that ran together); "
           b"call the lanewise program outside jax.jit on the same inputs to see the exception and the "
           b"lane's index")


def _buffers(in_dtypes, in_ranks, out_dtypes, out_ranks, temp_dtypes, fills=None) -> tuple[str, str, str]:
    """Source reading the buffers (and making temporaries), source casting the
    temporaries into XLA's buffers, and the kernel's leading arguments.  ``fills[k]``:
    a value output ``k`` is filled with before the kernel runs (None: not filled)."""
    lines = [_read("args", k, d, r) for k, (d, r) in enumerate(zip(in_dtypes, in_ranks, strict=True))]
    casts, names = [], [f"a{k}" for k in range(len(in_dtypes))]
    fills = fills or [None] * len(out_dtypes)
    for k, (d, r, t, f) in enumerate(zip(out_dtypes, out_ranks, temp_dtypes, fills, strict=True)):
        lines.append(_read("rets", k, d, r, name="x"))
        name = f"x{k}"
        if t is not None:  # the kernel writes a temporary, cast into XLA's buffer after
            name = f"t{k}"
            lines.append(f"    t{k} = np.empty(x{k}.shape, np.{np.dtype(t).name})")
            casts.append(f"    copy_into(t{k}.reshape(-1), x{k}.reshape(-1))")
        if f is not None:
            lines.append(f"    {name}.fill({_literal(f)})")
        names.append(name)
    return "\n".join(lines), "\n".join(casts), ", ".join(names)


def _literal(value) -> str:
    """Source for a scalar constant (infinities and NaN included)."""
    value = value.item() if hasattr(value, "item") else value
    if isinstance(value, float) and not math.isfinite(value):
        return "np.nan" if math.isnan(value) else ("np.inf" if value > 0 else "-np.inf")
    return repr(value)


def _read(field: str, k: int, dtype, rank: int, name: str = "a") -> str:
    """Source reading buffer ``k`` of ``field`` as an array (or, rank 0 input, a scalar)."""
    frame_field = "FRAME_ARGS" if field == "args" else "FRAME_RETS"
    typ = f"numba.{numba.from_dtype(np.dtype(dtype))}"
    data = f"pointer(word(b, BUFFER_DATA), {typ})"
    if rank == 0 and name == "a":
        return f"    b = buffer(frame, {frame_field}, {k})\n    {name}{k} = {data}[0]"
    shape = "(" + "".join(f"dim(b, {j}), " for j in range(rank)) + ")"
    return f"    b = buffer(frame, {frame_field}, {k})\n    {name}{k} = carray({data}, {shape})"


_HEAD = '''\
# Generated by lanewise: the XLA FFI handler of {lane}.  Deleting it is safe.
# The program's compiled kernels are injected by lanewise.
{imports}from lanewise.bridge.abi import copy_into
from lanewise.jax.abi import (BUFFER_DATA, FRAME_ARGS, FRAME_EXTENSION, FRAME_RETS, STAGE_EXECUTE,
                              attribute_array, buffer, dim, error, fill_metadata, stage)

PREFIX = np.frombuffer({prefix!r}, np.uint8).copy()
SUFFIX = np.frombuffer({suffix!r}, np.uint8).copy()
'''

_ENTRY = '''
@numba.cfunc(numba.int64(numba.int64), nopython=True, cache=True)
def handler(frame):
    extension = word(frame, FRAME_EXTENSION)
    if extension != 0 and pointer(extension + 8, numba.int32)[0] == 1:  # XLA_FFI_Extension_Metadata
        return fill_metadata(extension)
    if stage(frame) != STAGE_EXECUTE:
        return 0
    plan = attribute_array(frame, 0)
{reads}
'''

_TEMPLATE = _HEAD + kernel.FAILED_LANE + _ENTRY + '''{run}    if lane >= 0:
        return error(frame, PREFIX, lane, SUFFIX)
{casts}
    return 0
'''


@dataclass(frozen=True)
class Target:
    """A registered handler: its XLA name, and what tracing a call of it needs."""

    name: str
    handler: Any  # the cfunc (kept alive: XLA holds only its address)
    n_sizes: int  # sizes + per-lane output extents the kernels take after the outputs


def build(exe, in_dtypes, in_ranks, out_dtypes, out_ranks, temp_dtypes) -> Target:
    """The handler of ``exe`` for these buffer types: from disk if cached, else compiled."""
    sizes, n_sizes = kernel.sizes_args(exe)
    source = render(in_dtypes, in_ranks, out_dtypes, out_ranks, temp_dtypes, kernel.lane_name(exe), sizes)
    key = kernel.disk_key("xla handler", exe, source)
    built = kernel.load("xla handler", key, exe, source)
    return Target(_target_name(key), built.module.handler, n_sizes)


_UNCACHED = itertools.count()


def _target_name(key: str | None) -> str:
    """The XLA target's name: the cache key, or a number never reused in this process
    (XLA keeps the first handler registered under a name; an ``id`` could be reused
    once a module is collected, and a new handler would have run the old one)."""
    return f"lanewise_{key}" if key is not None else f"lanewise_uncached_{next(_UNCACHED)}"


_REDUCE_TEMPLATE = _HEAD + '''

@numba.njit(nogil=True, cache=True)
def failed_block(err):
    """(first block whose lane failed, that lane), or (-1, -1)."""
    for b in range(err.shape[0]):
        if err[b] >= 0:
            return b, err[b]
    return -1, -1
''' + _ENTRY + '''    mode = plan[{MODE}]
    if mode == {EMPTY}:
        return 0
    err = np.full(plan[{N_BLOCKS}], -1, np.int64)
    if mode == {SERIAL} or not try_acquire():  # busy: another launch is running; run here
        rkernel_serial({values}, {trailing}, err)
    else:
        stop = np.zeros(1, np.int64)
        taken = np.zeros(1, np.int64)  # the next block to take
        rkernel({values}, {trailing}, err, stop, taken)
        release()
    block, lane = failed_block(err)
    if block >= 0:
        return error(frame, PREFIX, block * plan[{CHUNK}] + lane, SUFFIX)
{casts}
    return 0
'''


def build_reduce(exe, types, outs, identities, indexed: bool, n_strides: int, shape_ranks) -> Target:
    """The handler of a reduction ``exe`` (backends.cpu.reduce) writing its partials
    into XLA's buffers ``outs``; plan words as in :mod:`lanewise.jax.reduce`."""
    lane_name = kernel.lane_name(exe)
    width = 2 if indexed else 1
    fills = [(identities[k // width] if k % width == 0 else -1) if identities[k // width] is not None else None
             for k in range(len(outs))]
    jax_dtypes, temps = held_by_jax([o.dtype for o in outs])
    reads, casts, values = _buffers([np.dtype(d) for _, d in types], [len(s) for s, _ in types], jax_dtypes,
                                    [len(o.shape) for o in outs], temps, fills)
    words = [f"plan[{REDUCE_SIZES + j}]" for j in range(len(exe.program.signature.levels) + n_strides)]
    at = REDUCE_SIZES + len(words)
    for rank in shape_ranks:
        words.append("(" + ", ".join(f"plan[{at + j}]" for j in range(rank)) + ",)")
        at += rank
    trailing = ", ".join(words + [f"plan[{N_CHUNKS}]", f"plan[{CHUNK}]", f"plan[{N_REDUCED}]"])
    source = _REDUCE_TEMPLATE.format(
        lane=lane_name, imports=kernel.IMPORTS,
        prefix=f"lanewise: {lane_name} raised inside a jax.jit op (a lw.reduce), at lane ".encode(),
        suffix=b" of its block (on the SPMD path, the first of the lanes that ran together); call the lanewise "
               b"program outside jax.jit on the same inputs to see the exception",
        values=values, reads=reads, casts=casts, trailing=trailing, MODE=MODE, EMPTY=EMPTY, SERIAL=SERIAL,
        N_BLOCKS=N_BLOCKS, CHUNK=CHUNK)
    key = kernel.disk_key("xla reduce handler", exe, source)
    built = kernel.load("xla reduce handler", key, exe, source, ("rkernel", "rkernel_serial"))
    return Target(_target_name(key), built.module.handler, 0), jax_dtypes
