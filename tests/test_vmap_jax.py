"""``lw.vmap`` against its semantic oracle ``jax.vmap``, on every backend.

The corpus (tests/corpus.py) pairs plain-Python lanes with JAX twins; hypothesis
draws nests of up to three ``vmap`` levels with random in_axes/out_axes
(negative, None, int-broadcast, tuple prefixes), keyword arguments, axis_size,
dtypes and memory layouts (C, Fortran, transposed, strided with negative steps,
read-only, lists, 0-d arrays, Python scalars).
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import lanewise as lw
from corpus import (ALL_DTYPES, BY_NAME, CORPUS, P, arith, assert_trees_match, axpy, build,
                    check_nest, entry_nests, examples, lane_values, nests, ntlane, poly3,
                    rownorm, rownorm_jax, scale_row)

BACKENDS = ("cpu", "python")


def both(fn, *args, in_axes=0, out_axes=0, axis_size=None, **kwargs):
    """fn mapped by lanewise (each backend) and by JAX: (cpu, python, jax) results."""
    res = [lw.vmap(fn, in_axes, out_axes, axis_size=axis_size, backend=b)(*args, **kwargs) for b in BACKENDS]
    res.append(jax.vmap(fn, in_axes, out_axes, axis_size=axis_size)(*args, **kwargs))
    return res


def check_all(fn, *args, twin=None, in_axes=0, out_axes=0, axis_size=None, **kwargs):
    """cpu and python results of ``vmap(fn)`` equal ``jax.vmap(twin or fn)``; returns cpu's."""
    spec = dict(in_axes=in_axes, out_axes=out_axes, axis_size=axis_size)
    want = jax.vmap(twin or fn, **spec)(*args, **kwargs)
    got = {b: lw.vmap(fn, **spec, backend=b)(*args, **kwargs) for b in BACKENDS}
    for b in BACKENDS:
        assert_trees_match(got[b], want, ints="values", what=f"{b} vs jax.vmap")
    assert_trees_match(got["python"], got["cpu"], what="python vs cpu")
    return got["cpu"]


# ----------------------------------------------------------------------------- the corpus


@pytest.mark.parametrize("entry", CORPUS, ids=lambda e: e.name)
@settings(max_examples=examples(2))
@given(data=st.data())
def test_corpus_vs_jax(entry, data):
    """Every corpus lane, random nests of depth <= 2, matches jax.vmap of its twin.

    (The first example is the canonical depth-1 signature; the cheap reference
    backend gets many more random nests in test_python_backend_vs_jax_many.)
    """
    nest = data.draw(entry_nests(entry, max_depth=2, max_size=3), label="nest")
    check_nest(entry.lane, entry.twin, nest)


@settings(max_examples=examples(6))
@given(nest=nests(("s", "s", "s"), ("float64", "float32", "int64"), names=("x", "y", "z"),
                  min_depth=2, max_depth=3, max_size=3))
def test_nested_depth3_vs_jax(nest):
    """Random nests up to depth 3 over one lane: cpu and python == jax (size 0: test_backends)."""
    check_nest(poly3, poly3, nest)


@settings(max_examples=examples(20))
@given(data=st.data())
def test_python_backend_vs_jax_many(data):
    """The reference backend is cheap: many more random nests over the whole corpus."""
    entry = data.draw(st.sampled_from(CORPUS), label="entry")
    nest = data.draw(entry_nests(entry, max_depth=3, max_size=3), label="nest")
    check_nest(entry.lane, entry.twin, nest, backends=("python",))


@settings(max_examples=examples(4))
@given(nest=nests(("r",), ("float64",), names=("row",), max_depth=3, max_size=3))
def test_row_views_in_nests(nest):
    """A rank-(d+1) argument hands each lane a 1-d view along the unmapped axis."""
    check_nest(rownorm, rownorm_jax, nest)


# ----------------------------------------------------------------------------- dtypes


def dtype_lane(x, y):
    return x * 2 + 1, x * y  # weak Python literals; a binary op on two strong values


def _dtype_case(dtype):
    rng = np.random.default_rng(0)
    x = lane_values(rng, (7,), dtype)
    if dtype.startswith("uint"):  # exercise wrap-around at the top of the range
        x[0] = np.iinfo(dtype).max
    y = x[::-1].copy()
    want = list(jax.vmap(dtype_lane)(x, y))
    if dtype == "bool":
        # Lanes are Python: True * True == 1, an int (lanewise's documented choice;
        # JAX's bool * bool is a bool).
        want[1] = x.astype(np.int64) * y.astype(np.int64)
    for backend in BACKENDS:
        got = lw.vmap(dtype_lane, backend=backend)(x, y)
        assert_trees_match(got, tuple(want), what=f"{backend} dtype_lane({dtype})")


@pytest.mark.parametrize("dtype", [d for d in ALL_DTYPES if d[0] in "bfc"])
def test_result_dtype_matches_jax(dtype):
    """Bool, float and complex results: dtypes follow JAX (weak Python literals; float32 stays float32)."""
    _dtype_case(dtype)


@pytest.mark.parametrize("dtype", [d for d in ALL_DTYPES if d[0] in "iu"])
def test_integer_results_are_never_narrowed(dtype):
    """Integer lanes compute as compiled Python does (Python ints are int64) and the
    result is stored in that type, never narrowed to the input width: a narrowed
    int8 * 2 + 1 would silently wrap.  (JAX and NumPy 2 keep int8; lanewise
    documents the difference.)  Both backends agree exactly, and the values are
    exact integer arithmetic wherever the stored type can hold them."""
    rng = np.random.default_rng(0)
    x = lane_values(rng, (7,), dtype)
    x[0] = np.iinfo(dtype).max
    y = x[::-1].copy()
    # uint64 * 2 + 1 is uint64, wrapping, as NumPy 2 computes it (docs/lanes.md L100)
    cpu = lw.vmap(dtype_lane, backend="cpu")(x, y)
    py = lw.vmap(dtype_lane, backend="python")(x, y)
    assert_trees_match(cpu, py, what=f"cpu vs python dtype_lane({dtype})")
    for got, exact in zip(cpu, ([int(a) * 2 + 1 for a in x], [int(a) * int(b) for a, b in zip(x, y)])):
        assert np.dtype(got.dtype).itemsize >= np.dtype(dtype).itemsize
        for g, e in zip(got.tolist(), exact):
            if got.dtype.kind == "f":
                assert g == pytest.approx(float(e), rel=1e-15)
            elif np.iinfo(got.dtype).min <= e <= np.iinfo(got.dtype).max:
                assert g == e


def test_float32_in_float32_out():
    def lane(v):
        return math.cos(v) * 0.5 + math.sqrt(v) - math.exp(-v) + 1

    def twin(v):
        return jnp.cos(v) * 0.5 + jnp.sqrt(v) - jnp.exp(-v) + 1

    x = np.linspace(0.1, 2, 9, dtype=np.float32)
    out = check_all(lane, x, twin=twin)
    assert out.dtype == np.float32


def test_numpy_scalars_are_strong():
    """NumPy scalars are strongly typed in NumPy 2 and JAX (only Python scalars are weak)."""
    x = np.arange(4, dtype=np.float32)
    cpu, py, jx = both(lambda a, s: a * s, x, np.float64(1.5), in_axes=(0, None))
    assert jx.dtype == np.float64
    assert_trees_match(cpu, jx, what="cpu")
    assert_trees_match(py, jx, what="python")


def helper_in_float64(v):
    return v * np.float64(0.1)


STRONG_FLOAT64 = {  # lane, and its JAX twin (np.float64(tracer) is not traceable)
    "construct": (lambda a: np.float64(a) / 3, lambda a: jnp.float64(a) / 3),
    "multiply": (lambda a: a * np.float64(0.1), None),
    "in_a_helper": (lambda a: helper_in_float64(a) + 1.0, None),
    "complex128": (lambda a: np.complex128(a) * 1j, lambda a: jnp.complex128(a) * 1j),
}


@pytest.mark.parametrize("name", list(STRONG_FLOAT64))
def test_a_float64_the_lane_names_is_strong(name):
    """A float32 lane that computes in float64 on purpose kept float32 (1 ulp of float32
    lost), on every backend: the weak-literal demotion took np.float64 for a literal."""
    lane, twin = STRONG_FLOAT64[name]
    x = np.linspace(0.1, 2, 9, dtype=np.float32)
    want = jax.vmap(twin or lane)(x)
    assert want.dtype.itemsize >= 8
    for b in BACKENDS:
        assert_trees_match(lw.vmap(lane, backend=b)(x), want, what=b)


def double(v):
    return 2.0 * v


def test_a_helper_named_double_is_not_a_float64():
    """Only NumPy's float64/complex128 (by name, value or dtype string) are strong."""
    x = np.linspace(0.1, 2, 9, dtype=np.float32)
    for b in BACKENDS:
        assert lw.vmap(lambda a: double(a) * 0.5, backend=b)(x).dtype == np.float32


def test_numpy_scalar_only_arguments():
    """With only a float32 NumPy scalar (and axis_size), float32 stays float32."""
    cpu, py, jx = both(lambda s: s * 2.5, np.float32(2), in_axes=None, axis_size=3)
    assert jx.dtype == np.float32
    assert_trees_match(py, jx, what="python")
    assert_trees_match(cpu, jx, what="cpu")


def test_branch_dependent_result_dtype():
    """A lane returning int on one path and float on another has a float result type.

    Numba and JAX unify the branches' types; the reference backend must not take
    the type of whichever branch the lanes happened to run.
    """
    x = np.array([3, 4, 5])  # every lane takes the integer branch (x - 2)
    cpu = check_all(BY_NAME["branchy"].lane, x, twin=BY_NAME["branchy"].twin)
    assert cpu.dtype == np.float64


def test_mixed_width_arrays_promote():
    """Strong arrays of different widths promote as in NumPy/JAX (float32 x float64 -> float64)."""
    a = np.linspace(0, 1, 5, dtype=np.float32)
    b = np.linspace(1, 2, 5)
    check_all(arith, a, b)


# ----------------------------------------------------------------------------- in_axes forms


def test_in_axes_negative_and_none():
    x = np.arange(12.0).reshape(3, 4)
    y = np.arange(4.0)
    check_all(arith, x, y, in_axes=(-1, 0))
    check_all(arith, x, 2.5, in_axes=(-2, None))


def test_tuple_list_dict_prefix():
    """in_axes is a pytree prefix: tuples, lists and dicts nest inside the per-argument tuple."""

    def tree_lane(t, d):
        a, (b, c) = t
        return a * d["w"] + b - c * d["z"]

    rng = np.random.default_rng(1)
    a = rng.normal(size=4)
    c = rng.normal(size=(2, 4))
    w = rng.normal(size=4)
    args = ((a, (1.5, c)), {"w": w, "z": 0.25})
    in_axes = ((0, (None, 1)), {"w": 0, "z": None})
    check_all(tree_lane, *args, in_axes=in_axes)


def test_list_prefix_and_list_argument():
    def pair(l):
        return l[0] * 2 + l[1]

    x = np.arange(5.0)
    check_all(pair, [x, 3.0], in_axes=([0, None],))


def test_namedtuple_prefix_and_result():
    a, b = np.arange(4.0), np.linspace(1, 2, 4)
    check_all(ntlane, P(a, b))
    check_all(ntlane, P(a, 2.0), in_axes=(P(0, None),))
    out = check_all(ntlane, P(a, b), out_axes=P(0, 0))
    assert type(out) is P


def test_keyword_arguments_are_mapped_on_axis_0():
    x, y = np.arange(5.0), np.linspace(-1, 1, 5)
    check_all(axpy, 2.0, x=x, y=y, in_axes=(None,))
    check_all(axpy, np.arange(5.0), x=x, y=y, in_axes=0)


def test_keyword_arguments_in_nests():
    x = np.arange(6.0).reshape(2, 3)
    y = np.ones((2, 3))
    nest = [dict(in_axes=(None,), out_axes=1), dict(in_axes=(0,), out_axes=0)]
    a = np.array([1.0, 2.0, 3.0])
    want = build(jax.vmap, axpy, nest)(a, x=x, y=y)
    for b in BACKENDS:
        assert_trees_match(build(lw.vmap, axpy, nest, backend=b)(a, x=x, y=y), want, what=b)


def test_axis_size_when_nothing_is_mapped():
    cpu = check_all(lambda s: s * 3 + 1, 2.0, in_axes=None, axis_size=4)
    assert cpu.shape == (4,)
    check_all(lambda s, t: (s + t, s * t), 2.0, np.float64(3.0), in_axes=None, axis_size=2)


def test_axis_size_nested_with_unmapped_level():
    x = np.arange(3.0)
    nest = [dict(in_axes=None, out_axes=0, axis_size=2), dict(in_axes=0, out_axes=0)]
    want = build(jax.vmap, lambda v: v * v, nest)(x)
    for b in BACKENDS:
        assert_trees_match(build(lw.vmap, lambda v: v * v, nest, backend=b)(x), want, what=b)


# ----------------------------------------------------------------------------- out_axes forms


def test_out_axes_none_on_independent_output():
    def lane(x, c):
        return x * 2, c + 1

    cpu = check_all(lane, np.arange(3.0), 5.0, in_axes=(0, None), out_axes=(0, None))
    assert cpu[1].shape == ()


def test_out_axes_for_per_lane_arrays():
    m = np.arange(12.0).reshape(3, 4)
    check_all(scale_row, m, 2.0, in_axes=(0, None), out_axes=-2)
    check_all(scale_row, m, np.array([1.0, 2.0, 3.0, 4.0]), in_axes=(1, 0), out_axes=1)


@pytest.mark.parametrize("out_axes", [(-3, -2, -1), (-1, -2, 0), (-2, -1, -1)])
def test_negative_out_axes_depth3(out_axes):
    """Negative out_axes count from the end of the output *after* inserting the axis."""
    x, y, z = np.arange(2.0), np.arange(3.0), np.arange(4.0)
    levels = [dict(in_axes=(0, None, None), out_axes=out_axes[0]),
              dict(in_axes=(None, 0, None), out_axes=out_axes[1]),
              dict(in_axes=(None, None, 0), out_axes=out_axes[2])]
    want = build(jax.vmap, poly3, levels)(x, y, z)
    for b in BACKENDS:
        assert_trees_match(build(lw.vmap, poly3, levels, backend=b)(x, y, z), want, what=b)


def test_negative_out_axes_per_lane_arrays_nested():
    m = np.arange(24.0).reshape(2, 3, 4)
    levels = [dict(in_axes=(0, None), out_axes=-3), dict(in_axes=(0, None), out_axes=-2)]
    want = build(jax.vmap, scale_row, levels)(m, 2.0)
    for b in BACKENDS:
        assert_trees_match(build(lw.vmap, scale_row, levels, backend=b)(m, 2.0), want, what=b)


def test_out_axes_tuple_prefix_nested():
    x, y = np.arange(3.0), np.arange(4.0) + 1

    def pair(a, b):
        return a - b, a * b

    nest = [dict(in_axes=(0, None), out_axes=(1, 0)), dict(in_axes=(None, 0), out_axes=(0, -1))]
    want = build(jax.vmap, pair, nest)(x, y)
    for b in BACKENDS:
        assert_trees_match(build(lw.vmap, pair, nest, backend=b)(x, y), want, what=b)


# ----------------------------------------------------------------------------- inputs


def test_python_scalars_zero_d_and_lists():
    x = [1.0, 2.0, 3.0]
    want = jax.vmap(arith, (0, None))(np.asarray(x), 2.0)
    for b in BACKENDS:
        assert_trees_match(lw.vmap(arith, (0, None), backend=b)(x, 2.0), want, what=b)
        assert_trees_match(lw.vmap(arith, (0, None), backend=b)(np.asarray(x), np.array(2.0)), want, what=b)
    nested = [[1, 2], [3, 4], [5, 6]]
    want = jax.vmap(jax.vmap(arith, (0, None)), (0, None))(np.asarray(nested), 1)
    for b in BACKENDS:
        got = lw.vmap(lw.vmap(arith, (0, None)), (0, None), backend=b)(nested, 1)
        assert_trees_match(got, want, what=b)


def test_unmapped_arrays_are_passed_whole():
    def proj(x, w):
        s = 0.0
        for i in range(w.shape[0]):
            s += w[i] * x ** i
        return s

    w = np.array([1.0, -2.0, 0.5])
    x = np.linspace(-1, 1, 7)
    check_all(proj, x, w, in_axes=(0, None),
              twin=lambda x, w: jnp.sum(w * x ** jnp.arange(3)))


@pytest.mark.parametrize("layout, in_axes", [("C", 0), ("F", 1), ("neg", 0), ("readonly", 1)])
def test_rank2_views_any_layout(layout, in_axes):
    base = np.arange(20.0).reshape(4, 5) - 7
    m = {"C": base, "F": np.asfortranarray(base), "neg": base[::-1, ::-2], "readonly": base.copy()}[layout]
    if layout == "readonly":
        m.flags.writeable = False
    check_all(rownorm, m, in_axes=in_axes, twin=rownorm_jax)
