"""Post-training INT8 quantization of float32 MXNet graphs, as MXNet 1.9.1's quantizer does it.

:func:`quantize` is ``mxnet.contrib.quantization.quantize_net``'s oneDNN flow
without MXNet: fuse (:mod:`.fuse`), calibrate the fused float graph
(:mod:`.calibrate`), rewrite it into the INT8 graph and params MXNet writes
(:mod:`.rewrite`); with ``flow="model"`` it is ``quantize_model``'s classic
flow instead (:mod:`.classic`: no fusion).  Implemented so far: graphs of
FullyConnected layers (each optionally followed by its relu), after operators
MXNet leaves float32 (``quantize_net``'s flow; ``exclude_operators`` for such
operators), ``calib_mode`` naive, entropy and none, every ``quantized_dtype``
and ``quantize_mode``, both flows; the classic flow also takes convolutions,
relu, pooling and flatten, and ``exclude_layers``/``exclude_operators``.  Everything else is
refused by :meth:`.options.QuantizeOptions.check`, :func:`.fuse.check_supported`
or :func:`.classic.quantized_nodes`, naming what is missing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterable, Mapping

import numpy as np

from ..ir import Graph
from .calibrate import entropy_thresholds, naive_min_max
from .classic import classic_calib_layers, classic_graph, quantized_nodes, why_float
from .fuse import FUSED_FC, fuse_fully_connected
from .options import QuantizeError, QuantizeOptions
from .rewrite import calib_layers, quantized_graph

__all__ = ["QuantizeError", "QuantizeOptions", "QuantizeResult", "quantize"]


@dataclass
class QuantizeResult:
    """What :func:`quantize` made, and what it did to each layer."""

    graph: Graph
    params: dict[str, np.ndarray]
    #: MXNet's calibration table: layer output name -> (min, max); empty for calib "none"
    thresholds: dict[str, tuple[float, float]]
    #: the layer outputs calibration was asked for, in MXNet's order
    calib_layers: list[str]
    #: (layer, "int8" | "float32", why), one per layer of the float model
    layers: list[tuple[str, str, str]]
    #: calibration batches used
    num_batches: int
    #: entropy calibration: per layer, the histogram facts the corpus records
    entropy: dict[str, dict]


def quantize(graph: Graph, params: Mapping[str, np.ndarray],
             calib_batches: Iterable[Mapping[str, np.ndarray]] | None,
             options: QuantizeOptions | None = None,
             progress: Callable[[], None] | None = None) -> QuantizeResult:
    """Quantize *graph* (float32, its ``arg:`` params by name in *params*).

    *calib_batches* yields ``{input name: batch}`` dicts (already cut to the
    batches to use); it is required unless ``calib_mode`` is ``"none"``, as
    in MXNet.  *progress* is called once per calibration batch.
    """
    opts = options or QuantizeOptions()
    opts.check()
    if opts.calib_mode != "none" and calib_batches is None:
        raise QuantizeError(f"quantize: calib_data must be provided when "
                            f"calib_mode={opts.calib_mode}")
    float_ops = tuple(opts.exclude_operators)
    if opts.flow == "model":
        marked = quantized_nodes(graph, opts)
        calib_graph, layers = graph, classic_calib_layers(graph, marked)
    else:
        calib_graph = fuse_fully_connected(graph, dict(params), float_ops)
        layers = calib_layers(calib_graph, params)
    table: dict[str, tuple[float, float]] | None = None
    batches: list[Mapping[str, np.ndarray]] = []
    facts: dict[str, dict] = {}
    if opts.calib_mode == "naive":
        batches = list(calib_batches)
        table = naive_min_max(calib_graph, params, batches, layers, progress)
    elif opts.calib_mode == "entropy":
        batches = list(calib_batches)
        table, facts = entropy_thresholds(calib_graph, params, batches, layers,
                                          opts.quantized_dtype, progress)
    if opts.flow == "model":
        qgraph, qparams = classic_graph(graph, params, opts, table, marked)
        report = [(n.name, "int8" if id(n) in marked else "float32",
                   f"quantized_{n.name}" if id(n) in marked else why_float(n, opts))
                  for n in graph.topo_order() if n.op is not None]
    else:
        qgraph, qparams = quantized_graph(calib_graph, params, opts, table)
        report = []
        for n in calib_graph.topo_order():
            if n.op == FUSED_FC:
                inner = [x.name for x in n.subgraphs[0].topo_order() if x.op is not None]
                report.append((" + ".join(inner), "int8", f"quantized_{n.name}"))
    return QuantizeResult(qgraph, qparams, dict(table or {}), list(layers), report,
                          len(batches), facts)
