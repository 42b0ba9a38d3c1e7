"""The checks :mod:`bench.hostile` replays: one per finding of issue 35, each with the
hardened answer it expects, grouped by the server flags they need (``CONFIGS``), so one
server per group answers them (a fresh one after a check that leaves it not serving).

Each check takes the server (:class:`bench.hostile.Served`), a gRPC client and the
built artifacts, and returns ``(expected, got, ok)``.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import signal
import socket
import subprocess
import threading
import time

import numpy as np

from bench.hostile import X, infer, json_body, json_stream, refusal, request

# ---------------------------------------------------------------------------------------
# the checks: each returns (expected, got, ok)
# ---------------------------------------------------------------------------------------
CHECKS: list[tuple[str, str, object]] = []   # (server config, name, function)


def check(config: str, name: str):
    def register(fn):
        CHECKS.append((config, name, fn))
        return fn
    return register


@check("default", "unload over REST without model control")
def _(s, g, env):
    got = request(s.port, "POST", "/v2/repository/models/mlp/unload")
    bad = refusal(got, 403)
    after = infer(s.port)
    return "403, mlp keeps serving", f"{bad or 403}, infer {after}", bad is None and after == 200


@check("default", "unload over gRPC without model control")
def _(s, g, env):
    got = g.call("RepositoryModelUnload", g.pb.RepositoryModelUnloadRequest(model_name="mlp"))
    after = g.infer()
    ok = got.split(":")[0] in ("PERMISSION_DENIED", "FAILED_PRECONDITION") and after == "OK"
    return "PERMISSION_DENIED|FAILED_PRECONDITION, serving", f"{got[:60]}, infer {after[:20]}", ok


def _binary(s, length: str, header: bytes, payload: bytes = X.tobytes()):
    return request(s.port, "POST", "/v2/models/mlp/infer", header + payload,
                   {"Inference-Header-Content-Length": length,
                    "Content-Type": "application/octet-stream"})


_HEADER = json.dumps({"inputs": [{"name": "data", "datatype": "FP32", "shape": [1, 784],
                                  "parameters": {"binary_data_size": 3136}}]}).encode()


@check("default", "binary extension: header length non-numeric/negative/past body/not object")
def _(s, g, env):
    cases = {"abc": (_HEADER,), "-1": (_HEADER,), str(len(_HEADER) + 4000): (_HEADER,),
             "3": (b"[1]",)}
    bad = {k: refusal(_binary(s, k, *v), 400) for k, v in cases.items()}
    bad = {k: v for k, v in bad.items() if v}
    return "400 x4", "ok" if not bad else json.dumps(bad)[:120], not bad


@check("default", "NaN/Infinity/-Infinity literals in JSON")
def _(s, g, env):
    conn = http.client.HTTPConnection("127.0.0.1", s.port, timeout=30)
    got = []
    for lit in ("NaN", "Infinity", "-Infinity"):
        x = X.ravel().tolist()
        x[0] = float(lit.replace("Infinity", "inf"))
        body = json_body(data=x)   # json.dumps writes the NaN/Infinity/-Infinity literals
        got.append(refusal(request(s.port, "POST", "/v2/models/mlp/infer", body,
                                   {"Content-Type": "application/json"}, conn=conn), 400))
        try:
            got.append(None if infer(s.port, conn=conn) == 200 else "next not 200")
        except (OSError, http.client.HTTPException) as exc:
            got.append(f"next: {type(exc).__name__}")
            conn = http.client.HTTPConnection("127.0.0.1", s.port, timeout=30)
    conn.close()
    bad = [b for b in got if b]
    return "400, next request on the connection 200", "ok" if not bad else str(bad)[:120], not bad


@check("default", "shapes [-5,784] [true,784] [1.0,784.0]")
def _(s, g, env):
    bad = [refusal(request(s.port, "POST", "/v2/models/mlp/infer", json_body(shape=shape),
                           {"Content-Type": "application/json"}), 400)
           for shape in ([-5, 784], [True, 784], [1.0, 784.0])]
    bad = [b for b in bad if b]
    return "400 x3", "ok" if not bad else str(bad)[:120], not bad


@check("default", "datatype fp32 over REST and gRPC")
def _(s, g, env):
    answer = request(s.port, "POST", "/v2/models/mlp/infer", json_body(datatype="fp32"),
                     {"Content-Type": "application/json"})
    rest = refusal(answer, 400)
    grpc = g.infer(datatype="fp32")
    named = "datatype" in answer[2].decode(errors="replace").lower() \
        and "datatype" in grpc.lower()
    ok = rest is None and grpc.startswith("INVALID_ARGUMENT") and named
    return "400 / INVALID_ARGUMENT, both naming the datatype", \
        f"{rest or 400} / {grpc[:60]}{'' if named else ' (field not named)'}", ok


@check("default", "60 MiB JSON body")
def _(s, g, env):
    """Declared, then waiting for the answer (413 at once?), and streamed as clients send
    (when does the 413 come?); five valid requests meanwhile must not wait."""
    size = 60 << 20
    head = (f"POST /v2/models/mlp/infer HTTP/1.1\r\nHost: x\r\nContent-Type: application/json"
            f"\r\nContent-Length: {size}\r\n\r\n").encode()
    with socket.create_connection(("127.0.0.1", s.port), timeout=10) as sock:
        sock.sendall(head + b'{"inputs": [{"name": "data", "data": [' + b"1.0," * 1000)
        t0 = time.monotonic()
        others = []
        for _ in range(5):                      # another client meanwhile
            t = time.monotonic()
            others.append((infer(s.port), time.monotonic() - t))
        declared = _status_within(sock, 5)
        waited = time.monotonic() - t0
    streamed, sent = "-", [0]
    with socket.create_connection(("127.0.0.1", s.port), timeout=30) as sock:
        def upload():
            with contextlib.suppress(OSError):
                sock.sendall(head)
                for piece in json_stream(size):
                    sock.sendall(piece)
                    sent[0] += len(piece)
        t0 = time.monotonic()
        uploader = threading.Thread(target=upload, daemon=True)
        uploader.start()
        streamed = _status_within(sock, 30)
        streamed = f"{streamed} after {sent[0] >> 20} MiB, {time.monotonic() - t0:.1f}s"
    slow = max(t for _, t in others)
    ok = declared == "413" and waited < 3 and all(c == 200 for c, _ in others) and slow < 1
    return "413 at once, others < 1 s", (f"{declared} after {waited:.1f}s (streamed: {streamed}), "
                                         f"others max {slow:.2f}s"), ok


def _status_within(sock: socket.socket, seconds: float) -> str:
    """The status of the answer on *sock*, or what happened instead."""
    sock.settimeout(seconds)
    try:
        head = sock.recv(4096)
    except OSError as exc:
        return type(exc).__name__
    return head.split(b" ", 2)[1].decode(errors="replace") if head.startswith(b"HTTP") else "closed"


@check("default", "model name with %0a (log forging)")
def _(s, g, env):
    before = s.lines()
    # from a loopback address of its own: the refusal log rations lines per client address,
    # and the checks before this one used 127.0.0.1's burst
    conn = http.client.HTTPConnection("127.0.0.1", s.port, timeout=30,
                                      source_address=("127.0.0.77", 0))
    got = request(s.port, "POST", "/v2/models/mlp%0aFORGED-LINE%20INFO/infer", json_body(),
                  {"Content-Type": "application/json"}, conn=conn)
    conn.close()
    time.sleep(0.3)
    new = s.text().splitlines()[before:]
    forged = [line for line in new if line.lstrip().startswith("FORGED-LINE")]
    escaped = [line for line in new if "FORGED-LINE" in line and not line.startswith("FORGED")]
    bad = refusal(got, 404)
    return "404, logged on one line, escaped", \
        f"{bad or 404}, forged lines {len(forged)}, escaped lines {len(escaped)}", \
        bad is None and not forged and len(escaped) == 1


@check("default", "404s (unknown model, version): one log line each, no traceback")
def _(s, g, env):
    before = s.lines()
    codes = [infer(s.port, "nope") for _ in range(4)] + [infer(s.port, version="7")]
    grpc = [g.infer("nope") for _ in range(4)] + [g.infer(version="7")]
    time.sleep(0.3)
    new = s.text().splitlines()[before:]
    tb = sum("Traceback" in line for line in new)
    ok = codes == [404] * 5 and all(x.startswith("NOT_FOUND") for x in grpc) \
        and 5 <= len(new) <= 10 and not tb
    return "404/NOT_FOUND, 5-10 lines for 10 (burst), no traceback", \
        f"{sorted(set(codes))} {grpc[0][:20]}, {len(new)} lines, {tb} tracebacks", ok


@check("default", "found by bench.fuzz serving: null in data, empty model name, 10**30 length")
def _(s, g, env):
    """Not in the issue: what the fuzz campaign found on the hardened server."""
    x = X.ravel().tolist()
    x[0] = None
    bad = {"null": refusal(request(s.port, "POST", "/v2/models/mlp/infer", json_body(data=x),
                                   {"Content-Type": "application/json"}), 400),
           "//infer": refusal(request(s.port, "POST", "/v2/models//infer", json_body(),
                                      {"Content-Type": "application/json"}), 404)}
    with socket.create_connection(("127.0.0.1", s.port), timeout=10) as sock:
        sock.sendall(b"POST /v2/models/mlp/infer HTTP/1.1\r\nHost: x\r\nContent-Type: "
                     b"application/json\r\nContent-Length: " + b"1" + b"0" * 30 + b"\r\n\r\n")
        sock.settimeout(5)
        raw = b""
        with contextlib.suppress(OSError):
            while b"\r\n\r\n" not in raw or len(raw.partition(b"\r\n\r\n")[2]) < 2:
                chunk = sock.recv(4096)
                if not chunk:
                    break
                raw += chunk
    head, _, body = raw.partition(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1]) if head.startswith(b"HTTP") else 0
    bad["10**30"] = refusal((status, {}, body), 413 if status != 400 else 400)  # either
    bad = {k: v for k, v in bad.items() if v}
    return "400, 404, 413|400 (JSON errors)", "ok" if not bad else json.dumps(bad)[:140], not bad


@check("default", "symlink out of the repository (no --follow-symlinks)")
def _(s, g, env):
    code = request(s.port, "GET", "/v2/models/evil/ready")[0]
    return "404 (not served)", str(code), code == 404


@check("default", "/openapi.json and /docs (no --openapi)")
def _(s, g, env):
    codes = [request(s.port, "GET", p)[0] for p in ("/openapi.json", "/docs")]
    return "404 404", f"{codes[0]} {codes[1]}", codes == [404, 404]


@check("optin", "--follow-symlinks / --openapi serve them")
def _(s, g, env):
    codes = [request(s.port, "GET", p)[0] for p in ("/v2/models/evil/ready", "/openapi.json")]
    return "200 200", f"{codes[0]} {codes[1]}", codes == [200, 200]


@check("explicit", "unload then load over REST (--model-control-mode explicit)")
def _(s, g, env):
    u = request(s.port, "POST", "/v2/repository/models/mlp/unload")[0]
    gone = infer(s.port)
    ld = request(s.port, "POST", "/v2/repository/models/mlp/load")[0]
    back = infer(s.port)
    return "200, gone, 200, back 200", f"{u}, {gone}, {ld}, {back}", \
        u == 200 and gone in (400, 404, 503) and ld == 200 and back == 200


@check("explicit", "unload then load over gRPC")
def _(s, g, env):
    pb = g.pb
    u = g.call("RepositoryModelUnload", pb.RepositoryModelUnloadRequest(model_name="mlp"))
    gone = g.infer()
    ld = g.call("RepositoryModelLoad", pb.RepositoryModelLoadRequest(model_name="mlp"))
    back = g.infer()
    return "OK, gone, OK, back OK", f"{u[:12]}, {gone[:12]}, {ld[:12]}, {back[:12]}", \
        u == "OK" and gone != "OK" and ld == "OK" and back == "OK"


@check("explicit", "unloading mlp@1 leaves mlp@2 served")
def _(s, g, env):
    u = request(s.port, "POST", "/v2/repository/models/mlp@1/unload")[0]
    one, two = infer(s.port, version="1"), infer(s.port, version="2")
    return "200; v1 404, v2 200", f"{u}; v1 {one}, v2 {two}", u == 200 and one == 404 and two == 200


@check("batching", "batch 0 alone and within a batch (--max-batch-size 8)")
def _(s, g, env):
    empty = np.zeros((0, 784), "float32")
    alone = refusal(request(s.port, "POST", "/v2/models/mlp/infer", json_body(empty),
                            {"Content-Type": "application/json"}), 400)
    results = {}

    def send(i):
        body = json_body(empty) if i == 3 else json_body()
        results[i] = request(s.port, "POST", "/v2/models/mlp/infer", body,
                             {"Content-Type": "application/json"})
    threads = [threading.Thread(target=send, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    within = refusal(results.get(3, (0, {}, b"")), 400)
    others = sorted({results.get(i, (0,))[0] for i in range(8) if i != 3})
    ok = alone is None and within is None and others == [200]
    return "400, 400, others 200", f"{alone or 400}, {within or 400}, others {others}", ok


@check("batching", "chunked JSON body over --max-request-bytes")
def _(s, g, env):
    chunk = b"1.0," * 65536
    with socket.create_connection(("127.0.0.1", s.port), timeout=10) as sock:
        try:
            sock.sendall(b"POST /v2/models/mlp/infer HTTP/1.1\r\nHost: x\r\nContent-Type: "
                         b"application/json\r\nTransfer-Encoding: chunked\r\n\r\n")
            for _ in range(8):   # 2 MiB, over the 1 MB limit
                sock.sendall(b"%x\r\n%s\r\n" % (len(chunk), chunk))
            sock.sendall(b"0\r\n\r\n")
        except OSError:
            pass
        try:
            head = sock.recv(4096)
        except OSError as exc:
            head = type(exc).__name__.encode()
    status = head.split(b" ", 2)[1].decode() if head.startswith(b"HTTP") else head.decode()[:30]
    return "413", status, status == "413"


@check("fdlimit", "60 idle sockets under ulimit -n 64")
def _(s, g, env):
    idle = []
    for _ in range(60):
        with contextlib.suppress(OSError):
            idle.append(socket.create_connection(("127.0.0.1", s.port), timeout=5))
    lines0, cpu0, t0 = s.lines(), s.cpu_seconds(), time.monotonic()
    answered, waits = [], []
    while time.monotonic() - t0 < 10:
        t = time.monotonic()
        try:
            code, headers, _ = request(s.port, "POST", "/v2/models/mlp/infer", json_body(),
                                       {"Content-Type": "application/json"}, timeout=5)
            answered.append(code if code != 503 or "retry-after" in headers else "503-no-RA")
        except (OSError, http.client.HTTPException) as exc:
            answered.append(type(exc).__name__)
        waits.append(time.monotonic() - t)
        time.sleep(0.5)
    cpu, grew = s.cpu_seconds() - cpu0, s.lines() - lines0
    closed = 0   # by the server's header timeout (recv answers b"" at once)
    for sock in idle:
        sock.setblocking(False)
        with contextlib.suppress(BlockingIOError, OSError):
            closed += sock.recv(1) == b""
        sock.close()
    alive = s.proc.poll() is None
    ok = (alive and 200 in answered and set(answered) <= {200, 503} and cpu < 3 and grew < 1000)
    got = (f"{len(idle)} open, {closed} closed by the server; {answered.count(200)}/{len(answered)} 200, other "
           f"{sorted({str(a) for a in answered if a != 200})}; cpu {cpu:.1f}s/10s; log +{grew}")
    return "200 within s, else 503; cpu < 3 s; log < 1000", got, ok


@check("workers", "SIGTERM with --workers 2 while 32 clients send")
def _(s, g, env):
    signalled = threading.Event()
    t_signal = [float("inf")]
    failures, sent = [], [0]

    def client():
        conn = http.client.HTTPConnection("127.0.0.1", s.port, timeout=30)
        while True:
            t = time.monotonic()
            if t > t_signal[0] + 5:
                break
            try:
                code = infer(s.port, conn=conn)
                sent[0] += 1
                if code != 200 and t < t_signal[0]:
                    failures.append(code)
            except (OSError, http.client.HTTPException) as exc:
                if t < t_signal[0]:
                    failures.append(type(exc).__name__)
                break
        conn.close()
    threads = [threading.Thread(target=client) for _ in range(32)]
    for t in threads:
        t.start()
    time.sleep(3)
    t_signal[0] = time.monotonic()
    s.proc.send_signal(signal.SIGTERM)
    signalled.set()
    for t in threads:
        t.join(60)
    try:
        rc = s.proc.wait(60)
    except subprocess.TimeoutExpired:
        rc = "hung"
    ok = not failures and rc == 0
    return "0 resets before the signal, exit 0", \
        f"{len(failures)} failed {sorted(set(map(str, failures)))[:3]} of {sent[0]}, exit {rc}", ok


CONFIGS = {  # config -> (source key, flags, nofile)
    "default": ("repo", ("-v",), None),     # -v: refusals are logged (INFO)
    "optin": ("repo", ("--follow-symlinks", "--openapi"), None),
    "explicit": ("repo", ("--model-control-mode", "explicit"), None),
    "batching": ("dyn", ("--max-batch-size", "8", "--max-latency-ms", "100",
                         "--max-request-bytes", "1000000"), None),
    "fdlimit": ("repo", (), 64),
    "workers": ("repo", ("--workers", "2", "--grace-seconds", "20"), None),
}


