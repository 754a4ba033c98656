"""Software prefetch of indirect reads ``a[b[k]]`` in lane loops (lanewise.lane.prefetch)."""

from __future__ import annotations

import re

import numpy as np
import pytest

import lanewise as lw
from lanewise.lane.ir.render import render
from lanewise.lane.lanefn import jit_lane
from lanewise.lane.prefetch import DISTANCE, MIN_BYTES, prefetched


def csr_row(start, stop, indices, w, x):
    s = 0.0
    for k in range(start, stop):
        s += w[k] * x[indices[k]]
    return s


def backwards(n, idx, x):
    s = 0.0
    for k in range(n - 1, -1, -1):
        s = s * 0.5 + x[idx[k]]
    return s


def two_tables(n, idx, x, y):
    """Two gathers through one index array, an outer loop's k read in an inner loop."""
    s = 0.0
    for k in range(n):
        for j in range(2):
            s += x[idx[k]] * j + y[idx[k]]
    return s


def reassigned(n, idx, x):
    s = 0.0
    for k in range(n):
        s += x[idx[k]]
        idx = idx[::-1]
    return s


def strided_step(n, idx, x, step):
    s = 0.0
    for k in range(0, n, step):
        s += x[idx[k]]
    return s


def no_gather(n, x):
    s = 0.0
    for k in range(n):
        s += x[k]
    return s


def _calls(fn):
    """The prefetches of ``fn``'s loops, as the rewritten lane writes them (``(-32)``: a negative literal)."""
    lane = prefetched(fn)
    return [] if lane is None else re.findall(r"_lw_prefetch\([^()]*(?:\(-\d+\))?\)", render(lane))


def test_which_loops_prefetch():
    assert _calls(csr_row) == [f"_lw_prefetch(x, indices, k, {DISTANCE})"]
    assert _calls(backwards) == [f"_lw_prefetch(x, idx, k, ({-DISTANCE}))"]
    assert _calls(two_tables) == [f"_lw_prefetch(x, idx, k, {DISTANCE})", f"_lw_prefetch(y, idx, k, {DISTANCE})"]
    assert _calls(reassigned) == []  # idx changes inside the loop
    assert _calls(strided_step) == []  # a step that is not a literal
    assert _calls(no_gather) == []


def test_prefetch_lines_stay_the_users():
    """The rewritten lane keeps its file and line numbers (errors point at user code)."""
    code = jit_lane(csr_row).py_func.__code__
    assert code.co_filename == __file__ and code.co_firstlineno == csr_row.__code__.co_firstlineno
    assert "_lw_prefetch" in code.co_names
    lines = {line for _, _, line in code.co_lines() if line}
    assert lines <= {line for _, _, line in csr_row.__code__.co_lines() if line}


def _big(rng, dtype=np.float64):
    """An array ``a`` large enough (>= MIN_BYTES) for prefetches to be emitted."""
    return rng.random(MIN_BYTES // np.dtype(dtype).itemsize + 7).astype(dtype)


def test_compiled_lane_holds_the_prefetch():
    rng = np.random.default_rng(0)
    x = _big(rng)
    idx = rng.integers(0, x.size, 100)
    lane = jit_lane(csr_row)
    lane(0, 100, idx, np.ones(100), x)
    llvm = "".join(lane.inspect_llvm().values())
    assert "llvm.prefetch" in llvm
    plain = jit_lane(no_gather)
    plain(10, x)
    assert "llvm.prefetch" not in "".join(plain.inspect_llvm().values())


@pytest.mark.parametrize("variant", ["contiguous", "strided b", "strided a", "uint32 b", "negative b", "small a"])
def test_prefetching_lanes_match_the_reference(variant):
    """Loops whose k + DISTANCE runs past b's end (short segments), indices that
    wrap (negative), strided arrays, narrow index types, an ``a`` under MIN_BYTES."""
    rng = np.random.default_rng(1)
    x = _big(rng)
    edges = 90
    idx = rng.integers(0, x.size, 2 * edges)
    if variant == "strided b":
        idx = idx[::2]
    elif variant == "strided a":
        x = x[::2]
        idx = idx % x.size
    elif variant == "uint32 b":
        idx = idx.astype(np.uint32)
    elif variant == "negative b":
        idx = -1 - idx
    elif variant == "small a":
        x = x[:1000].copy()
        idx = idx % 1000
    idx = idx[:edges]
    w = rng.random(edges)
    starts = np.array([0, 3, 3, 40, 85, 90])
    stops = np.array([3, 3, 40, 85, 90, 90])
    f = lw.vmap(csr_row, in_axes=(0, 0, None, None, None))
    want = lw.vmap(csr_row, in_axes=(0, 0, None, None, None), backend="python")(starts, stops, idx, w, x)
    np.testing.assert_array_equal(f(starts, stops, idx, w, x), want)
    g = lw.vmap(backwards, in_axes=(0, None, None))
    n = np.array([0, 1, 50, 90])
    np.testing.assert_array_equal(g(n, idx, x), lw.vmap(backwards, in_axes=(0, None, None),
                                                          backend="python")(n, idx, x))


def test_closures_and_helpers_prefetch_too():
    rng = np.random.default_rng(2)
    x = _big(rng)
    idx = rng.integers(0, x.size, 64)
    scale = 3.0

    def lane(n, idx, x):  # a closure (over scale) calling a helper with its own loop
        s = 0.0
        for k in range(n):
            s += scale * x[idx[k]]
        return s + two_tables(n, idx, x, x)

    n = np.arange(0, 64, 7)
    got = lw.vmap(lane, in_axes=(0, None, None))(n, idx, x)
    np.testing.assert_array_equal(got, lw.vmap(lane, in_axes=(0, None, None), backend="python")(n, idx, x))
    compiled = jit_lane(lane)  # the lane as a kernel calls it (typing it no longer compiles it)
    assert compiled(n[1], idx, x) == got[1]
    assert "llvm.prefetch" in "".join(compiled.inspect_llvm().values())
