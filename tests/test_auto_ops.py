"""lw.jax.op and lw.torch.op of backend="auto" programs.

A JAX op chooses when it is traced, per argument types: the tpu backend's Pallas
kernel (inlined) where a TPU is in use and the call qualifies, else the cpu
backend's custom call; its jvp, grad and vmap forms follow the choice.  Lowered
for the other platform it runs on the other backend where the result types agree,
and is refused, saying why, where they do not.  CI has no TPU: "JAX's default
device is a TPU" is ``lanewise.backends.auto.default_is_tpu``, monkeypatched, and
the kernels run in interpret mode.  Which backend an op chose is the ``auto``
choice on the ``lanewise_call`` equation of its jaxpr.  Results are checked
against JAX's (or PyTorch's) own twin of the lane.  A PyTorch op of an auto
program always runs on the cpu backend (tensors are never on a TPU).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

pytest.importorskip("jax")
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

import lanewise as lw  # noqa: E402
from lanewise import LanewiseError  # noqa: E402
from lanewise.backends import auto  # noqa: E402

TOL = dict(rtol=2e-5, atol=1e-5)
A = jnp.float32(0.75)  # (a Python float traced by jax.jit is a float64 tracer under x64: not for the tpu)


@pytest.fixture(autouse=True)
def interpret():
    with lw.config.overridden(tpu_interpret=True, tpu_tile=(8, 128), tpu_unroll=1):
        yield


def wave(x, a):
    return math.sin(x) * a + x * x


def wave_jax(x, a):
    return jnp.sin(x) * a + x * x


def halvings(x):
    """How many halvings bring x to 1 or below: an int (int64 on the cpu with x64, int32 on the tpu)."""
    n = 0
    while x > 1.0 and n < 8:
        x = x * 0.5
        n += 1
    return n


def not_lowered(x):
    return np.logaddexp(x, 1.0)


def f32(*shape, seed=0):
    return jnp.asarray(np.random.default_rng(seed).uniform(-2.0, 2.0, shape).astype(np.float32))


def chosen(fn, *args) -> auto.Choice:
    """The backend="auto" choice of the (only) lanewise op in ``fn``'s jaxpr."""
    calls = [e for e in jax.make_jaxpr(fn)(*args).eqns if e.primitive.name == "lanewise_call"]
    assert len(calls) == 1
    return calls[0].params["op"].auto


def wave_op():
    return lw.jax.op(lw.vmap(wave, in_axes=(0, None), backend="auto"))


def check_wave(op, x):
    """jit, grad and vmap of ``op`` against JAX's twin of the lane."""
    np.testing.assert_allclose(jax.jit(op)(x, A), wave_jax(x, A), **TOL)
    loss = lambda f: lambda x, a: jnp.sum(f(x, a) ** 2)  # noqa: E731
    for got, want in zip(jax.grad(loss(op), argnums=(0, 1))(x, A), jax.grad(loss(wave_jax), argnums=(0, 1))(x, A),
                         strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    rows = jnp.stack([x, 2 * x])
    np.testing.assert_allclose(jax.vmap(op, in_axes=(0, None))(rows, A), wave_jax(rows, A), **TOL)


def test_without_a_tpu_the_op_is_the_cpu_custom_call(no_tpu):
    op, x = wave_op(), f32(40)
    assert chosen(op, x, A) == auto.Choice("cpu", "JAX's default device is not a TPU")
    assert "lanewise_" in jax.jit(op).lower(x, A).as_text()  # the XLA FFI custom call
    check_wave(op, x)
    np.testing.assert_array_equal(op(x, A), lw.jax.op(lw.vmap(wave, in_axes=(0, None)))(x, A))


def test_on_a_tpu_the_op_is_the_pallas_kernel_and_its_forms_follow(tpu):
    op, x = wave_op(), f32(40)
    choice = chosen(op, x, A)
    assert choice.name == "tpu" and choice.why.startswith("JAX's default device is a TPU; ")
    assert "lanewise_" not in jax.jit(op).lower(x, A).as_text()  # interpreted kernel: no custom call
    grad = jax.make_jaxpr(jax.grad(lambda x: jnp.sum(op(x, A))))(x)
    ops = [e.params["op"] for e in grad.eqns if e.primitive.name == "lanewise_call"]  # the cotangents' too
    assert len(ops) >= 2 and all(o.auto.name == "tpu" for o in ops)
    check_wave(op, x)


def test_float64_arguments_choose_the_cpu_saying_why(tpu):
    with jax.enable_x64(True):
        op, x = wave_op(), jnp.linspace(-2.0, 2.0, 40)
        choice = chosen(op, x, A)
        assert choice.name == "cpu" and "argument x is float64" in choice.why
        got = jax.jit(op)(x, A)
        assert got.dtype == jnp.float64
        np.testing.assert_allclose(got, wave_jax(x, A), rtol=1e-12)
        # a Python scalar given to an op the cpu runs keeps its 64 bits (never narrowed for the tpu)
        np.testing.assert_allclose(op(x, 0.1), wave_jax(x, 0.1), rtol=1e-13)


def test_a_lane_the_tpu_cannot_lower_chooses_the_cpu_naming_the_construct(tpu):
    op, x = lw.jax.op(lw.vmap(not_lowered, backend="auto")), f32(40)
    assert "np.logaddexp is not supported on the tpu backend" in chosen(op, x).why
    np.testing.assert_allclose(jax.jit(op)(x), jnp.logaddexp(x, 1.0), **TOL)


def test_python_scalars_given_to_the_op_are_32_bit_where_the_tpu_is_in_use(tpu):
    with jax.enable_x64(True):  # else a Python float would be float32 anyway
        op, x = wave_op(), f32(40)
        assert chosen(lambda x: op(x, 0.75), x).name == "tpu"
        np.testing.assert_allclose(op(x, 0.75), wave_jax(x, A), **TOL)


def test_a_tpu_choice_lowered_for_the_cpu_runs_the_cpu_custom_call(tpu):
    op, x = wave_op(), f32(40)
    traced = jax.jit(lambda x: op(x, A)).trace(x)  # typed for the tpu (interpreted)
    with lw.config.overridden(tpu_interpret=False):  # then lowered for the CPU, as under device=cpu
        lowered = traced.lower()
        assert "lanewise_" in lowered.as_text()
        np.testing.assert_allclose(lowered.compile()(x), wave_jax(x, A), **TOL)


def test_a_lowering_whose_types_differ_from_the_choice_is_refused(tpu):
    with jax.enable_x64(True):
        op, x = lw.jax.op(lw.vmap(halvings, backend="auto")), f32(40)
        traced = jax.jit(op).trace(x)
        assert traced.jaxpr.out_avals[0].dtype == jnp.int32  # the tpu's
        with lw.config.overridden(tpu_interpret=False), pytest.raises(
                LanewiseError, match=r"typed this op for the tpu backend .* lowered for cpu, where the cpu "
                                     r"backend's results would be int64\[40\], not int32\[40\]"):
            traced.lower()


def test_a_cpu_choice_exported_for_a_tpu_is_the_mosaic_kernel(no_tpu, monkeypatch):
    from lanewise.backends import tpu as tpu_backend

    monkeypatch.setattr(tpu_backend, "_interpret", lambda: False)
    op, x = wave_op(), f32(300)
    assert chosen(op, x, A).name == "cpu"
    text = jax.export.export(jax.jit(lambda x: op(x, A)), platforms=["tpu"])(x).mlir_module()
    assert text.count("tpu_custom_call") == 1 and "lanewise_" not in text


def test_a_cpu_choice_the_tpu_cannot_run_is_refused_when_exported_for_a_tpu(no_tpu):
    with jax.enable_x64(True):
        op = wave_op()
        with pytest.raises(LanewiseError, match="where the tpu backend cannot run it: argument x is float64"):
            jax.export.export(jax.jit(lambda x: op(x, A)), platforms=["tpu"])(jnp.linspace(0.0, 1.0, 8))


def test_a_reduction_chooses_too(tpu):
    total = lw.jax.op(lw.reduce(lw.vmap(lambda x: x * x, backend="auto"), "sum"))
    x = f32(300)
    assert chosen(total, x).name == "tpu"
    np.testing.assert_allclose(jax.jit(total)(x), jnp.sum(x * x), rtol=1e-5)
    np.testing.assert_allclose(jax.grad(total)(x), 2 * x, **TOL)


def test_the_torch_op_of_an_auto_program_runs_on_the_cpu(tpu):
    from optional import requires_torch

    torch = requires_torch()
    op = lw.torch.op(lw.vmap(wave, in_axes=(0, None), backend="auto"))
    assert op._lw_program.backend == "cpu"
    x = torch.linspace(-2.0, 2.0, 40, dtype=torch.float64, requires_grad=True)
    got = op(x, 0.75)
    twin = torch.sin(x) * 0.75 + x * x
    torch.testing.assert_close(got, twin)
    torch.testing.assert_close(torch.autograd.grad(got.sum(), x)[0], torch.autograd.grad(twin.sum(), x)[0])
