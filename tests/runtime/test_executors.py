"""Compiled code runs on a bounded set of long-lived executor threads.

Oracles: the kernel's own thread list (``/proc/self/task``) and RSS, the
process's CPU time, the outputs of a single-threaded call (bit for bit), and
for the budget a counter of the cores that running jobs hold.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time

import pytest

from mxc.runtime.executors import Executors

from runtime_helpers import REPO, compiled_mlp  # noqa: E402

_CHURN = r"""
import json, os, sys, threading, time
import numpy as np
import mxc.runtime

def threads():
    # the fewest over 0.5 s: a joined thread's OS thread may still be exiting for a
    # moment after join() returns, while a leaked one stays in every sample
    counts = []
    for _ in range(20):
        counts.append(len(os.listdir("/proc/self/task")))
        time.sleep(0.025)
    return min(counts)

def rss_kib():
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS"))

sess = mxc.runtime.load(sys.argv[1])
x = np.random.RandomState(0).rand(4, 784).astype("float32")
want = sess.run({"data": x})[0]
differ = []

def call():
    if not np.array_equal(sess.run({"data": x})[0], want):
        differ.append(1)

t = threading.Thread(target=call); t.start(); t.join()
after_one = (threads(), rss_kib())
for _ in range(30):                    # 300 short-lived threads, 10 at a time
    batch = [threading.Thread(target=call) for _ in range(10)]
    for t in batch: t.start()
    for t in batch: t.join()
after_300 = (threads(), rss_kib())
cpu = time.process_time(); time.sleep(2.0); idle_cpu = time.process_time() - cpu
print(json.dumps({"after_one": after_one, "after_300": after_300, "idle_cpu": idle_cpu,
                  "differ": len(differ)}))
"""


def test_thread_churn_leaves_no_threads_memory_or_spinning(tmp_path_factory):
    pytest.importorskip("tvm")
    import json
    path = compiled_mlp(tmp_path_factory)[1]
    env = {"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"}
    out = subprocess.run([sys.executable, "-c", _CHURN, str(path)], env=env, timeout=240,
                         capture_output=True, text=True, check=True)
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["differ"] == 0
    assert got["after_300"][0] <= got["after_one"][0], got
    assert got["after_300"][1] - got["after_one"][1] < 4096, got   # KiB
    assert got["idle_cpu"] < 0.05, got


def _recording(budget: int):
    """Executors with *budget* cores whose jobs record the cores held at once."""
    state = {"held": 0, "peak": 0}
    lock = threading.Lock()

    def job(threads: int):
        with lock:
            state["held"] += threads
            state["peak"] = max(state["peak"], state["held"])
        time.sleep(0.01)
        with lock:
            state["held"] -= threads
        return threading.current_thread().name

    return Executors(lambda: budget, lambda threads: None), job, state


def test_sessions_never_hold_more_cores_than_the_budget():
    ex, job, state = _recording(3)
    names = set()

    def caller(threads):
        for _ in range(5):
            names.add(ex.call(threads, job, threads))

    callers = [threading.Thread(target=caller, args=(t,)) for t in (1, 2, 3, 1, 2, 1) * 4]
    for t in callers:
        t.start()
    for t in callers:
        t.join(timeout=60)
    assert state["peak"] <= 3 and state["held"] == 0
    assert ex.count <= 3 and names


def test_a_request_above_the_budget_gets_the_budget():
    ex = Executors(lambda: 2, lambda threads: None)
    seen = []
    ex.call(8, seen.append, "ran")
    assert seen == ["ran"]


def test_errors_reach_the_caller_and_the_executor_survives():
    ex = Executors(lambda: 1, lambda threads: None)

    def fail():
        raise ValueError("boom")

    with pytest.raises(ValueError, match="boom"):
        ex.call(1, fail)
    assert ex.call(1, lambda: 42) == 42 and ex.count == 1


def test_a_call_from_an_executor_runs_in_place():
    ex = Executors(lambda: 1, lambda threads: None)
    outer = ex.call(1, lambda: (threading.current_thread().name,
                                ex.call(1, lambda: threading.current_thread().name)))
    assert outer[0] == outer[1] and outer[0].startswith("mxc-executor")


def test_executors_are_sized_per_thread_count_and_capped():
    first: dict = {}   # executor thread -> the size its pool was made with

    def configure(threads):
        first.setdefault(threading.current_thread(), threads)

    ex = Executors(lambda: 2, configure)
    here = threading.current_thread
    gate = threading.Barrier(2)
    both = [threading.Thread(target=ex.call, args=(1, lambda: gate.wait(10)))
            for _ in range(2)]
    for t in both:
        t.start()
    for t in both:
        t.join(30)
    assert ex.count == 2 and sorted(first.values()) == [1, 1]
    # at the cap, a 2-thread call replaces an idle 1-thread executor
    thread = ex.call(2, here)
    assert first[thread] == 2 and ex.count == 2
    assert ex.call(2, here) is thread                        # reused, same size
    retired = [t for t, size in first.items() if t is not thread and size == 1]
    # the replaced executor's thread ends on its own: wait for one of the two to end (a join
    # of each waited out its whole timeout on the one that rightly stays)
    deadline = time.monotonic() + 10
    while all(t.is_alive() for t in retired) and time.monotonic() < deadline:
        time.sleep(0.01)
    retired_one = [t for t in retired if not t.is_alive()]
    assert len(retired_one) == 1 and sum(t.is_alive() for t in first) == 2 and ex.count == 2


def test_submitted_calls_share_the_budget_and_complete_their_futures():
    ex, job, state = _recording(3)
    futures = [ex.submit(t, job, t) for t in (1, 2, 3, 1, 2, 1) * 4]
    names = {f.result(timeout=60) for f in futures}
    assert state["peak"] <= 3 and names and all(n.startswith("mxc-executor") for n in names)
    with ex._cond:  # every core is back once the futures are done
        assert ex._free == 3 and not ex._waiting
    assert ex.count <= 3


def test_submitted_and_blocking_calls_mix_without_passing_the_budget():
    ex, job, state = _recording(2)
    futures = []

    def caller():
        for _ in range(5):
            futures.append(ex.submit(2, job, 2))
            ex.call(1, job, 1)
    callers = [threading.Thread(target=caller) for _ in range(4)]
    for t in callers:
        t.start()
    for t in callers:
        t.join(timeout=60)
    assert all(f.result(timeout=60) for f in futures)
    assert state["peak"] <= 2 and state["held"] == 0


def test_a_submitted_error_reaches_the_future_and_the_executor_survives():
    ex = Executors(lambda: 1, lambda threads: None)

    def fail():
        raise ValueError("boom")

    with pytest.raises(ValueError, match="boom"):
        ex.submit(1, fail).result(timeout=60)
    assert ex.submit(1, lambda: 42).result(timeout=60) == 42 and ex.count == 1


def test_a_submission_from_an_executor_runs_in_place():
    ex = Executors(lambda: 1, lambda threads: None)
    here = threading.current_thread
    outer = ex.call(1, lambda: (here().name, ex.submit(1, lambda: here().name).result(0)))
    assert outer[0] == outer[1] and outer[0].startswith("mxc-executor")
