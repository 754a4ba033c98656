"""A shared counter for compiled code: atomic fetch-and-add on an int64 array element.

The parallel kernels that compiled callers launch (the bridges' handlers) hand
their blocks out one at a time from such a counter: Numba's ``prange`` splits
its range into one fixed share per thread, and its chunk size setting did not
change that here, so a share holding the expensive lanes (the inside of an
escape-time set) kept one core busy while the other idled (1.6x the time of
lanewise's own launch).

Example:
    >>> import numba, numpy as np
    >>> @numba.njit
    ... def take_two(c):
    ...     return fetch_add(c, 1), fetch_add(c, 1)
    >>> c = np.zeros(1, np.int64)
    >>> take_two(c), int(c[0])
    ((0, 1), 2)
"""

from __future__ import annotations

import numba
import numpy as np
from llvmlite import ir
from numba.core import cgutils, types
from numba.extending import intrinsic

from .interrupt import stopped


@intrinsic
def fetch_add(typingctx, counter, step):
    """``counter[0] += step`` atomically (sequentially consistent); the value before."""
    if not (isinstance(counter, types.Array) and counter.dtype == types.int64 and isinstance(step, types.Integer)):
        return None

    def codegen(context, builder, sig, args):
        array = context.make_array(sig.args[0])(context, builder, args[0])
        step = context.cast(builder, args[1], sig.args[1], types.int64)
        return builder.atomic_rmw("add", cgutils.gep_inbounds(builder, array.data, 0), step, "seq_cst")
    return types.int64(counter, step), codegen


@intrinsic
def thread_count(typingctx):
    """``numba.get_num_threads()``, through the threading layer's symbol: Numba's own
    overload calls it through a ctypes address, which keeps the calling kernel, and
    every handler that links it, out of the disk cache.  The layer must have started
    (a parallel kernel's compile starts it; lanewise.bridge.kernel.load does)."""
    def codegen(context, builder, sig, args):
        fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(cgutils.intp_t, []), "get_num_threads")
        return builder.call(fn, [])
    return types.intp(), codegen


#: Bytes of a cache line, or of two adjacent lines that x86-64's prefetcher pulls
#: in together (128 on Apple's ARM cores): what keeps threads' writes apart.
CACHE_LINE = 128
_LINE = CACHE_LINE // 8  # int64 elements

#: A shared run's ``stop`` array: the Ctrl-C flag at 0, which every thread reads
#: before each block; the next unit, the failed flag and the thread count a cache
#: line further on, since each chunk taken writes the counter.  A one-element
#: ``stop`` (the Ctrl-C flag alone) runs units [first, last) as given.
NEXT, FAILED, THREADS = _LINE, _LINE + 1, _LINE + 2
SHARED_SLOTS = 2 * _LINE
#: Elements of a thread's ``at`` array (where its lanes are: written per lane when
#: tracked): a whole line, so no two threads' written entries share one.
AT_SLOTS = _LINE


def line_array(n: int, fill: int = 0) -> np.ndarray:
    """``n`` int64 elements set to ``fill``, starting on a cache line, with the rest of
    their last line unused: a thread's ``at`` (written per lane) shares no line with
    another thread's (two 128-byte ``np.full`` buffers can be neighbours in one line).

    Example:
        >>> a = line_array(AT_SLOTS, -1)
        >>> a.ctypes.data % CACHE_LINE, a.size, int(a[0])
        (0, 16, -1)
    """
    spare = np.empty(n + 2 * _LINE, np.int64)  # room to align the start and to pad the end
    start = (-spare.ctypes.data % CACHE_LINE) // 8
    out = spare[start:start + n]
    out.fill(fill)
    return out


#: A chunk takes this share of the units not yet taken, divided by the threads
#: (OpenMP's "guided" schedule uses 1).  2: a long first chunk cannot leave one
#: thread working alone at the end for more than about a quarter of its share.
GUIDED_DIVISOR = 2


@numba.njit(nogil=True, cache=True)
def take_chunk(stop, last):
    """The next chunk ``(first, end)`` of units below ``last`` from a shared run's
    counter ``stop[NEXT]``: guided (a share of what is left, at least one unit), so the
    first chunks are long and the last single units, and lanes whose cost differs a
    thousandfold still keep every thread busy.  ``(last, last)`` once none is left
    or the run failed (``stop[FAILED]``: chunks are taken in order, so every unit before
    a failed one was taken already)."""
    if stopped(stop[FAILED:]):
        return last, last
    seen = stop[NEXT]
    if seen >= last:
        return last, last
    size = max(1, (last - seen) // (GUIDED_DIVISOR * stop[THREADS]))
    first = fetch_add(stop[NEXT:], size)
    return min(first, last), min(first + size, last)
