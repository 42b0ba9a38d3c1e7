"""``mxc export triton``: config.pbtxt checked against Triton's own protobuf schema,
and the Python-backend ``model.py`` run with a stand-in for Triton's utils module."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import types
from pathlib import Path

import numpy as np
import pytest

import mxc.runtime as rt
from mxc.errors import ArtifactError, OutputError
from mxc.serving import triton_backend
from mxc.serving.triton import export_triton, triton_config
from serve_helpers import REPO, compiled_mlp


def _parse(text: str):
    model_config_pb2 = pytest.importorskip(
        "tritonclient.grpc.model_config_pb2", reason="Triton's schema comes with the [serve] extra")
    from google.protobuf import text_format
    return text_format.Parse(text, model_config_pb2.ModelConfig())


def _manifest(lead, dtype="float32"):
    return {"inputs": [{"name": "data", "shape": [lead, 784], "dtype": dtype}],
            "outputs": [{"name": "prob", "shape": [lead, 10], "dtype": "float32"}]}


def test_static_artifact_config_has_full_shapes_and_no_batching(tmp_path, tmp_path_factory):
    model_dir = export_triton(compiled_mlp(tmp_path_factory), tmp_path, name="mlp")
    cfg = _parse((model_dir / "config.pbtxt").read_text())
    assert (cfg.name, cfg.backend, cfg.max_batch_size) == ("mlp", "python", 0)
    assert [(t.name, list(t.dims)) for t in cfg.input] == [("data", [1, 784])]
    assert [(t.name, list(t.dims)) for t in cfg.output] == [("softmax_output", [1, 10])]
    assert cfg.input[0].data_type == type(cfg.input[0]).DESCRIPTOR.fields_by_name[
        "data_type"].enum_type.values_by_name["TYPE_FP32"].number
    assert not cfg.HasField("dynamic_batching")


@pytest.mark.parametrize("lead,want_max", [(-1, 32), ("batch", 32), ([1, 16], 16), ("1..8", 8)])
def test_dynamic_batch_config_drops_the_batch_dim_and_batches(lead, want_max):
    cfg = _parse(triton_config(_manifest(lead), "m", max_batch_size=32, max_queue_delay_us=700))
    assert cfg.max_batch_size == want_max
    assert list(cfg.input[0].dims) == [784] and list(cfg.output[0].dims) == [10]
    assert cfg.dynamic_batching.max_queue_delay_microseconds == 700


@pytest.mark.parametrize("dtype,name", [("int64", "TYPE_INT64"), ("bfloat16", "TYPE_BF16"),
                                        ("uint8", "TYPE_UINT8"), ("int8", "TYPE_INT8")])
def test_dtypes_map_to_triton_types(dtype, name):
    cfg = _parse(triton_config(_manifest(4, dtype), "m"))
    assert type(cfg.input[0]).DESCRIPTOR.fields_by_name["data_type"].enum_type.values_by_number[
        cfg.input[0].data_type].name == name


def test_a_dtype_triton_cannot_name_is_refused():
    with pytest.raises(ArtifactError, match="complex64"):
        triton_config(_manifest(4, "complex64"), "m")


def test_existing_model_dir_needs_force(tmp_path, tmp_path_factory):
    export_triton(compiled_mlp(tmp_path_factory), tmp_path)
    with pytest.raises(OutputError, match="--force"):
        export_triton(compiled_mlp(tmp_path_factory), tmp_path)


def test_cli_writes_the_repository_layout(tmp_path, tmp_path_factory):
    art = compiled_mlp(tmp_path_factory)
    r = subprocess.run([sys.executable, "-m", "mxc", "export", "triton", str(art), "-o",
                        str(tmp_path)], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert r.returncode == 0, r.stderr
    model = tmp_path / art.stem
    assert (model / "1" / "model.mxc").read_bytes() == art.read_bytes()
    assert (model / "1" / "model.py").read_text() == Path(triton_backend.__file__).read_text()


class _Tensor:
    def __init__(self, name, array):
        self.name, self.array = name, array

    def as_numpy(self):
        view = self.array.view()  # Triton's inputs are read-only views of its shared memory
        view.setflags(write=False)
        return view


def _fake_utils():
    """Triton's ``triton_python_backend_utils``, as far as model.py uses it."""
    mod = types.ModuleType("triton_python_backend_utils")
    mod.Tensor = _Tensor
    mod.get_input_tensor_by_name = lambda request, name: request[name]
    mod.InferenceResponse = lambda output_tensors: {t.name: t.array for t in output_tensors}
    return mod


def _backend(model_dir, monkeypatch):
    monkeypatch.setitem(sys.modules, "triton_python_backend_utils", _fake_utils())
    spec = importlib.util.spec_from_file_location("exported_model", model_dir / "1" / "model.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    model = module.TritonPythonModel()
    model.initialize({"model_config": json.dumps({"max_batch_size": 0}),
                      "model_repository": str(model_dir), "model_version": "1"})
    return model


def test_exported_model_py_answers_each_request_as_session_run(tmp_path, tmp_path_factory, monkeypatch):
    art = compiled_mlp(tmp_path_factory)
    model = _backend(export_triton(art, tmp_path), monkeypatch)
    xs = np.random.default_rng(5).standard_normal((3, 1, 784)).astype("float32")
    answers = model.execute([{"data": _Tensor("data", x)} for x in xs])
    sess = rt.load(art)
    for x, a in zip(xs, answers):
        np.testing.assert_array_equal(a["softmax_output"], sess.run({"data": x})[0])


def test_exported_model_py_batches_requests_and_splits_outputs(tmp_path, tmp_path_factory, monkeypatch):
    model = _backend(export_triton(compiled_mlp(tmp_path_factory), tmp_path), monkeypatch)
    calls = []

    class Doubler:  # a dynamic-batch session stand-in
        def run(self, feeds):
            calls.append(len(feeds["data"]))
            return [feeds["data"] * 2]
    model.session, model.batching, model.outputs = Doubler(), True, ["out"]
    xs = [np.full((n, 784), n, "float32") for n in (1, 3, 2)]
    answers = model.execute([{"data": _Tensor("data", x)} for x in xs])
    assert calls == [6]
    for x, a in zip(xs, answers):
        np.testing.assert_array_equal(a["out"], x * 2)


def test_python_path_parameter_reaches_the_backend_sys_path(tmp_path, monkeypatch):
    extra = str(tmp_path / "site")
    cfg = _parse(triton_config(_manifest(4), "m", python_path=extra))
    assert cfg.parameters["MXC_PYTHONPATH"].string_value == extra
    monkeypatch.setattr(sys, "path", list(sys.path))
    triton_backend._extend_path({"parameters": {"MXC_PYTHONPATH": {"string_value": extra}}})
    assert sys.path[0] == extra


def _stub(tmp_path, core_name: bytes):
    """A file named as Triton's stub whose bytes hold the numpy module name its pybind11 imports."""
    exe = tmp_path / "triton_python_backend_stub"
    exe.write_bytes(b"\x7fELF....." + core_name + b"\x00more")
    return str(exe)


def test_numpy2_is_refused_in_a_stub_built_for_numpy1(tmp_path):
    """Triton 2.51's stub (pybind11 < 2.12) reads numpy 2 arrays with item size 0: every
    input stride 0, every output empty.  The model refuses to load instead."""
    from mxc.errors import DependencyError
    exe = _stub(tmp_path, b"numpy.core.multiarray")
    with pytest.raises(DependencyError, match=r"numpy 2\.1\.3 .*install numpy<2"):
        triton_backend.check_numpy("2.1.3", exe)
    triton_backend.check_numpy("1.26.4", exe)  # numpy 1 is what this stub reads


def test_numpy2_runs_in_a_stub_that_knows_numpy2_and_outside_triton(tmp_path):
    triton_backend.check_numpy("2.1.3", _stub(tmp_path, b"numpy._core"))  # pybind11 >= 2.12
    other = tmp_path / "python3"
    other.write_bytes(b"numpy.core.multiarray")
    triton_backend.check_numpy("2.1.3", str(other))  # not a stub: nothing to check
    triton_backend.check_numpy("2.1.3", str(tmp_path / "triton_python_backend_stub.missing"))
