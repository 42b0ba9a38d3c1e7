"""``mxc quantize``: an INT8 model, in MXNet's format, from a float32 one, as MXNet makes it.

::

    mxc quantize mlp-symbol.json --params mlp-0000.params --calib-data calib.npz \\
        --calib-mode naive --quantized-dtype auto -o out/mlp
    # -> out/mlp-symbol.json, out/mlp-0000.params (mxc compile/run them like any model)

The flags are ``mxnet.contrib.quantization.quantize_net``'s arguments
(:mod:`mxc.compiler.quantize`).  Calibration data is an ``.npz`` with one
array per model input, keyed ``calib__<input>`` (the corpus' form) or
``<input>``, examples along the first axis, cut into batches of its
``batch_size`` entry (default: one batch of everything), the last one padded
from the start as ``mx.io.NDArrayIter(last_batch_handle="pad")`` does.
What the quantizer does not implement yet is refused, naming it.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from . import register_command
from .common import positive_int
from .usage import UsageError


def _names(text: str) -> tuple[str, ...]:
    return tuple(x.strip() for x in text.split(",") if x.strip())


@register_command("quantize", help="post-training INT8 quantization of a float32 model "
                                   "(MXNet's quantize_net), written in MXNet's format")
def add_arguments(p: argparse.ArgumentParser) -> None:
    from ..compiler.quantize.options import (CALIB_MODES, FLOWS, GRANULARITIES, QUANTIZE_MODES,
                                             QUANTIZED_DTYPES)
    p.add_argument("model", metavar="MODEL_JSON", help="float32 MXNet symbol JSON")
    p.add_argument("--params", metavar="P", required=True, help="its .params file")
    p.add_argument("--calib-data", metavar="NPZ",
                   help="calibration batches (.npz keyed by input name; required unless "
                        "--calib-mode none)")
    p.add_argument("--calib-mode", choices=CALIB_MODES, default="naive")
    p.add_argument("--quantized-dtype", choices=QUANTIZED_DTYPES, default="auto")
    p.add_argument("--quantize-mode", choices=QUANTIZE_MODES, default="full")
    p.add_argument("--quantize-granularity", choices=GRANULARITIES, default="tensor-wise")
    p.add_argument("--flow", choices=FLOWS, default="net",
                   help="net: quantize_net's oneDNN flow (default); model: quantize_model")
    p.add_argument("--exclude-layers", type=_names, default=(), metavar="A,B")
    p.add_argument("--exclude-layers-match", type=_names, default=(), metavar="X,Y")
    p.add_argument("--exclude-operators", type=_names, default=(), metavar="OP1,OP2")
    p.add_argument("--num-calib-batches", type=positive_int, metavar="N",
                   help="calibration batches to use (default: all)")
    p.add_argument("-o", "--output", required=True, metavar="PREFIX",
                   help="writes PREFIX-symbol.json and PREFIX-0000.params")


def _calib_batches(path: str, data_names: list[str], limit: int | None) -> list[dict]:
    """The batches of *path* for the inputs *data_names* (module docstring)."""
    try:
        z = np.load(path, allow_pickle=False)
    except (OSError, ValueError) as exc:
        raise UsageError(f"--calib-data {path}: cannot read it as .npz: {exc}") from None
    if not hasattr(z, "files"):
        raise UsageError(f"--calib-data {path}: expected an .npz keyed by input name")
    with z:
        arrays = {}
        for name in data_names:
            key = f"calib__{name}" if f"calib__{name}" in z.files else name
            if key not in z.files:
                raise UsageError(f"--calib-data {path}: no array for input {name!r} (keys: "
                                 f"{', '.join(z.files)})")
            arrays[name] = np.asarray(z[key])
        batch = int(z["batch_size"]) if "batch_size" in z.files else None
    total = {len(a) for a in arrays.values()}
    if len(total) != 1:
        raise UsageError(f"--calib-data {path}: inputs hold different numbers of examples")
    n = total.pop()
    batch = batch or n
    count = -(-n // batch)
    if limit is not None:
        count = min(count, limit)
    out = []
    for i in range(count):
        idx = np.arange(i * batch, (i + 1) * batch) % n    # "pad": wrap to the start
        out.append({k: a[idx] for k, a in arrays.items()})
    return out


def run(args: argparse.Namespace) -> int:
    from ..compiler.quantize import QuantizeOptions, quantize
    from ..compiler.quantize.classic import quantized_nodes
    from ..compiler.quantize.fuse import check_supported
    from ..frontend.params import save_params
    from ..frontend.symbol_json_writer import dump_json
    from ..atomic_files import atomic_write_bytes
    from ..progress import bar
    from .common import load_model

    opts = QuantizeOptions(
        calib_mode=args.calib_mode, quantized_dtype=args.quantized_dtype,
        quantize_mode=args.quantize_mode, flow=args.flow,
        quantize_granularity=args.quantize_granularity,
        exclude_layers=args.exclude_layers, exclude_layers_match=args.exclude_layers_match,
        exclude_operators=args.exclude_operators, num_calib_batches=args.num_calib_batches)
    opts.check()
    args.shape = []
    sym, arg, aux = load_model(args)   # aux states: only layers quantize refuses have them
    if opts.flow == "net":
        check_supported(sym.graph, opts.exclude_operators)   # before reading calibration data
    else:
        quantized_nodes(sym.graph, opts)
    data_names = [n for n in sym.list_inputs() if n not in arg and n not in aux]
    batches = None
    if args.calib_data is not None and opts.calib_mode != "none":
        batches = _calib_batches(args.calib_data, data_names, opts.num_calib_batches)
    progress = bar(len(batches), "calibrating", sys.stderr, unit="batch") if batches else None
    try:
        result = quantize(sym.graph, arg, batches, opts,
                          progress=None if progress is None else lambda: progress.update(1))
    finally:
        if progress is not None:
            progress.close()
    prefix = Path(args.output)
    prefix.parent.mkdir(parents=True, exist_ok=True)
    symbol_path = prefix.parent / f"{prefix.name}-symbol.json"
    params_path = prefix.parent / f"{prefix.name}-0000.params"
    atomic_write_bytes(symbol_path, dump_json(result.graph).encode())
    saved = {f"arg:{k}": v for k, v in result.params.items()}
    saved.update({f"aux:{k}": aux[k] for k in result.graph.list_auxiliary_states() if k in aux})
    save_params(params_path, saved)
    if batches:
        print(f"calibrated ({opts.calib_mode}) on {result.num_batches} batch(es): "
              f"{len(result.thresholds)} layer output(s)")
    for layer, dtype, why in result.layers:
        print(f"  {layer}: {dtype} ({why})")
    print(f"wrote {symbol_path} and {params_path}")
    return 0
