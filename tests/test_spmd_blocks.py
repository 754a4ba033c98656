"""Block reads of per-lane rows and lockstep loops on the SPMD path.

* ``row[k]`` at an index every lane shares reads W rows' next W elements at once
  and transposes them (:func:`lanewise.spmd.rows.v_row`); strided rows, short rows
  and indices that differ between lanes gather.  Every layout and dtype must give
  the scalar path's results bit for bit.
* A loop whose test is uniform and which no break/continue leaves runs its body in
  every live lane (:mod:`lanewise.spmd.uniform`, which asks the lane IR's
  :mod:`lanewise.lane.ir.passes.varying`): its stores need no select.  A
  wrong judgement must cost the SPMD path, never a result.
"""

from __future__ import annotations

import importlib

import numpy as np
import pytest

import lanewise as lw
from lanewise import spmd
from lanewise.spmd.transform import transform
from lanewise.lane.ir import nodes as ir
from lanewise.lane.ir.build import build, function_ir
from lanewise.lane.ir.passes.varying import uniform_names
from lanewise.lane.ir.passes.walk import walk
from lanewise.spmd.desugar import prepared
from lanewise.spmd.uniform import lockstep_loops
from corpus import benchmark_function
from test_spmd import _compiled, _row_pointers, _walks, assert_bitwise, collatz, lane_path


#: W6: lanes return at different steps of a loop every lane runs in step.
first_pass = benchmark_function("w6_first_pass", "first_pass")


def pairs(row):
    """Two uniform indices a step (k + 1 reaches into the next block), reads under
    a mask (each branch's lanes ask the block for other lanes), one walking
    backwards, and reads after the loop."""
    acc = row[0] - row[0]  # zero in the row's own type
    for k in range(len(row) - 1):
        d = row[k + 1] - row[k]
        if d > 0:
            acc = acc + d * row[k]
        else:
            acc = acc - row[len(row) - 1 - k]
    return acc + row[-1]


def pairs_widened(row):
    """``pairs`` for uint8 rows, whose difference lanewise refuses (compiled in uint64,
    NumPy wraps at 8 bits: docs/lanes.md L87): the same reads, widened to int64."""
    acc = np.int64(row[0]) - np.int64(row[0])
    for k in range(len(row) - 1):
        d = np.int64(row[k + 1]) - np.int64(row[k])
        if d > 0:
            acc = acc + d * row[k]
        else:
            acc = acc - row[len(row) - 1 - k]
    return acc + row[-1]


def mixed_reads(row, j):
    """A gathered read (j differs per lane) next to block reads of the same row."""
    total = 0.0
    for k in range(row.shape[0]):
        total = total + row[k] * 0.5 + row[(j + k) % row.shape[0]]
    return total


def _reference(lane, *args, in_axes=0):
    return lw.vmap(lane, in_axes=in_axes, backend="python")(*args)


def _scalar(lane, *args, in_axes=0):
    """The scalar path: the SPMD path's spec bit for bit (the python reference
    follows NumPy's promotion of small ints and float32, Numba widens them)."""
    with lw.config.overridden(spmd=False):
        return lw.vmap(lane, in_axes=in_axes)(*args)


def _spmd(lane, *args, in_axes=0):
    f = lw.vmap(lane, in_axes=in_axes)
    assert "SPMD on SIMD" in lane_path(f, *args), lane_path(f, *args)
    return f(*args)


DTYPES = ["float64", "float32", "int64", "int32", "int16", "uint8"]


def _rows(dtype, n, m, seed=0):
    rng = np.random.default_rng(seed)
    if np.dtype(dtype).kind == "f":
        return rng.uniform(-1.0, 3.0, (n, m)).astype(dtype)
    return rng.integers(0, 100, (n, m)).astype(dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_block_reads_match_the_reference_for_every_dtype(restore_config, dtype):
    """W x W transposes of 8 to 64 lanes (a float32 row runs 16 lanes, uint8 up to 64)."""
    restore_config.spmd = True
    rows = _rows(dtype, 37, 45)  # 37 lanes: a tail group; 45 elements: a last block pulled back
    lane = pairs_widened if dtype == "uint8" else pairs
    assert_bitwise(_spmd(lane, rows), _scalar(lane, rows), dtype)
    thr = np.linspace(0, 90, rows.shape[0])
    assert_bitwise(_spmd(first_pass, rows, thr), _scalar(first_pass, rows, thr), dtype)
    if dtype in ("float64", "int64"):
        assert_bitwise(_spmd(pairs, rows), _reference(pairs, rows), dtype)


LAYOUTS = {
    "C": lambda x: (x, 0),
    "F": lambda x: (np.asfortranarray(x), 0),
    "columns": lambda x: (np.ascontiguousarray(x.T), 1),
    "strided": lambda x: (x[:, ::2], 0),
    "reversed": lambda x: (x[:, ::-1], 0),
    "short": lambda x: (np.ascontiguousarray(x[:, :5]), 0),  # shorter than a block: gathers
    "one block": lambda x: (np.ascontiguousarray(x[:, :8]), 0),
}


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_block_reads_of_any_layout(restore_config, layout):
    restore_config.spmd = True
    rows, axis = LAYOUTS[layout](_rows("float64", 29, 40, seed=1))
    assert_bitwise(_spmd(pairs, rows, in_axes=axis), _reference(pairs, rows, in_axes=axis), layout)
    j = np.arange(29) * 7 - 50
    got = _spmd(mixed_reads, rows, j, in_axes=(axis, 0))
    assert_bitwise(got, _reference(mixed_reads, rows, j, in_axes=(axis, 0)), layout)


def test_strided_rows_are_emitted_as_gathers():
    """A layout whose rows cannot be contiguous reads by gathers and makes no block."""
    results = (((), "int64"),)
    blocked = transform(first_pass, ("row", "uniform"), results, 8, row_dtypes=("float64",))
    strided = transform(first_pass, ("row", "uniform"), results, 8, row_dtypes=("float64",), row_blocks=(False,))
    assert "v_row(" in blocked and "stack_empty(64, np.float64)" in blocked
    assert "v_gather(" in strided and "v_row(" not in strided and "stack_empty" not in strided


def test_block_reads_never_touch_rows_outside_the_mask():
    """Null row pointers for the lanes outside the mask: a block holds only lanes
    some read asked for, the others read zeros from the stack."""
    w = 8
    rows = np.cumsum(np.full((3, 40), 0.5), axis=1)
    body = transform(first_pass, ("row", "uniform"), (((), "int64"),), w, row_dtypes=("float64",))
    mask = np.zeros(w, np.bool_)
    mask[:3] = True
    out = np.full(w, -7)
    _compiled(spmd.plans.module_text(body), "lane_spmd", mask, *_row_pointers(rows, w), 12.0, out)
    np.testing.assert_array_equal(out[:3], [first_pass(r, 12.0) for r in rows])


def test_w6_loop_runs_in_lockstep_without_selects():
    """W6's loop: the running sum is stored plainly (no select on the mask), the
    uniform test is checked by typing (m_uniform), the return is a predicted
    branch, and each step reads a block."""
    body = transform(first_pass, ("row", "uniform"), (((), "int64"),), 8, row_dtypes=("float64",))
    assert "l_s = v_add(l_s, v_row(" in body
    assert "v_select" not in [line.split("=")[1].strip()[:8] for line in body.splitlines() if "l_s =" in line]
    assert "m_uniform(" in body and "if m_any(_lw_m" in body


def test_auto_takes_block_reads_of_w6_and_keeps_light_loops_scalar():
    """Contiguous rows read at uniform indices need MIN_OPS_PER_BLOCK_READ operations
    per element; rows that may be strided (an "A" array) still need MIN_OPS_PER_ROW_READ."""
    rows = _rows("float64", 40, 64, seed=2)
    thr = np.linspace(0, 40, 40)
    assert spmd.MIN_OPS_PER_BLOCK_READ <= spmd.row_work(first_pass, {"row"}) < spmd.MIN_OPS_PER_ROW_READ
    f = lw.vmap(first_pass)
    assert "SPMD on SIMD" in lane_path(f, rows, thr)
    assert_bitwise(f(rows, thr), _reference(first_pass, rows, thr))
    strided = rows[:, ::2]
    path = lane_path(f, strided, thr)
    assert path.startswith("lane path: scalar") and "its rows may be strided" in path, path
    assert_bitwise(f(strided, thr), _reference(first_pass, strided, thr))


# ---------------------------------------------------------------------------- uniformity


def _uniform_lane(row, n, x):
    m = len(row) - 1
    t = 0.0
    for i in range(m):
        for j in range(i, n):
            t = t + row[j]
        if x > t:
            c = 1  # noqa: F841 - a store under a branch
    while x > 0:
        x = x - 1
        q = 2  # noqa: F841 - a store in a varying loop
    return t


def test_uniform_names():
    names = uniform_names(build(_uniform_lane).entry, {"n"}, {"row"})
    assert names == {"m", "i", "j", "n"}  # not t (a row read), c (a branch), x, q (a varying loop), row


def _three_loops(row, n):
    for i in range(n):
        if row[i] > 0:
            return i
    for i in range(n):
        if row[i] > 1:
            break
    k = 0
    while row[k] < 2:
        k = k + 1
    return -1


def test_lockstep_loops():
    """The emitter's question, by (line, column) of its desugared IR's loops in the file:
    the first loop only returns (lockstep), the second breaks, the third's test reads a row."""
    loops = [(w.loc.line, w.loc.col) for w in prepared(_three_loops).body if isinstance(w, ir.Loop)]
    assert len(loops) == 3 and loops[0] == (_three_loops.__code__.co_firstlineno + 1, 4)  # the first for
    assert lockstep_loops(_three_loops, {"n"}, {"row"}) == {loops[0]}
    assert lockstep_loops(_three_loops, set(), {"row"}) == set()  # n varying: no loop in step


def test_a_wrong_lockstep_judgement_costs_the_path_not_the_result(monkeypatch, restore_config, tmp_path):
    """Typing refuses m_uniform on a vector: if the analysis called a varying loop
    lockstep, the SPMD path is refused and the scalar path's results come back."""
    restore_config.spmd = True
    restore_config.cache_dir = str(tmp_path)  # built here, not loaded from another test's entry
    emitter = importlib.import_module("lanewise.spmd.transform")  # the module (spmd.transform is the function)
    every_loop = lambda fn, *a: {(w.loc.line, w.loc.col) for w in walk(function_ir(fn).body)  # noqa: E731
                                 if isinstance(w, ir.Loop)}
    monkeypatch.setattr(emitter, "lockstep_loops", every_loop)
    monkeypatch.setattr(spmd.settings, "STREAMING", False)
    n = np.arange(1, 60)
    f = lw.vmap(collatz)
    path = lane_path(f, n)
    assert path.startswith("lane path: scalar") and "m_uniform" in path, path
    assert_bitwise(f(n), _reference(collatz, n))


def test_rows_read_in_a_lockstep_loop_of_a_long_scan(restore_config):
    """W3-like: a scan over 300 steps of 50 lanes (groups of 8 and a tail)."""
    restore_config.spmd = True
    prices = _walks(np.random.default_rng(4), 50, 300)

    def drift(p):
        s = p[0]
        for k in range(1, len(p)):
            s = s * 0.9 + (p[k] - p[k - 1]) * 1.5
        return s

    assert_bitwise(_spmd(drift, prices), _reference(drift, prices))


def nested(x, n):
    """A for loop in a for loop (it failed to build before: the desugared inner
    loop was a list inside the outer body), lockstep both, with an early return."""
    t = 0.0
    for i in range(n):
        for j in range(i):
            t = t + x * j
            if t > 50:
                return t
    return t


def test_nested_for_loops_take_the_spmd_path(restore_config):
    restore_config.spmd = True
    x = np.linspace(0, 3, 45)
    f = lw.vmap(nested, in_axes=(0, None))
    assert "SPMD on SIMD" in lane_path(f, x, 9)
    assert_bitwise(f(x, 9), _reference(nested, x, 9, in_axes=(0, None)))


def over(row, t):
    for k in range(row.shape[0]):
        if row[k] > t:
            return True
    return False


@pytest.mark.parametrize("width, dtype", [(2, "float64"), (4, "float64"), (16, "float64"), (64, "uint8"),
                                          (6, "float64")])
def test_block_reads_at_any_width(restore_config, width, dtype):
    """Transposes of 2 to 64 lanes (64 one-byte lanes: a 64-bit lane mask); a width
    that is not a power of two gathers."""
    restore_config.spmd, restore_config.spmd_width = True, width
    rows = _rows(dtype, 150, 77, seed=3)
    t = np.dtype(dtype).type(90)
    f = lw.vmap(over, in_axes=(0, None))
    assert f"SPMD on SIMD, {width} lanes" in lane_path(f, rows, t)
    assert_bitwise(f(rows, t), _reference(over, rows, t, in_axes=(0, None)))
