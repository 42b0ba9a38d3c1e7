"""Per-call overhead of a compiled-library operator (``my_gemm`` of the corpus's gemm_lib).

Small 2-D float32 tensors (2x3 @ 3x2 by default), so the library's own compute
is next to nothing and what is measured is the cost of a call through mxc:

* ``floor``: ``_opCallFCompute`` called through ctypes with every argument
  prepared once, without the C++ exception guard -- the library's compute
  plus one foreign call, the least any Python host can pay;
* ``host node``: ``OpDef.forward(params, inputs, ctx)`` -- what a compiled
  artifact's host node and the reference executor call per run (attributes
  cached, outputs allocated, arguments marshalled, the call, results
  collected);
* ``invoke``: ``mxc.library.native.invoke`` -- one imperative call
  (``mx.nd.my_gemm``): parseAttrs, inferShape and inferType through the
  library first, then the forward.

Overhead = median(variant) - median(floor), in microseconds (target: host
node <= 20 us).  Each variant: ``--calls`` calls timed alone after a warm-up,
the variants interleaved in ``--blocks`` blocks.

    python bench/bench_library_op.py [--lib path/libgemm_lib.so] [--calls 20000]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench import machine  # noqa: E402


def _library(path: str | None) -> Path:
    if path:
        return Path(path)
    corpus = REPO.parent / "shared" / "corpus" / "extensions"
    out = Path(tempfile.mkdtemp(prefix="mxc-bench-ext-"))
    subprocess.run(["bash", str(corpus / "build.sh"), "v11", str(out)], check=True,
                   capture_output=True)
    return out / "libgemm_lib.so"


def probe(lib: Path, n: int, k: int, m: int, calls: int, blocks: int) -> dict:
    import numpy as np

    import mxc
    from mxc.compiler.ops.registry import ForwardContext, get_op
    from mxc.library.native import invoke, op_entry
    from mxc.library.native.marshal import CallScope, tensor_block
    from mxc.library.native.marshal import NO_GPU_CALLBACK, SPARSE_CALLBACK, XPU_CALLBACK
    from mxc.library.native.calls import random_states
    from ctypes import c_void_p

    from bench.timing import measure, summarize

    mxc.library.load(lib, verbose=False)
    rs = np.random.RandomState(0)
    a = rs.rand(n, k).astype(np.float32)
    b = rs.rand(k, m).astype(np.float32)
    entry = op_entry("my_gemm")

    # floor: every ctypes argument built once
    keep: list = []
    out = np.zeros((n, m), np.float32)
    ins, in_sp = tensor_block([a, b], keep)
    outs, out_sp = tensor_block([out], keep)
    keys, vals, nkv = entry.kv({})
    scope = CallScope().__enter__()
    key = c_void_p(scope.key)
    tail = [XPU_CALLBACK, key, NO_GPU_CALLBACK, None, None, SPARSE_CALLBACK, key,
            in_sp[0], out_sp[0], in_sp[1], out_sp[1], in_sp[2], out_sp[2], in_sp[3], out_sp[3],
            in_sp[4], out_sp[4], c_void_p(random_states(entry)), None]
    fcompute = entry.lib.cdll._opCallFCompute   # typed by the ABI table; no exception guard
    fp = entry.forward

    def floor():
        fcompute(fp, keys, vals, nkv, *ins, *outs, *tail)

    # host node: what the executor / an artifact's host kernel does
    sym = mxc.sym.my_gemm(mxc.sym.var("a"), mxc.sym.var("b"))
    node = sym.graph.outputs[0].node
    opdef, params = get_op("my_gemm"), node.params
    ctx = ForwardContext(node=node, out_shapes=[(n, m)], out_dtypes=["float32"],
                         in_shapes=[a.shape, b.shape], in_dtypes=["float32", "float32"])

    def host_node():
        opdef.forward(params, [a, b], ctx)

    def imperative():
        invoke(entry, [a, b])

    np.testing.assert_allclose(invoke(entry, [a, b])[0], a @ b, rtol=1e-5)
    variants = {"floor": floor, "host node": host_node, "invoke": imperative}
    times: dict[str, list[float]] = {k: [] for k in variants}
    per_block = max(1, calls // blocks)
    for _ in range(blocks):
        for name, fn in variants.items():
            times[name] += measure(fn, warmup=200, runs=per_block)
    stats = {k: summarize(v) for k, v in times.items()}
    base = stats["floor"]["median_ms"] * 1e3
    return {
        "machine": machine.describe() if hasattr(machine, "describe") else None,
        "shape": [[n, k], [k, m]],
        "median_us": {k: s["median_ms"] * 1e3 for k, s in stats.items()},
        "overhead_us": {k: s["median_ms"] * 1e3 - base for k, s in stats.items() if k != "floor"},
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lib", help="libgemm_lib.so (default: build v11 from the corpus)")
    ap.add_argument("--shape", default="2,3,2", help="N,K,M of the N x K @ K x M gemm")
    ap.add_argument("--calls", type=int, default=20000)
    ap.add_argument("--blocks", type=int, default=10)
    ap.add_argument("--json", help="write the results here")
    args = ap.parse_args(argv)
    n, k, m = (int(x) for x in args.shape.split(","))
    result = probe(_library(args.lib), n, k, m, args.calls, args.blocks)
    for name, us in result["median_us"].items():
        extra = f"  (+{result['overhead_us'][name]:.1f} us over floor)" \
            if name in result["overhead_us"] else ""
        print(f"{name:>10}: {us:8.2f} us{extra}")
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
