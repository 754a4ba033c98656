"""backend="tpu": a live lane reading a row out of range raises the python backend's
LaneIndexError (kernel records, host raises: backends/tpu/bounds.py), in interpret mode.

The reference backend (``backend="python"``) is the spec: the same message (index, size,
lane, the user's file:line) where it raises, the same values where it does not.  Lanes
masked off (the other branch of an ``if``, after a ``break``, padding and a plane's
overhang) must not raise.  The lanes span several (8, 128) tiles with a partial last one.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

jax = pytest.importorskip("jax")

import lanewise as lw  # noqa: E402
from lanewise import LaneIndexError  # noqa: E402
from lanewise.backends import tpu  # noqa: E402
from lanewise.backends.tpu import kernel  # noqa: E402
from lanewise.backends.tpu import rows as rows_  # noqa: E402
from test_tpu_backend import interpreted, assert_match, lowered_under_x64  # noqa: E402

SERIES, STEPS = 2 * 1024 + 300, 6


@pytest.fixture(autouse=True)
def interpret():
    with interpreted(tpu_tile=(8, 128), tpu_unroll=4):
        yield


def rows(series=SERIES, steps=STEPS, seed=0):
    return np.random.default_rng(seed).random((series, steps)).astype(np.float32)


def python_error(program, *args) -> str:
    with pytest.raises(LaneIndexError) as raised:
        program(*args)
    return str(raised.value)


def same_error(lane, *args, vmap=lw.vmap, **options):
    """The tpu backend raises the reference's LaneIndexError, word for word."""
    want = python_error(vmap(lane, backend="python", **options), *args)
    assert python_error(vmap(lane, backend="tpu", **options), *args) == want
    return want


def ahead(p):
    s = 0.0
    for i in range(len(p)):
        s += p[i + 2]  # out of range for the last two i
    return s


def test_a_uniform_index_out_of_range_in_a_range_loop_raises():
    message = same_error(ahead, rows())
    assert "index 6 is out of bounds for axis 0 with size 6" in message
    assert f"test_tpu_bounds.py:{ahead.__code__.co_firstlineno + 3}: s += p[i + 2]" in message


def behind(p):
    s = 0.0
    for i in range(len(p)):
        s += p[i - 7]  # -7 for i = 0: below -len(p)
    return s


def test_a_negative_index_wraps_and_below_the_start_raises():
    def wrapping(p):
        s = 0.0
        for i in range(len(p)):
            s = s * 0.5 + p[i - 3]  # -3 .. 2: Python's negative indices
        return s

    p = rows()
    assert_match(lw.vmap(wrapping, backend="tpu")(p), lw.vmap(wrapping, backend="python")(p))
    assert "index -7 is out of bounds" in same_error(behind, p)


def pick(p, k):
    return p[k] * 2.0


def test_a_per_lane_index_into_a_short_row_raises():
    p = rows()
    k = (np.arange(SERIES) % 5).astype(np.int32)
    assert_match(lw.vmap(pick, backend="tpu")(p, k), lw.vmap(pick, backend="python")(p, k))
    k[1500] = 6  # one lane, in the second tile
    assert "index 6 is out of bounds for axis 0 with size 6 (lane i0=1500 of pick" in same_error(pick, p, k)
    k[1500], k[2000] = -7, 9
    assert "index -7 " in same_error(pick, p, k)


def test_the_lane_of_a_plane_is_named_by_its_level_indices():
    p = rows(3 * 300).reshape(3, 300, STEPS)  # a (3, 300) plane of lanes, three tiles along it
    k = np.zeros((3, 300), np.int32)
    k[2, 170] = 8
    message = same_error(pick, p, k, vmap=lambda f, **o: lw.vmap(lw.vmap(f), **o))
    assert "(lane i0=2, i1=170 of pick" in message
    p = rows(16 * 300).reshape(16, 300, STEPS)  # two rows of tiles: the first bad lane in C order is named
    k = np.zeros((16, 300), np.int32)
    k[5, 10], k[2, 200] = 7, 9
    message = same_error(pick, p, k, vmap=lambda f, **o: lw.vmap(lw.vmap(f), **o))
    assert "index 9 is out of bounds for axis 0 with size 6 (lane i0=2, i1=200 of pick" in message


def guarded(p):
    s = 0.0
    for i in range(len(p) + 3):
        if i < len(p):  # the lanes past the end are masked off: no read
            s += p[i]
    return s


def broken(p, n):
    s = 0.0
    for i in range(10):
        if i >= n:
            break
        s += p[i]  # only lanes with i < n read
    return s


def chosen(p, k):
    return p[k] if k < len(p) else -1.0


def test_masked_off_lanes_reading_out_of_range_do_not_raise():
    p = rows()
    n = (np.arange(SERIES) % 7).astype(np.int32)
    k = (np.arange(SERIES) % 11).astype(np.int32)
    for lane, args in ((guarded, (p,)), (broken, (p, n)), (chosen, (p, k))):
        assert_match(lw.vmap(lane, backend="tpu")(*args), lw.vmap(lane, backend="python")(*args))
    # a plane's overhang and the padding lanes hold undefined indices: never live
    cube, ks = rows(3 * 200).reshape(3, 200, STEPS), np.full((3, 200), 5, np.int32)
    got = lw.vmap(lw.vmap(pick), backend="tpu")(cube, ks)
    assert_match(got, lw.vmap(lw.vmap(pick), backend="python")(cube, ks))


def shifted(p, k):
    s = 0.0
    for i in range(len(p)):
        s += p[i + k]  # a lane with a bigger k reads out of range at an earlier i
    return s


def test_the_first_lane_in_c_order_is_named_not_the_first_to_fail():
    """Python runs lane 0 to its error before lane 1 starts: the tpu names lane 0 too, though
    lane 1 read out of range first in the kernel's time (each lane keeps its own first bad read)."""
    p, k = rows(), np.zeros(SERIES, np.int32)
    k[[3, 4, 1200]] = 1, 4, 5  # lane 3 fails at i = 5 with index 6, lane 4 at i = 2
    assert "index 6 is out of bounds for axis 0 with size 6 (lane i0=3 of shifted" in same_error(shifted, p, k)


def literal(p, c):
    if c > 5.0:
        return p[STEPS + 1]  # out of range: raises only where a lane takes the branch
    return p[-STEPS]


def test_a_literal_index_out_of_range_raises_only_where_a_lane_reads_it():
    """Python raises when a lane reads it, not when the lane is compiled: a branch no lane
    takes reads nothing (before: refused when the kernel was built)."""
    p, c = rows(), np.zeros(SERIES, np.float32)
    assert_match(lw.vmap(literal, backend="tpu")(p, c), lw.vmap(literal, backend="python")(p, c))
    c[[1500, 2100]] = 9.0
    assert "(lane i0=1500 of literal" in same_error(literal, p, c)
    with pytest.raises(lw.LaneCompileError, match="index 4294967296 is out of range for a row of 6"):
        lw.vmap(lambda q: q[2 ** 32], backend="tpu")(p)  # beyond int32: refused when built


def test_a_loop_free_lane_of_big_blocks_raises(monkeypatch):
    """A loop-free lane takes lw.config.tpu_block and may compute it in strips; a lane with
    rows never does (kernel._strip_of), so its read is checked in the whole block."""
    monkeypatch.setattr(kernel, "LONG", 0)

    def lookup(p, k):  # a fresh lane: its own kernel, decided under LONG = 0
        return p[k] + 1.0

    p, k = rows(), np.zeros(SERIES, np.int32)
    k[2300] = 6
    with lw.config.overridden(tpu_block=(16, 512), tpu_strip=(8, 128)):
        assert "lane i0=2300 of " in same_error(lookup, p, k)


def test_a_streamed_row_read_out_of_range_raises(monkeypatch):
    """A row too long for VMEM is read through a window (rows.Streamed): checked the same."""
    monkeypatch.setattr(rows_, "BUDGET", 256 * 2 * 8 * 128 * 4)  # 256 planes fit whole
    monkeypatch.setattr(rows_, "WINDOW", 64)
    p = rows(1024 + 300, 300)
    call = tpu.bind_call(lw.vmap(ahead), (p,), {})
    assert tpu.build(call).windows(call)[0] == (64,)
    assert "index 300 is out of bounds for axis 0 with size 300" in same_error(ahead, p)


def test_a_reduction_of_such_a_lane_raises():
    p = rows()
    want = python_error(lw.reduce(lw.vmap(ahead, backend="python"), "sum"), p)
    assert python_error(lw.reduce(lw.vmap(ahead, backend="tpu"), "sum"), p) == want


def test_the_iteration_count_call_raises_too():
    program = lw.vmap(ahead, backend="tpu")
    call = tpu.bind_call(program, (rows(),), {})
    with pytest.raises(LaneIndexError, match=r"index 6 is out of bounds .*\(lane i0=0 of ahead"):
        tpu.iterations(tpu.build(call), call)


def test_lanes_without_checked_reads_keep_their_kernel():
    def walk(p):
        s = 0.0
        for v in p:  # a read of every plane, in range by construction
            s += v
        return s + p[0]

    assert not checks_reads(walk, rows())


def checks_reads(lane, *args) -> bool:
    """Whether ``lane``'s kernel records row reads (has a bounds record output)."""
    call = tpu.bind_call(lw.vmap(lane, backend="tpu"), args, {})
    with jax.enable_x64(False):
        where, fn, values = tpu.build(call).prepared(call)
        return fn.inline(where, *values)[2] is not None


def lagged(p):
    s = 0.0
    for i in range(1, len(p)):
        s += p[i] * p[i - 1] + p[-i] + p[(2 * i) % len(p)] + p[i // 2]
    for j in range(len(p) - 1, 0, -2):
        for i in range(j):
            s -= p[j - i]
    return s


def reassigned(p):
    s = 0.0
    for i in range(1, len(p)):
        i = i * 2  # noqa: PLW2901 - the read's index is no longer the counter's
        s += p[i - 1]
    return s


def shadowed(p):
    s = 0.0
    for i in range(len(p)):
        s += helper_read(p, i + 3)
    return s


def helper_read(p, k):
    i = k  # a local named like the caller's counter
    return p[i]


def test_reads_known_in_range_are_not_checked():
    """An index of range counters of literal bounds and literals (``+ - * // %``) whose
    interval lies in the row needs no check: no record, no host sync (bounds.Intervals)."""
    p = rows()
    assert not checks_reads(lagged, p)
    assert_match(lw.vmap(lagged, backend="tpu")(p), lw.vmap(lagged, backend="python")(p))
    assert checks_reads(ahead, p)  # i + 2 over range(len(p)): out of range at the end
    for lane in (reassigned, shadowed):  # not the counter any more: checked, and it raises
        assert checks_reads(lane, p)
        same_error(lane, p)


@pytest.mark.parametrize("fold", [None, "sum"])
@pytest.mark.parametrize("lane", [ahead, pick])
def test_the_checked_reads_pass_the_mosaic_lowering_rules(lane, fold, monkeypatch):
    """The records (min/sum reductions, selects, a write under pl.when) lowered for a TPU
    without one, beside the map's results or a fold's partials."""
    monkeypatch.setattr(tpu, "_interpret", lambda: False)
    args = (rows(),) if lane is ahead else (rows(), np.zeros(SERIES, np.int32))
    call = tpu.bind_call(lw.vmap(lane, backend="tpu"), args, {})
    with jax.enable_x64(False):
        where, fn, values = tpu.build(call).prepared(call, fold=fold)
        text = fn.lowered(where, *values)
    assert re.search(r"%\w+:2 = stablehlo.custom_call @tpu_custom_call", text)  # the result and the records


@pytest.mark.parametrize("lane", [ahead, pick])
def test_a_kernel_lowered_in_a_callers_x64_jit_passes_the_mosaic_lowering_rules(lane, monkeypatch):
    """The records under a caller's jit with x64 on (test_tpu_backend's x64 test): they
    took an int32 sum that Mosaic lowered as int64 (found on the chip)."""
    monkeypatch.setattr(tpu, "_interpret", lambda: False)
    args = (rows(),) if lane is ahead else (rows(), np.zeros(SERIES, np.int32))
    assert "tpu_custom_call" in lowered_under_x64(lw.vmap(lane, backend="tpu"), *args)


@pytest.mark.parametrize("reduce", [dict(op="argmax"), dict(op="sum", axis=0)],
                         ids=["argmax", "sum-keeping-a-level"])
def test_a_reduction_of_the_map_s_values_raises(reduce):
    """Reductions the kernel does not fold: the map's values reduced after it (stored.py;
    keeping a level of lanes laid out flat, which no tile lines up with)."""
    cube = rows(3 * 100).reshape(3, 100, STEPS)
    program = lw.vmap(lw.vmap(ahead), backend="python")
    want = python_error(lw.reduce(program, reduce["op"], axis=reduce.get("axis")), cube)
    program = lw.vmap(lw.vmap(ahead), backend="tpu")
    assert python_error(lw.reduce(program, reduce["op"], axis=reduce.get("axis")), cube) == want


def jit_error(fn, *args) -> str:
    """Inside jax.jit the record is read when the computation runs (a jax.debug.callback):
    JAX hands the lane's error to the caller inside a JaxRuntimeError."""
    with pytest.raises(jax.errors.JaxRuntimeError) as raised:
        jax.block_until_ready(fn(*args))
    return str(raised.value)


def test_inside_a_callers_jit_the_computation_raises():
    p = rows()
    want = python_error(lw.vmap(ahead, backend="python"), p)
    assert want in jit_error(jax.jit(lambda q: lw.vmap(ahead, backend="tpu")(q)), p)
    op = lw.jax.op(lw.vmap(ahead, backend="tpu"))
    assert want in jit_error(jax.jit(op), p)
    # jax.vmap of the op: the batch is one more level of lanes, named as python names it
    stacked = np.stack([rows(seed=1), p])
    want = python_error(lw.vmap(lw.vmap(ahead), backend="python"), stacked)
    assert "(lane i0=0, i1=0 of ahead" in want
    assert want in jit_error(jax.jit(jax.vmap(op)), stacked)


def test_inside_a_callers_jit_lanes_in_range_and_masked_off_lanes_run():
    p = rows()
    n = (np.arange(SERIES) % 7).astype(np.int32)
    k = (np.arange(SERIES) % 11).astype(np.int32)
    for lane, args in ((guarded, (p,)), (broken, (p, n)), (chosen, (p, k))):
        op = lw.jax.op(lw.vmap(lane, backend="tpu"))
        assert_match(jax.jit(op)(*args), lw.vmap(lane, backend="python")(*args))


def binned(p):
    return 0, ahead(p)


def test_a_segment_reduction_of_such_a_lane_raises():
    p = rows()
    want = python_error(lw.reduce(lw.vmap(binned, backend="python"), "sum", segments=2), p)
    assert python_error(lw.reduce(lw.vmap(binned, backend="tpu"), "sum", segments=2), p) == want
