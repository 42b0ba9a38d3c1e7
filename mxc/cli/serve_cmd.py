"""``mxc serve``: serve artifacts over the Open Inference Protocol (KServe V2).

::

    mxc serve mlp.mxc                                # model "mlp" on 127.0.0.1:8080 (REST), :8081 (gRPC)
    mxc serve models/ --verify-key signing.key.pub   # models/NAME/VERSION/model.mxc, reloaded on change
    mxc serve mlp.mxc --max-batch-size 32 --max-latency-ms 5 --workers 2
    mxc serve models/ --ray 10.0.0.1:6379 --min-replicas 2 --max-replicas 8   # Ray Serve replicas

Built on KServe's ModelServer (``pip install 'mxc[serve]'``); ``--ray`` deploys the models
as Ray Serve deployments behind it (``pip install 'mxc[serve,ray]'``); see docs/serving.md.
"""

from __future__ import annotations

import argparse

from . import register_command


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text}: must be at least 1")
    return value


@register_command("serve", help="serve .mxc artifacts over KServe's V2 protocol (REST and gRPC)")
def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("source", metavar="MODEL.mxc|REPO_DIR",
                   help="one artifact (served as its file name's stem) or a repository "
                        "NAME/VERSION/model.mxc, reloaded when files are added, removed or replaced")
    p.add_argument("--host", default="127.0.0.1",
                   help="address to listen on (default 127.0.0.1: this machine only)")
    p.add_argument("--port", type=int, default=8080, help="REST port (default 8080)")
    p.add_argument("--grpc-port", type=int, default=8081, help="gRPC port (default 8081; 0: no gRPC)")
    p.add_argument("--verify-key", metavar="KEY",
                   help="serve only artifacts signed with the private key of this public key")
    p.add_argument("--max-batch-size", type=_positive, default=1,
                   help="group concurrent requests into batches up to this size (dynamic-batch "
                        "artifacts; default 1: no batching)")
    p.add_argument("--max-latency-ms", type=float, default=5.0,
                   help="longest a request waits for others to batch with (default 5)")
    p.add_argument("--workers", type=_positive, default=1,
                   help="worker processes sharing the ports (each loads the models)")
    p.add_argument("--threads", type=_positive, help="CPU threads per session (default: all cores)")
    p.add_argument("--max-request-bytes", type=_positive, default=64 << 20,
                   help="refuse larger request bodies with 413 (default 64 MiB)")
    p.add_argument("--poll-seconds", type=float, default=2.0,
                   help="how often a repository is checked for changes (0: never)")
    p.add_argument("--grace-seconds", type=float, default=30.0,
                   help="on SIGTERM, how long in-flight requests may take to finish")
    ray = p.add_argument_group("Ray Serve (--ray; see docs/serving.md, 'Ray cluster')")
    ray.add_argument("--ray", nargs="?", const="auto", metavar="ADDRESS",
                     help="run every model as a Ray Serve deployment on the cluster at ADDRESS "
                          "(host:port of its head; without ADDRESS: the cluster started on this "
                          "machine, or $RAY_ADDRESS); this server stays the V2 ingress")
    ray.add_argument("--min-replicas", type=_positive, default=1, help="replicas per model (default 1)")
    ray.add_argument("--max-replicas", type=_positive,
                     help="autoscale up to this many replicas per model on queue length "
                          "(default: --min-replicas, a fixed number)")
    ray.add_argument("--target-ongoing-requests", type=float, default=2.0,
                     help="requests queued or running per replica that autoscaling aims at (default 2)")
    ray.add_argument("--upscale-delay-s", type=float,
                     help="how long the queue must stay above the target before a replica is added "
                          "(default: Ray Serve's)")
    ray.add_argument("--downscale-delay-s", type=float,
                     help="how long it must stay below before one is removed (default: Ray Serve's)")
    ray.add_argument("--max-replicas-per-node", type=_positive,
                     help="spread replicas: at most this many of one model on a node")
    ray.add_argument("--replica-cpus", type=float, default=1.0,
                     help="CPUs Ray reserves for each replica (default 1; also its session's threads)")
    ray.add_argument("--retry-seconds", type=float, default=30.0,
                     help="how long a request whose replica died is retried on the others (default 30)")


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from ..errors import ArtifactError
    from ..serving.server import ServeOptions, serve
    if not Path(args.source).exists():
        raise ArtifactError(f"{args.source}: no such artifact or model repository")
    if args.verify_key:
        from ..runtime.signing import load_public_key
        load_public_key(args.verify_key)  # a bad key file fails here, before anything starts
    opts = ServeOptions(source=args.source, host=args.host, http_port=args.port,
                        grpc_port=args.grpc_port or None, verify_key=args.verify_key,
                        max_batch_size=args.max_batch_size, max_latency_ms=args.max_latency_ms,
                        workers=args.workers, threads=args.threads,
                        max_request_bytes=args.max_request_bytes, poll_seconds=args.poll_seconds,
                        grace_seconds=args.grace_seconds)
    if args.ray is None:
        return serve(opts)
    return _serve_on_ray(opts, args)


def _serve_on_ray(opts, args: argparse.Namespace) -> int:
    from ..errors import DependencyError
    from ..serving.server import import_kserve
    from .usage import UsageError
    if args.workers > 1:
        raise UsageError("--ray and --workers: with Ray, scale with --min-replicas/--max-replicas")
    max_replicas = args.max_replicas or args.min_replicas
    if max_replicas < args.min_replicas:
        raise UsageError(f"--max-replicas {max_replicas} is below --min-replicas {args.min_replicas}")
    import_kserve()
    try:
        from ..serving.ray_serve import RayOptions, serve_on_ray
    except ImportError as exc:
        raise DependencyError(f"mxc serve --ray needs Ray Serve: pip install 'mxc[ray]' ({exc})") from None
    ray_options = RayOptions(
        address=None if args.ray == "auto" else args.ray, min_replicas=args.min_replicas,
        max_replicas=max_replicas, target_ongoing_requests=args.target_ongoing_requests,
        max_replicas_per_node=args.max_replicas_per_node, replica_cpus=args.replica_cpus,
        retry_seconds=args.retry_seconds, upscale_delay_s=args.upscale_delay_s,
        downscale_delay_s=args.downscale_delay_s)
    return serve_on_ray(opts, ray_options)
