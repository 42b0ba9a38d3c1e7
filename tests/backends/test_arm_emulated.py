"""Corpus models cross-compiled for aarch64 and RUN under emulation: MXNet's outputs.

Original gap (issue 37, item 5): ARM artifacts were only checked for their ELF
headers and assembly (test_arm_targets.py); nothing showed that code compiled
for a Graviton2 or a Raspberry Pi computes what MXNet does.

Here the corpus models are compiled on this machine for ``--cpu neoverse-n1``
(once per session, in parallel processes as the x86 corpus tests do), then ONE
emulated process -- the arm64 root's Python under ``qemu-aarch64-static -cpu
max`` (tools/arm_root.py builds the root; ``$MXC_ARM_ROOT`` or
``~/.cache/mxc/arm64-root``) -- loads every artifact with ``mxc.runtime`` alone
(tests/runtime/_corpus_jobs.py ``run``, the x86 tests' runner) and writes their
outputs; they are compared here with ``io.npz`` under each model's own
``rtol``/``atol``, the tolerances of the x86 corpus tests.  The runtime reads
the emulated CPU's HWCAPs itself: no faked ``/proc/cpuinfo``.

Oracle: MXNet 1.9.1's recorded outputs.  Emulation is slow (TCG, ~50x), so by
default a subset that keeps every op family and dtype of the corpus runs
(:data:`DEFAULT_MODELS`); ``MXC_ARM_MODELS=all`` (or a comma-separated list)
runs more; a Raspberry Pi 4's (``cortex-a72``) and a Graviton3's
(``neoverse-v1``: SVE) artifacts of small models run beside them.
``--precision bf16`` (BFDOT, Neoverse V1/V2) is test_arm_kernels.py's;
here bfloat16 is covered by the AMP models, whose bf16 parameters and casts compile
for any CPU.  Skips, naming what is missing, without the cross
compiler, qemu-user or the root.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("tvm")

from conftest import corpus_path, require_corpus  # noqa: E402
from oracle import assert_close  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
JOBS = REPO / "tests" / "runtime" / "_corpus_jobs.py"
CPU = "neoverse-n1"          # Graviton2 / Ampere Altra: NEON + dotprod (INT8 sdot)
QEMU_CPU = "max"             # every ARMv8/9 extension qemu emulates
#: seconds the one emulated process may take before the test gives up on it
EMULATION_TIMEOUT = 900

_spec = importlib.util.spec_from_file_location("arm_root", REPO / "tools" / "arm_root.py")
arm_root = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(arm_root)

#: (corpus split, model) run by default: every op family and input/parameter dtype of waves 1
#: and 2 whose compile is cheap (the whole corpus passes too, MXC_ARM_MODELS=all: 34 models,
#: ~6 min of compiling on 2 cores, ~80 s emulated).  Left to "all": resnet18_v1, squeezenet1.1,
#: oldres, the mobilenets and the resnet-based int8/fused models (same op families, 30-130 s
#: each to compile), and the other members of families represented here.
DEFAULT_MODELS = (
    ("models", "mlp"),                      # FullyConnected, SoftmaxOutput
    ("models", "lenet"),                    # Convolution, tanh, Pooling, Flatten
    ("models", "structure3"),               # the subgraph-test structures
    ("wave2/models", "fused_transformer"),  # attention (batch_dot, softmax, LayerNorm), fused FC
    ("wave2/models", "rnn_lstm2_classifier"),  # Embedding + the fused RNN op (LSTM, 2 layers)
    ("wave2/models", "int8_mobilenet0.5_nocalib"),  # INT8: quantize/requantize, depthwise conv
    ("wave2/models", "amp_bf16_cnn"),       # bfloat16 params, amp_cast/amp_multicast
    ("wave2/models", "cf_while_loop"),      # control flow: a host step calling compiled bodies
    ("wave2/models", "np_attention"),       # DeepNumpy ops
    ("wave2/models", "preproc_resize_cnn"),  # uint8 input, image resize/normalize
    ("wave2/models", "legacy_v1_lenet"),    # *_v1 legacy ops
    ("wave2/models", "dyn_boolean_mask_filter"),  # a data-dependent output shape (host step)
)
#: run under ``-cpu cortex-a72`` (a Raspberry Pi 4: no dotprod) with the neoverse-n1 MLP,
#: beside the models' process (CI's time): what the runtime reports and refuses there
OLDER_CPU_CHECK = (
    "import json, sys\n"
    "from mxc.cli.inspect_cmd import host_report\n"
    "import mxc.runtime as rt\n"
    "from mxc.errors import MxcError\n"
    "report = host_report()\n"
    "try:\n"
    "    rt.load(sys.argv[1]); refusal = None\n"
    "except MxcError as exc:\n"
    "    refusal = f'{type(exc).__name__}: {exc}'\n"
    "print(json.dumps({'report': report, 'refusal': refusal}))\n")


#: other CPUs' artifacts, run in the same process (``-cpu max`` has every feature they use):
#: a Raspberry Pi 4 (plain NEON) and a Graviton3 (LLVM vectorizes some loops of its lenet
#: with SVE: 43 SVE instructions, measured with aarch64-linux-gnu-objdump)
OTHER_CPUS = (("models", "mlp", "cortex-a72"), ("models", "lenet", "neoverse-v1"))
#: needs a Python custom operator registered in the running process (not an ARM concern)
NOT_EMULATED = {"custom_softsign_mlp": "a Python Custom op (registered per process)"}


def selected_models() -> list[tuple[str, str, str]]:
    """(split, model, --cpu) of this run: :data:`DEFAULT_MODELS`, or ``$MXC_ARM_MODELS``
    (``all``, or names), each for :data:`CPU`; then :data:`OTHER_CPUS`."""
    choice = os.environ.get("MXC_ARM_MODELS", "").strip()
    root = corpus_path()
    every = [(split, p.name) for split in ("models", "wave2/models")
             if root is not None and (root / split).is_dir()
             for p in sorted((root / split).iterdir()) if (p / "symbol.json").exists()]
    if choice == "all":
        chosen = [m for m in every if m[1] not in NOT_EMULATED]
    elif choice:
        names = {n.strip() for n in choice.split(",")}
        chosen = [m for m in every if m[1] in names]
    else:
        chosen = list(DEFAULT_MODELS)
    return [(split, name, CPU) for split, name in chosen] + list(OTHER_CPUS)


MODELS = selected_models()


def require_emulation() -> Path:
    """The arm64 root, or skip naming what is missing (cross compiler, qemu, root)."""
    if shutil.which("aarch64-linux-gnu-g++") is None:
        pytest.skip("no C++ cross compiler aarch64-linux-gnu-g++ "
                    "(apt-get install g++-aarch64-linux-gnu)")
    root = arm_root.default_root()
    why = arm_root.missing(root)
    if why:
        pytest.skip("ARM emulation needs " + "; ".join(why))
    return root


@dataclass
class Emulated:
    out: Path
    compiled: dict = field(default_factory=dict)   # "model@cpu" -> {ok, seconds, error}
    ran: dict = field(default_factory=dict)        # "model@cpu" -> runner result
    seconds: dict = field(default_factory=dict)    # "compile" / "emulated" wall time
    older_cpu: subprocess.CompletedProcess | None = None   # see OLDER_CPU_CHECK


def _feeds(split: str, name: str, out: Path) -> tuple[Path, dict]:
    path = out / f"{name}-in.npz"
    with np.load(corpus_path() / split / name / "io.npz") as io:
        feeds = {k[4:]: io[k] for k in io.files if k.startswith("in__")}
    np.savez(path, **feeds)
    return path, feeds


def _compile_command(split: str, name: str, cpu: str, feeds: dict,
                     artifact: Path) -> list[str]:
    """``mxc compile`` of a corpus model for *cpu*: no flag beyond ``--cpu``."""
    root = corpus_path() / split / name
    argv = ["compile", str(root / "symbol.json"), "--params", str(root / "model.params"),
            "--cpu", cpu, "-q", "-o", str(artifact)]
    for k, v in feeds.items():
        argv += ["--shape", f"{k}={','.join(map(str, v.shape))}"]
        if v.dtype != np.float32:
            argv += ["--dtype", f"{k}={v.dtype}"]
    return argv


def _env() -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return env


@pytest.fixture(scope="session")
def emulated(tmp_path_factory) -> Emulated:
    """Compile :data:`MODELS` here (one ``_corpus_jobs.py cli`` process per core), then run
    them all in one emulated aarch64 process; cached for the session."""
    require_corpus()
    root = require_emulation()
    build = Emulated(tmp_path_factory.mktemp("mxc-arm-emulated"))
    claims = build.out / "claims"
    claims.mkdir()
    commands, jobs = {}, []
    for split, name, cpu in MODELS:
        inputs, feeds = _feeds(split, name, build.out)
        key = f"{name}@{cpu}"
        artifact = build.out / f"{name}-{cpu}.mxc"
        commands[key] = _compile_command(split, name, cpu, feeds, artifact)
        jobs.append({"key": key, "artifact": str(artifact), "inputs": str(inputs),
                     "outputs": str(build.out / f"{name}-{cpu}-out.npz")})
    weight = {f"{n}@{c}": (corpus_path() / s / n / "model.params").stat().st_size
              for s, n, c in MODELS}
    spec = build.out / "commands.json"
    spec.write_text(json.dumps({"claims": str(claims), "commands": {
        k: commands[k] for k in sorted(commands, key=lambda k: -weight[k])}}))
    groups = max(1, min(os.cpu_count() or 1, len(commands)))
    t0 = time.perf_counter()
    procs = [subprocess.Popen([sys.executable, str(JOBS), "cli", str(spec),
                               str(build.out / f"compiled-{i}.json")], cwd=REPO, env=_env(),
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
             for i in range(groups)]
    logs = [p.communicate()[0] for p in procs]
    build.seconds["compile"] = time.perf_counter() - t0
    for i in range(groups):
        path = build.out / f"compiled-{i}.json"
        build.compiled.update(json.loads(path.read_text()) if path.exists() else {})
    for key in commands:
        build.compiled.setdefault(key, {"ok": False, "error": "\n".join(logs)[-4000:]})

    runnable = [j for j in jobs if build.compiled[j["key"]]["ok"]]
    jobs_path, result_path = build.out / "jobs.json", build.out / "ran.json"
    jobs_path.write_text(json.dumps(runnable))
    argv, env = arm_root.emulated_python(root, str(JOBS), "run", str(jobs_path),
                                         str(result_path), cpu=QEMU_CPU)
    older = None
    if build.compiled.get(f"mlp@{CPU}", {}).get("ok"):
        o_argv, o_env = arm_root.emulated_python(root, "-c", OLDER_CPU_CHECK,
                                                 str(build.out / f"mlp-{CPU}.mxc"),
                                                 cpu="cortex-a72")
        older = subprocess.Popen(o_argv, cwd=REPO, env=o_env, stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True)
    t0 = time.perf_counter()
    proc = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=EMULATION_TIMEOUT)
    if older is not None:
        out, err = older.communicate(timeout=EMULATION_TIMEOUT)
        build.older_cpu = subprocess.CompletedProcess(older.args, older.returncode, out, err)
    build.seconds["emulated"] = time.perf_counter() - t0
    if proc.returncode == 0 and result_path.exists():
        build.ran = json.loads(result_path.read_text())["jobs"]
    for job in runnable:
        build.ran.setdefault(job["key"], {"ok": False, "error": (
            f"the emulated process exited {proc.returncode}:\n{proc.stderr[-4000:]}")})
    return build


# ---------------------------------------------------------------------------
# tools/arm_root.py itself (nothing downloaded, nothing emulated)
# ---------------------------------------------------------------------------
def test_the_root_gets_the_runtime_packages_pinned_as_pyproject_pins_them():
    reqs = arm_root.requirements()
    text = (REPO / "pyproject.toml").read_text()
    assert [r.split("=")[0].split(">")[0] for r in reqs] == list(arm_root.RUNTIME_PACKAGES)
    assert all(f'"{r}"' in text for r in reqs)   # the same bounds
    assert "apache-tvm==0.27.0.post1" in reqs and not {"cryptography", "tqdm"} & set(reqs)


def test_an_up_to_date_root_is_a_no_op_and_missing_tools_are_named(tmp_path, monkeypatch):
    monkeypatch.setattr(arm_root.shutil, "which", lambda tool: None)
    monkeypatch.setattr(arm_root, "SBIN_DIRS", ())
    root = tmp_path / "root"
    with pytest.raises(arm_root.MissingToolError, match=r"apt-get install debootstrap"):
        arm_root.build(root)
    root.mkdir()
    (root / arm_root.MARKER).write_text(json.dumps(arm_root.request()))
    assert arm_root.build(root) == root.resolve()          # no tool needed: nothing to do
    why = arm_root.missing(root)
    assert len(why) == 1 and "qemu-user-static" in why[0]
    monkeypatch.setattr(arm_root, "LAYOUT", arm_root.LAYOUT + 1)   # built the old way
    with pytest.raises(arm_root.MissingToolError):
        arm_root.build(root)
    assert any("up-to-date arm64 root" in w for w in arm_root.missing(root))


def test_the_emulated_python_sees_mxc_from_the_source_tree_and_no_host_python(tmp_path,
                                                                            monkeypatch):
    monkeypatch.setattr(arm_root.shutil, "which", lambda tool: f"/usr/bin/{tool}")
    (tmp_path / "usr/bin").mkdir(parents=True)
    (tmp_path / "usr/bin/python3.11").touch()
    argv, env = arm_root.emulated_python(tmp_path, "-m", "mxc", cpu="cortex-a72", env={
        "PYTHONHOME": "/x86", "TVM_LIBRARY_PATH": "/x86/lib", "VIRTUAL_ENV": "/v", "HOME": "/h"})
    assert argv == ["/usr/bin/qemu-aarch64-static", "-cpu", "cortex-a72", "-L", str(tmp_path),
                    str(tmp_path / "usr/bin/python3.11"), "-m", "mxc"]
    assert env["PYTHONPATH"].split(os.pathsep) == [str(REPO), str(tmp_path / arm_root.SITE)]
    assert not {"PYTHONHOME", "TVM_LIBRARY_PATH", "VIRTUAL_ENV"} & set(env)
    assert env["HOME"] == "/h"


def _errors(got: np.ndarray, want: np.ndarray, rtol: float, atol: float) -> tuple[float, float]:
    """(max |got - want|, the largest share of the allowed error used: <= 1 passes)."""
    if got.shape != want.shape or want.dtype.kind not in "f":
        return float("nan"), float("nan")
    diff = np.abs(got.astype(np.float64) - want.astype(np.float64))
    allowed = atol + rtol * np.abs(want.astype(np.float64))
    used = np.where(diff == 0, 0.0, diff / np.where(allowed > 0, allowed, np.inf))
    return float(diff.max(initial=0)), float(np.nan_to_num(used, nan=0).max(initial=0))


@pytest.mark.corpus
@pytest.mark.slow
@pytest.mark.parametrize("split, name, cpu", MODELS,
                         ids=[f"{n}-{c}" for _, n, c in MODELS])
def test_model_runs_under_aarch64_emulation_like_mxnet(split, name, cpu, emulated, capsys):
    """ARM artifact -> qemu-aarch64 ``-cpu max``, mxc's runtime -> MXNet's outputs."""
    key = f"{name}@{cpu}"
    comp = emulated.compiled[key]
    assert comp["ok"], f"mxc compile {name} --cpu {cpu} failed:\n{comp['error']}"
    from mxc.runtime import read_manifest
    host = read_manifest(emulated.out / f"{name}-{cpu}.mxc")["target"]["host"]
    assert (host["arch"], host["cpu"]) == ("aarch64", cpu)
    ran = emulated.ran[key]
    assert ran["ok"], f"running {name} under qemu-aarch64 failed:\n{ran.get('error')}"
    root = corpus_path() / split / name
    meta = json.loads((root / "meta.json").read_text())
    got = np.load(emulated.out / f"{name}-{cpu}-out.npz")
    report = []
    with np.load(root / "io.npz") as io:
        assert len(got.files) == len(meta["list_outputs"])
        for i in range(len(got.files)):
            want = io[f"out__{i}"]
            err, used = _errors(got[f"out{i}"], want, meta["rtol"], meta["atol"])
            report.append(f"out{i} max|err| {err:.3g} ({used:.0%} of tolerance)")
            assert_close(got[f"out{i}"], want, meta["rtol"], meta["atol"],
                         f"{name} output {i} (aarch64 {cpu} under qemu -cpu {QEMU_CPU})")
    with capsys.disabled():
        print(f"\n  {name} --cpu {cpu}: {'; '.join(report)}; ran {ran['run_s']:.1f} s emulated",
              end="")


@pytest.mark.corpus
@pytest.mark.slow
def test_emulated_run_time_is_reported(emulated, capsys):
    """The cost of this check in CI's time (compile here, one emulated process)."""
    require_corpus()
    with capsys.disabled():
        print(f"\n  aarch64 emulation: {len(MODELS)} artifacts, compiled in "
              f"{emulated.seconds['compile']:.0f} s, emulated process "
              f"{emulated.seconds['emulated']:.0f} s", end="")
    assert emulated.seconds["emulated"] < EMULATION_TIMEOUT


@pytest.mark.corpus
@pytest.mark.slow
def test_a_cpu_without_dotprod_refuses_the_artifact_in_arm_terms(emulated):
    """The same neoverse-n1 artifact under ``-cpu cortex-a72`` (a Raspberry Pi 4: no dotprod):
    the runtime, reading the emulated HWCAPs, refuses it in one line naming dotprod, and
    ``mxc inspect --host`` reports the ARM CPU (a runtime-only install: no LLVM there)."""
    if emulated.older_cpu is None:
        pytest.skip("the mlp artifact was not built this session (MXC_ARM_MODELS)")
    proc = emulated.older_cpu
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got["report"]["arch"] == "aarch64" and got["report"]["model"] == ""  # not the x86's
    assert "neon" in got["report"]["features"] and "dotprod" not in got["report"]["features"]
    refusal = got["refusal"]
    assert refusal and "dotprod" in refusal and "\n" not in refusal, refusal
    assert not any(x86 in refusal for x86 in ("avx", "x86-64", "sse")), refusal
