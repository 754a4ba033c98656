"""Reverse mode's adjoint code (autodiff/adjoint.py, autodiff/structured.py): control flow
that exits early, against forward mode, the tape, JAX and mpmath, on both backends."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import lanewise as lw
from lanewise.autodiff import intrinsics
from lanewise.autodiff.forward import Plan, transform
from lanewise.autodiff.source import statement_lines, text
from lanewise.autodiff.structured import structure
from lanewise.lane.ir.build import function_ir
from test_autodiff import _mp_grad, escape_lane
from test_autodiff_reverse import _softplus

jax.config.update("jax_enable_x64", True)


def nested_exits(x, y):
    s = 0.0
    for i in range(6):
        if i == 4:
            continue
        j = 0
        while True:
            j += 1
            s += math.sin(x * j) * y
            if s > 2.0 or j > 3:
                break
        if s > 3.5:
            return s * x
        s = s * 0.9 + x
    return s + y * y


def stepped(x, y):
    acc = 1.0
    for k in range(10, 1, -3):
        acc = acc * x + k * y
        if acc > 50.0:
            break
    return acc


def variable_range(x, y, n=5):
    acc = x
    for k in range(n, -n, -2):
        if k == 1:
            continue
        acc = acc + y / k - acc * 0.1
    return acc * x


def choices(x, y):
    z = x * y if x > y else x / y
    w = np.where(z > 1.0, z * z, -z)
    m = max(x, y)
    return z + w + m + abs(x - y)


def chained(x, y):
    a = b = x * y
    a, b = b + y, a * x
    a += b
    return a * b


def early(x, y):
    if x < 0.0:
        return -x * y
    t = x
    while t > 1.0:
        t = t / 2.0
        if t < y:
            return t + y
    return t * y


def _cube_plus(u, v):
    return u * u * u + math.cos(v) * u


def calls(x, y):
    return _cube_plus(x, y) + _softplus(x * y) + lw.stop_gradient(x) * y


def _cmul(ar, ai, br, bi):
    return ar * br - ai * bi, ar * bi + ai * br


def pairs(x, y):
    zr, zi = x, y
    for _ in range(5):
        zr, zi = _cmul(zr, zi, zr, zi)
        zr, zi = zr + x, zi + 0.5 * y
        if zr * zr + zi * zi > 16.0:
            break
    return math.atan2(zi, zr) + zr


CORPUS = [nested_exits, stepped, variable_range, choices, chained, early, calls, pairs]
POINTS = [(0.3, 0.7), (1.7, 0.4), (-0.6, 1.3), (2.5, -0.8), (0.05, 2.2)]


def _tape(lane, argnums=(0, 1)):
    n = lane.__code__.co_argcount
    seeds = [None] * n
    for j, a in enumerate(argnums):
        seeds[a] = tuple(1.0 if i == j else 0.0 for i in range(len(argnums)))
    return transform(lane, Plan(k=1, seeds=tuple(seeds), finish="jacrev", single=False, transform="lw.jacrev",
                                mode="tape"))


@pytest.mark.parametrize("lane", CORPUS, ids=[f.__name__ for f in CORPUS])
def test_adjoint_code_is_used_and_matches_forward_mode_and_the_tape(lane):
    rev = lw.jacrev(lane, argnums=(0, 1))
    assert "adjoint code" in rev._lw_source.splitlines()[0], getattr(rev, "_lw_tape_reason", "")
    tape = _tape(lane)
    for x, y in POINTS:
        want = lw.jacfwd(lane, argnums=(0, 1))(x, y)
        np.testing.assert_allclose(rev(x, y), want, rtol=1e-12, atol=1e-13)
        np.testing.assert_allclose(tape(x, y), want, rtol=1e-12, atol=1e-13)


@pytest.mark.parametrize("backend", ["python", "cpu"])
def test_vmapped_adjoint_code_matches_forward_mode(backend):
    rng = np.random.default_rng(3)
    x, y = rng.uniform(-1.0, 2.5, 64), rng.uniform(-1.0, 2.5, 64)
    for lane in CORPUS:
        got = lw.vmap(lw.jacrev(lane, argnums=(0, 1)), backend=backend)(x, y)
        want = lw.vmap(lw.jacfwd(lane, argnums=(0, 1)), backend="python")(x, y)
        np.testing.assert_allclose(np.array(got), np.array(want), rtol=1e-11, atol=1e-12, err_msg=lane.__name__)


@settings(max_examples=60, deadline=None)
@given(st.floats(-3.0, 3.0), st.floats(-3.0, 3.0))
def test_the_structured_lane_computes_what_the_lane_computes(x, y):
    """break/continue/return rewritten as flags: the same value on every path."""
    for lane in CORPUS:
        namespace = dict(lane.__globals__, _q_ad=intrinsics)
        structured = structure(function_ir(lane), "_q_")
        params = ", ".join(p.name + ("" if p.default is None else f"={text(p.default)}") for p in structured.params)
        written = "\n".join([f"def {lane.__name__}({params}):"] + ["    " + line for line in
                                                               statement_lines(structured.body)])
        exec(compile(written, "<structured>", "exec"), namespace)  # noqa: S102 - the rewritten lane
        try:
            want = lane(x, y)
        except ZeroDivisionError:
            continue
        got = namespace[lane.__name__](x, y)
        assert got == want or (math.isnan(got) and math.isnan(want)), lane.__name__  # inf - inf: nan on both


@pytest.mark.parametrize("point", [(-0.5, 0.3), (0.2, 0.55), (-1.2, 0.1), (0.26, 0.0)])
def test_reverse_through_a_break_matches_mpmath(point):
    rev = lw.jacrev(escape_lane, argnums=(0, 1))
    assert "adjoint code" in rev._lw_source.splitlines()[0]
    np.testing.assert_allclose(rev(*point), _mp_grad(escape_lane, *point), rtol=1e-9, atol=1e-12)


def _long(x, y, n):
    s = x
    k = 0
    while k < n:  # grows the stack far past its first 4096 values
        s = s + math.sin(s * y) * 1e-3
        k += 1
    return s


@pytest.mark.parametrize("backend", ["python", "cpu"])
def test_the_stack_grows_with_the_trip_count(backend):
    n = np.array([10, 3000, 100000])  # 1.6 MB: a buffer the allocator maps and unmaps
    x, y = np.full(3, 0.3), np.full(3, 1.1)
    got = lw.vmap(lw.jacrev(_long, argnums=(0, 1)), backend=backend)(x, y, n)
    want = lw.vmap(lw.grad(_long, argnums=(0, 1)), backend="python")(x, y, n)
    np.testing.assert_allclose(np.array(got), np.array(want), rtol=1e-11)


def _weights(w, x):
    s = 0.0
    n = w.shape[0]
    for i in range(n):
        if i + 1 < n:
            s += w[i] * w[i + 1] * x
        else:
            s += math.exp(w[i]) / x
    return s


def _weights_twin(w, x):
    return jnp.sum(w[:-1] * w[1:] * x) + jnp.exp(w[-1]) / x


@pytest.mark.parametrize("backend", ["python", "cpu"])
def test_array_elements_and_several_outputs_match_jax(backend):
    w = np.array([[0.5, -1.0, 2.0, 0.25], [1.5, 0.5, -0.5, 1.0]])
    x = np.array([1.3, 0.7])
    dw, dx = lw.vmap(lw.jacrev(_weights, argnums=(0, 1)), backend=backend)(w, x)
    want_w, want_x = jax.vmap(jax.jacrev(_weights_twin, argnums=(0, 1)))(w, x)
    np.testing.assert_allclose(dw, want_w, rtol=1e-13)
    np.testing.assert_allclose(dx, want_x, rtol=1e-13)

    def two(x, y):
        return (x * y, (math.exp(x), y / x))

    got = lw.jacrev(two, argnums=(0, 1))(1.5, 2.0)
    assert "adjoint code" in lw.jacrev(two, argnums=(0, 1))._lw_source.splitlines()[0]
    want = jax.jacrev(lambda x, y: (x * y, (jnp.exp(x), y / x)), argnums=(0, 1))(1.5, 2.0)
    np.testing.assert_allclose(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want), rtol=1e-14)


def test_a_helper_unpacked_into_the_wrong_number_of_names_is_a_clear_error():
    def three(x, y):
        a, b, c = _cmul(x, y, x, y)
        return a + b + c

    for backend in ("python", "cpu"):
        with pytest.raises(lw.LanewiseError, match=r"_cmul returns what \(a, b, c\) unpacks"):
            lw.vmap(lw.jacrev(three, argnums=(0, 1)), backend=backend)(np.ones(2), np.ones(2))


def test_a_whole_array_used_as_a_number_is_a_clear_error():
    def scaled(w, x):
        return w * x

    for backend in ("python", "cpu"):
        with pytest.raises(lw.LanewiseError, match="argument w is an array that the lane uses whole"):
            lw.vmap(lw.jacrev(scaled), in_axes=(None, 0), backend=backend)(np.ones(3), np.ones(2))


# ---------------------------------------------------------------------------- checkpoints and the budget


def _drift(x, y, n):
    s = x
    k = 0
    while k < n:
        s = s + math.sin(s * y) * 1e-3
        k += 1
    return s


def _segments(x, y, n):
    s, t = x, 0.0
    for i in range(2, n, 3):
        j = 0
        while j < 3:  # an inner loop, recorded whole inside each recomputed segment
            t = math.cos(s + j) * y
            j += 1
        if t > 0.0:
            s = s + t * 1e-3 + i * 1e-6
        else:
            s = s - t * t * 1e-3
    return s * t


@pytest.mark.parametrize("backend", ["python", "cpu"])
def test_checkpointed_loops_match_forward_mode(backend):
    n = np.array([0, 1, 7, 130, 1000, 2500])
    x, y = np.full(6, 0.3), np.full(6, 1.1)
    with lw.config.overridden(reverse_memory=8192):  # 1024 values: checkpoints thinned many times
        lanes = [lw.jacrev(_drift, argnums=(0, 1)), lw.jacrev(_segments, argnums=(0, 1))]
    for lane, lane_fn in zip(lanes, (_drift, _segments), strict=True):
        assert "_lw0_seg" in lane._lw_source and "thin" in lane._lw_source
        got = lw.vmap(lane, backend=backend)(x, y, n)
        want = lw.vmap(lw.jacfwd(lane_fn, argnums=(0, 1)), backend="python")(x, y, n)
        np.testing.assert_allclose(np.array(got), np.array(want), rtol=1e-11, atol=1e-300)


def test_a_million_step_loop_stays_within_the_budget():
    """Unbudgeted, the lane records 2 values per step (16 MB); with a 64 KB budget the
    stack can never pass 8192 values (it raises first), and the gradient is exact."""
    n, x, y = np.array([10**6, 10**6 + 3]), np.array([0.3, 0.2]), np.array([1.1, 0.9])
    with lw.config.overridden(reverse_memory=64 * 1024):
        got = lw.vmap(lw.jacrev(_drift, argnums=(0, 1)))(x, y, n)
    want = lw.vmap(lw.jacfwd(_drift, argnums=(0, 1)))(x, y, n)
    np.testing.assert_allclose(np.array(got), np.array(want), rtol=1e-10, atol=1e-300)


@pytest.mark.parametrize("backend", ["python", "cpu"])
def test_a_lane_over_the_budget_is_a_clear_error(backend):
    with lw.config.overridden(reverse_memory=4096):
        lane = lw.vmap(lw.jacrev(_drift, argnums=(0, 1)), backend=backend)
    n = np.array([10**5]) if backend == "cpu" else np.array([20000])
    with pytest.raises(lw.ReverseMemoryError, match=r"more than lw.config.reverse_memory"):
        lane(np.array([0.3]), np.array([1.1]), n)
    with lw.config.overridden(reverse_memory=100), pytest.raises(lw.LanewiseError, match="at least 4096"):
        lw.jacrev(_drift)


def test_the_budget_reads_sizes():
    from lanewise.config import _bytes
    assert (_bytes("64MB"), _bytes("1GiB"), _bytes("5000"), _bytes("none"), _bytes(None)) == \
        (64 * 2**20, 2**30, 5000, None, None)


def _writes(x, y, n):
    buf = np.zeros(n)
    s = x
    for i in range(n):  # stores into an array: not checkpointed, recorded whole
        s = s * y + 0.1
        buf[i] = s
    return s + buf[0]


def test_a_loop_that_cannot_be_checkpointed_is_recorded_whole():
    with lw.config.overridden(reverse_memory=1 << 20):
        lane = lw.jacrev(_writes, argnums=(0, 1))
    assert "thin" not in lane._lw_source
    np.testing.assert_allclose(lane(0.3, 0.9, 50), lw.jacfwd(_writes, argnums=(0, 1))(0.3, 0.9, 50), rtol=1e-12)


_BIG_STACK = """
import math, numpy as np, lanewise as lw
def lane(x, y, n):
    s = x
    for k in range(n):
        s = s + math.cos(s * y + k) * 1e-3
    return s
n = np.array([100000, 3, 100007])
x, y = np.full(3, 0.3), np.full(3, 1.1)
got = lw.vmap(lw.jacrev(lane, argnums=(0, 1)))(x, y, n)
want = lw.vmap(lw.jacfwd(lane, argnums=(0, 1)))(x, y, n)
np.testing.assert_allclose(np.array(got), np.array(want), rtol=1e-10, atol=1e-300)
print("ok")
"""


def test_the_stack_outlives_its_last_growth(tmp_path):
    """The reverse sweep reads the stack through an address: its buffer must live until
    the lane returns.  In a process without JAX's allocator, a 1.6 MB buffer freed
    early is unmapped, and reading it crashes (it did, before ad.keep)."""
    import os
    import subprocess
    import sys
    env = dict(os.environ, LANEWISE_CACHE_DIR=str(tmp_path))
    script = tmp_path / "big_stack.py"
    script.write_text(_BIG_STACK)
    done = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0 and done.stdout.strip() == "ok", (done.returncode, done.stderr[-2000:])


def _weighted(w, x):
    s = 0.0
    for i in range(w.shape[0]):
        s += w[i] * math.sin(i * x)
    return s


def _through_helper(w, x):
    return _weighted(w, x) * x


def test_what_the_adjoint_code_does_not_take_falls_back_to_the_tape():
    """An array handed whole to a helper that reads its elements: the tape, same numbers."""
    lane = lw.jacrev(_through_helper, argnums=(0, 1))
    assert "a tape" in lane._lw_source.splitlines()[0]
    assert "passed to a helper" in lane._lw_tape_reason
    w = np.array([0.5, -1.0, 2.0])
    got = lw.vmap(lane, in_axes=(None, 0))(w, np.array([0.3, 1.2]))

    def twin(w, x):
        return jnp.sum(w * jnp.sin(jnp.arange(3) * x)) * x

    want = jax.vmap(jax.jacrev(twin, argnums=(0, 1)), in_axes=(None, 0))(w, np.array([0.3, 1.2]))
    np.testing.assert_allclose(got[0], want[0], rtol=1e-13)
    np.testing.assert_allclose(got[1], want[1], rtol=1e-13)


# ---------------------------------------------------------------------------- lw.scan in reverse mode


def _rotate(c, x):
    a, b = c
    a2 = 0.9 * a + 0.1 * math.cos(x + b)
    b2 = 0.95 * b + 0.05 * math.sin(a * x)
    return (a2, b2), a2 * b2


def _scanned(x0, w, xs):
    (a, b), _ = lw.scan(_rotate, (x0, w), xs)
    return a * b + a


def _rotate_twin(c, x):
    a, b = c
    a2 = 0.9 * a + 0.1 * jnp.cos(x + b)
    b2 = 0.95 * b + 0.05 * jnp.sin(a * x)
    return (a2, b2), a2 * b2


def _scanned_twin(x0, w, xs):
    (a, b), _ = jax.lax.scan(_rotate_twin, (x0, w), xs)
    return a * b + a


def _decay(c, x):
    return c * 0.97 + math.sin(c * x) * 0.1, c


def _scanned_back(c0, xs):
    c, _ = lw.scan(_decay, c0, xs, reverse=True)
    return c


def _scanned_back_twin(c0, xs):
    c, _ = jax.lax.scan(lambda c, x: (c * 0.97 + jnp.sin(c * x) * 0.1, c), c0, xs, reverse=True)
    return c


@pytest.mark.parametrize("backend", ["python", "cpu"])
def test_lw_scan_in_reverse_mode_matches_jax(backend):
    xs, x0 = np.linspace(0.0, 3.0, 40), np.array([0.3, -0.4, 1.1])
    lane = lw.jacrev(_scanned, argnums=(0, 1, 2))
    assert "adjoint code" in lane._lw_source.splitlines()[0]
    got = lw.vmap(lane, in_axes=(0, None, None), backend=backend)(x0, 0.7, xs)
    want = jax.vmap(jax.jacrev(_scanned_twin, argnums=(0, 1, 2)), in_axes=(0, None, None))(x0, 0.7, xs)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-15)
    got = lw.vmap(lw.jacrev(_scanned_back, argnums=(0, 1)), in_axes=(0, None), backend=backend)(x0, xs)
    want = jax.vmap(jax.jacrev(_scanned_back_twin, argnums=(0, 1)), in_axes=(0, None))(x0, xs)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-15)


def _creep(s, x):
    return s + 1e-6 * math.sin(s + x), s


def _long_scan(s0, xs):
    s, _ = lw.scan(_creep, s0, xs)
    return s


def test_a_million_step_scan_stays_within_the_budget():
    """10^6 steps record 3 values each unbudgeted (24 MB); in 256 KB the scan is
    checkpointed (the stack cannot pass the budget: it raises first) and the gradient,
    with respect to the start and to every x, is the unbudgeted one."""
    xs, s0 = np.linspace(0.0, 50.0, 10**6), np.array([0.25])
    with lw.config.overridden(reverse_memory=256 * 1024):
        budgeted = lw.jacrev(_long_scan, argnums=(0, 1))
    assert "thin" in budgeted._lw_source
    got = lw.vmap(budgeted, in_axes=(0, None))(s0, xs)
    want = lw.vmap(lw.jacrev(_long_scan, argnums=(0, 1)), in_axes=(0, None))(s0, xs)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-13)
    np.testing.assert_allclose(got[1], want[1], rtol=1e-12, atol=1e-300)
    assert np.all(np.abs(got[1][0, -10:]) > 1e-7)  # the late xs matter: not a vacuous zero


def test_a_scan_whose_ys_are_used_is_refused_with_the_reason():
    def uses_ys(x, xs):
        c, ys = lw.scan(_decay, x, xs)
        return c + ys[0]

    with pytest.raises(lw.LaneCompileError, match="ys is used"):
        lw.jacrev(uses_ys)


# ---------------------------------------------------------------------------- whole arrays: sum, mean, dot


def _linear_model(w, x, y, b):
    s = np.dot(w, x) + b * w.sum() + np.mean(w) * y
    t = 0.0
    for i in range(w.shape[0]):
        t += w[i] * w[i]
    return math.tanh(s) - y + 0.01 * t + (w @ x) * 0.5 + np.sum(w) * w.mean()


def _linear_model_twin(w, x, y, b):
    s = jnp.dot(w, x) + b * w.sum() + jnp.mean(w) * y
    return jnp.tanh(s) - y + 0.01 * jnp.sum(w * w) + (w @ x) * 0.5 + jnp.sum(w) * w.mean()


@pytest.mark.parametrize("backend", ["python", "cpu"])
def test_sums_means_and_dots_of_a_differentiated_array_match_jax(backend):
    rng = np.random.default_rng(11)
    w, x, y = rng.normal(size=(6, 5)), rng.normal(size=(6, 5)), rng.normal(size=6)
    lane = lw.jacrev(_linear_model, argnums=(0, 3))
    assert "adjoint code" in lane._lw_source.splitlines()[0]
    got = lw.vmap(lane, in_axes=(0, 0, 0, None), backend=backend)(w, x, y, 0.3)
    want = jax.vmap(jax.jacrev(_linear_model_twin, argnums=(0, 3)), in_axes=(0, 0, 0, None))(w, x, y, 0.3)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(got[1], want[1], rtol=1e-13, atol=1e-15)


def test_a_dot_with_a_written_array_is_refused_with_the_reason():
    def written(w, x):
        v = x * 2.0
        return np.dot(w, v)

    with pytest.raises(lw.LaneCompileError, match="an argument never written"):
        lw.jacrev(written)
