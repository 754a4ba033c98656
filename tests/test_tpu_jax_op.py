"""lw.jax.op of backend="tpu" programs: the Pallas kernel inlined in the JAX program.

The op's lowering is the tpu backend's jitted whole call (layout, ``pallas_call``,
placement), so it composes with ``jax.jit``, ``jax.vmap`` (one more lanewise level of
the same kernel) and ``jax.jvp``/``jax.grad`` (lanewise's derivatives of the lane,
lowered the same way).  CI has no TPU: the kernels run in Pallas' interpret mode
(``lw.config.tpu_interpret``), and one test lowers the op for a TPU on the CPU
(``jax.export``) to see the kernel as a Mosaic ``tpu_custom_call``.  Each result is
checked against JAX's own twin of the lane, in float32.
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
from lanewise import LaneTypeError, LanewiseError  # noqa: E402

ON_CHIP = os.environ.get("LANEWISE_TPU_TESTS_ON_CHIP") == "1" and jax.default_backend() == "tpu"
TOL = dict(rtol=2e-4 if ON_CHIP else 2e-5, atol=1e-5)


@pytest.fixture(autouse=True)
def interpret():
    with lw.config.overridden(tpu_interpret=not ON_CHIP, tpu_tile=(8, 128), tpu_unroll=1):
        yield


def wave(x, a):
    return math.sin(x) * a + x * x


def wave_jax(x, a):
    return jnp.sin(x) * a + x * x


def settle(x, a):
    """A while loop whose trip count depends on the lane's value."""
    n = 0
    while x > 1.0 and n < 20:
        x = x * a
        n += 1
    return x + n


def settle_jax(x, a):
    def body(s):
        x, n = s
        go = (x > 1.0) & (n < 20)
        return jnp.where(go, x * a, x), jnp.where(go, n + 1, n)

    x, n = jax.lax.fori_loop(0, 20, lambda i, s: body(s), (x, jnp.zeros(x.shape, jnp.int32)))
    return x + n


def damp(x, a):
    """A fixed-trip loop: differentiable through it, as JAX is through its twin."""
    for _ in range(4):
        x = x * a + 0.25 * math.sin(x)
    return x


def damp_jax(x, a):
    for _ in range(4):
        x = x * a + 0.25 * jnp.sin(x)
    return x


def f32(*shape, lo=-1.5, hi=2.5, seed=0):
    return jnp.asarray(np.random.default_rng(seed).uniform(lo, hi, shape), jnp.float32)


A = jnp.float32(0.7)


def close(got, want):
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), **TOL)


def no_host_call(hlo: str) -> bool:
    """A lowered program with no lanewise FFI handler and no host callback: in interpret
    mode no custom call at all, on a chip only the kernels' (Mosaic's tpu_custom_call)."""
    targets = re.findall(r"custom_call\s*@\s*\"?([\w.]+)", hlo)  # stablehlo.custom_call @target(...)
    kernels = [t for t in targets if t == "tpu_custom_call"] if ON_CHIP else []
    return len(targets) == len(kernels) and "lanewise_" not in hlo and "callback" not in hlo


def test_jit_runs_the_kernel_and_matches_jax():
    op = lw.jax.op(lw.vmap(settle, in_axes=(0, None), backend="tpu"))
    x = jnp.linspace(0.5, 3.0, 300, dtype=jnp.float32)
    got = jax.jit(op)(x, A)
    assert got.dtype == jnp.float32 and got.shape == (300,)
    close(got, settle_jax(x, A))
    close(op(x, 0.7), settle_jax(x, A))  # outside jax.jit, a Python scalar: float32


def test_the_op_composes_inside_a_larger_jitted_function():
    op = lw.jax.op(lw.vmap(wave, in_axes=(0, None), backend="tpu"))

    def program(f):
        return lambda x, a: jnp.sum(f(2.0 * x, a) * jnp.cos(x)) + jnp.max(f(x, a + 1.0))

    x = f32(1000)
    close(jax.jit(program(op))(x, A), program(wave_jax)(x, A))


def test_the_kernel_is_inlined_not_a_host_call():
    """The op's lowering is the tpu pipeline: its jaxpr holds the pallas_call, and the
    compiled program has no FFI handler and no host callback."""
    from lanewise.bridge.signature import Op
    from lanewise.jax.ops import trace

    program = lw.vmap(wave, in_axes=(0, None), backend="tpu")
    op = lw.jax.op(program)
    x = f32(300)
    assert [e.primitive.name for e in jax.make_jaxpr(op)(x, A).eqns] == ["lanewise_call"]
    traced = trace(Op.of(program, (x, A)), (((300,), jnp.float32), ((), jnp.float32)))
    assert "pallas_call" in str(jax.make_jaxpr(traced.run)(x, A))
    assert no_host_call(jax.jit(lambda x: op(x, A) + 1.0).lower(x).as_text())


def test_lowered_for_a_tpu_the_op_is_one_mosaic_kernel(monkeypatch):
    """``jax.export`` for platform "tpu" on this machine: the op becomes the kernel's
    ``tpu_custom_call`` (Mosaic's), inside the caller's own program."""
    from lanewise.backends import tpu

    monkeypatch.setattr(tpu, "_interpret", lambda: False)
    op = lw.jax.op(lw.vmap(settle, in_axes=(0, None), backend="tpu"))
    text = jax.export.export(jax.jit(lambda x: jnp.sum(op(x, A) * 2.0)), platforms=["tpu"])(f32(300)).mlir_module()
    assert text.count("tpu_custom_call") == 1 and "lanewise_" not in text


@pytest.mark.slow  # the CPU kernel's compile (Numba)
def test_a_cpu_op_lowered_for_a_tpu_is_refused():
    op = lw.jax.op(lw.vmap(wave, in_axes=(0, None)))
    with pytest.raises(LanewiseError, match="backend='tpu'"):
        jax.export.export(jax.jit(op), platforms=["tpu"])(f32(8), A)


@pytest.mark.parametrize("in_axes, shapes", [
    ((0, None), ((3, 300), ())),  # the lanes batched, the parameter shared
    ((1, 0), ((300, 3), (3,))),  # both batched, the lanes along another axis
    ((None, 0), ((300,), (3,))),  # the shared parameter only
])
def test_vmap_is_one_more_level_of_the_same_kernel(in_axes, shapes):
    op = lw.jax.op(lw.vmap(wave, in_axes=(0, None), backend="tpu"))
    x, a = f32(*shapes[0]), f32(*shapes[1], lo=0.2, hi=1.0, seed=1)
    batched = jax.vmap(op, in_axes=in_axes)
    calls = [e for e in jax.make_jaxpr(batched)(x, a).eqns if e.primitive.name.startswith("lanewise")]
    assert [e.primitive.name for e in calls] == ["lanewise_call"]
    assert calls[0].params["op"].on_tpu  # the batched program stays on the tpu
    close(jax.jit(batched)(x, a), jax.vmap(wave_jax, in_axes=in_axes)(x, a))


def test_vmap_of_a_looping_lane_and_of_a_nested_program():
    nested = lw.jax.op(lw.vmap(lw.vmap(settle, in_axes=(0, None)), in_axes=(1, None), backend="tpu"))
    x = f32(40, 3, lo=0.5, hi=3.0)
    a = f32(2, lo=0.5, hi=0.9, seed=2)
    got = jax.jit(jax.vmap(nested, in_axes=(None, 0)))(x, a)
    assert got.shape == (2, 3, 40)
    close(got, jax.vmap(lambda a: settle_jax(x.T, a))(a))


def test_float64_arguments_are_refused_naming_them():
    op = lw.jax.op(lw.vmap(wave, in_axes=(0, None), backend="tpu"))
    with jax.enable_x64(True):
        with pytest.raises(LaneTypeError, match=r"argument x is float64.*x\.astype\(np\.float32\)"):
            op(jnp.linspace(0.0, 1.0, 8), A)
        with pytest.raises(LaneTypeError, match="argument a is float64"):
            jax.jit(op)(f32(8), jnp.float64(0.5))
        got = jax.jit(lambda x: op(x, 0.5))(f32(8))  # a Python float is float32, as the tpu backend types it
        assert got.dtype == jnp.float32
        close(got, wave_jax(f32(8), jnp.float32(0.5)))


@pytest.mark.parametrize("how", ["sum", "mean", "max"])
def test_a_reduction_op_folds_in_the_kernel(how):
    op = lw.jax.op(lw.reduce(lw.vmap(wave, in_axes=(0, None), backend="tpu"), how))
    x = f32(700)
    got = jax.jit(op)(x, A)
    assert got.shape == () and got.dtype == jnp.float32
    np.testing.assert_allclose(float(got), float(getattr(jnp, how)(wave_jax(x, A))), rtol=1e-5)


@pytest.mark.parametrize("how", ["sum", "max", "argmin"])
@pytest.mark.parametrize("in_axes", [(0, None), (None, 0)])
def test_vmap_of_a_reduction_op_reduces_each_batch(how, in_axes):
    """The lw.vmap op batched (one more level of its kernel), each batch's values reduced."""
    op = lw.jax.op(lw.reduce(lw.vmap(wave, in_axes=(0, None), backend="tpu"), how))
    x, a = (f32(3, 200), A) if in_axes[0] == 0 else (f32(200), f32(3, lo=0.2, hi=1.0, seed=1))
    got = jax.jit(jax.vmap(op, in_axes=in_axes))(x, a)
    want = jax.vmap(lambda x, a: getattr(jnp, how)(wave_jax(x, a)), in_axes=in_axes)(x, a)
    assert got.shape == (3,) and got.dtype == op(f32(200), A).dtype
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-5)


# ---- derivatives: lanewise's own (lw.jvp of the lane, its cotangent programs), on the tpu


@pytest.mark.parametrize("lane, twin", [(wave, wave_jax), (damp, damp_jax)])
def test_jvp_matches_jax(lane, twin):
    op = lw.jax.op(lw.vmap(lane, in_axes=(0, None), backend="tpu"))
    x, dx = f32(300), f32(300, seed=3)
    got = jax.jit(lambda x, a, dx: jax.jvp(op, (x, a), (dx, jnp.float32(0.5))))(x, A, dx)
    want = jax.jvp(twin, (x, A), (dx, jnp.float32(0.5)))
    close(got[0], want[0])
    close(got[1], want[1])


def lanewise_calls(jaxpr) -> list:
    """The ops of the lanewise primitives in ``jaxpr`` (top level)."""
    return [e.params["op"] if "op" in e.params else e.params["lin"].op for e in jaxpr.eqns
            if e.primitive.name.startswith("lanewise")]


@pytest.mark.parametrize("lane, twin", [(wave, wave_jax), (damp, damp_jax), (settle, settle_jax)])
def test_grad_matches_jax_for_the_lanes_and_the_shared_parameter(lane, twin):
    """Through a data-dependent while loop too (settle); every derived program on the tpu,
    no custom call (no CPU handler) in the compiled program."""
    op = lw.jax.op(lw.vmap(lane, in_axes=(0, None), backend="tpu"))
    x = f32(300, lo=0.5, hi=3.0)

    def loss(f):
        return lambda x, a: jnp.sum(f(x, a) ** 2)

    grad = jax.grad(loss(op), argnums=(0, 1))
    got = jax.jit(grad)(x, A)
    want = jax.grad(loss(twin), argnums=(0, 1))(x, A)
    close(got[0], want[0])
    np.testing.assert_allclose(float(got[1]), float(want[1]), rtol=1e-4)
    ops = lanewise_calls(jax.make_jaxpr(grad)(x, A))
    assert len(ops) == 3 and all(o.on_tpu for o in ops)  # value, tangent map, its transpose
    assert no_host_call(jax.jit(grad).lower(x, A).as_text())


@pytest.mark.slow  # interpret mode: several derived kernels
def test_hessian_and_vmap_of_grad():
    """Second derivatives (the tangent and cotangent programs differentiated again) and
    jax.vmap of a gradient (the cotangent of the shared parameter, a tpu reduction, batched)."""
    op = lw.jax.op(lw.vmap(damp, in_axes=(0, None), backend="tpu"))
    x = f32(300)
    hess = jax.jit(jax.hessian(lambda a: jnp.sum(op(x, a) ** 2)))(A)
    np.testing.assert_allclose(float(hess), float(jax.hessian(lambda a: jnp.sum(damp_jax(x, a) ** 2))(A)),
                               rtol=1e-4)
    xs = f32(3, 300, seed=4)
    got = jax.jit(jax.vmap(jax.grad(lambda x, a: jnp.sum(op(x, a)), argnums=(0, 1)), in_axes=(0, None)))(xs, A)
    want = jax.vmap(jax.grad(lambda x, a: jnp.sum(damp_jax(x, a)), argnums=(0, 1)), in_axes=(0, None))(xs, A)
    close(got[0], want[0])
    np.testing.assert_allclose(np.asarray(got[1]), np.asarray(want[1]), rtol=1e-4)


def test_grad_of_a_sum_reduction_op():
    op = lw.jax.op(lw.reduce(lw.vmap(wave, in_axes=(0, None), backend="tpu"), "sum"))
    x = f32(300)
    got = jax.jit(jax.grad(op, argnums=(0, 1)))(x, A)
    want = jax.grad(lambda x, a: jnp.sum(wave_jax(x, a)), argnums=(0, 1))(x, A)
    close(got[0], want[0])
    np.testing.assert_allclose(float(got[1]), float(want[1]), rtol=1e-4)


def ema(row, a):
    s = 0.0
    for v in row:
        s = a * s + v
    return s


def ema_jax(rows, a):
    return jax.lax.scan(lambda s, v: (a * s + v, None), jnp.zeros(rows.shape[0], rows.dtype), rows.T)[0]


@pytest.mark.slow  # interpret mode: four kernels over rows
def test_row_lanes_forward_mode_and_the_refused_gradient_of_a_row():
    """A lane over a row (one per lane): its value, its tangent along the rows, the gradient
    of the shared parameter; the gradient with respect to the rows (reverse mode, refused
    on the tpu) is refused naming the argument and forward mode as the way."""
    op = lw.jax.op(lw.vmap(ema, in_axes=(0, None), backend="tpu"))
    rows, dr = f32(200, 12, seed=5), f32(200, 12, seed=6)
    close(jax.jit(op)(rows, A), ema_jax(rows, A))
    close(jax.jvp(lambda r: op(r, A), (rows,), (dr,))[1], jax.jvp(lambda r: ema_jax(r, A), (rows,), (dr,))[1])
    np.testing.assert_allclose(float(jax.grad(lambda a: op(rows, a).sum())(A)),
                               float(jax.grad(lambda a: ema_jax(rows, a).sum())(A)), rtol=1e-4)
    with pytest.raises(lw.LaneCompileError, match=r"argument\(s\) 0, a per-lane array.*jax\.jvp"):
        jax.grad(lambda r: op(r, A).sum())(rows)


def branchy(n, x, a):
    y = x * n * a if n > 2 else -x
    return y > 1.0, (y, n + 1)


def branchy_jax(n, x, a):
    return jnp.where(n > 2, x * n * a, -x)


@pytest.mark.slow  # interpret mode: four kernels
def test_int_and_bool_results_in_a_tuple_and_their_derivatives():
    """Several results (bool, float32, int32): values, tangents and the gradient, whose
    cotangent program takes the results' cotangents as one tuple argument."""
    op = lw.jax.op(lw.vmap(branchy, in_axes=(0, 0, None), backend="tpu"))
    n, x = jnp.arange(300, dtype=jnp.int32) % 7, f32(300)
    flag, (y, m) = jax.jit(op)(n, x, A)
    want = branchy_jax(n, x, A)
    assert (flag.dtype, y.dtype, m.dtype) == (jnp.bool_, jnp.float32, jnp.int32)
    assert bool((flag == (want > 1.0)).all()) and bool((m == n + 1).all())
    close(y, want)
    close(jax.jvp(lambda x: op(n, x, A)[1][0], (x,), (jnp.ones_like(x),))[1], jnp.where(n > 2, n * A, -1.0))
    got = jax.jit(jax.grad(lambda x, a: jnp.sum(op(n, x, a)[1][0] ** 2), argnums=(0, 1)))(x, A)
    expected = jax.grad(lambda x, a: jnp.sum(branchy_jax(n, x, a) ** 2), argnums=(0, 1))(x, A)
    close(got[0], expected[0])
    np.testing.assert_allclose(float(got[1]), float(expected[1]), rtol=1e-4)


def pair_lane(x, p):
    scale, (shift, power) = p
    return scale * x ** power + shift


def test_a_tuple_argument_reaches_the_lane_as_a_tuple():
    """The kernel gets one value per leaf and gives the lane its parameters' tuples
    (what the cotangent program of an op with several results takes)."""
    x = f32(300)
    p = (jnp.float32(1.5), (f32(300, seed=7), jnp.int32(2)))
    got = lw.vmap(pair_lane, in_axes=(0, (None, (0, None))), backend="tpu")(x, p)
    close(got, 1.5 * x ** 2 + p[1][0])
