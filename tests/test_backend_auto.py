"""backend="auto": the tpu backend where a TPU is in use and the call qualifies, else the cpu backend.

CI has no TPU: "JAX's default device is a TPU" is one function
(``lanewise.backends.auto.default_is_tpu``) that these tests monkeypatch, and the
tpu kernels run in interpret mode (``lw.config.tpu_interpret``).  Which backend ran
shows in the result's type (the tpu backend returns ``jax.Array``, the cpu backend
NumPy arrays for NumPy arguments) and in ``lw.explain``'s ``backend:`` line; every
result is checked against ``backend="python"``.  One tile of lanes: interpret mode is slow.
"""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

pytest.importorskip("jax")
import jax  # noqa: E402

import lanewise as lw  # noqa: E402
from lanewise import BackendError, LaneCompileError  # noqa: E402
from lanewise.backends import auto  # noqa: E402

N = 300


@pytest.fixture(autouse=True)
def interpret():
    with lw.config.overridden(tpu_interpret=True, tpu_tile=(8, 128), tpu_block=(8, 128), tpu_unroll=1):
        yield


def smooth(x):
    return x * x + 1.0 if x > 0.5 else 2.0 * x


def not_lowered(x):
    return np.logaddexp(x, 1.0)


def data(dtype=np.float32):
    return np.linspace(-2.0, 2.0, N).astype(dtype)


def reference(lane, *args):
    return np.asarray(lw.vmap(lane, backend="python")(*args))


def backend_line(fn, *args) -> str:
    return next(line for line in lw.explain(fn, *args).splitlines() if line.startswith("backend: "))


def test_a_float32_lane_runs_on_the_tpu_when_the_default_device_is_a_tpu(tpu):
    f = lw.vmap(smooth, backend="auto")
    got = f(data())
    assert isinstance(got, jax.Array)
    np.testing.assert_allclose(np.asarray(got), reference(smooth, data()), rtol=2e-6)
    assert backend_line(f, data()).startswith("backend: tpu (auto: JAX's default device is a TPU; ")


def test_without_a_tpu_it_runs_on_the_cpu(no_tpu):
    f = lw.vmap(smooth, backend="auto")
    got = f(data())
    assert type(got) is np.ndarray
    np.testing.assert_array_equal(got, reference(smooth, data()))
    assert backend_line(f, data()) == "backend: cpu (auto: JAX's default device is not a TPU)"


def test_float64_arguments_fall_back_to_the_cpu_saying_why(tpu):
    f = lw.vmap(smooth, backend="auto")
    got = f(data(np.float64))
    assert type(got) is np.ndarray and got.dtype == np.float64
    np.testing.assert_array_equal(got, reference(smooth, data(np.float64)))
    line = backend_line(f, data(np.float64))
    assert line.startswith("backend: cpu (auto: JAX's default device is a TPU, but the tpu backend cannot run "
                           "this call: argument x is float64")
    assert "x.astype(np.float32)" in line


def test_a_lane_the_tpu_cannot_lower_falls_back_naming_the_construct_and_line(tpu):
    f = lw.vmap(not_lowered, backend="auto")
    got = f(data())
    assert type(got) is np.ndarray
    np.testing.assert_allclose(got, reference(not_lowered, data()), rtol=1e-6)
    line = not_lowered.__code__.co_firstlineno + 1
    assert ("np.logaddexp is not supported on the tpu backend (" in backend_line(f, data())
            and f"test_backend_auto.py:{line})" in backend_line(f, data()))


def test_an_explicit_tpu_backend_still_raises(tpu):
    with pytest.raises(LaneCompileError, match="np.logaddexp is not supported on the tpu backend"):
        lw.vmap(not_lowered, backend="tpu")(data())


def test_the_choice_is_made_once_per_signature(tpu, monkeypatch):
    made = []
    qualify = auto._qualify
    monkeypatch.setattr(auto, "_qualify", lambda *a: made.append(a[2].signature) or qualify(*a))
    f = lw.vmap(not_lowered, backend="auto")
    for _ in range(3):  # keywords: never the fast path, every call chooses
        np.testing.assert_allclose(f(x=data()), reference(not_lowered, data()), rtol=1e-6)
    assert len(made) == 1
    f(x=data()[:10])  # another size, the same signature: the same choice
    assert len(made) == 1
    assert isinstance(f(x=data().astype(np.int32)), np.ndarray)  # another dtype: chosen again
    assert len(made) == 2


def test_repeated_calls_stay_on_the_chosen_backend_and_follow_the_tpu(monkeypatch):
    on_tpu = [True]
    monkeypatch.setattr(auto, "default_is_tpu", lambda: on_tpu[0])
    f = lw.vmap(smooth, backend="auto")
    want = reference(smooth, data())
    for _ in range(3):  # the fast path's launcher runs the tpu's jitted call
        got = f(data())
        assert isinstance(got, jax.Array)
        np.testing.assert_allclose(np.asarray(got), want, rtol=2e-6)
    wide = f(data(np.float64))  # its own launcher, on the cpu
    assert type(wide) is np.ndarray and isinstance(f(data()), jax.Array)
    on_tpu[0] = False  # launchers made under a TPU are dropped
    for _ in range(2):
        got = f(data())
        assert type(got) is np.ndarray
        np.testing.assert_array_equal(got, want)


def test_jax_arrays_stay_jax_arrays_on_either_backend(tpu):
    x = jax.numpy.asarray(data())
    for lane, name, rtol in ((smooth, "tpu", 2e-6), (not_lowered, "cpu", 1e-6)):  # the cpu's: a fallback
        f = lw.vmap(lane, backend="auto")
        assert backend_line(f, x).startswith(f"backend: {name} (auto: ")
        for _ in range(2):  # the second call: the fast path, with the NumPy views of the cpu's
            got = f(x)
            assert isinstance(got, jax.Array)
            np.testing.assert_allclose(np.asarray(got), reference(lane, data()), rtol=rtol)


def test_fused_passes_choose_too(tpu):
    norm = lw.fuse(lambda v: np.sqrt((v * v).sum(axis=-1)) + 1.0, backend="auto")
    v = data().reshape(30, 10)
    np.testing.assert_allclose(np.asarray(norm(v)), np.sqrt((v * v).sum(axis=-1)) + 1.0, rtol=1e-6)


def test_the_config_asks_for_auto_too(tpu):
    f = lw.vmap(smooth)
    with lw.config.overridden(backend="auto"):
        assert isinstance(f(data()), jax.Array)
    assert type(f(data())) is np.ndarray  # the default, cpu, again


def test_out_and_progress_run_on_the_cpu(tpu):
    out = np.empty(N, np.float32)
    f = lw.vmap(smooth, backend="auto")
    assert f(data(), out=out) is out
    np.testing.assert_allclose(out, reference(smooth, data()), rtol=1e-6)
    shown = lw.vmap(smooth, backend="auto", progress=True)
    assert backend_line(shown, data()) == "backend: cpu (auto: progress=True runs on the cpu backend)"


def test_reduce_chooses_too(tpu):
    f = lw.vmap(smooth, backend="auto")
    total = lw.reduce(f, "sum")
    want = reference(smooth, data()).sum(dtype=np.float64)
    for _ in range(2):  # the second call: the reduction's fast launcher
        got = total(data())
        assert isinstance(got, jax.Array)
        np.testing.assert_allclose(float(got), want, rtol=1e-5)
    assert backend_line(total, data()).startswith("backend: tpu (auto: ")


def test_reductions_the_tpu_cannot_run_fall_back(tpu):
    total = lw.reduce(lw.vmap(smooth, backend="auto"), "sum")
    wide = total(data(np.float64))
    assert type(wide) is not jax.Array
    np.testing.assert_allclose(float(wide), reference(smooth, data(np.float64)).sum(), rtol=1e-12)
    counts = lw.reduce(lw.vmap(tenths, backend="auto"), "sum")  # int32 sums would wrap: refused on the tpu
    assert int(counts(data())) == int(reference(tenths, data()).sum())
    assert "wrap at 2**31" in backend_line(counts, data())


def tenths(x):
    return int(x * 10.0)


def test_jax_arrays_on_a_tpu_ask_for_it():
    class Device:
        platform = "tpu"

    class OnChip:  # what _tpu_in_use reads of a jax.Array on a TPU
        __module__ = "jaxlib.xla_extension"

        def devices(self):
            return {Device()}

    assert auto._tpu_in_use((OnChip(),), {}) == "an argument is a JAX array on a TPU"
    assert auto._tpu_in_use((np.ones(2), jax.numpy.ones(2)), {}) is None or auto.default_is_tpu()


def test_a_typo_names_auto_among_the_choices():
    with pytest.raises(BackendError, match="or 'auto'"):
        lw.vmap(smooth, backend="atuo")


def test_numpy_users_without_jax_see_no_jax():
    code = ("import sys, numpy as np, lanewise as lw\n"
            "f = lw.vmap(lambda x: x + 1, backend='auto')\n"
            "assert f(np.arange(3.0)).tolist() == [1.0, 2.0, 3.0]\n"
            "assert 'backend: cpu (auto: JAX is not imported: no TPU in use)' in lw.explain(f, np.arange(3.0))\n"
            "assert 'jax' not in sys.modules\n")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=300)
