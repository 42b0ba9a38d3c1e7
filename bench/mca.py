"""Static FMA throughput of a model's kernels on CPUs this machine may not have.

The default schedules size their register tiles from a per-CPU cost model
(``schedules/base/microarch.py``), so code compiled for a Xeon differs from code
compiled for a Zen 4 -- but only the machine at hand can time it.  This tool
compiles a model for ``-mcpu=X``, takes each kernel's hot loop (the innermost
loop holding the most vector FMAs) from the assembly and lets LLVM's machine
code analyser (``llvm-mca``, LLVM's scheduling model of X) simulate it::

    python bench/mca.py squeezenet1.1 --mcpu skylake-avx512 icelake-server znver3
    python bench/mca.py resnet18_v1 --mcpu cascadelake --top 10 --json out.json

For every kernel it reports the loop's FMAs per iteration and their lanes,
the cycles llvm-mca gives an iteration (all loads hitting L1), and that as a
share of the CPU's FMA peak *in llvm-mca's model* (independent register-only
FMAs of the row's vector width), so a model that errs on the FMA rate --
LLVM 14's ``znver3`` issues one ymm FMA a cycle where Zen 3 issues two -- errs
in both terms; the report says where that peak differs from the cost-model
row's ``fma_ports x lanes``.
The model's line weights kernels by their floating-point work
(``estimate_tir_flops``): ``sum(flops) / sum(flops / share)``, kernels without
an FMA loop left out.  It is an upper bound -- caches, memory bandwidth,
threading and loop overheads outside the hot loop are not simulated -- for
comparing schedules on CPUs that cannot be timed here, never a latency.

Needs ``llvm-mca`` on PATH (``apt-get install llvm``); LLVM 14 knows Intel
CPUs up to ``sapphirerapids`` and AMD's up to ``znver3``.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

_FMA = re.compile(r"^\s*v?f(?:n)?m(?:add|sub)(?:132|213|231)ps\b.*%([xyz])mm\d+\s*$")
_LANES = {"x": 4, "y": 8, "z": 16}
_LOAD = re.compile(r"\(|\{1to\d+\}")          # a memory operand (incl. embedded broadcast)
_LABEL = re.compile(r"^(\.LBB\d+_\d+):")
_BRANCH = re.compile(r"^\s+j\w+\s+(\.LBB\d+_\d+)\s*$")
_FUNC = re.compile(r"^\s+\.type\s+([^,]+),@function")


@dataclass
class HotLoop:
    kernel: str             # the kernel (its parallel lambdas count as the kernel)
    fmas: int               # vector FMAs per iteration
    lanes: int              # float lanes those FMAs compute
    loads: int              # instructions with a memory operand
    cycles: float           # llvm-mca's cycles per iteration
    peak_share: float       # lanes / cycles / llvm-mca's peak lanes a cycle
    flops: float = 0.0      # the kernel's estimate_tir_flops


def functions(asm: str) -> list[tuple[str, list[str]]]:
    """``(name, lines)`` of every function in *asm*, in order."""
    out: list[tuple[str, list[str]]] = []
    for line in asm.splitlines():
        m = _FUNC.match(line)
        if m:
            out.append((m.group(1), []))
        elif out:
            out[-1][1].append(line)
    return out


def innermost_loops(lines: list[str], branch: re.Pattern = _BRANCH) -> list[list[str]]:
    """The bodies (label to backward branch) of the loops of *lines* holding no loop;
    *branch* matches a conditional branch and captures its label (x86's ``j*`` by
    default; :mod:`mca_arm` passes AArch64's)."""
    labels: dict[str, int] = {}
    loops = []
    for i, line in enumerate(lines):
        m = _LABEL.match(line)
        if m:
            labels[m.group(1)] = i
            continue
        m = branch.match(line)
        if m and m.group(1) in labels:
            loops.append((labels[m.group(1)], i))
    inner = [(a, b) for a, b in loops
             if not any(a < c and d < b or a <= c < d < b or a < c < d <= b
                        for c, d in loops if (c, d) != (a, b))]
    return [[ln for ln in lines[a + 1:b + 1] if ln.strip() and not ln.lstrip().startswith(".")
             and not _LABEL.match(ln) and not ln.lstrip().startswith("//")] for a, b in inner]


def mca_cycles(body: list[str], mcpu: str, iterations: int = 200) -> float:
    """llvm-mca's cycles per iteration of the loop *body* on *mcpu*."""
    out = subprocess.run(["llvm-mca", f"-mcpu={mcpu}", f"-iterations={iterations}"],
                         input="\n".join(body) + "\n", capture_output=True, text=True,
                         check=True).stdout
    total = int(re.search(r"Total Cycles:\s+(\d+)", out).group(1))
    return total / iterations


def mca_peak_lanes(mcpu: str, lanes: int) -> float:
    """FMA lanes a cycle of *mcpu* in llvm-mca's model: 12 independent FMAs on
    registers of *lanes* floats."""
    reg = {16: "zmm", 8: "ymm", 4: "xmm"}[lanes]
    body = [f"vfmadd231ps %{reg}30, %{reg}31, %{reg}{i}" if reg == "zmm" else
            f"vfmadd231ps %{reg}14, %{reg}15, %{reg}{i}" for i in range(12)]
    return 12 * lanes / mca_cycles(body, mcpu)


def hot_loops(asm: str, mcpu: str, peak_lanes: float) -> list[HotLoop]:
    """Each kernel's hot loop in *asm*, simulated on *mcpu*."""
    best: dict[str, HotLoop] = {}
    kernel = None
    for name, lines in functions(asm):
        if not name.startswith(".L__tvm_parallel_lambda"):
            kernel = name.removeprefix("__tvm_ffi_").removesuffix("_compute_")
        if kernel is None:
            continue
        for body in innermost_loops(lines):
            fmas = [_FMA.match(ln) for ln in body]
            lanes = sum(_LANES[m.group(1)] for m in fmas if m)
            if not lanes or (kernel in best and best[kernel].lanes >= lanes):
                continue
            cycles = mca_cycles(body, mcpu)
            best[kernel] = HotLoop(kernel, sum(1 for m in fmas if m), lanes,
                                   sum(1 for ln in body if _LOAD.search(ln)), cycles,
                                   lanes / cycles / peak_lanes)
    return list(best.values())


def compile_for(model: str, mcpu: str, corpus: Path, target: str | None = None,
                root: Path | None = None, fallback=None) -> tuple[str, dict[str, float]]:
    """(assembly, {kernel: flops}) of corpus *model* compiled for ``llvm -mcpu=mcpu``
    (or the *target* string: another architecture, :mod:`mca_arm`) with mxc's default
    passes, partitioning and CPU pipeline; *root*: the model's folder where it is not
    ``corpus/models/model`` (wave 2); *fallback(func)*: the flops of a kernel the
    estimator counts none in (tensorized int8 steps)."""
    import tvm
    from tvm.s_tir.analysis import estimate_tir_flops

    import mxc
    from mxc.backends.tvm.build import relax_pipeline, resolve_target
    from mxc.backends.tvm.lower import lower_model
    from mxc.backends.tvm.options import CompileOptions
    from mxc.backends.tvm.schedules.tir_pipeline import tir_pipeline

    root = root or corpus / "models" / model
    meta = json.loads((root / "meta.json").read_text())
    shapes = {k: tuple(v["shape"]) for k, v in meta["inputs"].items()}
    target = target or f"llvm -mcpu={mcpu}"
    lowered = lower_model(mxc.sym.load(str(root / "symbol.json")),
                          mxc.nd.load(str(root / "model.params")), shapes,
                          options=CompileOptions(target=target))
    tgt = resolve_target(target)
    inner = relax_pipeline(tgt)
    scheduled: dict = {}

    @tvm.transform.module_pass(opt_level=0, name="CaptureScheduled")
    def capture(mod, _ctx):
        out = inner(mod)
        scheduled.update({gv.name_hint: f for gv, f in out.functions_items()
                          if isinstance(f, tvm.tirx.PrimFunc)})
        return out

    exe = tvm.compile(lowered.module, target=tgt, relax_pipeline=capture,
                      tir_pipeline=tir_pipeline())
    asm = "\n".join(str(m.inspect_source("asm")) for m in exe.mod.imports if m.kind == "llvm")
    flops = {}
    for name, func in scheduled.items():
        try:
            flops[name] = float(estimate_tir_flops(tvm.IRModule({name: func})))
        except Exception:  # noqa: BLE001 - a kernel the estimator cannot walk counts 0
            flops[name] = 0.0
        if not flops[name] and fallback is not None:
            flops[name] = float(fallback(func))
    return asm, flops


def analyse(model: str, mcpu: str, corpus: Path) -> dict:
    from mxc.backends.tvm.build import resolve_target
    from mxc.backends.tvm.schedules.base.microarch import microarch
    row = microarch(resolve_target(f"llvm -mcpu={mcpu}"))
    asm, flops = compile_for(model, mcpu, corpus)
    peak = mca_peak_lanes(mcpu, row.lanes)
    loops = hot_loops(asm, mcpu, peak)
    for loop in loops:
        loop.flops = flops.get(loop.kernel, 0.0)
    loops.sort(key=lambda lp: -lp.flops)
    counted = [lp for lp in loops if lp.flops > 0]
    work = sum(lp.flops for lp in counted)
    share = work / sum(lp.flops / lp.peak_share for lp in counted) if counted else 0.0
    return {"model": model, "mcpu": mcpu, "row": row.name, "peak_lanes": round(peak, 2),
            "row_peak_lanes": row.fma_ports * row.lanes, "weighted_peak_share": share,
            "loops": [asdict(lp) for lp in loops]}


def render(res: dict, top: int) -> str:
    note = ("" if abs(res["peak_lanes"] - res["row_peak_lanes"]) < 0.5 else
            f"; the cost-model row says {res['row_peak_lanes']}")
    lines = [f"## {res['model']} on {res['mcpu']} (cost-model row {res['row']}; llvm-mca's "
             f"peak {res['peak_lanes']:g} FMA lanes a cycle{note}): hot loops at "
             f"{100 * res['weighted_peak_share']:.0f}% of peak, weighted by FLOPs", "",
             "| kernel | MFLOP | FMAs x lanes | loads | cycles/iter | % of peak |",
             "|---|---|---|---|---|---|"]
    for lp in res["loops"][:top]:
        lines.append(f"| {lp['kernel'][:60]} | {lp['flops'] / 1e6:.1f} | {lp['fmas']} x "
                     f"{lp['lanes'] // max(lp['fmas'], 1)} | {lp['loads']} | {lp['cycles']:.2f} "
                     f"| {100 * lp['peak_share']:.0f}% |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    import os
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("models", nargs="+", help="corpus model names")
    ap.add_argument("--mcpu", nargs="+", default=["skylake-avx512", "znver3"])
    ap.add_argument("--corpus", default=os.environ.get("MXC_CORPUS", "../shared/corpus"))
    ap.add_argument("--top", type=int, default=8, help="kernels listed per table")
    ap.add_argument("--json", help="write every result here")
    args = ap.parse_args(argv)
    if shutil.which("llvm-mca") is None:
        print("llvm-mca is not on PATH (apt-get install llvm)", file=sys.stderr)
        return 2
    results = []
    for model in args.models:
        for mcpu in args.mcpu:
            res = analyse(model, mcpu, Path(args.corpus))
            results.append(res)
            print(render(res, args.top) + "\n", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
