"""``quantize_model``'s classic flow (``--flow model``).

``mxnet.contrib.quantization.quantize_model`` runs the quantize pass
(src/operator/quantization/quantize_graph_pass.cc) on the float graph itself,
with no oneDNN fusion before or after, so the graph keeps one node per layer.
Which nodes are quantized (``MarkQuantizedNodes``): ``Convolution`` and
``FullyConnected`` (``FQuantizable`` ``kMust``) always; relu ``Activation``,
max/avg ``Pooling`` and ``Flatten`` (``kSupport``) in ``full`` mode, and in
``smart`` mode only when a quantized node feeds them and they feed one;
nothing named by ``exclude_layers`` or whose operator is in
``exclude_operators``.  Then:

* a quantized conv/FC -> ``quantized_<name>`` (``_contrib_quantized_conv`` /
  ``_fully_connected``, the float node's attributes, int8 ``<param>_quantize``
  weights and biases with ``_min``/``_max``), always followed by
  ``requantize_<name>`` (int32 -> the dtype; calibrated with the float output
  ``<name>_output``);
* a quantized relu/pooling/flatten -> ``quantized_<name>`` on the codes;
* a float value a quantized node reads -> ``_contrib_quantize_v2`` named
  :func:`.rewrite.quantize_name` (calibrated with that value);
* a quantized value a float node (or the graph's output) reads ->
  ``<name>_dequantize``.

Calibration runs on the float graph.  Other quantizable operators
(BatchNorm, Concat, elemwise_add ...) are refused unless excluded: their
quantized forms are not implemented yet.
"""

from __future__ import annotations

from typing import Mapping

import numpy as np

from ..ir import Entry, Graph, Node
from .fuse import FC, QUANTIZABLE, output_name
from .options import QuantizeError, QuantizeOptions
from .rewrite import Builder

MUST = {"Convolution": "_contrib_quantized_conv", FC: "_contrib_quantized_fully_connected"}
SUPPORT = {"Activation": "_contrib_quantized_act", "Pooling": "_contrib_quantized_pooling",
           "Flatten": "_contrib_quantized_flatten"}


def _kind(n: Node, opts: QuantizeOptions) -> str | None:
    """``"must"``, ``"support"`` or None (float) for one node, as ``NeedQuantize``."""
    if n.op is None or n.name in opts.exclude_layers or n.op in opts.exclude_operators:
        return None
    if n.op in MUST:
        return "must"
    if n.op == "Activation":     # FQuantizedOp gives no op for another act_type
        return "support" if n.attrs.get("act_type") == "relu" else None
    if n.op == "Pooling":
        if n.attrs.get("pool_type", "max") not in ("max", "avg"):
            raise QuantizeError(f"quantize: Pooling {n.name!r} with pool_type "
                                f"{n.attrs.get('pool_type')!r} is not implemented yet")
        return "support"
    if n.op == "Flatten":
        return "support"
    if n.op == "RNN":
        raise QuantizeError(f"quantize: MXNet 1.9.1 cannot quantize RNN layers (node "
                            f"{n.name!r}); keep them float32 with --exclude-operators RNN")
    if n.op in QUANTIZABLE:
        raise QuantizeError(f"quantize: {n.op} ({n.name!r}) in the classic flow is not "
                            f"implemented yet; keep it float32 with --exclude-operators {n.op}")
    return None


def why_float(n: Node, opts: QuantizeOptions) -> str:
    """Why the classic flow left node *n* float32 (the report's words)."""
    if n.name in opts.exclude_layers:
        return "excluded by exclude_layers"
    if n.op in opts.exclude_operators:
        return "excluded by exclude_operators"
    if n.op in MUST or n.op in SUPPORT:
        return "smart mode: no quantized neighbour on both sides"
    return "MXNet does not quantize it"


def quantized_nodes(graph: Graph, opts: QuantizeOptions) -> dict[int, str]:
    """``{id(node): kind}`` of the nodes the classic flow quantizes (``MarkQuantizedNodes``)."""
    kinds = {id(n): k for n in graph.topo_order() if (k := _kind(n, opts)) is not None}
    if opts.quantize_mode == "full":
        return kinds
    must = [n for n in graph.topo_order() if kinds.get(id(n)) == "must"]
    marks = {i: 0 for i, k in kinds.items() if k == "support"}
    for bit, step in ((1, lambda n: [e.node for e in n.inputs]), (2, lambda n: n.users)):
        todo = list(must)
        while todo:
            for nxt in step(todo.pop()):
                if id(nxt) in marks and not marks[id(nxt)] & bit:
                    marks[id(nxt)] |= bit
                    todo.append(nxt)
    return {i: k for i, k in kinds.items() if k == "must" or marks[i] == 3}


def classic_calib_layers(graph: Graph, quantized: dict[int, str]) -> dict[str, Entry]:
    """The float values calibrated: what each quantize node reads, and each conv/FC output."""
    layers: dict[str, Entry] = {}
    for n in graph.topo_order():
        if id(n) not in quantized:
            continue
        src = n.inputs[0]
        if id(src.node) not in quantized:
            layers.setdefault(output_name(src), src)
        if quantized[id(n)] == "must":
            layers.setdefault(output_name(Entry(n, 0)), Entry(n, 0))
    return layers


def classic_graph(graph: Graph, params: Mapping[str, np.ndarray], opts: QuantizeOptions,
                  table: Mapping[str, tuple[float, float]] | None,
                  quantized: dict[int, str]) -> tuple[Graph, dict[str, np.ndarray]]:
    """``(int8 graph, its params)`` of the classic flow (*table* None: ``calib_mode="none"``)."""
    b = Builder(params, opts.quantized_dtype, table)
    codes_of: dict[int, tuple[Entry, Entry, Entry]] = {}    # quantized node -> its codes
    copy_of: dict[int, Node] = {}                           # float node -> its copy
    dequantized: dict[int, Entry] = {}

    def as_float(e: Entry) -> Entry:
        if id(e.node) in codes_of:
            if id(e.node) not in dequantized:
                deq = b.add(Node("_contrib_dequantize", f"{e.node.name}_dequantize", {},
                                 list(codes_of[id(e.node)])))
                dequantized[id(e.node)] = Entry(deq, 0)
            return dequantized[id(e.node)]
        if e.node.op is None:
            return Entry(b.var(e.node.name, e.node), 0)
        return Entry(copy_of[id(e.node)], e.index)

    def as_codes(e: Entry) -> tuple[Entry, Entry, Entry]:
        if id(e.node) in codes_of:
            return codes_of[id(e.node)]
        if e.node.op is None and e.node.name in params:
            raise QuantizeError(f"quantize: parameter {e.node.name!r} is the data of a "
                                f"quantized layer; only layer outputs and model inputs can be")
        return b.quantize_input(e, as_float(e))

    for n in graph.topo_order():
        if n.op is None:
            continue
        kind = quantized.get(id(n))
        if kind is None:
            copy_of[id(n)] = b.add(Node(n.op, n.name, dict(n.attrs),
                                        [as_float(e) for e in n.inputs],
                                        [g.copy() for g in n.subgraphs]))
            continue
        data = as_codes(n.inputs[0])
        if kind == "support":
            q = b.add(Node(SUPPORT[n.op], f"quantized_{n.name}", dict(n.attrs), list(data)))
            codes_of[id(n)] = (Entry(q, 0), Entry(q, 1), Entry(q, 2))
            continue
        q = b.add(Node(MUST[n.op], f"quantized_{n.name}", dict(n.attrs),
                       b.fc_inputs(data, n.inputs)))
        attrs = b.calibrated({"out_type": b.dtype}, output_name(Entry(n, 0)))
        req = b.add(Node("_contrib_requantize", f"requantize_{n.name}", attrs,
                         [Entry(q, 0), Entry(q, 1), Entry(q, 2)]))
        codes_of[id(n)] = (Entry(req, 0), Entry(req, 1), Entry(req, 2))
    for e in graph.outputs:
        if e.node.op is None:
            raise QuantizeError(f"quantize: output {e.node.name!r} is an input of the model")
    return b.finish([as_float(e) for e in graph.outputs], dict(graph.attrs))
