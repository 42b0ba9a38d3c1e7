"""mxc.compile: the ``tvm`` partitioner, regions, host nodes, passes, targets, progress."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("tvm")

import mxc
from mxc import sym as S
from mxc.backends.reference import run_graph
from mxc.backends.tvm.compile import CompiledModel, default_pipeline
from mxc.backends.tvm.converter import unsupported_nodes
from mxc.backends.tvm.property import SUBGRAPH_OP, TVMSubgraphProperty
from mxc.compiler.infer import infer_shapes, infer_types
from mxc.compiler.ir import Node
from mxc.compiler.ops.subgraph import register_subgraph_op
from mxc.compiler.partition import (OpNameSelector, SubgraphProperty, optimize_graph,
                                    partition_graph)
from mxc.errors import BackendError, PartitionError

REPO = Path(__file__).resolve().parents[2]
MLP = REPO / "examples" / "mlp"


def _weights(graph, shapes, seed=0):
    rng = np.random.RandomState(seed)
    inferred = infer_shapes(graph, shapes)
    out = {}
    for n in graph.input_nodes():
        if n.name in shapes:
            continue
        shape = inferred[(n, 0)]
        value = rng.uniform(0.5, 2.0, shape) if n.name.endswith("var") else rng.randn(*shape)
        out[n.name] = value.astype(np.float32)
    return out


def _check(model: CompiledModel, sym, params, feeds, rtol=1e-5, atol=1e-6):
    want = run_graph(sym.graph, {**params, **feeds})
    got = model.run(feeds)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=rtol, atol=atol)


def _cnn():
    x = S.var("data")
    y = S.Convolution(x, kernel=(3, 3), num_filter=4, pad=(1, 1), name="conv")
    y = S.BatchNorm(y, fix_gamma=False, name="bn")
    y = S.Activation(y, act_type="relu", name="relu")
    y = S.Dropout(y, p=0.5, name="drop")
    y = S.FullyConnected(y, num_hidden=5, name="fc")
    return S.softmax(y, name="prob")


# ---------------------------------------------------------------------------
# the tvm partitioner
# ---------------------------------------------------------------------------
def test_everything_supported_is_one_region():
    sym = _cnn()
    shapes = {"data": (2, 3, 8, 8)}
    params = _weights(sym.graph, shapes)
    model = mxc.compile(sym, params, shapes, passes="")
    assert [n.op for n in model.graph.op_nodes()] == [SUBGRAPH_OP]
    assert len(model.regions) == 1 and model.host_nodes == {}
    assert model.regions[0]["ops"]["BatchNorm"] == 1
    _check(model, sym, params, {"data": np.random.RandomState(1).randn(2, 3, 8, 8)
                                .astype(np.float32)}, rtol=1e-4, atol=1e-5)


def test_disconnected_parts_are_still_one_region():
    a, b = S.var("a"), S.var("b")
    sym = S.Group([S.exp(a) * 2.0, S.relu(b) + 1.0, a])
    model = mxc.compile(sym, None, {"a": (3,), "b": (2, 2)})
    assert len(model.regions) == 1
    _check(model, sym, {}, {"a": np.arange(3, dtype=np.float32),
                            "b": -np.ones((2, 2), np.float32)})


def test_property_through_optimize_graph():
    sym = _cnn()
    g = sym.graph
    shapes = {"data": (2, 3, 8, 8)}
    shapes.update({k: v.shape for k, v in _weights(g, shapes).items()})
    part = optimize_graph(g, "tvm", shapes=shapes, dtypes={n: "float32" for n in shapes},
                          clear=False)
    assert [n.op for n in part.op_nodes()] == [SUBGRAPH_OP]
    assert part.list_inputs() == g.list_inputs()
    prop = TVMSubgraphProperty()
    with pytest.raises(PartitionError, match="needs the shapes"):   # not silently 0 regions
        partition_graph(g, prop)


def test_unsupported_op_splits_regions_and_runs_on_the_host():
    data = S.var("data")
    y = S._contrib_box_nms(S.relu(data, name="r"), overlap_thresh=0.5, name="nms")
    sym = S.exp(y, name="e") + 1.0
    shapes = {"data": (1, 6, 6)}
    model = mxc.compile(sym, None, shapes)
    assert list(model.host_nodes) == ["nms"] and len(model.regions) == 2
    g = sym.graph
    assert set(model.host_nodes) == set(unsupported_nodes(
        g, infer_shapes(g, shapes), infer_types(g, {"data": "float32"})))
    _check(model, sym, {}, {"data": np.random.RandomState(0).rand(1, 6, 6).astype(np.float32)})


@mxc.register_custom_op("tvm_compile_test_scale")
class _Scale(mxc.CustomOp):
    def parse_attrs(self, attrs):
        return 1, 1

    def infer_shape(self, attrs, in_shapes):
        return in_shapes, [in_shapes[0]]

    def forward(self, attrs, inputs, outputs):
        return [inputs[0] * float(attrs["k"])]


def test_custom_python_op_runs_on_the_host_between_compiled_regions():
    x = S.var("data")
    y = S.relu(S.FullyConnected(x, num_hidden=8, name="fc1"))
    y = S.tvm_compile_test_scale(y, k=3.0, name="scale")
    sym = S.softmax(S.FullyConnected(y, num_hidden=4, name="fc2"))
    shapes = {"data": (2, 5)}
    params = _weights(sym.graph, shapes)
    model = mxc.compile(sym, params, shapes)
    assert list(model.host_nodes) == ["scale"]
    assert [sorted(r["ops"]) for r in model.regions] == [["FullyConnected", "relu"],
                                                         ["FullyConnected", "softmax"]]
    _check(model, sym, params, {"data": np.random.RandomState(2).randn(2, 5).astype("f")})


CALLS = []


def _region_forward(inputs, subgraph, attrs):
    from mxc.compiler.ops.subgraph import run_nested
    CALLS.append(attrs.get("tag"))
    return run_nested(subgraph, inputs)


register_subgraph_op("_tvm_compile_test_region", _region_forward)


class _TanhProperty(SubgraphProperty):
    """A user partitioner: tanh/sigmoid regions become ``_tvm_compile_test_region`` nodes."""

    def create_selector(self):
        return OpNameSelector({"tanh", "sigmoid"})

    def create_subgraph_node(self, subgraph, subgraph_id, selector):
        return Node("_tvm_compile_test_region", f"user{subgraph_id}", {"tag": "mine"},
                    subgraphs=[subgraph])


def test_user_partitioner_regions_keep_their_own_implementation():
    x = S.var("data")
    y = S.FullyConnected(x, num_hidden=6, name="fc1")
    y = S.sigmoid(S.tanh(y, name="t"), name="s")
    sym = S.FullyConnected(S.exp(y, name="e"), num_hidden=3, name="fc2")
    shapes = {"data": (2, 4)}
    params = _weights(sym.graph, shapes)
    part = partition_graph(sym.graph, _TanhProperty())
    assert "_tvm_compile_test_region" in part.op_counts()
    model = mxc.compile(part, params, shapes)
    assert list(model.host_nodes) == ["user0"]
    region_ops = set().union(*(r["ops"] for r in model.regions))
    assert "tanh" not in region_ops and "sigmoid" not in region_ops   # not re-taken
    feeds = {"data": np.random.RandomState(3).randn(2, 4).astype("f")}
    CALLS.clear()
    _check(model, sym, params, feeds)
    assert CALLS == ["mine"]                      # the user's forward ran, on the host


def test_cached_op_regions_stay_on_the_host():
    x = S.var("data")
    sym = S.relu(S.sin(S.exp(x, name="e"), name="s"), name="r") * 2.0
    part = partition_graph(sym.graph, "default", op_names="exp,sin")
    model = mxc.compile(part, None, {"data": (3, 4)})
    assert [model.graph.node(n).op for n in model.host_nodes] == ["_CachedOp"]
    _check(model, sym, {}, {"data": np.random.RandomState(4).randn(3, 4).astype("f")})


# ---------------------------------------------------------------------------
# passes, params, inputs
# ---------------------------------------------------------------------------
def test_default_pipeline_folds_batchnorm_and_removes_dropout():
    assert default_pipeline() == "remove-dropout,inline-fused,simplify,fold-batchnorm,dce"
    sym = _cnn()
    shapes = {"data": (2, 3, 8, 8)}
    params = _weights(sym.graph, shapes)
    model = mxc.compile(sym, params, shapes)
    ops = model.regions[0]["ops"]
    assert "BatchNorm" not in ops and "Dropout" not in ops
    assert model.manifest["pipeline"] == default_pipeline()
    _check(model, sym, params, {"data": np.random.RandomState(5).randn(2, 3, 8, 8)
                                .astype(np.float32)}, rtol=1e-4, atol=1e-5)


def test_checkpoint_params_forms_are_accepted():
    sym, args, aux = mxc.load_checkpoint(str(MLP / "mlp"), 0)
    prefixed = {**{f"arg:{k}": v for k, v in args.items()},
                **{f"aux:{k}": v for k, v in aux.items()}}
    x = np.load(MLP / "input.npz")["data"]
    a = mxc.compile(sym, (args, aux), {"data": (4, 784)}).run({"data": x})[0]
    b = mxc.compile(sym, prefixed, {"data": (4, 784)}, passes="").run({"data": x})[0]
    np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-7)


def test_input_dtypes():
    x = S.var("ids")
    sym = S.Cast(x, dtype="float32") * 0.5
    model = mxc.compile(sym, None, {"ids": (4,)}, {"ids": "int32"})
    assert model.inputs == [{"name": "ids", "shape": [4], "dtype": "int32", "optional": False}]
    out = model.run({"ids": np.arange(4, dtype=np.int32)})[0]
    np.testing.assert_allclose(out, np.arange(4) * 0.5)


def test_missing_and_unknown_shapes_are_clear_errors():
    sym, args, aux = mxc.load_checkpoint(str(MLP / "mlp"), 0)
    with pytest.raises(BackendError, match=r"without a complete static shape.*data"):
        mxc.compile(sym, (args, aux))
    with pytest.raises(BackendError, match="'dta'.*inputs are data"):
        mxc.compile(sym, (args, aux), {"dta": (4, 784)})
    with pytest.raises(BackendError, match="Symbol or a Graph"):
        mxc.compile("model.json", None)


def test_progress_lines_on_stderr(capsys):
    x = S.var("x")
    mxc.compile(S.exp(x), None, {"x": (2,)}, progress=True)
    err = capsys.readouterr().err.splitlines()
    assert [line.split(":")[0] for line in err] == [
        "[1/5] passes", "[2/5] partition for tvm", "[3/5] lower to Relax",
        "[4/5] build for llvm", "[5/5] runtime graph"]
    mxc.compile(S.exp(x), None, {"x": (2,)})
    assert capsys.readouterr().err == ""


def test_compile_is_exported_and_lazy():
    from mxc.backends.tvm.compile import compile as compile_fn
    assert mxc.compile is compile_fn
    r = subprocess.run([sys.executable, "-c", "import sys, mxc; mxc.compile; "
                        "print('tvm' in sys.modules)"], cwd=REPO, capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout.strip() == "False", r.stderr


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")
def test_cuda_target_compiles_without_a_gpu():
    sym = _cnn()
    shapes = {"data": (2, 3, 8, 8)}
    params = _weights(sym.graph, shapes)
    model = mxc.compile(sym, params, shapes, target="cuda")
    target = model.manifest["target"]
    assert target["kind"] == "cuda" and target["arch"].startswith("sm_")
    assert target["host"]["arch"]                  # the VM's host side is CPU code too
    from mxc.runtime import has_cuda
    if has_cuda():
        _check(model, sym, params, {"data": np.random.RandomState(6).randn(2, 3, 8, 8)
                                    .astype(np.float32)}, rtol=1e-4, atol=1e-5)


def test_terminal_progress_redraws_one_line_with_the_tvm_pass():
    import io

    from mxc.backends.tvm.compile import Progress

    class Terminal(io.StringIO):
        def isatty(self):
            return True

    term = Terminal()
    x = S.var("x")
    model = mxc.compile(S.exp(x), None, {"x": (2,)}, progress=Progress(True, term))
    text = term.getvalue()
    assert "[4/5] build for llvm: one library" in text and "5/5" in text   # tqdm: counts
    assert "elapsed" in text and "eta" not in text.lower() and text.endswith("\n")  # no ETA
    assert model.run({"x": np.zeros(2, np.float32)})[0].tolist() == [1.0, 1.0]


def test_shape_for_an_unknown_input_names_the_data_inputs():
    """A misspelt input: the message suggests the data input and does not bury it
    under the weights' names."""
    sym, args, aux = mxc.load_checkpoint(str(MLP / "mlp"), 0)
    with pytest.raises(BackendError) as err:
        mxc.compile(sym, (args, aux), {"dta": (4, 784)})
    msg = str(err.value)
    assert "'dta' (did you mean 'data'?)" in msg
    assert "its data inputs are data, softmax_label (and 6 parameter(s))" in msg
    assert "fc1_weight" not in msg
