"""The ASGI layers between uvicorn and KServe's app: caps, body limits, route fixes.

Outermost first, as :func:`mxc.serving.server.serve_async` stacks them:

* :func:`in_flight_cap` -- at most ``max_in_flight`` requests are answered at once;
  beyond it a request gets 503 with ``Retry-After`` at once instead of queueing
  (health and metrics probes are not counted, so they keep answering);
* :func:`v2_compat` -- model versions in the path, which KServe's routes do not take;
* :func:`body_limit` -- every other route's body: 413 past ``max_request_bytes``
  (by ``Content-Length`` or as it streams, chunked or not; at once, see
  :func:`too_large_headers`), 408 when it stalls;
* :func:`without_docs` -- drops FastAPI's ``/openapi.json`` and ``/docs`` routes:
  a description of every route is for developers, not for strangers.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

_PROBES = ("/v2/health/", "/metrics")


async def send_json(send, status: int, message: str, extra: list | None = None) -> None:
    body = json.dumps({"error": message}).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"),
                            (b"content-length", str(len(body)).encode())] + (extra or [])})
    await send({"type": "http.response.body", "body": body})


def in_flight_cap(app, max_in_flight: int):
    """ASGI middleware: 503 + ``Retry-After`` beyond *max_in_flight* concurrent requests."""
    running = 0

    async def middleware(scope, receive, send):
        nonlocal running
        if scope["type"] != "http" or scope["path"].startswith(_PROBES):
            return await app(scope, receive, send)
        if running >= max_in_flight:
            return await send_json(send, 503, f"the server is answering {max_in_flight} requests "
                                              f"(--max-in-flight); retry soon",
                                   [(b"retry-after", b"1")])
        running += 1
        try:
            await app(scope, receive, send)
        finally:
            running -= 1
    return middleware


def v2_compat(app):
    """ASGI middleware: ``/v2/models/N/versions/V/...`` -> ``/v2/models/N@V/...``, the
    served name of a version (KServe has no versions).  (JSON infer bodies without a
    ``Content-Type``, as tritonclient sends them, need nothing here: the infer route
    reads any body without the binary header as JSON.)"""
    from .requests import MODEL_PATH_KEY, model_path

    async def middleware(scope, receive, send):
        if scope["type"] == "http":
            target = model_path(scope["path"])   # parsed once: the infer route reads it
            if target is not None:
                scope = dict(scope, **{MODEL_PATH_KEY: target})
                parts = scope["path"].split("/", 6)
                if len(parts) >= 6 and parts[4] == "versions":
                    path = f"/v2/models/{target[0]}" + (f"/{parts[6]}" if len(parts) > 6 else "")
                    scope.update(path=path, raw_path=path.encode())
        await app(scope, receive, send)
    return middleware


def too_large_headers(declared: bytes | None, max_request_bytes: int) -> list:
    """The extra headers of a 413 sent before its body was read.

    The answer goes out at once.  A body of at most *max_request_bytes* is then
    read and dropped by uvicorn's HTTP parser (in C, after the response, bounded
    by the header timeout), so a client that writes its whole body before reading
    sees the 413 and keeps its connection.  A body declared larger than anything
    the server takes is not worth reading: the connection is closed
    (``connection: close``).  A chunked body (no declared size) is dropped as it
    comes until the header timeout closes the connection."""
    if declared is None or (declared.isdigit() and int(declared) <= max_request_bytes):
        return []
    return [(b"connection", b"close")]


class _Refused(Exception):
    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status, self.message = status, message


def body_limit(app, limit: int, timeout: float):
    """ASGI middleware: 413 for a body over *limit* bytes (declared or streamed), 408
    when no part of it arrives for *timeout* seconds."""
    async def middleware(scope, receive, send):
        if scope["type"] != "http":
            return await app(scope, receive, send)
        length = dict(scope.get("headers") or []).get(b"content-length")
        if length is not None and (not length.isdigit() or int(length) > limit):
            return await send_json(send, 413, f"request body over the limit of {limit} bytes "
                                              f"(--max-request-bytes)", [(b"connection", b"close")])
        def closing(status: int) -> list:
            return too_large_headers(length, limit) if status == 413 else [(b"connection", b"close")]
        seen = 0
        started = False

        async def counted():
            nonlocal seen
            try:
                message = await asyncio.wait_for(receive(), timeout)
            except asyncio.TimeoutError:
                raise _Refused(408, f"request body: nothing received for {timeout:g} s") from None
            seen += len(message.get("body", b""))
            if seen > limit:
                raise _Refused(413, f"request body over the limit of {limit} bytes "
                                    f"(--max-request-bytes)")
            return message

        async def tracked(message):
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)
        try:
            await app(scope, counted, tracked)
        except _Refused as refused:
            if not started:
                await send_json(send, refused.status, refused.message, closing(refused.status))
        except Exception as exc:  # noqa: BLE001 - FastAPI wraps what counted() raised
            cause = exc.__cause__ or exc.__context__
            if not isinstance(cause, _Refused) or started:
                raise
            await send_json(send, cause.status, cause.message, closing(cause.status))
    return middleware


def without_docs(app: Any) -> None:
    """Remove the OpenAPI schema and documentation routes from a FastAPI *app*."""
    drop = {app.openapi_url, app.docs_url, app.redoc_url, "/docs/oauth2-redirect"} - {None}
    app.router.routes[:] = [r for r in app.router.routes if getattr(r, "path", None) not in drop]
    app.openapi_url = app.docs_url = app.redoc_url = None
