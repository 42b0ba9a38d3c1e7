"""mxc runtime overhead per call: ``Session.run`` vs. the compiled VM function alone.

A model of one small elementwise op (``relu`` on a 1x16 float32 tensor by
default) is compiled with ``mxc.compile``, saved and loaded with
``mxc.runtime.load``, so the kernel itself costs next to nothing and what is
left is the cost of a call.  Each call is timed alone; reported is the median
of ``--calls`` calls per variant, the variants interleaved in ``--blocks``
blocks (a warm-up before each) so a burst of load elsewhere hits them alike:

* ``Session.run(feeds)``: feed checks, numpy -> tensor, the VM call, output copy
  to a fresh numpy array -- what a user pays per call;
* the VM function alone: the same compiled library loaded as a TVM runtime
  module, a Relax VM created over it and its region function called on a
  prepared tensor (``vm["region0"](tensor)``) -- TVM's floor;
* the VM call plus converting the output to numpy (the part of the overhead
  any runtime has to pay).

The overhead is ``median(Session.run) - median(VM call)``, in microseconds.

    python bench/bench_overhead.py [--calls 5000] [--shape 1,16] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench import machine  # noqa: E402


def probe(shape: tuple[int, ...], calls: int, warmup: int, op: str = "relu",
          blocks: int = 10) -> dict:
    import numpy as np
    import mxc
    import mxc.runtime
    from mxc import sym as S
    from mxc.runtime import _tvm
    from mxc.runtime.artifact import extract_library, read_artifact

    from bench.timing import measure, summarize

    x = S.var("data")
    y = S.relu(x, name="relu") if op == "relu" else S.exp(x, name="exp")
    model = mxc.compile(y, {}, shapes={"data": shape}, name=f"overhead-{op}")
    with tempfile.TemporaryDirectory(prefix="mxc-overhead-") as tmp:
        path = Path(tmp) / "tiny.mxc"
        model.save(path)
        sess = mxc.runtime.load(path)
        art = read_artifact(path)
        libdir, lib = extract_library(art.library)
        try:
            module = _tvm.load_module(lib)
        finally:  # the mapping stays valid after unlinking (as the runtime does)
            shutil.rmtree(libdir, ignore_errors=True)
    functions = [r["function"] for r in art.manifest["regions"]]
    if len(functions) != 1 or sess.host_nodes:
        raise SystemExit(f"expected one compiled region, got {functions} and host nodes "
                         f"{sess.host_nodes}")
    vm = _tvm.create_vm(module, "cpu", 0)
    fn = vm[functions[0]]

    data = np.random.default_rng(0).standard_normal(shape, dtype=np.float32)
    feeds = {"data": data}
    tensor = _tvm.from_numpy(_aligned(data))

    def vm_call():
        return fn(tensor)

    def vm_call_numpy():
        out = fn(tensor)
        return _tvm.to_numpy(out[0] if not hasattr(out, "shape") else out)

    want = np.maximum(data, 0) if op == "relu" else np.exp(data)
    np.testing.assert_allclose(sess.run(feeds)[0], want, rtol=1e-6)
    np.testing.assert_allclose(vm_call_numpy(), want, rtol=1e-6)

    # interleaved blocks, so a burst of load elsewhere hits every variant alike
    variants = (("session_run", lambda: sess.run(feeds)), ("vm_call", vm_call),
                ("vm_call_to_numpy", vm_call_numpy))
    times: dict[str, list] = {name: [] for name, _ in variants}
    times["profile_overhead"] = []
    block = max(1, calls // blocks)
    for _ in range(blocks):
        for name, fn_ in variants:
            times[name] += measure(fn_, warmup, block)
        times["profile_overhead"] += [sess.run(feeds, profile=True)[1].overhead
                                      for _ in range(min(block, 200))]
    results = {name: summarize(ts) for name, ts in times.items()}
    us = {k: v["median_ms"] * 1e3 for k, v in results.items()}
    return {"op": op, "shape": list(shape), "calls": block * blocks, "blocks": blocks,
            "warmup": warmup,
            "function": functions[0], "median_us": us,
            "overhead_us": us["session_run"] - us["vm_call"],
            "overhead_beyond_output_copy_us": us["session_run"] - us["vm_call_to_numpy"],
            "stats_ms": results}


def _aligned(arr):
    import numpy as np
    raw = np.empty(arr.nbytes + 64, dtype=np.uint8)
    off = (-raw.ctypes.data) % 64
    out = raw[off:off + arr.nbytes].view(arr.dtype).reshape(arr.shape)
    out[...] = arr
    return out


def render(res: dict, info: dict) -> str:
    st = res["stats_ms"]

    def row(label, key):
        s = st[key]
        return (f"| {label} | {s['median_ms'] * 1e3:.1f} | {s['p10_ms'] * 1e3:.1f}–"
                f"{s['p90_ms'] * 1e3:.1f} |")

    shape = "x".join(map(str, res["shape"]))
    lines = [f"mxc runtime overhead: `{res['op']}` on float32 {shape}, median of "
             f"{res['calls']} calls per variant (variants interleaved in {res['blocks']} blocks, "
             f"{res['warmup']} warm-up calls before each)", "",
             "| call | median µs | p10–p90 µs |", "|---|---|---|",
             row("`Session.run(feeds)`", "session_run"),
             row(f"VM function alone (`vm[\"{res['function']}\"](tensor)`)", "vm_call"),
             row("VM function + output to numpy", "vm_call_to_numpy"),
             row("`Profile.overhead` (run minus steps)", "profile_overhead"), "",
             f"**Overhead of `Session.run` over the VM call: {res['overhead_us']:.1f} µs per "
             f"call** ({res['overhead_beyond_output_copy_us']:.1f} µs beyond the output copy).",
             "", f"Machine: {info['cpu']['model']}, {info['cpu']['available_cores']} cores, "
             f"threads {info['threads'].get('TVM_NUM_THREADS')}, load average "
             f"{info.get('load_average')}."]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=5000)
    ap.add_argument("--warmup", type=int, default=50, help="untimed calls before each block")
    ap.add_argument("--blocks", type=int, default=10,
                    help="interleave the variants in this many blocks of calls/blocks")
    ap.add_argument("--shape", default="1,16", help="input shape (default 1,16)")
    ap.add_argument("--op", choices=("relu", "exp"), default="relu")
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--json", default=None, help="write the results here too")
    args = ap.parse_args(argv)
    machine.configure_threads(args.threads)
    shape = tuple(int(d) for d in args.shape.split(",") if d)
    res = probe(shape, args.calls, args.warmup, args.op, args.blocks)
    info = machine.machine_info()
    print(render(res, info))
    if args.json:
        Path(args.json).write_text(json.dumps({**res, "machine": info}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
