"""Per-lane array outputs: written straight into the output slice, no per-lane allocation."""

import inspect
import traceback

import numpy as np
import pytest

import lanewise as lw
from lanewise.lane.inplace import rewrite


def filled(x):
    v = np.zeros(5)
    for i in range(5):
        v[i] = x * i
    return v


def full_like_lane(row, c):
    v = np.full_like(row, c)
    v[0] = row.sum()
    return v


def two_allocs(x):  # reassigned: must keep the ordinary path
    v = np.zeros(3)
    if x > 0:
        v = np.ones(3)
    return v


def expression(x):  # not built by a constructor: ordinary path
    return np.arange(4) * x


def growing(x):
    v = np.zeros(int(x) + 1)
    return v


def kw_full(x, n):
    v = np.full(n, fill_value=x)
    v[0] = -1.0
    return v


def shaped(x, n, /, scale=2.0):
    v = np.empty((n, 2))
    v[:, 0] = x * scale
    v[:, 1] = -x
    return v


def ones_like_lane(row):
    out = np.ones_like(row)
    for i in range(1, row.shape[0]):
        out[i] = out[i - 1] * row[i]
    return out


def divides(x, k):
    v = np.zeros(3)
    v[0] = x
    v[1] = 1.0 / k  # the line a ZeroDivisionError names
    return v


def chained(x):  # a = v = ...: two names for the array
    a = v = np.zeros(2)
    a[0] = x
    return v


def nested_store(x):  # assigned inside a branch, not at the top level
    if x > 0:
        v = np.zeros(2)
    else:
        v = np.ones(2)
    return v


def two_names(x):
    v, w = np.zeros(2), np.ones(2)
    return v if x > 0 else w


def returns_other(x):
    v = np.zeros(2)
    if x > 0:
        return np.ones(2)
    return v


def bare_return(x):
    v = np.zeros(2)
    if x > 0:
        return
    return v


def with_lambda(x):
    v = np.zeros(2)
    f = lambda t: t + 1  # noqa: E731
    v[0] = f(x)
    return v


def keyword_only(x, *, k=1.0):
    v = np.zeros(2)
    v[0] = x * k
    return v


def star_args(x, *rest):
    v = np.zeros(2)
    v[0] = x
    return v


def fills_missing(x):
    v = np.full(3)  # no fill value: not NumPy's call
    return v


def loop_bound(x):
    for _ in range(2):
        v = np.zeros(2)
    return v


def other_keyword(x):
    v = np.zeros(2, order="F")
    return v


def not_numpy(x):
    v = list([0.0, x])
    return v


@pytest.mark.parametrize("lane, expected", [
    (filled, True), (full_like_lane, True), (kw_full, True), (shaped, True), (ones_like_lane, True),
    (divides, True), (growing, True), (two_allocs, False), (expression, False), (chained, False),
    (nested_store, False), (two_names, False), (returns_other, False), (bare_return, False),
    (with_lambda, False), (keyword_only, False), (star_args, False), (fills_missing, False),
    (loop_bound, False), (other_keyword, False), (not_numpy, False), ((lambda x: np.zeros(2)), False)],
    ids=lambda v: getattr(v, "__name__", None))
def test_which_lanes_are_rewritten(lane, expected):
    assert (rewrite(lane) is not None) == expected


@pytest.mark.parametrize("lane, args, shape, expected", [
    (filled, (2.0,), 5, [0.0, 2.0, 4.0, 6.0, 8.0]),
    (full_like_lane, (np.arange(4.0), 3.0), 4, [6.0, 3.0, 3.0, 3.0]),
    (kw_full, (1.5, 3), 3, [-1.0, 1.5, 1.5]),
    (ones_like_lane, (np.arange(1.0, 5.0),), 4, [1.0, 2.0, 6.0, 24.0]),
    (shaped, (0.5, 2), (2, 2), [[1.0, -0.5], [1.0, -0.5]]),
    (shaped, (0.5, 2, 4.0), (2, 2), [[2.0, -0.5], [2.0, -0.5]]),
])
def test_the_rewritten_lane_fills_the_slice_it_is_given(lane, args, shape, expected):
    out = np.full(shape, 99.0)  # the constructor's fill, not what the slice held
    assert rewrite(lane)(*args, __lw_out=out) is out
    np.testing.assert_array_equal(out, expected)
    assert rewrite(lane, returns_array=False)(*args, __lw_out=np.full(shape, 99.0)) is True
    assert rewrite(lane).__defaults__ == (*(lane.__defaults__ or ()), None)


@pytest.mark.parametrize("out", [np.zeros(4), np.zeros((5, 1)), np.zeros((2, 5))])
def test_a_slice_of_another_shape_raises(out):
    with pytest.raises(ValueError, match="lane output shape changed"):
        rewrite(filled)(1.0, __lw_out=out)
    with pytest.raises(ValueError, match="lane output shape changed"):
        rewrite(shaped)(1.0, 3, __lw_out=out)


def test_an_error_in_a_rewritten_lane_names_the_users_file_and_line():
    with pytest.raises(ZeroDivisionError) as got:
        rewrite(divides)(1.0, 0, __lw_out=np.zeros(3))
    frame = traceback.extract_tb(got.value.__traceback__)[-1]
    line = divides.__code__.co_firstlineno + 3
    assert (frame.filename, frame.lineno) == (__file__, line)
    assert "1.0 / k" in inspect.getsourcelines(divides)[0][3]
    lines = {n for _, _, n in rewrite(divides).__code__.co_lines() if n is not None}
    assert lines == {n for _, _, n in divides.__code__.co_lines() if n is not None}


def test_inplace_kernel_matches_reference_and_does_not_store():
    x = np.linspace(-1, 1, 1001)
    mapped = lw.vmap(filled)
    text = lw.explain(mapped, x)
    assert "lane_inplace(" in text.source and "__lw_out=o0[i0, :]" in text.source
    np.testing.assert_array_equal(mapped(x), lw.vmap(filled, backend="python")(x))


def test_inplace_with_out_axes_and_row_views():
    rows = np.arange(12.0).reshape(4, 3)
    mapped = lw.vmap(full_like_lane, in_axes=(0, None), out_axes=1)
    expected = lw.vmap(full_like_lane, in_axes=(0, None), out_axes=1, backend="python")(rows, 7.0)
    np.testing.assert_array_equal(mapped(rows, 7.0), expected)
    assert mapped(rows, 7.0).shape == (3, 4)


def test_ordinary_path_still_correct():
    x = np.arange(6.0)
    np.testing.assert_array_equal(lw.vmap(two_allocs)(x - 2), lw.vmap(two_allocs, backend="python")(x - 2))
    np.testing.assert_array_equal(lw.vmap(expression)(x), np.arange(4)[None, :] * x[:, None])


def test_shape_change_between_lanes_is_an_error():
    with pytest.raises(lw.LaneTypeError, match=r"shape \(3,\).*lane 0 returned shape \(1,\)"):
        lw.vmap(growing)(np.array([0.0, 0.0, 2.0]))


def test_code_whose_file_shows_other_source_is_not_rewritten():
    # exec'd with this file's name (as a README block or notebook cell is): inspect
    # would read *this file's* first lines; the compiled-code check refuses them.
    ns = {"np": np}
    exec(compile("def filled(x):\n    v = np.ones(5)\n    v[0] = x\n    return v\n", __file__, "exec"), ns)
    assert rewrite(ns["filled"]) is None
    np.testing.assert_array_equal(lw.vmap(ns["filled"])(np.array([2.0, 3.0])),
                                  [[2.0, 1, 1, 1, 1], [3.0, 1, 1, 1, 1]])


def test_a_one_tuple_holding_an_array_is_not_rewritten():
    """The lane returns a tuple, not its array: the ordinary path (it crashed typing the
    result as one array)."""
    rows = np.arange(6.0).reshape(2, 3)
    (doubled,) = lw.vmap(lambda r: (r * 2.0,))(rows)
    np.testing.assert_array_equal(doubled, rows * 2.0)
