"""Served vs. in-process: requests/s and p50/p99 latency of ``mxc serve`` on loopback.

Each model is served by ``mxc serve`` in a subprocess on 127.0.0.1 (adaptive
batching on: ``--max-batch-size``, ``--max-latency-ms``); ``--concurrency``
client threads (default 1, 8, 32) each send batch-1 V2 requests (REST with
binary tensors and keep-alive connections, and gRPC with ``--protocols
rest,grpc``) until ``--requests`` have been answered.  Per row:

* ``req/s``, ``p50``/``p99`` of the served requests;
* ``batches``: how many runs the server made and their mean size (from
  ``/metrics``: ``mxc_batch_size`` count and sum);
* ``ceiling``: ``Session.run`` in this process of *the same batches* (as many
  runs, of sizes that add up to the same number of images, back to back), in
  images/s, and ``ratio`` = served req/s / ceiling (the issue's target: >= 0.8
  at concurrency 32);
* at concurrency 1, ``overhead`` = served p50 - in-process p50 of a batch-1
  ``run``, from a second pass that alternates one served request and one
  in-process call, so both see the same load (target: <= 1 ms on REST);
* ``floor`` (REST, concurrency 1, in the same rounds): the p50 of the same
  tritonclient call to a bare uvicorn app that reads the request and replays
  the server's recorded answer (:mod:`bench.http_floor`) -- the transport's own
  cost, which ``overhead`` contains and no change inside mxc can remove.

Also reported: the server's and the client's CPU time per request (from
``/proc`` and ``time.process_time``), since on a small machine the load
generator shares the cores with the server.

Models are ``.mxc`` paths or corpus names (``resnet18_v1``): a name is compiled
here with a dynamic batch ``1..MAX_BATCH`` once, into ``--cache``.  Bounded on
purpose (small request counts, one server at a time): the machine is shared.

    python bench/bench_served.py [--models resnet18_v1,mobilenetv2_0.25] [--requests 200]
        [--concurrency 1,8,32] [--max-batch-size 32 --max-latency-ms 2]
        [--protocols rest[,grpc]] [--no-floor] [--cache DIR] [--server-tree DIR] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
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


def _artifact(name: str, hi: int, cache: Path) -> Path:
    """*name* as an artifact path: a file as it is, else a corpus model compiled for 1..*hi*."""
    if name.endswith(".mxc") or Path(name).is_file():
        return Path(name)
    path = cache / f"1..{hi}" / f"{name}.mxc"   # served under its corpus name
    if not path.is_file():
        import mxc
        from bench.bench_serving import _model
        sym, params, inp, per_image = _model(name)
        t0 = time.perf_counter()
        path.parent.mkdir(parents=True, exist_ok=True)
        mxc.compile(sym, params, {inp: ((1, hi), *per_image)}).save(path)
        print(f"  {name}: compiled 1..{hi} in {time.perf_counter() - t0:.0f} s", file=sys.stderr)
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


def _metrics(base: str) -> dict[str, float]:
    """The server's batch count and summed batch size (``mxc_batch_size``)."""
    text = urllib.request.urlopen(f"{base}/metrics", timeout=10).read().decode()
    out = {"count": 0.0, "sum": 0.0}
    for line in text.splitlines():
        for key in out:
            if line.startswith(f"mxc_batch_size_{key}"):
                out[key] += float(line.rsplit(" ", 1)[1])
    return out


def _proc_cpu(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _ceiling(sess, name: str, x1: np.ndarray, runs: int, images: int) -> float:
    """Images/s of *runs* in-process batches adding up to *images* (sizes as even as can be)."""
    runs = max(1, runs)
    sizes = [images // runs + (1 if i < images % runs else 0) for i in range(runs)]
    feeds = {b: {name: np.repeat(x1, b, axis=0)} for b in set(sizes) if b > 0}
    for f in feeds.values():
        sess.run(f)   # warm (each bucket's library is loaded on first use)
    t0 = time.perf_counter()
    for b in sizes:
        if b:
            sess.run(feeds[b])
    return images / (time.perf_counter() - t0)


def _client(protocol: str, port: int, grpc_port: int, name: str, info, x: np.ndarray):
    """A per-thread client factory: returns a callable sending one request."""
    def make():
        if protocol == "grpc":
            import tritonclient.grpc as module
            client = module.InferenceServerClient(f"127.0.0.1:{grpc_port}")
        else:
            import tritonclient.http as module
            client = module.InferenceServerClient(f"127.0.0.1:{port}", connection_timeout=120,
                                                  network_timeout=120)
        inp = _input(module, info, x)
        return lambda: client.infer(name, [inp])
    return make


def bench_model(model: Path, args) -> list[dict]:
    import mxc.runtime
    sess = mxc.runtime.load(model)
    info = sess.inputs[0]
    shape = [1 if not isinstance(d, int) or d < 0 else d for d in info.shape]
    x = np.random.default_rng(0).standard_normal(shape).astype(info.dtype)
    name = model.stem
    port, grpc_port = _free_port(), _free_port()
    tree = args.server_tree or str(REPO)
    env = dict(os.environ, PYTHONPATH=tree + os.pathsep + os.environ.get("PYTHONPATH", ""))
    server = subprocess.Popen([sys.executable, "-m", "mxc", "serve", str(model.resolve()), "--port", str(port),
                               "--grpc-port", str(grpc_port), "--poll-seconds", "0",
                               "--max-batch-size", str(args.max_batch_size),
                               "--max-latency-ms", str(args.max_latency_ms)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env,
                              cwd=tree)   # `python -m` puts the working directory first
    base = f"http://127.0.0.1:{port}"
    rows = []
    floor_server = None
    try:
        for _ in range(600):
            try:
                if urllib.request.urlopen(f"{base}/v2/health/ready", timeout=1).status == 200:
                    break
            except OSError:
                time.sleep(0.2)
        ref = sess.run({info.name: x})[0]
        floor = None
        if args.floor and "rest" in args.protocols.split(","):
            floor_server, floor = _floor(port, name, info, x, env, tree)

        def in_process():
            return lambda: sess.run({info.name: x})
        for protocol in args.protocols.split(","):
            served = _client(protocol, port, grpc_port, name, info, x)
            check = served()()
            got = check.as_numpy(sess.outputs[0].name)
            np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-6)   # same model, same answer
            for conc in [int(c) for c in args.concurrency.split(",")]:
                _run_threads(conc, min(4 * conc, 64), served)   # warm-up: connections, buckets
                m0, c0, me0 = _metrics(base), _proc_cpu(server.pid), time.process_time()
                wall, lat = _run_threads(conc, args.requests, served)
                m1, c1, me1 = _metrics(base), _proc_cpu(server.pid), time.process_time()
                runs, images = int(m1["count"] - m0["count"]), int(m1["sum"] - m0["sum"])
                row = {"model": name, "protocol": protocol, "concurrency": conc,
                       "requests": len(lat), "req_per_s": len(lat) / wall,
                       "p50_ms": percentile(lat, 50) * 1e3, "p99_ms": percentile(lat, 99) * 1e3,
                       "batches": runs, "mean_batch": images / max(1, runs),
                       "server_cpu_us": (c1 - c0) / len(lat) * 1e6,
                       "client_cpu_us": (me1 - me0) / len(lat) * 1e6}
                row["ceiling_img_per_s"] = _ceiling(sess, info.name, x, runs, images)
                row["ratio"] = row["req_per_s"] / row["ceiling_img_per_s"]
                if conc == 1:   # overhead: served and in-process calls interleaved one by one
                    row.update(_overhead(served(), in_process(), args.requests,
                                         floor() if protocol == "rest" and floor else None))
                rows.append(row)
                print(_format(row), flush=True)
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(60)
        if floor_server is not None:
            floor_server.send_signal(signal.SIGTERM)
            floor_server.wait(60)
    return rows


def _overhead(one, alone, requests: int, floor=None) -> dict:
    """Served p50 over in-process p50 from calls interleaved one by one (so both see the
    same load), and the HTTP floor's p50 in the same rounds when *floor* is given."""
    rounds = []
    for _ in range(requests):
        t0 = time.perf_counter()
        one()
        t1 = time.perf_counter()
        alone()
        t2 = time.perf_counter()
        if floor is not None:
            floor()
        rounds.append((t1 - t0, t2 - t1, time.perf_counter() - t2))
    out = {"interleaved_served_p50_ms": percentile([r[0] for r in rounds], 50) * 1e3,
           "in_process_p50_ms": percentile([r[1] for r in rounds], 50) * 1e3}
    out["overhead_ms"] = out["interleaved_served_p50_ms"] - out["in_process_p50_ms"]
    if floor is not None:
        out["http_floor_p50_ms"] = percentile([r[2] for r in rounds], 50) * 1e3
    return out


def _floor(port: int, name: str, info, x: np.ndarray, env: dict, tree: str):
    """Start :mod:`bench.http_floor` replaying the server's own answer to one request; returns
    the process and a client factory sending the same request to it (see that module)."""
    import tempfile

    import tritonclient.http as hc
    from bench.http_floor import save_answer
    request, json_size = hc.InferenceServerClient.generate_request_body(
        [_input(hc, info, x)])
    headers = {"Content-Type": "application/octet-stream"}
    if json_size is not None:
        headers["Inference-Header-Content-Length"] = str(json_size)
    req = urllib.request.Request(f"http://127.0.0.1:{port}/v2/models/{name}/infer", data=request,
                                 headers=headers, method="POST")
    with urllib.request.urlopen(req, timeout=60) as answer:
        body, answer_headers = answer.read(), dict(answer.headers)
    fd, path = tempfile.mkstemp(prefix="mxc-floor-", suffix=".json")
    os.close(fd)
    save_answer(Path(path), answer_headers, body)
    floor_port = _free_port()
    proc = subprocess.Popen([sys.executable, "-m", "bench.http_floor", "--port", str(floor_port),
                             "--answer", path], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, env=env, cwd=str(REPO))
    for _ in range(300):
        try:
            socket.create_connection(("127.0.0.1", floor_port), timeout=1).close()
            break
        except OSError:
            time.sleep(0.1)
    os.unlink(path)   # read by the floor server as it started

    def make():
        client = hc.InferenceServerClient(f"127.0.0.1:{floor_port}", connection_timeout=120,
                                          network_timeout=120)
        inp = _input(hc, info, x)
        return lambda: client.infer(name, [inp])
    return proc, make


def _input(module, info, x: np.ndarray):
    inp = module.InferInput(info.name, list(x.shape), "FP32" if info.dtype == "float32" else "INT64")
    inp.set_data_from_numpy(x)
    return inp


_HEAD = (f"{'model':<18} {'proto':<5} {'conc':>4} {'req/s':>8} {'p50 ms':>8} {'p99 ms':>8} "
         f"{'batches':>11} {'ceiling/s':>9} {'ratio':>6} {'overhead':>8} {'floor':>6} "
         f"{'srv cpu':>8} {'cli cpu':>8}")


def _format(r: dict) -> str:
    over = f"{r['overhead_ms']:.3f}" if "overhead_ms" in r else ""
    floor = f"{r['http_floor_p50_ms']:.3f}" if "http_floor_p50_ms" in r else ""
    return (f"{r['model']:<18} {r['protocol']:<5} {r['concurrency']:>4} {r['req_per_s']:>8.1f} "
            f"{r['p50_ms']:>8.3f} {r['p99_ms']:>8.3f} {r['batches']:>5}x{r['mean_batch']:<5.1f} "
            f"{r['ceiling_img_per_s']:>9.1f} {r['ratio']:>6.2f} {over:>8} {floor:>6} "
            f"{r['server_cpu_us']:>6.0f}us {r['client_cpu_us']:>6.0f}us")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default="resnet18_v1,mobilenetv2_0.25",
                    help="artifact paths or corpus model names (compiled 1..MAX_BATCH)")
    ap.add_argument("--requests", type=int, default=200)
    ap.add_argument("--concurrency", default="1,8,32")
    ap.add_argument("--max-batch-size", type=int, default=32)
    ap.add_argument("--max-latency-ms", type=float, default=2.0)
    ap.add_argument("--protocols", default="rest", help="rest, grpc or rest,grpc")
    ap.add_argument("--no-floor", dest="floor", action="store_false",
                    help="skip the HTTP floor (bench/http_floor.py) of the REST overhead")
    ap.add_argument("--cache", default=str(REPO / "bench" / ".served-models"),
                    help="where compiled corpus models are kept between runs")
    ap.add_argument("--server-tree", help="run the server from this mxc source tree (e.g. an "
                    "older `git archive` of the repository) to compare servers on one client")
    ap.add_argument("--json")
    args = ap.parse_args(argv)
    cpu = cpu_info()
    print(f"CPU: {cpu.get('model', '?')}, {cpu.get('cores_available', cpu.get('logical_cpus', '?'))} "
          f"cores usable; load average {os.getloadavg()[0]:.1f}; batch-1 requests, "
          f"max_batch_size {args.max_batch_size}, max_latency_ms {args.max_latency_ms}")
    print(_HEAD)
    rows = []
    for name in args.models.split(","):
        rows += bench_model(_artifact(name.strip(), args.max_batch_size, Path(args.cache)), args)
    print(f"load average after: {os.getloadavg()[0]:.1f}")
    if args.json:
        Path(args.json).write_text(json.dumps({"cpu": cpu, "args": vars(args), "rows": rows},
                                              indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
