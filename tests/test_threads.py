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
    # a sleep of 1 ms can last over PROBE_SURE_S on a loaded machine, which believes it at once
    monkeypatch.setattr(cpu_map, "PROBE_SURE_S", 10.0)
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
    found it, and an exception inside a worker reaches the caller."""
    from lanewise.runtime import pool

    def failing(codes):  # each worker returns the next code
        codes, lock = list(codes), threading.Lock()

        def work():
            with lock:
                return codes.pop()
        return work

    for threads in (1, 2, 7):
        codes = [200, 37, 90, -1, -1, -1, -1][:threads]
        assert pool.run_shared(failing(codes), threads) == min(c for c in codes if c >= 0)
    assert pool.run_shared(failing([-1, -1]), 2) == -1

    calls = []

    def raising():
        calls.append(1)
        if len(calls) == 1:
            raise ValueError("worker failed")
        return -1

    with pytest.raises(ValueError, match="worker failed"):
        pool.run_shared(raising, 2)


def test_a_joining_caller_makes_one_of_the_calls_itself():
    from lanewise.runtime import pool

    for threads in (1, 2, 5):
        seen, lock = [], threading.Lock()

        def work():
            with lock:
                seen.append(threading.get_ident())
            return -1
        assert pool.run_shared(work, threads, join=True) == -1
        assert len(seen) == threads and seen.count(threading.get_ident()) == 1


def add_one(x):
    return x + 1.0


def test_a_short_run_wakes_only_the_threads_its_work_pays_for(monkeypatch):
    """Before: 65,536 lanes of ``x + 1`` (30 µs of work) woke all 13 threads of the
    device machine and took 0.96 ms, mostly hand-overs of the GIL."""
    from lanewise.backends.cpu import map as cpu_map
    from lanewise.runtime import pool

    launches = []
    real = pool.run_shared
    monkeypatch.setattr(pool, "run_shared", lambda f, n, *a, **k: (launches.append((n, k["join"])),
                                                                   real(f, n, *a, **k))[1])
    monkeypatch.setattr(cpu_map, "threads", lambda: 13)
    x = np.arange(65_536.0)
    np.testing.assert_array_equal(lw.vmap(add_one)(x), x + 1)
    big = np.arange(2_000_000.0)
    np.testing.assert_array_equal(lw.vmap(add_one)(big), big + 1)
    n = np.full(40_000, 3, dtype=np.int64)  # a looping lane: its cost is unknown, so every thread
    lw.vmap(spin)(n)
    assert launches == [(1, True), (13, True), (13, False)]
    monkeypatch.setattr(lw.config, "thread_work", 0)  # the switch back to every thread
    lw.vmap(add_one)(x)
    assert launches[-1] == (13, True)


# ----------------------------------------------------------------------------- shared schedule
# A parallel run calls the compiled kernel once per thread, and the calls take guided
# chunks of blocks from a shared counter (codegen.common.unit_loop).  These tests run it
# on 1, 2 and 3 threads (more threads than this machine's cores still interleave).

THREADS = (1, 2, 3)


@pytest.fixture
def thread_count(monkeypatch):
    """Set the worker threads of lanewise's parallel runs (Numba's own may be fewer),
    every one of them woken however small the run (``config.thread_work = 0``)."""
    from lanewise.backends.cpu import map as cpu_map

    monkeypatch.setattr(lw.config, "thread_work", 0)

    def use(n):
        monkeypatch.setattr(cpu_map, "threads", lambda: n)
    return use


def test_take_chunk_covers_every_unit_once_in_guided_chunks():
    """Called concurrently from nogil threads, the chunks tile [0, last) exactly once,
    and one thread alone takes them in order, each a share of what is left."""
    import numba
    from lanewise.runtime.counter import FAILED, SHARED_SLOTS, THREADS, take_chunk

    @numba.njit(nogil=True)
    def drain(stop, last, seen):
        chunks = 0
        while True:
            first, end = take_chunk(stop, last)
            if first >= end:
                return chunks
            seen[first:end] += 1
            chunks += 1

    for threads, last in ((1, 1000), (2, 1000), (3, 257), (3, 1)):
        stop = np.zeros(SHARED_SLOTS, np.int64)
        stop[THREADS] = threads
        seen = np.zeros(last, np.int64)
        counts = []
        workers = [threading.Thread(target=lambda: counts.append(drain(stop, last, seen))) for _ in range(threads)]
        for t in workers:
            t.start()
        for t in workers:
            t.join()
        assert (seen == 1).all(), (threads, last)
        assert sum(counts) <= last
    stop = np.zeros(SHARED_SLOTS, np.int64)
    stop[THREADS] = 2
    chunks = [take_chunk(stop, 100) for _ in range(4)]
    assert chunks == [(0, 25), (25, 43), (43, 57), (57, 67)]  # a quarter of what is left each
    stop[FAILED] = 1  # a failed run: no new chunks
    assert take_chunk(stop, 100) == (100, 100)


def test_uneven_lanes_are_computed_once_on_any_thread_count(thread_count):
    n = np.full(20_000, 3, dtype=np.int64)
    n[::97] = 5_000  # costly lanes spread over every chunk
    small, big = (sum(i % 7 for i in range(k)) for k in (3, 5_000))
    mapped = lw.vmap(spin)
    for threads in THREADS:
        thread_count(threads)
        out = np.full(n.shape, -1, np.int64)
        mapped(n, out=out)
        np.testing.assert_array_equal(out, np.where(n == 3, small, big))


def raise_at(x):
    if x == 31_000.0 or x == 77_000.0 or x == 99_999.0:
        raise ValueError("bad lane")
    return x * 2


def test_the_lowest_failing_lane_is_named_on_any_thread_count(thread_count):
    for threads in THREADS:
        thread_count(threads)
        with pytest.raises(ValueError, match="bad lane") as info:
            lw.vmap(raise_at)(np.arange(1e5))
        assert "i0=31000" in info.value.__notes__[0], threads


def pair_energy(i, pos):  # lane i: its pairs with every later point (a triangular loop)
    e = 0.0
    for j in range(i + 1, pos.shape[0]):
        d = abs(pos[j] - pos[i]) + 1.0
        e += 1.0 / (d * d)
    return e


def test_few_heavy_lanes_of_a_reduction_run_in_parallel_with_the_same_bits(thread_count, monkeypatch):
    """Before: an all-pairs reduction of 3,000 points ran on one thread (a reduction was
    "small" by its shapes alone, and its lanes were never timed)."""
    from lanewise.backends.cpu import map as cpu_map

    launches = []
    real = cpu_map.run_parallel
    monkeypatch.setattr(cpu_map, "run_parallel", lambda *a, **k: (launches.append(1), real(*a, **k))[1])
    pos = np.random.default_rng(3).random(3000)
    total = lw.reduce(lw.vmap(pair_energy, in_axes=(0, None)), "sum")
    results = []
    for threads in THREADS:
        thread_count(threads)
        results.append(float(total(np.arange(pos.size - 1), pos)))
    assert len(launches) == len(THREADS)
    assert results[0] == results[1] == results[2]  # bitwise, whatever the thread count
    d = np.abs(pos[None, :] - pos[:, None]) + 1.0
    np.testing.assert_allclose(results[0], np.triu(1.0 / (d * d), 1).sum(), rtol=1e-12)


def bin_or_raise(x):
    if x == 5_000.0 or x == 40_000.0:
        raise ValueError("bad value")
    return int(x) % 10, 1


def test_a_segmented_reduction_names_its_lowest_failing_lane_on_any_thread_count(thread_count):
    """Slots fold chunks s, s + slots, ...: the lowest failure may sit in a later slot
    than a chunk that failed first, so a failed slot's chunk goes on with the next slot."""
    counts = lw.reduce(lw.vmap(bin_or_raise), "sum", segments=10)
    for threads in THREADS:
        thread_count(threads)
        with pytest.raises(ValueError, match="bad value") as info:
            counts(np.arange(50_000.0))
        assert "i0=5000" in info.value.__notes__[0], threads
        np.testing.assert_array_equal(counts(np.arange(1000.0)), np.full(10, 100))
