"""Types kept on the graph (``Graph.types``): computed once per graph state, dropped on
any edit, checked by ``verify()``.

The oracle for "the cache is right" is always a fresh inference
(:func:`mxc.compiler.infer.infer_fresh`, which bypasses the cache) or a shape
worked out by hand; the oracle for "it is computed once" is a count of
distinct graph states made from the printed IR, which knows nothing of the
cache's counters.
"""

from __future__ import annotations

import gc
import weakref
from pathlib import Path

import numpy as np
import pytest

import mxc
from mxc import sym as S
from mxc.compiler import infer
from mxc.compiler.infer import infer_fresh, question
from mxc.compiler.ir import Entry, Graph, Node, print_graph
from mxc.errors import VerificationError

REPO = Path(__file__).resolve().parents[2]
MLP = REPO / "examples" / "mlp"


def _runs() -> int:
    return sum(infer.RUNS.values())


def _mlp_graph() -> tuple[Graph, dict]:
    """data (2, 5) -> FC(4) -> relu -> FC(3), weights declared by shape only."""
    x = S.var("data")
    h = S.FullyConnected(x, num_hidden=4, name="fc1")
    h = S.Activation(h, act_type="relu", name="act")
    y = S.FullyConnected(h, num_hidden=3, name="fc2")
    return y.graph, {"data": (2, 5)}


def _fresh(graph: Graph, shapes: dict) -> dict:
    return infer_fresh(graph, "shape", dict(question("shape", shapes)[1]))


def test_asking_again_without_an_edit_infers_nothing():
    graph, shapes = _mlp_graph()
    first = graph.types(shapes, {"data": "float32"})
    before = _runs()
    again = graph.types({"data": [2, 5]}, {"data": np.float32})   # the same question
    assert _runs() == before
    assert again.shapes is first.shapes and again.dtypes is first.dtypes
    assert first.shape(graph.node("fc2")) == (2, 3)
    assert first.dtype(graph.node("fc1_weight")) == "float32"


@pytest.mark.parametrize("edit", ["attribute", "attribute dict replaced", "input rewired",
                                  "insertion", "removal", "op", "variable renamed",
                                  "outputs", "control dependency"])
def test_every_kind_of_edit_drops_the_cached_types(edit):
    graph, shapes = _mlp_graph()
    graph.inferred_shapes(shapes)
    fc1, act, fc2 = graph.node("fc1"), graph.node("act"), graph.node("fc2")
    if edit == "attribute":
        fc1.attrs["num_hidden"] = "7"
    elif edit == "attribute dict replaced":
        fc1.attrs = {**fc1.attrs, "num_hidden": "7"}
    elif edit == "input rewired":
        fc2.set_input(0, fc1.out)          # skip the relu: same shapes, other entry keys
    elif edit == "insertion":
        new = Node("Activation", "act2", {"act_type": "tanh"}, [act.out])
        graph.add_node(new, after=act)
        fc2.set_input(0, new.out)
    elif edit == "removal":
        fc2.set_input(0, fc1.out)
        graph.erase_node(act)
    elif edit == "op":
        act.op = "sigmoid"
        act.attrs = {}
    elif edit == "variable renamed":
        graph.node("data").name = "x"      # the given shape no longer reaches it
    elif edit == "outputs":
        graph.outputs[0] = act.out
    elif edit == "control dependency":
        dep = Node("FullyConnected", "side", {"num_hidden": "2", "no_bias": "True"},
                   [graph.node("data").out, Node(None, "w9").out])
        graph.add_node(dep.inputs[1].node, before=fc1)
        graph.add_node(dep, before=fc1)
        fc2.control_deps.append(dep)       # reachable now: its shapes get inferred
    before = _runs()
    got = graph.inferred_shapes(shapes)
    assert _runs() == before + 1, f"{edit}: the cached shapes were reused"
    assert dict(got) == _fresh(graph, shapes)
    graph.verify()


def test_the_answer_after_an_attribute_edit_is_the_hand_computed_one():
    graph, shapes = _mlp_graph()
    types = graph.types(shapes)
    assert types.shape(graph.node("fc2_weight")) == (3, 4)
    graph.node("fc1").attrs["num_hidden"] = "6"
    types = graph.types(shapes)
    assert types.shape(graph.node("fc1")) == (2, 6)
    assert types.shape(graph.node("fc2_weight")) == (3, 6)


def test_an_edit_inside_a_nested_graph_drops_the_outer_types():
    x = S.var("data")
    graph = S.relu(x).graph
    inner = graph.copy()
    outer_x = Node(None, "data")
    cached = Node("_CachedOp", "cached", {}, [outer_x.out], [inner])
    outer = Graph([outer_x, cached], [cached.out])
    assert outer.types({"data": (3, 2)}).shape(cached) == (3, 2)
    inner_relu = inner.outputs[0].node
    flat = Node("Reshape", "r", {"shape": "(-1,)"}, [inner_relu.out])
    inner.add_node(flat)
    inner.outputs[0] = flat.out
    before = _runs()
    assert outer.types({"data": (3, 2)}).shape(cached) == (6,)
    assert _runs() == before + 2        # shapes and dtypes, each once


def test_reordering_and_copying_keep_the_types_without_inferring_again():
    graph, shapes = _mlp_graph()
    kept = graph.inferred_shapes(shapes)
    before = _runs()
    graph.nodes = list(graph.nodes)           # a new node list: no node edited
    assert graph.inferred_shapes(shapes) is kept
    copy, mapping = mxc.compiler.ir.copy_graph(graph)
    moved = copy.inferred_shapes(shapes)
    assert _runs() == before
    assert dict(moved) == _fresh(copy, shapes)
    for node in graph.topo_order():           # the copy's keys name the copy's nodes
        assert moved[(mapping[id(node)], 0)] == kept[(node, 0)]
    copy.node("fc1").attrs["num_hidden"] = "9"     # the copy's edits leave the original be
    assert graph.inferred_shapes(shapes) is kept
    assert copy.types(shapes).shape(copy.node("fc1")) == (2, 9)


def test_a_node_shared_with_another_graph_is_still_tracked():
    graph, shapes = _mlp_graph()
    graph.inferred_shapes(shapes)
    view = Graph(list(graph.nodes), list(graph.outputs))    # takes the nodes' links
    view.inferred_shapes(shapes)
    graph.node("fc1").attrs["num_hidden"] = "5"
    assert graph.types(shapes).shape(graph.node("fc1")) == (2, 5)
    assert view.types(shapes).shape(view.node("fc1")) == (2, 5)


def test_the_cached_answer_is_read_only():
    graph, shapes = _mlp_graph()
    with pytest.raises(TypeError):
        graph.inferred_shapes(shapes)[(0, 0)] = (1,)     # type: ignore[index]


def test_verify_catches_an_edit_the_cache_did_not_see():
    graph, shapes = _mlp_graph()
    graph.inferred_shapes(shapes)
    fc1 = graph.node("fc1")
    dict.__setitem__(fc1.attrs, "num_hidden", "7")      # behind the node's back
    with pytest.raises(VerificationError, match=r"cached shape of node 'fc1_weight' output 0 "
                                                r"is \(4, 5\), a fresh inference gives \(7, 5\)"):
        graph.verify()
    graph.verify(types=False)                            # the structure itself is fine


def test_verify_catches_a_corrupted_cache():
    graph, shapes = _mlp_graph()
    graph.inferred_dtypes({"data": "float32"})
    answer = next(iter(graph._types._answers.values()))
    bad = dict(answer.values)
    bad[graph.node("act").out.key] = "float16"
    answer.values = bad
    with pytest.raises(VerificationError, match=r"cached dtype of node 'act' output 0 is "
                                                r"float16, a fresh inference gives float32"):
        graph.verify()


def test_registering_an_operator_drops_the_cached_types():
    from mxc.compiler.ops.registry import OPS
    graph, shapes = _mlp_graph()
    graph.inferred_shapes(shapes)
    snap = OPS.snapshot()
    try:
        OPS.register("_test_graph_types_op", OPS.lookup("relu"))
        before = _runs()
        graph.inferred_shapes(shapes)
        assert _runs() == before + 1
    finally:
        OPS.restore(snap)


# -- once per graph state during a compile --------------------------------------------------
class _Asks:
    """Every question put to any graph during a compile, with the asked graph's printed
    IR: the distinct (IR, question) pairs are the graph states a compile needs typed."""

    def __init__(self, monkeypatch):
        self.states: set[tuple] = set()
        self.asks = 0
        for kind, method in (("shape", "inferred_shapes"), ("dtype", "inferred_dtypes")):
            original = getattr(Graph, method)

            def asked(graph, given=None, *, _original=original, _kind=kind):
                self.asks += 1
                self.states.add((print_graph(graph), _kind, _given(_kind, given)))
                return _original(graph, given)
            monkeypatch.setattr(Graph, method, asked)


def _given(kind: str, given) -> tuple:
    items = []
    for name, value in (given or {}).items():
        if value is None:
            continue
        items.append((name, tuple(int(d) for d in value) if kind == "shape"
                      else np.dtype(value).name))
    return tuple(sorted(items))


@pytest.mark.parametrize("passes", [None, ""])
def test_a_compile_infers_each_graph_state_once(monkeypatch, passes):
    pytest.importorskip("tvm")
    sym, args, aux = mxc.load_checkpoint(str(MLP / "mlp"), 0)
    asks = _Asks(monkeypatch)
    before = _runs()
    mxc.compile(sym, (args, aux), {"data": (4, 784)}, passes=passes)
    runs = _runs() - before
    graphs = {text for text, _, _ in asks.states}
    assert len(graphs) >= 2        # what the passes left, the partitioned graph, a region
    assert asks.asks > len(asks.states)     # stages asked again about unchanged graphs
    assert runs == len(asks.states)


def test_entries_of_other_outputs_key_by_index():
    graph, shapes = _mlp_graph()
    types = graph.types(shapes)
    fc1 = graph.node("fc1")
    assert types.shape(Entry(fc1, 0)) == types.shape(fc1) == (2, 4)
    assert types.full_shape(fc1) == (2, 4)


def test_inferred_types_are_keyed_by_the_graphs_own_entries():
    graph, shapes = _mlp_graph()
    inferred = graph.inferred_shapes(shapes)
    reachable = set(graph.topo_order())
    # every key is (node of this graph, output index), the form Entry.key gives
    assert all(node in reachable and isinstance(i, int) for node, i in inferred)
    fc1 = graph.node("fc1")
    assert inferred[fc1.out.key] == inferred[(fc1, 0)] == (2, 4)
    # a key holds its node: while an answer is held, no node it speaks of can be freed
    # and its number handed to a newcomer that would then read the freed node's shape
    watch = weakref.ref(fc1)
    del graph, fc1
    gc.collect()
    assert watch() is not None and inferred[(watch(), 0)] == (2, 4)
