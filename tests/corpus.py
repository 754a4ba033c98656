"""Shared corpus of lane functions, their JAX twins, and hypothesis strategies.

A *lane* is plain Python for one data point, compiled by lanewise.  Its *twin*
computes the same thing with ``jax.numpy``/``lax`` so that ``jax.vmap(twin)`` is
the semantic oracle (data-dependent branches become ``jnp.where``/``while_loop``).

Compile budget: every distinct (lane, dtype, rank, layout, read-only, axes)
signature costs a Numba compile of roughly a second, so the lanes live here at
module level (one fingerprint each, shared by every test module through the
session's disk cache) and strategies draw dtypes and layouts from small sets.
"""

from __future__ import annotations

import cmath
import collections
import importlib
import inspect
import math
import os
import pathlib
import sys
from dataclasses import dataclass, field
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np
import optree
from hypothesis import strategies as st
from jax import lax

import lanewise as lw


def examples(n: int) -> int:
    """``n`` hypothesis examples under the default profile, 10x under 'thorough'."""
    return n * 10 if os.environ.get("LANEWISE_HYPOTHESIS_PROFILE") == "thorough" else n


ALL_DTYPES = ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
              "float32", "float64", "complex64", "complex128")

P = collections.namedtuple("P", "a b")

# ============================================================================ lanes
# Each lane is followed by its JAX twin.


def arith(x, y):
    return x * x + 3 * y - 1


def branchy(x):
    if x > 2:
        return x - 2
    elif x < -1:
        return -x
    else:
        return x * 0.5


def branchy_jax(x):
    return jnp.where(x > 2, x - 2, jnp.where(x < -1, -x, x * 0.5))


def loops(x, n):
    acc = 0.0
    for k in range(n):
        if k % 3 == 1:
            continue
        acc += x / (k + 1)
        if acc > 2.0:
            break
    return acc


def loops_jax(x, n):
    def body(k, carry):
        acc, done = carry
        skip = (k % 3 == 1) | done
        new = jnp.where(skip, acc, acc + x / (k + 1))
        return new, done | (~skip & (new > 2.0))

    zero = jnp.zeros(jnp.shape(x), jnp.result_type(x, 1.0))
    return lax.fori_loop(0, n, body, (zero, jnp.zeros(jnp.shape(x), bool)))[0]


def collatz(n):
    steps = 0
    while n != 1:
        if steps >= 60:
            break
        if n % 2 == 0:
            n = n // 2
        else:
            n = 3 * n + 1
        steps += 1
    return steps


def collatz_jax(n):
    def cond(c):
        m, s = c
        return (m != 1) & (s < 60)

    def body(c):
        m, s = c
        return jnp.where(m % 2 == 0, m // 2, 3 * m + 1), s + 1

    n = jnp.asarray(n)
    return lax.while_loop(cond, body, (n, jnp.zeros_like(n)))[1]


def escape(cr, ci, max_iter=40):
    zr = zi = 0.0
    for n in range(max_iter):
        zr, zi = zr * zr - zi * zi + cr, 2 * zr * zi + ci
        if zr * zr + zi * zi > 4.0:
            return n
    return max_iter


def escape_jax(cr, ci, max_iter=40):
    def cond(c):
        n, zr, zi, done = c
        return (n < max_iter) & ~done

    def body(c):
        n, zr, zi, done = c
        zr, zi = zr * zr - zi * zi + cr, 2 * zr * zi + ci
        esc = zr * zr + zi * zi > 4.0
        return jnp.where(esc, n, n + 1), zr, zi, esc

    zero = jnp.zeros(jnp.broadcast_shapes(jnp.shape(cr), jnp.shape(ci)), jnp.float64)
    init = (jnp.zeros(zero.shape, jnp.int64), zero, zero, jnp.zeros(zero.shape, bool))
    return lax.while_loop(cond, body, init)[0]


def sincos(x):
    return math.sin(x), math.cos(x)


def sincos_jax(x):
    return jnp.sin(x), jnp.cos(x)


def cplx(z):
    return cmath.exp(z) * z.conjugate() + cmath.sqrt(z)


def cplx_jax(z):
    return jnp.exp(z) * jnp.conj(z) + jnp.sqrt(z)


def npfuncs(x):
    return np.tanh(x) + np.arctan2(x, 2.0) + np.hypot(x, 1.5) + np.exp(-x * x)


def npfuncs_jax(x):
    return jnp.tanh(x) + jnp.arctan2(x, 2.0) + jnp.hypot(x, 1.5) + jnp.exp(-x * x)


def _sq(v):  # plain helpers: no decorator, compiled because a lane calls them
    return v * v


def _clip(v, lo, hi):
    if v < lo:
        return lo
    if v > hi:
        return hi
    return v


def helper(x, y):
    return _clip(_sq(x) - y, -2.0, 2.0)


def helper_jax(x, y):
    return jnp.clip(x * x - y, -2.0, 2.0)


def make_affine(scale, shift, inner):
    def affine_closure(x):  # closes over two constants and a plain helper
        return inner(x) * scale + shift
    return affine_closure


closure = make_affine(2.5, -1.0, _sq)
closure_jax = make_affine(2.5, -1.0, lambda v: v * v)


def rownorm(row):
    s = 0.0
    for i in range(row.shape[0]):
        s += row[i] * row[i]
    return math.sqrt(s)


def rownorm_jax(row):
    return jnp.sqrt(jnp.sum(row * row))


def first_above(row, t):
    for i in range(row.shape[0]):
        if row[i] > t:
            return i
    return -1


def first_above_jax(row, t):
    hit = row > t
    return jnp.where(jnp.any(hit), jnp.argmax(hit), -1)


def dot(a, b):
    s = 0
    for i in range(a.shape[0]):
        s += a[i] * b[i]
    return s


def dot_jax(a, b):
    return jnp.sum(a * b, dtype=jnp.result_type(a, b))  # the lane accumulates in the inputs' type


def scale_row(row, s):
    return row * s


def row_and_head(row, s):
    return row * s, row[0] - s


def ntlane(p):
    return P(p.a * p.b, p.a - p.b)


def logic(a, b):
    return (a and not b) or (b and not a)


def logic_jax(a, b):
    return jnp.logical_xor(a, b)


def axpy(a, x, y):
    return a * x + y


def poly3(x, y, z):
    return x * y - z * 2 + 1


# ============================================================================ corpus


@dataclass(frozen=True)
class Entry:
    """One lane function and everything needed to test it against JAX."""

    name: str
    lane: Callable
    twin: Callable
    kinds: tuple[str, ...]  # per arg: "s" scalar, "r" 1-d row, "k" static Python int
    dtypes: tuple[str, ...]  # first is the canonical one
    out_ranks: tuple[int, ...] = (0,)  # lane rank of each output leaf
    out_node: Callable | None = None  # builds an out_axes prefix from per-leaf ints
    domain: str = "real"  # how argument values are drawn (see lane_values)
    static: tuple[int, int] = (0, 8)  # range of "k" arguments

    def __repr__(self) -> str:
        return self.name


def _tuple(axes):
    return tuple(axes)


CORPUS = [
    Entry("arith", arith, arith, ("s", "s"), ("float64", "float32", "int64", "int16", "complex128")),
    # (int arguments would make branchy/helper's result type depend on the branch taken:
    # see test_branch_dependent_result_dtype)
    Entry("branchy", branchy, branchy_jax, ("s",), ("float64", "float32")),
    Entry("loops", loops, loops_jax, ("s", "k"), ("float64", "int64")),
    Entry("collatz", collatz, collatz_jax, ("s",), ("int64", "int32"), domain="posint"),
    Entry("escape", escape, escape_jax, ("s", "s"), ("float64",), domain="quarter"),
    Entry("sincos", sincos, sincos_jax, ("s",), ("float64", "float32"), out_ranks=(0, 0), out_node=_tuple),
    Entry("cplx", cplx, cplx_jax, ("s",), ("complex128", "complex64"), domain="nonreal"),
    Entry("npfuncs", npfuncs, npfuncs_jax, ("s",), ("float64", "float32")),
    Entry("helper", helper, helper_jax, ("s", "s"), ("float64", "float32")),
    Entry("closure", closure, closure_jax, ("s",), ("float64", "int32")),
    Entry("rownorm", rownorm, rownorm_jax, ("r",), ("float64", "float32")),
    Entry("first_above", first_above, first_above_jax, ("r", "s"), ("float64", "int64")),
    Entry("dot", dot, dot_jax, ("r", "r"), ("float64", "int32", "complex128")),
    Entry("scale_row", scale_row, scale_row, ("r", "s"), ("float64", "float32"), out_ranks=(1,)),
    Entry("row_and_head", row_and_head, row_and_head, ("r", "s"), ("float64",), out_ranks=(1, 0),
          out_node=_tuple),
    Entry("logic", logic, logic_jax, ("s", "s"), ("bool",)),
]
BY_NAME = {e.name: e for e in CORPUS}

# ============================================================================ values


def lane_values(rng: np.random.Generator, shape, dtype, domain: str = "real") -> np.ndarray:
    """A C-contiguous array of ``shape`` and ``dtype`` drawn from ``domain``."""
    dtype = np.dtype(dtype)
    shape = tuple(shape)
    if domain == "posint":
        return rng.integers(1, 300, size=shape).astype(dtype)
    if domain == "quarter":  # exact in binary: escape counts do not hinge on rounding
        return (rng.integers(-8, 5, size=shape) * 0.25).astype(dtype)
    if dtype.kind == "b":
        return rng.integers(0, 2, size=shape).astype(bool)
    if dtype.kind == "i":
        return rng.integers(-20, 21, size=shape).astype(dtype)
    if dtype.kind == "u":
        return rng.integers(0, 41, size=shape).astype(dtype)
    if dtype.kind == "f":
        return rng.uniform(-3, 3, size=shape).astype(dtype)
    re = rng.uniform(-2, 2, size=shape)
    im = rng.uniform(0.1, 2, size=shape) * rng.choice([-1, 1], size=shape)
    if domain != "nonreal":
        im = rng.uniform(-2, 2, size=shape)
    return (re + 1j * im).astype(dtype)


def python_scalar(value: np.ndarray):
    """The Python scalar (bool/int/float/complex) equal to a 0-d value."""
    return np.asarray(value).item()


@st.composite
def array_view(draw, values: np.ndarray, allow_list: bool = False, allow_readonly: bool = True):
    """``values`` re-laid out: C, Fortran, transposed, strided (incl. negative), read-only, list.

    Returns ``(for_lanewise, for_jax)``: equal contents, possibly different objects.
    """
    ndim = values.ndim
    styles = ["C", "step"] + (["F", "T"] if ndim >= 2 else []) + (["list"] if allow_list else [])
    style = draw(st.sampled_from(styles))
    if style == "list":
        return values.tolist(), values
    if style == "C":
        arr = values.copy()
    elif style == "F":
        arr = np.asfortranarray(values)
    elif style == "T":
        perm = draw(st.permutations(range(ndim)))
        inv = np.argsort(perm)
        arr = np.ascontiguousarray(values.transpose(inv)).transpose(perm)
    else:
        steps = [draw(st.sampled_from([1, 2, -1, -2, 3])) for _ in range(ndim)]
        base = np.zeros([abs(s) * n + 1 for s, n in zip(steps, values.shape)], values.dtype)
        arr = base[tuple(slice(None, None, s) if s < 0 else slice(0, None, s) for s in steps)]
        arr = arr[tuple(slice(0, n) for n in values.shape)]
        arr[...] = values
    assert np.array_equal(arr, values) and arr.shape == values.shape
    if allow_readonly and draw(st.booleans()):
        arr.flags.writeable = False
    return arr, values


# ============================================================================ nests


@dataclass
class Nest:
    """A drawn nest of vmaps and arguments for it."""

    levels: list[dict]  # outermost first: in_axes, out_axes, axis_size
    args: list  # positional, for lanewise
    jax_args: list
    kwargs: dict = field(default_factory=dict)
    jax_kwargs: dict = field(default_factory=dict)
    dtype: str = "float64"
    sizes: tuple = ()

    def __repr__(self) -> str:
        def show(a):
            if isinstance(a, np.ndarray):
                return (f"array({a.dtype}, shape={a.shape}, strides={a.strides}, "
                        f"writeable={a.flags.writeable})")
            return repr(a)
        return (f"Nest(levels={self.levels}, sizes={self.sizes}, args=[{', '.join(map(show, self.args))}], "
                f"kwargs={ {k: show(v) for k, v in self.kwargs.items()} })")


def build(vmap, fun, levels, **kw):
    """``vmap`` applied once per level (levels outermost first)."""
    for spec in reversed(levels):
        fun = vmap(fun, in_axes=spec["in_axes"], out_axes=spec["out_axes"],
                   axis_size=spec.get("axis_size"), **kw)
    return fun


@st.composite
def nests(draw, kinds, dtypes, names=None, out_ranks=(0,), out_node=None, domain="real",
          static=(0, 8), min_depth=1, max_depth=3, min_size=1, max_size=4, row_len=None):
    """A random nest of ``vmap`` levels over a lane with argument ``kinds`` (see Entry).

    ``names`` (the lane's parameter names) lets trailing arguments be passed as
    keywords, which every level maps over axis 0 (JAX's rule).
    """
    depth = draw(st.integers(min_depth, max_depth))
    sizes = tuple(draw(st.integers(min_size, max_size)) for _ in range(depth))
    dtype = draw(st.sampled_from(dtypes))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    row = row_len if row_len is not None else draw(st.integers(1, 4))
    n = len(kinds)
    # trailing mappable arguments may be passed as keywords (mapped on axis 0 at every level)
    n_kw = 0
    if names is not None:
        while n_kw < n and kinds[n - 1 - n_kw] in "sr" and draw(st.booleans()):
            n_kw += 1
    n_pos = n - n_kw
    # Draws are arranged so that hypothesis's first (simplest) example is the
    # canonical signature (depth 1, every argument mapped on axis 0, C layout,
    # first dtype, int out_axes): its compile is shared with test_backends.
    mapped = [[not draw(st.booleans()) if kinds[i] != "k" else False for _ in range(depth)]
              for i in range(n_pos)]
    in_axes = [[None] * n_pos for _ in range(depth)]
    axis_sizes = [None] * depth
    for lv in range(depth):
        if n_kw == 0 and not any(mapped[i][lv] for i in range(n_pos)):
            mappable = [i for i in range(n_pos) if kinds[i] != "k"]
            if mappable and draw(st.booleans()):
                mapped[draw(st.sampled_from(mappable))][lv] = True
            else:
                axis_sizes[lv] = sizes[lv]
        elif draw(st.integers(0, 4)) == 4:
            axis_sizes[lv] = sizes[lv]  # redundant but consistent: allowed
    allow_list = dtype in ("float64", "int64", "bool", "complex128")
    args, jargs = [], []
    for i in range(n_pos):
        kind = kinds[i]
        if kind == "k":
            v = draw(st.integers(*static))
            args.append(v)
            jargs.append(v)
            continue
        lane_rank = 1 if kind == "r" else 0
        levels_here = [lv for lv in range(depth) if mapped[i][lv]]
        ndim = lane_rank + len(levels_here)
        shape = [None] * ndim
        remaining = list(range(ndim))
        for lv in levels_here:
            a = draw(st.integers(-len(remaining), len(remaining) - 1))
            shape[remaining.pop(a % len(remaining))] = sizes[lv]
            in_axes[lv][i] = a
        for d in remaining:
            shape[d] = row
        values = lane_values(rng, shape, dtype, domain)
        if ndim == 0:
            style = draw(st.sampled_from(["python", "0-d"]))
            v = python_scalar(values) if style == "python" else values
            args.append(v)
            jargs.append(v)
        else:
            a, j = draw(array_view(values, allow_list=allow_list))
            args.append(a)
            jargs.append(j)
    kwargs, jkwargs = {}, {}
    for i in range(n_pos, n):
        lane_rank = 1 if kinds[i] == "r" else 0
        values = lane_values(rng, sizes + (row,) * lane_rank, dtype, domain)
        a, j = draw(array_view(values))
        kwargs[names[i]], jkwargs[names[i]] = a, j
    levels = []
    out_rank = list(out_ranks)
    out_per_level = []
    for lv in reversed(range(depth)):  # innermost first: each adds one axis to every output
        per_leaf = [draw(st.integers(-(r + 1), r)) for r in out_rank]
        out_rank = [r + 1 for r in out_rank]
        if out_node is None:
            spec = per_leaf[0]
        elif len(set(per_leaf)) == 1 and not draw(st.booleans()):
            spec = per_leaf[0]
        else:
            spec = out_node(per_leaf)
        out_per_level.append(spec)
    out_per_level.reverse()
    for lv in range(depth):
        spec = tuple(in_axes[lv])
        if n_pos and len(set(spec)) == 1 and draw(st.booleans()):
            spec = spec[0]  # an int (or None) broadcast to every positional argument
        levels.append(dict(in_axes=spec, out_axes=out_per_level[lv], axis_size=axis_sizes[lv]))
    return Nest(levels, args, jargs, kwargs, jkwargs, dtype, sizes)


# ============================================================================ checks


def tolerance(dtype, scale: float = 1.0, loose: bool = False):
    """(rtol, atol) for comparing results of ``dtype`` whose magnitude is ~``scale``."""
    dtype = np.dtype(dtype)
    if dtype.kind not in "fc":
        return 0.0, 0.0
    eps = 2e-5 if dtype in (np.float32, np.complex64) else (1e-9 if loose else 1e-12)
    return eps, eps * max(1.0, scale)


def assert_trees_match(got, want, *, loose: bool = True, ints: str = "exact", what: str = ""):
    """Same pytree structure, NumPy arrays with equal shapes, dtypes and values.

    ``ints="values"`` compares integer results by value only (any integer width
    or signedness), for comparisons against JAX where only the dedicated dtype
    tests pin integer widths; floats, complex and bools always match exactly.
    """
    g_leaves, g_tree = optree.tree_flatten(got)
    w_leaves, w_tree = optree.tree_flatten(want)
    assert g_tree == w_tree, f"{what}: structure {g_tree} != {w_tree}"
    for k, (g, w) in enumerate(zip(g_leaves, w_leaves)):
        assert isinstance(g, np.ndarray), f"{what}: leaf {k} is a {type(g).__name__}, not an ndarray"
        w = np.asarray(w)
        assert g.shape == w.shape, f"{what}: leaf {k} shape {g.shape} != {w.shape}"
        if ints == "values" and g.dtype.kind in "iu" and w.dtype.kind in "iu":
            assert g.tolist() == w.tolist(), f"{what}: leaf {k} values {g} != {w}"
            continue
        assert g.dtype == w.dtype, f"{what}: leaf {k} dtype {g.dtype} != {w.dtype}"
        if g.dtype.kind in "biu":
            np.testing.assert_array_equal(g, w, err_msg=f"{what}: leaf {k}")
        else:
            scale = float(np.max(np.abs(w))) if w.size and np.all(np.isfinite(w)) else 1.0
            rtol, atol = tolerance(g.dtype, scale, loose)
            np.testing.assert_allclose(g, w, rtol=rtol, atol=atol, equal_nan=True, err_msg=f"{what}: leaf {k}")


def param_names(fn) -> tuple[str, ...]:
    return tuple(inspect.signature(fn).parameters)


def entry_nests(entry: Entry, **kw):
    """Nests for a corpus entry (keywords allowed when the twin takes the same names)."""
    names = param_names(entry.lane)
    if param_names(entry.twin)[:len(names)] != names:
        names = None
    return nests(entry.kinds, entry.dtypes, names=names, out_ranks=entry.out_ranks,
                 out_node=entry.out_node, domain=entry.domain, static=entry.static, **kw)


def run_lanewise(lane, nest: Nest, backend: str):
    return build(lw.vmap, lane, nest.levels, backend=backend)(*nest.args, **nest.kwargs)


def run_jax(twin, nest: Nest):
    return build(jax.vmap, twin, nest.levels)(*nest.jax_args, **nest.jax_kwargs)


def check_nest(lane, twin, nest: Nest, backends=("cpu", "python")):
    """lanewise on every backend agrees with ``jax.vmap`` of the twin, and the
    backends agree with each other exactly (dtypes included)."""
    want = run_jax(twin, nest)
    got = {}
    for backend in backends:
        got[backend] = run_lanewise(lane, nest, backend)
        assert_trees_match(got[backend], want, ints="values", what=f"{backend} vs jax.vmap")
    if len(got) > 1:
        first, *rest = backends
        for backend in rest:
            assert_trees_match(got[backend], got[first], what=f"{backend} vs {first}")


# ----------------------------------------------------------------------------- benchmark lanes


def benchmark_function(module: str, name: str):
    """A lane as benchmarks/ measures it (the repository's package, not installed)."""
    root = str(pathlib.Path(__file__).resolve().parents[1])
    if root not in sys.path:
        sys.path.append(root)
    return getattr(importlib.import_module(f"benchmarks.{module}"), name)


#: W3's step: EMA crossover, P&L carried, y None.
ema_step = benchmark_function("w3_backtest", "step")


# ----------------------------------------------------------------------------- allocations


class AllocationCounter:
    """Wraps NumPy's array constructors (monkeypatch) to record the arrays they return."""

    NAMES = ("empty", "zeros", "ones", "full", "empty_like", "zeros_like", "ones_like", "full_like")

    def __init__(self, monkeypatch):
        self.arrays: list = []
        for name in self.NAMES:
            monkeypatch.setattr(np, name, self._wrap(getattr(np, name)))

    def _wrap(self, real):
        def counted(*args, **kwargs):
            arr = real(*args, **kwargs)
            self.arrays.append(arr)
            return arr
        return counted

    def big(self, nbytes: int) -> list:
        return [a for a in self.arrays if a.nbytes >= nbytes]


# Recursive lanes (tests/test_hardening.py, tests/test_lanes_doc.py): direct, and mutual.
def fib(n):
    if n < 2:
        return n
    return fib(n - 1) + fib(n - 2)


def ping(n):
    return 0 if n <= 0 else pong(n - 1)


def pong(n):
    return 1 if n <= 0 else ping(n - 1)
