"""Calibration: thresholds of the calibrated layers' outputs over the calibration batches.

The float (fused) graph runs batch by batch and, for every layer the quantize
pass asked for (``calib_layers``: the quantized nodes' float inputs and
outputs, by output name), MXNet's collectors (python/mxnet/contrib/quantization.py)
keep:

* naive (``_LayerOutputMinMaxCollector``): the running
  ``(min(cur_min, batch_min), max(cur_max, batch_max))`` of float32 values;
* entropy (``_LayerHistogramCollector``): an 8001-bin histogram over
  ``(-th, th)``, ``th = max|batch|``, widened by whole bins when a later batch
  reaches further (``combine_histogram``); then ``_get_optimal_thresholds``
  picks the KL-divergence threshold (``_contrib_calibrate_entropy``, 255
  quantized bins, 511 for a non-negative layer of an ``auto``/``uint8``
  model, whose range is then ``(0, th)``, else ``(-th, th)``).

``_collect_layer_statistics`` stops after the batch that reaches
``num_calib_examples``; the caller passes exactly the batches to use.
"""

from __future__ import annotations

from typing import Callable, Iterable, Mapping

import numpy as np

from ..interpret import run_graph
from ..ops.quantized import calibrate_entropy
from ..ir import Entry, Graph
from ..ir.graph import copy_graph
from .options import QuantizeError


def _layer_outputs(graph: Graph, params: Mapping[str, np.ndarray],
                   batches: Iterable[Mapping[str, np.ndarray]], layers: dict[str, Entry],
                   progress: Callable[[], None] | None):
    """Per batch, ``{layer name: float32 output}`` of *layers* (entries of *graph*)."""
    names = list(layers)
    probe, copies = copy_graph(graph)
    probe.outputs = [Entry(copies[id(layers[n].node)], layers[n].index) for n in names]
    seen = 0
    for batch in batches:
        feeds = dict(params)
        feeds.update(batch)
        yield {n: np.asarray(v, dtype=np.float32) for n, v in zip(names, run_graph(probe, feeds))}
        seen += 1
        if progress is not None:
            progress()
    if not seen:
        raise QuantizeError("quantize: the calibration data holds no batch")


def naive_min_max(graph: Graph, params: Mapping[str, np.ndarray],
                  batches: Iterable[Mapping[str, np.ndarray]], layers: dict[str, Entry],
                  progress: Callable[[], None] | None = None) -> dict[str, tuple[float, float]]:
    """``{layer output name: (min, max)}`` of *layers* over *batches* (naive calibration).

    *progress* is called once per batch (the CLI's progress bar).
    """
    table: dict[str, tuple[np.float32, np.float32]] = {}
    for outs in _layer_outputs(graph, params, batches, layers, progress):
        for name, v in outs.items():
            lo, hi = np.float32(v.min()), np.float32(v.max())
            if name in table:
                lo, hi = min(table[name][0], lo), max(table[name][1], hi)
            table[name] = (lo, hi)
    return {k: (float(lo), float(hi)) for k, (lo, hi) in table.items()}


#: bins of MXNet's calibration histograms (``_LayerHistogramCollector(num_bins=8001)``)
NUM_BINS = 8001


def _combine(old, arr, lo, hi, th):
    """``combine_histogram``: add *arr* to the histogram, widening it by whole bins if needed.

    The widened range is computed in float64 and given to ``np.histogram`` as Python
    floats: what numpy 1.23 (MXNet's) did with ``float32 scalar * int`` (float64) and a
    float64 range over float32 data (value-based casting: float32 bins), which numpy 2
    would otherwise do in float64 bins.
    """
    hist, edges, old_lo, old_hi, old_th = old
    if th <= old_th:
        h, _ = np.histogram(arr, bins=len(hist), range=(-old_th, old_th))
        return hist + h, edges, min(old_lo, lo), max(old_hi, hi), old_th
    step = 2 * float(old_th) / len(hist)
    half = int((float(th) - float(old_th)) // step + 1)
    bins = half * 2 + len(hist)
    new_th = half * step + float(old_th)
    h, new_edges = np.histogram(arr, bins=bins, range=(-new_th, new_th))
    h[half:bins - half] += hist
    return h, new_edges, min(old_lo, lo), max(old_hi, hi), new_th


def entropy_thresholds(graph: Graph, params: Mapping[str, np.ndarray],
                       batches: Iterable[Mapping[str, np.ndarray]], layers: dict[str, Entry],
                       quantized_dtype: str, progress: Callable[[], None] | None = None
                       ) -> tuple[dict[str, tuple[float, float]], dict[str, dict]]:
    """``({layer: (min, max)}, {layer: histogram facts})`` of entropy calibration.

    The facts (``min``, ``max``, ``abs_max``, ``num_bins``, ``hist_sum``,
    ``threshold``, ``divergence``) are those the corpus records per layer.
    """
    hists: dict[str, tuple] = {}
    for outs in _layer_outputs(graph, params, batches, layers, progress):
        for name, arr in outs.items():
            lo, hi = np.min(arr), np.max(arr)
            th = max(abs(lo), abs(hi))
            if name in hists:
                hists[name] = _combine(hists[name], arr, lo, hi, th)
            else:
                h, edges = np.histogram(arr, bins=NUM_BINS, range=(-th, th))
                hists[name] = (h, edges, lo, hi, th)
    table: dict[str, tuple[float, float]] = {}
    facts: dict[str, dict] = {}
    for name, (h, edges, lo, hi, th) in hists.items():
        unsigned = lo >= 0 and quantized_dtype in ("auto", "uint8")
        nq = 255 * 2 + 1 if unsigned else 255
        best, div = calibrate_entropy(h.astype(np.float32), edges.astype(np.float32), nq)
        table[name] = (0.0, float(best)) if unsigned else (-float(best), float(best))
        facts[name] = {"min": float(lo), "max": float(hi), "abs_max": float(th),
                       "num_bins": int(h.size), "hist_sum": int(h.sum()),
                       "num_quantized_bins": nq, "threshold": float(best),
                       "divergence": float(div)}
    return table, facts
