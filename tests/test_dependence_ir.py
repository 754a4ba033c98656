"""The dependence pass over the lane IR (issue 43): which parameters each output depends on.

Each lane below states, by hand, what its outputs are computed from (``values``)
and what they depend on once the control flow that chooses them counts (``all``):
the analysis must find exactly that (it may be conservative where a lane says so,
never less).  The lanes cover every way a value moves: assignment, unpacking,
branches, loops and their exits, walrus, memory shared by views, writes through
helpers and methods, globals, nested functions, ``try``, ``lw.scan``.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import lanewise as lw
from benchmarks.realworld import modules
from lanewise.lane.dependence import unused_parameters
from lanewise.lane.ir.passes.dependence import Summary, _summary, output_dependencies

from corpus import CORPUS

F = frozenset
STASH = np.zeros(1)
SCALE = 3.0
LAST = 0.0


def two_outputs(x, y):
    s = x + 1
    return s, y * 2


def branch(x, c):
    y = c
    if x > 0:
        y = c + 1
    return y


def same_either_way(x, y):
    if x < 0:
        r = y * 2
    else:
        r = y * 2
    return r + (y if x > 0 else y)


def loop_break(x, c):
    acc = c
    for i in range(3):
        if x > i:
            break
        acc += 1
    return acc


def chain(x, y):  # x reaches d only on the fourth trip through the loop
    a = b = c = d = y
    for _ in range(4):
        d = c
        c = b
        b = a
        a = x
    return d


def choose(a, k):
    return a * 3 if k > 0 else a


def walrus(x, y):
    if (z := x * 2.0) > 100.0:
        return y
    return z


def view_write(x, t):
    a = np.zeros(2)
    b = a[0:1]
    b[0] = x
    return t + a[0]


def filled(x, y):
    a = np.empty(3)
    a.fill(x)
    return a[0], y


def put_first(a, v):
    a[0] = v


def ident(v):
    return v


def stash(v):
    STASH[0] = v


def helper_writes(x, y):
    a = np.zeros(3)
    put_first(a, x)
    return a[0], y


def pure_helper_then_global(x, y):
    s = ident(x) * 2.0
    return SCALE * y, s


def effect_then_global(x, y):
    stash(x)
    return STASH[0] + y, y


def nested(x, y):
    def g():
        return x
    return g(), y


def tuple_round_trip(x, y, z):
    _a, b = (x, y)
    return b, z


def starred(x, y):
    a, _b = (*(x, y),)  # sizes the analysis does not count: a may be either
    return a


def keep(c, v):
    return c, v * c


def add_x(c, v):
    return c + v, v


def scans(row, k, n):
    c, ys = lw.scan(keep, k, row)
    d, _ = lw.scan(add_x, k, np.ones(n))  # n steps: the carry depends on n
    return c, ys, d


def early(x, y):
    try:
        return x
    except ZeroDivisionError:
        return y


def declares_a_global(x, y):
    global LAST
    LAST = 2.0
    return y * LAST


def nonlocal_write(x, y):
    r = y

    def g():
        nonlocal r
        r = x
    g()
    return r


def unmodelled(x, y):
    with np.errstate(all="ignore"):
        r = y
    return r


#: lane -> (values: per output the params it is computed from; all: with control dependence); None: everything.
EXPECTED = {
    two_outputs: ((F("x"), F("y")), (F("x"), F("y"))),
    branch: (F("c"), F({"c", "x"})),
    same_either_way: (F("y"), F("y")),
    loop_break: (F("c"), F({"c", "x"})),
    chain: (F({"x", "y"}), F({"x", "y"})),
    choose: (F("a"), F({"a", "k"})),
    walrus: (F({"x", "y"}), F({"x", "y"})),
    view_write: (F({"x", "t"}), F({"x", "t"})),
    filled: ((F("x"), F("y")), (F("x"), F("y"))),
    # put_first may write into its arguments, x among them: memory y may share (conservative)
    helper_writes: ((F({"x", "y"}), F({"x", "y"})), (F({"x", "y"}), F({"x", "y"}))),
    pure_helper_then_global: ((F("y"), F("x")), (F("y"), F("x"))),
    effect_then_global: ((F({"x", "y"}), F("y")), (F({"x", "y"}), F("y"))),
    nested: ((F({"x", "y"}), F("y")), (F({"x", "y"}), F("y"))),
    tuple_round_trip: ((F("y"), F("z")), (F("y"), F("z"))),
    starred: (F({"x", "y"}), F({"x", "y"})),
    scans: ((F("k"), F({"row", "k"}), F({"k", "n"})), (F("k"), F({"row", "k"}), F({"k", "n"}))),
    declares_a_global: (F("y"), F("y")),  # LAST is the world's: written under no parameter
    nonlocal_write: (F({"x", "y"}), F({"x", "y"})),
    early: (None, None),
    unmodelled: (None, None),
}


@pytest.mark.parametrize("lane", EXPECTED, ids=lambda f: f.__name__)
def test_each_output_depends_on_what_the_lane_computes_it_from(lane):
    values, everything = EXPECTED[lane]
    assert output_dependencies(lane, values_only=True) == values
    assert output_dependencies(lane) == everything


def test_unused_parameters_are_those_an_output_is_not_computed_from():
    assert unused_parameters(choose, ()) == F("k")  # k only chooses between values
    assert unused_parameters(two_outputs, (0,)) == F("y")
    assert unused_parameters(scans, (1,)) == F("n")
    assert unused_parameters(early, ()) == F()  # unsure: every parameter counts


#: A write into a parameter's array is a change outside the function (the caller's memory).
@pytest.mark.parametrize("fn, want", [
    (ident, Summary(True, False)), (put_first, Summary(False, True)), (stash, Summary(False, False)),
    (math.sin, Summary(True, False)), (np.copyto, Summary(True, True)), (np.random.normal, Summary(False, True)),
    (unmodelled, Summary(False, True)), (effect_then_global, Summary(False, False)),
    (declares_a_global, Summary(False, False)),
], ids=lambda v: getattr(v, "__name__", ""))
def test_what_a_call_may_change(fn, want):
    assert _summary(fn) == want


LANES = [pytest.param(e.lane, id=e.name) for e in CORPUS] + [
    pytest.param(lane, id=lane.__name__) for m in modules() for lane in getattr(m, "lanes", ())]


@pytest.mark.parametrize("lane", LANES)
def test_every_corpus_and_realworld_lane_is_analysed(lane):
    """No lane lanewise compiles holds a construct the pass gives up on; each output's
    dependences are parameters of the lane."""
    params = set(lane.__code__.co_varnames[:lane.__code__.co_argcount + lane.__code__.co_kwonlyargcount])
    for values_only in (True, False):
        deps = output_dependencies(lane, values_only)
        assert deps is not None
        assert set().union(*deps) <= params if isinstance(deps, tuple) else deps <= params
