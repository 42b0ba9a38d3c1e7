"""Serving throughput: K calling threads at batch 1 vs one thread at batch K, and thread churn.

For each model, two static artifacts are compiled (batch 1 and batch K) and
saved, and three ways of serving K images at a time are timed in one process,
interleaved in ``--blocks`` blocks so a burst of load elsewhere hits them alike:

* ``batch K, 1 thread``: one caller runs the batch-K artifact;
* ``batch 1, K threads``: K long-lived threads each run the batch-1 artifact
  (one session shared, as a threaded server does);
* ``batch 1, churn``: every call on a *new* thread, started and joined per
  call (a thread-per-request server), compared with ``batch 1, 1 long-lived
  thread`` calling the same session one call at a time.

Reported: images per second of each (median over blocks) and the churn cost
ratio (seconds per call on a new thread / on a long-lived thread).

The churn comparison is timed call by call, interleaved (a long-lived call, a
call on a new thread, an empty thread started and joined, and again), and
each is the median over all calls: on a shared machine a burst of load then
hits the three alike, where back-to-back blocks of a few calls each did not.
The empty thread is Python's own price of a thread per call (start + join),
which no runtime can remove; ``churn cost net of thread start`` is
``(churn - empty thread) / long-lived``: what a new calling thread costs
inside ``Session.run`` beyond a long-lived one.  Dynamic
batch (a bucketed artifact) vs static artifacts: ``bench/bench_buckets.py``.

    python bench/bench_serving.py [--models squeezenet1.1,mobilenetv2_0.25,resnet18_v1]
        [--k 4] [--calls 8] [--blocks 5] [--json out.json]

Models are corpus directories (``$MXC_CORPUS/models/NAME``, default
``../shared/corpus/models/NAME``: ``symbol.json`` + ``model.params``) or ``mlp``
(``examples/mlp``, the smoke test's).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench import machine  # noqa: E402


def _model(name: str):
    """(symbol, (arg, aux), input name, per-image input shape)."""
    import mxc
    from mxc.compiler.symbol import load
    from mxc.frontend.params import load_params, split_arg_aux
    if name == "mlp":
        sym, arg, aux = mxc.load_checkpoint(str(REPO / "examples" / "mlp" / "mlp"), 0)
        return sym, (arg, aux), "data", (784,)
    from bench.bench_models import corpus_root
    d = corpus_root(None) / "models" / name
    if (d / "symbol.json").is_file():
        meta = json.loads((d / "meta.json").read_text())
        (inp, spec), = meta["inputs"].items()
        params = load_params(str(d / "model.params"))
        return load(str(d / "symbol.json")), split_arg_aux(params), inp, \
            tuple(spec["shape"][1:])
    raise SystemExit(f"no model {name!r} (a corpus directory or 'mlp')")


def _threads_rate(sess, feed, k: int, calls: int) -> float:
    """Images/s of *k* long-lived threads, *calls* batch-1 calls each."""
    start = threading.Barrier(k + 1)

    def worker():
        start.wait()
        for _ in range(calls):
            sess.run(feed)
    ts = [threading.Thread(target=worker) for _ in range(k)]
    for t in ts:
        t.start()
    start.wait()
    t0 = time.perf_counter()
    for t in ts:
        t.join()
    return k * calls / (time.perf_counter() - t0)


def _interleaved(sess, feed, calls: int) -> dict[str, list[float]]:
    """Seconds of each of *calls* rounds of: a long-lived call, a call on a new thread,
    an empty thread started and joined (see the module docstring)."""
    out: dict[str, list[float]] = {"long-lived": [], "churn": [], "empty thread": []}
    clock = time.perf_counter
    for _ in range(calls):
        t0 = clock()
        sess.run(feed)
        t1 = clock()
        t = threading.Thread(target=sess.run, args=(feed,))
        t.start()
        t.join()
        t2 = clock()
        t = threading.Thread(target=int)
        t.start()
        t.join()
        t3 = clock()
        out["long-lived"].append(t1 - t0)
        out["churn"].append(t2 - t1)
        out["empty thread"].append(t3 - t2)
    return out


def _per_call(sess, feed, calls: int, churn: bool) -> float:
    """Seconds per batch-1 call, each on a new thread (*churn*) or on this one."""
    t0 = time.perf_counter()
    for _ in range(calls):
        if churn:
            t = threading.Thread(target=sess.run, args=(feed,))
            t.start()
            t.join()
        else:
            sess.run(feed)
    return (time.perf_counter() - t0) / calls


def bench_model(name: str, k: int, calls: int, blocks: int) -> dict:
    import numpy as np
    import mxc
    import mxc.runtime
    sym, params, inp, per_image = _model(name)
    rng = np.random.default_rng(0)
    with tempfile.TemporaryDirectory(prefix="mxc-serving-") as tmp:
        sessions = {}
        for batch in (1, k):
            t0 = time.perf_counter()
            model = mxc.compile(sym, params, {inp: (batch, *per_image)})
            path = model.save(Path(tmp) / f"{name}-b{batch}.mxc")
            sessions[batch] = mxc.runtime.load(path)
            print(f"  {name}: compiled batch {batch} in {time.perf_counter() - t0:.0f} s",
                  file=sys.stderr)
        feed1 = {inp: rng.standard_normal((1, *per_image), dtype=np.float32)}
        feedk = {inp: rng.standard_normal((k, *per_image), dtype=np.float32)}
        one, many = sessions[1], sessions[k]
        one.run(feed1), many.run(feedk)           # warm-up
        rows: dict[str, list[float]] = {"batch K, 1 thread": [], "batch 1, K threads": []}
        per_call: dict[str, list[float]] = {"long-lived": [], "churn": [], "empty thread": []}
        for _ in range(blocks):
            t0 = time.perf_counter()
            for _ in range(calls):
                many.run(feedk)
            rows["batch K, 1 thread"].append(k * calls / (time.perf_counter() - t0))
            rows["batch 1, K threads"].append(_threads_rate(one, feed1, k, calls))
            for key, times in _interleaved(one, feed1, k * calls).items():
                per_call[key] += times
        rates = {key: statistics.median(v) for key, v in rows.items()}
        med = {key: statistics.median(v) for key, v in per_call.items()}
        rates["batch 1, 1 long-lived thread"] = 1 / med["long-lived"]
        rates["batch 1, churn"] = 1 / med["churn"]
        return {"model": name, "k": k, "calls": calls, "blocks": blocks,
                "images_per_s": rates, "threads_budget": one.threads,
                "per_call_us": {key: v * 1e6 for key, v in med.items()},
                "churn_cost": med["churn"] / med["long-lived"],
                "churn_cost_net": (med["churn"] - med["empty thread"]) / med["long-lived"]}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", default="squeezenet1.1,mobilenetv2_0.25,resnet18_v1")
    p.add_argument("--k", type=int, default=4, help="threads / batch size (default 4)")
    p.add_argument("--calls", type=int, default=8, help="calls per thread per block")
    p.add_argument("--blocks", type=int, default=5)
    p.add_argument("--json", help="write the report here")
    args = p.parse_args(argv)
    info = machine.machine_info()
    print("\n".join(machine.format_machine(info)))
    results = []
    for name in args.models.split(","):
        res = bench_model(name.strip(), args.k, args.calls, args.blocks)
        results.append(res)
        print(f"\n{res['model']} (K={res['k']}, {res['threads_budget']} thread(s) per call, "
              f"median of {res['blocks']} blocks)")
        for key, rate in res["images_per_s"].items():
            print(f"  {key.replace('K', str(res['k'])):<32} {rate:10.1f} images/s")
        us = res["per_call_us"]
        print(f"  per call: long-lived {us['long-lived']:.0f} us, new thread {us['churn']:.0f} us, "
              f"empty thread start+join {us['empty thread']:.0f} us (medians, interleaved)")
        print(f"  churn cost (new thread per call / long-lived): {res['churn_cost']:.3f}x")
        print(f"  churn cost net of thread start (churn - empty thread) / long-lived: "
              f"{res['churn_cost_net']:.3f}x")
    if args.json:
        Path(args.json).write_text(json.dumps({"machine": info, "results": results}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
