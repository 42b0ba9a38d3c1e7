"""``Graph.verify()``: the invariants every pass must preserve.

Checked, with messages naming the node and what was expected:

* every input entry and control dependency points at a node of this graph
  (no dangling entries) and at an existing output index;
* every variable name is unique (inputs and parameters are bound by name);
  operator nodes may share a name, as MXNet allows (a Gluon block called
  twice exports two ``<prefix>fwd`` nodes; MXNet identifies nodes by
  position), and messages tell them apart by :attr:`Node.ref`;
* the graph is acyclic and :attr:`Graph.nodes` is topologically ordered;
* operator nodes have as many inputs as their op definition expects;
* nested subgraphs verify too (at most MAX_SUBGRAPH_DEPTH levels: the check
  recurses, so deeper nesting is a typed error, not a RecursionError);
* types cached on the graph (:meth:`Graph.types`), where current, equal a
  fresh inference (an edit the cache did not see would leave them stale).
"""

from __future__ import annotations

from ...errors import MxcError, VerificationError
from .graph import MAX_SUBGRAPH_DEPTH, Graph
from .node import Node


def verify_graph(graph: Graph, *, where: str = "graph", types: bool = True,
                 _depth: int = 1) -> None:
    if _depth > MAX_SUBGRAPH_DEPTH:
        raise VerificationError(f"{where}: subgraphs nested more than {MAX_SUBGRAPH_DEPTH} "
                                f"levels deep")
    position: dict[int, int] = {id(n): i for i, n in enumerate(graph.nodes)}
    variables: dict[str, Node] = {}
    for i, node in enumerate(graph.nodes):
        if node.op is None:
            if variables.setdefault(node.name, node) is not node:
                raise VerificationError(f"{where}: variable name {node.ref} is used twice "
                                        f"(inputs and parameters are bound by name)")
        for slot, e in enumerate(node.inputs):
            p = position.get(id(e.node))
            if p is None:
                raise VerificationError(
                    f"{where}: node {node.ref} input {slot} refers to {e.node.ref}, "
                    f"which is not in the graph (dangling entry)")
            if p >= i:
                raise VerificationError(
                    f"{where}: node {node.ref} input {slot} refers to {e.node.ref}, "
                    f"which comes later (cycle or unsorted node list)")
            _check_output_index(e.node, e.index, f"{where}: node {node.ref} input {slot}")
        for dep in node.control_deps:
            p = position.get(id(dep))
            if p is None or p >= i:
                raise VerificationError(
                    f"{where}: node {node.ref} has control dependency {dep.ref} "
                    f"that is not an earlier node of the graph")
        if node.op is not None:
            _check_arity(node, where)
        for k, sub in enumerate(node.subgraphs):
            verify_graph(sub, where=f"{where}: subgraph {k} of node {node.ref}",
                         types=types, _depth=_depth + 1)
    if not graph.outputs:
        raise VerificationError(f"{where}: has no outputs")
    for k, e in enumerate(graph.outputs):
        if id(e.node) not in position:
            raise VerificationError(
                f"{where}: output {k} refers to {e.node.ref}, which is not in the graph")
        _check_output_index(e.node, e.index, f"{where}: output {k}")
    if types:
        _check_cached_types(graph, where)


def _check_cached_types(graph: Graph, where: str) -> None:
    """Each current cached answer must equal a fresh inference of the same question."""
    from ..infer import infer_fresh
    for (kind, given), cached in list(graph._types.current(graph)):
        asked = ", ".join(f"{name}={value}" for name, value in given) or "nothing given"
        try:
            fresh = infer_fresh(graph, kind, dict(given))
        except MxcError as exc:
            raise VerificationError(f"{where}: cached {kind}s ({asked}) are stale: inferring "
                                    f"them afresh fails: {exc}") from exc
        if dict(cached) == fresh:
            continue
        for node in graph.topo_order():
            for index in range(node.num_outputs()):
                key = (node, index)
                if cached.get(key) != fresh.get(key):
                    raise VerificationError(
                        f"{where}: cached {kind} of node {node.ref} output {index} is "
                        f"{cached.get(key)}, a fresh inference gives {fresh.get(key)} "
                        f"({asked}); the graph changed without its types being dropped")
        raise VerificationError(f"{where}: cached {kind}s ({asked}) name entries the graph "
                                f"does not reach; the graph changed without its types "
                                f"being dropped")


def _check_output_index(node: Node, index: int, what: str) -> None:
    try:
        n = node.num_outputs()
    except MxcError:
        return  # the op itself is reported by the arity check
    if not 0 <= index < n:
        raise VerificationError(
            f"{what} reads output {index} of {node.ref}, which has {n} output(s)")


def _check_arity(node: Node, where: str) -> None:
    try:
        expected = node.opdef.num_inputs(node.params)
    except MxcError as exc:
        raise VerificationError(f"{where}: node {node.ref}: {exc}") from exc
    if expected is not None and expected != len(node.inputs):
        names = node.opdef.input_names(node.params)
        raise VerificationError(
            f"{where}: node {node.ref} ({node.op}) has {len(node.inputs)} input(s), "
            f"expected {expected} ({', '.join(names)})")
