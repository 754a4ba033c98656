"""Derivatives of "pasted" loop lanes (no source file: lanewise rebuilds them from their
bytecode) on backend="tpu", in interpret mode.

A lane rebuilt from bytecode is one ``while True`` over its basic blocks, its locals
first assigned inside that loop; its derivative is generated text of the same shape.
The tpu backend refused such derivatives ("i may be undefined here") until the
derivative carried the rebuilt lane's mark (``ir.Function.blocks``); a hessian of a lane
calling a helper in its loop then failed on the helper's tuple result.  Each case is
checked against the python backend (float64) and, for first derivatives, finite
differences of the lane itself.
"""

from __future__ import annotations

import inspect

import numpy as np
import pytest

pytest.importorskip("jax")

import lanewise as lw  # noqa: E402

SOURCE = '''
import math
import lanewise as lw


def helper(x, k):
    return x * k + 0.1


def w_break(x):
    s = 0.0
    i = 0
    while i < 10:
        s = s + x * i
        if s > 3.0:
            break
        i += 1
    return s


def f_continue(x):
    s = 0.0
    for i in range(6):
        if i % 2 == 0:
            continue
        s = s + x ** i
    return s


def early(x):
    for i in range(5):
        x = x * 1.1
        if x > 2.0:
            return x * x
    return x


def nested(x):
    s = 0.0
    for i in range(3):
        for j in range(i + 1):
            s = s + x * (i + j)
    return s


def calls(x):
    s = x
    for i in range(3):
        s = helper(s, 0.5)
    return s


def decay(c, p):
    return c * 0.9 + math.sin(p * c), None


def scanned(x, prices):
    c, _ = lw.scan(decay, x, prices)
    return c
'''

PASTED: dict = {}
exec(compile(SOURCE, "<pasted>", "exec"), PASTED)  # no file: inspect.getsource fails

X = np.linspace(-0.8, 1.7, 37)
PRICES = np.random.default_rng(0).uniform(0.0, 1.0, (37, 4))
TOL = 2e-4  # float32 on the tpu against float64 on the python backend


@pytest.fixture(autouse=True)
def interpret():
    with lw.config.overridden(tpu_interpret=True, tpu_tile=(8, 128), tpu_unroll=1):
        yield


def jvp_of(f):
    def tangent(x):
        return lw.jvp(f, (x,), (1.0,))[1]
    return tangent


def value_and_grad_of(f):
    def gradient(x):
        return lw.value_and_grad(f)(x)[1]
    return gradient


#: How each case derives its lane: (transform, is a first derivative).
TRANSFORMS = {"grad": (lw.grad, True), "jvp": (jvp_of, True), "jacfwd": (lw.jacfwd, True),
              "hessian": (lw.hessian, False), "value_and_grad": (value_and_grad_of, True)}

CASES = [("w_break", "grad"), ("w_break", "hessian"), ("f_continue", "jacfwd"), ("early", "value_and_grad"),
         ("nested", "jvp"), ("calls", "grad"), ("calls", "hessian")]


def finite_difference(f, x, h=1e-6):
    run = lw.vmap(f, backend="python")
    return (run(x + h) - run(x - h)) / (2 * h)


def test_the_corpus_has_no_source():
    with pytest.raises(OSError):
        inspect.getsource(PASTED["w_break"])


@pytest.mark.parametrize(("name", "how"), CASES)
def test_a_pasted_loop_lanes_derivative_matches_the_python_backend(name, how):
    f = PASTED[name]
    transform, first = TRANSFORMS[how]
    derived = transform(f)
    got = np.asarray(lw.vmap(derived, backend="tpu")(X.astype(np.float32)), np.float64)
    want = np.asarray(lw.vmap(derived, backend="python")(X))
    np.testing.assert_allclose(got, want, rtol=TOL, atol=TOL)
    if first:
        np.testing.assert_allclose(want, finite_difference(f, X), rtol=1e-5, atol=1e-5)


def test_a_pasted_lanes_scan_runs_and_its_derivative_is_refused_clearly():
    """Rebuilt from bytecode, ``c, _ = lw.scan(step, ...)`` with a step returning
    ``(carry, None)`` keeps that None in locals of the dispatch loop: the placeholders take
    it from the step (it crashed in jnp.where).  Its derivative's step returns ys of
    tangents (zeros), stacked ys that a scan inside the dispatch loop cannot keep:
    refused with the line."""
    x, prices = X.astype(np.float32), PRICES.astype(np.float32)
    got = lw.vmap(PASTED["scanned"], backend="tpu")(x, prices)
    np.testing.assert_allclose(np.asarray(got, np.float64), lw.vmap(PASTED["scanned"], backend="python")(X, PRICES),
                               rtol=TOL, atol=TOL)
    with pytest.raises(lw.LaneCompileError, match=r"stacked ys .*\(<pasted>:\d+\)"):
        lw.vmap(lw.grad(PASTED["scanned"]), backend="tpu")(x, prices)


def test_a_pasted_local_first_none_then_a_value_is_refused_naming_it():
    namespace: dict = {}
    exec(compile("def best(x):\n    b = None\n    for i in range(3):\n        b = x * i\n    return b\n",
                 "<pasted>", "exec"), namespace)
    with pytest.raises(lw.LaneCompileError, match=r"b holds None or a tuple on one path .*\(<pasted>:1\)"):
        lw.vmap(namespace["best"], backend="tpu")(X.astype(np.float32))


def mixed(x):
    if x > 0.0:
        y = (x, x)
    else:
        y = x  # noqa: F841 - the two structures are the point
    return x + 1.0


def test_a_local_of_two_structures_is_refused_naming_the_line():
    line = inspect.getsourcelines(mixed)[1] + 1  # the if whose two paths disagree
    with pytest.raises(lw.LaneCompileError, match=rf"holds a tuple on one path .*\(mixed, .*{__name__.split('.')[-1]}"
                                                  rf"\.py:{line}\)"):
        lw.vmap(mixed, backend="tpu")(X.astype(np.float32))
