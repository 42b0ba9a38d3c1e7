"""``mxc run``: execute a model on inputs, print (and with ``--output`` write) its outputs.

MODEL is either an ``.mxc`` artifact (run by the runtime; recognised by its
first bytes or the extension) or a symbol JSON, run by the reference
backend or, with ``--backend tvm``, compiled in memory first.

As tvmc: inputs come from ``--inputs`` (an ``.npz`` keyed by input name, or
an ``.npy`` for a model with one data input) or are generated with
``--fill-mode zeros|ones|random``; outputs are written only with
``--output``; ``--repeat N --number M`` with ``--print-time`` times N
measurements of M runs each; ``--print-top K`` prints the K largest values
of the first output; ``--profile`` warms up, runs ``--repeat`` times and
prints every kernel and host node, slowest first.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from dataclasses import dataclass
from typing import Callable

import numpy as np

from ..errors import ExecutionError, MxcError
from ..runtime.bfloat16 import numpy_dtype
from . import register_command
from .common import (add_shape_arguments, load_inputs, load_model, positive_int, save_outputs,
                     shapes_of)

BACKENDS = ("reference", "tvm")
FILL_MODES = ("zeros", "ones", "random")


@register_command("run", help="run a model or .mxc artifact on inputs from an .npz/.npy or "
                              "generated ones (outputs out0, out1, ...)")
def add_arguments(p: argparse.ArgumentParser) -> None:
    from .compile_cmd import add_compile_arguments
    p.add_argument("model", metavar="MODEL", help="a .mxc artifact or a symbol JSON")
    p.add_argument("--params", metavar="P", help="MXNet .params file (symbol JSON only)")
    p.add_argument("--inputs", "-i", metavar="IN",
                   help=".npz with one array per input name, or .npy for a model with one "
                        "data input")
    p.add_argument("--fill-mode", choices=FILL_MODES, default=None,
                   help="generate the inputs not in --inputs: zeros, ones or random "
                        "(uniform [0, 1), seeded)")
    p.add_argument("--output", "-o", metavar="OUT_NPZ", default=None,
                   help="write the outputs to this .npz (out0, out1, ...); default: print "
                        "their shapes only")
    p.add_argument("--backend", choices=BACKENDS, default=None,
                   help="for a symbol JSON: reference (numpy, default) or tvm (compile in "
                        "memory, then run)")
    add_shape_arguments(p, "input shape for generated inputs and --backend tvm (default: "
                           "from --inputs); an artifact takes only the shapes it was "
                           "compiled for")
    add_compile_arguments(p)
    p.add_argument("--repeat", type=positive_int, default=1,
                   help="measurements for --print-time / runs for --profile (default 1; "
                        "--profile: 10 when not given)")
    p.add_argument("--number", type=positive_int, default=1,
                   help="runs per measurement for --print-time (default 1)")
    p.add_argument("--print-time", action="store_true",
                   help="print mean/median/min/max/std of the measured runs (ms)")
    p.add_argument("--print-top", type=positive_int, metavar="K", default=None,
                   help="print the K largest values of the first output, per batch row")
    p.add_argument("--profile", action="store_true",
                   help="warm up, run --repeat times and print every compiled kernel and host "
                        "node with its time, slowest first")
    p.add_argument("--verify-key", metavar="PUBKEY", default=None,
                   help="refuse an artifact not signed with the private half of this Ed25519 "
                        "public key (PEM, from `mxc keygen`); checked before its library is "
                        "written to disk or loaded")
    p.add_argument("--verify-name", metavar="NAME", default=None,
                   help="with --verify-key: refuse an artifact whose signature does not bind "
                        "exactly this name (compile --sign-name), e.g. an older version")
    p.add_argument("--threads", type=positive_int, metavar="N", default=None,
                   help="CPU threads for compiled code (default: every core this process may "
                        "use, from its CPU affinity and cgroup quota)")


@dataclass
class _Runner:
    run: Callable[[dict], list]
    output_names: list[str]
    session: object | None        # a runtime Session when compiled (profiling)


def _is_artifact(path: str) -> bool:
    from ..runtime.artifact import is_artifact
    return path.endswith(".mxc") or is_artifact(path)


def run(args: argparse.Namespace) -> int:
    if getattr(args, "output", None):
        from ..output_paths import check_output_path
        check_output_path(args.output)  # a missing directory is reported before any work
    if args.verify_key and not _is_artifact(args.model):
        raise MxcError("--verify-key applies to .mxc artifacts only")
    if args.verify_name is not None and not args.verify_key:
        raise MxcError("--verify-name needs --verify-key PUBKEY")
    if _is_artifact(args.model):
        runner, feeds = _artifact(args)
    else:
        if args.profile and args.backend != "tvm":
            raise MxcError("--profile needs an .mxc artifact or --backend tvm")
        if args.db and args.backend != "tvm":
            raise MxcError("--db (a tuning database) needs --backend tvm")
        runner, feeds = _tvm(args) if args.backend == "tvm" else _reference(args)
    outputs = runner.run(feeds)
    if args.output:
        save_outputs(args.output, outputs)
    for name, o in zip(runner.output_names, outputs):
        print(f"{name}: shape {tuple(o.shape)} dtype {o.dtype}")
    if args.print_top:
        print(top_k(outputs[0], args.print_top))
    if args.print_time:
        print(time_runs(runner.run, feeds, args.repeat, args.number))
    if args.profile:
        from ..runtime.profiler import profile_kernels
        repeat = args.repeat if args.repeat > 1 else 10
        print(profile_kernels(runner.session, feeds, repeat=repeat))
    return 0


def top_k(output: np.ndarray, k: int) -> str:
    """The *k* largest values of each batch row of *output* (index: value)."""
    rows = output.reshape(output.shape[0], -1) if output.ndim > 1 else output.reshape(1, -1)
    k = min(k, rows.shape[1])
    lines = []
    for b, row in enumerate(rows):
        idx = np.argsort(-row, kind="stable")[:k]
        lines.append(f"top {k} of output 0, row {b}: "
                     + ", ".join(f"{i}: {row[i]:.6g}" for i in idx))
    return "\n".join(lines)


def time_runs(fn, feeds, repeat: int, number: int) -> str:
    """tvmc's timing summary: *repeat* measurements, each the mean of *number* runs."""
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        for _ in range(number):
            fn(feeds)
        times.append((time.perf_counter() - t0) / number * 1e3)
    std = statistics.pstdev(times) if len(times) > 1 else 0.0
    return (f"execution time summary ({repeat} x {number} run(s)):\n"
            f" mean (ms)   median (ms)    max (ms)     min (ms)     std (ms)\n"
            f"{statistics.mean(times):>10.4f}   {statistics.median(times):>10.4f}   "
            f"{max(times):>10.4f}   {min(times):>10.4f}   {std:>10.4f}")


def _generate(args, specs: list[tuple[str, tuple, str]], feeds: dict) -> dict:
    """Fill the inputs named in *specs* that *feeds* lacks, per ``--fill-mode``."""
    missing = [s for s in specs if s[0] not in feeds]
    if not missing:
        return feeds
    if args.fill_mode is None:
        raise ExecutionError(f"no value for input(s) {', '.join(s[0] for s in missing)}: give "
                             f"--inputs FILE.npz or --fill-mode zeros|ones|random")
    rng = np.random.default_rng(0)
    out = dict(feeds)
    for name, shape, dtype in missing:
        if shape is None:
            from .usage import UsageError
            raise UsageError(f"--fill-mode needs the shape of {name!r}: give --shape "
                             f"{name}=D1,D2,...")
        if any(isinstance(d, tuple) for d in shape):
            from .usage import UsageError
            raise UsageError(f"--fill-mode needs one batch size for {name!r}, not a range: "
                             f"compile the range with `mxc compile`, then run the artifact "
                             f"with --shape {name}=B,...")
        dt = numpy_dtype(dtype)
        if args.fill_mode == "zeros":
            out[name] = np.zeros(shape, dt)
        elif args.fill_mode == "ones":
            out[name] = np.ones(shape, dt)
        elif dt.kind in "iu":
            out[name] = rng.integers(0, 2, size=shape).astype(dt)
        else:
            out[name] = rng.random(size=shape).astype(dt)
    return out


def _artifact(args):
    if args.params or args.backend or args.db:
        raise MxcError(f"{args.model} is a compiled artifact: its parameters, backend and "
                       f"schedules are fixed (drop --params/--backend/--db)")
    from ..runtime import load
    verify_key = args.verify_key
    if args.verify_name is not None:
        from ..runtime.signing import NamedKey
        verify_key = NamedKey(verify_key, args.verify_name)
    session = load(args.model, libraries=args.load, verify_key=verify_key,
                   threads=args.threads)
    names = [i.name for i in session.inputs]
    shapes = _artifact_shapes(args, session)
    feeds = load_inputs(args.inputs, names)
    _check_feeds(args, feeds, session.input_names, names)
    from ..runtime.shapes import example_shape
    feeds = _generate(args, [(i.name, shapes.get(i.name, example_shape(i)), i.dtype)
                             for i in session.inputs], feeds)
    return _Runner(session.run, [o.name for o in session.outputs], session), feeds


def _artifact_shapes(args, session) -> dict[str, tuple[int, ...]]:
    """The ``--shape``s given for an artifact, each one its input can take (else a usage
    error naming what it takes: an artifact is not recompiled by a ``--shape``)."""
    from ..runtime.shapes import accepts, shape_text
    from .usage import UsageError
    from .common import check_shape_names
    names = [i.name for i in session.inputs]
    check_shape_names(args, names, names)
    info = {i.name: i for i in session.inputs}
    shapes = shapes_of(args)
    for name, shape in shapes.items():
        if not accepts(info[name], shape):
            raise UsageError(f"--shape {name}={','.join(map(str, shape))}: {args.model} takes "
                             f"{shape_text(info[name])} (compiled for that shape or batch "
                             f"range; compile again with --shape {name}=... for another)")
    return shapes


def _data_names(sym, params) -> list[str]:
    return [n for n in sym.list_inputs() if n not in params and not n.endswith("label")]


def _data_specs(args, sym, params) -> list[tuple[str, tuple | None, str]]:
    """(name, shape or None, dtype) of the inputs to feed: not parameters, not labels."""
    shapes, dtypes = shapes_of(args), dict(args.dtype)
    return [(n, shapes.get(n), dtypes.get(n, "float32")) for n in sym.list_inputs()
            if n not in params and (n in shapes or not n.endswith("label"))]


def _tvm(args):
    from .compile_cmd import compile_from_args
    loaded = load_model(args)
    sym, arg, aux = loaded
    feeds = load_inputs(args.inputs, _data_names(sym, {**arg, **aux}))
    _check_feeds(args, feeds, sym.list_inputs(), _data_names(sym, {**arg, **aux}))
    if not args.weights_as_inputs:   # the compile checks it too; say it before generating
        from ..backends.tvm.compile import params_hint
        from ..compiler.weights import check_params
        check_params(sym.list_inputs(), {**arg, **aux}, set(feeds) | set(shapes_of(args)),
                     source=args.params, hint=params_hint)
    feeds = _generate(args, _data_specs(args, sym, {**arg, **aux}), feeds)
    shapes = {k: v.shape for k, v in feeds.items()}
    shapes.update(shapes_of(args))
    dtypes = {k: v.dtype.name for k, v in feeds.items()}
    dtypes.update(dict(args.dtype))
    model = compile_from_args(args, shapes, dtypes, progress=sys.stderr.isatty(), loaded=loaded,
                              check_inputs=feeds)
    session = model.session()
    return _Runner(session.run, [o["name"] for o in model.outputs], session), feeds


def _check_feeds(args, feeds, accepted, listed) -> None:
    """Arrays of ``--inputs`` named after no input: said first, as the runtime says it (not
    as a missing input, which is what the misnamed array leaves behind)."""
    unknown = sorted(set(feeds) - set(accepted))
    if unknown:
        raise ExecutionError(f"{args.inputs}: unknown input(s) {', '.join(map(repr, unknown))}; "
                             f"the model's inputs are {', '.join(listed)}")


def _reference(args):
    sym, arg, aux = load_model(args)
    values = {**arg, **aux}
    feeds = load_inputs(args.inputs, _data_names(sym, values))
    _check_feeds(args, feeds, sym.list_inputs(), _data_names(sym, values))
    from ..compiler.weights import check_params
    check_params(sym.list_inputs(), values, set(feeds) | set(shapes_of(args)), source=args.params,
                 hint="Give the model's .params file with --params, or feed the weights in "
                      "--inputs.")
    feeds = _generate(args, _data_specs(args, sym, values), feeds)
    from ..backends.reference import run_graph

    def run_reference(given):
        return run_graph(sym.graph, {**values, **given})
    return _Runner(run_reference, sym.list_outputs(), None), feeds
