"""The kernel caches never serve code compiled from something other than what runs.

Every kind of value a lane can read is changed between two builds of the same
lane; the second build must compute with the new value — in the same process
(a new ``lw.vmap``; the memory caches of compiled lanes) and in a fresh process
that finds the first process's kernels on disk.  Issue 14, item 1.
"""

from __future__ import annotations

import collections
import enum
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numba
import numpy as np
import pytest

import lanewise as lw
from lanewise.lane.fingerprint import fingerprint
from lanewise.runtime import cache

X = np.arange(1.0, 6.0)

# ----------------------------------------------------------------------------- in one process

G = 1.0


def reads_global(x):
    return x * G


def test_global_rebound_between_builds():
    global G
    G = 1.0
    np.testing.assert_array_equal(lw.vmap(reads_global)(X), X)
    G = 2.0
    try:
        np.testing.assert_array_equal(lw.vmap(reads_global)(X), 2 * X)
    finally:
        G = 1.0


TABLE = np.array([1.0, 2.0])
SETTINGS = __import__("types").ModuleType("lw_test_settings")
SETTINGS.SCALE = 1.0


def scaled(x):
    return x * SETTINGS.SCALE


def reads_table(x):
    return x + TABLE[0] + scaled(x) * G


def _runs(backend):
    return lw.vmap(reads_table, backend=backend), lw.reduce(lw.vmap(reads_table, backend=backend), "sum")


def test_a_kept_program_sees_values_changed_after_its_first_call():
    """The same ``lw.vmap`` / ``lw.reduce`` object called again after a value its lane
    reads changed (an array mutated in place, a module attribute, a global rebound,
    the global a helper reads) computes with the new value, as the python backend
    does.  Before: the object kept its kernels, which froze the old values."""
    global G
    mapped, total = _runs("cpu")
    spec_mapped, spec_total = _runs("python")

    def check():
        want = spec_mapped(X)
        np.testing.assert_array_equal(mapped(X), want)
        np.testing.assert_array_equal(total(X), spec_total(X))
        return want

    first = check()
    kept = list(mapped._executables.values())
    check()
    assert list(mapped._executables.values()) == kept, "nothing changed: the executables must be kept"
    try:
        TABLE[0] = 100.0
        SETTINGS.SCALE = 3.0
        G = 2.0
        assert not np.array_equal(check(), first)
        assert list(mapped._executables.values()) != kept
    finally:
        TABLE[0], SETTINGS.SCALE, G = 1.0, 1.0, 1.0
    np.testing.assert_array_equal(check(), first)


def test_a_kept_program_sees_a_reassigned_closure_variable():
    scale = 1.0

    def lane(x):
        return x * scale

    mapped = lw.vmap(lane)
    np.testing.assert_array_equal(mapped(X), X)
    scale = 4.0
    np.testing.assert_array_equal(mapped(X), 4.0 * X)


STRIDED = np.arange(8.0)[::2]  # a non-contiguous view: watched by its contents, not its buffer's start


def test_a_kept_program_sees_a_strided_global_and_an_in_place_relayout():
    """The watch hashes the array's contents and layout in place (no snapshot copy):
    a write through the base of a strided global and an in-place ``a.shape = ...``
    of a global both reach the next call."""
    mapped = lw.vmap(lambda i: STRIDED[i] + STRIDED.shape[0])
    idx = np.arange(2)
    np.testing.assert_array_equal(mapped(idx), [4.0, 6.0])
    STRIDED.base[2] = 10.0  # element 1 of the view
    np.testing.assert_array_equal(mapped(idx), [4.0, 14.0])
    table = np.arange(4.0)

    def lane(i):
        return table.shape[0] + 0.0 * table[0]

    grid = lw.vmap(lane)
    np.testing.assert_array_equal(grid(idx), [4.0, 4.0])
    table.shape = (2, 2)  # the lane now reads a 2-d table: typed afresh, not served stale
    np.testing.assert_array_equal(grid(idx), lw.vmap(lane, backend="python")(idx))
    assert grid(idx).shape == (2, 2)


def helper(x):
    return x + 1.0


def calls_helper(x):
    return helper(x) * 2.0


def test_helper_redefined_between_builds():
    global helper
    original = helper
    np.testing.assert_array_equal(lw.vmap(calls_helper)(X), (X + 1) * 2)

    def helper(x):  # noqa: F811 - the redefinition under test
        return x - 1.0

    try:
        np.testing.assert_array_equal(lw.vmap(calls_helper)(X), (X - 1) * 2)
    finally:
        helper = original


def test_closure_default_and_array_values():
    def make(scale, table):
        def lane(x, offset=0.5):
            return x * scale + table[1] + offset
        return lane

    table = np.array([0.0, 10.0])
    np.testing.assert_array_equal(lw.vmap(make(2.0, table))(X), X * 2 + 10.5)
    np.testing.assert_array_equal(lw.vmap(make(3.0, table))(X), X * 3 + 10.5)
    table[1] = 20.0  # mutated in place: the array's bytes are part of the key
    np.testing.assert_array_equal(lw.vmap(make(3.0, table))(X), X * 3 + 20.5)


Pair = collections.namedtuple("Pair", "a b")


def reads_namedtuple(x):
    return Pair(x, 2.0 * x).a


def test_namedtuple_field_order():
    global Pair
    original = Pair
    np.testing.assert_array_equal(lw.vmap(reads_namedtuple)(X), X)
    Pair = collections.namedtuple("Pair", "b a")  # same name, fields swapped
    try:
        np.testing.assert_array_equal(lw.vmap(reads_namedtuple)(X), 2 * X)
    finally:
        Pair = original


class Mode(enum.IntEnum):
    FAST = 1


def reads_enum(x):
    return x * Mode.FAST.value


def test_enum_member_value():
    global Mode
    original = Mode
    np.testing.assert_array_equal(lw.vmap(reads_enum)(X), X)

    class Mode(enum.IntEnum):  # noqa: F811 - same name, new value
        FAST = 3

    try:
        np.testing.assert_array_equal(lw.vmap(reads_enum)(X), 3 * X)
    finally:
        Mode = original


def test_fingerprint_covers_helper_options_and_classes():
    """What changes the compiled code without changing a result we can observe
    bit for bit here still changes the key."""
    def plain(x):
        return x + 1.0

    fast = numba.njit(fastmath=True)(plain)
    strict = numba.njit(error_model="python")(plain)

    def via_fast(x):
        return fast(x)

    def via_strict(x):
        return strict(x)

    assert fingerprint(via_fast) != fingerprint(via_strict)

    class K:
        scale = 1.0

    def with_k(x):
        return x * K.scale

    before = fingerprint(with_k)
    K.scale = 2.0  # a class is hashed by its definition, not its name
    assert fingerprint(with_k) not in (before, None)


def test_numba_settings_are_part_of_every_key(monkeypatch):
    before = cache.key_of("x")
    monkeypatch.setattr(numba.config, "BOUNDSCHECK", not numba.config.BOUNDSCHECK)
    assert cache.key_of("x") != before


# ----------------------------------------------------------------------------- source edited after import

LANE_SOURCE = '''
import numpy as np
import pytest

def over(row, t):
    n = 0
    for i in range(row.shape[0]):
        if row[i] > t:
            n += 1
    return n
'''


def _module(tmp_path, name, text):
    path = tmp_path / f"{name}.py"
    path.write_text(textwrap.dedent(text))
    sys.path.insert(0, str(tmp_path))
    try:
        module = __import__(name)
    finally:
        sys.path.remove(str(tmp_path))
    return module, path


def test_file_edited_after_import_does_not_change_the_kernel(tmp_path, restore_config):
    """The SPMD path reads the lane's source; an edit of one operator after import
    must not reach the kernel (it compiles what runs, the bytecode)."""
    module, path = _module(tmp_path, "lw_edited_lane", LANE_SOURCE)
    path.write_text(path.read_text().replace("row[i] > t", "row[i] >= t"))  # not re-imported
    rows = np.array([[1.0, 2.0, 2.0, 3.0], [2.0, 2.0, 2.0, 2.0]])
    want = lw.vmap(module.over, in_axes=(0, None), backend="python")(rows, 2.0)
    for spmd in ("auto", "1", "0"):
        restore_config.spmd = spmd
        got = lw.vmap(module.over, in_axes=(0, None))(rows, 2.0)
        np.testing.assert_array_equal(got, want, err_msg=f"spmd={spmd}")


# ----------------------------------------------------------------------------- across processes

CHILD = r'''
import json, sys
import numpy as np
import pytest
import lanewise as lw
sys.path.insert(0, sys.argv[1])
import lw_child_lane as m
x = np.arange(1.0, 6.0)
out = {}
for g in [float(v) for v in sys.argv[2].split(",")]:
    m.G = g
    out[str(g)] = lw.vmap(m.lane)(x).tolist()
print(json.dumps(out))
'''


def _child(tmp_path, cache_dir, values):
    env = dict(os.environ, LANEWISE_CACHE_DIR=str(cache_dir))
    proc = subprocess.run([sys.executable, "-c", CHILD, str(tmp_path), values], env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_rebinding_in_one_process_does_not_poison_the_disk_cache(tmp_path):
    """Process 1 builds with G = 1, then G = 2; process 2 starts with G = 2 and
    finds process 1's kernels on disk: it must compute with G = 2."""
    (tmp_path / "lw_child_lane.py").write_text("G = 1.0\n\ndef lane(x):\n    return x * G\n")
    cache_dir = tmp_path / "cache"
    first = _child(tmp_path, cache_dir, "1,2")
    x = np.arange(1.0, 6.0)
    assert first == {"1.0": x.tolist(), "2.0": (2 * x).tolist()}
    assert _child(tmp_path, cache_dir, "2") == {"2.0": (2 * x).tolist()}
    assert list(Path(cache_dir).rglob("lw_*.py"))  # the second process did read a disk cache


def _square(x):
    return x * x


def _cube(x):
    return x * x * x


def test_functions_lanewise_makes_around_a_lane_are_hashed_with_the_lane():
    """Derivative and bridge lanes are lanewise-made functions calling the user's lane:
    hashed by name, every lane shared one key (an edited lane got its old gradient)."""
    from lanewise.autodiff.source import build

    def around(lane):
        return build("# test", "def _lw_around(x):", ["    return _lw_lane(x) + 1.0"], {}, {"_lw_lane": lane})

    assert fingerprint(around(around(_square))) != fingerprint(around(around(_cube)))
    assert fingerprint(around(around(_square))) == fingerprint(around(around(_square)))
    from lanewise.bridge.derive import tangent_program
    from lanewise.bridge.signature import Op
    tangents = [tangent_program(Op.of(lw.vmap(lane), (X,)), (0,)).program for lane in (_square, _cube)]
    assert len({fingerprint(t.fun) for t in tangents}) == 2


EDITED = r'''
import json, sys
import jax, jax.numpy as jnp
import lanewise as lw
jax.config.update("jax_enable_x64", True)
sys.path.insert(0, sys.argv[1])
from lw_edited_gradient import f
x = jnp.linspace(0.0, 1.0, 5)
op = lw.jax.op(lw.vmap(f, in_axes=(0, None)))
loss = lambda a: op(x, a).sum()
print(json.dumps([float(jax.grad(loss)(1.5)), float(jax.jvp(loss, (1.5,), (1.0,))[1])]))
'''


def test_an_edited_lane_gets_its_own_gradient_from_the_disk_cache(tmp_path):
    """Process 2 runs an edited lane whose JAX-op gradient programs process 1 cached."""
    env = dict(os.environ, LANEWISE_CACHE_DIR=str(tmp_path / "cache"))
    x = np.linspace(0.0, 1.0, 5)
    for body, want in (("a * math.sin(x) * x", np.sum(np.sin(x) * x)),
                       ("math.sin(a * x) * x", np.sum(np.cos(1.5 * x) * x * x))):
        (tmp_path / "lw_edited_gradient.py").write_text(f"import math\n\ndef f(x, a):\n    return {body}\n")
        proc = subprocess.run([sys.executable, "-c", EDITED, str(tmp_path)], env=env, capture_output=True,
                              text=True, timeout=600)
        assert proc.returncode == 0, proc.stderr[-3000:]
        np.testing.assert_allclose(json.loads(proc.stdout.strip().splitlines()[-1]), [want, want], rtol=1e-12)


# ----------------------------------------------------------------------------- warm start

WARM = r'''
import json, sys
import numpy as np
import pytest
import lanewise as lw
from lanewise.backends.cpu import map as cpu_map
from lanewise.lane.ir import build as ir_build

built = []  # every function the lane IR front end parses, by any entry (build, function_ir, a tree)
parse = ir_build._Builder.function
ir_build._Builder.function = lambda self, node, name: built.append(name) or parse(self, node, name)
sys.path.insert(0, sys.argv[1])
import lw_warm_lane as m
x = np.linspace(-1.0, 1.0, 7, dtype=np.float32)
k = np.int64(sys.argv[2])
mapped = lw.vmap(m.lane, in_axes=(0, None))(x, k)
total = lw.reduce(lw.vmap(m.lane, in_axes=(0, None)), "sum")(x, k)
print(json.dumps({"built": len(built), "disk": cpu_map.stats["disk"], "mapped": mapped.tolist(),
                  "dtype": str(mapped.dtype), "total": float(total), "total_dtype": str(total.dtype)}))
'''


def _warm_child(tmp_path, k: int = 2) -> dict:
    env = dict(os.environ, LANEWISE_CACHE_DIR=str(tmp_path / "cache"))
    proc = subprocess.run([sys.executable, "-c", WARM, str(tmp_path), str(k)], env=env, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _write_lane(tmp_path, text: str) -> None:
    path = tmp_path / "lw_warm_lane.py"
    path.write_text(textwrap.dedent(text))
    # the same size and second as the file it replaces must not let a stale .pyc run
    for pyc in (tmp_path / "__pycache__").glob("lw_warm_lane*"):
        pyc.unlink()


def _expect(got: dict, want: np.ndarray) -> None:
    assert got["dtype"] == str(want.dtype)
    np.testing.assert_allclose(got["mapped"], want, rtol=1e-6, atol=1e-6)  # float64 math, float32 data
    assert got["total_dtype"] == str(want.dtype)
    np.testing.assert_allclose(got["total"], want.sum(dtype=np.float64), rtol=1e-5)


X32 = np.linspace(-1.0, 1.0, 7, dtype=np.float32)

UNUSED_K = """
def lane(x, k):
    return x * 3.0 if k > 0 else x
"""


def test_a_warm_process_builds_no_lane_ir(tmp_path):
    """A process that finds the kernels on disk takes the lane's dependence answers
    (k is not computed with: a float32 result stays float32) from the cache entry:
    it parses no function into the lane IR, and computes as NumPy does."""
    _write_lane(tmp_path, UNUSED_K)
    want = X32 * 3.0  # k = 2 only chooses the branch: NumPy keeps float32
    cold = _warm_child(tmp_path)
    assert cold["built"] > 0 and cold["disk"] == 0  # the counter sees the cold process's builds
    _expect(cold, want)
    warm = _warm_child(tmp_path)
    assert warm["disk"] == 1, warm
    assert warm["built"] == 0, warm
    _expect(warm, want)


K = np.int64(2)


@pytest.mark.parametrize("used, want", [
    ("x * 3.0 + k", X32 * 3.0 + K),
    ("x * 3.0 if k > 0 else x + k", np.where(K > 0, X32 * 3.0, X32 + K)),  # float64 as NumPy's where
], ids=["computed", "in_a_branch"])
def test_a_parameter_that_becomes_used_is_not_served_a_stale_answer(tmp_path, used, want):
    """The dependence answers are kept under the kernel's key: once the lane computes a
    value with k, a process reading the same cache stores the result as NumPy does
    (float32 with int64: float64), not as the answer cached for the old lane said."""
    _write_lane(tmp_path, UNUSED_K)
    for _ in range(2):  # cold, then warm: float32
        _expect(_warm_child(tmp_path), X32 * 3.0)
    _write_lane(tmp_path, f"def lane(x, k):\n    return {used}\n")
    got = _warm_child(tmp_path)
    assert got["disk"] == 0  # a new key: typed and rendered again
    assert want.dtype == np.float64
    _expect(got, want)
    _expect(_warm_child(tmp_path), want)  # and warm again
