"""Issue 35, held out: every finding of "the server against a hostile client", replayed.

Each finding is a named check with the answer the hardened server gives, run against
``python -m mxc serve`` subprocesses (a repository ``REPO/mlp/1/model.mxc``,
``REPO/mlp/2/model.mxc``; a dynamic-batch artifact for the batching checks), and
printed as a table ``finding | expected | got | ok``.  The exit status is nonzero when
any check is not ok -- a check whose feature (a flag) is missing reports not-ok too, so
this file is the acceptance list, independent of the fuzz campaign
(:mod:`bench.fuzz_serving`), which judges random requests against the same contract.

    nice python -m bench.hostile replay              # the table
    nice python -m bench.hostile replay -k nan,shape # only checks whose name has these
    nice python -m bench.hostile latency --seconds 10   # bench/hostile_latency.py
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import json
import os
import re
import resource
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
X = np.random.default_rng(35).standard_normal((1, 784)).astype("float32")
LEAK = re.compile(r"\b[A-Z][A-Za-z]*(Error|Exception)\b|Traceback")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def build(workdir: Path) -> dict:
    """The artifacts (compiled once per *workdir*, in a child so this process stays
    small): ``repo`` with mlp versions 1 and 2, ``dyn`` a batch-range (1..32) MLP,
    ``outside`` a model directory outside ``repo`` that ``repo/evil`` links to."""
    repo, dyn = workdir / "repo", workdir / "dyn" / "mlp.mxc"
    one = repo / "mlp" / "1" / "model.mxc"
    if not one.exists() or not dyn.exists():
        code = ("import mxc, os; sym, a, x = mxc.load_checkpoint(%r, 0)\n"
                "for shapes, out in (({'data': (1, 784)}, %r), ({'data': ((1, 32), 784)}, %r)):\n"
                "    os.makedirs(os.path.dirname(out), exist_ok=True)\n"
                "    mxc.compile(sym, (a, x), shapes=shapes).save(out)\n"
                % (str(ROOT / "examples" / "mlp" / "mlp"), str(one), str(dyn)))
        subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True,
                       env=dict(os.environ, PYTHONPATH=str(ROOT)))
    two = repo / "mlp" / "2" / "model.mxc"
    two.parent.mkdir(parents=True, exist_ok=True)
    if not two.exists():
        shutil.copy(one, two)
    outside = workdir / "outside" / "evil"
    (outside / "1").mkdir(parents=True, exist_ok=True)
    if not (outside / "1" / "model.mxc").exists():
        shutil.copy(one, outside / "1" / "model.mxc")
    link = repo / "evil"
    if not link.is_symlink():
        link.symlink_to(outside, target_is_directory=True)
    import mxc.runtime
    want = np.asarray(mxc.runtime.load(one).run({"data": X})[0])
    return {"repo": repo, "dyn": dyn, "want": want, "workdir": workdir}


class Served:
    """``python -m mxc serve SOURCE --port P --grpc-port G ARGS`` with its log in a file;
    *nofile* lowers its open-file limit (``ulimit -n``)."""

    def __init__(self, source: Path, *args: str, nofile: int | None = None,
                 workdir: Path | None = None):
        self.port, self.grpc_port = free_port(), free_port()
        self.logpath = Path(workdir or tempfile.gettempdir()) / f"serve-{self.port}.log"
        self.log = open(self.logpath, "w+b")
        env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))

        def limit():
            if nofile:
                resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))
        self.cmd = [sys.executable, "-m", "mxc", "serve", str(source), "--port", str(self.port),
                    "--grpc-port", str(self.grpc_port), "--poll-seconds", "0", *args]
        self.proc = subprocess.Popen(self.cmd, stdout=self.log, stderr=subprocess.STDOUT, env=env,
                                     cwd=ROOT, preexec_fn=limit)
        self.error = self._wait_ready()

    def _wait_ready(self, timeout: float = 120) -> str | None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                return f"server exited {self.proc.returncode}: {self.text()[-300:]}"
            with contextlib.suppress(OSError, http.client.HTTPException):
                if request(self.port, "GET", "/v2/health/ready", timeout=2)[0] == 200:
                    return None
            time.sleep(0.2)
        return "server not ready in time"

    def text(self) -> str:
        self.log.flush()
        return self.logpath.read_text(errors="replace")

    def lines(self) -> int:
        return len(self.text().splitlines())

    def cpu_seconds(self) -> float:
        """User + system CPU time of the server process (and its reaped children)."""
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return sum(int(f) for f in fields[11:15]) / os.sysconf("SC_CLK_TCK")

    def stop(self, sig=signal.SIGTERM, timeout: float = 30) -> int | None:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self.log.close()
        return self.proc.returncode


# ---------------------------------------------------------------------------------------
# clients
# ---------------------------------------------------------------------------------------
def request(port: int, method: str, path: str, body: bytes | None = None,
            headers: dict | None = None, timeout: float = 30,
            conn: http.client.HTTPConnection | None = None) -> tuple[int, dict, bytes]:
    """One HTTP request (on *conn* when given, kept open); status, headers, body."""
    own = conn is None
    conn = conn or http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request(method, path, body, headers or {})
        resp = conn.getresponse()
        return resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read()
    finally:
        if own:
            conn.close()


def json_body(x=X, **change) -> bytes:
    spec = {"name": "data", "datatype": "FP32", "shape": list(x.shape), "data": x.ravel().tolist()}
    spec.update(change)
    return json.dumps({"inputs": [spec]}, allow_nan=True).encode()


def infer(port: int, model: str = "mlp", conn=None, body: bytes | None = None,
          version: str | None = None) -> int:
    path = (f"/v2/models/{model}/versions/{version}/infer" if version
            else f"/v2/models/{model}/infer")
    return request(port, "POST", path, body or json_body(),
                   {"Content-Type": "application/json"}, conn=conn)[0]


def refusal(answer: tuple[int, dict, bytes], status: int) -> str | None:
    """None when *answer* is the refusal *status* with ``{"error": ...}`` leaking no
    exception class, else what is wrong."""
    code, _, body = answer
    if code != status:
        return f"{code} {body[:80]!r}"
    try:
        doc = json.loads(body)
    except ValueError:
        return f"{code} non-JSON {body[:60]!r}"
    if not isinstance(doc, dict) or not isinstance(doc.get("error"), str):
        return f"{code} {body[:80]!r}"
    if LEAK.search(doc["error"]):
        return f"{code} leaks {doc['error'][:80]!r}"
    return None


class Grpc:
    """KServe's gRPC stubs on one channel (this process must not import tritonclient)."""

    def __init__(self, port: int):
        import grpc
        from kserve.protocol.grpc import grpc_predict_v2_pb2 as pb
        from kserve.protocol.grpc import grpc_predict_v2_pb2_grpc as stubs
        self.grpc, self.pb = grpc, pb
        self.channel = grpc.insecure_channel(f"127.0.0.1:{port}")
        self.stub = stubs.GRPCInferenceServiceStub(self.channel)

    def call(self, method: str, req) -> str:
        """``OK`` or the status code's name (and its message after a colon)."""
        try:
            getattr(self.stub, method)(req, timeout=30)
            return "OK"
        except self.grpc.RpcError as exc:
            return f"{exc.code().name}: {(exc.details() or '')[:100]}"

    def infer(self, model="mlp", version="", datatype="FP32") -> str:
        pb = self.pb
        t = pb.ModelInferRequest.InferInputTensor(name="data", datatype=datatype, shape=[1, 784])
        return self.call("ModelInfer", pb.ModelInferRequest(
            model_name=model, model_version=version, inputs=[t], raw_input_contents=[X.tobytes()]))

    def close(self) -> None:
        self.channel.close()


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
    size = 60 << 20
    with socket.create_connection(("127.0.0.1", s.port), timeout=10) as sock:
        sock.sendall((f"POST /v2/models/mlp/infer HTTP/1.1\r\nHost: x\r\nContent-Type: "
                      f"application/json\r\nContent-Length: {size}\r\n\r\n").encode())
        t0 = time.monotonic()
        sock.sendall(b'{"inputs": [{"name": "data", "data": [' + b"1.0," * 1000)
        others = []
        for _ in range(5):                      # another client meanwhile
            t = time.monotonic()
            code = infer(s.port)
            others.append((code, time.monotonic() - t))
        sock.settimeout(5)
        try:
            head = sock.recv(4096)
        except OSError as exc:
            head = f"{type(exc).__name__}".encode()
        waited = time.monotonic() - t0
    status = head.split(b" ", 2)[1].decode(errors="replace") if head.startswith(b"HTTP") else head
    slow = max(t for _, t in others)
    ok = status == "413" and waited < 3 and all(c == 200 for c, _ in others) and slow < 1
    return "413 at once, others < 1 s", f"{status} after {waited:.2f}s, others max {slow:.2f}s", ok


@check("default", "model name with %0a (log forging)")
def _(s, g, env):
    before = s.lines()
    got = request(s.port, "POST", "/v2/models/mlp%0aFORGED-LINE%20INFO/infer", json_body(),
                  {"Content-Type": "application/json"})
    time.sleep(0.3)
    new = s.text().splitlines()[before:]
    forged = [line for line in new if line.lstrip().startswith("FORGED-LINE")]
    bad = refusal(got, 404)
    return "404, no forged log line", f"{bad or 404}, forged lines {len(forged)}", \
        bad is None and not forged


@check("default", "404s (unknown model, version): one log line each, no traceback")
def _(s, g, env):
    before = s.lines()
    codes = [infer(s.port, "nope") for _ in range(4)] + [infer(s.port, version="7")]
    grpc = [g.infer("nope") for _ in range(4)] + [g.infer(version="7")]
    time.sleep(0.3)
    new = s.text().splitlines()[before:]
    tb = sum("Traceback" in line for line in new)
    ok = codes == [404] * 5 and all(x.startswith("NOT_FOUND") for x in grpc) \
        and len(new) <= 10 and not tb
    return "404/NOT_FOUND, <= 10 lines for 10, no traceback", \
        f"{sorted(set(codes))} {grpc[0][:20]}, {len(new)} lines, {tb} tracebacks", ok


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
    "default": ("repo", (), None),
    "optin": ("repo", ("--follow-symlinks", "--openapi"), None),
    "explicit": ("repo", ("--model-control-mode", "explicit"), None),
    "batching": ("dyn", ("--max-batch-size", "8", "--max-latency-ms", "100",
                         "--max-request-bytes", "1000000"), None),
    "fdlimit": ("repo", (), 64),
    "workers": ("repo", ("--workers", "2", "--grace-seconds", "20"), None),
}


def replay(workdir: Path, only: list[str] | None = None) -> list[tuple[str, str, str, bool]]:
    env = build(workdir)
    rows = []
    for config, (source, flags, nofile) in CONFIGS.items():
        todo = [(n, f) for c, n, f in CHECKS if c == config
                and (not only or any(k in n.lower() for k in only))]
        if not todo:
            continue
        s = Served(env[source], *flags, nofile=nofile, workdir=workdir)
        g = Grpc(s.grpc_port)
        try:
            for name, fn in todo:
                if s.error:
                    rows.append((name, "-", f"no server ({' '.join(flags)}): {s.error[:80]}", False))
                    continue
                try:
                    expected, got, ok = fn(s, g, env)
                except Exception as exc:  # noqa: BLE001 - a check that cannot run is not ok
                    expected, got, ok = "-", f"check raised {type(exc).__name__}: {exc}"[:120], False
                if s.proc.poll() is not None and config != "workers":
                    got, ok = got + f" (server exited {s.proc.returncode})", False
                rows.append((name, expected, got, ok))
                print(f"{'ok ' if ok else 'NOT'} {name}: {got}", file=sys.stderr, flush=True)
                if config != "workers" and not _serving(s):   # the next check starts afresh
                    g.close()
                    s.stop()
                    s = Served(env[source], *flags, nofile=nofile, workdir=workdir)
                    g = Grpc(s.grpc_port)
        finally:
            g.close()
            s.stop()
    return rows


def _serving(s: Served) -> bool:
    """Whether *s* still answers a valid request (a check may have unloaded or broken it)."""
    try:
        return s.proc.poll() is None and infer(s.port) == 200 \
            and infer(s.port, version="1") == 200
    except (OSError, http.client.HTTPException):
        return False


def print_table(rows) -> None:
    widths = [max(len(str(r[i])) for r in rows + [("finding", "expected", "got", "ok")])
              for i in range(3)]
    print(" | ".join(h.ljust(w) for h, w in zip(("finding", "expected", "got"), widths)) + " | ok")
    for name, expected, got, ok in rows:
        print(" | ".join(str(v).ljust(w) for v, w in zip((name, expected, got), widths))
              + f" | {'yes' if ok else 'NO'}")
    print(f"\n{sum(r[3] for r in rows)}/{len(rows)} checks ok")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("mode", choices=["replay", "latency"])
    ap.add_argument("-k", help="replay: only checks whose name contains one of these (comma list)")
    ap.add_argument("--workdir", help="artifacts and server logs (default: a temporary folder)")
    ap.add_argument("--seconds", type=float, default=10, help="latency: seconds per phase")
    ap.add_argument("--clients", type=int, default=32, help="latency: valid clients")
    ap.add_argument("--phases", help="latency: comma list of hostile phases (default all)")
    ap.add_argument("--repeats", type=int, default=1, help="latency: runs per phase (medians)")
    args = ap.parse_args(argv)
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="mxc-hostile-"))
    workdir.mkdir(parents=True, exist_ok=True)
    if args.mode == "latency":
        from bench.hostile_latency import run_latency
        return run_latency(workdir, args.seconds, args.clients,
                           args.phases.split(",") if args.phases else None, args.repeats)
    rows = replay(workdir, args.k.lower().split(",") if args.k else None)
    print_table(rows)
    return 0 if all(r[3] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
