"""One ``.mxc`` artifact as a KServe model (the Open Inference Protocol's "model").

:class:`MxcModel` is a ``kserve.Model``: KServe's server does the protocol --
REST and gRPC, JSON and binary tensors, health and metadata routes -- and this
class answers with the artifact.  ``load()`` verifies the artifact (with the
server's ``--verify-key``, before any of its native code is loaded) and opens a
:class:`~mxc.runtime.Session`; ``predict`` hands the request's feeds to the
:class:`~mxc.serving.batcher.AdaptiveBatcher` and answers with one output
tensor per model output.

A request is checked once, by the session (:meth:`check_request`, which
calls ``Session.check_feeds``): the infer route calls it while it reads the
request, before any value is converted, and the request it hands on carries
the checked feeds (``checked_feeds``), which ``predict`` and the session take
as they are.  A request that comes another way (gRPC, CloudEvents) is checked
in ``predict``, the same way, once.
"""

from __future__ import annotations

import logging
import time
import uuid
from pathlib import Path
from typing import Any

import kserve
from kserve.protocol.infer_type import InferRequest, InferResponse

from .. import runtime
from ..errors import MxcError
from . import metrics
from .batcher import AdaptiveBatcher, batch_range
from .errors import RequestError
from .requests import json_limit
from .tensors import as_array, check_request, output_tensor, tensor_metadata

log = logging.getLogger(__name__)


class MxcModel(kserve.Model):
    """A served artifact; *name* is its served name (``mlp`` or ``mlp@2`` for a version)."""

    def __init__(self, name: str, path: str | Path, *, verify_key: Any = None,
                 max_batch_size: int = 1, max_latency_ms: float = 5.0, threads: int | None = None):
        super().__init__(name)
        self.path = Path(path)
        self.verify_key = verify_key
        self.max_batch_size, self.max_latency_ms, self.threads = max_batch_size, max_latency_ms, threads
        self.session: runtime.Session | None = None
        self.batcher: AdaptiveBatcher | None = None
        self.json_limit: int | None = None

    def load(self) -> bool:
        """Verify and load the artifact; raises :class:`~mxc.errors.ArtifactError` /
        :class:`~mxc.errors.SigningError` (nothing is served from a refused file)."""
        self.session = runtime.load(self.path, verify_key=self.verify_key, threads=self.threads)
        batch = batch_range(self.session)
        self.batcher = AdaptiveBatcher(self.session.run, batch,
                                       max_batch_size=self.max_batch_size,
                                       max_latency_ms=self.max_latency_ms,
                                       observe=metrics.observer(self.name),
                                       submit=getattr(self.session, "submit", None))
        #: the largest JSON request body this model can need (None: only the binary limit)
        self.json_limit = json_limit(self.session.inputs, batch.hi if batch else None)
        self._requests = {o: metrics.REQUESTS.labels(self.name, o)
                          for o in ("ok", "error", "bad_request")}
        self._latency = metrics.LATENCY.labels(self.name)
        self.ready = True
        log.info("loaded %s from %s (inputs %s, batching %s)", self.name, self.path,
                 tensor_metadata(self.session.inputs), self.batcher.batching)
        return True

    def check_request(self, given: dict):
        """The session's check of a request's inputs (name -> (V2 datatype, shape)),
        before any of their values is read: its ``CheckedFeeds`` (``fill(values)``
        takes the values), or a :class:`RequestError` naming the input."""
        return check_request(self.name, self.session, given)

    def count_refused(self) -> None:
        """Count a request refused before it reached :meth:`predict`."""
        self._requests["bad_request"].inc()

    def get_input_types(self) -> list[dict]:
        return tensor_metadata(self.session.inputs)

    def get_output_types(self) -> list[dict]:
        return tensor_metadata(self.session.outputs)

    async def predict(self, payload: InferRequest, headers: dict | None = None,
                      response_headers: dict | None = None) -> InferResponse:
        started = time.perf_counter()
        outcome = "error"
        try:
            feeds = self._feeds(payload)
            try:
                outs = await self.batcher.submit(feeds)
            except MxcError as exc:  # e.g. a batch outside the artifact's range
                raise RequestError(f"model {self.name!r}: {exc}") from None
            outcome = "ok"
            return self._response(payload, outs)
        except RequestError:
            outcome = "bad_request"
            raise
        finally:
            self._requests[outcome].inc()
            self._latency.observe(time.perf_counter() - started)

    def _feeds(self, payload: Any):
        if not isinstance(payload, InferRequest):
            raise RequestError(f"model {self.name!r} speaks the V2 protocol: "
                               f"POST /v2/models/{self.name}/infer")
        checked = getattr(payload, "checked_feeds", None)
        if checked is not None and checked.signature is self.session.feed_signature:
            return checked   # checked by this session as the request was read
        given = {}
        for t in payload.inputs:
            if t.name in given:
                raise RequestError(f"model {self.name!r}: input {t.name!r} is given twice")
            given[t.name] = (t.datatype, list(t.shape))
        checked = self.check_request(given)
        return checked.fill({t.name: as_array(t.name, t.datatype, list(t.shape), t.as_numpy)
                             for t in payload.inputs})

    def _response(self, payload: InferRequest, outs: list) -> InferResponse:
        wanted = {o.name for o in (payload.request_outputs or [])}
        binary = bool(payload.use_binary_outputs)
        tensors = []
        for info, value in zip(self.session.outputs, outs):
            if wanted and info.name not in wanted:
                continue
            tensors.append(output_tensor(info.name, value, binary))
        return InferResponse(model_name=self.name, infer_outputs=tensors, response_id=payload.id or str(uuid.uuid4()),
                             use_binary_outputs=binary, requested_outputs=payload.request_outputs)
