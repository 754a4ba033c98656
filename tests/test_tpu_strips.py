"""backend="tpu": a long loop-free lane computes each block in strips (kernel._in_strips), in
interpret mode.

A grid step of a lane of at least ``kernel.LONG`` operations loops over strips of
``lw.config.tpu_strip`` lanes, so that its intermediates stay in registers.  Each result
must equal the same kernel's with the block computed whole (``tpu_strip=None``: the same
arithmetic; bit for bit on the chip, within a few ulps in interpret mode) and match
the reference backend; folds (``lw.reduce``) match it with the edge lanes masked.  Small
blocks and strips keep interpret mode quick: (16, 512) blocks in (8, 128) strips, a plane
of 37 x 700 lanes whose edge tiles overhang it.
"""

from __future__ import annotations

import math
import re

import numpy as np
import pytest

jax = pytest.importorskip("jax")

import lanewise as lw  # noqa: E402
from lanewise.backends import tpu  # noqa: E402
from lanewise.backends.tpu import kernel  # noqa: E402
from lanewise.errors import BackendError  # noqa: E402
from conformance import assert_same_32  # noqa: E402
from test_tpu_backend import ON_CHIP  # noqa: E402

BLOCK, STRIP = (16, 512), (8, 128)
X, Y = np.linspace(-3, 3, 37, dtype=np.float32), np.linspace(-2, 2, 700, dtype=np.float32)
KEY = tuple(np.uint32(w) for w in lw.random.key(11))


@pytest.fixture(autouse=True)
def interpret():
    with lw.config.overridden(tpu_interpret=not ON_CHIP, tpu_block=BLOCK, tpu_strip=STRIP):
        yield


@pytest.fixture
def every_lane_long(monkeypatch):
    """Strips for any loop-free lane, however short (the threshold is the only thing that
    differs).  A kernel decides when it is first traced, so these tests use lanes of their
    own (:func:`fresh`): a lane traced under the real threshold keeps its decision."""
    monkeypatch.setattr(kernel, "LONG", 0)


def payoff(k0, k1, i):
    """One Monte Carlo path: a Philox draw of several hundred operations (a long lane)."""
    z = lw.random.normal(lw.random.fold_in((k0, k1), i))
    p = max(100.0 * math.exp(0.01 + 0.2 * z) - 100.0, 0.0)
    return p, p * p


def fresh():
    """A new function object of W1's lane with a branch, a bool and an int result: its own kernels."""
    def wave(x, y, on):
        r = x * x + y * y
        v = math.cos(r) / (1.0 + r)
        return (v if on else -v), r > 4.0, int(r)
    return wave


wave = fresh()


def plane(backend, lane=wave):
    return lw.vmap(lw.vmap(lane, in_axes=(None, 0, None)), in_axes=(0, None, None), backend=backend)


def paths(backend):
    return lw.vmap(payoff, in_axes=(None, None, 0), backend=backend)


def whole(fn, *args):
    """``fn(*args)`` with each block computed whole (no strips)."""
    with lw.config.overridden(tpu_strip=None):
        return fn(*args)


def assert_bitwise(got, want):
    """Equal bit for bit on the chip (a strip's lanes run the block's operations).  In
    interpret mode XLA on the CPU compiles each shape on its own: JAX 0.12's vectorised
    ``cos`` of a (8, 128) strip and of a (16, 512) block differ in the last bits (a few ulps)."""
    for g, w in zip(jax.tree.leaves(got), jax.tree.leaves(want), strict=True):
        g, w = np.asarray(g), np.asarray(w)
        if ON_CHIP or w.dtype.kind != "f":
            np.testing.assert_array_equal(g, w)
        else:
            np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-7)


def schedule(fn, *args) -> str:
    return next(line for line in lw.explain(fn, *args).splitlines() if "schedule:" in line)


def test_a_long_lane_is_computed_in_strips_equal_to_whole_blocks():
    i = np.arange(3000, dtype=np.int32)
    got = paths("tpu")(*KEY, i)
    assert re.search(r"each computed 8 x 128 lanes at a time", schedule(paths("tpu"), *KEY, i))
    assert_bitwise(got, whole(paths("tpu"), *KEY, i))
    want = paths("python")(*KEY, i)
    if ON_CHIP:  # the chip's log is less accurate than interpret mode's (docs/tpu.md)
        for g, w in zip(got, want, strict=True):
            np.testing.assert_allclose(np.asarray(g), w, rtol=2e-4, atol=2e-4 * np.max(np.abs(w)))
    else:
        assert_same_32(got, want)


def test_a_short_lane_keeps_whole_blocks():
    """W1's lane is a few operations: strips would only add loop overhead."""
    assert "at a time" not in schedule(plane("tpu"), X, Y, True)
    assert "no loop: tiles of lw.config.tpu_block" in schedule(plane("tpu"), X, Y, True)


def test_every_spread_and_dtype_in_strips_on_an_overhanging_plane(every_lane_long):
    """A column, a row and a scalar bool argument; float, bool and int results; the plane's
    edge tiles overhang it on both axes (37 rows of 16-row blocks, 700 columns of 512)."""
    lane = fresh()
    assert "at a time" in schedule(plane("tpu", lane), X, Y, False)
    got = plane("tpu", lane)(X, Y, False)
    assert_bitwise(got, whole(plane("tpu", fresh()), X, Y, False))
    assert_same_32(got, plane("python")(X, Y, False))
    xs, ys = np.linspace(-2, 2, 2500, dtype=np.float32), np.linspace(3, -1, 2500, dtype=np.float32)
    flat = lw.vmap(fresh(), in_axes=(0, 0, None), backend="tpu")
    assert_same_32(flat(xs, ys, True), lw.vmap(wave, in_axes=(0, 0, None), backend="python")(xs, ys, True))


@pytest.mark.parametrize("op", ["sum", "mean", "max", "min", "any", "all"])
def test_folds_in_strips_mask_the_edge_lanes(op, every_lane_long):
    lane = fresh()

    def value(x, y, on):
        return lane(x, y, on)[0] + 2.0

    def grid(backend):
        return lw.vmap(lw.vmap(value, in_axes=(None, 0, None)), in_axes=(0, None, None), backend=backend)

    got = lw.reduce(grid("tpu"), op)(X, Y, True)
    assert_same_32(got, lw.reduce(grid("python"), op)(X, Y, True))


@pytest.mark.parametrize("op, axis", [("max", 1), ("sum", 0), ("mean", 1)])
def test_folds_keeping_a_side_of_the_plane_in_strips(op, axis, every_lane_long):
    """axis= folds partials per row (or column) of each tile: each strip adds to its rows' (columns')."""
    def grid(backend):
        return lw.vmap(lw.vmap(lambda x, y: lane(x, y, True)[0], in_axes=(None, 0)), in_axes=(0, None),
                       backend=backend)

    lane = fresh()

    got = lw.reduce(grid("tpu"), op, axis=axis)(X, Y)
    assert_same_32(got, lw.reduce(grid("python"), op, axis=axis)(X, Y))


@pytest.mark.parametrize("fold", [None, "sum"])
def test_the_strip_loop_passes_the_mosaic_lowering_rules(fold, monkeypatch, every_lane_long):
    """The strip loop (dynamic, aligned slices of the blocks) lowered for a TPU without one."""
    def w1(x, y):  # no int(): Mosaic's sign lowering asks the chip's kind, which a CPU has none of
        r = x * x + y * y
        return math.cos(r) / (1.0 + r), r > 4.0

    monkeypatch.setattr(tpu, "_interpret", lambda: False)
    f = lw.vmap(lw.vmap(w1, in_axes=(None, 0)), in_axes=(0, None), backend="tpu")
    call = tpu.bind_call(f, (X, Y), {})
    exe = tpu.build(call)
    with jax.enable_x64(False):
        where, fn, values = exe.prepared(call, fold=fold)
        text = fn.lowered(where, *values)
    assert fn.strip(where, *values) == STRIP
    assert "tpu_custom_call" in text


def test_a_bad_strip_names_the_option():
    with lw.config.overridden(tpu_strip=(5, 100)), pytest.raises(BackendError, match="tpu_strip"):
        paths("tpu")(*KEY, np.arange(10, dtype=np.int32))
