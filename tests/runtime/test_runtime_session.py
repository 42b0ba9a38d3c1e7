"""mxc.runtime.Session: metadata, feeds, DLPack, outputs, threads, profiling, host nodes."""

from __future__ import annotations

import threading

import numpy as np
import pytest

pytest.importorskip("tvm")

import mxc.runtime as rt
from mxc.errors import ArtifactError, ExecutionError
from runtime_helpers import (compiled_custom, compiled_mlp, mlp_input, mlp_reference,
                             register_scale_op, run_python)


@pytest.fixture(scope="module")
def mlp(tmp_path_factory):
    return compiled_mlp(tmp_path_factory)


@pytest.fixture(scope="module")
def session(mlp):
    return rt.load(mlp[1])


def test_metadata(session):
    assert session.inputs == [rt.TensorInfo("data", (4, 784), "float32")]
    assert session.get_inputs() == session.inputs          # ONNX Runtime spelling
    assert session.outputs == [rt.TensorInfo("softmax_output", (4, 10), "float32")]
    assert session.regions == ["tvm_subgraph0"] and session.host_nodes == []
    assert session.device == "cpu" and "llvm" in session.target
    assert "data: float32[4, 784]" in repr(session)


def test_outputs_match_the_reference_backend(session):
    x = mlp_input()
    got = session.run({"data": x})
    assert isinstance(got, list) and len(got) == 1
    np.testing.assert_allclose(got[0], mlp_reference(x), rtol=1e-5, atol=1e-6)


def test_labels_inference_ignores_are_accepted_but_not_required(session):
    x = mlp_input()
    a = session.run({"data": x})[0]
    b = session.run({"data": x, "softmax_label": np.zeros(4, np.float32)})[0]
    np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("feeds, message", [
    ({}, r"missing input\(s\) 'data'"),
    ({"data": np.zeros((4, 784)), }, "expected dtype float32, got float64"),
    ({"data": np.zeros((2, 784), np.float32)}, r"expected shape \(4, 784\), got \(2, 784\)"),
    ({"data": np.zeros((4, 784), np.float32), "dta": 1}, r"unknown input\(s\) 'dta'"),
])
def test_bad_feeds_are_clear_errors(session, feeds, message):
    with pytest.raises(ExecutionError, match=message):
        session.run(feeds)


def test_feeds_must_be_a_dict(session):
    with pytest.raises(ExecutionError, match="dict of input name"):
        session.run([mlp_input()])


def test_array_likes_and_dlpack_tensors(session):
    import tvm_ffi
    x = mlp_input()
    want = session.run({"data": x})[0]
    np.testing.assert_array_equal(session.run({"data": x.tolist()})[0], want)
    np.testing.assert_array_equal(session.run({"data": tvm_ffi.from_dlpack(x)})[0], want)

    class OnlyDLPack:  # any producer of the protocol (torch, cupy, jax ...)
        def __init__(self, a):
            self.a = a

        def __dlpack__(self, **kw):
            return self.a.__dlpack__(**kw)

        def __dlpack_device__(self):
            return self.a.__dlpack_device__()

    np.testing.assert_array_equal(session.run({"data": OnlyDLPack(x)})[0], want)


def test_aligned_misaligned_and_strided_inputs_agree(session):
    x = mlp_input()
    want = session.run({"data": x})[0]
    raw = np.empty(x.size + 64, np.float32)
    base = (-raw.ctypes.data % 64) // 4
    for off in (base, base + 1, base + 4):             # 64-byte aligned, 4 and 16 bytes off
        view = raw[off:off + x.size].reshape(x.shape)
        view[...] = x
        np.testing.assert_array_equal(session.run({"data": view})[0], want)
    strided = np.asfortranarray(x)
    np.testing.assert_array_equal(session.run({"data": strided})[0], want)


def test_outputs_are_fresh_writable_arrays(session):
    x = mlp_input()
    a = session.run({"data": x})[0]
    keep = a.copy()
    a[...] = -1.0                                      # the caller owns it
    b = session.run({"data": x})[0]
    np.testing.assert_array_equal(b, keep)
    assert a.flags.writeable and not np.shares_memory(a, b)


def test_identity_outputs_do_not_alias_inputs(tmp_path):
    import mxc
    from mxc import sym as S
    x = S.var("x")
    model = mxc.compile(S.Group([S.reshape(x, shape=(6,)), S.exp(x)]), None, {"x": (2, 3)})
    path = model.save(tmp_path / "views.mxc")
    sess = rt.load(path)
    v = np.arange(6, dtype=np.float32).reshape(2, 3)
    flat, ex = sess.run({"x": v})
    assert not np.shares_memory(flat, v)
    np.testing.assert_array_equal(flat, v.ravel())
    np.testing.assert_allclose(ex, np.exp(v), rtol=1e-6)


def test_run_is_thread_safe(session):
    rng = np.random.RandomState(0)
    inputs = [rng.rand(4, 784).astype(np.float32) for _ in range(8)]
    want = [session.run({"data": x})[0] for x in inputs]
    errors, barrier = [], threading.Barrier(8)

    def worker(k):
        try:
            barrier.wait()
            for i in range(25):
                j = (k + i) % len(inputs)
                got = session.run({"data": inputs[j]})[0]
                np.testing.assert_array_equal(got, want[j])
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[0]


def test_profile_reports_every_step(session):
    outs, prof = session.run({"data": mlp_input()}, profile=True)
    assert len(outs) == 1 and isinstance(prof, rt.Profile)
    assert [s.name for s in prof.steps] == ["tvm_subgraph0"]
    assert prof.steps[0].kind == "region" and prof.steps[0].what == "region0"
    assert prof.total >= prof.steps[0].seconds > 0 and prof.overhead >= 0
    text = str(prof)
    assert "tvm_subgraph0" in text and "total" in text
    assert prof.as_dict()["steps"][0]["name"] == "tvm_subgraph0"


def test_host_node_between_regions(tmp_path_factory):
    from mxc.backends.reference import run_graph
    sym, params, model, path = compiled_custom(tmp_path_factory)
    sess = rt.load(path)
    assert sess.host_nodes == ["scale"] and len(sess.regions) == 2
    x = np.random.RandomState(1).randn(2, 5).astype(np.float32)
    want = run_graph(sym.graph, {"data": x, **params})[0]
    outs, prof = sess.run({"data": x}, profile=True)
    np.testing.assert_allclose(outs[0], want, rtol=1e-5, atol=1e-6)
    assert [(s.kind, s.what) for s in prof.steps] == [
        ("region", "region0"), ("host", "rt_test_scale"), ("region", "region1")]


def test_host_op_must_be_registered_in_the_loading_process(tmp_path_factory):
    from runtime_helpers import SCALE_OP_SOURCE
    path = compiled_custom(tmp_path_factory)[3]
    code = f"import mxc.runtime as rt\nrt.load({str(path)!r})\n"
    r = run_python(code)
    assert r.returncode != 0 and "ArtifactError" in r.stderr
    assert "needs operator 'rt_test_scale', which is not registered" in r.stderr
    ops = tmp_path_factory.mktemp("ops")
    (ops / "rt_ops.py").write_text(SCALE_OP_SOURCE)
    code = (f"import sys; sys.path.insert(0, {str(ops)!r})\nimport numpy as np, rt_ops\n"
            f"import mxc.runtime as rt\ns = rt.load({str(path)!r})\n"
            f"print(s.run({{'data': np.ones((2, 5), np.float32)}})[0].shape)\n")
    r = run_python(code)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "(2, 4)"


def test_host_nodes_use_stored_params_without_parsing(tmp_path, monkeypatch):
    """A built-in op on the host: its parsed params come from the artifact."""
    import mxc
    from mxc import sym as S
    from mxc.backends.reference import run_graph
    from mxc.compiler.ops.registry import get_op
    data = S.var("data")
    y = S.exp(S._contrib_box_nms(S.relu(data), overlap_thresh=0.5, name="nms"), name="e")
    model = mxc.compile(y, None, {"data": (1, 6, 6)})
    assert list(model.host_nodes) == ["nms"]
    step = next(s for s in model.runtime_graph["steps"] if s["kind"] == "host")
    assert step["params"]["overlap_thresh"] == 0.5
    path = model.save(tmp_path / "nms.mxc")

    def no_parsing(*args, **kwargs):
        raise AssertionError("attributes were parsed at load/run time")
    monkeypatch.setattr(get_op("_contrib_box_nms"), "parse_attrs", no_parsing)
    sess = rt.load(path)
    x = np.random.RandomState(0).rand(1, 6, 6).astype(np.float32)
    np.testing.assert_allclose(sess.run({"data": x})[0], run_graph(y.graph, {"data": x})[0],
                               rtol=1e-6)


def test_device_copy_helpers_round_trip():
    """The copies a CUDA session uses (host <-> device tensors), exercised on CPU tensors."""
    from mxc.runtime import _tvm
    dev = _tvm.device("cpu")
    for dtype in ("float32", "float16", "int64", "bool"):
        a = (np.arange(12) % 3).astype(dtype).reshape(3, 4)
        t = _tvm.empty(a.shape, dtype, dev)
        _tvm.copy_from_numpy(t, a)
        b = _tvm.copy_to_host(t)
        assert b.dtype == a.dtype and b.shape == a.shape
        np.testing.assert_array_equal(a, b)
    _tvm.sync(dev)


def test_has_cuda_never_raises():
    assert rt.has_cuda() in (True, False)


def test_session_without_regions(tmp_path):
    """A graph of host nodes only has no library at all."""
    import mxc
    from mxc import sym as S
    register_scale_op()
    y = S.rt_test_scale(S.var("x"), k=2.0, name="s")
    model = mxc.compile(y, None, {"x": (3,)})
    assert model.executable is None and not model.regions
    sess = rt.load(model.save(tmp_path / "host.mxc"))
    np.testing.assert_array_equal(sess.run({"x": np.ones(3, np.float32)})[0], np.full(3, 2.0))


def test_loading_a_missing_file_is_an_artifact_error(tmp_path):
    with pytest.raises(ArtifactError, match="cannot open artifact"):
        rt.load(tmp_path / "nope.mxc")


def test_read_only_inputs_run_as_writable_ones(session):
    """numpy exports no read-only array through DLPack (BufferError); a read-only feed
    (np.frombuffer of a request body, a memory map) runs staged, with the same outputs."""
    x = mlp_input()
    frozen = np.frombuffer(x.tobytes(), dtype=x.dtype).reshape(x.shape)
    assert not frozen.flags.writeable
    want = session.run({"data": x})
    got = session.run({"data": frozen})
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)


def test_staging_works_where_numpy_imports_dlpack_read_only(mlp, monkeypatch):
    """numpy < 2 (e.g. 1.26, which Triton's Python backend needs) returns read-only
    arrays from ``np.from_dlpack``; staging a feed into such a view failed with
    'assignment destination is read-only'.  Emulated here on any numpy."""
    real = np.from_dlpack

    def read_only_from_dlpack(x, *args, **kwargs):
        view = real(x, *args, **kwargs)
        view.flags.writeable = False
        return view
    monkeypatch.setattr(np, "from_dlpack", read_only_from_dlpack)
    sess = rt.load(mlp[1])  # fresh: no staging buffer made before the patch
    x = mlp_input()
    frozen = np.frombuffer(x.tobytes(), dtype=x.dtype).reshape(x.shape)  # staged, not zero-copy
    want = rt.load(mlp[1]).run({"data": x.copy()})
    for _ in range(3):  # the staging buffer is reused on later calls
        for g, w in zip(sess.run({"data": frozen}), want):
            np.testing.assert_array_equal(g, w)
