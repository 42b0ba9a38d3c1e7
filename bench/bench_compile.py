"""Where a compile's time goes: ``mxc.compile``'s stages per model, and its slowest kernels.

    python bench/bench_compile.py                        # the pyramid-pooling head, PSPNet scale
    python bench/bench_compile.py psp:512x60 resnet18_v1 path/to/model-prefix
    python bench/bench_compile.py psp --kernels 5        # + the 5 kernels slowest to generate

Models are ``psp[:CxS]`` -- the head of PSPNet/ICNet built with mxc's symbol
API: a C-channel SxS feature map (default 2048x60, PSPNet-ResNet50 at 480x480)
average-pooled to 1, 2, 3 and 6 (``_contrib_AdaptiveAvgPooling2D``), each level
convolved to C/4 channels (1x1 conv, BatchNorm, relu) and resized back
(``_contrib_BilinearResize2D``), concatenated with the feature map and convolved
3x3 to C/4 channels -- or anything ``bench/bench_models.py`` takes (corpus
names, ``zoo:NAME``, checkpoint prefixes).  Each model is compiled once,
untuned, in this process; the table gives ``CompiledModel.timings`` (passes,
partition, lower, build, runtime graph), the total and the process's CPU time
(all its threads: on a loaded machine the steadier figure).

``--kernels N`` also times LLVM's code generation of every kernel alone (the
module TVM hands to code generation is captured, and each PrimFunc is
generated again by itself, so this doubles that part of the build) and lists
the N slowest: the build stage of a model that compiles slowly is usually one
kernel's code generation.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench import machine  # noqa: E402

STAGES = ("passes", "partition", "lower", "build", "runtime graph")
PSP_LEVELS = (1, 2, 3, 6)


def psp_head(channels: int, side: int):
    """(symbol, params, shapes) of the pyramid-pooling head described above."""
    import numpy as np
    from mxc import sym as S

    rng = np.random.default_rng(0)
    params: dict = {}

    def conv_bn_relu(x, name, cout, cin, k):
        params[name + "_weight"] = (rng.standard_normal((cout, cin, k, k)) * 0.02).astype("f4")
        for suffix, value in (("gamma", 1.0), ("beta", 0.0), ("moving_mean", 0.0),
                              ("moving_var", 1.0)):
            params[f"{name}_bn_{suffix}"] = np.full(cout, value, "f4")
        y = S.Convolution(x, S.var(name + "_weight"), num_filter=cout, kernel=(k, k),
                          pad=(k // 2, k // 2), no_bias=True, name=name)
        y = S.BatchNorm(y, *(S.var(f"{name}_bn_{s}") for s in ("gamma", "beta", "moving_mean",
                                                                 "moving_var")),
                        name=name + "_bn")
        return S.relu(y, name=name + "_relu")

    x = S.var("data")
    feat = conv_bn_relu(x, "feat", channels, 16, 1)
    branches = [feat]
    for s in PSP_LEVELS:
        p = S._contrib_AdaptiveAvgPooling2D(feat, output_size=s, name=f"pool{s}")
        c = conv_bn_relu(p, f"level{s}", channels // 4, channels, 1)
        branches.append(S._contrib_BilinearResize2D(c, height=side, width=side, name=f"up{s}"))
    cat = S.concat(*branches, dim=1, name="concat")
    head = conv_bn_relu(cat, "head", channels // 4, 2 * channels, 3)
    return head, params, {"data": (1, 16, side, side)}


def load_model(name: str, args):
    """(symbol, params, shapes, dtypes, spec) of a model argument (spec: the
    :class:`bench.bench_models.ModelSpec` with inputs and MXNet's outputs, None for psp)."""
    if name == "psp" or name.startswith("psp:"):
        c, _, s = (name.partition(":")[2] or "2048x60").partition("x")
        sym, params, shapes = psp_head(int(c), int(s or 60))
        return sym, params, shapes, None, None
    import mxc
    from bench.bench_models import resolve_model
    spec = resolve_model(name, args)
    shapes = {k: tuple(v.shape) for k, v in spec.inputs.items()}
    dtypes = {k: str(v.dtype) for k, v in spec.inputs.items() if str(v.dtype) != "float32"}
    return (mxc.sym.load(str(spec.symbol)), mxc.nd.load(str(spec.params)), shapes,
            dtypes or None, spec)


def errors(model, spec) -> tuple[float, float]:
    """``(max |compiled - MXNet|, max |compiled - MXNet| / max(1, |MXNet|))`` over every
    output element of the model on the spec's input; non-finite values count as equal
    where both sides hold the same one (random weights overflow detectors' box decoding
    to inf in MXNet too).  nan, nan when there is no reference or a shape differs."""
    import numpy as np
    outs = model.run(spec.inputs)
    outs = outs if isinstance(outs, (list, tuple)) else [outs]
    nan = float("nan")
    if spec.reference is None or len(outs) != len(spec.reference):
        return nan, nan
    worst = rel = 0.0
    for got, ref in zip(outs, spec.reference):
        got, ref = np.asarray(got).astype("f8"), ref.astype("f8")
        if got.shape != ref.shape:
            return nan, nan
        same = (got == ref) | (np.isnan(got) & np.isnan(ref))
        with np.errstate(invalid="ignore", over="ignore"):
            diff = np.where(same, 0.0, np.abs(got - ref))
        if diff.size:
            worst = max(worst, float(np.max(diff)))
            rel = max(rel, float(np.max(diff / np.maximum(1.0, np.abs(ref)))))
    return worst, rel


class CodegenCapture:
    """Captures the modules TVM hands to LLVM code generation, to time each kernel alone."""

    def __init__(self):
        self.build = importlib.import_module("tvm.tirx.build")
        self.original = self.build.codegen_build
        self.modules: list = []

    def __enter__(self):
        def capture(mod, target):
            self.modules.append((mod, target))
            return self.original(mod, target)
        self.build.codegen_build = capture
        return self

    def __exit__(self, *exc):
        self.build.codegen_build = self.original

    def kernel_times(self) -> list[tuple[float, str]]:
        import tvm
        times = []
        for mod, target in self.modules:
            for gv, func in mod.functions_items():
                one = tvm.IRModule({gv: func}, attrs=mod.attrs)
                t0 = time.perf_counter()
                self.original(one, target)
                times.append((time.perf_counter() - t0, gv.name_hint))
        return sorted(times, reverse=True)


def measure(name: str, args) -> dict:
    import tvm  # noqa: F401  (imported before the clock starts)
    import mxc

    sym, params, shapes, dtypes, spec = load_model(name, args)
    capture = CodegenCapture() if args.kernels else None
    t0, cpu0 = time.perf_counter(), time.process_time()
    if capture is not None:
        with capture:
            model = mxc.compile(sym, params, shapes=shapes, dtypes=dtypes, target=args.target)
    else:
        model = mxc.compile(sym, params, shapes=shapes, dtypes=dtypes, target=args.target)
    row = {"model": Path(name).name if spec is None else spec.name,
           "nodes": len(json.loads(sym.tojson())["nodes"]),
           "total": time.perf_counter() - t0, "cpu": time.process_time() - cpu0,
           **model.timings}
    if args.check and spec is not None:
        # the stages first: running a big model on its input can take longer than its compile
        print(f"{row['model']}: compiled in {row['total']:.1f} s ({row['cpu']:.1f} s CPU): "
              + ", ".join(f"{s} {row[s]:.1f}" for s in STAGES if s in row) + "; checking",
              file=sys.stderr, flush=True)
        row["max_err"], row["rel_err"] = errors(model, spec)
    if capture is not None:
        row["kernels"] = capture.kernel_times()[:args.kernels]
    return row


def short(kernel: str, width: int = 70) -> str:
    return kernel if len(kernel) <= width else kernel[:width - 3] + "..."


def table_header() -> str:
    return ("| model | nodes | " + " | ".join(STAGES)
            + " | total | CPU | max abs err | max rel err |\n|---|" + "---:|" * (len(STAGES) + 5))


def table_row(r: dict) -> str:
    cells = [f"{r.get(s, float('nan')):.1f}" for s in STAGES] + [f"{r['total']:.1f}",
                                                                  f"{r['cpu']:.1f}"]
    err = " | ".join(f"{r[k]:.3g}" if k in r else "-" for k in ("max_err", "rel_err"))
    return f"| {r['model']} | {r.get('nodes') or '-'} | " + " | ".join(cells) + f" | {err} |"


def kernel_lines(r: dict) -> list[str]:
    if not r.get("kernels"):
        return []
    return ([f"\n{r['model']}: slowest kernels to generate (s)"]
            + [f"  {t:7.2f}  {short(k)}" for t, k in r["kernels"]])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("models", nargs="*", default=["psp"],
                    help="psp[:CxS], corpus names, zoo:NAME or checkpoint prefixes "
                         "(default: psp = psp:2048x60)")
    ap.add_argument("--kernels", type=int, default=0, metavar="N",
                    help="also list the N kernels slowest to generate")
    ap.add_argument("--check", action="store_true",
                    help="also run each compiled model on its input and report the largest "
                         "|difference| from MXNet's outputs")
    ap.add_argument("--target", default="llvm")
    ap.add_argument("--corpus", default=None)
    ap.add_argument("--epoch", type=int, default=None)
    ap.add_argument("--inputs", default=None)
    ap.add_argument("--shape", action="append", default=[])
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--peers-python", default=None)
    ap.add_argument("--timeout", type=float, default=3600)
    args = ap.parse_args()
    print("\n".join(machine.format_machine(machine.machine_info())))
    print()
    print(table_header(), flush=True)
    rows = []
    for m in args.models:           # each row as soon as it is measured: big models take long
        rows.append(measure(m, args))
        print(table_row(rows[-1]), flush=True)
    for r in rows:
        for line in kernel_lines(r):
            print(line)


if __name__ == "__main__":
    main()
