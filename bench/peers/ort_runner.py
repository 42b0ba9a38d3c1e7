"""Time an ONNX model in ONNX Runtime's CPU provider (run by the peers' venv python).

    python ort_runner.py --model m.onnx --inputs in.npz --threads N \
        --warmup 5 --runs 30 --outputs out.npz

ONNX Runtime at its best for latency: ``GraphOptimizationLevel.ORT_ENABLE_ALL``,
``intra_op_num_threads`` = *threads* (all cores), sequential execution with
one inter-op thread, CPUExecutionProvider.  Each timed call is
``session.run(None, feeds)`` on the numpy inputs (outputs come back as numpy).

``peak_rss_bytes`` is the process's peak resident memory (``VmHWM``, see
``bench/memory.py``) after the timed calls; ``rss_after_import_bytes`` what
onnxruntime and numpy alone hold.

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


def main() -> None:
    ap = onnx_runner_arguments()
    args = ap.parse_args()

    import numpy as np
    import onnxruntime as ort

    rss_after_import = current_rss_bytes()

    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    so.intra_op_num_threads = args.threads
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    t0 = time.perf_counter()
    sess = ort.InferenceSession(args.model, so, providers=["CPUExecutionProvider"])
    load_s = time.perf_counter() - t0
    with np.load(args.inputs) as npz:
        inputs = {k: npz[k] for k in npz.files}
    feeds = {}
    for i in sess.get_inputs():
        if i.name in inputs:
            feeds[i.name] = inputs[i.name]
        else:  # e.g. a label the exporter kept: zeros of the declared shape
            shape = [d if isinstance(d, int) else 1 for d in i.shape]
            feeds[i.name] = np.zeros(shape, dtype=np.float32)

    def run():
        return sess.run(None, feeds)

    outputs = run()
    times = measure(run, args.warmup, args.runs)
    peak = peak_rss_bytes()
    if args.outputs:
        np.savez(args.outputs, **{f"out{i}": np.asarray(o) for i, o in enumerate(outputs)})
    print(json.dumps({
        "engine": "onnxruntime", "onnxruntime": ort.__version__, "numpy": np.__version__,
        "providers": sess.get_providers(), "graph_optimization_level": "ORT_ENABLE_ALL",
        "intra_op_num_threads": args.threads, "inter_op_num_threads": 1,
        "execution_mode": "ORT_SEQUENTIAL", "session_load_s": load_s,
        "fed": sorted(feeds), "times_s": times, "warmup": args.warmup, "runs": args.runs,
        "peak_rss_bytes": peak, "rss_after_import_bytes": rss_after_import,
    }))


if __name__ == "__main__":
    main()
