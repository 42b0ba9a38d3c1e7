"""Custom partitioners: MXNet's ``lib_subgraph`` example flows, in Python.

The models are those of ``example/extensions/lib_subgraph/test_subgraph.py``
(``log(exp(a + b))`` and ``log(exp(a))``) and the partitioners those of
``subgraph_lib.cc``: ``myProp`` (supportedOps for exp/log, honouring the
``reqFloat`` option; reviewSubgraph rejecting on ``reject=True`` and setting
``myKey=myVal``), ``mySelect`` (the same choice through a selector), plus a
two-strategy partitioner, one using specific subgraph ids, and the
``addInputPass`` graph pass adding an extra input to every subgraph op.
"""

from __future__ import annotations

import numpy as np
import pytest

from mxc import sym
from mxc.backends.reference import run_graph
from mxc.compiler.infer import infer_shapes, infer_types
from mxc.compiler.ir import Entry, Node
from mxc.compiler.ir.compare import graph_diff
from mxc.compiler.ops import get_op
from mxc.compiler.ops.subgraph import EXTRA_INPUTS_ATTR, register_subgraph_op
from mxc.compiler.ops.registry import unregister_op
from mxc.compiler.passes import PassManager, PassSpec
from mxc.compiler.passes.registry import register_pass, unregister_pass
from mxc.compiler.partition import (ANY_SUBGRAPH, UNSUPPORTED, optimize_graph, parse_ext_dtypes,
                                    parse_ext_shapes,
                                    register_partitioner,
                                    unregister_subgraph_backend)
from mxc.errors import PartitionError

OP_NAMES = ("exp", "log")
ONES = {"a": np.ones((3, 2), np.float32), "b": np.ones((3, 2), np.float32)}
SHAPES = {"a": (3, 2), "b": (3, 2)}
DTYPES = {"a": "float32", "b": "float32"}


def model_1():
    with sym.NameManager():
        a, b = sym.var("a"), sym.var("b")
        return sym.log(sym.exp(a + b)).graph


def model_2():
    with sym.NameManager():
        return sym.log(sym.exp(sym.var("a"))).graph


def node_dtype(node):
    text = node.attrs.get("__ext_dtype__")
    return parse_ext_dtypes(text)[0] if text else None


def wants(node, options) -> bool:
    if "reqFloat" in options and node_dtype(node) != "float32":
        return False
    return node.op in OP_NAMES


def supported_ops(graph, ids, options):
    for i, node in enumerate(graph.nodes):
        if wants(node, options):
            ids[i] = ANY_SUBGRAPH


def review_subgraph(subgraph, subgraph_id, options):
    if options.get("reject") == "True":
        return False
    subgraph.attrs["myKey"] = "myVal"
    return True


class MySelector:
    """``MySelector`` of subgraph_lib.cc: exp/log nodes, grown both ways."""

    def __init__(self, graph, options):
        self.graph = graph
        self.options = options
        self.resets = 0

    def choose(self, i):
        return wants(self.graph.nodes[i], self.options)

    def select(self, i):
        return self.choose(i)

    def select_input(self, i, input_i):
        return self.choose(input_i)

    def select_output(self, i, output_i):
        return self.choose(output_i)

    def filter(self, candidates):
        return list(candidates)

    def reset(self):
        self.resets += 1


@pytest.fixture
def partitioners():
    names = []

    def make(name):
        names.append(name)
        return register_partitioner(name)

    yield make
    for name in names:
        unregister_subgraph_backend(name)


@pytest.fixture
def runtime_attrs():
    """A user ``_custom_subgraph_op`` whose forward records its attributes."""
    seen = []

    def forward(inputs, subgraph, attrs):
        seen.append((dict(attrs), len(inputs)))
        from mxc.compiler.ops.subgraph import run_nested
        n = len(subgraph.list_inputs())
        return run_nested(subgraph, inputs[:n])

    register_subgraph_op("_custom_subgraph_op", forward)
    yield seen
    unregister_op("_custom_subgraph_op")


def custom_nodes(graph, op="_custom_subgraph_op"):
    return [n for n in graph.nodes if n.op == op]


@pytest.mark.parametrize("flavour", ["supported_ops", "selector"])
def test_exp_log_partitioner(partitioners, runtime_attrs, flavour):
    part = partitioners(f"my_{flavour}")
    if flavour == "supported_ops":
        part.add_strategy("strategy1", "_custom_subgraph_op", supported_ops=supported_ops)
    else:
        part.add_strategy("strategy1", "_custom_subgraph_op", create_selector=MySelector)
    part.set_review_subgraph("strategy1", review_subgraph)
    graph = model_1()
    want = run_graph(graph, ONES)[0]

    # with shapes/types
    p = optimize_graph(graph, part.name, options={}, shapes=SHAPES, dtypes=DTYPES)
    (node,) = custom_nodes(p)
    assert node.name == "_op0"
    assert [m.name for m in node.subgraphs[0].op_nodes()] == ["exp0", "log0"]
    assert node.attrs["myKey"] == "myVal"
    assert parse_ext_shapes(node.attrs["__ext_shape__"]) == [(3, 2)]
    assert node.attrs["__ext_dtype__"] == "[0]"
    (var,) = node.subgraphs[0].input_nodes()
    assert var.name == "_plus0_output0"
    assert var.attrs == {"isArg": "False", "isAux": "False", "__ext_shape__": "[[3,2]]",
                         "__ext_dtype__": "[0]"}
    assert p.node("_plus0").attrs["__ext_shape__"] == "[[3,2]]"
    np.testing.assert_array_equal(run_graph(p, ONES)[0], want)
    assert runtime_attrs[-1][0]["myKey"] == "myVal"
    p.verify()

    # rejecting the subgraph leaves the graph as it was (plus the shape attributes)
    p = optimize_graph(graph, part.name, options={"reject": "True"}, shapes=SHAPES,
                       dtypes=DTYPES)
    assert not custom_nodes(p)
    np.testing.assert_array_equal(run_graph(p, ONES)[0], want)

    # without shapes/types: no __ext_* on the graph; reqFloat then selects nothing
    p = optimize_graph(graph, part.name, options={"myOpt": "yello"})
    (node,) = custom_nodes(p)
    assert "__ext_shape__" not in p.node("_plus0").attrs
    assert node.attrs["__ext_shape__"] == "[]"
    np.testing.assert_array_equal(run_graph(p, ONES)[0], want)
    assert not custom_nodes(optimize_graph(graph, part.name, options={"reqFloat": "True"}))
    assert custom_nodes(optimize_graph(graph, part.name, options={"reqFloat": "True"},
                                       shapes=SHAPES, dtypes=DTYPES))

    # subgraph directly consuming a parameter
    graph2 = model_2()
    p = optimize_graph(graph2, part.name, options={"reqArgs": "True"}, shapes={"a": (3, 2)},
                       dtypes={"a": "float32"})
    (node,) = custom_nodes(p)
    (var,) = node.subgraphs[0].input_nodes()
    assert (var.name, var.attrs["isArg"], var.attrs["argName"]) == ("a0", "True", "a")
    np.testing.assert_array_equal(run_graph(p, {"a": ONES["a"]})[0],
                                  run_graph(graph2, {"a": ONES["a"]})[0])


def test_selector_ids_index_the_topological_node_list(partitioners):
    seen = {}

    def create_selector(graph, options):
        seen["names"] = [n.name for n in graph.nodes]
        sel = MySelector(graph, options)
        seen["sel"] = sel
        return sel

    part = partitioners("ids_probe")
    part.add_strategy("s", "_probe_subgraph_op", create_selector=create_selector)
    graph = model_1()
    optimize_graph(graph, "ids_probe", options={})
    assert seen["names"] == [n.name for n in graph.topo_order()]
    # the probe op was registered on first use and runs the nested graph
    assert get_op("_probe_subgraph_op").is_subgraph_op
    unregister_op("_probe_subgraph_op")


def test_two_strategies_run_in_order(partitioners):
    order = []

    def only(op):
        def supported(graph, ids, options):
            order.append(op)
            for i, n in enumerate(graph.nodes):
                if n.op == op:
                    ids[i] = ANY_SUBGRAPH
        return supported

    part = partitioners("two_step")
    (part.add_strategy("first", "_sg_exp", supported_ops=only("exp"))
         .add_strategy("second", "_sg_log", supported_ops=only("log")))
    graph = model_1()
    p = optimize_graph(graph, "two_step", options={})
    assert order == ["exp", "log"]
    assert [(n.op, n.name) for n in p.op_nodes()] == [("elemwise_add", "_plus0"),
                                                      ("_sg_exp", "_op0"), ("_sg_log", "_op0_1")]
    # the second strategy sees the first one's node as an ordinary producer
    assert p.node("_op0_1").subgraphs[0].list_inputs() == ["_op0_output0"]
    np.testing.assert_array_equal(run_graph(p, ONES)[0], run_graph(graph, ONES)[0])
    for op in ("_sg_exp", "_sg_log"):
        unregister_op(op)


def test_specific_subgraph_ids(partitioners):
    # x -> exp(e0) -> sin(s0) -> cos(c0) -> exp(e1); ids: e0=0, s0=0, c0=1, e1=-1
    with sym.NameManager():
        x = sym.var("x")
        out = sym.exp(sym.cos(sym.sin(sym.exp(x))))
    graph = out.graph
    wanted = {"exp0": 0, "sin0": 0, "cos0": 1, "exp1": ANY_SUBGRAPH}

    def supported(graph, ids, options):
        assert all(v == UNSUPPORTED for v in ids)
        for i, n in enumerate(graph.nodes):
            if n.name in wanted:
                ids[i] = wanted[n.name]

    part = partitioners("by_id")
    part.add_strategy("s", "_sg_id", supported_ops=supported)
    p = optimize_graph(graph, "by_id", options={})
    regions = [[m.name for m in n.subgraphs[0].op_nodes()] for n in custom_nodes(p, "_sg_id")]
    # exp0 and sin0 share id 0; cos0 (id 1) starts its own region and takes exp1 (any)
    assert regions == [["exp0", "sin0"], ["cos0", "exp1"]]
    feeds = {"x": np.array([0.5, 2.0], np.float32)}
    np.testing.assert_array_equal(run_graph(p, feeds)[0], run_graph(graph, feeds)[0])
    unregister_op("_sg_id")


def test_extra_inputs_from_a_graph_pass(partitioners, runtime_attrs):
    def add_input_pass(graph, ctx):  # the seeds' addInputPass, through the pass API
        for n in list(graph.topo_order()):
            if n.op == "_custom_subgraph_op":
                n.attrs[EXTRA_INPUTS_ATTR] = "1"
                ctx.connect(ctx.add_input(n.name + "_input"), n)

    register_pass("addInputPass", add_input_pass)
    try:
        part = partitioners("myPropExtra")
        part.add_strategy("strategy1", "_custom_subgraph_op", supported_ops=supported_ops)
        graph = model_1()
        p = optimize_graph(graph, "myPropExtra", options={})
        p = PassManager([PassSpec("addInputPass", {})]).run_graph(p, {}, {}).graph
        (node,) = custom_nodes(p)
        assert [e.node.name for e in node.inputs] == ["_plus0", "_op0_input"]
        assert node.opdef.num_inputs(node.params) == 2
        assert p.list_inputs() == ["a", "b", "_op0_input"]
        p.verify()
        shapes = infer_shapes(p, SHAPES)
        assert shapes[(node, 0)] == (3, 2)
        assert shapes[(p.node("_op0_input"), 0)] is None  # extra inputs are not inferred
        assert infer_types(p, DTYPES)[(node, 0)] == "float32"
        feeds = {**ONES, "_op0_input": np.zeros((1,), np.float32)}
        np.testing.assert_array_equal(run_graph(p, feeds)[0], run_graph(graph, ONES)[0])
        assert runtime_attrs[-1] == ({EXTRA_INPUTS_ATTR: "1", "__ext_shape__": "[]",
                                      "__ext_dtype__": "[]"}, 2)
    finally:
        unregister_pass("addInputPass")


def test_fallback_subgraph_op_runs_nested_graph_with_extra_input(partitioners):
    part = partitioners("fallback")
    part.add_strategy("s", "_fallback_sg", supported_ops=supported_ops)
    p = optimize_graph(model_1(), "fallback", options={})
    (node,) = custom_nodes(p, "_fallback_sg")
    node.attrs[EXTRA_INPUTS_ATTR] = "1"
    node.inputs = list(node.inputs) + [Entry(Node(None, "extra"))]
    out = run_graph(p, {**ONES, "extra": np.zeros((7,), np.float32)})[0]
    np.testing.assert_array_equal(out, run_graph(model_1(), ONES)[0])
    unregister_op("_fallback_sg")


# ---------------------------------------------------------------------------
# errors
# ---------------------------------------------------------------------------
def test_review_raising_names_partitioner_strategy_and_nodes(partitioners):
    def review(subgraph, subgraph_id, options):
        raise ValueError("no thanks")

    part = partitioners("bad_review")
    part.add_strategy("strat", "_sg_bad", supported_ops=supported_ops, review_subgraph=review)
    with pytest.raises(PartitionError, match=r"partitioner 'bad_review' strategy 'strat': "
                                             r"review_subgraph of subgraph 0 \(nodes 'exp0', "
                                             r"'log0'\) raised ValueError: no thanks"):
        optimize_graph(model_1(), "bad_review", options={})
    unregister_op("_sg_bad")


def test_selector_filter_returning_unknown_ids(partitioners):
    class Adds(MySelector):
        def filter(self, candidates):
            return candidates + [0]

    class Garbage(MySelector):
        def filter(self, candidates):
            return [10_000]

    part = partitioners("bad_filter")
    part.add_strategy("s", "_sg_f", create_selector=Adds)
    with pytest.raises(PartitionError, match=r"filter returned id 0 \(node 'a'\), which is not "
                                             r"among the candidates"):
        optimize_graph(model_1(), "bad_filter", options={})
    part.set_create_selector("s", Garbage)
    with pytest.raises(PartitionError, match="filter returned 10000, which is not a node id"):
        optimize_graph(model_1(), "bad_filter", options={})
    unregister_op("_sg_f")


def test_selector_exception_names_nodes(partitioners):
    class Boom(MySelector):
        def select_output(self, i, output_i):
            raise KeyError("bad")

    part = partitioners("boom")
    part.add_strategy("s", "_sg_boom", create_selector=Boom)
    with pytest.raises(PartitionError, match=r"selector select_output\(3 \('exp0'\), 4 "
                                             r"\('log0'\)\) raised KeyError"):
        optimize_graph(model_1(), "boom", options={})
    unregister_op("_sg_boom")


def test_supported_ops_errors(partitioners):
    part = partitioners("bad_ids")

    def bad_value(graph, ids, options):
        ids[0] = "yes"

    part.add_strategy("s", "_sg_ids", supported_ops=bad_value)
    with pytest.raises(PartitionError, match=r"set ids\[0\] \(node 'a'\) to 'yes'"):
        optimize_graph(model_1(), "bad_ids", options={})
    part.set_supported_ops("s", lambda graph, ids, options: False)
    with pytest.raises(PartitionError, match="reported failure"):
        optimize_graph(model_1(), "bad_ids", options={})
    part.set_supported_ops("s", None)
    with pytest.raises(PartitionError, match="neither supported_ops nor create_selector"):
        optimize_graph(model_1(), "bad_ids", options={})
    with pytest.raises(PartitionError, match="has no strategy 'nope'"):
        part.set_review_subgraph("nope", review_subgraph)
    unregister_op("_sg_ids")


def test_subgraph_op_must_be_a_subgraph_operator(partitioners):
    part = partitioners("bad_op")
    part.add_strategy("s", "exp", supported_ops=supported_ops)
    with pytest.raises(PartitionError, match="'exp' is registered but is not a subgraph"):
        optimize_graph(model_1(), "bad_op", options={})


def test_clear_inlines_custom_subgraphs(partitioners):
    part = partitioners("inline_me")
    part.add_strategy("s", "_sg_inline", supported_ops=supported_ops)
    graph = model_1()
    p = optimize_graph(graph, "inline_me", options={}, shapes=SHAPES, dtypes=DTYPES)
    assert custom_nodes(p, "_sg_inline")
    again = optimize_graph(p, "default", options={"op_names": "log"})
    assert [n.op for n in again.op_nodes()] == ["elemwise_add", "exp", "_CachedOp"]
    assert all("__ext_shape__" not in n.attrs for n in again.nodes)
    assert graph_diff(again, optimize_graph(graph, "default", options={"op_names": "log"})) \
        is None
    unregister_op("_sg_inline")
