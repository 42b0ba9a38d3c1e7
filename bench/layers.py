"""GFLOP/s of single layers compiled by mxc, against the sgemm ceiling.

The issue's weak spots, one convolution each (NCHW as MXNet declares them;
mxc converts to channels-last): squeezenet1.1's last 1x1 convolution
(512 -> 1000 over 13x13, channels not a multiple of the vector), a
mobilenetv2 depthwise 3x3 and a small-channel 1x1, resnet18's 7x7 stem.
Each layer is compiled alone for *target* and timed in this process
(median of *runs* after warm-up)::

    python bench/layers.py                          # this CPU
    python bench/layers.py --target "llvm -mcpu=znver3" --layers sq_last

Use it for schedule decisions with interleaved repeats (``--rounds``): the
machine may be shared.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

#: name -> (in channels, out channels, spatial size, kernel, stride, groups, relu)
LAYERS = {
    "sq_last": (512, 1000, 13, 1, 1, 1, True),
    "mb_dw": (96, 96, 56, 3, 2, 96, True),
    "mb_dw112": (32, 32, 112, 3, 1, 32, True),
    "mb_dw7": (960, 960, 7, 3, 1, 960, True),
    "mb_pw_small": (16, 96, 56, 1, 1, 1, True),
    "mb_pw_odd": (24, 144, 56, 1, 1, 1, True),
    "rn_stem": (3, 64, 224, 7, 2, 1, True),
    "rn_3x3": (64, 64, 56, 3, 1, 1, True),
}


def layer_graph(cin: int, cout: int, kernel: int, stride: int, groups: int, relu: bool):
    from mxc import sym as S
    x = S.var("data")
    pad = kernel // 2
    y = S.Convolution(x, kernel=(kernel, kernel), num_filter=cout, stride=(stride, stride),
                      pad=(pad, pad), num_group=groups, no_bias=False, name="conv")
    if relu:
        y = S.Activation(y, act_type="relu", name="relu")
    return y.graph


def layer_flops(cin, cout, size, kernel, stride, groups) -> float:
    out = (size + 2 * (kernel // 2) - kernel) // stride + 1
    return 2.0 * out * out * cout * (cin // groups) * kernel * kernel


def bench_layer(name: str, target: str, runs: int, warmup: int) -> dict:
    import numpy as np

    from bench.timing import measure, percentile
    from mxc.backends.tvm import build_module, lower_graph
    from mxc.backends.tvm.run import load_vm
    import tvm

    cin, cout, size, kernel, stride, groups, relu = LAYERS[name]
    graph = layer_graph(cin, cout, kernel, stride, groups, relu)
    rng = np.random.RandomState(0)
    params = {"conv_weight": rng.uniform(-1, 1, (cout, cin // groups, kernel, kernel))
              .astype("float32"),
              "conv_bias": rng.uniform(-1, 1, (cout,)).astype("float32")}
    shape = (1, cin, size, size)
    mod = lower_graph(graph, shapes={"data": shape}, params=params)
    start = time.time()
    stats: dict = {}
    exe = build_module(mod, target, stats=stats)
    compile_s = time.time() - start
    vm = load_vm(exe)
    x = tvm.runtime.tensor(rng.uniform(-1, 1, shape).astype("float32"))
    times = measure(lambda: vm["main"](x), warmup, runs)
    med = percentile(times, 50)
    kernel_us = _kernel_times(exe, x, runs)
    kmed = percentile(kernel_us, 50) * 1e-6
    flops = layer_flops(cin, cout, size, kernel, stride, groups)
    return {"layer": name, "target": target, "median_ms": med * 1e3,
            "best_ms": min(times) * 1e3, "kernel_median_ms": kmed * 1e3,
            "kernel_best_ms": min(kernel_us) * 1e-3, "gflops": flops / kmed / 1e9,
            "compile_s": round(compile_s, 1), "rules": sorted(set(stats.values()) - {None})}


def _kernel_times(exe, x, runs: int) -> list[float]:
    """Microseconds of the layer's own kernel(s) per call, without the NCHW<->NHWC
    transposes a lone layer needs at its ends (a network does them once): every
    kernel the VM calls except VM builtins and pure layout ones, recorded once with
    the VM's instrument and timed alone by TVM's C++ time evaluator (*runs* figures
    of at least 1 ms each) -- timing inside the instrument's Python callback counts
    the thread pool's wake-up after it, 10-36 us a parallel kernel."""
    import tvm
    from tvm import relax

    from mxc.runtime import _tvm
    vm = relax.VirtualMachine(exe, tvm.cpu())
    calls: list = []

    def instrument(_func, name, before, _ret, *args):
        name = str(name)
        if before and "transpose" not in name and not name.startswith("vm.builtin"):
            calls.append((name, list(args)))
        return 0

    vm.set_instrument(instrument)
    vm["main"](x)
    calls.clear()
    vm["main"](x)
    figures = [_tvm.time_call(exe.mod, name, tvm.cpu(), args, repeat=runs, min_ms=1)
               for name, args in calls]
    return [sum(per_call) * 1e6 for per_call in zip(*figures)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layers", nargs="+", default=list(LAYERS), choices=list(LAYERS))
    ap.add_argument("--target", default="llvm")
    ap.add_argument("--runs", type=int, default=50)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--ceiling", action="store_true", help="also measure the sgemm ceiling")
    args = ap.parse_args()
    ceiling = None
    if args.ceiling:
        from bench.ceiling import sgemm_gflops
        ceiling = sgemm_gflops(1024)["best_gflops"]
    for name in args.layers:
        row = bench_layer(name, args.target, args.runs, args.warmup)
        if ceiling:
            row["of_ceiling"] = round(row["gflops"] / ceiling, 3)
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
