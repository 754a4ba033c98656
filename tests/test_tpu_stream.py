"""backend="tpu": rows too long for VMEM stream through a window (rows.Streamed), in interpret mode.

The tests lower ``rows.BUDGET`` to 256 planes and ``rows.WINDOW`` to 64, so that rows of a
few hundred steps stream in several chunks with a partial last one.  Each lane's streamed
result must equal the same kernel's with the rows whole in VMEM (bitwise: the same
arithmetic, only the reads differ) and match the reference backend (``backend="python"``).
"""

from __future__ import annotations

import numpy as np
import pytest

jax = pytest.importorskip("jax")

import lanewise as lw  # noqa: E402
from lanewise.backends import tpu  # noqa: E402
from lanewise.backends.tpu import rows  # noqa: E402
from test_tpu_backend import interpreted, assert_match, reference  # noqa: E402

from benchmarks.w3_backtest import setup, step  # noqa: E402

#: Planes that fit whole (per lane, in all) and the window, lowered for the tests.
MOST, WINDOW = 256, 64
#: Lanes of two (8, 128) tiles, the second partial; steps of four whole windows and a partial one.
SERIES, STEPS = 1024 + 300, 300


@pytest.fixture(autouse=True)
def interpret():
    with interpreted(tpu_tile=(8, 128), tpu_unroll=4):
        yield


def prices(series=SERIES, steps=STEPS, seed=3):
    return setup(series, seed=seed, steps=steps)[0].astype(np.float32)


def windows(lane, *args):
    """The windows of ``lane``'s arguments as a vmap over axis 0 would stream them."""
    call = tpu.bind_call(lw.vmap(lane), tuple(args), {})
    return tpu.build(call).windows(call)[0]


def drains(lane, *args):
    """The windows of ``lane``'s row results (a scan's stacked ys) as a vmap over axis 0 would stream them."""
    call = tpu.bind_call(lw.vmap(lane), tuple(args), {})
    executable = tpu.build(call)
    where, fn, values = executable.prepared(call)
    return executable.windows(call, tuple(s.shape[0] for s in fn.types(where, *values)[0] if s.ndim == 3))[1]


def streamed(monkeypatch, lane, *args, vmap=lw.vmap, expect=None, drained=None):
    """``lane``'s results with its rows streamed: bitwise those with the rows whole, and
    matching the reference; ``expect``: the windows the arguments must stream with,
    ``drained``: those of the row results."""
    whole = vmap(lane, backend="tpu")(*args)
    with monkeypatch.context() as m:
        m.setattr(rows, "BUDGET", MOST * 2 * 8 * 128 * 4)
        m.setattr(rows, "WINDOW", WINDOW)
        if expect is not None:
            assert windows(lane, *args) == expect
        if drained is not None:
            assert drains(lane, *args) == drained
        got = vmap(lane, backend="tpu")(*args)
    for g, w in zip(jax.tree.leaves(got), jax.tree.leaves(whole), strict=True):
        np.testing.assert_array_equal(np.asarray(g), np.asarray(w))
    assert_match(got, vmap(lane, backend="python")(*args))
    return got


def scrambled(p):
    """Reads in a random order: most reads fetch another chunk."""
    s = 0.0
    n = len(p)
    for t in range(n):
        s = s * 0.5 + p[(7 * t) % n]
    return s


def test_a_row_read_in_a_random_order_streams_in_chunks(monkeypatch):
    streamed(monkeypatch, scrambled, prices(), expect=(WINDOW,))


def crossed(p, q):
    """Two streamed rows of different lengths, one read forwards, the other backwards, and literals."""
    s = p[-1] - q[0]
    for t in range(len(q)):
        s = s * 0.75 + p[t + 50] * q[len(q) - 1 - t]
    return s + p[3]


def test_two_rows_stream_each_through_its_window(monkeypatch):
    streamed(monkeypatch, crossed, prices(), prices(steps=230, seed=5), expect=(WINDOW, WINDOW))


def early(p, level):
    """Nested loops leaving early per lane, then reads after the loop."""
    s = 0.0
    n = len(p)
    for t in range(n):
        for k in range(3):
            s += p[(t + 100 * k) % n] - p[t] * 0.5
        if s > level:
            break
    return s + p[n - 1] * 0.5 + p[17]


def test_nested_loops_and_early_exits_read_streamed_rows(monkeypatch):
    p = prices()
    level = np.random.default_rng(1).uniform(0.0, 3.0, SERIES).astype(np.float32)
    streamed(monkeypatch, early, p, level, expect=(WINDOW, None))


def w3(p):
    return lw.scan(step, (p[0], p[0], 0.0, 0.0, p[0]), p)[0][3]


def peaks(carry, x):
    level, peak = carry
    level = level * 0.9 + x
    return (level, max(level, peak)), None


def backwards(p):
    return lw.scan(peaks, (0.0, p[-1]), p, reverse=True)[0]


def test_scans_forwards_and_backwards_over_a_streamed_row(monkeypatch):
    p = prices()
    streamed(monkeypatch, w3, p, expect=(WINDOW,))
    streamed(monkeypatch, backwards, p)


def int_step(total, x):
    return total + x * (x % 3), None


def ints(k):
    return lw.scan(int_step, k[0] * 0, k)[0]


def test_int_rows_stream_exactly(monkeypatch):
    k = np.random.default_rng(2).integers(-50, 50, (SERIES, STEPS)).astype(np.int32)
    streamed(monkeypatch, ints, k, expect=(WINDOW,))


def flags(b):
    count = 0
    n = len(b)
    for t in range(n):
        if b[(3 * t) % n]:
            count += t
    return count


def test_bool_rows_stream_as_int32_and_read_as_bools(monkeypatch):
    b = np.random.default_rng(4).uniform(size=(SERIES, STEPS)) < 0.3
    streamed(monkeypatch, flags, b, expect=(WINDOW,))


def test_a_plane_of_lanes_streams_its_edge_tiles(monkeypatch):
    """A (2, 130) plane: the edge tiles hang over the plane's columns, which the streamed rows pad."""
    cube = prices(series=2 * 130).reshape(2, 130, STEPS)
    streamed(monkeypatch, w3, cube, vmap=lambda f, backend: lw.vmap(lw.vmap(f), backend=backend))


def test_rows_that_fit_whole_do_not_stream(monkeypatch):
    monkeypatch.setattr(rows, "BUDGET", MOST * 2 * 8 * 128 * 4)
    monkeypatch.setattr(rows, "WINDOW", WINDOW)
    short = prices(steps=200)
    assert windows(crossed, short, prices(steps=40)) == (None, None)  # 240 planes fit
    assert windows(crossed, short, prices(steps=60)) == (WINDOW, None)  # 260 do not: the long one streams


def test_a_default_budget_streams_rows_longer_than_vmem_holds():
    p = prices(series=3, steps=9000)
    assert windows(w3, p) == (rows.WINDOW,)
    assert_match(lw.vmap(w3, backend="tpu")(p), reference(w3, p))


def ema(level, x):
    level = 0.5 * level + 0.5 * x
    return level, (level, x > level)


def emas(p):
    return lw.scan(ema, p[0], p)


def backwards_ys(p):
    return lw.scan(ema, p[-1], p, reverse=True)[1]


def test_stacked_ys_stream_out_forwards_and_backwards(monkeypatch):
    p = prices()
    got = streamed(monkeypatch, emas, p, expect=(WINDOW,), drained=(WINDOW, WINDOW))
    assert got[1][0].shape == (SERIES, STEPS) and got[1][1].dtype == np.bool_
    streamed(monkeypatch, backwards_ys, p)
    cube = prices(series=2 * 130).reshape(2, 130, STEPS)  # edge tiles: the streamed results are padded too
    streamed(monkeypatch, backwards_ys, cube, vmap=lambda f, backend: lw.vmap(lw.vmap(f), backend=backend))


def test_too_many_long_rows_are_refused_with_the_limit(monkeypatch):
    monkeypatch.setattr(rows, "BUDGET", MOST * 2 * 8 * 128 * 4)
    monkeypatch.setattr(rows, "WINDOW", WINDOW)

    def many(a, b, c, d, e):
        return a[0] + b[0] + c[0] + d[0] + e[0]

    with pytest.raises(lw.BackendError, match=f"longer than {WINDOW} values through a window of {WINDOW}: at most "
                                              f"{MOST} values per lane in all, and these rows need {5 * WINDOW}"):
        lw.vmap(many, backend="tpu")(*[prices()] * 5)


def test_a_streamed_kernel_passes_the_mosaic_lowering_rules(monkeypatch):
    """The DMAs, the window and the chunk held in scalar memory lower for a TPU on this
    machine (jax.export for platform "tpu"); Mosaic's own compiler runs on a chip only."""
    monkeypatch.setattr(rows, "BUDGET", MOST * 2 * 8 * 128 * 4)
    monkeypatch.setattr(rows, "WINDOW", WINDOW)
    monkeypatch.setattr(tpu, "_interpret", lambda: False)
    for lane, args in [(w3, (prices(),)), (early, (prices(), prices()[:, 0].copy())), (backwards_ys, (prices(),))]:
        call = tpu.bind_call(lw.vmap(lane), args, {})
        assert tpu.build(call).lowered(call).count("tpu_custom_call") == 1


def test_a_reduction_and_explain_of_a_map_over_streamed_rows(monkeypatch):
    monkeypatch.setattr(rows, "BUDGET", MOST * 2 * 8 * 128 * 4)
    monkeypatch.setattr(rows, "WINDOW", WINDOW)
    p = prices()
    f = lw.vmap(w3, backend="tpu")
    total = lw.reduce(f, "sum")(p)
    np.testing.assert_allclose(float(total), float(np.sum(reference(w3, p))), rtol=1e-4, atol=1e-4)
    assert "dma_start" in str(lw.explain(f, p))


def swings(rate, p):
    s = 0.0
    for i in range(len(p)):
        s = s * 0.9 + p[i] * rate * rate
    return s


def test_a_derivative_along_a_scalar_reads_a_streamed_row(monkeypatch):
    rate = np.random.default_rng(7).uniform(0.5, 2.0, SERIES).astype(np.float32)
    streamed(monkeypatch, lw.grad(swings), rate, prices(), expect=(None, WINDOW))
