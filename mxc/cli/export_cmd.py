"""``mxc export``: an artifact in another serving engine's model format.

::

    mxc export triton mlp.mxc -o model_repository/     # model_repository/mlp/{config.pbtxt,1/model.py,1/model.mxc}

Triton's Python backend then runs the artifact with ``mxc.runtime``
(docs/serving.md, "Triton").
"""

from __future__ import annotations

import argparse

from . import register_command


@register_command("export", help="write an artifact as a Triton Inference Server model")
def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("format", choices=["triton"], help="the target engine's format")
    p.add_argument("artifact", metavar="MODEL.mxc")
    p.add_argument("-o", "--output", required=True, metavar="DIR",
                   help="model repository to write the model into")
    p.add_argument("--name", help="model name (default: the artifact's file name stem)")
    p.add_argument("--version", type=int, default=1, help="model version directory (default 1)")
    p.add_argument("--max-batch-size", type=int, default=32,
                   help="Triton's max_batch_size for a dynamic-batch artifact (default 32)")
    p.add_argument("--max-queue-delay-us", type=int, default=5000,
                   help="dynamic_batching's max_queue_delay_microseconds (default 5000)")
    p.add_argument("--instances", type=int, default=1, help="CPU instances of the model (default 1)")
    p.add_argument("--python-path", metavar="DIRS",
                   help="where mxc and numpy are for Triton's Python backend (os.pathsep-separated; "
                        "its stub ignores PYTHONPATH)")
    p.add_argument("--force", action="store_true", help="replace an existing model directory")


def run(args: argparse.Namespace) -> int:
    from ..serving.triton import export_triton
    model_dir = export_triton(args.artifact, args.output, name=args.name, version=args.version,
                              max_batch_size=args.max_batch_size,
                              max_queue_delay_us=args.max_queue_delay_us,
                              instances=args.instances, python_path=args.python_path,
                              force=args.force)
    print(f"wrote Triton model {model_dir} (config.pbtxt, {args.version}/model.py, "
          f"{args.version}/model.mxc)")
    return 0
