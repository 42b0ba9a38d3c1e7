"""``mxc compile``: compile a model ahead of time into a deployable ``.mxc`` artifact."""

from __future__ import annotations

import argparse
from pathlib import Path

from . import register_command
from .common import (add_load_argument, add_model_arguments, load_model, model_name,
                     parse_key_value, require_shapes, shapes_of)


def parse_dtype_arg(text: str) -> tuple[str, str]:
    """``name=float16`` -> ``("name", "float16")`` (``bfloat16`` too)."""
    from ..runtime.bfloat16 import numpy_dtype
    name, value = parse_key_value(text)
    try:
        return name, numpy_dtype(value).name
    except TypeError:
        raise argparse.ArgumentTypeError(f"unknown dtype {value!r} in {text!r}") from None


def parse_target(text: str, cpu: str | None = None, cuda_arch: str | None = None,
                 triple: str | None = None):
    """``llvm``, ``cuda``, TVM's ``llvm -mcpu=...`` form or a JSON dict; unsupported
    kinds refused (see :mod:`mxc.backends.tvm.targets`); ``--cpu``, ``--triple``,
    ``--cuda-arch`` applied."""
    from ..backends.tvm.targets import parse_target_text, with_cpu, with_cuda_arch
    return with_cuda_arch(with_cpu(parse_target_text(text), cpu, triple), cuda_arch)


def target_of(args):
    """The target the compile options of *args* name."""
    return parse_target(args.target, getattr(args, "cpu", None), getattr(args, "cuda_arch", None),
                        getattr(args, "triple", None))


def add_compile_arguments(p: argparse.ArgumentParser, tuning_db: bool = True) -> None:
    """The options ``mxc compile`` shares with ``mxc run --backend tvm`` (and, but for
    ``--db``, with ``mxc tune``, which has its own)."""
    add_load_argument(p)
    p.add_argument("--dtype", metavar="NAME=DTYPE", action="append", type=parse_dtype_arg,
                   default=[], help="dtype of an input that is not float32 (repeatable)")
    p.add_argument("--target", default="llvm",
                   help="llvm (this CPU, default), cuda, a TVM target string such as "
                        "'llvm -mcpu=skylake-avx512' or a JSON dict; the runtime runs llvm "
                        "and cuda targets only")
    p.add_argument("--cpu", metavar="CPU", default=None,
                   help="CPU the host code is built for: host (this CPU, default), generic "
                        "(the architecture's baseline: portable to any x86-64 CPU) or an LLVM "
                        "CPU name (haswell, skylake-avx512, znver3 ...); ARM CPUs are "
                        "cross-compiled, their triple implied: cortex-a72 (Raspberry Pi 4), "
                        "cortex-a76 (Pi 5), neoverse-n1/-v1/-v2 (Graviton2/3/4), cortex-a78ae "
                        "(Jetson Orin), cortex-a7 (32-bit ARM)")
    p.add_argument("--triple", metavar="TRIPLE", default=None,
                   help="build for another architecture: an LLVM target triple such as "
                        "aarch64-linux-gnu or armv7l-linux-gnueabihf (hard-float ABI implied), "
                        "with --cpu naming its CPU (default: the architecture's baseline); "
                        "links with TRIPLE-g++ (or $CXX)")
    p.add_argument("--cuda-arch", metavar="SM", default=None,
                   help="GPU architecture for --target cuda, e.g. sm_80 (default: the GPU "
                        "present, else $MXC_CUDA_ARCH, else sm_75); PTX is embedded as well, "
                        "so newer GPUs run the artifact")
    p.add_argument("--passes", metavar="PIPELINE", default=None,
                   help="graph pass pipeline run before partitioning (default: "
                        "remove-dropout,inline-fused,simplify,fold-batchnorm,dce; '' for none)")
    p.add_argument("--no-bind-params", dest="bind_params", action="store_false",
                   help="keep weights as run-time inputs stored beside the library instead of "
                        "compiling them in as constants: no weight folding or packing, 2.5-4.4x "
                        "slower to run (ResNet-18); for debugging or swapping weights")
    p.add_argument("--weights-as-inputs", action="store_true",
                   help="compile even when weights are missing from --params (or no --params "
                        "is given): they become run-time inputs (default: an error naming "
                        "them)")
    p.add_argument("--winograd", choices=("auto", "on", "off"), default=None,
                   help="3x3 convolutions on CPU: auto (default: Winograd where the sides are "
                        ">= 7; faster, its weights 1.8-4x larger), on (wherever it applies), "
                        "off (direct convolutions: smallest artifact); mxc inspect shows the "
                        "sizes")
    p.add_argument("--precision", choices=("fp32", "bf16", "auto"), default="fp32",
                   help="CPU convolutions/dense: fp32 (default), bf16 (bfloat16 weights and "
                        "products, float32 accumulation; needs AVX512-BF16), auto (bf16 where "
                        "its outputs on example inputs stay within the bf16 tolerance of "
                        "fp32's); mxc inspect shows the choice")
    if tuning_db:
        p.add_argument("--db", "--tuning-records", dest="db", metavar="DIR", default=None,
                       help="tuning database made by `mxc tune --db DIR`: kernels it holds "
                            "use their tuned schedules, the others the default ones "
                            "(default: $MXC_TUNING_DB if set, else none); --tuning-records "
                            "is tvmc's name")


@register_command("compile", help="compile a model ahead of time into a .mxc artifact")
def add_arguments(p: argparse.ArgumentParser) -> None:
    add_model_arguments(p)
    add_compile_arguments(p)
    p.add_argument("-o", "--output", metavar="OUT", default=None,
                   help="artifact to write (default: MODEL name with .mxc; '-': standard "
                        "output)")
    p.add_argument("--sign", metavar="KEY", default=None,
                   help="sign the artifact with this Ed25519 private key (PEM; make one with "
                        "`mxc keygen -o KEY`), so `mxc run --verify-key KEY.pub` can check it")
    p.add_argument("--dump-code", metavar="FORMATS|DIR", type=parse_dump_code, default=None,
                   help="also write the generated code, as tvmc: FORMATS (a comma list of "
                        "tir, ll, asm) beside the artifact as OUT.tir, OUT.ll, OUT.asm; or a "
                        "DIR getting every format, one KERNEL.tir per kernel")
    p.add_argument("--sign-name", metavar="NAME", default=None,
                   help="bind this model name and version (e.g. resnet50@3) into the "
                        "signature, so `mxc run --verify-name NAME` refuses an artifact signed "
                        "for another name (an older version signed with the same key)")
    p.add_argument("--batch-buckets", metavar="B1,B2,...", type=parse_buckets, default=None,
                   help="with a batch range (--shape data=1..64,...): the batch sizes to "
                        "compile, e.g. 1,8,64 (default: the powers of two in the range and "
                        "its top); a batch runs on the smallest bucket that holds it")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress display")


def parse_buckets(text: str) -> list[int]:
    """``1,8,64`` -> ``[1, 8, 64]``."""
    try:
        buckets = [int(t) for t in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected batch sizes B1,B2,... got {text!r}"
                                         ) from None
    if any(b < 1 for b in buckets):
        raise argparse.ArgumentTypeError(f"batch sizes must be at least 1 in {text!r}")
    return buckets


def parse_dump_code(text: str) -> tuple[list[str], Path | None]:
    """``tir,ll`` -> ``(["tir", "ll"], None)`` (beside the artifact); anything else names
    a directory that gets every format: ``code/`` -> ``(["tir", "ll", "asm"], Path("code"))``."""
    from ..backends.tvm.dump_code import FORMATS
    items = [t.strip() for t in text.split(",")]
    if text and all(t in FORMATS for t in items):
        return list(dict.fromkeys(items)), None
    if "," in text:
        raise argparse.ArgumentTypeError(f"unknown format(s) in {text!r}: the formats are "
                                         f"{', '.join(FORMATS)} (or give a directory)")
    return list(FORMATS), Path(text)


def default_output(model: str) -> Path:
    return Path(model_name(model) + ".mxc")


def options_of(args):
    """The :class:`~mxc.backends.tvm.options.CompileOptions` the compile options of *args*
    ask for, options not given taken from the environment (``$MXC_WINOGRAD``, ...)."""
    from ..backends.tvm.options import CompileOptions
    return CompileOptions.from_env(   # db: --db, else a use_database() block, else env
        target=target_of(args), passes=args.passes, bind_params=args.bind_params,
        name=Path(args.model).name, db=getattr(args, "db", None),
        weights_as_inputs=args.weights_as_inputs, params_source=args.params,
        winograd=args.winograd, precision=getattr(args, "precision", "fp32"))


def stage_display(enabled: bool):
    """The terminal display of a compile's stages (:class:`mxc.progress.StageProgress`)."""
    from ..progress import StageProgress
    return StageProgress(enabled)


def compile_from_args(args, shapes: dict | None = None, dtypes: dict | None = None,
                      progress: bool = True, loaded=None, check_inputs: dict | None = None):
    """Compile the model named by *args* (or *loaded*, ``(sym, arg, aux)``); used by ``mxc run``.

    *check_inputs*: the feeds ``--precision auto`` checks bf16 on (``mxc run``: its inputs)."""
    from ..backends.tvm.compile import compile_with
    sym, arg, aux = loaded if loaded is not None else load_model(args)
    model = compile_with(sym, (arg, aux), shapes if shapes is not None else shapes_of(args),
                         dtypes if dtypes is not None else dict(args.dtype), options_of(args),
                         progress=stage_display(progress), check_inputs=check_inputs,
                         buckets=getattr(args, "batch_buckets", None))
    if getattr(args, "precision", "fp32") == "auto":   # say what auto chose, and why
        import sys
        from .inspect_cmd import precision_line
        print(precision_line(model.manifest["precision"]), file=sys.stderr)
    return model


def run(args: argparse.Namespace) -> int:
    import sys
    from ..output_paths import check_output_path, is_stdout
    out = Path(args.output) if args.output else default_output(args.model)
    check_output_path(args.output or out)  # before minutes of compiling, not after
    key = None
    if args.sign_name is not None and not args.sign:
        raise MxcError("--sign-name needs --sign KEY (the name is bound by the signature)")
    if args.sign:
        from ..runtime.signing import NamedKey, load_private_key
        key = load_private_key(args.sign)
        if args.sign_name is not None:
            key = NamedKey(key, args.sign_name)
    to_stdout = is_stdout(args.output)
    report = sys.stderr if to_stdout else sys.stdout  # stdout carries the artifact
    loaded = load_model(args)
    require_shapes(args, loaded[0], {**loaded[1], **loaded[2]})
    if args.dump_code is not None and args.dump_code[1] is None and to_stdout:
        from .usage import UsageError
        raise UsageError("--dump-code FORMATS writes beside the artifact, which goes to "
                         "standard output here: give --dump-code DIR")
    if args.dump_code is None:
        model = compile_from_args(args, progress=not args.quiet, loaded=loaded)
    else:
        from ..backends.tvm.dump_code import capture_tir
        with capture_tir() as captured:
            model = compile_from_args(args, progress=not args.quiet, loaded=loaded)
    model.save(args.output if to_stdout else out, sign=key)
    regions, host = len(model.regions), len(model.host_nodes)
    size = "" if to_stdout or not out.is_file() else f" ({out.stat().st_size:,} bytes)"
    print(f"wrote {'standard output' if to_stdout else out}{size}: target "
          f"{model.manifest['target']['kind']}, {regions} compiled region(s), {host} host "
          f"node(s){', signed' if key is not None else ''}", file=report)
    tuning = model.manifest.get("tuning_db")
    if tuning:
        rest = tuning["kernels"] - tuning["kernels_tuned"]
        print(f"  tuning database {tuning['path']}: {tuning['kernels_tuned']} of "
              f"{tuning['kernels']} kernel(s) tuned"
              + (f", {rest} with default schedules" if rest else ""), file=report)
        if tuning.get("warning"):
            print(f"  warning: {tuning['warning']}", file=report)
    for name, why in model.host_nodes.items():
        print(f"  host node {name}: {why}", file=report)
    if args.dump_code is not None:
        from ..backends.tvm.dump_code import write_code
        formats, directory = args.dump_code
        base = default_output(args.model) if to_stdout else out   # names DIR's .ll and .s
        written = write_code(formats, base, directory, kernels=captured.kernels,
                             executable=model.executable)
        print(f"  code: {len(written)} file(s) "
              f"({directory if directory is not None else ', '.join(map(str, written))})",
              file=report)
    return 0
