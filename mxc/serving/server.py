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
* the bounds a server reached by strangers needs (issue 35): connections are
  accepted by :mod:`mxc.serving.connections` (a cap, a header timeout, backoff
  when descriptors run out), requests pass :mod:`mxc.serving.asgi_guards` (an
  in-flight cap, body limits and timeouts), infer requests are answered by
  :mod:`mxc.serving.infer_route` and read by :mod:`mxc.serving.requests` (binary
  tensors stay bytes: :mod:`mxc.serving.dataplane`), gRPC by
  :mod:`mxc.serving.grpc_server`; refusals are answered and logged by
  :mod:`mxc.serving.refusals`, model load/unload by :mod:`mxc.serving.control`;
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
from dataclasses import dataclass
from pathlib import Path

from ..errors import ArtifactError, MxcError
from .kserve_private import import_kserve

__all__ = ["ServeOptions", "import_kserve", "serve", "serve_async", "verify_all"]

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
    #: who may load/unload models: none, poll (the folder is watched) or explicit (the API)
    model_control_mode: str = "poll"
    control_token_file: str | None = None
    #: REST connections at once (lowered to fit the descriptor limit)
    max_connections: int = 1000
    #: requests (REST) and RPCs (gRPC) answered at once; 503 / RESOURCE_EXHAUSTED beyond
    max_in_flight: int = 256
    #: a connection's request headers must be complete this long after it opens or its last answer
    header_timeout_s: float = 10.0
    #: an idle keep-alive connection is closed after this long
    idle_timeout_s: float = 5.0
    #: a request body that stops arriving for this long gets 408
    body_timeout_s: float = 30.0
    follow_symlinks: bool = False
    #: serve /openapi.json and /docs
    openapi: bool = False


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


def _rest_app(opts: ServeOptions, dataplane, control):
    """KServe's FastAPI app behind mxc's ASGI layers (outermost first: in-flight cap,
    model control, V2 compatibility, the infer route, the body limit)."""
    from . import asgi_guards
    from .control import control_route
    from .infer_route import infer_route
    from .kserve_private import rest_app
    from .refusals import escape_logs, install_rest_handlers

    # KServe's app, less its timing middleware: it logged two lines per request naming
    # the path as sent (a %0a in it started a forged line) and cost time on each
    app = rest_app(dataplane, control, opts.http_port, opts.grace_seconds)
    install_rest_handlers(app)
    escape_logs()
    if not opts.openapi:
        asgi_guards.without_docs(app)
    inner = asgi_guards.body_limit(app, opts.max_request_bytes, opts.body_timeout_s)
    inner = infer_route(inner, dataplane, opts.max_request_bytes, opts.body_timeout_s)
    inner = control_route(asgi_guards.v2_compat(inner), control)
    return asgi_guards.in_flight_cap(inner, opts.max_in_flight)


def _http_server(opts: ServeOptions, asgi, grpc: bool):
    """A uvicorn server that accepts through :mod:`mxc.serving.connections`."""
    import uvicorn

    from .connections import (accept_backlog, accept_loop, bounded_protocol, connection_cap,
                              open_descriptors, raise_descriptor_limit)

    soft = raise_descriptor_limit()
    config = uvicorn.Config(asgi, host=opts.host, port=opts.http_port, log_config=None,
                            timeout_graceful_shutdown=int(opts.grace_seconds), lifespan="off",
                            timeout_keep_alive=max(1, int(opts.idle_timeout_s)),
                            access_log=False)
    cap = connection_cap(opts.max_connections, soft, open_descriptors(), grpc)
    if cap < opts.max_connections:
        log.warning("REST connections capped at %d to fit the descriptor limit of %d "
                    "(ulimit -n; --max-connections %d asked)", cap, soft, opts.max_connections)

    class _Acceptor:
        def __init__(self, task):
            self.task = task

        def close(self):
            self.task.cancel()

        async def wait_closed(self):
            import contextlib
            with contextlib.suppress(asyncio.CancelledError):
                await self.task

    class Server(uvicorn.Server):
        def install_signal_handlers(self):  # older uvicorn; ours are in serve_async
            pass

        def capture_signals(self):  # newer uvicorn: leave SIGTERM to serve_async
            import contextlib
            return contextlib.nullcontext()

        async def startup(self, sockets=None):
            protocol = bounded_protocol(config.http_protocol_class, opts.header_timeout_s)

            def make():
                return protocol(config=config, server_state=self.server_state,
                                app_state=self.lifespan.state)
            self.make_protocol, self.listening = make, list(sockets or ())
            self.servers = [_Acceptor(asyncio.create_task(
                accept_loop(sock, make, self.server_state.connections, cap)))
                for sock in self.listening]
            self.started = True

        async def stop_accepting(self) -> None:
            """The first step of a drain: stop the accept loops, take on the connections
            already queued, and give them a moment to deliver their requests (uvicorn's
            shutdown closes a connection with no request in progress)."""
            for acceptor in self.servers:
                acceptor.close()
            taken = 0
            for sock in self.listening:
                taken += await accept_backlog(sock, self.make_protocol)
            if taken:
                log.info("draining: took on %d queued connection(s)", taken)
                await asyncio.sleep(0.2)

    return Server(config)


async def serve_async(opts: ServeOptions, reuse_port: bool, make_model=None, unload=None,
                      stop: asyncio.Event | None = None) -> None:
    """Serve until SIGTERM/SIGINT (or *stop* is set: a server embedded in a thread, where
    signal handlers cannot be installed).  *make_model(name, path)* builds each model
    (default: a local :class:`~mxc.serving.model.MxcModel`; :mod:`mxc.serving.ray_serve`
    passes one that deploys on Ray), *unload(model)* is called for a model removed from
    the repository."""
    from kserve.model_repository import ModelRepository

    from .control import ModelControl
    from .dataplane import MxcDataPlane
    from .grpc_server import grpc_server
    from .repository import RepositoryWatcher

    registry = ModelRepository(models_dir=str(opts.source))
    watcher = RepositoryWatcher(opts.source, registry, make_model or _make_model_factory(opts),
                                unload=unload, follow_symlinks=opts.follow_symlinks)
    changes = watcher.sync()
    if not registry.get_models():
        raise ArtifactError(f"{opts.source}: no model could be served "
                            f"({', '.join(changes['failed']) or 'no model.mxc found'}; see the log)")
    token = None
    if opts.control_token_file:
        token = Path(opts.control_token_file).read_text().strip()
    control = ModelControl(opts.model_control_mode, watcher, registry, token)
    dataplane = MxcDataPlane(model_registry=registry)
    http = _http_server(opts, _rest_app(opts, dataplane, control), grpc=bool(opts.grpc_port))
    grpc = grpc_server(opts, dataplane, control) if opts.grpc_port else None
    sock = _listen_socket(opts.host, opts.http_port, reuse_port)
    stopping = stop or asyncio.Event()
    loop = asyncio.get_running_loop()
    if stop is None:
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stopping.set)
    if grpc:
        await grpc.start()
    polling = opts.model_control_mode == "poll" and opts.poll_seconds > 0
    poll = asyncio.create_task(watcher.run(opts.poll_seconds)) if polling else None
    serving = asyncio.create_task(http.serve(sockets=[sock]))
    print(f"mxc serve: {sorted(registry.get_models())} on http://{opts.host}:{opts.http_port}"
          + (f" and grpc {opts.host}:{opts.grpc_port}" if grpc else ""), flush=True)
    await asyncio.wait([serving, asyncio.create_task(stopping.wait())],
                       return_when=asyncio.FIRST_COMPLETED)
    log.info("stopping: draining in-flight requests (up to %ss)", opts.grace_seconds)
    if poll:
        poll.cancel()
    if http.started:
        await http.stop_accepting()
    http.should_exit = True
    if grpc:
        await grpc.stop(grace=opts.grace_seconds)
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
