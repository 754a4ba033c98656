"""Loop versioning of affine reads in lane loops (lanewise.lane.versioning).

A versioned loop runs unchecked reads ``w[k + c]`` when one test at loop entry
proves them in bounds, the user's checked loop otherwise.  Every result is
compared with the ``python`` backend (which runs the lane as plain Python), every
error with the one Python raises, naming the lane and the user's line.
"""

from __future__ import annotations

import dis
import inspect
import re

import numba
import numpy as np
import pytest
from corpus import examples
from hypothesis import given, settings
from hypothesis import strategies as st

import lanewise as lw
from lanewise.lane import versioning
from lanewise.lane.lanefn import jit_lane
from lanewise.lane.ir.render import render
from lanewise.lane.prefetch import MIN_BYTES, prefetched
from lanewise.lane.versioning import _lw_get, _lw_within, rewritten, versioned

# --------------------------------------------------------------------------- lanes


def gather_sum(start, stop, indices, w, x):
    s = 0.0
    for k in range(start, stop):
        s += w[k] * x[indices[k]]
    return s


def gather_max(start, stop, indices, w, x):
    m = -np.inf
    for k in range(start, stop):
        v = w[k] * x[indices[k]]
        if v > m:
            m = v
    return m


def neighbours(start, stop, w):
    s = 0.0
    for k in range(start, stop):
        s = 0.5 * s + w[k + 1] - w[k - 1]
    return s


def stepped(start, stop, w):
    s = 0.0
    for k in range(start, stop, 3):
        s = 0.5 * s + w[k] * k
    return s


def shifted(start, stop, c, w):
    s = 0.0
    for k in range(start, stop):
        s = 0.5 * s + w[k + c] - w[c + k] * w[k - c] + w[k + c - 1]  # the last: not affine, checked
    return s


def early_exit(start, stop, w, limit):
    """``break``/``continue`` in a versioned loop, and ``k`` read after it."""
    s, k = 0.0, -1
    for k in range(start, stop):
        if w[k] > limit:
            break
        if w[k] < 1.0:
            continue
        s += w[k]
    return s + 1000.0 * k


def local_list(n):
    """A read from a list: versioned in the source, checked (the only getitem) when compiled."""
    vals = [1.0, 2.0, 4.0, 8.0]
    s = 0.0
    for k in range(n):
        s += vals[k]
    return s


def rows(start, stop, m):
    """A 2-D array: ``m[k, 0]`` is not versioned; ``m[k][1]`` is, and stays a checked row read."""
    s = 0.0
    for k in range(start, stop):
        s += m[k, 0] + m[k][1]
    return s


def csr_rows(i, indptr, indices, w, x):
    """Range bounds that are expressions: each is evaluated once."""
    s = 0.0
    for k in range(indptr[i], indptr[i + 1]):
        s += w[k] * x[indices[k]]
    return s


def run(fn, in_axes, *args, backend="cpu"):
    return lw.vmap(fn, in_axes=in_axes, backend=backend)(*args)


def same_as_python(fn, in_axes, *args):
    np.testing.assert_array_equal(run(fn, in_axes, *args), run(fn, in_axes, *args, backend="python"))


def _csr(seed=0, nodes=12, n_x=30):
    rng = np.random.default_rng(seed)
    indptr = np.concatenate([[0], np.cumsum(rng.integers(0, 5, nodes))])
    return indptr, rng.integers(0, n_x, indptr[-1]), rng.random(indptr[-1]), rng.random(n_x)


GATHER = (0, 0, None, None, None)

# --------------------------------------------------------------------------- (a) results


@pytest.mark.parametrize("lane", [gather_sum, gather_max])
@pytest.mark.parametrize("variant", ["contiguous", "strided", "int32 ranges", "uint64 ranges", "big x"])
def test_gathers_match_python(lane, variant):
    """Empty segments, strided arrays (the unchecked load uses the stride), narrow and
    unsigned ranges, an ``x`` large enough to be prefetched (prefetch in both copies)."""
    indptr, indices, w, x = _csr()
    if variant == "strided":
        w, indices = np.repeat(w, 2)[::2], np.repeat(indices, 2)[::2]
    elif variant == "int32 ranges":
        indptr = indptr.astype(np.int32)
    elif variant == "uint64 ranges":
        indptr = indptr.astype(np.uint64)
    elif variant == "big x":
        x = np.random.default_rng(1).random(MIN_BYTES // 8 + 9)
    same_as_python(lane, GATHER, indptr[:-1], indptr[1:], indices, w, x)


def test_offsets_steps_and_empty_ranges_match_python():
    w = np.arange(1.0, 11.0) ** 1.5
    starts = np.array([1, 1, 5, 8, 3, 9, 4])
    stops = np.array([9, 1, 3, 9, 9, 4, 5])  # empty (1, 1) and reversed (5, 3) ranges
    same_as_python(neighbours, (0, 0, None), starts, stops, w)
    same_as_python(stepped, (0, 0, None), starts - 1, stops + 1, w)
    same_as_python(shifted, (0, 0, None, None), starts - 1, stops - 1, 1, w)


def test_a_negative_start_wraps_around_as_in_python():
    """``range(-3, 2)`` reads w[-3], w[-2], w[-1], w[0], w[1]: the checked copy runs."""
    w = np.arange(1.0, 11.0) ** 2
    starts, stops = np.array([-3, -10, -4, 0]), np.array([2, -5, 0, 10])
    got = run(neighbours, (0, 0, None), starts + 1, stops - 1, w)
    np.testing.assert_array_equal(got, run(neighbours, (0, 0, None), starts + 1, stops - 1, w, backend="python"))
    got = run(stepped, (0, 0, None), starts, stops, w)
    assert got[0] == 0.5 * (w[-3] * -3.0) + w[0] * 0.0
    np.testing.assert_array_equal(got, run(stepped, (0, 0, None), starts, stops, w, backend="python"))


def test_break_continue_and_the_loop_variable_after_the_loop():
    w = np.array([2.0, 0.5, 3.0, 9.0, 1.5, 4.0])
    same_as_python(early_exit, (0, 0, None, None), np.array([0, 0, 4, 3, 2]), np.array([6, 0, 6, 2, 6]), w, 5.0)


def test_lists_and_two_d_arrays_compile_as_before():
    """What ``_lw_within`` cannot prove (a list, a 2-D array) takes the checked copy."""
    same_as_python(local_list, 0, np.array([0, 1, 4]))
    m = np.arange(24.0).reshape(8, 3)
    same_as_python(rows, (0, 0, None), np.array([0, 2, -3]), np.array([8, 5, 0]), m)


def test_bounds_that_are_expressions():
    indptr, indices, w, x = _csr(3)
    same_as_python(csr_rows, (0, None, None, None, None), np.arange(indptr.size - 1), indptr, indices, w, x)


# --------------------------------------------------------------------------- (b) errors


def line_of(fn, needle):
    lines, first = inspect.getsourcelines(fn)
    return first + next(i for i, s in enumerate(lines) if needle in s)


def check_error(info, index, size, lane, fn, needle):
    text = str(info.value)
    assert isinstance(info.value, IndexError), text
    assert f"index {index} is out of bounds" in text and f"size {size}" in text, text
    assert f"lane {lane} of {fn.__qualname__}" in text, text
    assert f"test_versioning.py:{line_of(fn, needle)}: {needle}" in text, text


@pytest.mark.parametrize("lane", [gather_sum, gather_max])
def test_errors_name_the_lane_and_the_users_line(lane):
    indptr, indices, w, x = _csr(4)
    n = w.size
    starts, stops = indptr[:-1].copy(), indptr[1:].copy()
    read = "s += w[k] * x[indices[k]]" if lane is gather_sum else "v = w[k] * x[indices[k]]"
    stops[5] = n + 1  # past the end: the checked copy
    with pytest.raises(lw.LaneIndexError) as info:
        run(lane, GATHER, starts, stops, indices, w, x)
    check_error(info, n, n, "i0=5", lane, read)
    stops[5], starts[7] = indptr[6], -n - 1  # below -len: the checked copy
    stops[7] = max(stops[7], 1)
    with pytest.raises(lw.LaneIndexError) as info:
        run(lane, GATHER, starts, stops, indices, w, x)
    check_error(info, -n - 1, n, "i0=7", lane, read)
    starts[7] = indptr[7]
    bad = indices.copy()
    bad[indptr[9]] = x.size  # a bad index value, in a range the fast copy runs
    assert indptr[10] > indptr[9]
    with pytest.raises(lw.LaneIndexError) as info:
        run(lane, GATHER, starts, stops, bad, w, x)
    check_error(info, x.size, x.size, "i0=9", lane, read)


def test_an_offset_past_the_end_raises():
    w = np.arange(6.0)
    with pytest.raises(lw.LaneIndexError) as info:
        run(neighbours, (0, 0, None), np.array([1, 1]), np.array([5, 6]), w)
    check_error(info, 6, 6, "i0=1", neighbours, "s = 0.5 * s + w[k + 1] - w[k - 1]")


def float_subscripted(n, x):
    s = 0.0
    for k in range(n):
        s += x[k]
    return s


def test_a_subscript_that_does_not_type_reads_as_before():
    """The user's loop comes first in the rewrite, so Numba reports its getitem, not _lw_get."""
    with pytest.raises(lw.LaneCompileError) as info:
        run(float_subscripted, (0, None), np.arange(3), 2.0)
    text = str(info.value)
    assert f"test_versioning.py\", line {line_of(float_subscripted, 's += x[k]')}" in text, text
    assert "getitem(float64, int64)" in text and "_lw_get" not in text, text


# --------------------------------------------------------------------------- (c) structure


def _unparsed(fn) -> str | None:
    lane = versioned(fn)
    return None if lane is None else render(lane).rstrip()


def test_the_rewritten_source():
    assert _unparsed(neighbours) == inspect.cleandoc('''
        def neighbours(start, stop, w):
            s = 0.0
            if not (_lw_within(w, start, stop, 1, 1) and _lw_within(w, start, stop, 1, (-1))):
                for k in range(start, stop):
                    s = ((0.5 * s) + w[k + 1]) - w[k - 1]
            else:
                for k in range(start, stop):
                    s = ((0.5 * s) + _lw_get(w, k + 1)) - _lw_get(w, k - 1)
            return s''')


def _guards(fn) -> list[str]:
    """The guards of the versioned loops, as written (``(-1)``: a negative literal)."""
    return re.findall(r"_lw_within\([^()]*(?:\(-1\))?\)", _unparsed(fn) or "")


def test_which_reads_are_guarded():
    assert _guards(gather_sum) == ["_lw_within(w, start, stop, 0, 1)", "_lw_within(indices, start, stop, 0, 1)"]
    # w[k + c] and w[c + k]: one guard; w[k + c - 1] is not of the form k + c: checked
    assert _guards(shifted) == ["_lw_within(w, start, stop, c, 1)", "_lw_within(w, start, stop, c, (-1))"]
    assert _guards(stepped) == ["_lw_within(w, start, stop, 0, 1)"]
    assert _guards(rows) == ["_lw_within(m, start, stop, 0, 1)"]  # m[k][1]; m[k, 0] is not affine


def test_bounds_are_evaluated_once():
    text = _unparsed(csr_rows)
    assert text.count("indptr[i + 1]") == 1 and text.count("indptr[i]") == 1, text
    assert "_lw_start1 = indptr[i]" in text and "range(_lw_start1, _lw_stop1)" in text, text


def reassigned_array(n, w):
    s = 0.0
    for k in range(n):
        s += w[k]
        w = w[1:]
    return s


def reassigned_offset(n, w, c):
    s = 0.0
    for k in range(n):
        s += w[k + c]
        c = 0
    return s


def reassigned_k(n, w):
    s = 0.0
    for k in range(n):
        k = k // 2
        s += w[k]
    return s


def not_a_range(w):
    s = 0.0
    for v in w:
        s += v
    return s


def backwards(n, w):
    s = 0.0
    for k in range(n - 1, -1, -1):
        s += w[k]
    return s


def variable_step(n, w, step):
    s = 0.0
    for k in range(0, n, step):
        s += w[k]
    return s


def with_else(n, w):
    s = 0.0
    for k in range(n):
        s += w[k]
    else:
        s += 1.0
    return s


def stores_only(n, out):
    for k in range(n):
        out[k] = 1.0
    return n


def matrix_only(n, m):
    s = 0.0
    for k in range(n):
        s += m[k, 0] + m[0, k]
    return s


def scaled_index(n, w):
    s = 0.0
    for k in range(n):
        s += w[2 * k] + w[k * 1]
    return s


def comprehension_inside(n, w):
    s = 0.0
    for k in range(n):
        s += w[k] + sum([j for j in range(3)])
    return s


def nested(n, m, w):
    s = 0.0
    for i in range(n):
        for k in range(n):
            s += w[k] * m[i, k]
        s += w[i]
    return s


@pytest.mark.parametrize("fn", [reassigned_array, reassigned_offset, reassigned_k, not_a_range, backwards,
                                variable_step, with_else, stores_only, matrix_only, scaled_index,
                                comprehension_inside])
def test_loops_left_as_written(fn):
    assert versioned(fn) is None


def test_only_the_innermost_loop_is_versioned():
    assert _guards(nested) == ["_lw_within(w, 0, n, 0, 1)"]
    assert "s += w[i]" in _unparsed(nested)  # the outer loop's read stays checked


def test_lines_stay_the_users_and_both_copies_prefetch():
    rewrite = rewritten(gather_sum)
    assert rewrite.versioned
    code = rewrite.code
    assert code.co_filename == __file__ and code.co_firstlineno == gather_sum.__code__.co_firstlineno
    assert {line for _, _, line in code.co_lines() if line} <= {line for _, _, line in gather_sum.__code__.co_lines()}
    loads = [i.argval for i in dis.get_instructions(code) if i.opname == "LOAD_GLOBAL"]
    assert loads.count("_lw_prefetch") == 2 and loads.count("_lw_get") == 2, loads


def scatter_add(n, idx, x, out):
    """``out[idx[k]] += x[k]``: the store's own read of ``out`` is not a read to guard or prefetch."""
    for k in range(n):
        out[idx[k]] += x[k]
    return n


def shared_value(n, w):
    """``a = b = w[k]``: one read, in both copies."""
    s = 0.0
    for k in range(n):
        a = b = w[k]
        s += a * b
    return s


def smoothed_sum(row, alpha, n):
    """A scan step closing over ``alpha`` (lifted: lane.closures) beside a versioned loop."""
    def step(c, v):
        return alpha * v + (1 - alpha) * c, c

    s = 0.0
    for k in range(n):
        s += row[k]
    return lw.scan(step, 0.0, row)[0] + s


def filled(n, w):
    """``np.full`` is a function NumPy writes in Python: the rewrite still calls it as ``np.full``."""
    acc = np.full(2, 0.5)
    for k in range(n):
        acc[0] += w[k]
    return acc[0]


def test_a_module_function_stays_called_through_its_module():
    rewrite = rewritten(filled)
    assert rewrite.versioned and rewrite.globals == {} and "full" not in {
        i.argval for i in dis.get_instructions(rewrite.code) if i.opname == "LOAD_GLOBAL"}
    same_as_python(filled, (0, None), np.array([0, 2, 5]), np.arange(5.0))


def test_augmented_stores_and_shared_values_are_rewritten_as_written():
    assert _guards(scatter_add) == ["_lw_within(idx, 0, n, 0, 1)", "_lw_within(x, 0, n, 0, 1)"]
    assert "out[_lw_get(idx, k)] += _lw_get(x, k)" in _unparsed(scatter_add)
    assert prefetched(scatter_add) is None
    assert "a = b = _lw_get(w, k)" in _unparsed(shared_value)
    idx, x, out, expected = np.array([1, 2, 1]), np.array([1.0, 2.0, 4.0]), np.zeros(4), np.zeros(4)
    jit_lane(scatter_add)(3, idx, x, out)  # the compiled (rewritten) lane, called once
    np.add.at(expected, idx, x)
    np.testing.assert_array_equal(out, expected)
    same_as_python(shared_value, (0, None), np.array([0, 2, 5]), np.arange(5.0))


def test_a_lifted_scan_step_and_a_versioned_loop_in_one_lane():
    rewrite = rewritten(smoothed_sum)
    assert rewrite is not None and rewrite.versioned and "_lw_uncapture" in rewrite.code.co_names
    rows_ = np.random.default_rng(2).random((5, 6))
    same_as_python(smoothed_sum, (0, 0, None), rows_, np.linspace(0.1, 0.9, 5), 4)


def test_a_versioned_lane_is_inlined_into_its_caller(monkeypatch):
    assert jit_lane(gather_sum).targetoptions.get("forceinline") is True
    assert "forceinline" not in jit_lane(not_a_range).targetoptions  # nothing versioned
    monkeypatch.setattr(versioning, "VERSIONING", False)
    rewrite = rewritten(gather_sum)  # prefetching only
    assert not rewrite.versioned and "_lw_within" not in rewrite.code.co_names


# --------------------------------------------------------------------------- the intrinsics


@numba.njit
def _within(a, start, stop, shift, sign):
    return _lw_within(a, start, stop, shift, sign)


@numba.njit
def _get_all(a):
    return [_lw_get(a, i) for i in range(len(a))]


@settings(max_examples=examples(60))
@given(st.integers(-12, 12), st.integers(-12, 12), st.integers(-4, 4), st.sampled_from([1, -1]))
def test_within_is_exactly_every_index_in_bounds(start, stop, shift, sign):
    """The guard holds exactly when every ``k + sign * shift`` of the range indexes
    the array without wrapping (a step-1 range: no false negatives either)."""
    a = np.zeros(9)[::1]
    want = all(0 <= k + sign * shift < a.size for k in range(start, stop))
    assert _within(a, start, stop, shift, sign) is want
    assert _within(np.zeros(18)[::2], np.uint8(max(start, 0)), np.uint8(max(stop, 0)), shift, sign) is \
        all(0 <= k + sign * shift < a.size for k in range(max(start, 0), max(stop, 0)))


def test_within_without_overflow_and_for_other_types():
    a = np.zeros(9)
    big = np.int64(2**63 - 1)
    assert not _within(a, 0, big, 1, 1)  # stop + 1 overflows int64: computed in 128 bits
    assert not _within(a, np.uint64(0), np.uint64(2**64 - 1), 1, -1)
    assert _within(a, big, big, 1, 1)  # empty
    assert _within(a, np.uint64(0), np.uint64(9), np.uint64(0), 1)
    assert not _within(np.zeros((9, 2)), 0, 3, 0, 1)  # 2-D: the checked copy
    assert not _within(a, np.int64(0), np.uint64(3), 0, 1)  # mixed signedness (Numba reinterprets)
    assert not _within((1.0, 2.0), 0, 1, 0, 1)  # not an array


def test_unchecked_loads_read_what_getitem_reads():
    base = np.arange(20, dtype=np.int32) * 3
    for a in (base, base[::3], base[::-2], base.reshape(4, 5)[:, 1], np.arange(6) % 2 == 0):
        assert _get_all(a) == list(a)
    np.testing.assert_array_equal(_get_all(base.reshape(4, 5))[2], base.reshape(4, 5)[2])  # rows: getitem


# --------------------------------------------------------------------------- (d) properties


def _outcome(fn, in_axes, args, backend):
    try:
        return "ok", np.asarray(run(fn, in_axes, *args, backend=backend))
    except lw.LaneIndexError as e:
        return "raised", str(e)


W = np.arange(1.0, 11.0) ** 1.5
bound = st.integers(-14, 14)


@settings(max_examples=examples(40))
@given(st.lists(st.tuples(bound, bound), min_size=1, max_size=4), st.integers(-6, 6),
       st.sampled_from([shifted, neighbours, stepped]))
def test_random_ranges_and_offsets_match_python(ranges, c, lane):
    """In and out of range, below zero and past the end: the same result or the same error."""
    starts, stops = (np.array(v, dtype=np.int64) for v in zip(*ranges, strict=True))
    if lane is shifted:
        args, in_axes = (starts, stops, c, W), (0, 0, None, None)
    else:
        args, in_axes = (starts, stops, W), (0, 0, None)
    got, want = _outcome(lane, in_axes, args, "cpu"), _outcome(lane, in_axes, args, "python")
    assert got[0] == want[0], (got, want)
    if got[0] == "ok":
        np.testing.assert_array_equal(got[1], want[1])
    else:
        assert got[1] == want[1]
