"""INT8 convolution kernels against their float32 layer, paired in one process.

Each layer of :data:`.layers.LAYERS` named is compiled alone, channels-last
(``NHWC`` data, ``HWIO`` weights, no transposes at its ends), in these variants:

* ``int32``: the int8 kernel of a target without an int8 dot-product family --
  the plain int32 arithmetic int8 layers got before a family existed for the
  target (the target's ``CpuInfo.int8_dot`` emptied in the build context);
* ``dot``: the target's family on weights in ``[-64, 64]`` (on AVX2: ``vpmaddubsw``,
  no pair can saturate);
* ``dot-full``: the same on full-range int8 weights (on AVX2 the exact widened
  ``vpmaddwd`` sequence, :mod:`mxc.backends.tvm.schedules.base.int8_avx2`);
* ``fp32``: the float32 layer as mxc compiles it (Winograd where it applies), and
  ``fp32-direct`` without Winograd.

uint8 data.  The variants run in interleaved rounds (TVM's time evaluator, at least
*min_ms* of calls a figure); the report is each variant's median and the median of
its per-round ratio to ``fp32``.  On a shared machine use one thread::

    TVM_NUM_THREADS=1 python bench/int8_layers.py --target "llvm -mcpu=znver3" \\
        --layers rn_3x3 rn50_1x1 --rounds 15
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.layers import LAYERS, _kernel_hw  # noqa: E402

VARIANTS = ("int32", "dot", "dot-full", "fp32", "fp32-direct")


def _conv_module(x_shape, x_dtype, w_hwio, stride, pad, out_dtype):
    from tvm import relax
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType(x_shape, x_dtype))
    with bb.function("main", [x]):
        with bb.dataflow():
            y = bb.emit(relax.op.nn.conv2d(x, relax.const(w_hwio), strides=stride, padding=pad,
                                           out_dtype=out_dtype, data_layout="NHWC",
                                           kernel_layout="HWIO"))
            y = bb.emit_output(y)
        bb.emit_func_output(y)
    return bb.get()


def compile_variant(layer: str, variant: str, target: str):
    """(executable, input) of *layer* in *variant* (:data:`VARIANTS`) for *target*."""
    import numpy as np
    import tvm

    from mxc.backends.tvm import build_module
    from mxc.backends.tvm.build_context import build_context
    from mxc.backends.tvm.targets import resolve_target

    cin, cout, size, kernel, stride, groups, _relu = LAYERS[layer]
    if groups != 1:
        raise ValueError(f"{layer}: grouped convolutions have no int8 kernel")
    kh, kw = _kernel_hw(kernel)
    rng = np.random.RandomState(0)
    shape = (1, size, size, cin)
    pad = (kh // 2, kw // 2)
    ctx = build_context(resolve_target(target), record=False,
                        winograd="off" if variant == "fp32-direct" else None)
    if variant.startswith("fp32"):
        w = rng.uniform(-1, 1, (kh, kw, cin, cout)).astype("float32")
        x = rng.uniform(-1, 1, shape).astype("float32")
        mod = _conv_module(shape, "float32", w, stride, pad, "float32")
    else:
        low, high = (-128, 128) if variant in ("dot-full", "int32") else (-64, 65)
        w = rng.randint(low, high, (kh, kw, cin, cout)).astype("int8")
        x = rng.randint(0, 256, shape).astype("uint8")
        mod = _conv_module(shape, "uint8", w, stride, pad, "int32")
        if variant == "int32":
            ctx = dataclasses.replace(ctx, cpu=dataclasses.replace(ctx.cpu, int8_dot=""))
    stats: dict = {}
    exe = build_module(mod, target, stats=stats, ctx=ctx)
    return exe, tvm.runtime.tensor(x), sorted(set(stats.values()) - {None})


def run(layers, target: str, rounds: int, min_ms: int) -> list[dict]:
    """Per layer: each variant's rules, median ms, and median per-round ratio to fp32."""
    import tvm
    from tvm import relax

    rows = []
    for layer in layers:
        timers, rules = {}, {}
        for variant in VARIANTS:
            exe, x, rules[variant] = compile_variant(layer, variant, target)
            vm = relax.VirtualMachine(exe, tvm.cpu())
            vm["main"](x)
            vm.set_input("main", x)
            timers[variant] = vm.time_evaluator("invoke_stateful", tvm.cpu(), repeat=1,
                                                min_repeat_ms=int(min_ms))
        figures: dict[str, list[float]] = {v: [] for v in VARIANTS}
        for r in range(rounds):
            for variant in (VARIANTS if r % 2 == 0 else VARIANTS[::-1]):
                figures[variant].append(timers[variant]("main").mean * 1e3)
        row = {"layer": layer, "target": target}
        for v in VARIANTS:
            ratio = [a / b for a, b in zip(figures[v], figures["fp32"])]
            row[v] = {"ms": round(statistics.median(figures[v]), 4),
                      "vs_fp32": round(statistics.median(ratio), 3), "rules": rules[v]}
        rows.append(row)
        print(json.dumps(row), flush=True)
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--target", default="llvm -mcpu=znver3")
    ap.add_argument("--layers", nargs="+", default=["rn_3x3", "rn50_1x1", "rn_3x3_256"])
    ap.add_argument("--rounds", type=int, default=11)
    ap.add_argument("--min-ms", type=int, default=50)
    args = ap.parse_args(argv)
    run(args.layers, args.target, args.rounds, args.min_ms)
    return 0


if __name__ == "__main__":
    sys.exit(main())
