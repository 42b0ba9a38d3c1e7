"""``mxc serve``: KServe's ModelServer parts, bound to one address, with mxc's models.

KServe (package ``kserve``) provides the Open Inference Protocol: the FastAPI
REST app with its V2 routes, the gRPC servicer, request decoding (JSON and the
binary tensor extension) and ``/metrics``.  Its ``ModelServer.start`` binds every
interface (``0.0.0.0`` / ``[::]``) and has no model versions, so this module
assembles the same parts itself:

* the REST app and gRPC servicer are KServe's, listening on ``--host`` only
  (default ``127.0.0.1``);
* ``/v2/models/NAME/versions/V/...`` is rewritten to the served name ``NAME@V``
  (gRPC: ``model_version``), see :mod:`mxc.serving.repository`;
* binary-tensor infer requests skip FastAPI's routing (:mod:`mxc.serving.fast_infer`)
  and their tensors stay bytes (:mod:`mxc.serving.dataplane`);
* request bodies over ``max_request_bytes`` get 413 before they are read whole;
  :class:`~mxc.serving.errors.RequestError` answers with its own 4xx;
* SIGTERM/SIGINT stop accepting, let in-flight requests finish (``grace_seconds``),
  then exit 0;
* ``workers > 1`` starts that many *spawned* worker processes sharing the ports
  (``SO_REUSEPORT``): each loads the models itself after it starts, so no TVM
  state crosses a ``fork``.  The parent verifies every artifact first.
"""

from __future__ import annotations

import asyncio
import logging
import multiprocessing
import os
import signal
import socket
import sys
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import ArtifactError, MxcError

log = logging.getLogger(__name__)


@dataclass
class ServeOptions:
    """Everything ``mxc serve`` was asked for (picklable: spawned workers get a copy)."""

    source: str
    host: str = "127.0.0.1"
    http_port: int = 8080
    grpc_port: int | None = 8081
    verify_key: str | None = None
    max_batch_size: int = 1
    max_latency_ms: float = 5.0
    workers: int = 1
    threads: int | None = None
    max_request_bytes: int = 64 << 20
    poll_seconds: float = 2.0
    grace_seconds: float = 30.0


def import_kserve():
    """Import ``kserve`` without letting it read our command line (its
    ``model_server`` module parses ``sys.argv`` at import time)."""
    saved = sys.argv
    sys.argv = saved[:1]
    # KServe's REST routes answer through FastAPI's ORJSONResponse, which recent FastAPI
    # releases deprecate with a warning on a server's first request: KServe's to change,
    # not the user's, so it is not shown to them
    warnings.filterwarnings("ignore", message="ORJSONResponse is deprecated")
    try:
        import kserve  # noqa: F401
        import kserve.model_server  # noqa: F401
    except ImportError as exc:
        from ..errors import DependencyError
        raise DependencyError(f"mxc serve needs KServe: pip install 'mxc[serve]' ({exc})") from None
    finally:
        sys.argv = saved


def _v2_compat(app):
    """ASGI middleware for what KServe's routes do not take as clients send it:

    * ``/v2/models/N/versions/V/rest`` -> ``/v2/models/N@V/rest`` (KServe has no versions);
    * a body with neither a content type nor the binary extension's
      ``Inference-Header-Content-Length`` is JSON (tritonclient's JSON requests send no
      ``Content-Type``; KServe would read them as binary and refuse them).
    """
    async def middleware(scope, receive, send):
        if scope["type"] == "http":
            parts = scope["path"].split("/")
            if len(parts) >= 6 and parts[1:3] == ["v2", "models"] and parts[4] == "versions":
                path = "/".join(parts[:3] + [f"{parts[3]}@{parts[5]}"] + parts[6:])
                scope = dict(scope, path=path, raw_path=path.encode())
            names = {k.lower() for k, _ in scope.get("headers") or []}
            if (scope.get("method") == "POST" and b"content-type" not in names
                    and b"inference-header-content-length" not in names):
                scope = dict(scope, headers=list(scope.get("headers") or [])
                             + [(b"content-type", b"application/json")])
        await app(scope, receive, send)
    return middleware


def _size_limit(app, limit: int):
    """ASGI middleware: a body over *limit* bytes gets 413 (by Content-Length, or
    while it streams in)."""
    import json

    async def too_large(send):
        body = json.dumps({"error": f"request body over the limit of {limit} bytes "
                                    f"(--max-request-bytes)"}).encode()
        await send({"type": "http.response.start", "status": 413,
                    "headers": [(b"content-type", b"application/json"),
                                (b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body})

    async def middleware(scope, receive, send):
        if scope["type"] != "http":
            return await app(scope, receive, send)
        length = dict(scope.get("headers") or []).get(b"content-length")
        if length is not None and length.isdigit() and int(length) > limit:
            return await too_large(send)
        seen = 0

        async def counted():
            nonlocal seen
            message = await receive()
            seen += len(message.get("body", b""))
            if seen > limit:
                raise _TooLarge()
            return message
        try:
            await app(scope, counted, send)
        except _TooLarge:
            await too_large(send)
    return middleware


class _TooLarge(Exception):
    pass


def _make_model_factory(opts: ServeOptions):
    from .model import MxcModel

    def make(name: str, path: Path):
        model = MxcModel(name, path, verify_key=opts.verify_key, max_batch_size=opts.max_batch_size,
                         max_latency_ms=opts.max_latency_ms, threads=opts.threads)
        model.load()
        return model
    return make


def _listen_socket(host: str, port: int, reuse_port: bool) -> socket.socket:
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if reuse_port:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    # accepted connections inherit it: a response written as headers + body must not
    # wait for the client's delayed ACK (Nagle), which cost ~40 ms per request here
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise MxcError(f"REST: cannot listen on {host}:{port}: {exc}") from None
    sock.listen(2048)
    sock.set_inheritable(True)
    return sock


def _grpc_server(opts: ServeOptions, dataplane, repo_ext):
    """KServe's gRPC servicer on ``host:grpc_port``, with ``model_version`` honoured."""
    from concurrent import futures

    from grpc import aio
    from kserve.protocol.grpc import grpc_predict_v2_pb2_grpc
    from kserve.protocol.grpc.interceptors import ExceptionToStatusInterceptor
    from kserve.protocol.grpc.servicer import InferenceServicer

    class VersionedServicer(InferenceServicer):
        async def ModelInfer(self, request, context):
            if request.model_version:
                request.model_name = f"{request.model_name}@{request.model_version}"
            return await super().ModelInfer(request, context)

        async def ModelMetadata(self, request, context):
            if request.version:
                request.name = f"{request.name}@{request.version}"
            return await super().ModelMetadata(request, context)

        async def ModelReady(self, request, context):
            if request.version:
                request.name = f"{request.name}@{request.version}"
            return await super().ModelReady(request, context)

    limit = opts.max_request_bytes
    server = aio.server(futures.ThreadPoolExecutor(max_workers=4),
                        interceptors=(ExceptionToStatusInterceptor(),),
                        options=[("grpc.max_receive_message_length", limit),
                                 ("grpc.max_send_message_length", -1),
                                 ("grpc.so_reuseport", 1 if opts.workers > 1 else 0)])
    grpc_predict_v2_pb2_grpc.add_GRPCInferenceServiceServicer_to_server(
        VersionedServicer(dataplane, repo_ext), server)
    host = f"[{opts.host}]" if ":" in opts.host else opts.host
    try:
        server.add_insecure_port(f"{host}:{opts.grpc_port}")
    except RuntimeError as exc:  # grpc's message for a port in use
        raise MxcError(f"gRPC: cannot listen on {host}:{opts.grpc_port} (in use?): {exc}") from None
    return server


async def serve_async(opts: ServeOptions, reuse_port: bool, make_model=None, unload=None,
                      stop: asyncio.Event | None = None) -> None:
    """Serve until SIGTERM/SIGINT (or *stop* is set: a server embedded in a thread, where
    signal handlers cannot be installed).  *make_model(name, path)* builds each model
    (default: a local :class:`~mxc.serving.model.MxcModel`; :mod:`mxc.serving.ray_serve`
    passes one that deploys on Ray), *unload(model)* is called for a model removed from
    the repository."""
    import uvicorn
    from kserve.model_repository import ModelRepository
    from kserve.protocol.model_repository_extension import ModelRepositoryExtension
    from kserve.protocol.rest.server import RESTServer

    from .dataplane import MxcDataPlane
    from .fast_infer import fast_infer
    from .errors import RequestError, request_error_handler
    from .repository import RepositoryWatcher

    registry = ModelRepository(models_dir=str(opts.source))
    watcher = RepositoryWatcher(opts.source, registry, make_model or _make_model_factory(opts),
                                unload=unload)
    changes = watcher.sync()
    if not registry.get_models():
        raise ArtifactError(f"{opts.source}: no model could be served "
                            f"({', '.join(changes['failed']) or 'no model.mxc found'}; see the log)")
    dataplane = MxcDataPlane(model_registry=registry)
    repo_ext = ModelRepositoryExtension(model_registry=registry)
    rest = RESTServer("kserve.model_server:app", dataplane, repo_ext, opts.http_port,
                      grace_period=int(opts.grace_seconds))
    rest.create_application()
    from kserve.model_server import app
    app.add_exception_handler(RequestError, request_error_handler)
    asgi = _size_limit(_v2_compat(fast_infer(app, dataplane)), opts.max_request_bytes)
    config = uvicorn.Config(asgi, host=opts.host, port=opts.http_port, log_config=None,
                            timeout_graceful_shutdown=int(opts.grace_seconds), lifespan="off")

    class Server(uvicorn.Server):
        def install_signal_handlers(self):  # older uvicorn; ours are below
            pass

        def capture_signals(self):  # newer uvicorn: leave SIGTERM to serve_async
            import contextlib
            return contextlib.nullcontext()

    http = Server(config)
    grpc_server = _grpc_server(opts, dataplane, repo_ext) if opts.grpc_port else None
    sock = _listen_socket(opts.host, opts.http_port, reuse_port)
    stopping = stop or asyncio.Event()
    loop = asyncio.get_running_loop()
    if stop is None:
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stopping.set)
    if grpc_server:
        await grpc_server.start()
    poll = asyncio.create_task(watcher.run(opts.poll_seconds)) if opts.poll_seconds > 0 else None
    serving = asyncio.create_task(http.serve(sockets=[sock]))
    print(f"mxc serve: {sorted(registry.get_models())} on http://{opts.host}:{opts.http_port}"
          + (f" and grpc {opts.host}:{opts.grpc_port}" if grpc_server else ""), flush=True)
    await asyncio.wait([serving, asyncio.create_task(stopping.wait())],
                       return_when=asyncio.FIRST_COMPLETED)
    log.info("stopping: draining in-flight requests (up to %ss)", opts.grace_seconds)
    if poll:
        poll.cancel()
    http.should_exit = True
    if grpc_server:
        await grpc_server.stop(grace=opts.grace_seconds)
    await serving


def _worker(opts: ServeOptions) -> None:
    import_kserve()
    asyncio.run(serve_async(opts, reuse_port=True))


def serve(opts: ServeOptions) -> int:
    """Serve until SIGTERM/SIGINT; returns the exit status."""
    import_kserve()
    if opts.workers <= 1:
        asyncio.run(serve_async(opts, reuse_port=False))
        return 0
    verify_all(opts)
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_worker, args=(opts,), name=f"mxc-serve-{i}")
             for i in range(opts.workers)]
    for p in procs:
        p.start()

    def forward(sig, _frame):
        for p in procs:
            if p.is_alive() and p.pid:
                os.kill(p.pid, sig)
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, forward)
    for p in procs:
        p.join()
    return max((p.exitcode or 0) for p in procs)


def verify_all(opts: ServeOptions) -> None:
    """Refuse to start workers for a repository none of whose artifacts verifies
    (read and checked here; no native code is loaded in the parent)."""
    from ..runtime.artifact import read_artifact
    from .repository import scan
    listing = scan(opts.source)
    errors = []
    for path in listing.values():
        try:
            read_artifact(path, verify_key=opts.verify_key)
        except Exception as exc:  # noqa: BLE001 - reported together below
            errors.append(f"{path}: {exc}")
    if not listing or len(errors) == len(listing):
        raise ArtifactError(f"{opts.source}: no model could be served"
                            + (": " + "; ".join(errors) if errors else " (no model.mxc found)"))
