"""Where compiled code runs: a few long-lived executor threads per process.

TVM 0.27 keeps one thread pool *per calling thread* (a C++ ``thread_local``
``ThreadPool`` in ``src/runtime/thread_pool.cc``), created on the first
parallel launch with ``MaxConcurrency()`` workers (``TVM_NUM_THREADS``), its
workers spinning ``TVM_THREAD_POOL_SPIN_COUNT`` yields after every task before
they sleep.  Called directly from a server's threads, every request thread
would grow its own pool: a thread-per-request server (or a recycling
``ThreadPoolExecutor``) piles up pools, and each pool's threads spin on cores
the others need.  A pool also belongs to the thread that made it, so after
``fork`` the child's copy has no workers and the next launch waits forever.

So mxc never lets a caller's thread launch compiled code.  Every CPU call of
:class:`~mxc.runtime.Session` is handed to one of this module's *executor*
threads, and the caller waits for the result:

* **bounded**: a call holds as many *cores* of the process's budget
  (:func:`mxc.runtime.threads.pool_size`) as its session's ``threads=``
  while it runs; calls whose cores do not fit wait.  At most ``budget``
  calls run at once, so at most ``budget`` executors exist, each with one TVM
  pool sized to the ``threads=`` it serves (:func:`mxc.runtime._tvm.use_threads`):
  the process never runs more compute threads than the cores it may use,
  whatever the number of sessions and calling threads;
* **long-lived**: an executor (and its TVM pool, VM and staging buffers) is
  reused by every later call; idle ones block on a queue and their pool's
  workers sleep on TVM's condition variable;
* **fork-safe**: ``os.register_at_fork`` forgets, in the child, the executors
  that did not survive the fork; the child's first call starts a new executor
  whose TVM pool is created fresh (the parent's pools, and the dead threads'
  thread-locals, are simply never used again).

A call made from an executor (a host step calling another session) runs in
place: it is already admitted, and waiting for a second executor could
deadlock.

:meth:`Executors.submit` is the same call without a waiting caller: it returns
a :class:`concurrent.futures.Future` at once, and the executor that runs the job
returns its cores and completes the future itself.  An asyncio server awaits
that future (``asyncio.wrap_future``) instead of parking a thread of the event
loop's default pool on :meth:`Executors.call`: one thread hop less per request,
which on a loaded 2-core machine was the largest part of the served overhead.
A submission whose cores are not free waits in a FIFO, admitted as calls finish.
"""

from __future__ import annotations

import _thread
import logging
import os
import queue
import threading
from collections import deque
from concurrent.futures import Future
from typing import Any, Callable

log = logging.getLogger(__name__)

_local = threading.local()  # .executor: True on executor threads


class _Job:
    __slots__ = ("fn", "args", "threads", "result", "error", "done", "future")

    def __init__(self, fn: Callable, args: tuple, threads: int, future: Future | None = None):
        self.fn, self.args, self.threads = fn, args, threads
        self.result: Any = None
        self.error: BaseException | None = None
        self.future = future  # a submitted job: the executor completes it, nobody waits
        if future is None:
            self.done = _thread.allocate_lock()
            self.done.acquire()  # released by the executor when the job finished


class _Executor:
    """One long-lived thread that runs jobs one after another."""

    def __init__(self, index: int, configure: Callable[[int], None], size: int,
                 finished: Callable[[_Executor, int], None]):
        self.size = size  # the threads of its TVM pool, fixed by its first job
        self._jobs: queue.SimpleQueue = queue.SimpleQueue()
        self._configure = configure
        self._finished = finished  # returns a submitted job's cores and this executor
        self.thread = threading.Thread(target=self._loop, name=f"mxc-executor-{index}",
                                       daemon=True)
        self.thread.start()

    def _loop(self) -> None:
        _local.executor = True
        configured = None  # jobs come sized for this executor: configure its pool once
        while True:
            job = self._jobs.get()
            if job is None:
                return
            try:
                if job.threads != configured:
                    self._configure(job.threads)
                    configured = job.threads
                job.result = job.fn(*job.args)
            except BaseException as exc:  # noqa: BLE001 - handed to the caller
                job.error = exc
            finally:
                if job.future is None:
                    job.done.release()
            if job.future is not None:
                self._complete(job)

    def _complete(self, job: _Job) -> None:
        """Give a submitted job's cores back, then its outcome to its future (whose
        callbacks, e.g. an event loop's wake-up, run here)."""
        self._finished(self, job.threads)
        future, error, result = job.future, job.error, job.result
        job.future = job.result = job.error = None
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(result)

    def stop(self) -> None:
        """End the thread after its current job (its TVM pool is destroyed with it)."""
        self._jobs.put(None)

    def submit(self, job: _Job) -> Any:
        self._jobs.put(job)
        try:
            job.done.acquire()
        except BaseException:  # KeyboardInterrupt: the job still holds its cores; wait
            job.done.acquire()
            raise
        if job.error is not None:
            error, job.error = job.error, None
            raise error
        return job.result


class Executors:
    """The process's executors and its budget of cores (see the module docstring)."""

    def __init__(self, budget: Callable[[], int], configure: Callable[[int], None]):
        self._budget_of = budget
        self._configure = configure
        self._reset()

    def _reset(self) -> None:
        self._cond = threading.Condition(threading.Lock())
        self._budget: int | None = None
        self._free = 0
        self._idle: list[_Executor] = []
        self._waiting: deque[_Job] = deque()  # submissions waiting for cores
        self._count = 0     # executors alive
        self._started = 0   # executors started (names them)

    @property
    def count(self) -> int:
        """Executors alive in this process (at most one per core of the budget)."""
        return self._count

    def call(self, threads: int, fn: Callable, *args: Any) -> Any:
        """``fn(*args)`` on an executor whose compiled code uses *threads* threads."""
        if getattr(_local, "executor", False):
            return fn(*args)
        with self._cond:
            threads = min(threads, self._budget_now())
            while self._free < threads:
                self._cond.wait()
            self._free -= threads
            ex = self._take(threads)
        try:
            return ex.submit(_Job(fn, args, threads))
        finally:
            self._finished(ex, threads)

    def submit(self, threads: int, fn: Callable, *args: Any) -> Future:
        """``fn(*args)`` on an executor like :meth:`call`, without waiting: the
        returned future completes when it ran (see the module docstring)."""
        future: Future = Future()
        future.set_running_or_notify_cancel()
        if getattr(_local, "executor", False):
            try:
                future.set_result(fn(*args))
            except BaseException as exc:  # noqa: BLE001 - handed to the future
                future.set_exception(exc)
            return future
        with self._cond:
            job = _Job(fn, args, min(threads, self._budget_now()), future)
            if self._waiting or self._free < job.threads:
                self._waiting.append(job)
                return future
            self._free -= job.threads
            ex = self._take(job.threads)
        ex._jobs.put(job)
        return future

    def _budget_now(self) -> int:
        """The process's core budget, read on first use (under the lock)."""
        if self._budget is None:
            self._budget = self._free = max(1, int(self._budget_of()))
        return self._budget

    def _finished(self, ex: _Executor, threads: int) -> None:
        """A job ended on *ex*: its cores and *ex* are free again."""
        with self._cond:
            self._free += threads
            self._idle.append(ex)
            self._admit_waiting()
            self._cond.notify_all()

    def _admit_waiting(self) -> None:
        """Start the submissions that waited for cores, oldest first (under the lock)."""
        while self._waiting and self._free >= self._waiting[0].threads:
            job = self._waiting.popleft()
            self._free -= job.threads
            self._take(job.threads)._jobs.put(job)

    def _take(self, threads: int) -> _Executor:
        """An idle executor whose pool has *threads* threads (the most recently used:
        its caches are warm), else a new one; at the cap of one executor per core
        the least recently used idle one of another size is replaced.  (Under the
        lock; an admitted call always finds an idle executor at the cap, since
        every busy one holds at least one core.)"""
        for i in range(len(self._idle) - 1, -1, -1):
            if self._idle[i].size == threads:
                return self._idle.pop(i)
        if self._count >= self._budget:
            self._idle.pop(0).stop()
        else:
            self._count += 1
        self._started += 1
        log.debug("starting executor %d for %d thread(s) (budget %d cores)", self._started,
                  threads, self._budget)
        return _Executor(self._started, self._configure, threads, self._finished)

    # fork: hold the lock across fork so the child copies a consistent state, then
    # forget in the child the executors whose threads did not survive.
    def _before_fork(self) -> None:
        self._cond.acquire()

    def _after_fork_parent(self) -> None:
        self._cond.release()

    def _after_fork_child(self) -> None:
        self._reset()


_side_pool = None  # a ThreadPoolExecutor for submitted calls that need no executor


def submit_elsewhere(fn: Callable, *args: Any) -> Future:
    """``fn(*args)`` on a plain worker thread, for a session whose code may run on any
    thread (CUDA, or host steps only): :meth:`Executors.submit`'s counterpart."""
    global _side_pool
    if _side_pool is None:
        with EXECUTORS._cond:
            if _side_pool is None:
                from concurrent.futures import ThreadPoolExecutor
                _side_pool = ThreadPoolExecutor(max_workers=max(1, int(_budget())),
                                                thread_name_prefix="mxc-submit")
    return _side_pool.submit(fn, *args)


def _forget_side_pool() -> None:
    global _side_pool
    _side_pool = None  # its threads did not survive the fork


def _configure_tvm(threads: int) -> None:
    from . import _tvm
    _tvm.use_threads(threads)


def _budget() -> int:
    from .threads import pool_size
    return pool_size()


#: the process's executors (one per process; reset in a forked child)
EXECUTORS = Executors(_budget, _configure_tvm)

if hasattr(os, "register_at_fork"):
    os.register_at_fork(before=EXECUTORS._before_fork,
                        after_in_parent=EXECUTORS._after_fork_parent,
                        after_in_child=EXECUTORS._after_fork_child)
    os.register_at_fork(after_in_child=_forget_side_pool)
