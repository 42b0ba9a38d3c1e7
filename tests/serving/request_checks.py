"""Unit checks of the hardened server's parts (issue 35), run by ``test_request_checks.py``
in a process of their own (kserve's gRPC protos and tritonclient's cannot share one).

Each check is a hand-written case with the answer a hardened server owes it: the
field a refusal must name and its status, the array a valid body decodes to, the
cap a descriptor limit leaves, the lines a rationed log writes.

    python tests/serving/request_checks.py   # prints one JSON line: {check: "ok" | error}
"""

from __future__ import annotations

import asyncio
import json
import logging
import sys
import tempfile
from pathlib import Path
from types import SimpleNamespace

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from mxc.serving.server import import_kserve  # noqa: E402
from serve_helpers import FakeRegistry, run_checks  # noqa: E402

import_kserve()
from mxc.serving import asgi_guards, connections, requests  # noqa: E402
from mxc.serving.errors import RequestError  # noqa: E402

LIMIT = 1 << 20
GOOD = {"name": "x", "datatype": "FP32", "shape": [2, 3], "data": [[1, 2, 3], [4, 5, 6]]}


def _refused(fn, field: str, status: int = 400) -> None:
    try:
        fn()
    except RequestError as exc:
        assert field in str(exc), (field, str(exc))
        assert exc.status == status, (exc.status, str(exc))
        assert "Error" not in str(exc) and "Traceback" not in str(exc), str(exc)
        return
    raise AssertionError(f"not refused; {field!r} expected")


def _json(**change) -> bytes:
    return json.dumps({"inputs": [dict(GOOD, **change)]}).encode()


JSON_CASES = {
    "not-object": (b"[1]", "request body", 400),
    "nan": (b'{"inputs": [{"name": "x", "datatype": "FP32", "shape": [1], "data": [NaN]}]}',
            "not JSON", 400),
    "inputs-empty": (b'{"inputs": []}', "inputs", 400),
    "inputs-number": (b'{"inputs": [7]}', "inputs[0]", 400),
    "name-missing": (json.dumps({"inputs": [{k: v for k, v in GOOD.items() if k != "name"}]})
                     .encode(), "inputs[0].name", 400),
    "params-list": (json.dumps({"inputs": [GOOD], "parameters": [1]}).encode(), "parameters", 400),
    "input-params-str": (_json(parameters="x"), "inputs[0].parameters", 400),
    "outputs-str": (json.dumps({"inputs": [GOOD], "outputs": "y"}).encode(), "outputs", 400),
    "output-number": (json.dumps({"inputs": [GOOD], "outputs": [3]}).encode(), "outputs[0]", 400),
    "id-number": (json.dumps({"inputs": [GOOD], "id": 5}).encode(), "id", 400),
    "dim-negative": (_json(shape=[-2, 3]), "inputs[0].shape[0]", 400),
    "dim-zero": (_json(shape=[2, 0], data=[]), "inputs[0].shape[1]", 400),
    "dim-bool": (_json(shape=[True, 3]), "inputs[0].shape[0]", 400),
    "dim-float": (_json(shape=[2.0, 3]), "inputs[0].shape[0]", 400),
    "shape-string": (_json(shape="2,3"), "inputs[0].shape", 400),
    "dtype-lower": (_json(datatype="fp32"), "inputs[0].datatype", 400),
    "dtype-number": (_json(datatype=3), "inputs[0].datatype", 400),
    "declared-huge": (_json(shape=[100000, 100000, 100000]), "inputs[0].shape", 413),
    "too-few-values": (_json(data=[1, 2, 3]), "inputs[0].data", 400),
    "ragged": (_json(data=[[1, 2, 3], [4, 5]]), "inputs[0].data", 400),
    "strings": (_json(data=["1"] * 6), "inputs[0].data", 400),
    "nulls": (_json(data=[None] * 6), "inputs[0].data", 400),
    "one-null": (_json(data=[1, 2, None, 4, 5, 6]), "inputs[0].data", 400),
    "floats-for-int": (_json(datatype="INT32", data=[1.5] * 6), "inputs[0].data", 400),
    "int-overflow": (_json(datatype="INT8", data=[300] * 6), "inputs[0].data", 400),
    "fp32-overflow": (_json(data=[1e300] * 6), "inputs[0].data", 400),
    "fp16-json": (_json(datatype="FP16"), "inputs[0].data", 400),
    "data-missing": (json.dumps({"inputs": [{k: v for k, v in GOOD.items() if k != "data"}]})
                     .encode(), "inputs[0].data", 400),
}


def json_case(body: bytes, field: str, status: int) -> None:
    _refused(lambda: requests.decode_json(body, "m", LIMIT), field, status)


def valid_json_decodes_to_the_array_of_its_datatype() -> None:
    req = requests.decode_json(_json(), "m", LIMIT)
    x = req.inputs[0].as_numpy()
    assert x.dtype == np.float32 and x.shape == (2, 3)
    np.testing.assert_array_equal(x, np.arange(1, 7, dtype="float32").reshape(2, 3))
    req = requests.decode_json(_json(datatype="INT8", data=[-128, 127, 0, 1, 2, 3]), "m", LIMIT)
    assert req.inputs[0].as_numpy().tolist() == [[-128, 127, 0], [1, 2, 3]]
    req = requests.decode_json(_json(datatype="BOOL", data=[True, False] * 3), "m", LIMIT)
    assert req.inputs[0].as_numpy().dtype == np.bool_


def the_model_check_runs_before_any_value_is_read() -> None:
    seen = []

    def expect(given):
        seen.append(given)
        raise RequestError("model 'm': input 'x' datatype FP32 given, INT64 expected")
    # the data are strings: had they been read first, the refusal would name them
    _refused(lambda: requests.decode_json(_json(data=["a"] * 6), "m", LIMIT, expect), "INT64")
    assert seen == [{"x": ("FP32", [2, 3])}]
    body = json.dumps({"inputs": [GOOD, GOOD]}).encode()
    _refused(lambda: requests.decode_json(body, "m", LIMIT, lambda g: None), "given twice")


def _binary(header, payload: bytes) -> tuple[bytes, str]:
    head = json.dumps(header).encode()
    return head + payload, str(len(head))


_X = np.arange(6, dtype="float32").reshape(2, 3)
_SPEC = {"name": "x", "datatype": "FP32", "shape": [2, 3], "parameters": {"binary_data_size": 24}}
BINARY_CASES = {
    "length-text": ((_binary({"inputs": [_SPEC]}, _X.tobytes())[0], "twelve"),
                    "Inference-Header-Content-Length"),
    "length-negative": ((_binary({"inputs": [_SPEC]}, _X.tobytes())[0], "-1"),
                        "Inference-Header-Content-Length"),
    "length-past-end": ((_binary({"inputs": [_SPEC]}, _X.tobytes())[0], "100000"),
                        "Inference-Header-Content-Length"),
    "header-list": (_binary([1], b""), "request header"),
    "size-string": (_binary({"inputs": [dict(_SPEC, parameters={"binary_data_size": "24"})]},
                            _X.tobytes()), "binary_data_size"),
    "size-short": (_binary({"inputs": [dict(_SPEC, parameters={"binary_data_size": 20})]},
                           _X.tobytes()[:20]), "inputs[0]"),
    "body-short": (_binary({"inputs": [_SPEC]}, _X.tobytes()[:10]), "binary_data_size"),
    "trailing": (_binary({"inputs": [_SPEC]}, _X.tobytes() + b"xx"), "after the last"),
}


def binary_case(request, field: str) -> None:
    body, length = request
    _refused(lambda: requests.decode_binary(body, length, "m", LIMIT), field)


def valid_binary_keeps_its_bytes() -> None:
    body, length = _binary({"inputs": [_SPEC]}, _X.tobytes())
    req = requests.decode_binary(body, length, "m", LIMIT)
    assert req.inputs[0]._data is None
    np.testing.assert_array_equal(req.inputs[0].as_numpy(), _X)


def grpc_requests_follow_the_rest_rules() -> None:
    from kserve.protocol.grpc import grpc_predict_v2_pb2 as pb

    def infer(datatype="FP32", shape=(2, 3), raw=_X.tobytes()):
        tensor = pb.ModelInferRequest.InferInputTensor(name="x", datatype=datatype, shape=shape)
        return pb.ModelInferRequest(model_name="m", inputs=[tensor], raw_input_contents=[raw])
    requests.check_grpc_request(infer(), LIMIT)
    for request, field in ((infer(datatype="fp32"), "inputs[0].datatype"),
                           (infer(shape=(0, 3), raw=b""), "inputs[0].shape[0]"),
                           (infer(shape=(-1, 3)), "inputs[0].shape[0]"),
                           (infer(raw=b"123"), "raw_input_contents[0]"),
                           (pb.ModelInferRequest(model_name="m"), "inputs")):
        _refused(lambda: requests.check_grpc_request(request, LIMIT), field)


def triton_clients_name_the_model_in_field_2() -> None:
    from kserve.protocol.grpc import grpc_predict_v2_pb2 as pb

    from mxc.serving.grpc_server import control_model_name
    kserve_layout = pb.RepositoryModelUnloadRequest(model_name="mlp@1")
    assert control_model_name(kserve_layout) == "mlp@1"
    # Triton's RepositoryModelUnloadRequest: repository_name = 1 (empty), model_name = 2
    triton_layout = pb.RepositoryModelUnloadRequest.FromString(b"\x12\x05mlp@2")
    assert control_model_name(triton_layout) == "mlp@2"
    assert control_model_name(pb.RepositoryModelUnloadRequest()) == ""


def json_limit_follows_the_declared_inputs() -> None:
    from mxc.serving.requests import JSON_BYTES_PER_ELEMENT, JSON_OVERHEAD_BYTES, json_limit
    mlp = [SimpleNamespace(shape=(1, 784))]
    assert json_limit(mlp, None) == JSON_OVERHEAD_BYTES + 784 * JSON_BYTES_PER_ELEMENT + 1024
    dynamic = [SimpleNamespace(shape=("batch", 784))]
    assert json_limit(dynamic, 32) == JSON_OVERHEAD_BYTES + 32 * 784 * JSON_BYTES_PER_ELEMENT + 1024
    assert json_limit(dynamic, None) is None
    assert json_limit([SimpleNamespace(shape=(1, "h", 3))], 8) is None


def the_connection_cap_fits_the_descriptor_limit() -> None:
    assert connections.connection_cap(1000, 1 << 20, 40, grpc=True) == 1000
    spare = 64 - 16 - connections.DESCRIPTOR_RESERVE
    assert connections.connection_cap(1000, 64, 16, grpc=False) == spare
    assert connections.connection_cap(1000, 64, 16, grpc=True) == spare // 2
    assert connections.connection_cap(1000, 20, 16, grpc=True) == 1


def refusal_logs_are_escaped_and_rationed() -> None:
    from mxc.serving.refusals import OneLineFilter, RefusalLog, printable
    assert printable("nope\nINFO forged\x1b[2J") == "nope\\nINFO forged\\x1b[2J"
    assert len(printable("a" * 1000, limit=50)) == 53
    ration = RefusalLog(rate=0.0, burst=3)
    assert [ration.allow("a")[0] for _ in range(5)] == [True, True, True, False, False]
    assert ration.allow("b") == (True, 0)          # another client has its own bucket
    ration = RefusalLog(rate=1000.0, burst=1)
    assert ration.allow("a") == (True, 0)
    assert ration.allow("a") == (False, 0)
    import time
    time.sleep(0.01)
    assert ration.allow("a") == (True, 1)          # says how many it left out
    record = logging.LogRecord("x", logging.INFO, __file__, 1, "model %s", ("a\nb",), None)
    OneLineFilter().filter(record)
    assert record.getMessage() == "model a\\nb"


def model_control_follows_its_mode() -> None:
    from mxc.serving.control import ModelControl
    from mxc.serving.repository import RepositoryWatcher

    root = Path(tempfile.mkdtemp())
    for v in ("1", "2"):
        (root / "m" / v).mkdir(parents=True)
        (root / "m" / v / "model.mxc").write_bytes(b"x")
    registry = FakeRegistry()
    watcher = RepositoryWatcher(root, registry, lambda name, path: SimpleNamespace(name=name))
    watcher.sync()
    assert sorted(registry.models) == ["m", "m@1", "m@2"]

    async def go():
        try:
            await ModelControl("poll", watcher, registry).unload("m")
            raise AssertionError("poll mode allowed an unload")
        except RequestError as exc:
            assert exc.status == 403 and "--model-control-mode" in str(exc)
        explicit = ModelControl("explicit", watcher, registry, token="t")
        try:
            await explicit.unload("m@2", "Bearer wrong")
            raise AssertionError("a wrong token was taken")
        except RequestError as exc:
            assert exc.status == 401
        await explicit.unload("m@2", "Bearer t")
        assert sorted(registry.models) == ["m", "m@1"] and registry.models["m"].name == "m@1"
        await explicit.unload("m", "Bearer t")
        assert registry.models == {}
        await explicit.load("m@2", "Bearer t")
        assert sorted(registry.models) == ["m", "m@2"]
        await explicit.load("m", "Bearer t")
        assert sorted(registry.models) == ["m", "m@1", "m@2"]
        try:
            await explicit.load("nope", "Bearer t")
            raise AssertionError("an unknown model was loaded")
        except RequestError as exc:
            assert exc.status == 404
    asyncio.run(go())


def links_out_of_the_repository_are_not_served() -> None:
    from mxc.serving.repository import scan
    outside = Path(tempfile.mkdtemp()) / "elsewhere.mxc"
    outside.write_bytes(b"x")
    root = Path(tempfile.mkdtemp())
    for v in ("1", "2", "3"):
        (root / "m" / v).mkdir(parents=True)
    (root / "m" / "1" / "model.mxc").write_bytes(b"x")
    (root / "m" / "2" / "model.mxc").symlink_to(outside)
    (root / "m" / "3" / "model.mxc").symlink_to(root / "m" / "1" / "model.mxc")  # inside: fine
    assert sorted(scan(root)) == [("m", "1"), ("m", "3")]
    assert sorted(scan(root, follow_symlinks=True)) == [("m", "1"), ("m", "2"), ("m", "3")]


def _call(asgi, headers: list, chunks: list[bytes]) -> tuple[int, dict, bytes]:
    async def go():
        sent, queue = [], list(chunks)

        async def receive():
            body = queue.pop(0) if queue else b""
            return {"type": "http.request", "body": body, "more_body": bool(queue)}

        async def send(message):
            sent.append(message)
        await asgi({"type": "http", "method": "POST", "path": "/x", "headers": headers},
                   receive, send)
        start = next(m for m in sent if m["type"] == "http.response.start")
        body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
        return start["status"], dict(start["headers"]), body
    return asyncio.run(go())


def body_limit_and_in_flight_cap_answer_413_and_503() -> None:
    async def echo(scope, receive, send):
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": str(len(body)).encode()})
    limited = asgi_guards.body_limit(echo, 100, 5.0)
    assert _call(limited, [], [b"a" * 60, b"a" * 40])[::2] == (200, b"100")
    status, headers, _ = _call(limited, [], [b"a" * 60, b"a" * 60])       # chunked, over
    assert status == 413 and b"connection" not in headers   # the parser drops the rest
    status, headers, _ = _call(limited, [(b"content-length", b"101")], [b"a" * 101])
    assert status == 413 and headers[b"connection"] == b"close"  # not read at all
    assert _call(limited, [(b"content-length", b"1e9")], [b""])[0] == 413

    async def slow(scope, receive, send):
        await asyncio.sleep(0.2)
        await echo(scope, receive, send)
    capped = asgi_guards.in_flight_cap(slow, 2)
    results = []  # three requests at once in one event loop, two allowed in flight

    async def concurrent():
        async def one():
            sent = []

            async def receive():
                return {"type": "http.request", "body": b"x", "more_body": False}

            async def send(message):
                sent.append(message)
            await capped({"type": "http", "method": "POST", "path": "/x", "headers": []},
                         receive, send)
            start = sent[0]
            results.append((start["status"], dict(start["headers"]).get(b"retry-after")))
        await asyncio.gather(one(), one(), one())
    asyncio.run(concurrent())
    assert sorted(results) == [(200, None), (200, None), (503, b"1")], results


def v2_paths_are_parsed_in_one_place():
    """requests.model_path (issue 36: the one parse of a V2 model path), against the
    protocol's URL forms written out by hand."""
    cases = {"/v2/models/mlp/infer": ("mlp", "infer"),
             "/v2/models/mlp/versions/2/infer": ("mlp@2", "infer"),
             "/v2/models/mlp/versions/2": ("mlp@2", ""),
             "/v2/models/mlp/ready": ("mlp", "ready"), "/v2/models/mlp": ("mlp", ""),
             "/v2/models/": None, "/v2/models": None, "/v2/health/ready": None,
             "/v1/models/mlp:predict": None}
    for path, want in cases.items():
        assert requests.model_path(path) == want, (path, requests.model_path(path))


def binary_requests_are_told_by_their_header_alone():
    assert requests.binary_header_length({"inference-header-content-length": "12"}) == "12"
    assert requests.binary_header_length({"content-type": "application/octet-stream"}) is None


def the_version_rewrite_parses_the_path_once_for_the_layers_inside():
    """asgi_guards.v2_compat hands inner layers the rewritten path and its parse."""
    cases = [("/v2/models/mlp/versions/2/infer", "/v2/models/mlp@2/infer", ("mlp@2", "infer")),
             ("/v2/models/mlp/versions/2/", "/v2/models/mlp@2/", ("mlp@2", "")),
             ("/v2/models/mlp/versions/2", "/v2/models/mlp@2", ("mlp@2", "")),
             ("/v2/models/mlp/infer", "/v2/models/mlp/infer", ("mlp", "infer")),
             ("/v2/health/live", "/v2/health/live", None)]
    for path, rewritten, parsed in cases:
        seen = {}

        async def inner(scope, receive, send):
            seen.update(scope)
        asyncio.run(asgi_guards.v2_compat(inner)({"type": "http", "path": path,
                                                  "raw_path": path.encode()}, None, None))
        assert seen["path"] == rewritten and seen["raw_path"] == rewritten.encode(), seen
        assert seen.get(requests.MODEL_PATH_KEY) == parsed, seen


CHECKS = {
    "model-path": (v2_paths_are_parsed_in_one_place, ()),
    "binary-header": (binary_requests_are_told_by_their_header_alone, ()),
    "version-rewrite": (the_version_rewrite_parses_the_path_once_for_the_layers_inside, ()),
    **{f"json-{name}": (json_case, case) for name, case in JSON_CASES.items()},
    **{f"binary-{name}": (binary_case, case) for name, case in BINARY_CASES.items()},
    "json-valid": (valid_json_decodes_to_the_array_of_its_datatype, ()),
    "model-check-first": (the_model_check_runs_before_any_value_is_read, ()),
    "binary-valid": (valid_binary_keeps_its_bytes, ()),
    "grpc-rules": (grpc_requests_follow_the_rest_rules, ()),
    "grpc-triton-names": (triton_clients_name_the_model_in_field_2, ()),
    "json-limit": (json_limit_follows_the_declared_inputs, ()),
    "connection-cap": (the_connection_cap_fits_the_descriptor_limit, ()),
    "refusal-log": (refusal_logs_are_escaped_and_rationed, ()),
    "model-control": (model_control_follows_its_mode, ()),
    "symlinks": (links_out_of_the_repository_are_not_served, ()),
    "asgi-guards": (body_limit_and_in_flight_cap_answer_413_and_503, ()),
}


if __name__ == "__main__":
    run_checks(CHECKS)
