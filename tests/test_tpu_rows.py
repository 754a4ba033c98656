"""backend="tpu": per-lane rows, tables and ``lw.scan`` inside lanes, in interpret mode.

Every lane is diff-tested against the reference backend (``backend="python"``) on float32
(or int32) data: floats within a float32 tolerance, integers exactly.  The lanes span three
tiles of (8, 128) with a partial last one (or a plane whose edge tiles hang over it), so
padding lanes, whose row planes hold undefined values, are exercised.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("jax")

import lanewise as lw  # noqa: E402
from lanewise import LaneCompileError  # noqa: E402
from test_tpu_backend import interpreted, assert_match, on_tpu, reference  # noqa: E402

from benchmarks.w3_backtest import setup, step  # noqa: E402

#: Series of three (8, 128) tiles, the last one partial, and steps of a few unrolled rounds and a rest.
SERIES, STEPS = 2 * 1024 + 300, 13


@pytest.fixture(autouse=True)
def interpret():
    with interpreted(tpu_tile=(8, 128), tpu_unroll=4):
        yield


def prices(series=SERIES, steps=STEPS, seed=3):
    return setup(series, seed=seed, steps=steps)[0].astype(np.float32)


def w3(p):
    return lw.scan(step, (p[0], p[0], 0.0, 0.0, p[0]), p)[0][3]


def line_of(fn, offset):
    return rf"test_tpu_rows.py:{fn.__code__.co_firstlineno + offset}\)"


def test_w3_lane_matches_the_reference():
    p = prices()
    got = on_tpu(w3, p)
    assert got.shape == (SERIES,)
    assert_match(got, reference(w3, p))


def test_rows_mapped_along_another_axis_and_on_a_plane():
    p = prices(series=300, steps=6)
    assert_match(lw.vmap(w3, in_axes=1, backend="tpu")(p.T), reference(w3, p))
    cube = prices(series=3 * 200, steps=5).reshape(3, 200, 5)  # a (3, 200) plane of lanes
    assert_match(lw.vmap(lw.vmap(w3), backend="tpu")(cube), lw.vmap(lw.vmap(w3), backend="python")(cube))


def horner(x, c):
    s = 0.0
    for i in range(len(c)):
        s = s * x + c[i]
    return s + c[-1] * c.shape[0] + c.size


def halving_horner(s, coefficient):
    return s * 0.5 + coefficient, None


def test_an_unmapped_table_is_read_by_a_literal_and_a_loop_counter():
    x = np.random.default_rng(0).uniform(-1, 1, SERIES).astype(np.float32)
    c = np.array([0.5, -1.0, 2.0, 0.25], np.float32)
    f = lw.vmap(horner, in_axes=(0, None), backend="tpu")
    assert_match(f(x, c), lw.vmap(horner, in_axes=(0, None), backend="python")(x, c))

    def scanned(x, c):  # Horner's rule as a scan over the table
        return lw.scan(halving_horner, x * 0.0, c)[0] + x

    f = lw.vmap(scanned, in_axes=(0, None), backend="tpu")
    assert_match(f(x, c), lw.vmap(scanned, in_axes=(0, None), backend="python")(x, c))


def drawdown(p, limit):
    """A range loop reading p[i] and p[i - 1], leaving by break and by return."""
    worst = 0.0
    total = 0.0
    for i in range(1, p.shape[0]):
        move = p[i] - p[i - 1]
        if move > limit:
            break
        if move < -3.0 * limit:
            return -1.0
        total += move
        worst = min(worst, total)
    return worst


def above(p, level):
    """A loop over the row's values, leaving by break."""
    count = 0
    for v in p:
        if v > level + 5.0:
            break
        count += v > level
    return count


def best_window(p, n):
    """Nested range loops: the outer counter (bounds per lane) indexes inside the inner loop."""
    best = -1e30
    for i in range(n):
        s = 0.0
        for j in range(3):
            s += p[i + j] * (j + 1)
        best = max(best, s)
    return best


def test_nested_loops_index_rows_with_uniform_counters():
    p = prices(series=300)
    n = np.random.default_rng(6).integers(0, STEPS - 2, 300).astype(np.int32)
    assert_match(on_tpu(best_window, p, n), reference(best_window, p, n))


def test_rows_in_range_loops_with_break_and_return_and_loops_over_a_row():
    p = prices()
    limit = np.random.default_rng(1).uniform(0.5, 3.0, SERIES).astype(np.float32)
    assert_match(on_tpu(drawdown, p, limit), reference(drawdown, p, limit))
    level = (p[:, 0] + limit).astype(np.float32)
    assert_match(on_tpu(above, p, level), reference(above, p, level))


def peak_step(carry, x):
    level, peak = carry
    level = level * 0.9 + x
    if level > peak:
        peak = level
    return (level, peak), None


def test_scan_with_a_tuple_carry_reverse_and_a_tuple_of_rows():
    p = prices(series=300)

    def backwards(p):
        return lw.scan(peak_step, (0.0, p[-1]), p, reverse=True)[0]

    def paired(carry, xy):
        x, y = xy
        return carry + x * y, None

    def dot(p, q):
        return lw.scan(paired, 0.0, (p, q))[0]

    assert_match(on_tpu(backwards, p), reference(backwards, p))
    q = prices(series=300, seed=4)
    assert_match(on_tpu(dot, p, q), reference(dot, p, q))


def counting(n, _):
    return n + 1, None


def int_step(carry, x):
    total, odd = carry
    return (total + x, odd + (x % 2)), None


def test_scan_over_int_rows_and_by_length_alone():
    k = np.random.default_rng(2).integers(-50, 50, (300, 11)).astype(np.int32)

    def ints(k):
        zero = k[0] * 0  # int32, as the reference's carry must stay (a literal 0 is int64 there)
        return lw.scan(int_step, (zero, zero), k)[0]

    def steps(x):
        return lw.scan(counting, 0, None, length=5)[0] + x

    assert_match(on_tpu(ints, k), reference(ints, k))
    x = np.arange(300, dtype=np.int32)
    assert_match(on_tpu(steps, x), reference(steps, x))


def test_an_index_that_varies_across_lanes_selects_in_a_short_row():
    p = prices(series=300, steps=10)
    k = np.random.default_rng(5).integers(-10, 10, 300).astype(np.int32)

    def pick(p, k):
        return p[k] + p[(k + 3) % 10]

    assert_match(on_tpu(pick, p, k), reference(pick, p, k))


def test_what_rows_do_not_lower_is_refused_naming_the_line():
    def varying(p, k):
        return p[k]

    def nested(p):
        def inner(c, x):
            return c + x, None
        return lw.scan(inner, 0.0, p)[0]

    def anonymous(p):
        return lw.scan(lambda c, x: (c + x, None), 0.0, p)[0]

    def stacked(p):
        if p[0] > 0.0:
            return lw.scan(step_with_ys, 0.0, p)[1]
        return p[1]

    p = prices(series=16, steps=80)
    with pytest.raises(LaneCompileError, match="differs from lane to lane.*" + line_of(varying, 1)):
        on_tpu(varying, p, np.zeros(16, np.int32))
    with pytest.raises(LaneCompileError, match="stacked ys inside a branch.*" + line_of(stacked, 2)):
        on_tpu(stacked, p)
    with pytest.raises(LaneCompileError, match="a def inside a lane.*module level.*" + line_of(nested, 1)):
        on_tpu(nested, p)
    with pytest.raises(LaneCompileError, match="step function must be a function defined at module level.*"
                                               + line_of(anonymous, 1).replace(r"\)", "")):
        on_tpu(anonymous, p)
    with pytest.raises(LaneCompileError, match="gives each lane a 2-D array"):
        on_tpu(lambda m: m[0], np.zeros((4, 2, 3), np.float32))


def step_with_ys(carry, x):
    return carry + x, carry


def test_rows_used_as_numbers_or_returned_are_refused_naming_the_line():
    def doubled(p):
        return p * 2.0

    def stored(p):
        p[0] = 1.0
        return p[1]

    def whole(p):
        return p

    p = prices(series=16, steps=4)
    with pytest.raises(LaneCompileError, match="a row as an operand of mul.*" + line_of(doubled, 1)):
        on_tpu(doubled, p)
    with pytest.raises(LaneCompileError, match="storing into a row.*" + line_of(stored, 1)):
        on_tpu(stored, p)
    with pytest.raises(LaneCompileError, match="returning a row.*" + line_of(whole, 0)):
        on_tpu(whole, p)


def test_reduce_and_explain_of_a_scan_over_rows():
    p = prices(series=300, steps=5)
    f = lw.vmap(w3, backend="tpu")
    total = lw.reduce(f, "sum")(p)
    np.testing.assert_allclose(float(total), float(np.sum(reference(w3, p))), rtol=1e-4, atol=1e-4)
    assert "p as rows" in str(lw.explain(f, p))


def test_rows_too_many_for_their_windows_are_refused_with_the_limit():
    """Rows longer than VMEM holds stream (test_tpu_stream.py), each through a window of 512."""
    from lanewise.backends.tpu import rows

    assert rows.fit_tile((32, 128), [9000] * 16) == (8, 128)
    with pytest.raises(lw.BackendError, match="at most 8192 values per lane in all, and these rows need 8704"):
        rows.fit_tile((32, 128), [9000] * 17)


def scanned_peak(p):
    return lw.scan(peak_step, (0.0, p[-1]), p, reverse=True)[0]


def scanned_ints(k):
    return lw.scan(int_step, (k[0] * 0, k[0] * 0), k)[0]


def pick(p, k):
    return p[k] + p[(k + 3) % 10]


def emas(p):
    return lw.scan(ema, p[0], p)


@pytest.mark.parametrize("lane, kinds", [
    (w3, ["rows"]), (drawdown, ["rows", "lanes"]), (above, ["rows", "lanes"]), (horner, ["lanes", "table"]),
    (pick, ["short", "ints"]), (best_window, ["rows", "ints"]), (scanned_peak, ["rows"]),
    (scanned_ints, ["introws"]), (emas, ["rows"])])
def test_kernels_pass_the_mosaic_lowering_rules(lane, kinds, monkeypatch):
    """Each kernel lowered for a TPU on this machine (jax.export for platform "tpu"): every
    primitive it uses has a Mosaic lowering rule (Mosaic's own compiler runs on a chip only)."""
    from lanewise.backends import tpu

    p = prices(series=300, steps=12)
    given = {"rows": p, "lanes": p[:, 0].copy(), "table": np.ones(4, np.float32), "short": p[:, :10].copy(),
             "ints": np.arange(300, dtype=np.int32) % 10, "introws": (p * 10).astype(np.int32)}
    args = [given[k] for k in kinds]
    axes = tuple(None if k == "table" else 0 for k in kinds)
    monkeypatch.setattr(tpu, "_interpret", lambda: False)
    call = tpu.bind_call(lw.vmap(lane, in_axes=axes), tuple(args), {})
    text = tpu.build(call).lowered(call)
    assert text.count("tpu_custom_call") == 1


def ema(level, x):
    level = 0.5 * level + 0.5 * x
    return level, (level, x > level)


def test_stacked_ys_are_row_results_in_out_axes_order():
    p = prices(series=300, steps=7)

    def both(p):
        return lw.scan(ema, p[0], p)

    def backwards(p):
        return lw.scan(ema, p[-1], p, reverse=True)[1][0]

    assert_match(on_tpu(both, p), reference(both, p))
    got = lw.vmap(backwards, out_axes=1, backend="tpu")(p)
    assert got.shape == (7, 300)
    assert_match(got, lw.vmap(backwards, out_axes=1, backend="python")(p))


@settings(max_examples=4, deadline=None)
@given(series=st.integers(1, 300), steps=st.integers(1, 9), reverse=st.booleans(), seed=st.integers(0, 99))
def test_scans_of_any_length_and_lane_count_match_the_reference(series, steps, reverse, seed):
    """Rows shorter than an unrolled round, a single lane, partial tiles: carry and ys."""
    p = prices(series=series, steps=steps, seed=seed)

    def lane(p):
        return lw.scan(ema, p[0], p, reverse=reverse)

    assert_match(on_tpu(lane, p), reference(lane, p))
