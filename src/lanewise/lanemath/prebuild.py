"""Rebuild the prebuilt kernels (:mod:`lanewise.runtime.prebuilt`): ``python -m lanewise.lanemath.prebuild``.

Each variant is built in a fresh process, for Numba's ``generic`` CPU with that
variant's features (the CPU Numba compiles for is fixed when it is imported), with
lanewise's disk cache and the shipped kernels off, so every kernel compiles from
its source here.
"""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
import zlib

from numba.core.serialize import dumps

from ..random import PREBUILT
from ..runtime.prebuilt import SWITCH, VARIANTS, key, path, stamp, variant


def _payload(cres) -> bytes:
    """What Numba's disk cache stores for ``cres``, with the library as bitcode."""
    cres.fndesc.typemap = cres.fndesc.calltypes = None  # as Numba's cache: not needed, may not pickle
    return dumps((cres.library.serialize_using_bitcode(), cres.fndesc, cres.environment, cres.signature,
                  cres.objectmode, cres.lifted, "None", cres.reload_init,
                  tuple(cres._find_referenced_environments())))


def build(which: str) -> None:
    """Compile every public kernel (and lw.random's scalar functions) and write variant ``which`` (run in a process set
    up by :func:`main`: Numba's generic CPU, this variant's features)."""
    from numba import types

    from ._public import KERNELS

    if variant() != which:
        raise RuntimeError(f"built for {which!r}, but this process compiles {variant()!r}")
    entries = {}
    for name in sorted(KERNELS):
        for kernel, ty in zip(KERNELS[name], (types.float64, types.float32), strict=True):
            dispatcher = kernel.dispatcher
            sig = (ty,) * dispatcher.py_func.__code__.co_argcount
            dispatcher.compile(sig)
            entries[key(dispatcher.py_func, sig)] = _payload(dispatcher.overloads[sig])
    for dispatcher, sigs in PREBUILT.items():
        for sig in sigs:
            dispatcher.compile(sig)
            entries[key(dispatcher.py_func, sig)] = _payload(dispatcher.overloads[sig])
    path(which).parent.mkdir(exist_ok=True)
    path(which).write_bytes(zlib.compress(pickle.dumps((stamp(which), entries), protocol=4), 9))


def main() -> None:
    """Rebuild both variants, each in a fresh process."""
    for which, features in VARIANTS.items():
        env = dict(os.environ, NUMBA_CPU_NAME="generic", NUMBA_CPU_FEATURES=features, LANEWISE_DISK_CACHE="0",
                   **{SWITCH: "0"})
        subprocess.run([sys.executable, "-c", f"from lanewise.lanemath import prebuild; prebuild.build({which!r})"],
                       env=env, check=True)
        print(f"{path(which)}: {path(which).stat().st_size // 1024} KiB")


if __name__ == "__main__":
    main()
