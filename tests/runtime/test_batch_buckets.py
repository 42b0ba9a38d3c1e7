"""A dynamic-batch artifact (batch buckets in one artifact): every batch in the range
gives the static artifact's outputs of the same batch; outside it, a typed error."""

from __future__ import annotations

import pickle
import zipfile
from pathlib import Path

import numpy as np
import pytest

import mxc
import mxc.runtime as rt
from mxc.cli import main
from mxc.errors import USAGE_EXIT_CODE, ArtifactError, ExecutionError

from conftest import load_corpus_model  # noqa: E402 - tests/ is on sys.path

MLP = Path(__file__).resolve().parents[2] / "examples" / "mlp"
BATCHES = (1, 3, 8)


def _mlp():
    sym, args, aux = mxc.load_checkpoint(str(MLP / "mlp"), 0)
    return sym, (args, aux), "data", (784,)


def _lenet():
    _, _, sym, params = load_corpus_model("models", "lenet")
    return sym, params, "data", (1, 28, 28)


MODELS = {"mlp": _mlp, "lenet": _lenet}


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """{model: (dynamic artifact path, {batch: static compiled model}, input name, row shape)}"""
    out = {}
    for name, make in MODELS.items():
        sym, params, data, row = make()
        path = tmp_path_factory.mktemp(name) / f"{name}.mxc"
        mxc.compile(sym, params, {data: ((1, 8), *row)}).save(path)
        static = {b: mxc.compile(sym, params, {data: (b, *row)}) for b in BATCHES}
        out[name] = (path, static, data, row)
    return out


@pytest.mark.parametrize("name", list(MODELS))
@pytest.mark.parametrize("batch", BATCHES)
def test_each_batch_equals_the_static_artifact_of_that_batch(built, name, batch):
    path, static, data, row = built[name]
    x = np.random.default_rng(batch).standard_normal((batch, *row)).astype("float32")
    want = static[batch].run({data: x})
    got = rt.load(path).run({data: x})
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.shape == w.shape
        if batch in (1, 8):   # a bucket of its own: the same compiled code, bit for bit
            np.testing.assert_array_equal(g, w)
        else:                 # padded into the bucket of 4: the same rows, another kernel
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)


def test_a_batch_outside_the_range_is_refused_naming_it(built):
    path, _, data, row = built["mlp"]
    sess = rt.load(path)
    for batch in (9, 0):
        with pytest.raises(ExecutionError, match=rf"batch {batch} \(dimension 0\) is outside "
                                                 r"the artifact's batch range 1\.\.8"):
            sess.run({data: np.zeros((batch, *row), "float32")})


def test_inputs_show_the_symbolic_batch_as_onnx_runtime_does(built):
    path, _, data, _ = built["mlp"]
    sess = rt.load(path)
    (info,) = sess.get_inputs()
    assert info.shape == ("batch", 784) and info.batch_range == (1, 8) and info.batch_axis == 0
    assert sess.get_outputs()[0].shape == ("batch", 10)
    assert sess.batch_range == (1, 8) and sess.buckets == [1, 2, 4, 8]
    from mxc.serving.batcher import batch_range
    assert batch_range(sess).lo == 1 and batch_range(sess).hi == 8


def test_the_artifact_is_format_2_with_every_bucket_listed_and_params_once(built):
    path, _, data, _ = built["lenet"]
    man = rt.read_manifest(path)
    assert man["format_version"] == 2 and rt.FORMAT_VERSION == 1
    dyn = man["dynamic_batch"]
    assert dyn["range"] == [1, 8] and dyn["buckets"] == [1, 2, 4, 8]
    assert dyn["axes"] == {data: 0} and list(dyn["output_axes"].values()) == [0]
    with zipfile.ZipFile(path) as zf:
        names = set(zf.namelist())
    assert names - {"manifest.json"} == set(man["members"])   # checksummed (and signed)
    for b in (1, 2, 4):
        assert f"buckets/{b}/lib.so" in names and f"buckets/{b}/graph.json" in names
    assert not any(n.startswith("buckets/") and n.endswith("params.npz") for n in names)


def test_an_older_runtime_refuses_the_new_format_cleanly(built, monkeypatch):
    from mxc.runtime import artifact
    monkeypatch.setattr(artifact, "BUCKETS_FORMAT_VERSION", 1)   # a runtime that reads 1 only
    with pytest.raises(ArtifactError, match=r"format version 2.*newer mxc"):
        rt.load(built["mlp"][0])


def test_signing_covers_every_bucket(built, tmp_path):
    from mxc.runtime.signing import generate_key
    priv, pub = generate_key(tmp_path / "key")
    sym, params, data, row = _mlp()
    path = tmp_path / "signed.mxc"
    mxc.compile(sym, params, {data: ((1, 4), *row)}, buckets=[2, 4], sign=priv).save(path)
    x = np.ones((1, *row), "float32")
    assert rt.load(path, verify_key=pub).run({data: x})[0].shape == (1, 10)
    forged = tmp_path / "forged.mxc"   # another bucket library under the same signed manifest
    with zipfile.ZipFile(path) as src, zipfile.ZipFile(forged, "w") as dst:
        for info in src.infolist():
            data_ = src.read(info)
            if info.filename == "buckets/2/lib.so":
                data_ = data_[:-1] + bytes([data_[-1] ^ 1])
            dst.writestr(info, data_)
    with pytest.raises(ArtifactError, match="checksum mismatch for buckets/2/lib.so"):
        rt.load(forged, verify_key=pub)


def test_a_session_pickles_and_buckets_load_on_first_use(built):
    path, _, data, row = built["mlp"]
    sess = rt.load(path)
    assert sess._sessions == {}
    x = np.random.default_rng(5).standard_normal((2, *row)).astype("float32")
    want = sess.run({data: x})[0]
    assert sorted(sess._sessions) == [2]
    again = pickle.loads(pickle.dumps(sess))
    np.testing.assert_array_equal(again.run({data: x})[0], want)
    assert again.run(None, {data: x})[0].shape == (2, 10)   # ONNX Runtime's form


def test_mxc_run_takes_any_batch_in_the_range(built, capsys):
    path = built["mlp"][0]
    assert main(["run", str(path), "--shape", "data=7,784", "--fill-mode", "random"]) == 0
    assert "shape (7, 10)" in capsys.readouterr().out
    assert main(["run", str(path), "--shape", "data=9,784", "--fill-mode", "random"]) \
        == USAGE_EXIT_CODE
    assert "takes data=1..8,784" in capsys.readouterr().err


def test_mxc_inspect_shows_the_range_and_buckets(built, capsys):
    assert main(["inspect", str(built["mlp"][0])]) == 0
    out = capsys.readouterr().out
    assert "dynamic batch: 1..8, compiled buckets 1, 2, 4, 8" in out
    assert "1..8x784" in out


def test_mxc_compile_takes_a_range_and_buckets(tmp_path, capsys):
    out = tmp_path / "m.mxc"
    assert main(["compile", str(MLP / "mlp-symbol.json"), "--params",
                 str(MLP / "mlp-0000.params"), "--input-shapes", "data:[1..6,784]",
                 "--batch-buckets", "2,6", "-q", "-o", str(out)]) == 0
    sess = rt.load(out)
    assert sess.buckets == [2, 6]
    assert sess.run({"data": np.ones((5, 784), "float32")})[0].shape == (5, 10)


def test_the_manifest_spells_the_range_so_the_triton_export_batches(built):
    from mxc.serving.triton import triton_config
    man = rt.read_manifest(built["mlp"][0])
    assert man["inputs"][0]["shape"] == [[1, 8], 784]
    assert man["outputs"][0]["shape"] == [[1, 8], 10]
    config = triton_config(man, "mlp", max_batch_size=32)
    assert "max_batch_size: 8" in config and "dynamic_batching" in config
    assert "dims: [ 784 ]" in config and "dims: [ 10 ]" in config


def test_the_serving_batcher_groups_requests_on_the_sessions_declared_range(built):
    import asyncio

    from mxc.serving.batcher import AdaptiveBatcher, batch_range
    path, static, data, row = built["mlp"]
    sess = rt.load(path)
    calls = []

    def run(feeds):
        calls.append(feeds[data].shape[0])
        return sess.run(feeds)
    batcher = AdaptiveBatcher(run, batch_range(sess), max_batch_size=32, max_latency_ms=1000)
    assert batcher.batching and batcher.cap == 8     # the range's top, not 32
    xs = np.random.default_rng(3).standard_normal((11, 1, *row)).astype("float32")

    async def submit_all():
        return await asyncio.gather(*(batcher.submit({data: x}) for x in xs))
    outs = asyncio.run(submit_all())
    # the first request finds the batcher idle and runs alone; the ten queued behind it
    # run as the range's top (8) and the rest
    assert calls == [1, 8, 2]
    for x, (out,) in zip(xs, outs):
        np.testing.assert_allclose(out, static[1].run({data: x})[0], rtol=1e-5, atol=1e-6)


def _custom_op_net(op_name: str, forward):
    from mxc import sym as S

    @mxc.register_custom_op(op_name)
    class Op(mxc.CustomOp):
        def parse_attrs(self, attrs):
            return 1, 1

        def infer_shape(self, attrs, in_shapes):
            return in_shapes, [in_shapes[0]]

        def forward(self, attrs, inputs, outputs):
            return [forward(inputs[0])]
    net = S.relu(S.FullyConnected(S.var("data"), num_hidden=8, name="fc1"))
    net = S.FullyConnected(getattr(S, op_name)(net, name="op"), num_hidden=3, name="fc2")
    rng = np.random.RandomState(0)
    weights = {"fc1_weight": rng.randn(8, 5).astype("f"), "fc1_bias": np.zeros(8, "f"),
               "fc2_weight": rng.randn(3, 8).astype("f"), "fc2_bias": np.zeros(3, "f")}
    return net, weights


def test_a_host_fallback_node_runs_in_a_bucket_when_its_rows_are_independent():
    net, weights = _custom_op_net("bucket_test_scale", lambda x: x * 0.5)
    dyn = mxc.compile(net, weights, {"data": ((1, 4), 5)})
    assert "op" in dyn.host_nodes
    x = np.random.default_rng(2).standard_normal((3, 5)).astype("float32")
    want = mxc.compile(net, weights, {"data": (3, 5)}).run({"data": x})[0]
    np.testing.assert_allclose(dyn.run({"data": x})[0], want, rtol=1e-5, atol=1e-6)


def test_a_host_fallback_node_that_mixes_rows_is_refused():
    from mxc.errors import BackendError
    net, weights = _custom_op_net("bucket_test_center", lambda x: x - x.mean(axis=0))
    with pytest.raises(BackendError, match=r"mixes rows of the batch"):
        mxc.compile(net, weights, {"data": ((1, 4), 5)})


@pytest.mark.parametrize("field, value", [("output_axes", {"nope": 0}), ("axes", {"data": 5}),
                                          ("buckets", [1, 2, 4]), ("range", [8, 1])])
def test_a_forged_dynamic_batch_section_is_refused_at_load(built, tmp_path, field, value):
    import json
    src = built["mlp"][0]
    forged = tmp_path / "forged.mxc"
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(forged, "w") as zout:
        for info in zin.infolist():
            data_ = zin.read(info)
            if info.filename == "manifest.json":
                man = json.loads(data_)
                man["dynamic_batch"][field] = value
                data_ = json.dumps(man).encode()
            zout.writestr(info, data_)
    with pytest.raises(ArtifactError, match=rf"dynamic_batch: {field}"):
        rt.load(forged)


def test_mxc_run_of_a_model_with_a_range_and_generated_inputs_is_a_usage_error(capsys):
    assert main(["run", str(MLP / "mlp-symbol.json"), "--params", str(MLP / "mlp-0000.params"),
                 "--shape", "data=1..4,784", "--fill-mode", "random"]) == USAGE_EXIT_CODE
    assert "needs one batch size for 'data', not a range" in capsys.readouterr().err


def test_submit_returns_a_future_of_run_for_every_batch_and_of_its_errors(built):
    path, static, data, row = built["mlp"]
    sess = rt.load(path)
    xs = {b: np.random.default_rng(10 + b).standard_normal((b, *row)).astype("float32")
          for b in (1, 3, 8)}
    futures = {b: sess.submit({data: x}) for b, x in xs.items()}   # in flight together
    for b, x in xs.items():
        for g, w in zip(futures[b].result(timeout=120), sess.run({data: x})):
            np.testing.assert_array_equal(g, w)
    bucket = sess.bucket_session(8)     # a plain Session's submit too
    np.testing.assert_array_equal(bucket.submit({data: xs[8]}).result(timeout=120)[0],
                                  static[8].run({data: xs[8]})[0])
    too_big = np.zeros((9, *row), "float32")
    with pytest.raises(ExecutionError, match="1..8"):
        sess.submit({data: too_big}).result(timeout=120)


def test_a_padded_batch_is_checked_once_against_the_range(built, monkeypatch):
    """Issue 36: the bucket runner checks the batch and hands the padded batch to its
    bucket without a second check (a spy counts the per-input checks)."""
    from mxc.runtime.feeds import FeedSignature
    path, static, data, row = built["mlp"]
    sess = rt.load(path)
    seen = []
    check_values = FeedSignature.check_values

    def spy(self, feeds):
        seen.extend(sorted(feeds))
        return check_values(self, feeds)
    monkeypatch.setattr(FeedSignature, "check_values", spy)
    x = np.random.default_rng(5).standard_normal((3, *row)).astype("float32")
    got = sess.run({data: x})[0]
    assert seen == [data]
    np.testing.assert_allclose(got, static[3].run({data: x})[0], rtol=1e-5, atol=1e-6)
