"""Mapped functions may be called from several Python threads at once."""

import threading
import time

import numpy as np
import pytest

import lanewise as lw


def test_concurrent_parallel_launches_from_threads():
    mapped = lw.vmap(lambda x: x * 2.0 + 1.0)
    x = np.random.default_rng(1).random(200_000)
    expected = x * 2 + 1
    wrong = []

    def work():
        for _ in range(10):
            if not np.array_equal(mapped(x), expected):
                wrong.append(1)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not wrong


def test_lane_error_in_a_parallel_launch_names_the_lowest_failing_lane():
    def lane(x):
        if x == 700_000.0 or x == 900_000.0:
            raise ValueError("bad lane")
        return x * 2

    with pytest.raises(ValueError, match="bad lane") as info:
        lw.vmap(lane)(np.arange(1e6))
    assert "i0=700000" in info.value.__notes__[0]


def dot_with_table(k, table):  # each lane loops over the whole unmapped table
    s = 0.0
    for i in range(table.shape[0]):
        s += table[i] * k
    return s


def light(k, table):
    return k * 2.0


def test_few_heavy_lanes_run_in_parallel_and_light_ones_serially(monkeypatch):
    """Before: 1,000 lanes looping over a 10,000-element array passed whole ran on one
    thread ("serial (small problem)"), since only lanes and elements were counted."""
    from lanewise.backends.cpu import map as cpu_map

    launches = []
    real = cpu_map.run_parallel
    monkeypatch.setattr(cpu_map, "run_parallel", lambda *a, **k: (launches.append(1), real(*a, **k))[1])
    table, ks = np.linspace(0.0, 1.0, 10_000), np.arange(1000.0)
    for call in range(2):  # the second call takes the fast launcher
        got = lw.vmap(dot_with_table, in_axes=(0, None))(ks, table)
        np.testing.assert_allclose(got, ks * table.sum(), rtol=1e-12)
        assert len(launches) == call + 1
    np.testing.assert_array_equal(lw.vmap(light, in_axes=(0, None))(ks[:100], table), ks[:100] * 2.0)
    assert len(launches) == 2  # light lanes: no parallel launch


def test_one_slow_probe_does_not_send_light_lanes_to_the_pool(monkeypatch):
    """CI failure: on a busy machine one probe of 100 trivial lanes (which receive an
    array, so may be heavy) was slow, and they were launched in parallel."""
    from lanewise.backends.cpu import map as cpu_map

    launches, probes = [], []
    real_run, real_call = cpu_map.run_parallel, cpu_map.call_tracked

    def preempted(kernel, args, first, last, stop):
        if (first, last) == (0, 1):
            probes.append(1)
            if len(probes) == 1:
                time.sleep(0.001)  # a preemption in the first timed probe
        return real_call(kernel, args, first, last, stop)

    monkeypatch.setattr(cpu_map, "run_parallel", lambda *a, **k: (launches.append(1), real_run(*a, **k))[1])
    monkeypatch.setattr(cpu_map, "call_tracked", preempted)
    ks, table = np.arange(100.0), np.zeros(10)
    np.testing.assert_array_equal(lw.vmap(light, in_axes=(0, None))(ks, table), ks * 2.0)
    assert len(probes) >= 2 and not launches


def spin(n):
    s = 0
    for i in range(n):
        s += i % 7
    return s


def test_uneven_lanes_match_the_reference_under_dynamic_scheduling():
    n = np.full(100_000, 3, dtype=np.int64)
    n[:500] = 20_000  # the costly lanes all in one thread's static share
    small, big = (sum(i % 7 for i in range(k)) for k in (3, 20_000))
    np.testing.assert_array_equal(lw.vmap(spin)(n), np.where(n == 3, small, big))


def test_worker_pool_reports_the_first_failure_and_reraises_errors():
    """lanewise.runtime.pool: the smallest failure code wins whichever thread
    found it, and an exception inside a chunk reaches the caller."""
    from lanewise.runtime import pool

    def failing_at(bad):
        def run_chunk(first, last):
            hits = [b for b in range(first, last) if b in bad]
            return min(hits) if hits else -1
        return run_chunk

    for threads in (1, 2, 7):
        assert pool.run_blocks(failing_at({90, 37, 200}), 256, threads) == 37
        assert pool.run_blocks(failing_at(set()), 256, threads) == -1

    def raising(first, last):
        if first <= 50 < last:
            raise ValueError("chunk failed")
        return -1

    with pytest.raises(ValueError, match="chunk failed"):
        pool.run_blocks(raising, 256, 2)
