"""Arrays of other libraries in, results in the caller's library out.

Lanes compute on NumPy arrays.  An argument that is a PyTorch CPU tensor, a
JAX array or any object exposing ``__dlpack__`` or ``__array_interface__``
becomes a NumPy *view* of the same memory (:func:`as_host_array`: DLPack,
never a copy of CPU data).  When every array argument of a call came from one
such library, the results go back as that library's arrays
(:func:`to_library`): ``torch.from_numpy`` (no copy), or ``jax.device_put``
(no copy of a 64-byte aligned buffer: the CPU backend allocates results for JAX
with :func:`aligned_empty`; others are copied on the calling thread).

torch and jax are imported only once an argument came from them: the origin
of an array is read from ``type(x).__module__``.

Example:
    >>> import numpy as np
    >>> origin(np.ones(3)), origin(2.0), library_of(["numpy", None])
    ('numpy', None, None)
    >>> to_library(np.ones(2), None)
    array([1., 1.])
"""

from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np

from .. import pytree
from ..errors import LaneTypeError, OutputError

#: The libraries whose arrays results can be returned as (``type(x).__module__``'s root).
LIBRARIES = {"torch": "torch", "jax": "jax", "jaxlib": "jax"}
_SCALARS = (bool, int, float, complex, np.generic)
#: XLA's CPU client shares a host buffer (no copy) only at this alignment.
XLA_ALIGNMENT = 64


def origin(value: Any) -> str | None:
    """Which library an argument leaf's array came from: ``"torch"``, ``"jax"``,
    ``"numpy"`` (NumPy and every other array-like); None for a scalar.

    Example:
        >>> origin(np.float32(1)), origin(np.zeros(())), origin([1, 2])
        (None, 'numpy', 'numpy')
    """
    if isinstance(value, np.ndarray):
        return "numpy"
    if isinstance(value, _SCALARS):
        return None  # Python and NumPy scalars do not decide the result type
    return LIBRARIES.get(type(value).__module__.partition(".")[0], "numpy")


def library_of(origins) -> str | None:
    """The library results go back to: the one every array came from, when it is
    torch or jax; None (NumPy results) for NumPy, other or mixed origins.

    Example:
        >>> library_of(["torch", None, "torch"]), library_of(["torch", "numpy"]), library_of([None])
        ('torch', None, None)
    """
    found = {o for o in origins if o is not None}
    if len(found) == 1:
        (only,) = found
        return only if only != "numpy" else None
    return None


def is_array_like(value: Any) -> bool:
    """Whether ``value`` can be read as a NumPy array (DLPack, the array interface, ``__array__``).

    Example:
        >>> is_array_like(np.ones(2)), is_array_like(object())
        (True, False)
    """
    return any(hasattr(value, a) for a in ("__dlpack__", "__array_interface__", "__array__"))


def as_host_array(value: Any, what: str) -> np.ndarray:
    """``value`` as a NumPy array sharing its memory (``what`` names it in errors).

    DLPack first (``np.from_dlpack``: a view, read-only for JAX arrays, strides
    kept), else ``np.asarray`` (the array interface: also a view).  A torch
    tensor that requires grad is refused, as JAX refuses to turn a traced value
    into NumPy: lanewise computes no torch gradients and will not silently drop
    them.  A dtype NumPy cannot hold (bfloat16) is a :class:`lanewise.LaneTypeError`.

    Example:
        >>> a = np.arange(3.0)
        >>> np.shares_memory(as_host_array(a[::2], "argument x"), a)
        True
    """
    if getattr(value, "requires_grad", False) and origin(value) == "torch":
        raise LaneTypeError(
            f"{what} is a torch tensor that requires grad; lw.vmap and lw.reduce compute no "
            "torch gradients, and would silently drop it: pass .detach() of it")
    try:
        if hasattr(value, "__dlpack__"):
            try:
                return np.from_dlpack(value)
            except (BufferError, RuntimeError, TypeError, ValueError):
                # A device DLPack cannot hand to the CPU, or a dtype DLPack lacks:
                # np.asarray (the object's own conversion) may still manage or say why.
                if not hasattr(value, "__array__") and not hasattr(value, "__array_interface__"):
                    raise
        return np.asarray(value)
    except Exception as e:  # noqa: BLE001 - re-raised naming the argument
        dtype = getattr(value, "dtype", None)
        held = f" of dtype {dtype}" if dtype is not None else ""
        raise LaneTypeError(
            f"{what} is a {type(value).__module__}.{type(value).__name__}{held} that NumPy cannot "
            f"view ({type(e).__name__}: {e}); lanewise lanes take bool, int, uint, float32/float64 "
            "and complex64/complex128 arrays on the CPU (convert it first, e.g. to float32)") from e


def host_out(out: Any) -> Any:
    """``out=`` with torch/JAX/other array leaves replaced by writable NumPy views of
    them (``out`` itself when every leaf is a NumPy or device array already).

    Example:
        >>> o = np.empty(2)
        >>> host_out(o) is o
        True
    """
    leaves, tree = pytree.flatten(out)
    if all(isinstance(v, np.ndarray) or _on_device(v) or not is_array_like(v) for v in leaves):
        return out  # NumPy, CUDA or not an array at all: the backend checks them as before
    views = []
    for path, leaf in zip(pytree.leaf_paths(out), leaves, strict=True):
        if not isinstance(leaf, np.ndarray) and not _on_device(leaf) and is_array_like(leaf):
            name = pytree.path_name("out", path)
            leaf = as_host_array(leaf, f"out= for {name}")
            if not leaf.flags.writeable:  # JAX arrays are immutable
                raise OutputError(f"out= for {name} is read-only (JAX arrays cannot be written to); "
                                  "pass a writable array (NumPy, torch) or leave out= unset")
        views.append(leaf)
    return pytree.unflatten(tree, views)


def _on_device(value: Any) -> bool:
    """A CUDA array: the cuda backend takes it as it is (never imports numba.cuda)."""
    return hasattr(value, "__cuda_array_interface__") or type(value).__module__.startswith("numba.cuda")


def to_library(result: Any, library: str | None) -> Any:
    """The NumPy leaves of ``result`` as arrays of ``library`` (``"torch"``,
    ``"jax"``; None: unchanged).  NumPy scalars become 0-d arrays, as
    ``torch.sum``/``jnp.sum`` return them.

    Example:
        >>> to_library((np.ones(1), 2.0), None)
        (array([1.]), 2.0)
    """
    if library is None:
        return result
    convert = _as_torch if library == "torch" else _as_jax
    leaves, tree = pytree.flatten(result)
    return pytree.unflatten(tree, [convert(np.asarray(v)) if isinstance(v, (np.ndarray, np.generic)) else v
                                   for v in leaves])


def _as_torch(a: np.ndarray):
    import torch

    if not a.flags.writeable or any(s < 0 for s in a.strides):  # torch.from_numpy refuses these
        a = a.copy()
    return torch.from_numpy(a)  # shares a's memory


def aligned_empty(shape: tuple, dtype) -> np.ndarray:
    """``np.empty(shape, dtype)`` starting on an :data:`XLA_ALIGNMENT` boundary, so
    that JAX takes it as a result without a copy (:func:`to_library`).

    Example:
        >>> a = aligned_empty((3, 5), np.float32)
        >>> a.shape, a.dtype, a.ctypes.data % XLA_ALIGNMENT, a.flags.c_contiguous
        ((3, 5), dtype('float32'), 0, True)
    """
    dtype = np.dtype(dtype)
    raw = np.empty(dtype.itemsize * math.prod(shape) + XLA_ALIGNMENT, np.uint8)
    return np.ndarray(shape, dtype, raw, -raw.__array_interface__["data"][0] % XLA_ALIGNMENT)


@functools.cache
def _jax_cpu():
    import jax

    return jax.local_devices(backend="cpu")[0]


def _as_jax(a: np.ndarray):
    """``a`` as a JAX array on the CPU.  Not ``jax.dlpack.from_dlpack``: XLA calls a
    DLPack producer's deleter (NumPy's takes the GIL) on its own threads, after
    copying an unaligned buffer or when a computation there held the last use of a
    shared one, and a thread XLA made entering Python crashed the process under
    tracemalloc (issue 42).  ``jax.device_put`` shares an aligned buffer holding the
    array by jaxlib's references, which it releases on a Python thread, and copies
    any other (strides, or a dtype JAX holds narrower without jax_enable_x64)."""
    import jax

    return jax.device_put(a, _jax_cpu())
