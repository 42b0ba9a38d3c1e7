"""``mxc serve`` end to end: a server subprocess on loopback, queried by tritonclient.

``tritonclient`` (NVIDIA's client, a third party to both mxc and KServe) speaks
the Open Inference Protocol over HTTP and gRPC; its answers must equal
``Session.run`` on the same artifact bit for bit.  Bad requests must each get
their 4xx with a message, and the server must answer the next good request.
Skipped, with the reason, where the ``[serve]`` extra is not installed.
"""

from __future__ import annotations

import importlib.util
import json
import shutil

import numpy as np
import pytest

# kserve is only looked up here, never imported: its gRPC protos and tritonclient's
# register the same names in protobuf's one descriptor pool (the server runs apart)
if importlib.util.find_spec("kserve") is None:
    pytest.skip("mxc serve needs the [serve] extra (pip install 'mxc[serve]')",
                allow_module_level=True)
tritonclient_http = pytest.importorskip("tritonclient.http", reason="the [serve] extra's tritonclient")
tritonclient_grpc = pytest.importorskip("tritonclient.grpc", reason="the [serve] extra's tritonclient")

import mxc.runtime as rt  # noqa: E402
from serve_helpers import REPO, Server, compiled_mlp, http, infer_json  # noqa: E402

X = np.random.default_rng(7).standard_normal((1, 784)).astype("float32")


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    """A model repository with the MLP as mlp/1/model.mxc."""
    root = tmp_path_factory.mktemp("repo")
    (root / "mlp" / "1").mkdir(parents=True)
    shutil.copy(compiled_mlp(tmp_path_factory), root / "mlp" / "1" / "model.mxc")
    return root


@pytest.fixture(scope="module")
def server(repo):
    s = Server(repo, "--poll-seconds", "0.3", "--max-request-bytes", "200000").wait_ready()
    yield s
    assert s.stop() == 0, s.output()


def _reference(repo):
    return rt.load(repo / "mlp" / "1" / "model.mxc").run({"data": X})[0]


def test_tritonclient_http_metadata_and_infer_equal_session_run(server, repo):
    client = tritonclient_http.InferenceServerClient(f"127.0.0.1:{server.port}")
    assert client.is_server_live() and client.is_server_ready() and client.is_model_ready("mlp")
    meta = client.get_model_metadata("mlp")
    assert meta["inputs"] == [{"name": "data", "datatype": "FP32", "shape": [1, 784]}]
    assert meta["outputs"] == [{"name": "softmax_output", "datatype": "FP32", "shape": [1, 10]}]
    for binary in (True, False):
        inp = tritonclient_http.InferInput("data", [1, 784], "FP32")
        inp.set_data_from_numpy(X, binary_data=binary)
        out = tritonclient_http.InferRequestedOutput("softmax_output", binary_data=binary)
        got = client.infer("mlp", [inp], outputs=[out]).as_numpy("softmax_output")
        np.testing.assert_array_equal(got, _reference(repo))
    versioned = client.infer("mlp", [inp], model_version="1").as_numpy("softmax_output")
    np.testing.assert_array_equal(versioned, _reference(repo))


def test_tritonclient_grpc_metadata_and_infer_equal_session_run(server, repo):
    client = tritonclient_grpc.InferenceServerClient(f"127.0.0.1:{server.grpc_port}")
    assert client.is_server_ready() and client.is_model_ready("mlp")
    meta = client.get_model_metadata("mlp", as_json=True)
    assert [(t["name"], t["datatype"], t["shape"]) for t in meta["inputs"]] == \
        [("data", "FP32", ["1", "784"])]
    inp = tritonclient_grpc.InferInput("data", [1, 784], "FP32")
    inp.set_data_from_numpy(X)
    got = client.infer("mlp", [inp], model_version="1").as_numpy("softmax_output")
    np.testing.assert_array_equal(got, _reference(repo))
    bad = tritonclient_grpc.InferInput("nope", [1, 784], "FP32")
    bad.set_data_from_numpy(X)
    with pytest.raises(tritonclient_grpc.InferenceServerException, match="INVALID_ARGUMENT.*nope"):
        client.infer("mlp", [bad])
    np.testing.assert_array_equal(client.infer("mlp", [inp]).as_numpy("softmax_output"),
                                  _reference(repo))


JSON = {"Content-Type": "application/json"}
GOOD = {"name": "data", "datatype": "FP32", "shape": [1, 784], "data": [0.5] * 784}


def _body(**change):
    return json.dumps({"inputs": [dict(GOOD, **change)]}).encode()


@pytest.mark.parametrize("path,body,headers,status,message", [
    ("/v2/models/nope/infer", _body(), JSON, 404, "nope"),
    ("/v2/models/mlp/versions/9/infer", _body(), JSON, 404, "mlp@9"),
    ("/v2/models/mlp/infer", _body(name="dat"), JSON, 400, "no input 'dat'"),
    ("/v2/models/mlp/infer", _body(shape=[2, 392]), JSON, 400, "shape [2, 392] given"),
    ("/v2/models/mlp/infer", _body(datatype="INT64"), JSON, 400, "INT64 given, FP32 expected"),
    ("/v2/models/mlp/infer", _body(data=[1.0]), JSON, 400, "1 values for shape [1, 784]"),
    ("/v2/models/mlp/infer", b'{"inputs": [{"name": "da', JSON, 400, "not JSON"),
    ("/v2/models/mlp/infer", b"\x00garbage", {"Inference-Header-Content-Length": "999"}, 400, ""),
    ("/v2/models/mlp/infer", b"[" + b"1," * 150000 + b"1]", JSON, 413, "limit of"),
])
def test_bad_request_gets_its_4xx_and_the_next_good_request_is_answered(
        server, repo, path, body, headers, status, message):
    code, raw = http("POST", server.base + path, body, headers)
    assert code == status, raw
    assert message.encode() in raw and b"Traceback" not in raw
    code, answer = infer_json(server.base, "mlp", X)
    assert code == 200, answer
    np.testing.assert_array_equal(np.array(answer["outputs"][0]["data"], "float32").reshape(1, 10),
                                  _reference(repo))


def test_metrics_count_requests_by_outcome(server):
    # metrics are labelled by the version that answered ("mlp" is served by mlp@1)
    labels = {"model": "mlp@1", "outcome": "bad_request"}
    before = server.metric("mxc_requests_total", **labels)
    assert infer_json(server.base, "mlp", X, datatype="INT64")[0] == 400
    assert server.metric("mxc_requests_total", **labels) == before + 1
    ok = server.metric("mxc_batch_size_count", model="mlp@1")
    assert infer_json(server.base, "mlp", X)[0] == 200
    assert server.metric("mxc_batch_size_count", model="mlp@1") == ok + 1


def _wait_for(predicate, what: str, server, timeout: float = 60):
    import time
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"{what} not seen in {timeout}s: {server.output()}"
        time.sleep(0.3)


def test_repository_reloads_added_replaced_and_removed_versions(server, repo, tmp_path_factory):
    v2 = repo / "mlp" / "2"
    v2.mkdir()
    shutil.copy(repo / "mlp" / "1" / "model.mxc", v2 / "model.mxc")
    meta = f"{server.base}/v2/models/mlp/versions/2"

    def input_shape():
        code, raw = http("GET", meta)
        return json.loads(raw)["inputs"][0]["shape"] if code == 200 else code
    _wait_for(lambda: input_shape() == [1, 784], "version 2 added", server)
    # a replacement that does not load is refused; the version loaded before keeps serving
    (v2 / "model.mxc").write_bytes(b"not an artifact")
    _wait_for(lambda: "not serving" in server.output(), "the refused replacement", server)
    assert input_shape() == [1, 784]
    batch2 = compiled_mlp(tmp_path_factory, batch=2)
    shutil.copy(batch2, v2 / "model.mxc.tmp")
    (v2 / "model.mxc.tmp").replace(v2 / "model.mxc")
    _wait_for(lambda: input_shape() == [2, 784], "version 2 replaced", server)
    shutil.rmtree(v2)
    _wait_for(lambda: input_shape() == 404, "version 2 removed", server)
    assert infer_json(server.base, "mlp", X)[0] == 200  # version 1 served throughout


def _dynamic_mlp(tmp_path_factory):
    import mxc
    sym, args, aux = mxc.load_checkpoint(str(REPO / "examples/mlp/mlp"), 0)
    model = mxc.compile(sym, (args, aux), {"data": ((1, 32), 784)})   # batch buckets
    path = tmp_path_factory.mktemp("dyn") / "mlp.mxc"
    model.save(path)
    return path


def test_32_concurrent_batch1_requests_run_as_fewer_batches_and_empty_ones_are_refused(tmp_path_factory):
    from concurrent.futures import ThreadPoolExecutor
    path = _dynamic_mlp(tmp_path_factory)
    xs = np.random.default_rng(11).standard_normal((32, 1, 784)).astype("float32")
    want = rt.load(path).run({"data": xs[:, 0]})[0]
    s = Server(path, "--max-batch-size", "32", "--max-latency-ms", "200",
               "--poll-seconds", "0").wait_ready()
    try:
        with ThreadPoolExecutor(36) as pool:
            # four empty batches among them: each refused alone (issue 35), none in a batch
            empty = [pool.submit(infer_json, s.base, "mlp", np.zeros((0, 784), "float32"))
                     for _ in range(4)]
            answers = list(pool.map(lambda x: infer_json(s.base, "mlp", x), xs))
        for code, answer in (f.result() for f in empty):
            assert code == 400 and "shape[0]" in answer["error"], answer
        for i, (code, answer) in enumerate(answers):
            assert code == 200, answer
            np.testing.assert_allclose(np.array(answer["outputs"][0]["data"], "float32"),
                                       want[i], rtol=1e-5, atol=1e-6)
        runs = s.metric("mxc_batch_size_count", model="mlp")
        assert s.metric("mxc_batch_size_sum", model="mlp") == 32
        assert runs < 32, f"32 requests ran as {runs} batches"
    finally:
        assert s.stop() == 0
