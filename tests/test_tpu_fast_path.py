"""backend="tpu": repeated calls skip binding (the fast path), and never at the cost of a check.

A call whose arguments are top-level NumPy or JAX arrays of the last call's exact
types, shapes and dtypes runs the jitted whole call directly; any difference binds
again, so that every error binding raises is still raised.  Run in interpret mode
(``lw.config.tpu_interpret``), diff-tested against NumPy.
"""

from __future__ import annotations

import os

import numpy as np
import pytest

pytest.importorskip("jax")
import jax  # noqa: E402

import lanewise as lw  # noqa: E402
from lanewise import LaneTypeError  # noqa: E402
from lanewise.backends import tpu  # noqa: E402


#: ``LANEWISE_TPU_TESTS_ON_CHIP=1`` on a TPU host runs these tests on the chip.
ON_CHIP = os.environ.get("LANEWISE_TPU_TESTS_ON_CHIP") == "1" and jax.default_backend() == "tpu"
#: float32 tolerance (the chip's multiply-add rounds once)
RTOL = 2e-4 if ON_CHIP else 2e-5


@pytest.fixture(autouse=True)
def interpret():
    with lw.config.overridden(tpu_interpret=not ON_CHIP, tpu_tile=(8, 128), tpu_unroll=1):
        yield


@pytest.fixture
def binds(monkeypatch):
    """The number of times the tpu backend binds a call (the slow path)."""
    count = [0]
    real = tpu.bind_call

    def counting(*args, **kwargs):
        count[0] += 1
        return real(*args, **kwargs)

    monkeypatch.setattr(tpu, "bind_call", counting)
    return count


def lane(x, y):
    return x * y + 1.0 if x > 0 else -x


def want(x, y):
    x, y = np.asarray(x, np.float32), np.asarray(y, np.float32)
    return np.where(x > 0, x * y + np.float32(1.0), -x)


def data(n, seed):
    rng = np.random.default_rng(seed)
    return rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)


@pytest.mark.parametrize("kind", ["numpy", "jax"])
def test_repeated_calls_skip_binding_and_read_the_new_values(binds, kind):
    f = lw.vmap(lane, backend="tpu")
    wrap = np.asarray if kind == "numpy" else jax.numpy.asarray
    for seed in range(3):
        x, y = data(300, seed)
        got = f(wrap(x), wrap(y))
        np.testing.assert_allclose(np.asarray(got), want(x, y), rtol=RTOL, atol=1e-6)
    assert binds[0] == 1  # the first call bound; the next two took the fast path


def test_any_difference_binds_again(binds):
    """Another length, dtype or array type: the slow path, with its own kernel and result."""
    f = lw.vmap(lane, backend="tpu")
    x, y = data(300, 0)
    f(x, y)
    np.testing.assert_allclose(np.asarray(f(x[:200], y[:200])), want(x[:200], y[:200]), rtol=RTOL, atol=1e-6)
    ints = np.arange(-5, 295, dtype=np.int32)
    np.testing.assert_allclose(np.asarray(f(ints, y)), want(ints, y), rtol=RTOL, atol=1e-6)
    np.testing.assert_allclose(np.asarray(f(jax.numpy.asarray(x), y)), want(x, y), rtol=RTOL, atol=1e-6)
    assert binds[0] == 4


def test_errors_binding_raises_are_still_raised():
    """A float64 argument after float32 calls, or lengths that disagree, are refused as on a first call."""
    f = lw.vmap(lane, backend="tpu")
    x, y = data(300, 0)
    f(x, y)
    f(x, y)
    with pytest.raises(LaneTypeError, match="argument x is float64"):
        f(x.astype(np.float64), y)
    with pytest.raises(lw.SizeMismatchError, match="inconsistent sizes"):
        f(x, y[:10])


def test_python_scalars_and_keywords_always_bind(binds):
    """Binding checks a scalar's value (an int beyond int32 is refused): no launcher skips it."""
    f = lw.vmap(lambda x, s: x * s, in_axes=(0, None), backend="tpu")
    x, _ = data(300, 0)
    for s in (2.0, 3.0):
        np.testing.assert_allclose(np.asarray(f(x, s)), x * np.float32(s), rtol=RTOL, atol=1e-6)
    g = lw.vmap(lambda a, b: a - b, backend="tpu")
    for _ in range(2):
        np.testing.assert_allclose(np.asarray(g(a=x, b=x)), np.zeros_like(x))
    assert binds[0] == 4


def test_a_changed_default_backend_is_followed():
    """A launcher runs on the backend it was made for: after lw.config.backend changes,
    the call runs on the new one (NumPy float64 out of the cpu backend)."""
    f = lw.vmap(lane)
    x, y = data(300, 0)
    with lw.config.overridden(backend="tpu"):
        f(x, y)
        assert isinstance(f(x, y), jax.Array)
    got = f(x, y)
    assert isinstance(got, np.ndarray)
    np.testing.assert_allclose(got, want(x, y), rtol=RTOL, atol=1e-6)


def test_repeated_reductions_skip_binding(binds):
    s = lw.reduce(lw.vmap(lane, backend="tpu"), "sum")
    for seed in range(3):
        x, y = data(300, seed)
        np.testing.assert_allclose(float(s(x, y)), want(x, y).sum(dtype=np.float64), rtol=1e-5)
    assert binds[0] == 1
    x, y = data(100, 7)  # another length: bound again, its own result
    np.testing.assert_allclose(float(s(x, y)), want(x, y).sum(dtype=np.float64), rtol=1e-5)
    assert binds[0] == 2


def test_whole_calls_kept_are_bounded(monkeypatch):
    """A new length per call compiles a new whole call; the executable keeps the newest few."""
    monkeypatch.setattr(tpu, "MAX_WHOLES", 3)
    f = lw.vmap(lane, backend="tpu")
    for n in range(10, 16):
        x, y = data(n, n)
        np.testing.assert_allclose(np.asarray(f(x, y)), want(x, y), rtol=RTOL, atol=1e-6)
    (exe,) = f._executables.values()
    assert len(exe._wholes) == 3
