"""Structural comparison of graphs (tests, round trips, pass checks).

Two graphs are structurally equal when MXNet could not tell them apart: the
same nodes in MXNet's DFS order from the outputs (op, name, attributes,
input entries by position, control dependencies, nested subgraphs,
recursively) and the same output entries.  Node identity, ``Graph.nodes``
list order, nodes no output reaches and ``Node.meta`` do not matter.
Because the DFS order is canonical for a given structure, comparing the two
DFS serializations is an exact (ordered) isomorphism test.
"""

from __future__ import annotations

from .graph import Graph
from .node import Node

__all__ = ["graphs_equal", "graph_diff"]


def graphs_equal(a: Graph, b: Graph, *, attrs: bool = True, graph_attrs: bool = False,
                 versions: bool = True) -> bool:
    """True if *a* and *b* are structurally equal (see the module docstring).

    attrs:
        compare node attributes (hidden ones included).
    graph_attrs:
        also compare ``Graph.attrs`` (``mxnet_version`` ...) at every level.
    versions:
        compare entry versions (MXNet's variable versions) too.
    """
    return graph_diff(a, b, attrs=attrs, graph_attrs=graph_attrs, versions=versions) is None


def graph_diff(a: Graph, b: Graph, *, attrs: bool = True, graph_attrs: bool = False,
               versions: bool = True, where: str = "graph") -> str | None:
    """None if equal, else a sentence describing the first difference."""
    order_a = a.topo_order()
    order_b = b.topo_order()
    if len(order_a) != len(order_b):
        return (f"{where}: {len(order_a)} nodes reachable from the outputs vs "
                f"{len(order_b)}{_first_name_difference(order_a, order_b)}")
    pos_a = {id(n): i for i, n in enumerate(order_a)}
    pos_b = {id(n): i for i, n in enumerate(order_b)}

    def entries(es, pos):
        return [(pos[id(e.node)], e.index, e.version if versions else 0) for e in es]

    for i, (x, y) in enumerate(zip(order_a, order_b)):
        label = f"{where}: node {i} ({x.name!r})"
        if x.op != y.op:
            return f"{label}: op {_op(x)} vs {_op(y)}"
        if x.name != y.name:
            return f"{where}: node {i}: name {x.name!r} vs {y.name!r}"
        if attrs and x.attrs != y.attrs:
            return f"{label}: attributes differ: {_dict_diff(x.attrs, y.attrs)}"
        ia, ib = entries(x.inputs, pos_a), entries(y.inputs, pos_b)
        if ia != ib:
            return f"{label}: inputs {ia} vs {ib} ([position, index, version])"
        ca = [pos_a[id(c)] for c in x.control_deps]
        cb = [pos_b[id(c)] for c in y.control_deps]
        if ca != cb:
            return f"{label}: control_deps {ca} vs {cb}"
        if len(x.subgraphs) != len(y.subgraphs):
            return f"{label}: {len(x.subgraphs)} subgraphs vs {len(y.subgraphs)}"
        for k, (sa, sb) in enumerate(zip(x.subgraphs, y.subgraphs)):
            d = graph_diff(sa, sb, attrs=attrs, graph_attrs=graph_attrs, versions=versions,
                           where=f"{label}: subgraph {k}")
            if d is not None:
                return d
    ha, hb = entries(a.outputs, pos_a), entries(b.outputs, pos_b)
    if ha != hb:
        return f"{where}: outputs {ha} vs {hb} ([position, index, version])"
    if graph_attrs and a.attrs != b.attrs:
        return f"{where}: graph attributes differ: {_dict_diff(a.attrs, b.attrs)}"
    return None


def _op(n: Node) -> str:
    return "null (variable)" if n.op is None else n.op


def _first_name_difference(xs: list[Node], ys: list[Node]) -> str:
    for i, (x, y) in enumerate(zip(xs, ys)):
        if x.name != y.name or x.op != y.op:
            return f" (first difference at position {i}: {x.name!r} vs {y.name!r})"
    return ""


def _dict_diff(x: dict, y: dict) -> str:
    parts = []
    for k in sorted(set(x) | set(y), key=str):
        if k not in y:
            parts.append(f"{k!r} only in the first ({x[k]!r})")
        elif k not in x:
            parts.append(f"{k!r} only in the second ({y[k]!r})")
        elif x[k] != y[k]:
            parts.append(f"{k!r}: {x[k]!r} vs {y[k]!r}")
    return "; ".join(parts[:5]) + ("; ..." if len(parts) > 5 else "")
