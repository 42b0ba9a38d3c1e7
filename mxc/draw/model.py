"""What a drawing shows, independent of how it is laid out.

:func:`from_graph` takes a graph (a symbol JSON, partitioned or not) and
:func:`from_artifact` an ``.mxc`` artifact's runtime graph; both give a
:class:`Drawing`: nodes (op, name), edges (with shapes where known) and
regions (each subgraph node's nested graph, boxed, with its backend).  Op
nodes outside every region of a graph that has regions are marked *host*:
in a compile partition (``tvm``) and in an artifact they are the nodes run
by reference kernels on the host.

Parameter inputs (weights, biases, BatchNorm statistics) are left out by
default: a ResNet has a hundred of them and they say nothing about the flow.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

#: subgraph operators -> the backend whose regions they are
BACKEND_OF_OP = {"_tvm_subgraph": "tvm", "_CachedOp": "default"}


@dataclass
class DNode:
    id: str
    name: str
    op: str                      # "input" / "output" for the graph's ends
    region: str | None = None    # DRegion.id
    host: bool = False           # an op outside every region, in a partitioned graph
    detail: str = ""             # a second label line (op counts of an artifact region ...)
    fill: str | None = None      # a fill colour of its own (a folded region: its backend's)


@dataclass
class DRegion:
    id: str
    name: str
    backend: str
    op: str
    nodes: list[str] = field(default_factory=list)   # DNode ids


@dataclass
class Drawing:
    title: str
    nodes: list[DNode] = field(default_factory=list)
    edges: list[tuple[str, str, str]] = field(default_factory=list)   # (from, to, label)
    regions: list[DRegion] = field(default_factory=list)

    def backends(self) -> list[str]:
        return sorted({r.backend for r in self.regions})


def _shape_text(shape) -> str:
    if shape is None:
        return ""
    return "x".join("?" if d is None or d == -1 else str(d) for d in shape) or "scalar"


class _Builder:
    def __init__(self, title: str, show_params: bool):
        self.d = Drawing(title)
        self.show_params = show_params
        self.count = 0

    def node(self, name: str, op: str, region: DRegion | None = None, **kw) -> DNode:
        self.count += 1
        n = DNode(f"n{self.count}", name, op, region.id if region else None, **kw)
        self.d.nodes.append(n)
        if region is not None:
            region.nodes.append(n.id)
        return n


def from_graph(graph, title: str, shapes: Mapping[str, tuple] | None = None,
               show_params: bool = False) -> Drawing:
    """A :class:`Drawing` of *graph*; *shapes* (input name -> shape) labels the edges."""
    from ..compiler.infer import infer_shapes
    b = _Builder(title, show_params)
    try:
        known = infer_shapes(graph, dict(shapes or {}))
    except Exception:  # noqa: BLE001 - a drawing without shapes is still a drawing
        known = {}
    params = _param_names(graph, shapes or {})
    has_regions = any(n.op is not None and n.subgraphs for n in graph.nodes)
    # entry (id(node), index) -> the DNode id that produces it
    producer: dict[tuple[int, int], str] = {}
    for node in graph.topo_order():
        if node.op is None:
            if node.name in params and not show_params:
                continue
            producer[(id(node), 0)] = b.node(node.name, "input").id
            continue
        if node.subgraphs:
            _region(b, node, producer, known)
            continue
        dn = b.node(node.name, node.op, host=has_regions)
        for e in node.inputs:
            _edge(b, producer, (id(e.node), e.index), dn.id, known)
        for k in range(max(1, node.num_outputs())):
            producer[(id(node), k)] = dn.id
    for k, e in enumerate(graph.outputs):
        out = b.node(graph.output_name(e), "output")
        _edge(b, producer, (id(e.node), e.index), out.id, known)
    return b.d


def _edge(b: _Builder, producer, key, dst: str, known) -> None:
    src = producer.get(key)
    if src is not None:
        b.d.edges.append((src, dst, _shape_text(known.get(key))))


def _region(b: _Builder, node, producer, known) -> None:
    """A subgraph node: its nested graph's nodes inside a region box."""
    from ..compiler.infer import infer_shapes
    inner = node.subgraphs[0]
    backend = BACKEND_OF_OP.get(node.op, node.op.lstrip("_"))
    region = DRegion(f"r{len(b.d.regions)}", node.name, backend, node.op)
    b.d.regions.append(region)
    names = inner.list_inputs()
    outer_of = {name: (id(e.node), e.index) for name, e in zip(names, node.inputs)}
    inner_shapes = {name: known.get(key) for name, key in outer_of.items()
                    if known.get(key) is not None}
    try:
        inner_known = infer_shapes(inner, inner_shapes)
    except Exception:  # noqa: BLE001
        inner_known = {}
    local: dict[tuple[int, int], str] = {}
    for inode in inner.topo_order():
        if inode.op is None:
            key = outer_of.get(inode.name)
            if key in producer:
                local[(id(inode), 0)] = producer[key]
                inner_known.setdefault((id(inode), 0), known.get(key))
            continue
        dn = b.node(inode.name, inode.op, region)
        for e in inode.inputs:
            _edge(b, local, (id(e.node), e.index), dn.id, inner_known)
        for k in range(max(1, inode.num_outputs())):
            local[(id(inode), k)] = dn.id
    for k, e in enumerate(inner.outputs):
        src = local.get((id(e.node), e.index))
        if src is not None:
            producer[(id(node), k)] = src
            known.setdefault((id(node), k), inner_known.get((id(e.node), e.index)))


def _param_names(graph, shapes: Mapping[str, Any]) -> set[str]:
    """Inputs that are parameters: not given a shape, not data/label-like, and not the
    first input of an op (where data flows in)."""
    from ..compiler.weights import is_data_name
    first = set()

    def visit(g):
        for n in g.nodes:
            if n.inputs and n.inputs[0].node.op is None:
                first.add(n.inputs[0].node.name)
            for sub in n.subgraphs:
                visit(sub)
    visit(graph)
    return {n for n in graph.list_inputs()
            if n not in shapes and not is_data_name(n) and n not in first}


def from_artifact(graph: Mapping, manifest: Mapping, title: str) -> Drawing:
    """An artifact's runtime graph: compiled regions (one box each, op counts) and host
    nodes, connected through their value slots."""
    b = _Builder(title, False)
    producer: dict[int, str] = {}
    shape_of: dict[int, str] = {}
    for spec in graph.get("inputs", ()):
        producer[spec["slot"]] = b.node(spec["name"], "input").id
        shape_of[spec["slot"]] = _shape_text(spec.get("shape"))
    backend = "tvm"
    for step in graph.get("steps", ()):
        if step["kind"] == "load":   # weights transformed once at load time: not a call's data
            continue
        if step["kind"] == "region":
            region = DRegion(f"r{len(b.d.regions)}", step["name"], backend, step.get("function",
                                                                                   "region"))
            b.d.regions.append(region)
            ops = ", ".join(f"{k} x{v}" for k, v in sorted((step.get("ops") or {}).items()))
            dn = b.node(step["name"], step.get("function", "region"), region,
                        detail=f"{step.get('num_nodes', '?')} nodes: {ops}")
        else:
            dn = b.node(step["name"], step.get("op", "host"), host=True)
        for s in step["inputs"]:
            if s in producer:
                b.d.edges.append((producer[s], dn.id, shape_of.get(s, "")))
        for s in step["outputs"]:
            if s >= 0:
                producer[s] = dn.id
    for spec in graph.get("outputs", ()):
        out = b.node(spec["name"], "output")
        if spec["slot"] in producer:
            b.d.edges.append((producer[spec["slot"]], out.id, _shape_text(spec.get("shape"))))
    return b.d
