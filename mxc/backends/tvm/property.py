"""The TVM backend as a subgraph property: partition a graph for ``tvm``.

Compiling is "partition for ``tvm``, lower each region, leave the rest to the
host".  :class:`TVMSubgraphProperty` selects every node the Relax lowering
supports (:func:`~mxc.backends.tvm.converter.is_supported`, given the
inferred shapes and dtypes) and grows maximal connected regions of them with
MXNet's partitioning algorithm; each region becomes one ``_tvm_subgraph``
node whose nested graph is lowered to one Relax function.  When every node
is supported the whole graph is one region.

Nodes it never takes:

* variables, and nodes the partitioning context freezes (existing subgraph
  nodes when earlier partitioning is kept, ``clear=False``);
* subgraph operators (``_CachedOp``, a custom partitioner's regions): they
  carry a nested graph, which the converter does not lower, so they run
  through their own implementation on the host -- and the nodes inside them
  are never looked at;
* anything :func:`~mxc.backends.tvm.converter.support_reason` rejects
  (unknown op, no converter, unsupported dtype, dynamic shape ...).

:func:`register_tvm_backend` registers the backend (``optimize_graph(g, "tvm",
shapes=..., dtypes=..., clear=False)``) and the ``_tvm_subgraph`` operator;
TVM itself is imported only when a partitioning runs.
"""

from __future__ import annotations

from typing import Any

from ...compiler.ir import Entry, Graph, Node
from ...compiler.ops.subgraph import register_subgraph_op
from ...compiler.partition import (PartitionContext, SubgraphProperty, SubgraphSelector,
                                   register_subgraph_property)

__all__ = ["BACKEND", "SUBGRAPH_OP", "register_tvm_backend", "TVMSubgraphProperty",
           "TVMSelector", "is_tvm_region"]

BACKEND = "tvm"
#: the operator of a region compiled by TVM (its reference forward runs the nested graph)
SUBGRAPH_OP = "_tvm_subgraph"

def is_tvm_region(node: Node) -> bool:
    return node.op == SUBGRAPH_OP and bool(node.subgraphs)


class TVMSelector(SubgraphSelector):
    """Takes exactly the nodes found supported in ``pre_partition``."""

    node_determined = True

    def __init__(self, supported: set[int]):
        self.supported = supported

    def select(self, node: Node) -> bool:
        return id(node) in self.supported

    def select_input(self, node: Node, input_node: Node) -> bool:
        return id(input_node) in self.supported

    def select_output(self, node: Node, output_node: Node) -> bool:
        return id(output_node) in self.supported


class TVMSubgraphProperty(SubgraphProperty):
    """Group the nodes TVM can lower into ``_tvm_subgraph`` regions.

    Shapes and dtypes come from the partitioning context (``optimize_graph``
    with ``shapes=``/``dtypes=``); without them they are inferred from what
    the graph itself says (``__shape__`` attributes, float32 inputs), and
    nodes whose shapes stay unknown are left to the host.

    After partitioning, :attr:`reasons` maps every op node left outside a
    region to why (``{node label: reason}``: the name, with its index where
    nodes share it).
    """

    def __init__(self, **attrs: Any):
        super().__init__(**attrs)
        self.supported: set[int] = set()
        self.reasons: dict[str, str] = {}
        self._names: set[str] = set()
        self._selector = TVMSelector(self.supported)

    def pre_partition(self, graph: Graph, ctx: PartitionContext) -> None:
        from .converter import support_reason
        shapes, dtypes = ctx.shapes, ctx.dtypes
        if shapes is None:
            shapes = graph.inferred_shapes()
        if dtypes is None:
            dtypes = graph.inferred_dtypes({n.name: "float32" for n in graph.input_nodes()
                                            if "__dtype__" not in n.attrs})
        self.supported.clear()
        self.reasons = {}
        _require_input_shapes(graph, shapes)
        for node in graph.topo_order():
            if node.op is None:
                continue
            if id(node) in ctx.frozen:
                self.reasons[node.label] = "an existing subgraph node (partitioning kept)"
                continue
            why = support_reason(node, shapes, dtypes)
            if why is None:
                self.supported.add(id(node))
            else:
                self.reasons[node.label] = why
        self._names = {n.name for n in graph.nodes}

    def create_selector(self) -> SubgraphSelector:
        return self._selector

    def post_partition(self, graph: Graph, ctx: PartitionContext) -> None:
        """Everything compiled but in several regions (disconnected parts): make it one."""
        regions = [n for n in graph.topo_order() if n.op is not None]
        if len(regions) > 1 and all(is_tvm_region(n) for n in regions):
            merge_regions(graph, regions, regions[0].name)

    def create_subgraph_node(self, subgraph: Graph, subgraph_id: int,
                             selector: SubgraphSelector) -> Node:
        name = f"tvm_subgraph{subgraph_id}"
        k = 0
        while name in self._names:
            name = f"tvm_subgraph{subgraph_id}_{k}"
            k += 1
        self._names.add(name)
        return Node(SUBGRAPH_OP, name, subgraphs=[subgraph])


def merge_regions(graph: Graph, regions: list[Node], name: str) -> Node:
    """Replace *regions* (every op node of *graph*, in topological order) by one region.

    The nested graphs are copied into one; a nested variable fed by an outer
    variable becomes one shared variable named after it, one fed by another
    region reads that region's copied head.  *graph* is edited in place.
    """
    variables: dict[int, Node] = {}      # id(outer variable) -> merged nested variable
    heads: dict[tuple[Node, int], Entry] = {}  # (region, output) -> merged nested entry

    def outer_to_inner(e: Entry) -> Entry:
        if e.node.op is None:
            var = variables.get(id(e.node))
            if var is None:
                var = variables[id(e.node)] = Node(None, e.node.name, dict(e.node.attrs))
            return Entry(var, 0, e.version)
        return heads[e.key]

    nodes: list[Node] = []
    for region in regions:
        nested = region.subgraphs[0]
        feeds = {id(v): outer_to_inner(e) for v, e in zip(nested.input_nodes(), region.inputs)}
        copies: dict[int, Node] = {}
        for inner in nested.topo_order():
            if inner.op is None:
                continue
            ins = [feeds[id(x.node)] if x.node.op is None else
                   Entry(copies[id(x.node)], x.index, x.version) for x in inner.inputs]
            copy = Node(inner.op, inner.name, dict(inner.attrs), ins,
                        [g.copy() for g in inner.subgraphs])
            copy.meta = dict(inner.meta)  # np_shape, the index of a shared name
            copies[id(inner)] = copy
            nodes.append(copy)
        for i, h in enumerate(nested.outputs):
            heads[(region, i)] = feeds[id(h.node)] if h.node.op is None else \
                Entry(copies[id(h.node)], h.index, h.version)
    merged_outputs = [outer_to_inner(e) for e in graph.outputs]
    nested = Graph(list(variables.values()) + nodes, merged_outputs)
    nested.nodes = nested.topo_order()
    outer_vars = {v.name: v for v in graph.input_nodes()}
    node = Node(SUBGRAPH_OP, name, inputs=[Entry(outer_vars[v.name]) for v in
                                           nested.input_nodes()], subgraphs=[nested])
    graph.outputs = [Entry(node, i) for i in range(len(merged_outputs))]
    graph.nodes = graph.topo_order()
    return node


def register_tvm_backend() -> None:
    """Register the ``_tvm_subgraph`` operator and the ``"tvm"`` subgraph backend.

    Explicit rather than a side effect of importing this module: whoever needs
    them calls it (lowering, before it partitions; ``mxc.draw`` and the CLI,
    before they read a partitioned JSON; :mod:`mxc.symbol`, through
    :func:`~mxc.compiler.partition.provide_subgraph_backend`, for
    ``optimize_for("tvm")``).  Idempotent, and it re-registers what a rolled-
    back extension load removed.
    """
    from ...compiler.ops.registry import has_op
    from ...compiler.partition.registry import BACKENDS
    if not has_op(SUBGRAPH_OP):
        register_subgraph_op(SUBGRAPH_OP, override=True)
    if BACKENDS.get(BACKEND) is None:
        register_subgraph_property(BACKEND, TVMSubgraphProperty)


def _require_input_shapes(graph: Graph, shapes) -> None:
    """TVM compiles static shapes only: without the inputs' shapes no node can be
    taken, which would silently make 0 regions.  Say what is needed instead."""
    from ...errors import PartitionError
    unknown = [n.name for n in graph.input_nodes() if shapes.get((n, 0)) is None]
    if unknown and not any(n.op is not None and (n, 0) in shapes and
                           shapes[(n, 0)] is not None for n in graph.nodes):
        shown = ", ".join(unknown[:4]) + (f" and {len(unknown) - 4} more" if len(unknown) > 4
                                          else "")
        raise PartitionError(
            f"backend 'tvm' needs the shapes of the model's inputs to know what it can "
            f"compile ({shown} have none): pass arrays or shapes (optimize_for('tvm', "
            f"args={{'data': x}}) / shapes=; mxc partition --shape data=1,3,224,224)")
