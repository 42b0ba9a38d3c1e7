"""Latency measurement shared by every engine (standard library only).

The same protocol is used for mxc (in the harness process) and the peers (in
their subprocesses): *warmup* untimed calls, then *runs* calls each timed
alone with :func:`time.perf_counter`, the garbage collector off while timing.
Raw per-call times (seconds) travel between processes; :func:`summarize`
turns them into the reported statistics.
"""

from __future__ import annotations

import gc
import math
import time
from typing import Callable


def measure(fn: Callable[[], object], warmup: int, runs: int) -> list[float]:
    """Call *fn* ``warmup`` times untimed, then ``runs`` times; per-call seconds."""
    for _ in range(max(0, warmup)):
        fn()
    times: list[float] = []
    enabled = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        for _ in range(runs):
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
    finally:
        if enabled:
            gc.enable()
    return times


def percentile(values: list[float], q: float) -> float:
    """The *q*-th percentile (0..100), linear interpolation as ``numpy.percentile``."""
    if not values:
        return math.nan
    xs = sorted(values)
    pos = (len(xs) - 1) * q / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def summarize(times_s: list[float]) -> dict:
    """Median, p10/p90, quartiles, min/max and mean of per-call times, in milliseconds."""
    ms = [t * 1e3 for t in times_s]
    if not ms:
        return {"n": 0}
    return {
        "n": len(ms),
        "median_ms": percentile(ms, 50),
        "p10_ms": percentile(ms, 10),
        "p90_ms": percentile(ms, 90),
        "q1_ms": percentile(ms, 25),
        "q3_ms": percentile(ms, 75),
        "min_ms": min(ms),
        "max_ms": max(ms),
        "mean_ms": sum(ms) / len(ms),
    }


def fmt_latency(stats: dict | None) -> str:
    """``"12.3 ms (11.9–13.0)"``: the median and the p10–p90 range."""
    if not stats or not stats.get("n"):
        return "–"

    def f(x: float) -> str:
        return f"{x:.3g}" if x < 10 else f"{x:.1f}" if x < 1000 else f"{x:.0f}"
    return f"{f(stats['median_ms'])} ms ({f(stats['p10_ms'])}–{f(stats['p90_ms'])})"
