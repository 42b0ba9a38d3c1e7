"""MXNet's ``example/extensions/lib_pass`` and ``addInputPass`` flows, as Python passes.

* ``myPass`` prints its options and the graph and keeps the graph;
* ``addInputPass`` gives every subgraph node of a custom partitioner an extra
  input (``__ext_extra_inputs__``) and allocates its parameter, chained after
  partitioning with ``clear=False``;
* a pass that removes a parameter's node removes the parameter.
"""

from __future__ import annotations

import numpy as np
import pytest

import mxc
from mxc.compiler.ops.subgraph import EXTRA_INPUTS_ATTR
from mxc.compiler.partition import ANY_SUBGRAPH, Partitioner, register_partitioner
from mxc.compiler.partition.registry import unregister_subgraph_backend
from mxc.compiler.passes import unregister_pass

SUBGRAPH_OP = "_t_pass_subgraph_op"  # our own name: the op registry is process-wide


@pytest.fixture(autouse=True)
def lib_passes():
    @mxc.register_pass("myPass", override=True)
    def my_pass(graph, options):
        """Print the options and the graph; keep the graph as it is."""
        for key, value in options.items():
            print(f"option: {key} ==> {value}")
        print(graph)

    @mxc.register_pass("addInputPass", override=True)
    def add_input_pass(graph, ctx):
        """Add an extra input, with a parameter of shape (1,), to every subgraph node."""
        for node in list(graph.nodes):
            if node.op == SUBGRAPH_OP:
                node.attrs[EXTRA_INPUTS_ATTR] = "1"
                extra = ctx.add_input(f"{node.name}_input")
                ctx.connect(extra, node)
                ctx.alloc_arg(extra, shape=(1,), dtype="float32")

    def supported_ops(graph, ids, options):
        for i, node in enumerate(graph.nodes):
            if node.op in ("exp", "log"):
                ids[i] = ANY_SUBGRAPH

    part = Partitioner("t-myProp").add_strategy("strategy1", SUBGRAPH_OP,
                                                supported_ops=supported_ops)
    register_partitioner("t-myProp", part)
    yield
    unregister_pass("myPass")
    unregister_pass("addInputPass")
    unregister_subgraph_backend("t-myProp")


def model():
    a, b = mxc.sym.var("a"), mxc.sym.var("b")
    c = mxc.sym.elemwise_add(a, b, name="_plus0")
    return mxc.sym.log(mxc.sym.exp(c, name="exp0"), name="log0")


def ones():
    return {"a": np.ones((3, 2), np.float32), "b": np.ones((3, 2), np.float32)}


def forward(sym, args):
    return sym.bind(args=args).forward()[0]


def test_my_pass_prints_and_keeps_the_graph(capsys):
    sym = model()
    expected = forward(sym, ones())
    # with shapes/types: args given as a list, in list_arguments order
    sym2 = sym.optimize_for("myPass", [np.ones((3, 2), np.float32)] * 2, [])
    assert sym2.tojson() == sym.tojson()
    np.testing.assert_allclose(forward(sym2, ones()), expected)
    # without shapes/types, with a user option
    sym3 = sym.optimize_for("myPass", myOpt="yello")
    np.testing.assert_allclose(forward(sym3, ones()), expected)
    printed = capsys.readouterr().out
    assert "option: myOpt ==> yello" in printed
    assert printed.count("%exp0 = exp(%_plus0)") == 2 and "%log0 = log(%exp0)" in printed


def test_add_input_pass_after_partitioning():
    sym = model()
    args, aux = ones(), {}
    expected = forward(sym, args)
    part = sym.optimize_for("t-myProp", args, aux)
    (sg,) = [n for n in part.graph.topo_order() if n.op == SUBGRAPH_OP]
    assert len(sg.inputs) == 1 and sorted(args) == ["a", "b"]
    chained = part.optimize_for("addInputPass", args, aux, clear=False)
    (sg,) = [n for n in chained.graph.topo_order() if n.op == SUBGRAPH_OP]
    assert sg.attrs[EXTRA_INPUTS_ATTR] == "1"
    assert [e.node.name for e in sg.inputs] == ["_plus0", f"{sg.name}_input"]
    assert sorted(args) == ["_op0_input", "a", "b"] and aux == {}
    assert args["_op0_input"].shape == (1,) and args["_op0_input"].dtype == np.float32
    assert chained.list_arguments() == ["a", "b", "_op0_input"]
    np.testing.assert_allclose(forward(chained, args), expected)
    # JSON round trip keeps the extra input
    again = mxc.sym.load_json(chained.tojson())
    np.testing.assert_allclose(forward(again, args), expected)


def test_clear_true_undoes_the_partitioning_first():
    args = ones()
    part = model().optimize_for("t-myProp", args, {})
    cleared = part.optimize_for("addInputPass", args, {})  # clear=True: regions inlined
    assert SUBGRAPH_OP not in {n.op for n in cleared.graph.topo_order()}
    assert sorted(args) == ["a", "b"]


def test_the_same_flow_as_one_pipeline():
    r = mxc.passes.run(model(), "partition{backend=t-myProp},addInputPass", ones())
    assert sorted(r.args) == ["_op0_input", "a", "b"] and r.allocated == {"_op0_input": "arg"}
    np.testing.assert_allclose(forward(r.symbol, r.args), forward(model(), ones()))


def test_a_pass_removing_a_param():
    @mxc.register_pass("removeBiasPass", override=True)
    def remove_bias(graph, ctx):
        """Replace broadcast_add(x, bias) by x; the bias variable goes away."""
        for node in list(graph.nodes):
            if node.op == "broadcast_add" and node.inputs[1].node.name == "bias":
                ctx.replace_all_uses(node, node.inputs[0])
                bias = node.inputs[1].node
                ctx.erase(node)
                ctx.erase(bias)

    try:
        x, w, bias = mxc.sym.var("x"), mxc.sym.var("w"), mxc.sym.var("bias")
        sym = mxc.sym.exp(mxc.sym.broadcast_add(mxc.sym.broadcast_mul(x, w), bias))
        args = {"w": np.full(2, 2, np.float32), "bias": np.ones(2, np.float32)}
        out = sym.optimize_for("removeBiasPass", args, {})
        assert sorted(args) == ["w"] and out.list_arguments() == ["x", "w"]
        got = forward(out, {**args, "x": np.ones(2, np.float32)})
        np.testing.assert_allclose(got, np.exp([2, 2]))
    finally:
        unregister_pass("removeBiasPass")
