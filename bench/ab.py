"""Paired A/B of ``.mxc`` artifacts in one process: how a change moves whole-model latency
on a shared, noisy machine.

Separate runs of one artifact moved by 2x on the machine mxc was tuned on, so a
change is judged by a ratio measured in pairs: the artifacts run in alternating
blocks (first-to-last, then last-to-first), each block's figure is the fastest
of its calls, and the report is the median, over blocks, of each artifact's
figure divided by the first one's in the same block.  The artifacts' outputs
on the same random inputs are compared first (the largest difference from the
first artifact's)::

    python bench/ab.py base.mxc changed.mxc [more.mxc ...] [--blocks 40 --calls 10]
"""

from __future__ import annotations

import argparse
import functools
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.timing import measure  # noqa: E402


def paired(paths: list[str], blocks: int, calls: int, warmup: int = 5) -> dict:
    """{"diffs": largest |output - first artifact's output| per other artifact,
    "block_s": per artifact, each block's fastest call (seconds), "ratios": per other
    artifact, the median and quartiles of its per-block ratio to the first}."""
    import numpy as np

    import mxc.runtime
    sessions = [mxc.runtime.load(p) for p in paths]
    rng = np.random.default_rng(0)
    feed = {i.name: rng.standard_normal(i.shape).astype(i.dtype) for i in sessions[0].inputs}
    ref = sessions[0].run(feed)
    diffs = []
    for s in sessions[1:]:
        outs = s.run(feed)
        diffs.append(max(float(np.max(np.abs(a.astype(np.float64) - b))) if a.size else 0.0
                         for a, b in zip(ref, outs)))
    runs = [functools.partial(s.run, feed) for s in sessions]
    for run in runs:
        measure(run, warmup, 0)
    block_s: list[list[float]] = [[] for _ in sessions]
    for b in range(blocks):
        order = range(len(runs)) if b % 2 == 0 else reversed(range(len(runs)))
        for k in order:
            block_s[k].append(min(measure(runs[k], 0, calls)))
    ratios = []
    for k in range(1, len(sessions)):
        r = [x / y for x, y in zip(block_s[k], block_s[0])]
        q = statistics.quantiles(r, n=4) if len(r) > 1 else [r[0], r[0], r[0]]
        ratios.append({"median": statistics.median(r), "q1": q[0], "q3": q[2]})
    return {"diffs": diffs, "block_s": block_s, "ratios": ratios}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("artifacts", nargs="+", help="two or more .mxc files; the first is the base")
    ap.add_argument("--blocks", type=int, default=40)
    ap.add_argument("--calls", type=int, default=10)
    args = ap.parse_args(argv)
    if len(args.artifacts) < 2:
        ap.error("give at least two artifacts")
    res = paired(args.artifacts, args.blocks, args.calls)
    for path, times in zip(args.artifacts, res["block_s"]):
        print(f"{path}: median of block minima {statistics.median(times) * 1e3:.3f} ms")
    for path, diff, r in zip(args.artifacts[1:], res["diffs"], res["ratios"]):
        print(f"{path} / {args.artifacts[0]}: paired ratio median {r['median']:.3f} "
              f"(IQR {r['q1']:.3f}-{r['q3']:.3f}); largest output difference {diff:.3g}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
