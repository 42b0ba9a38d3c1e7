"""Argument helpers shared by the CLI verbs."""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from ..errors import FrontendError, MxcError
from ..atomic_files import atomic_write_bytes


def _dim(text: str, d: str) -> int | tuple[int, int]:
    """One dimension: ``7``, or a batch range ``1..64`` -> ``(1, 64)``."""
    lo, sep, hi = d.partition("..")
    try:
        return (int(lo), int(hi)) if sep else int(d)
    except ValueError:
        raise argparse.ArgumentTypeError(f"dimensions must be integers (or a range LO..HI) in "
                                         f"{text!r}") from None


def _dims(text: str, dims: str) -> tuple:
    parts = dims.split(",") if "," in dims or "x" not in dims else dims.split("x")
    shape = tuple(_dim(text, d) for d in parts) if dims.strip() else ()
    ranges = [d for d in shape if isinstance(d, tuple)]
    if any(not 1 <= lo < hi for lo, hi in ranges):
        raise argparse.ArgumentTypeError(f"a dimension range LO..HI needs 1 <= LO < HI in "
                                         f"{text!r}")
    if any(d <= 0 for d in shape if not isinstance(d, tuple)):
        raise argparse.ArgumentTypeError(
            f"dimensions must be positive in {text!r} (a 0 makes an empty tensor mxc does not "
            f"compile; -1 or ? is not a static shape; a batch range is LO..HI)")
    return shape


def positive_int(text: str) -> int:
    """An argparse type: a count that must be at least 1 (``--threads 0``, ``--print-top 0``
    are usage errors, as in tvmc, not silently "none" or a failure later)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {value}")
    return value


def parse_shape_arg(text: str) -> tuple[str, tuple[int, ...]]:
    """``name=1,3,224,224`` (or ``name=1x3x224x224``) -> ``("name", (1, 3, 224, 224))``."""
    name, sep, dims = text.partition("=")
    if not sep or not name:
        raise argparse.ArgumentTypeError(f"expected NAME=D1,D2,... got {text!r}")
    return name, _dims(text, dims)


def parse_input_shapes(text: str) -> list[tuple[str, tuple[int, ...]]]:
    """tvmc's form: ``"data:[1,3,224,224] mask:[1,10]"`` -> ``[("data", (1, 3, 224, 224)), ...]``."""
    import re
    items = re.findall(r"\s*([^\s:\[\]]+)\s*:\s*\[([^\]]*)\]", text)
    rest = re.sub(r"\s*([^\s:\[\]]+)\s*:\s*\[([^\]]*)\]", "", text).strip(" ,")
    if not items or rest:
        raise argparse.ArgumentTypeError(
            f"expected \"NAME:[D1,D2,...] NAME2:[...]\" (tvmc's --input-shapes), got {text!r}")
    return [(name, _dims(text, dims.replace(" ", ""))) for name, dims in items]


def add_shape_arguments(p: argparse.ArgumentParser, help_text: str | None = None) -> None:
    """``--shape NAME=DIMS`` (repeatable) and tvmc's ``--input-shapes "NAME:[DIMS] ..."``."""
    p.add_argument("--shape", metavar="NAME=DIMS", action="append", type=parse_shape_arg,
                   default=[], help=help_text or "input shape, e.g. data=1,3,224,224 "
                                                 "(repeatable)")
    p.add_argument("--input-shapes", metavar="SHAPES", action="append",
                   type=parse_input_shapes, default=[],
                   help='input shapes as tvmc writes them: "data:[1,3,224,224] mask:[1,10]"')


def shapes_of(args: argparse.Namespace) -> dict[str, tuple[int, ...]]:
    """The shapes of ``--shape`` and ``--input-shapes`` together."""
    shapes = dict(getattr(args, "shape", None) or [])
    for group in getattr(args, "input_shapes", None) or []:
        shapes.update(group)
    return shapes


def _close_match(name: str, names: list[str]) -> str:
    import difflib
    close = difflib.get_close_matches(name, names, n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def check_shape_names(args: argparse.Namespace, inputs: list[str], data_inputs: list[str]
                      ) -> None:
    """A ``--shape`` naming no input of the model is a mistyped command line
    (:class:`~mxc.cli.UsageError`), said before any work instead of being ignored or
    failing deep in a compile."""
    from .usage import UsageError
    for name in shapes_of(args):
        if name not in inputs:
            raise UsageError(f"--shape {name}=...: the model has no input {name!r}"
                             f"{_close_match(name, inputs)}; its data inputs are "
                             f"{', '.join(data_inputs) or 'none'}")


def require_shapes(args: argparse.Namespace, sym, params: dict) -> None:
    """``mxc compile``/``tune`` build for static shapes: an input whose shape neither
    ``--shape`` nor the weights determine is a missing ``--shape`` (a usage error
    naming it), not a compile failure."""
    from ..errors import MxcError
    from .usage import UsageError
    given = {n: tuple(v.shape) for n, v in params.items()}
    given.update({n: tuple(d[0] if isinstance(d, tuple) else d for d in shape)
                  for n, shape in shapes_of(args).items()})   # a range: its lowest batch
    try:
        arg_shapes = sym.infer_shape_partial(**given)[0]
    except MxcError:
        return   # inconsistent shapes: the compile names the operator
    unknown = [n for n, s in zip(sym.list_arguments(), arg_shapes)
               if n not in params and (s is None or any(d is None or d < 0 for d in s))]
    unknown = [n for n in unknown if not n.endswith("label")]   # labels: the compile's call
    if unknown:
        first = unknown[0]
        raise UsageError(f"no shape for input(s) {', '.join(unknown)}: give --shape "
                         f"{first}=D1,D2,... (or --input-shapes \"{first}:[D1,D2,...]\")")


def add_load_argument(p: argparse.ArgumentParser) -> None:
    """``--load LIB`` (repeatable) on a verb that does not define it itself: every verb
    loads the extension libraries named before it reads the model (see
    :func:`load_extensions`)."""
    if "--load" in p._option_string_actions:  # noqa: SLF001 - the verb has its own
        return
    p.add_argument("--load", metavar="LIB", action="append", default=[],
                   help="load an extension library first: a compiled MXNet library (.so) or an "
                        "mxc Python extension (.py file or package); for an .mxc artifact, the "
                        "libraries it was compiled with (repeatable)")


def load_extensions(args: argparse.Namespace) -> None:
    """Every verb: the installed extensions (``mxc.extensions`` entry points) and the
    ``--load`` libraries, before the model is read."""
    from .. import library
    library.ensure_entry_points_loaded()
    for path in getattr(args, "load", None) or []:
        library.load(path, verbose=False)


def parse_key_value(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return key, value


def add_model_arguments(p: argparse.ArgumentParser, *, params_required: bool = False,
                        model_optional: bool = False) -> None:
    p.add_argument("model", metavar="MODEL_JSON", nargs="?" if model_optional else None,
                   help="MXNet symbol JSON (prefix-symbol.json)")
    p.add_argument("--params", metavar="P", required=params_required,
                   help="MXNet .params file (prefix-0000.params)")
    add_shape_arguments(p)


def model_name(path: str) -> str:
    """``resnet18-symbol.json`` -> ``resnet18``; a corpus ``NAME/symbol.json`` -> ``NAME``."""
    p = Path(path)
    stem = p.name
    for suffix in ("-symbol.json", ".json"):
        if stem.endswith(suffix):
            stem = stem[:-len(suffix)]
            break
    if stem == "symbol" and p.resolve().parent.name:
        return p.resolve().parent.name
    return stem


def load_model(args, sym=None):
    """(symbol, arg_params, aux_params) from the common model arguments (*sym*: the
    model already read, e.g. from standard input)."""
    from ..symbol import load
    from ..frontend.params import load_params, split_arg_aux
    from ..compiler.ops.registry import check_supported
    from ..draw import register_backend_ops
    register_backend_ops()       # a partitioned JSON may hold _tvm_subgraph nodes
    sym = load(args.model) if sym is None else sym
    check_supported(sym.graph)   # every verb: all unknown ops at once, nodes, did-you-mean
    arg, aux = {}, {}
    if args.params:
        params = load_params(args.params)
        if not isinstance(params, dict):
            raise MxcError(f"{args.params}: expected named arrays (arg:/aux: keys), "
                           f"found an unnamed list")
        arg, aux = split_arg_aux(params)
    inputs = sym.list_inputs()
    check_shape_names(args, inputs, [n for n in inputs if n not in arg and n not in aux])
    return sym, arg, aux


def load_inputs(path: str | None, data_names: list[str] | None = None) -> dict[str, np.ndarray]:
    """The arrays of an ``.npz`` (by name), or of an ``.npy`` for the one data input."""
    if path is None:
        return {}
    try:
        data = np.load(path, allow_pickle=False)
    except (OSError, ValueError) as exc:
        raise FrontendError(f"{path}: cannot read inputs (.npz or .npy): {exc}") from None
    from ..runtime.bfloat16 import npz_arrays, restore_bfloat16
    if isinstance(data, np.ndarray):
        names = list(data_names or [])
        if len(names) != 1:
            raise FrontendError(f"{path}: a .npy holds one array but the model has "
                                f"{len(names)} data inputs ({', '.join(names) or 'none'}); give "
                                f"an .npz keyed by input name")
        return {names[0]: restore_bfloat16(data, path)}
    with data:   # bfloat16: np.savez's opaque |V2 arrays, or mxc's own bit-stored ones
        return npz_arrays(data, path)


def save_outputs(path: str, outputs: list[np.ndarray]) -> None:
    """``out0, out1, ...`` in an ``.npz``; bfloat16 outputs as mxc stores them (their uint16
    bits, listed in ``__mxc_bfloat16__``), which ``--inputs`` reads back."""
    from ..runtime.bfloat16 import npz_bytes
    atomic_write_bytes(Path(path), npz_bytes({f"out{i}": o for i, o in enumerate(outputs)}))
