"""Host threads that run a CPU kernel's blocks in parallel.

Why not a Numba ``prange`` kernel: compiling one cost 0.5-2 s for each new
signature (Numba's parfor passes, then LLVM optimising the whole lane again,
linked into the parallel loop), a quarter to a third of a lane's cold first
call.  Instead a few persistent threads call the *serial* compiled block runner
(``nogil``, so they run at once) once each: the calls take guided chunks of
blocks from a shared counter in compiled code (:func:`run_shared`,
:func:`lanewise.codegen.common.unit_loop`), so a run costs one call through
Python per thread.

Example:
    >>> calls = []
    >>> def work():  # in a kernel's place: take units from a shared counter
    ...     calls.append(1)
    ...     return -1
    >>> run_shared(work, threads=3)
    -1
    >>> len(calls)
    3
"""

from __future__ import annotations

import os
import queue
import threading
from typing import Callable


class _Launch:
    """One parallel run: its workers' lowest failure, who is still working."""

    def __init__(self, work: Callable[[], int], threads: int):
        self.work_fn = work
        self.failure = -1  # the smallest failure code any worker returned
        self.error: BaseException | None = None
        self.lock = threading.Lock()
        self.working = threads
        self.done = threading.Event()

    def work(self) -> None:
        """A worker's part: one call of ``work``; then, if last, signal the caller."""
        try:
            code = self.work_fn()
            if code >= 0:
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


def run_shared(work: Callable[[], int], threads: int, on_interrupt: Callable[[], None] = lambda: None,
               join: bool = False) -> int:
    """Call ``work()`` once on each of ``threads`` worker threads, which share the
    run's units among themselves (a compiled kernel taking chunks from a shared
    counter: :func:`lanewise.codegen.common.unit_loop`); the smallest code >= 0 a
    call returned (its first failure), or -1.

    The caller waits, so in the main thread Ctrl-C still arrives: it calls
    ``on_interrupt()`` (which should make the running calls return soon), waits
    for the workers, and re-raises.  An exception in ``work`` is re-raised here.

    ``join``: the caller makes one of the calls itself, saving a worker's
    hand-over (for short runs: Ctrl-C does not reach a thread in compiled code).
    """
    threads = max(1, threads)
    launch = _Launch(work, threads)
    helpers = threads - 1 if join else threads
    if helpers:
        jobs = _workers(helpers)
        for _ in range(helpers):
            jobs.put(launch)
    if join:
        launch.work()
    try:
        while not launch.done.wait(0.25):
            pass
    except BaseException:  # Ctrl-C (or any exception a signal handler raises)
        on_interrupt()
        launch.done.wait()
        raise
    if launch.error is not None:
        raise launch.error
    return launch.failure
