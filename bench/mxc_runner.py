"""Compile a model with mxc, or time a compiled artifact, in a process of its own.

    python mxc_runner.py compile --symbol S.json --params P.params \
        --shapes '{"data": [1, 3, 224, 224]}' --artifact m.mxc \
        [--dtypes '{"ids": "int32"}'] [--target llvm] [--db DIR] [--name NAME]
    python mxc_runner.py run --artifact m.mxc --inputs in.npz --warmup 5 --runs 30 --outputs out.npz

``bench/bench_models.py`` runs both as subprocesses, so that each one's peak
resident memory (``VmHWM``, :mod:`bench.memory`) is its own: a compile's (TVM
and mxc's compiler imported, ``mxc.compile`` + ``save``) and a deployment's
(``mxc.runtime.load`` of the artifact + ``Session.run``), measured the same way
as the peers' (``bench/peers/``).  TVM is imported before the compile clock
starts.  ``--db`` compiles with a tuning database; without it the compile has
none (``$MXC_TUNING_DB`` is then the only way one is used).

Prints one JSON object on the last line of stdout.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.memory import current_rss_bytes, peak_rss_bytes  # noqa: E402


def compile_model(args) -> dict:
    import numpy as np
    import tvm  # noqa: F401  (imported before the clock starts)
    import mxc
    import mxc.backends.tvm.compile  # noqa: F401

    # "compile_" keys: the harness merges the run's report (its own rss_*) into this one
    res: dict = {"engine": "mxc", "target": args.target,
                 "compile_rss_after_import_bytes": current_rss_bytes()}
    t0 = time.perf_counter()
    sym = mxc.sym.load(args.symbol)
    params = mxc.nd.load(args.params)
    res["load_model_s"] = time.perf_counter() - t0
    res["params_bytes"] = sum(int(np.asarray(v.numpy() if hasattr(v, "numpy") else v).nbytes)
                              for v in params.values())
    shapes = {k: tuple(v) for k, v in json.loads(args.shapes).items()}
    dtypes = json.loads(args.dtypes) if args.dtypes else None
    target = json.loads(args.target) if args.target.strip().startswith("{") else args.target
    t0 = time.perf_counter()
    model = mxc.compile(sym, params, shapes=shapes, dtypes=dtypes or None, target=target,
                        name=args.name, db=args.db, precision=args.precision)
    res["compile_only_s"] = time.perf_counter() - t0
    res["stages_s"] = dict(model.timings)
    t0 = time.perf_counter()
    model.save(args.artifact)
    res["save_s"] = time.perf_counter() - t0
    res["compile_s"] = res["compile_only_s"] + res["save_s"]  # what `mxc compile` costs
    res["artifact_bytes"] = Path(args.artifact).stat().st_size
    res["regions"] = len(model.regions)
    res["host_nodes"] = [f"{h['name']} ({h['op']}): {h['reason']}"
                         for h in model.manifest["host_nodes"]]
    res["target_string"] = model.target
    tuning = model.manifest.get("tuning_db")
    res["tuning_db"] = tuning["path"] if tuning else None
    res["variant"] = "tuned" if tuning else "untuned"
    if tuning:
        res["kernels"], res["kernels_tuned"] = tuning["kernels"], tuning["kernels_tuned"]
    res["compile_peak_rss_bytes"] = peak_rss_bytes()
    return res


def run_model(args) -> dict:
    import numpy as np
    import mxc.runtime

    from bench.timing import measure

    res: dict = {"engine": "mxc", "rss_after_import_bytes": current_rss_bytes()}
    t0 = time.perf_counter()
    sess = mxc.runtime.load(args.artifact)  # the deployed artifact, as a user loads it
    res["load_s"] = time.perf_counter() - t0
    res["rss_after_load_bytes"] = current_rss_bytes()
    with np.load(args.inputs) as npz:
        inputs = {k: npz[k] for k in npz.files}
    names = {i["name"] for i in sess.manifest["inputs"]}
    feeds = {k: v for k, v in inputs.items() if k in names}
    outputs = sess.run(feeds)
    res["times_s"] = measure(lambda: sess.run(feeds), args.warmup, args.runs)
    res["warmup"], res["runs"] = args.warmup, args.runs
    res["peak_rss_bytes"] = peak_rss_bytes()
    _, prof = sess.run(feeds, profile=True)
    res["profile_one_run"] = prof.as_dict()
    if args.outputs:
        np.savez(args.outputs, **{f"out{i}": np.asarray(o) for i, o in enumerate(outputs)})
    return res


def main() -> None:
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="mode", required=True)
    c = sub.add_parser("compile")
    c.add_argument("--symbol", required=True)
    c.add_argument("--params", required=True)
    c.add_argument("--shapes", required=True, help="JSON {input: shape}")
    c.add_argument("--dtypes", default=None, help="JSON {input: dtype} (not float32 ones)")
    c.add_argument("--target", default="llvm")
    c.add_argument("--db", default=None, help="tuning database directory")
    c.add_argument("--precision", default="fp32", choices=("fp32", "bf16", "auto"))
    c.add_argument("--name", default=None)
    c.add_argument("--artifact", required=True, help="the .mxc to write")
    r = sub.add_parser("run")
    r.add_argument("--artifact", required=True)
    r.add_argument("--inputs", required=True, help="npz keyed by input name")
    r.add_argument("--warmup", type=int, default=5)
    r.add_argument("--runs", type=int, default=30)
    r.add_argument("--outputs", help="save the outputs (out0, out1, ...) here")
    args = ap.parse_args()
    res = compile_model(args) if args.mode == "compile" else run_model(args)
    res[f"{args.mode}_env"] = {k: os.environ.get(k) for k in ("TVM_NUM_THREADS",
                                                              "OMP_NUM_THREADS",
                                                              "MXC_TUNING_DB")}
    print(json.dumps(res, default=str))


if __name__ == "__main__":
    main()
