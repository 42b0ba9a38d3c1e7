"""The IR's invariants: use bookkeeping, mutation helpers, verify(), copies."""

from __future__ import annotations

import pytest

from mxc.compiler.ir import Entry, Graph, Node, post_order
from mxc.errors import GraphError, VerificationError


def small_graph():
    x = Node(None, "x")
    a = Node("exp", "a", inputs=[x.out])
    b = Node("elemwise_add", "b", inputs=[a.out, a.out])
    return Graph([x, a, b], [b.out]), x, a, b


def test_users_are_counted_per_slot():
    g, x, a, b = small_graph()
    assert a.users == [b]
    assert a.num_uses() == 2 and a.num_uses(b) == 2
    b.set_input(0, x.out)
    assert a.num_uses(b) == 1 and x.users == [a, b]
    b.inputs = [x.out, x.out]
    assert a.users == [] and x.num_uses() == 3


def test_replace_all_uses_updates_inputs_and_outputs():
    g, x, a, b = small_graph()
    c = g.create_node("negative", "c", [x.out], after=x)
    assert g.replace_all_uses_with(a.out, c.out) == 2
    assert [e.node for e in b.inputs] == [c, c]
    assert g.replace_all_uses_with(b.out, c.out) == 1
    assert g.outputs == [c.out]
    removed = g.eliminate_dead_code()
    assert {n.name for n in removed} == {"a", "b"}
    assert [n.name for n in g.nodes] == ["x", "c"]
    assert x.users == [c]


def test_erase_node_refuses_used_nodes():
    g, x, a, b = small_graph()
    with pytest.raises(GraphError, match="still used by 'b'"):
        g.erase_node(a)
    with pytest.raises(GraphError, match="graph output"):
        g.erase_node(b)


def test_topo_order_is_mxnet_dfs_order():
    x = Node(None, "x")
    w = Node(None, "w")
    a = Node("exp", "a", inputs=[w.out])
    b = Node("elemwise_add", "b", inputs=[x.out, a.out])
    g = Graph([a, w, x, b], [b.out])  # deliberately unsorted node list
    assert [n.name for n in g.topo_order()] == ["x", "w", "a", "b"]
    assert g.list_inputs() == ["x", "w"]
    g.sort()
    assert [n.name for n in g.nodes] == ["x", "w", "a", "b"]


def test_post_order_detects_cycles_without_recursion():
    nodes = [Node(None, "v")]
    for i in range(50_000):  # far deeper than Python's recursion limit
        nodes.append(Node("exp", f"n{i}", inputs=[nodes[-1].out]))
    assert len(post_order([nodes[-1]])) == 50_001
    a = Node("exp", "a")
    b = Node("exp", "b", inputs=[a.out])
    a.inputs = [b.out]
    with pytest.raises(GraphError, match="cycle"):
        post_order([b])


def test_verify_reports_dangling_entries_and_arity():
    g, x, a, b = small_graph()
    g.verify()
    stray = Node(None, "stray")
    a.inputs = [stray.out]
    with pytest.raises(VerificationError, match="'a' input 0 refers to 'stray'.*dangling"):
        g.verify()
    a.inputs = [x.out, x.out]
    with pytest.raises(VerificationError, match=r"'a' \(exp\) has 2 input\(s\), expected 1"):
        g.verify()


def test_verify_reports_bad_output_index_and_order():
    g, x, a, b = small_graph()
    b.set_input(1, Entry(a, 3))
    with pytest.raises(VerificationError, match="reads output 3 of 'a', which has 1 output"):
        g.verify()
    b.set_input(1, a.out)
    g.nodes = [x, b, a]
    with pytest.raises(VerificationError, match="comes later"):
        g.verify()


def test_verify_rejects_duplicate_variable_names_only():
    g, x, a, b = small_graph()
    b.name = "a"  # operators may share a name (a Gluon block called twice)
    g.verify()
    y = Node(None, "x")
    g.add_node(y, before=a)
    a.set_input(0, y.out)
    with pytest.raises(VerificationError, match="variable name 'x' is used twice"):
        Graph([x, y, a, b], [b.out, x.out]).verify()


def test_copy_is_deep_and_independent():
    g, x, a, b = small_graph()
    a.attrs["__note__"] = "v"
    inner = Graph([Node(None, "i")], [])
    inner.outputs = [inner.nodes[0].out]
    a.subgraphs = [inner]
    c = g.copy()
    ca = c.node("a")
    assert ca is not a and ca.attrs == a.attrs and ca.attrs is not a.attrs
    assert ca.subgraphs[0] is not inner and ca.subgraphs[0].nodes[0].name == "i"
    assert c.node("b").inputs[0].node is ca and ca.num_uses() == 2
    ca.attrs["__note__"] = "changed"
    assert a.attrs["__note__"] == "v"
    assert a.num_uses() == 2  # the original's bookkeeping is untouched


def test_fresh_name():
    g, *_ = small_graph()
    assert g.fresh_name("a") == "a0"
    assert g.fresh_name("z") == "z"
