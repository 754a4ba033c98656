"""The C++ CPU kernel of ``lw.torch.op`` operators, and the handlers it calls.

PyTorch's dispatcher calls a Python kernel with the GIL taken and every
argument converted: 10-30 us a call, more than a small program runs.  So an
operator's CPU kernel is C++ (``native.cpp``, built once per machine by
``torch.utils.cpp_extension`` and kept in lanewise's cache folder),
which checks the tensors, allocates the outputs and calls the program's
*handler*: a generated Numba ``cfunc`` running the compiled kernels on the
tensors' memory (:mod:`lanewise.bridge.kernel`, as ``lw.jax.op``'s XLA handler
does).

How the lanes run depends on the sizes, so the kernel keeps a *plan* per input
sizes.  A call it has no plan for -- and a non-contiguous or lazily conjugated
tensor, or a lane that raised -- runs the operator's Python twin, which runs the
program as before and plans those sizes for the next call (or raises
lanewise's error naming the lane).

Without a compiler or ninja (or with ``lw.config.torch_native = False``)
operators keep the Python kernel.

Example:
    >>> import numpy as np, lanewise as lw
    >>> from lanewise.bridge.signature import Op
    >>> op = Op.of(lw.vmap(lambda x: x + 1), (np.ones(2),))
    >>> "def handler(plan_address, words)" in render(op.infer(((2,), "float64")), [np.dtype("f8")], [1])
    True
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numba
import numpy as np
import torch

from ..bridge import kernel
from ..config import config
from ..runtime import cache

SOURCE = Path(__file__).with_name("native.cpp")
#: Plans kept per operator (one per input sizes): a program called with ever new
#: sizes keeps working, through the Python kernel, once this many are made.
PLAN_LIMIT = 256
#: What :func:`plan` returns: planned; not planned (tensors it would not read);
#: not planned because the kernel has :data:`PLAN_LIMIT` plans.
PLANNED, SKIPPED, FULL = 0, 1, 2
_LOCK = threading.Lock()
_BUILD_LOCK = threading.Lock()


@functools.cache
def library() -> ctypes.CDLL | None:
    """The compiled ``native.cpp``, loaded; None where it cannot be built (a warning says
    why, once) or where ``config.torch_native`` is off."""
    if not config.torch_native:
        return None
    try:
        with _BUILD_LOCK:  # threads of one process load one copy (its registry of operators)
            lib = _loaded()
    except (OSError, RuntimeError, subprocess.SubprocessError) as e:  # cpp_extension raises RuntimeError
        warnings.warn(f"lanewise: lw.torch.op operators use a Python kernel (slower per call): the C++ kernel "
                      f"did not build ({_reason(e)}); set LANEWISE_TORCH_NATIVE=0 to skip it",
                      RuntimeWarning, stacklevel=3)
        return None
    i64p, text = ctypes.POINTER(ctypes.c_int64), ctypes.c_char_p
    lib.lw_define.argtypes = [text, text, text, text, i64p, text, i64p, ctypes.c_char_p, ctypes.c_size_t]
    lib.lw_plan.argtypes = [text, i64p, ctypes.c_int64, ctypes.c_int64, i64p, ctypes.c_int64, i64p,
                            ctypes.c_int64]
    lib.lw_plans.argtypes, lib.lw_plans.restype = [text], ctypes.c_int64
    return lib


def _reason(e: Exception) -> str:
    """The error's first line (cpp_extension's, before the build log it appends), and the
    log's first line that says what failed (the compiler's error, a missing program)."""
    output = getattr(e, "stderr", None) or getattr(e, "output", None)
    text = output.decode(errors="replace") if isinstance(output, bytes) else str(e)
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    if not lines:
        return type(e).__name__
    head = lines[0].split(": [", 1)[0]  # "Error building extension '...': [1/2] c++ ..."
    detail = next((line for line in lines[1:] if "error" in line.lower() or "not found" in line.lower()), None)
    return f"{head}; {detail}" if detail else head


#: The flags beyond cpp_extension's own (which add PyTorch's headers and libraries,
#: its C++ ABI, -fPIC and the C++ standard PyTorch's headers need).
_CFLAGS = ["-O2"]


def _loaded() -> ctypes.CDLL:
    """The shared library, loaded: from lanewise's cache folder, else built into it by
    ``torch.utils.cpp_extension`` (or, with the disk cache off or the folder not private,
    built in a temporary folder that is deleted once it is loaded)."""
    tag = _tag()
    folder = cache.entry_dir()
    if not (config.disk_cache and cache.private_folder(folder)):
        build = Path(tempfile.mkdtemp(prefix="lanewise-torch-"))
        try:
            return ctypes.CDLL(_build(build))  # loaded: the file is not needed any more
        finally:
            shutil.rmtree(build, ignore_errors=True)
    path = folder / f"torch_native_{tag}.so"
    if not path.exists():
        # Each process builds in its own folder and publishes the library with an atomic
        # rename: a concurrent process sees the whole file or none, and a build killed
        # half-way leaves no lock behind (cpp_extension's own lock would wait on it forever).
        build = Path(tempfile.mkdtemp(prefix=f".torch_native_{tag}.", dir=folder))
        try:
            built = _build(build)
            lib = ctypes.CDLL(built)  # cpp_extension loaded it from here: the same handle
            os.replace(built, path)
            return lib
        finally:
            shutil.rmtree(build, ignore_errors=True)
    return ctypes.CDLL(str(path))


def _tag() -> str:
    """What the built library depends on: its source, flags and compiler, PyTorch and Python."""
    text = SOURCE.read_bytes()
    return hashlib.sha256(text + repr((_CFLAGS, os.environ.get("CXX", "c++"), torch.__version__,
                                       sys.version)).encode()).hexdigest()[:16]


def _build(folder: Path) -> str:
    """Build ``native.cpp`` in ``folder`` with ``torch.utils.cpp_extension``; the library's path."""
    from torch.utils import cpp_extension  # imports setuptools: only when a build is needed

    _find_ninja()
    # Its notes on the compiler (warnings, and a logged banner): the build's outcome says
    # what matters, in library()'s one warning.
    log = logging.getLogger(cpp_extension.__name__)
    level = log.level
    log.setLevel(logging.CRITICAL)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return cpp_extension.load(name="lanewise_torch_native", sources=[str(SOURCE)],
                                      extra_cflags=_CFLAGS,
                                      build_directory=str(folder), verbose=False, is_python_module=False)
    finally:
        log.setLevel(level)


def _find_ninja() -> None:
    """Put the ``ninja`` wheel's program on PATH (last) when PATH has none: cpp_extension
    runs ``ninja``, and a virtual environment that is not activated has it off PATH."""
    if shutil.which("ninja") is None:
        try:
            import ninja
        except ImportError:
            return  # cpp_extension says ninja is missing
        os.environ["PATH"] = os.pathsep.join([os.environ.get("PATH", ""), str(ninja.BIN_DIR)])


def define(qualname: str, twin: str, in_types, in_ranks, out_types, out_ranks) -> None:
    """Make the C++ kernels the CPU and autograd kernels of ``qualname`` (defined, with
    neither), whose Python kernels are ``twin``'s.  The library must be built."""
    lib = library()
    ns, name = qualname.split("::")
    message = ctypes.create_string_buffer(1024)
    failed = lib.lw_define(ns.encode(), name.encode(), twin.split("::")[1].encode(), _names(in_types),
                           _int64s(in_ranks), _names(out_types), _int64s(out_ranks), message, len(message))
    if failed:
        raise RuntimeError(f"lanewise: cannot register the C++ kernel of {qualname}: {message.value.decode()}")


def plan(qualname: str, op, types, tensors) -> int:
    """Plan ``tensors``' sizes for ``qualname``'s C++ kernel, which runs ``op`` (not a
    reduction) on leaves of ``types`` ((shape, dtype) each).  Tensors it would not read
    are not planned.  :data:`PLANNED`, :data:`SKIPPED` or :data:`FULL`."""
    if not all(t.is_contiguous() and not t.is_conj() and not t.is_neg() for t in tensors):
        return SKIPPED
    lib = library()
    if lib is None or lib.lw_plans(qualname.encode()) >= PLAN_LIMIT:
        return FULL  # before typing: new sizes would each keep a typed program
    inferred = op.infer(*types)
    exe = inferred.exe
    built = _handler(op, inferred, [np.dtype(d) for _, d in types], [len(s) for s, _ in types])
    extra = tuple(d for k in exe.array_outputs for d in inferred.lane_shapes[k])
    words = kernel.plan_of(exe, inferred.call, built.n_sizes, extra)
    sizes = [n for s, _ in types for n in s]
    shapes = [n for o in inferred.out for n in o.shape]
    return lib.lw_plan(qualname.encode(), _int64s(sizes), len(sizes), built.handler.address, _int64s(words),
                       len(words), _int64s(shapes), PLAN_LIMIT)


def plans(qualname: str) -> int:
    """How many input sizes ``qualname``'s C++ kernel has plans for (-1: it has none)."""
    lib = library()
    return -1 if lib is None else lib.lw_plans(qualname.encode())


def _names(dtypes) -> bytes:
    return ",".join(np.dtype(d).name for d in dtypes).encode()


def _int64s(values) -> ctypes.Array:
    return (ctypes.c_int64 * max(len(values), 1))(*[int(v) for v in values])


@dataclass(frozen=True)
class _Handler:
    """A loaded handler (kept alive: the C++ kernel holds only its address)."""

    handler: Any  # the cfunc
    n_sizes: int  # the plan's words after its head: sizes and per-lane output shapes


def _handler(op, inferred, in_dtypes, in_ranks) -> _Handler:
    """The handler of ``inferred``'s executable, from the disk cache or compiled."""
    exe = inferred.exe
    key = ("torch handler", exe.module.__name__, tuple(in_dtypes), tuple(in_ranks))
    with _LOCK:
        found = op.derived.get(key)
        if found is None:
            source = render(inferred, in_dtypes, in_ranks)
            built = kernel.load("torch handler", kernel.disk_key("torch handler", exe, source), exe, source)
            found = op.derived[key] = _Handler(built.module.handler, kernel.sizes_args(exe)[1])
    return found


def render(inferred, in_dtypes, in_ranks) -> str:
    """The handler module's source, for inputs of these dtypes and ranks (0: a scalar)."""
    outs = inferred.out
    lines, at = [], len(in_dtypes) + len(outs)  # words: data pointers, then every sizes
    arrays = [(f"a{k}", d, r) for k, (d, r) in enumerate(zip(in_dtypes, in_ranks, strict=True))]
    arrays += [(f"x{k}", o.dtype, len(o.shape)) for k, o in enumerate(outs)]
    for k, (name, dtype, rank) in enumerate(arrays):
        data = f"pointer(word(words, {k}), numba.{numba.from_dtype(np.dtype(dtype))})"
        if rank == 0 and name.startswith("a"):
            lines.append(f"    {name} = {data}[0]")
        else:
            shape = "(" + "".join(f"word(words, {at + j}), " for j in range(rank)) + ")"
            lines.append(f"    {name} = carray({data}, {shape})")
        at += rank
    sizes, _ = kernel.sizes_args(inferred.exe)
    values = ", ".join(name for name, _, _ in arrays)
    return _TEMPLATE.format(lane=kernel.lane_name(inferred.exe), imports=kernel.IMPORTS,
                            failed_lane=kernel.FAILED_LANE, reads="\n".join(lines),
                            run=kernel.RUN.format(ok=-1, values=values, sizes=sizes))


_TEMPLATE = '''\
# Generated by lanewise: the handler lw.torch.op's C++ kernel calls for {lane}.
# Deleting it is safe.  The program's compiled kernels are injected by lanewise.
{imports}
{failed_lane}

@numba.cfunc(numba.int64(numba.int64, numba.int64), nopython=True, cache=True)
def handler(plan_address, words):
    """-1, or the first lane that raised (the C++ kernel then runs the Python one)."""
    plan = pointer(plan_address, numba.int64)
{reads}
{run}    return lane
'''
