"""The default subgraph backend on MXNet's seven test network structures, and the API.

The structures and op-name sets are those of MXNet's
``tests/python/unittest/test_subgraph_op.py`` (PR #12157): partitioning must
keep ``list_inputs/list_arguments/list_auxiliary_states`` and every output.
Built with ``mxc.sym`` inside a fresh ``NameManager``, so the node names are
MXNet's (``exp0``, ``_plus0`` ...).
"""

from __future__ import annotations

import numpy as np
import pytest

from mxc import sym
from mxc.backends.reference import run_graph
from mxc.compiler.ir import Entry, Graph, Node
from mxc.compiler.ir.compare import graph_diff
from mxc.compiler.partition import (DefaultSubgraphProperty, OpNameSelector, PartitionContext,
                                    SubgraphProperty, SubgraphSelector, get_subgraph_backend,
                                    list_subgraph_backends, optimize_graph, partition_graph,
                                    register_subgraph_property, unregister_subgraph_backend)
from mxc.errors import PartitionError

PLUS = ["_Plus", "elemwise_add", "_plus"]


def structure_1():
    data1 = sym.var("data1", shape=(2, 3, 10, 10))
    data2 = sym.var("data2")
    conv1 = sym.Convolution(data=data1, weight=data2, no_bias=True, kernel=(2, 2), num_filter=1)
    conv2 = sym.Convolution(data=data2, no_bias=True, kernel=(1, 1), num_filter=1)
    return sym.Group([conv1, conv2])


def structure_2():
    data = sym.var("data", shape=(2, 3, 10, 10))
    ret = sym.exp(data)
    return sym.cos(ret) + sym.sin(ret)


def structure_3():
    return sym.BatchNorm(sym.BatchNorm(structure_2()))


def structure_4():
    ret = sym.exp(sym.var("data", shape=(2, 3, 10, 10)))
    return sym.Group([ret, ret, ret])


def structure_5():
    data = sym.var("data", shape=(2, 3, 10, 10))
    return data + data


def structure_6():
    data1 = sym.var("data1", shape=(3, 3, 10, 10), dtype=np.float32)
    data2 = sym.var("data2", shape=(1, 0, 2, 2))
    return sym.Convolution(data=data1, weight=sym.sin(data2), kernel=(2, 2), num_filter=1)


def structure_7():
    data = sym.var("data", shape=(1,))
    ret1 = sym.sin(data)
    ret2 = sym.cos(ret1)
    for _ in range(5):
        ret2 = sym.cos(ret2)
    return ret1 + ret2


CASES = [
    (structure_1, ["Convolution"]),
    (structure_2, ["exp", "sin"] + PLUS),
    (structure_2, ["exp", "cos"] + PLUS),
    (structure_3, ["exp", "sin"] + PLUS),
    (structure_3, ["exp", "cos"] + PLUS),
    (structure_3, ["exp", "sin"] + PLUS + ["BatchNorm"]),
    (structure_3, ["exp", "cos"] + PLUS + ["BatchNorm"]),
    (structure_3, ["exp", "BatchNorm"]),
    (structure_3, ["BatchNorm"]),
    (structure_4, ["exp"]),
    (structure_5, ["_plus", "_Plus", "elemwise_add"]),
    (structure_6, []),
    (structure_6, ["sin"]),
    (structure_6, ["Convolution"]),
    (structure_6, ["sin", "Convolution"]),
    (structure_7, ["sin", "elemwise_add", "_plus", "_Plus"]),
]


def build(fn) -> Graph:
    with sym.NameManager():
        return fn().graph


def random_feeds(graph: Graph, seed: int = 0) -> dict[str, np.ndarray]:
    """Uniform [0, 1) values for every input, shapes inferred as MXNet's simple_bind."""
    from mxc.compiler.infer import infer_shapes
    shapes = infer_shapes(graph)
    rng = np.random.RandomState(seed)
    return {n.name: rng.uniform(size=shapes[(n, 0)]).astype(np.float32)
            for n in graph.input_nodes()}


def assert_same_outputs(a: Graph, b: Graph, feeds) -> None:
    xs, ys = run_graph(a, feeds), run_graph(b, feeds)
    assert len(xs) == len(ys)
    for i, (x, y) in enumerate(zip(xs, ys)):
        np.testing.assert_array_equal(x, y, err_msg=f"output {i}")


@pytest.mark.parametrize("fn,op_names", CASES,
                         ids=[f"{f.__name__}-{'+'.join(o) or 'none'}" for f, o in CASES])
def test_network_structures(fn, op_names):
    graph = build(fn)
    part = partition_graph(graph, "default", op_names=op_names)
    part.verify()
    assert part.list_inputs() == graph.list_inputs()
    assert part.list_arguments() == graph.list_arguments()
    assert part.list_auxiliary_states() == graph.list_auxiliary_states()
    assert_same_outputs(graph, part, random_feeds(graph))
    # every selected operator landed in exactly one _CachedOp
    selected = {n.name for n in graph.op_nodes() if n.opdef.name in op_names}
    inside = [m.name for n in part.nodes if n.op == "_CachedOp"
              for m in n.subgraphs[0].op_nodes()]
    assert sorted(inside) == sorted(selected)
    assert not selected & {n.name for n in part.op_nodes()}


def test_structure_2_names_and_order():
    part = partition_graph(build(structure_2), "default", op_names=["exp", "sin"] + PLUS)
    first, second = [n for n in part.nodes if n.op == "_CachedOp"]
    assert (first.name, second.name) == ("_CachedOp0", "_CachedOp1")
    assert first.subgraphs[0].list_inputs() == ["data0"]
    assert [e.node.name for e in first.subgraphs[0].outputs] == ["exp0", "sin0"]
    # cos0 sits between the two regions; the adjacent region's input is named
    # after the first subgraph node's output
    assert second.subgraphs[0].list_inputs() == ["cos0_output0", "_CachedOp0_sin0_output0"]
    assert [(e.node.name, e.index) for e in second.inputs] == [("cos0", 0), ("_CachedOp0", 1)]
    assert part.list_outputs() == ["_CachedOp1__plus0_output"]


def test_repeated_input_entry_gets_numbered_variables():
    part = partition_graph(build(structure_5), "default", op_names="elemwise_add")
    (node,) = [n for n in part.nodes if n.op == "_CachedOp"]
    assert node.subgraphs[0].list_inputs() == ["data0", "data1"]
    assert [e.node.name for e in node.inputs] == ["data", "data"]


def test_dedup_subgraph_option_shares_variables():
    part = partition_graph(build(structure_5), "default", op_names="elemwise_add",
                           dedup_subgraph=True)
    (node,) = [n for n in part.nodes if n.op == "_CachedOp"]
    assert node.subgraphs[0].list_inputs() == ["data0"]
    assert [e.node.name for e in node.inputs] == ["data"]
    graph = build(structure_5)
    assert_same_outputs(graph, part, random_feeds(graph))


def test_repeated_heads_names_follow_cached_op():
    part = partition_graph(build(structure_4), "default", op_names=["exp"])
    assert part.list_outputs() == ["_CachedOp0_exp0_output", "_CachedOp0_exp0_copy0_output",
                                   "_CachedOp0_exp0_copy0_0_copy_output"]
    (node,) = [n for n in part.nodes if n.op == "_CachedOp"]
    assert [(e.node.name, e.index) for e in node.subgraphs[0].outputs] == [("exp0", 0)] * 3


def test_cycle_breaking_structure_7():
    part = partition_graph(build(structure_7), "default", op_names="sin,elemwise_add")
    regions = [[m.name for m in n.subgraphs[0].op_nodes()]
               for n in part.nodes if n.op == "_CachedOp"]
    assert regions == [["sin0"], ["_plus0"]]


def test_aux_states_stay_aux_through_cached_op():
    graph = build(structure_3)
    part = partition_graph(graph, "default", op_names="BatchNorm")
    (node,) = [n for n in part.nodes if n.op == "_CachedOp"]
    assert node.opdef.mutable_inputs(node.params) == [3, 4, 7, 8]
    assert part.list_auxiliary_states() == graph.list_auxiliary_states()
    assert [e.version for e in node.inputs] == [0, 0, 0, 1, 1, 0, 0, 1, 1]


def test_input_graph_untouched_and_unknown_ops_kept():
    graph = build(structure_2)
    before = graph.copy()
    partition_graph(graph, "default", op_names="exp,sin,elemwise_add")
    assert graph_diff(graph, before) is None
    with pytest.raises(PartitionError, match="'not_an_op'"):   # not silently 0 regions
        partition_graph(graph, "default", op_names="not_an_op")
    part = partition_graph(graph, "default", op_names="Convolution")  # an op it does not have
    assert graph_diff(part, graph) is None


def test_variables_are_never_selected():
    part = partition_graph(build(structure_5), "default", op_names="null,elemwise_add")
    (node,) = [n for n in part.nodes if n.op == "_CachedOp"]
    assert [n.name for n in node.subgraphs[0].nodes if n.op is None] == ["data0", "data1"]


def test_graph_output_inside_region_and_adjacent_regions():
    with sym.NameManager():
        x = sym.var("x", shape=(2,))
        a = sym.exp(x)
        b = sym.negative(a)
        c = sym.sin(b)
        out = sym.Group([a, c, b])
    graph = out.graph
    part = partition_graph(graph, "default", op_names="exp,sin")
    names = [n.name for n in part.nodes if n.op == "_CachedOp"]
    assert names == ["_CachedOp0", "_CachedOp1"]
    assert part.list_outputs()[0] == "_CachedOp0_exp0_output"
    assert_same_outputs(graph, part, {"x": np.array([0.5, -1.0], np.float32)})


def test_unknown_backend_lists_registered_ones():
    with pytest.raises(PartitionError, match=r"unknown subgraph backend 'nope'.*default"):
        partition_graph(build(structure_2), "nope")
    with pytest.raises(PartitionError, match="registered backends"):
        optimize_graph(build(structure_2), "nope", options={})
    assert {"default", "default_v2"} <= set(list_subgraph_backends())


def test_missing_op_names_is_an_error():
    with pytest.raises(PartitionError, match="op_names"):
        partition_graph(build(structure_2), "default")


def test_optimize_graph_clear_and_keep():
    graph = build(structure_2)
    once = optimize_graph(graph, "default", options={"op_names": "exp,sin"})
    assert [n.name for n in once.nodes if n.op == "_CachedOp"] == ["_CachedOp0"]
    # clear=False: the earlier region is kept as it is, new regions are added
    kept = optimize_graph(once, "default", options={"op_names": "cos,elemwise_add,_CachedOp"},
                          clear=False)
    cached = [n for n in kept.nodes if n.op == "_CachedOp"]
    assert len(cached) == 2
    assert graph_diff(cached[0].subgraphs[0], once.node("_CachedOp0").subgraphs[0]) is None
    assert_same_outputs(graph, kept, random_feeds(graph))
    # clear=True: start again from the unpartitioned graph
    fresh = optimize_graph(once, "default", options={"op_names": "cos,elemwise_add"})
    direct = optimize_graph(graph, "default", options={"op_names": "cos,elemwise_add"})
    assert graph_diff(fresh, direct) is None


def test_optimize_graph_exposes_shapes_and_dtypes():
    seen = {}

    class Probe(SubgraphProperty):
        def pre_partition(self, graph, ctx):
            out = graph.outputs[0]
            seen["shape"] = ctx.shape(out)
            seen["dtype"] = ctx.dtype(out)

        def create_selector(self):
            return SubgraphSelector()

    register_subgraph_property("probe_backend", Probe)
    try:
        graph = build(structure_2)
        optimize_graph(graph, "probe_backend", options={}, shapes={"data": (2, 3, 10, 10)},
                       dtypes={"data": "float16"})
        assert seen == {"shape": (2, 3, 10, 10), "dtype": "float16"}
        optimize_graph(graph, "probe_backend", options={})
        assert seen == {"shape": None, "dtype": None}
    finally:
        unregister_subgraph_backend("probe_backend")


def test_property_objects_and_backend_registry():
    graph = build(structure_2)
    direct = partition_graph(graph, DefaultSubgraphProperty(op_names=["exp"]))
    by_name = partition_graph(graph, "default", op_names="exp")
    assert graph_diff(direct, by_name) is None

    class Twice(DefaultSubgraphProperty):
        pass

    register_subgraph_property("two_steps", Twice, op_names="exp", property_name="first")
    register_subgraph_property("two_steps", Twice, op_names="sin", property_name="second")
    try:
        backend = get_subgraph_backend("two_steps")
        assert [p.name for p in backend.create_properties()] == ["first", "second"]
        part = partition_graph(graph, "two_steps")
        # each property numbers its own subgraphs from 0; names stay unique
        assert [n.name for n in part.nodes if n.op == "_CachedOp"] == ["_CachedOp0",
                                                                      "_CachedOp0_1"]
        assert_same_outputs(graph, part, random_feeds(graph))
    finally:
        unregister_subgraph_backend("two_steps")


def test_disabled_property_is_skipped():
    graph = build(structure_2)
    part = partition_graph(graph, DefaultSubgraphProperty(op_names="exp", disable=True))
    assert graph_diff(part, graph) is None


class _KeepFirst(OpNameSelector):
    node_determined = False

    def filter(self, candidates):
        return candidates[:1]


class _FilterProperty(DefaultSubgraphProperty):
    def __init__(self, selector_cls, **kw):
        super().__init__(**kw)
        self.selector_cls = selector_cls

    def create_selector(self):
        return self.selector_cls(self.op_names)


def test_filter_may_drop_nodes():
    graph = build(structure_2)
    part = partition_graph(graph, _FilterProperty(_KeepFirst, op_names="exp,sin,elemwise_add"))
    regions = [[m.name for m in n.subgraphs[0].op_nodes()]
               for n in part.nodes if n.op == "_CachedOp"]
    assert regions == [["exp0"], ["sin0"], ["_plus0"]]
    assert_same_outputs(graph, part, random_feeds(graph))


def test_filter_adding_nodes_is_an_error():
    class Adds(OpNameSelector):
        node_determined = False

        def filter(self, candidates):
            return candidates + [Node("exp", "intruder")]

    with pytest.raises(PartitionError, match="intruder.*not among the pre-selected"):
        partition_graph(build(structure_2), _FilterProperty(Adds, op_names="exp"))


def test_filter_creating_a_cycle_is_an_error():
    class DropMiddle(OpNameSelector):
        node_determined = False

        def filter(self, candidates):
            return [c for c in candidates if c.name != "b"]

    with sym.NameManager():
        x = sym.var("x")
        a = sym.exp(x, name="a")
        b = sym.exp(a, name="b")
        c = sym.elemwise_add(b, a, name="c")
    with pytest.raises(PartitionError, match="cycle through 'b'"):
        partition_graph(c.graph, _FilterProperty(DropMiddle, op_names="exp,elemwise_add"))


def test_split_components_after_filter():
    class DropMiddle(OpNameSelector):
        node_determined = False

        def filter(self, candidates):
            return [c for c in candidates if c.name != "b"]

    class Split(_FilterProperty):
        split_components = True

    with sym.NameManager():
        c = sym.exp(sym.exp(sym.exp(sym.var("x"), name="a"), name="b"), name="c")
    # a -> b -> c without b: one region would feed itself through b ...
    with pytest.raises(PartitionError, match="cycle through 'b'"):
        partition_graph(c.graph, _FilterProperty(DropMiddle, op_names="exp"))
    # ... split into connected components, {a} and {c} are fine
    part = partition_graph(c.graph, Split(DropMiddle, op_names="exp"))
    regions = [[m.name for m in n.subgraphs[0].op_nodes()]
               for n in part.nodes if n.op == "_CachedOp"]
    assert regions == [["a"], ["c"]]
    assert [n.name for n in part.nodes if n.op == "_CachedOp"] == ["_CachedOp0", "_CachedOp1"]
    assert_same_outputs(c.graph, part, {"x": np.array([0.25], np.float32)})


def test_selector_exceptions_name_the_node():
    class Broken(OpNameSelector):
        node_determined = False

        def select_output(self, node, output_node):
            raise RuntimeError("boom")

    with pytest.raises(PartitionError, match=r"select_output\('exp0', 'cos0'\) raised "
                                             r"RuntimeError: boom"):
        partition_graph(build(structure_2), _FilterProperty(Broken, op_names="exp,cos"))


def test_reject_by_create_subgraph_node_keeps_graph():
    class Rejects(DefaultSubgraphProperty):
        def create_subgraph_node(self, subgraph, subgraph_id, selector):
            if subgraph_id == 0:
                return None
            return super().create_subgraph_node(subgraph, subgraph_id, selector)

    graph = build(structure_2)
    part = partition_graph(graph, Rejects(op_names="exp,sin,elemwise_add"))
    assert [n.name for n in part.nodes if n.op == "_CachedOp"] == ["_CachedOp1"]
    assert part.node("exp0").op == "exp"
    part.verify()
    assert_same_outputs(graph, part, random_feeds(graph))


def test_control_dependencies_are_rejected():
    a = Node(None, "a")
    b = Node("exp", "b", inputs=[Entry(a)])
    c = Node("exp", "c", inputs=[Entry(a)], control_deps=[b])
    graph = Graph([a, b, c], [Entry(c), Entry(b)])
    with pytest.raises(PartitionError, match="control dependencies"):
        partition_graph(graph, "default", op_names="exp")


def test_context_dedup_flag():
    assert PartitionContext(options={"dedup_subgraph": "True"}).dedup_subgraph
    assert not PartitionContext(options={"dedup_subgraph": "False"}).dedup_subgraph


def test_two_argument_create_subgraph_node_and_adjust_properties():
    made = []

    class Mine(SubgraphProperty):
        def create_selector(self):
            return OpNameSelector(["exp"])

        def create_subgraph_node(self, subgraph, subgraph_id):
            made.append(subgraph_id)
            return Node("_CachedOp", f"mine{subgraph_id}")

    class Adjust(SubgraphProperty):
        property_type = "adjust"

        def create_selector(self):
            return OpNameSelector(["sin", "cos"])

        def adjust_subgraph_node(self, nodes, subgraph_id):
            for n in nodes:
                n.attrs["__region__"] = str(subgraph_id)

    graph = build(structure_2)
    part = partition_graph(graph, Mine())
    assert made == [0] and part.node("mine0").subgraphs
    assert_same_outputs(graph, part, random_feeds(graph))
    adjusted = partition_graph(graph, Adjust())
    assert [(n.name, n.attrs.get("__region__")) for n in adjusted.op_nodes()] == [
        ("exp0", None), ("cos0", "0"), ("sin0", "1"), ("_plus0", None)]


def test_regions_feeding_each_other_are_broken_up():
    # MXNet 1.9.1 finds {add1, add2} and then {add0, add3, add4}: each passes its
    # cycle check (nodes of earlier regions are ignored), but once both are
    # subgraph nodes they feed each other.  mxc keeps excluding the largest node
    # re-entered through the contracted first region (add4, then add3).
    v0 = Node(None, "v0")
    add1 = Node("elemwise_add", "add1", inputs=[Entry(v0), Entry(v0)])
    add0 = Node("elemwise_add", "add0", inputs=[Entry(v0), Entry(v0)])
    e12 = Node("exp", "exp12", inputs=[Entry(add0)])
    add2 = Node("elemwise_add", "add2", inputs=[Entry(add1), Entry(e12)])
    e16 = Node("exp", "exp16", inputs=[Entry(add1)])
    add3 = Node("elemwise_add", "add3", inputs=[Entry(e16), Entry(add0)])
    add4 = Node("elemwise_add", "add4", inputs=[Entry(add2), Entry(add3)])
    graph = Graph([v0, add1, add0, e12, add2, e16, add3, add4], [Entry(add4)])
    part = partition_graph(graph, "default", op_names="elemwise_add")
    part.verify()
    by_id = sorted((n.name, [m.name for m in n.subgraphs[0].op_nodes()])
                   for n in part.nodes if n.op == "_CachedOp")
    assert by_id == [("_CachedOp0", ["add1", "add2"]), ("_CachedOp1", ["add0"]),
                     ("_CachedOp2", ["add3", "add4"])]
    assert_same_outputs(graph, part, {"v0": np.array([0.5, -0.25], np.float32)})
