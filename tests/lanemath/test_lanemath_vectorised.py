"""Structural proof of vectorisation: the compiled loops calling lanemath contain packed
(SIMD) instructions on their hot path, no libm calls, and the rare slow path of the
trigonometric functions is a *masked vector call* rather than a scalar call."""

from __future__ import annotations

import re

import llvmlite.binding as llvm
import numba
import numpy as np
import pytest

from lanewise import lanemath
from lanewise.lanemath.accuracy import _loop, _specs, evaluate

FEATURES = llvm.get_host_cpu_features()
if not (FEATURES.get("avx2") or FEATURES.get("avx512f")):  # pragma: no cover
    pytest.skip("vectorisation checks assume an AVX2 or AVX-512 host", allow_module_level=True)

#: packed double arithmetic on ymm/zmm registers (moves and broadcasts excluded)
PACKED = re.compile(r"\bv(?!mov|broadcast)[a-z0-9]*pd\b[^\n]*%[yz]mm")
LIBM = re.compile(r"@(sin|cos|tan|exp|exp2|expm1|log|log2|log10|log1p|pow|cbrt|hypot|sinh|cosh|"
                  r"tanh|asinh|acosh|atanh|atan|atan2|asin|acos|erf|erfc)f?\(")
VECTOR_IR = re.compile(r"<(4|8|16) x double>")


def _compiled_loop(name, dtype=np.float64):
    nargs = _specs()[name].nargs
    evaluate(name, *[np.ones(4, dtype)] * nargs)          # compile (shared with other tests)
    loop = _loop(lanemath.FUNCTIONS[name], nargs)
    want = numba.from_dtype(np.dtype(dtype))
    sig = [s for s in loop.signatures if s[0].dtype == want][0]
    return loop, sig


@pytest.mark.parametrize("name", list(_specs()))
def test_loop_is_vectorised(name):
    loop, sig = _compiled_loop(name)
    asm = loop.inspect_asm(sig)
    ir = loop.inspect_llvm(sig)
    packed = [line for line in asm.splitlines() if PACKED.search(line)]
    assert len(packed) >= (1 if name == "sqrt" else 4), f"{name}: no packed double arithmetic"
    assert VECTOR_IR.search(ir), f"{name}: no vector types in the optimised IR"
    assert not LIBM.search(ir), f"{name}: the loop still calls libm"


@pytest.mark.parametrize("name", ["sin", "cos", "tan"])
def test_trig_slow_path_is_an_inlined_masked_vector_test(name):
    """The vectoriser widens the huge-argument call to a masked variant, which is then
    inlined: the vector loop tests the lane mask itself and calls the scalar slow
    function only for lanes that need it.  (Left as a call, every vector iteration
    paid a call and its register spills: the W5 sum ran 2x slower.)"""
    loop, sig = _compiled_loop(name)
    ir = loop.inspect_llvm(sig)
    assert "vector-function-abi-variant" in ir, f"{name}: the slow call is not marked for the vectoriser"
    slow = f"@lanewise_lanemath_{name}_slow_f64"
    defined = [f for f in re.split(r"\n(?=define )", ir) if f.startswith("define")]
    callers = [f for f in defined if slow not in f.split("(")[0] and re.search(r"<(4|8|16) x double>", f)]
    assert callers, f"{name}: no vectorised loop"
    loop_ir = "\n".join(callers)
    assert not re.search(re.escape(slow) + r"_v\d+m\(", loop_ir), f"{name}: the vector loop still calls the variant"
    assert re.search(r"bitcast <(4|8|16) x i1> %[\w.]+ to i(4|8|16)", loop_ir), f"{name}: no lane-mask test"
    assert slow + "(" in loop_ir, f"{name}: the slow path is gone from the loop"


@pytest.mark.parametrize("name", ["cos", "exp", "log", "atan2"])
def test_float32_loop_is_vectorised(name):
    loop, sig = _compiled_loop(name, np.float32)
    asm = loop.inspect_asm(sig)
    assert sum(1 for line in asm.splitlines() if PACKED.search(line)) >= 4


def test_w1_nest_is_vectorised():
    """The W1 workload's nest, cos(x*x + y*y) / (1 + x*x + y*y), with lanemath.cos."""

    @numba.njit(error_model="numpy")
    def w1(x, y, out):
        for i in range(numba.uint64(x.shape[0])):
            xi = x[i]
            for j in range(numba.uint64(y.shape[0])):
                r = xi * xi + y[j] * y[j]
                out[i, j] = lanemath.cos(r) / (1.0 + r)

    x = np.linspace(-2.0, 2.0, 64)
    out = np.empty((64, 64))
    w1(x, x, out)
    r = x[:, None] ** 2 + x[None, :] ** 2
    np.testing.assert_allclose(out, np.cos(r) / (1 + r), rtol=0, atol=2e-16)
    asm = w1.inspect_asm(w1.signatures[0])
    assert re.search(r"vfmadd\d+pd.*%zmm|vfmadd\d+pd.*%ymm", asm)
    assert re.search(r"vdivpd.*%[yz]mm", asm)
    assert not LIBM.search(w1.inspect_llvm(w1.signatures[0]))
