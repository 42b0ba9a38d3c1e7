"""Every corpus model and op case, compiled ahead of time and deployed.

For each corpus model: ``mxc compile`` (llvm, default passes; another CPU
target with ``MXC_TEST_TARGET``, e.g. ``"llvm -mcpu=znver3"`` for AVX2 code on
any x86-64 host that runs it) writes an artifact; ONE fresh Python process loads every artifact through
:mod:`mxc.runtime` alone and runs it; the outputs must match MXNet 1.9.1's
``io.npz`` within the model's ``rtol``/``atol``.  The op cases are batched
into a few compilations (``_corpus_jobs.py``), whatever the TVM backend
cannot lower runs on the host, and the host set must be exactly what
``unsupported_nodes`` reports.  CUDA compilation of every model runs too
(executed and compared when a GPU is present).

Compilations run as parallel subprocesses (one per core), once per session,
into a cache under pytest's ``tmp_path_factory``; only the models a run
selects are compiled.  Each of those processes runs the ``mxc compile`` command
lines of its share of the models (``_corpus_jobs.py cli``): one interpreter and
one TVM start per core instead of per model.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("tvm")

from conftest import (TEST_TARGET, corpus_path, model_names, op_cases, require_corpus,
                      require_runnable_target)
from oracle import assert_close

#: compiled for the CPU class under test (MXC_TEST_TARGET; tools/isa_matrix.py)
pytestmark = pytest.mark.isa

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
JOBS = HERE / "_corpus_jobs.py"
MODELS = model_names() or ["no-corpus"]
CASES = op_cases()
CASE_IDS = [c["id"] for c in CASES] or ["no-corpus"]
OP_CHUNKS = 2
#: the CPU target the corpus compiles for (MXC_TEST_TARGET: check another ISA's code)
CPU_TARGET = TEST_TARGET


def _tag(target: str) -> str:
    """*target* as it appears in file names."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", target)


TAG = _tag(CPU_TARGET)


@dataclass
class Build:
    out: Path
    compiled: dict = field(default_factory=dict)   # key -> {"ok", "seconds", "error"}
    ran: dict = field(default_factory=dict)        # key -> runner result
    modules_after_compiled: list = field(default_factory=list)


def _env() -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return env


def run_parallel(commands: dict[str, list[str]], workers: int | None = None) -> dict:
    """Run subprocesses, at most *workers* at a time; ``{key: {ok, seconds, error}}``."""
    workers = workers or max(1, os.cpu_count() or 1)
    pending = list(commands.items())
    running: dict[str, tuple[subprocess.Popen, float]] = {}
    done: dict[str, dict] = {}
    while pending or running:
        while pending and len(running) < workers:
            key, cmd = pending.pop(0)
            proc = subprocess.Popen(cmd, cwd=REPO, env=_env(), stdout=subprocess.PIPE,
                                    stderr=subprocess.STDOUT, text=True)
            running[key] = (proc, time.perf_counter())
        for key, (proc, t0) in list(running.items()):
            if proc.poll() is not None:
                output = proc.stdout.read()
                done[key] = {"ok": proc.returncode == 0, "seconds": time.perf_counter() - t0,
                             "error": "" if proc.returncode == 0 else output[-4000:]}
                del running[key]
        time.sleep(0.05)
    return done


def _selected(request, argname: str, default: list[str]) -> list[str]:
    """The values of parameter *argname* among the collected tests of this session."""
    names = []
    for item in request.session.items:
        spec = getattr(item, "callspec", None)
        if spec is not None and argname in spec.params and spec.params[argname] not in names:
            names.append(spec.params[argname])
    return names or default


def _model_command(name: str, out: Path, target: str) -> list[str]:
    """The ``mxc compile`` arguments (without the program name) of corpus model *name*."""
    root = corpus_path() / "models" / name
    meta = json.loads((root / "meta.json").read_text())
    shapes = [f"{k}={','.join(map(str, v['shape']))}" for k, v in meta["inputs"].items()]
    cmd = ["compile", str(root / "symbol.json"),
           "--params", str(root / "model.params"), "--target", target, "-q",
           "-o", str(out / f"{name}-{_tag(target)}.mxc")]
    for s in shapes:
        cmd += ["--shape", s]
    return cmd


def _model_groups(models: list[str], out: Path, target: str,
                  groups: int | None = None) -> dict[str, list[str]]:
    """``{group key: command}``: one ``_corpus_jobs.py cli`` process per core, all
    sharing the ``mxc compile`` command lines of *models* (largest parameter files
    first; each process takes the next one not taken); :func:`_model_results` reads
    their results back."""
    groups = max(1, min(groups or os.cpu_count() or 1, len(models)))
    claims = out / f"claims-{_tag(target)}"
    claims.mkdir()
    weight = {m: (corpus_path() / "models" / m / "model.params").stat().st_size
              for m in models}
    spec = out / f"models-{_tag(target)}.json"
    spec.write_text(json.dumps({"claims": str(claims), "commands": {
        f"model:{m}": _model_command(m, out, target)
        for m in sorted(models, key=lambda m: -weight[m])}}))
    return {f"models:{i}": [sys.executable, str(JOBS), "cli", str(spec),
                            str(out / f"models-{_tag(target)}-{i}.result.json")]
            for i in range(groups)}


def _model_results(compiled: dict, models: list[str], out: Path, target: str) -> None:
    """Replace the group entries of *compiled* by one entry per model; a model no group
    finished (its process died) fails with the output of the groups that failed."""
    results: dict = {}
    groups = {k: compiled.pop(k) for k in [k for k in compiled if k.startswith("models:")]}
    for key in groups:
        path = out / f"models-{_tag(target)}-{key.split(':')[1]}.result.json"
        results.update(json.loads(path.read_text()) if path.exists() else {})
    died = "\n".join(f"{k}: {g['error']}" for k, g in groups.items() if not g["ok"])
    for m in models:
        compiled[f"model:{m}"] = results.get(f"model:{m}") or {
            "ok": False, "seconds": 0.0,
            "error": f"not compiled: the compiling process ended first:\n{died}"}


def _model_inputs(name: str, out: Path) -> Path:
    path = out / f"{name}-in.npz"
    if not path.exists():
        with np.load(corpus_path() / "models" / name / "io.npz") as io:
            np.savez(path, **{k[4:]: io[k] for k in io.files if k.startswith("in__")})
    return path


def _run_fresh(build: Build, jobs: list[dict]) -> None:
    jobs_path = build.out / f"jobs-{len(build.ran)}.json"
    result_path = jobs_path.with_suffix(".result.json")
    jobs_path.write_text(json.dumps(jobs))
    proc = subprocess.run([sys.executable, str(JOBS), "run", str(jobs_path), str(result_path)],
                          cwd=REPO, env=_env(), capture_output=True, text=True)
    if proc.returncode != 0:
        for job in jobs:
            build.ran[job["key"]] = {"ok": False, "error": proc.stderr[-4000:]}
        return
    result = json.loads(result_path.read_text())
    build.ran.update(result["jobs"])
    build.modules_after_compiled = result["modules_after_compiled"]


@pytest.fixture(scope="session")
def llvm_build(request, tmp_path_factory) -> Build:
    if corpus_path() is None:
        require_corpus()
    require_runnable_target(CPU_TARGET)
    build = Build(tmp_path_factory.mktemp("mxc-corpus-llvm"))
    models = [m for m in _selected(request, "name", MODELS) if m in MODELS and m != "no-corpus"]
    ops = bool(CASES) and any("case_id" in getattr(i, "fixturenames", ())
                              for i in request.session.items)
    commands = _model_groups(models, build.out, CPU_TARGET) if models else {}
    if ops:
        for k in range(OP_CHUNKS):
            commands[f"ops:{k}"] = [sys.executable, str(JOBS), "ops", str(build.out), str(k),
                                    str(OP_CHUNKS)]
    t0 = time.perf_counter()
    build.compiled = run_parallel(commands)
    _model_results(build.compiled, models, build.out, CPU_TARGET)
    build.compiled["__wall__"] = {"seconds": time.perf_counter() - t0}
    jobs = []
    for m in models:
        if build.compiled[f"model:{m}"]["ok"]:
            jobs.append({"key": f"model:{m}", "artifact": str(build.out / f"{m}-{TAG}.mxc"),
                         "inputs": str(_model_inputs(m, build.out)),
                         "outputs": str(build.out / f"{m}-{TAG}-out.npz")})
    for k in range(OP_CHUNKS if ops else 0):
        if build.compiled[f"ops:{k}"]["ok"]:
            info = json.loads((build.out / f"ops-{k}.json").read_text())
            for piece in info["pieces"]:
                tag = piece["tag"]
                jobs.append({"key": f"ops:{tag}", "artifact": str(build.out / f"ops-{tag}.mxc"),
                             "inputs": str(build.out / f"ops-{tag}-in.npz"),
                             "outputs": str(build.out / f"ops-{tag}-out.npz")})
    _run_fresh(build, jobs)
    _write_timings(build, TAG)
    return build


def _write_timings(build: Build, target: str) -> None:
    lines = [f"{k}: {v['seconds']:.1f}s" for k, v in sorted(build.compiled.items())]
    (build.out / f"timings-{target}.txt").write_text("\n".join(lines) + "\n")


def _compare(got: np.ndarray, want: np.ndarray, rtol: float, atol: float, what: str) -> None:
    assert got.shape == want.shape, f"{what}: shape {got.shape} != {want.shape}"
    assert got.dtype == want.dtype, f"{what}: dtype {got.dtype} != {want.dtype}"
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, err_msg=what)


def _check_model(build: Build, name: str, target: str, tol_scale: float = 1.0) -> None:
    key = f"model:{name}"
    comp = build.compiled[key]
    assert comp["ok"], f"mxc compile {name} --target {target} failed:\n{comp['error']}"
    ran = build.ran.get(key)
    assert ran is not None and ran["ok"], f"running {name} in a fresh process failed:\n" \
        f"{(ran or {}).get('error')}"
    root = corpus_path() / "models" / name
    meta = json.loads((root / "meta.json").read_text())
    got = np.load(build.out / f"{name}-{_tag(target)}-out.npz")
    with np.load(root / "io.npz") as io:
        assert len(got.files) == len(meta["list_outputs"])
        for i in range(len(got.files)):
            _compare(got[f"out{i}"], io[f"out__{i}"], meta["rtol"] * tol_scale,
                     meta["atol"] * tol_scale, f"{name} output {i} ({target})")


@pytest.mark.corpus
@pytest.mark.parametrize("name", MODELS)
def test_model_compiles_and_runs_in_fresh_process(name, llvm_build):
    """llvm artifact -> fresh process, runtime only -> MXNet's outputs."""
    if name == "no-corpus":
        require_corpus("models")
    _check_model(llvm_build, name, CPU_TARGET)
    from mxc.runtime import read_manifest
    man = read_manifest(llvm_build.out / f"{name}-{TAG}.mxc")
    if "-mcpu=" in CPU_TARGET:   # the artifact is the requested CPU's code
        assert man["target"]["host"]["cpu"] == CPU_TARGET.split("-mcpu=")[1].split()[0]
    if not man["host_nodes"]:  # everything supported: the whole graph is ONE region
        assert len(man["regions"]) == 1


@pytest.mark.corpus
def test_fully_compiled_artifacts_need_no_compiler(llvm_build):
    """After running only fully compiled artifacts, the fresh process has not imported TVM's
    Python package (the runtime reaches libtvm_runtime through tvm_ffi)."""
    require_corpus("models")
    mods = llvm_build.modules_after_compiled
    assert "tvm" not in mods and "tvm.relax" not in mods, mods


def _ops_info(build: Build, chunk: int) -> dict:
    comp = build.compiled[f"ops:{chunk}"]
    assert comp["ok"], f"compiling op chunk {chunk} failed:\n{comp['error']}"
    return json.loads((build.out / f"ops-{chunk}.json").read_text())


@pytest.mark.corpus
@pytest.mark.parametrize("case_id", CASE_IDS)
def test_op_case_compiled_or_host_in_fresh_process(case_id, llvm_build):
    if case_id == "no-corpus":
        require_corpus("ops")
    case = next(c for c in CASES if c["id"] == case_id)
    info = _ops_info(llvm_build, CASE_IDS.index(case_id) % OP_CHUNKS)
    assert case_id not in info["failed"], f"mxc.compile failed:\n{info['failed'].get(case_id)}"
    piece = next(p for p in info["pieces"] if case_id in p["cases"])
    ran = llvm_build.ran.get(f"ops:{piece['tag']}")
    assert ran is not None and ran["ok"], f"running op artifact {piece['tag']} failed:\n" \
        f"{(ran or {}).get('error')}"
    got = np.load(llvm_build.out / f"ops-{piece['tag']}-out.npz")
    # the outputs of a piece's graph are its cases' outputs, in case order
    offset = 0
    for cid in piece["cases"]:
        if cid == case_id:
            break
        offset += len(next(c for c in CASES if c["id"] == cid)["outputs"])
    data = np.load(require_corpus("ops") / "data" / f"{case_id}.npz")
    tols = case.get("output_tols")
    for i, spec in enumerate(case["outputs"]):
        if spec.get("ignore"):
            continue
        rtol, atol = tols[i] if tols else (case["rtol"], case["atol"])
        assert_close(got[f"out{offset + i}"], data[f"out__{i}"], rtol, atol,
                     f"{case_id} output {i}")


@pytest.mark.corpus
def test_op_case_host_fallbacks_are_what_unsupported_nodes_reports(llvm_build, capsys):
    require_corpus("ops")
    host, expected, regions, pieces, failed = {}, {}, 0, 0, {}
    for k in range(OP_CHUNKS):
        info = _ops_info(llvm_build, k)
        failed.update(info["failed"])
        for piece in info["pieces"]:
            host.update(piece["host"])
            expected.update(piece["expected"])
            regions += piece["regions"]
            pieces += 1
    assert set(host) == set(expected)
    lines = [f"op cases: {len(CASES) - len(failed)} compiled into {regions} TVM region(s) in "
             f"{pieces} artifact(s); {len(host)} host-fallback node(s):"]
    lines += [f"  {name}: {why}" for name, why in sorted(host.items())]
    if failed:
        lines.append(f"{len(failed)} case(s) TVM failed to compile: {', '.join(sorted(failed))}")
    with capsys.disabled():
        print("\n" + "\n".join(lines))


# ---------------------------------------------------------------------------
# CUDA
# ---------------------------------------------------------------------------
def _has_nvcc() -> bool:
    from mxc.backends.tvm.cuda_binary import find_nvcc
    from mxc.errors import BackendError
    try:
        return bool(find_nvcc())
    except BackendError:
        return False


@pytest.fixture(scope="session")
def cuda_build(request, tmp_path_factory) -> Build:
    if corpus_path() is None:
        require_corpus()
    if not _has_nvcc():
        pytest.skip("CUDA compilation needs nvcc (the CUDA toolkit), not installed")
    from mxc.runtime import has_cuda
    build = Build(tmp_path_factory.mktemp("mxc-corpus-cuda"))
    models = [m for m in _selected(request, "cuda_name", MODELS) if m in MODELS
              and m != "no-corpus"]
    t0 = time.perf_counter()
    build.compiled = run_parallel(_model_groups(models, build.out, "cuda") if models else {})
    _model_results(build.compiled, models, build.out, "cuda")
    build.compiled["__wall__"] = {"seconds": time.perf_counter() - t0}
    if has_cuda():
        _run_fresh(build, [{"key": f"model:{m}", "artifact": str(build.out / f"{m}-cuda.mxc"),
                            "inputs": str(_model_inputs(m, build.out)),
                            "outputs": str(build.out / f"{m}-cuda-out.npz")}
                           for m in models if build.compiled[f"model:{m}"]["ok"]])
    _write_timings(build, "cuda")
    return build


@pytest.mark.slow  # ~2 minutes of nvcc/TVM time for the whole corpus on 2 cores
@pytest.mark.corpus
@pytest.mark.parametrize("cuda_name", MODELS)
def test_model_compiles_for_cuda(cuda_name, cuda_build):
    """CUDA compilation works without a GPU; with one, the artifact runs and matches MXNet."""
    if cuda_name == "no-corpus":
        require_corpus("models")
    from mxc.runtime import has_cuda, read_manifest
    comp = cuda_build.compiled[f"model:{cuda_name}"]
    assert comp["ok"], f"mxc compile {cuda_name} --target cuda failed:\n{comp['error']}"
    man = read_manifest(cuda_build.out / f"{cuda_name}-cuda.mxc")
    assert man["target"]["kind"] == "cuda" and man["target"]["arch"].startswith("sm_")
    if has_cuda():
        # GPU kernels reassociate float sums differently from MXNet's CPU ones
        _check_model(cuda_build, cuda_name, "cuda", tol_scale=10.0)
