"""Whether a call lets other Python threads run: the bridges' compiled calls must
not hold the GIL."""

from __future__ import annotations

import threading
import time


def slow(x):
    """A lane that runs for a while (20 million dependent steps)."""
    s = x
    for _ in range(20_000_000):
        s = s * 0.999999 + 1e-7
    return s


def ticks_beside(call) -> tuple[float, int]:
    """``call()``'s time alone, and how often another Python thread got to run while it
    ran a second time (a thread that yields the GIL at every tick)."""
    start = time.perf_counter()
    call()
    alone = time.perf_counter() - start
    ticks, done = [0], threading.Event()

    def count():
        while not done.is_set():
            ticks[0] += 1
            time.sleep(0)

    worker = threading.Thread(target=count)
    worker.start()
    call()
    done.set()
    worker.join()
    return alone, ticks[0]
