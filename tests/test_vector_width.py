"""lw.config.vector_width: the SIMD width LLVM vectorises lanewise's kernels for.

Structure (the attribute is on kernel functions only, and 512-bit registers are used
on AVX-512 hosts), numbers (every width gives the same bits) and the cache key (a
kernel of one width is never loaded for another)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from llvmlite import binding as llvm

import lanewise as lw
from lanewise.runtime import cache, vector_width

AVX512 = bool(llvm.get_host_cpu_features().get("avx512f", False))

SOURCE = """
import numba

@numba.njit
def scaled(x, out):
    for i in range(x.shape[0]):
        out[i] = x[i] * 3.0 + 1.0
"""


def compiled(name: str):
    module = cache.load_module(name, None, SOURCE, {})
    x = np.arange(64.0)
    out = np.empty_like(x)
    module.scaled(x, out)
    np.testing.assert_array_equal(out, x * 3.0 + 1.0)
    sig = module.scaled.signatures[0]
    return module.scaled.inspect_llvm(sig), module.scaled.inspect_asm(sig)


@pytest.mark.skipif(not AVX512, reason="the default width is 512 only on AVX-512 hosts")
def test_kernels_use_512_bit_vectors_on_avx512_hosts():
    ir, asm = compiled("lw_width_default")
    assert '"prefer-vector-width"="512"' in ir
    assert "zmm" in asm


def test_width_zero_leaves_the_choice_to_llvm():
    with lw.config.overridden(vector_width=0):
        ir, _ = compiled("lw_width_llvm")
    assert "prefer-vector-width" not in ir


def test_user_functions_are_left_alone():
    with lw.config.overridden(vector_width=512):
        ir, _ = compiled("user_module_width")
    assert "prefer-vector-width" not in ir


def test_the_width_is_part_of_every_cache_key():
    with lw.config.overridden(vector_width=256):
        narrow = cache.key_of("map", 1)
    with lw.config.overridden(vector_width=512):
        wide = cache.key_of("map", 1)
    assert narrow != wide
    with lw.config.overridden(vector_width=0):
        assert vector_width.preferred() is None


def grid(x, y):
    r = x * x + y * y
    return math.cos(r) / (1.0 + r)


def test_every_width_gives_the_same_bits():
    x = np.linspace(-2.0, 2.0, 301)
    y = np.linspace(-1.5, 2.5, 257)
    mapped = lw.vmap(lw.vmap(grid, in_axes=(None, 0)), in_axes=(0, None))
    results = {}
    for width in (0, 256, 512):
        with lw.config.overridden(vector_width=width):
            results[width] = (mapped(x, y), lw.reduce(mapped, "sum")(x, y))
    for width in (256, 512):
        np.testing.assert_array_equal(results[width][0], results[0][0])
        assert results[width][1].tobytes() == results[0][1].tobytes()
    reference = np.cos(x[:, None] ** 2 + y[None, :] ** 2) / (1.0 + x[:, None] ** 2 + y[None, :] ** 2)
    np.testing.assert_allclose(results[512][0], reference, rtol=1e-14, atol=1e-15)
