"""Compile models with mxc and measure batch-1 CPU latency, optionally beside MXNet and ONNX Runtime.

    python bench/bench_models.py                 # mxc only, the three default corpus models
    python bench/bench_models.py --peers         # + MXNet 1.9.1 and ONNX Runtime, same run
    python bench/bench_models.py --models resnet18_v1 examples/mlp/mlp --runs 50
    python bench/bench_models.py --peers --models zoo:resnet50_v2 zoo:densenet121   # larger models
    python bench/bench_models.py --db tuning/    # untuned and tuned (mxc tune --db tuning/)
    python bench/bench_models.py --peers --db tuning/ --tune 64 --rounds 3   # tune, then measure

For every model: compile with ``mxc.compile`` (timed) and save the ``.mxc``
artifact in one subprocess (``bench/mxc_runner.py compile``), then in another
(``bench/mxc_runner.py run``) load it with ``mxc.runtime.load`` (the way a
user deploys it) and time ``Session.run``: ``--warmup`` untimed calls, then
``--runs`` timed calls; the median and the p10-p90 range are reported.  The
outputs are checked against the reference (``io.npz``: MXNet 1.9.1's outputs,
within ``meta.json``'s tolerance; for a checkpoint prefix, mxc's numpy
reference executor).  Each subprocess reports its peak resident memory
(``VmHWM``, see ``bench/memory.py``): the compile's and the deployment's.

With ``--db DIR`` (a tuning database from ``mxc tune --db DIR``) every model
is compiled and measured twice in the same run, untuned and tuned, and the
report shows both, the kernels taken from the database and the time ``mxc
tune`` spent on the model (from ``DIR/mxc-tune-log.jsonl``).  Without it,
``$MXC_TUNING_DB`` (if set) makes the one mxc measurement a tuned one.

With ``--peers`` MXNet (``simple_bind`` + ``forward(is_train=False)``, its
default oneDNN fusion on) and ONNX Runtime (MXNet's ONNX export,
``ORT_ENABLE_ALL``) time the same inputs, each in a subprocess of the
``bench/.venv-peers`` virtualenv (created on first use; see
``bench/peers/venv.py``), and their outputs are checked against the same
reference; their peak resident memory is reported too.  Every engine gets
the same thread count (all cores unless ``--threads``).  Results: markdown
tables on stdout and in ``--output`` (default
``bench/results/<date>-<time>.md``) and everything, raw per-call times
included, in ``--json`` (default: the same name with ``.json``).

Models are corpus names (``$MXC_CORPUS`` or ``../shared/corpus``) or
checkpoint prefixes (``PREFIX-symbol.json`` + ``PREFIX-<epoch>.params``;
inputs from ``--inputs``, an ``input.npz`` beside the checkpoint, or random
with ``--shape``).  Exit status 1 when an mxc compile/run (untuned or tuned)
fails or its outputs mismatch the reference.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench import machine  # noqa: E402  (stdlib only: safe before the thread setup)
from bench.memory import fmt_bytes  # noqa: E402  (stdlib only)

DEFAULT_MODELS = ["resnet18_v1", "mobilenetv2_0.25", "squeezenet1.1"]
SCHEMA = "mxc-bench-models/1"
ENGINES = ("mxc", "mxc-tuned", "mxnet", "onnxruntime")
ENGINE_TITLES = {"mxc": "mxc", "mxc-tuned": "mxc tuned", "mxc-bf16": "mxc bf16",
                 "mxnet": "MXNet", "onnxruntime": "ORT", "openvino": "OpenVINO default",
                 "openvino-f32": "OpenVINO f32"}
#: OpenVINO (``--openvino``): its default (bf16 on AMX/AVX512-BF16 CPUs) and float32
OPENVINO = ("openvino", "openvino-f32")
MXC_ENGINES = ("mxc", "mxc-tuned", "mxc-bf16")
PEERS = ("mxnet", "onnxruntime")
#: models named ``zoo:NAME`` are exported by MXNet into ZOO_DIR on first use
ZOO_PREFIX = "zoo:"
ZOO_DIR = REPO / "bench" / ".zoo"


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def corpus_root(arg: str | None) -> Path:
    return Path(arg or os.environ.get("MXC_CORPUS") or REPO.parent / "shared" / "corpus")


# ---------------------------------------------------------------------------
# models
# ---------------------------------------------------------------------------
@dataclass
class ModelSpec:
    name: str
    symbol: Path
    params: Path
    inputs: dict                       # input name -> np.ndarray (every data input we feed)
    reference: list | None = None      # expected outputs
    rtol: float = 1e-4
    atol: float = 1e-4
    reference_source: str = ""
    notes: list = field(default_factory=list)


def _parse_shapes(items: list[str]) -> dict[str, tuple]:
    shapes = {}
    for item in items:
        name, sep, dims = item.partition("=")
        if not sep:
            raise SystemExit(f"--shape {item!r}: expected NAME=D0,D1,...")
        shapes[name] = tuple(int(d) for d in dims.replace("x", ",").split(",") if d)
    return shapes


def resolve_model(name: str, args) -> ModelSpec:
    """A corpus model name, a corpus-format directory, or a checkpoint prefix
    (``--batch N``: its batch-1 inputs repeated N times)."""
    spec = _resolve_batch1(name, args)
    batch = getattr(args, "batch", 1) or 1
    return spec if batch == 1 else batched(spec, batch)


def batched(spec: ModelSpec, n: int) -> ModelSpec:
    """*spec* at batch *n*: every batch-1 input and reference output repeated *n* times
    along axis 0 (the samples are independent in inference, so the reference holds)."""
    import numpy as np
    if any(v.ndim == 0 or v.shape[0] != 1 for v in spec.inputs.values()):
        raise SystemExit(f"--batch {n}: {spec.name}'s inputs are not batch 1")
    ref = spec.reference
    if ref is not None:
        if any(r.ndim == 0 or r.shape[0] != 1 for r in ref):
            raise SystemExit(f"--batch {n}: {spec.name}'s outputs are not batch 1")
        ref = [np.repeat(r, n, axis=0) for r in ref]
    return ModelSpec(f"{spec.name}-b{n}", spec.symbol, spec.params,
                     {k: np.repeat(v, n, axis=0) for k, v in spec.inputs.items()}, ref,
                     spec.rtol, spec.atol, spec.reference_source + f", repeated to batch {n}",
                     list(spec.notes))


def _resolve_batch1(name: str, args) -> ModelSpec:
    if name.startswith(ZOO_PREFIX):
        return _corpus_spec(zoo_model(name[len(ZOO_PREFIX):], args))
    root = corpus_root(args.corpus) / "models"
    cand = [root / name, Path(name)]
    for d in cand:
        if (d / "symbol.json").is_file() and (d / "model.params").is_file():
            return _corpus_spec(d)
    prefix = Path(name)
    symbol = Path(f"{prefix}-symbol.json")
    if symbol.is_file():
        return _checkpoint_spec(prefix, symbol, args)
    known = sorted(p.name for p in root.iterdir()) if root.is_dir() else []
    raise SystemExit(f"model {name!r}: not a corpus model ({root}: {', '.join(known) or 'none'}) "
                     f"and no checkpoint {symbol}")


def zoo_model(name: str, args) -> Path:
    """``zoo:NAME``: a Gluon model-zoo network the corpus lacks (resnet50_v2,
    mobilenetv2_1.0, densenet121, inceptionv3), exported once by MXNet in the peers'
    venv into ``bench/.zoo/NAME`` in the corpus format, MXNet's outputs as reference
    (``bench/peers/zoo_export.py``)."""
    out = ZOO_DIR / name
    if (out / "io.npz").is_file():
        return out
    from bench.peers import venv
    python, _ = venv.ensure(base_python=args.peers_python, log=log)
    res = _run_child([str(python), str(REPO / "bench" / "peers" / "zoo_export.py"), name,
                      "--out", str(out)], args.timeout)
    if "error" in res:
        raise SystemExit(f"zoo:{name}: MXNet could not export it: {res['error']}")
    return out


def _corpus_spec(d: Path) -> ModelSpec:
    import numpy as np

    meta = json.loads((d / "meta.json").read_text()) if (d / "meta.json").is_file() else {}
    with np.load(d / "io.npz") as io:
        inputs = {k[4:]: io[k] for k in io.files if k.startswith("in__")}
        outs = sorted((k for k in io.files if k.startswith("out__")), key=lambda k: int(k[5:]))
        reference = [io[k] for k in outs]
    spec = ModelSpec(d.name, d / "symbol.json", d / "model.params", inputs, reference,
                     float(meta.get("rtol", 1e-4)), float(meta.get("atol", 1e-4)),
                     f"io.npz (MXNet {meta.get('mxnet_version', '?')}, "
                     f"{(meta.get('mxnet_exec') or {}).get('subgraph_backend', '?')} subgraph "
                     f"backend)")
    if meta.get("mkldnn_backend_matches") is False:
        spec.notes.append(f"MXNet's default oneDNN fusion is known to change this model's "
                          f"outputs (max |diff| {meta.get('mkldnn_backend_max_abs_diff')})")
    return spec


def _checkpoint_spec(prefix: Path, symbol: Path, args) -> ModelSpec:
    import numpy as np
    import mxc

    if args.epoch is not None:
        params = Path(f"{prefix}-{args.epoch:04d}.params")
    else:
        found = sorted(prefix.parent.glob(f"{prefix.name}-[0-9][0-9][0-9][0-9].params"))
        if not found:
            raise SystemExit(f"no {prefix}-NNNN.params beside {symbol}")
        params = found[-1]
    beside = prefix.parent / "input.npz"
    if args.inputs:
        with np.load(args.inputs) as npz:
            inputs = {k: npz[k] for k in npz.files}
        source = args.inputs
    elif beside.is_file() and not args.shape:
        with np.load(beside) as npz:
            inputs = {k: npz[k] for k in npz.files}
        source = str(beside)
    else:
        shapes = _parse_shapes(args.shape)
        if not shapes:
            raise SystemExit(f"{prefix}: no inputs; give --inputs FILE.npz or --shape "
                             f"data=1,3,224,224")
        rng = np.random.default_rng(0)
        inputs = {k: rng.standard_normal(v, dtype=np.float32) for k, v in shapes.items()}
        source = "random N(0,1), seed 0"
    # reference: mxc's numpy executor (the semantic oracle)
    sym, arg, aux = mxc.load_checkpoint(prefix, int(params.name[-11:-7]))
    reference = [np.asarray(o) for o in
                 sym.bind(args={**arg, **inputs}, aux_states=aux).forward()]
    scale = max([float(np.abs(r).max()) for r in reference if r.size] + [1e-3])
    spec = ModelSpec(prefix.name, symbol, params, inputs, reference, 1e-4, 1e-4 * scale,
                     "mxc numpy reference executor")
    spec.notes.append(f"inputs: {source}")
    return spec


def check_outputs(got: list, want: list | None, rtol: float, atol: float) -> dict:
    """Check every output as the corpus README says; ``ok`` False on any mismatch.

    Shapes and dtypes equal, NaNs in the same places and
    ``|got - want| <= atol + rtol * |want|`` elementwise (the rule of ``tests/oracle.py``).
    """
    import numpy as np

    if want is None:
        return {"ok": None, "detail": "no reference"}
    if len(got) != len(want):
        return {"ok": False, "detail": f"{len(got)} outputs, expected {len(want)}"}
    worst, bad = 0.0, []
    for i, (g, w) in enumerate(zip(got, want)):
        g = np.asarray(g)
        if g.shape != w.shape or g.dtype != w.dtype:
            bad.append(f"output {i}: {g.dtype}{list(g.shape)}, expected {w.dtype}{list(w.shape)}")
            continue
        diff = np.abs(g.astype(np.float64) - w.astype(np.float64))
        worst = max(worst, float(diff.max()) if diff.size else 0.0)
        if not np.allclose(g, w, rtol=rtol, atol=atol, equal_nan=True):
            n = int((diff > atol + rtol * np.abs(w)).sum())
            bad.append(f"output {i}: {n}/{w.size} elements off (max |diff| {diff.max():.3g})")
    return {"ok": not bad, "max_abs_diff": worst, "rtol": rtol, "atol": atol,
            "detail": "; ".join(bad) or "ok"}


# ---------------------------------------------------------------------------
# machine quietness
# ---------------------------------------------------------------------------
def _cpu_times() -> tuple[int, int] | None:
    try:
        fields = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    except (OSError, IndexError):
        return None
    vals = [int(x) for x in fields[:8]]
    idle = vals[3] + vals[4]  # idle + iowait
    return sum(vals), idle


def background_busy(seconds: float = 1.0) -> float | None:
    """Fraction of all CPUs busy over *seconds* while this harness sleeps (others' load)."""
    a = _cpu_times()
    time.sleep(seconds)
    b = _cpu_times()
    if a is None or b is None or b[0] == a[0]:
        return None
    return round(1.0 - (b[1] - a[1]) / (b[0] - a[0]), 3)


class CpuWindow:
    """Other processes' share of the CPUs while a block runs (``with CpuWindow() as w``).

    ``/proc/stat`` busy time minus this process's and its finished children's
    CPU time (``os.times``), over the block's wall time x the number of CPUs:
    0 means the engine had the machine to itself, 0.5 that others kept half of
    it busy meanwhile.
    """

    def __enter__(self):
        self.stat0, self.own0 = _cpu_times(), os.times()
        self.busy = None
        return self

    def __exit__(self, *exc):
        stat1, own1 = _cpu_times(), os.times()
        if self.stat0 is None or stat1 is None:
            return False
        hz = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
        total = (stat1[0] - self.stat0[0]) / hz
        busy = total - (stat1[1] - self.stat0[1]) / hz
        own = sum(own1[:4]) - sum(self.own0[:4])
        if total > 0.3 * (os.cpu_count() or 1):  # at least ~0.3 s: clock ticks are 10 ms
            self.busy = round(min(max((busy - own) / total, 0.0), 1.0), 3)
        return False


def wait_quiet(args) -> float | None:
    """Sample the background load; with --quiet, wait (up to --quiet-timeout) until it is low."""
    busy = background_busy(1.0)
    if args.quiet is None or busy is None:
        return busy
    deadline = time.monotonic() + args.quiet_timeout
    while busy is not None and busy > args.quiet and time.monotonic() < deadline:
        log(f"    waiting for a quieter machine: {busy:.0%} busy > {args.quiet:.0%}")
        time.sleep(4.0)
        busy = background_busy(1.0)
    return busy


# ---------------------------------------------------------------------------
# engines
# ---------------------------------------------------------------------------
def inputs_npz(spec: ModelSpec, workdir: Path) -> Path:
    """The model's inputs as an npz every engine's subprocess reads (written once)."""
    import numpy as np

    path = workdir / f"{spec.name}-inputs.npz"
    if not path.exists():
        np.savez(path, **spec.inputs)
    return path


def prepare_mxc(spec: ModelSpec, args, workdir: Path, db: str | None = None,
                engine: str = "mxc") -> dict:
    """Compile and save in a subprocess (``mxc_runner.py compile``): its report, the
    artifact's path in ``res["artifact"]``.

    *db*: a tuning database (the tuned variant); None compiles without one
    (unless ``$MXC_TUNING_DB`` is set and ``--db`` is not given).
    """
    import numpy as np

    suffix = "" if engine == "mxc" else "-" + engine.split("-", 1)[1]
    artifact = workdir / f"{spec.name}{suffix}.mxc"
    shapes = {k: list(v.shape) for k, v in spec.inputs.items()}
    dtypes = {k: v.dtype.name for k, v in spec.inputs.items() if v.dtype != np.float32}
    cmd = [sys.executable, str(REPO / "bench" / "mxc_runner.py"), "compile",
           "--symbol", str(spec.symbol), "--params", str(spec.params),
           "--shapes", json.dumps(shapes), "--target", args.target, "--name", spec.name,
           "--artifact", str(artifact)]
    if dtypes:
        cmd += ["--dtypes", json.dumps(dtypes)]
    if db is not None:
        cmd += ["--db", db]
    if engine == "mxc-bf16":
        cmd += ["--precision", "bf16"]
    res = _run_child(cmd, args.timeout, env=dict(os.environ))
    if "error" in res:
        raise RuntimeError(res["error"])
    res.update(engine=engine, artifact=str(artifact))
    if db is not None:
        res["tuning"] = tuning_cost(db, spec)
    return res


def time_mxc(base: dict, spec: ModelSpec, args, workdir: Path) -> dict:
    """One timed measurement in a subprocess (``mxc_runner.py run``): a copy of *base*
    with the timings, the check of the outputs and the process's peak memory."""
    res = dict(base)
    out = workdir / f"{Path(base['artifact']).stem}-out.npz"
    cmd = [sys.executable, str(REPO / "bench" / "mxc_runner.py"), "run",
           "--artifact", base["artifact"], "--inputs", str(inputs_npz(spec, workdir)),
           "--warmup", str(args.warmup), "--runs", str(args.runs), "--outputs", str(out)]
    res["background_busy"] = wait_quiet(args)
    res["load_average"] = machine.load_average()
    with CpuWindow() as window:
        run = _run_child(cmd, args.timeout, env=dict(os.environ))
    res["background_during"] = window.busy
    if "error" in run:
        return {"engine": base["engine"], "variant": base.get("variant"),
                "error": run["error"]}
    run.pop("engine", None)
    res.update(run)
    _finish_peer(res, out, spec)
    if base["engine"] == "mxc-bf16" and "times_s" in res:
        res["check"] = check_bf16(out, spec)
    return res


def check_bf16(outputs: Path, spec: ModelSpec) -> dict:
    """bfloat16 outputs against the float32 reference in the "bf16" tolerance class
    (:mod:`mxc.backends.tvm.precision`: error relative to each output's range)."""
    import numpy as np
    from mxc.backends.tvm.precision import BF16_TOLERANCE, range_error

    if spec.reference is None:
        return {"ok": None, "detail": "no reference"}
    with np.load(outputs) as npz:
        got = [npz[f"out{i}"] for i in range(len(npz.files))]
    errors = [range_error(g, w) for g, w in zip(got, spec.reference)]
    worst = max(errors, default=0.0)
    diff = max((float(np.abs(np.asarray(g, np.float64) - w).max()) for g, w in
                zip(got, spec.reference)), default=0.0)
    ok = len(got) == len(spec.reference) and worst <= BF16_TOLERANCE
    return {"ok": ok, "max_abs_diff": diff, "range_error": worst, "tolerance": BF16_TOLERANCE,
            "detail": f"bf16: error {worst:.3g} of the output range (tolerance "
                      f"{BF16_TOLERANCE:g})"}


def tune_model(spec: ModelSpec, args) -> None:
    """``mxc tune`` the model into ``--db`` (``--tune TRIALS``, ``--check-model
    --tune-check``); kernels the database already holds are skipped, and the time it
    takes lands in the tuning log."""
    shapes = [f"{k}={','.join(str(d) for d in v.shape)}" for k, v in spec.inputs.items()]
    cmd = [sys.executable, "-m", "mxc", "tune", str(spec.symbol), "--params", str(spec.params),
           "--trials", str(args.tune), "--db", args.db, "--search", args.tune_search, "-q"]
    if args.tune_check > 0:      # tuned <= untuned: a model that is not faster is reverted
        cmd += ["--check-model", str(args.tune_check)]
    for item in shapes:
        cmd += ["--shape", item]
    log(f"  [mxc] tune: {args.tune} trials per kernel into {args.db}")
    try:
        proc = subprocess.run(cmd, cwd=REPO, timeout=args.tune_timeout, text=True,
                              capture_output=True)
    except subprocess.TimeoutExpired:
        log(f"  !!! mxc tune ran past --tune-timeout ({args.tune_timeout:.0f} s); its "
            f"measured records are kept")
        return
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["?"]
        log(f"  !!! mxc tune failed ({proc.returncode}): {tail[0]}")


def tuning_cost(db: str, spec: ModelSpec) -> dict | None:
    """What ``mxc tune`` spent on *spec*'s model, from the database's tuning log.

    Runs are matched by symbol file (else model name) and, when the log has
    them, by input shapes; their wall times add up (a resumed or extended
    tuning is several runs).  None when no run of this model is logged.
    """
    from mxc.backends.tvm.tune import read_tune_log

    shapes = {k: list(v.shape) for k, v in spec.inputs.items()}
    symbol = str(spec.symbol.resolve())
    runs = []
    for entry in read_tune_log(db):
        same = entry.get("symbol") == symbol if entry.get("symbol") else \
            entry.get("model") == spec.name
        logged = entry.get("shapes")
        if same and logged and {k: list(v) for k, v in logged.items()} != \
                {k: v for k, v in shapes.items() if k in logged}:
            same = False
        if same:
            runs.append(entry)
    if not runs:
        return None
    return {"seconds": sum(float(e.get("seconds") or 0) for e in runs), "runs": len(runs),
            "trials": max(int(e.get("trials") or 0) for e in runs),
            "trials_run": sum(int(e.get("trials_run") or 0) for e in runs),
            "tasks": max(int(e.get("tasks") or 0) for e in runs),
            "status": sorted({str(e.get("status")) for e in runs}),
            "log": runs}


def _peer_env() -> dict:
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    return env


def _run_child(cmd: list[str], timeout: float, env: dict | None = None) -> dict:
    """Run *cmd*; the JSON object on the last line of its stdout, or ``{"error": ...}``."""
    log("    $ " + " ".join(shlex.quote(c) for c in cmd))
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                             env=env if env is not None else _peer_env(), cwd=str(REPO))
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout:.0f}s"}
    lines = out.stdout.strip().splitlines()
    if out.returncode != 0 or not lines:
        tail = "\n".join((out.stdout + out.stderr).strip().splitlines()[-8:])
        return {"error": f"exit {out.returncode}: {tail}"}
    try:
        return json.loads(lines[-1])
    except ValueError:
        return {"error": f"no JSON on stdout: {lines[-1][:200]}"}


def run_peers(spec: ModelSpec, args, python: Path, workdir: Path) -> dict[str, dict]:
    """MXNet, then ONNX Runtime (on MXNet's ONNX export, made on the first call)."""
    inputs = inputs_npz(spec, workdir)
    onnx_path = workdir / f"{spec.name}.onnx"
    export = [] if onnx_path.exists() else ["--export-onnx", str(onnx_path)]
    results: dict[str, dict] = {}
    peers_dir = REPO / "bench" / "peers"
    common = ["--inputs", str(inputs), "--warmup", str(args.warmup), "--runs", str(args.runs)]

    busy = wait_quiet(args)
    load = machine.load_average()
    mx_out = workdir / f"{spec.name}-mxnet-out.npz"
    with CpuWindow() as window:
        res = _run_child([str(python), str(peers_dir / "mxnet_runner.py"), "--symbol",
                          str(spec.symbol), "--params", str(spec.params), *common,
                          "--outputs", str(mx_out), *export], args.timeout)
    res.update(engine="mxnet", background_busy=busy, load_average=load,
               background_during=window.busy)
    _finish_peer(res, mx_out, spec)
    results["mxnet"] = res

    if not onnx_path.exists() or (export and "export" not in res):
        why = res.get("export_error") or res.get("error") or "export did not run"
        results["onnxruntime"] = {"engine": "onnxruntime", "error": f"ONNX export failed: {why}"}
        return results
    busy = wait_quiet(args)
    load = machine.load_average()
    ort_out = workdir / f"{spec.name}-ort-out.npz"
    with CpuWindow() as window:
        res = _run_child([str(python), str(peers_dir / "ort_runner.py"), "--model",
                          str(onnx_path), "--threads", str(args.threads), *common,
                          "--outputs", str(ort_out)], args.timeout)
    res.update(engine="onnxruntime", background_busy=busy, load_average=load,
               background_during=window.busy)
    _finish_peer(res, ort_out, spec)
    results["onnxruntime"] = res
    if getattr(args, "openvino", False):
        for engine in OPENVINO:
            results[engine] = run_openvino(engine, onnx_path, spec, args, python, workdir)
    return results


def run_openvino(engine: str, onnx_path: Path, spec: ModelSpec, args, python: Path,
                 workdir: Path) -> dict:
    """OpenVINO on MXNet's ONNX export: its default precision, or ``openvino-f32``
    (``INFERENCE_PRECISION_HINT=f32``); bf16 results are checked in the bf16 class."""
    busy = wait_quiet(args)
    load = machine.load_average()
    out = workdir / f"{spec.name}-{engine}-out.npz"
    cmd = [str(python), str(REPO / "bench" / "peers" / "openvino_runner.py"), "--model",
           str(onnx_path), "--threads", str(args.threads), "--inputs",
           str(inputs_npz(spec, workdir)), "--warmup", str(args.warmup), "--runs",
           str(args.runs), "--precision", "f32" if engine == "openvino-f32" else "default",
           "--outputs", str(out)]
    with CpuWindow() as window:
        res = _run_child(cmd, args.timeout)
    res.update(engine=engine, background_busy=busy, load_average=load,
               background_during=window.busy)
    _finish_peer(res, out, spec)
    if engine == "openvino" and "times_s" in res and "f32" not in str(
            res.get("inference_precision", "")).lower():
        res["check"] = check_bf16(out, spec)
    return res


def _finish_peer(res: dict, outputs: Path, spec: ModelSpec) -> None:
    import numpy as np
    from bench.timing import summarize

    if "times_s" not in res:
        return
    res["latency"] = summarize(res["times_s"])
    with np.load(outputs) as npz:
        got = [npz[f"out{i}"] for i in range(len(npz.files))]
    res["check"] = check_outputs(got, spec.reference, spec.rtol, spec.atol)


# ---------------------------------------------------------------------------
# one model, all engines, best of --rounds
# ---------------------------------------------------------------------------
def bench_model(name: str, args, peers_python: Path | None, ceiling: dict | None) -> dict:
    from bench.flops import graph_flops
    import mxc

    log(f"== {name}")
    spec = resolve_model(name, args)
    entry: dict = {"name": spec.name, "symbol": str(spec.symbol), "params": str(spec.params),
                   "inputs": {k: {"shape": list(v.shape), "dtype": v.dtype.name}
                              for k, v in spec.inputs.items()},
                   "reference": {"source": spec.reference_source, "rtol": spec.rtol,
                                 "atol": spec.atol},
                   "notes": list(spec.notes), "engines": {}, "rounds": []}
    try:
        fl = graph_flops(mxc.sym.load(str(spec.symbol)),
                         {k: v.shape for k, v in spec.inputs.items()})
        entry["flops"] = fl
    except Exception as exc:  # noqa: BLE001 - FLOPs are informational
        entry["flops"] = {"error": f"{type(exc).__name__}: {exc}"}

    if args.tune:
        tune_model(spec, args)
    variants = [("mxc", None)] + ([("mxc-tuned", args.db)] if args.db else []) \
        + ([("mxc-bf16", None)] if args.precision == "bf16" else [])
    with tempfile.TemporaryDirectory(prefix="mxc-bench-") as tmp:
        work = Path(tmp)
        prepared: dict[str, dict] = {}
        for engine, db in variants:
            title = ENGINE_TITLES[engine] if args.db or engine != "mxc" else "mxc"
            log(f"  [{title}] compile and save" + (f" (tuning database {db})" if db else ""))
            try:
                base = prepare_mxc(spec, args, work, db=db, engine=engine)
                prepared[engine] = base
                tuned = (f", {base['kernels_tuned']}/{base['kernels']} kernel(s) from the "
                         f"tuning database" if base.get("tuning_db") else "")
                log(f"    {title}: compiled in {base['compile_s']:.1f}s, {base['regions']} "
                    f"region(s), {len(base['host_nodes'])} host node(s){tuned}, peak memory "
                    f"{fmt_bytes(base.get('compile_peak_rss_bytes'))}")
            except Exception as exc:  # noqa: BLE001 - reported in the table
                why = str(exc) if isinstance(exc, RuntimeError) else \
                    f"{type(exc).__name__}: {exc}"
                entry["engines"][engine] = {"engine": engine, "error": why}
                _log_result(entry["engines"][engine])
        for r in range(args.rounds):
            rnd: dict = {}
            tag = f" (round {r + 1}/{args.rounds})" if args.rounds > 1 else ""
            for engine, base in prepared.items():
                title = ENGINE_TITLES[engine] if args.db or engine != "mxc" else "mxc"
                log(f"  [{title}] load, check, {args.warmup} warm-up + {args.runs} timed "
                    f"Session.run{tag}")
                try:
                    rnd[engine] = time_mxc(base, spec, args, work)
                except Exception as exc:  # noqa: BLE001
                    rnd[engine] = {"engine": engine, "error": f"{type(exc).__name__}: {exc}"}
                _log_result(rnd[engine])
            if peers_python is not None:
                log(f"  [peers] MXNet, then ONNX Runtime{tag}")
                rnd.update(run_peers(spec, args, peers_python, work))
                _log_result(rnd["mxnet"])
                _log_result(rnd["onnxruntime"])
                for engine in OPENVINO:
                    if engine in rnd:
                        _log_result(rnd[engine])
            entry["rounds"].append({k: {"latency": v.get("latency"), "error": v.get("error"),
                                        "peak_rss_bytes": v.get("peak_rss_bytes"),
                                        "background_busy": v.get("background_busy"),
                                        "background_during": v.get("background_during")}
                                    for k, v in rnd.items()})
            for eng, res in rnd.items():  # keep each engine's best (lowest-median) round
                best = entry["engines"].get(eng)
                if best is None or _median(res) < _median(best):
                    entry["engines"][eng] = res
        if args.keep_artifacts:
            keep = Path(args.keep_artifacts)
            keep.mkdir(parents=True, exist_ok=True)
            for base in prepared.values():
                art = Path(base["artifact"])
                if art.exists():
                    shutil.move(str(art), str(keep / art.name))
                    for res in entry["engines"].values():
                        if res.get("artifact") == str(art):
                            res["artifact"] = str(keep / art.name)

    for res in entry["engines"].values():  # the temporary copy is gone
        if res.get("artifact") and not Path(res["artifact"]).exists():
            res.pop("artifact")

    total = (entry.get("flops") or {}).get("total")
    for eng, res in entry["engines"].items():
        med = _median(res)
        if total and med < float("inf"):
            res["gflops"] = total / (med / 1e3) / 1e9
            if ceiling:
                res["fraction_of_sgemm"] = res["gflops"] / ceiling["best_gflops"]
    entry["ratios"] = {}
    for mine in MXC_ENGINES:
        m = entry["engines"].get(mine)
        for other in PEERS + OPENVINO + (("mxc",) if mine in ("mxc-tuned", "mxc-bf16")
                                         else ()):
            o = entry["engines"].get(other)
            if m and o and _median(m) < float("inf") and _median(o) < float("inf"):
                entry["ratios"][f"{mine}/{other}"] = _median(m) / _median(o)
    return entry


def _median(res: dict) -> float:
    lat = res.get("latency") or {}
    return lat.get("median_ms", float("inf")) if lat.get("n") else float("inf")


def _log_result(res: dict) -> None:
    from bench.timing import fmt_latency

    eng = ENGINE_TITLES.get(res.get("engine"), res.get("engine"))
    if "error" in res:
        log(f"    {eng}: FAILED: {res['error']}")
        return
    chk = res.get("check") or {}
    extra = f", compile {res['compile_s']:.1f}s" if "compile_s" in res else ""
    if res.get("peak_rss_bytes") is not None:
        extra += f", peak memory {fmt_bytes(res['peak_rss_bytes'])}"
    busy, during = res.get("background_busy"), res.get("background_during")
    log(f"    {eng}: {fmt_latency(res.get('latency'))}{extra}, check {chk.get('detail', '?')}"
        + (f", others' load {busy:.0%} before" if busy is not None else "")
        + (f", {during:.0%} during" if during is not None else ""))
    if chk.get("ok") is False:
        log(f"    !!! {eng} OUTPUT MISMATCH vs reference: {chk.get('detail')}")


# ---------------------------------------------------------------------------
# report
# ---------------------------------------------------------------------------
def _cell(res: dict | None) -> str:
    from bench.timing import fmt_latency

    if res is None:
        return "–"
    if "error" in res:
        return "failed"
    cell = fmt_latency(res.get("latency"))
    if (res.get("check") or {}).get("ok") is False:
        cell += " **MISMATCH**"
    return cell


def _shape_text(entry: dict) -> str:
    return ", ".join(f"{k} {'x'.join(map(str, v['shape']))}" for k, v in entry["inputs"].items())


def _check_cell(res: dict) -> str:
    chk = res.get("check") or {}
    if "error" in res:
        return "**FAILED**"
    if chk.get("ok") is False:
        return f"**MISMATCH** ({chk.get('max_abs_diff', float('nan')):.2g})"
    if chk.get("ok"):
        return f"ok ({chk['max_abs_diff']:.1g})"
    return "–"


def _ratio_cell(entry: dict, key: str) -> str:
    r = entry["ratios"].get(key)
    return f"{r:.2f}×" if r is not None else "–"


def _tune_cell(res: dict) -> str:
    t = res.get("tuning")
    if not t:
        return "–"
    runs = f"{t['runs']} runs, " if t["runs"] > 1 else ""
    return f"{_duration(t['seconds'])} ({runs}{t['trials']} trials/kernel)"


def _duration(seconds: float) -> str:
    if seconds >= 3600:
        return f"{seconds / 3600:.1f} h"
    if seconds >= 120:
        return f"{seconds / 60:.0f} min"
    return f"{seconds:.0f} s"


def render_markdown(report: dict) -> str:
    s = report["settings"]
    tuned = bool(s.get("tuning_db"))
    lines = [f"# mxc model benchmark — {report['date']}", "",
             f"Command: `{report['command']}`", "",
             f"Batch-{s.get('batch', 1)} CPU latency: {s['warmup']} warm-up calls, then {s['runs']} timed calls per "
             f"engine (best of {s['rounds']} round(s)); median, p10–p90 in parentheses. mxc: "
             f"`mxc.compile` ({_variant(report)}, target {s['target']}) → `.mxc` artifact → "
             f"`mxc.runtime.load` → `Session.run`, compile and run each in a process of its "
             f"own. Ratio > 1 means mxc is slower.", ""]
    peers = report.get("peers") is not None
    mine = ["mxc", "mxc-tuned"] if tuned else ["mxc"]
    bf16 = not tuned and any("mxc-bf16" in e["engines"] for e in report["models"])
    openvino = not tuned and any("openvino" in e["engines"] for e in report["models"])
    if tuned:
        head = ["model", "input", "GFLOP", "mxc untuned", "mxc tuned", "tuned/untuned",
                "check (untuned, tuned)"]
        if peers:
            head += ["MXNet", "ORT", "untuned/MXNet", "tuned/MXNet", "untuned/ORT", "tuned/ORT"]
    else:
        head = ["model", "input", "GFLOP", "mxc compile", "mxc", "check"]
        if bf16:
            head += ["mxc bf16", "bf16 check", "bf16/fp32"]
        if openvino:
            head += ["OpenVINO default", "OpenVINO f32", "mxc/OpenVINO f32"] \
                + (["mxc bf16/OpenVINO default"] if bf16 else [])
        if peers:
            head += ["MXNet", "ORT", "mxc/MXNet", "mxc/ORT"]
    lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for e in report["models"]:
        eng = e["engines"]
        mx = eng.get("mxc") or {}
        gflop = (e.get("flops") or {}).get("total")
        row = [e["name"], _shape_text(e), f"{gflop / 1e9:.3g}" if gflop else "?"]
        if tuned:
            row += [_cell(eng.get("mxc")), _cell(eng.get("mxc-tuned")),
                    _ratio_cell(e, "mxc-tuned/mxc"),
                    ", ".join(_check_cell(eng.get(m) or {}) for m in mine)]
            if peers:
                row += [_cell(eng.get("mxnet")), _cell(eng.get("onnxruntime"))]
                row += [_ratio_cell(e, f"{m}/{p}") for p in PEERS for m in mine]
        else:
            row += [f"{mx['compile_s']:.1f} s" if "compile_s" in mx else "–", _cell(mx),
                    _check_cell(mx)]
            if bf16:
                row += [_cell(eng.get("mxc-bf16")), _check_cell(eng.get("mxc-bf16") or {}),
                        _ratio_cell(e, "mxc-bf16/mxc")]
            if openvino:
                row += [_cell(eng.get(o)) for o in OPENVINO]
                row += [_ratio_cell(e, "mxc/openvino-f32")]
                row += [_ratio_cell(e, "mxc-bf16/openvino")] if bf16 else []
            if peers:
                row += [_cell(eng.get("mxnet")), _cell(eng.get("onnxruntime"))]
                row += [_ratio_cell(e, f"mxc/{p}") for p in PEERS]
        lines.append("| " + " | ".join(row) + " |")

    if tuned:
        lines += ["", f"Compile time (`mxc.compile` + writing the artifact) untuned and with the "
                      f"tuning database `{s['tuning_db']}`; kernels taken from it; tuning time: "
                      f"the wall time of the `mxc tune` runs of the model recorded in the "
                      f"database's `mxc-tune-log.jsonl` (a kernel another model already tuned "
                      f"costs nothing again).", "",
                  "| model | compile untuned | compile tuned | kernels tuned | tuning time |",
                  "|---|---|---|---|---|"]
        for e in report["models"]:
            u, t = e["engines"].get("mxc") or {}, e["engines"].get("mxc-tuned") or {}
            kernels = (f"{t['kernels_tuned']}/{t['kernels']}" if t.get("kernels") is not None
                       else "–")
            lines.append(f"| {e['name']} | "
                         + " | ".join([f"{u['compile_s']:.1f} s" if "compile_s" in u else "–",
                                       f"{t['compile_s']:.1f} s" if "compile_s" in t else "–",
                                       kernels, _tune_cell(t)]) + " |")

    ceiling = report.get("ceiling")
    if ceiling:
        lines += ["", f"Throughput: GFLOP/s of Convolution/FullyConnected/dot (`bench/flops.py`) "
                      f"at the median latency; sgemm ceiling {ceiling['best_gflops']:.1f} GFLOP/s "
                      f"(`bench/ceiling.py`, numpy float32 matmul, {ceiling.get('blas', '?')}: "
                      f"{_ceiling_text(ceiling)}; same run).", ""]
        engines = mine + (list(PEERS) if peers else [])
        lines += ["| model | " + " | ".join(f"{_title(x, tuned)} GFLOP/s (% of sgemm)"
                                             for x in engines) + " |",
                  "|---|" + "---|" * len(engines)]
        for e in report["models"]:
            cells = []
            for x in engines:
                res = e["engines"].get(x) or {}
                g, f = res.get("gflops"), res.get("fraction_of_sgemm")
                cells.append(f"{g:.1f} ({f:.0%})" if g is not None and f is not None else "–")
            lines.append(f"| {e['name']} | " + " | ".join(cells) + " |")

    lines += _memory_table(report, mine, peers, tuned)
    lines += _size_table(report, mine, tuned)

    lines += ["", "## Machine", ""]
    lines += machine.format_machine(report["machine"], report.get("peers"))
    if peers:
        p = report["peer_settings"]
        lines.append(f"- MXNet: {p.get('mxnet')}")
        lines.append(f"- ONNX Runtime: {p.get('onnxruntime')}")
        if openvino:
            lines.append(f"- OpenVINO: {_openvino_text(report)}")
    lines.append(f"- load: {_load_text(report)}")

    notes = []
    for e in report["models"]:
        loads = [f"{_title(k, tuned)} {v['background_during']:.0%}"
                 for k, v in e["engines"].items() if v.get("background_during") is not None]
        if loads:
            notes.append(f"- {e['name']}: other processes' share of the CPUs during the reported "
                         f"runs: {', '.join(loads)}")
        for n in e.get("notes", []):
            notes.append(f"- {e['name']}: {n}")
        host_nodes: list[str] = []
        for eng_name, res in e["engines"].items():
            title = _title(eng_name, tuned)
            if "error" in res:
                notes.append(f"- {e['name']}: **{title} failed**: {res['error']}")
            chk = res.get("check") or {}
            if chk.get("ok") is False:
                notes.append(f"- {e['name']}: **{title} output mismatch** vs "
                             f"{e['reference']['source']}: {chk['detail']}")
            host_nodes += [h for h in res.get("host_nodes") or [] if h not in host_nodes]
            if eng_name == "mxc-tuned" and "error" not in res and not res.get("tuning"):
                notes.append(f"- {e['name']}: no `mxc tune` run of this model in "
                             f"`{s['tuning_db']}/mxc-tune-log.jsonl` (tuned under another "
                             f"name or shape, by an older mxc, or only through other models' "
                             f"shared kernels): tuning time unknown")
        for h in host_nodes:
            notes.append(f"- {e['name']}: mxc host node {h}")
    if notes:
        lines += ["", "## Notes", ""] + notes
    return "\n".join(lines) + "\n"


def _openvino_text(report: dict) -> str:
    """OpenVINO's version, how it was configured and the precision it chose: its default
    is bf16 wherever the CPU has AMX or AVX512-BF16, which the report must say."""
    versions, chosen = set(), {}
    for e in report["models"]:
        for engine in OPENVINO:
            res = e["engines"].get(engine) or {}
            if res.get("openvino"):
                versions.add(res["openvino"])
            if res.get("inference_precision"):
                chosen.setdefault(engine, set()).add(str(res["inference_precision"]))
    picked = "; ".join(f"{ENGINE_TITLES[k]} ran in {', '.join(sorted(v))}"
                       for k, v in chosen.items())
    return (f"{', '.join(sorted(versions)) or '?'}; MXNet's ONNX export → "
            f"core.compile_model(CPU, PERFORMANCE_HINT=LATENCY, INFERENCE_NUM_THREADS="
            f"{report['settings']['threads']}), f32 column with INFERENCE_PRECISION_HINT=f32"
            + (f"; INFERENCE_PRECISION_HINT it reported: {picked}" if picked else ""))


def _title(engine: str, tuned: bool) -> str:
    if engine == "mxc" and tuned:
        return "mxc untuned"
    return ENGINE_TITLES.get(engine, engine)


def _memory_table(report: dict, mine: list[str], peers: bool, tuned: bool) -> list[str]:
    """Peak resident memory of every engine's processes (``bench.memory.peak_rss_bytes``)."""
    cols: list[tuple[str, str, str]] = []     # (title, engine, key)
    for m in mine:
        cols += [(f"{_title(m, tuned)} compile", m, "compile_peak_rss_bytes"),
                 (f"{_title(m, tuned)} run", m, "peak_rss_bytes")]
    if peers:
        cols += [(ENGINE_TITLES[p], p, "peak_rss_bytes") for p in PEERS]
    rows, known = [], False
    for e in report["models"]:
        values = [(e["engines"].get(eng) or {}).get(key) for _, eng, key in cols]
        known = known or any(v is not None for v in values)
        rows.append(f"| {e['name']} | " + " | ".join(fmt_bytes(v) for v in values) + " |")
    if not known:
        return []
    return ["", "Peak resident memory (`VmHWM` of each engine's own process, "
                "`bench/memory.py`: the "
                "interpreter, numpy and the engine's libraries included; the JSON also has "
                "`rss_after_import_bytes`, what they hold before any model). mxc compile: "
                "`mxc.compile` + save, TVM imported; mxc run: `mxc.runtime.load` + the timed "
                "`Session.run` calls"
            + ("; MXNet: bind + timed calls (before its ONNX export); ORT: session + timed "
               "calls" if peers else "") + ".", "",
            "| model | " + " | ".join(c[0] for c in cols) + " |",
            "|---|" + "---|" * len(cols)] + rows


def _size_table(report: dict, mine: list[str], tuned: bool) -> list[str]:
    """The ``.mxc`` artifact against the model's parameters, and its load time."""
    rows = []
    for e in report["models"]:
        for m in mine:
            res = e["engines"].get(m) or {}
            art, params = res.get("artifact_bytes"), res.get("params_bytes")
            if art is None or not params:
                continue
            load = f"{res['load_s'] * 1e3:.0f} ms" if res.get("load_s") is not None else "–"
            rows.append(f"| {e['name']} | {_title(m, tuned)} | {fmt_bytes(params)} | "
                        f"{fmt_bytes(art)} | {art / params:.2f} | {load} |")
    if not rows:
        return []
    return ["", "Artifact size: the `.mxc` file against the arrays of the model's `.params` "
                "(`bench/bench_artifact.py` breaks it down); load: `mxc.runtime.load` in the "
                "run process (reading, checks, the library, load-time weight transforms).", "",
            "| model | engine | params | artifact | artifact/params | load |",
            "|---|---|---|---|---|---|"] + rows


def _variant(report: dict) -> str:
    db = report["settings"].get("tuning_db")
    if db:
        return f"untuned, and tuned with the database `{db}` (`--db`)"
    dbs = {(e["engines"].get("mxc") or {}).get("tuning_db") for e in report["models"]} - {None}
    return f"tuned: MXC_TUNING_DB={', '.join(sorted(dbs))}" if dbs else "untuned"


def _ceiling_text(c: dict) -> str:
    parts = []
    if "all_cores" in c:
        parts.append(f"{c['threads']} threads best {c['all_cores']['best_gflops']:.1f} "
                     f"(n={c['all_cores']['n']})")
    if "one_core" in c:
        parts.append(f"1 thread best {c['one_core']['best_gflops']:.1f} "
                     f"(n={c['one_core']['n']})")
    return ", ".join(parts) + f"; ceiling = max(all-core, {c['threads']} x one-core)"


def _load_text(report: dict) -> str:
    during, loads = [], []
    for e in report["models"]:
        for res in e["engines"].values():
            if res.get("background_during") is not None:
                during.append(res["background_during"])
            if res.get("load_average"):
                loads.append(res["load_average"][0])
    parts = []
    if during:
        parts.append(f"other processes used {min(during):.0%}–{max(during):.0%} of the CPUs "
                     f"during the reported runs (per model in Notes)")
    if loads:
        parts.append(f"1-min load average {min(loads):.2f}–{max(loads):.2f}")
    la = report["machine"].get("load_average")
    if la:
        parts.append(f"at start {la[0]:.2f}/{la[1]:.2f}/{la[2]:.2f}")
    return "; ".join(parts) or "?"


# ---------------------------------------------------------------------------
# main
# ---------------------------------------------------------------------------
def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="\n".join(__doc__.splitlines()[2:]))
    ap.add_argument("--models", nargs="+", default=None, metavar="MODEL",
                    help=f"corpus model names or checkpoint prefixes (default: "
                         f"{' '.join(DEFAULT_MODELS)}); commas also separate")
    ap.add_argument("--runs", type=int, default=30, help="timed calls per engine (default 30)")
    ap.add_argument("--batch", type=int, default=1, metavar="N",
                    help="run every model at batch N (its inputs and reference repeated)")
    ap.add_argument("--warmup", type=int, default=5, help="untimed calls first (default 5)")
    ap.add_argument("--rounds", type=int, default=1,
                    help="repeat every engine's measurement; report each engine's best round")
    ap.add_argument("--peers", action="store_true",
                    help="also measure MXNet 1.9.1 and ONNX Runtime (bench/.venv-peers)")
    ap.add_argument("--openvino", action="store_true",
                    help="with --peers: also OpenVINO (its default, bf16 on AMX/AVX512-BF16 "
                         "CPUs, and INFERENCE_PRECISION_HINT=f32) on MXNet's ONNX export; "
                         "needs `pip install openvino` in the peers' venv")
    ap.add_argument("--peers-python", default=None,
                    help="interpreter that creates the peers' venv (default: this one)")
    ap.add_argument("--timeout", "--peer-timeout", dest="timeout", type=float, default=900,
                    help="seconds per subprocess: each mxc compile, mxc run and peer run "
                         "(default 900)")
    ap.add_argument("--db", metavar="DIR", default=None,
                    help="a tuning database (mxc tune --db DIR): measure every model untuned "
                         "and tuned with it, side by side, with the tuning time from its log")
    ap.add_argument("--tune", type=int, default=None, metavar="TRIALS",
                    help="with --db: first run `mxc tune --trials TRIALS` on every model into "
                         "the database (created if missing; tuned kernels are skipped), so "
                         "one command tunes and measures")
    ap.add_argument("--tune-search", choices=("evolutionary", "random"), default="evolutionary",
                    help="mxc tune --search for --tune (default evolutionary)")
    ap.add_argument("--tune-timeout", type=float, default=3600,
                    help="seconds per model for --tune (default 3600)")
    ap.add_argument("--tune-check", type=float, default=30.0, metavar="SECONDS",
                    help="with --tune: mxc tune --check-model SECONDS, so a tuned model that "
                         "is not faster than the untuned one goes back to the default "
                         "schedules (default 30; 0: no check)")
    ap.add_argument("--threads", type=int, default=None,
                    help="threads for every engine (default: all available cores, each engine "
                         "told the way its docs say -- OMP_NUM_THREADS for MXNet, "
                         "intra_op_num_threads for ORT -- and mxc left to size its own pool, "
                         "as a user runs it; with --threads TVM_NUM_THREADS is set too)")
    ap.add_argument("--target", default="llvm", help="mxc target (default llvm: this CPU)")
    ap.add_argument("--precision", choices=("fp32", "bf16"), default="fp32",
                    help="bf16: an mxc bf16 column too (`mxc.compile(precision='bf16')`, "
                         "checked in the bf16 tolerance class), beside float32")
    ap.add_argument("--corpus", default=None, help="corpus root (default $MXC_CORPUS or "
                                                   "../shared/corpus)")
    ap.add_argument("--shape", action="append", default=[], metavar="NAME=D0,D1,...",
                    help="input shape for a checkpoint prefix without inputs (random data)")
    ap.add_argument("--inputs", default=None, help="npz of inputs for a checkpoint prefix")
    ap.add_argument("--epoch", type=int, default=None, help="checkpoint epoch (default: latest)")
    ap.add_argument("--quiet", type=float, default=None, metavar="FRACTION",
                    help="before each timed engine, wait until other processes keep at most "
                         "this fraction of the CPUs busy (e.g. 0.1)")
    ap.add_argument("--quiet-timeout", type=float, default=300,
                    help="longest wait for --quiet, seconds (default 300)")
    ap.add_argument("--no-ceiling", action="store_true", help="skip the sgemm ceiling")
    ap.add_argument("--output", default=None,
                    help="markdown report path (default bench/results/<date>-<time>.md; "
                         "'-' for none)")
    ap.add_argument("--json", default=None,
                    help="JSON report path (default: --output with .json; '-' for none)")
    ap.add_argument("--keep-artifacts", default=None, metavar="DIR",
                    help="keep the compiled .mxc artifacts here")
    args = ap.parse_args(argv)
    models = []
    for m in args.models or DEFAULT_MODELS:
        models += [x for x in m.split(",") if x]
    args.models = models
    if args.runs < 1 or args.warmup < 0 or args.rounds < 1:
        ap.error("--runs and --rounds must be >= 1, --warmup >= 0")
    if args.db is not None:
        args.db = os.path.abspath(args.db)
    if args.tune is not None and (args.db is None or args.tune < 1):
        ap.error("--tune TRIALS needs --db DIR and TRIALS >= 1")
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    explicit = args.threads is not None
    args.threads = args.threads or machine.available_cores()
    # before numpy / TVM start thread pools; mxc sizes its own pool unless --threads is given
    threads = machine.configure_threads(args.threads, explicit=explicit)

    import numpy as np  # noqa: F401
    from bench.ceiling import measure_ceiling

    now = datetime.datetime.now()
    stamp = now.strftime("%Y-%m-%d-%H%M%S")
    out_md = None if args.output == "-" else Path(args.output or
                                                  REPO / "bench" / "results" / f"{stamp}.md")
    out_json = None if args.json == "-" else (Path(args.json) if args.json else
                                              out_md.with_suffix(".json") if out_md else None)

    if args.tune:
        Path(args.db).mkdir(parents=True, exist_ok=True)   # mxc tune fills it
    elif args.db is not None:
        from mxc.backends.tvm.tune import check_database
        from mxc.errors import MxcError
        try:
            check_database(args.db)
        except MxcError as exc:
            log(f"!!! --db: {exc}")
            return 2
    if args.db is not None and os.environ.pop("MXC_TUNING_DB", None):
        log("[mxc] --db given: MXC_TUNING_DB ignored (unset for the compiles)")  # untuned = untuned

    peers_python, peer_versions = None, None
    if args.peers:
        from bench.peers import venv
        try:
            peers_python, peer_versions = venv.ensure(base_python=args.peers_python, log=log)
        except RuntimeError as exc:
            log(f"!!! cannot set up the peers' virtualenv: {exc}")
            return 2
        log(f"[peers] {peers_python}: " + ", ".join(f"{k} {v}" for k, v in peer_versions.items()))

    t0 = time.perf_counter()
    import tvm  # noqa: F401  (the machine report asks it for the host CPU; compiles and
    #                             runs happen in subprocesses: bench/mxc_runner.py)
    import mxc
    import mxc.runtime  # noqa: F401
    log(f"[mxc] mxc {mxc.__version__}, TVM imported in {time.perf_counter() - t0:.1f}s; "
        f"threads: " + ", ".join(f"{k}={v}" for k, v in threads.items()))
    info = machine.machine_info()
    info["kernel_classes"] = machine.kernel_classes(args.target)
    info["mxc_target"] = args.target
    log(f"[machine] x86 class: this CPU {info['kernel_classes']['host']}, mxc's kernels "
        f"{info['kernel_classes']['mxc']} (target {args.target})")
    ceiling = None
    if not args.no_ceiling:
        wait_quiet(args)
        ceiling = measure_ceiling(args.threads)
        if ceiling.get("best_gflops"):
            log(f"[ceiling] numpy sgemm: {ceiling['best_gflops']:.1f} GFLOP/s "
                f"({_ceiling_text(ceiling)})")
        else:
            ceiling = None

    report = {"schema": SCHEMA, "date": now.isoformat(timespec="seconds"),
              "command": " ".join(["python", "bench/bench_models.py"] +
                                  [shlex.quote(a) for a in (argv if argv is not None
                                                            else sys.argv[1:])]),
              "settings": {"runs": args.runs, "warmup": args.warmup, "rounds": args.rounds,
                           "threads": args.threads, "target": args.target,
                           "batch": args.batch,
                           "quiet": args.quiet, "tuning_db": args.db},
              "machine": info, "ceiling": ceiling, "peers": peer_versions, "models": []}
    if args.peers:
        report["peer_settings"] = {
            "mxnet": "mx.sym.load + simple_bind(grad_req='null') + forward(is_train=False) + "
                     "asnumpy(); default settings (MXNET_SUBGRAPH_BACKEND unset: oneDNN fusion "
                     "at bind), threaded engine, OMP_NUM_THREADS=" + str(args.threads),
            "onnxruntime": "mx.onnx.export_model (initializers removed from graph inputs) → "
                           "InferenceSession(CPUExecutionProvider, ORT_ENABLE_ALL, "
                           f"intra_op_num_threads={args.threads}, inter_op 1, sequential)",
        }
    failed = False
    for name in args.models:
        entry = bench_model(name, args, peers_python, ceiling)
        report["models"].append(entry)
        for engine in MXC_ENGINES:
            mx = entry["engines"].get(engine) or {}
            if "error" in mx or (mx.get("check") or {}).get("ok") is False:
                failed = True
        mxnet = entry["engines"].get("mxnet") or {}
        if "subgraph_backend" in mxnet:  # what the MXNet run itself reported
            report["peer_settings"]["mxnet_subgraph_backend"] = mxnet["subgraph_backend"]
            report["peer_settings"]["mxnet_features"] = mxnet.get("features")

    if ceiling is not None and len(args.models) > 1:  # again at the end: keep the higher
        wait_quiet(args)
        again = measure_ceiling(args.threads)
        if (again.get("best_gflops") or 0) > ceiling["best_gflops"]:
            log(f"[ceiling] measured again: {again['best_gflops']:.1f} GFLOP/s (higher, kept)")
            again["earlier_best_gflops"] = ceiling["best_gflops"]
            report["ceiling"] = again
            for entry in report["models"]:
                for res in entry["engines"].values():
                    if res.get("gflops") is not None:
                        res["fraction_of_sgemm"] = res["gflops"] / again["best_gflops"]
    md = render_markdown(report)
    print(md)
    if out_md:
        out_md.parent.mkdir(parents=True, exist_ok=True)
        out_md.write_text(md)
        log(f"wrote {out_md}")
    if out_json:
        out_json.parent.mkdir(parents=True, exist_ok=True)
        out_json.write_text(json.dumps(report, indent=1, default=_jsonable))
        log(f"wrote {out_json}")
    if failed:
        log("!!! mxc failed or mismatched the reference on at least one model (see Notes)")
    return 1 if failed else 0


def _jsonable(x):
    try:
        import numpy as np
        if isinstance(x, np.generic):
            return x.item()
        if isinstance(x, np.ndarray):
            return x.tolist()
    except ImportError:  # pragma: no cover
        pass
    return str(x)


if __name__ == "__main__":
    sys.exit(main())
