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

Operators MXNet does not quantize stay float32 and are copied as they are.
Graphs with another quantizable operator are refused: their fusions and
quantized forms (conv+bn+act+sum, pooling, flatten, concat ...) are not
implemented yet, and a quantizer that guessed them would write a model MXNet
never makes.
"""

from __future__ import annotations

from ..ir import Entry, Graph, Node
from .options import QuantizeError

FC = "FullyConnected"
FUSED_FC = "_sg_mkldnn_fully_connected"


#: operators MXNet 1.9.1 quantizes (``FQuantizedOp``) or fuses for quantization
#: (the ``MKLDNN_QUANTIZE`` selectors): each has rules of its own, so a graph holding one
#: that ``exclude_operators`` does not keep float is refused; every other operator stays
#: float32, as in MXNet
QUANTIZABLE = frozenset({
    "Activation", "BatchNorm", "Concat", "Convolution", "elemwise_add", "elemwise_mul",
    "Flatten", "Embedding", "Pooling", "RNN", "_sg_mkldnn_conv", FUSED_FC,
    "_sg_mkldnn_selfatt_qk", "_sg_mkldnn_selfatt_valatt",
    "_contrib_interleaved_matmul_selfatt_qk", "_contrib_interleaved_matmul_selfatt_valatt"})


def _is_relu(node: Node) -> bool:
    return node.op == "Activation" and node.attrs.get("act_type") == "relu"


def _fused_relu(fc: Node, heads: set[int]) -> Node | None:
    """The relu the FC selector fuses into *fc*: its only consumer, *fc* not an output."""
    users = fc.users
    if len(users) == 1 and _is_relu(users[0]) and id(fc) not in heads:
        return users[0]
    return None


def check_supported(graph: Graph, float_ops: tuple[str, ...] = ()) -> None:
    """Refuse a graph this quantizer does not handle yet, naming every operator at once.

    Handled: FullyConnected layers (each optionally followed by its own relu) fed by
    model inputs, by each other or by operators that stay float32 (not quantizable, or
    in *float_ops*: ``exclude_operators``), whose outputs go to other FullyConnected
    layers or out of the model.
    """
    heads = {id(e.node) for e in graph.outputs}
    bad: dict[str, list[str]] = {}
    rnn = [n.name for n in graph.op_nodes() if n.op == "RNN"]
    if rnn and "RNN" not in float_ops:
        # MXNet 1.9.1 fails there too: LSTM "Operator _contrib_quantized_rnn is
        # non-differentiable ...", GRU/vanilla "Quantized recurrent neural network only
        # supports LSTM operator on CPU" (quantized_rnn.cc)
        raise QuantizeError(f"quantize: MXNet 1.9.1 cannot quantize RNN layers (nodes "
                            f"{', '.join(repr(x) for x in rnn[:3])}); keep them float32 with "
                            f"exclude_operators=RNN (--exclude-operators RNN)")
    for n in graph.topo_order():
        if n.op is None:
            continue
        if n.op == FC:
            tail = _fused_relu(n, heads) or n
            for user in tail.users:
                if user.op != FC or user.inputs[0].node is not tail:
                    bad.setdefault(f"{user.op} reading a quantized FullyConnected",
                                   []).append(user.name)
            continue
        if _is_relu(n) and n.inputs[0].node.op == FC and _fused_relu(n.inputs[0].node, heads):
            continue
        if n.op in QUANTIZABLE and n.op not in float_ops:
            what = f"{n.op}(act_type={n.attrs.get('act_type')})" if n.op == "Activation" \
                else n.op
            bad.setdefault(what, []).append(n.name)
    if bad:
        listing = "; ".join(f"{op} (nodes {', '.join(repr(x) for x in names[:3])}"
                            f"{', ...' if len(names) > 3 else ''})" for op, names in bad.items())
        raise QuantizeError(f"quantize: not implemented yet (FullyConnected layers, each "
                            f"optionally followed by its own relu, and operators left "
                            f"float32 before them, are): {listing}")


def fuse_fully_connected(graph: Graph, params: dict, float_ops: tuple[str, ...] = ()) -> Graph:
    """The fused float graph (a new graph; *graph* is not changed)."""
    check_supported(graph, float_ops)
    heads = {id(e.node) for e in graph.outputs}
    new_of: dict[int, Node] = {}
    nodes: list[Node] = []
    k = 0
    for n in graph.topo_order():
        if id(n) in new_of:
            continue
        ins = [Entry(new_of[id(e.node)], e.index) for e in n.inputs]
        if n.op != FC:          # a variable, or an operator left float32
            new = Node(n.op, n.name, dict(n.attrs), ins, [g.copy() for g in n.subgraphs])
            new_of[id(n)] = new
            nodes.append(new)
            continue
        act = _fused_relu(n, heads)
        name = f"sg_mkldnn_fully_connected{'_eltwise' if act else ''}_{k}"
        k += 1
        nested_vars = [Node(None, output_name(e) + "0") for e in ins]
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
    return Graph(nodes, [Entry(new_of[id(e.node)], e.index) for e in graph.outputs],
                 dict(graph.attrs))


def output_name(entry: Entry) -> str:
    """MXNet's ``list_outputs`` name of an entry (variables: their name)."""
    node = entry.node
    if node.op is None:
        return node.name
    names = node.opdef.output_names(node.params)
    return f"{node.name}_{names[entry.index] if entry.index < len(names) else entry.index}"


def fused_output_name(node: Node) -> str:
    """The calibration-table key of a fused node's output (``<name>_output``)."""
    return f"{node.name}_output"
