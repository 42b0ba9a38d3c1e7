"""``mxc inspect``: what is in a model — ops, inputs, outputs, shapes, params.

Given an ``.mxc`` artifact it summarises the manifest instead: target,
versions, inputs/outputs, compiled regions, host nodes, members.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

import numpy as np

from ..errors import USAGE_EXIT_CODE
from . import register_command
from .common import add_model_arguments, load_model, shapes_of


@register_command("inspect", help="summarise a model (ops, inputs, outputs, shapes, params) "
                                  "or an .mxc artifact (its manifest)")
def add_arguments(p: argparse.ArgumentParser) -> None:
    add_model_arguments(p, model_optional=True)
    p.add_argument("--json", action="store_true", help="print a JSON document")
    p.add_argument("--host", action="store_true",
                   help="this machine's CPU: the features its kernel reports (what compile, "
                        "tune and load go by) and the target mxc builds for by default")


def host_report() -> dict:
    """This CPU as ``mxc inspect --host`` shows it: the kernel's report
    (:func:`mxc.runtime.cpu_features.host_cpu`) and the default target built from it."""
    from ..runtime.cpu_features import host_cpu
    host = host_cpu()
    features = host.features()
    report = {"arch": host.arch, "model": host.model,
              "features": None if features is None else sorted(features),
              "llvm_cpu": None, "default_target": None}
    try:
        from ..backends.tvm.targets import host_cpu_name, host_target
        report["llvm_cpu"], report["default_target"] = host_cpu_name(), host_target()
    except (ImportError, AttributeError, OSError):
        # no TVM, or TVM's runtime library alone (a board's runtime-only install: the
        # compiler library, with LLVM's CPU detection, is not there): the kernel's report
        report["llvm_cpu"] = report["default_target"] = None
    return report


def inspect_host(as_json: bool) -> int:
    report = host_report()
    if as_json:
        print(json.dumps(report, indent=2))
        return 0
    print(f"this CPU: {report['model'] or '?'} ({report['arch']}"
          + (f"; LLVM calls it {report['llvm_cpu']})" if report["llvm_cpu"] else ")"))
    features = report["features"]
    if features is None:
        print("features: the kernel reports none here (no /proc/cpuinfo); LLVM's detection "
              "decides")
    else:
        simd = [f for f in features if f.startswith(_SIMD_PREFIXES) or f in _SIMD_NAMES]
        print(f"vector/matrix extensions (as the kernel reports them): {', '.join(simd)}")
        print(f"all features mxc checks that this CPU has: {', '.join(features)}")
    if report["default_target"] is not None:
        print(f"default target (--cpu host): {json.dumps(report['default_target'])}")
    return 0


def inspect_model(sym, arg_params, aux_params, shapes: dict) -> dict:
    """The report as a plain dict (used by ``--json`` and the text view)."""
    from ..compiler.ops.registry import check_supported
    graph = sym.graph
    check_supported(graph)
    given = {k: v.shape for k, v in {**arg_params, **aux_params}.items()}
    given.update(shapes)
    types = {k: v.dtype.name for k, v in {**arg_params, **aux_params}.items()}
    for name in graph.list_inputs():
        types.setdefault(name, "float32")
    arg_s, out_s, aux_s = sym.infer_shape_partial(**{k: v for k, v in given.items()
                                                      if k in set(graph.list_inputs())})
    arg_t, out_t, aux_t = sym.infer_type_partial(**{k: v for k, v in types.items()
                                                     if k in set(graph.list_inputs())})

    def entries(names, shapes_, types_):
        return [{"name": n, "shape": None if s is None else [d if d is not None else -1
                                                               for d in s],
                 "dtype": None if t is None else np.dtype(t).name}
                for n, s, t in zip(names, shapes_, types_)]

    params = list(arg_params.values()) + list(aux_params.values())
    return {
        "ops": dict(sorted(graph.op_counts().items(), key=lambda kv: (-kv[1], kv[0]))),
        "num_nodes": len(graph.nodes),
        "arguments": entries(sym.list_arguments(), arg_s, arg_t),
        "auxiliary_states": entries(sym.list_auxiliary_states(), aux_s, aux_t),
        "outputs": entries(sym.list_outputs(), out_s, out_t),
        "num_params": int(sum(int(np.prod(p.shape)) for p in params)),
        "param_bytes": int(sum(p.nbytes for p in params)),
    }


def _shape_text(shape) -> str:
    return "x".join("?" if d is None or d == -1 else str(d) for d in shape) or "scalar"


def cpu_needs_line(host: dict) -> str:
    """The instruction-set extensions the artifact's CPU code uses, and whether this CPU
    has them (the runtime refuses it otherwise)."""
    from ..runtime.artifact import canonical_arch, missing_cpu_features
    from ..runtime.cpu_features import host_cpu
    features = list(host.get("features") or ())
    simd = [f for f in features if f.startswith(_SIMD_PREFIXES) or f in _SIMD_NAMES]
    if not features:
        return "CPU features needed: the architecture's baseline (portable)"
    here_arch = host_cpu().arch
    arch = canonical_arch(host.get("arch") or here_arch)
    missing = missing_cpu_features(features, arch) if arch == here_arch else None
    here = ("this CPU has them" if missing == [] else
            f"this CPU lacks {', '.join(missing)}" if missing else
            f"built for {arch}, this machine is {here_arch}")
    line = (f"CPU features needed: {', '.join(simd) or 'no vector extensions'} "
            f"({len(features)} LLVM features in all; {here}; --cpu generic builds a "
            f"portable one)")
    if host.get("emulated"):
        line += (f"; emulated: {', '.join(host['emulated'])} (built with MXC_EMULATE_AMX=1: "
                 f"a test build whose tile steps are scalar loops, not for deployment)")
    return line


def precision_line(prec: dict) -> str:
    """``--precision``: what was asked, what was built, and auto's check."""
    line = f"precision: {prec.get('mode', 'fp32')}"
    if prec.get("mode") == "bf16":
        tiles = prec.get("tile_kernels", 0)
        line += (f" ({prec.get('kernels', 0)} convolution/dense kernel(s) in bfloat16"
                 + (f", {tiles} on AMX tiles" if tiles else "") + ", float32 accumulation)")
    if prec.get("requested") == "auto":
        check = prec.get("check")
        line += " -- chosen by --precision auto"
        if check:
            line += (f": bf16 error {check['max_error']:.3g} of the output range, "
                     f"tolerance {check['tolerance']:g} ({check.get('inputs', '')} inputs)")
        elif prec.get("reason"):
            line += f": {prec['reason']}"
    return line


def winograd_line(wino: dict, man: dict) -> str:
    """The size trade-off of ``--winograd``: bytes of the transformed weights, and
    whether the artifact stores them transformed or as given (transformed at load)."""
    n = wino.get("convolutions", 0)
    if not n:
        return f"winograd {wino.get('mode')}: no convolution transformed"
    w, t = wino.get("weight_bytes", 0), wino.get("transformed_bytes", 0)
    line = f"winograd {wino.get('mode')}: {n} convolution(s), their weights {w:,} -> {t:,} bytes"
    if "stored_bytes" not in wino:   # an artifact of an mxc that stored them transformed
        return f"{line} ({t / max(w, 1):.1f}x; --winograd off keeps {w:,}, runs slower)"
    at_load = wino.get("transformed_at_load", 0)
    how = ("all transformed when the model loads" if at_load == n else
           f"{at_load} transformed when the model loads" if at_load else "stored transformed")
    return (f"{line} in memory ({t / max(w, 1):.1f}x), {how}; the artifact stores "
            f"{wino['stored_bytes']:,}")


#: LLVM feature names of vector/matrix instruction sets worth showing
_SIMD_PREFIXES = ("sse", "avx", "amx", "fma", "neon", "sve", "dotprod", "i8mm", "bf16", "fp16")
_SIMD_NAMES = {"f16c", "ssse3", "fullfp16", "fp16fml", "rdm", "vfp3", "vfp4", "d32"}


def inspect_artifact(path: str, as_json: bool) -> int:
    from ..runtime.artifact import read_manifest
    man = read_manifest(path)
    if as_json:
        print(json.dumps(man, indent=2))
        return 0
    target = man.get("target") or {}
    host = target.get("host") or {}
    print(f"artifact: {path}  (format {man['format_version']}, mxc {man.get('mxc_version')}, "
          f"TVM {man.get('tvm_version')}, created {man.get('created')})")
    print(f"target: {target.get('string')}")
    if host:
        print(f"  host CPU: {host.get('cpu')} ({host.get('arch')})")
        print("  " + cpu_needs_line(host))
    if target.get("kind") != "cuda":
        from ..runtime.threads import allowed_cores, pool_size
        print(f"threads: {pool_size()} here (this process may use {allowed_cores()} cores; "
              f"TVM_NUM_THREADS or `mxc run --threads N` changes it)")
    fed = man.get("weights_as_inputs") or []
    print(f"passes: {man.get('pipeline') or 'none'}; parameters "
          f"{'compiled in' if man.get('bind_params') else 'stored as inputs'}"
          + (f"; {len(fed)} weight(s) fed at run time (--weights-as-inputs): "
             f"{', '.join(fed[:5])}{' ...' if len(fed) > 5 else ''}" if fed else ""))
    wino = man.get("winograd")
    if wino:
        print("  " + winograd_line(wino, man))
    prec = man.get("precision")
    if prec:
        print("  " + precision_line(prec))
    env = man.get("environment")
    if env:
        print("  options from the environment: "
              + ", ".join(f"{k}={v}" for k, v in sorted(env.items())))
    dyn = man.get("dynamic_batch") or {}
    if dyn:
        lo, hi = dyn["range"]
        print(f"dynamic batch: {lo}..{hi}, compiled buckets "
              f"{', '.join(map(str, dyn['buckets']))} (a batch runs on the smallest bucket that "
              f"holds it, padded)")
    for title, axes in (("inputs", dyn.get("axes") or {}), ("outputs", dyn.get("output_axes")
                                                            or {})):
        print(f"{title}:")
        for e in man.get(title, ()):
            extra = "  (optional)" if e.get("optional") else ""
            shape = list(e["shape"])
            if e["name"] in axes:
                shape[axes[e["name"]]] = "{}..{}".format(*dyn["range"])
            print(f"  {e['name']:<40} {_shape_text(shape):<20} {e['dtype']}{extra}")
    print(f"compiled regions: {len(man.get('regions', ()))}")
    for r in man.get("regions", ()):
        ops = ", ".join(f"{k} x{v}" for k, v in sorted(r["ops"].items()))
        print(f"  {r['name']} -> {r['function']}: {r['num_nodes']} nodes ({ops})")
    print(f"host nodes: {len(man.get('host_nodes', ()))}")
    for h in man.get("host_nodes", ()):
        print(f"  {h['name']} ({h['op']}): {h['reason']}")
    print(f"members (sizes as read; the file, a small library deflated: "
          f"{os.path.getsize(path):,} bytes):")
    for name, m in man.get("members", {}).items():
        print(f"  {name:<16} {m['size']:>12,} bytes  sha256 {m['sha256'][:16]}...")
    return 0


def inspect_params(path: str, as_json: bool) -> int:
    """The arrays of a ``.params`` file: name, shape, dtype, sizes."""
    from ..frontend.params import load_params
    params = load_params(path)
    items = params.items() if isinstance(params, dict) else (
        (f"[{i}]", v) for i, v in enumerate(params))
    rows = [{"name": k, "shape": list(v.shape), "dtype": v.dtype.name, "bytes": int(v.nbytes)}
            for k, v in items]
    if as_json:
        print(json.dumps({"params_file": path, "arrays": rows}, indent=2))
        return 0
    print(f"{path}: a .params file (MXNet NDArray list) with {len(rows)} array(s), "
          f"{sum(r['bytes'] for r in rows):,} bytes; inspect the model with its "
          f"-symbol.json and --params {path}")
    for r in rows:
        print(f"  {r['name']:<48} {_shape_text(r['shape']):<20} {r['dtype']}")
    return 0


def run(args: argparse.Namespace) -> int:
    from ..frontend.params import is_params_file
    from ..runtime.artifact import is_artifact
    if args.host or args.model is None:
        if (args.model is None) == (not args.host):   # neither, or both
            print("mxc inspect: error: give a model (symbol JSON, .params, .mxc) or --host",
                  file=sys.stderr)
            return USAGE_EXIT_CODE
        return inspect_host(args.json)
    if args.model.endswith(".mxc") or is_artifact(args.model):
        return inspect_artifact(args.model, args.json)
    if is_params_file(args.model):
        return inspect_params(args.model, args.json)
    sym, arg, aux = load_model(args)
    report = inspect_model(sym, arg, aux, shapes_of(args))
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    print(f"model: {args.model}  ({report['num_nodes']} nodes)")
    print("ops:")
    for op, n in report["ops"].items():
        print(f"  {op:<32} {n}")
    for title in ("arguments", "auxiliary_states", "outputs"):
        print(f"{title}:")
        for e in report[title]:
            shape = "?" if e["shape"] is None else _shape_text(e["shape"])
            print(f"  {e['name']:<40} {shape:<20} {e['dtype'] or '?'}")
    print(f"parameters: {report['num_params']:,} values, {report['param_bytes']:,} bytes")
    return 0
