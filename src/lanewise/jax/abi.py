"""The XLA FFI handler ABI (``xla/ffi/api/c_api.h``), read and written from Numba code.

An FFI handler is ``XLA_FFI_Error* handler(XLA_FFI_CallFrame*)``.  lanewise's
handlers are Numba ``cfunc`` s of type ``int64(int64)`` (pointers travel in
integer registers on x86-64 and AArch64, so the two are the same call); these
helpers turn the addresses they receive into typed pointers and arrays.  The
offsets are those of the header's structs on a 64-bit machine, each field
8-byte aligned (enums are 4 bytes, padded); ``tests/test_jax_op.py`` checks
them against the header shipped with jaxlib.

Example:
    >>> import numba, numpy as np
    >>> a = np.array([7, 8, 9], np.int64)
    >>> numba.njit(lambda addr: word(addr, 2))(a.ctypes.data)
    9
"""

from __future__ import annotations

import numba
import numpy as np
from llvmlite import ir
from numba.core import types
from numba.extending import intrinsic

from ..bridge.abi import copy_into, pointer, word
from ..runtime.cache import own_cache

# Fields, in 8-byte words from the start of their struct.
FRAME_EXTENSION, FRAME_API, FRAME_STAGE_BYTES = 1, 2, 32
FRAME_ARGS, FRAME_RETS, FRAME_ATTRS = 9, 14, 20  # the void** of XLA_FFI_Args/Rets/Attrs
BUFFER_DATA, BUFFER_RANK, BUFFER_DIMS = 3, 4, 5
ARRAY_SIZE, ARRAY_DATA = 1, 2  # XLA_FFI_Array (an array attribute)
METADATA_OF_EXTENSION = 3  # XLA_FFI_Metadata_Extension.metadata
API_ERROR_CREATE = 6  # XLA_FFI_Api.XLA_FFI_Error_Create
STAGE_EXECUTE = 3
#: XLA_FFI_API_MAJOR/MINOR of the header these offsets follow (what the handlers report).
API_VERSION = (0, 3)


def header_supported(major: int, minor: int) -> bool:
    """Whether the bridge works with a jaxlib whose FFI header is ``major.minor``.

    Within one major version XLA's FFI only appends (new API functions at the end of
    ``XLA_FFI_Api``, new struct fields after the old ones), and XLA takes a handler
    that reports an older minor version: the offsets above hold for every minor from
    :data:`API_VERSION`'s on (``tests/test_jax_op.py`` checks them against the header
    jaxlib ships: 3 in JAX 0.10, 5 in JAX 0.12).  Another major version may move
    anything.

    Example:
        >>> header_supported(0, 5), header_supported(0, 2), header_supported(1, 0)
        (True, False, False)
    """
    return major == API_VERSION[0] and minor >= API_VERSION[1]
ERROR_INTERNAL, ERROR_INVALID_ARGUMENT = 13, 3


@intrinsic
def call_pointer(typingctx, fn, arg):
    """``((void* (*)(void*)) fn)(arg)``: call a C function pointer of the API table."""
    if not (isinstance(fn, types.Integer) and isinstance(arg, types.Integer)):
        return None

    def codegen(context, builder, sig, args):
        void_p = ir.IntType(8).as_pointer()
        callee = builder.inttoptr(args[0], ir.FunctionType(void_p, [void_p]).as_pointer())
        result = builder.call(callee, [builder.inttoptr(args[1], void_p)])
        return builder.ptrtoint(result, ir.IntType(64))
    return types.int64(fn, arg), codegen


@numba.njit(inline="always")
def stage(frame):
    """The call frame's execution stage (an enum: 4 bytes)."""
    return pointer(frame + FRAME_STAGE_BYTES, numba.int32)[0]


@numba.njit(inline="always")
def buffer(frame, field, k):
    """The k-th argument or result buffer (``field``: FRAME_ARGS or FRAME_RETS)."""
    return word(word(frame, field), k)


@numba.njit(inline="always")
def dim(buf, k):
    return word(word(buf, BUFFER_DIMS), k)


@numba.njit(inline="always")
def attribute_array(frame, k):
    """The int64 data of the k-th attribute (attributes come sorted by name)."""
    return pointer(word(word(word(frame, FRAME_ATTRS), k), ARRAY_DATA), numba.int64)


@numba.njit(cache=own_cache(), nogil=True)
def fill_metadata(extension) -> int:
    """Answer XLA's metadata query: the API version these offsets follow, no traits."""
    metadata = word(extension, METADATA_OF_EXTENSION)
    words = pointer(metadata, numba.int64)
    words[1] = 24  # XLA_FFI_Api_Version: struct_size, extension_start, major, minor
    words[2] = 0
    version = pointer(metadata + 24, numba.int32)
    version[0] = API_VERSION[0]
    version[1] = API_VERSION[1]
    pointer(metadata + 32, numba.uint32)[0] = 0  # XLA_FFI_Handler_Traits
    return 0


@numba.njit(cache=own_cache(), nogil=True)
def error(frame, prefix, lane, suffix) -> int:
    """A new XLA_FFI_Error, code INTERNAL: ``prefix`` + the failed lane's number + ``suffix``
    (uint8 arrays).  XLA copies the message and owns the error."""
    digits = np.zeros(20, np.uint8)
    n, value = 0, max(lane, 0)
    while True:
        digits[n] = 48 + value % 10
        n, value = n + 1, value // 10
        if value == 0:
            break
    message = np.zeros(prefix.size + n + suffix.size + 1, np.uint8)
    copy_into(prefix, message[:prefix.size])  # not slice assignments: see copy_into
    for k in range(n):
        message[prefix.size + k] = digits[n - 1 - k]
    copy_into(suffix, message[prefix.size + n:])
    args = np.zeros(4, np.int64)  # XLA_FFI_Error_Create_Args: size, extension, message, code
    args[0] = 28
    args[2] = message.ctypes.data
    args[3] = ERROR_INTERNAL
    return call_pointer(word(word(frame, FRAME_API), API_ERROR_CREATE), args.ctypes.data)
