"""Served latency of two source trees, same run, alternating: how a change to the
serving path moves a client's latency on a shared, noisy machine.

Starts ``python -m mxc serve`` once per tree (``PYTHONPATH=TREE``, one model: the
example MLP at batch 1, compiled once by this tree), then sends JSON infer
requests from one keep-alive connection per server, alternating between the
servers in blocks of ``--block`` requests, so both see the same drift of the
machine's load.  Every answer's status is checked and the first one's values
compared with the other server's.  Prints median, p90 and p99 per tree (ms), the
server's CPU time per request (user + system, all its threads: less moved by
the neighbours' load than wall time) and the median of the per-block ratios of
medians (B / A)::

    python bench/served_ab.py /work/main . --requests 2000 [--block 50 --batch 1]

With ``--route`` it runs ``bench/route_cost.py`` instead, once per tree and
round, alternating (``--rounds``): the request path in process, without
sockets, where a change of tens of microseconds is not lost in the noise.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _compile(batch: int, out: Path) -> None:
    code = ("import mxc; sym, a, x = mxc.load_checkpoint(%r, 0)\n"
            "mxc.compile(sym, (a, x), {'data': (%d, 784)}).save(%r)\n"
            % (str(ROOT / "examples" / "mlp" / "mlp"), batch, str(out)))
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True,
                   env=dict(os.environ, PYTHONPATH=str(ROOT)))


def _cpu_seconds(pid: int) -> float:
    """User + system CPU time of process *pid* (all its threads), from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _start(tree: Path, artifact: Path, log: Path) -> tuple[subprocess.Popen, int]:
    port = _free_port()
    proc = subprocess.Popen([sys.executable, "-m", "mxc", "serve", str(artifact), "--port",
                             str(port), "--grpc-port", "0", "--model-control-mode", "none"],
                            cwd=tree, env=dict(os.environ, PYTHONPATH=str(tree)),
                            stdout=open(log, "wb"), stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            conn.request("GET", "/v2/health/ready")
            if conn.getresponse().status == 200:
                return proc, port
        except OSError:
            time.sleep(0.2)
    proc.kill()
    raise SystemExit(f"{tree}: server did not start; see {log}")


def _route(args, artifact: Path) -> int:
    """``bench/route_cost.py`` per tree, alternating rounds; medians over rounds."""
    runs: dict[str, list[dict]] = {"A": [], "B": []}
    for r in range(args.rounds):
        for k in ("AB" if r % 2 == 0 else "BA"):
            tree = (args.a if k == "A" else args.b).resolve()
            out = subprocess.run([sys.executable, str(ROOT / "bench" / "route_cost.py"),
                                  str(artifact), "--requests", str(args.requests)]
                                 + (["--binary"] if args.binary else []), cwd=tree,
                                 env=dict(os.environ, PYTHONPATH=str(tree)), check=True,
                                 capture_output=True, text=True)
            runs[k].append(json.loads(out.stdout.strip().splitlines()[-1]))
    print(json.dumps({k: {"tree": str(args.a if k == "A" else args.b), "rounds": v,
                          **{f"median_of_{m}": statistics.median(x[m] for x in v)
                             for m in v[0]}} for k, v in runs.items()}, indent=1))
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("a", type=Path, help="tree A (the baseline)")
    p.add_argument("b", type=Path, help="tree B (the change)")
    p.add_argument("--requests", type=int, default=2000, help="per tree (default 2000)")
    p.add_argument("--block", type=int, default=50)
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--route", action="store_true", help="in process: bench/route_cost.py")
    p.add_argument("--binary", action="store_true", help="with --route: binary bodies")
    p.add_argument("--rounds", type=int, default=3, help="with --route (default 3)")
    args = p.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="served-ab-"))
    artifact = work / "mlp.mxc"
    _compile(args.batch, artifact)
    if args.route:
        return _route(args, artifact)
    x = np.random.default_rng(0).standard_normal((args.batch, 784)).astype("float32")
    body = json.dumps({"inputs": [{"name": "data", "datatype": "FP32", "shape": list(x.shape),
                                   "data": x.ravel().tolist()}]}).encode()
    headers = {"Content-Type": "application/json"}
    servers = [_start(t.resolve(), artifact, work / f"serve-{i}.log")
               for i, t in enumerate((args.a, args.b))]
    try:
        conns = [http.client.HTTPConnection("127.0.0.1", port, timeout=30) for _, port in servers]
        lat: list[list[float]] = [[], []]
        firsts: dict[int, np.ndarray] = {}
        blocks: list[tuple[float, float]] = []

        def one(k: int) -> float:
            t = time.perf_counter()
            conns[k].request("POST", "/v2/models/mlp/infer", body, headers)
            r = conns[k].getresponse()
            data = r.read()
            took = time.perf_counter() - t
            if r.status != 200:
                raise SystemExit(f"tree {'AB'[k]}: {r.status} {data[:200]!r}")
            if k not in firsts:
                firsts[k] = np.asarray(json.loads(data)["outputs"][0]["data"])
            return took
        for k in (0, 1):   # warm-up, not counted
            for _ in range(50):
                one(k)
            lat[k].clear()
        cpu0 = [_cpu_seconds(proc.pid) for proc, _ in servers]
        done = 0
        while done < args.requests:
            n = min(args.block, args.requests - done)
            order = (0, 1) if (done // args.block) % 2 == 0 else (1, 0)
            block = {}
            for k in order:
                block[k] = [one(k) for _ in range(n)]
                lat[k] += block[k]
            blocks.append((statistics.median(block[0]), statistics.median(block[1])))
            done += n
        cpu = [_cpu_seconds(proc.pid) - c for (proc, _), c in zip(servers, cpu0)]
    finally:
        for proc, _ in servers:
            proc.terminate()
            proc.wait(30)
    out = {}
    for k, tree in enumerate((args.a, args.b)):
        ms = np.asarray(lat[k]) * 1e3
        out["AB"[k]] = {"tree": str(tree), "n": len(ms), "median_ms": float(np.median(ms)),
                        "p90_ms": float(np.percentile(ms, 90)),
                        "p99_ms": float(np.percentile(ms, 99)),
                        "server_cpu_ms_per_request": cpu[k] * 1e3 / len(ms)}
    out["median_block_ratio_B_over_A"] = statistics.median(b / a for a, b in blocks)
    if len(firsts) == 2:
        out["max_abs_diff"] = float(np.max(np.abs(firsts[0] - firsts[1])))
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
