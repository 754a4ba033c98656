"""The backend conformance suite: one set of cases, run on every registered backend.

Each case runs a lane program on the backend under test and on the ``python``
reference and compares the results (or the error raised).  A new backend is
tested by adding its entry to ``lanewise.backends.REGISTRY``:
``tests/test_conformance.py`` parametrises these cases over the registry
(skipping backends that cannot run here), and ``tests/cuda/test_cuda_conformance.py``
runs them for ``cuda`` under numba-cuda's simulator.

The lanes stay within what every backend supports (CUDA lanes cannot allocate
except in the ``v = np.zeros(...); fill; return v`` form, and ``lw.scan`` inside
them returns no stacked ``ys``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import numpy as np
import pytest

import lanewise as lw
from corpus import benchmark_function, escape
from lanewise import backends, pytree
from lanewise.backends.protocol import MEMBERS, conforms

#: W6's lane: the first index where a row's running sum passes a threshold.
first_pass = benchmark_function("w6_first_pass", "first_pass")


def to_numpy(tree):
    """Results as NumPy: dask arrays computed, device arrays copied to the host."""
    leaves, spec = pytree.flatten(tree)
    out = []
    for leaf in leaves:
        if hasattr(leaf, "compute"):
            leaf = leaf.compute()
        if hasattr(leaf, "copy_to_host"):
            leaf = leaf.copy_to_host()
        out.append(np.asarray(leaf))
    return pytree.unflatten(spec, out)


def assert_same(got, want, exact=True):
    g, gs = pytree.flatten(to_numpy(got))
    w, ws = pytree.flatten(to_numpy(want))
    assert gs == ws, (gs, ws)
    for a, b in zip(g, w, strict=True):
        assert a.shape == b.shape and a.dtype == b.dtype, (a.shape, a.dtype, b.shape, b.dtype)
        if exact and a.dtype.kind == "c":  # each part: inf+nanj is not nan+nanj
            np.testing.assert_array_equal(a.real, b.real)
            np.testing.assert_array_equal(a.imag, b.imag)
        elif exact:
            np.testing.assert_array_equal(a, b)
        else:
            np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)


# ----------------------------------------------------------------------------- lanes


def poly(x, y):
    r = x * x + y * y
    return math.cos(r) / (1 + r)


def pair(x, k):
    return x * k, x > 0.5


def cumulative(row):
    v = np.zeros(row.shape[0])
    s = 0.0
    for i in range(row.shape[0]):
        s += row[i]
        v[i] = s
    return v


def ema_step(state, price):
    fast, n = state
    return (fast + 0.25 * (price - fast), n + 1.0), None


def ema_last(row):
    return lw.scan(ema_step, (row[0], 0.0), row)[0][0]


def checked_sqrt(x):
    if x < 0:
        raise ValueError("negative input")
    return math.sqrt(x)


def absmax(a, b):
    return a if abs(a) >= abs(b) else b


def hash_mix(v):
    """uint64 bit mixing with Python int constants, which NumPy 2 makes uint64 (issue 42)."""
    h = v * 6364136223846793005 + 1442695040888963407
    h = h ^ (h >> 33)
    return h // 3, h % 1000, divmod(h, 10)[1], 3 - (h & 255)


def wide_compare(n, v, k):
    """int64 against constants >= 2**63, uint64 against int64: exact, as NumPy 2 compares."""
    return n < 2**63, n == 2**63, n != 18446744073709551615, 2**63 > n, v == k, v < k, k <= v


def complex_quotients(z, w, x):
    """Complex division by zero gives NumPy's IEEE values, no exception (issue 42)."""
    return z / w, z / 0.0, x / w


def unused_int(a, k):
    """A float32 result, whatever the unused int64 argument ``k`` (issue 42)."""
    return a * 3


U64 = np.array([2**64 - 1, 2**63, 2**63 - 1, 2**60 + 1, 2**53 + 1, 7, 0], np.uint64)
I64 = np.array([2**63 - 1, -2**63, -1, 2**60, 2**53, 0, 5], np.int64)


def _complex_args():
    z = np.array([1 + 2j, 0j, -1 + 0j, 1 + 0j, 3 - 4j, complex(np.inf, 1), complex(np.nan, 0)])
    w = np.array([0j, 0j, 0j, 1j, 0j, 2 + 1j, 0j])
    return z, w, np.array([1.0, 0.0, -1.0, 2.0, -0.0, np.inf, np.nan])


def _numpy(fn):
    """``fn`` on whole NumPy arrays, warnings off: the independent reference of a case."""
    def reference(*args):
        with np.errstate(all="ignore"):
            return fn(*args)
    return reference


# ----------------------------------------------------------------------------- cases


@dataclass(frozen=True)
class Case:
    name: str
    make: Callable  # backend name -> the mapped (or reduced) function
    args: Callable  # () -> the arguments
    exact: bool = True  # bitwise equal to the reference (else within 1e-12)
    numpy: Callable | None = None  # arguments -> NumPy 2's result, which the reference must give too


def _grid(backend):
    return lw.vmap(lw.vmap(poly, in_axes=(None, 0)), in_axes=(0, None), backend=backend)


def _rng():
    return np.random.default_rng(7)


MAP_CASES = [
    Case("grid", _grid, lambda: (np.linspace(-2, 2, 13), np.linspace(-1, 1, 9)), exact=False),
    Case("divergent", lambda b: lw.vmap(escape, in_axes=(0, None), backend=b),
         lambda: (np.linspace(-2, 0.6, 41), 0.3)),
    Case("tuple_out", lambda b: lw.vmap(pair, in_axes=(0, None), backend=b), lambda: (_rng().random(17), 3.0)),
    Case("out_axes", lambda b: lw.vmap(lw.vmap(poly, in_axes=(0, None)), in_axes=(None, 0), out_axes=1,
                                       backend=b), lambda: (np.linspace(0, 1, 5), np.linspace(0, 2, 7)),
         exact=False),
    Case("rows", lambda b: lw.vmap(first_pass, in_axes=(0, None), backend=b),
         lambda: (_rng().random((23, 16)), 4.0)),
    Case("columns", lambda b: lw.vmap(first_pass, in_axes=(1, None), backend=b),
         lambda: (_rng().random((16, 11)), 3.0)),
    Case("lane_arrays", lambda b: lw.vmap(cumulative, backend=b), lambda: (_rng().random((6, 5)),)),
    Case("scan_in_lanes", lambda b: lw.vmap(ema_last, backend=b), lambda: (_rng().random((9, 12)),),
         exact=False),
    Case("size_zero", lambda b: lw.vmap(poly, in_axes=(0, None), backend=b), lambda: (np.zeros(0), 1.0)),
    # Integer and complex edges (issue 42), against NumPy 2 as well as the reference.
    Case("uint64_with_literals", lambda b: lw.vmap(hash_mix, backend=b), lambda: (U64,),
         numpy=_numpy(lambda v: (lambda h: (h // 3, h % 1000, np.divmod(h, 10)[1], 3 - (h & 255)))(
             (lambda h: h ^ (h >> 33))(v * 6364136223846793005 + 1442695040888963407)))),
    Case("wide_integer_compares", lambda b: lw.vmap(wide_compare, backend=b),
         lambda: (I64, U64, np.roll(I64, 1)),
         numpy=_numpy(lambda n, v, k: (n < 2**63, n == 2**63, n != 18446744073709551615, 2**63 > n, v == k,
                                       v < k, k <= v))),
    Case("complex_division_by_zero", lambda b: lw.vmap(complex_quotients, backend=b), _complex_args,
         numpy=_numpy(lambda z, w, x: (z / w, z / 0.0, x / w))),
    Case("float32_unused_int64", lambda b: lw.vmap(unused_int, backend=b),
         lambda: (np.linspace(-1, 1, 9, dtype=np.float32), np.arange(9)), numpy=_numpy(lambda a, k: a * 3)),
]

REDUCE_CASES = [
    Case("sum", lambda b: lw.reduce(_grid(b), "sum"), lambda: (np.linspace(-2, 2, 13), np.linspace(-1, 1, 9)),
         exact=False),
    Case("max_axis", lambda b: lw.reduce(_grid(b), "max", axis=1),
         lambda: (np.linspace(-2, 2, 13), np.linspace(-1, 1, 9)), exact=False),
    Case("argmin", lambda b: lw.reduce(lw.vmap(escape, in_axes=(0, None), backend=b), "argmin"),
         lambda: (np.linspace(-2, 0.6, 41), 0.3)),
    Case("any_all", lambda b: lw.reduce(lw.vmap(pair, in_axes=(0, None), backend=b), "any"),
         lambda: (_rng().random(17), 3.0)),
    Case("monoid", lambda b: lw.reduce(lw.vmap(lambda v: v - 0.5, backend=b), lw.Monoid(absmax, 0.0)),
         lambda: (_rng().random(33),)),
    # Every value equal to the fold's identity: NumPy's answer is index 0 (issue 14, item 3).
    Case("argmax_all_false", lambda b: lw.reduce(lw.vmap(lambda v: v > 5.0, backend=b), "argmax"),
         lambda: (np.zeros(19),)),
    Case("argmin_all_inf", lambda b: lw.reduce(lw.vmap(lambda v: v + np.inf, backend=b), "argmin"),
         lambda: (np.zeros(7),)),
    Case("argmax_int_min", lambda b: lw.reduce(lw.vmap(lw.vmap(lambda v: v), backend=b), "argmax", axis=1),
         lambda: (np.full((3, 5), np.iinfo(np.int64).min),)),
    Case("argmin_uint_max", lambda b: lw.reduce(lw.vmap(lambda v: v, backend=b), "argmin"),
         lambda: (np.full(6, np.iinfo(np.uint8).max, np.uint8),)),
]


def run_case(case: Case, backend: str):
    """``case`` on ``backend`` against the reference; a backend that computes 32-bit
    numbers only (not ``wide``: tpu) runs the case's 32-bit variant (:func:`run_narrow`)."""
    if not backends.REGISTRY[backend].wide:
        return run_narrow(case, backend)
    got = case.make(backend)(*case.args())
    want = case.make("python")(*case.args())
    assert_same(got, want, case.exact)
    if case.numpy is not None:
        assert_same(want, case.numpy(*case.args()), case.exact)


# ----------------------------------------------------------------------------- 32-bit variant

#: float32 tolerance of a 32-bit backend against the reference (which may compute in
#: float64 from the same float32 inputs: math.cos of a float32 gives a Python float).
RTOL32 = 2e-5
_I32 = np.iinfo(np.int32)


def narrowed(value):
    """``value`` (an argument tree) in 32 bits, as a 32-bit backend takes it: float64 ->
    float32, int64 and uint64 -> int32 clipped to its range (the tpu's own advice for
    unsigned arguments), complex128 -> complex64; Python floats and ints -> float32 and
    int32 scalars, so that the reference computes from the very same numbers."""
    if isinstance(value, tuple):
        return tuple(narrowed(v) for v in value)
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, float):
        return np.float32(value)
    if isinstance(value, int):
        return np.int32(np.clip(value, _I32.min, _I32.max))
    a = np.asarray(value)
    if a.dtype.kind in "iu" and a.dtype.itemsize == 8:
        return np.clip(a, max(_I32.min, np.iinfo(a.dtype).min), _I32.max).astype(np.int32)
    wider = {"float64": np.float32, "complex128": np.complex64}.get(a.dtype.name)
    return a.astype(wider) if wider is not None else value


def wrapped32(values: np.ndarray) -> np.ndarray:
    """Integer results as int32 arithmetic gives them (docs/tpu.md, T06: overflow wraps at
    32 bits): the reference's exact integers modulo 2**32.  Equal to wrapping after every
    operation for +, -, * (a ring homomorphism); lanes with //, % or comparisons keep
    their values in int32's range, where this is the identity."""
    return values.astype(np.int64).astype(np.int32)


def assert_same_32(got, want):
    """A 32-bit backend's results against the reference on the same 32-bit inputs: same
    structure and shapes; floats within a float32 tolerance (float32 where the reference
    computed float64), bools exactly, integers exactly after the 32-bit wrap."""
    g, gs = pytree.flatten(to_numpy(got))
    w, ws = pytree.flatten(to_numpy(want))
    assert gs == ws, (gs, ws)
    for a, b in zip(g, w, strict=True):
        assert a.shape == b.shape, (a.shape, b.shape)
        kinds = {a.dtype.kind, b.dtype.kind}
        assert a.dtype.kind == b.dtype.kind or kinds <= set("iu"), (a.dtype, b.dtype)
        if b.dtype.kind == "f":
            assert a.dtype.itemsize <= 4, a.dtype
            np.testing.assert_allclose(a, b.astype(np.float32), rtol=RTOL32, atol=RTOL32, equal_nan=True)
        elif b.dtype.kind in "iu":
            np.testing.assert_array_equal(a, wrapped32(b) if a.dtype.itemsize == 4 else b)
        else:
            np.testing.assert_array_equal(a, b)


def run_narrow(case: Case, backend: str):
    """``case``'s 32-bit variant: its arguments :func:`narrowed`, run on ``backend`` and on
    the reference, compared by :func:`assert_same_32`."""
    args = narrowed(case.args())
    assert_same_32(case.make(backend)(*args), case.make("python")(*args))


def run_protocol(backend: str):
    module = backends.get(backend)
    missing = [m for m in MEMBERS if not hasattr(module, m)]
    assert conforms(module), f"backend {backend!r} lacks {missing}"
    assert module.NAME == backend and module.SCAN in ("compiled", "reference")
    assert backends.select((1.0,), {}, backend) is module


def _sized(backend: str, value):
    """``value`` as ``backend`` computes it: :func:`narrowed` on a 32-bit backend."""
    return value if backends.REGISTRY[backend].wide else narrowed(value)


def run_out(backend: str):
    """out= fills the caller's arrays (or, where the registry says it cannot, a clear OutputError)."""
    mapped = lw.vmap(pair, in_axes=(0, None), backend=backend)
    x = _sized(backend, _rng().random(11))
    out = (np.empty(11, x.dtype), np.empty(11, bool))
    if not backends.REGISTRY[backend].writes_out:
        with pytest.raises(lw.OutputError):
            mapped(x, 2.0, out=out)
        return
    result = mapped(x, 2.0, out=out)
    assert result[0] is out[0] and result[1] is out[1]
    assert_same(out, lw.vmap(pair, in_axes=(0, None), backend="python")(x, 2.0))
    with pytest.raises(lw.OutputError, match="out="):
        mapped(x, 2.0, out=(np.empty(3), np.empty(11, bool)))


def run_lane_error(backend: str):
    """A lane's own exception reaches the caller, noting the lane's index."""
    with pytest.raises(ValueError, match="negative input") as info:
        to_numpy(lw.vmap(checked_sqrt, backend=backend)(_sized(backend, np.array([1.0, 4.0, -1.0, 9.0]))))
    assert any("i0=2" in note for note in getattr(info.value, "__notes__", []))


def run_explain(backend: str):
    module = backends.get(backend)
    mapped = lw.vmap(poly, in_axes=(0, None), backend=backend)
    call = module.bind_call(mapped, (_sized(backend, np.ones(4)), 1.0), {})
    lines = module.explain(mapped.executable(module, call), call)
    assert lines and all(isinstance(line, str) and line for line in lines)
