"""Reads of locals that may be unbound: every backend raises where Python raises.

Compiled lanes used to read such a local silently (Numba a zero, the tpu backend the
other branch's value); lane.ir.passes.unbound checks those reads with a flag per
local.  Each lane of ``tests/unbound_lanes.py`` runs on python (the reference: Python's
own ``UnboundLocalError``), cpu (the SPMD and the scalar paths) and tpu (interpret mode),
on inputs where no lane, one lane or many lanes read unbound (hypothesis picks them).
"""

from __future__ import annotations

import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import lanewise as lw
import unbound_lanes as lanes
from lanewise.lane.ir.build import function_ir
from lanewise.lane.ir.passes.unbound import CHECK, checked, has_checks
from lanewise.lane.ir.render import render

pytest.importorskip("jax")
from test_tpu_backend import interpreted  # noqa: E402

ALL = lanes.RAISING + lanes.NEVER
#: Python's words: a local read unbound (UnboundLocalError), or a lambda's (or, before 3.12, a
#: comprehension's) free variable (NameError, of which UnboundLocalError is a kind).
NAME = re.compile(r"cannot access (?:local|free) variable '(\w+)' where it is not associated with a value")


def outcome(lane, x, n, backend):
    """(the results, None) or (None, the name of the local the first failing lane read unbound)."""
    try:
        return np.asarray(lw.vmap(lane, backend=backend)(x, n)), None
    except NameError as e:
        assert backend == "python" or isinstance(e, lw.LaneUnboundError), type(e)
        return None, NAME.search(str(e)).group(1)


def compare(lane, x, n, backend, **config):
    want, want_error = outcome(lane, x.astype(np.float64), n, "python")
    with (interpreted(tpu_tile=(8, 128), tpu_unroll=3, **config) if backend == "tpu"
          else lw.config.overridden(**config)):
        got, error = outcome(lane, x.astype(np.float32) if backend == "tpu" else x, n.astype(np.int32)
                             if backend == "tpu" else n, backend)
    assert error == want_error, (lane.__name__, backend, config)
    if want is not None:
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


inputs = st.lists(st.tuples(st.floats(-1.0, 3.0, width=32), st.integers(0, 6)), min_size=1, max_size=40)


@pytest.mark.parametrize("lane", ALL, ids=lambda f: f.__name__)
@pytest.mark.parametrize("backend, config", [("cpu", {"spmd": True}), ("cpu", {"spmd": False}), ("tpu", {})],
                         ids=["cpu-spmd", "cpu-scalar", "tpu"])
@settings(max_examples=12, deadline=None)
@given(values=inputs)
def test_compiled_lanes_raise_where_python_raises_and_agree_elsewhere(lane, backend, config, values):
    x = np.array([v for v, _ in values], np.float64)
    n = np.array([k for _, k in values], np.int64)
    compare(lane, x, n, backend, **config)


@pytest.mark.parametrize("lane", lanes.RAISING, ids=lambda f: f.__name__)
def test_each_raising_lane_fails_on_some_input_and_names_the_line(lane):
    """Not vacuous: every lane of RAISING does raise somewhere, and the compiled error
    names the user's file and the line of the read."""
    x = np.array([0.0, 0.25, 2.0, 0.75], np.float64)
    n = np.array([0, 1, 0, 2], np.int64)
    assert outcome(lane, x, n, "python")[1] is not None
    with pytest.raises(lw.LaneUnboundError, match=r"unbound_lanes\.py:\d+"):
        lw.vmap(lane, backend="cpu")(x, n)


def test_the_tpu_error_names_the_first_lane_python_fails_at():
    x = np.array([2.0, 2.0, 0.5, 2.0, 0.25], np.float32)  # lanes 2 and 4 leave y unbound
    with pytest.raises(UnboundLocalError):
        lw.vmap(lanes.one_branch, backend="python")(x, np.zeros(5, np.int64))
    with interpreted(tpu_tile=(8, 128)), pytest.raises(lw.LaneUnboundError, match=r"lane i0=2 of one_branch"):
        lw.vmap(lanes.one_branch, backend="tpu")(x, np.zeros(5, np.int32))


def test_surely_bound_reads_are_left_as_written():
    for lane in lanes.UNCHECKED:
        function = function_ir(lane)
        assert checked(function) is function, lane.__name__


def test_checks_are_flags_set_where_the_local_is_bound():
    text = render(checked(function_ir(lanes.last_of_loop)))
    assert text.count("_lw_bound_y = True") == 1 and "_lw_bound_y = False" in text
    assert f"return {CHECK}(y, _lw_bound_y," in text
    assert has_checks(checked(function_ir(lanes.guarded_by_and)))  # y read under `and`: checked where evaluated


def test_a_conditional_read_keeps_the_scalar_path_on_the_cpu():
    """The W-wide lane has no mask of the lanes that evaluate ``y`` in ``found and y > 2``:
    lw.explain says why the lane runs on the scalar path."""
    x, n = np.linspace(0, 2, 16), np.arange(16) % 3
    with lw.config.overridden(spmd=True):
        text = str(lw.explain(lw.vmap(lanes.guarded_by_and, backend="cpu"), x, n))
    assert "may be unbound" in text


def test_inside_a_callers_jit_the_tpu_raises_when_the_computation_runs():
    import jax

    x, n = np.array([2.0, 0.5, 2.0], np.float32), np.zeros(3, np.int32)
    op = lw.jax.op(lw.vmap(lanes.one_branch, backend="tpu"))
    with interpreted(tpu_tile=(8, 128)):
        with pytest.raises(jax.errors.JaxRuntimeError, match=r"cannot access local variable 'y'.*lane i0=1"):
            jax.block_until_ready(jax.jit(op)(x, n))
        np.testing.assert_allclose(jax.jit(op)(x + 1.0, n), 2.0 * (x + 1.0))


def test_a_lane_in_a_reduction_raises_too():
    x, n = np.linspace(0, 2, 40), np.arange(40) % 3
    with pytest.raises(UnboundLocalError):
        lw.reduce(lw.vmap(lanes.last_of_loop, backend="python"), "sum")(x, n)
    with pytest.raises(lw.LaneUnboundError):
        lw.reduce(lw.vmap(lanes.last_of_loop, backend="cpu"), "sum")(x, n)
    with interpreted(tpu_tile=(8, 128)), pytest.raises(lw.LaneUnboundError, match="lane i0=0 of last_of_loop"):
        lw.reduce(lw.vmap(lanes.last_of_loop, backend="tpu"), "sum")(x.astype(np.float32), n.astype(np.int32))


@pytest.mark.parametrize("lane", lanes.CLOSURES + lanes.CLOSURES_NEVER, ids=lambda f: f.__name__)
@pytest.mark.parametrize("config", [{"spmd": True}, {"spmd": False}], ids=["cpu-spmd", "cpu-scalar"])
@settings(max_examples=10, deadline=None)
@given(values=inputs)
def test_reads_inside_lambdas_and_comprehensions_raise_where_python_raises(lane, config, values):
    """A comprehension reads where it runs (its element only when an item comes), a lambda
    where it is called: both used to read Numba's zero, or another lane's value."""
    x = np.array([v for v, _ in values], np.float64)
    n = np.array([k for _, k in values], np.int64)
    compare(lane, x, n, "cpu", **config)


@pytest.mark.parametrize("lane", lanes.CLOSURES, ids=lambda f: f.__name__)
def test_each_closure_lane_fails_on_some_input_and_names_the_line(lane):
    x, n = np.array([0.0, 0.25, 2.0, 0.75]), np.array([0, 1, 0, 2])
    assert outcome(lane, x, n, "python")[1] == "y"
    with pytest.raises(lw.LaneUnboundError, match=r"variable 'y'.*unbound_lanes\.py:\d+"):
        lw.vmap(lane, backend="cpu")(x, n)
    np.testing.assert_allclose(lw.vmap(lane, backend="cpu")(x[2:3], n[2:3] + 1),
                               lw.vmap(lane, backend="python")(x[2:3], n[2:3] + 1))


@pytest.mark.parametrize("lane", lanes.TRY, ids=lambda f: f.__name__)
@pytest.mark.parametrize("n", [[0, 1, 0, 1], [0, 1, 2, 0]], ids=["no-raise", "raise"])
def test_a_handler_starts_from_what_was_bound_before_the_try(lane, n):
    compare(lane, np.linspace(0.0, 2.0, len(n)), np.array(n), "cpu")


@pytest.mark.parametrize("lane", lanes.FALLS, ids=lambda f: f.__name__)
def test_a_lane_that_may_fall_off_its_end_is_refused_on_the_tpu_as_on_the_cpu(lane):
    """Python returns None where a lane (or its helper) falls off its end; the tpu backend
    used to hand those lanes the value another path returned."""
    x, n = np.array([0.5, 2.0, -1.0], np.float32), np.zeros(3, np.int32)
    with pytest.raises(TypeError):  # Python's TypeError (None + 0) through the helper; the lane: structures differ
        lw.vmap(lane, backend="python")(x.astype(np.float64), n.astype(np.int64))
    for spmd in (True, False):  # cpu: LaneTypeError for the lane, Numba's TypeError through a helper
        with lw.config.overridden(spmd=spmd), pytest.raises(TypeError):
            lw.vmap(lane, backend="cpu")(x.astype(np.float64), n.astype(np.int64))
    with interpreted(tpu_tile=(8, 128)), pytest.raises(lw.LaneTypeError, match=r"returns None on some paths"
                                                       r".*unbound_lanes\.py:\d+"):
        lw.vmap(lane, backend="tpu")(x, n)


def test_a_while_true_left_only_by_return_is_not_refused():
    x, n = np.linspace(0.0, 2.0, 9), np.arange(9) % 2
    with interpreted(tpu_tile=(8, 128)):
        got = lw.vmap(lanes.returns_from_while_true, backend="tpu")(x.astype(np.float32), n.astype(np.int32))
    np.testing.assert_allclose(got, lw.vmap(lanes.returns_from_while_true, backend="python")(x, n), rtol=1e-6)


# ---------------------------------------------------------------- lanes with no source text (compiled from bytecode)


def _without_source() -> dict:
    """The lanes of unbound_lanes.py exec'd from a string: no file holds their text, so
    lanewise rebuilds them from their bytecode (lane.fromcode)."""
    import inspect

    namespace = {"__name__": "unbound_lanes_without_source"}
    exec(compile(inspect.getsource(lanes), "<unbound_lanes>", "exec"), namespace)  # noqa: S102 - the test's own text
    return namespace


REBUILT = _without_source()


@pytest.mark.parametrize("name", [f.__name__ for f in ALL])
@pytest.mark.parametrize("backend, config", [("cpu", {"spmd": True}), ("cpu", {"spmd": False}), ("tpu", {})],
                         ids=["cpu-spmd", "cpu-scalar", "tpu"])
@settings(max_examples=6, deadline=None)
@given(values=inputs)
def test_lanes_rebuilt_from_bytecode_raise_where_python_raises(name, backend, config, values):
    """Their locals cross one loop over basic blocks: a dataflow over its jumps finds the
    reads to check (they used to read a zero on the cpu, a placeholder on the tpu)."""
    x = np.array([v for v, _ in values], np.float64)
    n = np.array([k for _, k in values], np.int64)
    compare(REBUILT[name], x, n, backend, **config)


def test_a_rebuilt_lanes_error_names_its_line():
    x, n = np.array([0.0, 0.25, 2.0, 0.75]), np.array([0, 1, 0, 2])
    with pytest.raises(lw.LaneUnboundError, match=r"local variable 'y'.*\(<unbound_lanes>:21\)"):
        lw.vmap(REBUILT["one_branch"], backend="cpu")(x, n)
    assert has_checks(checked(function_ir(REBUILT["one_branch"])))
    assert not has_checks(checked(function_ir(REBUILT["both_branches"])))


@pytest.mark.parametrize("backend", ["cpu", "tpu"])
def test_the_derivative_of_a_rebuilt_lane_raises_as_python_does(backend):
    grad = lw.grad(REBUILT["one_branch"], argnums=0)
    n = np.array([1, 2, 0])
    dtypes = (np.float32, np.int32) if backend == "tpu" else (np.float64, np.int64)
    with interpreted(tpu_tile=(8, 128)) if backend == "tpu" else lw.config.overridden():
        for x in (np.array([2.0, 0.5, 3.0]), np.array([2.0, 1.5, 3.0])):
            want, want_error = outcome(grad, x, n, "python")
            got, error = outcome(grad, x.astype(dtypes[0]), n.astype(dtypes[1]), backend)
            assert error == want_error
            if want is not None:
                np.testing.assert_allclose(got, want)


def test_bytecode_reads_that_may_be_unbound_by_a_dataflow_over_numbas_blocks():
    from lanewise.lane.fromcode import unbound_reads

    for f in lanes.RAISING:
        if f is not lanes.through_helper:  # its read is in _half
            assert unbound_reads(REBUILT[f.__name__]), f.__name__
    for name in ("while_true", "both_branches", "bound_in_the_handler", "through_helper"):
        assert unbound_reads(REBUILT[name]) == [], name
    assert unbound_reads(REBUILT["raised_before_binding"]) == [("y", 132)]


@pytest.mark.parametrize("name", [f.__name__ for f in lanes.CLOSURES])
def test_a_closure_lane_with_no_source_text_never_reads_unbound_silently(name):
    """With no source text, the closure's cell is read where the lambda (or, before 3.12,
    the comprehension) is made: refused where it may be unbound there, or checked."""
    from lanewise.lane.fromcode import unbound_reads

    x, n = np.array([0.0, 0.25, 2.0, 0.75]), np.array([0, 1, 0, 2])  # lanes 1 and 3 read y unbound
    assert outcome(REBUILT[name], x, n, "python")[1] == "y"
    try:
        lw.vmap(REBUILT[name], backend="cpu")(x, n)
    except lw.LaneCompileError as e:
        assert "'y', which some paths may leave unbound" in str(e)
        assert ("y", getattr(lanes, name).__code__.co_firstlineno + 3) in unbound_reads(REBUILT[name])
    except lw.LaneUnboundError:
        pass
    else:
        pytest.fail("a read of an unbound local compiled to a silent value")


def test_a_lane_lanewise_cannot_rebuild_is_refused_where_a_read_may_be_unbound():
    """A ``try``/``raise`` lane with no source text is compiled from its bytecode as it is,
    where Numba would read a zero: refused, naming the local and the line; one whose
    locals are bound on every path still runs."""
    x, n = np.linspace(0.0, 2.0, 4), np.array([0, 1, 2, 0])
    with pytest.raises(lw.LaneCompileError, match=r"raised_before_binding \(<unbound_lanes>:132\) reads the local "
                                                   r"'y', which some paths may leave unbound"):
        lw.vmap(REBUILT["raised_before_binding"], backend="cpu")(x, n)
    compare(REBUILT["bound_in_the_handler"], x, n, "cpu")
