"""The float graph ``quantize_net`` calibrates: MXNet's ``MKLDNN_QUANTIZE`` fusion, FC part.

``quantize_net`` (python/mxnet/contrib/quantization.py, ``quantize_net_v2``)
runs ``get_backend_symbol("MKLDNN_QUANTIZE")`` on the float model first; the
quantize pass and the calibration then see the fused nodes, so the thresholds
are those of the fused outputs (``sg_mkldnn_fully_connected_eltwise_0_output``,
the FC *after* its relu) and the quantized node names derive from them.

This module does the fully-connected part of that pass, as
``SgMKLDNNFCSelector`` (src/operator/subgraph/mkldnn/mkldnn_fc_property.h)
selects for the quantized flow: a ``FullyConnected`` and, when it is the FC's
only consumer, one following ``Activation(relu)``.  The fused node is named
``sg_mkldnn_fully_connected[_eltwise]_<k>`` (k counts fused nodes in graph
order) and its nested graph reads variables named after the cut entries plus
``0`` (``CutGraphInputs`` in src/operator/subgraph/build_subgraph.cc:
``data0``, ``<w>0``, ``sg_mkldnn_fully_connected_eltwise_0_output0``).

Graphs with any other operator are refused: their fusions (conv+bn+act+sum,
pooling, flatten, concat ...) are not implemented yet, and a quantizer that
guessed them would write a model MXNet never makes.
"""

from __future__ import annotations

from ..ir import Entry, Graph, Node
from .options import QuantizeError

FC = "FullyConnected"
FUSED_FC = "_sg_mkldnn_fully_connected"


def _is_relu(node: Node) -> bool:
    return node.op == "Activation" and node.attrs.get("act_type") == "relu"


def check_supported(graph: Graph) -> None:
    """Refuse a graph with operators this quantizer does not handle (all named at once)."""
    heads = {id(e.node) for e in graph.outputs}
    bad: dict[str, list[str]] = {}
    for n in graph.topo_order():
        if n.op is None or n.op == FC:
            continue
        if _is_relu(n) and n.inputs[0].node.op == FC and len(n.inputs[0].node.users) == 1 \
                and id(n.inputs[0].node) not in heads:
            continue
        what = f"{n.op}(act_type={n.attrs.get('act_type')})" if n.op == "Activation" else n.op
        bad.setdefault(what, []).append(n.name)
    if bad:
        listing = "; ".join(f"{op} (nodes {', '.join(repr(x) for x in names[:3])}"
                            f"{', ...' if len(names) > 3 else ''})" for op, names in bad.items())
        raise QuantizeError(f"quantize: these operators are not implemented yet (only "
                            f"FullyConnected layers, each optionally followed by its own "
                            f"Activation(relu), are): {listing}")


def fuse_fully_connected(graph: Graph, params: dict) -> Graph:
    """The fused float graph (a new graph; *graph* is not changed)."""
    check_supported(graph)
    heads = {id(e.node) for e in graph.outputs}
    new_of: dict[int, Node] = {}
    nodes: list[Node] = []
    k = 0
    for n in graph.topo_order():
        if id(n) in new_of:
            continue
        if n.op is None:
            new = Node(None, n.name, dict(n.attrs))
            new_of[id(n)] = new
            nodes.append(new)
            continue
        users = n.users
        act = users[0] if len(users) == 1 and _is_relu(users[0]) and id(n) not in heads \
            else None
        name = f"sg_mkldnn_fully_connected{'_eltwise' if act else ''}_{k}"
        k += 1
        ins = [Entry(new_of[id(e.node)], e.index) for e in n.inputs]
        nested_vars = [Node(None, _output_name(e) + "0") for e in ins]
        inner_fc = Node(FC, n.name, dict(n.attrs), [Entry(v, 0) for v in nested_vars])
        inner = [*nested_vars, inner_fc]
        if act is not None:
            inner.append(Node(act.op, act.name, dict(act.attrs), [Entry(inner_fc, 0)]))
        nested = Graph(inner, [Entry(inner[-1], 0)])
        attrs = {"with_eltwise": "True"} if act is not None else {}
        fused = Node(FUSED_FC, name, attrs, ins, [nested])
        new_of[id(n)] = fused
        if act is not None:
            new_of[id(act)] = fused
        nodes.append(fused)
    for e in graph.outputs:
        if e.node.op is None:
            raise QuantizeError(f"quantize: output {e.node.name!r} is an input of the model; "
                                f"nothing to quantize there")
    return Graph(nodes, [Entry(new_of[id(e.node)], 0) for e in graph.outputs],
                 dict(graph.attrs))


def _output_name(entry: Entry) -> str:
    """MXNet's ``list_outputs`` name of an entry of the fused graph (variables: their name)."""
    return entry.node.name if entry.node.op is None else f"{entry.node.name}_output"


def fused_output_name(node: Node) -> str:
    """The calibration-table key of a fused node's output (``<name>_output``)."""
    return f"{node.name}_output"
