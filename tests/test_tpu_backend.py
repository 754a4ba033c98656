"""backend="tpu": lanes lowered from the lane IR to one Pallas kernel, run in interpret mode.

CI has no TPU: every kernel here runs with ``LANEWISE_TPU_INTERPRET`` semantics
(``lw.config.tpu_interpret``) on the CPU, the same Pallas kernel a TPU runs.  Each
lane is diff-tested against the reference backend (``backend="python"``) or a
float32 NumPy reference: float32 results within a float32 tolerance, integer and
bool results exactly.  Sizes stay at a few (8, 128) tiles: interpret mode is slow.
"""

from __future__ import annotations

import math
import os
import re
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("jax")
import jax  # noqa: E402

import lanewise as lw  # noqa: E402
from lanewise import LaneCompileError, LaneTypeError  # noqa: E402
from lanewise.backends import tpu  # noqa: E402

from corpus import BY_NAME  # noqa: E402

#: Lanes of three tiles, the last one partial: padding lanes are exercised.
N = 2 * 1024 + 300


#: ``LANEWISE_TPU_TESTS_ON_CHIP=1`` on a machine with a TPU runs these tests on the chip
#: (Mosaic compiles each kernel) instead of in interpret mode.
ON_CHIP = os.environ.get("LANEWISE_TPU_TESTS_ON_CHIP") == "1" and jax.default_backend() == "tpu"


#: float32 tolerance: the chip's exp/log/tanh are approximations (up to a few thousand
#: ulps near log's zero, docs/tpu.md), the CPU's are within a few ulps.
RTOL = 2e-4 if ON_CHIP else 2e-5


@pytest.fixture(autouse=True)
def interpret():
    with lw.config.overridden(tpu_interpret=not ON_CHIP, tpu_tile=(8, 128), tpu_unroll=1):
        yield


def on_tpu(lane, *args):
    return lw.vmap(lane, backend="tpu")(*args)


def interpreted(**options):
    """``lw.config`` for a tpu test module: interpret mode off the chip, and ``options``."""
    return lw.config.overridden(tpu_interpret=not ON_CHIP, **options)


def reference(lane, *args):
    return lw.vmap(lane, backend="python")(*args)


def assert_match(got, want):
    """float32 tolerance for floats (the reference may compute in float64), exact otherwise."""
    got_leaves, want_leaves = jax.tree.leaves(got), jax.tree.leaves(want)
    assert len(got_leaves) == len(want_leaves)
    for g, w in zip(got_leaves, want_leaves, strict=True):
        assert isinstance(g, jax.Array)
        g, w = np.asarray(g), np.asarray(w)
        assert g.shape == w.shape
        if w.dtype.kind == "f":
            np.testing.assert_allclose(g, w.astype(np.float32), rtol=RTOL, atol=RTOL)
        else:
            assert g.dtype.kind == w.dtype.kind or {g.dtype.kind, w.dtype.kind} <= set("iu")
            np.testing.assert_array_equal(g, w)


def floats(n=N, lo=-3.0, hi=3.0, seed=0):
    return np.random.default_rng(seed).uniform(lo, hi, n).astype(np.float32)


# ----------------------------------------------------------------------------- corpus lanes


@pytest.mark.parametrize("name", ["arith", "branchy", "sincos", "npfuncs", "helper", "closure"])
def test_corpus_float32_lanes_match_the_reference(name):
    entry = BY_NAME[name]
    args = [floats(seed=k) for k in range(len(entry.kinds))]
    assert_match(on_tpu(entry.lane, *args), reference(entry.lane, *args))


def test_corpus_int32_lanes_match_the_reference_exactly():
    a = np.random.default_rng(1).integers(-1000, 1000, N).astype(np.int32)
    b = np.random.default_rng(2).integers(-1000, 1000, N).astype(np.int32)
    assert_match(on_tpu(BY_NAME["arith"].lane, a, b), reference(BY_NAME["arith"].lane, a, b))
    n = np.random.default_rng(3).integers(1, 5000, N).astype(np.int32)
    assert_match(on_tpu(BY_NAME["collatz"].lane, n), reference(BY_NAME["collatz"].lane, n))


def test_corpus_loops_with_break_and_continue():
    x = floats(lo=0.0, hi=2.0)
    n = np.random.default_rng(4).integers(0, 12, N).astype(np.int32)
    assert_match(on_tpu(BY_NAME["loops"].lane, x, n), reference(BY_NAME["loops"].lane, x, n))


def test_corpus_bool_lanes():
    rng = np.random.default_rng(5)
    a, b = rng.random(N) < 0.5, rng.random(N) < 0.5
    got = on_tpu(BY_NAME["logic"].lane, a, b)
    assert got.dtype == bool
    assert_match(got, reference(BY_NAME["logic"].lane, a, b))


# ----------------------------------------------------------------------------- hand-written lanes


def first_root(x):
    """Early return from a while loop, a continue, and a value that changes type in the loop."""
    k = 0
    s = 0
    while k < 40:
        k += 1
        if k % 4 == 0:
            continue
        s += x * 0.5
        if s > 3.0:
            return k, s
    return -1, s


def nested(x, n):
    total = 0.0
    for i in range(n):
        for j in range(i, 0, -1):
            if j == 3:
                break
            total += x / j
    return total


def branches(x, y):
    if x > 1.0:
        r = math.sqrt(x)
    elif x < -1.0:
        r = math.exp(x) + abs(y)
    else:
        r = math.tanh(x) if y > 0 else math.cos(x) * math.sin(y)
    return max(r, y), min(r, -y), math.floor(r), float(math.fabs(r)) ** 2, x > y and y > 0


def integers(a, b):
    return a // 7, a % 7, -a // 3, (a * b) >> 2, a & b | 5, int(a / 3)


def test_early_return_continue_and_tuples():
    x = floats(lo=-1.0, hi=2.0)
    assert_match(on_tpu(first_root, x), reference(first_root, x))


def test_nested_loops_with_descending_range_and_break():
    x = floats()
    n = np.random.default_rng(6).integers(0, 9, N).astype(np.int32)
    assert_match(on_tpu(nested, x, n), reference(nested, x, n))


def test_elif_ifexp_math_and_builtins():
    x, y = floats(lo=-4.0, hi=4.0, seed=7), floats(seed=8)
    got = on_tpu(branches, x, y)
    assert got[2].dtype == np.int32  # math.floor gives an int
    assert_match(got, reference(branches, x, y))


def test_integer_operators_follow_python_floor_rules():
    rng = np.random.default_rng(9)
    a, b = (rng.integers(-5000, 5000, N).astype(np.int32) for _ in range(2))
    assert_match(on_tpu(integers, a, b), reference(integers, a, b))


def test_int32_overflow_wraps_as_jax_does():
    big = np.array([2**30, -(2**30), 7], np.int32)
    got = np.asarray(on_tpu(lambda a: a * 4 + 1, big))
    np.testing.assert_array_equal(got, (big.astype(np.int64) * 4 + 1).astype(np.int32))


def test_nested_vmap_out_axes_and_scalar_arguments():
    x = floats(n=6 * 50).reshape(6, 50)
    inner = lw.vmap(lambda a, s: a * s + 1.0, in_axes=(0, None))
    got = lw.vmap(inner, in_axes=(1, None), out_axes=1, backend="tpu")(x, 2.5)
    want = lw.vmap(inner, in_axes=(1, None), out_axes=1, backend="python")(x, 2.5)
    assert_match(got, want)


def test_jax_arrays_in_jax_arrays_out():
    x = jax.numpy.asarray(floats(n=100))
    got = on_tpu(BY_NAME["branchy"].lane, x)
    assert isinstance(got, jax.Array)
    assert_match(got, reference(BY_NAME["branchy"].lane, np.asarray(x)))


def test_jax_arrays_stay_on_the_device(monkeypatch):
    """A JAX argument is read where it lives: never turned into NumPy (on the chip that
    is a copy to the host and back per call), in a pytree or alone, mapped or not."""
    from lanewise.runtime import interop

    def no_host_copy(value, what):
        raise AssertionError(f"{what} was copied to the host")

    monkeypatch.setattr(interop, "as_host_array", no_host_copy)
    x = jax.numpy.asarray(floats(n=300))
    scale = jax.numpy.asarray(np.float32(2.5))
    call = tpu.bind_call(lw.vmap(lambda p, s: p[0] * s, in_axes=(0, None)), ((x,), scale), {})
    assert call.values[0] is x and call.values[1] is scale
    got = lw.vmap(lambda a, s: a * s if a > 0 else -a, in_axes=(0, None), backend="tpu")(x, scale)
    monkeypatch.undo()
    want = np.where(np.asarray(x) > 0, np.asarray(x) * np.float32(2.5), -np.asarray(x))
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-6)


# ----------------------------------------------------------------------------- divergent lanes


def mandelbrot(cr, ci):
    zr = zi = 0.0
    n = 0
    while n < 200 and zr * zr + zi * zi <= 4.0:
        zr, zi = zr * zr - zi * zi + cr, 2.0 * zr * zi + ci
        n += 1
    return n


def mandelbrot_numpy(cr, ci):
    """The same escape counts, all lanes at once in float32 NumPy."""
    zr, zi = np.zeros_like(cr), np.zeros_like(ci)
    n = np.zeros(cr.shape, np.int32)
    for _ in range(200):
        going = (zr * zr + zi * zi <= np.float32(4.0))
        if not going.any():
            break
        zr, zi = (np.where(going, zr * zr - zi * zi + cr, zr),
                  np.where(going, np.float32(2.0) * zr * zi + ci, zi))
        n += going
    return n


def test_escape_time_fractal_matches_a_float32_numpy_reference():
    re, im = np.meshgrid(np.linspace(-2.0, 0.6, 64, dtype=np.float32),
                         np.linspace(-1.2, 1.2, 48, dtype=np.float32))
    got = np.asarray(lw.vmap(lw.vmap(mandelbrot), backend="tpu")(re, im))
    want = mandelbrot_numpy(re, im)
    assert got.shape == want.shape and got.dtype == np.int32
    assert np.mean(got != want) <= 0.002  # float32 rounding may differ at the boundary only


def count(x):
    k = 0
    while k < x:
        k += 1
    return k


def three_tiles():
    """Lanes of three (8, 128) tiles: the first done at once, the second's lanes all
    50 iterations long, the third with one lane of 9."""
    x = np.zeros(3 * 1024, np.int32)
    x[1024:2048] = 50
    x[2048 + 17] = 9
    return x


def tile_iterations(lane, *args):
    """The loop iterations each tile of ``lane``'s call ran."""
    call = tpu.bind_call(lw.vmap(lane), args, {})
    return np.asarray(tpu.iterations(tpu.build(call), call)).tolist()


def test_a_tile_whose_lanes_finish_early_leaves_its_loop_early():
    x = three_tiles()
    assert tile_iterations(count, x) == [0, 50, 9]
    np.testing.assert_array_equal(np.asarray(on_tpu(count, x)), x)


def test_padding_lanes_never_run_a_loop():
    def spin(x):  # a padding lane given 0 would loop forever
        k = 0
        while x * k != 7:
            k += 1
        return k

    x = np.ones(5, np.int32)
    assert tile_iterations(spin, x) == [7]
    np.testing.assert_array_equal(np.asarray(on_tpu(spin, x)), 7)


def test_lanes_off_the_plane_never_run_a_loop():
    """The edge tiles of a 13 x 300 plane hang over it: their lanes there read undefined
    values and must never be active, or a loop would run for them (here to its cap)."""
    def spin(x, y):
        k = 0
        while x * y * k != 7 and k < 1000:
            k += 1
        return k

    x, y = np.ones(13, np.int32), np.ones(300, np.int32)
    plane = lw.vmap(lw.vmap(spin, in_axes=(None, 0)), in_axes=(0, None), backend="tpu")
    call = tpu.bind_call(plane, (x, y), {})
    assert np.asarray(tpu.iterations(tpu.build(call), call)).tolist() == [7] * 6  # 2 x 3 tiles
    np.testing.assert_array_equal(np.asarray(plane(x, y)), 7)


def test_the_loop_check_unrolled_runs_whole_rounds_with_the_same_results():
    x = three_tiles()
    with lw.config.overridden(tpu_unroll=4):
        # a tile checks "some lane active" every 4 iterations: 50 -> 52, 9 -> 12
        assert tile_iterations(count, x) == [0, 52, 12]
        np.testing.assert_array_equal(np.asarray(on_tpu(count, x)), x)


def escape32(cr, ci):
    zr = zi = 0.0
    for n in range(60):
        zr, zi = zr * zr - zi * zi + cr, 2 * zr * zi + ci
        if zr * zr + zi * zi > 4.0:
            return n
    return 60


@pytest.mark.parametrize("tile, unroll", [((8, 128), 1), ((16, 256), 3), ((8, 256), 8)])
def test_a_lane_plane_in_blocks_of_tiles_matches_the_reference(tile, unroll):
    """Two vmap levels whose last is at least a tile wide: each tile a block of the
    (rows, cols) plane, padded in both directions; out_axes swapped."""
    re, im = np.linspace(-2, 0.6, 13, dtype=np.float32), np.linspace(-1.3, 1.3, 300, dtype=np.float32)
    with lw.config.overridden(tpu_tile=tile, tpu_unroll=unroll):
        plane = lw.vmap(lw.vmap(escape32, in_axes=(None, 0)), in_axes=(0, None), out_axes=1, backend="tpu")
        call = tpu.bind_call(plane, (re, im), {})
        exe = tpu.build(call)
        assert "13 x 300 plane" in tpu.explain(exe, call)[0]
        got = plane(re, im)
    want = lw.vmap(lw.vmap(escape32, in_axes=(None, 0)), in_axes=(0, None), out_axes=1, backend="python")(re, im)
    assert got.shape == (300, 13)
    assert (np.asarray(got) != np.asarray(want)).mean() <= 0.01  # float32 against float64 near the boundary


def test_tiles_that_are_not_whole_registers_are_refused():
    with lw.config.overridden(tpu_tile=(8, 100)), pytest.raises(lw.BackendError, match=r"tpu_tile.*\(8, 128\)"):
        lw.vmap(escape32, backend="tpu")(np.zeros(3, np.float32), np.zeros(3, np.float32))


def grid_lane(x, s, y, w, flag):
    r = x * x + y * y * s
    return math.cos(r) / (1.0 + r) + (w if flag else -w)


def test_arguments_travel_as_the_side_of_the_plane_they_vary_along(capsys):
    """x varies along rows only, y along columns only, s and flag are one number, w
    is one per lane: the kernel gets a (rows, 1) column, a (1, cols) row, scalars
    and one plane -- never a broadcast copy of x or y -- and the plane's edges hang
    over the (8, 128) tiles (21 x 300)."""
    x, y = np.linspace(-3, 3, 21, dtype=np.float32), np.linspace(-2, 2, 300, dtype=np.float32)
    w = np.random.default_rng(0).standard_normal((21, 300)).astype(np.float32)
    axes = ((None, None, 0, 0, None), (0, None, None, 0, None))

    def mapped(backend):
        return lw.vmap(lw.vmap(grid_lane, in_axes=axes[0]), in_axes=axes[1], backend=backend)

    call = tpu.bind_call(mapped("tpu"), (x, np.float32(0.5), y, w, True), {})
    carried = tpu.explain(tpu.build(call), call)[1]
    assert "x as row, s as scalar, y as col, w as lanes, flag as scalar" in carried
    with lw.config.overridden(debug=True):
        got = mapped("tpu")(x, np.float32(0.5), y, w, True)
    kernel = capsys.readouterr().out
    assert "f32[21,1]" in kernel and "f32[1,300]" in kernel and "f32[21,300]" in kernel
    assert " pad[" not in kernel and "concatenate" not in kernel  # no padded copy: the edge tiles hang over
    assert_match(got, mapped("python")(x, np.float32(0.5), y, w, True))


def test_a_lane_without_source_text_runs_as_its_bytecode_rebuilt():
    """A lane exec'd from a string (or piped into python) has no text: the front end
    rebuilds it from bytecode as one `while True` over its basic blocks, whose locals
    are first assigned inside that loop; the tpu backend carries them across it."""
    namespace = {}
    exec(compile("def escape(cr, ci):\n"
                 "    zr = zi = 0.0\n"
                 "    for n in range(30):\n"
                 "        zr, zi = zr * zr - zi * zi + cr, 2.0 * zr * zi + ci\n"
                 "        if zr * zr + zi * zi > 4.0:\n"
                 "            return n\n"
                 "    return 30\n", "<string>", "exec"), namespace)
    lane = namespace["escape"]
    from lanewise.lane.ir.build import function_ir

    assert function_ir(lane).source == "bytecode"
    cr, ci = floats(lo=-2.0, hi=0.6), floats(lo=-1.3, hi=1.3, seed=1)
    got, want = np.asarray(on_tpu(lane, cr, ci)), np.asarray(reference(lane, cr, ci))
    assert (got != want).mean() <= 0.002  # float32 on the tpu, float64 in the reference: boundary points


def test_lw_explain_of_a_tpu_function_shows_its_kernel():
    """The layout, how each argument travels, the lane IR and the kernel's loop as JAX traces it."""
    re, im = np.linspace(-2, 0.6, 13, dtype=np.float32), np.linspace(-1.3, 1.3, 300, dtype=np.float32)
    text = lw.explain(lw.vmap(lw.vmap(escape32, in_axes=(None, 0)), in_axes=(0, None), backend="tpu"), re, im)
    assert "13 x 300 plane" in text and "cr as row, ci as col" in text
    kernel = text.split("generated kernel")[1]
    assert "pallas_call" in kernel and "while[" in kernel and "reduce_max" in kernel  # a tile's "any lane active"
    assert "loop order" not in text  # not the CPU nest


def test_a_lane_without_loops_takes_the_bigger_block():
    flat = lw.vmap(grid_lane, in_axes=(0, None, 0, 0, None), backend="tpu")
    exe = tpu.build(call := tpu.bind_call(flat, (floats(), 1.0, floats(), floats(), False), {}))
    assert not exe.loops and "no loop: tiles of lw.config.tpu_block" in tpu.explain(exe, call)[0]
    assert "grid of (8, 1024) tiles" in tpu.explain(exe, call)[0]  # the block, no more rows than the lanes need
    assert tpu.build(tpu.bind_call(lw.vmap(escape32, backend="tpu"), (floats(), floats()), {})).loops
    with lw.config.overridden(tpu_block=(8, 100)), pytest.raises(lw.BackendError, match=r"tpu_block.*\(8, 128\)"):
        flat(floats(), 1.0, floats(), floats(), False)


def suspended(x, n):
    """Stores after lanes wait: at a continue, after a break, after a per-lane range end,
    and in a loop under a branch whose other lanes keep their values."""
    s = 0.0
    t = x
    for k in range(6):
        if k == n:
            continue
        s += x * k
        if s > 9.0:
            break
        t = t + 1.0
    u = x
    if x > 0.5:
        for j in range(n):
            u = u * 1.5
    w = 0.0
    for j in range(n, 4):
        w += x
    return s, t, u, w


def test_stores_keep_the_values_of_lanes_that_wait():
    x = floats(lo=0.0, hi=2.0)
    n = (np.arange(N) % 5).astype(np.int32)
    assert_match(on_tpu(suspended, x, n), reference(suspended, x, n))


# ----------------------------------------------------------------------------- refusals


@pytest.mark.parametrize("dtype, fix", [(np.float64, "x.astype(np.float32)"), (np.int64, "x.astype(np.int32)")])
def test_64_bit_arguments_are_refused_with_the_fix(dtype, fix):
    def lane(x):
        return x + 1

    with pytest.raises(LaneTypeError, match=rf"argument x is {np.dtype(dtype)}.*{re.escape(fix)}"):
        on_tpu(lane, np.ones(4, dtype))


def test_a_primitive_without_a_tpu_rule_names_itself_and_the_line():
    def lane(x):
        return np.logaddexp(x, 1.0)

    line = lane.__code__.co_firstlineno + 1
    with pytest.raises(LaneCompileError, match=rf"np.logaddexp is not supported on the tpu backend "
                                               rf"\(.*test_tpu_backend.py:{line}\)"):
        on_tpu(lane, floats(n=8))


def test_unsupported_constructs_name_the_line():
    def lane(x):
        try:
            return x
        except ValueError:
            return 0.0

    line = lane.__code__.co_firstlineno + 1
    with pytest.raises(LaneCompileError, match=rf"not supported on the tpu backend \(.*test_tpu_backend.py:{line}\)"):
        on_tpu(lane, floats(n=8))


def test_without_a_tpu_and_interpret_mode_the_error_says_how():
    if jax.default_backend() == "tpu":
        pytest.skip("a TPU is attached")
    with lw.config.overridden(tpu_interpret=False):
        with pytest.raises(lw.BackendError, match="LANEWISE_TPU_INTERPRET=1"):
            on_tpu(lambda x: x + 1.0, floats(n=8))


def test_importing_lanewise_does_not_import_jax():
    code = "import sys, lanewise; print('jax' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_bool_literals_and_bool_values_count_as_ints():
    def lane(x, b):
        return (True + True) * x + (b + b) - (x > 0), -b

    x, b = floats(n=300), np.random.default_rng(10).random(300) < 0.5
    assert_match(on_tpu(lane, x, b), reference(lane, x, b))


def test_lanewise_debug_prints_the_kernel(capsys):
    def lane(x):
        while x < 10.0:
            x = x * 2.0
        return x

    with lw.config.overridden(debug=True):
        got = on_tpu(lane, np.array([1.0, 3.0, 20.0], np.float32))
    np.testing.assert_array_equal(np.asarray(got), [16.0, 12.0, 20.0])
    text = capsys.readouterr().out
    assert "lanewise tpu kernel of" in text and "pallas_call" in text and "while" in text


def many_functions(x, y):
    """Positive ``x``, any ``y``: one kernel for the table's float functions."""
    return (math.sqrt(x), math.exp(y), math.log(x), math.log10(x), math.log2(x), math.log1p(x),
            math.expm1(y), math.sin(y), math.cos(y), math.tan(y * 0.3), math.atan(y), math.asinh(y),
            math.tanh(y), math.fabs(y), math.ceil(y), np.trunc(y), math.pow(x, y), math.hypot(x, y),
            math.atan2(y, x), math.copysign(x, y), math.fmod(y, x), math.erf(y), math.degrees(y),
            np.cbrt(y), np.sign(y), np.square(y), np.exp2(y), np.arcsin(y / 4.0), np.arccos(y / 4.0),
            np.maximum(x, y), np.minimum(x, y), np.isnan(y), np.isfinite(x / y), np.where(y > 0, x, y),
            y // x, y % x, x ** y, np.floor(y), np.rint(y))


def test_math_and_numpy_functions_match_the_reference():
    x, y = floats(n=700, lo=0.1, hi=3.0, seed=11), floats(n=700, seed=12)
    got = on_tpu(many_functions, x, y)
    assert got[14].dtype == np.int32 and got[37].dtype == np.float32  # math.ceil: an int; np.floor: a float
    assert_match(got, reference(many_functions, x, y))


def hyperbolic_and_inverse(x, y, z):
    """``x`` in (-1, 1), ``y`` any, ``z`` >= 1: the functions Mosaic lacks, lowered by formulas."""
    return (math.sinh(y), math.cosh(y), math.asinh(y), math.acosh(z), math.atanh(x), math.asin(x),
            math.acos(x), math.atan(y), np.cbrt(y), math.erfc(y), np.arcsinh(y * 1e20), np.cosh(y * 20.0),
            np.sinh(y * 1e-3))


def test_functions_lowered_by_formulas_match_the_reference():
    """arcsin..erfc have no Mosaic lowering in jax 0.10: ops.py writes them with exp,
    log1p and arctan2.  Over their domains, with large and tiny arguments, against
    the CPU backend (float64) at a float32 tolerance."""
    x = floats(lo=-0.999, hi=0.999, seed=21)
    y = np.concatenate([floats(n=N - 6, lo=-4.0, hi=4.0, seed=22), [0.0, 1e-7, -1e-7, 0.49, -4.4, 4.4]])
    z = floats(lo=1.0, hi=1e4, seed=23)
    assert_match(on_tpu(hyperbolic_and_inverse, x, y.astype(np.float32), z),
                 reference(hyperbolic_and_inverse, x, y.astype(np.float32), z))


def test_a_range_of_literal_bounds_never_runs_past_its_end():
    def three(x):
        s = 0.0
        for k in range(3):
            s += x * k
        return s

    x = floats(n=10)
    with lw.config.overridden(tpu_unroll=16):
        assert tile_iterations(three, x) == [3]
        assert_match(on_tpu(three, x), reference(three, x))


def counted(start, stop, step):
    """A lane of a range loop of literal bounds (the closure's ints), nested in another."""
    def lane(x):
        s = 0.0
        for i in range(start, stop, step):
            s += x * i
            for j in range(i % 4):  # an inner range whose stop the outer counter sets
                s -= 0.5
        return s
    return lane


def walked(p):
    s = 0.0
    for v in p:
        s = s * 0.5 + v
    for i in range(1, len(p)):
        s += p[i] - p[i - 1]
    return s


@settings(max_examples=25, deadline=None)
@given(unroll=st.integers(1, 18), start=st.integers(-3, 3), trips=st.integers(0, 40),
       step=st.sampled_from([1, 2, -1, 3]), length=st.integers(1, 40))
def test_range_loops_match_the_reference_for_any_unroll_and_trip_count(unroll, start, trips, step, length):
    """A round of ``unroll`` iterations that overshoots a range's end must change nothing:
    the lanes of a tile leave together, but the stores of the overshooting iterations were
    unselected (range(17) at the default unroll 16 summed 32 iterations)."""
    x = floats(n=200)
    p = np.random.default_rng(length).random((200, length)).astype(np.float32)
    lane = counted(start, start + step * trips, step)
    with lw.config.overridden(tpu_unroll=unroll):
        assert_match(on_tpu(lane, x), reference(lane, x))
        assert_match(on_tpu(walked, p), reference(walked, p))


def stops_early(x, n):
    s = 0.0
    for i in range(19):
        if i > n:
            break
        s += x * i
    return s


def skips(x, n):
    s = 0.0
    for i in range(2, 21, 3):
        if i % 2 == n % 2:
            continue
        s += x + i
    return s


def returns_from_inner(x, n):
    t = 0.0
    for j in range(5):  # counted: no returned mask of its own
        for i in range(j, 13):  # its start the outer counter's
            t += x
            if t > n:
                return t, i, j
    return t, -1, -1


def triangle(x, n):
    s = 0.0
    for j in range(n):
        for i in range(j):
            s += x
    return s


def counts_down(x, n):
    s = 0.0
    for i in range(20, -3, -3):
        s = s * 0.5 + x * i
    return s


@pytest.mark.parametrize("unroll", [1, 3, 16])
@pytest.mark.parametrize("lane", [stops_early, skips, returns_from_inner, triangle, counts_down],
                         ids=lambda f: f.__name__)
def test_loops_that_leave_early_match_the_reference_at_any_unroll(lane, unroll):
    """break, continue and return in range loops, nested with bounds set by an outer counter,
    at rounds that divide the trip counts or not (returns_from_inner crashed: its inner loop
    met a result without a returned mask; at unroll 3 it returned wrong values)."""
    x = floats(n=300, lo=0.1, hi=3.0)
    n = np.random.default_rng(1).integers(0, 20, 300).astype(np.int32)
    with lw.config.overridden(tpu_unroll=unroll):
        assert_match(on_tpu(lane, x, n), reference(lane, x, n))


def test_a_local_first_assigned_in_a_loop_is_read_after_it_and_refusals_name_the_line():
    def after_loop(x, n):
        for i in range(n):
            last = x * i
        return last

    def over_a_tuple(x):
        s = 0.0
        for v in (1.0, 2.0):
            s += v * x
        return s

    x = floats(n=8)
    assert_match(on_tpu(after_loop, x, np.full(8, 3, np.int32)), reference(after_loop, x, np.full(8, 3, np.int32)))
    with pytest.raises(lw.LaneUnboundError, match=r"'last'.*lane i0=5 of .*after_loop"):  # no iteration there
        on_tpu(after_loop, x, np.where(np.arange(8) == 5, 0, 3).astype(np.int32))
    line = over_a_tuple.__code__.co_firstlineno + 2
    with pytest.raises(LaneCompileError, match=rf"a for loop over anything but range\(\) or a row is not supported on "
                                               rf"the tpu backend \(.*test_tpu_backend.py:{line}\)"):
        on_tpu(over_a_tuple, floats(n=8))
    with pytest.raises(LaneCompileError, match="gives each lane a 2-D array"):  # rows: tests/test_tpu_rows.py
        on_tpu(lambda rows: rows[0], floats(n=16).reshape(2, 2, 4))


def test_w2_escape_time_lane_as_benchmarked_in_float32():
    """benchmarks/w2_fractal.py's lane itself (a for-range loop with an early return,
    a global bound) on a small float32 grid, against a float32 NumPy reference."""
    from benchmarks import w2_fractal as w2

    re, im = (np.linspace(*bounds, n, dtype=np.float32) for bounds, n in ((w2.RE, 40), (w2.IM, 36)))
    grid = lw.vmap(lw.vmap(w2.escape, in_axes=(None, 0)), in_axes=(0, None), backend="tpu")
    got = np.asarray(grid(re, im))
    cr, ci = np.meshgrid(re, im, indexing="ij")
    zr, zi = np.zeros_like(cr), np.zeros_like(ci)
    want = np.full(cr.shape, w2.MAX_ITER)
    going = np.ones(cr.shape, bool)
    with np.errstate(all="ignore"):  # escaped points overflow: no longer read
        for n in range(w2.MAX_ITER):
            zr, zi = zr * zr - zi * zi + cr, np.float32(2) * zr * zi + ci
            escaped = going & (zr * zr + zi * zi > np.float32(4.0))
            want[escaped] = n
            going &= ~escaped
    assert got.shape == want.shape
    # 500 float32 iterations are chaotic on the set's boundary: XLA on the CPU contracts
    # a*b+c into FMA (benchmarks/w2_fractal.py), which moves a slowly escaping point's
    # count; fast escapers match exactly, and the few others escape late in both.
    differ = got != want
    assert np.mean(differ) <= 0.005
    assert np.minimum(got, want)[differ].min(initial=w2.MAX_ITER) >= 50
    assert differ.sum() < (np.minimum(got, want) >= 50).sum() / 20


def _steps_to(x, limit):
    """A helper with its own loop and early return."""
    k = 0
    while True:
        if x > limit:
            return k
        x = x * 1.5 + 0.1
        k += 1


def calls_a_looping_helper(x, n):
    total = 0
    for i in range(n):
        if i % 2 == 0:
            total += _steps_to(x, 10.0 + i)
        else:
            total -= 1
    return total


def test_a_looping_helper_inlined_in_a_loop_under_a_branch():
    x = floats(lo=0.0, hi=5.0, seed=13)
    n = np.random.default_rng(14).integers(0, 7, N).astype(np.int32)
    assert_match(on_tpu(calls_a_looping_helper, x, n), reference(calls_a_looping_helper, x, n))


def test_an_unmapped_python_int_bounds_the_loop():
    cr, ci = floats(n=500, lo=-2.0, hi=0.5, seed=15), floats(n=500, lo=-1.0, hi=1.0, seed=16)
    escape = BY_NAME["escape"].lane
    got = lw.vmap(escape, in_axes=(0, 0, None), backend="tpu")(cr, ci, 25)
    want = lw.vmap(escape, in_axes=(0, 0, None), backend="python")(cr, ci, 25)
    assert_match(got, want)  # float32 on both sides (Python's 0.0 is weak beside a float32), 25 iterations


# ----------------------------------------------------------------------------- docs/tpu.md, row by row


def _refused(dtype, fix):
    with pytest.raises(LaneTypeError, match=re.escape(f"pass x.astype({fix})")):
        on_tpu(lambda x: x + 1, np.ones(3, dtype))


def _widened():
    def lane(b, i8, i16, u8, u16):
        return b + i8 + i16 + u8 + u16

    args = (np.array([True, False]), np.array([-128, 127], np.int8), np.array([-32768, 5], np.int16),
            np.array([255, 0], np.uint8), np.array([65535, 1], np.uint16))
    got = on_tpu(lane, *args)
    assert got.dtype == np.int32 and np.asarray(got).tolist() == [1 - 128 - 32768 + 255 + 65535, 133]


def _dtype_and_values(lane, args, dtype, values):
    got = on_tpu(lane, *args)
    assert [np.asarray(g).dtype for g in jax.tree.leaves(got)] == [np.dtype(d) for d in dtype]
    assert [np.asarray(g).tolist() for g in jax.tree.leaves(got)] == values


def _unmapped_float():
    got = lw.vmap(lambda x, s: x * s, in_axes=(0, None), backend="tpu")(np.array([2], np.int32), 0.25)
    assert got.dtype == np.float32 and np.asarray(got).tolist() == [0.5]


#: docs/tpu.md's rows: each runs its construct on the tpu backend.
TPU_MD = {
    "T01": lambda: _refused(np.float64, "np.float32"),
    "T02": lambda: _refused(np.int64, "np.int32"),
    "T03": _widened,
    "T04": lambda: _dtype_and_values(lambda x: x * 0.5, (np.array([3.0], np.float32),), ["float32"], [[1.5]]),
    "T05": lambda: _dtype_and_values(lambda n: n + 1, (np.array([41], np.int32),), ["int32"], [[42]]),
    "T06": lambda: _dtype_and_values(lambda a: a * 4, (np.array([2**30], np.int32),), ["int32"], [[0]]),
    "T07": lambda: _dtype_and_values(lambda x: (float(x), int(x), math.floor(x)), (np.array([-2.5], np.float32),),
                                     ["float32", "int32", "int32"], [[-2.5], [-2], [-3]]),
    "T08": lambda: _dtype_and_values(lambda x: True + True + x, (np.array([1], np.int32),), ["int32"], [[3]]),
    "T09": lambda: _unmapped_float(),
    "T11": lambda: _dtype_and_values(lambda n, x: (n + x, n > x), (np.array([2**24 + 1], np.int32),
                                     np.array([2.0**24], np.float32)), ["float32", "bool"], [[2.0**25], [False]]),
    "T10": lambda: _dtype_and_values(lambda x, n: (x * 2**40, n < 2**63), (np.array([0.5], np.float32),
                                     np.array([7], np.int32)), ["float32", "bool"], [[2.0**39], [True]]),
}


def _tpu_md_rows():
    from pathlib import Path

    text = (Path(__file__).resolve().parents[1] / "docs" / "tpu.md").read_text()
    return re.findall(r"^\| `(T\d+)` \|", text, re.M)


def test_tpu_md_rows_and_cases_are_one_set():
    assert sorted(_tpu_md_rows()) == sorted(TPU_MD)


@pytest.mark.parametrize("row", sorted(TPU_MD))
def test_tpu_md_row(row):
    TPU_MD[row]()


# ---------------------------------------------------------------------------- lw.reduce


def wave(x, y):
    r = x * x + y * y
    return math.cos(r) / (1.0 + r), r > 4.0


def grid_reduce(op, backend, **kw):
    return lw.reduce(lw.vmap(lw.vmap(wave, in_axes=(None, 0)), in_axes=(0, None), backend=backend), op, **kw)


@pytest.mark.parametrize("op", ["sum", "mean", "min", "max", "any", "all"])
def test_reduce_folds_every_lane_in_the_kernel(op, capsys):
    """Each tile folds its lanes into one register of partials: the kernel writes
    (8, 128) per tile, never a value per lane; the result equals the reference's
    reduction (the bool leaf: a count for sum, a fraction for mean)."""
    x, y = np.linspace(-3, 3, 37, dtype=np.float32), np.linspace(-2, 2, 300, dtype=np.float32)
    with lw.config.overridden(debug=True):
        got = grid_reduce(op, "tpu")(x, y)
    kernel = capsys.readouterr().out
    # one tile of (40, 384) lanes (the block, no more rows than the lanes need): one register of partials
    assert re.search(r"out_avals=\(ShapedArray\((float32|int32)\[8,128\]\), ShapedArray\(int32\[8,128\]\)\)", kernel)
    assert "[37,300]" not in kernel
    want = grid_reduce(op, "python")(x, y)
    for g, w in zip(got, want, strict=True):
        g, w = np.asarray(g), np.asarray(w)
        assert g.shape == () and g.dtype.kind == w.dtype.kind or (op in ("sum",) and w.dtype.kind == "i")
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)



@pytest.mark.parametrize("op", ["sum", "min", "max"])
def test_reduce_masks_only_the_tiles_that_overhang(op):
    """Blocks of (8, 128) over a 20 x 300 plane: tiles (0..1, 0..1) are whole and fold
    unmasked, the others hang over the plane's edges and mask what lies past them.
    Past the edges a lane computes 1 + x*y of whatever the overhang holds: a
    mask on the wrong tiles moves the sum, the min or the max."""
    x, y = np.linspace(-3, 3, 20, dtype=np.float32), np.linspace(-2, 2, 300, dtype=np.float32)
    lane = lw.vmap(lw.vmap(lambda a, b: 1.0 + a * b - 0.01 * b, in_axes=(None, 0)), in_axes=(0, None), backend="tpu")
    with lw.config.overridden(tpu_block=(8, 128)):
        got = float(lw.reduce(lane, op)(x, y))
    plane = 1.0 + x[:, None].astype(np.float64) * y[None, :] - 0.01 * y[None, :]
    want = {"sum": plane.sum(), "min": plane.min(), "max": plane.max()}[op]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-3)

def test_reduce_of_flat_lanes_and_nan_propagate_like_numpy():
    x = floats()
    x[777] = np.nan
    flat = lambda backend, op: lw.reduce(lw.vmap(lambda v: v * 2.0, backend=backend), op)(x)  # noqa: E731
    for op in ("sum", "min", "max", "mean"):
        assert np.isnan(np.asarray(flat("tpu", op)))
    x[777] = 1.0
    for op in ("sum", "min", "max", "mean"):
        np.testing.assert_allclose(np.asarray(flat("tpu", op)), flat("python", op), rtol=1e-5)
    x[:] = floats(lo=0.4975, hi=0.5025)  # the lanes double: a product of 2348 values that stays finite
    np.testing.assert_allclose(np.asarray(flat("tpu", "prod")), flat("python", "prod"), rtol=1e-4)


def test_reduce_refuses_an_integer_sum_that_would_wrap():
    """The TPU has no int64: a sum of int32 lane results could wrap (tests/test_tpu_reduce.py
    runs axis=, lw.Monoid and segments=)."""
    x = floats(64)
    ints = lw.vmap(lambda v: int(v * 10), backend="tpu")
    with pytest.raises(LaneTypeError, match=r"would wrap at 2\*\*31.*float32"):
        lw.reduce(ints, "sum")(x)
    assert int(lw.reduce(ints, "max")(x)) == max(int(v * 10) for v in x)  # exact: no wrap


def lowered_under_x64(program, *args, fold=None) -> str:
    """``program``'s kernel traced under the chip's 32-bit rules, as the backend traces it,
    then lowered for a TPU (Mosaic's lowering rules, no chip) with x64 on: what a caller's
    ``jax.jit`` does with a lane called on traced arrays in a process that enables x64."""
    call = tpu.bind_call(program, args, {})
    with jax.enable_x64(False):
        where, fn, values = tpu.build(call).prepared(call, fold=fold)
        traced = jax.jit(lambda *v: fn.inline(where, *v)[0]).trace(*values)
    with jax.enable_x64(True):
        return traced.lower(lowering_platforms=("tpu",)).as_text()


def _ints(k):
    return np.random.default_rng(k).integers(1, 1000, N).astype(np.int32)


X64_CASES = {
    "arith": (BY_NAME["arith"].lane, lambda: (floats(), floats(seed=1)), None),
    "arith-int": (BY_NAME["arith"].lane, lambda: (_ints(1), _ints(2)), None),
    "loops": (BY_NAME["loops"].lane, lambda: (floats(), _ints(4) % 12), None),
    "logic": (BY_NAME["logic"].lane, lambda: (floats() < 0, floats(seed=1) < 0), None),
    "escape": (BY_NAME["escape"].lane, lambda: (floats(), floats(seed=1)), None),
    "npfuncs": (BY_NAME["npfuncs"].lane, lambda: (floats(),), None),
    "sum-of-ints": (BY_NAME["arith"].lane, lambda: (_ints(1), _ints(2)), "sum"),
    "max-of-floats": (BY_NAME["escape"].lane, lambda: (floats(), floats(seed=1)), "max"),
}


@pytest.mark.parametrize("name", X64_CASES)
def test_kernels_lowered_in_a_callers_x64_jit_pass_the_mosaic_lowering_rules(name, monkeypatch):
    """Mosaic lowers some primitives through jnp (a bool any, an int32 sum to a scalar),
    whose constants and sums widen to 64 bits when the *lowering* runs with x64 on: the
    kernel must not use those forms (found on the chip: a loop lane under a user's jit).
    Lanes with floor division are left out: Mosaic lowers ``sign`` only on a TPU."""
    monkeypatch.setattr(tpu, "_interpret", lambda: False)
    lane, args, fold = X64_CASES[name]
    assert "tpu_custom_call" in lowered_under_x64(lw.vmap(lane, backend="tpu"), *args(), fold=fold)
