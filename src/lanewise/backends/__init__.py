"""Layer 6, backends: each turns a call of a lane program into results.

The registry below is the only place that knows backend names.  Each entry says
where the backend lives, which pip extra it needs, whether it claims a call from
its arguments (device arrays, dask arrays) and what it supports; the backend
itself is a package (or module) implementing :class:`lanewise.backends.protocol.Backend`.
``python`` is the reference (the executable spec); ``cpu`` compiles with Numba;
``cuda``, ``dask`` and ``tpu`` (Pallas kernels; JAX) need their extras and are
imported only when used.  ``"auto"`` is no backend but a choice made per call
signature (:mod:`.auto`): the tpu backend where a TPU is in use and the call
qualifies, else the cpu backend.

Adding a backend is one :class:`Entry` here plus a package implementing the
protocol (docs/architecture.md has the recipe); the conformance suite
(tests/test_conformance.py) then runs on it.

Example:
    >>> get("python").NAME
    'python'
    >>> select((1.0,), {}, None).NAME == config.backend
    True
"""

from __future__ import annotations

import importlib
import sys
from dataclasses import dataclass
from typing import Callable

from .. import pytree
from ..config import config
from ..errors import BackendError
from . import auto
from .auto import AUTO


def holds_device_array(leaves) -> bool:
    """A CUDA array among ``leaves``: ``__cuda_array_interface__``, or a (simulated)
    numba device array.  Never imports numba.cuda."""
    return any(hasattr(v, "__cuda_array_interface__") or type(v).__module__.startswith("numba.cuda")
               for v in leaves)


def holds_dask_array(leaves) -> bool:
    """A dask array among ``leaves`` (dask arrays in, lazy dask arrays out).  Never imports dask."""
    if "dask.array" not in sys.modules:
        return False
    from dask.array import Array
    return any(isinstance(v, Array) for v in leaves)


@dataclass(frozen=True)
class Entry:
    """One backend: its name, where it lives and what it can do."""

    name: str
    module: str  # the package or module under lanewise.backends
    extra: str | None = None  # the pip extra that provides its dependencies
    claims: Callable | None = None  # chosen for a call whose argument leaves satisfy it
    fast_path: bool = False  # repeated calls may skip binding (a generated host launcher)
    progress: bool = False  # progress=True: runs the outermost level in pieces
    writes_out: bool = True  # out= fills the caller's arrays (dask results are lazy: no out=)
    compiles: bool = True  # lanes are compiled (the reference calls the Python function itself)
    wide: bool = True  # computes float64/int64 (the tpu backend computes 32-bit numbers only)


#: Backend name -> entry; argument claims are tried in this order.
REGISTRY: dict[str, Entry] = {e.name: e for e in [
    Entry("cpu", "cpu", fast_path=True, progress=True),
    Entry("python", "python", compiles=False),
    Entry("cuda", "cuda", "cuda", claims=holds_device_array),
    Entry("dask", "dask", "dask", claims=holds_dask_array, writes_out=False),
    Entry("tpu", "tpu", "jax", fast_path=True, writes_out=False, wide=False),
]}
NAMES = tuple(REGISTRY)
#: The backend ``lw.explain`` describes: the compiled nest most calls run (``lw.config.backend``'s default).
EXPLAINED = "cpu"
#: Backends whose repeated calls may take the fast path (checked on every call: a set), and the
#: states of ``"auto"`` (:func:`in_effect`), which chooses between two of them.
FAST = frozenset(e.name for e in REGISTRY.values() if e.fast_path) | {auto.ON_TPU, auto.OFF_TPU}


def get(name: str):
    """The backend called ``name`` (imported lazily); :class:`lanewise.BackendError`
    for an unknown name or a missing extra."""
    if name == AUTO:
        raise BackendError("backend='auto' is chosen per call signature (backends.bind), not a backend")
    if name not in REGISTRY:
        raise BackendError(f"unknown backend {name!r}; choose one of {', '.join(map(repr, NAMES))} or 'auto'")
    entry = REGISTRY[name]
    path = f"{__name__}.{entry.module}"
    try:
        return importlib.import_module(path)
    except ImportError as e:
        if e.name == path:
            raise BackendError(f"the {name!r} backend is not part of this lanewise build") from e
        if entry.extra is None or (e.name or "").startswith("lanewise"):
            raise
        raise BackendError(f"the {name!r} backend needs {e.name}: pip install 'lanewise[{entry.extra}]'") from e


def claimed(args: tuple, kwargs: dict) -> str | None:
    """The backend that the arguments themselves ask for (CUDA or dask arrays), or None."""
    leaves = None
    for entry in REGISTRY.values():
        if entry.claims is not None:
            if leaves is None:
                leaves = pytree.flatten((args, kwargs))[0]
            if entry.claims(leaves):
                return entry.name
    return None


def select(args: tuple, kwargs: dict, requested: str | None):
    """The backend a call runs on: the one requested, else the one its arguments
    claim, else ``lw.config.backend`` (:func:`bind` resolves ``"auto"``, which needs the call)."""
    return get(_named(args, kwargs, requested))


def _named(args: tuple, kwargs: dict, requested: str | None) -> str:
    """The backend name a call asks for: the one requested (``"auto"`` defers to the
    arguments' claim, as an automatic choice should), else the arguments', else the config's."""
    if requested is not None and requested != AUTO:
        return requested
    return claimed(args, kwargs) or requested or config.backend


def bind(owner, mapped, args: tuple, kwargs: dict, requested: str | None, out=None):
    """``(backend, call)``: the backend ``owner(*args, **kwargs)`` runs on (:func:`select`,
    or for ``"auto"`` the choice of :func:`.auto.choose`) and the call bound for it.
    ``owner``: the ``lw.vmap`` function ``mapped`` or an ``lw.reduce`` of it.

    Example:
        >>> import numpy as np, lanewise as lw
        >>> f = lw.vmap(lambda x: x + 1, backend="auto")
        >>> backend, call = bind(f, f, (np.arange(3.0),), {}, f.backend)
        >>> backend.NAME, call.sizes  # no TPU in use: the cpu backend
        ('cpu', (3,))
    """
    name = _named(args, kwargs, requested)
    if name == AUTO:
        return auto.choose(owner, mapped, args, kwargs, get, out)[:2]
    backend = get(name)
    return backend, backend.bind_call(mapped, args, kwargs)


def auto_choice(owner, mapped, args: tuple, kwargs: dict):
    """The :class:`.auto.Choice` of ``owner(*args, **kwargs)`` (``lw.explain``'s ``backend:``
    line), or None where ``mapped`` asks for another backend or the arguments claim one."""
    if _named(args, kwargs, mapped.backend) != AUTO:
        return None
    return auto.choose(owner, mapped, args, kwargs, get)[2]


def check(name: str | None) -> None:
    """A function's ``backend=``: a :class:`lanewise.BackendError` now for a typo or a
    missing extra, rather than at its first call."""
    if name is not None and name != AUTO:
        get(name)


def in_effect(requested: str | None) -> str:
    """The backend a function asking for ``requested`` runs on, as far as known before
    binding: the fast path keeps launchers under it and drops them when it changes
    (``lw.config.backend``, or for ``"auto"`` whether JAX's default device is a TPU)."""
    name = requested or config.backend
    return auto.state() if name == AUTO else name


def supporting(feature: str) -> tuple[str, ...]:
    """Names of the backends whose entry has ``feature`` (``"progress"``, ``"fast_path"``)."""
    return tuple(e.name for e in REGISTRY.values() if getattr(e, feature))


def available(name: str) -> bool:
    """Whether backend ``name`` can run here (its extras import and, for cuda, a GPU
    or the simulator is there)."""
    try:
        backend = get(name)
    except BackendError:
        return False
    return bool(getattr(backend, "usable", lambda: True)())
