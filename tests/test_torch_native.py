"""lw.torch.op's C++ CPU kernel (lanewise/torch/native.cpp): when it runs the compiled
program itself and when it hands the call to the Python kernel, and that both give
the program's own results.

The Python kernel is observed through a ``lw.Mapped`` subclass counting the
calls that reach the program from Python: a call the C++ kernel serves does not.
"""

from __future__ import annotations

import math
import threading

import numpy as np
import pytest
from optional import requires_torch

torch = requires_torch()

import gil  # noqa: E402
import lanewise as lw  # noqa: E402
from lanewise.torch import library, native  # noqa: E402

pytestmark = pytest.mark.skipif(native.library() is None, reason="no C++ compiler for lw.torch.op's kernel")


class Counted(lw.Mapped):
    """A ``lw.vmap`` program that counts the calls made to it from Python."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.calls = 0

    def __call__(self, *args, **kwargs):
        self.calls += 1
        return super().__call__(*args, **kwargs)


def counted(fun, in_axes=0):
    return Counted(fun, in_axes, 0, None, None)


def qualname(op, tensors) -> str:
    overload, _ = library.resolve(op._lw_ops[len(tensors)], tensors)
    return overload._name


def wave(x, a):
    return a * math.sin(x) + x * x, x > a


def test_planned_sizes_run_without_python():
    program = counted(wave, (0, None))
    op = lw.torch.op(program)
    x, a = torch.linspace(-2, 2, 9, dtype=torch.float64), torch.tensor(0.5, dtype=torch.float64)
    want = program(x.numpy(), np.float64(0.5))
    program.calls = 0
    for k in range(3):
        y, above = op(x, a)
        np.testing.assert_array_equal(y.numpy(), want[0])
        np.testing.assert_array_equal(above.numpy(), want[1])
    assert program.calls == 1  # the first call planned these sizes; the C++ kernel ran the others
    assert native.plans(qualname(op, [x, a])) == 1
    y, _ = op(x[:4], a)  # new sizes: the Python kernel once, then C++
    op(x[:4], a)
    assert program.calls == 2 and native.plans(qualname(op, [x, a])) == 2
    np.testing.assert_array_equal(y.numpy(), want[0][:4])


def test_tensors_the_kernel_does_not_read_go_to_python():
    program = counted(lambda x, y: x * y - 1.0)
    op = lw.torch.op(program)
    base = torch.arange(24.0, dtype=torch.float64)
    x, y = base[:8], base[8:16]
    op(x, y)
    op(x, y)
    program.calls = 0
    strided = base[::3]  # the same sizes, not contiguous
    for _ in range(2):
        torch.testing.assert_close(op(strided, y), strided * y - 1.0, rtol=0, atol=0)
    z = torch.complex(base[:8], base[8:16]).conj()  # lazily conjugated: its memory is not its values
    zop = lw.torch.op(lw.vmap(lambda z: z * 2.0))
    zop(z.resolve_conj())
    torch.testing.assert_close(zop(z), z.resolve_conj() * 2.0, rtol=0, atol=0)
    torch.testing.assert_close(zop(-z), -z.resolve_conj() * 2.0, rtol=0, atol=0)
    assert program.calls == 2


@pytest.mark.parametrize("n", [4, 50_000])  # serial, and the handler's parallel kernel
def test_a_lane_that_raises_in_the_kernel_raises_lanewise_error(n):
    def pick(i):
        table = np.arange(3.0)
        return table[i]

    op = lw.torch.op(lw.vmap(pick))
    good = torch.arange(n) % 3
    op(good)
    op(good)  # planned: the next call of these sizes runs in C++
    bad = good.clone()
    bad[[n - 1, n // 2]] = 7
    with pytest.raises(IndexError) as raised:
        op(bad)
    with pytest.raises(IndexError) as direct:
        lw.vmap(pick)(bad.numpy())
    assert str(raised.value) == str(direct.value) and "test_torch_native.py" in str(raised.value)
    assert f"lane i0={n // 2} of" in str(raised.value)  # the first failed lane
    torch.testing.assert_close(op(good), good.to(torch.float64))


def dtypes_lane(i, f, b, z):
    """Every kind of dtype in and out, and a per-lane array result."""
    return i * 3 + (1 if b else 0), f / 4, not b, z * f, np.array([f, -f, f * i])


@pytest.mark.parametrize("n", [0, 1, 5, 40_000])
def test_the_kernel_gives_the_programs_results(n):
    program = lw.vmap(dtypes_lane, in_axes=(0, 0, 0, None))
    op = lw.torch.op(program)
    rng = np.random.default_rng(n)
    i = rng.integers(-50, 50, n).astype(np.int32)
    f = rng.normal(size=n).astype(np.float32)
    b = rng.random(n) < 0.5
    z = np.complex128(1 - 2j)
    want = program(i, f, b, z)
    args = [torch.from_numpy(i), torch.from_numpy(f), torch.from_numpy(b), torch.tensor(z)]
    for _ in range(2):  # planned, then run by C++
        got = op(*args)
        for g, w in zip(got, want, strict=True):
            assert g.numpy().dtype == w.dtype and g.shape == w.shape
            np.testing.assert_array_equal(g.numpy(), w)


def test_nested_programs_and_torch_compile_with_new_sizes():
    def bump(x, y, w):
        return math.exp(-w * (x * x + y * y))

    program = lw.vmap(lw.vmap(bump, in_axes=(None, 0, None)), in_axes=(0, None, None))
    op = lw.torch.op(program)
    f = torch.compile(lambda x, y: op(x, y, 0.5) * 2.0, fullgraph=True, backend="inductor", dynamic=True)
    for n, m in [(3, 4), (3, 4), (5, 2), (5, 2), (7, 9)]:
        x, y = torch.linspace(-1, 1, n, dtype=torch.float64), torch.linspace(-2, 2, m, dtype=torch.float64)
        np.testing.assert_allclose(f(x, y).numpy(), 2 * program(x.numpy(), y.numpy(), 0.5), rtol=1e-15)


def test_plans_are_bounded(monkeypatch):
    monkeypatch.setattr(native, "PLAN_LIMIT", 2)
    program = counted(lambda x: x - 2.0)
    op = lw.torch.op(program)
    for n in (1, 2, 3, 3, 3):
        torch.testing.assert_close(op(torch.ones(n, dtype=torch.float64)), torch.full((n,), -1.0, dtype=torch.float64))
    assert native.plans(qualname(op, [torch.ones(1, dtype=torch.float64)])) == 2
    assert program.calls == 5  # size 3 has no plan: every call runs in Python


def test_many_threads_call_at_once():
    def spin(x):
        s = x
        for k in range(200):
            s = s * 0.5 + math.sin(k * x)
        return s

    program = lw.vmap(spin)
    op = lw.torch.op(program)
    xs = [torch.linspace(0, 1, n, dtype=torch.float64) for n in (10, 50_000)]
    wants = [program(x.numpy()) for x in xs]
    for x in xs:
        op(x)
    errors = []

    def work(k):
        try:
            for _ in range(5):
                np.testing.assert_array_equal(op(xs[k % 2]).numpy(), wants[k % 2])
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors


def test_the_call_does_not_hold_the_gil():
    op = lw.torch.op(lw.vmap(gil.slow))
    x = torch.ones(4, dtype=torch.float64)
    op(x)
    op(x)  # planned and warm
    alone, ticks = gil.ticks_beside(lambda: op(x))
    assert alone > 1e-2 and ticks > 100  # the other thread ran while the op ran


def test_without_the_kernel_operators_use_python(monkeypatch):
    monkeypatch.setenv("CXX", "/nonexistent/c++")
    monkeypatch.setattr(native, "SOURCE", native.SOURCE.with_name("missing.cpp"))  # a new build is attempted
    native.library.cache_clear()
    try:
        with pytest.warns(RuntimeWarning, match="did not build"):
            assert native.library() is None
        program = counted(lambda x: x * 3.0)
        op = lw.torch.op(program)
        for _ in range(2):
            torch.testing.assert_close(op(torch.ones(3, dtype=torch.float64)), torch.full((3,), 3.0,
                                                                                           dtype=torch.float64))
        assert program.calls == 2
        native.library.cache_clear()
        with lw.config.overridden(torch_native=False):
            assert native.library() is None
    finally:
        native.library.cache_clear()


def test_without_the_disk_cache_the_library_is_built_in_a_temporary_folder(monkeypatch, tmp_path):
    monkeypatch.setattr(native.tempfile, "tempdir", str(tmp_path))
    native.library.cache_clear()
    try:
        with lw.config.overridden(disk_cache=False):
            assert native.library() is not None
        assert list(tmp_path.iterdir()) == []  # loaded, then deleted
    finally:
        native.library.cache_clear()


def test_a_second_process_loads_the_built_library_without_building():
    """The library is built once per machine: a new process (sharing this run's cache folder)
    loads the file the first one published, and a build there would fail loudly."""
    import os
    import subprocess
    import sys

    native.library()  # built (or loaded) here: the cache folder has it
    child = ("import lanewise.torch.native as native\n"
             "def refused(folder): raise AssertionError('built again')\n"
             "native._build = refused\n"
             "print(native.library() is not None)\n")
    done = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, timeout=600,
                          env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split() == ["True"], done.stderr[-3000:]
