"""``lw.reduce`` on the tpu backend beyond every axis: ``axis=`` keeping levels, argmin and
argmax per axis, ``lw.Monoid`` and ``segments=`` (backends/tpu/stored.py), in interpret mode.

Each result is checked against the reference backend (``backend="python"``, on the same
float32 inputs: floats within a float32 tolerance, ints and bools exactly) and, where the
reference computes the lane in float64 (argmin/argmax would then see other near-ties),
against NumPy's reduction of the tpu's own mapped values.  The plane is 13 x 140 lanes
in (8, 128) blocks: edge tiles overhang it on both axes.
"""

from __future__ import annotations

import math
import re

import numpy as np
import pytest

pytest.importorskip("jax")
import jax  # noqa: E402

import lanewise as lw  # noqa: E402
from conformance import assert_same_32  # noqa: E402

ON_CHIP = jax.default_backend() == "tpu"


@pytest.fixture(autouse=True)
def interpret():
    with lw.config.overridden(tpu_interpret=not ON_CHIP, tpu_tile=(8, 128), tpu_block=(8, 128), tpu_unroll=1):
        yield


X, Y = np.linspace(-3, 3, 13, dtype=np.float32), np.linspace(-2, 2, 140, dtype=np.float32)


def wave(x, y):
    r = x * x + y * y
    return math.cos(r) / (1.0 + r), r > 4.0


def grid(backend, out_axes=0):
    """wave over the 13 x 140 plane; ``out_axes=1`` puts the outer level last in the output."""
    return lw.vmap(lw.vmap(wave, in_axes=(None, 0)), in_axes=(0, None), out_axes=out_axes, backend=backend)


def numpy_of(op, values, axis):
    """NumPy's ``op`` of a mapped leaf over ``axis`` (None: every axis)."""
    values = np.asarray(values)
    if op in ("argmin", "argmax"):
        return getattr(np, op)(values, axis=axis)
    if op in ("sum", "prod", "mean") and values.dtype.kind == "f":
        values = values.astype(np.float64)
    return {"any": np.any, "all": np.all}.get(op, getattr(np, op, None))(values, axis=axis)


AXES = [None, 0, 1, -1, (0, 1)]


@pytest.mark.slow  # seconds per case in interpret mode
@pytest.mark.parametrize("out_axes", [0, 1])
@pytest.mark.parametrize("op", ["sum", "mean", "prod", "min", "max", "any", "all", "argmin", "argmax"])
def test_every_op_over_every_axis_of_a_plane_with_edge_tiles(op, out_axes):
    mapped = np.asarray(grid("tpu", out_axes)(X, Y)[0]), np.asarray(grid("tpu", out_axes)(X, Y)[1])
    for axis in AXES:
        if op in ("argmin", "argmax") and axis == (0, 1):
            continue  # NumPy's argmin takes one axis or None (lw.reduce refuses a tuple)
        got = lw.reduce(grid("tpu", out_axes), op, axis=axis)(X, Y)
        assert all(isinstance(g, jax.Array) for g in got)
        for g, m in zip(got, mapped, strict=True):  # the tpu's own values, reduced by NumPy
            want = numpy_of(op, m, axis)
            assert np.shape(g) == np.shape(want), (axis, np.shape(g), np.shape(want))
            np.testing.assert_allclose(np.asarray(g, np.float64), want, rtol=2e-5, atol=1e-6, err_msg=str(axis))
        if op not in ("argmin", "argmax"):
            assert_same_32(got, lw.reduce(grid("python", out_axes), op, axis=axis)(X, Y))


def test_a_side_of_the_plane_kept_is_folded_in_the_kernel(capsys):
    """axis= keeping the plane's rows (every level but the last) or its columns (the last):
    each (16, 256) tile writes a register column per row, or a register row per column,
    of partials; no lane's value is stored."""
    x, y = np.linspace(-3, 3, 20, dtype=np.float32), np.linspace(-2, 2, 300, dtype=np.float32)
    with lw.config.overridden(tpu_block=(16, 256), debug=True):
        rows = lw.reduce(grid("tpu"), "max", axis=1)(x, y)
        cols = lw.reduce(grid("tpu"), "sum", axis=0)(x, y)
    kernels = capsys.readouterr().out.split("# ---- lanewise tpu kernel of")[1:]
    assert len(kernels) == 2 and not any("[20,300]" in k for k in kernels)
    assert re.search(r"out_avals=\(ShapedArray\(float32\[32,256\]\), ShapedArray\(int32\[32,256\]\)\)", kernels[0])
    assert re.search(r"out_avals=\(ShapedArray\(float32\[16,512\]\), ShapedArray\(int32\[16,512\]\)\)", kernels[1])
    assert_same_32(rows, lw.reduce(grid("python"), "max", axis=1)(x, y))
    assert_same_32(cols, lw.reduce(grid("python"), "sum", axis=0)(x, y))


@pytest.mark.parametrize("op, keep", [("max", "rows"), ("mean", "cols"), ("any", "rows"), ("sum", "cols")])
def test_kernels_keeping_a_side_pass_the_mosaic_lowering_rules(op, keep, monkeypatch):
    """The folding kernel lowered for a TPU here (jax.export for platform "tpu"): every
    primitive it uses has a Mosaic lowering rule (Mosaic's compiler runs on a chip only)."""
    from lanewise.backends import tpu

    monkeypatch.setattr(tpu, "_interpret", lambda: False)
    call = tpu.bind_call(lw.vmap(lw.vmap(wave, in_axes=(None, 0)), in_axes=(0, None)), (X, Y), {})
    with jax.enable_x64(False):
        where, fn, values = tpu.build(call).prepared(call, fold=op, keep=keep)
        assert fn.lowered(where, *values).count("tpu_custom_call") == 1


def cube(a, b, c):
    return a * b - c, a + b > c


@pytest.mark.slow  # seconds per case in interpret mode
def test_three_levels_every_axis_selection():
    """(2, 3, 130) lanes: keeping levels 0 and 1 (the plane's rows) or level 2 (its columns)
    folds in the kernel; keeping level 0 or levels 1 and 2 reduces the stored values."""
    a, b, c = (np.linspace(-1, 1, n, dtype=np.float32) for n in (2, 3, 130))
    f = {k: lw.vmap(lw.vmap(lw.vmap(cube, in_axes=(None, None, 0)), in_axes=(None, 0, None)),
                    in_axes=(0, None, None), backend=k) for k in ("tpu", "python")}
    for op, axis in [("sum", 2), ("min", (0, 1)), ("any", (1, 2)), ("mean", 0), ("max", None), ("argmax", 1)]:
        assert_same_32(lw.reduce(f["tpu"], op, axis=axis)(a, b, c), lw.reduce(f["python"], op, axis=axis)(a, b, c))


def escape(x, n):
    """A loop (lanes in tpu_tile, the flat layout: the last level is under 128 wide)."""
    z, k = 0.0, 0
    while k < n and z * z < 4.0:
        z = z * z + x
        k += 1
    return z, k


@pytest.mark.slow  # seconds per case in interpret mode
def test_axis_with_a_loop_on_both_layouts():
    """50 lanes a row: the flat layout (the values reduced after the kernel); 130: the
    plane (a side kept, folded in the kernel)."""
    f = {b: lw.vmap(lw.vmap(escape, in_axes=(0, None)), in_axes=(0, 0), backend=b) for b in ("tpu", "python")}
    n = np.arange(6, dtype=np.int32) * 3 + 1
    for width in (50, 130):
        x = np.linspace(-2.0, 0.4, 6 * width, dtype=np.float32).reshape(6, width)
        for op, axis in [("max", 1), ("min", 0), ("argmax", 1), ("any", 0)]:
            assert_same_32(lw.reduce(f["tpu"], op, axis=axis)(x, n), lw.reduce(f["python"], op, axis=axis)(x, n))
    with pytest.raises(lw.LaneTypeError, match=r"'sum'.*integer lane results \(out\[1\]\).*wrap at 2\*\*31"):
        lw.reduce(f["tpu"], "sum", axis=1)(x, n)
    with pytest.raises(lw.LaneTypeError, match=r"'mean'.*integer lane results"):
        lw.reduce(f["tpu"], "mean", axis=0)(x, n)


# ----------------------------------------------------------------------------- lw.Monoid


def first_nonzero(a, b):
    return a if a != 0 else b


def last_nonzero(a, b):
    return b if b != 0 else a


def bigger_abs(a, b):
    return a if abs(a) >= abs(b) else b


def add(a, b):
    return a + b


def sparse(x, y):
    """Mostly zeros, and values of equal size and opposite signs: a fold out of lane
    order would pick another lane's value."""
    v = x * y
    return (v if abs(v) > 3.0 else 0.0), 1.0


@pytest.mark.slow  # seconds per case in interpret mode
@pytest.mark.parametrize("combine", [first_nonzero, last_nonzero, bigger_abs])
def test_a_monoid_folds_in_lane_order_over_every_axis(combine):
    """Associative but not commutative: the result is the reference's left fold in lane order."""
    f = {b: lw.vmap(lw.vmap(sparse, in_axes=(None, 0)), in_axes=(0, None), backend=b) for b in ("tpu", "python")}
    monoid = lw.Monoid(combine, 0.0)
    for axis in (None, 0, 1):
        got = lw.reduce(f["tpu"], monoid, axis=axis)(X, Y)
        want = lw.reduce(f["python"], monoid, axis=axis)(X, Y)
        assert_same_32(got, want)
    assert float(lw.reduce(f["tpu"], monoid)(X, Y)[0]) != 0.0


def test_a_monoid_of_sums_and_counts_matches_sum():
    f = lw.vmap(lw.vmap(sparse, in_axes=(None, 0)), in_axes=(0, None), backend="tpu")
    total, count = lw.reduce(f, lw.Monoid(add, 0.0), axis=1)(X, Y)
    np.testing.assert_allclose(np.asarray(total), np.asarray(lw.reduce(f, "sum", axis=1)(X, Y)[0]), rtol=1e-5,
                               atol=1e-4)  # the sparse values cancel out along a row
    assert np.asarray(count).tolist() == [140.0] * 13


def int_max(a, b):
    return a if a > b else b


def test_a_monoid_of_ints_and_its_identity_over_no_lanes():
    ints = lw.vmap(lambda v: (v * 7) % 11 - 20, backend="tpu")
    x = np.arange(300, dtype=np.int32)
    got = lw.reduce(ints, lw.Monoid(int_max, -100))(x)
    assert got.dtype == np.int32 and int(got) == max((v * 7) % 11 - 20 for v in range(300))
    assert int(lw.reduce(ints, lw.Monoid(int_max, 5))(x)) == 5  # the identity is folded in, as the reference's
    empty = lw.reduce(ints, lw.Monoid(int_max, -100))(x[:0])
    assert int(empty) == -100


def pair(a, b):
    return a, b


def test_a_monoid_whose_combine_returns_two_values_is_refused():
    with pytest.raises(lw.LaneTypeError, match=r"combine pair returns 2 values"):
        lw.reduce(lw.vmap(lambda v: v, backend="tpu"), lw.Monoid(pair, 0.0))(X)


# ----------------------------------------------------------------------------- segments=


def bin_of(x):
    return int(x * 4), x


def counted(x):
    return int(x * 4), x > 0.5


@pytest.mark.parametrize("op", ["sum", "prod", "min", "max", "any", "all", lw.Monoid(first_nonzero, 0.0),
                                lw.Monoid(last_nonzero, 0.0)],
                         ids=lambda op: op if isinstance(op, str) else f"Monoid-{op.combine.__name__}")
def test_segments_match_the_reference(op):
    """Six segments, the last two empty (the op's identity), over a partial tile of lanes."""
    x = np.random.default_rng(3).random(300).astype(np.float32)
    x[::7] = 0.0  # zeros for the Monoids to skip
    got = lw.reduce(lw.vmap(bin_of, backend="tpu"), op, segments=6)(x)
    want = lw.reduce(lw.vmap(bin_of, backend="python"), op, segments=6)(x)
    assert isinstance(got, jax.Array) and got.shape == (6,)
    assert_same_32(got, want)


def test_a_histogram_of_bools_counts_in_int32():
    x = np.random.default_rng(4).random(1000).astype(np.float32)
    got = lw.reduce(lw.vmap(counted, backend="tpu"), "sum", segments=4)(x)
    bins = (x * 4).astype(int)
    assert got.dtype == np.int32
    assert np.asarray(got).tolist() == [int(np.sum((bins == g) & (x > 0.5))) for g in range(4)]


def test_segments_of_a_plane_and_a_segment_out_of_range_names_its_lane():
    def cell(x, y):
        return int(x + y + 5), x * y

    planes = {b: lw.vmap(lw.vmap(cell, in_axes=(None, 0)), in_axes=(0, None), backend=b) for b in ("tpu", "python")}
    assert_same_32(lw.reduce(planes["tpu"], "max", segments=11)(X, Y),
                   lw.reduce(planes["python"], "max", segments=11)(X, Y))
    segments = (X[:, None] + Y[None, :] + 5).astype(int)
    i0, i1 = np.argwhere(segments >= 8)[0]  # the first lane outside, in lane order
    with pytest.raises(lw.LaneIndexError, match=re.escape(f"segment {segments[i0, i1]} is out of range for "
                                                          f"lw.reduce(..., segments=8) (lane (i0={i0}, i1={i1}) of ")):
        lw.reduce(planes["tpu"], "sum", segments=8)(X, Y)


def test_an_integer_segment_sum_is_refused():
    with pytest.raises(lw.LaneTypeError, match=r"'sum'.*integer lane results.*bool, which counts"):
        lw.reduce(lw.vmap(lambda v: (int(v), int(v)), backend="tpu"), "sum", segments=4)(X)


def test_the_reduction_runs_in_the_maps_jitted_call(capsys):
    """The kernel and the reduction of its values: one traced program (one dispatch)."""
    with lw.config.overridden(debug=True):
        lw.reduce(grid("tpu"), "max", axis=1)(X, Y)
        lw.reduce(lw.vmap(bin_of, backend="tpu"), "sum", segments=6)(np.abs(X) / 2.5)
    out = capsys.readouterr().out
    programs = out.split("# ---- lanewise tpu kernel of")
    whole = [p for p in programs if "pallas_call" in p and ("reduce_max" in p or "scatter" in p)]
    assert len(whole) == 2, out[:2000]


def step_with_ys(carry, x):
    return carry + x, carry


def running_sums(p):
    return lw.scan(step_with_ys, 0.0, p)[1]


@pytest.mark.slow  # seconds per case in interpret mode
def test_per_lane_rows_reduce_element_by_element():
    """A scan's stacked ys (a row per lane): each element reduced over the lanes."""
    p = np.random.default_rng(5).random((300, 7)).astype(np.float32)
    for op in ("sum", "max", lw.Monoid(bigger_abs, 0.0)):
        got = lw.reduce(lw.vmap(running_sums, backend="tpu"), op)(p)
        assert got.shape == (7,)
        assert_same_32(got, lw.reduce(lw.vmap(running_sums, backend="python"), op)(p))


def test_no_lanes_give_the_identity_or_the_references_error():
    empty = np.zeros(0, np.float32)
    for op in ("sum", "max", lw.Monoid(add, 0.0)):
        got = lw.reduce(lw.vmap(bin_of, backend="tpu"), op, segments=3)(empty)
        assert_same_32(got, lw.reduce(lw.vmap(bin_of, backend="python"), op, segments=3)(empty))
    plane = {b: lw.vmap(lw.vmap(lambda a, c: a * c, in_axes=(None, 0)), in_axes=(0, None), backend=b)
             for b in ("tpu", "python")}
    y = np.arange(5, dtype=np.float32)
    assert_same_32(lw.reduce(plane["tpu"], "mean", axis=0)(empty, y),
                   lw.reduce(plane["python"], "mean", axis=0)(empty, y))
    with pytest.raises(lw.EmptyReductionError, match="min over zero lanes"):
        lw.reduce(plane["tpu"], "min", axis=0)(empty, y)
