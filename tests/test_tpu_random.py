"""lw.random inside lanes on backend="tpu" (backends/tpu/random.py), against the CPU's bits.

The Philox words, ``fold_in`` and ``key`` are checked outside Pallas first (plain
jnp on the CPU, fast) against the host functions of :mod:`lanewise.random`; then
lanes drawing numbers run in interpret mode over three tiles of lanes (the last
partial) against ``backend="python"``: ``uniform32``, ``fold_in`` and ``integers``
bit for bit, the float32 draws of float64 CPU draws by the rule docs/tpu.md states
(rows ``R01``-``R08``, each run here).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("jax")
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

import lanewise as lw  # noqa: E402
from lanewise import LaneCompileError, LaneTypeError  # noqa: E402
from lanewise.backends.tpu import random as tr  # noqa: E402

#: Lanes of three (8, 128) tiles, the last one partial.
N = 2 * 1024 + 300
ON_CHIP = os.environ.get("LANEWISE_TPU_TESTS_ON_CHIP") == "1" and jax.default_backend() == "tpu"
#: The float32 draws of the CPU's float64 ones: |tpu - cpu| <= TOL * max(1, |cpu|) (docs/tpu.md,
#: R05-R06); on the chip, its log's error (docs/tpu.md's table) is added.
TOL = 2e-4 if ON_CHIP else 4e-7


@pytest.fixture(autouse=True)
def interpret():
    with lw.config.overridden(tpu_interpret=not ON_CHIP, tpu_tile=(8, 128), tpu_block=(8, 128), tpu_unroll=1):
        yield


def u32(n, seed):
    return np.random.default_rng(seed).integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32)


def i32(n, seed, lo=-2**31, hi=2**31):
    return np.random.default_rng(seed).integers(lo, hi, n).astype(np.int32)


def both(lane, *args, in_axes=0):
    """The lane's results on the tpu and python backends, as lists of NumPy arrays."""
    got = lw.vmap(lane, in_axes=in_axes, backend="tpu")(*args)
    want = lw.vmap(lane, in_axes=in_axes, backend="python")(*args)
    return ([np.asarray(g) for g in (got if isinstance(got, tuple) else (got,))],
            [np.asarray(w) for w in (want if isinstance(want, tuple) else (want,))])


def assert_close(got, want):
    """float32 results within TOL of the CPU's float64 ones (relative beyond 1)."""
    assert got.dtype == np.float32 and got.shape == want.shape
    err = np.abs(got.astype(np.float64) - want) / np.maximum(1.0, np.abs(want))
    assert err.max() <= TOL, (err.max(), np.argmax(err))


# ----------------------------------------------------------------------------- outside Pallas


def test_philox_words_equal_the_host_function():
    c = [u32(600, s) for s in range(6)]
    got = np.stack([np.asarray(w) for w in tr.philox4x32(*map(jnp.asarray, c))])
    want = np.array([[int(w) for w in lw.random.philox4x32(tuple(int(x[i]) for x in c[:4]), (c[4][i], c[5][i]))]
                     for i in range(600)]).T
    np.testing.assert_array_equal(got, want)
    zero = jnp.uint32(0)
    assert [f"{int(w):08x}" for w in tr.philox4x32(*(zero,) * 6)] == ["6627e8d5", "e169c58d", "bc57ac4c", "9b00dbd8"]


def test_the_64_bit_product_from_16_bit_halves():
    a = np.concatenate([u32(2000, 7), np.array([0, 1, 2**32 - 1, 2**31, 0xFFFF, 0x10000], np.uint32)])
    # the general form and the short one (tr._short: M0, 0x10001, the edge 0x80008000), exact either way
    for m in (tr.PHILOX_M0, tr.PHILOX_M1, 1, 0xFFFFFFFF, 0x10001, 0x80008000, 0x80008001, 0xFFFF0001):
        high, low = tr.mulhilo(jnp.asarray(a), m)
        product = [int(x) * m for x in a]
        assert np.asarray(high).tolist() == [p >> 32 for p in product]
        assert np.asarray(low).tolist() == [p & 0xFFFFFFFF for p in product]
    b = u32(len(a), 8)
    high, low = tr.mulhilo(jnp.asarray(a), jnp.asarray(b))
    assert [(int(h) << 32) | int(lo) for h, lo in zip(np.asarray(high), np.asarray(low), strict=True)] == \
        [int(x) * int(y) for x, y in zip(a, b, strict=True)]


def test_fold_in_and_key_equal_the_host_functions():
    k0, k1, d = u32(500, 1), u32(500, 2), i32(500, 3)
    d[:4] = [0, -1, 2**31 - 1, -2**31]
    got = tr.fold_in((jnp.asarray(k0), jnp.asarray(k1)), jnp.asarray(d))
    want = [lw.random.fold_in((a, b), int(x)) for a, b, x in zip(k0, k1, d, strict=True)]
    assert list(zip(*(np.asarray(g).tolist() for g in got), strict=True)) == [tuple(map(int, w)) for w in want]
    for data in (0, 5, -7, 2**40 + 3, 2**64 - 1, -2**63):  # a Python int: modulo 2**64, as on the host
        assert tuple(map(int, tr.fold_in((jnp.uint32(9), jnp.uint32(4)), data))) == \
            tuple(map(int, lw.random.fold_in((9, 4), data)))
    seeds = np.concatenate([d, np.array([0, -1], np.int32)])
    words = tr.key(jnp.asarray(seeds))
    assert np.stack([np.asarray(w) for w in words], 1).tolist() == [lw.random.key(int(s)).tolist() for s in seeds]
    assert [int(w) for w in tr.key(2**40 + 7)] == lw.random.key(2**40 + 7).tolist()


def _nearest(m: int) -> np.float32:
    """The float32 nearest m * 2**-53, by integer rounding to 24 significant bits (ties to even)."""
    shift = max(m.bit_length() - 24, 0)
    q, r = divmod(m, 1 << shift)
    if shift and (r > 1 << (shift - 1) or r == 1 << (shift - 1) and q & 1):
        q += 1
    return np.float32(q * 2.0 ** (shift - 53))  # exact: q has at most 25 bits, a power of two if 25


def test_nearest_float32_of_53_bits_rounds_ties_to_even():
    rng = np.random.default_rng(4)
    ms = [int(x) >> int(s) for x, s in zip(rng.integers(0, 2**53, 3000, dtype=np.uint64),
                                          rng.integers(0, 53, 3000), strict=True)]
    ms += [0, 1, 2, 2**53, 2**53 - 1, 2**24 - 1, 2**24 + 1, 2**25 + 1, 2**25 + 3, 2**29 + 2**5, 2**30 - 1]
    got = tr.nearest_f32(jnp.asarray([m >> 32 for m in ms], jnp.uint32),
                         jnp.asarray([m & 0xFFFFFFFF for m in ms], jnp.uint32))
    np.testing.assert_array_equal(np.asarray(got), np.array([_nearest(m) for m in ms], np.float32))


def test_two64_mod_and_rejected_attempts_follow_the_cpu_words():
    """Lemire's rejection is too rare to meet by chance (< 2**-32): the loop of later
    attempts is checked by forcing attempt 0 to reject, against the CPU's words X_1, X_2."""
    r = np.array([1, 2, 3, 7, 1000, 2**31, 2**32 - 1, 2**32 - 5], np.uint32)
    assert np.asarray(tr._two64_mod(jnp.asarray(r))).tolist() == [pow(2, 64, int(x)) for x in r]
    k0, k1 = u32(len(r), 5), u32(len(r), 6)
    key = (jnp.asarray(k0), jnp.asarray(k1))
    forced = jnp.zeros(len(r), jnp.uint32)  # low word 0 < t, not sure: attempt 0 rejects wherever t > 0
    top = tr._retried(key, jnp.asarray(r), forced, forced, jnp.zeros(len(r), bool))
    for i, x in enumerate(r):
        t = pow(2, 64, int(x))
        if t == 0:  # 2**64 mod r = 0 (r a power of two): attempt 0 accepted
            assert int(top[i]) == 0
            continue
        w = [int(v) for v in lw.random.philox4x32((0, 0, 0, 0), (k0[i], k1[i]))]
        w += [int(v) for v in lw.random.philox4x32((1, 0, 0, 0), (k0[i], k1[i]))]
        for j in (1, 2, 3):
            m = ((w[2 * j + 1] << 32) | w[2 * j]) * int(x)
            if m % 2**64 >= t:
                assert int(top[i]) == m >> 64
                break


# ----------------------------------------------------------------------------- lanes (interpret mode)


def draw_uniform32(k0, k1):
    return lw.random.uniform32((k0, k1))


def draw_uniform32_bounds(k0, k1, i):
    return lw.random.uniform32(lw.random.fold_in((k0, k1), i), -2.0, hi=3.0)


def keys_of(k0, k1, i):
    return lw.random.fold_in((k0, k1), i)


def draw_uniform(k0, k1):
    return lw.random.uniform((k0, k1))


def draw_uniform_bounds(k0, k1, lo, hi):
    return lw.random.uniform((k0, k1), lo, hi)


def draw_normal(k0, k1):
    return lw.random.normal((k0, k1))


def draw_exponential(k0, k1):
    return lw.random.exponential((k0, k1))


def draw_integers(k0, k1, lo, hi):
    return lw.random.integers((k0, k1), lo, hi)


def dice(seed, i):
    return lw.random.integers(lw.random.fold_in(lw.random.key(seed), i), 1, 7)


def seeded(seed):
    return lw.random.uniform32(lw.random.key(seed))


def literal_seed(i):
    return lw.random.uniform32(lw.random.fold_in(lw.random.key(42), i))


def random_walk(k0, k1, n):
    """An MC lane: a loop of fold_in + normal draws, summed."""
    k = (k0, k1)
    s = 0.0
    for t in range(n):
        s += lw.random.normal(lw.random.fold_in(k, t))
    return s


def test_uniform32_in_lanes_equals_the_cpu_bit_for_bit():
    k0, k1, i = u32(N, 10), u32(N, 11), i32(N, 12)
    (got,), (want,) = both(draw_uniform32, k0, k1)
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got, want)
    (got,), (want,) = both(draw_uniform32_bounds, k0, k1, i)  # a product and a sum: no FMA contraction
    np.testing.assert_array_equal(got, want)


def test_fold_in_in_lanes_gives_the_cpu_key_words():
    k0, k1, i = u32(N, 13), u32(N, 14), i32(N, 15)
    got, want = both(keys_of, k0, k1, i)
    assert [g.dtype for g in got] == [np.uint32, np.uint32]
    np.testing.assert_array_equal(np.stack(got, 1), np.stack(want, 1))


@pytest.mark.slow
def test_keys_from_int_seeds_lane_varying_unmapped_and_literal():
    seeds = i32(N, 16)
    (got,), (want,) = both(seeded, seeds)
    np.testing.assert_array_equal(got, want)
    i = np.arange(N, dtype=np.int32)
    (got,), (want,) = both(dice, 7, i, in_axes=(None, 0))  # an int seed passed unmapped
    assert got.dtype == np.int32 and sorted(set(got.tolist())) == [1, 2, 3, 4, 5, 6]
    np.testing.assert_array_equal(got, want)
    (got,), (want,) = both(literal_seed, i)
    np.testing.assert_array_equal(got, want)


def test_key_words_travel_as_uint32_arrays_and_scalars():
    k1 = u32(N, 17)
    (got,), (want,) = both(draw_uniform32, np.uint32(0xDEADBEEF), k1, in_axes=(None, 0))
    np.testing.assert_array_equal(got, want)


def test_uniform_is_the_nearest_float32_of_the_cpu_uniform():
    k0, k1 = u32(N, 18), u32(N, 19)
    (got,), (want,) = both(draw_uniform, k0, k1)
    assert got.dtype == np.float32 and want.dtype == np.float64
    np.testing.assert_array_equal(got, np.minimum(want.astype(np.float32), np.float32(1 - 2**-24)))
    lo, hi = np.float32(-1.5), np.float32(2.25)
    (got,), (want,) = both(draw_uniform_bounds, k0, k1, lo, hi, in_axes=(0, 0, None, None))
    assert_close(got, want)
    assert got.min() >= lo and got.max() < hi


def test_normal_is_the_cpu_box_muller_in_float32():
    k0, k1 = u32(N, 20), u32(N, 21)
    (got,), (want,) = both(draw_normal, k0, k1)
    assert_close(got, want)
    assert abs(got.mean()) < 0.1 and abs(got.std() - 1) < 0.05


def test_exponential_is_the_cpu_formula_in_float32():
    k0, k1 = u32(N, 22), u32(N, 23)
    (got,), (want,) = both(draw_exponential, k0, k1)
    assert_close(got, want)
    assert got.min() >= 0.0 and not np.signbit(got).any()


def test_integers_equal_the_cpu_for_int32_bounds():
    k0, k1 = u32(N, 24), u32(N, 25)
    lo = i32(N, 26)
    span = np.random.default_rng(27).integers(-3, 2**32, N)
    hi = np.clip(lo.astype(np.int64) + span, -2**31, 2**31 - 1).astype(np.int32)
    hi[:3], lo[:3] = [0, 5, 2**31 - 1], [0, 9, -2**31]  # empty, reversed, the widest range
    (got,), (want,) = both(draw_integers, k0, k1, lo, hi)
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got, want)


def test_a_monte_carlo_lane_sums_its_normals_like_the_cpu():
    k0, k1 = u32(N, 28), u32(N, 29)
    (got,), (want,) = both(random_walk, k0, k1, 6, in_axes=(0, 0, None))
    # six draws, each within TOL * max(1, |z|) (|z| < 8.58), and six float32 roundings of the sum
    err = np.abs(got.astype(np.float64) - want)
    assert got.dtype == np.float32 and err.max() <= 6 * TOL * 8.6 + 6 * 2.0**-24 * np.abs(want).max()


def chained_keys(k0, k1, n):
    """A key carried through a loop (a tuple of two words in the loop's carry)."""
    k = (k0, k1)
    s = 0.0
    for t in range(n):
        k = lw.random.fold_in(k, t)
        s += lw.random.uniform32(k)
    return s, k[0]


def first_below(k0, k1):
    """Rejection sampling: a while loop whose lanes draw until one falls below 0.1."""
    j = 0
    u = lw.random.uniform32(lw.random.fold_in((k0, k1), j))
    while u > 0.1:
        j += 1
        u = lw.random.uniform32(lw.random.fold_in((k0, k1), j))
    return j, u


@pytest.mark.slow
def test_keys_carried_by_loops_and_draws_in_a_while_loop():
    k0, k1 = u32(600, 32), u32(600, 33)
    (s, w), (s_want, w_want) = both(chained_keys, k0, k1, 4, in_axes=(0, 0, None))
    np.testing.assert_array_equal(w, w_want)
    assert s.dtype == np.float32 and np.abs(s - s_want).max() <= 4 * 2.0**-24 * 4  # four float32 roundings
    got, want = both(first_below, k0, k1)
    np.testing.assert_array_equal(got[0], want[0])
    np.testing.assert_array_equal(got[1], want[1])
    assert got[0].max() > 10  # lanes of a tile leave the loop at different draws


def draw_bits(k0, k1):
    return lw.random.bits((k0, k1))


def draw_split(k0, k1):
    return lw.random.split((k0, k1), 2)


def draw_from_row(key):
    return lw.random.uniform32(key)


def test_bits_and_split_are_refused_with_the_fix():
    k = u32(4, 30)
    with pytest.raises(LaneCompileError, match=r"lw.random.bits .*uint64.*philox4x32.*test_tpu_random.py:\d+"):
        lw.vmap(draw_bits, backend="tpu")(k, k)
    with pytest.raises(LaneCompileError, match=r"lw.random.split .*fold_in.*test_tpu_random.py:\d+"):
        lw.vmap(draw_split, backend="tpu")(k, k)


def test_a_float_key_word_is_refused_naming_the_call():
    with pytest.raises(LaneTypeError, match=r"lw.random.uniform32: a word of the key must be an integer.*"
                                            r"test_tpu_random.py:\d+"):
        lw.vmap(draw_uniform32, backend="tpu")(np.ones(4, np.float32), u32(4, 31))


def test_keys_from_split_as_per_lane_rows():
    keys = lw.random.split(lw.random.key(3), N)
    (got,), (want,) = both(draw_from_row, keys)
    np.testing.assert_array_equal(got, want)


def test_a_key_array_broadcast_to_every_lane():
    i = np.arange(N, dtype=np.int32)
    (got,), (want,) = both(lambda k, j: lw.random.uniform32(lw.random.fold_in(k, j)), lw.random.key(5), i,
                           in_axes=(None, 0))
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("lane, dtypes", [(draw_uniform32_bounds, "uui"), (draw_normal, "uu"),
                                          (draw_exponential, "uu"), (draw_integers, "uuii")])
def test_every_draw_lowers_to_mosaic_without_a_chip(lane, dtypes):
    """The kernels as a TPU compiles them: jax.export for platform "tpu" runs Pallas' Mosaic
    lowering on the CPU, which refuses a primitive the chip has no rule for (it does
    refuse jnp.cbrt): uint32 shifts, multiplies, compares and bit-casts all lower."""
    from lanewise.backends.tpu import kernel

    types = tuple(np.dtype({"u": np.uint32, "i": np.int32}[d]) for d in dtypes)
    where = kernel.layout((2000,), (8, 128))
    fn = kernel.compiled(lane, types, (False,) * len(types), ("lanes",) * len(types), False, tile=where.tile)
    with jax.enable_x64(False):
        exported = jax.export.export(jax.jit(lambda *v: fn(where, *v)[0]), platforms=["tpu"])(
            *(jax.ShapeDtypeStruct(where.shape, t) for t in types))
    assert "tpu_custom_call" in exported.mlir_module()


# ----------------------------------------------------------------------------- docs/tpu.md's R rows


def _exact(lane, *args, in_axes=0):
    got, want = both(lane, *args, in_axes=in_axes)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_array_equal(g, w.astype(g.dtype) if w.dtype.kind == g.dtype.kind else w)
        assert g.dtype.itemsize == 4


def _close(lane, *args):
    (got,), (want,) = both(lane, *args)
    assert_close(got, want)


def _refused(lane, what):
    with pytest.raises(LaneCompileError, match=what):
        lw.vmap(lane, backend="tpu")(u32(3, 0), u32(3, 1))


K0, K1 = u32(300, 40), u32(300, 41)

#: docs/tpu.md's rows R01-R08: each runs its draw on the tpu backend against the python backend.
RANDOM_MD = {
    "R01": lambda: _exact(keys_of, K0, K1, np.arange(300, dtype=np.int32)),
    "R02": lambda: _exact(seeded, i32(300, 42)),
    "R03": lambda: _exact(draw_uniform32_bounds, K0, K1, np.arange(300, dtype=np.int32)),
    "R04": lambda: test_uniform_is_the_nearest_float32_of_the_cpu_uniform(),
    "R05": lambda: _close(draw_normal, K0, K1),
    "R06": lambda: _close(draw_exponential, K0, K1),
    "R07": lambda: _exact(draw_integers, K0, K1, np.full(300, -5, np.int32), np.full(300, 2**31 - 1, np.int32)),
    "R08": lambda: (_refused(draw_bits, "uint64"), _refused(draw_split, "fold_in")),
}


def _random_md_rows():
    text = (Path(__file__).resolve().parents[1] / "docs" / "tpu.md").read_text()
    return re.findall(r"^\| `(R\d+)` \|", text, re.M)


def test_random_md_rows_and_cases_are_one_set():
    assert sorted(_random_md_rows()) == sorted(RANDOM_MD)


@pytest.mark.parametrize("row", sorted(RANDOM_MD))
def test_random_md_row(row):
    RANDOM_MD[row]()
