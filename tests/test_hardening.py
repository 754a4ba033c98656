"""Hostile-user cases of issue 14: each was a silently wrong result, a crash or a
misleading error, and each test failed before its fix.

* helpers named like the function they call, and recursion (item 10);
* random generators and formatted strings inside compiled lanes (items 6, 7);
* error classes with sizes: lw.scan's lengths, out_axes leaves (item 14);
* the disk cache under faults: corrupt reduce kernels, planted metadata, a
  folder others can write to, Numba unable to write (items 11, 12).
"""

from __future__ import annotations

import math
import os
import pickle
import random
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from numpy.random import normal as np_normal

import lanewise as lw
from corpus import fib, ping
from lanewise.runtime import cache

X = np.arange(1.0, 6.0)


# ----------------------------------------------------------------------------- names and recursion


def sqrt(x):  # named like the function it calls
    return np.sqrt(x)


def cos(x):
    return math.cos(x) * 2


def sign(x):
    return -1.0 if x < 0 else 1.0


def uses_named_helpers(x):
    return sqrt(x) + cos(x) + sign(x - 3)


@pytest.mark.parametrize("lane", [sqrt, cos, uses_named_helpers])
def test_helpers_named_like_their_callees(lane):
    np.testing.assert_allclose(lw.vmap(lane)(X), lw.vmap(lane, backend="python")(X), rtol=1e-15)


def test_recursion_runs_on_the_scalar_path():
    n = np.arange(12)
    np.testing.assert_array_equal(lw.vmap(fib)(n), [fib(int(k)) for k in n])


def test_mutual_recursion_is_a_clear_error():
    with pytest.raises(lw.LaneCompileError, match="mutual recursion"):
        lw.vmap(ping)(np.arange(4))


# ----------------------------------------------------------------------------- random and strings


def py_random(x):
    return x + random.random()


def numpy_random(x):
    return x + np.random.normal()


def imported_random(x):
    return x + np_normal()


def f_string(x):
    return len(f"v={x}")


def str_call(x):
    return len(str(x))


def raises_formatted(x):
    if x > 3:
        raise ValueError(f"x={x} is too large")
    return x


@pytest.mark.parametrize("lane", [py_random, numpy_random, imported_random])
def test_random_generators_are_refused_in_compiled_lanes(lane):
    with pytest.raises(lw.LaneCompileError, match="lw.random") as info:
        lw.vmap(lane)(X)
    assert "test_hardening.py" in str(info.value) and "random" in str(info.value)
    assert lw.vmap(lane, backend="python")(X).shape == X.shape  # the reference runs Python as it is


@pytest.mark.parametrize("lane", [f_string, str_call])
def test_formatting_values_is_refused(lane):
    with pytest.raises(lw.LaneCompileError, match="format") as info:
        lw.vmap(lane)(X)
    assert f'line {lane.__code__.co_firstlineno + 1}' in str(info.value)


def test_a_formatted_raise_message_has_the_right_text():
    with pytest.raises(ValueError) as info:
        lw.vmap(raises_formatted)(X)
    assert info.value.args == ("x=4.0 is too large",)
    assert any("i0=3" in note for note in info.value.__notes__)


# ----------------------------------------------------------------------------- errors with sizes


def step(carry, x):
    return carry + x, None


@pytest.mark.parametrize("backend", ["cpu", "python"])
def test_scan_length_mismatch_names_the_sizes(backend):
    with lw.config.overridden(backend=backend):
        with pytest.raises(lw.SizeMismatchError, match=r"\[3, 4\]"):
            lw.scan(step, 0.0, (np.ones(3), np.ones(4)))
    lane = lw.vmap(lambda r: lw.scan(step, 0.0, r, length=2)[0], backend=backend)
    with pytest.raises(lw.SizeMismatchError, match=r"\[2, 3\]"):
        lane(np.ones((2, 3)))


def test_out_axes_leaves_must_be_ints():
    with pytest.raises(lw.AxisSpecError, match="out_axes leaves must be ints or None"):
        lw.vmap(lambda x: x, out_axes=(np.array(0),))(X)


# ----------------------------------------------------------------------------- the disk cache under faults

CHILD = r'''
import sys
import numpy as np
import lanewise as lw
sys.path.insert(0, sys.argv[1])
from lw_cache_lanes import square
r = lw.reduce(lw.vmap(square), "sum")(np.arange(10.0))
m = lw.vmap(square)(np.arange(4.0))
print(float(r), m.tolist())
'''


def _child(tmp_path, cache_dir):
    env = dict(os.environ, LANEWISE_CACHE_DIR=str(cache_dir))
    proc = subprocess.run([sys.executable, "-c", CHILD, str(tmp_path)], env=env, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout.strip().splitlines()[-1]


@pytest.fixture
def lanes_dir(tmp_path):
    (tmp_path / "lw_cache_lanes.py").write_text("def square(x):\n    return x * x\n")
    return tmp_path


WANT = "285.0 [0.0, 1.0, 4.0, 9.0]"


def test_corrupt_object_code_of_a_reduce_kernel(lanes_dir):
    cache_dir = lanes_dir / "cache"
    assert _child(lanes_dir, cache_dir) == WANT
    objects = list(cache_dir.rglob("__pycache__/*.nbc"))
    assert objects
    for path in objects:
        path.write_bytes(b"garbage")
    assert _child(lanes_dir, cache_dir) == WANT
    assert _child(lanes_dir, cache_dir) == WANT


def test_planted_metadata_is_never_unpickled(lanes_dir):
    cache_dir = lanes_dir / "cache"
    assert _child(lanes_dir, cache_dir) == WANT
    marker = lanes_dir / "pwned"

    class Plant:
        def __reduce__(self):
            return (Path.touch, (marker,))

    for meta in cache_dir.rglob("lw_*.meta"):
        meta.write_bytes(pickle.dumps(Plant()))
    assert _child(lanes_dir, cache_dir) == WANT
    assert not marker.exists()


def test_a_cache_folder_others_can_write_is_not_used(lanes_dir):
    cache_dir = lanes_dir / "shared-cache"
    cache_dir.mkdir(mode=0o777)
    cache_dir.chmod(0o777)
    assert _child(lanes_dir, cache_dir) == WANT
    assert not list(cache_dir.rglob("lw_*.py"))


def test_the_cache_folder_is_private(lanes_dir):
    cache_dir = lanes_dir / "new-cache"
    assert _child(lanes_dir, cache_dir) == WANT
    assert cache_dir.stat().st_mode & 0o077 == 0


def test_numba_unable_to_write_its_cache_costs_speed_only(monkeypatch, tmp_path, restore_config):
    """A full disk or a file-size limit: Numba's object-code write raises OSError."""
    from numba.core import caching

    def full_disk(self, *args, **kwargs):
        raise OSError(28, "No space left on device")

    restore_config.cache_dir = tmp_path / "cache"
    monkeypatch.setattr(caching.Cache, "save_overload", full_disk)

    def cube(x):
        return x * x * x

    np.testing.assert_array_equal(lw.vmap(cube)(X), X ** 3)
    assert float(lw.reduce(lw.vmap(cube), "sum")(X)) == float((X ** 3).sum())


def test_meta_files_carry_a_checksum(tmp_path, restore_config):
    restore_config.cache_dir = tmp_path / "cache"
    path = cache.store("k" * 24, "x = 1\n", {"a": 1})
    assert path is not None and cache.lookup("k" * 24)[2] == {"a": 1}
    meta = path.with_suffix(".meta")
    meta.write_bytes(meta.read_bytes()[:-1] + b"!")  # one byte of the payload altered
    assert cache.lookup("k" * 24) is None and not meta.exists()


# ----------------------------------------------------------------------------- fork and spawn

FORK = r'''
import multiprocessing as mp, sys
import numpy as np
import lanewise as lw

def double(x):
    return x * 2.0

def work(i):
    return float(lw.vmap(double)(np.arange(100000.0)).sum()) + i

if __name__ == "__main__":
    lw.config.serial_below = 0  # the parent's run is a parallel one
    print(float(lw.vmap(double)(np.arange(2_000_000.0)).sum()))
    with mp.get_context(sys.argv[1]).Pool(2) as pool:
        print(pool.map(work, range(2)))
'''


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_process_pools_after_a_parallel_run(tmp_path, method):
    """Item 8: a fork after a parallel run killed the child (GNU OpenMP) and hung the pool."""
    script = tmp_path / "pool.py"
    script.write_text(FORK)
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_THREADING_LAYER"}
    proc = subprocess.run([sys.executable, str(script), method], capture_output=True, text=True, timeout=300,
                          env=env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.split() == ["3999998000000.0", "[9999900000.0,", "9999900001.0]"], proc.stdout
    assert "OpenMP" not in proc.stderr


# ----------------------------------------------------------------------------- item 13


@pytest.mark.parametrize("op", ["max", "argmin"])
def test_complex_order_reductions_are_a_clear_error(op):
    with pytest.raises(lw.LaneTypeError, match=f"{op} of complex values"):
        lw.reduce(lw.vmap(lambda v: v * 1j), op)(X)


def test_a_file_name_with_a_newline_stays_in_its_comment(tmp_path):
    """User strings pasted into generated source (file names in comments) are escaped."""
    code = compile("def lane(x):\n    return x + 1.0\n", "weird\nname = 1/0  # .py", "exec")
    namespace: dict = {}
    exec(code, namespace)
    np.testing.assert_array_equal(lw.vmap(namespace["lane"])(X), X + 1)
    source = lw.explain(lw.vmap(namespace["lane"]), X).source
    assert "weird\\nname" in source and "\nname = 1/0" not in source


# ----------------------------------------------------------------------------- JAX semantics (items 15, 16)


def returns_none(x):
    return None


def no_arguments():
    return 1.5


def star_args(*args):
    return args[0] * args[1]


def scaled(a, b, scale=1.0):
    return (a - b) * scale


@pytest.mark.parametrize("backend", ["cpu", "python"])
def test_lanes_jax_accepts(backend):
    import functools

    import jax

    mapped = lw.vmap(returns_none, backend=backend)
    assert mapped(X) is None and mapped(X) is None  # twice: the fast path too
    grid = lw.vmap(no_arguments, in_axes=(), axis_size=3, backend=backend)
    for _ in range(2):
        np.testing.assert_array_equal(grid(), jax.vmap(no_arguments, in_axes=(), axis_size=3)())
    np.testing.assert_array_equal(lw.vmap(star_args, backend=backend)(X, X), X * X)
    np.testing.assert_allclose(lw.vmap(math.sin, backend=backend)(X), np.sin(X), rtol=1e-15)
    np.testing.assert_allclose(lw.vmap(np.arctan2, backend=backend)(X, X[::-1]), np.arctan2(X, X[::-1]),
                               rtol=1e-15)
    part = functools.partial(scaled, 10.0, scale=2.0)
    np.testing.assert_array_equal(lw.vmap(part, backend=backend)(X), jax.vmap(part)(X))


def ema(carry, x):
    carry = 0.5 * carry + 0.5 * x
    return carry, carry * x


@pytest.mark.parametrize("backend", ["cpu", "python"])
def test_scan_unroll_and_map_as_in_jax(backend):
    """Item 18: lw.scan(..., unroll=) and lw.map (jax.lax.map) against JAX."""
    import jax

    with lw.config.overridden(backend=backend):
        for unroll in (1, 3, True):
            got = lw.scan(ema, 0.0, X, unroll=unroll)
            want = jax.lax.scan(ema, 0.0, X, unroll=unroll)
            np.testing.assert_allclose(got[0], want[0], rtol=1e-15)
            np.testing.assert_allclose(got[1], want[1], rtol=1e-15)
        with pytest.raises(lw.LanewiseError, match="unroll"):
            lw.scan(ema, 0.0, X, unroll=0)
    rows = np.arange(12.0).reshape(4, 3)
    np.testing.assert_array_equal(lw.map(lambda r: r.sum() * 2.0, rows), jax.lax.map(lambda r: r.sum() * 2.0, rows))
    in_lanes = lw.vmap(lambda r: lw.scan(ema, 0.0, r, unroll=2)[0], backend=backend)(rows)
    np.testing.assert_allclose(in_lanes, [jax.lax.scan(ema, 0.0, r)[0] for r in rows], rtol=1e-15)



def dict_step(c, v):
    return {"b": c["b"] + v, "a": c["a"] * 2.0}, c["a"]


def scan_with_dict_carry(row):
    c, ys = lw.scan(dict_step, {"b": 0.0, "a": 1.0}, row)
    return c["a"] + c["b"] + ys.sum()


def ordered_difference(d):
    return d["z"] - d["a"] * 0.5


def where_of_scalars(v):
    return abs(np.where(v > 1.0, v, 0.0)) + np.where(v > 2.0, 1, 0)


@pytest.mark.parametrize("backend", ["cpu", "python"])
def test_dict_pytrees_and_np_where_on_scalars_as_in_jax(backend):
    """Item 16: a dict carry inside a lane, an OrderedDict argument, np.where on scalars."""
    import collections

    import jax
    import jax.numpy as jnp

    rows = np.arange(12.0).reshape(4, 3)
    want = jax.vmap(lambda r: (lambda c, ys: c["a"] + c["b"] + ys.sum())(*jax.lax.scan(dict_step, {"b": 0.0, "a": 1.0},
                                                                                        r)))(rows)
    np.testing.assert_allclose(lw.vmap(scan_with_dict_carry, backend=backend)(rows), want, rtol=1e-15)
    od = collections.OrderedDict([("z", X), ("a", X[::-1].copy())])
    np.testing.assert_array_equal(lw.vmap(ordered_difference, backend=backend)(od), jax.vmap(ordered_difference)(od))
    got = lw.vmap(where_of_scalars, backend=backend)(X)
    want = jax.vmap(lambda v: jnp.abs(jnp.where(v > 1.0, v, 0.0)) + jnp.where(v > 2.0, 1, 0))(X)
    np.testing.assert_array_equal(got, want)


def test_a_function_argument_in_a_pytree_is_a_clear_error_that_names_the_way_to_pass_it():
    # A function as an argument of its own is bound into the lane (tests/test_round3_programs.py);
    # inside a pytree it is still no leaf lanewise can map.
    with pytest.raises(lw.LaneTypeError, match=r"argument fs\[0\] .*functools.partial\(lane, f\)"):
        lw.vmap(lambda fs, v: fs[0](v), in_axes=(None, 0))((math.sin,), X)

# ----------------------------------------------------------------------------- out_axes=None (items 5, 17)


def dep_walrus(x, y):
    if (z := x) > 0:
        pass
    return z


def dep_fill(x, y):
    a = np.empty(3)
    a.fill(x)
    return a[0]


def put_first(a, v):
    a[0] = v


def dep_helper_writes(x, y):
    a = np.zeros(3)
    put_first(a, x)
    return a[0]


def dep_index_store(x, y):
    a = np.zeros(3)
    a[int(x) % 3] = 1.0
    return a[0]


def dep_try(x, y):
    try:
        return x
    except ZeroDivisionError:
        return y


def dep_nested(x, y):
    def g():
        return x
    return g()


def dep_chain(x, y):  # x reaches d only on the fourth trip through the loop
    a = b = c = d = y
    for _ in range(4):
        d = c
        c = b
        b = a
        a = x
    return d


def dep_alias(x, t):  # a write through an alias of a local array
    a = np.zeros(2)
    b = a
    b[0] = x
    return t + a[0]


def dep_slice_view(x, t):
    a = np.zeros(2)
    b = a[0:1]
    b[0] = x
    return t + a[0]


def dep_reshaped_view(x, t):
    a = np.zeros((2, 2))
    b = a.reshape(4)
    b[0] = x
    return t + a[0, 0]


def dep_transposed_row(x, t):
    a = np.zeros((2, 2))
    row = a.T[0]
    row[1] = x
    return t + a[1, 0]


def same_either_way(x, y):
    return y if x < 0 else y


def same_either_way_stmt(x, y):
    if x < 0:
        r = y * 2
    else:
        r = y * 2
    return r


@pytest.mark.parametrize("lane, backend", [
    *((lane, backend) for lane in (dep_walrus, dep_fill, dep_helper_writes, dep_index_store, dep_nested, dep_chain,
                                   dep_alias, dep_slice_view, dep_reshaped_view, dep_transposed_row)
      for backend in ("python", "cpu")),
    (dep_try, "python"),  # Numba does not compile a return inside try
], ids=lambda v: getattr(v, "__name__", v))
def test_out_axes_none_refused_when_the_output_depends_on_the_mapped_value(lane, backend):
    """Each returned lane 0's value for every lane before the fix."""
    f = lw.vmap(lane, in_axes=(0, None), out_axes=None, backend=backend)
    with pytest.raises(lw.UnmappedOutputError, match="depends on argument x"):
        f(np.array([1.0, 2.0, 3.0]), 5.0)


@pytest.mark.parametrize("lane", [same_either_way, same_either_way_stmt], ids=lambda f: f.__name__)
@pytest.mark.parametrize("backend", ["python", "cpu"])
def test_out_axes_none_accepted_when_every_branch_gives_the_same(lane, backend):
    got = lw.vmap(lane, in_axes=(0, None), out_axes=None, backend=backend)(np.array([-1.0, 2.0]), 5.0)
    assert np.ndim(got) == 0 and got == lane(-1.0, 5.0)


# ----------------------------------------------------------------------------- Ctrl-C (item 13)

SIGINT_SCRIPT = """
import os, signal, threading, time
import numpy as np, lanewise as lw

# A process started in the background inherits SIGINT ignored (CI runners, `cmd &`):
# Python then installs no KeyboardInterrupt handler.  The test is of lanewise, not of that.
signal.signal(signal.SIGINT, signal.default_int_handler)

def spin(x, n):
    s = 0.0
    for i in range(n):
        s += x * 1e-9
    return s

x = np.ones(1 << 18)
f = lw.vmap(spin, in_axes=(0, None))
r = lw.reduce(f, "sum")
for run in (f, r):
    run(x, 1)  # compiles the parallel kernel (a compile holds the interpreter)
    start = time.perf_counter()
    threading.Timer(0.5, lambda: os.kill(os.getpid(), signal.SIGINT)).start()
    try:
        run(x, 100_000)  # about 15 s of work on 2 cores
        print("finished", time.perf_counter() - start)
    except KeyboardInterrupt:
        print("interrupted", time.perf_counter() - start)
print("alive", float(f(x, 2).sum()) > 0)
"""


def test_ctrl_c_stops_a_long_parallel_run_between_blocks():
    """Before: SIGINT was honoured only when the whole kernel had finished."""
    done = subprocess.run([sys.executable, "-c", SIGINT_SCRIPT], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    lines = done.stdout.split("\n")
    for line in lines[:2]:
        word, seconds = line.split()
        assert word == "interrupted" and float(seconds) < 4.0, done.stdout
    assert lines[2] == "alive True"


# ----------------------------------------------------------------------------- explain (issue 16)


def does_not_compile(x):
    n = 0
    while x > 1.0:
        x = x.halved()
        n += 1
    return n


def test_explain_of_a_lane_that_does_not_compile_explains_what_it_can():
    text = lw.explain(lw.vmap(does_not_compile), np.arange(3.0))
    assert "x of type float64[3]" in text and "vmap(does_not_compile), 3 lanes" in text
    assert "lane path: none: the lane does not compile" in text and "SPMD on SIMD would be tried" in text
    line = does_not_compile.__code__.co_firstlineno + 3
    assert f'line {line}' in text and "x = x.halved()" in text
    with pytest.raises(lw.LaneCompileError):
        lw.vmap(does_not_compile)(np.arange(3.0))


@pytest.mark.parametrize("backend", ["python", "cpu"])
def test_big_endian_arrays_are_read_as_their_values(backend):
    """Big-endian data (FITS, HDF5) raised a raw Numba 'Unsupported array dtype: >f8'."""
    x = np.linspace(-1.0, 1.0, 7)
    np.testing.assert_array_equal(lw.vmap(lambda a: a * 2.0 + 1.0, backend=backend)(x.astype(">f8")), x * 2.0 + 1.0)
    k = np.arange(5)
    np.testing.assert_array_equal(lw.reduce(lw.vmap(lambda a: a * 3, backend=backend), "sum")(k.astype(">i4")),
                                  3 * k.sum())
    with pytest.raises(lw.LaneTypeError, match=r"argument p\[0\] has dtype >f8, in non-native byte order"):
        lw.vmap(lambda p: p[0] * 2.0, backend=backend)((x.astype(">f8"),))
    if np.dtype(np.longdouble).itemsize > 8:  # extended precision here (not on every platform)
        with pytest.raises(lw.LaneTypeError, match=f"argument a has dtype {np.dtype(np.longdouble)}"):
            lw.vmap(lambda a: a * 2.0, backend=backend)(x.astype(np.longdouble))


def positive_only(a):
    if a <= 0.0:
        raise ValueError("a must be positive")
    return 1.0 / a, int(a)


@pytest.mark.parametrize("backend", ["python", "cpu"])
def test_zero_lanes_do_not_run_the_lane_on_made_up_values(backend):
    """The python backend ran the lane on zeros to learn the result type of a call with
    no lanes, and the lane's own argument check failed the call; the compiler's type
    gives the empty result instead, as on the cpu backend."""
    for mapped, x in ((lw.vmap(positive_only, backend=backend), np.ones(0)),
                      (lw.vmap(lw.vmap(positive_only), backend=backend), np.ones((3, 0)))):
        inv, whole = mapped(x)
        assert inv.shape == whole.shape == x.shape and (inv.dtype, whole.dtype) == (np.float64, np.int64)


@pytest.mark.parametrize("fn", [np.exp, np.sqrt, np.log, np.sin, np.cos, np.tanh, lambda z: np.power(z, 2.5)],
                         ids=["exp", "sqrt", "log", "sin", "cos", "tanh", "power"])
def test_numpy_functions_of_complex_lanes_compile(fn):
    """lanewise's vector math replaces NumPy's functions in lanes, and it is real: a
    complex argument failed to compile ('No implementation'); NumPy's own serves it."""
    z = np.array([1 + 2j, -3j, 0.5 - 0.25j, -2.0 + 0j])
    np.testing.assert_allclose(lw.vmap(lambda v: fn(v))(z), lw.vmap(lambda v: fn(v), backend="python")(z),
                               rtol=1e-14)
