"""The prebuilt kernels (lanewise/runtime/prebuilt.py: lanemath's, lw.random's generator):
current, used on a fresh cache, and bit-for-bit what compiling their source gives."""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
import textwrap
import zlib

import numpy as np
import pytest

from lanewise.runtime import prebuilt


def _header(which):
    return pickle.loads(zlib.decompress(prebuilt.path(which).read_bytes()))


@pytest.mark.parametrize("which", sorted(prebuilt.VARIANTS))
def test_shipped_kernels_were_built_from_this_source(which):
    # A stale file is never used (it costs speed, not results); this makes it fail loudly:
    # rebuild with `python -m lanewise.lanemath.prebuild`.
    header, entries = _header(which)
    assert header["source"] == prebuilt.source_hash(), "run: python -m lanewise.lanemath.prebuild"
    assert header["variant"] == which
    if header["python"] != prebuilt.stamp(which)["python"]:
        # Keys hash the bytecode, which each Python compiles differently: a file built
        # on another Python is never used here (every kernel compiles from source).
        assert which != prebuilt.variant() or prebuilt._entries() == {}
        pytest.skip(f"the shipped kernels are built on Python {header['python']}: this Python compiles them "
                    "from source")
    from lanewise.lanemath._public import KERNELS

    # float64 and float32 of every public kernel (pow and power share theirs), one entry each
    from numba import types

    kernels = {(id(k.dispatcher), ty): (k.dispatcher.py_func, ty) for pair in KERNELS.values()
               for k, ty in zip(pair, (types.float64, types.float32), strict=True)}
    from lanewise.random import PREBUILT

    generator = {prebuilt.key(d.py_func, sig) for d, sigs in PREBUILT.items() for sig in sigs}
    assert len(entries) == len(kernels) + len(generator)
    if which == prebuilt.variant():  # lanemath's source flattens to this variant here: same keys
        math = {prebuilt.key(f, (ty,) * f.__code__.co_argcount) for f, ty in kernels.values()}
        assert math | generator == set(entries)


# Every public function on special values, both sides of branch points and slow paths
# (trig beyond 2**30), in a fresh process with an empty cache: the shipped kernels
# (and that they were used), then with them off (every kernel compiled from source).
_SCRIPT = textwrap.dedent("""
    import json, sys
    import numpy as np
    from lanewise import lanemath
    from lanewise.runtime import prebuilt
    from lanewise.lanemath._public import KERNELS
    xs = [0.0, -0.0, 1e-310, -1e-300, 0.1, 0.5, -0.7, 1.0, -1.0, 1.5, 2.0, 3.14159, -10.0, 88.7, -745.2,
          700.0, 1e10, -3e9, 2.0 ** 31 + 0.5, 1e300, float("inf"), -float("inf"), float("nan")]
    ys = [0.5, -2.0, 3.0, 0.0, -0.0, float("inf"), float("nan")]
    out = {}
    for name in sorted(KERNELS):
        fn = lanemath.FUNCTIONS[name]
        binary = KERNELS[name][0].dispatcher.py_func.__code__.co_argcount == 2
        for t in (np.float64, np.float32):
            args = [(t(x), t(y)) for x in xs for y in ys] if binary else [(t(x),) for x in xs]
            with np.errstate(all="ignore"):
                values = [np.ravel(np.asarray(fn(*a), dtype=np.float64)).tolist() for a in args]
            out[f"{name}:{t.__name__}"] = [v for vs in values for v in vs]
    # as a lane uses them: the vmap of a trigonometric lane on a fresh cache
    import math
    import lanewise as lw
    grid = np.linspace(-40.0, 40.0, 1001)
    lane = lw.vmap(lambda x, y: math.cos(x) * y + math.sin(x * y))(grid, grid[::-1].copy())
    out["vmap"] = lane.tolist()
    # and lw.random's draws, whose scalar functions are shipped too
    key = lw.random.key(7)
    def draws(i, key):
        k = lw.random.fold_in(key, i)
        return (lw.random.uniform(k, -1.0, 2.0), lw.random.normal(lw.random.fold_in(k, 1)),
                lw.random.exponential(lw.random.fold_in(k, 2)),
                lw.random.integers(lw.random.fold_in(k, 3), -5, 1 << 40),
                lw.random.uniform32(lw.random.fold_in(k, 4), np.float32(0), np.float32(1)),
                lw.random.bits(lw.random.fold_in(k, np.uint64(2 ** 63 + 5))))
    for j, r in enumerate(lw.vmap(draws, in_axes=(0, None))(np.arange(-50, 3000), key)):
        out[f"random{j}"] = np.asarray(r, dtype=np.float64).tolist() if j != 5 else [float(v) for v in r.view(np.int64)]
    json.dump({"values": out, "loaded": sorted(set(prebuilt.LOADED)),
               "entries": sorted(prebuilt._entries()), "stamp": prebuilt.stamp(prebuilt.variant()),
               "shipped": pickle_header()}, sys.stdout)
""").replace("pickle_header()", "__import__('pickle').loads(__import__('zlib').decompress("
             "prebuilt.path(prebuilt.variant()).read_bytes()))[0]")


def _run(tmp_path, tag, **env):
    cache = tmp_path / tag
    cache.mkdir()
    result = subprocess.run([sys.executable, "-c", _SCRIPT], capture_output=True, text=True, check=True,
                            env=dict(os.environ, LANEWISE_CACHE_DIR=str(cache), NUMBA_CACHE_DIR=str(cache), **env))
    return json.loads(result.stdout)


def _same(a, b):
    a, b = np.array(a), np.array(b)
    both_nan = np.isnan(a) & np.isnan(b)
    return np.all(both_nan | ((a == b) & (np.signbit(a) == np.signbit(b))))


def test_shipped_kernels_are_used_and_equal_the_compiled_source(tmp_path):
    shipped = _run(tmp_path, "shipped")
    if shipped["stamp"] != shipped["shipped"]:
        pytest.skip(f"the shipped kernels were built with {shipped['shipped']}, this is {shipped['stamp']}")
    compiled = _run(tmp_path, "compiled", LANEWISE_PREBUILT_MATH="0")
    assert compiled["loaded"] == []
    # every kernel came from the file, none was compiled (the generator's: the signatures the draws use)
    assert set(shipped["loaded"]) <= set(shipped["entries"])
    assert {k for k in shipped["entries"] if "lanemath" in k} <= set(shipped["loaded"])
    assert {"uniform_words", "ln53", "cos2pi"} <= {k.split(":")[0].rsplit(".", 1)[1] for k in shipped["loaded"]}
    assert shipped["values"].keys() == compiled["values"].keys()
    differ = [k for k in shipped["values"] if not _same(shipped["values"][k], compiled["values"][k])]
    assert differ == []


@pytest.mark.parametrize("field", ["source", "numba", "llvmlite", "python", "variant", "triple"])
def test_a_file_built_for_anything_else_is_not_used(monkeypatch, field):
    # Another source (an edited lanemath), Numba, llvmlite, Python, FMA variant or platform:
    # no entries, every kernel compiles from source.
    here = prebuilt.stamp(prebuilt.variant())
    assert field in here
    if _header(prebuilt.variant())[0] != here:
        pytest.skip(f"the shipped kernels were built with {_header(prebuilt.variant())[0]}, this is {here}")
    prebuilt._entries.cache_clear()
    try:
        assert prebuilt._entries()  # this checkout's file matches this process
        monkeypatch.setattr(prebuilt, "stamp", lambda which: dict(here, **{field: "other"}))
        prebuilt._entries.cache_clear()
        assert prebuilt._entries() == {}
    finally:
        monkeypatch.undo()
        prebuilt._entries.cache_clear()


def test_the_switch_is_read_at_each_load():
    # lw.config.prebuilt_math = False (LANEWISE_PREBUILT_MATH=0) compiles from source, also when set later
    from numba import types
    from numba.core.registry import cpu_target

    import lanewise as lw
    from lanewise.lanemath._public import KERNELS

    if _header(prebuilt.variant())[0] != prebuilt.stamp(prebuilt.variant()):
        pytest.skip("the shipped kernels were built with another Numba, llvmlite or Python")
    cos = KERNELS["cos"][0].dispatcher.py_func
    with lw.config.overridden(prebuilt_math=False):
        assert prebuilt.load(cos, (types.float64,), cpu_target.target_context) is None
    assert prebuilt.load(cos, (types.float64,), cpu_target.target_context) is not None
