"""Issue 42 (correctness round 3): natural programs and out_axes soundness.

* functions passed as unmapped arguments, and library functions as the lane,
  as jax.vmap takes them;
* lw.scan steps that close over lane values, and dict pytrees in lw.scan;
* out_axes=None: refused for every construct that moves a lane value into an
  output (the dependence analysis is conservative), accepted for a scan's
  read-only carry, as in JAX.

Each case is checked against JAX (or NumPy) on the python and cpu backends.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import lanewise as lw

BACKENDS = ("python", "cpu")
both_backends = pytest.mark.parametrize("backend", BACKENDS)

X = np.linspace(-1.0, 2.0, 7)
ROWS = np.arange(12.0).reshape(4, 3) / 7.0

# ----------------------------------------------------------------------------- functions as arguments


def apply(f, v):
    return f(v)


def apply_two(v, f, g):
    return f(v) - g(v)


def square(v):
    return v * v


def scaler(k):
    return lambda v: v * k


@both_backends
@pytest.mark.parametrize("f, jf", [(np.sin, jnp.sin), (math.sin, jnp.sin), (square, square),
                                   (lambda v: v * 3.0 + 1.0, lambda v: v * 3.0 + 1.0)],
                         ids=["ufunc", "math", "def", "lambda"])
def test_function_passed_as_an_unmapped_argument(backend, f, jf):
    got = lw.vmap(apply, in_axes=(None, 0), backend=backend)(f, X)
    np.testing.assert_allclose(got, jax.vmap(apply, in_axes=(None, 0))(jf, X), rtol=1e-15, atol=1e-15)


@both_backends
def test_function_arguments_anywhere_in_the_call_and_in_nested_vmaps(backend):
    grid = np.arange(6.0).reshape(2, 3)
    want = jax.vmap(jax.vmap(apply_two, in_axes=(0, None, None)), in_axes=(0, None, None))(grid, jnp.cos, square)
    nest = lw.vmap(lw.vmap(apply_two, in_axes=(0, None, None)), in_axes=(0, None, None), backend=backend)
    np.testing.assert_allclose(nest(grid, np.cos, square), want, rtol=1e-15)


@both_backends
def test_each_function_argument_gets_its_own_kernel(backend):
    mapped = lw.vmap(apply, in_axes=(None, 0), backend=backend)
    for k in (2.0, 3.0, 2.0):  # two closures of one code: not one kernel for both
        np.testing.assert_array_equal(mapped(scaler(k), X), X * k)


@pytest.mark.parametrize("in_axes", [0, (0, 0)])
def test_a_mapped_function_argument_is_refused_naming_it(in_axes):
    with pytest.raises(lw.LaneTypeError, match=r"maps argument f, which is a function.*in_axes=\(None, 0\)"):
        lw.vmap(apply, in_axes=in_axes)(np.sin, X)


# ----------------------------------------------------------------------------- library functions as the lane


@both_backends
def test_library_functions_as_the_lane(backend):
    a, b = ROWS, ROWS[::-1].copy()
    np.testing.assert_allclose(lw.vmap(np.dot, backend=backend)(a, b), jax.vmap(jnp.dot)(a, b), rtol=1e-15)
    np.testing.assert_allclose(lw.vmap(np.outer, backend=backend)(a, b), jax.vmap(jnp.outer)(a, b), rtol=1e-15)
    np.testing.assert_allclose(lw.vmap(np.hypot, backend=backend)(X, X[::-1]), jax.vmap(jnp.hypot)(X, X[::-1]),
                               rtol=1e-15)
    np.testing.assert_allclose(lw.vmap(math.cos, backend=backend)(X), jax.vmap(jnp.cos)(X), rtol=1e-15)
    # An optional positional parameter the caller passes still reaches the function.
    np.testing.assert_array_equal(lw.vmap(np.clip, in_axes=(0, None, None), backend=backend)(ROWS, 0.2, 0.5),
                                  jax.vmap(jnp.clip, in_axes=(0, None, None))(ROWS, 0.2, 0.5))


# ----------------------------------------------------------------------------- scan steps closing over lane values


def ema_filter(row, alpha):
    def step(c, v):
        c = alpha * v + (1 - alpha) * c
        return c, c
    return lw.scan(step, 0.0, row)


def clipped_filter(row, alpha, cap):
    k = alpha * 2.0
    weights = row * 0.5  # an array captured too

    def step(c, i):
        if c > cap:  # two returns, one not a tuple display
            out = (cap, c - cap)
            return out
        return c * k + weights[i], k
    k = k * 0.5  # read when the scan runs, as the closure reads it
    c, ys = lw.scan(step, init=0.0, xs=np.arange(row.shape[0]), reverse=True)
    return c, ys


def jax_ema(row, alpha):
    def step(c, v):
        c = alpha * v + (1 - alpha) * c
        return c, c
    return jax.lax.scan(step, 0.0, row)


def jax_clipped(row, alpha, cap):
    k = alpha * 2.0 * 0.5
    weights = row * 0.5

    def step(c, i):
        return jnp.where(c > cap, cap, c * k + weights[i]), jnp.where(c > cap, c - cap, k)
    return jax.lax.scan(step, 0.0, jnp.arange(row.shape[0]), reverse=True)


@both_backends
def test_scan_step_closing_over_lane_values(backend):
    alphas = np.array([0.1, 0.5, 0.9, 0.3])
    got = lw.vmap(ema_filter, backend=backend)(ROWS, alphas)
    want = jax.vmap(jax_ema)(ROWS, alphas)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-14)
    caps = np.array([0.2, 5.0, 0.4, 1.0])
    got = lw.vmap(clipped_filter, backend=backend)(ROWS * 4, alphas * 3, caps)
    want = jax.vmap(jax_clipped)(ROWS * 4, alphas * 3, caps)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-14)


# ----------------------------------------------------------------------------- out_axes=None: every way a value moves

STASH = np.zeros(1)
BOX = type("Box", (), {})()


def ident(v):
    return v


def stash(v):
    STASH[0] = v


def starred_round_trip(x, y):
    a, _b = (*(x, y),)
    return a


def starred_shifted(x, y):
    a, _b = (*(), *(x, y))  # a tuple display counted element by element gave a nothing
    return a


def starred_target(x, y):
    *_a, b = y, x
    return b


def nonlocal_write(x, y):
    r = y

    def g():
        nonlocal r
        r = x
    g()
    return r


def closure_writes_array(x, y):
    a = np.zeros(1)

    def g():
        a[0] = x
    g()
    return a[0] + y


def closure_late_binding(x, y):
    z = y

    def g():
        return z
    z = x
    return g()


def default_argument(x, y):
    def g(v=x):
        return v
    return g()


def comprehension(x, y):
    return [x + y for _ in range(2)][1]


def walrus_in_comprehension(x, y):
    t = [(z := x) for _ in range(1)]
    return z + y + 0 * len(t)


def helper_writes_a_global(x, y):
    stash(x)
    return STASH[0] + y


def global_statement(x, y):
    global GLOBAL_VALUE
    GLOBAL_VALUE = x
    return GLOBAL_VALUE + y


def attribute_store(x, y):
    BOX.v = x
    return BOX.v + y


def item_store(x, y):
    d = {"a": y}
    d["a"] = x
    return d["a"]


def list_append(x, y):
    t = [y]
    t.append(x)
    return t[1]


def copyto_global(x, y):
    np.copyto(STASH, x)
    return STASH[0] + y


def identity_helper(x, y):
    return ident(x) + y


def loop_carried_while(x, y):
    a, b, k = y, y, 0
    while k < 3:
        a, b = b, x
        k += 1
    return a


def early_return(x, y):
    if x > 1.5:
        return y
    return y + 1.0


def augmented(x, y):
    s = y
    s *= x
    return s


def walrus(x, y):
    if (z := x * 2.0) > 100.0:
        return y
    return z


def aliased_arguments(x, a, b):
    a[0] = x
    return b[0]


def add_x(c, v):
    return c + v, v


def scan_carry_from_xs(x, y):
    c, _ = lw.scan(add_x, y, np.full(2, x))
    return c


def scan_step_closure(x, y):
    def step(c, v):
        return c + x, v
    c, _ = lw.scan(step, y, np.zeros(2))
    return c


def scan_length_from_lane(x, y):
    c, _ = lw.scan(add_x, y, np.ones(int(x)))  # the number of steps is per lane
    return c


#: Lanes whose output depends on x: out_axes=None must be refused.  The ``python``-only
#: ones do not compile (Numba: no nonlocal, global stores, list of arrays...).
DEPENDENT = {
    starred_round_trip: BACKENDS, starred_shifted: BACKENDS, starred_target: ("python",),
    nonlocal_write: ("python",), closure_writes_array: BACKENDS, closure_late_binding: ("python",),
    default_argument: ("python",), comprehension: BACKENDS, walrus_in_comprehension: ("python",),
    helper_writes_a_global: ("python",), global_statement: ("python",), attribute_store: ("python",),
    item_store: BACKENDS, list_append: BACKENDS, copyto_global: ("python",), identity_helper: BACKENDS,
    loop_carried_while: BACKENDS, early_return: BACKENDS, augmented: BACKENDS, walrus: ("python",),
    scan_carry_from_xs: BACKENDS, scan_step_closure: BACKENDS, scan_length_from_lane: BACKENDS,
}


@pytest.mark.parametrize("lane, backend", [(lane, b) for lane, bs in DEPENDENT.items() for b in bs],
                         ids=lambda v: getattr(v, "__name__", v))
def test_out_axes_none_refused_for_every_construct_that_moves_the_lane_value(lane, backend):
    xs = np.array([1.0, 2.0, 3.0])
    want = [lane(x, 5.0) for x in xs]
    assert len({float(w) for w in want}) > 1  # the output does depend on the mapped value
    with pytest.raises(lw.UnmappedOutputError, match="depends on argument x"):
        lw.vmap(lane, in_axes=(0, None), out_axes=None, backend=backend)(xs, 5.0)


@both_backends
def test_out_axes_none_refused_when_arguments_share_memory(backend):
    buf = np.zeros(1)
    with pytest.raises(lw.UnmappedOutputError, match="depends on argument x"):
        lw.vmap(aliased_arguments, in_axes=(0, None, None), out_axes=None, backend=backend)(X, buf, buf)


@both_backends
def test_out_axes_none_refused_for_a_function_argument_lane(backend):
    with pytest.raises(lw.UnmappedOutputError, match="depends on argument"):
        lw.vmap(apply, in_axes=(None, 0), out_axes=None, backend=backend)(np.sin, X)


# ----------------------------------------------------------------------------- out_axes=None: accepted as JAX does


def keep(c, v):
    return c, v * c


def read_only_carry(row, k):
    c, ys = lw.scan(keep, k, row)
    return c, ys


def jax_read_only_carry(row, k):
    return jax.lax.scan(keep, k, row)


SCALE = 3.0


def pure_helper_then_global(x, y):
    s = ident(x) * 2.0
    return SCALE * y, s


@both_backends
def test_scan_read_only_carry_returned_with_out_axes_none(backend):
    got = lw.vmap(read_only_carry, in_axes=(0, None), out_axes=(None, 0), backend=backend)(ROWS, 2.0)
    want = jax.vmap(jax_read_only_carry, in_axes=(0, None), out_axes=(None, 0))(ROWS, 2.0)
    assert np.ndim(got[0]) == 0
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-15)


@both_backends
def test_out_axes_none_accepted_after_a_pure_helper(backend):
    got = lw.vmap(pure_helper_then_global, in_axes=(0, None), out_axes=(None, 0), backend=backend)(X, 2.0)
    want = jax.vmap(pure_helper_then_global, in_axes=(0, None), out_axes=(None, 0))(X, 2.0)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-15)


# ----------------------------------------------------------------------------- dict pytrees in lw.scan


def dict_step(c, x):
    """Dict displays of one value type (Numba's typed dicts in a lane), keys not sorted."""
    a = c["a"] * 0.5 + x["v"]
    return {"b": c["b"] + x["u"], "a": a}, {"z": a * x["u"], "s": c["b"]}


def nested_step(c, x):
    """Nested dicts and tuples, values of several types, keys not sorted."""
    return ({"n": c["n"] + 1, "p": {"y": c["p"]["y"] + x[1]["w"], "x": c["p"]["x"] * x[0]}},
            {"pair": (c["p"]["x"], x[1]["w"]), "k": c["n"]})


def dict_scan_lane(scan, r, k):
    c, ys = scan(dict_step, {"b": k, "a": 1.0}, {"v": r * 2.0, "u": r})
    return c["a"], c["b"], ys["z"], ys["s"]


def nested_scan_lane(scan, r, k):
    c, ys = scan(nested_step, {"p": {"x": k, "y": 0.0}, "n": 0}, (r + 1.0, {"w": r}), reverse=True)
    return c["n"], c["p"]["x"], c["p"]["y"], ys["pair"][0], ys["pair"][1], ys["k"]


def jax_lax_scan(f, init, xs, reverse=False):
    return jax.lax.scan(f, init, xs, reverse=reverse)


def assert_same_tree(got, want):
    assert jax.tree.structure(got) == jax.tree.structure(want)
    for g, w in zip(jax.tree.leaves(got), jax.tree.leaves(want), strict=True):
        assert np.asarray(g).dtype == np.asarray(w).dtype
        np.testing.assert_allclose(g, w, rtol=1e-14)


@both_backends
@pytest.mark.parametrize("lane", [dict_scan_lane, nested_scan_lane])
def test_scan_dict_pytrees_inside_a_lane(backend, lane):
    ks = np.array([0.5, 1.0, 2.0, 3.0])
    got = lw.vmap(lambda r, k: lane(lw.scan, r, k), backend=backend)(ROWS, ks)
    assert_same_tree(got, jax.vmap(lambda r, k: lane(jax_lax_scan, r, k))(ROWS, ks))


@both_backends
@pytest.mark.parametrize("step, init, xs", [
    (dict_step, {"b": 0.5, "a": 1.0}, {"v": ROWS[0], "u": ROWS[1]}),
    (nested_step, {"p": {"y": 0.0, "x": 2.0}, "n": 0}, (ROWS[0], {"w": ROWS[1]})),
    (nested_step, {"p": {"y": 0.0, "x": 2.0}, "n": 0}, (ROWS[0][:0], {"w": ROWS[1][:0]})),  # no step runs
], ids=["typed-dicts", "nested", "empty"])
def test_scan_dict_pytrees_at_top_level(backend, step, init, xs):
    with lw.config.overridden(backend=backend):
        got = lw.scan(step, init, xs)
    assert sorted(got[0]) == ["a", "b"] if step is dict_step else ["n", "p"]
    assert_same_tree(got, jax.lax.scan(step, init, xs))


#: The step's carry and init's, named: as structures, types, or (a typed dict's keys
#: are known when it runs) init's keys.
BOTH_STRUCTURES = (r"carry (with structure|of type) \S.*, but init has (structure|type) \S"
                   r"|other keys than init \((init has the keys \['a', 'b'\]|init has different keys)")


def wrong_keys(c, x):
    return {"a": c["a"] + x, "c": c["b"]}, None


def tuple_for_dict(c, x):
    return (c["a"] + x, c["b"]), None


def wrong_keys_lane(r):
    c, _ = lw.scan(wrong_keys, {"b": 1.0, "a": 0.0}, r)
    return c["a"]


def tuple_for_dict_lane(r):
    c, _ = lw.scan(tuple_for_dict, {"b": 1.0, "a": 0.0}, r)
    return c["a"]


@both_backends
@pytest.mark.parametrize("step", [wrong_keys, tuple_for_dict])
def test_scan_dict_carry_of_another_structure_is_refused_naming_both(backend, step):
    with pytest.raises(TypeError, match="same pytree structure"):
        jax.lax.scan(step, {"b": 1.0, "a": 0.0}, X)
    with lw.config.overridden(backend=backend), pytest.raises(lw.LanewiseError, match=BOTH_STRUCTURES):
        lw.scan(step, {"b": 1.0, "a": 0.0}, X)


@both_backends
@pytest.mark.parametrize("lane", [wrong_keys_lane, tuple_for_dict_lane])
def test_scan_dict_carry_of_another_structure_is_refused_inside_a_lane(backend, lane):
    with pytest.raises(lw.LanewiseError, match=BOTH_STRUCTURES):
        lw.vmap(lane, backend=backend)(ROWS)


def test_scan_dict_with_other_than_string_keys_is_refused_on_cpu():
    with lw.config.overridden(backend="cpu"), pytest.raises(lw.LaneTypeError, match=r"keys \[1, 2\].*string keys"):
        lw.scan(lambda c, x: (c, x), {1: 0.0, 2: 1.0}, X)
