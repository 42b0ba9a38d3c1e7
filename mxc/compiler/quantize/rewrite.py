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

Operators MXNet does not quantize are copied as they are; a quantized FC fed
by one gets a ``<node>_<output index>_quantize`` before it.  Uncalibrated
(``calib_mode="none"``) nothing is folded: the requantize and
dequantize nodes stay, and ranges are found at run time.
"""

from __future__ import annotations

from typing import Mapping

import numpy as np

from ..ir import Entry, Graph, Node
from ..ops.quantized import quantize_int8
from .fuse import FUSED_FC, fused_output_name, output_name
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
        layers.setdefault(output_name(n.inputs[0]), n.inputs[0])
        layers.setdefault(fused_output_name(n), Entry(n, 0))
    return layers


#: operators that name their outputs (``FListOutputNames`` in MXNet 1.9.1), among those a
#: quantized layer may read: the quantize pass puts the output's name in the quantize
#: node's name for them, the output's index for the others
NAMED_OUTPUTS = frozenset({
    "Activation", "BatchNorm", "Concat", "Convolution", "Deconvolution", "Dropout",
    "FullyConnected", "GroupNorm", "LayerNorm", "LeakyReLU", "LRN", "Pooling", "RNN",
    "SoftmaxOutput", "UpSampling", "elemwise_add", "softmax", "softmin", "Custom"})


def quantize_name(entry: Entry) -> str:
    """The name the quantize pass gives the ``_contrib_quantize_v2`` of a float value
    (``quantize_graph_pass.cc``): a variable's name, else the node's name and the output's
    name (:data:`NAMED_OUTPUTS`) or index, then ``_quantize``."""
    node = entry.node
    if node.op is None:
        return f"{node.name}_quantize"
    if node.op in NAMED_OUTPUTS:
        return f"{output_name(entry)}_quantize"
    return f"{node.name}_{entry.index}_quantize"


class Builder:
    """The nodes of the graph being written, and the helpers both flows share."""

    def __init__(self, params: Mapping[str, np.ndarray], dtype: str,
                 table: Mapping[str, tuple[float, float]] | None):
        self.params = params
        self.dtype = dtype
        self.table = table
        self.nodes: list[Node] = []
        self.arrays: dict[str, np.ndarray] = {}
        self._vars: dict[str, Node] = {}
        self._quantized: dict[tuple[int, int], Node] = {}

    def add(self, node: Node) -> Node:
        self.nodes.append(node)
        return node

    def var(self, name: str, old: Node | None = None) -> Node:
        """The variable *name*, made once (with the attributes of *old*, the float graph's)."""
        if name not in self._vars:
            self._vars[name] = self.add(Node(None, name, dict(old.attrs) if old else None))
        return self._vars[name]

    def calibrated(self, attrs: dict, key: str) -> dict:
        """*attrs* with the calibrated range of *key*, in MXNet's (sorted) attribute order."""
        if self.table is None:
            return attrs
        lo, hi = self.table[key]
        return {"max_calib_range": calib_attr(hi), "min_calib_range": calib_attr(lo), **attrs}

    def quantize_input(self, old: Entry, new: Entry) -> tuple[Entry, Entry, Entry]:
        """``(codes, min, max)`` of the one ``_contrib_quantize_v2`` of the float value *old*
        (*new*: the same value in the graph being written), shared by its consumers."""
        key = (id(old.node), old.index)
        if key not in self._quantized:
            attrs = self.calibrated({"out_type": self.dtype}, output_name(old))
            self._quantized[key] = self.add(
                Node("_contrib_quantize_v2", quantize_name(old), attrs, [new]))
        q = self._quantized[key]
        return Entry(q, 0), Entry(q, 1), Entry(q, 2)

    def quantize_param(self, name: str) -> tuple[Node, Node, Node]:
        """``<name>_quantize`` / ``_min`` / ``_max``: MXNet's ``_quantize_params``, i.e.
        ``_contrib_quantize(out_type="int8")`` of the float param with its own min and max."""
        if name not in self.params:
            raise QuantizeError(f"quantize: parameter {name!r} is missing from the params")
        if f"{name}_quantize" not in self.arrays:
            w = np.asarray(self.params[name], dtype=np.float32)
            codes, lo, hi = quantize_int8(w, np.float32(w.min()), np.float32(w.max()))
            self.arrays.update({f"{name}_quantize": codes, f"{name}_quantize_min": lo,
                                f"{name}_quantize_max": hi})
        return (self.var(f"{name}_quantize"), self.var(f"{name}_quantize_min"),
                self.var(f"{name}_quantize_max"))

    def fc_inputs(self, data: tuple[Entry, Entry, Entry], fc_inputs) -> list[Entry]:
        """A quantized FC's inputs: data, weight[, bias], then their ``(min, max)`` pairs."""
        weight = self.quantize_param(fc_inputs[1].node.name)
        bias = self.quantize_param(fc_inputs[2].node.name) if len(fc_inputs) > 2 else None
        out = [data[0], Entry(weight[0], 0)] + ([Entry(bias[0], 0)] if bias else [])
        out += [data[1], data[2], Entry(weight[1], 0), Entry(weight[2], 0)]
        return out + ([Entry(bias[1], 0), Entry(bias[2], 0)] if bias else [])

    def finish(self, outputs: list[Entry], attrs: dict) -> tuple[Graph, dict[str, np.ndarray]]:
        graph = Graph(self.nodes, outputs, attrs)
        made = {**self.params, **self.arrays}
        return graph, {k: made[k] for k in graph.list_arguments() if k in made}


def quantized_graph(fused: Graph, params: Mapping[str, np.ndarray], opts: QuantizeOptions,
                    table: Mapping[str, tuple[float, float]] | None
                    ) -> tuple[Graph, dict[str, np.ndarray]]:
    """``(int8 graph, its params)`` from the fused float graph and the calibration table
    (None for ``calib_mode="none"``)."""
    b = Builder(params, opts.quantized_dtype, table)
    quantized_of: dict[int, tuple[Entry, Entry, Entry]] = {}   # id(fused FC) -> codes, min, max
    float_of: dict[int, Node] = {}                               # id(float node) -> its copy
    heads = {id(e.node) for e in fused.outputs}

    def copied(e: Entry) -> Entry:
        return Entry(float_of[id(e.node)], e.index)

    for n in fused.topo_order():
        if n.op is None:
            if n.name not in params or any(u.op != FUSED_FC for u in n.users):
                float_of[id(n)] = b.var(n.name, n)   # a model input, or a float layer's param
            continue
        if n.op != FUSED_FC:                         # an operator left float32: copied
            float_of[id(n)] = b.add(Node(n.op, n.name, dict(n.attrs),
                                         [copied(e) for e in n.inputs],
                                         [g.copy() for g in n.subgraphs]))
            continue
        src = n.inputs[0]
        if src.node.op is None and src.node.name in params:
            raise QuantizeError(f"quantize: node {n.name!r} reads parameter {src.node.name!r} "
                                f"as its data; only model inputs can be quantized there")
        if src.node.op == FUSED_FC:
            if id(src.node) in heads:
                raise QuantizeError(f"quantize: node {src.node.name!r} is both a model output "
                                    f"and the input of {n.name!r}; not implemented yet")
            data = quantized_of[id(src.node)]
        else:
            data = b.quantize_input(src, copied(src))
        attrs = {"quantized": "True"}
        if n.attrs.get("with_eltwise") == "True":
            attrs["with_eltwise"] = "True"
        qfc = b.add(Node(FUSED_FC, f"quantized_{n.name}", attrs, b.fc_inputs(data, n.inputs),
                         [g.copy() for g in n.subgraphs]))
        if table is None:       # requantize at run time (no calibration to fold in)
            req = b.add(Node("_contrib_requantize", f"requantize_{n.name}",
                             {"out_type": b.dtype}, [Entry(qfc, 0), Entry(qfc, 1), Entry(qfc, 2)]))
            quantized_of[id(n)] = (Entry(req, 0), Entry(req, 1), Entry(req, 2))
        elif id(n) in heads:    # requantize + dequantize folded: float output
            qfc.attrs["enable_float_output"] = "True"
            quantized_of[id(n)] = (Entry(qfc, 0),) * 3
        else:                   # calibrated requantize folded into the FC
            qfc.attrs.update(b.calibrated({}, fused_output_name(n)))
            quantized_of[id(n)] = (Entry(qfc, 0), Entry(qfc, 1), Entry(qfc, 2))
    outputs = []
    for e in fused.outputs:
        if e.node.op != FUSED_FC:
            outputs.append(copied(e))
        elif table is not None:
            outputs.append(quantized_of[id(e.node)][0])
        else:
            deq = b.add(Node("_contrib_dequantize", f"{e.node.name}_dequantize", {},
                             list(quantized_of[id(e.node)])))
            outputs.append(Entry(deq, 0))
    return b.finish(outputs, dict(fused.attrs))
