"""``mxc run``: execute a model on inputs from an .npz, write outputs to an .npz."""

from __future__ import annotations

import argparse

from ..errors import MxcError
from . import register_command
from .common import load_inputs, load_model, save_outputs

BACKENDS = ("reference",)


@register_command("run", help="run a model on inputs from an .npz (outputs out0, out1, ...)")
def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("model", metavar="MODEL", help="symbol JSON")
    p.add_argument("--params", metavar="P", help="MXNet .params file")
    p.add_argument("--inputs", metavar="IN_NPZ", help=".npz with one array per input name")
    p.add_argument("--output", "-o", metavar="OUT_NPZ", required=True, help="where to write outputs")
    p.add_argument("--backend", choices=BACKENDS, default="reference",
                   help="execution backend (default: reference)")


def run(args: argparse.Namespace) -> int:
    args.shape = []
    sym, arg, aux = load_model(args)
    feeds = load_inputs(args.inputs)
    values = {**arg, **aux}
    unknown = sorted(set(feeds) - set(sym.list_inputs()))
    if unknown:
        raise MxcError(f"{args.inputs}: {', '.join(unknown)} not an input of the model; inputs "
                       f"are {', '.join(sym.list_inputs())}")
    values.update(feeds)
    from ..backends.reference import run_graph
    outputs = run_graph(sym.graph, values)
    save_outputs(args.output, outputs)
    for name, o in zip(sym.list_outputs(), outputs):
        print(f"{name}: shape {tuple(o.shape)} dtype {o.dtype}")
    return 0
