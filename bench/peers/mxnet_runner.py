"""Time a model in Apache MXNet 1.9.1 and export it to ONNX (run by the peers' venv python).

    python mxnet_runner.py --symbol S.json --params P.params --inputs in.npz \
        --warmup 5 --runs 30 --outputs out.npz [--export-onnx model.onnx]

The model is bound the way MXNet deploys a checkpoint: ``mx.sym.load`` +
``simple_bind(grad_req="null")`` + ``copy_params_from``; each timed call is
``forward(is_train=False, **inputs)`` on the numpy inputs plus ``asnumpy()`` of
every output (the same work ``mxc``'s ``Session.run`` does).  MXNet runs at its
default settings, which are its fastest on CPU: the pip build's oneDNN (MKLDNN)
subgraph backend fuses Convolution+BatchNorm+ReLU at bind time unless
``MXNET_SUBGRAPH_BACKEND`` says otherwise; the JSON reports whether it did.

With ``--export-onnx`` the model is then exported with ``mx.onnx.export_model``;
MXNet lists every weight as a graph input too, which keeps ONNX Runtime from
constant-folding them, so initializers are removed from the graph inputs.

``peak_rss_bytes`` is the process's peak resident memory (``VmHWM``, see
``bench/memory.py``) right after the timed calls, before the export;
``rss_after_import_bytes`` what MXNet and numpy alone hold.

Prints one JSON object on the last line of stdout.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from bench.memory import current_rss_bytes, peak_rss_bytes  # noqa: E402
from bench.timing import measure  # noqa: E402

THREAD_VARS = ("OMP_NUM_THREADS", "MXNET_OMP_MAX_THREADS", "MKL_NUM_THREADS",
               "OPENBLAS_NUM_THREADS", "MXNET_CPU_WORKER_NTHREADS", "MXNET_ENGINE_TYPE",
               "MXNET_SUBGRAPH_BACKEND", "MXNET_MKLDNN_ENABLED")


def split_params(loaded: dict) -> tuple[dict, dict]:
    arg, aux = {}, {}
    for key, value in loaded.items():
        kind, sep, name = key.partition(":")
        if sep and kind == "aux":
            aux[name] = value
        else:
            arg[name if sep else key] = value
    return arg, aux


def strip_initializer_inputs(path: str) -> dict:
    """Remove initializers from the graph inputs of the ONNX model at *path* (in place)."""
    import onnx

    model = onnx.load(path)
    inits = {t.name for t in model.graph.initializer}
    keep = [i for i in model.graph.input if i.name not in inits]
    removed = len(model.graph.input) - len(keep)
    if removed:
        del model.graph.input[:]
        model.graph.input.extend(keep)
        onnx.save(model, path)
    return {"initializer_inputs_removed": removed, "graph_inputs": [i.name for i in keep],
            "nodes": len(model.graph.node), "opset": [o.version for o in model.opset_import]}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--symbol", required=True)
    ap.add_argument("--params", required=True)
    ap.add_argument("--inputs", required=True, help="npz keyed by input name")
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--outputs", help="save the outputs (out0, out1, ...) here")
    ap.add_argument("--export-onnx", help="also export the model to this ONNX file")
    args = ap.parse_args()

    import numpy as np
    import mxnet as mx
    from mxnet import runtime

    report: dict = {"engine": "mxnet", "mxnet": mx.__version__, "numpy": np.__version__,
                    "python": sys.version.split()[0],
                    "env": {k: os.environ.get(k) for k in THREAD_VARS},
                    "rss_after_import_bytes": current_rss_bytes()}
    features = runtime.Features()
    report["features"] = sorted(k for k in features.keys() if features.is_enabled(k))
    mkldnn = features.is_enabled("MKLDNN")
    backend = os.environ.get("MXNET_SUBGRAPH_BACKEND")
    report["subgraph_backend"] = backend if backend is not None else (
        "unset (default: MKLDNN fusion at bind)" if mkldnn else "unset (none)")

    sym = mx.sym.load(args.symbol)
    arg_params, aux_params = split_params(mx.nd.load(args.params))
    with np.load(args.inputs) as npz:
        inputs = {k: npz[k] for k in npz.files}
    t0 = time.perf_counter()
    # parameters that are not float32 (a quantized model's int8 weights) bind as stored
    types = {k: v.dtype for k, v in {**arg_params, **aux_params}.items()
             if v.dtype != np.float32}
    if types:       # then MXNet infers from these alone: name the inputs' types too
        types.update({k: v.dtype for k, v in inputs.items()})
    exe = sym.simple_bind(ctx=mx.cpu(), grad_req="null", type_dict=types or None,
                          **{k: v.shape for k, v in inputs.items()})
    exe.copy_params_from(arg_params, aux_params, allow_extra_params=True)
    report["bind_s"] = time.perf_counter() - t0
    try:  # which ops survived the bind-time graph passes (oneDNN fusion shows as _sg_mkldnn_*)
        opt = json.loads(exe.get_optimized_symbol().tojson())
        ops = [n["op"] for n in opt["nodes"] if n["op"] != "null"]
        report["bound_ops"] = {op: ops.count(op) for op in sorted(set(ops))}
        report["fused"] = any(op.startswith("_sg_") for op in ops)
    except Exception as exc:  # noqa: BLE001 - informational only
        report["bound_ops_error"] = f"{type(exc).__name__}: {exc}"
    feeds = {k: v for k, v in inputs.items() if k in exe.arg_dict}

    def run():
        outs = exe.forward(is_train=False, **feeds)
        return [o.asnumpy() for o in outs]

    outputs = run()
    report["times_s"] = measure(run, args.warmup, args.runs)
    report["warmup"], report["runs"] = args.warmup, args.runs
    report["peak_rss_bytes"] = peak_rss_bytes()   # before the ONNX export adds its own
    if args.outputs:
        np.savez(args.outputs, **{f"out{i}": o for i, o in enumerate(outputs)})

    if args.export_onnx:
        try:
            import onnx
            report["onnx"] = onnx.__version__
            params = {**arg_params, **aux_params}
            names = [n for n in sym.list_inputs() if n not in params]
            arg_shapes, _, _ = sym.infer_shape(**{k: v.shape for k, v in inputs.items()})
            shapes = dict(zip(sym.list_arguments(), arg_shapes))
            in_shapes = [tuple(inputs[n].shape if n in inputs else shapes[n]) for n in names]
            in_types = [np.dtype(inputs[n].dtype if n in inputs else "float32") for n in names]
            t0 = time.perf_counter()
            mx.onnx.export_model(sym, params, in_shapes=in_shapes, in_types=in_types,
                                 onnx_file_path=args.export_onnx, verbose=False, dynamic=False)
            report["export_s"] = time.perf_counter() - t0
            report["export"] = strip_initializer_inputs(args.export_onnx)
        except Exception as exc:  # noqa: BLE001 - reported, ORT then is skipped
            report["export_error"] = f"{type(exc).__name__}: {exc}"
            loss = sorted({n["op"] for n in json.loads(sym.tojson())["nodes"]
                           if n["op"].endswith("Output")})
            if loss:
                report["export_error"] += (f" (MXNet 1.9.1's ONNX exporter does not handle "
                                           f"{', '.join(loss)} with a label input)")
    print(json.dumps(report))


if __name__ == "__main__":
    main()
