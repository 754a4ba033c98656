"""lw.random's fast paths: loops of draws vectorise across iterations (lanes).

Structural checks of the optimised LLVM IR, not timings.  A loop drawing from a key
*array* (``key``'s ``(2,)`` array, passed in whole, as ``lw.reduce(lw.vmap(f,
in_axes=(None, 0)))`` hands it to every lane) used to stay scalar: the argument
checks of the public draws (``lanewise.random._lanes._checker``) were left as calls when
Numba pruned the key's reference counts, so an ``NRT_incref``/``NRT_decref`` pair
per iteration survived until after LLVM's loop vectoriser (measured: the Monte
Carlo reduction ``normal(fold_in(key, i))``, 61 -> 16 ns a path on one thread).
Each loop here must be vectorised (Philox's products as vector multiplies) and give
the host's bits.
"""

from __future__ import annotations

import math
import re

import llvmlite.binding as llvm
import numba
import numpy as np
import pytest

import lanewise as lw
import lanewise.random as R

FEATURES = llvm.get_host_cpu_features()
if not (FEATURES.get("avx2") or FEATURES.get("avx512f")):  # pragma: no cover
    pytest.skip("vectorisation checks assume an AVX2 or AVX-512 host", allow_module_level=True)

#: Philox's 32x32 -> 64-bit products, widened: ``mul nuw <4 x i64>`` (or 2, 8, 16 lanes)
VECTOR_MUL = re.compile(r"= mul nuw <(2|4|8|16) x i64>")
N = 1000


@numba.njit
def _fold_in(key, out):
    for i in range(out.size):
        a, b = R.fold_in(key, i)
        out[i] = (np.uint64(a) << np.uint64(32)) | np.uint64(b)


@numba.njit
def _uniform(key, out):
    for i in range(out.size):
        out[i] = R.uniform(R.fold_in(key, i), -1.0, 2.0)


@numba.njit
def _uniform32(key, out):
    for i in range(out.size):
        out[i] = R.uniform32(R.fold_in(key, i))


@numba.njit
def _normal(key, out):
    for i in range(out.size):
        out[i] = R.normal(R.fold_in(key, i))


@numba.njit
def _exponential(key, out):
    for i in range(out.size):
        out[i] = R.exponential(R.fold_in(key, i))


@numba.njit
def _bits(key, out):
    for i in range(out.size):
        out[i] = R.bits(R.fold_in(key, i))


LOOPS = {  # loop, output dtype, the host's value for lane i
    "fold_in": (_fold_in, np.uint64, lambda k, i: (int(R.fold_in(k, i)[0]) << 32) | int(R.fold_in(k, i)[1])),
    "uniform": (_uniform, np.float64, lambda k, i: R.uniform(R.fold_in(k, i), -1.0, 2.0)),
    "uniform32": (_uniform32, np.float32, lambda k, i: R.uniform32(R.fold_in(k, i))),
    "normal": (_normal, np.float64, lambda k, i: R.normal(R.fold_in(k, i))),
    "exponential": (_exponential, np.float64, lambda k, i: R.exponential(R.fold_in(k, i))),
    "bits": (_bits, np.uint64, lambda k, i: R.bits(R.fold_in(k, i))),
}


def _key_forms():
    array = R.key(2024)
    return {"array": array, "tuple": (np.uint32(array[0]), np.uint32(array[1])),
            "split row": R.split(R.key(7), 3)[1]}


@pytest.mark.parametrize("form", ["array", "tuple", "split row"])
@pytest.mark.parametrize("name", list(LOOPS))
def test_draw_loop_is_vectorised_and_exact(name, form):
    loop, dtype, host = LOOPS[name]
    key = _key_forms()[form]
    out = np.empty(N, dtype)
    loop(key, out)
    sig = (numba.typeof(key), numba.typeof(out))
    ir = loop.inspect_llvm(sig)
    assert VECTOR_MUL.search(ir), f"{name} with a {form} key: Philox is not vectorised"
    for i in (0, 1, 7, 8, 500, N - 1):
        assert out[i] == host(key, i), (name, form, i)


def test_monte_carlo_reduction_matches_its_lanes():
    """The benchmark's lane (benchmarks/mc_option.py) in a reduction (each lane drawing
    from the key array it is handed whole): its means against the lanes' values mapped,
    whose draws are the host's bit for bit."""
    def draw(key, i):
        return R.normal(R.fold_in(key, i))

    def payoff(key, i):
        z = R.normal(R.fold_in(key, i))
        p = max(100.0 * math.exp(0.03 + 0.2 * z) - 105.0, 0.0)
        return p, p * p

    key, n = R.key(2024), 5000
    z = lw.vmap(draw, in_axes=(None, 0))(key, np.arange(n))
    assert np.array_equal(z[::97], [R.normal(R.fold_in(key, i)) for i in range(0, n, 97)])
    mean, mean_sq = lw.reduce(lw.vmap(payoff, in_axes=(None, 0)), "mean")(key, np.arange(n))
    lanes, lanes_sq = lw.vmap(payoff, in_axes=(None, 0))(key, np.arange(n))
    assert mean == pytest.approx(lanes.mean(), rel=1e-12) and mean_sq == pytest.approx(lanes_sq.mean(), rel=1e-12)


@numba.njit
def _three_per_step(key, steps, out):
    for lane in range(out.size):
        k = R.fold_in(key, lane)
        x = 0.0
        for t in range(steps):
            x += R.uniform(R.fold_in(k, 3 * t)) + R.uniform(R.fold_in(k, 3 * t + 1)) * R.uniform(
                R.fold_in(k, 3 * t + 2))
        out[lane] = x


def test_several_draws_per_step_give_the_host_bits():
    key, steps = R.key(5), 4
    out = np.empty(16)
    _three_per_step(key, steps, out)
    for lane in (0, 9, 15):
        k = R.fold_in(key, lane)
        x = 0.0
        for t in range(steps):
            x += R.uniform(R.fold_in(k, 3 * t)) + R.uniform(R.fold_in(k, 3 * t + 1)) * R.uniform(
                R.fold_in(k, 3 * t + 2))
        assert out[lane] == x
