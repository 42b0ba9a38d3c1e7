"""The TVM backend's API: lower_graph, support queries, build/run helpers, CUDA compilation."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

pytest.importorskip("tvm")

from mxc import sym as S
from mxc.backends.reference import run_graph
from mxc.backends.tvm import (
    build_module,
    function_input_names,
    host_target,
    is_supported,
    lower_graph,
    registered_converters,
    run_module,
    unsupported_nodes,
)
from mxc.compiler.infer import infer_shapes, infer_types
from mxc.compiler.ops.registry import registered_ops
from mxc.errors import BackendError

SHAPE = (2, 3, 8, 8)


def _small_cnn():
    """conv -> BatchNorm -> relu -> max pool -> FullyConnected -> softmax."""
    x = S.var("data")
    y = S.Convolution(x, kernel=(3, 3), num_filter=4, pad=(1, 1), name="conv")
    y = S.BatchNorm(y, fix_gamma=False, name="bn")
    y = S.Activation(y, act_type="relu", name="relu")
    y = S.Pooling(y, kernel=(2, 2), stride=(2, 2), pool_type="max", name="pool")
    y = S.FullyConnected(y, num_hidden=5, name="fc")
    return S.softmax(y, name="prob").graph


def _params(graph, seed=0):
    rng = np.random.RandomState(seed)
    shapes = infer_shapes(graph, {"data": SHAPE})
    params = {}
    for n in graph.input_nodes():
        if n.name == "data":
            continue
        shape = shapes[(n, 0)]
        if n.name.endswith("moving_var"):
            params[n.name] = rng.uniform(0.5, 2.0, shape).astype("float32")
        else:
            params[n.name] = rng.uniform(-0.5, 0.5, shape).astype("float32")
    return params


def test_bind_params_default_binds_weights_as_constants():
    graph = _small_cnn()
    params = _params(graph)
    mod = lower_graph(graph, shapes={"data": SHAPE}, params=params)
    assert function_input_names(mod) == ["data"]
    x = np.random.RandomState(1).uniform(-1, 1, SHAPE).astype("float32")
    got = run_module(build_module(mod), [x])
    want = run_graph(graph, {"data": x, **params})
    assert len(got) == 1
    np.testing.assert_allclose(got[0], want[0], rtol=1e-4, atol=1e-5)


def test_bind_params_false_keeps_weights_as_inputs():
    graph = _small_cnn()
    params = _params(graph)
    mod = lower_graph(graph, shapes={"data": SHAPE}, params=params, bind_params=False)
    names = function_input_names(mod)
    assert names == graph.list_inputs()          # MXNet's list_inputs order
    assert "conv_weight" in names and "bn_moving_var" in names
    x = np.random.RandomState(2).uniform(-1, 1, SHAPE).astype("float32")
    feeds = {"data": x, **params}
    exe = build_module(mod)
    got = run_module(exe, [feeds[n] for n in names])
    want = run_graph(graph, feeds)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-4, atol=1e-5)
    # new weights at run time change the result: they really are inputs
    feeds2 = {**feeds, "fc_bias": feeds["fc_bias"] + 1.0}
    got2 = run_module(exe, [feeds2[n] for n in names])
    np.testing.assert_allclose(got2[0], run_graph(graph, feeds2)[0], rtol=1e-4, atol=1e-5)


def test_outputs_are_always_a_tuple():
    x = S.var("x")
    graph = S.exp(x).graph
    mod = lower_graph(graph, shapes={"x": (3,)}, dtypes={"x": "float32"})
    out = run_module(build_module(mod), [np.zeros(3, "float32")])
    assert isinstance(out, list) and len(out) == 1
    np.testing.assert_allclose(out[0], np.ones(3))


def test_multi_output_graph_and_inferred_maps():
    x = S.var("x")
    parts = S.SliceChannel(x, num_outputs=2, axis=1)
    graph = S.Group([parts[0] * 2.0, parts[1]]).graph
    shapes = infer_shapes(graph, {"x": (2, 4)})
    dtypes = infer_types(graph, {"x": "float32"})
    mod = lower_graph(graph, shapes=shapes, dtypes=dtypes)
    v = np.arange(8, dtype="float32").reshape(2, 4)
    a, b = run_module(build_module(mod), [v])
    np.testing.assert_allclose(a, v[:, :2] * 2)
    np.testing.assert_allclose(b, v[:, 2:])


def test_unsupported_node_is_reported_and_refused():
    data = S.var("data")
    nms = S._contrib_box_nms(data, overlap_thresh=0.5, name="nms")
    graph = S.exp(nms, name="e").graph
    shapes = infer_shapes(graph, {"data": (1, 6, 6)})
    dtypes = infer_types(graph, {"data": "float32"})
    bad = unsupported_nodes(graph, shapes, dtypes)
    assert list(bad) == ["nms"] and "_contrib_box_nms" in bad["nms"]
    node = graph.node("nms")
    assert not is_supported(node, shapes, dtypes)
    assert is_supported(graph.node("e"), shapes, dtypes)
    with pytest.raises(BackendError, match=r"node 'nms' \(_contrib_box_nms\)"):
        lower_graph(graph, shapes=shapes, dtypes=dtypes)


def test_unknown_shape_is_unsupported():
    x = S.var("x")
    graph = S.exp(x).graph
    shapes = infer_shapes(graph, {})
    dtypes = infer_types(graph, {"x": "float32"})
    reason = unsupported_nodes(graph, shapes, dtypes)
    assert "static shape" in next(iter(reason.values()))
    with pytest.raises(BackendError):
        lower_graph(graph, dtypes={"x": "float32"})


def test_default_target_is_the_detected_host_cpu():
    t = host_target()
    assert t["kind"] == "llvm"
    assert t.get("mcpu")


def test_converter_modules_mirror_op_families():
    """Each converter lives in ops/<family>.py named after the op's definition file
    (``ops/numpy/elemwise.py`` for the ``numpy.elemwise`` family)."""
    ops = registered_ops()
    wrong = []
    for name, conv in registered_converters().items():
        opdef = ops.get(name)
        if opdef is None:
            continue
        module = conv.module.split(".ops.", 1)[-1]
        if module != opdef.family:
            wrong.append(f"{name}: converter in {module}.py, op defined in {opdef.family}.py")
    assert not wrong, "\n".join(wrong)


def test_every_converter_names_a_registered_op():
    ops = registered_ops()
    unknown = sorted(n for n in registered_converters() if n not in ops)
    assert not unknown


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")
def test_cuda_compilation_without_a_gpu():
    """The CUDA pipeline (with dlight default schedules) compiles a small CNN; nothing runs."""
    graph = _small_cnn()
    mod = lower_graph(graph, shapes={"data": SHAPE}, params=_params(graph))
    exe = build_module(mod, target="cuda")
    assert exe is not None


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")
def test_cuda_compilation_of_kernels_dlight_mis_schedules():
    """A grouped convolution and a full reduction: TVM 0.27's dlight Reduction rules
    claim (grouped conv) or crash on (mean over every axis) these; the guarded rules
    fall through to ones that work."""
    x = S.var("data")
    y = S.Convolution(x, kernel=(3, 3), num_filter=6, num_group=2, name="gconv")
    graph = S.mean(y, name="avg").graph
    shapes = {"data": (1, 4, 6, 6)}
    rng = np.random.RandomState(0)
    params = {"gconv_weight": rng.uniform(-1, 1, (6, 2, 3, 3)).astype("float32"),
              "gconv_bias": np.zeros(6, "float32")}
    exe = build_module(lower_graph(graph, shapes=shapes, params=params), target="cuda")
    assert exe is not None
