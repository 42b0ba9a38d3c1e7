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
Each op node keeps what a Netron user looks for when pointing at it -- its
attributes, the names and shapes of its weights, its input and output shapes --
and the renderer puts that in the node's tooltip.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

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
    attrs: dict[str, str] = field(default_factory=dict)          # the op's attributes
    weights: list[tuple[str, str]] = field(default_factory=list)  # (parameter name, shape)
    notes: list[str] = field(default_factory=list)    # more tooltip lines (shapes, reason ...)


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

    def node(self, name: str, op: str, region: DRegion | None = None, **kw: Any) -> DNode:
        self.count += 1
        n = DNode(f"n{self.count}", name, op, region.id if region else None, **kw)
        self.d.nodes.append(n)
        if region is not None:
            region.nodes.append(n.id)
        return n


def from_graph(graph, title: str, shapes: Mapping[str, tuple] | None = None,
               show_params: bool = False, weights: Iterable[str] = ()) -> Drawing:
    """A :class:`Drawing` of *graph*; *shapes* (input name -> shape) labels the edges.

    *weights* names the inputs known to be parameters (those of a ``.params``
    file, whose shapes may be in *shapes*): parameters whatever their names."""
    b = _Builder(title, show_params)
    try:
        known = dict(graph.inferred_shapes(shapes))   # a copy: regions add their outputs
    except Exception:  # noqa: BLE001 - a drawing without shapes is still a drawing
        known = {}
    weights = set(weights)
    params = _param_names(graph, {k: v for k, v in (shapes or {}).items() if k not in weights})
    params |= weights & set(graph.list_inputs())
    has_regions = any(n.op is not None and n.subgraphs for n in graph.nodes)
    # entry (node, index) -> the DNode id that produces it
    producer: dict[tuple[int, int], str] = {}
    for node in graph.topo_order():
        if node.op is None:
            if node.name in params and not show_params:
                continue
            shape = _shape_text(known.get((node, 0)))
            producer[(node, 0)] = b.node(node.name, "input",
                                             notes=[f"shape: {shape}"] if shape else []).id
            continue
        if node.subgraphs:
            _region(b, node, producer, known, params)
            continue
        dn = b.node(node.name, node.op, host=has_regions, **_facts(node, params, known))
        for e in node.inputs:
            _edge(b, producer, (e.node, e.index), dn.id, known)
        for k in range(max(1, node.num_outputs())):
            producer[(node, k)] = dn.id
    for k, e in enumerate(graph.outputs):
        shape = _shape_text(known.get((e.node, e.index)))
        out = b.node(graph.output_name(e), "output", notes=[f"shape: {shape}"] if shape else [])
        _edge(b, producer, (e.node, e.index), out.id, known)
    return b.d


def _edge(b: _Builder, producer, key, dst: str, known) -> None:
    src = producer.get(key)
    if src is not None:
        b.d.edges.append((src, dst, _shape_text(known.get(key))))


def _region(b: _Builder, node, producer, known, params: set[str]) -> None:
    """A subgraph node: its nested graph's nodes inside a region box."""
    inner = node.subgraphs[0]
    backend = BACKEND_OF_OP.get(node.op, node.op.lstrip("_"))
    region = DRegion(f"r{len(b.d.regions)}", node.name, backend, node.op)
    b.d.regions.append(region)
    names = inner.list_inputs()
    outer_of = {name: (e.node, e.index) for name, e in zip(names, node.inputs)}
    inner_shapes = {name: known.get(key) for name, key in outer_of.items()
                    if known.get(key) is not None}
    try:
        inner_known = dict(inner.inferred_shapes(inner_shapes))   # a copy: extended below
    except Exception:  # noqa: BLE001
        inner_known = {}
    # inner variables bound to the outer graph's parameters: the weights of inner nodes
    outer_names = {name: e.node.name for name, e in zip(names, node.inputs)
                   if e.node.op is None and e.node.name in params}
    local: dict[tuple[int, int], str] = {}
    for inode in inner.topo_order():
        if inode.op is None:
            key = outer_of.get(inode.name)
            if key is not None:
                inner_known.setdefault((inode, 0), known.get(key))
            if key in producer:
                local[(inode, 0)] = producer[key]
            continue
        dn = b.node(inode.name, inode.op, region,
                    **_facts(inode, set(outer_names), inner_known, outer_names))
        for e in inode.inputs:
            _edge(b, local, (e.node, e.index), dn.id, inner_known)
        for k in range(max(1, inode.num_outputs())):
            local[(inode, k)] = dn.id
    for k, e in enumerate(inner.outputs):
        src = local.get((e.node, e.index))
        if src is not None:
            producer[(node, k)] = src
            known.setdefault((node, k), inner_known.get((e.node, e.index)))


def _facts(node, params: set[str], known, rename: Mapping[str, str] | None = None) -> dict:
    """What an op node's tooltip says: attributes (MXNet's hidden ``__x__`` ones left
    out), its parameter inputs with their shapes, and its input/output shapes."""
    weights, ins = [], []
    for e in node.inputs:
        shape = _shape_text(known.get((e.node, e.index)))
        if e.node.op is None and e.node.name in params:
            name = (rename or {}).get(e.node.name, e.node.name)
            weights.append((name, shape or "shape unknown"))
        else:
            ins.append(shape or "?")
    outs = [_shape_text(known.get((node, k))) or "?"
            for k in range(max(1, node.num_outputs()))]
    notes = []
    if any(s != "?" for s in ins + outs):
        notes = [f"in: {', '.join(ins) or '-'}", f"out: {', '.join(outs)}"]
    attrs = {k: v for k, v in sorted(node.attrs.items())
             if not (k.startswith("__") and k.endswith("__"))}
    return {"attrs": attrs, "weights": weights, "notes": notes}


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


def from_artifact(graph: Mapping, manifest: Mapping, title: str,
                  param_shapes: Mapping[str, tuple] | None = None) -> Drawing:
    """An artifact's runtime graph: compiled regions (one box each, op counts) and host
    nodes, connected through their value slots.  *param_shapes* (the artifact's stored
    parameters) gives the shapes of the weights a step reads; weights bound into the
    library are said to be so."""
    b = _Builder(title, False)
    param_of = {p["slot"]: p["name"] for p in graph.get("params", ())}
    param_shapes = param_shapes or {}
    bound = bool(manifest.get("bind_params", False))
    producer: dict[int, str] = {}
    shape_of: dict[int, str] = {}
    for spec in graph.get("inputs", ()):
        shape_of[spec["slot"]] = _shape_text(spec.get("shape"))
        producer[spec["slot"]] = b.node(spec["name"], "input", notes=[
            f"shape: {shape_of[spec['slot']]}  {spec.get('dtype', '')}".rstrip()]).id
    backend = "tvm"
    for step in graph.get("steps", ()):
        if step["kind"] == "load":   # weights transformed once at load time: not a call's data
            continue
        weights = [(param_of[s], _shape_text(param_shapes.get(param_of[s])) or "?")
                   for s in step["inputs"] if s in param_of]
        if step["kind"] == "region":
            region = DRegion(f"r{len(b.d.regions)}", step["name"], backend, step.get("function",
                                                                                   "region"))
            b.d.regions.append(region)
            ops = ", ".join(f"{k} x{v}" for k, v in sorted((step.get("ops") or {}).items()))
            dn = b.node(step["name"], step.get("function", "region"), region, weights=weights,
                        detail=f"{step.get('num_nodes', '?')} nodes: {ops}",
                        notes=["weights: compiled into the library"] if bound else [])
        else:
            dn = b.node(step["name"], step.get("op", "host"), host=True, weights=weights,
                        attrs=dict(sorted((step.get("attrs") or {}).items())),
                        notes=_host_notes(step))
        for s in step["inputs"]:
            if s in producer:
                b.d.edges.append((producer[s], dn.id, shape_of.get(s, "")))
        for s in step["outputs"]:
            if s >= 0:
                producer[s] = dn.id
    for spec in graph.get("outputs", ()):
        shape = _shape_text(spec.get("shape"))
        out = b.node(spec["name"], "output",
                     notes=[f"shape: {shape}  {spec.get('dtype', '')}".rstrip()])
        if spec["slot"] in producer:
            b.d.edges.append((producer[spec["slot"]], out.id, shape))
    return b.d


def _host_notes(step: Mapping) -> list[str]:
    """A host step's tooltip lines: its shapes and why it is not compiled."""
    notes = [f"in: {', '.join(_shape_text(x) or '?' for x in step.get('in_shapes') or ())}",
             f"out: {', '.join(_shape_text(x) or '?' for x in step.get('out_shapes') or ())}"]
    if step.get("reason"):
        notes.append(f"host node: {step['reason']}")
    return notes
