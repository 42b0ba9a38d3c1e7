"""The ``serving`` fuzz target: ``mxc serve`` against a hostile client (issue 35).

One in-process server (:func:`mxc.serving.server.serve_async` in a background thread, on
free loopback ports, the example MLP as ``REPO/mlp/1/model.mxc``) answers the whole
campaign; each fuzz input is one request.  An input is a kind byte and the request:

* ``J`` -- ``path \\n body``: a V2 JSON infer request, structurally mutated (the classes
  of the issue: ``"inputs": [1]``, ``parameters`` as a list or string, NaN/Infinity
  literals, negative, boolean, float and zero dimensions, datatype spellings, batch 0,
  wrong element counts, unknown models, versions and inputs, duplicate inputs ...), then
  sometimes byte-mutated;
* ``B`` -- ``header-length \\n path \\n body``: a binary-extension request, with the
  ``Inference-Header-Content-Length`` value, the JSON header and the payload mutated;
* ``G`` -- a serialized gRPC ``ModelInferRequest`` (KServe's stubs; wrong raw lengths,
  contents, shapes, datatypes), sent as bytes so the server parses it itself;
* ``H`` -- raw HTTP on a fresh socket: a huge ``Content-Length``, a chunked body over
  ``max_request_bytes``, a truncated body.

Why it is a fuzz target rather than a list of tests: the contract (docs of issue 35) is
about *every* malformed request, so the answer to each input is judged against it, not
against a per-case expectation.  An answer outside it raises :class:`Unexpected` (the
driver records the request bytes): a 5xx other than 503 (which needs ``Retry-After``),
a 4xx outside 400/403/404/408/413 or whose body is not ``{"error": "..."}`` or names a
Python exception class, a keep-alive connection closed after a 4xx other than 408/413,
no answer, a gRPC status other than the refusals of the contract, an error or traceback
in the server's log, and an unmutated seed that does not answer 200 with exactly the
bits of ``Session.run``.  The server's RSS is sampled (it shares this process) and
reported at the start and the end of the campaign.
"""

from __future__ import annotations

import asyncio
import copy
import http.client
import json
import logging
import random
import re
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np

from bench.hostile import free_port

ROOT = Path(__file__).resolve().parents[1]
MAX_REQUEST_BYTES = 256 << 10
ALLOWED_4XX = {400, 403, 404, 408, 413}
MAY_CLOSE = {408, 413, 503}
GRPC_REFUSALS = {"INVALID_ARGUMENT", "NOT_FOUND", "FAILED_PRECONDITION", "PERMISSION_DENIED",
                 "RESOURCE_EXHAUSTED", "UNAVAILABLE"}
#: an exception class name or a traceback in an answer leaks the server's internals
LEAK = re.compile(r"\b[A-Z][A-Za-z]*(Error|Exception)\b|Traceback|File \"")
INFER = "/v2/models/mlp/infer"
PATHS = [INFER, INFER, INFER, "/v2/models/mlp/versions/1/infer", "/v2/models/mlp/versions/7/infer",
         "/v2/models/nope/infer", "/v2/models/mlp%0aforged/infer", "/v2/models/mlp@1/infer",
         "/v2/models//infer", "/v2/models/mlp/versions/-1/infer", "/v2/models/%ff/infer"]


class Unexpected(Exception):
    """An answer outside the contract (the message says which rule)."""


def rss_mib() -> float:
    """This process's resident set (the embedded server's), from ``/proc/self/status``."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        pass
    import resource
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def compiled_repo(workdir: Path) -> Path:
    """``workdir/serving-repo/mlp/1/model.mxc``: the example MLP for batch 1, compiled in
    a child process (once per *workdir*) so compiling does not count in the RSS."""
    repo = workdir / "serving-repo"
    path = repo / "mlp" / "1" / "model.mxc"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        code = ("import mxc; sym, a, x = mxc.load_checkpoint(%r, 0); mxc.compile(sym, (a, x), "
                "shapes={'data': (1, 784)}).save(%r)"
                % (str(ROOT / "examples" / "mlp" / "mlp"), str(path)))
        subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True)
    return repo


class EmbeddedServer:
    """``serve_async`` in a daemon thread with its own event loop; :meth:`close` sets the
    stop event from this thread and waits for the server to drain."""

    def __init__(self, source: Path, max_request_bytes: int = MAX_REQUEST_BYTES, **extra):
        from mxc.serving.server import ServeOptions, import_kserve
        import_kserve()
        self.opts = ServeOptions(source=str(source), http_port=free_port(), grpc_port=free_port(),
                                 max_request_bytes=max_request_bytes, poll_seconds=0,
                                 grace_seconds=2, threads=1, **extra)
        self.loop = asyncio.new_event_loop()
        self.stop: asyncio.Event | None = None
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, name="mxc-fuzz-server", daemon=True)
        self.thread.start()
        self._wait_ready()

    def _run(self) -> None:
        from mxc.serving.server import serve_async
        asyncio.set_event_loop(self.loop)

        async def main():
            self.stop = asyncio.Event()
            await serve_async(self.opts, reuse_port=False, stop=self.stop)
        try:
            self.loop.run_until_complete(main())
        except BaseException as exc:  # noqa: BLE001 - reported by _wait_ready / the target
            self.error = exc

    def _wait_ready(self, timeout: float = 120) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not self.thread.is_alive():
                raise RuntimeError(f"the embedded server stopped: {self.error!r}")
            try:
                conn = http.client.HTTPConnection("127.0.0.1", self.opts.http_port, timeout=2)
                conn.request("GET", "/v2/health/ready")
                if conn.getresponse().status == 200:
                    conn.close()
                    return
            except OSError:
                pass
            time.sleep(0.1)
        raise RuntimeError("the embedded server was not ready in time")

    def close(self) -> None:
        if self.stop is not None and self.thread.is_alive():
            self.loop.call_soon_threadsafe(self.stop.set)
            self.thread.join(30)


class _LogWatch(logging.Handler):
    """Counts the server's log records and keeps those carrying a traceback: a refused
    request may be logged (one line), never with a stack."""

    def __init__(self):
        super().__init__(logging.DEBUG)
        self.records: list[str] = []
        self.lines = 0

    def emit(self, record: logging.LogRecord) -> None:
        self.lines += 1
        message = record.getMessage()
        if record.exc_info or "Traceback" in message:
            self.records.append(f"{record.name}: {message[:30]}")


# ---------------------------------------------------------------------------------------
# structured mutations of a V2 request document
# ---------------------------------------------------------------------------------------
_BAD_SHAPES = [[-5, 784], [True, 784], [1.0, 784.0], [0, 784], [1, 0], [784], [1, 784, 1],
               [2 ** 63, 784], ["1", 784], None, [], [1, -1], [2, 784], [1, 2 ** 40], "1,784"]
_BAD_DTYPES = ["fp32", "Fp32", "FLOAT32", "INT64", "FP16", "BYTES", "BOOL", "", None, 5,
               "FP64", "BF16", "UINT8"]
_BAD_PARAMS = [[], ["a"], "s", 1, None, {"binary_data_size": -1}, {"content_type": 5}]
_BAD_VALUES = [float("nan"), float("inf"), float("-inf"), "1", True, None, [1.0], 1e309,
               2 ** 70, -0.0]


def mutate_doc(doc: dict, r: random.Random, binary: bool = False) -> dict:
    """One of the issue's malformed classes applied to a copy of *doc*."""
    doc = copy.deepcopy(doc)
    spec = doc["inputs"][0]
    op = r.randrange(17)
    if op == 0:
        doc["inputs"] = r.choice([[1], "data", {}, None, [], [None], [[spec]], 1])
    elif op == 1:
        doc["parameters"] = r.choice(_BAD_PARAMS)
    elif op == 2:
        spec["parameters"] = r.choice(_BAD_PARAMS)
    elif op == 3 and "data" in spec:
        data = spec["data"]
        for _ in range(r.randrange(1, 4)):
            data[r.randrange(len(data))] = r.choice(_BAD_VALUES)
    elif op == 4:
        spec["shape"] = r.choice(_BAD_SHAPES)
    elif op == 5:
        spec["datatype"] = r.choice(_BAD_DTYPES)
    elif op == 6:                            # batch 0
        spec["shape"] = [0, 784]
        if "data" in spec:
            spec["data"] = []
        else:
            spec["parameters"] = {"binary_data_size": 0}
    elif op == 7 and "data" in spec:         # wrong element count
        n = r.choice([0, 1, 783, 785, 1568])
        spec["data"] = (spec["data"] * 2)[:n]
    elif op == 8:
        spec["name"] = r.choice(["nope", "", "DATA", "data ", None, 7, "softmax_output"])
    elif op == 9:
        doc["inputs"].append(copy.deepcopy(spec))   # duplicate input
    elif op == 10:
        del spec[r.choice(sorted(spec))]
    elif op == 11:
        doc["outputs"] = r.choice([[{"name": "nope"}], "softmax_output", [1], {},
                                   [{"name": "softmax_output", "parameters": []}],
                                   [{"name": "softmax_output"}] * 2])
    elif op == 12:
        doc["id"] = r.choice([5, [], {"a": 1}, "x" * 300, None])
    elif op == 13 and "data" in spec:
        spec["data"] = r.choice([[spec["data"]], [spec["data"][:392], spec["data"][392:]],
                                 "abc", {"a": 1}, None, [[]]])
    elif op == 14:
        doc = r.choice([[], [doc], "x", 1, None, {}])
    elif op == 15:
        doc["inputs"] = [{"name": "data", "datatype": "FP32", "shape": [1, 784],
                          "data": spec.get("data", [0.0] * 784), "extra": {"deep": [[[1]]]}}]
    elif binary or op == 16:
        spec["parameters"] = {"binary_data_size": r.choice([0, 1, 3135, 3137, 2 ** 62, -3136,
                                                           "3136", 3136.0, None])}
    return doc


def _json_bytes(doc, r: random.Random) -> bytes:
    text = json.dumps(doc, allow_nan=True)
    if r.random() < 0.3:  # the literals in other spellings
        text = text.replace("NaN", r.choice(["NaN", "nan", "-NaN"])).replace(
            "Infinity", r.choice(["Infinity", "inf", "1e999"]))
    return text.encode()


class ServingTarget:
    """See the module docstring: ``seeds``, ``make()`` and ``__call__(data)``."""

    def __init__(self, workdir: Path, rng: random.Random):
        import mxc.runtime
        from bench.fuzz import Mutator
        self.rng = rng
        repo = compiled_repo(Path(workdir))
        self.x = np.random.default_rng(0).standard_normal((1, 784)).astype("float32")
        self.want = np.asarray(mxc.runtime.load(repo / "mlp" / "1" / "model.mxc")
                               .run({"data": self.x})[0])
        self.watch = _LogWatch()
        logging.getLogger().addHandler(self.watch)
        self.server = EmbeddedServer(repo)
        self.port = self.server.opts.http_port
        self.conn: http.client.HTTPConnection | None = None
        self.last: tuple[int, float] | None = None   # status and time of the last answer
        self._grpc()
        self.doc = {"inputs": [{"name": "data", "datatype": "FP32", "shape": [1, 784],
                                "data": self.x.ravel().tolist()}]}
        self.bin_doc = {"inputs": [{"name": "data", "datatype": "FP32", "shape": [1, 784],
                                    "parameters": {"binary_data_size": 3136}}],
                        "outputs": [{"name": "softmax_output",
                                     "parameters": {"binary_data": True}}]}
        bin_header = json.dumps(self.bin_doc).encode()
        self.seeds = [b"J" + INFER.encode() + b"\n" + json.dumps(self.doc).encode(),
                      b"B" + str(len(bin_header)).encode() + b"\n" + INFER.encode() + b"\n"
                      + bin_header + self.x.tobytes(),
                      b"G" + self._grpc_seed(raw=True).SerializeToString(),
                      b"G" + self._grpc_seed(raw=False).SerializeToString()]
        self.bytes_mutator = Mutator([s[1:] for s in self.seeds], rng)
        self.rss: list[float] = [rss_mib()]
        self.calls = 0

    # -- the pieces ------------------------------------------------------------------
    def _grpc(self) -> None:
        import grpc
        from kserve.protocol.grpc import grpc_predict_v2_pb2 as pb
        self.pb = pb
        self.grpc = grpc
        self.channel = grpc.insecure_channel(f"127.0.0.1:{self.server.opts.grpc_port}")
        self.model_infer = self.channel.unary_unary(
            "/inference.GRPCInferenceService/ModelInfer", request_serializer=None,
            response_deserializer=pb.ModelInferResponse.FromString)

    def _grpc_seed(self, raw: bool):
        pb = self.pb
        tensor = pb.ModelInferRequest.InferInputTensor(name="data", datatype="FP32",
                                                        shape=[1, 784])
        if raw:
            return pb.ModelInferRequest(model_name="mlp", inputs=[tensor],
                                        raw_input_contents=[self.x.tobytes()])
        tensor.contents.fp32_contents.extend(self.x.ravel().tolist())
        return pb.ModelInferRequest(model_name="mlp", inputs=[tensor])

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
        self.channel.close()
        self.server.close()
        logging.getLogger().removeHandler(self.watch)

    def report(self) -> dict:
        # warm: after 100 inputs (first inferences, connections and buffers allocated)
        return {"server_rss_start_mib": self.rss[0], "server_rss_end_mib": rss_mib(),
                "server_rss_warm_mib": self.rss[min(2, len(self.rss) - 1)],
                "server_rss_max_mib": max(self.rss), "server_log_records": self.watch.lines}

    # -- inputs ----------------------------------------------------------------------
    def make(self) -> bytes:
        r = self.rng
        kind = r.choice("JJJJBBBGGGH")
        if r.random() < 0.08:
            return r.choice(self.seeds)
        if kind == "J":
            body = _json_bytes(mutate_doc(self.doc, r), r)
            if r.random() < 0.25:
                body = self.bytes_mutator.__class__([body], r)()
            return b"J" + r.choice(PATHS).encode() + b"\n" + body
        if kind == "B":
            header = _json_bytes(mutate_doc(self.bin_doc, r, binary=True), r)
            payload = self.x.tobytes()
            if r.random() < 0.3:
                payload = payload[:r.choice([0, 1, 3135])] + b"\0" * r.choice([0, 1, 7])
            length = r.choice([str(len(header))] * 4 + ["abc", "-1", "", "0", "1e3", " 12",
                                                        str(len(header) + len(payload) + 1),
                                                        "99999999999999999999", "+5", "0x10"])
            if r.random() < 0.15:                   # the header JSON not an object
                header = r.choice([b"[1]", b'"x"', b"null", b"1"])
                length = str(len(header))
            return (b"B" + length.encode() + b"\n" + r.choice(PATHS[:6]).encode() + b"\n"
                    + header + payload)
        if kind == "G":
            return b"G" + self._mutated_grpc()
        return b"H" + self._raw_http()

    def _mutated_grpc(self) -> bytes:
        r = self.rng
        req = self._grpc_seed(raw=r.random() < 0.6)
        t = req.inputs[0]
        op = r.randrange(9)
        if op == 0 and req.raw_input_contents:
            req.raw_input_contents[0] = req.raw_input_contents[0][:r.choice([0, 1, 3135])]
        elif op == 1:
            req.raw_input_contents.append(b"\0" * r.choice([0, 4, 3136]))
        elif op == 2:
            del t.shape[:]
            t.shape.extend(r.choice([[-5, 784], [0, 784], [784], [1, 784, 1], [2, 784],
                                     [2 ** 62, 784], []]))
        elif op == 3:
            t.datatype = r.choice([d for d in _BAD_DTYPES if isinstance(d, str)])
        elif op == 4:
            t.contents.int64_contents.extend([1, 2, 3])
        elif op == 5:
            req.model_name = r.choice(["nope", "", "mlp\nforged", "mlp@1"])
            req.model_version = r.choice(["", "1", "7", "-1"])
        elif op == 6:
            req.inputs.append(copy.deepcopy(t))
        elif op == 7:
            t.name = r.choice(["nope", "", "softmax_output"])
        else:
            del req.inputs[:]
        data = req.SerializeToString()
        if r.random() < 0.2:
            mutated = self.bytes_mutator.__class__([data], r)()
            try:
                self.pb.ModelInferRequest.FromString(mutated)
                data = mutated
            except Exception:  # noqa: BLE001 - not a message the server would parse
                pass
        return data

    def _raw_http(self) -> bytes:
        """A mode byte and raw request bytes: ``w`` headers declaring a body over the limit,
        then wait (413 at once: within 2 s); ``s`` the same streaming its body as clients
        do; ``c`` a chunked body over the limit; ``t`` a truncated body."""
        r = self.rng
        head = f"POST {INFER} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        op = r.choice("wsct")
        if op in "ws":
            size = r.choice([10 ** 12, 10 ** 30, MAX_REQUEST_BYTES + 1, 60 << 20])
            body = b"" if op == "w" else (b'{"inputs": [{"data": [' + b"1.0," * (
                MAX_REQUEST_BYTES // 3))[:size]   # never past its Content-Length
            return op.encode() + (head + f"Content-Length: {size}\r\n\r\n").encode() + body
        if op == "c":
            chunk = b"[" + b"1.0," * 16384
            chunks = b"".join(b"%x\r\n%s\r\n" % (len(chunk), chunk)
                              for _ in range(MAX_REQUEST_BYTES // len(chunk) + 2))
            return b"c" + (head + "Transfer-Encoding: chunked\r\n\r\n").encode() + chunks + b"0\r\n\r\n"
        body = json.dumps(self.doc).encode()
        return b"t" + (head + f"Content-Length: {len(body)}\r\n\r\n").encode() + body[:r.randrange(len(body))]

    # -- running one input -------------------------------------------------------------
    def __call__(self, data: bytes) -> None:
        self.calls += 1
        if self.calls % 50 == 0:
            self.rss.append(rss_mib())
        if not self.server.thread.is_alive():
            raise Unexpected(f"the server stopped: {self.server.error!r}")
        self.watch.records.clear()
        try:
            self._dispatch(data)
        finally:   # records this input caused, already reported when it raised
            logged, self.watch.records = self.watch.records[:1], []
        if logged:
            raise Unexpected(f"server logged a traceback: {logged}")

    def _dispatch(self, data: bytes) -> None:
        kind, rest = data[:1], data[1:]
        seed = data in self.seeds
        if kind == b"J":
            path, _, body = rest.partition(b"\n")
            self._http(path.decode("latin-1"), body, {"Content-Type": "application/json"}, seed)
        elif kind == b"B":
            length, _, rest = rest.partition(b"\n")
            path, _, body = rest.partition(b"\n")
            self._http(path.decode("latin-1"), body,
                       {"Inference-Header-Content-Length": length.decode("latin-1"),
                        "Content-Type": "application/octet-stream"}, seed)
        elif kind == b"G":
            self._grpc_call(rest, seed)
        elif kind == b"H":
            self._raw(rest)

    def _http(self, path: str, body: bytes, headers: dict, seed: bool) -> None:
        if self.conn is None:
            self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        reused = self.conn.sock is not None
        try:
            self.conn.request("POST", path, body, headers)
            resp = self.conn.getresponse()
            answer = resp.read()
        except (ConnectionError, http.client.HTTPException, OSError) as exc:
            self.conn.close()
            self.conn = None
            if reused and self.last and self.last[0] not in MAY_CLOSE \
                    and time.monotonic() - self.last[1] < 3:
                raise Unexpected(f"keep-alive connection dropped after a {self.last[0]} "
                                 f"answer: {type(exc).__name__}") from None
            if isinstance(exc, TimeoutError) or "timed out" in str(exc):
                raise Unexpected("no HTTP answer in 10 s") from None
            if reused:   # closed legitimately (idle): once more on a fresh connection
                return self._http(path, body, headers, seed)
            raise Unexpected(f"no HTTP answer: {type(exc).__name__}") from None
        self.last = (resp.status, time.monotonic())
        resp_headers = {k.lower(): v for k, v in resp.getheaders()}
        if resp.will_close and resp.status not in MAY_CLOSE:
            self.conn.close()
            self.conn = None
            raise Unexpected(f"HTTP {resp.status} closed the keep-alive connection")
        self._judge_http(resp.status, resp_headers, answer, seed)

    def _judge_http(self, status: int, headers: dict, answer: bytes, seed: bool) -> None:
        if seed:
            if status != 200:
                raise Unexpected(f"valid seed answered HTTP {status}: {_excerpt(answer)}")
            self._check_outputs(headers, answer)
            return
        if status == 200:
            return
        if status == 503:
            if "retry-after" not in headers:
                raise Unexpected("HTTP 503 without Retry-After")
            return
        if status not in ALLOWED_4XX:
            raise Unexpected(f"HTTP {status}: {_excerpt(answer)}")
        check_error_body(f"HTTP {status}", answer)

    def _check_outputs(self, headers: dict, answer: bytes) -> None:
        hlen = headers.get("inference-header-content-length")
        if hlen is not None:
            doc = json.loads(answer[:int(hlen)])
            got = np.frombuffer(answer[int(hlen):], "float32")
        else:
            doc = json.loads(answer)
            got = np.array(doc["outputs"][0]["data"], "float32")
        if not np.array_equal(got.reshape(self.want.shape), self.want):
            raise Unexpected("valid seed: outputs differ from Session.run")

    def _grpc_call(self, data: bytes, seed: bool) -> None:
        grpc = self.grpc
        try:
            reply = self.model_infer(data, timeout=10)
        except grpc.RpcError as exc:
            code = exc.code().name
            if seed or code not in GRPC_REFUSALS:
                raise Unexpected(f"gRPC {code}: {(exc.details() or '')[:60]}") from None
            if not (exc.details() or "").strip():
                raise Unexpected(f"gRPC {code} without a message") from None
            if LEAK.search(exc.details() or ""):
                raise Unexpected(f"gRPC {code} names an exception class: "
                                 f"{exc.details()[:200]}") from None
            return
        if seed:
            if reply.raw_output_contents:
                got = np.frombuffer(reply.raw_output_contents[0], "float32")
            else:
                got = np.array(reply.outputs[0].contents.fp32_contents, "float32")
            if not np.array_equal(got.reshape(self.want.shape), self.want):
                raise Unexpected("valid gRPC seed: outputs differ from Session.run")

    def _raw(self, data: bytes) -> None:
        mode, data = data[:1], data[1:]
        truncated = mode == b"t"
        with socket.create_connection(("127.0.0.1", self.port), timeout=5) as s:
            try:
                s.sendall(data)
                if truncated:
                    s.shutdown(socket.SHUT_WR)
            except OSError:
                pass   # the server may answer 413 and close before the body is all sent
            if mode == b"w":
                s.settimeout(2)
            got = b""
            try:
                while True:
                    chunk = s.recv(65536)
                    if not chunk:
                        break
                    got += chunk
                    if _complete(got):
                        break
            except TimeoutError:
                if not truncated:
                    raise Unexpected(f"no answer in {s.gettimeout():g} s to a body over the "
                                     f"limit ({'declared, not sent' if mode == b'w' else 'sent'})"
                                     ) from None
            except ConnectionResetError:
                if got or not truncated:
                    raise Unexpected("connection reset, no whole answer, to a body over the "
                                     "limit" if not truncated else "reset after a partial answer"
                                     ) from None
        if not got:
            if not truncated:
                raise Unexpected("connection closed without an answer to a body over the limit")
            return
        status = int(got.split(b" ", 2)[1])
        head, _, body = got.partition(b"\r\n\r\n")
        # a length past 2**63 is no size at all: malformed (400) as well as too large
        impossible = re.search(rb"(?i)content-length: *\d{20,}", data) is not None
        if not truncated and status != 413 and not (impossible and status == 400):
            raise Unexpected(f"a body over the limit answered HTTP {status}: {_excerpt(body)}")
        if status not in ALLOWED_4XX:
            raise Unexpected(f"raw HTTP {status}: {_excerpt(body)}")
        check_error_body(f"HTTP {status}", body)


def _excerpt(body: bytes) -> str:
    """An answer's start, numbers folded, so findings of one kind share a signature."""
    return repr(re.sub(rb"\d{2,}", b"N", body[:60]))


def _complete(raw: bytes) -> bool:
    """Whether *raw* holds a whole HTTP response with a Content-Length."""
    head, _, body = raw.partition(b"\r\n\r\n")
    m = re.search(rb"(?i)content-length:\s*(\d+)", head)
    return m is not None and len(body) >= int(m.group(1))


def check_error_body(what: str, answer: bytes) -> None:
    """A refusal's body must be ``{"error": "..."}`` naming no exception class."""
    try:
        doc = json.loads(answer)
    except ValueError:
        raise Unexpected(f"{what} body is not JSON: {_excerpt(answer)}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("error"), str):
        raise Unexpected(f"{what} body is not {{'error': str}}: {_excerpt(answer)}")
    if LEAK.search(doc["error"]):
        raise Unexpected(f"{what} names an exception class: {doc['error'][:160]}")


def make_target(name: str, workdir: Path, rng: random.Random) -> ServingTarget:
    return ServingTarget(workdir, rng)  # the one target here: "serving"


def main(argv=None) -> int:
    """``python -m bench.fuzz_serving FINDING.bin ...``: each recorded request sent to a
    fresh embedded server again, with the rule it breaks (or ``ok``)."""
    import argparse
    ap = argparse.ArgumentParser(description=main.__doc__)
    ap.add_argument("findings", nargs="+", type=Path)
    ap.add_argument("--workdir", type=Path, default=Path("/tmp/mxc-fuzz-serving"))
    args = ap.parse_args(argv)
    target = ServingTarget(args.workdir, random.Random(0))
    bad = 0
    try:  # the target's server and connections are closed however this ends
        for path in args.findings:
            try:
                target(path.read_bytes())
                print(f"{path.name}: ok")
            except Unexpected as exc:
                bad += 1
                print(f"{path.name}: {exc}")
    finally:
        target.close()
    return int(bad > 0)


if __name__ == "__main__":
    sys.exit(main())
