"""Precision of the Winograd variants against float64: per layer and on corpus models.

The measurement behind :mod:`mxc.backends.tvm.schedules.base.winograd_precision` (its
per-layer error factors and budget)::

    python bench/winograd_precision.py layers [--channels 16 64 256 --size 28]
    python bench/winograd_precision.py stack [--layers 16 --channels 128 --size 16]
    python bench/winograd_precision.py models [--models resnet18_v1 squeezenet1.1]

``layers``: one 3x3 convolution (relu'd normal activations, optionally shifted by
``--offset``; He-scaled weights) compiled as a direct convolution, F(2, 3) and
F(4, 3); each compiled output against a float64 numpy convolution: relative rms
and max error (over the output's rms and max), and the rms per sqrt(channels).

``stack``: a deep stack of 3x3 convolutions + relu with inputs around 1e3, each
variant against the same stack in float64 (the depth the rule is for).

``models``: each corpus model compiled four ways -- ``--winograd off``, F(2, 3)
everywhere, F(4, 3) wherever the speed rule takes it (no precision budget), and the
default rule -- run on the corpus input and compared with the reference backend
run in float64 (parameters and inputs cast): max error, relative to the output's
range, and the model's corpus tolerance.  Figures are CPU-specific in the last
digits only (the kernels' summation orders); timing is not measured here.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

#: variant name -> (--winograd mode, F4_MIN_TILES, ERROR_BUDGET); None keeps the default
VARIANTS = {
    "direct": ("off", None, None),
    "F(2,3)": ("on", 10 ** 12, None),
    "F(4,3)": ("on", 0, float("inf")),
    "speed rule": ("auto", None, float("inf")),
    "precision rule": ("auto", None, None),
}


@contextlib.contextmanager
def variant(name: str):
    """Compile within *name*'s settings (module constants patched, restored after)."""
    from mxc.backends.tvm.schedules.base import winograd_precision
    from mxc.backends.tvm.schedules.base import winograd_transforms as winograd
    mode, tiles, budget = VARIANTS[name]
    saved = winograd.F4_MIN_TILES, winograd_precision.ERROR_BUDGET
    if tiles is not None:
        winograd.F4_MIN_TILES = tiles
    if budget is not None:
        winograd_precision.ERROR_BUDGET = budget
    try:
        yield mode
    finally:
        winograd.F4_MIN_TILES, winograd_precision.ERROR_BUDGET = saved


def conv3x3_float64(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """NCHW 3x3 convolution, padding 1, in float64."""
    n, c, h, wd = x.shape
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (1, 1), (1, 1)))
    y = np.zeros((n, w.shape[0], h, wd))
    for i in range(3):
        for j in range(3):
            y += np.einsum("nchw,kc->nkhw", xp[:, :, i:i + h, j:j + wd],
                           w[:, :, i, j].astype(np.float64))
    return y


def errors(got: np.ndarray, want: np.ndarray) -> dict:
    e = got.astype(np.float64) - want
    return {"max_abs": float(np.abs(e).max()),
            "rel_max": float(np.abs(e).max() / np.abs(want).max()),
            "rel_rms": float(np.sqrt((e ** 2).mean() / (want ** 2).mean()))}


def layer(channels: int, size: int, name: str, offset: float = 0.0, seed: int = 0) -> dict:
    import mxc
    from mxc import sym as S
    rng = np.random.RandomState(seed)
    x = (np.maximum(rng.randn(1, channels, size, size), 0) + offset).astype(np.float32)
    w = (rng.randn(channels, channels, 3, 3) * np.sqrt(2 / (9 * channels))).astype(np.float32)
    y = S.Convolution(S.var("data"), S.var("w"), kernel=(3, 3), pad=(1, 1),
                      num_filter=channels, no_bias=True, name="c")
    with variant(name) as mode:
        model = mxc.compile(y, {"w": w}, shapes={"data": x.shape}, winograd=mode)
    return errors(model.run({"data": x})[0], conv3x3_float64(x, w))


def stack(layers: int, channels: int, size: int, batch: int, name: str, seed: int = 0) -> dict:
    """A stack of *layers* 3x3 convolutions + relu (He-scaled weights, inputs around 1e3)."""
    import mxc
    from mxc import sym as S
    rng = np.random.RandomState(seed)
    y, params = S.var("data"), {}
    x = (1e3 * np.maximum(rng.randn(batch, channels, size, size), 0)).astype(np.float32)
    want = x.astype(np.float64)
    for i in range(layers):
        w = (rng.randn(channels, channels, 3, 3) * np.sqrt(2 / (9 * channels))).astype(np.float32)
        params[f"c{i}_weight"] = w
        y = S.relu(S.Convolution(y, kernel=(3, 3), pad=(1, 1), num_filter=channels,
                                 no_bias=True, name=f"c{i}"))
        want = np.maximum(conv3x3_float64(want, w), 0)
    with variant(name) as mode:
        model = mxc.compile(y, params, shapes={"data": x.shape}, winograd=mode)
    return errors(model.run({"data": x})[0], want)


def float64_reference(sym, params: dict, feeds: dict) -> list[np.ndarray]:
    from mxc.backends.reference import run_graph
    cast = {k: (v.astype(np.float64) if v.dtype == np.float32 else v)
            for k, v in {**params, **feeds}.items()}
    return run_graph(sym.graph, cast)


def model(path: Path, name: str, oracle: list[np.ndarray]) -> dict:
    import mxc
    sym, arg, aux = _load(path)
    io = np.load(path / "io.npz")
    feeds = {k[4:]: io[k] for k in io.files if k.startswith("in__")}
    with variant(name) as mode:
        compiled = mxc.compile(sym, (arg, aux), shapes={k: v.shape for k, v in feeds.items()},
                               winograd=mode)
    got = compiled.run(feeds)
    return errors(got[0], oracle[0])


def _load(path: Path):
    from mxc.compiler.symbol import load
    from mxc.frontend.params import load_params, split_arg_aux
    arg, aux = split_arg_aux(load_params(str(path / "model.params")))
    return load(str(path / "symbol.json")), arg, aux


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="what", required=True)
    lp = sub.add_parser("layers")
    lp.add_argument("--channels", type=int, nargs="+", default=[16, 64, 256])
    lp.add_argument("--size", type=int, default=28)
    lp.add_argument("--offset", type=float, default=0.0)
    sp = sub.add_parser("stack")
    sp.add_argument("--layers", type=int, default=16)
    sp.add_argument("--channels", type=int, default=128)
    sp.add_argument("--size", type=int, default=16)
    sp.add_argument("--batch", type=int, default=2)
    mp = sub.add_parser("models")
    mp.add_argument("--corpus", default=None, help="corpus models directory")
    mp.add_argument("--models", nargs="+", default=["resnet18_v1", "squeezenet1.1"])
    args = p.parse_args(argv)
    if args.what == "layers":
        print(f"{'C':>5} {'variant':>8} {'rel rms':>9} {'rms/sqrtC':>10} {'rel max':>9}")
        for c in args.channels:
            for name in ("direct", "F(2,3)", "F(4,3)"):
                r = layer(c, args.size, name, args.offset)
                print(f"{c:>5} {name:>8} {r['rel_rms']:9.2e} {r['rel_rms'] / np.sqrt(c):10.2e} "
                      f"{r['rel_max']:9.2e}", flush=True)
        return 0
    if args.what == "stack":
        print(f"{args.layers} layers of {args.channels} channels, "
              f"{args.batch}x{args.size}x{args.size}, inputs ~1e3")
        for name in VARIANTS:
            r = stack(args.layers, args.channels, args.size, args.batch, name)
            print(f"  {name:>14}: rel max {r['rel_max']:.2e}  rel rms {r['rel_rms']:.2e}",
                  flush=True)
        return 0
    import os
    root = Path(args.corpus) if args.corpus else \
        Path(os.environ.get("MXC_CORPUS", "../shared/corpus")) / "models"
    for m in args.models:
        path = root / m
        meta = json.loads((path / "meta.json").read_text())
        sym, arg, aux = _load(path)
        io = np.load(path / "io.npz")
        feeds = {k[4:]: io[k] for k in io.files if k.startswith("in__")}
        oracle = float64_reference(sym, {**arg, **aux}, feeds)
        print(f"{m}: output max {np.abs(oracle[0]).max():.4g}, corpus tolerance rtol "
              f"{meta['rtol']} atol {meta['atol']}; MXNet vs float64: "
              f"{np.abs(io['out__0'] - oracle[0]).max():.3g}")
        for name in VARIANTS:
            r = model(path, name, oracle)
            print(f"  {name:>14}: max {r['max_abs']:.3g}  rel max {r['rel_max']:.2e}  "
                  f"rel rms {r['rel_rms']:.2e}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
