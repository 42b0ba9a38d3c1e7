"""Naive calibration: each calibrated layer's output min and max over the calibration batches.

As MXNet's ``_LayerOutputMinMaxCollector`` (python/mxnet/contrib/quantization.py):
the float (fused) graph runs batch by batch, and for every layer the pass asked
for (``calib_layers``: the quantized nodes' float inputs and outputs, by
output name) the running ``(min(cur_min, batch_min), max(cur_max, batch_max))``
of float32 values is kept.  ``_collect_layer_statistics`` stops after the
batch that reaches ``num_calib_examples``; the caller passes exactly the
batches to use.
"""

from __future__ import annotations

from typing import Callable, Iterable, Mapping

import numpy as np

from ..interpret import run_graph
from ..ir import Entry, Graph
from ..ir.graph import copy_graph
from .options import QuantizeError


def naive_min_max(graph: Graph, params: Mapping[str, np.ndarray],
                  batches: Iterable[Mapping[str, np.ndarray]], layers: dict[str, Entry],
                  progress: Callable[[], None] | None = None) -> dict[str, tuple[float, float]]:
    """``{layer output name: (min, max)}`` of *layers* (entries of *graph*) over *batches*.

    *progress* is called once per batch (the CLI's progress bar).
    """
    names = list(layers)
    probe, copies = copy_graph(graph)
    probe.outputs = [Entry(copies[id(layers[n].node)], layers[n].index) for n in names]
    table: dict[str, tuple[float, float]] = {}
    seen = 0
    for batch in batches:
        feeds = dict(params)
        feeds.update(batch)
        for name, value in zip(names, run_graph(probe, feeds)):
            v = np.asarray(value, dtype=np.float32)
            lo, hi = np.float32(v.min()), np.float32(v.max())
            if name in table:
                lo, hi = min(table[name][0], lo), max(table[name][1], hi)
            table[name] = (lo, hi)
        seen += 1
        if progress is not None:
            progress()
    if not seen:
        raise QuantizeError("quantize: the calibration data holds no batch")
    return {k: (float(lo), float(hi)) for k, (lo, hi) in table.items()}
