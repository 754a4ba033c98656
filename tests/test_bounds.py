"""Indexing out of bounds inside a lane (issue 14, items 2 and 9).

The semantics, the same on every backend (docs/safety.md, "Indexing"): an index
outside ``[-n, n)`` raises :class:`lanewise.LaneIndexError` (an ``IndexError``)
naming the index, the length, the lane and the user's line; a compiled lane
checks before it reads, so nothing outside the array is read.  Before the fix
the cpu backend returned garbage for a small overshoot and crashed the process
for a large one.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pytest

import lanewise as lw

X = np.arange(12.0).reshape(3, 4)
BACKENDS = ["python", "cpu", "dask"]


def at(row, k):
    return row[k]


def loop_past_end(row):
    s = 0.0
    for i in range(row.shape[0] + 1):
        s += row[i]
    return s


def local_store(row, k):
    a = np.zeros(3)
    a[k] = row[0]
    return a.sum()


def matrix_read(m, i):
    return m[i, 0]


def data_dependent(row):
    k = 0
    while k < row[0] + 1:  # only the lane whose row[0] is large overshoots
        k += 1
    return row[k]


def run(fn, backend, *args, in_axes=0):
    out = lw.vmap(fn, in_axes=in_axes, backend=backend)(*args)
    return np.asarray(out.compute() if hasattr(out, "compute") else out)


def check_error(info, index, size, lane, line):
    e = info.value
    assert isinstance(e, IndexError) and isinstance(e, lw.LanewiseError)
    text = str(e)
    assert f"index {index} is out of bounds" in text and f"size {size}" in text, text
    assert f"lane {lane}" in text and f"test_bounds.py:{line}" in text, text


def line_of(fn, needle):
    import inspect

    lines, first = inspect.getsourcelines(fn)
    return first + next(k for k, s in enumerate(lines) if needle in s)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("k", [4, 5, 1000, -5])
def test_read_out_of_bounds_raises_on_every_backend(backend, k):
    with pytest.raises(lw.LaneIndexError) as info:
        run(at, backend, X, k, in_axes=(0, None))
    check_error(info, k, 4, "i0=0", line_of(at, "row[k]"))


@pytest.mark.parametrize("backend", BACKENDS)
def test_in_bounds_negative_indices_wrap_like_python(backend):
    for k in (-1, -4, 0, 3):
        np.testing.assert_array_equal(run(at, backend, X, k, in_axes=(0, None)), X[:, k])


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn, args, in_axes, index, size, lane, needle", [
    (loop_past_end, (X,), 0, 4, 4, "i0=0", "s += row[i]"),
    (local_store, (X, 3), (0, None), 3, 3, "i0=0", "a[k] = row[0]"),
    (matrix_read, (X, np.array([0, 1, 3])), (None, 0), 3, 3, "i0=2", "m[i, 0]"),
])
def test_loops_stores_and_two_d_indices(backend, fn, args, in_axes, index, size, lane, needle):
    with pytest.raises(lw.LaneIndexError) as info:
        run(fn, backend, *args, in_axes=in_axes)
    check_error(info, index, size, lane, line_of(fn, needle))


@pytest.mark.parametrize("spmd", ["auto", True, False])
def test_the_failing_lane_is_found_inside_an_spmd_group(spmd, monkeypatch):
    """The SPMD path reports the group (or block) that failed: the host finds the lane."""
    monkeypatch.setattr(lw.config, "spmd", spmd)
    x = np.zeros((37, 4))
    x[21, 0] = 9.0
    f = lw.vmap(data_dependent)
    if spmd is True:
        assert "lane path: SPMD" in str(lw.explain(f, x))
    with pytest.raises(lw.LaneIndexError) as info:
        f(x)
    check_error(info, 10, 4, "i0=21", line_of(data_dependent, "return row[k]"))
    x[21, 0] = 2.0
    np.testing.assert_array_equal(f(x), lw.vmap(data_dependent, backend="python")(x))


def table_walk(x, table):
    s, k = 0.0, 0
    while s < x:  # a uniform index (the same k in every live lane): a scalar load
        s += table[k]
        k += 1
    return s + table[int(x) - 2]  # an index that differs between lanes: a gather


@pytest.mark.parametrize("spmd", [True, False])
@pytest.mark.parametrize("x, index, lane, needle", [
    (6.5, 4, "i0=5", "s += table[k]"),  # lane 5 walks past the table's end
    (-3.5, -5, "i0=5", "table[int(x) - 2]"),  # lane 5 gathers below -len
])
def test_a_table_every_lane_shares_is_bounds_checked(spmd, x, index, lane, needle, monkeypatch):
    """A 1-D array passed whole is read on the SPMD path as one table (a scalar load
    at a uniform index, a gather at a lane-dependent one): an index out of bounds in
    a live lane raises the same error as on the scalar path, and nothing is read."""
    monkeypatch.setattr(lw.config, "spmd", spmd)
    table = np.ones(4)
    xs = np.full(11, 2.5)
    xs[5] = x
    f = lw.vmap(table_walk, in_axes=(0, None))
    if spmd:
        assert "v_table(" in lw.explain(f, xs, table).source
    with pytest.raises(lw.LaneIndexError) as info:
        f(xs, table)
    check_error(info, index, 4, lane, line_of(table_walk, needle))
    xs[5] = 1.5
    np.testing.assert_array_equal(f(xs, table), lw.vmap(table_walk, in_axes=(0, None), backend="python")(xs, table))


def test_reductions_raise_the_same_error():
    def lane(row):
        return row[int(row[0]) + 4]

    for backend in ("python", "cpu"):
        with pytest.raises(lw.LaneIndexError, match=r"index 4 is out of bounds.*lane i0=0"):
            lw.reduce(lw.vmap(lane, backend=backend), "sum")(X)


def test_a_huge_index_never_reaches_memory():
    """Before the fix this read 8 GB past the row and killed the process."""
    code = textwrap.dedent("""
        import numpy as np, lanewise as lw
        def lane(row):
            return row[10**9]
        try:
            lw.vmap(lane)(np.ones((100, 4)))
        except lw.LaneIndexError as e:
            print("raised", "index 1000000000" in str(e))
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "raised True"
