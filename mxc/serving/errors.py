"""The typed errors a served request can get, each with its HTTP status.

A :class:`RequestError` is an :class:`~mxc.errors.MxcError` (so the rest of
mxc treats it like any other bad input) *and* KServe's ``InvalidInput``: the
framework's gRPC interceptor turns it into ``INVALID_ARGUMENT`` without any
glue, and :func:`request_error_handler` gives REST clients its own status
(400, 404 or 413) with a one-line message instead of a 500 and a traceback.
"""

from __future__ import annotations

from kserve.errors import InvalidInput

from ..errors import MxcError


class RequestError(MxcError, InvalidInput):
    """A request the server refuses; *status* is the HTTP status it answers with."""

    status = 400

    def __init__(self, message: str, status: int | None = None):
        MxcError.__init__(self, message)
        self.reason = message  # InvalidInput's attribute, read by its own handlers
        if status is not None:
            self.status = status

    def __str__(self) -> str:
        return self.reason


class UnknownModel(RequestError):
    """No model (or no such version of it) is being served."""

    status = 404


class PayloadTooLarge(RequestError):
    """The request body is over ``--max-request-bytes``."""

    status = 413


async def request_error_handler(_request, exc: RequestError):
    """FastAPI's handler for :class:`RequestError`: its status and ``{"error": message}``."""
    from fastapi.responses import JSONResponse
    return JSONResponse(status_code=exc.status, content={"error": str(exc)})
