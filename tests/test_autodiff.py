"""lw.jvp / grad / value_and_grad / jacfwd / hessian against JAX (x64) and mpmath.

Each lane has a JAX twin written with jnp / lax.cond / lax.fori_loop /
lax.while_loop; where JAX cannot express the lane (a break out of a loop with a
data-dependent trip count, early returns inside loops) the derivative is checked
against mpmath's high-precision numerical differentiation of the same lane run
in mpmath arithmetic.
"""

from __future__ import annotations

import collections
import math
import types

import jax
import jax.numpy as jnp
import mpmath
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import lanewise as lw

jax.config.update("jax_enable_x64", True)


# ----------------------------------------------------------------------------- the corpus


def smooth(x, y):
    return math.sin(x) * math.exp(y) + x ** 3 / (1.0 + y * y) - math.atan2(y, x) + math.hypot(x, y)


def smooth_jax(x, y):
    return jnp.sin(x) * jnp.exp(y) + x ** 3 / (1.0 + y * y) - jnp.arctan2(y, x) + jnp.hypot(x, y)


def branchy(x, y):
    if x > y:
        z = x * math.log1p(y * y)
    elif x < -y:
        z = math.tanh(x - y) * 3.0
    else:
        z = math.sqrt(x * x + 1.0) - y
    return z * z


def branchy_jax(x, y):
    z = jnp.where(x > y, x * jnp.log1p(y * y), jnp.where(x < -y, jnp.tanh(x - y) * 3.0, jnp.sqrt(x * x + 1.0) - y))
    return z * z


def looped(x, y):
    s = 0.0
    for i in range(6):
        s = s * x + math.cos(s + y * i)
    return s


def looped_jax(x, y):
    return jax.lax.fori_loop(0, 6, lambda i, s: s * x + jnp.cos(s + y * i), 0.0)


def halving(x, y):
    n = 0
    while x * x > 0.5 + 0.1 * y * y:  # a data-dependent trip count
        x = 0.5 * x + 0.1 * math.sin(y)
        n += 1
    return x * y + n


def halving_jax(x, y):
    def body(c):
        return 0.5 * c[0] + 0.1 * jnp.sin(y), c[1] + 1

    x, n = jax.lax.while_loop(lambda c: c[0] * c[0] > 0.5 + 0.1 * y * y, body, (x, 0))
    return x * y + n


def _kernel(a, b):
    """A helper with an early return and a tuple result."""
    if a < 0.0:
        return -a, b * b
    return a * math.expm1(b), b + a


def with_helper(x, y):
    u, v = _kernel(x - 0.5, y)
    return u * v + _kernel(y, x)[1]


def with_helper_jax(x, y):
    def kernel(a, b):
        return jnp.where(a < 0, -a, a * jnp.expm1(b)), jnp.where(a < 0, b * b, b + a)

    u, v = kernel(x - 0.5, y)
    return u * v + kernel(y, x)[1]


def powers(x, y):
    return x ** 2 + x ** 0.5 + y ** 3 + 2.0 ** x + abs(y) ** x + (x + 1.0) ** y - 1.0 / x


def powers_jax(x, y):
    return x ** 2 + x ** 0.5 + y ** 3 + 2.0 ** x + jnp.abs(y) ** x + (x + 1.0) ** y - 1.0 / x


def numpy_calls(x, y):
    return np.arcsinh(x) * np.cbrt(y) + np.square(np.log10(x)) + np.fmod(x, 0.7) + np.arctan(y) * np.deg2rad(x)


def numpy_calls_jax(x, y):
    return (jnp.arcsinh(x) * jnp.cbrt(y) + jnp.square(jnp.log10(x)) + jnp.fmod(x, 0.7)
            + jnp.arctan(y) * jnp.deg2rad(x))


CORPUS = [(smooth, smooth_jax), (branchy, branchy_jax), (looped, looped_jax), (halving, halving_jax),
          (with_helper, with_helper_jax), (powers, powers_jax), (numpy_calls, numpy_calls_jax)]
POINTS = [(1.3, 0.4), (0.7, -0.9), (2.1, 1.7), (0.25, 0.6)]
IDS = [lane.__name__ for lane, _ in CORPUS]


def jax_grad(fun, argnums=0):
    """JAX's gradient by forward mode: jax.grad cannot go through lax.while_loop (jax#2469)."""
    return jax.jacfwd(fun, argnums=argnums)


@pytest.mark.parametrize("lane,twin", CORPUS, ids=IDS)
def test_grad_and_hessian_match_jax(lane, twin):
    for x, y in POINTS:
        got = lw.grad(lane, argnums=(0, 1))(x, y)
        want = jax_grad(twin, argnums=(0, 1))(x, y)
        np.testing.assert_allclose(got, [float(w) for w in want], rtol=1e-12, atol=1e-12)
        got_h = np.array(lw.hessian(lane, argnums=(0, 1))(x, y))
        want_h = np.array(jax.jacfwd(jax.jacfwd(twin, argnums=(0, 1)), argnums=(0, 1))(x, y), dtype=float)
        np.testing.assert_allclose(got_h, want_h, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("lane,twin", CORPUS, ids=IDS)
def test_jvp_matches_jax(lane, twin):
    for (x, y), (tx, ty) in zip(POINTS, [(1.0, 0.0), (0.3, -2.0), (0.0, 1.0), (-1.5, 0.25)], strict=True):
        value, tangent = lw.jvp(lane, (x, y), (tx, ty))
        want_value, want_tangent = jax.jvp(twin, (x, y), (tx, ty))
        np.testing.assert_allclose([value, tangent], [float(want_value), float(want_tangent)], rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("backend", ["python", "cpu"])
def test_vmapped_grad_matches_jax_vmap(backend):
    rng = np.random.default_rng(0)
    x, y = rng.uniform(0.2, 2.5, 300), rng.uniform(-1.5, 1.5, 300)
    for lane, twin in [(branchy, branchy_jax), (halving, halving_jax), (with_helper, with_helper_jax)]:
        got = lw.vmap(lw.grad(lane, argnums=(0, 1)), backend=backend)(x, y)
        want = jax.vmap(jax_grad(twin, argnums=(0, 1)))(x, y)
        np.testing.assert_allclose(np.array(got), np.array(want), rtol=1e-12, atol=1e-12)


def test_value_and_grad_jacfwd_and_aux():
    def f(x, y):
        return x * y + math.sin(x), (x - y, 3)

    value, g = lw.value_and_grad(f, has_aux=True)(0.5, 2.0)
    assert value == f(0.5, 2.0) and g == pytest.approx(2.0 + math.cos(0.5), abs=1e-15)
    g2, aux = lw.grad(f, argnums=1, has_aux=True)(0.5, 2.0)
    assert g2 == 0.5 and aux == (0.5 - 2.0, 3)

    def pair(x, y):
        return (x * y, (math.exp(x), y / x))

    jac = lw.jacfwd(pair, argnums=(0, 1))(1.5, 2.0)
    want = jax.jacfwd(lambda x, y: (x * y, (jnp.exp(x), y / x)), argnums=(0, 1))(1.5, 2.0)
    np.testing.assert_allclose(np.array(jax.tree_util.tree_leaves(jac)),
                               np.array(jax.tree_util.tree_leaves(want)), rtol=1e-14)
    assert jax.tree_util.tree_structure(jac) == jax.tree_util.tree_structure(
        jax.tree_util.tree_map(float, want))
    assert lw.jacfwd(lambda x: math.sin(x))(0.0) == 1.0


def test_nondifferentiable_points_follow_jax():
    cases = [
        (lambda x: abs(x), lambda x: jnp.abs(x), 0.0),
        (lambda x: max(x, 1.0), lambda x: jnp.maximum(x, 1.0), 1.0),
        (lambda x: min(x, x), lambda x: jnp.minimum(x, x), 2.0),
        (lambda x: max(x, 2.0 * x, 0.5), lambda x: jnp.maximum(jnp.maximum(x, 2.0 * x), 0.5), 0.5),
        (lambda x: math.floor(x) * x, lambda x: jnp.floor(x) * x, 2.5),
        (lambda x: x ** 2.0, lambda x: x ** 2.0, 0.0),
        (lambda x: 0.0 ** x, lambda x: 0.0 ** x, 1.0),
        (lambda x: math.sqrt(x), lambda x: jnp.sqrt(x), 0.0),
        (lambda x: x % 1.5, lambda x: x % 1.5, 4.0),
        (lambda x: np.where(x > 1.0, x * x, -x), lambda x: jnp.where(x > 1.0, x * x, -x), 1.0),
    ]
    for lane, twin, x in cases:
        with np.errstate(divide="ignore", invalid="ignore"):  # d sqrt(x) at 0 is inf, as in JAX
            got = lw.grad(lane)(x)
        assert got == pytest.approx(float(jax.grad(twin)(x)), nan_ok=True), (lane, x)


def test_stop_gradient_and_inactive_values():
    def f(x, n):
        s = lw.stop_gradient(x * x) * x  # d/dx = x*x, not 3 x^2
        k = 0
        for i in range(n):
            if s > i:
                k += 1  # an integer counter: no tangent
        return s + k

    assert lw.grad(f)(2.0, 6) == 4.0
    assert lw.vmap(lw.grad(f), in_axes=(0, None))(np.array([1.0, 2.0]), 6).tolist() == [1.0, 4.0]


# ----------------------------------------------------------------------------- what JAX cannot run in reverse


def escape_lane(cr, ci):
    """An escape-time iteration with a break and a smooth observable of the exit point."""
    zr, zi = 0.0, 0.0
    acc = 0.0
    for n in range(40):
        zr, zi = zr * zr - zi * zi + cr, 2.0 * zr * zi + ci
        acc = acc + math.exp(-(zr * zr + zi * zi))
        if zr * zr + zi * zi > 4.0:
            break
    return acc + math.atan(zi / (1.0 + zr * zr))


def in_mpmath(lane):
    """The lane's own code run in mpmath arithmetic (its ``math`` is mpmath): the reference."""
    return types.FunctionType(lane.__code__, {**lane.__globals__, "math": mpmath})


def early_return(x, y):
    t = x
    while True:
        t = t * 1.3 + math.sin(y)
        if t > 5.0:
            return t * y
        if t < -5.0:
            return -t
    return 0.0


@pytest.mark.parametrize("point", [(-0.5, 0.3), (0.2, 0.55), (-1.2, 0.1), (0.35, 0.1)])
def test_divergent_loops_match_mpmath(point):
    mpmath.mp.dps = 40
    cr, ci = point
    got = lw.grad(escape_lane, argnums=(0, 1))(cr, ci)
    np.testing.assert_allclose(got, _mp_grad(escape_lane, cr, ci), rtol=1e-9, atol=1e-12)
    for x, y in [(0.5, 0.4), (-0.7, 1.1), (1.2, -0.3)]:
        got = lw.grad(early_return, argnums=(0, 1))(x, y)
        np.testing.assert_allclose(got, _mp_grad(early_return, x, y), rtol=1e-9)


def _mp_grad(lane, x, y):
    f = in_mpmath(lane)
    x, y = mpmath.mpf(x), mpmath.mpf(y)
    return [float(mpmath.diff(lambda a: f(a, y), x)), float(mpmath.diff(lambda b: f(x, b), y))]


def test_divergent_grad_on_cpu_takes_the_spmd_path_and_matches_python():
    cr = np.linspace(-1.5, 0.5, 257)
    ci = np.linspace(-0.2, 1.0, 257)
    mapped = lw.vmap(lw.grad(escape_lane, argnums=(0, 1)))
    got = mapped(cr, ci)
    want = lw.vmap(lw.grad(escape_lane, argnums=(0, 1)), backend="python")(cr, ci)
    np.testing.assert_allclose(np.array(got), np.array(want), rtol=1e-12, atol=1e-12)
    text = str(lw.explain(mapped, cr, ci))
    assert "lane path: SPMD" in text, text


# ----------------------------------------------------------------------------- composition


def test_jvp_inside_a_compiled_lane_and_array_tangents():
    def lane(x):
        return lw.jvp(looped, (x, 0.5), (1.0, 0.0))

    xs = np.linspace(0.1, 1.5, 9)
    value, tangent = lw.vmap(lane)(xs)
    want_v, want_t = jax.vmap(lambda x: jax.jvp(looped_jax, (x, 0.5), (1.0, 0.0)))(xs)
    np.testing.assert_allclose(value, want_v, rtol=1e-13)
    np.testing.assert_allclose(tangent, want_t, rtol=1e-12)

    def norm_ish(row):
        s = 0.0
        for v in row:
            s += v * v * math.sin(v)
        return s

    rows, directions = np.random.default_rng(1).normal(size=(2, 5, 7))
    got = lw.vmap(lambda r, d: lw.jvp(norm_ish, (r,), (d,)))(rows, directions)
    want = jax.vmap(lambda r, d: jax.jvp(lambda r: jnp.sum(r * r * jnp.sin(r)), (r,), (d,)))(rows, directions)
    np.testing.assert_allclose(np.array(got), np.array(want), rtol=1e-12)


def test_shared_parameter_gradient_through_reduce():
    """The fitting pattern: a sum over lanes of per-lane value and parameter gradients, one fused pass."""
    def loss(x, target, a, b):
        r = a * math.exp(-b * x) - target
        return r * r

    x = np.linspace(0.0, 3.0, 1001)
    target = 2.0 * np.exp(-0.7 * x)
    total = lw.reduce(lw.vmap(lw.value_and_grad(loss, argnums=(2, 3)), in_axes=(0, 0, None, None)), "sum")
    value, (ga, gb) = total(x, target, 1.5, 0.5)

    def jax_loss(a, b):
        return jnp.sum((a * jnp.exp(-b * x) - target) ** 2)

    want = jax.value_and_grad(jax_loss, argnums=(0, 1))(1.5, 0.5)
    np.testing.assert_allclose([value, ga, gb], [float(want[0]), *map(float, want[1])], rtol=1e-11)


@settings(max_examples=40, deadline=None)
@given(st.floats(0.05, 3.0), st.floats(-2.0, 2.0))
def test_hypothesis_grad_matches_jax(x, y):
    for lane, twin in [(smooth, smooth_jax), (halving, halving_jax), (with_helper, with_helper_jax)]:
        got = lw.grad(lane, argnums=(0, 1))(x, y)
        want = jax_grad(twin, argnums=(0, 1))(x, y)
        np.testing.assert_allclose(got, [float(w) for w in want], rtol=1e-10, atol=1e-10)


def test_generated_source_is_deterministic_and_names_user_lines():
    a = lw.grad(branchy, argnums=(0, 1))._lw_source
    import inspect

    assert a == lw.grad(branchy, argnums=(0, 1))._lw_source
    assert f"test_autodiff.py:{inspect.getsourcelines(branchy)[1] + 1}" in a or "test_autodiff.py" in a
    assert "x = x" not in a


# ----------------------------------------------------------------------------- errors


def test_errors_name_the_argument_and_the_line():
    with pytest.raises(lw.LaneTypeError, match="argument n is int"):
        lw.grad(lambda x, n: x * n, argnums=1)(2.0, 3)
    with pytest.raises(lw.LanewiseError, match="argument n is int64"):
        lw.vmap(lw.grad(lambda x, n: x * n, argnums=1))(np.ones(3), np.arange(3))
    with pytest.raises(lw.LaneTypeError, match="must return one scalar"):
        lw.grad(lambda x: (x, x))(1.0)
    with pytest.raises(lw.LanewiseError, match="must return one scalar"):
        lw.vmap(lw.grad(lambda x: (x, x)))(np.ones(3))
    with pytest.raises(lw.LanewiseError, match="out of range"):
        lw.grad(lambda x: x, argnums=1)

    def uses_gamma(x):
        return math.gamma(x) * 2.0

    with pytest.raises(lw.LaneCompileError, match=r"math\.gamma has no derivative rule") as info:
        lw.grad(uses_gamma)
    assert "test_autodiff.py:" in str(info.value) and "math.gamma(x) * 2.0" in str(info.value)
    with pytest.raises(lw.LaneTypeError, match="tangent must be None"):
        lw.jvp(lambda x, n: x * n, (1.0, 2), (1.0, 1.0))


def closes_over_x(x):
    g = lambda t: t * x  # noqa: E731 - the lambda under test
    return g(2.0)


def scans_with_a_lambda(x):
    return lw.scan(lambda c, t: (c * x + t, None), 0.0, np.arange(3.0))[0]


@pytest.mark.parametrize("lane", [closes_over_x, scans_with_a_lambda], ids=lambda f: f.__name__)
@pytest.mark.parametrize("transform", [lw.grad, lw.jacrev, lw.jacfwd], ids=lambda t: t.__name__)
def test_a_lambda_reading_a_differentiated_value_is_refused(lane, transform):
    """Such a lambda was taken for a constant: the derivative of 2 * x came out 0,
    on every backend.  It is refused, naming the line, as a nested def is."""
    with pytest.raises(lw.LaneCompileError, match="cannot differentiate") as info:
        lw.vmap(transform(lane), backend="python")(np.array([0.5, 2.0]))
    assert "test_autodiff.py:" in str(info.value)


def writes_a_list(x):
    a = [x, 1.0]
    a[1] = a[0] * 2.0
    return a[1]


def appends_to_a_list(x):
    a = [x]
    a.append(x * x)
    return a[1]


def reads_a_list(x):
    a = [x, 1.0]
    return a[0] * a[1] * x


@pytest.mark.parametrize("backend", ["python", "cpu"])
@pytest.mark.parametrize("lane", [writes_a_list, appends_to_a_list], ids=lambda f: f.__name__)
def test_a_list_changed_in_a_differentiated_lane_is_refused(lane, backend):
    """Lists are differentiated as tuples: a[1] = ... was a raw TypeError ('tuple' object
    does not support item assignment) on the python backend and a Numba setitem error on cpu."""
    with pytest.raises(lw.LaneCompileError, match=r"test_autodiff.py:\d+: changing a list"):
        lw.vmap(lw.grad(lane), backend=backend)(np.array([0.5, 2.0]))
    np.testing.assert_allclose(lw.vmap(lw.grad(reads_a_list), backend=backend)(np.array([3.0])), [6.0])


Pair = collections.namedtuple("Pair", "a b")


def builds_a_pair(x):
    return Pair(x * x, 2.0 * x)[0]


def test_a_namedtuple_of_differentiated_values_is_refused_with_the_fix():
    """The message suggested lw.stop_gradient for the namedtuple's constructor."""
    with pytest.raises(lw.LaneCompileError, match=r"Pair\(\.\.\.\) builds a namedtuple") as info:
        lw.vmap(lw.grad(builds_a_pair))(np.array([3.0]))
    assert "plain tuple" in str(info.value) and "stop_gradient" not in str(info.value)


def takes_an_int(n, x):
    return n * x


def test_a_derivative_lanes_compile_error_names_the_users_def():
    """The lane's location was lanewise's generated '<lanewise.autodiff HASH>:3'."""
    with pytest.raises(lw.LaneCompileError) as info:
        lw.vmap(lw.grad(takes_an_int))(np.array([1, 2]), np.array([1.0, 2.0]))
    first = str(info.value).splitlines()[0]
    assert "grad(takes_an_int)" in first and "test_autodiff.py:" in first and "<lanewise" not in first, first


def _scan_step(c, x):
    c = c * 0.9 + math.sin(x * c)
    return c, c * x


def scanned(a, b, xs):
    c, ys = lw.scan(_scan_step, a, xs * b)
    return c + ys.sum()


def scanned_jax(a, b, xs):
    def step(c, x):
        c = c * 0.9 + jnp.sin(x * c)
        return c, c * x

    c, ys = jax.lax.scan(step, a, xs * b)
    return c + ys.sum()


@pytest.mark.parametrize("backend", ["python", "cpu"])
def test_scan_inside_a_differentiated_lane_matches_jax(backend):
    a = np.linspace(0.1, 1.0, 6)
    xs = np.random.default_rng(2).uniform(0.0, 1.0, (6, 9))
    got = lw.vmap(lw.grad(scanned, argnums=(0, 1)), in_axes=(0, None, 0), backend=backend)(a, 1.2, xs)
    want = jax.vmap(jax.grad(scanned_jax, argnums=(0, 1)), in_axes=(0, None, 0))(a, 1.2, xs)
    np.testing.assert_allclose(np.array(got), np.array(want), rtol=1e-12)


@lw.custom_jvp
def _clipped(x):
    return math.tanh(x) * 2.0


@_clipped.defjvp
def _clipped_rule(primals, tangents):
    (x,), (t,) = primals, tangents
    return _clipped(x), min(max(t, -0.5), 0.5)  # a rule that is not the body's derivative


def uses_custom(x, y):
    return _clipped(x * y) + y


def uses_custom_jax(x, y):
    @jax.custom_jvp
    def clipped(x):
        return jnp.tanh(x) * 2.0

    @clipped.defjvp
    def rule(primals, tangents):
        (x,), (t,) = primals, tangents
        return clipped(x), jnp.clip(t, -0.5, 0.5)

    return clipped(x * y) + y


@pytest.mark.parametrize("backend", ["python", "cpu"])
def test_custom_jvp_rule_is_used_as_in_jax(backend):
    x, y = np.linspace(-1.0, 1.0, 7), np.linspace(0.2, 2.0, 7)
    got = lw.vmap(lw.grad(uses_custom, argnums=(0, 1)), backend=backend)(x, y)
    want = jax.vmap(jax.jacfwd(uses_custom_jax, argnums=(0, 1)))(x, y)
    np.testing.assert_allclose(np.array(got), np.array(want), rtol=1e-14)
    assert lw.grad(_clipped)(0.3) == 0.5 and lw.vmap(_clipped)(np.zeros(2)).tolist() == [0.0, 0.0]


def test_gradient_of_a_reduce_stores_nothing_per_lane():
    """The fitting pattern allocates nothing per lane (compiled or in Python): per-lane
    gradients are reduced as they are made."""
    import tracemalloc

    from numba.core.runtime import rtsys

    def loss(t, y, a, b):
        r = a * math.exp(-b * t) - y
        return r * r

    fit = lw.reduce(lw.vmap(lw.value_and_grad(loss, argnums=(2, 3)), in_axes=(0, 0, None, None)), "sum")
    data = {n: (np.linspace(0.0, 3.0, n), np.exp(-np.linspace(0.0, 3.0, n))) for n in (10**3, 10**5)}
    counts, peaks = [], []
    for n in (10**3, 10**5, 10**3, 10**5):
        fit(*data[n], 1.5, 0.5)  # compiled (serial and parallel kernels) before counting
        before = rtsys.get_allocation_stats().alloc
        tracemalloc.start()
        fit(*data[n], 1.5, 0.5)
        peaks.append(tracemalloc.get_traced_memory()[1])
        tracemalloc.stop()
        counts.append(rtsys.get_allocation_stats().alloc - before)
    # lw.reduce allocates a few partials per block of 1024 lanes (as for any tuple result), never per lane
    assert counts[0] == counts[2] and counts[1] == counts[3] and counts[1] < 10**5 // 100, counts
    assert max(peaks) < 256 * 1024, peaks  # 10^5 lanes of gradients would be 1.6 MB


def _decay(t, a, b):
    return a * math.exp(-b * t)


def _inline_derivatives(t, a):
    return (lw.grad(_decay, argnums=1)(t, a, 0.5), lw.value_and_grad(_decay, 2)(t, a, 0.5)[1],
            lw.jacfwd(_decay, argnums=1)(t, a, 0.5), lw.hessian(_decay, 2)(t, a, 0.5))


def test_transformations_called_inside_a_compiled_lane():
    t = np.linspace(0.0, 2.0, 9)
    got = lw.vmap(_inline_derivatives, in_axes=(0, None))(t, 2.0)
    want = (np.exp(-0.5 * t), -t * 2.0 * np.exp(-0.5 * t), np.exp(-0.5 * t), t * t * 2.0 * np.exp(-0.5 * t))
    np.testing.assert_allclose(np.array(got), np.array(want), rtol=1e-14)

    def several(t, a):
        return lw.grad(_decay, argnums=(1, 2))(t, a, 0.5)

    with pytest.raises(lw.LaneCompileError, match="argnums must be a constant int"):
        lw.vmap(several, in_axes=(0, None))(t, 2.0)
