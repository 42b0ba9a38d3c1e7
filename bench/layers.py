"""GFLOP/s of single layers compiled by mxc, against the sgemm ceiling.

The issue's weak spots, one convolution each (NCHW as MXNet declares them;
mxc converts to channels-last): squeezenet1.1's last 1x1 convolution
(512 -> 1000 over 13x13, channels not a multiple of the vector), a
mobilenetv2 depthwise 3x3 and a small-channel 1x1, resnet18's 7x7 stem.
Each layer is compiled alone for *target* and timed in this process
(median of *runs* after warm-up)::

    python bench/layers.py                          # this CPU
    python bench/layers.py --target "llvm -mcpu=znver3" --layers sq_last

AVX2 against AVX-512 code of one layer, one core (``s2_32``, issue 34: on Zen 4
~90 GFLOP/s as ``znver3`` code, ~110 as ``znver4``)::

    for t in znver3 znver4; do TVM_NUM_THREADS=1 python bench/layers.py --cpu-time \
        --rounds 5 --target "llvm -mcpu=$t" --layers s2_32; done

Use it for schedule decisions with interleaved repeats (``--rounds``): the
machine may be shared.

``--precision fp32 bf16`` compiles every layer in both precisions (bf16: the
AVX512-BF16 kernels of ``--precision bf16``) and ``--cpu-time`` times each kernel
by the process's CPU time (``time.process_time`` over a batch of calls), the
figure that stays steady on a loaded machine when run with ``TVM_NUM_THREADS=1``;
``--rounds`` interleaves the variants, and each row reports its median over
rounds::

    TVM_NUM_THREADS=1 python bench/layers.py --precision fp32 bf16 --cpu-time \
        --batch 1 8 --rounds 3 --layers rn_3x3 rn_3x3_512 iv3_1x7

``--winograd on off`` (with ``--cpu-time``) interleaves Winograd and direct kernels of
every layer the same way, for the ``auto`` rule's decisions::

    TVM_NUM_THREADS=1 python bench/layers.py --winograd on off --cpu-time --rounds 5 \
        --target "llvm -mcpu=znver3" --layers rn_3x3 rn_3x3_512 sq_e3_16 sq_e3_64
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

#: name -> (in channels, out channels, spatial size, kernel (KH, KW or one size), stride,
#: groups, relu)
LAYERS = {
    "sq_last": (512, 1000, 13, 1, 1, 1, True),
    "mb_dw": (96, 96, 56, 3, 2, 96, True),
    "mb_dw112": (32, 32, 112, 3, 1, 32, True),
    "mb_dw7": (960, 960, 7, 3, 1, 960, True),
    "mb_pw_small": (16, 96, 56, 1, 1, 1, True),
    "mb_pw_odd": (24, 144, 56, 1, 1, 1, True),
    "rn_stem": (3, 64, 224, 7, 2, 1, True),
    "rn_3x3": (64, 64, 56, 3, 1, 1, True),
    "rn_3x3_128": (128, 128, 28, 3, 1, 1, True),
    "rn_3x3_256": (256, 256, 14, 3, 1, 1, True),
    "rn_3x3_512": (512, 512, 7, 3, 1, 1, True),
    "rn50_1x1": (256, 64, 56, 1, 1, 1, True),
    "sq_e3_16": (16, 64, 55, 3, 1, 1, True),
    "sq_e3_32": (32, 128, 27, 3, 1, 1, True),
    "sq_e3_48": (48, 192, 13, 3, 1, 1, True),
    "sq_e3_64": (64, 256, 13, 3, 1, 1, True),
    "iv3_1x7": (128, 128, 17, (1, 7), 1, 1, True),
    "iv3_7x1": (128, 192, 17, (7, 1), 1, 1, True),
    # tests/backends/test_tvm_tune_verify.py's convolution (its speed is measured here,
    # not asserted there: on a loaded machine a parallel kernel's time is the scheduler's)
    "s2_32": (32, 32, 28, 3, 2, 1, True),
}


def _kernel_hw(kernel) -> tuple[int, int]:
    return tuple(kernel) if isinstance(kernel, (tuple, list)) else (kernel, kernel)


def layer_graph(cin: int, cout: int, kernel: int, stride: int, groups: int, relu: bool):
    from mxc import sym as S
    x = S.var("data")
    kh, kw = _kernel_hw(kernel)
    y = S.Convolution(x, kernel=(kh, kw), num_filter=cout, stride=(stride, stride),
                      pad=(kh // 2, kw // 2), num_group=groups, no_bias=False, name="conv")
    if relu:
        y = S.Activation(y, act_type="relu", name="relu")
    return y.graph


def layer_flops(cin, cout, size, kernel, stride, groups, batch: int = 1) -> float:
    kh, kw = _kernel_hw(kernel)
    oh = (size + 2 * (kh // 2) - kh) // stride + 1
    ow = (size + 2 * (kw // 2) - kw) // stride + 1
    return 2.0 * batch * oh * ow * cout * (cin // groups) * kh * kw


def compile_layer(name: str, target: str, precision: str = "fp32", batch: int = 1,
                  winograd: str = "auto") -> dict:
    """Layer *name* compiled alone for *target* in *precision*: the executable, an
    input, its FLOPs and which default schedules its kernels got."""
    import numpy as np

    from mxc.backends.tvm import build_module, lower_graph
    from mxc.backends.tvm.build_context import build_context
    from mxc.backends.tvm.targets import resolve_target
    import tvm

    cin, cout, size, kernel, stride, groups, relu = LAYERS[name]
    kh, kw = _kernel_hw(kernel)
    graph = layer_graph(cin, cout, kernel, stride, groups, relu)
    rng = np.random.RandomState(0)
    params = {"conv_weight": rng.uniform(-1, 1, (cout, cin // groups, kh, kw))
              .astype("float32"),
              "conv_bias": rng.uniform(-1, 1, (cout,)).astype("float32")}
    shape = (batch, cin, size, size)
    mod = lower_graph(graph, shapes={"data": shape}, params=params)
    start = time.time()
    stats: dict = {}
    ctx = build_context(resolve_target(target), precision=precision,
                        winograd=winograd, record=False)
    exe = build_module(mod, target, stats=stats, ctx=ctx)
    return {"layer": name, "target": target, "precision": precision, "batch": batch,
            "exe": exe, "x": tvm.runtime.tensor(rng.uniform(-1, 1, shape).astype("float32")),
            "flops": layer_flops(cin, cout, size, kernel, stride, groups, batch),
            "compile_s": round(time.time() - start, 1),
            "rules": sorted(set(stats.values()) - {None})}


def bench_layer(name: str, target: str, runs: int, warmup: int, precision: str = "fp32",
                batch: int = 1, winograd: str = "auto") -> dict:
    """Wall-clock figures of layer *name*: the whole call and its kernel(s) alone."""
    from bench.timing import measure, percentile
    from mxc.backends.tvm.run import load_vm

    case = compile_layer(name, target, precision, batch, winograd)
    vm = load_vm(case["exe"])
    times = measure(lambda: vm["main"](case["x"]), warmup, runs)
    kernel_us = _kernel_times(case["exe"], case["x"], runs)
    kmed = percentile(kernel_us, 50) * 1e-6
    return {**_row(case), "median_ms": percentile(times, 50) * 1e3,
            "best_ms": min(times) * 1e3, "kernel_median_ms": kmed * 1e3,
            "kernel_best_ms": min(kernel_us) * 1e-3, "gflops": case["flops"] / kmed / 1e9}


def _row(case: dict) -> dict:
    return {k: case[k] for k in ("layer", "target", "precision", "batch", "compile_s",
                                 "rules")}


def is_layout_only(kernel: str) -> bool:
    """A VM builtin or a kernel that only transposes (``transpose``, ``transpose3``): not
    the layer's work.  A kernel with a transpose fused in (a Winograd output transform
    writing NCHW, ``fused_winograd_output_..._transpose1``) is."""
    return kernel.startswith("vm.builtin") or kernel.rstrip("0123456789") == "transpose"


def _recorded_calls(exe, x, output_layout: bool = False) -> list:
    """(kernel name, args) of each kernel one call of *exe* runs, except VM builtins
    and pure layout kernels (``transpose``, ``transpose1``, ...: a kernel with the
    transpose fused in, as a Winograd output transform writing NCHW, is counted),
    recorded with the VM's instrument.  *output_layout*: the pure layout kernels after
    the layer's first kernel (the NHWC -> NCHW transpose of its output) are counted
    too, so a direct convolution pays for the NCHW write the Winograd output transform
    does fused (:func:`cpu_time_rows` comparing Winograd modes)."""
    import tvm
    from tvm import relax

    vm = relax.VirtualMachine(exe, tvm.cpu())
    calls: list = []

    def instrument(_func, name, before, _ret, *args):
        name = str(name)
        if not before or name.startswith("vm.builtin"):
            return 0
        if not is_layout_only(name) or (output_layout and calls):
            calls.append((name, list(args)))
        return 0

    vm.set_instrument(instrument)
    vm["main"](x)
    calls.clear()
    vm["main"](x)
    return calls


def kernel_cpu_seconds(case: dict, runs: int, min_s: float = 0.05,
                       output_layout: bool = False) -> list[float]:
    """CPU seconds (``time.process_time``) per call of the layer's kernel(s): *runs*
    figures, each the mean of as many back-to-back calls as take *min_s* CPU time
    (*output_layout*: see :func:`_recorded_calls`)."""
    from mxc.runtime._tvm import _defining

    calls = [(_defining(case["exe"].mod, name).get_function(name), args)
             for name, args in _recorded_calls(case["exe"], case["x"], output_layout)]

    def once():
        for fn, args in calls:
            fn(*args)

    once()
    c0 = time.process_time()
    once()
    per = max(time.process_time() - c0, 1e-6)
    reps = max(1, int(min_s / per))
    figures = []
    for _ in range(runs):
        c0 = time.process_time()
        for _ in range(reps):
            once()
        figures.append((time.process_time() - c0) / reps)
    return figures


def _kernel_times(exe, x, runs: int) -> list[float]:
    """Microseconds of the layer's own kernel(s) per call, without the NCHW<->NHWC
    transposes a lone layer needs at its ends (a network does them once): every
    kernel of :func:`_recorded_calls` timed alone by TVM's C++ time evaluator (*runs*
    figures of at least 1 ms each) -- timing inside the instrument's Python callback
    counts the thread pool's wake-up after it, 10-36 us a parallel kernel."""
    import tvm

    from mxc.runtime import _tvm
    figures = [_tvm.time_call(exe.mod, name, tvm.cpu(), args, repeat=runs, min_ms=1)
               for name, args in _recorded_calls(exe, x)]
    return [sum(per_call) * 1e6 for per_call in zip(*figures)]


def cpu_time_rows(names, target: str, precisions, batches, runs: int, rounds: int,
                  winograd="auto"):
    """Per layer, precision, batch and Winograd mode (*winograd*: one mode or several):
    median kernel CPU time over *rounds* rounds that interleave every variant (each
    round's figure: the median of *runs*).  Comparing several modes, every variant
    counts the transpose writing its NCHW output (``output_layout``), which the
    Winograd output transform has fused in and a direct convolution runs apart."""
    from bench.timing import percentile

    modes = [winograd] if isinstance(winograd, str) else list(winograd)
    output_layout = len(modes) > 1
    cases = [{**compile_layer(n, target, p, b, w), "winograd": w} for n in names
             for b in batches for p in precisions for w in modes]
    per_round: list[list[float]] = [[] for _ in cases]
    for _ in range(rounds):
        for i, case in enumerate(cases):
            per_round[i].append(percentile(kernel_cpu_seconds(case, runs,
                                                              output_layout=output_layout), 50))
    for case, figures in zip(cases, per_round):
        med = percentile(figures, 50)
        yield {**_row(case), "winograd": case["winograd"], "output_layout": output_layout,
               "kernel_cpu_ms": round(med * 1e3, 4),
               "rounds_ms": [round(f * 1e3, 4) for f in figures],
               "gflops": round(case["flops"] / med / 1e9, 1)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layers", nargs="+", default=list(LAYERS), choices=list(LAYERS))
    ap.add_argument("--target", default="llvm")
    ap.add_argument("--precision", nargs="+", default=["fp32"], choices=["fp32", "bf16"])
    ap.add_argument("--batch", nargs="+", type=int, default=[1])
    ap.add_argument("--runs", type=int, default=50)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=1, help="interleaved rounds (--cpu-time)")
    ap.add_argument("--cpu-time", action="store_true",
                    help="time kernels by process CPU time (use with TVM_NUM_THREADS=1)")
    ap.add_argument("--winograd", nargs="+", default=["auto"], choices=["auto", "on", "off"],
                    help="fp32 3x3 convolutions' Winograd mode(s) (off: direct kernels; "
                         "several, with --cpu-time: interleaved per round)")
    ap.add_argument("--ceiling", action="store_true", help="also measure the sgemm ceiling")
    args = ap.parse_args()
    if len(args.winograd) > 1 and not args.cpu_time:
        ap.error("several --winograd modes need --cpu-time (interleaved rounds)")
    if args.cpu_time:
        for row in cpu_time_rows(args.layers, args.target, args.precision, args.batch,
                                 args.runs, args.rounds, args.winograd):
            print(json.dumps(row), flush=True)
        return
    ceiling = None
    if args.ceiling:
        from bench.ceiling import sgemm_gflops
        ceiling = sgemm_gflops(1024)["best_gflops"]
    for name in args.layers:
        for batch in args.batch:
            for precision in args.precision:
                row = bench_layer(name, args.target, args.runs, args.warmup, precision,
                                  batch, args.winograd[0])
                if ceiling:
                    row["of_ceiling"] = round(row["gflops"] / ceiling, 3)
                print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
