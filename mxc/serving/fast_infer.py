"""The V2 infer route for binary-tensor requests, answered without FastAPI's routing.

Every request through KServe's FastAPI app pays for route matching over all of
KServe's routes, dependency solving, a timing middleware and exception
middleware layers: about 0.3 ms of CPU per request on this project's 2-core
benchmark machine, a third of the served overhead a batch-1 request may have
(issue 25's target is 1 ms over ``Session.run``).  :func:`fast_infer` is an
ASGI middleware that answers the one hot route, ``POST /v2/models/NAME/infer``
with the binary tensor extension (``Inference-Header-Content-Length``), with
the same KServe calls its endpoint makes -- ``DataPlane.model_ready``,
``decode``, ``infer``, ``encode`` -- and the app's own exception handlers for
errors, so answers and status codes are KServe's.  Everything else (JSON
bodies, CloudEvents, other routes) goes to KServe's app unchanged.

The one difference on the wire: a binary answer carries its ``Content-Length``
(FastAPI's sub-response for that route sends none, so uvicorn chunks it).
"""

from __future__ import annotations

import inspect
import logging
import re
from typing import Any

log = logging.getLogger(__name__)

_INFER = re.compile(r"/v2/models/([^/]+)/infer")
_BINARY_HEADER = b"inference-header-content-length"


def _wants_fast_path(scope: dict) -> str | None:
    """The model name when *scope* is a binary V2 infer request, else None."""
    if scope["type"] != "http" or scope.get("method") != "POST":
        return None
    match = _INFER.fullmatch(scope["path"])
    if match is None:
        return None
    names = [k.lower() for k, _ in scope.get("headers") or []]
    if _BINARY_HEADER not in names or any(n.startswith(b"ce-") for n in names):
        return None  # JSON (FastAPI validates it) or a CloudEvent: KServe's route
    return match.group(1)


async def _body(receive) -> bytes | None:
    """The whole request body; None when the client went away first."""
    chunks = []
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return None
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            return b"".join(chunks)


async def _answer(dataplane: Any, name: str, body: bytes, headers: dict):
    """What KServe's ``V2Endpoints.infer`` answers (kserve 0.21), as a Starlette response."""
    from fastapi.encoders import jsonable_encoder
    from fastapi.responses import ORJSONResponse, Response
    from kserve.constants.constants import PredictorProtocol
    from kserve.errors import ModelNotReady
    from kserve.protocol.rest.v2_datamodels import InferenceResponse

    if not await dataplane.model_ready(name, True):
        raise ModelNotReady(name)
    request, _ = dataplane.decode(body, headers, protocol_version=PredictorProtocol.REST_V2.value,
                                  model_name=name)
    response, response_headers = await dataplane.infer(model_name=name, request=request,
                                                       headers=headers)
    response, extra = dataplane.encode(model_name=name, response=response, headers=headers,
                                       req_attributes={})
    response_headers.update(extra)
    response_headers.pop("content-length", None)
    response_headers.pop("content-type", None)
    if isinstance(response, bytes):
        return Response(content=response, status_code=200, headers=response_headers)
    return ORJSONResponse(jsonable_encoder(InferenceResponse.model_validate(response)),
                          headers=response_headers)


def _handler(app: Any, exc: Exception):
    """The app's exception handler for *exc* (by its class's MRO, as Starlette looks it up)."""
    handlers = getattr(app, "exception_handlers", {}) or {}
    for cls in type(exc).__mro__:
        if cls in handlers:
            return handlers[cls]
    return None


def fast_infer(app: Any, dataplane: Any):
    """ASGI middleware over KServe's FastAPI *app* (see the module docstring)."""
    async def middleware(scope, receive, send):
        name = _wants_fast_path(scope)
        if name is None:
            return await app(scope, receive, send)
        body = await _body(receive)
        if body is None:
            return None
        headers = {k.decode("latin-1").lower(): v.decode("latin-1")
                   for k, v in scope.get("headers") or []}
        try:
            response = await _answer(dataplane, name, body, headers)
        except Exception as exc:  # noqa: BLE001 - answered by the app's own handlers
            handler = _handler(app, exc)
            if handler is None:
                raise
            from starlette.requests import Request
            response = handler(Request(scope), exc)
            if inspect.isawaitable(response):
                response = await response
        await response(scope, receive, send)
    return middleware
