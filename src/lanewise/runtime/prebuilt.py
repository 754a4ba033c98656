"""Prebuilt vector math: lanemath's kernels (and lw.random's) shipped as LLVM bitcode.

Every lane that calls ``math.cos`` compiles lanemath's ``cos`` once per process
and cache folder: about 0.13 s of Numba's Python-side typing and lowering per
function, while a hand-written Numba kernel calls libm for free.  On a fresh
cache that was a fifth of a trigonometric lane's cold first call (equivalent
sources: cos and sin, 0.26 s of 1.4 s).

So the package ships each public kernel (float64 and float32, ``lanemath._public.KERNELS``)
already typed, lowered and optimised, as the payload Numba's own disk cache stores,
with the library as *bitcode* (Numba's portable form; its cache keeps host
object code).  When a lanemath kernel's disk cache misses, :func:`install`'s
hook looks here before Numba compiles: the bitcode is parsed and JIT-compiled
for this host (milliseconds), and any kernel that inlines the function
optimises the inlined body for this host again, as before.

Two variants are built, as lanemath's source depends on the target having FMA
(``lanemath._core.HAS_FMA``): ``fma`` and ``generic`` — each for Numba's ``generic``
CPU, so no instruction of a newer CPU can reach an older one through it.

A file is used only if all of these match this process (else every kernel
compiles from source, as without it): the hash of lanemath's source, Numba's,
llvmlite's and Python's versions, the variant, the platform (LLVM's target
triple: the files are built on x86-64 Linux), and Numba's default code
generation settings (:func:`_default_codegen`).  A stale file therefore costs
speed, never a result; ``tests/test_prebuilt.py`` fails until it is rebuilt:

    python -m lanewise.lanemath.prebuild      # rebuild both variants (lanewise/lanemath/prebuild.py)

lw.random's scalar functions (the Philox block, the draws from a key's two words)
are shipped the same way, for the signatures its public draws call them with
(``lanewise.random.PREBUILT``).

``lw.config.prebuilt_math = False`` (``LANEWISE_PREBUILT_MATH=0``) turns the shipped kernels off
(everything compiles).

Example:
    >>> from lanewise.runtime import prebuilt
    >>> prebuilt.variant() in ("fma", "generic")
    True
"""

from __future__ import annotations

import functools
import hashlib
import pickle
import sys
import zlib
from pathlib import Path

import llvmlite
import llvmlite.binding as llvm
import numba
from numba.core import caching, compiler
from numba.core import config as numba_config
from numba.core.typing.templates import Signature

from ..config import config
from .hooks import hook_method

FOLDER = Path(__file__).with_name("prebuilt")
_PACKAGE = Path(__file__).resolve().parent.parent
#: The modules whose functions are shipped (lw.random's generator: its scalar
#: arithmetic, ``lanewise.random.PREBUILT``).
SHIPPED = ("lanewise.lanemath", "lanewise.random")
#: ``lw.config.prebuilt_math``'s variable (the builder turns the shipped functions off).
SWITCH = "LANEWISE_PREBUILT_MATH"
#: The variants built, with the CPU features Numba's ``generic`` CPU gets for each.
VARIANTS = {"fma": "+fma", "generic": ""}


def target_has_fma() -> bool:
    """Whether Numba compiles for a CPU with fused multiply-add.

    Numba compiles for the host unless ``NUMBA_CPU_NAME``/``NUMBA_CPU_FEATURES`` say
    otherwise (e.g. ``generic`` for portable caches); without FMA hardware
    ``llvm.fma`` becomes a slow libm call, so lanemath's exact products fall back to
    Dekker's splitting (``lanemath._core.HAS_FMA``).
    """
    name = (numba_config.CPU_NAME or "host").lower()
    if name == "host":
        features = llvm.get_host_cpu_features().flatten()
    else:
        features = numba_config.CPU_FEATURES or ""
    return "+fma" in features.split(",")


def variant() -> str:
    """The variant this process's lanemath source compiles to."""
    return "fma" if target_has_fma() else "generic"


@functools.cache
def source_hash() -> str:
    """The hash of the shipped functions' source (lanemath's, lw.random's generator's,
    the slow paths' symbols; the builder excepted): a shipped kernel is used only with
    the source it was built from."""
    digest = hashlib.sha256()
    lanemath = sorted(p for p in (_PACKAGE / "lanemath").glob("*.py") if p.name != "prebuild.py")
    for path in [*lanemath, _PACKAGE / "random" / "_core.py", _PACKAGE / "runtime" / "slow_symbols.py"]:
        digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def stamp(which: str) -> dict:
    """What a file of variant ``which`` must have been built with to be used here."""
    return {"source": source_hash(), "numba": numba.__version__, "llvmlite": llvmlite.__version__,
            "python": f"{sys.version_info[0]}.{sys.version_info[1]}", "variant": which,
            "triple": llvm.get_process_triple()}  # bitcode for another platform must not reach LLVM


def _default_codegen() -> bool:
    """Whether Numba generates code as the prebuilt kernels were built (a user who
    asks for bounds checks, debug info or another optimisation level gets kernels
    compiled with them)."""
    return (numba_config.OPT == 3 and not numba_config.BOUNDSCHECK and not numba_config.DEBUGINFO_DEFAULT
            and not numba_config.DISABLE_JIT)


def path(which: str) -> Path:
    return FOLDER / f"{which}.bin"


@functools.cache
def _entries() -> dict:
    """This process's variant's kernels (key -> pickled payload), or {} when the file
    is missing or stale."""
    if not _default_codegen():
        return {}
    try:
        header, entries = pickle.loads(zlib.decompress(path(variant()).read_bytes()))
    except (OSError, ValueError, zlib.error, pickle.UnpicklingError, EOFError):
        return {}
    return entries if header == stamp(variant()) else {}


def key(py_func, sig) -> str:
    """A kernel's entry: its function (where it is defined, and a hash of its code,
    constants and names: two lambdas differ) and signature."""
    code = py_func.__code__
    digest = hashlib.sha256(code.co_code + repr((code.co_consts, code.co_names)).encode()).hexdigest()[:16]
    return f"{py_func.__module__}.{py_func.__qualname__}:{code.co_firstlineno}:{digest}:{tuple(sig)}"


def load(py_func, sig, target_context):
    """The shipped compile result of ``py_func`` for ``sig``, or None."""
    if not config.prebuilt_math:
        return None
    found = key(py_func, sig)
    blob = _entries().get(found)
    if blob is None:
        return None
    result = compiler.CompileResult._rebuild(target_context, *pickle.loads(blob))
    LOADED.append(found)
    return result


#: The kernels this process took from the shipped file (their :func:`key`).
LOADED: list[str] = []


def _offer(cache, py_func) -> None:
    """Hook on Numba's function cache: a shipped function's cache (:data:`SHIPPED`)
    that misses asks :func:`load` before Numba compiles."""
    if not getattr(py_func, "__module__", "").startswith(SHIPPED) or "load_overload" in vars(cache):
        return
    disk = cache.load_overload

    def load_overload(sig, target_context):
        found = disk(sig, target_context)
        if found is not None or isinstance(sig, Signature):  # a cfunc (the trig slow paths): not shipped
            return found
        try:
            return load(py_func, sig, target_context)
        except Exception:  # noqa: BLE001 - a shipped kernel that fails to load is compiled instead
            return None

    cache.load_overload = load_overload


def install() -> None:
    """Make the disk caches of the shipped functions fall back on the shipped file (idempotent)."""
    hook_method(caching.FunctionCache, "__init__", _offer, after=True)
