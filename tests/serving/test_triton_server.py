"""A real Triton Inference Server loads the repository ``mxc export triton`` writes and
answers like ``Session.run``, repeatedly and concurrently, over HTTP and gRPC.

Runs where ``tritonserver`` is on PATH or the ``nvidia-pytriton`` wheel is installed
(``pip install '.[triton]'`` in a separate virtualenv: the wheel pins numpy<2), and
skips with that reason elsewhere.  Loopback only; every wait is bounded.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

import mxc.runtime as rt
from mxc.serving import triton_backend
from mxc.serving.triton import export_triton
from serve_helpers import REPO, compiled_mlp
from triton_helpers import START_TIMEOUT, Triton, find_tritonserver

httpclient = pytest.importorskip("tritonclient.http", reason="tritonclient comes with the [serve] extra")
grpcclient = pytest.importorskip("tritonclient.grpc", reason="tritonclient comes with the [serve] extra")

OUT = "softmax_output"


@pytest.fixture(scope="module")
def install(tmp_path_factory):
    found = find_tritonserver(tmp_path_factory.mktemp("triton"))
    if isinstance(found, str):
        pytest.skip(found)
    return found


def _stub_serves_this_numpy(install) -> bool:
    return int(np.__version__.split(".")[0]) < 2 or (
        install.stub is not None and triton_backend.stub_reads_numpy2(str(install.stub)) is not False)


def _dynamic_mlp(tmp_path_factory):
    import mxc
    sym, args, aux = mxc.load_checkpoint(str(REPO / "examples/mlp/mlp"), 0)
    path = tmp_path_factory.mktemp("dyn") / "mlp_dyn.mxc"
    mxc.compile(sym, (args, aux), {"data": ((1, 8), 784)}).save(path)
    return path


@pytest.fixture(scope="module")
def repository(tmp_path_factory):
    """The static MLP (batch 1) and the MLP with batch 1..8, exported for Triton; the stub
    imports mxc from this checkout (``--python-path``)."""
    out = tmp_path_factory.mktemp("model_repository") / "models"
    static, dynamic = compiled_mlp(tmp_path_factory), _dynamic_mlp(tmp_path_factory)
    export_triton(static, out, name="mlp", python_path=str(REPO))
    # a long queue delay makes Triton group concurrent requests for certain
    export_triton(dynamic, out, name="mlp_dyn", python_path=str(REPO), max_queue_delay_us=100_000)
    return out, rt.load(static), rt.load(dynamic)


@pytest.fixture(scope="module")
def server(install, repository):
    if not _stub_serves_this_numpy(install):
        pytest.skip(f"numpy {np.__version__}: this Triton's stub reads numpy 1 only "
                    f"(test_numpy2_is_refused_by_the_real_stub covers it)")
    s = Triton(install, repository[0])
    try:
        client = httpclient.InferenceServerClient(f"127.0.0.1:{s.http_port}")
        s.wait(lambda: client.is_model_ready("mlp") and client.is_model_ready("mlp_dyn"),
               "both models ready")
        yield s
    finally:
        s.stop()


def _x(seed: int, batch: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((batch, 784)).astype("float32")


def _infer(s, proto: str, model: str, x: np.ndarray, binary: bool = True, client=None):
    if proto == "http":
        client = client or httpclient.InferenceServerClient(f"127.0.0.1:{s.http_port}")
        inp = httpclient.InferInput("data", list(x.shape), "FP32")
        inp.set_data_from_numpy(x, binary_data=binary)
        out = httpclient.InferRequestedOutput(OUT, binary_data=binary)
        return client.infer(model, [inp], outputs=[out]).as_numpy(OUT)
    client = client or grpcclient.InferenceServerClient(f"127.0.0.1:{s.grpc_port}")
    inp = grpcclient.InferInput("data", list(x.shape), "FP32")
    inp.set_data_from_numpy(x)
    return client.infer(model, [inp]).as_numpy(OUT)


@pytest.mark.parametrize("proto,binary", [("http", False), ("http", True), ("grpc", True)])
def test_static_model_answers_as_session_run_again_and_again(server, repository, proto, binary):
    """The last session's server answered once, then sent empty tensors; 20 in a row here."""
    sess = repository[1]
    for i in range(20):
        x = _x(i, 1)
        np.testing.assert_array_equal(_infer(server, proto, "mlp", x, binary), sess.run({"data": x})[0])


@pytest.mark.parametrize("proto", ["http", "grpc"])
def test_dynamic_model_answers_each_batch_size(server, repository, proto):
    sess = repository[2]
    for i, batch in enumerate([1, 3, 8, 2, 8, 1]):
        x = _x(100 + i, batch)
        np.testing.assert_allclose(_infer(server, proto, "mlp_dyn", x), sess.run({"data": x})[0],
                                   rtol=1e-5, atol=1e-6)


def test_concurrent_requests_are_batched_and_split_back(server, repository):
    """32 concurrent batch-1 requests (HTTP and gRPC mixed): each gets its own answer, and
    Triton's statistics show them run as fewer executions of model.py."""
    sess = repository[2]
    stats = httpclient.InferenceServerClient(f"127.0.0.1:{server.http_port}")

    def counts():
        s = stats.get_inference_statistics("mlp_dyn")["model_stats"][0]
        return int(s["inference_count"]), int(s["execution_count"])
    before = counts()
    local = threading.local()  # tritonclient's HTTP client is not shared across threads

    def one(i):
        if i % 2 == 0:
            local.http = getattr(local, "http", None) or httpclient.InferenceServerClient(
                f"127.0.0.1:{server.http_port}")
            return _infer(server, "http", "mlp_dyn", _x(1000 + i, 1), client=local.http)
        return _infer(server, "grpc", "mlp_dyn", _x(1000 + i, 1))
    with ThreadPoolExecutor(32) as pool:
        answers = list(pool.map(one, range(32)))
    for i, answer in enumerate(answers):
        np.testing.assert_allclose(answer, sess.run({"data": _x(1000 + i, 1)})[0], rtol=1e-5, atol=1e-6)
    after = counts()
    assert after[0] - before[0] == 32
    assert after[1] - before[1] < 32, f"32 requests ran as {after[1] - before[1]} executions"
    x = _x(7, 1)  # the stub still answers afterwards
    np.testing.assert_array_equal(_infer(server, "grpc", "mlp", x), repository[1].run({"data": x})[0])


def test_numpy2_is_refused_by_the_real_stub(install, repository):
    """Where the stub predates numpy 2 and this environment has it, the model does not load
    and Triton's log says why, instead of serving garbled tensors."""
    if _stub_serves_this_numpy(install):
        pytest.skip(f"numpy {np.__version__} is what this Triton's stub reads")
    import subprocess
    s = Triton(install, repository[0])
    try:
        try:
            s.proc.wait(START_TIMEOUT)  # models that fail to load end tritonserver (exit-on-error)
        except subprocess.TimeoutExpired:
            pytest.fail(f"tritonserver still running after {START_TIMEOUT}s: {s.output()}")
        log = s.output(tail=None)
        assert "failed to load 'mlp'" in log and "DependencyError" in log and "install numpy<2" in log
    finally:
        s.stop()


def test_the_wheel_stubs_are_recognised_as_numpy1_only(install):
    """nvidia-pytriton 0.7's stubs (Triton 2.51) name only numpy.core: the check refuses numpy 2."""
    if install.stub is None or install.backends is None:
        pytest.skip("not the nvidia-pytriton wheel")
    assert triton_backend.stub_reads_numpy2(str(install.stub)) is False
