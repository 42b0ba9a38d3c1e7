"""``mxc tune --rpc`` fails fast when it cannot measure (loopback only, bounded in time).

Original failure: ``mxc tune --rpc 127.0.0.1:9190:nokey`` with no tracker
retried "in 5 secs" forever while the progress line said "searching and
measuring"; a tracker without a device of that key left the request queued
forever too.
"""

from __future__ import annotations

import json
import socket
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

pytest.importorskip("tvm")

from mxc.backends.tvm.tune.rpc import check_tracker, tracker_keys  # noqa: E402
from mxc.errors import BackendError  # noqa: E402

from test_cli_tuning import write_tiny_model  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
#: seconds a refused tune may take at most (TVM's client alone retried for ever)
BOUND_S = 240


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _tune(tmp_path, rpc: str) -> subprocess.CompletedProcess:
    symbol, params, _ = write_tiny_model(tmp_path)
    return subprocess.run(
        [sys.executable, "-m", "mxc.cli", "tune", str(symbol), "--params", str(params),
         "--shape", "data=1,4,8,8", "--trials", "1", "--search", "random",
         "--db", str(tmp_path / "db"), "--rpc", rpc],
        capture_output=True, text=True, cwd=REPO, timeout=BOUND_S)


def _one_line(r, code: int) -> str:
    assert r.returncode == code, r.stderr
    lines = [line for line in r.stderr.splitlines() if not line.startswith("[mxc tune]")]
    assert len(lines) == 1 and "Traceback" not in r.stderr, r.stderr
    return lines[0]


def test_no_tracker_listening_is_refused_at_once(tmp_path):
    port = _free_port()          # bound and released: nobody listens on it
    line = _one_line(_tune(tmp_path, f"127.0.0.1:{port}:nokey"), BackendError.exit_code)
    assert f"cannot reach an RPC tracker at 127.0.0.1:{port}" in line
    assert "tvm.exec.rpc_tracker" in line and "--key nokey" in line
    assert not (tmp_path / "db").exists()      # refused before any work


def _serve_once(answer):
    """A loopback listener that accepts one connection and runs *answer(conn)*."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)

    def serve():
        conn, _ = listener.accept()
        with conn:
            answer(conn)
        listener.close()
    threading.Thread(target=serve, daemon=True).start()
    return listener.getsockname()[1]


def test_a_listener_that_is_not_a_tracker_times_out_with_a_reason():
    port = _serve_once(lambda conn: time.sleep(3))       # accepts, never answers
    with pytest.raises(BackendError, match=r"did not answer as a TVM RPC tracker within 1 s"):
        tracker_keys("127.0.0.1", port, timeout=1)


def test_a_tracker_without_the_key_names_the_keys_it_has():
    from tvm.rpc import base

    def tracker(conn):       # the tracker's side of the protocol: magic, then a summary
        conn.recv(4)
        conn.sendall(struct.pack("<i", base.RPC_TRACKER_MAGIC))
        size = struct.unpack("<i", conn.recv(4))[0]
        assert json.loads(conn.recv(size)) == [base.TrackerCode.SUMMARY]
        base.sendjson(conn, [base.TrackerCode.SUCCESS, {
            "queue_info": {}, "server_info": [{"key": "server:rasp4", "addr": ["x", 1]},
                                              {"key": "server:rasp4", "addr": ["y", 1]}]}])
    port = _serve_once(tracker)
    with pytest.raises(BackendError, match=r"no device registered under key 'nokey' "
                                           r"\(registered keys: rasp4 \(2\)\)"):
        check_tracker("127.0.0.1", port, "nokey", timeout=10)


@pytest.fixture
def real_tracker():
    """TVM's own tracker (tvm.rpc.tracker, needs tornado) on a free loopback port."""
    pytest.importorskip("tornado")
    from tvm.rpc.tracker import Tracker
    port = _free_port()
    tracker = Tracker(host="127.0.0.1", port=port, port_end=port + 50, silent=True)
    try:
        yield tracker
    finally:
        tracker.terminate()


def test_a_real_tracker_with_no_matching_server(real_tracker, tmp_path):
    line = _one_line(_tune(tmp_path, f"127.0.0.1:{real_tracker.port}:nokey"),
                     BackendError.exit_code)
    assert "no device registered under key 'nokey' (registered keys: none)" in line


def test_a_real_tracker_lists_a_registered_server(real_tracker):
    from tvm import rpc
    port = _free_port()
    server = rpc.Server(host="127.0.0.1", port=port, port_end=port + 50,
                        tracker_addr=("127.0.0.1", real_tracker.port), key="mxc-test")
    try:
        deadline = time.time() + 60
        while time.time() < deadline and "mxc-test" not in tracker_keys("127.0.0.1",
                                                                        real_tracker.port):
            time.sleep(0.5)
        assert check_tracker("127.0.0.1", real_tracker.port, "mxc-test") == 1
    finally:
        server.terminate()
