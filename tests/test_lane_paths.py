"""How the CPU kernel compiles a lane: inlined or called, vector math or libm, and
which lanes the disk cache can key (tests of choices, each with the numbers it keeps)."""

import math
import sys
import textwrap

import numba
import numpy as np
import pytest

import lanewise as lw
from lanewise.backends.cpu import map as cpu
from lanewise.lane.allocation import allocates
from lanewise.lane.fingerprint import fingerprint
from lanewise.lane.lanefn import jit_lane
from lanewise.spmd import divergence


def kde(p, points, h):  # allocates three arrays per lane
    d = (p - points) ** 2 / h
    return np.exp(-(d - d.min())).sum()


def smooth(x):  # straight-line arithmetic: the nest vectorises
    return math.exp(-x * x) / (1.0 + x * x)


def newton(x):  # divergent: a while loop
    r = 1.0
    while abs(r * r - x) > 1e-12 * x:
        r = 0.5 * (r + x / r)
    return math.log(r)


def stencil(img, i, j):  # subscripts: bounds-checked reads
    return math.atan(img[i, j + 1] - img[i, j])


@numba.njit(fastmath=True)
def pasted_numba_kernel(x):
    return math.sqrt(x * x + 1.0) * 0.5


@pytest.mark.parametrize("lane", [pasted_numba_kernel, pasted_numba_kernel.py_func], ids=["dispatcher", "py_func"])
def test_a_pasted_numba_decorator_is_not_read_as_the_lanes_code(lane):
    """A loop-free lane still carrying its @numba.njit(...) took the SPMD path (1.7-4.3x
    slower): the divergence analysis followed the decorator's call into Numba's own _jit,
    which has a for loop.  lw.explain said so."""
    assert divergence(lane) is None
    x = np.linspace(0.0, 2.0, 64)
    mapped = lw.vmap(lane)
    path = next(line for line in str(lw.explain(mapped, x)).splitlines() if line.startswith("lane path"))
    assert path.startswith("lane path: scalar") and "_jit" not in path, path
    np.testing.assert_allclose(mapped(x), np.sqrt(x * x + 1.0) * 0.5, rtol=1e-15)


def test_allocating_lanes_are_detected_from_typed_code():
    lane = jit_lane(kde)
    lane(0.5, np.ones(4), 0.1)
    assert allocates(lane)
    plain = jit_lane(smooth)
    plain(0.5)
    assert not allocates(plain)


def test_kernel_lane_inlines_only_lanes_that_can_vectorise():
    assert cpu.kernel_lane(smooth, allocating=False).targetoptions.get("inline") == "always"
    for lane, allocating in ((kde, True), (newton, False), (stencil, False)):
        assert cpu.kernel_lane(lane, allocating).targetoptions.get("inline") != "always", lane


def test_libm_where_the_nest_is_scalar_vector_math_where_it_vectorises():
    for lane, scalar in ((smooth, False), (newton, True), (stencil, True)):
        assert cpu.scalar_nest(lane) is scalar
        with cpu.scalar_lane_math(lane):
            assert lw.config.vector_math is (not scalar)


@pytest.mark.parametrize("lane, args", [(kde, (np.linspace(0, 1, 300), np.linspace(0, 1, 50), 0.1)),
                                        (newton, (np.linspace(0.5, 9, 300),))])
def test_results_agree_with_the_python_reference(lane, args):
    in_axes = (0, None, None) if lane is kde else 0
    got = lw.vmap(lane, in_axes=in_axes)(*args)
    want = lw.vmap(lane, in_axes=in_axes, backend="python")(*args)
    np.testing.assert_allclose(got, want, rtol=1e-14)


def test_stencil_lane_is_still_bounds_checked():
    img = np.random.default_rng(0).random((4, 5))
    rows, cols = np.arange(4), np.arange(5)  # j + 1 == 5 is out of bounds at the last column
    with pytest.raises(lw.LaneIndexError, match="out of bounds"):
        lw.vmap(lw.vmap(stencil, in_axes=(None, None, 0)), in_axes=(None, 0, None))(img, rows, cols)


def test_numpy_functions_do_not_stop_the_disk_cache():
    def lane(x, t):
        return np.median(t) + np.searchsorted(t, x) + np.mean(t)
    assert fingerprint(lane) is not None
    import functools
    bound = functools.partial(lane, t=np.ones(3))

    def uses_partial(x):
        return bound(x)
    assert fingerprint(uses_partial) is None  # a partial carries data: memory only


def test_divergence_follows_module_attribute_calls(tmp_path, monkeypatch):
    (tmp_path / "lw_helpers_mod.py").write_text(textwrap.dedent('''
        def halve(x):
            while x > 1.0:
                x = x / 2.0
            return x
    '''))
    monkeypatch.syspath_prepend(str(tmp_path))
    import lw_helpers_mod

    def lane(x):
        return lw_helpers_mod.halve(x)
    try:
        assert "while loop" in divergence(lane)
    finally:
        sys.modules.pop("lw_helpers_mod", None)


def test_explain_says_how_the_lane_is_called_and_which_math_it_uses():
    def line(lane, *args, in_axes=0):
        text = str(lw.explain(lw.vmap(lane, in_axes=in_axes), *args))
        return next(s for s in text.splitlines() if s.startswith("lane call:"))
    assert line(smooth, np.ones(8)) == ("lane call: inlined into the lane loop; math functions: lanewise's "
                                        "vector math (vectorisable, <= 1 ulp)")
    assert "makes arrays" in line(kde, np.ones(8), np.ones(3), 0.1, in_axes=(0, None, None))
    with lw.config.overridden(spmd=False):
        assert "libm on the scalar path" in line(newton, np.full(8, 2.0))
    with lw.config.overridden(spmd=True):
        assert "vector math" in line(newton, np.full(8, 2.0))


def test_serial_and_parallel_runs_share_one_compiled_kernel():
    """A Numba prange kernel cost 0.5-2 s to compile per signature, on top of the
    serial one: now both runs call kernel_blocks (threads: lanewise.runtime.pool)."""
    f = lw.vmap(lambda x: x * 2.0 + 1.0)
    small, big = np.arange(10.0), np.arange(float(lw.config.serial_below) + 10)
    np.testing.assert_array_equal(f(small), small * 2.0 + 1.0)
    np.testing.assert_array_equal(f(big), big * 2.0 + 1.0)
    (exe,) = f._executables.values()
    assert len(exe.module.kernel_blocks.signatures) == 1
    assert not exe.module.kernel.signatures and not exe.module.kernel_serial.signatures


def window_range(w, k):  # a loop over the lane's row
    lo = hi = w[0]
    for j in range(w.shape[0]):
        lo = min(lo, w[j])
        hi = max(hi, w[j])
    return (hi - lo) * k


@pytest.mark.parametrize("step", [1, 2])
def test_unit_stride_rows_of_an_A_layout_array_reach_the_lane_as_contiguous(step):
    """Rows of sliding_window_view (strides (8, 8): layout 'A') are contiguous: the
    kernel types them so (lane.contiguous); strided rows keep the 'A' type."""
    series = np.random.default_rng(4).normal(size=5000)
    windows = np.lib.stride_tricks.sliding_window_view(series, 64)[:, ::step]
    mapped = lw.vmap(window_range, in_axes=(0, None))
    want = (windows.max(axis=1) - windows.min(axis=1)) * 2.0
    np.testing.assert_array_equal(mapped(windows, 2.0), want)
    np.testing.assert_array_equal(reduced := lw.reduce(mapped, "max")(windows, 2.0), want.max())
    assert reduced == want.max()
    source = lw.explain(mapped, windows, 2.0).source
    assert ("as_contiguous(a0[i0])" in source) == (step == 1), source
    column_views = np.asfortranarray(windows.T.copy())[::1, :]  # F layout: the lane axis is contiguous
    np.testing.assert_array_equal(lw.vmap(window_range, in_axes=(1, None))(column_views, 2.0), want)


def halvings(x):  # a while loop: the SPMD path
    k = 0
    while x > 1.0:
        x = x * 0.5
        k += 1
    return k


def test_spmd_lanes_run_in_blocks_of_whole_groups():
    """Heavy lanes were cut into blocks of 8 that ran in SPMD groups of 32, a
    quarter full (2.2x slower than whole groups)."""
    from lanewise.plan.schedule import reblocked

    f = lw.vmap(halvings)
    x = np.linspace(0.0, 1e6, 1000)
    np.testing.assert_array_equal(f(x), lw.vmap(halvings, backend="python")(x))
    (exe,) = f._executables.values()
    if not exe.lane_path.startswith("SPMD"):
        pytest.skip(f"the lane took the scalar path here: {exe.lane_path}")
    assert exe.group > 1 and f"{exe.group} lanes per vector step" in exe.lane_path
    for work in (1, 100, 40_000):
        plan = reblocked(1, 2000, work, exe.group)
        assert plan.block % exe.group == 0 or plan.block == 2000


def sq_minus(x, a):
    return x * x - a


def star_named(a):  # a small helper called with *args
    args = (a,)
    return sq_minus(3.0, *args)


def solve_with(func, x, args=()):  # QuantEcon's / SciPy's convention: func(x, *args)
    return func(x, *args)


def star_passed(a):
    return solve_with(sq_minus, 3.0, (a,))


@pytest.mark.parametrize("lane", [star_named, star_passed], ids=lambda f: f.__name__)
def test_helpers_called_with_star_args_compile(lane):
    """Small helpers are inlined by Numba, whose inliner cannot inline a call with
    ``*args``: such lanes failed with 'Calling a closure with *args is unsupported'.
    What a function calls with ``*args`` is compiled, not inlined, now."""
    a = np.linspace(0.0, 1.0, 5)
    np.testing.assert_array_equal(lw.vmap(lane)(a), lw.vmap(lane, backend="python")(a))


def v(t):  # a global function with a while loop, shadowed by the lanes below
    n = 0
    while t > 1.0:
        t = t / 2.0
        n += 1
    return n


def shadows_a_global(c, grid, vals):
    v = lambda t: np.interp(t, grid, vals)  # noqa: E731 - the local name under test
    return v(c)


def shadows_a_global_function(x):
    v = lambda t: t * 3.0  # noqa: E731
    return v(x)


def test_a_local_name_is_not_analysed_as_the_global_of_that_name(monkeypatch):
    """A lane's local lambda ``v`` was resolved through the module's globals: a global
    array ``v`` crashed the SPMD analysis (unhashable ndarray), and a global function
    ``v`` with a while loop made ``lw.explain`` report that loop for the lane."""
    grid = np.linspace(0.0, 1.0, 50)
    monkeypatch.setitem(globals(), "v", grid ** 2)
    args = (grid, grid, grid ** 2)
    in_axes = (0, None, None)
    np.testing.assert_array_equal(lw.vmap(shadows_a_global, in_axes=in_axes)(*args),
                                  lw.vmap(shadows_a_global, in_axes=in_axes, backend="python")(*args))
    monkeypatch.undo()
    assert divergence(shadows_a_global_function) is None
    x = np.linspace(0.0, 10.0, 100)
    np.testing.assert_array_equal(lw.vmap(shadows_a_global_function)(x), 3.0 * x)
