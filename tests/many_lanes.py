"""Lanes of more than 30 parameters (issue 42), for tests/test_many_arguments.py and tests/cuda.

CPython compiles a call of more than 30 arguments to ``CALL_FUNCTION_EX`` (a
``*args`` tuple), which Numba's inliner rejects, so such lanes need generated
code that calls them otherwise (``lanewise.codegen.common.call``).  Writing 36
parameters by hand is error-prone: :func:`load` writes the lanes' source to a
file and imports it, so the lanes have source text (the SPMD transformation and
the analyses read it) exactly as a user's module would.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import numpy as np

#: Parameters of the wide lanes: past CPython's 30-argument call limit.
N = 36
NAMES = [f"a{i}" for i in range(N)]
PARAMS = ", ".join(NAMES)
#: The lanes' value: a weighted sum, so that an argument in the wrong slot shows.
WEIGHTED = " + ".join(f"{i + 1}.0 * a{i}" for i in range(N))

SOURCE = f'''
import math

import numpy as np

import lanewise as lw


def wsum({PARAMS}):
    return {WEIGHTED}


def divergent({PARAMS}):
    s = {WEIGHTED}
    k = 0
    while s > 1.0 and k < 50:
        s = s * 0.5
        k += 1
    return s + k


def helper({PARAMS}):
    return {WEIGHTED}


def calls_helper({PARAMS}):
    return helper({PARAMS}) * 2.0


def posonly({PARAMS}, /):
    return {WEIGHTED}


def posonly_tail({", ".join(NAMES[:32])}, /, {", ".join(NAMES[32:])}):
    return {WEIGHTED}


def posonly_few({", ".join(NAMES[:20])}, /, {", ".join(NAMES[20:])}):
    return {WEIGHTED}


def with_scan({PARAMS}):
    def step(c, x):
        return c + x, c
    c, _ = lw.scan(step, 0.0, np.arange(3.0))
    return c + {WEIGHTED}


def two_results({PARAMS}):
    return {WEIGHTED}, a0 - a{N - 1}


def smooth({PARAMS}):
    return math.sin({WEIGHTED})


def raises({PARAMS}):
    if a0 > 0.5:
        raise ValueError("a0 above one half")
    return {WEIGHTED}


def many_results(x):
    return ({", ".join(f"x * {i}.0" for i in range(N))})
'''


def load(directory: Path) -> ModuleType:
    """The lanes above, written to ``directory/many_lanes_src.py`` and imported."""
    path = Path(directory) / "many_lanes_src.py"
    path.write_text(SOURCE)
    spec = importlib.util.spec_from_file_location("many_lanes_src", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def arguments(n: int = 7) -> list[np.ndarray]:
    """One array of ``n`` lanes per parameter, all different."""
    return [np.linspace(0.0, 1.0, n) + 0.01 * i for i in range(N)]


def weighted(args) -> np.ndarray:
    """The weighted sum of the arguments, in NumPy (the reference of ``wsum``)."""
    return sum((i + 1.0) * np.asarray(a) for i, a in enumerate(args))


def per_lane(fn, args, in_axes=None):
    """``fn`` called in plain Python on each lane's scalars (a reference independent
    of lanewise): arrays where ``in_axes`` is 0 (default: all), as given elsewhere."""
    mapped = in_axes or (0,) * len(args)
    size = next(len(a) for a, ax in zip(args, mapped, strict=True) if ax == 0)
    lanes = [fn(*[a[j] if ax == 0 else a for a, ax in zip(args, mapped, strict=True)]) for j in range(size)]
    if isinstance(lanes[0], tuple):
        return tuple(np.array(column) for column in zip(*lanes, strict=True))
    return np.array(lanes)
