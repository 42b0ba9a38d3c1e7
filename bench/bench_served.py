"""Served vs. in-process: requests/s and p50/p99 latency of ``mxc serve`` on loopback.

An artifact (default: the example MLP compiled for batch 1 here) is served by
``mxc serve`` in a subprocess on 127.0.0.1; ``--concurrency`` client threads
(default 1, 8, 32) each send batch-1 V2 REST requests (binary tensors,
keep-alive connections) until ``--requests`` have been answered.  The ceiling
is ``Session.run`` in this process on the same batch-1 inputs, from the same
number of threads.  With a dynamic-batch artifact and ``--max-batch-size``
the server groups concurrent requests (adaptive batching); the report then
also gives the batches it ran (from ``/metrics``).

Bounded on purpose (small request counts; one server): the machine is shared.

    python bench/bench_served.py [--model M.mxc] [--requests 400] [--concurrency 1,8,32]
        [--max-batch-size 32 --max-latency-ms 2] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.machine import cpu_info  # noqa: E402
from bench.timing import percentile  # noqa: E402


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _mlp(tmp: Path) -> Path:
    import mxc
    sym, args, aux = mxc.load_checkpoint(str(REPO / "examples/mlp/mlp"), 0)
    path = tmp / "mlp.mxc"
    mxc.compile(sym, (args, aux), {"data": (1, 784)}).save(path)
    return path


def _run_threads(n_threads: int, total: int, call) -> tuple[float, list[float]]:
    """Wall time and per-call latencies of *total* calls spread over *n_threads*."""
    lat: list[float] = []
    lock = threading.Lock()
    left = [total]

    def worker():
        mine = []
        ctx = call()
        while True:
            with lock:
                if left[0] == 0:
                    break
                left[0] -= 1
            t0 = time.perf_counter()
            ctx()
            mine.append(time.perf_counter() - t0)
        with lock:
            lat.extend(mine)
    threads = [threading.Thread(target=worker) for _ in range(n_threads)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return time.perf_counter() - t0, lat


def _row(kind: str, conc: int, wall: float, lat: list[float]) -> dict:
    return {"kind": kind, "concurrency": conc, "requests": len(lat), "req_per_s": len(lat) / wall,
            "p50_ms": percentile(lat, 50) * 1e3, "p99_ms": percentile(lat, 99) * 1e3}


def _metric(base: str, name: str) -> float:
    text = urllib.request.urlopen(f"{base}/metrics", timeout=10).read().decode()
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith(name + "{") or line.startswith(name + " "))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", help="artifact to serve (default: examples/mlp at batch 1)")
    ap.add_argument("--requests", type=int, default=400)
    ap.add_argument("--concurrency", default="1,8,32")
    ap.add_argument("--max-batch-size", type=int, default=1)
    ap.add_argument("--max-latency-ms", type=float, default=2.0)
    ap.add_argument("--json")
    args = ap.parse_args(argv)
    import mxc.runtime
    import tritonclient.http as httpclient

    tmp = Path(tempfile.mkdtemp(prefix="bench-serving-"))
    model = Path(args.model) if args.model else _mlp(tmp)
    sess = mxc.runtime.load(model)
    info = sess.inputs[0]
    shape = [1 if not isinstance(d, int) or d < 0 else d for d in info.shape]
    x = np.random.default_rng(0).standard_normal(shape).astype(info.dtype)
    name = model.stem
    port, grpc_port = _free_port(), _free_port()
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    server = subprocess.Popen([sys.executable, "-m", "mxc", "serve", str(model), "--port", str(port),
                               "--grpc-port", "0", "--poll-seconds", "0",
                               "--max-batch-size", str(args.max_batch_size),
                               "--max-latency-ms", str(args.max_latency_ms)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    base = f"http://127.0.0.1:{port}"
    rows = []
    try:
        for _ in range(600):
            try:
                if urllib.request.urlopen(f"{base}/v2/health/ready", timeout=1).status == 200:
                    break
            except OSError:
                time.sleep(0.2)

        def served():
            client = httpclient.InferenceServerClient(f"127.0.0.1:{port}", connection_timeout=60,
                                                      network_timeout=60)
            inp = httpclient.InferInput(info.name, shape, "FP32" if info.dtype == "float32" else "INT64")
            inp.set_data_from_numpy(x)
            return lambda: client.infer(name, [inp])

        def in_process():
            return lambda: sess.run({info.name: x})
        for conc in [int(c) for c in args.concurrency.split(",")]:
            _run_threads(conc, min(4 * conc, 32), in_process)   # warm-up
            rows.append(_row("in-process", conc, *_run_threads(conc, args.requests, in_process)))
            _run_threads(conc, min(4 * conc, 32), served)
            runs0 = _metric(base, "mxc_batch_size_count")
            rows.append(_row("served", conc, *_run_threads(conc, args.requests, served)))
            rows[-1]["batches"] = _metric(base, "mxc_batch_size_count") - runs0
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(60)
    cpu = cpu_info()
    print(f"model {name} ({model}), {args.requests} batch-1 requests per row, REST binary, "
          f"max_batch_size {args.max_batch_size}; CPU: {cpu.get('model', '?')}, "
          f"{cpu.get('cores_available', cpu.get('logical_cpus', '?'))} cores usable")
    print(f"{'kind':<11} {'conc':>4} {'req/s':>9} {'p50 ms':>8} {'p99 ms':>8} {'batches':>8}")
    for r in rows:
        print(f"{r['kind']:<11} {r['concurrency']:>4} {r['req_per_s']:>9.1f} {r['p50_ms']:>8.3f} "
              f"{r['p99_ms']:>8.3f} {r.get('batches', ''):>8}")
    if args.json:
        Path(args.json).write_text(json.dumps({"cpu": cpu, "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
