"""``quantize_model``'s classic flow (``--flow model``) for FullyConnected(+relu) graphs.

``mxnet.contrib.quantization.quantize_model`` runs the quantize pass
(src/operator/quantization/quantize_graph_pass.cc) on the float graph itself,
with no oneDNN fusion before or after, so the graph keeps one node per layer:

* ``FullyConnected`` -> ``quantized_<name>`` ``_contrib_quantized_fully_connected``
  (the FC's attributes; int8 ``<param>_quantize`` weights and biases with
  ``_min``/``_max``), always followed by ``requantize_<name>`` (int32 -> the
  dtype; calibrated with the FC's float output, ``<name>_output``);
* ``Activation(relu)`` -> ``quantized_<name>`` ``_contrib_quantized_act`` on the
  requantized codes.  It is ``kSupport`` (no ``FQuantizable``): in ``smart``
  mode it is quantized only between quantized neighbours on both sides;
* a float model input -> ``<name>_quantize`` (``_contrib_quantize_v2``);
* a graph output -> ``<name>_dequantize`` of the float node's name.

Calibration runs on the float graph, so the thresholds are those of the FC
outputs before their relu (``mlp0_dense0_fwd_output``).
"""

from __future__ import annotations

from typing import Mapping

import numpy as np

from ..ir import Entry, Graph, Node
from .fuse import FC
from .options import QuantizeError, QuantizeOptions
from .rewrite import ParamQuantizer, calib_attr, input_quantizer


def classic_calib_layers(graph: Graph) -> dict[str, Entry]:
    """The layer outputs ``quantize_model`` calibrates, in MXNet's order: each FC's float data
    input when it is a model input, and each FC's own output."""
    layers: dict[str, Entry] = {}
    for n in graph.topo_order():
        if n.op != FC:
            continue
        src = n.inputs[0].node
        if src.op is None:
            layers.setdefault(src.name, n.inputs[0])
        layers.setdefault(f"{n.name}_output", Entry(n, 0))
    return layers


def classic_graph(graph: Graph, params: Mapping[str, np.ndarray], opts: QuantizeOptions,
                  table: Mapping[str, tuple[float, float]] | None
                  ) -> tuple[Graph, dict[str, np.ndarray]]:
    """``(int8 graph, its params)`` of the classic flow (*table* None: ``calib_mode="none"``)."""
    dtype = opts.quantized_dtype
    nodes: list[Node] = []
    quantized_of: dict[int, tuple[Entry, Entry, Entry]] = {}
    var_of: dict[str, Node] = {}
    heads = {id(e.node) for e in graph.outputs}

    def var(name: str) -> Node:
        if name not in var_of:
            var_of[name] = Node(None, name)
            nodes.append(var_of[name])
        return var_of[name]

    quantize_param = ParamQuantizer(params, var)

    quantize_input = input_quantizer(dtype, table, var, nodes)

    for n in graph.topo_order():
        if n.op != FC:
            continue
        src = n.inputs[0].node
        if src.op is None:
            layers.setdefault(src.name, n.inputs[0])
        layers.setdefault(f"{n.name}_output", Entry(n, 0))
    return layers


def classic_graph(graph: Graph, params: Mapping[str, np.ndarray], opts: QuantizeOptions,
                  table: Mapping[str, tuple[float, float]] | None
                  ) -> tuple[Graph, dict[str, np.ndarray]]:
    """``(int8 graph, its params)`` of the classic flow (*table* None: ``calib_mode="none"``)."""
    dtype = opts.quantized_dtype
    nodes: list[Node] = []
    quantized_of: dict[int, tuple[Entry, Entry, Entry]] = {}
    quantize_of: dict[str, Node] = {}
    var_of: dict[str, Node] = {}
    heads = {id(e.node) for e in graph.outputs}

    def var(name: str) -> Node:
        if name not in var_of:
            var_of[name] = Node(None, name)
            nodes.append(var_of[name])
        return var_of[name]

    quantize_param = ParamQuantizer(params, var)

    def quantize_input(src: Node) -> tuple[Entry, Entry, Entry]:
        if src.name not in quantize_of:
            attrs = {"out_type": dtype}
            if table is not None:
                lo, hi = table[src.name]
                attrs = {"max_calib_range": calib_attr(hi), "min_calib_range": calib_attr(lo),
                         **attrs}
            q = Node("_contrib_quantize_v2", f"{src.name}_quantize", attrs,
                     [Entry(var(src.name), 0)])
            nodes.append(q)
            quantize_of[src.name] = q
        q = quantize_of[src.name]
        return Entry(q, 0), Entry(q, 1), Entry(q, 2)

    for n in graph.topo_order():
        if n.op is None:
            continue
        src = n.inputs[0].node
        if n.op == FC:
            if src.op is None:
                if src.name in params:
                    raise QuantizeError(f"quantize: node {n.name!r} reads parameter "
                                        f"{src.name!r} as its data; only model inputs can be "
                                        f"quantized there")
                data = quantize_input(src)
            elif id(src) in quantized_of:
                data = quantized_of[id(src)]
            else:
                raise QuantizeError(f"quantize: node {n.name!r} reads the float output of "
                                    f"{src.name!r}; not implemented yet")
            weight = quantize_param(n.inputs[1].node.name)
            bias = quantize_param(n.inputs[2].node.name) if len(n.inputs) > 2 else None
            inputs = [data[0], Entry(weight[0], 0)]
            if bias is not None:
                inputs.append(Entry(bias[0], 0))
            inputs += [data[1], data[2], Entry(weight[1], 0), Entry(weight[2], 0)]
            if bias is not None:
                inputs += [Entry(bias[1], 0), Entry(bias[2], 0)]
            qfc = Node("_contrib_quantized_fully_connected", f"quantized_{n.name}",
                       dict(n.attrs), inputs)
            attrs = {"out_type": dtype}
            if table is not None:
                lo, hi = table[f"{n.name}_output"]
                attrs = {"max_calib_range": calib_attr(hi), "min_calib_range": calib_attr(lo),
                         **attrs}
            req = Node("_contrib_requantize", f"requantize_{n.name}", attrs,
                       [Entry(qfc, 0), Entry(qfc, 1), Entry(qfc, 2)])
            nodes += [qfc, req]
            quantized_of[id(n)] = (Entry(req, 0), Entry(req, 1), Entry(req, 2))
            continue
        # Activation(relu), checked by fuse.check_supported: its input is an FC
        if opts.quantize_mode == "smart" and id(n) in heads:
            raise QuantizeError(f"quantize: relu {n.name!r} is a model output; smart mode "
                                f"leaves it float32, which is not implemented yet")
        act = Node("_contrib_quantized_act", f"quantized_{n.name}", dict(n.attrs),
                   list(quantized_of[id(src)]))
        nodes.append(act)
        quantized_of[id(n)] = (Entry(act, 0), Entry(act, 1), Entry(act, 2))
    outputs = []
    for e in graph.outputs:
        if id(e.node) not in quantized_of:
            raise QuantizeError(f"quantize: output {e.node.name!r} is an input of the model")
        deq = Node("_contrib_dequantize", f"{e.node.name}_dequantize", {},
                   list(quantized_of[id(e.node)]))
        nodes.append(deq)
        outputs.append(Entry(deq, 0))
    out = Graph(nodes, outputs, dict(graph.attrs))
    made = quantize_param.arrays
    return out, {k: made[k] for k in out.list_arguments() if k in made}
