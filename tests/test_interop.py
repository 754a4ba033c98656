"""Arrays of other libraries (issue 18, part 3): torch tensors and JAX arrays in,
without a copy; results back in the caller's library.

"No copy" is shown by pointers: the leaves the backend receives (observed by
wrapping the backend's ``run``/``run_reduce``) start at the tensor's own
``data_ptr()`` / the JAX array's ``unsafe_buffer_pointer()``, with its strides.
"""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
from optional import requires_torch

import lanewise as lw
from lanewise import backends

torch = requires_torch()
jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")


def address(a: np.ndarray) -> int:
    return a.__array_interface__["data"][0]


@pytest.fixture
def seen(monkeypatch):
    """The leaf values (and results) the CPU backend was handed, call by call."""
    cpu = backends.get("cpu")
    calls = []

    def spy(name):
        real = getattr(cpu, name)

        def wrapped(exe, call, *rest):
            result = real(exe, call, *rest)
            calls.append((call.values, result))
            return result
        monkeypatch.setattr(cpu, name, wrapped)

    spy("run")
    spy("run_reduce")
    return calls


def plus_one(x):
    return x + 1


# ----------------------------------------------------------------------------- no copy in


@pytest.mark.parametrize("view", [lambda t: t, lambda t: t.T, lambda t: t[:, ::2], lambda t: t[1:]],
                         ids=["contiguous", "transposed", "strided", "offset"])
def test_torch_tensors_reach_the_kernel_without_a_copy(seen, view):
    t = view(torch.arange(24.0).reshape(4, 6))
    got = lw.vmap(lambda row: row.sum())(t)
    (leaf,) = seen[-1][0]
    assert address(leaf) == t.data_ptr()
    assert leaf.strides == tuple(s * t.element_size() for s in t.stride())
    np.testing.assert_array_equal(got.numpy(), t.numpy().sum(axis=1))


def test_a_jax_array_reaches_the_kernel_without_a_copy_and_read_only(seen):
    x = jnp.linspace(0.0, 1.0, 1000)
    got = lw.vmap(plus_one)(x)
    (leaf,) = seen[-1][0]
    assert address(leaf) == x.unsafe_buffer_pointer()
    assert not leaf.flags.writeable  # JAX arrays are immutable: lanes only read them
    np.testing.assert_allclose(np.asarray(got), np.asarray(x) + 1)


def test_reduce_sees_the_tensors_own_memory(seen):
    t, x = torch.rand(1000, dtype=torch.float64), jnp.arange(100.0)
    total = lw.reduce(lw.vmap(lambda v: v * v), "sum")
    assert float(total(t)) == pytest.approx(float((t * t).sum()))
    assert address(seen[-1][0][0]) == t.data_ptr()
    assert float(total(x)) == pytest.approx(float((x * x).sum()))
    assert address(seen[-1][0][0]) == x.unsafe_buffer_pointer()


def test_an_array_interface_object_is_viewed_not_copied(seen):
    class Interfaced:  # an array from some other library: only the array interface
        def __init__(self, a):
            self.a, self.__array_interface__ = a, a.__array_interface__

    a = np.arange(5.0)
    np.testing.assert_array_equal(lw.vmap(plus_one)(Interfaced(a)), a + 1)
    assert address(seen[-1][0][0]) == address(a)


# ----------------------------------------------------------------------------- results out


def test_torch_in_torch_out_sharing_the_result_memory(seen):
    t = torch.linspace(-1, 1, 50, dtype=torch.float64)
    got = lw.vmap(lambda x, y: x * y + 1)(t, t)
    assert isinstance(got, torch.Tensor) and got.dtype == torch.float64
    assert got.data_ptr() == address(seen[-1][1])  # torch.from_numpy of the backend's output
    np.testing.assert_allclose(got.numpy(), t.numpy() ** 2 + 1)


def test_jax_in_jax_out():
    x = jnp.arange(6.0).reshape(2, 3)
    got = lw.vmap(lambda row, s: (row.sum() * s, row[0] > 1), in_axes=(0, None))(x, 2.0)
    assert all(isinstance(g, jax.Array) for g in got)
    np.testing.assert_allclose(np.asarray(got[0]), np.asarray(x).sum(axis=1) * 2.0)
    np.testing.assert_array_equal(np.asarray(got[1]), [False, True])


@pytest.mark.parametrize("backend", ["cpu", "python"])
def test_results_equal_numpys_on_each_host_backend(backend):
    a = np.random.default_rng(0).normal(size=(30, 4))
    f = lw.vmap(lw.vmap(lambda x, y: x * y - 1.0, in_axes=(0, None)), in_axes=(None, 0), backend=backend)
    expected = f(a[:, 0], a[:, 1])
    got_torch = f(torch.from_numpy(a[:, 0].copy()), torch.from_numpy(a[:, 1].copy()))
    got_jax = f(jnp.asarray(a[:, 0]), jnp.asarray(a[:, 1]))
    assert isinstance(got_torch, torch.Tensor) and isinstance(got_jax, jax.Array)
    np.testing.assert_array_equal(got_torch.numpy(), expected)
    np.testing.assert_array_equal(np.asarray(got_jax), expected)


def test_reduce_returns_the_callers_arrays():
    t = torch.arange(10.0, dtype=torch.float64)
    f = lw.vmap(lambda x: x * x)
    total, biggest = lw.reduce(f, "sum")(t), lw.reduce(f, "argmax")(jnp.asarray(t.numpy()))
    assert isinstance(total, torch.Tensor) and total.shape == () and float(total) == 285.0
    assert isinstance(biggest, jax.Array) and int(biggest) == 9
    rows = lw.reduce(lw.vmap(lw.vmap(lambda x, y: x * y, in_axes=(None, 0)), in_axes=(0, None)), "max", axis=1)
    got = rows(t, t)
    assert isinstance(got, torch.Tensor)
    np.testing.assert_array_equal(got.numpy(), t.numpy() * 9)


@pytest.mark.parametrize("args", [
    lambda t, x: (t, np.ones(4)),  # torch + NumPy
    lambda t, x: (t, x),  # torch + JAX
    lambda t, x: (np.ones(4), np.ones(4)),
], ids=["torch+numpy", "torch+jax", "numpy"])
def test_mixed_or_numpy_inputs_give_numpy(args):
    got = lw.vmap(lambda a, b: a + b)(*args(torch.ones(4), jnp.ones(4)))
    assert type(got) is np.ndarray


def test_scalars_do_not_count_as_arrays():
    f = lw.vmap(lambda a, b, c: a * b + c, in_axes=(0, None, None))
    assert isinstance(f(torch.ones(3), 2.0, np.float64(1.0)), torch.Tensor)
    assert isinstance(f(jnp.ones(3), 2, np.int64(1)), jax.Array)


def test_pytrees_of_tensors_give_tensors():
    params = {"w": torch.ones(3), "b": torch.zeros(3)}
    got = lw.vmap(lambda p: (p["w"] * 2 + p["b"], p["w"] > 0))(params)
    assert all(isinstance(g, torch.Tensor) for g in got)
    np.testing.assert_array_equal(got[0].numpy(), [2.0, 2.0, 2.0])


def test_out_torch_tensor_is_filled_in_place():
    t, out = torch.arange(4.0, dtype=torch.float64), torch.empty(4, dtype=torch.float64)
    got = lw.vmap(plus_one)(t, out=out)
    assert got is out
    np.testing.assert_array_equal(out.numpy(), [1.0, 2.0, 3.0, 4.0])
    pair = (torch.empty(4, dtype=torch.float64), np.empty(4, bool))
    assert lw.vmap(lambda x: (x, x > 1))(t, out=pair) is pair
    np.testing.assert_array_equal(pair[1], [False, False, True, True])


def test_out_aliasing_the_input_tensor():
    t = torch.arange(4.0, dtype=torch.float64)
    lw.vmap(lambda x: x * 10)(t, out=t)  # as NumPy: the input is read before it is overwritten
    np.testing.assert_array_equal(t.numpy(), [0.0, 10.0, 20.0, 30.0])


def test_a_jax_out_is_refused_clearly():
    with pytest.raises(lw.OutputError, match=r"out= for out is read-only \(JAX arrays"):
        lw.vmap(plus_one)(jnp.arange(3.0), out=jnp.zeros(3))


# ----------------------------------------------------------------------------- errors


def test_a_tensor_requiring_grad_is_refused_naming_it():
    w = torch.ones(3, requires_grad=True)
    with pytest.raises(lw.LaneTypeError, match=r"argument w is a torch tensor that requires grad.*\.detach\(\)"):
        lw.vmap(lambda x, w: x * w)(torch.ones(3), w)
    with pytest.raises(lw.LaneTypeError, match=r"requires grad"):
        lw.reduce(lw.vmap(plus_one), "sum")(w)
    assert isinstance(lw.vmap(plus_one)(w.detach()), torch.Tensor)


@pytest.mark.parametrize("make", [lambda: torch.ones(3, dtype=torch.bfloat16), lambda: jnp.ones(3, jnp.bfloat16)],
                         ids=["torch", "jax"])
def test_bfloat16_is_a_clear_error_naming_the_argument(make):
    with pytest.raises(lw.LaneTypeError, match=r"argument x .*bfloat16.*float32"):
        lw.vmap(lambda x: x + 1)(make())


# ----------------------------------------------------------------------------- fast path, imports


def test_repeated_tensor_calls_take_the_fast_path(seen):
    f = lw.vmap(plus_one)
    t = torch.arange(4.0, dtype=torch.float64)
    f(t)
    assert len(seen) == 1 and len(f._launchers) == 1
    for _ in range(3):
        got = f(t)
        assert isinstance(got, torch.Tensor) and got.tolist() == [1.0, 2.0, 3.0, 4.0]
    x = jnp.arange(3.0)
    f(x)
    assert isinstance(f(x), jax.Array) and np.asarray(f(x)).tolist() == [1.0, 2.0, 3.0]
    assert len(seen) == 2  # one bind per argument type; the repeats ran the fast launchers
    assert type(f(np.ones(2))) is np.ndarray  # a NumPy call is not served by a tensor launcher
    ints = torch.arange(3, dtype=torch.int32)
    assert f(ints).tolist() == [1, 2, 3]  # another dtype: bound once more
    for arg, want in [(t, [1.0, 2.0, 3.0, 4.0]), (ints, [1, 2, 3])] * 2:  # alternating: both kept
        assert f(arg).tolist() == want
    assert len(seen) == 4  # torch float64, jax, NumPy, torch int32: one bind each
    with pytest.raises(lw.LaneTypeError, match="argument x is a torch tensor that requires grad"):
        f(torch.ones(4, dtype=torch.float64, requires_grad=True))  # the launcher defers to the binding


def test_list_arguments_build_no_fast_launcher():
    f = lw.vmap(plus_one)
    for _ in range(2):
        np.testing.assert_array_equal(f([1.0, 2.0]), [2.0, 3.0])
    assert not f._launchers  # it would check for NumPy arrays, miss on every call and be rebuilt


def test_lanewise_imports_and_runs_without_torch_or_jax():
    code = ("import sys; sys.modules['torch'] = sys.modules['jax'] = sys.modules['jaxlib'] = None\n"
            "import numpy as np, lanewise as lw\n"
            "assert lw.vmap(lambda x: x + 1)(np.ones(3)).sum() == 6\n"
            "assert float(lw.reduce(lw.vmap(lambda x: x), 'sum')(np.ones(3))) == 3\n")
    subprocess.run([sys.executable, "-c", code], check=True)
