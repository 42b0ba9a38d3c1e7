"""``mxc run``: execute a model on inputs from an .npz, write outputs to an .npz.

MODEL is either an ``.mxc`` artifact (run by the runtime; recognised by its
first bytes or the extension) or a symbol JSON, run by the reference
backend or, with ``--backend tvm``, compiled in memory first.
"""

from __future__ import annotations

import argparse
import sys

from ..errors import MxcError
from . import register_command
from .common import load_inputs, load_model, parse_shape_arg, save_outputs

BACKENDS = ("reference", "tvm")


@register_command("run", help="run a model or .mxc artifact on inputs from an .npz "
                              "(outputs out0, out1, ...)")
def add_arguments(p: argparse.ArgumentParser) -> None:
    from .compile_cmd import add_compile_arguments
    p.add_argument("model", metavar="MODEL", help="a .mxc artifact or a symbol JSON")
    p.add_argument("--params", metavar="P", help="MXNet .params file (symbol JSON only)")
    p.add_argument("--inputs", "-i", metavar="IN_NPZ",
                   help=".npz with one array per input name")
    p.add_argument("--output", "-o", metavar="OUT_NPZ", required=True,
                   help="where to write outputs")
    p.add_argument("--backend", choices=BACKENDS, default=None,
                   help="for a symbol JSON: reference (numpy, default) or tvm (compile in "
                        "memory, then run)")
    p.add_argument("--shape", metavar="NAME=DIMS", action="append", type=parse_shape_arg,
                   default=[], help="input shape for --backend tvm (default: from --inputs)")
    add_compile_arguments(p)
    p.add_argument("--profile", action="store_true",
                   help="print the time of every compiled region and host node")
    p.add_argument("--verify-key", metavar="PUBKEY", default=None,
                   help="refuse an artifact not signed with the private half of this Ed25519 "
                        "public key (PEM, from `mxc keygen`); checked before its library is "
                        "written to disk or loaded")


def _is_artifact(path: str) -> bool:
    from ..runtime.artifact import is_artifact
    return path.endswith(".mxc") or is_artifact(path)


def run(args: argparse.Namespace) -> int:
    if getattr(args, "output", None):
        from ..utils import check_output_path
        check_output_path(args.output)  # a missing directory is reported before any work
    if args.verify_key and not _is_artifact(args.model):
        raise MxcError("--verify-key applies to .mxc artifacts only")
    if _is_artifact(args.model):
        return _run_artifact(args)
    if args.profile and args.backend != "tvm":
        raise MxcError("--profile needs an .mxc artifact or --backend tvm")
    if args.db and args.backend != "tvm":
        raise MxcError("--db (a tuning database) needs --backend tvm")
    if args.backend == "tvm":
        return _run_tvm(args)
    return _run_reference(args)


def _report(args, names, outputs, profile) -> int:
    save_outputs(args.output, outputs)
    for name, o in zip(names, outputs):
        print(f"{name}: shape {tuple(o.shape)} dtype {o.dtype}")
    if profile is not None:
        print(profile)
    return 0


def _run_artifact(args) -> int:
    if args.params or args.backend or args.db:
        raise MxcError(f"{args.model} is a compiled artifact: its parameters, backend and "
                       f"schedules are fixed (drop --params/--backend/--db)")
    from ..runtime import load
    session = load(args.model, verify_key=args.verify_key)
    feeds = load_inputs(args.inputs)
    result = session.run(feeds, profile=args.profile)
    outputs, profile = result if args.profile else (result, None)
    return _report(args, [o.name for o in session.outputs], outputs, profile)


def _run_tvm(args) -> int:
    from .compile_cmd import compile_from_args
    feeds = load_inputs(args.inputs)
    loaded = load_model(args)
    inputs = loaded[0].list_inputs()
    _check_feeds(args, feeds, inputs)
    shapes = {k: v.shape for k, v in feeds.items()}
    shapes.update(dict(args.shape))
    dtypes = {k: v.dtype.name for k, v in feeds.items()}
    dtypes.update(dict(args.dtype))
    model = compile_from_args(args, shapes, dtypes, progress=sys.stderr.isatty(), loaded=loaded)
    result = model.run(feeds, profile=args.profile)
    outputs, profile = result if args.profile else (result, None)
    return _report(args, [o["name"] for o in model.outputs], outputs, profile)


def _check_feeds(args, feeds, inputs) -> None:
    unknown = sorted(set(feeds) - set(inputs))
    if unknown:
        raise MxcError(f"{args.inputs}: {', '.join(unknown)} not an input of the model; inputs "
                       f"are {', '.join(inputs)}")


def _run_reference(args) -> int:
    args.shape = []
    sym, arg, aux = load_model(args)
    feeds = load_inputs(args.inputs)
    values = {**arg, **aux}
    _check_feeds(args, feeds, sym.list_inputs())
    values.update(feeds)
    from ..backends.reference import run_graph
    outputs = run_graph(sym.graph, values)
    return _report(args, sym.list_outputs(), outputs, None)
