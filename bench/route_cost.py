"""The CPU one V2 infer request costs mxc serve's event-loop thread, in process.

Runs the REST stack ``mxc serve`` assembles (KServe's app behind
:mod:`mxc.serving.infer_route`) for the example MLP at batch 1 and calls it as
an ASGI app, without sockets or uvicorn, so that what is measured is the
request's own path: decoding, checking, predict, encoding.  The event-loop
thread's CPU time (``time.thread_time``) leaves out the compiled code (it runs
on the runtime's executor, ``threads=1``) and most of the neighbours' noise on
a shared machine.  Meant to compare trees, alternating (``bench/served_ab.py
--route``)::

    PYTHONPATH=TREE python bench/route_cost.py MODEL.mxc --requests 2000 [--binary]

prints one JSON line: median and p99 wall time and loop-thread CPU per request (us).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time

import numpy as np


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("artifact")
    p.add_argument("--requests", type=int, default=2000)
    p.add_argument("--binary", action="store_true", help="binary-extension bodies, not JSON")
    args = p.parse_args()
    from mxc.serving.server import import_kserve
    import_kserve()
    from kserve.model_repository import ModelRepository
    from kserve.protocol.model_repository_extension import ModelRepositoryExtension
    from kserve.protocol.rest.server import RESTServer

    from mxc.serving.dataplane import MxcDataPlane
    from mxc.serving.infer_route import infer_route
    from mxc.serving.model import MxcModel

    model = MxcModel("mlp", args.artifact, threads=1)
    model.load()
    registry = ModelRepository()
    registry.update(model)
    dp = MxcDataPlane(model_registry=registry)
    RESTServer("kserve.model_server:app", dp, ModelRepositoryExtension(model_registry=registry),
               0).create_application()
    from kserve.model_server import app
    route = infer_route(app, dp, 1 << 30)
    x = np.random.default_rng(0).standard_normal((1, 784)).astype("float32")
    if args.binary:
        head = json.dumps({"inputs": [{"name": "data", "datatype": "FP32", "shape": [1, 784],
                                       "parameters": {"binary_data_size": x.nbytes}}]}).encode()
        body, extra = head + x.tobytes(), [(b"inference-header-content-length",
                                            str(len(head)).encode())]
    else:
        body = json.dumps({"inputs": [{"name": "data", "datatype": "FP32", "shape": [1, 784],
                                       "data": x.ravel().tolist()}]}).encode()
        extra = [(b"content-type", b"application/json")]
    path = "/v2/models/mlp/infer"
    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1",
             "method": "POST", "scheme": "http", "path": path, "raw_path": path.encode(),
             "query_string": b"", "root_path": "", "client": ("127.0.0.1", 1),
             "server": ("127.0.0.1", 2),
             "headers": [(b"content-length", str(len(body)).encode()), *extra]}

    async def one() -> tuple[float, float]:
        sent = []

        async def receive():
            return {"type": "http.request", "body": body, "more_body": False}

        async def send(message):
            sent.append(message)
        t, c = time.perf_counter(), time.thread_time()
        await route(dict(scope), receive, send)
        if sent[0]["status"] != 200:
            raise SystemExit(f"{sent[0]['status']}: {sent[1:]}")
        return time.perf_counter() - t, time.thread_time() - c

    async def run() -> list[tuple[float, float]]:
        for _ in range(200):
            await one()
        return [await one() for _ in range(args.requests)]
    got = np.asarray(asyncio.run(run())) * 1e6
    print(json.dumps({"median_us": float(np.median(got[:, 0])),
                      "p99_us": float(np.percentile(got[:, 0], 99)),
                      "loop_cpu_median_us": float(np.median(got[:, 1])),
                      "loop_cpu_mean_us": float(got[:, 1].mean())}))


if __name__ == "__main__":
    main()
