"""``mxc serve``'s gRPC listener: KServe's servicer with versions, checks and limits.

KServe's ``InferenceServicer`` answers the V2 gRPC protocol; this module adds
what a server facing strangers needs on top of it:

* ``model_version`` is honoured (``NAME@V``, as REST's ``/versions/V``);
* every ``ModelInferRequest`` is checked by the rules REST requests are
  (:func:`~mxc.serving.requests.check_grpc_request`), so a datatype spelled
  ``fp32`` or a zero dimension is refused alike over both protocols;
* ``RepositoryModelLoad``/``Unload`` go through :class:`~mxc.serving.control.ModelControl`
  (refused unless ``--model-control-mode explicit``; the token, if any, is read from
  the ``authorization`` metadata);
* exceptions become status codes by :mod:`mxc.serving.refusals` (one log line each);
* limits: message size (``--max-request-bytes``), concurrent RPCs
  (``--max-in-flight``, ``RESOURCE_EXHAUSTED`` beyond), concurrent streams per
  connection, a handshake timeout (``--header-timeout-s``), idle connections closed
  after five minutes, and keepalive enforcement (a client pinging more often than
  every five minutes without calls is sent ``GOAWAY``).
"""

from __future__ import annotations

from typing import Any

from ..errors import MxcError

#: HTTP/2 streams one client connection may have open at once
MAX_CONCURRENT_STREAMS = 64
#: a connection with no RPC for this long is closed (clients reconnect transparently)
MAX_CONNECTION_IDLE_MS = 300_000
#: the shortest interval between a client's keepalive pings without calls that is tolerated
MIN_PING_INTERVAL_MS = 300_000


def grpc_options(opts: Any) -> list[tuple[str, Any]]:
    """The gRPC core options for *opts* (a :class:`~mxc.serving.server.ServeOptions`)."""
    return [("grpc.max_receive_message_length", opts.max_request_bytes),
            ("grpc.max_send_message_length", -1),
            ("grpc.so_reuseport", 1 if opts.workers > 1 else 0),
            ("grpc.max_concurrent_streams", MAX_CONCURRENT_STREAMS),
            ("grpc.server_handshake_timeout_ms", int(opts.header_timeout_s * 1000)),
            ("grpc.max_connection_idle_ms", MAX_CONNECTION_IDLE_MS),
            ("grpc.keepalive_permit_without_calls", 0),
            ("grpc.http2.min_ping_interval_without_data_ms", MIN_PING_INTERVAL_MS),
            ("grpc.http2.max_ping_strikes", 2)]


def _string_field(raw: bytes, number: int) -> str | None:
    """Field *number* of a serialized protobuf message, when it is a string (length-delimited)."""
    i = 0
    while i < len(raw):
        key, i = _varint(raw, i)
        field, wire = key >> 3, key & 7
        if wire == 0:
            _, i = _varint(raw, i)
        elif wire == 2:
            size, i = _varint(raw, i)
            if field == number:
                return raw[i:i + size].decode("utf-8", "replace")
            i += size
        elif wire in (1, 5):
            i += 8 if wire == 1 else 4
        else:
            return None
    return None


def _varint(raw: bytes, i: int) -> tuple[int, int]:
    value = shift = 0
    while i < len(raw):
        byte = raw[i]
        i += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, i
        shift += 7
    return value, i


def control_model_name(request: Any) -> str:
    """The model a ``RepositoryModelLoad``/``Unload`` request names.  KServe's proto puts
    ``model_name`` in field 1; Triton's (what tritonclient sends) has ``repository_name``
    there and ``model_name`` in field 2, which KServe's message keeps as an unknown
    field: read either, so both clients control models alike."""
    if request.model_name:
        return request.model_name
    return _string_field(request.SerializeToString(), 2) or ""


def _authorization(context: Any) -> str | None:
    for key, value in context.invocation_metadata() or ():
        if key == "authorization":
            return value
    return None


def grpc_server(opts: Any, dataplane: Any, control: Any):
    """KServe's gRPC servicer on ``host:grpc_port`` (see the module docstring)."""
    from concurrent import futures

    from grpc import aio
    from kserve.protocol.grpc import grpc_predict_v2_pb2 as pb
    from kserve.protocol.grpc import grpc_predict_v2_pb2_grpc
    from kserve.protocol.grpc.servicer import InferenceServicer

    from .refusals import grpc_interceptor
    from .requests import check_grpc_request

    class Servicer(InferenceServicer):
        async def ModelInfer(self, request, context):
            if request.model_version:
                request.model_name = f"{request.model_name}@{request.model_version}"
            check_grpc_request(request, opts.max_request_bytes)
            return await super().ModelInfer(request, context)

        async def ModelMetadata(self, request, context):
            if request.version:
                request.name = f"{request.name}@{request.version}"
            return await super().ModelMetadata(request, context)

        async def ModelReady(self, request, context):
            if request.version:
                request.name = f"{request.name}@{request.version}"
            return await super().ModelReady(request, context)

        async def RepositoryModelLoad(self, request, context):
            answer = await control.load(control_model_name(request), _authorization(context))
            return pb.RepositoryModelLoadResponse(model_name=answer["name"], isLoaded=True)

        async def RepositoryModelUnload(self, request, context):
            answer = await control.unload(control_model_name(request), _authorization(context))
            return pb.RepositoryModelUnloadResponse(model_name=answer["name"], isUnloaded=True)

    server = aio.server(futures.ThreadPoolExecutor(max_workers=4),
                        interceptors=(grpc_interceptor(),), options=grpc_options(opts),
                        maximum_concurrent_rpcs=opts.max_in_flight)
    grpc_predict_v2_pb2_grpc.add_GRPCInferenceServiceServicer_to_server(
        Servicer(dataplane, control), server)
    host = f"[{opts.host}]" if ":" in opts.host else opts.host
    try:
        server.add_insecure_port(f"{host}:{opts.grpc_port}")
    except RuntimeError as exc:  # grpc's message for a port in use
        raise MxcError(f"gRPC: cannot listen on {host}:{opts.grpc_port} (in use?): {exc}") from None
    return server
