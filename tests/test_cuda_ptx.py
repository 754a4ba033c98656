"""Every lane program of the corpus compiled to real PTX for sm_90 (no GPU needed).

numba-cuda with the NVVM wheel compiles kernels on a machine without a GPU, so
a kernel that would not compile on a real card fails here.  Runs in the normal
test process (the simulator suite is tests/cuda, its own process).
"""

from __future__ import annotations

import math
import os
import re

import numpy as np
import pytest

if os.environ.get("NUMBA_ENABLE_CUDASIM") == "1":
    pytest.skip("PTX compile needs the real numba-cuda, not the simulator", allow_module_level=True)
pytest.importorskip("numba.cuda")

import lanewise as lw  # noqa: E402
from corpus import BY_NAME, CORPUS, ema_step, lane_values  # noqa: E402
from lanewise.backends import cuda as lw_cuda  # noqa: E402

SCALAR = [e for e in CORPUS if all(r == 0 for r in e.out_ranks)]
ARCH = ".target sm_90"


def canonical_args(entry, n=5, row=3):
    rng = np.random.default_rng(0)
    return [5 if kind == "k" else
            lane_values(rng, (n, row) if kind == "r" else (n,), entry.dtypes[0], entry.domain)
            for kind in entry.kinds]


def in_axes_of(entry):
    return tuple(None if k == "k" else 0 for k in entry.kinds)


def kernels(fn, *args, llvm=False, **kw):
    """{kernel: (ptx, NVVM IR or None)}, each checked to be an sm_90 kernel."""
    out = lw_cuda.compile_kernels(fn, *args, cc=(9, 0), llvm=llvm, **kw)
    out = {name: code if llvm else (code, None) for name, code in out.items()}
    for name, (ptx, _) in out.items():
        assert ARCH in ptx, f"{name}: no {ARCH}"
        assert re.search(r"\.visible \.entry", ptx), f"{name}: not a kernel"
    return out


def libdevice_calls(ir: str) -> set[str]:
    return set(re.findall(r"call [^@]*@\"?(__nv_\w+)", ir))


@pytest.mark.parametrize("entry", SCALAR, ids=lambda e: e.name)
def test_corpus_compiles_for_sm90(entry):
    kernels(lw.vmap(entry.lane, in_axes=in_axes_of(entry), backend="cuda"), *canonical_args(entry))


@pytest.mark.parametrize("name, calls", [
    ("sincos", {"__nv_sin", "__nv_cos"}),
    ("npfuncs", {"__nv_tanh", "__nv_atan2", "__nv_hypot", "__nv_exp"}),
    ("cplx", {"__nv_exp", "__nv_sqrt"}),
    ("rownorm", {"__nv_sqrt"}),
])
def test_math_maps_to_libdevice(name, calls):
    entry = BY_NAME[name]
    (ptx, ir), = kernels(lw.vmap(entry.lane, in_axes=in_axes_of(entry), backend="cuda"),
                         *canonical_args(entry), llvm=True).values()
    assert calls <= libdevice_calls(ir), libdevice_calls(ir)


def wave(x, y):
    r = x * x + y * y
    return math.cos(r) / (1 + r)


def test_nested_vmap_one_kernel():
    x, y = np.linspace(-1, 1, 4), np.linspace(-2, 2, 5)
    grid = lw.vmap(lw.vmap(wave, in_axes=(None, 0)), in_axes=(0, None), backend="cuda")
    out = kernels(grid, x, y, llvm=True)
    assert list(out) == ["kernel"]
    assert "__nv_cos" in libdevice_calls(out["kernel"][1])
    # a lane that cannot fail needs no error slot: the atomic is compiled away
    assert "atom." not in out["kernel"][0]


def test_three_levels_fortran_input_and_float32():
    a = np.asfortranarray(np.ones((3, 4), np.float32))
    b = np.ones(5, np.float32)
    f = lw.vmap(lw.vmap(lw.vmap(lambda u, v: u * v - 1, in_axes=(None, 0)), in_axes=(0, None)),
                in_axes=(0, None), backend="cuda")
    kernels(f, a, b)


def raises(x):
    if x > 1.0:
        raise ValueError("too big")
    return x


def test_error_slot_is_an_integer_atomic_min():
    ptx = kernels(lw.vmap(raises, backend="cuda"), np.ones(4))["kernel"][0]
    assert "atom.global.min.s64" in ptx


def test_reads_of_locals_that_may_be_unbound_are_checked_in_the_kernel():
    """A lane that may read an unbound local (tests/unbound_lanes.py) used to compile for
    the GPU as written: the read took whatever the register held.  Its kernel now keeps
    the flag and fails the lane (the error slot), which the host replays on the CPU."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).parent))
    import unbound_lanes as lanes

    x, n = np.linspace(0.0, 2.0, 5), np.arange(5)
    for lane in lanes.RAISING + lanes.CLOSURES[2:]:  # the comprehensions: Numba-CUDA types no list
        (ptx, ir), = kernels(lw.vmap(lane, backend="cuda"), x, n, llvm=True).values()
        assert re.search(r"_lw_bound_\w+", ir) and "atom.global.min.s64" in ptx, lane.__name__
    for lane in lanes.UNCHECKED:
        (ptx, ir), = kernels(lw.vmap(lane, backend="cuda"), x, n, llvm=True).values()
        assert "_lw_bound_" not in ir, lane.__name__


def row_at(row, k):
    return row[k] + row[k - 1]


def fills(out_row, k):
    out_row[k] = 1.0
    return out_row[0]


def cell_at(m, k):
    return m[k, k - 1]


def test_subscripts_at_computed_indices_are_checked_in_the_kernel():
    """numba-cuda turns bounds checks off: a row read or write at a computed index out
    of range used to touch another lane's memory.  Now it fails the lane (error slot)."""
    rows, k = np.ones((5, 4)), np.arange(5)
    for lane, arg in ((row_at, rows), (fills, rows), (cell_at, np.ones((5, 3, 4)))):
        (ptx, _), = kernels(lw.vmap(lane, backend="cuda"), arg, k).values()
        assert "atom.global.min.s64" in ptx, lane.__name__


def backtest(prices):
    p0 = prices[0]
    final, _ = lw.scan(ema_step, (p0, p0, 0.0, 0.0, p0), prices)
    return final[3]


@pytest.mark.parametrize("in_axes", [0, 1], ids=["series-major", "time-major"])
def test_scan_in_lane_is_one_kernel(in_axes):
    prices = np.ones((4, 6))
    out = kernels(lw.vmap(backtest, in_axes=in_axes, backend="cuda"), prices)
    assert list(out) == ["kernel"]


def running(c, x):
    return c + x, c


def test_scan_stacking_ys_in_a_gpu_lane_is_refused():
    with pytest.raises(lw.LaneCompileError, match="must return \\(carry, None\\)"):
        lw_cuda.compile_kernels(lw.vmap(lambda p: lw.scan(running, 0.0, p)[0], backend="cuda"), np.ones((3, 4)))


def bigger_abs(a, b):
    return a if abs(a) >= abs(b) else b


MONOID = lw.Monoid(bigger_abs, 0.0)


@pytest.mark.parametrize("op, axis", [(op, None) for op in ["sum", "mean", "max", "argmin", "any", MONOID]]
                         + [("sum", 1), ("argmax", 0), (MONOID, 1)],
                         ids=lambda v: "bigger_abs" if v is MONOID else str(v))  # the same ids in every process (xdist)
def test_reduce_kernels_compile_without_float_atomics(op, axis):
    x, y = np.linspace(-1, 1, 4), np.linspace(-2, 2, 5)
    grid = lw.vmap(lw.vmap(wave, in_axes=(None, 0)), in_axes=(0, None), backend="cuda")
    out = kernels(lw.reduce(grid, op, axis=axis), x, y)
    assert set(out) == {"rkernel", "rfinish"}
    for ptx, _ in out.values():
        assert not re.search(r"atom\.\S*\.f(32|64)", ptx)
        assert "bar.sync" in ptx  # the shared-memory tree


def allocates(x):
    return np.zeros(3)[0] + x


def test_lane_numba_cuda_cannot_compile_is_a_lane_compile_error():
    with pytest.raises(lw.LaneCompileError, match=r"allocates .*test_cuda_ptx\.py:\d+.*cuda backend"):
        lw_cuda.compile_kernels(lw.vmap(allocates, backend="cuda"), np.ones(3))


def test_no_gpu_is_a_backend_error():
    from numba import cuda
    if cuda.is_available():
        pytest.skip("a GPU is present")
    with pytest.raises(lw.BackendError, match="needs an NVIDIA GPU"):
        lw.vmap(wave, backend="cuda")(np.ones(3), np.ones(3))


try:
    import lanewise.random as lwr
except ImportError:  # developed alongside; skip its tests if absent
    lwr = None


def random_walk(k, n):
    x = 0.0
    for t in range(n):
        x += lwr.normal(lwr.fold_in(k, t))
    return x, lwr.bits(k)


def test_random_lane_compiles():
    if lwr is None:
        pytest.skip("lanewise.random is not available")
    kernels(lw.vmap(random_walk, in_axes=(0, None), backend="cuda"), lwr.split(lwr.key(1), 4), 3)


def draws(k, lo):
    # sums of products: what NVVM would contract into FMAs (changing last bits)
    kk = lwr.fold_in(k, 7)
    return (lwr.normal(kk) * 2.0 + lwr.exponential(kk) + lwr.uniform(kk, lo, 3.0),
            lwr.uniform32(kk, np.float32(lo), np.float32(3.0)) + np.float32(1.0))


def fused(x, y):
    return x * y + 1.0


def test_random_draws_have_no_fma_so_gpu_bits_match_cpu():
    """Every product in the samplers is libdevice's dmul_rn/fmul_rn (never contracted);
    the user's own `normal * 2.0 + ...` still may be, as in any CUDA code."""
    if lwr is None:
        pytest.skip("lanewise.random is not available")
    ptx = kernels(lw.vmap(draws, in_axes=(0, None), backend="cuda"), lwr.split(lwr.key(1), 4), 1.0)["kernel"][0]
    assert ptx.count("mul.rn.f64") > 30 and ptx.count("mul.rn.f32") >= 1
    user_fmas = 1  # normal(kk) * 2.0 + exponential(kk): the lane's own arithmetic
    assert ptx.count("fma.rn.f64") <= user_fmas and "fma.rn.f32" not in ptx
    control = kernels(lw.vmap(fused, backend="cuda"), np.arange(4.0), np.arange(4.0))["kernel"][0]
    assert "fma.rn.f64" in control  # NVVM contracts by default: the check above can fail


def binned(x, k):
    v = np.zeros(4)
    for j in range(k):
        v[j % 4] += x * j
    return v


def test_per_lane_array_filled_in_place_compiles():
    """The rewritten lane fills its output slice: no allocation in the kernel."""
    ptx, ir = kernels(lw.vmap(binned, in_axes=(0, None), out_axes=1, backend="cuda"),
                      np.linspace(0, 1, 7), 6, llvm=True)["kernel"]
    assert "NRT_MemInfo_alloc" not in ir and "malloc" not in ptx


import corpus as corpus_module  # noqa: E402


def attribute_helpers(x):
    return corpus_module._clip(corpus_module._sq(x), 0.0, 4.0)


def test_helpers_called_by_module_attribute_compile_for_the_gpu():
    """``module.helper(x)`` in a lane: the helper becomes a device function too."""
    (ptx, _), = kernels(lw.vmap(attribute_helpers, backend="cuda"), np.ones(3)).values()
    assert "ld.global.f64" in ptx and "st.global.f64" in ptx
