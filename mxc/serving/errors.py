"""The typed errors a served request can get, each with its HTTP status.

A :class:`RequestError` is an :class:`~mxc.errors.MxcError` (so the rest of
mxc treats it like any other bad input) *and* KServe's ``InvalidInput``: the
framework's gRPC interceptor turns it into ``INVALID_ARGUMENT`` without any
glue, and :mod:`mxc.serving.refusals` gives REST clients its own status
(400, 403, 404, 408 or 413) with a one-line message instead of a 500 and a
traceback, and gRPC clients the matching code (:data:`GRPC_CODES`).
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
    """The request body is over its route's limit (``--max-request-bytes``, or the
    JSON limit derived from the model's inputs)."""

    status = 413


class RequestTimeout(RequestError):
    """The client stopped sending its request body."""

    status = 408


class ControlRefused(RequestError):
    """A model load/unload the server's ``--model-control-mode`` (or token) does not allow."""

    status = 403


#: the gRPC status code of each HTTP status a refusal can have
GRPC_CODES = {400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED",
              404: "NOT_FOUND", 408: "DEADLINE_EXCEEDED", 409: "FAILED_PRECONDITION",
              413: "RESOURCE_EXHAUSTED", 503: "UNAVAILABLE"}
