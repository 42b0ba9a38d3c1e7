"""``mxc opt``: run a pass pipeline on a model and write the optimized model.

::

    mxc opt model-symbol.json --params model-0000.params \\
        --passes "remove-dropout,fold-batchnorm,dce" \\
        -o opt-symbol.json --params-out opt-0000.params

As with mlir-opt: MODEL ``-`` is standard input; without ``--passes`` the model
is read and written back (``mxc opt x.json --emit ir > x.mxir`` converts it);
the output goes to ``-o`` (standard output when ``-o`` is absent or ``-``),
and everything else -- the summary, ``print-ir`` and the ``--print-ir-*``
dumps -- to standard error, so that standard output holds the model alone.  The JSON
and the parameters (only when the pipeline changed them or ``--params-out`` is
given) are written as a set: both to temporaries, then renamed together, so an
interrupt leaves either both old files or both new ones.  Output directories
are checked before any work.  ``--list-passes`` prints every pass with its
options.
"""

from __future__ import annotations

import argparse
import sys

from ..errors import MxcError
from . import register_command
from .common import add_shape_arguments, shapes_of


@register_command("opt", help="run a pass pipeline on a model (e.g. fold-batchnorm,dce)")
def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("model", metavar="MODEL", nargs="?",
                   help="MXNet symbol JSON, or a graph in the textual IR (.mxir, or any file "
                        "starting with 'graph @'); '-': standard input")
    p.add_argument("--params", metavar="P", help="MXNet .params file (arg:/aux: names)")
    p.add_argument("--passes", "--pass-pipeline", dest="passes", metavar="PIPELINE",
                   help='passes to run, e.g. "remove-dropout,fold-batchnorm,dce" or '
                        '"partition{backend=default op_names=exp;log}" (default: none, the '
                        'model is written back, e.g. converted with --emit)')
    p.add_argument("--output", "-o", metavar="OUT_JSON", default="-",
                   help="where to write the symbol JSON (default and '-': standard output)")
    p.add_argument("--params-out", metavar="P2", help="where to write the parameters")
    add_shape_arguments(p, "shape of a data input, e.g. data=1,3,224,224 (repeatable)")
    p.add_argument("--emit", choices=("json", "ir"), default=None,
                   help="output format: json (MXNet symbol JSON) or ir (the textual IR); "
                        "default: the input's")
    p.add_argument("--print-ir-after-all", action="store_true",
                   help="print the textual IR after every pass (to stderr)")
    p.add_argument("--print-ir-after-change", action="store_true",
                   help="print the textual IR after each pass that changed it (to stderr)")
    p.add_argument("--print-ir-before", metavar="PASS[,PASS]", default=None,
                   help="print the textual IR before the passes named (to stderr)")
    p.add_argument("--print-ir-before-all", action="store_true",
                   help="print the textual IR before every pass (to stderr)")
    p.add_argument("--timing", action="store_true", help="print the time each pass took")
    p.add_argument("--no-verify-each", action="store_true",
                   help="verify only the final graph, not the graph after every pass")
    p.add_argument("--list-passes", action="store_true",
                   help="list the registered passes and their options, then exit")


def run(args: argparse.Namespace) -> int:
    from ..compiler.passes import PassManager, PassTiming, describe_passes
    if args.list_passes:
        print(describe_passes())
        return 0
    if args.model is None:
        from .usage import UsageError
        raise UsageError("missing MODEL (a file, or '-' for standard input)")
    from ..output_paths import check_output_path, is_stdout
    check_output_path(args.output)  # fail fast: before loading and running anything
    if args.params_out:
        check_output_path(args.params_out, "--params-out")
        if is_stdout(args.params_out) and is_stdout(args.output):
            raise MxcError("-o and --params-out cannot both be standard output")
    report = sys.stderr if is_stdout(args.output) or is_stdout(args.params_out) else sys.stdout
    manager = PassManager(args.passes or "", verify_each=not args.no_verify_each)  # fail fast
    sym, arg, aux, input_is_ir = _load(args)
    args.emit = args.emit or ("ir" if input_is_ir else "json")
    timing = PassTiming()
    manager.instruments = [timing] + _printers(args)
    result = manager.run(sym, arg, aux, shapes=shapes_of(args))
    params_changed = bool(result.allocated or result.removed)
    if params_changed and not args.params_out:
        raise MxcError(f"the pipeline changed the parameters ({_param_summary(result)}); "
                       f"give --params-out to write them")
    _write(result, args)
    before, after = len(sym.graph.topo_order()), len(result.graph.topo_order())
    print(f"{manager.pipeline or 'no passes'}: {before} -> {after} nodes; "
          f"{_param_summary(result)}", file=report)
    for name, stats in result.statistics:
        if stats:
            print(f"  {name}: " + ", ".join(f"{k} {v}" for k, v in stats.items()), file=report)
    if args.timing:
        print(timing.report(), file=report)
    return 0


def is_ir_file(path: str) -> bool:
    """A textual-IR file: ``.mxir``/``.ir`` suffix, or text starting with ``graph @``
    (after ``//`` comment lines)."""
    if path.endswith((".mxir", ".ir")):
        return True
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            head = fh.read(4096)
    except OSError:
        return False
    return is_ir_text(head)


def is_ir_text(head: str) -> bool:
    """Text that starts with ``graph @`` after ``//`` comment lines: the textual IR."""
    lines = [ln.strip() for ln in head.splitlines()]
    first = next((ln for ln in lines if ln and not ln.startswith("//")), "")
    return first.startswith("graph @")


def _load(args):
    """(symbol, arg params, aux params, whether the input was textual IR)."""
    from .common import load_model
    from ..compiler.ir.text import parse_graph
    from ..compiler.ops.registry import check_supported
    from ..symbol import Symbol
    from ..errors import FrontendError
    source, data = args.model, None
    if args.model == "-":
        source, data = "<stdin>", sys.stdin.buffer.read()
        if not is_ir_text(data[:4096].decode("utf-8", errors="replace")):
            from ..frontend.symbol_json import load_json_bytes
            return (*load_model(args, Symbol.from_graph(load_json_bytes(data, source=source))),
                    False)
    elif not is_ir_file(args.model):
        return (*load_model(args), False)
    try:
        text = (open(args.model, encoding="utf-8").read() if data is None
                else data.decode("utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise FrontendError(f"{source}: cannot read the textual IR: {exc}") from None
    graph = parse_graph(text, source=source)
    check_supported(graph)
    arg, aux = {}, {}
    if args.params:
        from ..frontend.params import load_params, split_arg_aux
        arg, aux = split_arg_aux(load_params(args.params))
    return Symbol.from_graph(graph), arg, aux, True


def _printers(args) -> list:
    from ..compiler.passes import PrintIRAfterAll, PrintIRAfterChange, PrintIRBefore
    out = []
    if args.print_ir_before_all or args.print_ir_before:
        names = None if args.print_ir_before_all else args.print_ir_before.split(",")
        out.append(PrintIRBefore(names, sys.stderr))
    if args.print_ir_after_all:
        out.append(PrintIRAfterAll(sys.stderr))
    elif args.print_ir_after_change:
        out.append(PrintIRAfterChange(sys.stderr))
    return out


def _write(result, args) -> None:
    """Serialize both outputs, then write them as one set (renamed together)."""
    from ..frontend.params import dumps_params
    from ..atomic_files import OutputSet
    from ..output_paths import is_stdout
    outputs = OutputSet()
    if args.params_out:
        arrays = {f"arg:{k}": v for k, v in result.args.items()}
        arrays.update({f"aux:{k}": v for k, v in result.aux.items()})
        outputs.add(args.params_out, dumps_params(arrays))
    if args.emit == "ir":
        from ..compiler.ir.text import print_graph
        text = print_graph(result.graph) + "\n"
    else:
        text = result.symbol.tojson()
    if is_stdout(args.output) and not text.endswith("\n"):
        text += "\n"  # a terminal or pipe wants the last line ended
    outputs.add(args.output, text)
    outputs.commit()


def _param_summary(result) -> str:
    added = sum(1 for _ in result.allocated)
    return f"parameters: {added} allocated, {len(result.removed)} removed"
