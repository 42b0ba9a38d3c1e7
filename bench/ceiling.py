"""A compute ceiling for this machine: numpy float32 matmul (sgemm) GFLOP/s.

numpy's BLAS (OpenBLAS in the wheels) on square float32 matrices is a
practical upper bound for dense float32 arithmetic here; a compiled model's
GFLOP/s (FLOPs from :mod:`bench.flops` / latency) is reported as a fraction of
it.  :func:`measure_ceiling` runs the sgemm in subprocesses (the BLAS thread
count is fixed at start-up) with all cores and with one core, n = 1024 and
2048, best of ``runs`` each, and takes as the ceiling
``max(all-core best, cores x one-core best)``: on a shared machine the
all-core figure alone can come out far too low when another process holds a
core (BLAS threads then wait on each other), and a ceiling has to be an upper
bound.  Measured in the same run as the models so it sees the same machine.

    python bench/ceiling.py            # the full measurement (JSON)
    python bench/ceiling.py --n 1024 --single   # one size, this process's threads
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench.timing import measure, percentile  # noqa: E402


def sgemm_gflops(n: int = 1024, runs: int = 10, warmup: int = 2) -> dict:
    """Best and median GFLOP/s of ``a @ b`` for n x n float32 matrices."""
    import numpy as np

    rng = np.random.default_rng(0)
    a = rng.standard_normal((n, n), dtype=np.float32)
    b = rng.standard_normal((n, n), dtype=np.float32)
    c = np.empty((n, n), dtype=np.float32)
    times = measure(lambda: np.matmul(a, b, out=c), warmup, runs)
    flop = 2.0 * n ** 3
    return {"n": n, "runs": runs, "best_gflops": flop / min(times) / 1e9,
            "median_gflops": flop / percentile(times, 50) / 1e9,
            "blas": _blas_name()}


def _blas_name() -> str:
    try:
        import numpy as np
        cfg = np.show_config(mode="dicts")  # numpy >= 1.25
        blas = cfg.get("Build Dependencies", {}).get("blas", {})
        return f"{blas.get('name', '?')} {blas.get('version', '')}".strip()
    except Exception:  # noqa: BLE001 - older numpy
        return "?"


def measure_ceiling(threads: int, sizes=(1024, 2048), runs: int = 10) -> dict:
    """sgemm with *threads* and with 1 BLAS thread (subprocesses); the ceiling, see above."""
    import os
    import subprocess

    out: dict = {"sizes": list(sizes), "runs": runs, "threads": threads}
    for label, nthreads in (("all_cores", threads), ("one_core", 1)):
        env = dict(os.environ)
        for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
            env[var] = str(nthreads)
        best: dict = {}
        for n in sizes:
            res = subprocess.run([sys.executable, __file__, "--single", "--n", str(n),
                                  "--runs", str(runs)], capture_output=True, text=True,
                                 env=env, timeout=600)
            if res.returncode == 0:
                best[n] = json.loads(res.stdout)
        if best:
            top = max(best.values(), key=lambda r: r["best_gflops"])
            out[label] = {"best_gflops": top["best_gflops"], "n": top["n"],
                          "median_gflops": top["median_gflops"],
                          "by_n": {str(k): v["best_gflops"] for k, v in best.items()}}
            out["blas"] = top["blas"]
    candidates = []
    if "all_cores" in out:
        candidates.append(out["all_cores"]["best_gflops"])
    if "one_core" in out:
        candidates.append(threads * out["one_core"]["best_gflops"])
    out["best_gflops"] = max(candidates) if candidates else None
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--single", action="store_true",
                    help="one size in this process (its BLAS threads) instead")
    ap.add_argument("--n", type=int, default=1024)
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--threads", type=int, default=None)
    args = ap.parse_args()
    if args.single:
        print(json.dumps(sgemm_gflops(args.n, args.runs)))
        return
    from bench.machine import available_cores
    print(json.dumps(measure_ceiling(args.threads or available_cores(), runs=args.runs),
                     indent=1))


if __name__ == "__main__":
    main()
