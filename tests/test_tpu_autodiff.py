"""Lanes made by lanewise's autodiff (lw.grad, lw.jvp, ...) on backend="tpu", in interpret mode.

Each derived lane runs on float32 lanes and is compared with the cpu backend on the
same numbers in float64 (a float32 tolerance) and, where the lane is simple, with
``jax.grad`` of the same function written with ``jax.numpy``.  Reverse mode is
refused with the user's line and forward mode as the fix (docs/tpu.md, "Gradients").
"""

from __future__ import annotations

import math
import os
import re

import numpy as np
import pytest

pytest.importorskip("jax")
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

import lanewise as lw  # noqa: E402
from lanewise import LaneCompileError, LaneTypeError  # noqa: E402

#: Lanes of three (8, 128) tiles, the last one partial.
N = 2 * 1024 + 100
#: ``LANEWISE_TPU_TESTS_ON_CHIP=1`` on a machine with a TPU runs these tests on the chip
#: (Mosaic compiles each kernel), at the float32 tolerance of its exp/log (docs/tpu.md).
ON_CHIP = os.environ.get("LANEWISE_TPU_TESTS_ON_CHIP") == "1" and jax.default_backend() == "tpu"
RTOL = 2e-4 if ON_CHIP else 2e-5


@pytest.fixture(autouse=True)
def interpret():
    with lw.config.overridden(tpu_interpret=not ON_CHIP, tpu_tile=(8, 128), tpu_unroll=1):
        yield


def floats(lo=-3.0, hi=3.0, seed=0, n=N):
    return np.random.default_rng(seed).uniform(lo, hi, n).astype(np.float32)


def wide(args):
    """The arguments as the cpu backend gets them: float32 -> float64, the same numbers."""
    return [a.astype(np.float64) if isinstance(a, np.ndarray) and a.dtype == np.float32 else a for a in args]


def assert_matches_cpu(lane, *args, in_axes=0):
    """``lane`` on the tpu (float32) against the cpu backend on the same numbers in float64."""
    got = lw.vmap(lane, in_axes=in_axes, backend="tpu")(*args)
    want = lw.vmap(lane, in_axes=in_axes, backend="cpu")(*wide(args))
    got_leaves, want_leaves = jax.tree.leaves(got), jax.tree.leaves(want)
    assert len(got_leaves) == len(want_leaves) and got_leaves
    for g, w in zip(got_leaves, want_leaves, strict=True):
        assert isinstance(g, jax.Array) and g.dtype == jnp.float32 and g.shape == np.shape(w)
        np.testing.assert_allclose(np.asarray(g), np.asarray(w, np.float32), rtol=RTOL, atol=RTOL)
    return got


# ----------------------------------------------------------------------------- forward mode


def kinked(x):
    return x * x * np.sin(x) if x > 0 else -x


@pytest.mark.slow  # over 5 s in interpret mode on 2 busy cores
def test_grad_of_a_branch_lane_matches_the_cpu_and_jax_grad():
    """The issue's lane: lw.grad of a conditional expression (both sides run under masks)."""
    x = floats()
    got = assert_matches_cpu(lw.grad(kinked), x)
    jax_lane = jax.vmap(jax.grad(lambda x: jnp.where(x > 0, x * x * jnp.sin(x), -x)))
    np.testing.assert_allclose(np.asarray(got), jax_lane(jnp.asarray(x)), rtol=RTOL, atol=RTOL)


def scale(a):
    return a * math.sin(a)


def mixed(x, y):
    if x > y:
        z = scale(x) * y
    else:
        z = math.exp(x - y) + lw.stop_gradient(x) * x
    return z * y


def test_value_and_grad_with_argnums_helpers_and_stop_gradient():
    x, y = floats(seed=1), floats(seed=2)
    value, (dx, dy) = assert_matches_cpu(lw.value_and_grad(mixed, argnums=(0, 1)), x, y)

    def jax_mixed(x, y):
        z = jnp.where(x > y, x * jnp.sin(x) * y, jnp.exp(x - y) + lax_stop(x) * x)
        return z * y

    lax_stop = jax.lax.stop_gradient
    want_value, (want_dx, want_dy) = jax.vmap(jax.value_and_grad(jax_mixed, argnums=(0, 1)))(x, y)
    for g, w in ((value, want_value), (dx, want_dx), (dy, want_dy)):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=RTOL, atol=RTOL)


def test_stop_gradient_is_a_constant_for_the_derivative():
    x = floats(seed=3)
    got = lw.vmap(lw.grad(lambda x: x * lw.stop_gradient(x)), backend="tpu")(x)
    np.testing.assert_array_equal(np.asarray(got), x)  # d/dx (x * c) at c = x: x itself


def damped(x, n):
    s = 0.0
    for i in range(n):
        s = s * 0.5 + math.sin(x * i)
        if s > 1.2:
            break
    return s


def grows(x):
    for i in range(12):
        x = x * 1.1 + 0.01 * i
        if x > 3.0:
            return x * x
    return -x


def halves(x):
    k = 0.0
    while x > 0.5:
        x = x * 0.5 + 0.1 * math.cos(x)
        k += 1.0
    return x + k


@pytest.mark.slow  # over 5 s in interpret mode on 2 busy cores
def test_grad_through_a_range_loop_with_break_and_per_lane_trip_counts():
    x, n = floats(seed=4), (np.arange(N) % 7).astype(np.int32)
    assert_matches_cpu(lw.grad(damped), x, n)


def test_grad_through_a_loop_left_by_return():
    assert_matches_cpu(lw.grad(grows), floats(0.0, 3.0, seed=5))


@pytest.mark.slow  # over 5 s in interpret mode on 2 busy cores
def test_value_and_grad_through_a_while_loop():
    assert_matches_cpu(lw.value_and_grad(halves), floats(0.0, 40.0, seed=6))


def pair(x, y):
    return x * y + math.cos(x), math.sqrt(x * x + y * y)


def test_jacfwd_of_a_tuple_result():
    assert_matches_cpu(lw.jacfwd(pair, argnums=(0, 1)), floats(seed=7), floats(seed=8))


def surface(x, y):
    return x * x * y + math.exp(x * y) * math.sin(y)


@pytest.mark.slow  # over 5 s in interpret mode on 2 busy cores
def test_hessian_matches_the_cpu_and_jax_hessian():
    """Forward over forward: a derived lane of a derived lane."""
    x, y = floats(-1.0, 1.0, seed=9), floats(-1.0, 1.0, seed=10)
    got = assert_matches_cpu(lw.hessian(surface, argnums=(0, 1)), x, y)
    want = jax.vmap(jax.hessian(lambda x, y: x * x * y + jnp.exp(x * y) * jnp.sin(y), argnums=(0, 1)))(x, y)
    for g, w in zip(jax.tree.leaves(got), jax.tree.leaves(want), strict=True):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=max(RTOL, 1e-4), atol=max(RTOL, 1e-4))


def with_aux(x, y):
    return x * y * y, x + y


def test_grad_with_aux():
    assert_matches_cpu(lw.grad(with_aux, has_aux=True), floats(seed=11), floats(seed=12))


def power(x, n):
    r = 1.0
    for _ in range(n):
        r = r * x
    return r


def test_jvp_in_a_lane_with_an_integer_primal():
    """lw.jvp written in the lane, an int argument's tangent None (JAX's float0)."""
    def lane(x, n, t):
        return lw.jvp(power, (x, n), (t, None))

    x, n, t = floats(seed=13), (np.arange(N) % 5).astype(np.int32), floats(seed=14)
    value, tangent = assert_matches_cpu(lane, x, n, t)
    np.testing.assert_allclose(np.asarray(tangent), n * x.astype(np.float64) ** np.maximum(n - 1, 0) * t
                               * (n > 0), rtol=1e-4, atol=1e-4)


def test_transformations_written_in_a_lane():
    def lane(x, y):
        return lw.grad(mixed, argnums=1)(x, y) + lw.value_and_grad(scale)(x)[1] * lw.grad(kinked)(y)

    assert_matches_cpu(lane, floats(seed=15), floats(seed=16))


@lw.custom_jvp
def softplus(x):
    return math.log1p(math.exp(x))


@softplus.defjvp
def _softplus_jvp(primals, tangents):
    x, = primals
    t, = tangents
    return softplus(x), t / (1.0 + math.exp(-x))


@lw.custom_vjp
def norm(x, y):
    return math.sqrt(x * x + y * y)


def _norm_fwd(x, y):
    r = norm(x, y)
    return r, (x, y, r)


def _norm_bwd(res, g):
    x, y, r = res
    return (g * x / r if r > 0.0 else 0.0, g * y / r if r > 0.0 else 0.0)


norm.defvjp(_norm_fwd, _norm_bwd)


def test_custom_jvp_and_custom_vjp_rules():
    x, y = floats(seed=17), floats(seed=18)
    got = assert_matches_cpu(lw.grad(lambda x: softplus(x) * x), x)
    np.testing.assert_allclose(np.asarray(got), jax.vmap(jax.grad(lambda x: jax.nn.softplus(x) * x))(x),
                               rtol=RTOL, atol=RTOL)
    assert_matches_cpu(lw.grad(norm, argnums=(0, 1)), x, y)


def decay(c, p):
    s, rate = c
    return (s * 0.9 + math.sin(p * rate), rate), None


def scanned(rate, prices):
    (s, _), _ = lw.scan(decay, (0.0, rate), prices)
    return s


def summed(rate, prices):
    s = 0.0
    for i in range(len(prices)):
        s += math.sin(prices[i] * rate)
    return s


@pytest.mark.parametrize("lane", [pytest.param(scanned, marks=pytest.mark.slow), summed])
def test_grad_with_a_row_argument(lane):
    """A row (a per-lane series) read by index or scanned; the derivative along the scalar."""
    prices = floats(0.0, 1.0, seed=19, n=300 * 6).reshape(300, 6)
    assert_matches_cpu(lw.grad(lane), floats(seed=20, n=300), prices)


# ----------------------------------------------------------------------------- errors and refusals


def test_an_integer_argument_gets_the_cpu_backends_error():
    n = np.arange(N, dtype=np.int32)
    with pytest.raises(LaneTypeError, match=r"^lw\.grad: argument n is int32; only float arguments can be "
                                            r"differentiated"):
        lw.vmap(lw.grad(power, argnums=1), backend="tpu")(floats(), n)
    with pytest.raises(LaneTypeError, match=r"lw\.grad: argument n is int64; only float arguments"):
        lw.vmap(lw.grad(power, argnums=1), backend="python")(floats(), n.astype(np.int64))


def test_a_tuple_result_of_grad_and_a_tangent_for_an_int_are_errors():
    with pytest.raises(LaneTypeError, match=r"lw\.grad: the lane must return one scalar here, and it returns "
                                            r"tuple\. Use lw\.jacfwd"):
        lw.vmap(lw.grad(pair), backend="tpu")(floats(), floats())
    with pytest.raises(LaneTypeError, match=r"lw\.jvp: argument n is int32, so its tangent must be None"):
        lw.vmap(lambda x, n, t: lw.jvp(power, (x, n), (t, t)), backend="tpu")(
            floats(), np.ones(N, np.int32), floats())


def walk(x):
    s = 0.0
    while x > 0.1:
        x = x * 0.5
        s += x
    return s


LINE = walk.__code__.co_firstlineno


@pytest.mark.parametrize("transform", [lw.jacrev, lambda f: (lambda x: lw.jacrev(f)(x))])
def test_reverse_mode_is_refused_with_the_users_line_and_the_fix(transform):
    """lw.jacrev keeps a per-lane stack of records of a depth each lane decides: refused,
    naming the differentiated function's file:line and forward mode."""
    with pytest.raises(LaneCompileError, match=rf"reverse mode \(lw\.jacrev, lw\.vjp\) is not lowered on the tpu "
                                               rf"backend \({re.escape(__file__)}:{LINE}\).*Use forward mode.*"
                                               r"lw\.grad"):
        lw.vmap(transform(walk), backend="tpu")(floats(0.0, 2.0))
    x = floats(0.0, 2.0, n=8).astype(np.float64)  # the reference backend computes it
    np.testing.assert_allclose(lw.vmap(lw.jacrev(walk), backend="python")(x),
                               lw.vmap(lw.grad(walk), backend="python")(x))


def widened(x, y):
    z = x * y
    return np.float64(z) + scale(x)


def test_a_refusal_inside_a_derived_lane_names_the_users_line():
    """The derived lane is generated code: an error in it names the user's statement."""
    line = widened.__code__.co_firstlineno + 2
    for lane in (lw.grad(widened), lw.hessian(widened)):
        with pytest.raises(LaneCompileError, match=rf"np\.float64 is not supported on the tpu backend "
                                                   rf"\({re.escape(__file__)}:{line}\)"):
            lw.vmap(lane, backend="tpu")(floats(), floats())


# ----------------------------------------------------------------------------- Mosaic


@pytest.mark.parametrize("lane, kinds", [(lw.grad(damped), "fi"), (lw.hessian(surface, argnums=(0, 1)), "ff"),
                                         (lw.value_and_grad(halves), "f")])
def test_derived_kernels_pass_the_mosaic_lowering_rules(lane, kinds, monkeypatch):
    """Each kernel lowered for a TPU on this machine (jax.export for platform "tpu"): every
    primitive a derived lane uses has a Mosaic lowering rule."""
    from lanewise.backends import tpu

    args = tuple(floats() if k == "f" else (np.arange(N) % 7).astype(np.int32) for k in kinds)
    monkeypatch.setattr(tpu, "_interpret", lambda: False)
    call = tpu.bind_call(lw.vmap(lane), args, {})
    assert tpu.build(call).lowered(call).count("tpu_custom_call") == 1


# ----------------------------------------------------------------------------- docs/tpu.md's rows

#: Each row of docs/tpu.md's "Gradients" table and the tests of this file that run it.
GRADIENT_ROWS = {
    "G01": ("test_grad_of_a_branch_lane_matches_the_cpu_and_jax_grad",
            "test_value_and_grad_with_argnums_helpers_and_stop_gradient",
            "test_grad_through_a_range_loop_with_break_and_per_lane_trip_counts",
            "test_grad_through_a_loop_left_by_return", "test_value_and_grad_through_a_while_loop",
            "test_jacfwd_of_a_tuple_result", "test_hessian_matches_the_cpu_and_jax_hessian", "test_grad_with_aux",
            "test_grad_with_a_row_argument"),
    "G02": ("test_jvp_in_a_lane_with_an_integer_primal", "test_transformations_written_in_a_lane"),
    "G03": ("test_stop_gradient_is_a_constant_for_the_derivative", "test_custom_jvp_and_custom_vjp_rules"),
    "G04": ("test_an_integer_argument_gets_the_cpu_backends_error",
            "test_a_tuple_result_of_grad_and_a_tangent_for_an_int_are_errors"),
    "G05": ("test_reverse_mode_is_refused_with_the_users_line_and_the_fix",),
}


def test_gradient_rows_and_their_tests_are_one_set():
    from pathlib import Path

    text = (Path(__file__).resolve().parents[1] / "docs" / "tpu.md").read_text()
    assert sorted(re.findall(r"^\| `(G\d+)` \|", text, re.M)) == sorted(GRADIENT_ROWS)
    for tests in GRADIENT_ROWS.values():
        assert all(callable(globals().get(name)) for name in tests)
