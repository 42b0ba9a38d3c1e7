"""Dynamic batch (batch buckets in one artifact) vs static artifacts of the same batch.

For each model, static artifacts of batch 1 and batch B (default 8) and one
dynamic artifact of the range 1..B (buckets 1, 4 and B) are compiled and saved;
then, interleaved in ``--blocks`` blocks so a burst of load elsewhere hits them
alike, the seconds per call of:

* batch 1 and batch B on the static artifacts and on the dynamic one (a bucket
  of their own: the dynamic cost is the dispatch, the same compiled code runs);
* batch 3 on the dynamic artifact (padded into the bucket of 4) and batch 4 on
  it, to show what padding costs next to running the bucket exactly.

Reported: median seconds per call and the dynamic / static ratios (issue 24
asks for <= 1.10x at batch 1 and at batch 8).

    python bench/bench_buckets.py [--models resnet18_v1,mobilenetv2_0.25,squeezenet1.1]
        [--batch 8] [--calls 10] [--blocks 5] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench import machine  # noqa: E402
from bench.bench_serving import _model, _per_call  # noqa: E402 - (symbol, params, input, row)


def bench_model(name: str, batch: int, calls: int, blocks: int) -> dict:
    import numpy as np
    import mxc
    import mxc.runtime
    sym, params, inp, row = _model(name)
    rng = np.random.default_rng(0)
    with tempfile.TemporaryDirectory(prefix="mxc-buckets-") as tmp:
        t0 = time.perf_counter()
        static = {b: mxc.runtime.load(mxc.compile(sym, params, {inp: (b, *row)}).save(
            Path(tmp) / f"{name}-b{b}.mxc")) for b in (1, batch)}
        t1 = time.perf_counter()
        dyn = mxc.runtime.load(mxc.compile(sym, params, {inp: ((1, batch), *row)},
                                           buckets=sorted({1, 4, batch})).save(
            Path(tmp) / f"{name}-dyn.mxc"))
        print(f"  {name}: static compiles {t1 - t0:.0f} s, dynamic {time.perf_counter() - t1:.0f} s",
              file=sys.stderr)
        feeds = {b: {inp: rng.standard_normal((b, *row), dtype=np.float32)}
                 for b in (1, 3, 4, batch)}
        cases = {"static b1": (static[1], 1), "dynamic b1": (dyn, 1),
                 f"static b{batch}": (static[batch], batch), f"dynamic b{batch}": (dyn, batch),
                 "dynamic b3 (padded to 4)": (dyn, 3), "dynamic b4": (dyn, 4)}
        for sess, b in cases.values():   # warm-up (and the buckets' libraries loaded)
            sess.run(feeds[b])
        times: dict[str, list[float]] = {k: [] for k in cases}
        for _ in range(blocks):
            for key, (sess, b) in cases.items():
                times[key].append(_per_call(sess, feeds[b], calls, churn=False))
        med = {k: statistics.median(v) for k, v in times.items()}
        return {"model": name, "batch": batch, "calls": calls, "blocks": blocks,
                "seconds_per_call": med,
                "ratio_b1": med["dynamic b1"] / med["static b1"],
                f"ratio_b{batch}": med[f"dynamic b{batch}"] / med[f"static b{batch}"]}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", default="resnet18_v1,mobilenetv2_0.25,squeezenet1.1")
    p.add_argument("--batch", type=int, default=8, help="top of the range (default 8)")
    p.add_argument("--calls", type=int, default=10, help="calls per case per block")
    p.add_argument("--blocks", type=int, default=5)
    p.add_argument("--json", help="write the report here")
    args = p.parse_args(argv)
    info = machine.machine_info()
    print("\n".join(machine.format_machine(info)))
    results = []
    for name in args.models.split(","):
        res = bench_model(name.strip(), args.batch, args.calls, args.blocks)
        results.append(res)
        print(f"\n{res['model']} (median of {res['blocks']} blocks of {res['calls']} calls)")
        for key, sec in res["seconds_per_call"].items():
            print(f"  {key:<28} {sec * 1e3:10.3f} ms/call")
        top = res[f"ratio_b{res['batch']}"]
        print(f"  dynamic / static: batch 1 {res['ratio_b1']:.3f}x, batch {res['batch']} "
              f"{top:.3f}x")
    if args.json:
        Path(args.json).write_text(json.dumps({"machine": info, "results": results}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
