"""lw.jax.op: lanewise programs inside JAX programs, against pure-JAX twins.

Each op is an XLA FFI custom call whose handler is a Numba cfunc; these tests
check the numbers (jit, vmap, jvp, grad against JAX's own twin of the lane, and
finite differences where JAX cannot follow the lane), the structure (one custom
call in the compiled program, no Python on the call path: another thread runs
meanwhile), the ABI offsets against jaxlib's C header, and the errors.
"""

from __future__ import annotations

import math
import shutil
import subprocess

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import gil
import lanewise as lw
from lanewise.jax import abi

jax.config.update("jax_enable_x64", True)


def wave(x, y):
    r = x * x + y
    return math.sin(r) * x


def wave_jax(x, y):
    return jnp.sin(x * x + y) * x


def escape(cr, ci):
    zr = zi = 0.0
    for n in range(60):
        zr, zi = zr * zr - zi * zi + cr, 2 * zr * zi + ci
        if zr * zr + zi * zi > 4.0:
            return n
    return 60


def escape_jax(cr, ci):
    def body(s):
        zr, zi, n, done = s
        zr2, zi2 = zr * zr - zi * zi + cr, 2 * zr * zi + ci
        out = zr2 * zr2 + zi2 * zi2 > 4.0
        return (jnp.where(done, zr, zr2), jnp.where(done, zi, zi2), jnp.where(done | out, n, n + 1),
                done | out)

    zr, zi, n, done = jax.lax.fori_loop(0, 60, lambda i, s: body(s), (0.0, 0.0, 0, False))
    return n


def grow(x, limit):
    """A while loop with a data-dependent trip count, and an early exit."""
    s, n = x, 0
    while s < limit:
        s = s * 1.5 + 0.25 * math.sin(s)
        n += 1
        if n > 50:
            return s * 2.0
    return s


@pytest.fixture(scope="module")
def wave_op():
    return lw.jax.op(lw.vmap(wave, in_axes=(0, None)))


@pytest.fixture(scope="module")
def xs():
    return jnp.linspace(-1.5, 2.0, 37)


def test_jit_matches_jax_and_is_one_custom_call(wave_op, xs):
    got = jax.jit(wave_op)(xs, 0.5)
    np.testing.assert_allclose(got, wave_jax(xs, 0.5), rtol=1e-14, atol=1e-15)
    text = jax.jit(wave_op).lower(xs, 0.5).as_text()
    assert text.count("stablehlo.custom_call") == 1 and "lanewise_" in text
    np.testing.assert_allclose(wave_op(xs, 0.5), got, rtol=0, atol=0)  # outside jit: the same call


def test_vmap_adds_a_level_not_a_loop(wave_op, xs):
    ys = jnp.array([0.0, 0.25, 1.0])
    stacked = jnp.stack([xs, xs * 0.5])
    cases = [((stacked, 0.5), (0, None)), ((stacked.T, 0.5), (1, None)), ((xs, ys), (None, 0)),
             ((stacked, ys[:2]), (0, 0))]
    for args, in_axes in cases:
        got = jax.jit(jax.vmap(wave_op, in_axes=in_axes))(*args)
        want = jax.vmap(jax.vmap(wave_jax, in_axes=(0, None)), in_axes=in_axes)(*args)
        np.testing.assert_allclose(got, want, rtol=1e-14, atol=1e-15)
    text = jax.jit(jax.vmap(wave_op, in_axes=(0, None))).lower(stacked, 0.5).as_text()
    assert text.count("stablehlo.custom_call") == 1 and "while" not in text


def test_nested_program_and_divergent_lane():
    grid = lw.jax.op(lw.vmap(lw.vmap(escape, in_axes=(None, 0)), in_axes=(0, None)))
    re, im = jnp.linspace(-2.0, 0.6, 23), jnp.linspace(-1.2, 1.2, 19)
    got = jax.jit(grid)(re, im)
    want = jax.vmap(jax.vmap(escape_jax, in_axes=(None, 0)), in_axes=(0, None))(re, im)
    assert got.shape == (23, 19) and np.array_equal(got, want)


def test_jvp_and_grad_match_jax(wave_op, xs):
    tx = jnp.cos(xs)
    got = jax.jvp(wave_op, (xs, 0.5), (tx, 0.25))
    want = jax.jvp(wave_jax, (xs, 0.5), (tx, 0.25))
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-13, atol=1e-14)

    def loss(f):
        return lambda x, y: jnp.sum(f(x, y) ** 2)

    got = jax.jit(jax.grad(loss(wave_op), argnums=(0, 1)))(xs, 0.5)
    want = jax.grad(loss(wave_jax), argnums=(0, 1))(xs, 0.5)
    for g, w in zip(got, want, strict=True):  # the shared y: one cotangent per lane, summed
        np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-13)


def test_grad_under_vmap_and_of_nested_program():
    op = lw.jax.op(lw.vmap(lw.vmap(wave, in_axes=(None, 0)), in_axes=(0, None)))
    twin = jax.vmap(jax.vmap(wave_jax, in_axes=(None, 0)), in_axes=(0, None))
    a, b = jnp.linspace(-1, 1, 5), jnp.linspace(0, 2, 4)
    got = jax.grad(lambda a, b: jnp.sum(op(a, b) * jnp.arange(20.0).reshape(5, 4)), argnums=(0, 1))(a, b)
    want = jax.grad(lambda a, b: jnp.sum(twin(a, b) * jnp.arange(20.0).reshape(5, 4)), argnums=(0, 1))(a, b)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-13)
    per_row = jax.vmap(jax.grad(lambda a, b: op(a, b).sum()), in_axes=(0, None))(jnp.stack([a, -a]), b)
    want = jax.vmap(jax.grad(lambda a, b: twin(a, b).sum()), in_axes=(0, None))(jnp.stack([a, -a]), b)
    np.testing.assert_allclose(per_row, want, rtol=1e-12, atol=1e-13)


def test_grad_through_a_data_dependent_while_loop():
    """JAX cannot reverse-differentiate lax.while_loop; the op's gradient is lanewise's."""
    op = lw.jax.op(lw.vmap(grow, in_axes=(0, None)))
    x = jnp.linspace(0.3, 2.5, 9)
    g = jax.jit(jax.grad(lambda x: op(x, 10.0).sum()))(x)
    h = 1e-6
    fd = [(grow(v + h, 10.0) - grow(v - h, 10.0)) / (2 * h) for v in np.asarray(x)]
    np.testing.assert_allclose(g, fd, rtol=1e-6)


def test_tuple_results_integer_outputs_and_per_lane_arrays():
    def stats(row, scale):
        out = np.empty(row.shape[0])
        s, n = 0.0, 0
        for i in range(row.shape[0]):
            s += row[i]
            out[i] = s * scale
            n += row[i] > 0
        return out, n

    op = lw.jax.op(lw.vmap(stats, in_axes=(0, None)))
    rows = jnp.array([[1.0, -2.0, 3.0], [0.5, 0.5, -1.0]])
    sums, counts = jax.jit(op)(rows, 2.0)
    np.testing.assert_allclose(sums, np.cumsum(rows, axis=1) * 2.0)
    assert counts.tolist() == [2, 2] and counts.dtype == jnp.int64
    (_, t_counts) = jax.jvp(lambda r: op(r, 2.0), (rows,), (jnp.ones_like(rows),))[1]
    assert t_counts.dtype == jax.dtypes.float0  # integer results have no tangent, as in JAX
    g = jax.grad(lambda r: op(r, 2.0)[0].sum())(rows)  # per-lane arrays: reverse mode
    np.testing.assert_allclose(g, jax.grad(lambda r: (jnp.cumsum(r, axis=1) * 2.0).sum())(rows))


def test_float32_without_x64_casts_lane_results():
    op = lw.jax.op(lw.vmap(lambda x: x * 0.1))  # float32 * a Python float is float64 in a lane
    jax.config.update("jax_enable_x64", False)
    try:
        x = jnp.arange(4, dtype=jnp.float32)
        got = jax.jit(op)(x)
        assert got.dtype == jnp.float32
        np.testing.assert_allclose(got, np.arange(4) * 0.1, rtol=1e-7)
    finally:
        jax.config.update("jax_enable_x64", True)


def test_a_failing_lane_names_the_lane():
    def pick(i):
        table = np.arange(3.0)
        return table[i]

    op = lw.jax.op(lw.vmap(pick))
    with pytest.raises(Exception, match=r"lane pick \(.*test_jax_op.py:\d+\) raised inside a jax.jit op, "
                                        r"at lane number 2"):
        jax.block_until_ready(jax.jit(op)(jnp.array([0, 1, 7, 2])))


def test_a_failing_lane_in_a_parallel_run_names_the_first():
    def pick(i):
        table = np.arange(3.0)
        return table[i]

    idx = np.zeros(50_000, np.int64)  # above serial_below: the handler's parallel kernel
    idx[[45_000, 30_001]] = 7
    with pytest.raises(Exception, match=r"at lane number 30001 "):
        jax.block_until_ready(jax.jit(lw.jax.op(lw.vmap(pick)))(jnp.asarray(idx)))


def uneven(x):
    """Lanes whose cost differs 1000x, the expensive ones together at the start."""
    s = x
    for k in range(2000 if x < 0.25 else 2):
        s = s * 0.999 + 0.001 * math.sin(s + k)
    return s


def test_parallel_handlers_run_every_block_once():
    """The threads take blocks from a shared counter (not prange's fixed shares): each
    block must still run exactly once, in the map and in the reduction."""
    x = np.linspace(0.0, 1.0, 100_003)
    mapped = lw.vmap(uneven)
    np.testing.assert_array_equal(jax.jit(lw.jax.op(mapped))(jnp.asarray(x)), mapped(x))
    total = lw.reduce(mapped, "sum")
    np.testing.assert_allclose(jax.jit(lw.jax.op(total))(jnp.asarray(x)), total(x), rtol=1e-13)


def test_the_call_does_not_hold_the_gil():
    op = jax.jit(lw.jax.op(lw.vmap(gil.slow)))
    x = jnp.ones(4)
    jax.block_until_ready(op(x))  # compiled and warm
    alone, ticks = gil.ticks_beside(lambda: jax.block_until_ready(op(x)))
    assert alone > 1e-2 and ticks > 100  # the other thread ran while the op ran


def test_second_trace_reuses_the_compiled_program(wave_op, xs):
    from lanewise.backends import cpu

    jax.jit(wave_op)(xs, 0.5)
    before = dict(cpu.stats)
    jax.jit(lambda x: wave_op(x, 0.25) + 1)(xs)  # a new jit, same types
    jax.jit(wave_op)(jnp.linspace(0, 1, 100), 0.5)  # a new shape: the same kernel and handler
    assert cpu.stats == before


def test_handlers_without_a_cache_key_get_names_never_reused(restore_config):
    """XLA keeps the first handler registered under a name: uncached handlers were named
    by ``id`` of their module, which Python reuses once the module is collected."""
    from lanewise.jax.handler import _target_name

    restore_config.disk_cache = False
    assert _target_name(None) != _target_name(None)
    ops = [lw.jax.op(lw.vmap(lambda x, k=k: x * k)) for k in (2.0, 3.0)]
    for k, op in zip((2.0, 3.0), ops, strict=True):
        np.testing.assert_array_equal(jax.jit(op)(jnp.arange(3.0)), k * np.arange(3.0))


def test_errors_name_the_argument():
    with pytest.raises(TypeError, match="lw.vmap"):
        lw.jax.op(wave)
    with pytest.raises(lw.LanewiseError, match="CPU or tpu backend"):
        lw.jax.op(lw.vmap(wave, backend="python"))
    op = lw.jax.op(lw.vmap(wave, in_axes=(0, None)))
    with pytest.raises(TypeError, match="positional"):
        op(jnp.ones(3), y=1.0)
    with pytest.raises(lw.LaneTypeError, match="argument leaf 0 of wave has dtype float16"):
        jax.jit(op)(jnp.ones(3, jnp.float16), 1.0)


def test_abi_offsets_match_jaxlib_header(tmp_path):
    """The struct offsets abi.py reads, compiled from the header jaxlib ships."""
    gcc = shutil.which("gcc")
    if gcc is None:
        pytest.skip("no C compiler")
    source = tmp_path / "offsets.c"
    source.write_text("""
#include <stddef.h>
#include <stdio.h>
#include "xla/ffi/api/c_api.h"
int main(void) {
  printf("%zu %zu %zu %zu %zu %zu\\n", offsetof(XLA_FFI_CallFrame, extension_start), offsetof(XLA_FFI_CallFrame, api),
         offsetof(XLA_FFI_CallFrame, stage), offsetof(XLA_FFI_CallFrame, args) + offsetof(XLA_FFI_Args, args),
         offsetof(XLA_FFI_CallFrame, rets) + offsetof(XLA_FFI_Rets, rets),
         offsetof(XLA_FFI_CallFrame, attrs) + offsetof(XLA_FFI_Attrs, attrs));
  printf("%zu %zu %zu %zu %zu\\n", offsetof(XLA_FFI_Buffer, data), offsetof(XLA_FFI_Buffer, rank),
         offsetof(XLA_FFI_Buffer, dims), offsetof(XLA_FFI_Array, size), offsetof(XLA_FFI_Array, data));
  printf("%zu %zu %zu %zu %zu\\n", offsetof(XLA_FFI_Metadata_Extension, metadata),
         offsetof(XLA_FFI_Metadata, api_version), offsetof(XLA_FFI_Metadata, traits),
         offsetof(XLA_FFI_Api, XLA_FFI_Error_Create), sizeof(XLA_FFI_Error_Create_Args));
  printf("%d %d %zu\\n", XLA_FFI_API_MAJOR, XLA_FFI_API_MINOR, sizeof(XLA_FFI_Api_Version));
  return 0;
}
""")
    exe = tmp_path / "offsets"
    subprocess.run([gcc, "-I", jax.ffi.include_dir(), str(source), "-o", str(exe)], check=True)
    lines = [list(map(int, line.split())) for line in subprocess.check_output([str(exe)]).decode().splitlines()]
    assert lines[0] == [8 * abi.FRAME_EXTENSION, 8 * abi.FRAME_API, abi.FRAME_STAGE_BYTES, 8 * abi.FRAME_ARGS,
                        8 * abi.FRAME_RETS, 8 * abi.FRAME_ATTRS]
    assert lines[1] == [8 * abi.BUFFER_DATA, 8 * abi.BUFFER_RANK, 8 * abi.BUFFER_DIMS, 8 * abi.ARRAY_SIZE,
                        8 * abi.ARRAY_DATA]
    assert lines[2] == [8 * abi.METADATA_OF_EXTENSION, 8, 32, 8 * abi.API_ERROR_CREATE, 32]
    assert abi.header_supported(*lines[3][:2]) and lines[3][2] == 24  # JAX 0.10: 0.3, 0.12: 0.5


def test_reduce_programs_are_ops():
    grid = lw.vmap(lw.vmap(wave, in_axes=(None, 0)), in_axes=(0, None))
    a, b = np.linspace(-1, 1, 301), np.linspace(0, 2, 203)
    for op_name, axis in [("sum", None), ("mean", 1), ("max", 0), ("argmin", None), ("any", None)]:
        program = lw.reduce(lw.vmap(lw.vmap(lambda x, y: wave(x, y) > 0.5 if op_name == "any" else wave(x, y),
                                            in_axes=(None, 0)), in_axes=(0, None)), op_name, axis=axis)
        got = jax.jit(lw.jax.op(program))(jnp.asarray(a), jnp.asarray(b))
        want = program(a, b)
        assert got.shape == np.shape(want) and got.dtype == np.asarray(want).dtype
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-9)  # sums that cancel to ~0
    rows = lw.reduce(lw.vmap(lambda x: np.array([x, x * x, 1.0])), "sum")  # per-lane arrays, summed
    np.testing.assert_allclose(jax.jit(lw.jax.op(rows))(jnp.arange(5.0)), [10.0, 30.0, 5.0])
    total = lw.jax.op(lw.reduce(grid, "sum"))
    text = jax.jit(total).lower(jnp.asarray(a), jnp.asarray(b)).as_text()
    assert "301x203" not in text  # the mapped values are never a buffer: only the partials are


GRID = lw.vmap(lw.vmap(wave, in_axes=(None, 0)), in_axes=(0, None))
GRID_JAX = jax.vmap(jax.vmap(wave_jax, in_axes=(None, 0)), in_axes=(0, None))
# Every reduction under jax.vmap; each derivative path once (each case compiles several
# parallel XLA handlers, ~10 s apiece): the fused full sum, a partial mean (cotangents
# spread over the folded lanes), the lanes' values (max: ties; prod: zeros).  min and a
# partial sum take the paths of max and of the mean.
REDUCTIONS = [("sum", None, True), ("mean", 1, True), ("max", 0, True), ("prod", 1, True), ("min", None, False),
              ("argmax", None, False), ("sum", 0, False)]


@pytest.mark.parametrize("name, axis, derivatives", REDUCTIONS)
def test_reduce_ops_under_vmap_and_their_derivatives(name, axis, derivatives):
    """jax.vmap of a reduction op is one more level of the fused nest (one custom call,
    no batch x lanes buffer); jvp and grad of every reduction over any axes match JAX's
    (min, max and prod through the lanes' values, with JAX's rule for ties)."""
    op = lw.jax.op(lw.reduce(GRID, name, axis=axis))

    def twin(a, b):
        return getattr(jnp, name)(GRID_JAX(a, b), axis=axis)

    a, b = jnp.linspace(-1, 1, 7), jnp.linspace(0, 2, 5)
    rows = jnp.stack([a, 0.5 * a, a + 0.1])
    batched = (((0, None), (rows, b)), ((None, 1), (a, jnp.stack([b, 2 * b], axis=1))))
    for axes, args in batched[:2 if derivatives else 1]:
        got, want = jax.jit(jax.vmap(op, in_axes=axes))(*args), jax.vmap(twin, in_axes=axes)(*args)
        assert got.dtype == want.dtype
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    text = jax.jit(jax.vmap(op, in_axes=(0, None))).lower(rows, b).as_text()
    assert text.count("stablehlo.custom_call") == 1 and "3x7x5" not in text
    if not derivatives:
        return

    def loss(f):
        return lambda a, b: jnp.sum(jnp.sin(f(a, b)))

    for g, w in zip(jax.jit(jax.grad(loss(op), argnums=(0, 1)))(a, b), jax.grad(loss(twin), argnums=(0, 1))(a, b),
                    strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-10, atol=1e-12)
    tangents = (jnp.cos(a), 0.5 + 0 * b)
    np.testing.assert_allclose(jax.jvp(op, (a, b), tangents)[1], jax.jvp(twin, (a, b), tangents)[1],
                               rtol=1e-10, atol=1e-12)
    got = jax.vmap(jax.grad(loss(op)), in_axes=(0, None))(rows, b)
    np.testing.assert_allclose(got, jax.vmap(jax.grad(loss(twin)), in_axes=(0, None))(rows, b), rtol=1e-10,
                               atol=1e-12)


def test_second_and_third_derivatives():
    """The tangent and cotangent programs are ops too: lanewise differentiates them again
    (hessian of a fused loss, Newton's step, derivatives of a data-dependent loop)."""
    t = jnp.linspace(0.0, 3.0, 200)
    loss = lw.jax.op(lw.reduce(lw.vmap(decay_residual, in_axes=(0, None, None)), "sum"))

    def twin(p):
        return jnp.sum((p[0] * jnp.exp(-p[1] * t) - jnp.cos(t)) ** 2)

    p = jnp.array([1.5, 0.5])
    np.testing.assert_allclose(jax.jit(jax.hessian(lambda p: loss(t, p[0], p[1])))(p), jax.hessian(twin)(p),
                               rtol=1e-11)
    op = lw.jax.op(lw.vmap(grow, in_axes=(0, None)))
    x = jnp.linspace(0.3, 2.5, 9)
    h = jax.hessian(lambda x: op(x, 10.0).sum())(x)
    np.testing.assert_array_equal(h, jnp.diag(jnp.diag(h)))  # lanes are independent
    # third derivatives by central differences of lanewise's own second derivative
    second = lw.vmap(lw.grad(lw.grad(grow)), in_axes=(0, None))
    step = 1e-5
    fd = (second(np.asarray(x) + step, 10.0) - second(np.asarray(x) - step, 10.0)) / (2 * step)
    third = jax.grad(lambda x: jax.grad(lambda x: jax.grad(lambda x: op(x, 10.0).sum())(x).sum())(x).sum())(x)
    np.testing.assert_allclose(third, fd, rtol=1e-5)
    np.testing.assert_allclose(jnp.diag(h), second(np.asarray(x), 10.0), rtol=1e-12)


def test_vmap_of_jvp_batches_the_tangent_program(wave_op, xs):
    """JAX batches the tangent map with the primal batched and the tangent not, and the
    other way round."""
    rows = jnp.stack([xs, xs + 0.5])
    got = jax.vmap(lambda x: jax.jvp(wave_op, (x, 0.5), (jnp.ones_like(xs), 0.0))[1])(rows)
    want = jax.vmap(lambda x: jax.jvp(wave_jax, (x, 0.5), (jnp.ones_like(xs), 0.0))[1])(rows)
    np.testing.assert_allclose(got, want, rtol=1e-13, atol=1e-14)
    got = jax.vmap(lambda t: jax.jvp(wave_op, (xs, 0.5), (t, 0.0))[1])(rows)
    want = jax.vmap(lambda t: jax.jvp(wave_jax, (xs, 0.5), (t, 0.0))[1])(rows)
    np.testing.assert_allclose(got, want, rtol=1e-13, atol=1e-14)
    jac = jax.jacfwd(lambda x: wave_op(x, 0.5))(xs[:5])
    np.testing.assert_allclose(jac, jax.jacfwd(lambda x: wave_jax(x, 0.5))(xs[:5]), rtol=1e-13, atol=1e-14)


def decay_residual(t, a, b):
    r = a * math.exp(-b * t) - math.cos(t)
    return r * r


def test_gradient_of_a_reduction_stores_no_per_lane_value():
    """The fitting pattern: the gradient of a fused sum/mean over lanes with respect to
    parameters shared by the lanes is one more fused reduction."""
    t = jnp.linspace(0.0, 3.0, 1000)

    def twin(t, a, b):
        return jnp.sum((a * jnp.exp(-b * t) - jnp.cos(t)) ** 2)

    for name, scale in (("sum", 1.0), ("mean", 1 / t.size)):
        loss = lw.jax.op(lw.reduce(lw.vmap(decay_residual, in_axes=(0, None, None)), name))
        got = jax.jit(jax.grad(loss, argnums=(0, 1, 2)))(t, 1.5, 0.5)
        want = jax.grad(twin, argnums=(0, 1, 2))(t, 1.5, 0.5)
        for g, w in zip(got, want, strict=True):
            np.testing.assert_allclose(g, np.asarray(w) * scale, rtol=1e-11, atol=1e-13)
        tangent = jax.jvp(lambda a: loss(t, a, 0.5), (1.5,), (1.0,))[1]
        np.testing.assert_allclose(tangent, want[1] * scale, rtol=1e-11)
    text = jax.jit(jax.grad(loss, argnums=(1, 2))).lower(t, 1.5, 0.5).as_text()
    calls = [line for line in text.splitlines() if "stablehlo.custom_call" in line]
    assert len(calls) == 1 and "-> (tensor<1xf64>, tensor<1xf64>)" in calls[0]  # one partial per parameter


WARM = """
import sys, jax, jax.numpy as jnp, lanewise as lw
from lanewise.backends import cpu
jax.config.update("jax_enable_x64", True)
sys.path.insert(0, {root!r})
from test_jax_op import decay_residual, wave
op = lw.jax.op(lw.vmap(wave, in_axes=(0, None)))
loss = lw.jax.op(lw.reduce(lw.vmap(decay_residual, in_axes=(0, None, None)), "mean"))
x = jnp.linspace(0.0, 1.0, 5000)
print(float(jax.jit(op)(x, 0.5).sum()), float(jax.jit(jax.grad(loss, argnums=1))(x, 1.5, 0.5)), cpu.stats["typed"])
"""


def test_a_new_process_loads_ops_from_the_disk_cache(tmp_path):
    """Kernels and handlers come from the disk cache: nothing typed, nothing crashes
    (a cached handler links against Numba's threading layer, started first)."""
    import os
    import sys
    from pathlib import Path

    env = {**os.environ, "LANEWISE_CACHE_DIR": str(tmp_path / "cache")}
    script = WARM.format(root=str(Path(__file__).parent))
    runs = [subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=600)
            for _ in range(2)]
    for run in runs:
        assert run.returncode == 0, run.stderr[-2000:]
    cold, warm = (run.stdout.split() for run in runs)
    assert cold[:2] == warm[:2] and int(cold[2]) > 0 and int(warm[2]) == 0


_BOUND_PROBE = """
import jax, jax.numpy as jnp, math, lanewise as lw
from lanewise.runtime import slow_symbols
def wave(x):
    return math.sin(x) + math.cos(x)
jax.block_until_ready(jax.jit(lw.jax.op(lw.vmap(wave)))(jnp.array([1e300, 0.5])))
print(all(n in slow_symbols._bound and slow_symbols._cells[n].value == slow_symbols._bound[n].address
          for n in slow_symbols.SLOW_FUNCTIONS))
"""


def test_trig_slow_paths_are_bound_before_xla_calls_the_handler(tmp_path):
    """A huge argument reaches lanemath's Payne-Hanek path; in a handler that must
    not call back into Python, it is compiled before the call, not by the trampoline."""
    import os
    import sys

    env = dict(os.environ, LANEWISE_CACHE_DIR=str(tmp_path))
    out = subprocess.run([sys.executable, "-c", _BOUND_PROBE], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip().splitlines()[-1] == "True"


def _bigger_abs(a, b):
    return a if abs(a) >= abs(b) else b


def test_segmented_and_monoid_reductions_are_refused_before_compiling():
    for program in (lw.reduce(lw.vmap(lambda x: (0, x)), "sum", segments=2),
                    lw.reduce(lw.vmap(lambda x: x), lw.Monoid(_bigger_abs, 0.0))):
        with pytest.raises(lw.LanewiseError, match="segmented reductions and lw.Monoid are not supported"):
            jax.jit(lw.jax.op(program))(jnp.arange(4.0))
