"""Subgraph operators (``_CachedOp`` and user ones): arity, names, inference, forward."""

from __future__ import annotations

import numpy as np

from mxc import sym
from mxc.backends.reference import run_graph
from mxc.compiler.infer import infer_shapes, infer_types
from mxc.compiler.ir import Entry, Graph, Node
from mxc.compiler.ir.compare import graph_diff
from mxc.compiler.ops import get_op
from mxc.compiler.ops.subgraph import cached_op_output_names
from mxc.compiler.partition import partition_graph
from mxc.frontend.symbol_json import dump_json, load_json


def cached(nested: Graph, inputs, name="_CachedOp0") -> Node:
    return Node("_CachedOp", name, inputs=inputs, subgraphs=[nested])


def exp_graph() -> Graph:
    x = Node(None, "x0")
    e = Node("exp", "exp0", inputs=[Entry(x)])
    return Graph([x, e], [Entry(e)])


def test_cached_op_is_a_subgraph_op():
    op = get_op("_CachedOp")
    assert op.is_subgraph_op
    v = Node(None, "v")
    node = cached(exp_graph(), [Entry(v)])
    assert op.input_names(node.params) == ["x0"]
    assert node.num_outputs() == 1
    assert Graph([v, node], [Entry(node)]).list_outputs() == ["_CachedOp0_exp0_output"]


def test_shape_and_dtype_inference_both_directions():
    v = Node(None, "v")                      # no shape: learnt backwards
    w = Node(None, "w")
    node = cached(exp_graph(), [Entry(v)])
    add = Node("elemwise_add", "add0", inputs=[Entry(node), Entry(w)])
    graph = Graph([v, node, w, add], [Entry(add)])
    shapes = infer_shapes(graph, {"w": (4, 5)})
    assert shapes[(v, 0)] == (4, 5)
    assert shapes[(node, 0)] == (4, 5)
    dtypes = infer_types(graph, {"w": "float16"})
    assert dtypes[(v, 0)] == "float16"


def test_output_names_after_common_subexpression_merging():
    x = Node(None, "x0")
    a = Node("sin", "a", inputs=[Entry(x)])
    b = Node("sin", "b", inputs=[Entry(x)])
    c = Node("cos", "c", inputs=[Entry(x)])
    nested = Graph([x, a, b, c], [Entry(a), Entry(b), Entry(c), Entry(c)])
    # b merges into a; the repeated c becomes c_copy0
    assert cached_op_output_names(nested) == ["a_output", "a_0_copy_output", "c_output",
                                              "c_copy0_output"]
    # random and mutating ops are never merged
    d1 = Node("Dropout", "d1", inputs=[Entry(x)])
    d2 = Node("Dropout", "d2", inputs=[Entry(x)])
    assert cached_op_output_names(Graph([x, d1, d2], [Entry(d1), Entry(d2)])) == \
        ["d1_output", "d2_output"]


def test_mutable_inputs_follow_nested_aux_states():
    with sym.NameManager():
        out = sym.BatchNorm(sym.exp(sym.var("data")))
    part = partition_graph(out.graph, "default", op_names="BatchNorm")
    (node,) = [n for n in part.nodes if n.op == "_CachedOp"]
    assert node.opdef.input_names(node.params) == [
        "exp0_output0", "batchnorm0_gamma0", "batchnorm0_beta0", "batchnorm0_moving_mean0",
        "batchnorm0_moving_var0"]
    assert node.opdef.mutable_inputs(node.params) == [3, 4]
    assert part.list_auxiliary_states() == ["batchnorm0_moving_mean", "batchnorm0_moving_var"]


def test_unused_label_inside_a_subgraph():
    with sym.NameManager():
        fc = sym.FullyConnected(sym.var("data"), num_hidden=3)
        out = sym.SoftmaxOutput(fc)
    graph = out.graph
    part = partition_graph(graph, "default", op_names="SoftmaxOutput")
    rng = np.random.RandomState(0)
    feeds = {"data": rng.rand(2, 4).astype(np.float32),
             "fullyconnected0_weight": rng.rand(3, 4).astype(np.float32),
             "fullyconnected0_bias": rng.rand(3).astype(np.float32)}
    np.testing.assert_array_equal(run_graph(part, feeds)[0], run_graph(graph, feeds)[0])


def test_partitioned_json_round_trip():
    with sym.NameManager():
        data = sym.var("data", shape=(2, 3))
        ret = sym.exp(data)
        out = sym.Group([sym.cos(ret) + sym.sin(ret), ret])
    part = partition_graph(out.graph, "default", op_names="exp,sin,elemwise_add")
    again = load_json(dump_json(part))
    assert graph_diff(again, part) is None
    assert again.list_outputs() == part.list_outputs()
    feeds = {"data": np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3)}
    for x, y in zip(run_graph(again, feeds), run_graph(out.graph, feeds)):
        np.testing.assert_array_equal(x, y)


def test_region_without_inputs_learns_shapes_from_outside():
    # the lstm_unrolled pattern: a begin state _zeros(shape=(0, 3)) whose batch
    # size is only known from the consumer outside the region
    with sym.NameManager():
        x = sym.var("x")
        z = sym.create("_zeros", shape=(0, 3), name="begin")
        out = sym.elemwise_add(z, sym.exp(x), name="add")
    graph = out.graph
    part = partition_graph(graph, "default", op_names="_zeros")
    (node,) = [n for n in part.nodes if n.op == "_CachedOp"]
    assert node.inputs == ()
    feeds = {"x": np.ones((2, 3), np.float32)}
    np.testing.assert_array_equal(run_graph(part, feeds)[0], run_graph(graph, feeds)[0])
