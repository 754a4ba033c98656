"""backend="tpu" over several devices (backends/tpu/sharded.py): the outermost vmap level
split with ``jax.shard_map``, checked against ``backend="python"`` and NumPy.

JAX fixes its device count when it is first imported, so the tests that need eight
devices run in a subprocess (:func:`test_on_eight_cpu_devices`: this file under pytest,
with ``XLA_FLAGS=--xla_force_host_platform_device_count=8``, ``JAX_PLATFORMS=cpu`` and
interpret mode) and are skipped in a process with one device; the others check that one
device keeps the unsharded path.  Sizes are small: interpret mode runs each device's
kernel on the CPU.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("jax")
import jax  # noqa: E402
from jax.sharding import Mesh, NamedSharding, PartitionSpec  # noqa: E402

import lanewise as lw  # noqa: E402
from conformance import assert_same_32  # noqa: E402
from lanewise.backends import tpu  # noqa: E402
from lanewise.backends.tpu import sharded  # noqa: E402

DEVICES = jax.device_count()
#: ``LANEWISE_TPU_TESTS_ON_CHIP=1`` on a TPU host runs the in-process tests on the chip
#: (Mosaic compiles each kernel, under ``jax.shard_map`` too), as tests/test_tpu_backend.py.
ON_CHIP = os.environ.get("LANEWISE_TPU_TESTS_ON_CHIP") == "1" and jax.default_backend() == "tpu"
RTOL = 2e-4 if ON_CHIP else 2e-5
#: The tests that need several devices (run by :func:`test_on_eight_cpu_devices`).
several = pytest.mark.skipif(DEVICES < 8, reason="needs 8 JAX devices: run in a subprocess by "
                                                  "test_on_eight_cpu_devices")


@pytest.fixture(autouse=True)
def interpret():
    with lw.config.overridden(tpu_interpret=not ON_CHIP, tpu_tile=(8, 128), tpu_unroll=1, tpu_devices="all"):
        yield


def spin(x, n):
    """A divergent loop: lane i runs n[i] iterations."""
    i = 0
    while i < n:
        x = x * 0.5 + 1.0
        i += 1
    return x


def escape(cr, ci):
    zr = 0.0
    zi = 0.0
    k = 0
    while k < 30 and zr * zr + zi * zi < 4.0:
        zr, zi = zr * zr - zi * zi + cr, 2 * zr * zi + ci
        k += 1
    return k


def decay(c, p):
    c = c * 0.9 + p
    return c, c


def smoothed(p):
    return lw.scan(decay, 0.0, p)[0]


def divergent(n_lanes, seed=0):
    rng = np.random.default_rng(seed)
    return rng.uniform(-3, 3, n_lanes).astype(np.float32), rng.integers(0, 40, n_lanes).astype(np.int32)


def shards_of(result):
    """The result's pieces per device, in the mesh's order, as NumPy."""
    return [np.asarray(s.data) for s in sorted(result.addressable_shards, key=lambda s: s.device.id)]


# ----------------------------------------------------------------------------- one device


@pytest.mark.slow  # ~40 s: a fresh process, each device's kernel in interpret mode
def test_on_eight_cpu_devices():
    """This file's several-device tests, in a process with eight CPU devices."""
    if DEVICES > 1:
        pytest.skip("already in a process with several devices")
    root = Path(__file__).resolve().parents[1]
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=8", JAX_PLATFORMS="cpu",
               LANEWISE_TPU_INTERPRET="1", PYTHONPATH=os.pathsep.join(
                   [str(root / "src"), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep))
    env.pop("PYTEST_XDIST_WORKER", None)
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:xdist", "-p", "no:cacheprovider",
                           "-m", "", __file__, "-k", "not test_on_eight_cpu_devices"],
                          cwd=root, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-3000:]
    assert re.search(r"\b19 passed\b", done.stdout), done.stdout[-3000:]  # none skipped for want of devices


def test_one_device_keeps_the_unsharded_path():
    x, n = divergent(300)
    lane = lw.vmap(spin, backend="tpu")
    call = tpu.bind_call(lane, (x, n), {})
    with lw.config.overridden(tpu_devices=1):
        assert sharded.whole(tpu.build(call), call, None) is None
        got = lane(x, n)
        assert "devices:" not in lw.explain(lane, x, n)
    assert isinstance(got.sharding, jax.sharding.SingleDeviceSharding)
    np.testing.assert_allclose(np.asarray(got), lw.vmap(spin, backend="python")(x, n), rtol=RTOL)
    if DEVICES == 1:  # "all" of one device: the same path
        assert sharded.whole(tpu.build(call), call, None) is None


def test_the_split_path_on_one_device(monkeypatch):
    """The shard_map path over a mesh of one device (what a one-chip host can run of it):
    a loop, a plane with out_axes, a mean, an argmax; CI and the chip alike."""
    monkeypatch.setattr(sharded, "SPLIT_FROM", 1)
    x, n = divergent(300, seed=4)
    lane = lw.vmap(lambda v, k: spin(v, k) - 1.0, backend="tpu")  # a lane of its own: no kernel cached unsplit
    with lw.config.overridden(tpu_devices=1):
        got = lane(x, n)
        mean = lw.reduce(lane, "mean")(x, n)
        re_, im = np.linspace(-2, 1, 130, dtype=np.float32), np.linspace(-1, 1, 3, dtype=np.float32)
        plane = lw.vmap(lw.vmap(escape, in_axes=(0, None)), in_axes=(None, 0), out_axes=1, backend="tpu")
        flipped, top = plane(re_, im), lw.reduce(plane, "argmax")(re_, im)
    assert isinstance(got.sharding, NamedSharding) and got.sharding.mesh.axis_names == ("lanes",)
    want = lw.vmap(spin, backend="python")(x, n) - 1.0
    np.testing.assert_allclose(np.asarray(got), want, rtol=RTOL, atol=RTOL)
    np.testing.assert_allclose(float(mean), want.astype(np.float32).mean(), rtol=1e-5)
    escapes = lw.vmap(lw.vmap(escape, in_axes=(0, None)), in_axes=(None, 0), out_axes=1, backend="python")(re_, im)
    np.testing.assert_array_equal(np.asarray(flipped), escapes)
    assert int(top) == int(escapes.argmax())


def test_tpu_devices_is_checked(monkeypatch):
    x, n = divergent(20)
    with lw.config.overridden(tpu_devices=DEVICES + 1), pytest.raises(lw.BackendError, match="tpu_devices"):
        lw.vmap(spin, backend="tpu")(x, n)
    with lw.config.overridden(tpu_devices=0), pytest.raises(lw.BackendError, match="tpu_devices = 0"):
        lw.vmap(spin, backend="tpu")(x, n)
    from lanewise.config import Config

    monkeypatch.setenv("LANEWISE_TPU_DEVICES", "4")
    assert Config().tpu_devices == 4
    monkeypatch.setenv("LANEWISE_TPU_DEVICES", "ALL")
    assert Config().tpu_devices == "all"
    monkeypatch.setenv("LANEWISE_TPU_DEVICES", "two")
    with pytest.raises(ValueError, match="LANEWISE_TPU_DEVICES"):
        Config()


# ----------------------------------------------------------------------------- eight devices


@several
def test_a_divergent_loop_splits_its_lanes_over_the_devices():
    x, n = divergent(8 * 40)
    n[:40] = 0  # the first device's lanes finish at once, the others' run up to 39 iterations
    got = lw.vmap(spin, backend="tpu")(x, n)
    want = lw.vmap(spin, backend="python")(x, n)
    assert isinstance(got, jax.Array) and got.shape == (320,)
    assert got.sharding.is_equivalent_to(NamedSharding(Mesh(np.array(jax.devices()), ("lanes",)),
                                                       PartitionSpec("lanes")), 1)
    for k, piece in enumerate(shards_of(got)):  # each device holds its own lanes
        np.testing.assert_allclose(piece, want[40 * k:40 * (k + 1)], rtol=RTOL)
    assert "split over 8 cpu devices (40 each" in lw.explain(lw.vmap(spin, backend="tpu"), x, n)


@several
def test_a_plane_of_two_levels_and_out_axes():
    re_, im = np.linspace(-2, 1, 200, dtype=np.float32), np.linspace(-1.2, 1.2, 16, dtype=np.float32)
    inner = lw.vmap(escape, in_axes=(0, None))
    want = lw.vmap(inner, in_axes=(None, 0), backend="python")(re_, im)
    got = lw.vmap(inner, in_axes=(None, 0), backend="tpu")(re_, im)
    np.testing.assert_array_equal(np.asarray(got), want)
    assert got.sharding.spec == PartitionSpec("lanes") and shards_of(got)[0].shape == (2, 200)
    flipped = lw.vmap(inner, in_axes=(None, 0), out_axes=1, backend="tpu")(re_, im)
    np.testing.assert_array_equal(np.asarray(flipped), want.T)
    assert flipped.sharding.spec == PartitionSpec(None, "lanes")


@several
def test_rows_and_a_scan_per_lane():
    prices = np.random.default_rng(1).standard_normal((30, 16)).astype(np.float32)  # a series per column
    got = lw.vmap(smoothed, in_axes=1, backend="tpu")(prices)
    np.testing.assert_allclose(np.asarray(got), lw.vmap(smoothed, in_axes=1, backend="python")(prices),
                               rtol=RTOL, atol=2e-6)
    assert got.sharding.spec == PartitionSpec("lanes")
    series = {b: lw.vmap(lambda p: lw.scan(decay, 0.0, p)[1], in_axes=1, backend=b) for b in ("tpu", "python")}
    for op in ["sum", "max", "argmax"]:  # per-lane arrays: reduced after the kernel, the kernel folds no array
        assert_same_32(lw.reduce(series["tpu"], op)(prices), lw.reduce(series["python"], op)(prices))


@several
@pytest.mark.parametrize("size", [8 * 40, 13])
def test_reductions_fold_per_device_then_across(size):
    x, n = divergent(size, seed=2)
    mapped = lw.vmap(spin, backend="python")(x, n).astype(np.float32)
    truth = lw.vmap(lambda v, k: v > 1.9, backend="tpu")
    for op, want in [("sum", mapped.sum()), ("mean", mapped.mean()), ("max", mapped.max()),
                     ("min", mapped.min()), ("argmin", mapped.argmin())]:
        got = lw.reduce(lw.vmap(spin, backend="tpu"), op)(x, n)
        assert got.shape == () and len(got.sharding.device_set) == min(size, 8), op
        np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5, err_msg=op)
    assert bool(lw.reduce(truth, "any")(mapped, n)) == bool((mapped > 1.9).any())
    assert bool(lw.reduce(truth, "all")(mapped, n)) == bool((mapped > 1.9).all())


@several
def test_an_uneven_lane_count_pads_the_last_shares():
    for size, used in [(13, 8), (3, 3)]:  # 2 lanes per device, the last ones padding; 3 lanes, 3 devices
        x, n = divergent(size, seed=size)
        got = lw.vmap(spin, backend="tpu")(x, n)
        assert got.shape == (size,) and len(got.sharding.device_set) == used
        np.testing.assert_allclose(np.asarray(got), lw.vmap(spin, backend="python")(x, n), rtol=RTOL)
    with lw.config.overridden(tpu_devices=3):  # 13 lanes over 3 devices: shares of 5, 5, 3 (+2 padding)
        got = lw.vmap(spin, backend="tpu")(x, n)
        assert len(got.sharding.device_set) == 3


@several
def test_sharded_arguments_are_read_in_place():
    mesh = Mesh(np.array(jax.devices()), ("lanes",))
    x, n = divergent(64, seed=3)
    xs, ns = (jax.device_put(v, NamedSharding(mesh, PartitionSpec("lanes"))) for v in (x, n))
    lane = lw.vmap(spin, backend="tpu")
    call = tpu.bind_call(lane, (xs, ns), {})
    fn, _ = tpu.build(call).whole(call)
    compiled = fn.lower(*call.values).compile().as_text()
    assert not re.search(r"all-gather|all-reduce|all-to-all|collective-permute", compiled)  # no data moves
    want = lw.vmap(spin, backend="python")(x, n)
    np.testing.assert_allclose(np.asarray(lane(xs, ns)), want, rtol=RTOL)
    on_one = jax.device_put(x, jax.devices()[5])  # committed elsewhere: moved onto the devices, not refused
    np.testing.assert_allclose(np.asarray(lane(on_one, n)), want, rtol=RTOL)


# ---------------------------------------------------------------- eight devices: reductions after the kernel


def split_and_moved(lane, fold: tuple, *args) -> tuple[bool, int]:
    """Whether ``lw.reduce(lane, *fold)``'s jitted whole call runs the map under
    ``jax.shard_map`` (in its jaxpr), and the most numbers any collective of XLA's
    compiled program moves between the devices (0: none; fewer than the lanes: the
    devices' partials, not the map's values, are combined)."""
    call = tpu.bind_call(lane, args, {})
    fn, _ = tpu.build(call).whole(call, fold)
    fn = getattr(fn, "jitted", fn)  # segments=: the jitted call inside the range check
    compiled = fn.lower(*call.values).compile().as_text()
    moved = re.findall(r"= \w+\[([\d,]*)\]\S* (?:all-gather|all-reduce|all-to-all|collective-permute)\(", compiled)
    return ("shard_map" in str(jax.make_jaxpr(fn)(*call.values)),
            max((int(np.prod([int(d) for d in m.split(",") if d])) for m in moved), default=0))


def first_nonzero(a, b):
    return a if a != 0 else b


def last_nonzero(a, b):
    return b if b != 0 else a


def add(a, b):
    return a + b


@several
@pytest.mark.parametrize("size", [8 * 5, 13])  # 5 lanes per device; 2, the last 3 lanes padding
def test_argmin_argmax_take_the_first_of_ties_across_devices(size):
    share = -(-size // 8)
    v = np.full(size, 3, np.int32)
    v[[share + 1, 3 * share, size - 1]] = -4  # the min tied on three devices, the last lane's padding too
    v[[share - 1, share]] = 9  # the max tied on both sides of the first devices' boundary
    lane = {b: lw.vmap(lambda a: a * 2 + 1, backend=b) for b in ("tpu", "python")}
    for op, first in [("argmin", share + 1), ("argmax", share - 1)]:
        got = lw.reduce(lane["tpu"], op)(v)
        assert int(got) == int(lw.reduce(lane["python"], op)(v)) == first, op
        assert len(got.sharding.device_set) == 8, op
    split, moved = split_and_moved(lane["tpu"], ("argmin", None), v)
    assert split and 0 < moved < size  # each device's (value, index), not its lanes' values
    with lw.config.overridden(tpu_devices=1):  # the check can tell: one device has neither
        assert split_and_moved(lane["tpu"], ("argmin", None), v) == (False, 0)


@several
def test_a_monoid_keeps_lane_order_across_devices():
    """Not commutative: each device's share folded in order, then the shares in device order."""
    v = np.zeros(13, np.float32)
    v[[3, 6, 11]] = [2.0, -5.0, 7.0]  # on devices 1, 3 and 5
    lane = {b: lw.vmap(lambda a: a * 1.5, backend=b) for b in ("tpu", "python")}
    v[12] = 0.5  # the padding's value: a sum would count it once per padding lane
    for combine, want in [(first_nonzero, 3.0), (last_nonzero, 0.75), (add, 6.75)]:
        monoid = lw.Monoid(combine, 0.0)
        got = lw.reduce(lane["tpu"], monoid)(v)
        assert float(got) == float(lw.reduce(lane["python"], monoid)(v)) == want, combine.__name__
    split, moved = split_and_moved(lane["tpu"], (lw.Monoid(last_nonzero, 0.0), None), v)
    assert split and 0 < moved < 13


def quarters(cr, ci):
    return escape(cr, ci) * 0.25  # exact in float32: sums too


def thirds(cr, ci):
    return escape(cr, ci) % 3  # zeros for the Monoid to skip


@several
def test_axis_keeps_a_level_of_a_plane():
    """13 x 40 lanes, the outer level of 13 split 2 per device (3 lanes padding): reduced
    along it and keeping it, with out_axes putting it first or last."""
    re_, im = np.linspace(-2, 1, 40, dtype=np.float32), np.linspace(-1.2, 1.2, 13, dtype=np.float32)

    def plane(lane, backend, out_axes=0):
        return lw.vmap(lw.vmap(lane, in_axes=(0, None)), in_axes=(None, 0), out_axes=out_axes, backend=backend)

    cases = [(quarters, "sum", 0, 0), (quarters, "max", 1, 0), (quarters, "argmax", 0, 0),
             (quarters, "argmin", 1, 1), (quarters, "argmax", None, 1), (quarters, "mean", 1, 1),
             (thirds, lw.Monoid(last_nonzero, 0), 0, 0), (thirds, lw.Monoid(first_nonzero, 0), 1, 1)]
    for lane, op, axis, out_axes in cases:
        got = lw.reduce(plane(lane, "tpu", out_axes), op, axis=axis)(re_, im)
        want = lw.reduce(plane(lane, "python", out_axes), op, axis=axis)(re_, im)
        assert_same_32(got, want)  # integers (argmin/argmax, the Monoid's) exactly
    split, moved = split_and_moved(plane(quarters, "tpu"), ("sum", 0), re_, im)
    assert split and 0 < moved <= 40  # a partial sum per column from each device


def bin_of(x):
    return int(x * 4), x


@several
def test_segments_over_an_uneven_lane_count():
    """301 lanes: 38 per device, the last 3 lanes padding (which must not be counted)."""
    x = np.random.default_rng(5).random(301).astype(np.float32)
    x[::7] = 0.0
    lane = {b: lw.vmap(bin_of, backend=b) for b in ("tpu", "python")}
    for op in ["sum", "max", lw.Monoid(last_nonzero, 0.0)]:
        got = lw.reduce(lane["tpu"], op, segments=6)(x)
        want = lw.reduce(lane["python"], op, segments=6)(x)
        assert got.shape == (6,) and got.dtype == np.float32, op
        assert_same_32(got, want)
    counts = lw.reduce(lw.vmap(lambda v: (int(v * 4), v >= 0.0), backend="tpu"), "sum", segments=6)(x)  # bools count
    assert np.asarray(counts).tolist() == np.bincount((x * 4).astype(int), minlength=6).tolist()
    from lanewise.plan.reduction import Segments

    split, moved = split_and_moved(lane["tpu"], ("sum", Segments(6)), x)
    assert split and moved > 0  # XLA gathers the segment ids (the scatter's), the values stay split
    x[[250, 290]] = 1.6  # segment 6: lanes on devices 6 and 7
    with pytest.raises(lw.LaneIndexError, match=re.escape("segment 6 is out of range for "
                                                          "lw.reduce(..., segments=6) (lane (i0=250) of ")):
        lw.reduce(lane["tpu"], "sum", segments=6)(x)


def read_at(p, k):
    return p[k]


def ahead(p):
    s = 0.0
    for i in range(len(p)):
        s += p[i + 1]  # out of range for the last i
    return s


def lane_error(program, *args) -> str:
    with pytest.raises(lw.LaneIndexError) as raised:
        program(*args)
    return str(raised.value)


@several
@pytest.mark.parametrize("reduce", [None, "sum", "argmax"])
def test_a_row_read_out_of_range_on_a_later_device_names_its_lane(reduce):
    """Each device records its own lanes' bad reads (backends/tpu/bounds.py); the call raises
    python's error for the first lane in C order, its device's first index added.  A sum
    folds in each device's kernel, argmax reduces after it: both check."""
    p = np.random.default_rng(3).random((300, 6)).astype(np.float32)
    k = np.zeros(300, np.int32)
    k[[250, 260]] = 9, -8  # lanes of the seventh device's share (38 each)

    def program(backend):
        mapped = lw.vmap(read_at, backend=backend)
        return lw.reduce(mapped, reduce) if reduce else mapped

    want = lane_error(program("python"), p, k)
    assert "index 9 is out of bounds for axis 0 with size 6 (lane i0=250 of read_at" in want
    assert lane_error(program("tpu"), p, k) == want
    k[[250, 260]] = 5, -6  # in range: nothing raised, python's values
    np.testing.assert_allclose(np.asarray(program("tpu")(p, k)), np.asarray(program("python")(p, k)), rtol=RTOL)


@several
def test_a_plane_split_over_devices_names_the_first_lane_in_c_order():
    p = np.random.default_rng(4).random((16, 40, 6)).astype(np.float32)
    want = lane_error(lw.vmap(lw.vmap(ahead), backend="python"), p)
    assert "(lane i0=0, i1=0 of ahead" in want
    assert lane_error(lw.vmap(lw.vmap(ahead), backend="tpu"), p) == want
