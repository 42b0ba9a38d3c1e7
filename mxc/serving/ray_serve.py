"""Scale-out on Ray: each served model is a Ray Serve deployment, KServe's server the ingress.

KServe 0.21 supports Ray Serve for custom models through ``kserve.ray.RayModel``:
a model in KServe's registry whose calls go to a Ray Serve ``DeploymentHandle``.
``mxc serve --ray`` uses exactly that, so the ingress is the same server as
``mxc serve`` (:mod:`mxc.serving.server`: V2 REST and gRPC, request decoding,
metadata, typed 4xx answers, the size limit, repository polling) and only the
model behind each name differs:

* every artifact (every ``name@version`` of a repository) is one Ray Serve
  *application* holding one deployment of :class:`MxcReplica`, an
  :class:`~mxc.serving.model.MxcModel` (so each replica verifies the artifact
  and batches adaptively, exactly as a local model);
* the artifact travels as bytes in the deployment's arguments, so the nodes
  need no shared file system; the ingress verifies it (``--verify-key``) before
  deploying and every replica verifies it again before loading native code;
* Ray places the replicas on the cluster's nodes (``max_replicas_per_node``
  spreads them) and scales their number on queue length
  (``autoscaling_config.target_ongoing_requests``);
* :class:`RemoteModel` retries a request whose replica died (a node lost) for
  up to ``retry_seconds`` -- inference has no side effects -- and hands a
  replica's :class:`~mxc.serving.errors.RequestError` back unwrapped, so the
  client gets its 4xx and message and not Ray's remote traceback.

Ray Serve's own HTTP proxy is not started (``proxy_location="Disabled"``): the
ingress is KServe's, listening where ``--host``/``--port`` say.
"""

from __future__ import annotations

import asyncio
import logging
import os
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kserve.errors import ModelNotReady
from kserve.ray import RayModel
from ray.exceptions import RayActorError, RayTaskError

from .errors import RequestError
from .model import MxcModel

log = logging.getLogger(__name__)

#: prefix of the Ray Serve applications ``mxc serve --ray`` deploys (and deletes on exit)
APP_PREFIX = "mxc:"


@dataclass
class RayOptions:
    """How the models are deployed on Ray (``mxc serve --ray ...``).

    ``min_replicas == max_replicas`` is a fixed number of replicas; otherwise Ray
    Serve autoscales between them, aiming at ``target_ongoing_requests`` queued or
    running requests per replica.
    """

    address: str | None = None
    min_replicas: int = 1
    max_replicas: int = 1
    target_ongoing_requests: float = 2.0
    max_replicas_per_node: int | None = None
    replica_cpus: float = 1.0
    health_check_period_s: float = 2.0
    health_check_timeout_s: float = 10.0
    retry_seconds: float = 30.0
    upscale_delay_s: float | None = None    # None: Ray Serve's default
    downscale_delay_s: float | None = None

    def deployment_options(self, max_batch_size: int) -> dict[str, Any]:
        """``serve.deployment(...).options(...)`` keywords for one model."""
        opts: dict[str, Any] = {
            "ray_actor_options": {"num_cpus": self.replica_cpus},
            "health_check_period_s": self.health_check_period_s,
            "health_check_timeout_s": self.health_check_timeout_s,
            # a replica takes as many requests at once as it can batch (and a few queued)
            "max_ongoing_requests": max(4, 2 * max_batch_size),
        }
        if self.max_replicas_per_node:
            opts["max_replicas_per_node"] = self.max_replicas_per_node
        if self.min_replicas == self.max_replicas:
            opts["num_replicas"] = self.min_replicas
        else:
            opts["autoscaling_config"] = {
                "min_replicas": self.min_replicas, "max_replicas": self.max_replicas,
                "initial_replicas": self.min_replicas,
                "target_ongoing_requests": self.target_ongoing_requests}
            for key in ("upscale_delay_s", "downscale_delay_s"):
                if getattr(self, key) is not None:
                    opts["autoscaling_config"][key] = getattr(self, key)
        return opts


class MxcReplica(MxcModel):
    """One Ray Serve replica of an artifact: loads it when Ray constructs it.

    Ray constructs replicas on any node (and again when it scales up or replaces
    a dead one), so the replica gets the artifact's bytes, not a path, writes them
    to a private temporary file and loads that -- verified with *verify_key* (the
    public key's bytes) before any native code is loaded.
    """

    def __init__(self, name: str, artifact: bytes, *, verify_key: bytes | None = None,
                 max_batch_size: int = 1, max_latency_ms: float = 5.0, threads: int | None = None):
        self._dir = tempfile.TemporaryDirectory(prefix="mxc-replica-")
        path = Path(self._dir.name) / "model.mxc"
        path.write_bytes(artifact)
        super().__init__(name, path, verify_key=verify_key, max_batch_size=max_batch_size,
                         max_latency_ms=max_latency_ms, threads=threads)
        MxcModel.load(self)

    def load(self) -> bool:
        """Already loaded at construction (KServe's ``RayModel.load`` calls this)."""
        return self.ready

    def node_id(self) -> str:
        """The Ray node this replica runs on (for operators and the tests)."""
        import ray
        return ray.get_runtime_context().get_node_id()

    def check_health(self) -> None:
        """Ray Serve's periodic health check: a replica without a session is unhealthy."""
        if self.session is None:
            raise RuntimeError(f"replica of {self.name!r} has no session")


def deployment(name: str, path: str | os.PathLike, *, ray_options: RayOptions | None = None,
               verify_key: str | os.PathLike | None = None, max_batch_size: int = 1,
               max_latency_ms: float = 5.0, threads: int | None = None):
    """A bound Ray Serve application serving the artifact at *path* as model *name*.

    ``serve.run(deployment("mlp", "mlp.mxc"), name="mlp", route_prefix=None)``
    returns a ``DeploymentHandle``; wrap it in :class:`RemoteModel` to serve it
    from KServe's server, or call ``handle.remote(InferRequest)`` directly.  The
    artifact is read and verified here (with *verify_key*, a public key file).
    """
    from ray import serve

    from ..runtime.artifact import read_artifact
    ray_options = ray_options or RayOptions()
    read_artifact(path, verify_key=verify_key, check_target=False)
    key = Path(verify_key).read_bytes() if verify_key is not None else None
    if threads is None:
        threads = max(1, int(ray_options.replica_cpus))
    dep = serve.deployment(MxcReplica, name=_deployment_name(name))
    return dep.options(**ray_options.deployment_options(max_batch_size)).bind(
        name, Path(path).read_bytes(), verify_key=key, max_batch_size=max_batch_size,
        max_latency_ms=max_latency_ms, threads=threads)


def _deployment_name(served: str) -> str:
    return "mxc-" + "".join(c if c.isalnum() or c in "-_" else "-" for c in served)


class RemoteModel(RayModel):
    """KServe's ``RayModel`` that survives a lost replica and keeps typed errors.

    A call that fails because its replica's actor died (its node went away) is
    sent again -- Ray Serve's router stops choosing a dead replica as soon as the
    controller or the failed call reports it -- until *retry_seconds* have
    passed, then answered 503 (KServe's ``ModelNotReady``).  A :class:`RequestError`
    raised in the replica is re-raised here as itself, so KServe's server answers
    with its status and message.
    """

    def __init__(self, name: str, handle, app: str, retry_seconds: float = 30.0):
        super().__init__(name, handle)
        # our own reference: RayModel keeps its handle under a private name
        self.handle, self.app, self.retry_seconds = handle, app, retry_seconds
        self.retries = 0

    async def __call__(self, body, headers=None, verb=None):
        deadline = time.monotonic() + self.retry_seconds
        delay = 0.05
        while True:
            try:
                return await self.handle.remote(body, headers=headers)
            except RayTaskError as exc:
                cause = getattr(exc, "cause", None)
                if isinstance(cause, RequestError):
                    raise type(cause)(str(cause), cause.status) from None
                raise
            except RayActorError as exc:
                if time.monotonic() + delay > deadline:
                    raise ModelNotReady(self.name, f"no replica answered within {self.retry_seconds}s "
                                                   f"(--retry-seconds): {type(exc).__name__}") from None
                self.retries += 1
                log.warning("model %s: replica lost (%s); retrying", self.name, type(exc).__name__)
                await asyncio.sleep(delay)
                delay = min(1.0, delay * 2)

    def load(self) -> bool:
        self.ready = True  # serve.run returned: every replica has loaded
        return True


def model_factory(opts, ray_options: RayOptions, deployed: set[str]):
    """``make_model(served_name, path)`` for the repository watcher: deploys (or
    upgrades in place: same application name) the artifact and returns the
    ingress's :class:`RemoteModel` for it; *deployed* collects application names."""
    from ray import serve

    def make(name: str, path: Path):
        app = APP_PREFIX + name.replace("#", "-")  # '#' separates Serve's replica ids
        bound = deployment(name, path, ray_options=ray_options, verify_key=opts.verify_key,
                           max_batch_size=opts.max_batch_size, max_latency_ms=opts.max_latency_ms,
                           threads=opts.threads)
        handle = serve.run(bound, name=app, route_prefix=None)
        deployed.add(app)
        model = RemoteModel(name, handle, app, ray_options.retry_seconds)
        model.load()
        log.info("deployed %s on Ray as application %r", name, app)
        return model
    return make


def unload(model) -> None:
    """Delete the Ray Serve application of a model removed from the repository."""
    from ray import serve
    app = getattr(model, "app", None)
    if app:
        serve.delete(app, _blocking=False)


def _check_reachable(address: str, timeout: float = 10.0) -> None:
    """Fail fast on an address where no cluster listens: ``ray.init`` would retry
    for minutes.  (``ray://`` client addresses are left to Ray.)"""
    import socket

    from ..errors import MxcError
    if "://" in address:
        return
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        raise MxcError(f"--ray {address}: expected HOST:PORT of the cluster's head (its GCS port)")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=timeout).close()
    except OSError as exc:
        raise MxcError(f"--ray {address}: no Ray cluster answers there ({exc}); start one with "
                       f"'ray start --head --port {port}'") from None


def serve_on_ray(opts, ray_options: RayOptions) -> int:
    """``mxc serve --ray``: connect to the cluster, deploy, serve until SIGTERM,
    then delete the applications deployed here."""
    import ray
    from ray import serve

    from ..errors import MxcError
    from .server import serve_async, verify_all
    verify_all(opts)  # every artifact checked before the cluster is touched
    if ray_options.address:
        _check_reachable(ray_options.address)
    try:
        ray.init(address=ray_options.address, log_to_driver=False)
    except (ConnectionError, RuntimeError, ValueError) as exc:
        raise MxcError(f"--ray {ray_options.address or ''}: cannot connect to a Ray cluster: {exc}") from None
    deployed: set[str] = set()
    try:
        serve.start(proxy_location="Disabled")
        asyncio.run(serve_async(opts, reuse_port=False,
                                make_model=model_factory(opts, ray_options, deployed),
                                unload=unload))
    finally:
        _delete_apps(sorted(deployed), CLEANUP_SECONDS)
        ray.shutdown()
    return 0


#: how long ``mxc serve --ray`` waits on exit for its applications to be deleted
CLEANUP_SECONDS = 30.0


def _delete_apps(apps: list[str], timeout: float) -> None:
    """Delete *apps*, waiting at most *timeout* seconds: with the cluster gone (a Ctrl-C
    in a terminal also reaches a local Ray's raylet, which shares the process group)
    Ray's calls would wait forever, so they run in a daemon thread and are abandoned."""
    import threading

    from ray import serve

    def delete():
        for app in apps:
            try:
                serve.delete(app)
            except Exception as exc:  # noqa: BLE001 - the cluster may be gone already
                log.warning("could not delete Ray Serve application %s: %s", app, exc)
    worker = threading.Thread(target=delete, name="mxc-ray-cleanup", daemon=True)
    worker.start()
    worker.join(timeout)
    if worker.is_alive():
        log.warning("Ray Serve applications %s not deleted within %ss (is the cluster gone?)",
                    apps, timeout)
