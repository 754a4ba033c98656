"""lanemath's public kernels compile from flattened source (lanewise.lanemath._flatten):
the same values, bit for bit, as the helpers inlined by Numba's IR inliner."""

from __future__ import annotations

import inspect

import numba
import numpy as np
import pytest

from lanewise.lanemath import _flatten
from lanewise.lanemath._public import KERNELS


def _inputs(dtype, n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    special = [0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 0.5, 2.0, np.pi / 4, np.pi, 1e-310, 5e-324,
               1e-8, 7.4e-9, 2.0 ** 30, -(2.0 ** 30) - 1, 1e300, 700.0, -745.5, 0.9999999, 1.0000001]
    mags = 10.0 ** rng.uniform(-12, 12, n) * rng.choice([-1.0, 1.0], n)
    unit = rng.uniform(-1.5, 1.5, n)
    with np.errstate(over="ignore"):  # float32: huge values become inf
        return np.concatenate([special, mags, unit]).astype(dtype)


def _runner(k, nargs: int, pair: bool):
    if pair:
        def run(x, y, o1, o2):
            for i in range(x.size):
                o1[i], o2[i] = k(x[i])
    elif nargs == 1:
        def run(x, y, o1, o2):
            for i in range(x.size):
                o1[i] = k(x[i])
    else:
        def run(x, y, o1, o2):
            for i in range(x.size):
                o1[i] = k(x[i], y[i])
    return numba.njit(error_model="numpy")(run)


def _evaluate(k, py_func, dtype, x, y):
    nargs = len(inspect.signature(py_func).parameters)
    pair = nargs == 1 and "sincos" in py_func.__qualname__
    o1, o2 = np.empty_like(x), np.empty_like(x)
    _runner(k, nargs, pair)(x, y, o1, o2)
    return (o1, o2) if pair else (o1,)


CASES = [(name, width) for name in sorted(KERNELS) for width in (64, 32)]


@pytest.mark.parametrize("name,width", CASES, ids=[f"{n}-{w}" for n, w in CASES])
def test_flattened_kernel_gives_the_same_bits(name, width):
    public = KERNELS[name][0 if width == 64 else 1]
    flat = public.dispatcher.py_func
    original = public.kernel.py_func
    # the reference: the kernel as written, its helpers inlined by Numba
    reference = numba.njit(error_model="numpy", fastmath=False, forceinline=True)(original)
    dtype = np.float64 if width == 64 else np.float32
    x, y = _inputs(dtype, 3000, 1), _inputs(dtype, 3000, 2)[::-1].copy()
    got = _evaluate(public.dispatcher, flat, dtype, x, y)
    want = _evaluate(reference, original, dtype, x, y)
    for g, w in zip(got, want, strict=True):
        bits = np.uint64 if width == 64 else np.uint32
        same = (g.view(bits) == w.view(bits)) | (np.isnan(g) & np.isnan(w))
        assert same.all(), (name, x[~same][:5], g[~same][:5], w[~same][:5])


def test_public_kernels_are_flattened():
    flattened = [p for pair in KERNELS.values() for p in pair if p.dispatcher.py_func is not p.kernel.py_func]
    assert len(flattened) >= 0.9 * 2 * len(KERNELS)
    cos = KERNELS["cos"][0].dispatcher.py_func
    assert cos.__wrapped__ is KERNELS["cos"][0].kernel.py_func
    assert "reduce_cw" not in cos.__globals__ and "_cos_slow" in cos.__globals__  # a call kept


def _twice(a):
    return a + a


def _pick(a):
    b = _twice_jit(a)
    return b if a > 0 else -b


_twice_jit = numba.njit(inline="always")(_twice)
FLAG = False


def _user(x, n):
    """A docstring, dropped."""
    y = _pick_jit(x) + _twice_jit(x)       # nested helpers, inlined in order
    z = _twice_jit(x) if x > 1 else 0.0    # one branch only: stays a call
    while _twice_jit(n) > 4:               # re-evaluated each time: stays a call
        n -= 1
    if FLAG:
        y = -1.0                           # a constant test: only the taken branch is kept
    return y + z + n


_pick_jit = numba.njit(inline="always")(_pick)


def test_flatten_inlines_the_calls_that_always_run():
    flat = _flatten.flatten(_user)
    assert flat is not _user and flat.__wrapped__ is _user
    names = set(flat.__code__.co_names)
    assert "_pick_jit" not in names and "FLAG" not in names and "_twice_jit" in names
    for x, n in [(0.5, 9), (-2.0, 3), (3.0, 1)]:
        assert flat(x, n) == _user(x, n) == numba.njit(flat)(x, n)


def test_flatten_leaves_a_function_it_cannot_handle():
    def with_lambda(x):
        f = lambda v: v  # noqa: E731
        return _twice_jit(f(x))

    def plain(x):
        return x + 1

    assert _flatten.flatten(with_lambda) is with_lambda
    assert _flatten.flatten(plain) is plain


def test_library_function_ir_reads_the_same_ir_as_the_lane_front_end():
    # flatten reads lanemath's kernels and helpers by their own lines (build.library_function_ir),
    # not by compiling their whole files: the IR must be the one function_ir gives
    from lanewise.lane.ir import build, nodes
    from lanewise.lane.ir.passes.walk import walk

    todo = [p.kernel.py_func for pair in KERNELS.values() for p in pair]
    seen = set()
    while todo:
        fn = todo.pop()
        if fn in seen or fn.__name__ == "<lambda>":
            continue
        seen.add(fn)
        made = build.library_function_ir(fn)
        assert made == build.function_ir(fn) and made.loc == build.function_ir(fn).loc, fn.__qualname__
        todo += [nodes.called(p).py_func for p in walk(made) if isinstance(p, nodes.Prim)
                 and p.op.startswith("call:") and hasattr(nodes.called(p), "py_func")]
    assert len(seen) > 80  # every kernel and the helpers they reach
