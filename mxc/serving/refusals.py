"""Answering and logging refused requests: one status rule, one escaped line, rate-limited.

KServe's handlers log every 404 and every invalid gRPC request with a full
traceback (about 1.2 KB each), and log request-derived text as it came, so a
model name holding ``%0a`` forged a log line and any client could grow the log
at will.  Here:

* :func:`classify` maps an exception to its HTTP status and a message (never an
  exception class name); the gRPC code follows from the status
  (:data:`~mxc.serving.errors.GRPC_CODES`), so REST and gRPC refuse alike;
* :func:`printable` escapes control characters and bounds the length of any
  request-derived text before it is logged;
* :class:`RefusalLog` writes one line per refusal and at most ``burst`` lines per
  client before it rations them (``rate`` per second), then says how many it
  left out.  Only an unexpected error (a bug: 500) is logged with its traceback.
"""

from __future__ import annotations

import logging
import time
from collections import OrderedDict
from typing import Any

from .errors import GRPC_CODES, RequestError

log = logging.getLogger("mxc.serving.refusals")


def printable(text: Any, limit: int = 300) -> str:
    """*text* with control and non-ASCII-printable characters escaped, at most *limit* long."""
    out = str(text).encode("unicode_escape", "backslashreplace").decode("ascii")
    return out if len(out) <= limit else out[:limit] + "..."


def classify(exc: BaseException) -> tuple[int, str]:
    """(HTTP status, message) of an exception raised while answering a request."""
    from fastapi.exceptions import RequestValidationError
    from kserve import errors as kerr
    from starlette.exceptions import HTTPException
    if isinstance(exc, RequestError):
        return exc.status, str(exc)
    if isinstance(exc, HTTPException):  # FastAPI's routing: 404 no such route, 405 method
        return exc.status_code, str(exc.detail)
    if isinstance(exc, RequestValidationError):  # a route's parameters (not infer: requests.py)
        errors = exc.errors()
        first = errors[0] if errors else {}
        where = ".".join(str(p) for p in first.get("loc", ()) if p != "body") or "request"
        return 422, f"{where}: {first.get('msg', 'invalid')}"
    if isinstance(exc, kerr.InvalidInput):
        return 400, str(exc.reason)
    if isinstance(exc, kerr.ModelNotFound):
        return 404, str(exc.reason)
    if isinstance(exc, (kerr.ModelNotReady, kerr.ServerNotReady, kerr.ServerNotLive)):
        return 503, str(exc)
    if isinstance(exc, NotImplementedError):
        return 501, "not implemented by this server"
    return 500, "internal error (the server's log has the details)"


class RefusalLog:
    """Per-client rationed logging of refusals (a token bucket per client address)."""

    def __init__(self, rate: float = 1.0, burst: int = 10, clients: int = 4096):
        self.rate, self.burst, self.clients = rate, burst, clients
        self._buckets: OrderedDict[str, list[float]] = OrderedDict()  # client -> [tokens, t, dropped]

    def allow(self, client: str) -> tuple[bool, int]:
        """Whether a line for *client* may be written now, and how many were left out before."""
        now = time.monotonic()
        bucket = self._buckets.pop(client, None) or [float(self.burst), now, 0]
        bucket[0] = min(self.burst, bucket[0] + (now - bucket[1]) * self.rate)
        bucket[1] = now
        self._buckets[client] = bucket
        while len(self._buckets) > self.clients:
            self._buckets.popitem(last=False)
        if bucket[0] < 1.0:
            bucket[2] += 1
            return False, 0
        bucket[0] -= 1.0
        dropped, bucket[2] = int(bucket[2]), 0
        return True, dropped

    def refused(self, client: str, where: str, status: int, message: str,
                exc: BaseException | None = None) -> None:
        ok, dropped = self.allow(client)
        if not ok:
            return
        more = f" ({dropped} more from this client not logged)" if dropped else ""
        if status >= 500 and status != 503:
            log.error("%s from %s: %d %s%s", printable(where), printable(client), status,
                      printable(message), more, exc_info=exc)
        else:
            log.info("refused %s from %s: %d %s%s", printable(where), printable(client), status,
                     printable(message), more)


REFUSALS = RefusalLog()


class OneLineFilter(logging.Filter):
    """Escapes control characters in every record's message (a traceback, kept apart
    in ``exc_info``, still prints as lines): whatever a library logs from a request --
    a path, a model name -- cannot start a forged line."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if any(ch < " " for ch in message):
            record.msg, record.args = printable(message, limit=2000), ()
        return True


def escape_logs() -> None:
    """Install :class:`OneLineFilter` on the root logger's handlers (``mxc serve`` does)."""
    for handler in logging.getLogger().handlers:
        if not any(isinstance(f, OneLineFilter) for f in handler.filters):
            handler.addFilter(OneLineFilter())


async def rest_handler(request: Any, exc: Exception):
    """The REST app's handler for every exception: its status and ``{"error": message}``."""
    from fastapi.responses import JSONResponse
    status, message = classify(exc)
    client = request.client.host if request.client else "?"
    REFUSALS.refused(client, f"{request.method} {request.url.path}", status, message,
                     exc if status == 500 else None)
    headers = {"retry-after": "1"} if status == 503 else None
    return JSONResponse(status_code=status, content={"error": message}, headers=headers)


def install_rest_handlers(app: Any) -> None:
    """Replace KServe's exception handlers on its FastAPI *app* with :func:`rest_handler`."""
    from kserve import errors as kerr
    from fastapi.exceptions import RequestValidationError
    from starlette.exceptions import HTTPException
    for cls in (RequestError, HTTPException, RequestValidationError, kerr.InvalidInput, kerr.InferenceError, kerr.ModelNotFound,
                kerr.ModelNotReady, kerr.ServerNotReady, kerr.ServerNotLive,
                kerr.UnsupportedProtocol, NotImplementedError, Exception):
        app.add_exception_handler(cls, rest_handler)


def grpc_interceptor():
    """A gRPC server interceptor answering exceptions by :func:`classify`."""
    import grpc
    from grpc_interceptor.exceptions import GrpcException
    from grpc_interceptor import AsyncExceptionToStatusInterceptor

    class RefusalInterceptor(AsyncExceptionToStatusInterceptor):
        async def handle_exception(self, ex, request_or_iterator, context, method_name):
            if isinstance(ex, GrpcException):
                return await super().handle_exception(ex, request_or_iterator, context,
                                                      method_name)
            status, message = classify(ex)
            code = getattr(grpc.StatusCode, GRPC_CODES.get(status, "INTERNAL"))
            REFUSALS.refused(context.peer() or "?", method_name, status, message,
                             ex if status == 500 else None)
            await context.abort(code, message)

    return RefusalInterceptor()
