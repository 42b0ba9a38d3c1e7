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
from .rewrite import Builder


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
    b = Builder(params, opts.quantized_dtype, table)
    quantized_of: dict[int, tuple[Entry, Entry, Entry]] = {}
    heads = {id(e.node) for e in graph.outputs}
    for n in graph.topo_order():
        if n.op is None:
            continue
        src = n.inputs[0].node
        if n.op == FC:
            if src.op is not None and id(src) not in quantized_of:
                raise QuantizeError(f"quantize: node {n.name!r} reads the float output of "
                                    f"{src.name!r}; not implemented yet in the classic flow")
            if src.op is None and src.name in params:
                raise QuantizeError(f"quantize: node {n.name!r} reads parameter "
                                    f"{src.name!r} as its data; only model inputs can be "
                                    f"quantized there")
            data = quantized_of[id(src)] if src.op is not None else \
                b.quantize_input(n.inputs[0], Entry(b.var(src.name, src), 0))
            qfc = b.add(Node("_contrib_quantized_fully_connected", f"quantized_{n.name}",
                             dict(n.attrs), b.fc_inputs(data, n.inputs)))
            attrs = b.calibrated({"out_type": b.dtype}, f"{n.name}_output")
            req = b.add(Node("_contrib_requantize", f"requantize_{n.name}", attrs,
                             [Entry(qfc, 0), Entry(qfc, 1), Entry(qfc, 2)]))
            quantized_of[id(n)] = (Entry(req, 0), Entry(req, 1), Entry(req, 2))
            continue
        if n.op != "Activation":
            raise QuantizeError(f"quantize: {n.op} node {n.name!r} in the classic flow is not "
                                f"implemented yet")
        # Activation(relu), checked by fuse.check_supported: its input is an FC
        if opts.quantize_mode == "smart" and id(n) in heads:
            raise QuantizeError(f"quantize: relu {n.name!r} is a model output; smart mode "
                                f"leaves it float32, which is not implemented yet")
        act = b.add(Node("_contrib_quantized_act", f"quantized_{n.name}", dict(n.attrs),
                         list(quantized_of[id(src)])))
        quantized_of[id(n)] = (Entry(act, 0), Entry(act, 1), Entry(act, 2))
    outputs = []
    for e in graph.outputs:
        if id(e.node) not in quantized_of:
            raise QuantizeError(f"quantize: output {e.node.name!r} is an input of the model")
        deq = b.add(Node("_contrib_dequantize", f"{e.node.name}_dequantize", {},
                         list(quantized_of[id(e.node)])))
        outputs.append(Entry(deq, 0))
    return b.finish(outputs, dict(graph.attrs))
