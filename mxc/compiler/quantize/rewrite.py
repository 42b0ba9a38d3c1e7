"""The INT8 graph and params ``quantize_net`` writes for fused fully-connected layers.

MXNet builds it in three steps, which this module folds into one walk of the
fused float graph (:mod:`.fuse`):

1. the quantize pass (src/operator/quantization/quantize_graph_pass.cc,
   ``QuantizeGraph``): each fused FC becomes ``quantized_<name>`` with
   ``quantized=True``; a float input gets a ``<name>_quantize``
   ``_contrib_quantize_v2`` (``out_type`` = the requested dtype); every
   quantized FC is followed by ``requantize_<name>`` (``FNeedRequantize``,
   ``out_type`` = the dtype); a graph output gets ``<fp32 name>_dequantize``;
   weights and biases become ``<param>_quantize`` int8 params with
   ``_min``/``_max`` (``_quantize_params``: ``_contrib_quantize`` with the
   param's own min and max);
2. calibration (``MXSetCalibTableToQuantizedSymbol``) writes each threshold
   with ``std::to_string`` (6 decimals) into ``min_calib_range``/
   ``max_calib_range`` of the quantize nodes (key: the input's name) and the
   requantize nodes (key: the fused FC's output name);
3. the second ``MKLDNN_QUANTIZE`` pass (mkldnn_fc_post_quantize_property.h)
   folds a calibrated requantize into its FC (the FC takes the ranges) and a
   dequantize after an FC into ``enable_float_output=True`` (the ranges go).

Uncalibrated (``calib_mode="none"``) nothing is folded: the requantize and
dequantize nodes stay, and ranges are found at run time.
"""

from __future__ import annotations

from typing import Mapping

import numpy as np

from ..ir import Entry, Graph, Node
from ..ops.quantized import quantize_int8
from .fuse import FUSED_FC, fused_output_name
from .options import QuantizeError, QuantizeOptions


def calib_attr(value: float) -> str:
    """A threshold as MXNet writes it: ``std::to_string(float)``, i.e. ``%f`` of the float32."""
    return f"{float(np.float32(value)):f}"


def calib_layers(fused: Graph, params: Mapping[str, np.ndarray]) -> dict[str, Entry]:
    """The layer outputs the quantize pass asks the collector for, in MXNet's order (DFS from
    the outputs): each quantized FC's float data input, then its own output."""
    layers: dict[str, Entry] = {}
    for n in fused.topo_order():
        if n.op != FUSED_FC:
            continue
        src = n.inputs[0]
        key = src.node.name if src.node.op is None else fused_output_name(src.node)
        layers.setdefault(key, src)
        layers.setdefault(fused_output_name(n), Entry(n, 0))
    return layers


class ParamQuantizer:
    """``<param>_quantize`` / ``_min`` / ``_max`` variables (made by *var*) and their arrays.

    MXNet's ``_quantize_params``: ``_contrib_quantize(out_type="int8")`` of the float
    param with its own min and max as the range.
    """

    def __init__(self, params: Mapping[str, np.ndarray], var):
        self.params = params
        self.var = var
        self.arrays: dict[str, np.ndarray] = {}

    def __call__(self, name: str) -> tuple[Node, Node, Node]:
        if name not in self.params:
            raise QuantizeError(f"quantize: parameter {name!r} is missing from the params")
        if f"{name}_quantize" not in self.arrays:
            w = np.asarray(self.params[name], dtype=np.float32)
            codes, lo, hi = quantize_int8(w, np.float32(w.min()), np.float32(w.max()))
            self.arrays.update({f"{name}_quantize": codes, f"{name}_quantize_min": lo,
                                f"{name}_quantize_max": hi})
        return (self.var(f"{name}_quantize"), self.var(f"{name}_quantize_min"),
                self.var(f"{name}_quantize_max"))


def input_quantizer(dtype: str, table, var, nodes: list[Node]):
    """``src -> (codes, min, max)`` entries of the one ``<src>_quantize`` node
    (``_contrib_quantize_v2``, ``out_type`` the dtype, the calibrated range of *src* when
    *table* is given) that every quantized consumer of the model input *src* shares."""
    made: dict[str, Node] = {}

    def quantize_input(src: Node) -> tuple[Entry, Entry, Entry]:
        if src.name not in made:
            attrs = {"out_type": dtype}
            if table is not None:
                lo, hi = table[src.name]
                attrs = {"max_calib_range": calib_attr(hi), "min_calib_range": calib_attr(lo),
                         **attrs}
            made[src.name] = Node("_contrib_quantize_v2", f"{src.name}_quantize", attrs,
                                  [Entry(var(src.name), 0)])
            nodes.append(made[src.name])
        q = made[src.name]
        return Entry(q, 0), Entry(q, 1), Entry(q, 2)
    return quantize_input


def quantized_graph(fused: Graph, params: Mapping[str, np.ndarray], opts: QuantizeOptions,
                    table: Mapping[str, tuple[float, float]] | None
                    ) -> tuple[Graph, dict[str, np.ndarray]]:
    """``(int8 graph, its params)`` from the fused float graph and the calibration table
    (None for ``calib_mode="none"``)."""
    dtype = opts.quantized_dtype
    nodes: list[Node] = []
    quantized_of: dict[int, tuple[Entry, Entry, Entry]] = {}   # id(fused node) -> codes, min, max
    var_of: dict[str, Node] = {}
    heads = {id(e.node) for e in fused.outputs}

    def var(name: str) -> Node:
        if name not in var_of:
            var_of[name] = Node(None, name)
            nodes.append(var_of[name])
        return var_of[name]

    quantize_input = input_quantizer(dtype, table, var, nodes)
    quantize_param = ParamQuantizer(params, var)

    for n in fused.topo_order():
        if n.op != FUSED_FC:
            continue
        src = n.inputs[0].node
        if src.op is None:
            if src.name in params:
                raise QuantizeError(f"quantize: node {n.name!r} reads parameter {src.name!r} "
                                    f"as its data; only model inputs can be quantized there")
            data = quantize_input(src)
        else:
            if id(src) in heads:
                raise QuantizeError(f"quantize: node {src.name!r} is both a model output and "
                                    f"the input of {n.name!r}; not implemented yet")
            data = quantized_of[id(src)]
        weight = quantize_param(n.inputs[1].node.name)
        bias = quantize_param(n.inputs[2].node.name) if len(n.inputs) > 2 else None
        inputs = [data[0], Entry(weight[0], 0)]
        if bias is not None:
            inputs.append(Entry(bias[0], 0))
        inputs += [data[1], data[2], Entry(weight[1], 0), Entry(weight[2], 0)]
        if bias is not None:
            inputs += [Entry(bias[1], 0), Entry(bias[2], 0)]
        attrs = {"quantized": "True"}
        if n.attrs.get("with_eltwise") == "True":
            attrs["with_eltwise"] = "True"
        qfc = Node(FUSED_FC, f"quantized_{n.name}", attrs, inputs,
                   [g.copy() for g in n.subgraphs])
        nodes.append(qfc)
        if table is None:       # requantize at run time (no calibration to fold in)
            req = Node("_contrib_requantize", f"requantize_{n.name}", {"out_type": dtype},
                       [Entry(qfc, 0), Entry(qfc, 1), Entry(qfc, 2)])
            nodes.append(req)
            quantized_of[id(n)] = (Entry(req, 0), Entry(req, 1), Entry(req, 2))
        elif id(n) in heads:    # requantize + dequantize folded: float output
            qfc.attrs["enable_float_output"] = "True"
            quantized_of[id(n)] = (Entry(qfc, 0),) * 3
        else:                   # calibrated requantize folded into the FC
            lo, hi = table[fused_output_name(n)]
            qfc.attrs["max_calib_range"] = calib_attr(hi)
            qfc.attrs["min_calib_range"] = calib_attr(lo)
            quantized_of[id(n)] = (Entry(qfc, 0), Entry(qfc, 1), Entry(qfc, 2))
    outputs = []
    for e in fused.outputs:
        codes = quantized_of[id(e.node)]
        if table is not None:
            outputs.append(codes[0])
            continue
        deq = Node("_contrib_dequantize", f"{e.node.name}_dequantize", {}, list(codes))
        nodes.append(deq)
        outputs.append(Entry(deq, 0))
    graph = Graph(nodes, outputs, dict(fused.attrs))
    order = graph.list_arguments()
    return graph, {k: quantize_param.arrays[k] for k in order if k in quantize_param.arrays}
