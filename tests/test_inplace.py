"""Per-lane array outputs: written straight into the output slice, no per-lane allocation."""

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


@pytest.mark.parametrize("lane, expected", [(filled, True), (full_like_lane, True),
                                            (two_allocs, False), (expression, False)])
def test_which_lanes_are_rewritten(lane, expected):
    assert (rewrite(lane) is not None) == expected


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
