"""Issue 42, the JAX and PyTorch bridges: results handed to JAX without XLA's
threads entering Python, the bridges' derivatives of lanes that take a row, and
ragged per-lane results refused at trace time.

The release tests run a child process (this file run as a script), so that a
crash fails the test instead of killing pytest.  The child starts tracemalloc,
hands lanewise results of every kind to JAX (or torch) computations and drops
them while those run, and watches, with ``weakref.finalize``, on which thread
each NumPy result lanewise made is released: it must be the main thread.  XLA
calls a DLPack producer's deleter on its own threads, and NumPy's deleter takes
the GIL there; under tracemalloc that crashed the process.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import weakref

import numpy as np
import pytest

import lanewise as lw

HERE = os.path.dirname(os.path.abspath(__file__))
MB80 = 20_000_000  # float32 elements: 80 MB


# ----------------------------------------------------------------------------- release: the child


class DLPackOnly:
    """An array that offers nothing but DLPack (any ``__dlpack__`` producer)."""

    def __init__(self, inner):
        self.inner = inner

    def __dlpack__(self, **kwargs):
        return self.inner.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self.inner.__dlpack_device__()


class ReleaseWatch:
    """Records the thread on which each NumPy result lanewise hands to a library dies."""

    def __init__(self):
        from lanewise.runtime import interop

        self.main, self.foreign, self.watched = threading.get_ident(), [], 0
        self.interop, self.real = interop, interop.to_library
        interop.to_library = self.to_library

    def to_library(self, result, library):
        for leaf in lw.pytree.flatten(result)[0]:
            if isinstance(leaf, np.ndarray):
                self.watched += 1
                weakref.finalize(leaf, self._released, leaf.shape, str(leaf.dtype))
        return self.real(result, library)

    def _released(self, shape, dtype):
        if threading.get_ident() != self.main:
            self.foreign.append(f"{dtype}{list(shape)}")


def step(carry, x):
    carry = carry + x
    return carry, carry * 0.5


def row_scan(row):
    return lw.scan(step, 0.0, row)


def several(v):
    return v * v, v > 0.5, int(v * 4.0)


def jax_programs(jnp):
    """(name, program, argument maker, NumPy reference) of every kind the bridge returns."""
    double = lw.vmap(lambda v: v * 2.0 + 1.0)
    return [
        ("map", double, lambda n: (jnp.linspace(0.0, 1.0, n, dtype=jnp.float32),), lambda x: x * 2.0 + 1.0),
        ("map int32", lw.vmap(lambda v: v * 3 - 1), lambda n: (jnp.arange(n, dtype=jnp.int32),),
         lambda x: x * 3 - 1),
        ("map uint8", lw.vmap(lambda v: v ^ 5), lambda n: (jnp.arange(n, dtype=jnp.uint8),), lambda x: x ^ 5),
        ("map complex64", lw.vmap(lambda v: v * v), lambda n: (jnp.linspace(0, 1, n) * (1 + 1j),),
         lambda x: x * x),
        ("outputs", lw.vmap(several), lambda n: (jnp.linspace(0.0, 1.0, n, dtype=jnp.float32),),
         lambda x: (x * x, x > 0.5, (x * 4.0).astype(np.int64))),
        ("sum", lw.reduce(lw.vmap(lambda v: v * v), "sum"), lambda n: (jnp.linspace(0.0, 1.0, n, dtype=jnp.float32),),
         lambda x: np.sum(np.asarray(x, np.float64) ** 2)),
        ("max rows", lw.reduce(lw.vmap(lw.vmap(lambda v: v * 2.0)), "max", axis=1),
         lambda n: (jnp.linspace(0.0, 1.0, max(n - n % 4, 4), dtype=jnp.float32).reshape(-1, 4),),
         lambda x: np.max(x * 2.0, axis=1)),
        ("row result", lw.vmap(lambda r: r * 2.0),
         lambda n: (jnp.linspace(0.0, 1.0, max(n - n % 4, 4), dtype=jnp.float32).reshape(-1, 4),), lambda x: x * 2.0),
        ("scan", lw.vmap(row_scan),
         lambda n: (jnp.linspace(0.0, 1.0, max(n - n % 4, 4), dtype=jnp.float32).reshape(-1, 4),),
         lambda x: (np.sum(x, axis=1), np.cumsum(x, axis=1) * 0.5)),
        ("dlpack then jax", double, lambda n: (DLPackOnly(jnp.linspace(0.0, 1.0, n, dtype=jnp.float32)),),
         lambda x: x * 2.0 + 1.0),
    ]


#: The programs also run on 80 MB (the others' kinds are covered at the small sizes).
BIG = ("map", "outputs", "sum", "row result", "dlpack then jax")


def _close(got, want) -> bool:
    got, want = lw.pytree.flatten(got)[0], lw.pytree.flatten(want)[0]
    return len(got) == len(want) and all(
        np.allclose(np.asarray(g), np.asarray(w), rtol=1e-5, atol=1e-5)
        for g, w in zip(got, want, strict=True))


def jax_child() -> dict:
    import jax
    import jax.numpy as jnp

    watch = ReleaseWatch()
    consume = jax.jit(lambda *xs: sum(jnp.sum(jnp.cumsum(jnp.abs(x.astype(jnp.complex64)).ravel())) for x in xs))
    wrong = []
    for n, rounds in ((1, 20), (5, 20), (1000, 5), (MB80, 2)):
        for name, program, make, reference in jax_programs(jnp):
            for k in range(rounds if n < MB80 or name in BIG else 0):
                args = make(n)
                result = program(*args)
                if k == 0 and not _close(result, reference(*(np.from_dlpack(a) for a in args))):
                    wrong.append(f"{name} n={n}")
                # Every leaf goes into a running JAX computation and is dropped meanwhile: the
                # computation then holds the last use of each buffer.
                pending = consume(*jax.tree_util.tree_leaves(result))
                del result, args
                pending.block_until_ready()
                del pending
                program(*(a.inner if isinstance(a, DLPackOnly) else a for a in make(5)))  # the call that crashed
    return {"watched": watch.watched, "foreign": sorted(set(watch.foreign)), "wrong": wrong}


def torch_child() -> dict:
    import torch

    watch = ReleaseWatch()
    op = lw.torch.op(lw.vmap(lambda v: v * v * 0.5))
    wrong = []
    for n, rounds in ((4, 30), (MB80, 2)):
        for k in range(rounds):
            x = torch.linspace(0.0, 1.0, n)
            y = lw.vmap(lambda v: v * 2.0)(x)  # a torch result
            w = x.clone().requires_grad_(True)
            out = op(w)  # the op's result, and its backward's
            loss = (out * y).sum()
            del out, y
            loss.backward()
            if k == 0 and not torch.allclose(w.grad, 2.0 * x * x, rtol=1e-5, atol=1e-6):
                wrong.append(f"torch n={n}")
            del loss, w, x
    return {"watched": watch.watched, "foreign": sorted(set(watch.foreign)), "wrong": wrong}


def run_child(which: str) -> dict:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([os.path.join(HERE, "..", "src"), HERE])}
    done = subprocess.run([sys.executable, os.path.abspath(__file__), which], capture_output=True, text=True,
                          timeout=1200, env=env)
    assert done.returncode == 0, f"the child crashed (rc {done.returncode}):\n{done.stderr[-3000:]}"
    return json.loads(done.stdout.strip().splitlines()[-1])


# ----------------------------------------------------------------------------- release: the tests


def test_segfault_results_handed_to_jax_are_released_on_a_python_thread():
    pytest.importorskip("jax")
    got = run_child("jax")
    assert got["watched"] > 400
    assert got["foreign"] == [], f"results released on a thread XLA made: {got['foreign']}"
    assert got["wrong"] == []


def test_segfault_torch_results_are_released_on_a_python_thread():
    pytest.importorskip("torch")
    got = run_child("torch")
    assert got["watched"] > 30
    assert got["foreign"] == [], f"results released on a thread torch made: {got['foreign']}"
    assert got["wrong"] == []


def test_segfault_jax_results_are_shared_aligned_not_copied():
    jax = pytest.importorskip("jax")
    jnp = jax.numpy
    from lanewise.runtime import interop

    made = []
    real = interop.to_library

    def spy(result, library):
        made.extend(a for a in lw.pytree.flatten(result)[0] if isinstance(a, np.ndarray))
        return real(result, library)

    interop.to_library = spy
    try:
        for n in (1, 5, 1000, 4_000_000):
            for program in (lw.vmap(lambda v: v * 2.0), lw.vmap(lambda r: r + 1.0)):
                x = jnp.ones((n, 1), jnp.float32) if n % 2 else jnp.ones(n, jnp.float32)
                for _ in range(2):  # the second call takes the fast path's launcher, where it has one
                    made.clear()
                    got = program(x)
                    (a,) = made
                    assert a.ctypes.data % interop.XLA_ALIGNMENT == 0
                    assert got.unsafe_buffer_pointer() == a.ctypes.data  # shared: no copy
                np.testing.assert_array_equal(np.asarray(got), np.asarray(program(np.ones(x.shape, np.float32))))
    finally:
        interop.to_library = real


# ----------------------------------------------------------------------------- derivatives of row lanes


def double(r):  # an array expression of the row
    return r * 2.0


def total(r):  # a reduction of the row
    return r.sum()


def squares(r):  # np.sum of an array expression
    return np.sum(r * r)


def scaled_sines(r):  # array expression, times an element
    return np.sin(r) * r[0]


def loop_squares(r):  # element reads only: reverse mode takes these
    t = 0.0
    for i in range(r.shape[0]):
        t += r[i] * r[i]
    return t


def weighted(r, w):  # with a weight row every lane shares, used whole
    return np.sum(r * w) + r[1] * w[0]


#: (lane, its twin over the rows of an array, in NumPy/jax.numpy/torch alike)
ROW_LANES = [
    (double, lambda x, xp: x * 2.0),
    (total, lambda x, xp: x.sum(1)),
    (squares, lambda x, xp: (x * x).sum(1)),
    (scaled_sines, lambda x, xp: xp.sin(x) * x[:, :1]),
    (loop_squares, lambda x, xp: (x * x).sum(1)),
]
ROW_IDS = [lane.__name__ for lane, _ in ROW_LANES]


def rows(seed: int = 0, shape=(5, 4)) -> np.ndarray:
    return np.random.default_rng(seed).uniform(0.2, 1.5, shape)


def tangent_lane(lane):
    def tangent(r, t):
        return lw.jvp(lane, (r,), (t,))[1]
    return tangent


def lw_jvp(lane, x, t, backend):
    """The reference: lw.jvp of the lane, per row, on ``backend``."""
    return np.asarray(lw.vmap(tangent_lane(lane), backend=backend)(x, t))


@pytest.mark.parametrize("backend", ["python", "cpu"])
@pytest.mark.parametrize("lane, twin", ROW_LANES, ids=ROW_IDS)
def test_jax_jvp_of_row_lanes_matches_lw_jvp_and_jax(lane, twin, backend):
    jax = pytest.importorskip("jax")
    x, t = rows(0), rows(1)
    op = lw.jax.op(lw.vmap(lane))
    value, tangent = jax.jvp(op, (x,), (t,))
    want_value, want_tangent = jax.jvp(lambda x: twin(x, jax.numpy), (x,), (t,))
    np.testing.assert_allclose(value, want_value, rtol=1e-5)
    np.testing.assert_allclose(tangent, want_tangent, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(tangent, lw_jvp(lane, x, t, backend), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("backend", ["python", "cpu"])
@pytest.mark.parametrize("lane, twin", ROW_LANES, ids=ROW_IDS)
def test_jax_grad_and_vjp_of_row_lanes_match_lw_jvp_and_jax(lane, twin, backend):
    jax = pytest.importorskip("jax")
    x, t = rows(0), rows(1)
    op = lw.jax.op(lw.vmap(lane))
    ct = rows(2, np.shape(twin(x, np)))
    value, pullback = jax.vjp(op, x)
    (got,) = pullback(jax.numpy.asarray(ct, value.dtype))
    np.testing.assert_allclose(got, jax.vjp(lambda x: twin(x, jax.numpy), x)[1](ct)[0], rtol=1e-5, atol=1e-6)
    # The pullback is the transpose of lanewise's own tangent map: <ct, J t> = <J^T ct, t>.
    np.testing.assert_allclose(np.sum(ct * lw_jvp(lane, x, t, backend)), np.sum(np.asarray(got) * t), rtol=1e-5)
    grad = jax.grad(lambda x: (op(x) * ct).sum())(x)
    np.testing.assert_allclose(grad, got, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("transform", ["jacfwd", "jacrev"])
@pytest.mark.parametrize("lane, twin", ROW_LANES, ids=ROW_IDS)
def test_jax_jacobians_of_row_lanes_match_jax(lane, twin, transform):
    jax = pytest.importorskip("jax")
    x = rows(3, (3, 4))
    got = getattr(jax, transform)(lw.jax.op(lw.vmap(lane)))(x)
    want = getattr(jax, transform)(lambda x: twin(x, jax.numpy))(x)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_jax_grad_of_a_row_lane_with_a_shared_row_used_whole():
    jax = pytest.importorskip("jax")
    jnp = jax.numpy
    x, w = rows(4), rows(5, (4,))
    op = lw.jax.op(lw.vmap(weighted, in_axes=(0, None)))
    got = jax.grad(lambda x, w: (op(x, w) ** 2).sum(), argnums=(0, 1))(x, w)
    want = jax.grad(lambda x, w: (((x * w).sum(1) + x[:, 1] * w[0]) ** 2).sum(), argnums=(0, 1))(x, w)
    for g, h in zip(got, want, strict=True):
        np.testing.assert_allclose(g, h, rtol=1e-5)
    # The shared row's cotangent is one fused sum over the lanes: <ct, J_w t> = <J_w^T ct, t>.
    ct, t = rows(6, (5,)), rows(7, (4,))
    shared = lw.vmap(lambda r, w, t: lw.jvp(weighted, (r, w), (r * 0.0, t))[1], in_axes=(0, None, None))
    np.testing.assert_allclose(np.sum(ct * shared(x, w, t)), np.sum(jax.vjp(lambda w: op(x, w), w)[1](
        jnp.asarray(ct))[0] * t), rtol=1e-5)


@pytest.mark.parametrize("lane, twin", ROW_LANES, ids=ROW_IDS)
def test_torch_backward_of_row_lanes_matches_torch_and_lw_jvp(lane, twin):
    torch = pytest.importorskip("torch")
    x, t = rows(0), rows(1)
    ct = torch.from_numpy(rows(2, np.shape(twin(x, np))))
    got = torch.from_numpy(x).requires_grad_(True)
    (lw.torch.op(lw.vmap(lane))(got) * ct).sum().backward()
    want = torch.from_numpy(x).requires_grad_(True)
    (twin(want, torch) * ct).sum().backward()
    torch.testing.assert_close(got.grad, want.grad, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(np.sum(ct.numpy() * lw_jvp(lane, x, t, "cpu")), np.sum(got.grad.numpy() * t),
                               rtol=1e-6)


def test_torch_backward_of_a_row_lane_with_a_shared_row_used_whole():
    torch = pytest.importorskip("torch")
    x, w = (torch.from_numpy(rows(4)).requires_grad_(True), torch.from_numpy(rows(5, (4,))).requires_grad_(True))
    (lw.torch.op(lw.vmap(weighted, in_axes=(0, None)))(x, w) ** 2).sum().backward()
    x2, w2 = x.detach().clone().requires_grad_(True), w.detach().clone().requires_grad_(True)
    (((x2 * w2).sum(1) + x2[:, 1] * w2[0]) ** 2).sum().backward()
    torch.testing.assert_close(x.grad, x2.grad)
    torch.testing.assert_close(w.grad, w2.grad)


# ----------------------------------------------------------------------------- ragged per-lane results


def ragged(x):  # its result's length depends on the value
    return np.ones(int(x) + 1)


def positives(r):  # a mask's length depends on the values
    return r[r > 0.5]


RAGGED = [(ragged, lambda: np.array([0.0, 1.0, 2.0])), (positives, lambda: rows(8) - 0.5)]


@pytest.mark.parametrize("lane, make", RAGGED, ids=["length", "mask"])
def test_ragged_lane_in_a_jax_op_is_refused_at_trace_time(lane, make):
    jax = pytest.importorskip("jax")
    x = make()
    op = lw.jax.op(lw.vmap(lane))
    with pytest.raises(lw.LaneTypeError, match=rf"lane {lane.__name__} \(.*test_round3_bridges.py:\d+\).*one shape"):
        jax.eval_shape(op, jax.ShapeDtypeStruct(x.shape, x.dtype))  # no data at all: refused by tracing
    with pytest.raises(lw.LaneTypeError, match="fixed when the op is traced"):
        jax.jit(op).lower(x)


@pytest.mark.parametrize("backend", ["python", "cpu"])
@pytest.mark.parametrize("lane, make", RAGGED, ids=["length", "mask"])
def test_ragged_lane_is_refused_by_lw_vmap_on_every_backend(lane, make, backend):
    with pytest.raises(lw.LaneTypeError, match="per-lane arrays must have one shape"):
        lw.vmap(lane, backend=backend)(make())


@pytest.mark.parametrize("lane, make", RAGGED, ids=["length", "mask"])
def test_ragged_lane_in_a_torch_op_is_refused_before_it_runs(lane, make):
    torch = pytest.importorskip("torch")
    with pytest.raises(lw.LaneTypeError, match="fixed when the op is traced"):
        lw.torch.op(lw.vmap(lane))(torch.from_numpy(make()))


def test_a_fixed_shape_row_result_is_still_taken():
    jax = pytest.importorskip("jax")
    x = rows(9)  # lane 0 on zeros and on ones give the same shape
    got = jax.jit(lw.jax.op(lw.vmap(lambda r: r[::-1] * 2.0)))(x)
    np.testing.assert_allclose(got, x[:, ::-1] * 2.0, rtol=1e-6)


if __name__ == "__main__":
    import tracemalloc

    tracemalloc.start()
    print(json.dumps(jax_child() if sys.argv[1] == "jax" else torch_child()), flush=True)
