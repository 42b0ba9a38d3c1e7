"""``mxc draw``: draw a model, a partitioned model or an artifact as SVG or offline HTML."""

from __future__ import annotations

import argparse

from . import register_command
from .common import add_shape_arguments, shapes_of


@register_command("draw", help="draw a model, partitioned model or .mxc artifact "
                               "(graph.html: interactive, offline; graph.svg)")
def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("model", metavar="MODEL",
                   help="symbol JSON (partitioned or not) or .mxc artifact")
    p.add_argument("--params", metavar="P", help=".params file (shapes of the weights)")
    add_shape_arguments(p, "input shape, e.g. data=1,3,224,224: edges get shapes")
    p.add_argument("--show-params", action="store_true",
                   help="draw the parameter inputs (weights, biases ...) too")
    p.add_argument("-o", "--output", required=True, metavar="OUT",
                   help="graph.html (search, fold regions, zoom; opens offline) or graph.svg")


def run(args: argparse.Namespace) -> int:
    from ..draw import draw
    params = {}
    if args.params:
        from ..frontend.params import load_params, split_arg_aux
        arg, aux = split_arg_aux(load_params(args.params))
        params = {**arg, **aux}
    drawing = draw(args.model, args.output, shapes_of(args), params, args.show_params)
    ops = sum(1 for n in drawing.nodes if n.op not in ("input", "output"))
    hosts = sum(1 for n in drawing.nodes if n.host)
    print(f"wrote {args.output}: {ops} node(s), {len(drawing.regions)} region(s)"
          + (f" ({', '.join(drawing.backends())})" if drawing.regions else "")
          + (f", {hosts} host node(s)" if hosts else ""))
    return 0
