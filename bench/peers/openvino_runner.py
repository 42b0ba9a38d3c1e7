"""Time an ONNX model in OpenVINO's CPU plugin (run by the peers' venv python).

    python openvino_runner.py --model m.onnx --inputs in.npz --threads N \
        --precision default|f32 --warmup 5 --runs 30 --outputs out.npz

OpenVINO as a user runs it for latency: ``core.compile_model(model, "CPU",
{"PERFORMANCE_HINT": "LATENCY", "INFERENCE_NUM_THREADS": N})``; with
``--precision f32`` also ``INFERENCE_PRECISION_HINT=f32`` -- without it
OpenVINO computes in bfloat16 on CPUs with AMX or AVX512-BF16 (its default
there), which is the column mxc's ``--precision bf16`` is compared with.
Each timed call is one synchronous ``infer`` of the compiled model on the
numpy inputs.  OpenVINO is not among the peers' venv's pinned requirements
(``bench/peers/venv.py``: MXNet 1.9.1 pins numpy < 1.24); install it there
(``pip install openvino``) for this column, else the runner reports that.

Prints one JSON object on the last line of stdout.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from bench.memory import current_rss_bytes, peak_rss_bytes  # noqa: E402
from bench.peers import onnx_runner_arguments  # noqa: E402
from bench.timing import measure  # noqa: E402


def _type_name(value) -> str:
    """An ``ov.Type`` as OpenVINO spells it in its own settings (``bf16``, ``f32``), not its
    repr (``<Type: 'bfloat16'>``) that the report would print verbatim."""
    to_string = getattr(value, "to_string", None)
    return to_string() if callable(to_string) else str(value)


def main() -> None:
    ap = onnx_runner_arguments()
    ap.add_argument("--precision", choices=("default", "f32"), default="default")
    args = ap.parse_args()

    import numpy as np
    try:
        import openvino as ov
    except ImportError:
        print(json.dumps({"error": "openvino is not installed in the peers' venv "
                                   "(pip install openvino there)"}))
        return
    rss_after_import = current_rss_bytes()
    config = {"PERFORMANCE_HINT": "LATENCY", "INFERENCE_NUM_THREADS": args.threads}
    if args.precision == "f32":
        config["INFERENCE_PRECISION_HINT"] = "f32"
    core = ov.Core()
    t0 = time.perf_counter()
    compiled = core.compile_model(core.read_model(args.model), "CPU", config)
    load_s = time.perf_counter() - t0
    with np.load(args.inputs) as npz:
        inputs = {k: npz[k] for k in npz.files}
    feeds = {}
    for port in compiled.inputs:
        name = port.get_any_name()
        if name in inputs:
            feeds[name] = inputs[name]
        else:  # e.g. a label the exporter kept: zeros of the declared shape
            shape = [d.get_length() if d.is_static else 1 for d in port.get_partial_shape()]
            feeds[name] = np.zeros(shape, dtype=np.float32)
    request = compiled.create_infer_request()

    def run():
        return request.infer(feeds)

    result = run()
    times = measure(run, args.warmup, args.runs)
    peak = peak_rss_bytes()
    outputs = [np.asarray(result[port]) for port in compiled.outputs]
    if args.outputs:
        np.savez(args.outputs, **{f"out{i}": o for i, o in enumerate(outputs)})
    print(json.dumps({
        "engine": "openvino" if args.precision == "default" else "openvino-f32",
        "openvino": ov.__version__, "numpy": np.__version__, "config": config,
        "inference_precision": _type_name(compiled.get_property("INFERENCE_PRECISION_HINT")),
        "session_load_s": load_s, "fed": sorted(feeds), "times_s": times,
        "warmup": args.warmup, "runs": args.runs, "peak_rss_bytes": peak,
        "rss_after_import_bytes": rss_after_import,
    }))


if __name__ == "__main__":
    main()
