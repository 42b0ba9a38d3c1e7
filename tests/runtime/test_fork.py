"""A session survives ``fork``: loaded (and run) in the parent, it runs in the child,
and the child can load artifacts of its own.

TVM's per-thread pools do not survive a fork (their workers are not copied), so a
child that launched compiled code on an inherited pool would wait forever; mxc
runs compiled code on executor threads that it forgets in the child
(:mod:`mxc.runtime.executors`).  Every child here is bounded by a timeout, so a
hang fails the test.  Oracle: the parent's own outputs for the same input.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import socket
import threading
import time

import numpy as np
import pytest

pytest.importorskip("tvm")

import mxc.runtime  # noqa: E402

from runtime_helpers import compiled_mlp  # noqa: E402

TIMEOUT = 60.0


def _input(seed: int) -> np.ndarray:
    return np.random.RandomState(seed).rand(4, 784).astype("float32")


@pytest.fixture(scope="module")
def loaded(tmp_path_factory):
    path = compiled_mlp(tmp_path_factory)[1]
    sess = mxc.runtime.load(path)
    sess.run({"data": _input(0)})  # the parent has run: its executor and pool exist
    return path, sess


def _wait(pid: int, timeout: float = TIMEOUT) -> int:
    """The child's exit status, or kill it and fail after *timeout* seconds."""
    deadline = time.monotonic() + timeout
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        if time.monotonic() > deadline:
            break
        time.sleep(0.05)
    os.kill(pid, signal.SIGKILL)  # a hung child spins in TVM's pool: never leave it behind
    os.waitpid(pid, 0)
    pytest.fail(f"the forked child did not finish in {timeout:.0f} s (hung)")


def _fork(child) -> int:
    pid = os.fork()
    if pid == 0:  # the child: never return into pytest
        code = 1
        try:
            code = 0 if child() else 2
        finally:
            os._exit(code)
    return _wait(pid)


def test_os_fork_child_runs_the_parents_session(loaded):
    _, sess = loaded
    want = sess.run({"data": _input(1)})[0]
    assert _fork(lambda: np.array_equal(sess.run({"data": _input(1)})[0], want)) == 0


def test_os_fork_child_loads_and_runs(loaded):
    path, sess = loaded
    want = sess.run({"data": _input(2)})[0]

    def child():
        fresh = mxc.runtime.load(path)
        return np.array_equal(fresh.run({"data": _input(2)})[0], want)
    assert _fork(child) == 0


def test_os_fork_child_runs_from_many_threads(loaded):
    _, sess = loaded
    wants = [sess.run({"data": _input(s)})[0] for s in range(8)]

    def child():
        ok = []

        def call(s):
            ok.append(np.array_equal(sess.run({"data": _input(s)})[0], wants[s]))
        ts = [threading.Thread(target=call, args=(s,)) for s in range(8)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        return len(ok) == 8 and all(ok)
    assert _fork(child) == 0


def _mp_run(path: str, seed: int) -> bytes:
    sess = mxc.runtime.load(path)
    return sess.run({"data": _input(seed)})[0].tobytes()


def _mp_inherited(seed: int) -> bytes:
    return _INHERITED.run({"data": _input(seed)})[0].tobytes()


_INHERITED = None


@pytest.mark.parametrize("method", ["fork", "forkserver"])
def test_multiprocessing_pool(loaded, method):
    if method not in multiprocessing.get_all_start_methods():
        pytest.skip(f"no {method} start method here")
    global _INHERITED
    path, sess = loaded
    _INHERITED = sess
    want = sess.run({"data": _input(3)})[0].tobytes()
    ctx = multiprocessing.get_context(method)
    with ctx.Pool(2) as pool:
        got = pool.starmap_async(_mp_run, [(str(path), 3)] * 2).get(TIMEOUT)
        if method == "fork":  # the parent's session object, inherited by the workers
            got += pool.map_async(_mp_inherited, [3, 3]).get(TIMEOUT)
    assert got and all(g == want for g in got)


def test_preloading_server_pattern(loaded):
    """gunicorn --preload style: the parent loads (and warms) the model, forks
    workers, and each worker serves requests on its connection with threads."""
    _, sess = loaded
    wants = {s: sess.run({"data": _input(s)})[0] for s in range(6)}
    workers = []
    for _ in range(2):
        parent_end, child_end = socket.socketpair()
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                parent_end.close()
                _serve(sess, child_end)
                code = 0
            finally:
                os._exit(code)
        child_end.close()
        parent_end.settimeout(TIMEOUT)
        workers.append((pid, parent_end))
    try:
        for pid, conn in workers:
            for s in wants:
                conn.sendall(bytes([s]))
            got = {}
            for _ in wants:
                seed = _recv_exact(conn, 1)[0]
                got[seed] = np.frombuffer(_recv_exact(conn, 4 * 10 * 4), "float32")
            for s, want in wants.items():
                assert np.array_equal(got[s].reshape(want.shape), want)
            conn.sendall(b"\xff")  # stop
    except socket.timeout:
        for pid, _ in workers:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        pytest.fail(f"a forked worker did not answer in {TIMEOUT:.0f} s (hung)")
    finally:
        for pid, conn in workers:
            conn.close()
    assert [_wait(pid) for pid, _ in workers] == [0, 0]


def _serve(sess, conn) -> None:
    """A worker until byte 255: even requests on its main thread (a sync WSGI
    worker), odd ones on a thread each (a threaded worker)."""
    lock = threading.Lock()
    threads = []

    def handle(seed):
        out = sess.run({"data": _input(seed)})[0]
        with lock:
            conn.sendall(bytes([seed]) + out.tobytes())
    while True:
        seed = _recv_exact(conn, 1)[0]
        if seed == 255:
            break
        if seed % 2 == 0:
            handle(seed)
            continue
        t = threading.Thread(target=handle, args=(seed,))
        t.start()
        threads.append(t)
    for t in threads:
        t.join()


def _recv_exact(conn, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = conn.recv(n - len(data))
        if not chunk:
            raise EOFError("connection closed")
        data += chunk
    return data
