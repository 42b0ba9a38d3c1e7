"""One ``.mxc`` artifact as a KServe model (the Open Inference Protocol's "model").

:class:`MxcModel` is a ``kserve.Model``: KServe's server does the protocol --
REST and gRPC, JSON and binary tensors, health and metadata routes -- and this
class answers with the artifact.  ``load()`` verifies the artifact (with the
server's ``--verify-key``, before any of its native code is loaded) and opens a
:class:`~mxc.runtime.Session`; ``predict`` checks the request against the
manifest's inputs, hands it to the :class:`~mxc.serving.batcher.AdaptiveBatcher`
and answers with one output tensor per model output.
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
from .tensors import as_array, check_feeds, output_tensor, tensor_metadata

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

    def check_request(self, given: dict) -> None:
        """Refuse a request whose inputs (name -> (V2 datatype, shape)) do not match this
        model's; the infer route calls it before reading any tensor's values."""
        check_feeds(self.name, self.session.inputs, given)

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

    def _feeds(self, payload: Any) -> dict:
        if not isinstance(payload, InferRequest):
            raise RequestError(f"model {self.name!r} speaks the V2 protocol: "
                               f"POST /v2/models/{self.name}/infer")
        given = {}
        for t in payload.inputs:
            if t.name in given:
                raise RequestError(f"model {self.name!r}: input {t.name!r} is given twice")
            given[t.name] = (t.datatype, list(t.shape))
        check_feeds(self.name, self.session.inputs, given)
        return {t.name: as_array(t.name, t.datatype, list(t.shape), t.as_numpy)
                for t in payload.inputs}

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
