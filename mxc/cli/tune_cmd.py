"""``mxc tune``: tune a model's kernels with MetaSchedule into a reusable database.

    mxc tune resnet18-symbol.json --params resnet18-0000.params \\
        --shape data=1,3,224,224 --trials 64 --db tuning/
    mxc compile resnet18-symbol.json ... --db tuning/

The kernels tuned are exactly those ``mxc compile`` builds with the same
``--target``/``--passes``/``--dtype``/``--no-bind-params`` options.  Kernels
the database already holds with at least ``--trials`` trials are skipped, so
tuning a second model (or re-running after an interruption) only measures
what is new.  Progress goes to stderr, one line per measured batch.  Each
run appends a line (model, trials, wall time) to ``DIR/mxc-tune-log.jsonl``.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from ..errors import BackendError, DependencyError, MxcError
from . import register_command
from .common import (add_model_arguments, load_model, model_name, positive_int, require_shapes,
                     shapes_of)


def parse_rpc(text: str) -> tuple[str, int, str]:
    """``HOST:PORT:KEY`` (an RPC tracker and the device key)."""
    parts = text.rsplit(":", 2)
    if len(parts) != 3 or not parts[1].isdigit() or not parts[2]:
        raise argparse.ArgumentTypeError(f"expected TRACKER_HOST:PORT:KEY, got {text!r}")
    return parts[0], int(parts[1]), parts[2]


@register_command("tune", help="tune a model's kernels (MetaSchedule) into a database")
def add_arguments(p: argparse.ArgumentParser) -> None:
    from .compile_cmd import add_compile_arguments
    add_model_arguments(p)
    add_compile_arguments(p, tuning_db=False)
    p.add_argument("--trials", type=positive_int, default=64,
                   help="measured trials per kernel (default 64); kernels with as many "
                        "records in the database are skipped")
    p.add_argument("--db", "--tuning-records", dest="db", metavar="DIR", required=True,
                   help="tuning database directory (created if missing; share it between "
                        "models and runs); --tuning-records is tvmc's name")
    p.add_argument("--rpc", metavar="HOST:PORT:KEY", type=parse_rpc, default=None,
                   help="measure on the devices of a TVM RPC tracker registered under KEY "
                        "(default: measure locally)")
    p.add_argument("--rpc-workers", type=int, default=1,
                   help="parallel RPC measurement sessions (default 1)")
    p.add_argument("--batch", type=int, default=64,
                   help="candidates measured per batch (default 64)")
    p.add_argument("--timeout", type=float, default=30.0,
                   help="seconds per build/measurement (default 30)")
    p.add_argument("--all-kernels", action="store_true",
                   help="also tune injective kernels (transposes, padding); by default only "
                        "kernels with a reduction (conv, dense, pooling) are tuned")
    p.add_argument("--search", choices=("evolutionary", "random"), default="evolutionary",
                   help="evolutionary (cost-model guided, default) or random (design-space "
                        "samples: quick start, for smoke tests)")
    p.add_argument("--no-default-record", dest="seed_default", action="store_false",
                   help="do not measure and store mxc's default schedule of each kernel")
    p.add_argument("--no-verify", dest="verify", action="store_false",
                   help="do not re-measure each kernel's best record against the default "
                        "schedule (by default a tuned schedule is used only when the "
                        "interleaved re-measurement finds it faster by the keep margin)")
    p.add_argument("--keep-margin", type=float, default=None, metavar="FRACTION",
                   help="how much faster a tuned kernel must re-measure to be kept "
                        "(default 0.03)")
    p.add_argument("--check-model", type=float, nargs="?", const=30.0, default=None,
                   metavar="SECONDS",
                   help="after tuning, compile the model untuned and tuned, check their "
                        "outputs agree, time both interleaved for SECONDS (default 30) and "
                        "report the medians; unless the tuned model is faster, its kernels "
                        "go back to the default schedules (costs two compiles)")
    p.add_argument("--tasks", metavar="NAME[,NAME...]", default=None,
                   help="tune only the kernels whose task name contains one of these "
                        "(names as the progress lines and the summary print them)")
    p.add_argument("--verbose-tuning", action="store_true",
                   help="let MetaSchedule log to the console as well (it always logs to "
                        "DIR/logs)")
    p.add_argument("--seed", type=int, default=None, help="search seed")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress lines")


def lower_args_model(args, loaded=None):
    """(Relax module, target, options) that ``mxc compile`` with the same options would
    build: the model goes through the same passes, partitioning and lowering
    (:func:`mxc.backends.tvm.lower.lower_model`)."""
    from ..backends.tvm.lower import lower_model
    from .compile_cmd import options_of
    sym, arg, aux = loaded if loaded is not None else load_model(args)
    options = options_of(args)
    lowered = lower_model(sym, (arg, aux), shapes_of(args), dict(args.dtype), options)
    if lowered.module is None:
        raise MxcError("nothing to tune: no part of the model is compiled with TVM")
    return lowered.module, lowered.target, options


#: what MetaSchedule imports to measure (psutil, cloudpickle: its worker pools) and to
#: guide the evolutionary search (xgboost: the cost model); the ``[tune]`` extra
TUNING_PACKAGES = ("psutil", "cloudpickle", "xgboost")


def check_tuning_dependencies(search: str) -> None:
    """One clear line, before any work, when a package tuning imports is missing."""
    import importlib
    needed = TUNING_PACKAGES if search == "evolutionary" else TUNING_PACKAGES[:2]
    missing = []
    for name in needed:
        try:
            importlib.import_module(name)
        except ImportError:
            missing.append(name)
    if missing:
        raise DependencyError(f"mxc tune needs {', '.join(missing)} (not installed): "
                              f"pip install \"mxc[tune]\" (from a source checkout: "
                              f"pip install \".[tune]\")")


def run(args: argparse.Namespace) -> int:
    from ..backends.tvm.options import TuneOptions
    from ..backends.tvm.tune import tune_model
    loaded = load_model(args)
    require_shapes(args, loaded[0], {**loaded[1], **loaded[2]})   # usage errors come first
    check_tuning_dependencies(args.search)
    mod, target, compile_options = lower_args_model(args, loaded)
    margin = {} if args.keep_margin is None else {"keep_margin": args.keep_margin}
    report = tune_model(mod, TuneOptions(
        target=target, trials=args.trials, db_dir=args.db, rpc=args.rpc,
        rpc_workers=args.rpc_workers, trials_per_iter=args.batch, timeout_s=args.timeout,
        all_kernels=args.all_kernels, search=args.search, seed_default=args.seed_default,
        seed=args.seed, progress=not args.quiet, verbose=args.verbose_tuning,
        winograd=compile_options.winograd, precision=compile_options.precision,
        verify=args.verify, **margin,
        only=[t for t in args.tasks.split(",") if t] if args.tasks else None,
        model_info={"model": model_name(args.model), "symbol": str(Path(args.model).resolve()),
                    "shapes": {k: list(v) for k, v in shapes_of(args).items()}}))
    if report.tasks and all(t.best_ms is None for t in report.tasks):
        print(report.summary())
        raise BackendError(f"no candidate of any kernel built and ran successfully: {args.db} "
                           f"holds no usable schedule (see {args.db}/logs; check --target "
                           f"and --timeout)")
    if args.check_model is not None:
        from .tune_check import check_model
        check_model(args, loaded, report, args.check_model)
    print(report.summary())
    print(f"compile with it: mxc compile {args.model} ... --db {args.db}")
    return 0
