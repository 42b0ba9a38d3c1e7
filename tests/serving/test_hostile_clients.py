"""Issue 35: ``mxc serve`` against a hostile client, one bounded check per class.

Every check talks to a server subprocess on loopback only and takes a few
seconds at most: timeouts are set short (``--header-timeout-s 1``...) so the
server's bounds can be seen acting.  The oracle is the hardened contract: a
malformed request gets a typed 4xx whose JSON message names the field and no
Python exception class, the keep-alive connection then answers a valid request
with ``Session.run``'s values, overload gets 503 with ``Retry-After``, model
control is refused unless enabled, and the server neither spins, nor grows its
log or memory at a client's will.  The longer campaign is ``bench/fuzz.py
--targets serving``; the replay of every finding is ``bench/hostile.py``.
"""

from __future__ import annotations

import http.client
import importlib.util
import json
import os
import re
import shutil
import signal
import socket
import threading
import time

import numpy as np
import pytest

if importlib.util.find_spec("kserve") is None:
    pytest.skip("mxc serve needs the [serve] extra (pip install 'mxc[serve]')",
                allow_module_level=True)
tritonclient_grpc = pytest.importorskip("tritonclient.grpc", reason="the [serve] extra's tritonclient")

import mxc.runtime as rt  # noqa: E402
from serve_helpers import REPO, Server, compiled_mlp, cpu_seconds, rss_mib  # noqa: E402

X = np.random.default_rng(35).standard_normal((1, 784)).astype("float32")
GOOD = {"inputs": [{"name": "data", "datatype": "FP32", "shape": [1, 784],
                    "data": X.ravel().tolist()}]}
JSON = {"Content-Type": "application/json"}
EXCEPTION_NAMES = re.compile(rb"Traceback|[A-Z][a-zA-Z]*(Error|Exception)\b|ValidationError")
FAST = ("--header-timeout-s", "1", "--idle-timeout-s", "1", "--body-timeout-s", "1",
        "--poll-seconds", "0.3")


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    """mlp/1 and mlp/2, and mlp/3 a link to an artifact outside the repository."""
    root = tmp_path_factory.mktemp("hostile-repo")
    art = compiled_mlp(tmp_path_factory)
    for v in ("1", "2", "3"):
        (root / "mlp" / v).mkdir(parents=True)
    shutil.copy(art, root / "mlp" / "1" / "model.mxc")
    shutil.copy(art, root / "mlp" / "2" / "model.mxc")
    (root / "mlp" / "3" / "model.mxc").symlink_to(art)
    return root


@pytest.fixture(scope="module")
def want(repo):
    return rt.load(repo / "mlp" / "1" / "model.mxc").run({"data": X})[0]


@pytest.fixture(scope="module")
def server(repo):
    """The default model control, four requests in flight at most, 64 descriptors."""
    s = Server(repo, "-v", *FAST, "--max-in-flight", "4", nofile=64).wait_ready()
    yield s
    assert s.stop() == 0, s.output()


def _connection(server) -> http.client.HTTPConnection:
    return http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)


def _ask(conn, method: str, path: str, body=None, headers=None) -> tuple[int, bytes, dict]:
    conn.request(method, path, body=body, headers=headers or {})
    r = conn.getresponse()
    return r.status, r.read(), {k.lower(): v for k, v in r.getheaders()}


def _valid(conn, want, model="mlp") -> None:
    status, raw, _ = _ask(conn, "POST", f"/v2/models/{model}/infer", json.dumps(GOOD), JSON)
    assert status == 200, raw
    got = np.array(json.loads(raw)["outputs"][0]["data"], "float32").reshape(want.shape)
    np.testing.assert_array_equal(got, want)


def _refused(status: int, raw: bytes, code: int, field: str) -> None:
    assert status == code, raw
    assert field in json.loads(raw)["error"], raw
    assert not EXCEPTION_NAMES.search(raw), raw


def _json_with(**change) -> str:
    spec = dict(GOOD["inputs"][0], **change)
    return json.dumps({"inputs": [spec]})


_NUMBERS = GOOD["inputs"][0]["data"]
MALFORMED_JSON = [
    ('{"inputs": [1]}', "inputs[0]"),
    ('{"inputs": {"name": "data"}}', "inputs"),
    (json.dumps(dict(GOOD, parameters=[1])), "parameters"),
    (json.dumps(dict(GOOD, parameters="x")), "parameters"),
    (json.dumps({"inputs": [dict(GOOD["inputs"][0], parameters=[2])]}), "inputs[0].parameters"),
    (_json_with(data=["NaN"] + _NUMBERS[1:]).replace('"NaN"', "NaN"), "not JSON"),
    (_json_with(data=["Infinity"] + _NUMBERS[1:]).replace('"Infinity"', "Infinity"), "not JSON"),
    (_json_with(data=["-Infinity"] + _NUMBERS[1:]).replace('"-Infinity"', "-Infinity"), "not JSON"),
    (_json_with(shape=[-5, 784]), "inputs[0].shape[0]"),
    (_json_with(shape=[True, 784]), "inputs[0].shape[0]"),
    (_json_with(shape=[1.0, 784.0]), "inputs[0].shape[0]"),
    (_json_with(shape=[0, 784], data=[]), "inputs[0].shape[0]"),
    (_json_with(datatype="fp32"), "inputs[0].datatype"),
    (_json_with(datatype="FLOAT32"), "inputs[0].datatype"),
    (_json_with(data=["1.0"] * 784), "inputs[0].data"),
    (_json_with(data=[1.0] * 783), "inputs[0].data"),
    ('{"inputs": [', "not JSON"),
]


@pytest.mark.parametrize("body,field", MALFORMED_JSON)
def test_malformed_json_is_a_typed_400_and_the_connection_survives(server, want, body, field):
    conn = _connection(server)
    status, raw, _ = _ask(conn, "POST", "/v2/models/mlp/infer", body, JSON)
    _refused(status, raw, 400, field)
    _valid(conn, want)  # same keep-alive connection


def _binary(header: dict, payload: bytes, length: str | None = None) -> tuple[bytes, dict]:
    head = json.dumps(header).encode()
    return head + payload, {"Inference-Header-Content-Length": length or str(len(head))}


_SPEC = {"name": "data", "datatype": "FP32", "shape": [1, 784],
         "parameters": {"binary_data_size": 3136}}
MALFORMED_BINARY = [
    (_binary({"inputs": [_SPEC]}, X.tobytes(), "abc"), "Inference-Header-Content-Length"),
    (_binary({"inputs": [_SPEC]}, X.tobytes(), "-4"), "Inference-Header-Content-Length"),
    (_binary({"inputs": [_SPEC]}, X.tobytes(), "999999"), "Inference-Header-Content-Length"),
    (_binary({"inputs": [1]}, b""), "inputs[0]"),
    (_binary({"inputs": [_SPEC], "parameters": [1]}, X.tobytes()), "parameters"),
    (_binary({"inputs": [dict(_SPEC, parameters="x")]}, X.tobytes()), "inputs[0].parameters"),
    (_binary({"inputs": [_SPEC]}, X.tobytes()[:100]), "binary_data_size"),
    (_binary({"inputs": [dict(_SPEC, parameters={"binary_data_size": 12})]}, X.tobytes()[:12]),
     "inputs[0]"),
    (_binary({"inputs": [dict(_SPEC, parameters={"binary_data_size": "3136"})]}, X.tobytes()),
     "binary_data_size"),
    (_binary([1, 2], b""), "request header"),
]


@pytest.mark.parametrize("request_,field", MALFORMED_BINARY)
def test_malformed_binary_request_is_a_typed_400(server, want, request_, field):
    body, headers = request_
    conn = _connection(server)
    status, raw, _ = _ask(conn, "POST", "/v2/models/mlp/infer", body, headers)
    _refused(status, raw, 400, field)
    _valid(conn, want)


def test_fp32_spelling_is_refused_over_grpc_as_over_rest(server):
    client = tritonclient_grpc.InferenceServerClient(f"127.0.0.1:{server.grpc_port}")
    for datatype, dims in (("fp32", [1, 784]), ("FP32", [0, 784]), ("FP32", [-1, 784])):
        inp = tritonclient_grpc.InferInput("data", dims, datatype)
        inp._raw_content = X.tobytes() if dims[0] == 1 else b""
        with pytest.raises(Exception) as info:
            client.infer("mlp", [inp])
        assert "INVALID_ARGUMENT" in str(info.value.status()), info.value
        assert "inputs[0]" in info.value.message(), info.value


def test_model_control_is_refused_by_default_and_the_model_keeps_serving(server, want):
    conn = _connection(server)
    status, raw, _ = _ask(conn, "POST", "/v2/repository/models/mlp/unload")
    _refused(status, raw, 403, "--model-control-mode")
    client = tritonclient_grpc.InferenceServerClient(f"127.0.0.1:{server.grpc_port}")
    with pytest.raises(Exception) as info:
        client.unload_model("mlp")
    assert "PERMISSION_DENIED" in str(info.value.status()), info.value
    _valid(conn, want)
    assert client.is_model_ready("mlp")


def test_bodies_over_the_limit_get_413_declared_or_chunked(server, want):
    # the JSON limit follows from the model's 784 inputs: far below --max-request-bytes
    conn = _connection(server)
    big = b'{"inputs": [{"name": "data", "data": [' + b"1.0," * (1 << 20) + b"1.0]}]}"
    status, raw, headers = _ask(conn, "POST", "/v2/models/mlp/infer", big, JSON)
    _refused(status, raw, 413, "limit")
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as s:
        s.sendall(b"POST /v2/models/mlp/infer HTTP/1.1\r\nHost: x\r\nContent-Type: "
                  b"application/json\r\nTransfer-Encoding: chunked\r\n\r\n")
        chunk = b"1.0," * 8192
        for _ in range(64):
            s.sendall(b"%x\r\n%s\r\n" % (len(chunk), chunk))
        s.sendall(b"0\r\n\r\n")
        assert s.recv(64).startswith(b"HTTP/1.1 413"), "a chunked body over the limit"
    _valid(_connection(server), want)


def test_large_bodies_leave_memory_flat(server, want):
    before = rss_mib(server.proc.pid)
    body = b'{"inputs": [{"name": "data", "data": [' + b"1.0," * (15 << 20) + b"1.0]}]}"
    for _ in range(4):
        status, raw, _ = _ask(_connection(server), "POST", "/v2/models/mlp/infer", body, JSON)
        assert status == 413, raw
    _valid(_connection(server), want)
    assert rss_mib(server.proc.pid) - before < 32, (before, rss_mib(server.proc.pid))


def test_idle_sockets_up_to_the_descriptor_limit_do_not_starve_valid_clients(server, want):
    cpu0 = cpu_seconds(server.proc.pid)
    log_lines = server.output(whole=True).count("\n")
    idle = [socket.create_connection(("127.0.0.1", server.port)) for _ in range(60)]
    try:
        started = time.monotonic()
        for _ in range(5):
            _valid(_connection(server), want)
        assert time.monotonic() - started < 5
        time.sleep(2)  # past --header-timeout-s: the idle sockets are closed by the server
        closed = 0
        for s in idle:
            s.settimeout(0.5)
            try:
                closed += s.recv(1024) in (b"",) or 0
            except OSError:
                closed += 1
        assert closed == len(idle), f"{len(idle) - closed} idle sockets still open"
    finally:
        for s in idle:
            s.close()
    assert cpu_seconds(server.proc.pid) - cpu0 < 2.0, "the server spun while descriptors ran out"
    assert server.output(whole=True).count("\n") - log_lines < 20


def test_slow_headers_are_cut_off_by_the_header_timeout(server):
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as s:
        started = time.monotonic()
        try:
            for ch in b"GET /v2/health/ready HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"a" * 40:
                s.sendall(bytes([ch]))
                time.sleep(0.1)
        except OSError:
            pass
        assert s.recv(1024) == b"" and time.monotonic() - started < 4


def test_in_flight_cap_answers_503_with_retry_after_then_stalled_bodies_get_408(server, want):
    held = []
    for _ in range(4):  # four requests whose bodies never come: in flight until the timeout
        s = socket.create_connection(("127.0.0.1", server.port), timeout=5)
        s.sendall(b"POST /v2/models/mlp/infer HTTP/1.1\r\nHost: x\r\nContent-Type: "
                  b"application/json\r\nContent-Length: 100\r\n\r\n{")
        held.append(s)
    time.sleep(0.3)
    status, raw, headers = _ask(_connection(server), "POST", "/v2/models/mlp/infer",
                                json.dumps(GOOD), JSON)
    assert status == 503 and headers.get("retry-after") == "1", (status, raw)
    for s in held:
        assert s.recv(64).startswith(b"HTTP/1.1 408")
        s.close()
    _valid(_connection(server), want)


def test_refusals_log_one_escaped_line_each_rationed_per_client(server):
    # from a loopback address of its own: the log rations each client address apart
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10,
                                      source_address=("127.0.0.35", 0))
    for _ in range(30):
        status, raw, _ = _ask(conn, "GET", "/v2/models/nope%0aINFO%20forged/ready")
        assert status == 404
    log = server.output(whole=True)
    assert "Traceback" not in log
    assert not re.search(r"^INFO forged", log, re.M), log[-2000:]
    lines = [ln for ln in log.splitlines() if "from 127.0.0.35" in ln]
    assert 1 <= len(lines) <= 11, lines      # a burst of ten, then one a second at most
    assert all("nope\\nINFO forged" in ln for ln in lines), lines[:2]


def test_what_the_http_parser_and_the_router_refuse_is_json_too(server):
    status, raw, _ = _ask(_connection(server), "POST", "/v2/models//infer", b"{}", JSON)
    _refused(status, raw, 404, "Not Found")
    status, raw, _ = _ask(_connection(server), "GET", "/v2/models/mlp/infer")
    _refused(status, raw, 405, "Method Not Allowed")
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as s:
        s.sendall(b"POST /v2/models/mlp/infer HTTP/1.1\r\nHost: x\r\nContent-Length: "
                  + str(10 ** 30).encode() + b"\r\n\r\n{}")
        head, _, body = s.recv(1024).partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 400") and "malformed HTTP" in json.loads(body)["error"]


def test_links_out_of_the_repository_and_the_openapi_routes_are_not_served(server):
    conn = _connection(server)
    assert _ask(conn, "GET", "/v2/models/mlp/versions/3/ready")[0] == 404
    assert _ask(conn, "GET", "/v2/models/mlp/versions/2/ready")[0] == 200
    for path in ("/openapi.json", "/docs"):
        assert _ask(conn, "GET", path)[0] == 404


def _grpc_ready(client, name: str, version: str = "") -> bool:
    """gRPC readiness; a model that is not served answers NOT_FOUND (REST: 404)."""
    try:
        return client.is_model_ready(name, version)
    except Exception as exc:  # noqa: BLE001 - tritonclient's InferenceServerException
        assert "NOT_FOUND" in str(exc.status()), exc
        return False


def test_explicit_model_control_unloads_and_loads_versions_over_both_protocols(repo, want,
                                                                                tmp_path):
    token = tmp_path / "token"
    token.write_text("s3cret\n")
    s = Server(repo, *FAST, "--model-control-mode", "explicit", "--control-token-file",
               str(token)).wait_ready()
    try:
        conn = _connection(s)
        auth = {"Authorization": "Bearer s3cret"}
        assert _ask(conn, "POST", "/v2/repository/models/mlp@1/unload")[0] == 401
        assert _ask(conn, "POST", "/v2/repository/models/mlp@1/unload", b"", auth)[0] == 200
        assert _ask(conn, "GET", "/v2/models/mlp/versions/1/ready")[0] == 404
        _valid(conn, want, "mlp/versions/2")                      # versions are independent
        client = tritonclient_grpc.InferenceServerClient(f"127.0.0.1:{s.grpc_port}")
        assert not _grpc_ready(client, "mlp", "1") and _grpc_ready(client, "mlp", "2")
        client.unload_model("mlp", headers={"authorization": "Bearer s3cret"})
        assert _ask(conn, "GET", "/v2/models/mlp/ready")[0] == 404  # both protocols agree
        assert not _grpc_ready(client, "mlp")
        assert _ask(conn, "POST", "/v2/repository/models/mlp/load", b"", auth)[0] == 200
        for version in ("1", "2"):
            assert _grpc_ready(client, "mlp", version)
            _valid(conn, want, f"mlp/versions/{version}")
        assert _ask(conn, "POST", "/v2/repository/models/nope/load", b"", auth)[0] == 404
        # explicit control does not poll: a new version waits for a load request
        (repo / "mlp" / "4").mkdir()
        shutil.copy(repo / "mlp" / "1" / "model.mxc", repo / "mlp" / "4" / "model.mxc")
        time.sleep(1.0)
        conn = _connection(s)  # the old one has idled past --idle-timeout-s 1
        assert _ask(conn, "GET", "/v2/models/mlp/versions/4/ready")[0] == 404
        assert _ask(conn, "POST", "/v2/repository/models/mlp@4/load", b"", auth)[0] == 200
        _valid(conn, want, "mlp/versions/4")
    finally:
        shutil.rmtree(repo / "mlp" / "4", ignore_errors=True)
        assert s.stop() == 0, s.output()


def test_sigterm_with_two_workers_answers_every_request_sent_before_it(repo, want):
    s = Server(repo / "mlp" / "1" / "model.mxc", "--workers", "2").wait_ready()
    time.sleep(1.0)  # both workers listening
    failed, answered, signalled = [], [0], [None]
    lock = threading.Lock()

    def client():
        conn = None
        while signalled[0] is None or time.monotonic() < signalled[0] + 3:
            sent = time.monotonic()
            try:
                conn = conn or http.client.HTTPConnection("127.0.0.1", s.port, timeout=30)
                status, raw, headers = _ask(conn, "POST", "/v2/models/model/infer",
                                            json.dumps(GOOD), JSON)
                assert status == 200, raw
                with lock:
                    answered[0] += 1
                if headers.get("connection") == "close":
                    conn.close()
                    conn = None
            except (OSError, http.client.HTTPException) as exc:
                if signalled[0] is None or sent < signalled[0]:
                    with lock:
                        failed.append(repr(exc))
                return
    threads = [threading.Thread(target=client) for _ in range(16)]
    for t in threads:
        t.start()
    time.sleep(1.5)
    signalled[0] = time.monotonic()
    s.proc.send_signal(signal.SIGTERM)
    for t in threads:
        t.join(60)
    assert s.stop() == 0, s.output()
    assert answered[0] > 16 and not failed, (answered, failed[:5])


@pytest.mark.parametrize("args,message", [
    (["--workers", "2", "--model-control-mode", "explicit"], "reaches one worker only"),
    (["--control-token-file", "token"], "needs --model-control-mode explicit"),
    (["--model-control-mode", "explicit", "--control-token-file", "/no/such/file"],
     "not a file holding a token"),
    (["--header-timeout-s", "0"], "--header-timeout-s must be more than 0"),
    (["--body-timeout-s", "-1"], "--body-timeout-s must be more than 0"),
])
def test_contradictory_serve_flags_are_usage_errors(repo, args, message):
    import subprocess
    import sys
    done = subprocess.run([sys.executable, "-m", "mxc", "serve", str(repo), *args],
                          capture_output=True, text=True, timeout=120,
                          cwd=REPO, env=dict(os.environ, PYTHONPATH=str(REPO)))
    assert done.returncode == 64 and message in done.stderr, done.stderr[-500:]
