"""The pass API: registration, options, PassContext edits, parameters, failures."""

from __future__ import annotations

import io

import numpy as np
import pytest

import mxc
from mxc.compiler.ir import Entry, Graph, Node
from mxc.compiler.passes import (Option, Pass, PassContext, PassManager, PassTiming,
                                 PrintIRAfterAll, PrintIRAfterFailure, get_pass, list_passes,
                                 unregister_pass)
from mxc.compiler.passes.manager import check_graph
from mxc.errors import PassError

from _pass_test_utils import graph_of


@pytest.fixture
def temp_pass():
    """``@temp_pass("name")`` registers a pass for one test only."""
    names = []

    def register(name, target=None, **kwargs):
        names.append(name)
        return mxc.register_pass(name, target, override=True, **kwargs)

    yield register
    for name in names:
        unregister_pass(name)


def exp_log_symbol():
    a, b = mxc.sym.var("a"), mxc.sym.var("b")
    return mxc.sym.log(mxc.sym.exp(mxc.sym.elemwise_add(a, b, name="_plus0"), name="exp0"),
                       name="log0")


def fc_symbol(**attrs):
    return mxc.sym.FullyConnected(mxc.sym.var("data"), num_hidden=3, name="fc", **attrs)


# -- registration and options ------------------------------------------------------------
def test_function_pass_gets_graph_and_string_options(temp_pass):
    seen = {}

    @temp_pass("t-echo")
    def echo(graph, options):
        """Record the options."""
        seen.update(options)
        seen["nodes"] = len(graph.nodes)

    sym = exp_log_symbol()
    out = sym.optimize_for("t-echo", myOpt="yello", flag=True, names=["a", "b"])
    assert seen == {"myOpt": "yello", "flag": "True", "names": "a,b", "nodes": 5}
    assert out.tojson() == sym.tojson()
    info = get_pass("t-echo")
    assert info.summary == "Record the options." and info.extra_options


def test_class_pass_declares_typed_options(temp_pass):
    @temp_pass("t-typed")
    class Typed(Pass):
        """A pass with typed options."""
        count = Option(int, 2, "how many")
        names = Option(list[str], [], "some names")
        enabled = Option(bool, False, "switch")

        def run(self, graph, ctx):
            assert (self.count, self.names, self.enabled) == \
                (ctx["count"], ctx["names"], ctx["enabled"])
            graph.attrs["seen"] = [self.count, self.names, self.enabled]

    r = mxc.passes.run(exp_log_symbol(), "t-typed{count=5 names=x;y enabled=true}")
    assert r.graph.attrs["seen"] == [5, ["x", "y"], True]
    r = mxc.passes.run(exp_log_symbol(), [("t-typed", {"names": ("p",)})])
    assert r.graph.attrs["seen"] == [2, ["p"], False]
    out = exp_log_symbol().optimize_for("t-typed", count=7, names="u,v")
    assert out.graph.attrs["seen"] == [7, ["u", "v"], False]
    assert "count: int, default 2 -- how many" in mxc.passes.describe_passes()
    with pytest.raises(mxc.passes.PipelineError, match="has no option 'cont'.*did you mean"):
        mxc.passes.run(exp_log_symbol(), "t-typed{cont=1}")
    with pytest.raises(PassError, match=r"option count=many is invalid: expected an integer"):
        exp_log_symbol().optimize_for("t-typed", count="many")


def test_declared_function_options_are_strict(temp_pass):
    @temp_pass("t-strict", options={"eps": Option(float, 1e-3, "epsilon")})
    def strict(graph, ctx):
        graph.attrs["eps"] = ctx["eps"]

    assert mxc.passes.run(exp_log_symbol(), "t-strict{eps=0.5}").graph.attrs["eps"] == 0.5
    assert mxc.passes.run(exp_log_symbol(), "t-strict").graph.attrs["eps"] == 1e-3
    with pytest.raises(PassError, match="has no option 'epsilon'"):
        mxc.passes.run(exp_log_symbol(), "t-strict{epsilon=1}")


def test_registration_guards(temp_pass):
    temp_pass("t-dup", lambda g, c: None)
    with pytest.raises(PassError, match="already registered"):
        mxc.register_pass("t-dup", lambda g, c: None)
    with pytest.raises(PassError, match="invalid pass name"):
        mxc.register_pass("bad,name", lambda g, c: None)
    with pytest.raises(PassError, match="unknown pass 'no-such-pass'"):
        get_pass("no-such-pass")
    assert "t-dup" in [p.name for p in list_passes()]


# -- the rewriter and parameters ----------------------------------------------------------
def test_alloc_arg_updates_the_callers_args(temp_pass):
    @temp_pass("t-add-bias")
    def add_bias(graph, ctx):
        """Give every FullyConnected without a bias a bias of ones."""
        for node in list(graph.nodes):
            if node.op == "FullyConnected" and node.params.no_bias:
                node.attrs["no_bias"] = "False"
                bias = ctx.alloc_arg(f"{node.name}_bias", value=np.ones(3, np.float32))
                ctx.connect(bias, node)

    w = np.arange(6, dtype=np.float32).reshape(3, 2)
    args, aux = {"fc_weight": w}, {}
    out = fc_symbol(no_bias=True).optimize_for("t-add-bias", args, aux)
    assert sorted(args) == ["fc_bias", "fc_weight"] and aux == {}
    np.testing.assert_array_equal(args["fc_bias"], np.ones(3))
    assert out.list_arguments() == ["data", "fc_weight", "fc_bias"]
    data = np.ones((1, 2), np.float32)
    got = out.bind(args={**args, "data": data}).forward()[0]
    np.testing.assert_allclose(got, data @ w.T + 1)


def test_alloc_on_an_existing_variable_replaces_its_array(temp_pass):
    @temp_pass("t-double")
    def double(graph, ctx):
        w = graph.node("fc_weight")
        ctx.alloc_arg(w, value=ctx.param(w) * 2)

    args = {"fc_weight": np.ones((3, 2), np.float32), "fc_bias": np.zeros(3, np.float32)}
    r = mxc.passes.run(fc_symbol(), "t-double", args)
    np.testing.assert_array_equal(r.args["fc_weight"], 2 * np.ones((3, 2)))
    assert r.allocated == {"fc_weight": "arg"} and r.removed == []
    np.testing.assert_array_equal(args["fc_weight"], np.ones((3, 2)))  # input untouched


def test_alloc_aux_goes_to_aux(temp_pass):
    @temp_pass("t-aux")
    def add_state(graph, ctx):
        state = ctx.alloc_aux("state", shape=(2,), dtype="float16")
        assert ctx.param(state).dtype == np.float16 and not ctx.param("state").any()
        out = graph.outputs[0]
        graph.outputs[0] = ctx.add_node("broadcast_add", [out, state]).out

    args, aux = {}, {}
    exp_log_symbol().optimize_for("t-aux", args, aux)
    assert args == {} and list(aux) == ["state"] and aux["state"].shape == (2,)


def test_unused_allocations_are_dropped(temp_pass):
    @temp_pass("t-orphan")
    def orphan(graph, ctx):
        ctx.alloc_arg("orphan", shape=(4,))  # never connected to anything

    args = {}
    exp_log_symbol().optimize_for("t-orphan", args, {})
    assert args == {}


def test_removing_a_param_node_deletes_the_param(temp_pass):
    @temp_pass("t-drop-bias")
    def drop_bias(graph, ctx):
        """Drop FullyConnected biases."""
        for node in list(graph.nodes):
            if node.op == "FullyConnected" and not node.params.no_bias:
                bias = ctx.disconnect(node, 2).node
                node.attrs["no_bias"] = "True"
                ctx.erase(bias)

    args = {"fc_weight": np.ones((3, 2), np.float32), "fc_bias": np.ones(3, np.float32),
            "unrelated": np.zeros(1)}
    out = fc_symbol().optimize_for("t-drop-bias", args, {})
    assert sorted(args) == ["fc_weight", "unrelated"]  # names never in the graph are kept
    assert out.list_arguments() == ["data", "fc_weight"]


def test_disconnected_params_are_removed_too(temp_pass):
    @temp_pass("t-bypass")
    def bypass(graph, ctx):
        fc = graph.node("fc")
        ctx.replace_all_uses(fc, ctx.add_node("negative", [fc.inputs[0]]))

    args = {"fc_weight": np.ones((3, 2)), "fc_bias": np.ones(3)}
    r = mxc.passes.run(fc_symbol(), "t-bypass", args)
    assert r.args == {} and sorted(r.removed) == ["fc_bias", "fc_weight"]
    assert sorted(args) == ["fc_bias", "fc_weight"]  # run() never mutates its inputs


def test_alloc_without_dicts_is_an_error(temp_pass):
    @temp_pass("t-alloc")
    def alloc(graph, ctx):
        out = graph.outputs[0]
        graph.outputs[0] = ctx.add_node("broadcast_add", [out, ctx.alloc_arg("extra", (1,))]).out

    with pytest.raises(PassError, match="allocated arg parameter.*extra.*no arg dict"):
        exp_log_symbol().optimize_for("t-alloc")
    args = {}
    exp_log_symbol().optimize_for("t-alloc", args)
    assert list(args) == ["extra"]
    with pytest.raises(PassError, match="pass args and aux as dicts"):
        exp_log_symbol().optimize_for("t-alloc", [np.ones((3, 2)), np.ones((3, 2))], {})


def test_a_pass_may_return_a_new_graph(temp_pass):
    @temp_pass("t-new-graph")
    def new_graph(graph, ctx):
        x = Node(None, "x")
        y = Node("negative", "y", inputs=[x.out])
        return Graph([x, y], [y.out])

    assert mxc.passes.run(exp_log_symbol(), "t-new-graph").symbol.list_inputs() == ["x"]


def test_context_verbs_and_order_repair():
    g = graph_of("""  %x = var
  %e = exp(%x)
  return %e""")
    ctx = PassContext(g, {"k": "v", "my_opt": 1})
    assert dict(ctx) == {"k": "v", "my_opt": 1} and ctx["my-opt"] == 1
    e = g.node("e")
    w = ctx.add_input("w", shape=(2, 3), dtype="float32")
    assert w.attrs == {"__shape__": "(2, 3)", "__dtype__": "0"}
    add = ctx.add_node("elemwise_add", [e, w], name="add")
    relu = ctx.add_node("Activation", [add], {"act_type": "relu"})
    assert relu.name == "activation" and relu.attrs == {"act_type": "relu"}
    assert ctx.replace_all_uses(e, relu, exclude=[add]) == 1
    assert g.outputs == [relu.out] and add.inputs[0] == e.out
    g.nodes.reverse()  # passes need not keep the list sorted ...
    check_graph(g)     # ... the manager restores a topological order
    assert [n.name for n in g.nodes] == ["x", "e", "w", "add", "activation"]
    with pytest.raises(mxc.MxcError, match="unknown attribute 'act'"):
        ctx.add_node("Activation", [add], {"act": "relu"})
    assert add.users == [relu]  # the rejected node left no use behind
    with pytest.raises(PassError, match="already exists"):
        ctx.add_node("exp", [add], name="add")
    assert ctx.disconnect(add, 1) == w.out and add.inputs == (e.out,)
    with pytest.raises(mxc.MxcError, match="still used"):
        ctx.erase(e)
    ctx.connect(w, add)
    g.outputs[0] = e.out
    assert {n.name for n in ctx.remove_dead_code()} == {"w", "add", "activation"}


# -- failures name the pass, the passes before it and the node ---------------------------
def test_a_pass_breaking_the_graph_gets_a_pass_error(temp_pass):
    @temp_pass("t-break")
    def break_graph(graph, ctx):
        """Make the log read a node that is not in the graph."""
        ghost = Node("exp", "ghost", inputs=[graph.node("a").out])
        graph.node("log0").set_input(0, ghost.out)

    with pytest.raises(PassError) as info:
        mxc.passes.run(exp_log_symbol(), "dce,cse,t-break,dce")
    err = info.value
    assert err.pass_name == "t-break" and err.previous == ("dce", "cse")
    assert err.node == "log0"
    message = str(err)
    assert "pass 't-break' (after dce, cse) left an invalid graph" in message
    assert "'ghost'" in message and "dangling" in message


def test_wrong_arity_and_cycles_are_reported(temp_pass):
    @temp_pass("t-arity")
    def arity(graph, ctx):
        ctx.connect(graph.node("a"), graph.node("exp0"))

    @temp_pass("t-cycle")
    def cycle(graph, ctx):
        ctx.connect(graph.node("log0"), graph.node("_plus0"), 0)

    with pytest.raises(PassError, match=r"'t-arity' \(the first pass.*node 'exp0'.*2 input"):
        mxc.passes.run(exp_log_symbol(), "t-arity")
    with pytest.raises(PassError, match=r"'t-cycle'.*cycle"):
        mxc.passes.run(exp_log_symbol(), "t-cycle")


def test_exceptions_and_fail_are_wrapped(temp_pass):
    @temp_pass("t-raise")
    def boom(graph, ctx):
        raise KeyError("nope")

    @temp_pass("t-fail")
    def fail(graph, ctx):
        ctx.fail("cannot handle this", graph.node("exp0"))

    @temp_pass("t-returns-junk")
    def junk(graph, ctx):
        return 42

    with pytest.raises(PassError, match=r"pass 't-raise' \(after dce\) failed: KeyError"):
        mxc.passes.run(exp_log_symbol(), "dce,t-raise")
    with pytest.raises(PassError, match="node 'exp0': cannot handle this") as info:
        mxc.passes.run(exp_log_symbol(), "t-fail")
    assert info.value.node == "exp0"
    with pytest.raises(PassError, match="returned int"):
        mxc.passes.run(exp_log_symbol(), "t-returns-junk")


def test_verify_each_can_be_turned_off(temp_pass):
    @temp_pass("t-unsorted-dangling")
    def dangle(graph, ctx):
        ghost = Node("exp", "ghost", inputs=[graph.node("a").out])
        graph.node("log0").set_input(0, ghost.out)

    @temp_pass("t-repair")
    def repair(graph, ctx):
        log0 = graph.node("log0")
        log0.set_input(0, graph.node("exp0").out)

    # checked after each pass: the broken intermediate graph is caught
    with pytest.raises(PassError, match="t-unsorted-dangling"):
        mxc.passes.run(exp_log_symbol(), "t-unsorted-dangling,t-repair")
    # checked only at the end: the repaired graph passes
    r = mxc.passes.run(exp_log_symbol(), "t-unsorted-dangling,t-repair", verify_each=False)
    assert r.symbol.tojson() == exp_log_symbol().tojson()


def test_instruments_timing_and_print_ir(temp_pass):
    @temp_pass("t-fail-late")
    def fail(graph, ctx):
        raise ValueError("late")

    timing, after, failure = PassTiming(), io.StringIO(), io.StringIO()
    manager = PassManager("cse,dce", instruments=[timing, PrintIRAfterAll(after)])
    manager.run(exp_log_symbol())
    assert [name for name, _ in timing.timings] == ["cse", "dce"]
    assert "total" in timing.report() and timing.total >= 0
    text = after.getvalue()
    assert "// ----- IR after pass 1/2: cse -----" in text
    assert "// ----- IR after pass 2/2: dce -----" in text and "%log0 = log(%exp0)" in text
    with pytest.raises(PassError):
        PassManager("dce,t-fail-late", instruments=[timing, PrintIRAfterFailure(failure)]) \
            .run(exp_log_symbol())
    assert "IR after FAILED pass 2/2: t-fail-late" in failure.getvalue()
    assert timing.timings[-1][0] == "t-fail-late (failed)"


def test_statistics_are_collected_per_pass(temp_pass):
    @temp_pass("t-count")
    def count(graph, ctx):
        for _ in graph.nodes:
            ctx.stat("nodes seen")
        ctx.stat("ops", len(graph.op_nodes()))

    r = mxc.passes.run(exp_log_symbol(), "t-count,dce")
    assert r.statistics == [("t-count", {"nodes seen": 5, "ops": 3}), ("dce", {})]


def test_pipeline_strings_run_through_optimize_for():
    x = mxc.sym.var("data")
    y = mxc.sym.Dropout(mxc.sym._copy(x, name="c"), p=0.3, name="drop")
    out = y.optimize_for("remove-dropout,simplify")
    assert [n.op for n in out.graph.topo_order()] == [None, "_copy"]  # output kept named
    with pytest.raises(PassError, match="carries its options in braces"):
        y.optimize_for("remove-dropout,simplify", always=True)


def test_unknown_names_still_reach_the_partitioner():
    with pytest.raises(mxc.MxcError, match="no-such-backend"):
        exp_log_symbol().optimize_for("no-such-backend")
    assert isinstance(exp_log_symbol().graph.outputs[0], Entry)
