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


if __name__ == "__main__":
    import tracemalloc

    tracemalloc.start()
    print(json.dumps(jax_child() if sys.argv[1] == "jax" else torch_child()), flush=True)
