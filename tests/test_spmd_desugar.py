"""The SPMD emitter's reading of the lane IR (issue 43): its desugaring
(:mod:`lanewise.spmd.desugar`) and the statement analyses of :mod:`lanewise.spmd.syntax`,
against hand-written expectations."""

from __future__ import annotations

import math
import re

import pytest

from lanewise.lane.ir import nodes as ir
from lanewise.lane.ir.printer import pretty
from lanewise.spmd.desugar import prepared
from lanewise.spmd.syntax import Unsupported, block_temps, cheap_branch, flat_branch, local_names, name_counts
from lanewise.spmd.transform import transform


def _text(fn) -> list[str]:
    return [line.strip() for line in pretty(ir.LaneModule(prepared(fn), ())).splitlines()[1:]]


def _nested(x, n):
    for i in range(n):
        for j in range(2, n, -1):
            x = x + i * j
    return x


def test_range_loops_become_whiles_over_hidden_counters_numbered_in_order():
    assert _text(_nested) == [
        "_lw_rs1 = 0", "_lw_re1 = n",
        "_lw_stop1 = spmd.range(_lw_re1, _lw_rs1, _lw_re1, 1)", "_lw_k1 = spmd.range(_lw_rs1, _lw_rs1, _lw_re1, 1)",
        "while lt(_lw_k1, _lw_stop1):",
        "i = _lw_k1", "_lw_k1 = spmd.range(add(_lw_k1, 1), _lw_rs1, _lw_re1, 1)",
        "_lw_rs2 = 2", "_lw_re2 = n",
        "_lw_stop2 = spmd.range(_lw_re2, _lw_rs2, _lw_re2, -1)", "_lw_k2 = spmd.range(_lw_rs2, _lw_rs2, _lw_re2, -1)",
        "while gt(_lw_k2, _lw_stop2):",  # a negative step counts down
        "j = _lw_k2", "_lw_k2 = spmd.range(add(_lw_k2, -1), _lw_rs2, _lw_re2, -1)",
        "x = add(x, mul(i, j))",
        "return x"]
    loops = [s for s in prepared(_nested).body if isinstance(s, ir.Loop)]
    assert [(s.kind, s.loc.line - _nested.__code__.co_firstlineno) for s in loops] == [("while", 1)]


def _constants(x):
    a = 2 ** 63 - 1 + x
    b = -(2.0 ** 3) * x
    c = 1 // 0 + x
    d = 2 ** 200 + x
    e = not 1
    return a + b + c + d + e


def test_constants_are_folded_as_cpython_folds_them():
    assert _text(_constants) == [
        "a = add(9223372036854775807, x)",
        "b = mul(-8.0, x)",
        "c = add(floordiv(1, 0), x)",  # an error: left to run time, as CPython does
        "d = add(pow(2, 200), x)",  # beyond 64 bits: not folded (lane.refusals refuses it)
        "e = False",
        "return add(add(add(add(a, b), c), d), e)"]


def _for_else(x):
    for k in range(3):
        x = x + k
    else:
        x = 0.0
    return x


def _over_a_row(row):
    s = 0.0
    for v in row:
        s = s + v
    return s


def _tuple_target(x):
    for k, j in range(3):
        x = x + k
    return x


def _step_variable(x, n):
    for k in range(0, 10, n):
        x = x + k
    return x


def _item_update(row):
    row[0] += 1.0
    return row[0]


def _nested_def(x):
    def inner(y):
        return y + 1.0
    return inner(x)


def _declares(x):
    global _G
    return x


def _star(x, *rest):
    return x


@pytest.mark.parametrize("fn, message", [
    (_for_else, "a for ... else loop at"),
    (_over_a_row, "a for loop over something other than range(...) at"),
    (_tuple_target, "a for loop with target (k, j) at"),
    (_step_variable, "a range with a step that is not a non-zero integer literal at"),
    (_item_update, "augmented assignment to row[0] at"),
    (_nested_def, "_nested_def defines a function or class inside the lane"),
    (_declares, "_declares declares global/nonlocal names"),
    (_star, "_star has *args, **kwargs, keyword-only or positional-only parameters"),
])
def test_what_the_emitter_never_handles_is_refused_by_name(fn, message):
    with pytest.raises(Unsupported, match=re.escape(message)):
        prepared(fn)


def _branches(x, y):
    t = x * 2.0
    if x > y:
        a = b = t + 1.0
        y = a - b
    else:
        y = math.sqrt(x)
    return y


def test_branch_and_temporary_analyses():
    fn = prepared(_branches)
    branch = fn.body[1]
    assert local_names(fn) == {"x", "y", "t", "a", "b"}
    # a = b = v: each target once; v (one node, two stores) is met per store, in a block as in
    # the function (block_temps compares the two)
    assert name_counts(fn)["t"] == 3 and name_counts(fn)["a"] == 2
    assert cheap_branch(branch.then) and flat_branch(branch.then)
    assert not cheap_branch(branch.orelse)  # a call
    assert block_temps(branch.then, name_counts(fn)) == {"a", "b"}  # assigned first, used only there
    assert block_temps(fn.body, name_counts(fn)) == {"t"}  # top-level stores only; y: a parameter, read first


def test_a_shared_value_is_evaluated_once_and_stored_to_each_target():
    src = transform(_branches, ("varying", "varying"), (((), "float64"),), 4)
    lines = [line.strip() for line in src.splitlines()]
    # a = b = t + 1.0: one evaluation, two plain stores (block temporaries); y under the mask
    at = lines.index("_lw_t4 = v_add(l_t, 1.0)")
    assert lines[at + 1:at + 4] == ["l_a = _lw_t4", "l_b = _lw_t4", "l_y = v_select(_lw_m2, v_sub(l_a, l_b), l_y)"]
