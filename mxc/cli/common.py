"""Argument helpers shared by the CLI verbs."""

from __future__ import annotations

import argparse
import io
from pathlib import Path

import numpy as np

from ..errors import MxcError
from ..utils import atomic_write_bytes


def parse_shape_arg(text: str) -> tuple[str, tuple[int, ...]]:
    """``name=1,3,224,224`` (or ``name=1x3x224x224``) -> ``("name", (1, 3, 224, 224))``."""
    name, sep, dims = text.partition("=")
    if not sep or not name:
        raise argparse.ArgumentTypeError(f"expected NAME=D1,D2,... got {text!r}")
    parts = dims.split(",") if "," in dims or "x" not in dims else dims.split("x")
    try:
        shape = tuple(int(d) for d in parts) if dims.strip() else ()
    except ValueError:
        raise argparse.ArgumentTypeError(f"dimensions must be integers in {text!r}") from None
    if any(d < 0 for d in shape):
        raise argparse.ArgumentTypeError(f"dimensions must be non-negative in {text!r}")
    return name, shape


def parse_key_value(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return key, value


def add_model_arguments(p: argparse.ArgumentParser, *, params_required: bool = False) -> None:
    p.add_argument("model", metavar="MODEL_JSON", help="MXNet symbol JSON (prefix-symbol.json)")
    p.add_argument("--params", metavar="P", required=params_required,
                   help="MXNet .params file (prefix-0000.params)")
    p.add_argument("--shape", metavar="NAME=DIMS", action="append", type=parse_shape_arg,
                   default=[], help="input shape, e.g. data=1,3,224,224 (repeatable)")


def add_load_argument(p: argparse.ArgumentParser) -> None:
    """``--load LIB`` (repeatable): extension libraries to load first (MXNet's
    ``mx.library.load``); for an ``.mxc`` artifact, the libraries it was compiled with."""
    p.add_argument("--load", metavar="LIB", action="append", default=[],
                   help="extension library to load first: a compiled MXNet library (.so) or "
                        "an mxc Python extension (repeatable)")


def load_libraries(paths) -> None:
    """Load each ``--load`` library (quietly), in order."""
    from ..library import load
    for path in paths or ():
        load(path, verbose=False)


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


def load_model(args):
    """(symbol, arg_params, aux_params) from the common model arguments."""
    from ..compiler.symbol import load
    from ..frontend.params import load_params, split_arg_aux
    sym = load(args.model)
    arg, aux = {}, {}
    if args.params:
        params = load_params(args.params)
        if not isinstance(params, dict):
            raise MxcError(f"{args.params}: expected named arrays (arg:/aux: keys), "
                           f"found an unnamed list")
        arg, aux = split_arg_aux(params)
    return sym, arg, aux


def load_inputs(path: str | None) -> dict[str, np.ndarray]:
    if path is None:
        return {}
    try:
        with np.load(path, allow_pickle=False) as data:
            return {k: data[k] for k in data.files}
    except (OSError, ValueError) as exc:
        raise MxcError(f"{path}: cannot read inputs npz: {exc}") from None


def save_outputs(path: str, outputs: list[np.ndarray]) -> None:
    buf = io.BytesIO()
    np.savez(buf, **{f"out{i}": o for i, o in enumerate(outputs)})
    atomic_write_bytes(Path(path), buf.getvalue())
