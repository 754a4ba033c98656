"""lw.random's draws on the SPMD path, the reduce's tiles filled W lanes at a time,
and auto mode's choice for lanes with long fixed loops: every result bitwise the
reference backend's (the spec), and the path checked, not assumed."""

from __future__ import annotations

import math

import numba
import numpy as np
import pytest

import lanewise as lw
import lanewise.random as lwr

from raising_lanes import checked_halving


def lane_path(fn, *args) -> str:
    text = str(lw.explain(fn, *args))
    return next(line for line in text.splitlines() if line.startswith("lane path:"))


def assert_bitwise(got, want):
    got, want = (got, want) if isinstance(got, tuple) else ((got,), (want,))
    for g, w in zip(got, want, strict=True):
        assert np.asarray(g).dtype == np.asarray(w).dtype
        np.testing.assert_array_equal(np.atleast_1d(g).view(np.uint8), np.atleast_1d(w).view(np.uint8))


def every_draw(k, i):
    kk = lwr.fold_in(k, i)
    return (lwr.uniform(kk), lwr.uniform(kk, -2.0, hi=3.0), lwr.uniform32(kk, 1, 5), lwr.normal(kk),
            lwr.exponential(kk), lwr.integers(kk, -5, i + 1), lwr.bits(kk), kk[0], kk[1])


def test_every_draw_is_bitwise_the_reference_on_the_spmd_path(restore_config):
    restore_config.spmd = True
    f = lw.vmap(every_draw, in_axes=(None, 0))
    key, idx = lwr.key(11), np.arange(203)  # a tail that is not a whole group
    assert "SPMD" in lane_path(f, key, idx)
    assert "lw_random.normal" in lw.explain(f, key, idx).source  # the twin, not a scalar fallback
    assert_bitwise(f(key, idx), lw.vmap(every_draw, in_axes=(None, 0), backend="python")(key, idx))


def row_keys(k, scale):
    return lwr.normal(k) * scale + lwr.uniform(lwr.fold_in(k, 3), hi=scale)


def test_keys_as_per_lane_rows(restore_config):
    restore_config.spmd = True
    f = lw.vmap(row_keys, in_axes=(0, None))
    keys = lwr.split(lwr.key(5), 77)
    assert "SPMD" in lane_path(f, keys, 2.0)
    assert_bitwise(f(keys, 2.0), lw.vmap(row_keys, in_axes=(0, None), backend="python")(keys, 2.0))


def walk(k, i, target):
    """A random walk until it is target away from 0: a data-dependent trip count."""
    path = lwr.fold_in(k, i)
    x, n = 0.0, 0
    while abs(x) < target and n < 10_000:
        if lwr.uniform(lwr.fold_in(path, 2 * n)) < 0.5:
            x += lwr.exponential(lwr.fold_in(path, 2 * n + 1))
        else:
            x -= lwr.exponential(lwr.fold_in(path, 2 * n + 1))
        n += 1
    return x, n


def test_draws_under_divergent_control_flow_take_spmd_in_auto_mode():
    f = lw.vmap(walk, in_axes=(None, 0, None))
    key, idx = lwr.key(2), np.arange(300)
    assert "SPMD" in lane_path(f, key, idx, 4.0)
    want = lw.vmap(walk, in_axes=(None, 0, None), backend="python")(key, idx, 4.0)
    assert_bitwise(f(key, idx, 4.0), want)
    assert len(set(want[1].tolist())) > 10  # the lanes really diverge


def walk_length(k, i, target):
    return walk(k, i, target)[1] * 1.0


@pytest.mark.parametrize("op", ["sum", "mean", "max", "min"])
def test_reduce_fills_its_tiles_on_the_spmd_path(op, restore_config):
    """The same fold, tile by tile, as the scalar path: bitwise equal to it for any
    thread count; max/min equal to the reference's."""
    key, idx = lwr.key(9), np.arange(5_000)
    r = lw.reduce(lw.vmap(walk_length, in_axes=(None, 0, None)), op)
    assert "SPMD" in lane_path(r, key, idx, 3.0)
    got = r(key, idx, 3.0)
    lanes = lw.vmap(walk_length, in_axes=(None, 0, None), backend="python")(key, idx, 3.0)
    assert np.isclose(got, getattr(np, op)(lanes), rtol=1e-13, atol=0)
    threads = numba.get_num_threads()
    try:
        numba.set_num_threads(1)
        assert_bitwise(r(key, idx, 3.0), got)
    finally:
        numba.set_num_threads(threads)
    restore_config.spmd = False
    scalar = lw.reduce(lw.vmap(walk_length, in_axes=(None, 0, None)), op)
    assert "scalar" in lane_path(scalar, key, idx, 3.0)
    assert_bitwise(scalar(key, idx, 3.0), got)


def test_a_lane_that_raises_in_an_spmd_tile_is_named():
    r = lw.reduce(lw.vmap(checked_halving, in_axes=(0, None)), "sum")
    x = np.full(3_000, 3.0)
    assert int(r(x, 5)) == 2 * 3_000
    assert "SPMD" in lane_path(r, x, 5)
    x[2_345] = 1e9
    with pytest.raises(ValueError, match="too many halvings") as info:
        r(x, 5)
    assert "2345" in str(info.value) + "".join(getattr(info.value, "__notes__", []))


STEPS = 48


def long_fixed(x):
    s = 0.0
    for j in range(STEPS):
        s = s * 0.5 + math.sin(x + j)
    return s


def short_fixed(x):
    s = 0.0
    for j in range(4):
        s = s * 0.5 + math.sin(x + j)
    return s


def calls_long_fixed(x):
    return long_fixed(x) + 1.0


@pytest.mark.parametrize("lane, spmd_path", [(long_fixed, True), (calls_long_fixed, True), (short_fixed, False)])
def test_auto_takes_spmd_for_long_fixed_loops(lane, spmd_path):
    """LLVM vectorises only innermost loops: a lane loop holding a fixed loop of 48
    iterations would run one lane at a time, while 4 iterations unroll."""
    f = lw.vmap(lane)
    x = np.linspace(-3.0, 3.0, 101)
    path = lane_path(f, x)
    assert ("SPMD" in path) == spmd_path, path
    if spmd_path:
        assert "for loop of 48 iterations" in path
    np.testing.assert_allclose(f(x), lw.vmap(lane, backend="python")(x), rtol=1e-15, atol=1e-15)


def test_a_lane_that_raises_in_an_spmd_tile_is_named_by_dask():
    da = pytest.importorskip("dask.array")
    import dask

    r = lw.reduce(lw.vmap(checked_halving, in_axes=(0, None)), "sum")
    x = np.full(3_000, 3.0)
    x[2_345] = 1e9
    with dask.config.set(scheduler="synchronous"):
        with pytest.raises(ValueError, match="too many halvings") as info:
            r(da.from_array(x, chunks=1_000), 5).compute()
    assert "i0=2345" in "".join(getattr(info.value, "__notes__", [])) + str(info.value)


def test_a_key_passed_as_a_tuple_argument(restore_config):
    """A flat tuple of scalars passed whole (fold_in's key form) is one scalar
    argument per item on the SPMD path."""
    restore_config.spmd = True
    f = lw.vmap(every_draw, in_axes=(None, 0))
    key, idx = tuple(int(w) for w in lwr.key(11)), np.arange(150)
    assert "SPMD" in lane_path(f, key, idx)
    assert_bitwise(f(key, idx), lw.vmap(every_draw, in_axes=(None, 0), backend="python")(key, idx))
    r = lw.reduce(lw.vmap(walk_length, in_axes=(None, 0, None)), "sum")
    assert "SPMD" in lane_path(r, key, idx, 3.0)
    lanes = lw.vmap(walk_length, in_axes=(None, 0, None), backend="python")(key, idx, 3.0)
    assert np.isclose(r(key, idx, 3.0), lanes.sum(), rtol=1e-13, atol=0)


def scaled(pair, x):
    return pair[0] * x + pair[1]


@pytest.mark.parametrize("pair, in_axes, why", [
    (((1.0, 2.0), 3.0), (None, 0), "flat tuples of scalars"),
    ((np.ones(5), np.zeros(5)), ((0, 0), 0), "only tuples of scalars passed whole"),
])
def test_other_tuple_arguments_keep_the_scalar_path_with_a_reason(restore_config, pair, in_axes, why):
    restore_config.spmd = True
    lane = (lambda p, x: p[0][0] * x + p[1]) if isinstance(pair[0], tuple) else scaled
    f = lw.vmap(lane, in_axes=in_axes)
    x = np.linspace(0.0, 1.0, 5)
    path = lane_path(f, pair, x)
    assert path.startswith("lane path: scalar") and why in path, path
    np.testing.assert_array_equal(f(pair, x), lw.vmap(lane, in_axes=in_axes, backend="python")(pair, x))
