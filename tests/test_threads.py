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
