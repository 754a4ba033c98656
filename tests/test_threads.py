"""Mapped functions may be called from several Python threads at once."""

import threading

import numpy as np

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

    import pytest

    with pytest.raises(ValueError, match="bad lane") as info:
        lw.vmap(lane)(np.arange(1e6))
    assert "i0=700000" in info.value.__notes__[0]
