"""``mxc serve``: serve artifacts over the Open Inference Protocol (KServe V2).

::

    mxc serve mlp.mxc                                # model "mlp" on 127.0.0.1:8080 (REST), :8081 (gRPC)
    mxc serve models/ --verify-key signing.key.pub   # models/NAME/VERSION/model.mxc, reloaded on change
    mxc serve mlp.mxc --max-batch-size 32 --max-latency-ms 5 --workers 2

Built on KServe's ModelServer (``pip install 'mxc[serve]'``); see docs/serving.md.
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
    return serve(opts)
