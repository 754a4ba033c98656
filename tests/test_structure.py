"""Structural proof of fusion: one kernel, one allocation per output, and the schedule.

Values alone cannot show that a nest of vmaps is fused (an implementation that
materialises every level would compute the same numbers), so these tests look
at what lanewise generates and allocates:

* a nest of depth 2 or 3 produces ONE generated module with ONE ``prange`` loop,
  and the inner ``vmap`` objects are never built on their own;
* a call allocates exactly one array per output (counted at NumPy's allocation
  functions, with tracemalloc, and inside compiled code via Numba's NRT stats);
* the loop order puts the output's contiguous axis innermost;
* golden files pin the generated source of three small programs.
"""

from __future__ import annotations

import math
import os
import re
import tracemalloc
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import lanewise as lw
from corpus import AllocationCounter, P, assert_trees_match, examples

GOLDEN = Path(__file__).parent / "golden"


def modules(cache_dir) -> set[Path]:
    return set(Path(cache_dir).rglob("lw_*.py"))


@pytest.fixture
def own_cache(tmp_path, restore_config) -> Path:
    """A cache directory only this test writes to: the run's shared one also
    receives the modules that other pytest-xdist workers build meanwhile."""
    restore_config.cache_dir = str(tmp_path)
    return tmp_path


def kernel_functions(source: str) -> list[str]:
    return re.findall(r"^def (\w+)\(", source, flags=re.M)


def lane_block(source: str) -> str:
    """The body of the generated ``lane_block`` function."""
    match = re.search(r"^def lane_block\(.*?(?=^@|\Z)", source, flags=re.M | re.S)
    assert match, source
    return match.group(0)


# ----------------------------------------------------------------------------- one kernel


def test_depth2_nest_is_one_kernel(own_cache):
    def lane2(x, y):  # defined here: no other test compiles it
        r = x * x + y * y
        return math.cos(r) / (1 + r)

    inner = lw.vmap(lane2, in_axes=(None, 0))
    outer = lw.vmap(inner, in_axes=(0, None))
    x, y = np.linspace(-1, 1, 7), np.linspace(-2, 2, 9)
    before = modules(own_cache)
    z = outer(x, y)
    new = modules(own_cache) - before
    assert len(new) == 1, new
    np.testing.assert_allclose(z, np.cos(x[:, None] ** 2 + y ** 2) / (1 + x[:, None] ** 2 + y ** 2), rtol=1e-14)
    assert inner._executables == {}, "the inner vmap was built on its own"
    assert len(outer._executables) == 1
    source = new.pop().read_text()
    assert source == lw.explain(outer, x, y).source
    assert source.count("prange(") == 1
    assert kernel_functions(source).count("kernel") == 1
    # both levels are loops of the single lane_block, which calls the lane once per lane
    block = lane_block(source)
    assert block.count("lane(") == 1 and "i0" in block and "i1" in block
    # lane_block_caught (for compiled callers) makes its one-element position array per block
    uncaught = re.sub(r"^def lane_block_caught\(.*?(?=^@|\Z)", "", source, flags=re.M | re.S)
    assert not re.search(r"\b(np|numpy)\.\w+\(|\b(empty|zeros|ones|full)\w*\(", uncaught), "kernel allocates"


def test_depth3_nest_is_one_kernel(own_cache):
    def lane3(x, y, z):
        if x > y:
            return x * z, y
        return y * z, x

    nest = lw.vmap(lw.vmap(lw.vmap(lane3, in_axes=(None, None, 0)), in_axes=(None, 0, None)),
                   in_axes=(0, None, None), out_axes=(0, 2))
    x, y, z = np.arange(3.0), np.arange(4.0) - 1, np.arange(5.0) + 1
    before = modules(own_cache)
    a, b = nest(x, y, z)
    new = modules(own_cache) - before
    assert len(new) == 1, new
    assert a.shape == (3, 4, 5) and b.shape == (4, 5, 3)
    want = lw.vmap(lw.vmap(lw.vmap(lane3, in_axes=(None, None, 0)), in_axes=(None, 0, None)),
                   in_axes=(0, None, None), out_axes=(0, 2), backend="python")(x, y, z)
    np.testing.assert_array_equal(a, want[0])
    np.testing.assert_array_equal(b, want[1])
    source = new.pop().read_text()
    assert source.count("prange(") == 1
    block = lane_block(source)
    assert block.count("lane(") == 1
    assert all(f"i{lv}" in block for lv in range(3))
    level = nest.fun
    while isinstance(level, lw.Mapped):
        assert level is nest or level._executables == {}
        level = level.fun


# ----------------------------------------------------------------------------- allocations


def nrt_allocations() -> int:
    from numba.core.runtime import rtsys

    try:
        return rtsys.get_allocation_stats().alloc
    except RuntimeError:
        pytest.skip("Numba NRT statistics are disabled (NUMBA_NRT_STATS)")


def grid_lane(x, y):
    r = x * x + y * y
    return math.cos(r) / (1 + r)


def tuple3_lane(x, y, z):
    s = x + y + z
    return s, s * s


GRID = lw.vmap(lw.vmap(grid_lane, in_axes=(None, 0)), in_axes=(0, None))
CUBE = lw.vmap(lw.vmap(lw.vmap(tuple3_lane, in_axes=(None, None, 0)), in_axes=(None, 0, None)),
               in_axes=(0, None, None), out_axes=(0, 1))


def cube_lane(x, y, z):
    return x * y + z


CUBE_SHORT_INNER = lw.vmap(lw.vmap(lw.vmap(cube_lane, in_axes=(None, None, 0)), in_axes=(None, 0, None)),
                           in_axes=(0, None, None))
ALLOCATION_CASES = [
    (GRID, (np.linspace(-2, 2, 1200), np.linspace(-2, 2, 1000))),
    (CUBE, (np.arange(64.0), np.arange(70.0), np.arange(50.0))),
    # a short innermost level: many blocks, but still nothing but the output
    (CUBE_SHORT_INNER, (np.arange(300.0), np.arange(300.0) / 300, np.arange(2.0))),
]
ALLOCATION_IDS = ["depth2", "depth3", "depth3-short-inner"]


@pytest.mark.parametrize("mapped, args", ALLOCATION_CASES, ids=ALLOCATION_IDS)
def test_one_allocation_per_output(mapped, args, monkeypatch):
    mapped(*args)  # compile (and warm any fast path) first
    counter = AllocationCounter(monkeypatch)
    result = mapped(*args)
    outs = result if isinstance(result, tuple) else (result,)
    # NumPy-side: each output allocated exactly once ...
    for o in outs:
        assert sum(a is o or np.shares_memory(a, o) for a in counter.arrays) == 1
    # ... and anything else is small bookkeeping, independent of the number of lanes
    others = [a for a in counter.arrays if not any(a is o or np.shares_memory(a, o) for o in outs)]
    assert sum(a.nbytes for a in others) < 64 * 1024, [(a.shape, a.dtype) for a in others]


@pytest.mark.parametrize("mapped, args", ALLOCATION_CASES, ids=ALLOCATION_IDS)
def test_peak_memory_is_the_output(mapped, args):
    mapped(*args)
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        result = mapped(*args)
        peak = tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()
    outs = result if isinstance(result, tuple) else (result,)
    nbytes = sum(o.nbytes for o in outs)
    assert nbytes <= peak <= nbytes * 1.02 + 256 * 1024, (peak, nbytes)


def test_compiled_code_allocates_nothing_per_lane():
    """Numba's own allocator is not used per lane: the count is the same for 10 and 10^6 lanes."""
    small = (np.linspace(-2, 2, 10), np.linspace(-2, 2, 10))
    big = (np.linspace(-2, 2, 1000), np.linspace(-2, 2, 1000))
    GRID(*small), GRID(*big)  # compile, and run serially and in parallel
    counts = []
    for args in (small, big, small, big):
        before = nrt_allocations()
        GRID(*args)
        counts.append(nrt_allocations() - before)
    assert counts[0] == counts[2] and counts[1] == counts[3]
    # Per call, and per chunk of blocks a thread takes (argument unboxing: about
    # threads x log(blocks) chunks), never per lane (10^6 lanes).
    assert counts[0] <= 16 and counts[1] < 1000, counts


# ----------------------------------------------------------------------------- loop order


def order_of(source: str) -> tuple[str, str]:
    header = re.search(r"^# loop order: (.*) \(innermost last\)$", source, flags=re.M).group(1)
    innermost = re.search(r"for (i\d+) in range\(", lane_block(source)).group(1)
    return header, innermost


def test_out_axes_swaps_the_loop_order():
    x, y = np.arange(3.0), np.arange(4.0)
    default = lw.vmap(lw.vmap(grid_lane, in_axes=(None, 0)), in_axes=(0, None))
    swapped = lw.vmap(lw.vmap(grid_lane, in_axes=(None, 0)), in_axes=(0, None), out_axes=1)
    assert order_of(lw.explain(default, x, y).source) == ("i0 > i1", "i1")
    assert order_of(lw.explain(swapped, x, y).source) == ("i1 > i0", "i0")
    assert swapped(x, y).shape == (4, 3)
    np.testing.assert_array_equal(swapped(x, y), default(x, y).T)


@pytest.mark.parametrize("out_axes", [(0, 1, 0), (2, 0, 0), (-1, 0, 0), (0, -1, -1)])
def test_innermost_loop_is_the_contiguous_output_axis(out_axes):
    """Levels have distinct sizes, so the output's last axis tells which level must be innermost."""
    sizes = (2, 3, 5)
    nest = poly = lambda x, y, z: x + 10 * y + 100 * z  # noqa: E731
    for lv in reversed(range(3)):
        nest = lw.vmap(nest, in_axes=tuple(0 if k == lv else None for k in range(3)), out_axes=out_axes[lv])
    args = [np.arange(float(n)) for n in sizes]
    out = nest(*args)
    last = sizes.index(out.shape[-1])
    header, innermost = order_of(lw.explain(nest, *args).source)
    assert innermost == f"i{last}" and header.endswith(f"i{last}")
    assert out.flags.c_contiguous
    ref = lw.vmap(lw.vmap(lw.vmap(poly, (None, None, 0), out_axes[2]), (None, 0, None), out_axes[1]),
                  (0, None, None), out_axes[0], backend="python")(*args)
    np.testing.assert_array_equal(out, ref)


# ----------------------------------------------------------------------------- schedule


@settings(max_examples=examples(60))
@given(sizes=st.lists(st.integers(1, 3000), min_size=1, max_size=3).map(tuple), data=st.data())
def test_blocking_covers_every_lane_once(sizes, data):
    """The parallel blocks partition the iteration space, with enough blocks for many cores."""
    from lanewise.plan.schedule import MIN_BLOCK, blocking

    order = tuple(data.draw(st.permutations(range(len(sizes)))))
    plan = blocking(sizes, order)
    n_inner = sizes[order[-1]]
    n_outer = math.prod(sizes[lv] for lv in order[:-1])
    assert (plan.n_outer, plan.n_inner) == (n_outer, n_inner)
    covered = np.zeros(n_inner, np.int64)
    for b in range(plan.inner_blocks):  # the generated kernel's arithmetic, for one outer index
        lo = b * plan.block
        hi = min(lo + plan.block, n_inner)
        assert lo < hi
        covered[lo:hi] += 1
    assert (covered == 1).all()
    assert plan.n_blocks >= min(64, n_outer * math.ceil(n_inner / MIN_BLOCK))


def test_explain_reports_parallel_schedule():
    x = np.linspace(-2, 2, 400)
    text = lw.explain(GRID, x, x)
    assert "parallel (threads take runs of blocks, shorter as the work runs out)" in text
    assert "serial" in lw.explain(GRID, x[:10], x[:10])
    assert "generated source:" in text and text.source in text


# ----------------------------------------------------------------------------- golden source


def golden_pair(x, y, s):
    return x * s + y, x - y


def golden_normalise(p):
    t = 0.0
    for i in range(p.a.shape[0]):
        t += p.a[i] * p.a[i]
    return p.a / (math.sqrt(t) * p.b)


GOLDEN_PROGRAMS = {
    "grid": lambda: (lw.vmap(lw.vmap(grid_lane, in_axes=(None, 0)), in_axes=(0, None)),
                     (np.linspace(-1, 1, 3), np.linspace(-1, 1, 4))),
    "swapped_pair": lambda: (lw.vmap(lw.vmap(golden_pair, in_axes=(0, None, None)), in_axes=(None, 0, None),
                                     out_axes=1),
                             (np.arange(3.0), np.arange(4.0), 2.0)),
    "fortran_rows": lambda: (lw.vmap(golden_normalise, in_axes=(P(1, None),)),
                             (P(np.asfortranarray(np.ones((4, 3))), 2.0),)),
}


def normalise(source: str) -> str:
    source = re.sub(r"lanewise \d+\.\d+\.\d+(?:[.+-]?[a-z]+\w*)?", "lanewise <version>", source)
    return re.sub(r"(?<= at )\S+:\d+", "<file>:<line>", source)


@pytest.mark.parametrize("name", sorted(GOLDEN_PROGRAMS))
def test_golden_source(name):
    mapped, args = GOLDEN_PROGRAMS[name]()
    got = normalise(lw.explain(mapped, *args).source)
    path = GOLDEN / f"{name}.py"
    if os.environ.get("LANEWISE_UPDATE_GOLDEN"):
        path.write_text(got)
    assert path.exists(), f"missing {path}; run with LANEWISE_UPDATE_GOLDEN=1 and review it"
    assert got == path.read_text(), f"generated source of {name} changed (LANEWISE_UPDATE_GOLDEN=1 to accept)"
    # the golden program still computes the right thing
    want = lw.vmap(mapped.fun, mapped.in_axes, mapped.out_axes, backend="python")(*args)
    assert_trees_match(mapped(*args), want, what=name)


def test_golden_normalisation_keeps_user_locations_checkable():
    mapped, args = GOLDEN_PROGRAMS["grid"]()
    source = lw.explain(mapped, *args).source
    line = grid_lane.__code__.co_firstlineno
    assert f"{__file__}:{line}" in source


# --------------------------------------------------------------- vectorisation, read from the machine code


def cumulative_normal(d):  # a helper LLVM declined to inline once lanemath's exp was inlined into it
    k = 1.0 / (1.0 + 0.2316419 * abs(d))
    poly = k * (0.31938153 + k * (-0.356563782 + k * (1.781477937 + k * (-1.821255978 + k * 1.330274429))))
    ret = 0.3989422804014327 * math.exp(-0.5 * d * d) * poly
    return 1.0 - ret if d > 0 else ret


def calls_a_helper(x):
    return cumulative_normal(x) * 2.0


def running_product(x):  # a loop-carried dependency per lane, but lanes are independent
    return x * 3.0 + 1.0


def _has_wide_vectors() -> bool:
    import llvmlite.binding as llvm

    return "+avx2" in llvm.get_host_cpu_features().flatten() or "+neon" in llvm.get_host_cpu_features().flatten()


@pytest.mark.skipif(not _has_wide_vectors(), reason="the check counts AVX2/AVX-512 or NEON instructions")
@pytest.mark.parametrize("lane", [calls_a_helper, running_product], ids=lambda f: f.__name__)
def test_explain_reads_vectorisation_from_the_machine_code(lane):
    """Before: 'LLVM vectorises the scalar nest' was printed by assumption; the
    helper-calling lane ran scalar (0 packed instructions) until small helpers
    were inlined into the lane."""
    x = np.linspace(-2.0, 2.0, 10_000)
    line = next(s for s in lw.explain(lw.vmap(lane), x).splitlines() if s.startswith("vectorised:"))
    assert line.startswith("vectorised: yes"), line
    np.testing.assert_allclose(lw.vmap(lane)(x), lw.vmap(lane, backend="python")(x), rtol=1e-14)


def test_packed_instructions_are_counted_not_scalar_ones():
    from lanewise.backends.cpu.vectorised import packed_arithmetic

    scalar = "vaddsd %xmm1, %xmm0, %xmm0\nvandpd .LCPI0_0(%rip), %xmm0, %xmm0\nvxorps %xmm0, %xmm0, %xmm0"
    vector = "vfmadd213pd %zmm2, %zmm1, %zmm0\nvaddpd %ymm1, %ymm0, %ymm0\nfmla v0.2d, v1.2d, v2.2d"
    assert packed_arithmetic(scalar) == 0 and packed_arithmetic(vector) == 3


def test_a_small_call_of_a_looping_lane_compiles_its_lane_loop_once(own_cache):
    """A lane that loops is timed on its first lanes before the serial run does the
    rest; both must use one specialisation of the kernel (a literal ``0`` from the
    serial kernel once typed as ``Literal[int](0)`` and compiled the whole block a
    second time).  The kernel inlines the lane loop (``lane_block_inlined``): the
    compiled ``lane_block`` is not built at all (linked, LLVM optimised its code
    twice)."""
    def lane_loops_once(x, n):  # defined here: compiled by this test only
        s = 0.0
        for k in range(n):
            s += x / (k + 1)
        return s

    f = lw.vmap(lane_loops_once, in_axes=(0, None))
    x = np.linspace(0.0, 1.0, 5)
    np.testing.assert_array_equal(f(x, 3), lw.vmap(lane_loops_once, in_axes=(0, None), backend="python")(x, 3))
    (exe,) = f._executables.values()
    assert exe.may_be_heavy and exe.module.kernel_blocks.signatures, "the call did not run the kernel"
    assert exe.module.lane_block.signatures == [], exe.module.lane_block.signatures
    assert len(exe.module.kernel_blocks.signatures) == 1, exe.module.kernel_blocks.signatures
