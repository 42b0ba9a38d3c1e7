"""``mxc serve`` as a process: signed artifacts only with --verify-key, several
workers, SIGTERM.  Skipped, with the reason, without the ``[serve]`` extra."""

from __future__ import annotations

import importlib.util
import shutil

import numpy as np
import pytest

if importlib.util.find_spec("kserve") is None:
    pytest.skip("mxc serve needs the [serve] extra (pip install 'mxc[serve]')",
                allow_module_level=True)

import mxc.runtime as rt  # noqa: E402
from serve_helpers import Server, compiled_mlp, infer_json  # noqa: E402

X = np.random.default_rng(3).standard_normal((1, 784)).astype("float32")


@pytest.fixture(scope="module")
def keys(tmp_path_factory):
    from mxc.runtime.signing import generate_key
    d = tmp_path_factory.mktemp("keys")
    return generate_key(d / "signing.key"), generate_key(d / "other.key")


def test_verify_key_serves_signed_artifacts_and_refuses_unsigned(tmp_path, tmp_path_factory, keys):
    (private, public), _ = keys
    signed = compiled_mlp(tmp_path_factory, sign=private)
    repo = tmp_path / "repo"
    for name, src in (("signed", signed), ("unsigned", compiled_mlp(tmp_path_factory))):
        (repo / name / "1").mkdir(parents=True)
        shutil.copy(src, repo / name / "1" / "model.mxc")
    s = Server(repo, "--verify-key", str(public), "--poll-seconds", "0").wait_ready()
    try:
        code, answer = infer_json(s.base, "signed", X)
        assert code == 200
        np.testing.assert_array_equal(np.array(answer["outputs"][0]["data"], "float32"),
                                      rt.load(signed).run({"data": X})[0].ravel())
        assert infer_json(s.base, "unsigned", X)[0] == 404
        assert "not serving" in s.output() and "unsigned" in s.output()
    finally:
        assert s.stop() == 0


def test_an_unsigned_artifact_alone_is_refused_at_start(tmp_path_factory, keys):
    (_, public), _ = keys
    s = Server(compiled_mlp(tmp_path_factory), "--verify-key", str(public))
    assert s.proc.wait(120) == 8  # ArtifactError's exit code
    out = s.output()
    assert "no model could be served" in out and "Traceback" not in out.split("not serving")[-1]
    s.stop()


def test_a_wrong_key_is_refused_at_start(tmp_path_factory, keys):
    (private, _), (_, other) = keys
    s = Server(compiled_mlp(tmp_path_factory, sign=private), "--verify-key", str(other))
    assert s.proc.wait(120) == 8
    assert "signature does not verify" in s.output()
    s.stop()


def test_two_workers_serve_the_same_ports_and_stop_on_sigterm(tmp_path_factory):
    psutil = pytest.importorskip("psutil")
    path = compiled_mlp(tmp_path_factory)
    s = Server(path, "--workers", "2", "--poll-seconds", "0").wait_ready()
    try:
        # the spawned workers (multiprocessing's resource tracker is a child too)
        workers = [c for c in psutil.Process(s.proc.pid).children()
                   if "spawn_main" in " ".join(c.cmdline())]
        assert len(workers) == 2
        want = rt.load(path).run({"data": X})[0].ravel()
        for _ in range(6):
            code, answer = infer_json(s.base, "mlp", X)
            assert code == 200
            np.testing.assert_array_equal(np.array(answer["outputs"][0]["data"], "float32"), want)
    finally:
        assert s.stop() == 0, s.output()
    assert not any(w.is_running() and w.status() != psutil.STATUS_ZOMBIE for w in workers)


def test_sigterm_lets_an_in_flight_request_finish(tmp_path_factory):
    """A request whose body is half sent when SIGTERM arrives is still answered, new
    connections are refused from then on, and the server exits 0."""
    import json
    import signal
    import socket
    import time
    path = compiled_mlp(tmp_path_factory)
    s = Server(path, "--poll-seconds", "0").wait_ready()
    try:
        body = json.dumps({"inputs": [{"name": "data", "datatype": "FP32", "shape": [1, 784],
                                       "data": X.ravel().tolist()}]}).encode()
        conn = socket.create_connection(("127.0.0.1", s.port), timeout=60)
        conn.sendall(b"POST /v2/models/mlp/infer HTTP/1.1\r\nHost: x\r\n"
                     b"Content-Type: application/json\r\n"
                     + f"Content-Length: {len(body)}\r\n\r\n".encode() + body[:1000])
        time.sleep(0.5)  # let the server start the request (headers are in)
        s.proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + 30
        while True:  # draining: the listening socket is closed
            try:
                socket.create_connection(("127.0.0.1", s.port), timeout=1).close()
            except OSError:
                break
            assert time.monotonic() < deadline, "still accepting connections after SIGTERM"
            time.sleep(0.1)
        conn.sendall(body[1000:])
        response = b""
        while b"\r\n\r\n" not in response or not response.rstrip().endswith(b"}"):
            chunk = conn.recv(65536)
            if not chunk:
                break
            response += chunk
        conn.close()
        head, _, payload = response.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 200"), response[:300]
        got = np.array(json.loads(payload)["outputs"][0]["data"], "float32")
        np.testing.assert_array_equal(got, rt.load(path).run({"data": X})[0].ravel())
        assert s.proc.wait(60) == 0
    finally:
        s.stop()
