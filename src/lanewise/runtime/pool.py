"""Host threads that run a CPU kernel's blocks in parallel.

Why not a Numba ``prange`` kernel: compiling one cost 0.5-2 s for each new
signature (Numba's parfor passes, then LLVM optimising the whole lane again,
linked into the parallel loop), a quarter to a third of a lane's cold first
call.  Instead a few persistent threads call the *serial* compiled block runner
(``nogil``, so they run at once) on chunks of blocks taken from a shared
counter.  The chunks are guided: each takes a share of what is left, so the
first are long and the last are single blocks, and lanes whose cost differs a
thousandfold still keep every core busy, with O(threads x log(blocks)) calls
through Python (a few microseconds each).

Example:
    >>> import numpy as np
    >>> seen = np.zeros(100, np.int64)
    >>> def run_chunk(first, last):
    ...     seen[first:last] += 1
    ...     return -1
    >>> run_blocks(run_chunk, 100, threads=3)
    -1
    >>> bool((seen == 1).all())
    True
"""

from __future__ import annotations

import os
import queue
import threading
from typing import Callable

#: A chunk takes at least this share of the blocks not yet taken, divided by
#: the number of threads (OpenMP's "guided" schedule uses 1).  2: a long first
#: block cannot leave one thread working alone at the end for more than about
#: a quarter of its share.
GUIDED_DIVISOR = 2


class _Launch:
    """One parallel run: the blocks not yet taken, the lowest failure, who is still working."""

    def __init__(self, run_chunk: Callable[[int, int], int], n_blocks: int, threads: int):
        self.run_chunk, self.n_blocks, self.threads = run_chunk, n_blocks, threads
        self.next = 0
        self.failure = -1  # the smallest failure code any chunk returned
        self.error: BaseException | None = None
        self.lock = threading.Lock()
        self.working = threads
        self.done = threading.Event()

    def take(self) -> tuple[int, int] | None:
        """The next chunk of blocks, or None when none is left (or one failed)."""
        with self.lock:
            first = self.next
            if first >= self.n_blocks or self.failure >= 0 or self.error is not None:
                return None
            size = max(1, (self.n_blocks - first) // (GUIDED_DIVISOR * self.threads))
            self.next = first + size
            return first, first + size

    def work(self) -> None:
        """A worker's part: chunks until none is left; then, if last, signal the caller."""
        try:
            while (chunk := self.take()) is not None:
                code = self.run_chunk(*chunk)
                if code >= 0:
                    # Chunks are handed out in order, so every block before this
                    # one was taken already: the smallest code is the first failure.
                    with self.lock:
                        self.failure = code if self.failure < 0 else min(self.failure, code)
        except BaseException as e:  # noqa: BLE001 - re-raised in the calling thread
            with self.lock:
                self.error = self.error or e
        finally:
            with self.lock:
                self.working -= 1
                last = self.working == 0
            if last:
                self.done.set()


_jobs: "queue.SimpleQueue[_Launch] | None" = None
_started = 0
_pid = 0
_start_lock = threading.Lock()


def _workers(threads: int) -> "queue.SimpleQueue[_Launch]":
    """The job queue, with at least ``threads`` workers serving it (started on
    first use, and again in a forked child, which has none of its parent's threads)."""
    global _jobs, _started, _pid
    with _start_lock:
        if _jobs is None or _pid != os.getpid():
            _jobs, _started, _pid = queue.SimpleQueue(), 0, os.getpid()
        while _started < threads:
            threading.Thread(target=_serve, args=(_jobs,), name=f"lanewise-worker-{_started}",
                             daemon=True).start()
            _started += 1
        return _jobs


def _serve(jobs: "queue.SimpleQueue[_Launch]") -> None:
    while True:
        jobs.get().work()


def run_blocks(run_chunk: Callable[[int, int], int], n_blocks: int, threads: int,
               on_interrupt: Callable[[], None] = lambda: None) -> int:
    """Call ``run_chunk(first, last)`` on chunks covering ``range(n_blocks)`` from
    ``threads`` worker threads; the smallest code >= 0 a chunk returned (its first
    failure; chunks stop being handed out after one), or -1.

    The caller waits, so in the main thread Ctrl-C still arrives: it calls
    ``on_interrupt()`` (which should make the running chunks return soon), waits
    for the workers, and re-raises.  An exception in ``run_chunk`` is re-raised here.
    """
    threads = max(1, min(threads, n_blocks))
    launch = _Launch(run_chunk, n_blocks, threads)
    jobs = _workers(threads)
    for _ in range(threads):
        jobs.put(launch)
    try:
        while not launch.done.wait(0.25):
            pass
    except BaseException:  # Ctrl-C (or any exception a signal handler raises)
        with launch.lock:
            launch.next = n_blocks  # no new chunks
        on_interrupt()
        launch.done.wait()
        raise
    if launch.error is not None:
        raise launch.error
    return launch.failure
