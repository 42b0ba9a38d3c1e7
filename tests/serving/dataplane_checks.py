"""Checks of the request decoder and response encoder that replace KServe's
per-element loops, run by ``test_dataplane.py`` in a process of their own:
kserve's gRPC protos and tritonclient's (imported by the other serving tests)
register the same names in protobuf's one descriptor pool.

KServe's own ``InferRequest.from_bytes`` and ``InferOutput.set_data_from_numpy``
are the oracle: the arrays a model reads and the JSON a client gets must be
the same, only without a Python object per tensor element.

    python tests/serving/dataplane_checks.py   # prints one JSON line: {check: "ok" | error}
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from mxc.serving.server import import_kserve  # noqa: E402
from serve_helpers import run_checks  # noqa: E402

import_kserve()
import orjson  # noqa: E402
from kserve.errors import InvalidInput  # noqa: E402
from kserve.protocol.infer_type import InferOutput, InferRequest  # noqa: E402

from mxc.serving.dataplane import MxcDataPlane  # noqa: E402
from mxc.serving.requests import decode_binary  # noqa: E402
from mxc.serving.tensors import output_tensor, v2_datatype  # noqa: E402

_HEADER = "inference-header-content-length"


def _body(tensors: dict, json_inputs: dict | None = None, outputs=None) -> tuple[bytes, int]:
    """A binary-extension request body as tritonclient builds it: JSON header, then bytes."""
    inputs, blobs = [], []
    for name, x in tensors.items():
        raw = x.tobytes()
        inputs.append({"name": name, "shape": list(x.shape), "datatype": v2_datatype(x.dtype),
                       "parameters": {"binary_data_size": len(raw)}})
        blobs.append(raw)
    for name, x in (json_inputs or {}).items():
        inputs.append({"name": name, "shape": list(x.shape), "datatype": v2_datatype(x.dtype),
                       "data": x.reshape(-1).tolist()})
    header = {"id": "r1", "inputs": inputs, "parameters": {"binary_data_output": True}}
    if outputs:
        header["outputs"] = [{"name": o, "parameters": {"binary_data": True}} for o in outputs]
    js = orjson.dumps(header)
    return js + b"".join(blobs), len(js)


def binary_inputs_decode_like_kserves_from_bytes(dtype):
    rng = np.random.default_rng(3)
    x = (rng.standard_normal((2, 3, 4)) * 50).astype(dtype)
    y = np.arange(6, dtype="int32").reshape(1, 6)
    z = np.linspace(-1, 1, 5, dtype="float32").reshape(5, 1)
    body, length = _body({"x": x, "y": y}, json_inputs={"z": z}, outputs=["out0"])
    ours = decode_binary(body, str(length), "m", 1 << 30)
    theirs = InferRequest.from_bytes(body, length, "m")
    assert [t.name for t in ours.inputs] == [t.name for t in theirs.inputs] == ["x", "y", "z"]
    for a, b in zip(ours.inputs, theirs.inputs):
        assert (a.datatype, a.shape) == (b.datatype, b.shape)
        np.testing.assert_array_equal(a.as_numpy(), b.as_numpy())
        assert a.as_numpy().dtype == b.as_numpy().dtype
    assert ours.id == theirs.id and ours.parameters == theirs.parameters
    assert ours.use_binary_outputs == theirs.use_binary_outputs
    assert [o.name for o in ours.request_outputs] == [o.name for o in theirs.request_outputs]
    # the binary inputs were not turned into Python lists
    assert ours.inputs[0]._data is None and ours.inputs[0]._raw_data is not None


def the_data_plane_decodes_binary_bodies_and_wants_their_header():
    x = np.ones((1, 4), "float32")
    body, length = _body({"x": x})
    dp = MxcDataPlane.__new__(MxcDataPlane)  # the decoder needs no model registry
    req = dp.decode_inference_request(body, {_HEADER: str(length)}, "m")
    np.testing.assert_array_equal(req.inputs[0].as_numpy(), x)
    _raises(lambda: dp.decode_inference_request(body, {}, "m"), "header is missing")


MALFORMED = [
    (b"{not json", 0),                                                  # malformed JSON
    (b'{"inputs": 3}', 0),                                              # inputs not a list
    (b'{"inputs": [{"shape": [1], "datatype": "FP32"}]}', 0),           # no name
    (b'{"inputs": [{"name": "x", "shape": [1], "datatype": "FP32"}]}', 0),  # no data at all
    (b'{"inputs": [{"name": "x", "shape": [4], "datatype": "FP32", '
     b'"parameters": {"binary_data_size": 16}}]}', 8),                  # body cut short
    (b'{"inputs": [{"name": "x", "shape": [1], "datatype": "FP16", "data": [1.0]}]}', 0),
]


def malformed_binary_requests_are_invalid_input(header, cut):
    body = header + b"\0" * (16 - cut)
    _raises(lambda: decode_binary(body, str(len(header)), "m", 1 << 30), "")


def outputs_encode_like_kserves_set_data_from_numpy(dtype, binary):
    rng = np.random.default_rng(7)
    value = (rng.standard_normal((2, 5)) * 100).astype(dtype)
    ours = output_tensor("out", value, binary)
    theirs = InferOutput(name="out", shape=list(value.shape), datatype=v2_datatype(value.dtype))
    theirs.set_data_from_numpy(value, binary_data=binary)
    assert (ours.name, ours.shape, ours.datatype) == (theirs.name, theirs.shape, theirs.datatype)
    assert ours.data == theirs.data and ours._raw_data == theirs._raw_data
    assert ours.parameters == theirs.parameters
    if not binary:  # the same JSON text, value for value
        assert orjson.dumps(ours.data) == orjson.dumps(theirs.data)
        assert [type(v) for v in ours.data] == [type(v) for v in theirs.data]


class _EchoModel:
    """Built on first use (kserve.Model is only importable after import_kserve)."""


def _fast_route_app():
    """KServe's REST app with one model that doubles ``x`` (and refuses an input
    named ``bad`` with a RequestError), as ``mxc serve`` assembles it."""
    import kserve
    from kserve.model_repository import ModelRepository
    from kserve.protocol.infer_type import InferResponse
    from kserve.protocol.model_repository_extension import ModelRepositoryExtension
    from kserve.protocol.rest.server import RESTServer

    from mxc.serving.errors import RequestError
    from mxc.serving.refusals import install_rest_handlers

    class Echo(kserve.Model):
        def __init__(self):
            super().__init__("echo")
            self.ready = True

        async def predict(self, payload, headers=None):
            t = payload.inputs[0]
            if t.name == "bad":
                raise RequestError("model 'echo' has no input 'bad'")
            x = t.as_numpy()
            return InferResponse(model_name="echo", response_id=payload.id or "fixed",
                                 infer_outputs=[output_tensor("y", x * 2,
                                                              payload.use_binary_outputs)],
                                 use_binary_outputs=payload.use_binary_outputs)

    registry = ModelRepository()
    registry.update(Echo())
    dp = MxcDataPlane(model_registry=registry)
    RESTServer("kserve.model_server:app", dp, ModelRepositoryExtension(model_registry=registry),
               0).create_application()
    from kserve.model_server import app
    install_rest_handlers(app)
    return app, dp


def _call(asgi, path: str, body: bytes, headers: list) -> tuple[int, dict, bytes]:
    import asyncio

    async def go():
        sent = []
        done = False

        async def receive():
            nonlocal done
            if done:
                return {"type": "http.disconnect"}
            done = True
            return {"type": "http.request", "body": body, "more_body": False}

        async def send(message):
            sent.append(message)
        scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1",
                 "method": "POST", "scheme": "http", "path": path, "raw_path": path.encode(),
                 "query_string": b"", "root_path": "", "client": ("127.0.0.1", 1),
                 "server": ("127.0.0.1", 2), "headers": headers}
        await asgi(scope, receive, send)
        return sent
    sent = asyncio.run(go())
    head = {k.decode().lower(): v.decode() for k, v in sent[0].get("headers", [])}
    return sent[0]["status"], head, b"".join(m.get("body", b"") for m in sent[1:])


def fast_route_answers_like_kserves_route():
    """Each request, through fast_infer and through KServe's app alone: same status, body
    and binary header (the fast route may add a Content-Length; KServe chunks)."""
    from mxc.serving.infer_route import infer_route as fast_infer
    app, dp = _fast_route_app()
    through_app = []

    class Counting:  # KServe's app, counting the requests the fast route hands it
        exception_handlers = app.exception_handlers

        async def __call__(self, scope, receive, send):
            through_app.append(scope["path"])
            await app(scope, receive, send)
    fast = fast_infer(Counting(), dp, 1 << 30)
    x = np.arange(6, dtype="float32").reshape(2, 3)
    cases = []
    for outputs in (["y"], None):                       # binary and JSON answers
        body, n = _body({"x": x}, outputs=outputs)
        cases.append(("/v2/models/echo/infer", body, n))
    body, n = _body({"bad": x})
    cases.append(("/v2/models/echo/infer", body, n))      # the model's RequestError
    body, n = _body({"x": x})
    cases.append(("/v2/models/nope/infer", body, n))      # unknown model
    cases.append(("/v2/models/echo/infer", b"{oops" + body, 5))   # malformed header
    for path, body, n in cases:
        headers = [(b"content-length", str(len(body)).encode()),
                   (_HEADER.encode(), str(n).encode())]
        got, want = _call(fast, path, body, headers), _call(app, path, body, headers)
        assert got[0] == want[0], (path, got, want)
        if want[0] != 200:  # a refusal: same status, and mxc's message names the field
            assert set(orjson.loads(got[2])) == {"error"}, got
            continue
        if want[1].get("content-type", "").startswith("application/json"):
            assert orjson.loads(got[2]) == orjson.loads(want[2]), (got, want)
        else:
            assert got[2] == want[2], (got, want)
        assert got[1].get(_HEADER) == want[1].get(_HEADER)
    codes = [_call(app, p, b, [(_HEADER.encode(), str(k).encode())])[0] for p, b, k in cases]
    assert codes == [200, 200, 400, 404, 400], codes
    assert through_app == [], through_app   # every binary request was answered by the fast route
    # a JSON body is answered by the route too, as KServe's app answers it
    js = orjson.dumps({"inputs": [{"name": "x", "shape": [2, 3], "datatype": "FP32",
                                   "data": x.ravel().tolist()}]})
    hj = [(b"content-type", b"application/json"), (b"content-length", str(len(js)).encode())]
    got, want = _call(fast, "/v2/models/echo/infer", js, hj), _call(app, "/v2/models/echo/infer",
                                                                      js, hj)
    assert got[0] == want[0] == 200 and orjson.loads(got[2]) == orjson.loads(want[2])
    assert through_app == []


def raw_inputs_read_as_kserves_public_raw_inputs(dtype: str) -> None:
    """kserve_private.hold_raw_input gives the array KServe's public
    ``InferRequest(raw_inputs=...)`` gives for the same bytes."""
    from kserve.protocol.infer_type import InferInput

    from mxc.serving.kserve_private import hold_raw_input
    x = (np.random.default_rng(3).standard_normal((2, 3)) * 50).astype(dtype)
    ours = InferInput(name="x", shape=[2, 3], datatype=v2_datatype(x.dtype))
    hold_raw_input(ours, x.tobytes())
    theirs = InferRequest("m", [InferInput(name="x", shape=[2, 3], datatype=v2_datatype(x.dtype))],
                          raw_inputs=[x.tobytes()]).inputs[0]
    a, b = ours.as_numpy(), theirs.as_numpy()
    assert a.dtype == b.dtype == x.dtype and a.shape == b.shape == (2, 3)
    np.testing.assert_array_equal(a, b)


def rest_app_is_kserves_configured_app():
    """kserve_private.rest_app: KServe's module-global app, its V2 routes answering from
    the data plane given, less the timing middleware.  In a process of its own: KServe
    has one app per process, configured once (``fast-route`` configures it here)."""
    import subprocess
    code = """if True:
        import asyncio, json
        from mxc.serving.kserve_private import import_kserve, rest_app
        import_kserve()
        import kserve.model_server
        from kserve.model_repository import ModelRepository
        from kserve.protocol.model_repository_extension import ModelRepositoryExtension
        from kserve.protocol.rest.server import TimingMiddleware
        from mxc.serving.dataplane import MxcDataPlane
        registry = ModelRepository()
        app = rest_app(MxcDataPlane(model_registry=registry),
                       ModelRepositoryExtension(model_registry=registry), 0)
        assert app is kserve.model_server.app
        assert all(m.cls is not TimingMiddleware for m in app.user_middleware)

        async def get(path):
            sent = []
            async def receive():
                return {"type": "http.request", "body": b"", "more_body": False}
            async def send(m):
                sent.append(m)
            await app({"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1",
                       "method": "GET", "scheme": "http", "path": path,
                       "raw_path": path.encode(), "query_string": b"", "root_path": "",
                       "client": ("127.0.0.1", 1), "server": ("127.0.0.1", 2),
                       "headers": []}, receive, send)
            return sent[0]["status"], b"".join(m.get("body", b"") for m in sent[1:])
        print(json.dumps([asyncio.run(get("/v2/health/live"))[0],
                          list(asyncio.run(get("/v2/models/nope/ready"))[:1]),
                          asyncio.run(get("/v2"))[0]]))
    """
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=str(Path(__file__).resolve().parents[2]), timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert json.loads(out.stdout.strip().splitlines()[-1]) == [200, [404], 200], out.stdout


def kserve_does_not_read_our_command_line():
    """kserve_private.import_kserve: KServe parses sys.argv when kserve.model_server is
    imported; an option of ours (here one KServe would refuse) is not read."""
    import subprocess
    code = ("import sys; sys.argv = ['mxc', 'serve', '--http_port', 'not-a-port']\n"
            "from mxc.serving.kserve_private import import_kserve; import_kserve()\n"
            "import kserve.model_server as m; print(m.args.http_port, sys.argv[-1])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=str(Path(__file__).resolve().parents[2]), timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["8080", "not-a-port"], out.stdout


def _raises(fn, text: str) -> None:
    try:
        fn()
    except InvalidInput as exc:
        assert text in str(exc), exc
        return
    raise AssertionError("no InvalidInput raised")


CHECKS = {
    "rest-app": (rest_app_is_kserves_configured_app, ()),
    "fast-route": (fast_route_answers_like_kserves_route, ()),
    **{f"decode-{d}": (binary_inputs_decode_like_kserves_from_bytes, (d,))
       for d in ("float32", "int64", "uint8", "int8", "float64", "bool")},
    "data-plane": (the_data_plane_decodes_binary_bodies_and_wants_their_header, ()),
    **{f"raw-input-{d}": (raw_inputs_read_as_kserves_public_raw_inputs, (d,))
       for d in ("float32", "int64", "uint8", "bool")},
    "argv": (kserve_does_not_read_our_command_line, ()),
    **{f"malformed-{i}": (malformed_binary_requests_are_invalid_input, case)
       for i, case in enumerate(MALFORMED)},
    **{f"encode-{d}-{'binary' if b else 'json'}": (outputs_encode_like_kserves_set_data_from_numpy,
                                                   (d, b))
       for d in ("float32", "float64", "int64", "int32", "uint8", "int8", "bool", "float16")
       for b in (False, True)},
}


if __name__ == "__main__":
    run_checks(CHECKS)
