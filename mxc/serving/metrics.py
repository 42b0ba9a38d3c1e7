"""Prometheus metrics of the served models (exported on KServe's ``/metrics``).

KServe already exports its own per-step latency histograms; these add what a
batching server needs to be tuned: how many requests came and how they ended,
their latency inside the model, the sizes of the batches actually run and how
long requests waited in the batching queue.  All are labelled by model (the
served name, ``name`` or ``name@version``).  With ``--workers N`` each worker
process keeps its own values (scrape each, or aggregate in Prometheus).
"""

from __future__ import annotations

from prometheus_client import Counter, Histogram

_LATENCY_BUCKETS = (.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10)
_BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)

REQUESTS = Counter("mxc_requests_total", "Inference requests by model and outcome",
                   ["model", "outcome"])
LATENCY = Histogram("mxc_request_latency_seconds", "Time from a request reaching the model "
                    "to its outputs", ["model"], buckets=_LATENCY_BUCKETS)
BATCH_SIZE = Histogram("mxc_batch_size", "Batch size of each Session.run", ["model"],
                       buckets=_BATCH_BUCKETS)
QUEUE_TIME = Histogram("mxc_queue_seconds", "Time a request waited to be batched",
                       ["model"], buckets=_LATENCY_BUCKETS)


def observer(model: str):
    """The batcher's ``observe(batch_size, queue_seconds)`` callback for *model*."""
    batch, queue = BATCH_SIZE.labels(model), QUEUE_TIME.labels(model)

    def observe(size: int, waits: list[float]) -> None:
        batch.observe(size)
        for w in waits:
            queue.observe(w)
    return observe
