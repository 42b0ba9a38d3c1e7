"""The V2 infer route, ``POST /v2/models/NAME/infer``, answered without FastAPI.

Every request through KServe's FastAPI app pays for route matching over all of
KServe's routes, dependency solving, a timing middleware and exception layers
(about 0.3 ms of CPU per request on a 2-core machine), and its JSON route parses
the body on the event loop with orjson, then pydantic, then a Python list per
tensor: one 60 MiB body stalled every other client for seconds.  This ASGI
middleware answers the one hot route itself, JSON and binary alike:

* the body is read with a limit before it is parsed: ``--max-request-bytes``
  for the binary extension and, for JSON, a limit derived from the model's
  declared inputs (:func:`mxc.serving.requests.json_limit`), so a body that
  cannot fit them is refused (413) by its ``Content-Length`` or as soon as it
  streams past it;
* a body that stalls for ``body_timeout_s`` gets 408;
* large bodies are parsed and checked (:mod:`mxc.serving.requests`) on a small
  thread pool, off the event loop, so other clients keep being answered and
  at most that many bodies are being decoded at once;
* the answer comes from the same data-plane calls KServe's endpoint makes
  (``model_ready``, ``infer``, ``encode``:
  :func:`mxc.serving.kserve_private.answer_infer`), refusals from
  :mod:`mxc.serving.refusals`.

CloudEvents (``ce-*`` headers) and every other route go to KServe's app.
"""

from __future__ import annotations

import asyncio
import logging
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from .asgi_guards import too_large_headers
from .errors import PayloadTooLarge, RequestError, RequestTimeout, UnknownModel
from .kserve_private import answer_infer
from .refusals import rest_handler
from .requests import MODEL_PATH_KEY, binary_header_length, decode_request, model_path

log = logging.getLogger(__name__)

#: bodies up to this size are decoded on the event loop (a thread hop costs more)
INLINE_DECODE_BYTES = 64 << 10
_DECODERS = ThreadPoolExecutor(max_workers=2, thread_name_prefix="mxc-decode")


def _target(scope: dict) -> str | None:
    """The model name when *scope* is a V2 infer request this route answers."""
    if scope["type"] != "http" or scope.get("method") != "POST":
        return None
    target = scope.get(MODEL_PATH_KEY) or model_path(scope["path"])  # v2_compat parsed it
    if target is None or target[1] != "infer":
        return None
    if any(k[:3].lower() == b"ce-" for k, _ in scope.get("headers") or []):
        return None  # a CloudEvent: KServe's route
    return target[0]


async def read_body(receive, limit: int, timeout: float, declared: bytes | None) -> bytes | None:
    """The whole request body, refused (413) past *limit* bytes -- by its
    Content-Length before a byte is read, else as it streams -- and (408) when the
    client sends nothing for *timeout* seconds; None when the client went away."""
    if declared is not None and (not declared.isdigit() or int(declared) > limit):
        raise PayloadTooLarge(f"request body of {declared.decode('latin-1')[:20]} bytes is over "
                              f"this route's limit of {limit} bytes")
    chunks, seen = [], 0
    while True:
        try:
            message = await asyncio.wait_for(receive(), timeout)
        except asyncio.TimeoutError:
            raise RequestTimeout(f"request body: nothing received for {timeout:g} s") from None
        if message["type"] == "http.disconnect":
            return None
        chunk = message.get("body", b"")
        seen += len(chunk)
        if seen > limit:
            raise PayloadTooLarge(f"request body over this route's limit of {limit} bytes")
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)


def infer_route(app: Any, dataplane: Any, max_request_bytes: int, body_timeout_s: float = 30.0):
    """ASGI middleware over KServe's FastAPI *app* (see the module docstring)."""
    async def respond(scope, receive, send, name: str):
        headers = {k.decode("latin-1").lower(): v.decode("latin-1")
                   for k, v in scope.get("headers") or []}
        binary = binary_header_length(headers) is not None
        model = dataplane.model_registry.get_model(name)
        if model is None:
            raise UnknownModel(f"model {name!r} is not served")
        if not await dataplane.model_ready(name, True):
            from kserve.errors import ModelNotReady
            raise ModelNotReady(name)  # 503 with Retry-After: it is loading
        limit = max_request_bytes
        if not binary:
            limit = min(getattr(model, "json_limit", None) or limit, limit)
        declared = headers.get("content-length")
        body = await read_body(receive, limit, body_timeout_s,
                               declared.encode("latin-1") if declared is not None else None)
        if body is None:
            return None
        expect = getattr(model, "check_request", None)
        try:
            if len(body) <= INLINE_DECODE_BYTES:
                request = decode_request(body, headers, name, max_request_bytes, expect)
            else:
                request = await asyncio.get_running_loop().run_in_executor(
                    _DECODERS, decode_request, body, headers, name, max_request_bytes, expect)
        except RequestError:
            counted = getattr(model, "count_refused", None)
            if counted is not None:
                counted()
            raise
        del body
        return await answer_infer(dataplane, name, request, headers)

    async def middleware(scope, receive, send):
        name = _target(scope)
        if name is None:
            return await app(scope, receive, send)
        try:
            response = await respond(scope, receive, send, name)
            if response is None:
                return None
        except Exception as exc:  # noqa: BLE001 - every refusal answered by its status
            from starlette.requests import Request
            response = await rest_handler(Request(scope), exc)
            if isinstance(exc, RequestTimeout):
                response.headers["connection"] = "close"
            elif isinstance(exc, PayloadTooLarge):
                declared = dict(scope.get("headers") or []).get(b"content-length")
                for key, value in too_large_headers(declared, max_request_bytes):
                    response.headers[key.decode()] = value.decode()
        await response(scope, receive, send)
    return middleware
