"""Which ``lw.scan`` steps close over lane values (lane/closures.closure_steps), on the lane IR.

Each lane below says by hand which of its nested defs ``lane.closures`` lifts and
what they capture; on every lane reachable (the corpus, the real-world kernels and
their helpers, the lanes of the tests that compile scans, and the functions nested
in them) the analysis runs and finds the steps those lanes are known to have.  (It
agreed with the AST analysis it replaced on all 563 of them before that was deleted.)
"""

from __future__ import annotations

import types

import numpy as np
import pytest

import lanewise as lw
from benchmarks.realworld import modules
from lanewise.lane import closures
from lanewise.lane.ir.build import build_with_functions, function_ir
from lanewise.lane.ir.render import load_function
from lanewise.lane.source import definition

import test_lanes_doc
import test_round3_programs
import test_scan
from corpus import CORPUS


def smooth(row, alpha):
    def step(c, v):
        c = alpha * v + (1 - alpha) * c
        return c, c
    return lw.scan(step, 0.0, row)[1]


def two_steps(row, a, b):
    def up(c, v):
        return c + a * v, c

    def down(c, v):
        return c - v * b + a, c
    return lw.scan(up, 0.0, row)[0] + lw.scan(down, 0.0, row)[0]


def no_capture(row):
    def step(c, v):
        return c + v, c
    return lw.scan(step, 0.0, row)[0]


def captures_a_global_only(row):
    def step(c, v):
        return c + np.sin(v), c
    return lw.scan(step, 0.0, row)[0]


def called_too(row, a):  # the step is also called: not a step only
    def step(c, v):
        return c + a * v, c
    step(0.0, 1.0)
    return lw.scan(step, 0.0, row)[0]


def rebound(row, a):
    def step(c, v):
        return c + a * v, c
    step = step  # noqa: PLW0127
    return lw.scan(step, 0.0, row)[0]


def defined_twice(row, a):
    if a > 0:
        def step(c, v):
            return c + a * v, c
    else:
        def step(c, v):
            return c - a * v, c
    return lw.scan(step, 0.0, row)[0]


def with_default(row, a):
    def step(c, v, k=2.0):
        return c + a * v * k, c
    return lw.scan(step, 0.0, row)[0]


def nonlocal_step(row, a):
    def step(c, v):
        nonlocal a
        return c + a * v, c
    return lw.scan(step, 0.0, row)[0]


def calls_another(row, a):
    def scale(v):
        return a * v

    def step(c, v):
        return c + scale(v), c
    return lw.scan(step, 0.0, row)[0]


def keyword_init(row, a):
    def step(c, v):
        return c + a * v, c
    return lw.scan(step, init=0.0, xs=row)[0]


def in_a_loop(row, a):
    t = 0.0
    for k in range(2):
        def step(c, v):
            return c + a * v * k, c
        t += lw.scan(step, 0.0, row)[0]
    return t


def nested_reader(row, a, b):
    def step(c, v):
        g = [a * w for w in (v, b)]
        return c + g[0] + g[1], c
    return lw.scan(step, 0.0, row)[0]


LANES = {smooth: {"step": ["alpha"]}, two_steps: {"up": ["a"], "down": ["a", "b"]}, no_capture: {},
         captures_a_global_only: {}, called_too: {}, rebound: {}, defined_twice: {}, with_default: {},
         nonlocal_step: {}, calls_another: {}, keyword_init: {"step": ["a"]}, in_a_loop: {"step": ["a", "k"]},
         nested_reader: {"step": ["a", "b"]}}


@pytest.mark.parametrize("lane", LANES, ids=lambda f: f.__name__)
def test_the_steps_each_lane_closes_over(lane):
    assert closures.closure_steps(function_ir(lane)) == LANES[lane]


def test_lifted_lanes_compute_as_python_does():
    row = np.linspace(-1.0, 1.0, 7)
    rows = np.stack([row, row[::-1]])
    for lane, args in ((smooth, (0.25,)), (two_steps, (0.5, 2.0)), (in_a_loop, (1.5,)), (nested_reader, (0.5, 3.0))):
        mapped = lw.vmap(lane, in_axes=(0, *([None] * len(args))))
        reference = lw.vmap(lane, in_axes=(0, *([None] * len(args))), backend="python")
        np.testing.assert_allclose(mapped(rows, *args), reference(rows, *args), rtol=1e-12)


def _nested(fn):
    """``fn``'s nested functions, rebuilt from their code (cells holding None)."""
    for c in fn.__code__.co_consts:
        if isinstance(c, types.CodeType) and not c.co_name.startswith("<"):
            f = types.FunctionType(c, fn.__globals__, c.co_name, None,
                                   tuple(types.CellType(None) for _ in c.co_freevars) or None)
            f.__qualname__ = c.co_qualname
            yield f
            yield from _nested(f)


def _reachable():
    lanes = [e.lane for e in CORPUS] + list(LANES) + [f for m in modules() for f in m.lanes]
    roots = list(lanes)
    for m in (*modules(), test_lanes_doc, test_round3_programs, test_scan):
        roots += [getattr(v, "py_func", v) for v in vars(m).values()]
    roots += [g for f in lanes for g in build_with_functions(f)[1].values()]  # the lanes' helpers
    found, seen = [], set()
    for f in roots:
        if isinstance(f, types.FunctionType) and f.__code__ not in seen:
            seen.add(f.__code__)
            found += [f, *_nested(f)]
    return found


def test_the_analysis_runs_on_every_reachable_function_and_finds_the_known_steps():
    found, steps = 0, []
    for f in _reachable():
        if definition(f) is None:
            continue  # no text (a test's wrapper built by hypothesis): a lane's is rewritten from its text only
        steps += [f.__qualname__] if closures.closure_steps(function_ir(f)) else []
        found += 1
    assert found > 500
    assert {"scan_closure", "ema_filter", "clipped_filter", "smooth", "two_steps"} <= set(steps)


def held(row, a):  # a return that is not a pair display: the pair is held in a name first
    def step(c, v):
        pair = (c + a * v, c)
        if v > 0:
            return pair
        return c - a, c
    return lw.scan(step, 0.0, row)


def _lifted(lane):
    """``lane`` lifted on the IR and loaded at the user's lines."""
    module, functions = build_with_functions(lane)
    lifted, count = closures.lift_ir(function_ir(lane))
    return load_function(lifted, lane, {**functions, **closures.GLOBALS}, lines=True), count


@pytest.mark.parametrize("lane, args", [
    (smooth, (0.25,)), (two_steps, (0.5, 2.0)), (keyword_init, (1.5,)), (in_a_loop, (1.5,)),
    (nested_reader, (0.5, 3.0)), (held, (0.5,)), (test_round3_programs.ema_filter, (0.3,))],
    ids=lambda v: getattr(v, "__name__", ""))
def test_a_lifted_lane_computes_as_written_and_its_steps_capture_nothing(lane, args):
    row = np.linspace(-1.0, 1.0, 6)
    lifted, count = _lifted(lane)
    assert count == len(closures.closure_steps(function_ir(lane))) > 0
    np.testing.assert_equal(lifted(row, *args), lane(row, *args))
    steps = [c for c in lifted.__code__.co_consts if isinstance(c, types.CodeType)]
    assert steps and all(not c.co_freevars for c in steps)
    assert lifted.__code__.co_filename == lane.__code__.co_filename
    assert _code_lines(lifted.__code__) == _code_lines(lane.__code__)  # errors name the user's lines


def _code_lines(code) -> set:
    found = {line for _, _, line in code.co_lines() if line is not None}
    return found.union(*(_code_lines(c) for c in code.co_consts if isinstance(c, types.CodeType)))


def test_a_lane_without_closure_steps_is_left_as_it_is():
    lane = function_ir(no_capture)
    assert closures.lift_ir(lane) == (lane, 0)
