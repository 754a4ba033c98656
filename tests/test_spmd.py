"""SPMD on SIMD (lanewise.spmd): divergent lanes run W at a time in vector registers.

* a corpus of divergent lane functions — nested loops, break/continue at several
  depths, early returns from different branches, helper calls (looping,
  returning early, returning tuples, nested, njit-decorated), mixed
  int/float/bool, tuples — runs on the SPMD path (``lw.explain`` says so) and is
  checked bit for bit against the scalar path and the python reference on
  random inputs (hypothesis), including sizes that leave a masked tail;
* per-lane rows: W3's ``lw.scan`` (forward, reverse, xs=None), varying and
  negative indices, a while loop with break over ``len(p)``, bitwise too, and
  masked lanes that never read their row;
* constructs the transformation does not handle fall back to the scalar path,
  with the reason in ``lw.explain``, and still give the right result;
* the automatic choice: divergent lanes take the SPMD path, others keep the
  scalar path;
* structure: the compiled W-wide lane holds packed vector instructions.
"""

from __future__ import annotations

import math
import os
import platform
import re
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numba
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import lanewise as lw
from lanewise import spmd
from lanewise.spmd.syntax import Unsupported
from lanewise.spmd.transform import transform
from corpus import ema_step, examples
from raising_lanes import checked_halving

# ============================================================================ lanes

MAX_ITER = 60
TOL = 1e-12


def escape(cr, ci):
    zr = zi = 0.0
    for n in range(MAX_ITER):
        zr, zi = zr * zr - zi * zi + cr, 2 * zr * zi + ci
        if zr * zr + zi * zi > 4.0:
            return n
    return MAX_ITER


def newton_cubic(x, y):
    """Newton's method for z**3 = 1 from z = x + iy: (which root, iterations)."""
    for k in range(40):
        r2 = x * x + y * y
        if r2 < 1e-30:
            return -1, k
        # z - (z**3 - 1) / (3 z**2), in real arithmetic
        zr3 = x * x * x - 3 * x * y * y - 1.0
        zi3 = 3 * x * x * y - y * y * y
        dr = 3 * (x * x - y * y)
        di = 6 * x * y
        den = dr * dr + di * di
        x, y = x - (zr3 * dr + zi3 * di) / den, y - (zi3 * dr - zr3 * di) / den
        if abs(x - 1.0) + abs(y) < 1e-9:
            return 0, k
        if abs(x + 0.5) + abs(y - 0.8660254037844386) < 1e-9:
            return 1, k
        if abs(x + 0.5) + abs(y + 0.8660254037844386) < 1e-9:
            return 2, k
    return -1, 40


def collatz(n):
    steps = 0
    while n != 1:
        if n % 2 == 0:
            n = n // 2
        else:
            n = 3 * n + 1
        steps += 1
    return steps


def bisect_root(c):
    """The real cube root of c by bisection to a tolerance (per-lane iteration count)."""
    lo, hi = -abs(c) - 1.0, abs(c) + 1.0
    it = 0
    while hi - lo > TOL * (1.0 + abs(lo)):
        mid = 0.5 * (lo + hi)
        if mid * mid * mid - c > 0:
            hi = mid
        else:
            lo = mid
        it += 1
    return 0.5 * (lo + hi), it


def nested_exits(x, m):
    """break/continue at two depths and early returns from inside both loops."""
    total = 0.0
    for i in range(m):
        if i % 4 == 3:
            continue
        j = 0
        while j < i + 2:
            j += 1
            v = x * j - i
            if v > 50.0:
                return total + v  # early return from the inner loop
            if v < -30.0:
                break
            if j % 2 == 0:
                continue
            total += v * 0.25
        if total > 40.0:
            break
        if total < -40.0:
            return -total
    return total


def early_returns(x, y):
    if x < -5.0:
        return -1.0
    k = 0
    while k < 20:
        if x > y:
            if x > 10.0:
                return x - y
            x = x - 1.5
        elif x < -2.0:
            return y * 2.0
        else:
            x = x * 1.25 + 0.5
        k += 1
    return x + y + k


def _step(v, a):
    """Helper with a loop and an early return."""
    for t in range(8):
        v = v * 0.5 + a
        if v < 0.0:
            return v, t
    return v + 1.0, -1


def _clip(v):
    return min(max(v, -3.0), 3.0)


@numba.njit
def _jit_square(v):
    return v * v


def helpers(x, a):
    s = 0.0
    n = 0
    while n < 5:
        v, t = _step(x + n, a)
        s += _clip(v) + t
        if _jit_square(s) > 400.0:
            break
        n += 1
    return s


def mixed(i, x, flag):
    """int/float/bool: floor division and modulo of negatives, powers, bool results."""
    acc = 0
    f = 0.0
    neg = False
    for k in range(i % 7 - 3, 9, 2):
        if flag and k % 3 == 0:
            continue
        acc += (i * k) // 3 - (i - k) % 5
        f += x ** 2 / (k * k + 1) - x // 1.5
        neg = neg != (acc < 0)
    return acc, f, neg or f > 10.0


def tuples(a, b):
    """Tuple unpacking, swaps, a nested tuple result."""
    x, y = a, b
    n = 0
    while abs(x - y) > 1e-3 and n < 30:
        x, y = (x + y) * 0.5, math.sqrt(abs(x * y))
        n += 1
    return n, (x, y)


def math_lane(x):
    y = x
    for k in range(12):
        y = math.cos(y) + 0.25 * math.sin(x * k)
        if abs(y) < 0.05:
            return math.exp(y), k
    return math.log1p(abs(y)) + math.floor(x), 12


def boolops(x, y):
    """and/or returning values, conditional expressions, chained comparisons."""
    n = 0
    while n < 10 and (x > 0.1 or y > 0.1):
        x = x * 0.7 if x > y else x
        y = (y and y * 0.6) or 0.0
        if 0.2 < x < 0.8 < y + 0.5:
            n += 2
        n += 1
    return n + (x if x > y else y)


def type_change(x):
    s = 0  # an int that the loop turns into a float (Numba unifies them)
    k = 0
    while k < 6:
        s = s + x * 0.5
        k = k + 1
        if s > 3.0:
            sign = 1.0
        else:
            sign = -1.0
        s = s * sign
    return s


def negative_step(n, x):
    last = -1
    acc = x
    for k in range(n, 0, -2):
        last = k
        acc = acc * 0.9 + k
        if acc > 100.0:
            break
    return acc + last


def two_loops(x):
    """Two loops one after the other: not streamed, run in groups of W lanes."""
    n = 0
    while x > 1.0:
        x = x * 0.75
        n += 1
    for k in range(n):
        if x * k > 3.0:
            return -k
        x = x + 0.5
    return n


def narrow(x, n):
    """float32 and int32 lanes: Numba's scalar promotions, lane by lane."""
    y = x
    k = n
    while y < 100 and k > 0:
        y = y * np.float32(1.5) + np.float32(1.0)
        k = k - 1
    return y, k


def branch_types(x, m):
    """Two-branch ifs assigning the same names with different types (merged into one
    select on the test): int vs float, bool vs int, tuple targets in both branches."""
    y = 0
    n = 0
    flag = False
    while x > 1.0:
        if x > m:
            y = 1
            a, b = n, x
        else:
            y = 2.5
            a, b = x, n
        if n % 3 == 0:
            flag = True
        else:
            flag = n
        x = x * 0.7 + (a - b) * 1e-3
        n += 1
    return x + y, n, flag


# ---------------------------------------------------------------------------- per-lane rows

def backtest(p):
    return lw.scan(ema_step, (p[0], p[0], 0.0, 0.0, p[0]), p)[0][3]


def backtest_reverse(p):
    """reverse=True, ``carry, _ =`` unpacking, p[-1], a nested tuple result."""
    carry, _ = lw.scan(ema_step, (p[-1], p[-1], 0.0, 0.0, p[-1]), p, reverse=True)
    fast, slow, pos, pnl, last = carry
    return pnl, (pos, carry[-1])


def _count_step(c, x):
    k, acc = c
    return (k + 1, acc * 0.5 + k), None


def _sum_step(c, x):
    return c + x, None


def counted(p):
    """xs=None with length= (an int and a float carry), then a scan over the row."""
    (k, acc), _ = lw.scan(_count_step, (0, p[1]), None, length=7)
    total, _ = lw.scan(_sum_step, acc, p)
    return k, total


def hops(p, k):
    """Varying indices (k % len(p), computed hops), p.shape[0], a variable trip count."""
    total = 0.0
    j = k
    for s in range(k % 4 + 2):
        j = (j * 7 + 3) % len(p)
        total = total + p[j] * s - p[-1 - s]
    return total + p[k % p.shape[0]]


def first_above(p, t):
    """A while loop with break over len(p): lanes leave at different steps, and a
    lane that never breaks reads p[len(p) - 1] at most (no lane reads past its row)."""
    i = 0
    n = len(p)
    while i < n:
        if p[i] > t:
            break
        i += 1
    if i == n:
        return -1, p[0]
    return i, p[i]


def row_scan(row, t):
    for i in range(row.shape[0]):
        if row[i] > t:
            return i
    return -1


def sources(x, y, sx, sy, mass):
    """Every lane sums over the same sources (tables passed whole, read at a uniform
    index: one scalar load per vector step), a tuple sliced, ``table.size``."""
    s = 0.0
    here = (x, y)
    for k in range(sx.size):
        px, py = here[:]
        dx, dy = px - sx[k], py - sy[k]
        r2 = dx * dx + dy * dy + 0.25
        if r2 < 4.0:  # near sources only: lanes diverge
            s = s + mass[k] * dx / (r2 * r2)
    return s


def table_lookup(x, coef):
    """A table read at an index that differs between lanes (a gather from one base)
    and at uniform ones (Horner over the table), with negative indices."""
    r = coef[int(x * 3.0) % len(coef)] - coef[-1]
    k = 0
    while k < coef.shape[0] and r < 50.0:
        r = r * x + coef[k]
        k += 1
    return r, k


def _walks(rng, n, steps, dtype=np.float64):
    """``n`` random walks of ``steps`` prices from 100, one per row."""
    return (100.0 * np.exp(np.cumsum(rng.standard_normal((max(n, 1), steps)) * 0.01, axis=1))).astype(dtype)


# ---------------------------------------------------------------------------- cases

F = st.floats(-4, 4, allow_nan=False, allow_infinity=False)


@dataclass
class Case:
    name: str
    lane: Callable
    make: Callable  # (rng, n) -> arguments
    in_axes: object = 0
    nest: int = 1  # 2: vmap(vmap(lane, in_axes=(None, 0)), in_axes=(0, None))
    ulps: int = 0  # calls math: lanewise's vector math (SPMD) is within 1 ulp of libm (scalar path, python)
    light: bool = False  # reads its row with little arithmetic: "auto" keeps the scalar path

    def mapped(self, backend=None):
        if self.nest == 2:
            return lw.vmap(lw.vmap(self.lane, in_axes=(None, 0), backend=backend), in_axes=(0, None),
                           backend=backend)
        return lw.vmap(self.lane, in_axes=self.in_axes, backend=backend)


def _u(rng, n, lo, hi):
    return rng.uniform(lo, hi, n)


CASES = [
    Case("escape", escape, lambda r, n: (np.linspace(-2, 0.6, max(n // 4, 1)), np.linspace(-1.3, 1.3, n)),
         nest=2),
    Case("newton_cubic", newton_cubic, lambda r, n: (_u(r, n, -2, 2), _u(r, n, -2, 2))),
    # a uniform argument (x, mapped at the outer level) that the lane reassigns
    Case("newton_grid", newton_cubic, lambda r, n: (_u(r, max(n // 4, 1), -2, 2), _u(r, n, -2, 2)), nest=2),
    Case("two_loops", two_loops, lambda r, n: (_u(r, n, -9, 30),)),
    Case("collatz", collatz, lambda r, n: (r.integers(1, 100000, n),)),
    Case("bisect_root", bisect_root, lambda r, n: (_u(r, n, -50, 50),)),
    Case("nested_exits", nested_exits, lambda r, n: (_u(r, n, -8, 8), 9), in_axes=(0, None)),
    Case("early_returns", early_returns, lambda r, n: (_u(r, n, -8, 14), _u(r, n, -4, 6))),
    Case("helpers", helpers, lambda r, n: (_u(r, n, -3, 6), 0.75), in_axes=(0, None)),
    Case("mixed", mixed, lambda r, n: (r.integers(-40, 40, n), _u(r, n, -5, 5), r.random(n) < 0.5)),
    Case("tuples", tuples, lambda r, n: (_u(r, n, 0.1, 9), _u(r, n, 0.1, 9))),
    Case("math_lane", math_lane, lambda r, n: (_u(r, n, -3, 3),), ulps=-1),
    Case("boolops", boolops, lambda r, n: (_u(r, n, 0, 1), _u(r, n, 0, 1))),
    Case("type_change", type_change, lambda r, n: (_u(r, n, -3, 4),)),
    Case("branch_types", branch_types, lambda r, n: (_u(r, n, -2, 90), 5.0), in_axes=(0, None)),
    Case("negative_step", negative_step, lambda r, n: (r.integers(-3, 30, n), _u(r, n, -5, 50))),
    Case("backtest", backtest, lambda r, n: (_walks(r, n, 60),)),
    Case("backtest_reverse", backtest_reverse, lambda r, n: (_walks(r, n, 33),)),
    Case("counted", counted, lambda r, n: (_walks(r, n, 5),), light=True),
    Case("hops", hops, lambda r, n: (_walks(r, n, 11), r.integers(-50, 50, max(n, 1))), in_axes=(0, 0)),
    Case("first_above", first_above, lambda r, n: (_walks(r, n, 25), 100.5), in_axes=(0, None), light=True),
    Case("first_above_f32", first_above, lambda r, n: (_walks(r, n, 9, np.float32), 100.5), in_axes=(0, None),
         light=True),
    Case("row_scan", row_scan, lambda r, n: (r.integers(0, 9, (max(n, 1), 6)), 6), in_axes=(0, None), light=True),
    Case("sources", sources, lambda r, n: (_u(r, n, -3, 3), _u(r, n, -3, 3), *_u(r, (3, 40), -3, 3)),
         in_axes=(0, 0, None, None, None)),
    Case("table_lookup", table_lookup, lambda r, n: (_u(r, n, 0, 3), _u(r, 9, -2, 2)), in_axes=(0, None)),
    Case("table_lookup_f32", table_lookup, lambda r, n: (_u(r, n, 0, 3).astype(np.float32),
                                                         _u(r, 17, -2, 2).astype(np.float32)[::2]),
         in_axes=(0, None)),
    Case("narrow", narrow, lambda r, n: (_u(r, n, -2, 20).astype(np.float32),
                                         r.integers(0, 12, n).astype(np.int32))),
]
BY_NAME = {c.name: c for c in CASES}


# ============================================================================ helpers


def bits(a):
    """The bit patterns of ``a``; every NaN as one canonical NaN (LLVM treats a NaN's
    sign and payload as unspecified: ``x * -1.0`` may become ``-x``, which flips it)."""
    a = np.asarray(a)
    if a.dtype.kind != "f":
        return a
    return np.where(np.isnan(a), np.array(np.nan, a.dtype), a).view(f"u{a.dtype.itemsize}")


def assert_bitwise(got, want, what=""):
    if isinstance(want, tuple):
        assert isinstance(got, tuple) and len(got) == len(want), what
        for g, w in zip(got, want):
            assert_bitwise(g, w, what)
        return
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape, (what, got.dtype, want.dtype, got.shape)
    bad = np.flatnonzero(bits(got).ravel() != bits(want).ravel())
    first = bad[:5]
    assert bad.size == 0, (f"{what}: {bad.size} lanes differ, first {first}: "
                           f"{got.ravel()[first]} vs {want.ravel()[first]}")


def assert_close_reference(got, want, what=""):
    """Integer results exactly; floats within a few ulps (a data-dependent branch
    taken differently after a 1-ulp difference shows up as a large error)."""
    if isinstance(want, tuple):
        for g, w in zip(got, want):
            assert_close_reference(g, w, what)
        return
    if np.asarray(want).dtype.kind == "f":
        np.testing.assert_array_max_ulp(got, want, maxulp=4)
    else:
        np.testing.assert_array_equal(got, want, err_msg=what)


def lane_path(fn, *args) -> str:
    text = str(lw.explain(fn, *args))
    return next(line for line in text.splitlines() if line.startswith("lane path:"))


def executable(mapped):
    (exe,) = mapped._executables.values()
    return exe


# ============================================================================ corpus


@pytest.mark.parametrize("name", list(BY_NAME))
def test_corpus_runs_spmd_bitwise(name, restore_config):
    case = BY_NAME[name]
    if case.light:  # the transformation itself; the auto choice: test_auto_keeps_light_row_loops_scalar
        restore_config.spmd = True
    f = case.mapped()
    scalar = lw.vmap(lambda *a: None)  # placeholder, replaced below
    with lw.config.overridden(spmd=False):
        scalar = case.mapped()
        args = case.make(np.random.default_rng(0), 5)
        assert lane_path(scalar, *args).startswith("lane path: scalar")
    reference = case.mapped(backend="python")
    assert "SPMD on SIMD" in lane_path(f, *args), lane_path(f, *args)

    @settings(max_examples=examples(6))
    @given(seed=st.integers(0, 2**32 - 1), n=st.sampled_from([1, 3, 16, 17, 33, 70]))
    def check(seed, n):
        args = case.make(np.random.default_rng(seed), n)
        got = f(*args)
        with lw.config.overridden(spmd=False):
            want = scalar(*args)
        if case.ulps == 0:
            assert_bitwise(got, want, f"{name}: SPMD vs scalar path")
        else:  # lanewise's vector math in SPMD, libm on the (divergent) scalar path
            assert_close_reference(got, want, f"{name}: SPMD vs scalar path")
            assert_bitwise(want, reference(*args), f"{name}: scalar path vs python reference")
        if case.ulps == 0:
            assert_bitwise(got, reference(*args), f"{name}: SPMD vs python reference")
        elif lw.config.vector_math:  # lanemath vs libm
            with lw.config.overridden(vector_math=False):
                assert_bitwise(case.mapped()(*args), reference(*args), f"{name}: libm SPMD vs python")

    check()


@pytest.mark.parametrize("name", ["escape", "collatz", "nested_exits", "early_returns", "helpers", "mixed",
                                  "tuples", "newton_grid"])
def test_corpus_in_groups_without_streaming(monkeypatch, name):
    """The same lanes run in fixed groups of W (no slot refill) are bitwise equal too."""
    monkeypatch.setattr(spmd.settings, "STREAMING", False)
    case = BY_NAME[name]
    f = case.mapped()
    args = case.make(np.random.default_rng(7), 45)
    path = lane_path(f, *args)
    assert "SPMD" in path and "refilled" not in path, path
    assert_bitwise(f(*args), case.mapped(backend="python")(*args))


def test_streaming_and_groups_are_both_used():
    x = np.linspace(-9, 30, 20)
    assert "refilled" in lane_path(BY_NAME["collatz"].mapped(), np.arange(1, 21))
    path = lane_path(BY_NAME["two_loops"].mapped(), x)
    assert "SPMD" in path and "refilled" not in path, path


SPECIAL = np.array([np.nan, -np.nan, np.inf, -np.inf, 0.0, -0.0, 5e-324, 1e-310, -1e308, 1.5, -2.5, 3.0] * 3)


@pytest.mark.parametrize("name", ["newton_cubic", "bisect_root", "early_returns", "math_lane", "boolops",
                                  "type_change", "helpers"])
def test_special_values(name):
    """NaN, infinities, signed zeros and subnormals: the same results (and signs of zero)."""
    case = BY_NAME[name]
    args = [SPECIAL if isinstance(a, np.ndarray) and a.dtype == np.float64 else a
            for a in case.make(np.random.default_rng(0), SPECIAL.size)]
    got = case.mapped()(*args)
    with lw.config.overridden(spmd=False):
        (assert_bitwise if case.ulps == 0 else assert_close_reference)(got, case.mapped()(*args), name)


def test_spmd_parallel_launch_matches():
    """Above lw.config.serial_below lanes the kernel runs blocks under prange."""
    case = BY_NAME["escape"]
    args = (np.linspace(-2, 0.6, 190), np.linspace(-1.3, 1.3, 203))  # 38570 lanes, tails everywhere
    got = case.mapped()(*args)
    with lw.config.overridden(spmd=False):
        assert_bitwise(got, case.mapped()(*args))


def test_three_level_nest_and_out_axes():
    def lane(x, y, z):
        n = 0
        while x * n < y + z and n < 50:
            n += 1
        return n, x * n - y

    f = lw.vmap(lw.vmap(lw.vmap(lane, in_axes=(None, None, 0)), in_axes=(None, 0, None)),
                in_axes=(0, None, None), out_axes=(0, 2))
    args = (np.linspace(0.1, 3, 5), np.linspace(-2, 9, 6), np.linspace(0, 4, 19))
    assert "SPMD" in lane_path(f, *args)
    got = f(*args)
    with lw.config.overridden(spmd=False):
        g = lw.vmap(lw.vmap(lw.vmap(lane, in_axes=(None, None, 0)), in_axes=(None, 0, None)),
                    in_axes=(0, None, None), out_axes=(0, 2))
        assert_bitwise(got, g(*args))


@pytest.mark.parametrize("width", [4, 8, 32])
def test_width_override(restore_config, width):
    restore_config.spmd_width = width
    case = BY_NAME["collatz"]
    args = case.make(np.random.default_rng(3), 45)
    f = case.mapped()
    assert f"{width} lanes per vector step" in lane_path(f, *args)
    want = case.mapped(backend="python")(*args)
    assert_bitwise(f(*args), want)


def test_default_width_follows_dtype_and_cpu():
    bits_ = spmd.vector_bits()
    assert bits_ in (128, 256, 512)
    regs = spmd.registers_per_value()
    assert spmd.width_for(8) == max(4, regs * bits_ // 64)
    assert spmd.width_for(4) == min(64, max(4, regs * bits_ // 32))
    def halve32(x):
        while x > np.float32(1):
            x = x * np.float32(0.5)
        return x

    f = lw.vmap(halve32)
    x = np.linspace(0, 99, 50, dtype=np.float32)
    assert f"{spmd.width_for(4)} lanes" in lane_path(f, x)  # float32/int32 lanes: twice as many
    assert_bitwise(f(x), lw.vmap(halve32, backend="python")(x))


# ============================================================================ choice


def straight(x, y):
    if x > y:
        return x - y
    return x * y


def fixed_loop(x):
    s = 0.0
    for k in range(4):
        s += x * k
    return s


@pytest.mark.parametrize("lane", [straight, fixed_loop])
def test_auto_keeps_scalar_path_without_divergence(lane):
    args = (np.arange(5.0), np.ones(5))[:lane.__code__.co_argcount]
    f = lw.vmap(lane)
    path = lane_path(f, *args)
    assert path.startswith("lane path: scalar") and "no divergent control flow" in path
    assert not re.search(r"lane_(spmd|stream)", lw.explain(f, *args).source)


def test_always_takes_supported_straight_lanes(restore_config):
    restore_config.spmd = True
    f = lw.vmap(straight)
    args = (np.linspace(-1, 1, 21), np.linspace(1, -1, 21))
    assert "SPMD" in lane_path(f, *args)
    assert_bitwise(f(*args), lw.vmap(straight, backend="python")(*args))


def test_disabled(restore_config):
    restore_config.spmd = False
    f = BY_NAME["collatz"].mapped()
    assert "SPMD disabled" in lane_path(f, np.arange(1, 9))


# ---------------------------------------------------------------------------- fallbacks


def allocates(x):
    buf = np.zeros(3)
    n = 0
    while x > 1.0:
        x = x / 2
        n += 1
    return n + buf.size


def _fact(n):
    if n <= 1:
        return 1
    return n * _fact(n - 1)


def recursive(n):
    k = 0
    while k < 3:
        k += 1
    return _fact(n % 6) + k


class _Scale:
    def __call__(self, v):
        return v * 2


def unknown_call(x):
    n = 0
    while x > 1.0:
        x = x / complex(2.0, 0.0).real
        n += 1
    return n


def while_else(x):
    n = 0
    while x > 1.0:
        x = x / 2
        n += 1
    else:
        n += 100
    return n


def _stack_step(c, x):
    return c + x, c


def stacked_ys(p):
    c, ys = lw.scan(_stack_step, 0.0, p)
    return c + ys[1]


def writes_row(p):
    s = 0.0
    for i in range(len(p)):
        p[i] = p[i]
        s = s + p[i]
    return s


def grid_total(g):
    t = 0.0
    i = 0
    while i < g.shape[0]:
        t = t + g[i, 0]
        i += 1
    return t


def _row_total(p):
    t = 0.0
    for i in range(len(p)):
        t = t + p[i]
    return t


def via_helper(p):
    return _row_total(p) * 2.0


def _check_positive(x):
    if x < 0.0:
        raise ValueError("negative")
    return x * 2.0


def _doubled_plus_one(x):
    return _check_positive(x) + 1.0


def guarded_raise(x):
    i = 0
    while i < 3:
        i += 1
    return x > 0.0 and _doubled_plus_one(x) > 3.0  # Python calls the raising helper for x > 0 only


def csr_node(start, stop, indices, w, x):
    s = 0.0
    for k in range(start, stop):  # tables read at indices that differ between lanes
        s += w[k] * x[indices[k]]
    return s


def guarded_read(p, t):
    i = 0
    while i < len(p) and p[i] <= t:
        i += 1
    return i


FALLBACKS = [
    (allocates, (np.linspace(0, 9, 7),), 0, "np.zeros(3)"),
    (unknown_call, (np.linspace(0, 9, 7),), 0, "complex(2.0, 0.0)"),
    (row_scan, (np.arange(36.0).reshape(3, 12) % 5, 2.5), (0, None), "operation(s) per row element"),
    (stacked_ys, (np.arange(12.0).reshape(3, 4),), 0, "stacked ys"),
    (writes_row, (np.arange(12.0).reshape(3, 4),), 0, "writing into the array 'p'"),
    (grid_total, (np.arange(24.0).reshape(2, 3, 4),), 0, "2-D views"),
    (via_helper, (np.arange(12.0).reshape(3, 4),), 0, "'p' passed to _row_total"),
    (guarded_read, (np.arange(12.0).reshape(3, 4), 5.5), (0, None), "Python may not evaluate"),
    (guarded_raise, (np.linspace(-4, 4, 9),), 0, "_doubled_plus_one, which may raise"),
    (csr_node, (np.array([0, 2, 2]), np.array([2, 2, 5]), np.array([1, 0, 2, 2, 1]), np.linspace(0, 1, 5),
                np.array([1.0, 2.0, 3.0])), (0, 0, None, None, None), "operation(s) per row element"),
    (while_else, (np.linspace(0, 9, 7),), 0, "while ... else"),
]


@pytest.mark.parametrize("lane, args, in_axes, why", FALLBACKS, ids=[f[0].__name__ for f in FALLBACKS])
def test_unsupported_constructs_fall_back_with_reason(lane, args, in_axes, why):
    f = lw.vmap(lane, in_axes=in_axes)
    path = lane_path(f, *args)
    assert path.startswith("lane path: scalar") and why in path, path
    np.testing.assert_array_equal(f(*args), lw.vmap(lane, in_axes=in_axes, backend="python")(*args))


def test_a_shared_array_is_read_as_a_table_by_every_lane():
    """A 1-D array passed whole (a table, sample times) runs on the SPMD path: one
    data pointer, read at uniform indices (a scalar load) and at lane-dependent ones
    (gathers); as rows of a 2-D array mapped at the outer level only."""
    def lookup(x, table):
        s, i = 0.0, 0
        while s < x:
            s += table[(i * 7 + int(x * 10)) % len(table)] * table[i % 3]
            i += 1
        return s + i

    x = np.linspace(0.0, 30.0, 1001)
    for table in (np.linspace(0.5, 2.0, 13), np.linspace(0.5, 2.0, 26)[::2]):  # contiguous, strided
        f = lw.vmap(lookup, in_axes=(0, None))
        assert lane_path(f, x, table).startswith("lane path: SPMD")
        assert "v_table(" in lw.explain(f, x, table).source
        np.testing.assert_array_equal(f(x, table), lw.vmap(lookup, in_axes=(0, None), backend="python")(x, table))
    tables = np.linspace(0.5, 2.0, 26).reshape(2, 13)  # shared by the inner level, mapped by the outer
    nested = lw.vmap(lw.vmap(lookup, in_axes=(0, None)), in_axes=(None, 0))
    assert lane_path(nested, x, tables).startswith("lane path: SPMD")
    np.testing.assert_array_equal(nested(x, tables), lw.vmap(lw.vmap(lookup, in_axes=(0, None)), in_axes=(None, 0),
                                                             backend="python")(x, tables))


def test_uniform_table_reads_keep_the_full_width():
    """Reads of a shared table at a uniform index are one scalar load per vector step,
    not W loads: the lane keeps the width of lanes without rows (per-lane rows and
    gathered tables take one register's worth, :func:`spmd.width_for`)."""
    args = BY_NAME["sources"].make(np.random.default_rng(0), 64)
    f = BY_NAME["sources"].mapped()
    assert f"{spmd.width_for(8)} lanes per vector step" in lane_path(f, *args), lane_path(f, *args)
    args = BY_NAME["table_lookup"].make(np.random.default_rng(0), 64)
    path = lane_path(BY_NAME["table_lookup"].mapped(), *args)
    assert f"{spmd.width_for(8, rows=True)} lanes per vector step" in path, path


def powers(x, k):
    s = x ** 0 + x ** 1
    for _ in range(k):
        s = s + x ** 2 - x ** 3 * 0.5 + (x * 0.5) ** 7 - s ** 2 * 0.001
    return s + (k + 2) ** 3


def test_integer_powers_are_the_scalar_paths_multiplications():
    """``x ** k`` for a literal k >= 0 is Numba's unrolled multiplications on whole
    vectors (no call per lane): the SPMD path gives the scalar path's bits."""
    x = np.random.default_rng(4).uniform(-3, 3, 203)
    f = lw.vmap(powers, in_axes=(0, None))
    assert "SPMD" in lane_path(f, x, 3)
    with lw.config.overridden(spmd=False):
        want = lw.vmap(powers, in_axes=(0, None))(x, 3)
    assert_bitwise(f(x, 3), want, "SPMD vs scalar path")
    np.testing.assert_allclose(want, lw.vmap(powers, in_axes=(0, None), backend="python")(x, 3), rtol=1e-13)
    w = spmd.width_for(8)
    body = transform(powers, ("varying", "uniform"), (((), "float64"),), w)
    out = np.empty(w)
    asm = _compiled(spmd.plans.module_text(body), "lane_spmd", np.ones(w, np.bool_), x[:w].copy(), 3, out)
    assert_bitwise(out, want[:w])
    assert not re.search(r"call\w*\s+.*pow", asm), "x ** k should be multiplications, not pow calls"
    assert _vector_instruction_count(asm) >= 5


@pytest.mark.parametrize("spmd", [True, False])
def test_raise_and_assert_fail_the_group_and_the_host_replays_the_lane(spmd, monkeypatch):
    """``raise`` and ``assert`` keep a lane on the SPMD path: a live lane that reaches
    them fails its group, and the host replays the group's lanes for Python's
    exception (class, message, lane, line); lanes that do not reach them run as usual."""
    monkeypatch.setattr(lw.config, "spmd", spmd)
    f = lw.vmap(checked_halving, in_axes=(0, None))
    x = np.linspace(0.0, 1e6, 41)
    if spmd:
        assert "SPMD" in lane_path(f, x, 30)
        assert "m_raise(" in lw.explain(f, x, 30).source
    np.testing.assert_array_equal(f(x, 30), lw.vmap(checked_halving, in_axes=(0, None), backend="python")(x, 30))
    with pytest.raises(ValueError, match=r"too many halvings") as info:
        f(x, 10)
    assert "i0=" in str(info.value) or "i0=" in "".join(getattr(info.value, "__notes__", []))
    x[23] = -1.0
    with pytest.raises(AssertionError, match="must not be negative") as info:
        f(x, 30)
    assert "i0=23" in str(info.value) + "".join(getattr(info.value, "__notes__", []))


def elliptic_or_not(e, m):
    if e < 1.0:
        x = m
        while abs(x - e * math.sin(x) - m) > 1e-12:
            x = x - (x - e * math.sin(x) - m) / (1.0 - e * math.cos(x))
    else:
        x = m
        for _ in range(int(m * 10) % 7 + 3):
            x = x - (e * math.sinh(x) - x - m) / (e * math.cosh(x) - 1.0)
    return x


def test_auto_keeps_lanes_whose_branches_each_loop_scalar(restore_config):
    """Lanes that take different branches, each with its own loop, run both loops one
    after the other on the SPMD path; auto mode keeps them scalar (saying why), and
    spmd=True still runs them there with the same results."""
    e = np.where(np.arange(64) % 3 == 0, 1.5, 0.5)
    m = np.linspace(0.1, 3.0, 64)
    f = lw.vmap(elliptic_or_not)
    path = lane_path(f, e, m)
    assert path.startswith("lane path: scalar") and "branches each run a loop" in path, path
    restore_config.spmd = True
    g = lw.vmap(elliptic_or_not)
    assert "SPMD" in lane_path(g, e, m)
    np.testing.assert_allclose(g(e, m), f(e, m), rtol=1e-13)


def test_transform_reports_unsupported_directly():
    with pytest.raises(Unsupported, match="indexing"):
        transform(row_scan, ("uniform", "uniform"), (((), "int64"),), 8)
    # (lanewise's scalar path cannot compile recursive helpers either)
    with pytest.raises(Unsupported, match="recursion: _fact"):
        transform(recursive, ("varying",), (((), "int64"),), 8)


# ============================================================================ structure


def _vector_instruction_count(asm: str) -> int:
    machine = platform.machine().lower()
    if machine in ("x86_64", "amd64"):
        packed = r"\bv(?:mul|add|sub|div|cmp\w*|blendm)p[ds]\s.*%[xyz]mm"
        return len(re.findall(packed, asm))
    if machine in ("arm64", "aarch64"):
        return len(re.findall(r"\bf(?:mul|add|sub|div|cm\w+)\s+v\d+\.[24][ds]", asm))
    pytest.skip(f"no vector-instruction pattern for {machine}")


def _compiled(source: str, name: str, *args):
    """Compile a generated W-wide function here (a cached module holds no assembly)
    and run it once on ``args``."""
    namespace = {}
    exec("import numba\n" + source.replace(", cache=True", "").replace(spmd.plans.LINK_ONLY, ""), namespace)
    namespace[name](*args)
    (asm,) = namespace[name].inspect_asm().values()
    return asm


def _assert_vector_loop(asm):
    assert _vector_instruction_count(asm) >= 5, asm[:3000]
    scalar_fp = len(re.findall(r"\bv(?:mul|add|sub)sd\b", asm))
    assert scalar_fp == 0, "the W-wide escape loop should hold no scalar float arithmetic"


def test_compiled_w_wide_lane_holds_vector_instructions():
    case = BY_NAME["escape"]
    f = case.mapped()
    args = case.make(np.random.default_rng(0), 40)
    f(*args)
    source = executable(f).source
    assert "def lane_stream(" in source and "lane_stream(" in source.split("def lane_block(")[1]
    w = spmd.width_for(8)
    ci = np.linspace(-1, 1, 3 * w + 5)
    want = np.array([escape(-0.5, c) for c in ci])
    # streamed: slots refilled as lanes finish
    plan = spmd.Plan(w, ("uniform", "varying"), (0, 1), (((), "int64"),), "", True)
    body = spmd.transform_stream(escape, ("uniform", "varying"), ("float64",), (((), "int64"),), w, w // 4)
    out = np.zeros(ci.size, np.int64)
    text = spmd.check.stand_ins(plan) + spmd.plans.module_text(body)
    asm = _compiled(text, "lane_stream", (ci, out), 0, ci.size, -0.5)
    assert_bitwise(out, want)
    _assert_vector_loop(asm)
    # in groups of W
    body = transform(escape, ("uniform", "varying"), (((), "int64"),), w)
    out = np.empty(w, np.int64)
    asm = _compiled(spmd.plans.module_text(body), "lane_spmd", np.ones(w, np.bool_), -0.5, ci[:w].copy(), out)
    assert_bitwise(out, want[:w])
    _assert_vector_loop(asm)


def _row_pointers(rows, width):
    """The lane_spmd arguments of a row parameter: W data pointers, length, stride."""
    ptrs = np.array([r.ctypes.data for r in rows] + [0] * (width - len(rows)), np.uint64)
    return ptrs, rows.shape[1], rows.strides[1]


def test_compiled_w_wide_scan_holds_vector_instructions():
    """W3's scan over per-lane rows: the carried EMA arithmetic is packed, and each
    step reads the W rows' prices (block reads, the rows not copied)."""
    w = spmd.width_for(8, rows=True)
    prices = _walks(np.random.default_rng(5), w, 50)
    want = np.array([backtest(p) for p in prices])
    body = transform(backtest, ("row",), (((), "float64"),), w, row_dtypes=("float64",))
    assert "v_row(" in body and "for _lw_t" in body
    out = np.empty(w)
    asm = _compiled(spmd.plans.module_text(body), "lane_spmd", np.ones(w, np.bool_), *_row_pointers(prices, w), out)
    assert_bitwise(out, want)
    _assert_vector_loop(asm)


def test_masked_lanes_read_no_row():
    """Lanes outside the mask never dereference their row pointer (here null), even
    in a loop that runs past their rows: a tail group cannot fault."""
    w = 8
    rows = np.arange(3 * 25.0).reshape(3, 25)
    body = transform(first_above, ("row", "uniform"), (((0,), "int64"), ((1,), "float64")), w,
                     row_dtypes=("float64",))
    mask = np.zeros(w, np.bool_)
    mask[:3] = True
    out_i, out_v = np.full(w, -7), np.full(w, -7.0)
    _compiled(spmd.plans.module_text(body), "lane_spmd", mask, *_row_pointers(rows, w), 30.0, out_i, out_v)
    want = [first_above(r, 30.0) for r in rows]
    np.testing.assert_array_equal(out_i[:3], [i for i, _ in want])
    np.testing.assert_array_equal(out_v[:3], [v for _, v in want])


def test_auto_takes_spmd_for_a_scan_over_rows():
    """A carried loop over a per-lane row takes the SPMD path on its own (W3's lane,
    a lambda); a straight lane reading its row keeps the scalar path."""
    prices = _walks(np.random.default_rng(1), 19, 30)
    f = lw.vmap(lambda p: lw.scan(ema_step, (p[0], p[0], 0.0, 0.0, p[0]), p)[0][3])
    path = lane_path(f, prices)
    assert "SPMD on SIMD" in path and "a carried loop over a per-lane row" in path, path
    assert f"{spmd.width_for(8, rows=True)} lanes per vector step" in path
    assert_bitwise(f(prices), lw.vmap(backtest, backend="python")(prices))

    def ends(p):
        return p[-1] - p[0]

    g = lw.vmap(ends)
    assert lane_path(g, prices).startswith("lane path: scalar")
    with lw.config.overridden(spmd=True):
        h = lw.vmap(ends)
        assert "SPMD" in lane_path(h, prices)
        assert_bitwise(h(prices), g(prices))


def test_auto_keeps_light_row_loops_scalar():
    """Auto mode weighs a row loop's arithmetic per element read (spmd.row_work):
    W loads per vector step only pay for enough work per element (W6's running-sum
    search and a summing scan measured slower on the SPMD path, W3 3x faster)."""
    rows = ("p", "row")
    assert spmd.row_work(backtest, set(rows)) >= spmd.MIN_OPS_PER_ROW_READ  # W3: 11 per price
    assert spmd.row_work(first_above, set(rows)) < spmd.MIN_OPS_PER_ROW_READ  # compare + index step
    assert spmd.row_work(row_scan, set(rows)) < spmd.MIN_OPS_PER_ROW_READ
    assert spmd.row_work(counted, set(rows)) == 1  # the row scan adds; the counting scan reads no row
    assert spmd.row_work(two_loops, set(rows)) is None  # no row at all
    walks = _walks(np.random.default_rng(3), 19, 30)
    for lane, args, in_axes in [(first_above, (walks, 100.5), (0, None)), (counted, (walks,), 0)]:
        f = lw.vmap(lane, in_axes=in_axes)
        path = lane_path(f, *args)
        assert path.startswith("lane path: scalar") and "per row element it reads" in path, path
        assert_bitwise(f(*args), lw.vmap(lane, in_axes=in_axes, backend="python")(*args))


@pytest.mark.parametrize("layout", ["columns", "fortran", "strided"])
def test_rows_of_any_layout(layout):
    """Rows as columns (in_axes=1), of a Fortran array, of a strided view: every
    lane's view has its own pointer and the same length and stride."""
    x = _walks(np.random.default_rng(2), 21, 40)
    args, in_axes = {"columns": ((np.ascontiguousarray(x.T),), 1), "fortran": ((np.asfortranarray(x),), 0),
                     "strided": ((x[::2, ::3],), 0)}[layout]
    f = lw.vmap(backtest, in_axes=in_axes)
    assert "SPMD on SIMD" in lane_path(f, *args)
    assert_bitwise(f(*args), lw.vmap(backtest, in_axes=in_axes, backend="python")(*args))


def test_scalar_path_source_unchanged_when_not_chosen(restore_config):
    """With SPMD off, lane_block is the scalar per-lane loop (golden files pin its text)."""
    restore_config.spmd = False
    f = BY_NAME["collatz"].mapped()
    src = lw.explain(f, np.arange(1, 5)).source
    assert not re.search(r"lane_(spmd|stream)", src) and "r = lane(" in src


def test_disk_cache_separates_paths(cache_dir, restore_config):
    def lane_cache(x):
        n = 0
        while x > 1.0:
            x = x * 0.5
            n += 1
        return n

    f = lw.vmap(lane_cache)
    x = np.linspace(0, 50, 9)
    spmd_exe = lw.explain(f, x)
    restore_config.spmd = False
    g = lw.vmap(lane_cache)
    scalar_exe = lw.explain(g, x)
    assert re.search(r"def lane_(spmd|stream)\(", spmd_exe.source)
    assert not re.search(r"lane_(spmd|stream)", scalar_exe.source)
    assert_bitwise(f(x), g(x))


def test_python_O_drops_asserts_on_the_spmd_path_too(tmp_path):
    """Under ``python -O`` the scalar path (bytecode) has no assert; the W-wide lane,
    made from the source, must drop it too (it failed every group with an assert
    that no replay could raise)."""
    code = textwrap.dedent("""
        import numpy as np, lanewise as lw
        from raising_lanes import checked_halving
        lw.config.spmd = True
        x = np.array([-1.0, 2.0, 8.0, 3.0])
        f = lw.vmap(checked_halving, in_axes=(0, None))
        assert "SPMD" in str(lw.explain(f, x, 30))
        print(f(x, 30).tolist())
    """)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(Path(__file__).parent), os.environ.get("PYTHONPATH", "")]),
               LANEWISE_CACHE_DIR=str(tmp_path))
    out = subprocess.run([sys.executable, "-O", "-c", code], capture_output=True, text=True, env=env, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "[0, 1, 3, 2]", out.stdout


GSER = '''
import math, numpy as np, lanewise as lw

def gser(a, x):  # Numerical Recipes' series for P(a, x): lgamma has no vector form
    gln = math.lgamma(a)
    total = 1.0 / a
    delta = total
    ap = a
    for n in range(500):
        ap += 1.0
        delta *= x / ap
        total += delta
        if abs(delta) < abs(total) * 1e-15:
            return total * math.exp(-x + a * math.log(x) - gln)
    return math.nan

a = np.linspace(0.5, 20.0, 200)
got = lw.vmap(gser)(a, a * 0.5)
want = lw.vmap(gser, backend="python")(a, a * 0.5)
assert "lane path: SPMD on SIMD" in str(lw.explain(lw.vmap(gser), a, a * 0.5))
np.testing.assert_allclose(got, want, rtol=1e-13)
print("ok")
'''


def test_a_libm_call_in_a_w_wide_lane_prints_no_llvm_warnings(tmp_path):
    """A libm function lanemath does not replace (lgamma) was called from a loop marked
    for vectorising, and LLVM printed 'loop not vectorized' remarks and warnings on
    stderr at every cold compile; such calls now run lane by lane, unmarked."""
    script = tmp_path / "gser.py"
    script.write_text(GSER)
    env = dict(os.environ, LANEWISE_CACHE_DIR=str(tmp_path / "cache"))
    done = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-2000:]
    assert "not vectorized" not in done.stderr, done.stderr[-2000:]
