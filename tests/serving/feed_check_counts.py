"""How many times a served request's feeds are checked: once (issue 36), run by
``test_feed_checks.py`` in a process of its own (kserve's gRPC protos and
tritonclient's cannot share one).

Every check of a feed against a model's inputs goes through the runtime's
``FeedSignature`` (``Session.check_feeds``); a spy counts the inputs it checks
while requests travel every way into a model -- the V2 route with JSON and
binary bodies, KServe's data plane with a plain ``InferRequest`` (gRPC and
CloudEvents come that way), refusals, and concurrent requests the batcher joins
and a dynamic-batch artifact pads.  The answers are compared with the MXNet
graph run by mxc's reference executor (``Symbol.bind``), which shares no code
with the compiled path.

    python tests/serving/feed_check_counts.py   # prints one JSON line: {check: "ok" | error}
"""

from __future__ import annotations

import asyncio
import json
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from mxc.serving.server import import_kserve  # noqa: E402
from serve_helpers import MLP, run_checks  # noqa: E402

import_kserve()
import orjson  # noqa: E402

import mxc  # noqa: E402
from mxc.runtime.feeds import FeedSignature  # noqa: E402

_HEADER = b"inference-header-content-length"
CHECKED: list[str] = []   # one entry per input of each check against a signature
_check_values = FeedSignature.check_values


def _counting(self, feeds):
    CHECKED.extend(sorted(feeds))
    return _check_values(self, feeds)


FeedSignature.check_values = _counting   # every check of feeds goes through it


def _reference(x: np.ndarray) -> np.ndarray:
    sym, args, aux = mxc.load_checkpoint(str(MLP / "mlp"), 0)
    return sym.bind(args={**args, "data": x}, aux_states=aux).forward()[0]


def _artifacts() -> dict:
    sym, args, aux = mxc.load_checkpoint(str(MLP / "mlp"), 0)
    root = Path(tempfile.mkdtemp())
    out = {}
    for name, shape in (("static", (1, 784)), ("dynamic", ((1, 8), 784))):
        out[name] = root / f"{name}.mxc"
        mxc.compile(sym, (args, aux), {"data": shape}).save(out[name])
    return out


ARTIFACTS = _artifacts()


def _app(name: str, max_batch_size: int = 1):
    """``mxc serve``'s REST stack for one model: KServe's app behind the V2 route."""
    from kserve.model_repository import ModelRepository
    from kserve.protocol.model_repository_extension import ModelRepositoryExtension

    from mxc.serving.dataplane import MxcDataPlane
    from mxc.serving.infer_route import infer_route
    from mxc.serving.kserve_private import rest_app
    from mxc.serving.model import MxcModel
    from mxc.serving.refusals import install_rest_handlers

    model = MxcModel("mlp", ARTIFACTS[name], max_batch_size=max_batch_size,
                     max_latency_ms=200)
    model.load()
    registry = ModelRepository()
    registry.update(model)
    dp = MxcDataPlane(model_registry=registry)
    app = rest_app(dp, ModelRepositoryExtension(model_registry=registry), 0)
    install_rest_handlers(app)
    return infer_route(app, dp, 1 << 30), dp


async def _post(asgi, body: bytes, headers: list) -> tuple[int, bytes]:
    sent, done = [], False

    async def receive():
        nonlocal done
        if done:
            await asyncio.sleep(3600)
        done = True
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message):
        sent.append(message)
    path = "/v2/models/mlp/infer"
    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1",
             "method": "POST", "scheme": "http", "path": path, "raw_path": path.encode(),
             "query_string": b"", "root_path": "", "client": ("127.0.0.1", 1),
             "server": ("127.0.0.1", 2),
             "headers": [(b"content-length", str(len(body)).encode()), *headers]}
    await asgi(scope, receive, send)
    return sent[0]["status"], b"".join(m.get("body", b"") for m in sent[1:])


def _json(x: np.ndarray, datatype: str = "FP32") -> bytes:
    return orjson.dumps({"inputs": [{"name": "data", "datatype": datatype,
                                     "shape": list(x.shape), "data": x.ravel().tolist()}]})


def _answer(body: bytes) -> np.ndarray:
    out = orjson.loads(body)["outputs"][0]
    return np.asarray(out["data"], "float32").reshape(out["shape"])


def _rows(n: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((n, 784)).astype("float32")


def a_json_request_is_checked_once():
    fast, _ = _app("static")
    x = _rows(1, 1)
    CHECKED.clear()
    status, body = asyncio.run(_post(fast, _json(x), [(b"content-type", b"application/json")]))
    assert status == 200, body
    assert CHECKED == ["data"], CHECKED
    np.testing.assert_allclose(_answer(body), _reference(x), rtol=1e-5, atol=1e-6)


def a_binary_request_is_checked_once():
    fast, _ = _app("static")
    x = _rows(1, 2)
    head = orjson.dumps({"inputs": [{"name": "data", "datatype": "FP32", "shape": [1, 784],
                                     "parameters": {"binary_data_size": x.nbytes}}]})
    CHECKED.clear()
    status, body = asyncio.run(_post(fast, head + x.tobytes(),
                                     [(_HEADER, str(len(head)).encode())]))
    assert status == 200, body
    assert CHECKED == ["data"], CHECKED
    np.testing.assert_allclose(_answer(body), _reference(x), rtol=1e-5, atol=1e-6)


def a_request_through_kserves_data_plane_is_checked_once():
    """gRPC and CloudEvents hand the model a plain InferRequest: predict checks it."""
    from kserve.protocol.infer_type import InferInput, InferRequest
    _, dp = _app("static")
    x = _rows(1, 3)
    tensor = InferInput(name="data", shape=[1, 784], datatype="FP32")
    tensor.set_data_from_numpy(x, binary_data=True)
    CHECKED.clear()
    response, _ = asyncio.run(dp.infer("mlp", InferRequest("mlp", [tensor])))
    assert CHECKED == ["data"], CHECKED
    np.testing.assert_allclose(response.outputs[0].as_numpy(), _reference(x), rtol=1e-5,
                               atol=1e-6)


def a_refused_request_is_checked_once_and_named_in_v2_terms():
    fast, _ = _app("static")
    CHECKED.clear()
    status, body = asyncio.run(_post(fast, _json(np.zeros((1, 784), "int64"), "INT64"), []))
    assert status == 400 and b"datatype INT64 given, FP32 expected" in body, body
    assert CHECKED == ["data"], CHECKED
    CHECKED.clear()
    status, body = asyncio.run(_post(fast, _json(np.zeros((2, 784), "float32")), []))
    assert status == 400 and b"shape [2, 784] given, [1, 784] expected" in body, body
    assert CHECKED == ["data"], CHECKED


def batched_requests_are_checked_once_each():
    """Concurrent requests to a dynamic-batch artifact: joined by the batcher, padded to
    a bucket by the session, each request's feeds checked once all the same."""
    fast, _ = _app("dynamic", max_batch_size=8)
    xs = [_rows(n, 10 + i) for i, n in enumerate((1, 2, 1, 3, 1))]

    async def all_at_once():
        return await asyncio.gather(*(_post(fast, _json(x), []) for x in xs))
    CHECKED.clear()
    answers = asyncio.run(all_at_once())
    assert CHECKED == ["data"] * len(xs), CHECKED
    for x, (status, body) in zip(xs, answers):
        assert status == 200, body
        np.testing.assert_allclose(_answer(body), _reference(x), rtol=1e-5, atol=1e-6)
    CHECKED.clear()
    status, body = asyncio.run(_post(fast, _json(_rows(9, 5)), []))
    assert status == 400 and b"batch 9 (dimension 0) is outside" in body, body
    assert CHECKED == ["data"], CHECKED


CHECKS = {
    "json": (a_json_request_is_checked_once, ()),
    "binary": (a_binary_request_is_checked_once, ()),
    "data-plane": (a_request_through_kserves_data_plane_is_checked_once, ()),
    "refused": (a_refused_request_is_checked_once_and_named_in_v2_terms, ()),
    "batched": (batched_requests_are_checked_once_each, ()),
}


if __name__ == "__main__":
    run_checks(CHECKS)
