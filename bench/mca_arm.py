"""Static multiply-add throughput of a model's hot kernels on ARM CPUs, against x86 ones.

ARM code cannot be timed under emulation (qemu translates it), so issue 37 asks
for estimates from LLVM's scheduling models instead.  This compiles a corpus
model for each CPU (``--cpu`` names: ``neoverse-n1``, ``cortex-a72``, ...; an x86
``-mcpu`` such as ``cascadelake``), takes each kernel's hot loop (the innermost
loop doing the most multiply-adds) from the assembly and lets ``llvm-mca``
simulate it::

    python bench/mca_arm.py resnet18_v1 --cpu neoverse-n1 cortex-a72 cascadelake
    python bench/mca_arm.py int8_resnet18_v1_classic --cpu neoverse-n1 cortex-a72 cascadelake

Work is counted in multiply-adds (MACs) per instruction: ``fmla v.4s`` 4,
``sdot``/``usdot v.4s`` 16, ``bfdot`` 8, ``smlal`` 4 (``.8h``: 8), ``mla v.4s`` 4; x86
``vfmadd*ps`` 4/8/16 and ``vpdpbusd`` 16/32/64 on xmm/ymm/zmm.  Per kernel the
table gives the hot loop's MACs per iteration, llvm-mca's cycles per iteration
and their ratio; the model's line weights kernels by their work
(``estimate_tir_flops``): ``sum(MACs) / sum(MACs / MACs-per-cycle)`` -- one core,
every load an L1 hit, nothing outside the hot loops.  An upper bound for
comparing code generation across CPUs, never a latency or a measurement.

Caveat of the tool, not of the code: LLVM 14 and 16 have no Neoverse-N1,
Cortex-A72 or Cortex-A76 scheduling model -- ``llvm-mca -mcpu=neoverse-n1`` uses
Cortex-A57's (2 FP/ASIMD pipes, ``fmla`` latency 10 in that model); the
Neoverse-V1 name uses Neoverse-N2's.  The figures say what that model says.

Needs ``llvm-mca`` (``apt-get install llvm``; ``--mca llvm-mca-16`` picks a version).
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

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mca import compile_for, functions  # noqa: E402
from mca import innermost_loops as _innermost_loops  # noqa: E402

#: (regex of a multiply-add instruction, MACs it does) -- AArch64 then x86 (AT&T)
_ARM_WORK = [(re.compile(r"^\s+fmla\s+v\d+\.4s"), 4),
             (re.compile(r"^\s+(sdot|udot|usdot)\s+v\d+\.4s"), 16),
             (re.compile(r"^\s+bfdot\s+v\d+\.4s"), 8),
             (re.compile(r"^\s+(smlal2?|umlal2?)\s+v\d+\.4s"), 4),
             (re.compile(r"^\s+(smlal2?|umlal2?)\s+v\d+\.8h"), 8),
             (re.compile(r"^\s+mla\s+v\d+\.4s"), 4)]
_X86_WORK = [(re.compile(r"^\s*vf(?:n)?m(?:add|sub)(?:132|213|231)ps\b.*%xmm\d+\s*$"), 4),
             (re.compile(r"^\s*vf(?:n)?m(?:add|sub)(?:132|213|231)ps\b.*%ymm\d+\s*$"), 8),
             (re.compile(r"^\s*vf(?:n)?m(?:add|sub)(?:132|213|231)ps\b.*%zmm\d+\s*$"), 16),
             (re.compile(r"^\s*(?:\{vex\}\s*)?vpdpbusds?\b.*%xmm\d+\s*$"), 16),
             (re.compile(r"^\s*(?:\{vex\}\s*)?vpdpbusds?\b.*%ymm\d+\s*$"), 32),
             (re.compile(r"^\s*vpdpbusds?\b.*%zmm\d+\s*$"), 64)]
#: a branch to a label: x86 ``jne .LBB``; AArch64 ``b.ne .LBB``, ``cbnz x1, .LBB``, ``tbz``
_BRANCH = re.compile(r"^\s+(?:j\w+|b(?:\.\w+)?|cbn?z|tbn?z)\s+(?:[^,]+,\s*)*(\.LBB\d+_\d+)\s*$")


@dataclass
class HotLoop:
    kernel: str
    macs: int               # multiply-adds per iteration
    instructions: int       # of them, multiply-add instructions
    cycles: float           # llvm-mca's cycles per iteration
    flops: float = 0.0      # the kernel's estimate_tir_flops

    @property
    def per_cycle(self) -> float:
        return self.macs / self.cycles


def is_arm(cpu: str) -> bool:
    from mxc.backends.tvm.targets import ARM_CPUS
    return cpu in ARM_CPUS


def target_text(cpu: str) -> str:
    if is_arm(cpu):
        from mxc.backends.tvm.targets import ARM_CPUS
        return f"llvm -mtriple={ARM_CPUS[cpu][0]} -mcpu={cpu}"
    return f"llvm -mcpu={cpu}"


def innermost_loops(lines: list[str]) -> list[list[str]]:
    """Bodies of the innermost loops of AArch64 assembly *lines* (:func:`mca.innermost_loops`
    with AArch64's branches)."""
    return _innermost_loops(lines, _BRANCH)


def mca_cycles(body: list[str], cpu: str, mca: str, iterations: int = 200) -> float:
    """llvm-mca's cycles per iteration of *body* on *cpu*."""
    triple = ["-mtriple=aarch64-linux-gnu"] if is_arm(cpu) else []
    out = subprocess.run([mca, *triple, f"-mcpu={cpu}", f"-iterations={iterations}"],
                         input="\n".join(body) + "\n", capture_output=True, text=True,
                         check=True).stdout
    return int(re.search(r"Total Cycles:\s+(\d+)", out).group(1)) / iterations


def work(line: str, arm: bool) -> int:
    for pattern, macs in (_ARM_WORK if arm else _X86_WORK):
        if pattern.search(line):
            return macs
    return 0


def hot_loops(asm: str, cpu: str, mca: str) -> list[HotLoop]:
    arm, best, kernel = is_arm(cpu), {}, None
    for name, lines in functions(asm):
        if not name.startswith(".L__tvm_parallel_lambda"):
            kernel = name.removeprefix("__tvm_ffi_").removesuffix("_compute_")
        if kernel is None:
            continue
        for body in innermost_loops(lines):
            counted = [work(ln, arm) for ln in body]
            macs = sum(counted)
            if not macs or (kernel in best and best[kernel].macs >= macs):
                continue
            best[kernel] = HotLoop(kernel, macs, sum(1 for c in counted if c),
                                   mca_cycles(body, cpu, mca))
    return list(best.values())


#: register-only probes of each CPU model's peak: 16 independent accumulators
_PEAK_PROBES = {"arm": {"fmla": ("fmla v{i}.4s, v30.4s, v31.4s", 4),
                        "sdot": ("sdot v{i}.4s, v30.16b, v31.16b", 16)},
                "x86": {"vfmadd zmm": ("vfmadd231ps %zmm30, %zmm31, %zmm{i}", 16),
                        "vpdpbusd zmm": ("vpdpbusd %zmm30, %zmm31, %zmm{i}", 64)}}


def model_peaks(cpu: str, mca: str) -> dict[str, float]:
    """MACs a cycle of each probe instruction in *cpu*'s llvm-mca model (an instruction
    the CPU lacks is left out)."""
    peaks = {}
    for name, (text, macs) in _PEAK_PROBES["arm" if is_arm(cpu) else "x86"].items():
        try:
            cycles = mca_cycles([text.format(i=i) for i in range(16)], cpu, mca)
        except (subprocess.CalledProcessError, AttributeError):
            continue
        peaks[name] = round(16 * macs / cycles, 1)
    return peaks


def _dtype(expr) -> str:
    """An expression's dtype text (``int32x4``)."""
    return str(getattr(expr, "dtype", None) or getattr(expr, "ty", ""))


def dot_flops(func) -> float:
    """2 x the multiply-adds of *func*'s tensorized int8 dot-product steps, which
    ``estimate_tir_flops`` does not count: each LLVM intrinsic call returning ``int32xL``
    (``sdot``, ``usdot``, ``vpdpbusd``: 4 products a lane) times its enclosing loops'
    extents."""
    from tvm import tirx

    total = 0.0

    def calls(value) -> int:      # the tensorized steps store the intrinsic's result
        if "call_llvm_pure_intrin" in str(getattr(value, "op", "")) \
                and _dtype(value).startswith("int32x"):
            return 4 * int(_dtype(value)[len("int32x"):])
        return 0

    def walk(node, mult: float) -> None:
        nonlocal total
        if isinstance(node, tirx.For):
            mult *= int(node.extent)
        if isinstance(node, tirx.BufferStore):
            total += mult * calls(node.value)
            return
        for field in ("seq", "body", "block", "then_case", "else_case"):
            child = getattr(node, field, None)
            for c in (child if field == "seq" and child is not None else [child]):
                if c is not None and not isinstance(c, (int, float, str)):
                    walk(c, mult)

    walk(func.body, 1.0)
    return 2 * total


def analyse(model: str, cpu: str, corpus: Path, mca: str) -> dict:
    root = next((p for p in (corpus / "models" / model, corpus / "wave2" / "models" / model)
                 if p.is_dir()), None)
    if root is None:
        raise SystemExit(f"no corpus model {model} under {corpus}")
    asm, flops = compile_for(model, cpu, corpus, target=target_text(cpu), root=root,
                             fallback=dot_flops)
    loops = hot_loops(asm, cpu, mca)
    for loop in loops:
        loop.flops = flops.get(loop.kernel, 0.0)
    loops.sort(key=lambda lp: -lp.flops)
    counted = [lp for lp in loops if lp.flops > 0]
    macs = sum(lp.flops for lp in counted) / 2
    cycles = sum(lp.flops / 2 / lp.per_cycle for lp in counted)
    return {"model": model, "cpu": cpu, "mca": mca, "macs": macs,
            "model_peaks": model_peaks(cpu, mca),
            "macs_per_cycle": macs / cycles if cycles else 0.0,
            "loops": [dict(asdict(lp), per_cycle=lp.per_cycle) for lp in loops]}


def render(res: dict, top: int) -> str:
    lines = [f"## {res['model']} on {res['cpu']} ({res['mca']}): {res['macs_per_cycle']:.1f} "
             f"MACs a cycle over the hot loops, weighted by work (the model's peaks: "
             + ", ".join(f"{k} {v:g}" for k, v in res["model_peaks"].items()) + ")", "",
             "| kernel | MFLOP | MACs/iter (instr.) | cycles/iter | MACs/cycle |",
             "|---|---|---|---|---|"]
    for lp in res["loops"][:top]:
        lines.append(f"| {lp['kernel'][:60]} | {lp['flops'] / 1e6:.1f} | {lp['macs']} "
                     f"({lp['instructions']}) | {lp['cycles']:.2f} | {lp['per_cycle']:.1f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    import os
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("models", nargs="+", help="corpus model names (wave 1 or wave 2)")
    ap.add_argument("--cpu", nargs="+", default=["neoverse-n1", "cortex-a72", "cascadelake"])
    ap.add_argument("--corpus", default=os.environ.get("MXC_CORPUS", "../shared/corpus"))
    ap.add_argument("--mca", default="llvm-mca", help="the llvm-mca binary")
    ap.add_argument("--top", type=int, default=6, help="kernels listed per table")
    ap.add_argument("--json", help="write every result here")
    args = ap.parse_args(argv)
    if shutil.which(args.mca) is None:
        print(f"{args.mca} is not on PATH (apt-get install llvm)", file=sys.stderr)
        return 2
    results = []
    for model in args.models:
        for cpu in args.cpu:
            res = analyse(model, cpu, Path(args.corpus), args.mca)
            results.append(res)
            print(render(res, args.top) + "\n", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
