"""Artifact size against the parameters, load time and latency, per corpus model.

    python bench/bench_artifact.py                          # the default corpus models
    python bench/bench_artifact.py --models resnet18_v1 mlp --winograd off
    python bench/bench_artifact.py --all                    # every model of both corpora

For every model: ``mxc.compile`` (default options: parameters bound, Winograd
``auto`` unless ``--winograd``) and ``save``, then, in a fresh process
(``bench/mxc_runner.py run``), ``mxc.runtime.load`` (timed: reading, checking,
loading the library, the load-time weight transforms) and ``Session.run``
(median of ``--runs``).  Reports the parameters' bytes (the arrays of
``model.params``), the artifact's bytes and its members (``lib.so``,
``params.npz``), their ratio, the manifest's ``winograd`` record (weights as
stored vs in memory) and the load and run times, as a markdown table.

The size target of the project is ``artifact <= 1.1 x params`` for a model
whose weights dominate; a model with a few hundred bytes of parameters is all
code (the library of even one kernel is tens of kB), so its ratio says nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

DEFAULT_MODELS = ["resnet18_v1", "mobilenetv2_0.25", "squeezenet1.1", "mobilenet0.25",
                  "lenet", "mlp", "fused_resnet18_v1_w0.5"]


def corpus_dirs(root: Path) -> dict[str, Path]:
    found = {}
    for split in ("models", "wave2/models"):
        base = root / split
        if base.is_dir():
            for d in sorted(base.iterdir()):
                if (d / "symbol.json").is_file() and (d / "model.params").is_file():
                    found.setdefault(d.name, d)
    return found


def measure(d: Path, workdir: Path, winograd: str | None, runs: int) -> dict:
    import numpy as np

    import mxc
    meta = json.loads((d / "meta.json").read_text())
    sym = mxc.sym.load(d / "symbol.json")
    params = mxc.nd.load(d / "model.params")
    params_bytes = sum(int(np.asarray(v.numpy() if hasattr(v, "numpy") else v).nbytes)
                       for v in params.values())
    with np.load(d / "io.npz") as npz:
        feeds = {k[4:]: npz[k] for k in npz.files if k.startswith("in__")}
    shapes = {k: tuple(v["shape"]) for k, v in meta["inputs"].items()}
    dtypes = {k: v["dtype"] for k, v in meta["inputs"].items() if v["dtype"] != "float32"}
    t0 = time.perf_counter()
    model = mxc.compile(sym, params, shapes=shapes, dtypes=dtypes or None, winograd=winograd)
    compile_s = time.perf_counter() - t0
    art = workdir / f"{d.name}.mxc"
    model.save(art)
    with zipfile.ZipFile(art) as zf:
        members = {i.filename: i.file_size for i in zf.infolist()}
    inputs = workdir / f"{d.name}-in.npz"
    np.savez(inputs, **{k: v for k, v in feeds.items()
                        if k in {i["name"] for i in model.manifest["inputs"]}})
    out = subprocess.run([sys.executable, str(REPO / "bench" / "mxc_runner.py"), "run",
                          "--artifact", str(art), "--inputs", str(inputs), "--warmup", "3",
                          "--runs", str(runs)], capture_output=True, text=True, check=False)
    run = json.loads(out.stdout.strip().splitlines()[-1]) if out.returncode == 0 else {}
    times = sorted(run.get("times_s", [])) or [float("nan")]
    return {"model": d.name, "params_bytes": params_bytes,
            "artifact_bytes": art.stat().st_size, "members": members,
            "ratio": art.stat().st_size / max(params_bytes, 1),
            "winograd": model.manifest.get("winograd"), "compile_s": compile_s,
            "load_s": run.get("load_s"), "run_ms": times[len(times) // 2] * 1e3,
            "error": None if out.returncode == 0 else out.stderr[-500:]}


def table(rows: list[dict]) -> str:
    lines = ["| model | params bytes | artifact bytes | lib.so | params.npz | artifact/params "
             "| winograd convs: stored -> in memory | load | run (median) |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        w = r.get("winograd") or {}
        wino = (f"{w.get('convolutions', 0)}: {w.get('stored_bytes', w.get('weight_bytes', 0)):,}"
                f" -> {w.get('memory_bytes', w.get('transformed_bytes', 0)):,}"
                if w.get("convolutions") else "–")
        load = f"{r['load_s'] * 1e3:.0f} ms" if r.get("load_s") is not None else "failed"
        lines.append(f"| {r['model']} | {r['params_bytes']:,} | {r['artifact_bytes']:,} | "
                     f"{r['members'].get('lib.so', 0):,} | {r['members'].get('params.npz', 0):,} "
                     f"| {r['ratio']:.2f} | {wino} | {load} | {r['run_ms']:.2f} ms |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="*", default=None)
    ap.add_argument("--all", action="store_true", help="every model of both corpora")
    ap.add_argument("--winograd", choices=("auto", "on", "off"), default=None)
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--corpus", default=os.environ.get("MXC_CORPUS")
                    or str(REPO.parent / "shared" / "corpus"))
    ap.add_argument("--json", default=None, help="write the rows here too")
    args = ap.parse_args()
    found = corpus_dirs(Path(args.corpus))
    names = sorted(found) if args.all else (args.models or DEFAULT_MODELS)
    rows = []
    with tempfile.TemporaryDirectory(prefix="mxc-bench-artifact-") as tmp:
        for name in names:
            if name not in found:
                print(f"{name}: not in the corpus", file=sys.stderr)
                continue
            try:
                rows.append(measure(found[name], Path(tmp), args.winograd, args.runs))
            except Exception as exc:  # noqa: BLE001 - report and go on
                print(f"{name}: {type(exc).__name__}: {exc}", file=sys.stderr)
                continue
            print(f"{name}: {rows[-1]['ratio']:.2f}x", file=sys.stderr, flush=True)
    print(table(rows))
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
