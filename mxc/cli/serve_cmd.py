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
    guard = p.add_argument_group("facing clients (see docs/serving.md, 'Limits')")
    guard.add_argument("--model-control-mode", choices=("none", "poll", "explicit"), default="poll",
                       help="poll (default): a repository is reloaded as its files change and "
                            "load/unload requests are refused; none: no changes while running; "
                            "explicit: load/unload requests (REST and gRPC) work, no polling")
    guard.add_argument("--control-token-file", metavar="FILE",
                       help="with explicit model control: load/unload requests must carry "
                            "'Authorization: Bearer' and this file's token")
    guard.add_argument("--max-connections", type=_positive, default=1000,
                       help="REST connections at once (default 1000, lowered to fit ulimit -n); "
                            "beyond it idle ones are closed first, then 503")
    guard.add_argument("--max-in-flight", type=_positive, default=256,
                       help="requests (and gRPC calls) answered at once; beyond it 503 with "
                            "Retry-After / RESOURCE_EXHAUSTED (default 256)")
    guard.add_argument("--header-timeout-s", type=float, default=10.0,
                       help="close a connection whose request headers are not complete this long "
                            "after it opened or got its last answer (default 10)")
    guard.add_argument("--idle-timeout-s", type=float, default=5.0,
                       help="close an idle keep-alive connection after this long (default 5)")
    guard.add_argument("--body-timeout-s", type=float, default=30.0,
                       help="answer 408 when a request body stops arriving this long (default 30)")
    guard.add_argument("--follow-symlinks", action="store_true",
                       help="serve repository artifacts that are links leading out of it")
    guard.add_argument("--openapi", action="store_true",
                       help="serve /openapi.json and /docs (off: they describe every route)")
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
    from .usage import UsageError
    for flag in ("header_timeout_s", "idle_timeout_s", "body_timeout_s"):
        if not getattr(args, flag) > 0:
            raise UsageError(f"--{flag.replace('_', '-')} must be more than 0")
    if args.model_control_mode == "explicit" and args.workers > 1:
        raise UsageError("--model-control-mode explicit and --workers: a load or unload request "
                         "reaches one worker only, so the workers would serve different models; "
                         "use one worker (or --ray) with explicit model control")
    if args.control_token_file:
        if args.model_control_mode != "explicit":
            raise UsageError("--control-token-file guards load/unload requests: it needs "
                             "--model-control-mode explicit")
        if not Path(args.control_token_file).is_file() or \
                not Path(args.control_token_file).read_text().strip():
            raise UsageError(f"--control-token-file {args.control_token_file}: not a file "
                             f"holding a token")
    if args.verify_key:
        from ..runtime.signing import load_public_key
        load_public_key(args.verify_key)  # a bad key file fails here, before anything starts
    opts = ServeOptions(source=args.source, host=args.host, http_port=args.port,
                        grpc_port=args.grpc_port or None, verify_key=args.verify_key,
                        max_batch_size=args.max_batch_size, max_latency_ms=args.max_latency_ms,
                        workers=args.workers, threads=args.threads,
                        max_request_bytes=args.max_request_bytes, poll_seconds=args.poll_seconds,
                        grace_seconds=args.grace_seconds,
                        model_control_mode=args.model_control_mode,
                        control_token_file=args.control_token_file,
                        max_connections=args.max_connections, max_in_flight=args.max_in_flight,
                        header_timeout_s=args.header_timeout_s, idle_timeout_s=args.idle_timeout_s,
                        body_timeout_s=args.body_timeout_s, follow_symlinks=args.follow_symlinks,
                        openapi=args.openapi)
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
