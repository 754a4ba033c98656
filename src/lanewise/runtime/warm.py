"""Loading a kernel's object code from the disk cache without Numba's registry refresh.

Before Numba loads a function from its disk cache it refreshes the whole target
context (``Cache.load_overload`` calls ``target_context.refresh()``): it imports
and installs about 250 typing and lowering registries (every NumPy, CPython,
typed-container and extension implementation) that only a *compile* reads.
That was 0.3-0.46 s of every warm start here (a new process whose kernels are
all on disk), most of the start once Numba itself is imported.

Loading object code needs much less, and lanewise gives its kernels only that:

* the NRT (Numba's runtime for arrays), which kernels call: ``rtsys.initialize``,
  the one part of the refresh that installs symbols every kernel uses;
* the hash secrets that ``numba.cpython.hashing`` installs as symbols when it is
  imported (compiled code that hashes reads them): imported here, 20 ms;
* everything else the object code refers to is installed when the target
  context is made (Numba's C helpers, math functions, exceptions) or by the
  cached library's own ``reload_init`` (the parallel runtime), which Numba runs
  as it rebuilds the library.

The same dispatchers also skip Numba's "compilation chain init hook", which
runs every installed package's ``numba_extensions`` entry point before a call
is first typed: a scan of all installed distributions' metadata (25-50 ms here,
more in a large environment), for extension types that a kernel's arguments
(arrays, scalars, tuples, records lanewise makes) never are.  A compile loads
the entry points anyway, in its refresh.

A compile still refreshes everything first (Numba's compiler pipeline does it
itself), so a kernel that misses the cache compiles as before.  The light load
is installed only on the dispatchers of lanewise's generated kernel modules;
``LANEWISE_NUMBA_REFRESH=1`` turns it off (then Numba refreshes as usual), and
so does a Numba whose cache class is not laid out as expected.

Example:
    >>> import numba
    >>> f = numba.njit(lambda x: x + 1)      # no disk cache: nothing to change
    >>> lighten_cache_load(f, "__main__")
    False
"""

from __future__ import annotations

import os

from numba.core.registry import CPUDispatcher

_SWITCH = "LANEWISE_NUMBA_REFRESH"


def _supported(cache) -> bool:
    """Whether ``cache`` (a dispatcher's ``_cache``) has the internals the light load uses."""
    return callable(getattr(cache, "_load_overload", None)) and callable(
        getattr(cache, "_guard_against_spurious_io_errors", None))


def _light_load_overload(cache):
    def load_overload(sig, target_context):
        from numba.core.runtime import rtsys
        import numba.cpython.hashing  # noqa: F401 - installs the hash-secret symbols

        rtsys.initialize(target_context)
        with cache._guard_against_spurious_io_errors():
            return cache._load_overload(sig, target_context)
        return None  # the guard swallowed an I/O error: compile instead, as Numba does

    return load_overload


def _no_entry_points() -> None:
    """A kernel dispatcher's init hook: nothing (the module docstring says why)."""


def lighten_cache_load(dispatcher, module_name: str) -> bool:
    """Give ``dispatcher`` the light load if it is a disk-cached CPU dispatcher
    defined in ``module_name``; whether it was changed.  (A CUDA kernel's context
    is another: its loads are left to Numba.)"""
    if os.environ.get(_SWITCH, "").strip() not in ("", "0"):
        return False
    cache = getattr(dispatcher, "_cache", None)
    if not (isinstance(dispatcher, CPUDispatcher) and getattr(dispatcher.py_func, "__module__", None) == module_name
            and _supported(cache) and "load_overload" not in vars(cache)):
        return False
    cache.load_overload = _light_load_overload(cache)
    dispatcher._compilation_chain_init_hook = _no_entry_points
    return True
