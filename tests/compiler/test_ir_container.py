"""The node container's costs and list semantics (``Graph.nodes`` is a ``NodeList``).

The complexity invariant is checked by counting, not timing: ``NodeList.full_walks``
counts every O(n) walk the container makes, and inserting, erasing, membership,
name lookup and fresh names must not add to it.
"""

from __future__ import annotations

import pytest

from mxc.compiler.ir import Entry, Graph, Node
from mxc.compiler.ir.graph import copy_graph
from mxc.compiler.partition._graphutil import copy_reachable, post_order_fast
from mxc.compiler.ir import post_order
from mxc.errors import GraphError


def chain(n: int) -> Graph:
    nodes = [Node(None, "data")]
    for i in range(n - 1):
        nodes.append(Node("relu", f"r{i}", inputs=[nodes[-1].out]))
    return Graph(nodes, [nodes[-1].out])


def test_insert_erase_lookup_and_fresh_names_never_walk_the_list():
    g = chain(500)
    original = list(g.nodes)
    g.find("r0")  # build the name index once
    walks = g.nodes.full_walks
    copies = []
    for node in original:
        name = g.fresh_name(f"{node.name}_copy")
        assert g.find(name) is None
        copies.append(g.create_node("identity", name, [node.out], after=node))
        assert copies[-1] in g.nodes and g.find(name) is copies[-1]
    for c in copies[::2]:
        g.erase_node(c)
        assert c not in g.nodes and g.find(c.name) is None
    assert g.fresh_name("r0") == "r00" and len(g.nodes) == 500 + 250
    assert g.nodes.full_walks == walks, "an insert, erase or lookup walked the node list"
    # the order is what the inserts asked for
    expected = []
    for i, node in enumerate(original):
        expected.append(node)
        if i % 2:
            expected.append(copies[i])
    assert list(g.nodes) == expected
    g.verify()


def test_renaming_a_node_keeps_the_name_index_exact():
    g = chain(4)
    r1 = g.node("r1")
    r1.name = "renamed"
    assert g.find("r1") is None and g.node("renamed") is r1
    assert g.fresh_name("renamed") == "renamed0"


def test_node_list_reads_like_a_list():
    g = chain(4)
    data, r0, r1, r2 = g.nodes
    assert g.nodes == [data, r0, r1, r2] and g.nodes[0] is data and g.nodes[-1] is r2
    assert g.nodes[1:3] == [r0, r1] and g.nodes.index(r1) == 2 and len(g.nodes) == 4
    extra = Node(None, "extra")
    g.nodes.insert(0, extra)
    assert g.nodes[0] is extra and g.nodes.index(data) == 1
    g.nodes.remove(extra)
    with pytest.raises(ValueError):
        g.nodes.remove(extra)
    g.nodes.reverse()
    assert list(g.nodes) == [r2, r1, r0, data]
    g.nodes = [data, r0, r1, r2]  # assigning any iterable replaces the nodes
    assert list(reversed(g.nodes)) == [r2, r1, r0, data]
    with pytest.raises(GraphError, match="already in this graph"):
        g.nodes.append(r0)


def test_iterating_is_a_snapshot_so_inserting_during_a_loop_is_safe():
    g = chain(3)
    seen = []
    for node in g.nodes:
        seen.append(node.name)
        g.add_node(Node("identity", f"{node.name}_id", inputs=[node.out]), after=node)
    assert seen == ["data", "r0", "r1"]
    assert [n.name for n in g.nodes] == ["data", "data_id", "r0", "r0_id", "r1", "r1_id"]


def test_inserting_before_and_after_keep_creation_order():
    g = chain(3)
    data, r0, r1 = g.nodes
    with g.inserting_after(data):
        a = g.create_node("identity", "a", [data.out])
        b = g.create_node("identity", "b", [a.out])
    with g.inserting_before(r1):
        c = g.create_node("identity", "c", [r0.out])
        d = g.create_node("identity", "d", [c.out])
    e = g.create_node("identity", "e", [r1.out])  # outside any block: the end
    assert list(g.nodes) == [data, a, b, r0, c, d, r1, e]
    with pytest.raises(GraphError, match="not in this graph"):
        g.add_node(Node(None, "z"), before=Node(None, "stranger"))


def test_replace_all_uses_with_can_keep_the_replacements_own_use():
    g = chain(3)
    data, r0, r1 = g.nodes
    wrap = g.create_node("clip", "wrap", [r0.out], after=r0)
    assert g.replace_all_uses_with(r0, wrap, exclude=[wrap]) == 1
    assert wrap.inputs[0].node is r0 and r1.inputs[0].node is wrap


def test_one_post_order_and_one_copy():
    assert post_order_fast is post_order
    g = chain(4)
    dead = g.create_node("identity", "dead", [g.nodes[0].out])
    full, mapping = copy_graph(g)
    assert [n.name for n in full.nodes] == ["data", "r0", "r1", "r2", "dead"]
    assert mapping[id(dead)].name == "dead" and mapping[id(dead)] is not dead
    reach = copy_reachable(g)
    assert [n.name for n in reach.nodes] == ["data", "r0", "r1", "r2"]
    assert reach.nodes[1].inputs[0].node is reach.nodes[0]
    # a cyclic (invalid) list is still copied, edges included
    x = Node(None, "x")
    p = Node("relu", "p", inputs=[x.out])
    q = Node("relu", "q", inputs=[p.out])
    p.set_input(0, q.out)
    cyc, m = copy_graph(Graph([x, p, q], [q.out]))
    assert m[id(p)].inputs[0].node is m[id(q)] and [n.name for n in cyc.nodes] == ["x", "p", "q"]
    assert Entry(m[id(q)], 0) == cyc.outputs[0]


def test_a_node_in_two_lists_keeps_each_lists_order_exact():
    """Nodes carry the links of one list; a second list holding them must stay exact.

    Graph rebuilds (``Graph(old.topo_order(), ...)``) and views over a subset put
    the same node objects in several lists; edits through either list must never
    show up in the other.
    """
    g = chain(5)
    data, r0, r1, r2, r3 = g.nodes
    view = Graph([r3, r1, data], [r3.out])  # takes the links of three of g's nodes
    x = g.create_node("identity", "x", [r1.out], after=r1)
    y = view.create_node("identity", "y", [data.out], before=r1)
    assert list(g.nodes) == [data, r0, r1, x, r2, r3]
    assert list(view.nodes) == [r3, y, r1, data]
    g.erase_node(x)
    view.nodes.remove(r1)
    assert list(g.nodes) == [data, r0, r1, r2, r3] and r1 in g.nodes and r1 not in view.nodes
    assert x not in g.nodes and y not in g.nodes and r0 not in view.nodes
    assert g.nodes.next_of(r1) is r2 and view.nodes.prev_of(data) is y
    view.nodes.append(r1)  # r1 came back to the view, after g kept its links
    g.nodes.remove(r2)
    assert list(view.nodes) == [r3, y, data, r1] and list(g.nodes) == [data, r0, r1, r3]
    with pytest.raises(GraphError, match="already in this graph"):
        view.nodes.append(data)


def test_random_edits_on_lists_sharing_nodes_match_plain_lists():
    """An invariant check: random inserts, erases and rebuilds across three lists
    that share nodes give, after every edit, exactly what plain lists give."""
    import random

    rng = random.Random(1234)
    pool = [Node(None, f"n{i}") for i in range(40)]
    graphs = [Graph(pool[:20]), Graph(pool[10:30]), Graph(pool[5:35:2])]
    model = [list(pool[:20]), list(pool[10:30]), list(pool[5:35:2])]
    for step in range(3000):
        k = rng.randrange(3)
        g, ref = graphs[k], model[k]
        action = rng.randrange(5)
        outside = [n for n in pool if n not in ref]
        if action in (0, 1) and ref and outside:
            anchor, node = rng.choice(ref), rng.choice(outside)
            at = ref.index(anchor) + action  # 0: before, 1: after
            if action:
                g.add_node(node, after=anchor)
            else:
                g.add_node(node, before=anchor)
            ref.insert(at, node)
        elif action == 2 and ref:
            node = rng.choice(ref)
            g.nodes.remove(node)
            ref.remove(node)
        elif action == 3 and outside:
            node, at = rng.choice(outside), rng.randrange(-len(ref) - 1, len(ref) + 2)
            g.nodes.insert(at, node)  # list.insert semantics, negative and past-the-end too
            ref.insert(at, node)
        elif action == 4 and rng.random() < 0.1:
            keep = [n for n in ref if rng.random() < 0.8]
            rng.shuffle(keep)
            g.nodes = keep
            ref[:] = keep
        for gg, rr in zip(graphs, model):
            assert len(gg.nodes) == len(rr), step
            assert all(n in gg.nodes for n in rr), step
        assert list(g.nodes) == ref, step
        if ref:
            i = rng.randrange(len(ref))
            assert g.nodes.next_of(ref[i]) is (ref[i + 1] if i + 1 < len(ref) else None)
            assert g.nodes.prev_of(ref[i]) is (ref[i - 1] if i else None)
    for gg, rr in zip(graphs, model):
        assert list(gg.nodes) == rr
        assert [n for n in pool if n in gg.nodes] == [n for n in pool if n in rr]
