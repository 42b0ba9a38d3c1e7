"""``mxc partition``: carve a model into subgraph regions with a registered backend."""

from __future__ import annotations

import argparse
import sys

from ..atomic_files import atomic_write_text
from . import register_command
from .common import add_model_arguments, load_model, parse_key_value, shapes_of


@register_command("partition", help="partition a model into subgraph regions (optimize_for)")
def add_arguments(p: argparse.ArgumentParser) -> None:
    add_model_arguments(p)
    p.add_argument("--backend", required=True, metavar="NAME",
                   help="subgraph backend or custom partitioner, e.g. default")
    p.add_argument("--option", metavar="KEY=VALUE", action="append", type=parse_key_value,
                   default=[], help="backend option, e.g. op_names=exp,sin (repeatable)")
    p.add_argument("-o", "--output", required=True, metavar="OUT_JSON",
                   help="where to write the partitioned symbol JSON")


def summarize(graph) -> list[str]:
    """One line per region: node name, subgraph op, size and op counts."""
    lines = []
    for node in graph.nodes:
        if node.op is None or not node.subgraphs:
            continue
        inner = node.subgraphs[0]
        counts = inner.op_counts()
        ops = ", ".join(f"{op} x{n}" if n > 1 else op for op, n in sorted(counts.items()))
        lines.append(f"  {node.name} ({node.op}): {sum(counts.values())} node(s), "
                     f"{len(node.inputs)} input(s), {len(inner.outputs)} output(s): {ops}")
    return lines


def run(args: argparse.Namespace) -> int:
    from ..output_paths import check_output_path, is_stdout
    check_output_path(args.output)  # a missing directory is reported before any work
    report = sys.stderr if is_stdout(args.output) else sys.stdout  # '-o -': JSON on stdout
    sym, arg, aux = load_model(args)
    shapes = shapes_of(args)
    feeds = {**arg, **aux}
    if shapes:
        import numpy as np
        feeds.update({k: np.empty(v, np.float32) for k, v in shapes.items() if k not in feeds})
    options = dict(args.option)
    part = sym.optimize_for(args.backend, args=feeds or None, **options)
    atomic_write_text(args.output, part.tojson())
    regions = summarize(part.graph)
    print(f"{args.model}: {len(regions)} region(s) for backend {args.backend!r} -> {args.output}",
          file=report)
    for line in regions:
        print(line, file=report)
    return 0
