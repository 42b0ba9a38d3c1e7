"""Graphs whose operator nodes share a name, as Gluon exports them.

A block called more than once in ``hybrid_forward`` writes one JSON node per
call, all named ``<prefix>fwd`` (Xception's shared ReLU, DLA's shared
pooling, a ResNet block applied to two inputs).  MXNet identifies nodes by
position, so every stage must accept such graphs, keep the names as written,
and name the nodes unambiguously in messages.

Oracles: shapes hand-computed from the layers; the same graph with unique
names (MXNet's partitioning and execution read positions, never names, so
renaming may change nothing); MXNet's recorded outputs of the wave-2
``preproc_resize_cnn`` model with its two ReLU nodes given one name.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

import mxc
from conftest import load_corpus_model, require_runnable_target
from mxc.compiler.ir.compare import graphs_equal
from mxc.compiler.ir.text import parse_graph, print_graph
from mxc.errors import AttributeInvalidError, MxcError, VerificationError
from oracle import assert_close

DATA = (2, 3, 8, 8)
#: the names the JSON repeats and at which positions (hand-written below)
REPEATED = {"net_relu0_fwd": [4, 11], "net_pool0_fwd": [12, 13], "net_bn0_fwd": [18, 19],
            "net_dense0_fwd": [22, 23]}


def _var(name):
    return {"op": "null", "name": name, "inputs": []}


def _op(op, name, inputs, **attrs):
    return {"op": op, "name": name, "attrs": {k: str(v) for k, v in attrs.items()},
            "inputs": [[i, 0, 0] for i in inputs]}


def shared_blocks_doc() -> dict:
    """A shared ReLU on two branches (a host node between them), a shared pooling,
    a shared BatchNorm and a Dense block applied to two inputs."""
    conv = {"kernel": "(3, 3)", "pad": "(1, 1)", "num_filter": 4}
    pool = {"kernel": "(2, 2)", "stride": "(2, 2)", "pool_type": "max"}
    bn = {"fix_gamma": False, "eps": 1e-3}
    nodes = [
        _var("data"), _var("c0_weight"), _var("c0_bias"),                       # 0-2
        _op("Convolution", "net_conv0_fwd", [0, 1, 2], **conv),                 # 3
        _op("Activation", "net_relu0_fwd", [3], act_type="relu"),               # 4
        _var("rows"), _var("patch"),                                            # 5-6
        _op("_contrib_index_copy", "net_copy0", [4, 5, 6]),                     # 7 (host)
        _var("c1_weight"), _var("c1_bias"),                                     # 8-9
        _op("Convolution", "net_conv1_fwd", [7, 8, 9], **conv),                 # 10
        _op("Activation", "net_relu0_fwd", [10], act_type="relu"),              # 11
        _op("Pooling", "net_pool0_fwd", [4], **pool),                           # 12
        _op("Pooling", "net_pool0_fwd", [11], **pool),                          # 13
        _var("bn_gamma"), _var("bn_beta"), _var("bn_mean"), _var("bn_var"),     # 14-17
        _op("BatchNorm", "net_bn0_fwd", [12, 14, 15, 16, 17], **bn),            # 18
        _op("BatchNorm", "net_bn0_fwd", [13, 14, 15, 16, 17], **bn),            # 19
        _var("d_weight"), _var("d_bias"),                                       # 20-21
        _op("FullyConnected", "net_dense0_fwd", [18, 20, 21], num_hidden=5),    # 22
        _op("FullyConnected", "net_dense0_fwd", [19, 20, 21], num_hidden=5),    # 23
        _op("elemwise_add", "net_add0", [22, 23]),                              # 24
    ]
    return {"nodes": nodes, "arg_nodes": [i for i, n in enumerate(nodes) if n["op"] == "null"],
            "node_row_ptr": list(range(len(nodes) + 1)), "heads": [[24, 0, 0], [11, 0, 0]],
            "attrs": {"mxnet_version": ["int", 10901]}}


def unique_doc() -> dict:
    """The same graph with every repeated name made unique (``<name>__<position>``)."""
    doc = json.loads(json.dumps(shared_blocks_doc()))
    for name, positions in REPEATED.items():
        for i in positions:
            doc["nodes"][i]["name"] = f"{name}__{i}"
    return doc


def load(doc: dict):
    return mxc.sym.load_json(json.dumps(doc))


#: hand-computed: conv 3x3 pad 1 keeps 8x8, pooling 2/2 halves it, Dense flattens 4*4*4
ARG_SHAPES = {"data": DATA, "c0_weight": (4, 3, 3, 3), "c0_bias": (4,), "rows": (1,),
              "patch": (1, 4, 8, 8), "c1_weight": (4, 4, 3, 3), "c1_bias": (4,),
              "bn_gamma": (4,), "bn_beta": (4,), "d_weight": (5, 64), "d_bias": (5,)}
AUX_SHAPES = {"bn_mean": (4,), "bn_var": (4,)}
OUT_SHAPES = [(2, 5), (2, 4, 8, 8)]


def weights(sym) -> tuple[dict, dict]:
    rng = np.random.default_rng(7)
    args = {k: rng.standard_normal(v).astype(np.float32) for k, v in ARG_SHAPES.items()
            if k != "data"}
    args["rows"] = np.array([1.0], np.float32)
    aux = {"bn_mean": rng.standard_normal(4).astype(np.float32),
           "bn_var": rng.uniform(0.5, 2.0, 4).astype(np.float32)}
    return args, aux


def data() -> np.ndarray:
    return np.random.default_rng(3).standard_normal(DATA).astype(np.float32)


def reference(doc: dict) -> list[np.ndarray]:
    sym = load(doc)
    args, aux = weights(sym)
    return [np.asarray(o) for o in sym.bind(args={**args, "data": data()},
                                            aux_states=aux).forward()]


def test_load_keeps_the_names_and_tojson_writes_them_back():
    doc = shared_blocks_doc()
    sym = load(doc)
    nodes = sym.graph.nodes
    assert [n.name for n in nodes] == [n["name"] for n in doc["nodes"]]
    written = json.loads(sym.tojson())  # in MXNet's DFS order, each name as written
    assert sorted(n["name"] for n in written["nodes"]) == sorted(n["name"] for n in doc["nodes"])
    assert graphs_equal(load(written).graph, sym.graph)
    sym.graph.verify()
    # messages tell the nodes apart by their position in the file
    assert nodes[11].ref == "'net_relu0_fwd' at index 11" and nodes[3].ref == "'net_conv0_fwd'"
    assert sym.list_outputs() == ["net_add0_output", "net_relu0_fwd_output"]


def test_infer_shape_matches_the_hand_computed_shapes():
    sym = load(shared_blocks_doc())
    # the index_copy inputs cannot be inferred from the rest (in MXNet neither)
    arg, out, aux = sym.infer_shape(data=DATA, rows=(1,), patch=(1, 4, 8, 8))
    assert dict(zip(sym.list_arguments(), arg)) == ARG_SHAPES
    assert dict(zip(sym.list_auxiliary_states(), aux)) == AUX_SHAPES
    assert out == OUT_SHAPES


def test_reference_run_equals_the_uniquely_named_graph():
    got, want = reference(shared_blocks_doc()), reference(unique_doc())
    assert [o.shape for o in got] == OUT_SHAPES
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)


def test_textual_ir_round_trip_keeps_the_names():
    graph = load(shared_blocks_doc()).graph
    text = print_graph(graph)
    assert "%net_relu0_fwd~1 = Activation" in text
    back = parse_graph(text)
    assert [n.name for n in back.nodes] == [n.name for n in graph.nodes]
    assert graphs_equal(back, graph)
    assert print_graph(back) == text
    back.verify()


def test_verify_accepts_shared_operator_names_but_not_shared_variable_names():
    graph = load(shared_blocks_doc()).graph
    graph.verify()
    graph.nodes[5].name = "patch"  # two variables: inputs are bound by name
    with pytest.raises(VerificationError, match="variable name 'patch' is used twice"):
        graph.verify()


def test_messages_name_the_node_and_its_index():
    doc = shared_blocks_doc()
    doc["nodes"][11]["attrs"]["act_type"] = "relu6"
    sym = load(doc)
    with pytest.raises(AttributeInvalidError,
                       match=r"node 'net_relu0_fwd' at index 11\): attribute act_type"):
        sym.infer_shape(data=DATA)


def test_an_output_name_two_nodes_share_is_ambiguous():
    internals = load(shared_blocks_doc()).get_internals()
    with pytest.raises(MxcError, match="multiple outputs named 'net_pool0_fwd_output'"):
        internals["net_pool0_fwd_output"]
    assert internals["net_add0_output"].list_outputs() == ["net_add0_output"]


def test_the_compile_passes_accept_shared_names_and_keep_the_outputs():
    from mxc.backends.tvm.lower import default_pipeline
    from mxc.compiler.passes import run_graph
    from mxc.backends.reference import run_graph as run_reference
    sym = load(shared_blocks_doc())
    args, aux = weights(sym)
    result = run_graph(sym.graph, default_pipeline(), args, aux, shapes={"data": DATA})
    result.graph.verify()
    assert sum(n.op == "BatchNorm" for n in result.graph.nodes) == 0  # both became scale/shift
    want = reference(shared_blocks_doc())
    got = run_reference(result.graph, {**result.args, **result.aux, "data": data()})
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)


def _regions(graph) -> list:
    """Each top-level op node: its op and, for a region, its inner ops by position."""
    out = []
    for node in graph.topo_order():
        if node.op is None:
            continue
        inner = [] if not node.subgraphs else [
            (n.op, n.name.split("__")[0]) for n in node.subgraphs[0].topo_order()
            if n.op is not None]
        out.append((node.op, node.name.split("__")[0], inner))
    return out


@pytest.mark.parametrize("options", [{}, {"dedup_subgraph": "True"}])
def test_partitioning_makes_the_regions_of_the_uniquely_named_graph(options):
    from mxc.compiler.partition import optimize_graph
    from mxc.backends.tvm.property import register_tvm_backend
    register_tvm_backend()
    shapes = {**ARG_SHAPES, **AUX_SHAPES}
    dtypes = {k: "float32" for k in shapes}
    parts = [optimize_graph(load(doc).graph.copy(), "tvm", shapes=shapes, dtypes=dtypes,
                            options=options) for doc in (shared_blocks_doc(), unique_doc())]
    assert _regions(parts[0]) == _regions(parts[1])
    assert [op for op, _, _ in _regions(parts[0])] == [
        "_tvm_subgraph", "_contrib_index_copy", "_tvm_subgraph"]
    # the two branches' pooling outputs both reach the second region as distinct inputs
    from mxc.backends.reference import run_graph as run_reference
    sym = load(shared_blocks_doc())
    args, aux = weights(sym)
    got = run_reference(parts[0], {**args, **aux, "data": data()})
    for g, w in zip(got, reference(shared_blocks_doc())):
        np.testing.assert_array_equal(g, w)


def test_dedup_keeps_two_same_named_inputs_of_a_region_apart():
    """MXNet's dedup_subgraph shares one nested variable per input *name*, which would
    make ``net_add0`` add one Dense output to itself; mxc shares per entry."""
    from mxc.backends.reference import run_graph as run_reference
    sym = load(shared_blocks_doc())
    part = sym.optimize_for("default", op_names=["elemwise_add"], dedup_subgraph=True)
    region = next(n for n in part.graph.nodes if n.op == "_CachedOp")
    assert [e.node.name for e in region.inputs] == ["net_dense0_fwd", "net_dense0_fwd"]
    assert region.inputs[0].node is not region.inputs[1].node
    assert [v.name for v in region.subgraphs[0].input_nodes()] == [
        "net_dense0_fwd_output0", "net_dense0_fwd_output1"]  # MXNet's names per use
    args, aux = weights(sym)
    got = run_reference(part.graph, {**args, **aux, "data": data()})
    for g, w in zip(got, reference(shared_blocks_doc())):
        np.testing.assert_array_equal(g, w)


@pytest.mark.corpus
def test_compiled_model_runs_and_reports_each_host_node(tmp_path):
    pytest.importorskip("tvm")
    import mxc.runtime
    sym = load(shared_blocks_doc())
    args, aux = weights(sym)
    model = mxc.compile(sym, (args, aux), shapes={"data": DATA},
                        target=require_runnable_target())
    assert list(model.host_nodes) == ["net_copy0"]
    sess = mxc.runtime.load(model.save(tmp_path / "shared.mxc"))
    outs = sess.run({"data": data()})
    for g, w in zip(outs, reference(shared_blocks_doc())):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-4)


def _preproc_with_one_relu_name():
    """The wave-2 preprocessing model with its two ReLU nodes given one name, as a
    shared ``nn.Activation`` block would export them."""
    root, meta, sym, params = load_corpus_model("wave2/models", "preproc_resize_cnn")
    doc = json.loads((root / "symbol.json").read_text())
    relus = [n for n in doc["nodes"] if n["op"] == "Activation"]
    assert len(relus) == 2
    for n in relus:
        n["name"] = "pre0_relu_fwd"
    io = np.load(root / "io.npz")
    args = {k[4:]: v for k, v in params.items() if k.startswith("arg:")}
    return meta, mxc.sym.load_json(json.dumps(doc)), args, io


def test_preprocessing_model_with_a_shared_name_matches_mxnet():
    meta, sym, args, io = _preproc_with_one_relu_name()
    outs = sym.bind(args={**args, "data": io["in__data"]}).forward()
    assert_close(np.asarray(outs[0]), io["out__0"], meta["rtol"], meta["atol"], "reference")


@pytest.mark.corpus
def test_preprocessing_model_with_a_shared_name_compiles_to_mxnets_outputs(tmp_path):
    pytest.importorskip("tvm")
    import mxc.runtime
    meta, sym, args, io = _preproc_with_one_relu_name()
    feeds = {"data": io["in__data"]}
    model = mxc.compile(sym, (args, {}), shapes={"data": feeds["data"].shape},
                        dtypes={"data": "uint8"}, target=require_runnable_target())
    outs = mxc.runtime.load(model.save(tmp_path / "preproc.mxc")).run(feeds)
    assert_close(np.asarray(outs[0]), io["out__0"], meta["rtol"], meta["atol"], "compiled")
