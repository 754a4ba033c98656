"""Arrays with two names, changed in place: forward mode exact, reverse mode exact or refused.

References: the lane run as plain Python (values), central finite differences in
float64 and ``jax.jvp`` of each lane's functional rewrite (derivatives).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import lanewise as lw
from lanewise.errors import LaneCompileError, LaneTypeError

jax.config.update("jax_enable_x64", True)


# ----------------------------------------------------------------------------- lanes, each with its functional twin


def direct(x):
    a = np.zeros(3)
    b = a
    a += x
    v = a[1:]
    v *= x
    return b.sum() * x


def direct_twin(x):
    a = jnp.zeros(3) + x
    a = a.at[1:].multiply(x)
    return a.sum() * x


def alias_setitem(x):
    a = np.zeros(3)
    b = a
    b[0] = x
    return a.sum() * x


def alias_setitem_twin(x):
    return jnp.zeros(3).at[0].set(x).sum() * x


def view_iadd(x):
    a = np.zeros(3)
    v = a[1:]
    v += x
    return a.sum() * x


def view_iadd_twin(x):
    return jnp.zeros(3).at[1:].add(x).sum() * x


def view_setitem(x):
    a = np.zeros(3)
    v = a[1:]
    v[0] = x
    return a.sum() * x


def view_setitem_twin(x):
    return jnp.zeros(3).at[1].set(x).sum() * x


def tuple_alias(x):
    a = np.zeros(3)
    t = (a, 1.0)
    a += x
    return t[0].sum() * x + t[1]


def tuple_alias_twin(x):
    return (jnp.zeros(3) + x).sum() * x + 1.0


def same(v):
    return v


def helper_returns_argument(x):
    a = np.zeros(3)
    b = same(a)
    b += x
    return a.sum() * x


def helper_returns_argument_twin(x):
    return (jnp.zeros(3) + x).sum() * x


def write_first(v, y):
    v[0] = y * y
    return 0.0


def helper_mutates_argument(x):
    a = np.ones(3)
    write_first(a, x)
    return a.sum() * x


def helper_mutates_argument_twin(x):
    return jnp.ones(3).at[0].set(x * x).sum() * x


def loop_on_view(x):
    a = np.ones(4)
    v = a[1:]
    for i in range(3):
        v *= x
        v[i] += 1.0
    return a[0] + a[1] * a[2] - a[3]


def loop_on_view_twin(x):
    a = jnp.ones(4)
    for i in range(3):
        a = a.at[1:].multiply(x)
        a = a.at[1 + i].add(1.0)
    return a[0] + a[1] * a[2] - a[3]


def rows_of(x):
    a = np.zeros((2, 3))
    for row in a:
        row += x
        x = x * 2.0
    return a.sum() * x


def rows_of_twin(x):
    a = jnp.zeros((2, 3)).at[0].add(x).at[1].add(2.0 * x)
    return a.sum() * 4.0 * x


def new_array_from_a_sum(x):
    a = x * np.ones(3)
    b = a + 0.0  # b's tangent rule hands back a's tangent: it must not be changed in place with b
    b += x
    c = a
    a = a + 0.0
    a *= x
    return c.sum() * x + b[0]


def new_array_from_a_sum_twin(x):
    a = x * jnp.ones(3)
    return a.sum() * x + (a[0] + x)


def stored_after_a_copy(x):
    a = x * np.ones(3)
    b = a + 0.0  # a new array whose tangent rule hands back a's tangent: a[0] = ... must not reach b's
    a[0] = 5.0 * x
    return a.sum() + 2.0 * b.sum()


def stored_after_a_copy_twin(x):
    a = x * jnp.ones(3)
    return a.at[0].set(5.0 * x).sum() + 2.0 * a.sum()


def stored_into_a_copy(x):
    a = x * np.ones(3)
    c = a + 0.0
    c[0] = 5.0 * x
    return a.sum() + c.sum()


def stored_into_a_copy_twin(x):
    a = x * jnp.ones(3)
    return a.sum() + a.at[0].set(5.0 * x).sum()


def scalars(x, dx):
    prev = x
    x += dx
    x *= prev
    return prev * x


def scalars_twin(x, dx):
    return x * ((x + dx) * x)


FORWARD = [(direct, direct_twin), (alias_setitem, alias_setitem_twin), (view_iadd, view_iadd_twin),
           (view_setitem, view_setitem_twin), (tuple_alias, tuple_alias_twin),
           (helper_returns_argument, helper_returns_argument_twin),
           (helper_mutates_argument, helper_mutates_argument_twin), (loop_on_view, loop_on_view_twin),
           (rows_of, rows_of_twin), (new_array_from_a_sum, new_array_from_a_sum_twin),
           (stored_after_a_copy, stored_after_a_copy_twin), (stored_into_a_copy, stored_into_a_copy_twin)]
IDS = [f.__name__ for f, _ in FORWARD]
X = np.array([-1.3, 0.4, 1.7])


def _central(f, x, h=1e-6):
    return (f(x + h) - f(x - h)) / (2 * h)


def _references(lane, twin, xs):
    values = np.array([lane(float(x)) for x in xs])
    slopes = np.array([float(jax.jvp(twin, (float(x),), (1.0,))[1]) for x in xs])
    np.testing.assert_allclose(slopes, [_central(lane, float(x)) for x in xs], rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(values, [float(twin(float(x))) for x in xs], rtol=1e-12)
    return values, slopes


@pytest.mark.parametrize("backend", ["python", "cpu"])
@pytest.mark.parametrize("lane,twin", FORWARD, ids=IDS)
def test_forward_mode_follows_storage_shared_by_two_names(lane, twin, backend):
    values, slopes = _references(lane, twin, X)
    run = lw.vmap(lambda x: lw.jvp(lane, (x,), (1.0,)), backend=backend)
    value, tangent = run(X)
    np.testing.assert_allclose(value, values, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(tangent, slopes, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(lw.vmap(lw.grad(lane), backend=backend)(X), slopes, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(lw.vmap(lw.jacfwd(lane), backend=backend)(X), slopes, rtol=1e-12, atol=1e-12)


def test_direct_calls_give_python_values():
    assert lw.jvp(direct, (2.0,), (1.0,))[0] == direct(2.0) == 20.0
    assert lw.grad(alias_setitem)(1.5) == pytest.approx(3.0, rel=1e-14)


def test_scalars_rebound_by_augmented_assignment_work_in_both_modes():
    points = [(0.3, 0.2), (-1.1, 0.7)]
    for x, dx in points:
        want = [float(g) for g in jax.grad(scalars_twin, argnums=(0, 1))(x, dx)]
        np.testing.assert_allclose(lw.grad(scalars, argnums=(0, 1))(x, dx), want, rtol=1e-12)
        np.testing.assert_allclose(lw.jacrev(scalars, argnums=(0, 1))(x, dx), want, rtol=1e-12)
        np.testing.assert_allclose(lw.vjp(scalars, x, dx)[1](1.0), want, rtol=1e-12)
    xs, dxs = np.array([p[0] for p in points]), np.array([p[1] for p in points])
    for backend in ("python", "cpu"):
        got = lw.vmap(lw.jacrev(scalars, argnums=(0, 1)), backend=backend)(xs, dxs)
        want = lw.vmap(lw.grad(scalars, argnums=(0, 1)), backend="python")(xs, dxs)
        np.testing.assert_allclose(np.array(got), np.array(want), rtol=1e-12)


def buffer_changed_in_place(x):
    buf = np.zeros(3)
    v = buf[1:]
    v += 1.0  # nothing differentiated: must still change buf
    return x * buf.sum()


def test_reverse_mode_keeps_an_inactive_in_place_update():
    for backend in ("python", "cpu"):
        np.testing.assert_allclose(lw.vmap(lw.jacrev(buffer_changed_in_place), backend=backend)(X),
                                   2.0 * np.ones(3), rtol=1e-14)
    assert lw.vjp(buffer_changed_in_place, 1.5)[1](1.0)[0] == 2.0


def element_read_after_view_iadd(x):
    a = np.zeros(3)
    v = a[1:]
    v += x
    return a[1] * x


REVERSE_REFUSED = [direct, alias_setitem, view_iadd, view_setitem, tuple_alias, helper_returns_argument,
                   helper_mutates_argument, loop_on_view, rows_of, element_read_after_view_iadd]


@pytest.mark.parametrize("lane", REVERSE_REFUSED, ids=[f.__name__ for f in REVERSE_REFUSED])
def test_reverse_mode_refuses_storage_changed_through_another_name(lane):
    for transform, run in [("lw.jacrev", lambda: lw.jacrev(lane)(1.5)),
                           ("lw.vjp", lambda: lw.vjp(lane, 1.5)[1](1.0)),
                           ("lw.jacrev", lambda: lw.vmap(lw.jacrev(lane), backend="cpu")(X))]:
        with pytest.raises((LaneCompileError, LaneTypeError)) as err:
            run()
        assert transform in str(err.value) or "array methods" in str(err.value), str(err.value)


@pytest.mark.parametrize("lane", [alias_setitem, view_setitem, element_read_after_view_iadd])
def test_reverse_refusal_names_both_names_the_line_and_the_fix(lane):
    with pytest.raises((LaneCompileError, LaneTypeError)) as err:
        lw.jacrev(lane)(1.5)
    message = str(err.value)
    first = {alias_setitem: ("b", "a"), view_setitem: ("v", "a"), element_read_after_view_iadd: ("v", "a")}[lane]
    assert f"lw.jacrev cannot differentiate {lane.__name__} at {__file__}:" in message
    assert f"{first[0]} shares its storage with {first[1]}" in message
    assert "b = a.copy()" in message and "lw.jacfwd (forward mode)" in message


def filled(x):
    a = np.zeros(3)
    a.fill(x)
    return a.sum() * x


def copied_into(x):
    a = np.zeros(3)
    np.copyto(a, x * np.ones(3))
    return a.sum() * x


@pytest.mark.parametrize("lane", [filled, copied_into])
def test_in_place_methods_of_differentiated_arrays_are_refused(lane):
    for transform in (lw.grad, lw.jacrev):
        with pytest.raises(LaneCompileError, match=f"{lane.__name__} at .*: a is changed in place by"):
            transform(lane)(1.5)


def _stores_a_scalar(x, n):
    buf = np.zeros(n)
    s = x
    for i in range(n):
        buf[i] = s  # an array's item store copies: buf and s share nothing
    t = (buf, s)
    return t[0][0] + s


def _unpacks_a_display(x, limit):
    s, n = x, 0  # item by item: n += 1 does not reach s
    a, (b, c) = np.zeros(2), (x, np.ones(2))
    while s < limit:
        s = s * 1.5
        n += 1
    c += s
    return s + a[0] + b


@pytest.mark.parametrize("lane,classes,updates", [
    (_unpacks_a_display, [{"s", "x", "b"}, {"n"}, {"limit"}, {"a"}, {"c"}], [("augassign", {"n"}),
                                                                            ("augassign", {"c"})]),
    (direct, [{"a", "b", "v"}, {"x"}], [("augassign", {"a"}), ("augassign", {"v"})]),
    (new_array_from_a_sum, [{"a", "c"}, {"b"}, {"x"}], [("augassign", {"b"}), ("augassign", {"a"})]),
    (alias_setitem, [{"a", "b"}, {"x"}], [("setitem", {"b"})]),
    (tuple_alias, [{"a", "t"}, {"x"}], [("augassign", {"a"})]),
    (helper_returns_argument, [{"a", "b"}, {"x"}], [("augassign", {"b"})]),
    (helper_mutates_argument, [{"a"}, {"x"}], [("helper", {"a"})]),
    (rows_of, [{"a", "row"}, {"x"}], [("augassign", {"row"})]),
    (scalars, [{"prev", "x"}, {"dx"}], [("augassign", {"x"}), ("augassign", {"x"})]),
    (_stores_a_scalar, [{"buf", "s", "t", "x"}, {"n"}, {"i"}], [("setitem", {"buf"})]),  # s = x; t = (buf, s)
    (filled, [{"a"}, {"x"}], [("method", {"a"})]),
])
def test_alias_classes_and_in_place_updates_of_the_ir_pass(lane, classes, updates):
    from lanewise.autodiff.aliasing import aliases

    facts = aliases(lane)
    got = {frozenset(c) for c in facts.classes.values()}
    assert got == {frozenset(c) for c in classes}
    assert [(u.kind, set(u.names)) for u in facts.updates] == updates


# ----------------------------------------------------------------------------- derivative programs differentiated again


def cubed_through_an_alias(x):
    a = np.zeros(3)
    b = a
    a += x * x
    return b.sum() * x


def accumulated(x):
    s = 0.0
    for k in range(3):
        s += x * x * (k + 1.0)
    return s


@pytest.mark.parametrize("lane,twin", [
    (cubed_through_an_alias, lambda x: 3.0 * x ** 3),
    (new_array_from_a_sum, new_array_from_a_sum_twin),  # its derivative program calls ad.mirror
    (accumulated, lambda x: 6.0 * x * x)], ids=["alias", "mirror", "accumulator"])
def test_second_derivatives_of_lanes_changed_in_place(lane, twin):
    """A derivative program keeps ``a op= e`` in place only where another name sees the
    storage (``ad.update``); jax differentiates it again exactly, in both modes."""
    op = lw.jax.op(lw.vmap(lane))
    x = jnp.array([2.0, -0.7, 1.3])

    def total(f):
        return lambda x: jnp.sum(f(x))

    want = jax.vmap(jax.grad(jax.grad(twin)))(x)
    np.testing.assert_allclose(jax.grad(total(jax.grad(total(op))))(x), want, rtol=1e-12)
    hvp = jax.jvp(lambda x: jax.jvp(total(op), (x,), (jnp.ones(3),))[1], (x,), (jnp.ones(3),))[1]
    np.testing.assert_allclose(hvp, jnp.sum(want), rtol=1e-12)
    np.testing.assert_allclose(jax.grad(total(op))(x), jax.vmap(jax.grad(twin))(x), rtol=1e-12)


def test_an_accumulator_alone_is_rebound_as_before():
    """``s += e`` with no other name on ``s``: the derivative program rebinds it (no
    ``ad.update``), so programs of ordinary lanes are unchanged and differentiable again."""
    from lanewise.autodiff.forward import Plan, transform
    source = transform(accumulated, Plan(k=1, seeds=("arg",), finish="jvp"))._lw_source
    assert "ad.update" not in source and "ad.mirror" not in source
    assert "ad.update" in transform(cubed_through_an_alias, Plan(k=1, seeds=("arg",), finish="jvp"))._lw_source
