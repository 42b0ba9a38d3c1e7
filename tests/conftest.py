"""Shared test fixtures: where the MXNet oracle corpus lives.

The corpus (``../shared/corpus`` beside the repository, or ``$MXC_CORPUS``) is
optional: tests that need it skip with a reason when it is absent, so a fresh
clone passes on its own.
"""

from __future__ import annotations

import json
import os
import re
import sys
from functools import lru_cache
from pathlib import Path

import pytest
from hypothesis import settings

# this folder, as pytest puts it on sys.path: also for a subprocess that imports
# ``tests.conftest`` (tests/backends/test_tune_db_lines.py)
sys.path.insert(0, str(Path(__file__).resolve().parent))
from isa_classes import simulate_host, target_under_test  # noqa: E402

# CI explores a fixed set of examples so a run is reproducible; locally each run explores anew.
settings.register_profile("ci", derandomize=True, print_blob=True)
if os.environ.get("CI"):
    settings.load_profile("ci")

REPO = Path(__file__).resolve().parents[1]

# an exception inside a default-schedule rule is a bug: in tests it fails the build,
# naming the rule (production logs it and tries the next rule; build_context.py)
os.environ.setdefault("MXC_STRICT_SCHEDULES", "1")


def corpus_path() -> Path | None:
    root = Path(os.environ.get("MXC_CORPUS", REPO.parent / "shared" / "corpus"))
    return root if root.is_dir() else None


def require_corpus(sub: str = "") -> Path:
    """The corpus directory (or a sub-directory), or skip the calling test."""
    root = corpus_path()
    if root is None or not (root / sub).exists():
        pytest.skip(f"MXNet corpus not found (set MXC_CORPUS; looked in "
                    f"{os.environ.get('MXC_CORPUS', REPO.parent / 'shared' / 'corpus')})")
    return root / sub


#: the CPU a run tests: ``MXC_TEST_TARGET`` (e.g. ``"llvm -mcpu=znver3"``: a Zen 3, which
#: this process then stands in for where this CPU runs its code; tests/isa_classes.py),
#: else this CPU
TEST_TARGET = target_under_test()


@pytest.fixture(scope="session", autouse=True)
def simulated_host():
    """With ``MXC_TEST_TARGET`` naming a CPU this machine can run the code of, the whole
    run stands in for that CPU (:func:`isa_classes.simulate_host`); the CPU's name, or
    None (no target given, or one whose code only compiles here)."""
    if TEST_TARGET == "llvm":
        yield None
        return
    try:
        import tvm  # noqa: F401
    except ImportError:
        yield None
        return
    with pytest.MonkeyPatch.context() as mp:
        yield simulate_host(mp, TEST_TARGET)


def require_runnable_target(target: str = TEST_TARGET) -> str:
    """*target*, or skip the calling test when this CPU cannot run its code."""
    from mxc.backends.tvm.targets import missing_on_host, resolve_target
    missing = missing_on_host(resolve_target(target))
    if missing:
        pytest.skip(f"this CPU lacks {', '.join(missing)} for {target!r}")
    return target


#: one target per CPU code path the schedules choose between (vector width, registers)
ISA_TARGETS = {"avx2": "llvm -mcpu=znver3", "avx512": "llvm -mcpu=skylake-avx512"}


def isa_target(kind: str) -> str:
    """The target of :data:`ISA_TARGETS` *kind*, or skip when this CPU cannot run it."""
    return require_runnable_target(ISA_TARGETS[kind])


@lru_cache(maxsize=None)
def op_cases(split: str = "ops") -> list[dict]:
    """The single-operator cases of one corpus split (``ops`` or ``wave2/ops``)."""
    root = corpus_path()
    if root is None or not (root / split / "cases.jsonl").exists():
        return []
    with open(root / split / "cases.jsonl") as f:
        return [json.loads(line) for line in f if line.strip()]


def model_names(split: str = "models") -> list[str]:
    """The exported models of one corpus split (``models`` or ``wave2/models``)."""
    root = corpus_path()
    if root is None or not (root / split).is_dir():
        return []
    return sorted(p.name for p in (root / split).iterdir() if (p / "symbol.json").exists())


def load_corpus_model(split: str, name: str):
    """``(dir, meta, symbol, params)`` of a corpus model (``split``: ``models`` or
    ``wave2/models``), or skip when the corpus is absent."""
    import mxc
    root = require_corpus(split) / name
    meta = json.loads((root / "meta.json").read_text())
    return root, meta, mxc.sym.load(root / "symbol.json"), mxc.nd.load(root / "model.params")


@pytest.fixture
def corpus() -> Path:
    return require_corpus()


def skip_where_simulated(simulated_host, what: str) -> None:
    """Skip a test that compares a subprocess's work with this process's view of the
    CPU while this run stands in for another CPU (MXC_TEST_TARGET): the subprocess
    sees this machine's CPU, so the comparison would be of two different CPUs."""
    if simulated_host:
        pytest.skip(f"this run stands in for a {simulated_host} (MXC_TEST_TARGET); {what} "
                    f"runs in a subprocess, which sees this machine's CPU")


#: the vector families every AMX CPU has beside its tiles, which mxc's tile kernels are
#: chosen with (``microarch.int8_dot``/``bf16_dot`` gate ``int8_tiles``/``bf16_tiles``)
AMX_COMPANIONS = ("avx512f", "avx512bw", "avx512vl", "avx512vnni", "avx512bf16")
AMX_FEATURES = ("amx-tile", "amx-bf16", "amx-int8")


def _amx_emulated_target(monkeypatch, companions: tuple[str, ...]):
    """This CPU's features plus AMX and *companions*, the tile steps emulated; skips
    naming the companions this CPU lacks (see :func:`amx_emulated`)."""
    pytest.importorskip("tvm")
    from mxc.backends.tvm.build import resolve_target
    from mxc.backends.tvm.options import ENV_EMULATE_AMX
    from mxc.backends.tvm.targets import missing_on_host
    monkeypatch.setenv(ENV_EMULATE_AMX, "1")
    host = dict(resolve_target("llvm").export())
    mattr = [a for a in host.get("mattr", []) if a.lstrip("+-") not in companions]
    target = resolve_target({"kind": "llvm", "mcpu": host.get("mcpu", "generic"),
                             "mattr": mattr + [f"+{f}" for f in companions + AMX_FEATURES]})
    missing = set(missing_on_host(target)) - set(AMX_FEATURES)
    if missing:
        pytest.skip(f"this CPU lacks {', '.join(sorted(missing))}, which AMX CPUs have beside "
                    f"their tiles; the AMX kernels' sapphirerapids assembly is checked instead")
    return target


@pytest.fixture
def amx_emulated(monkeypatch):
    """A target of this CPU's features plus AMX (and the AVX-512 families an AMX CPU
    has), its tile steps built as scalar emulation (``MXC_EMULATE_AMX=1``,
    :mod:`mxc.backends.tvm.schedules.base.amx`) so the AMX kernels run here.  On a CPU
    without those AVX-512 families (an AVX2 Zen 3) the rest of such a build cannot run:
    the test skips naming them, and the sapphirerapids assembly tests cover the kernels."""
    return _amx_emulated_target(monkeypatch, AMX_COMPANIONS)


@pytest.fixture
def amx_int8_emulated(monkeypatch):
    """:func:`amx_emulated` for the int8 tile kernels alone: they need AVX512-VNNI beside
    the tiles, not AVX512-BF16, so they run on a Cascade Lake too."""
    return _amx_emulated_target(monkeypatch, tuple(f for f in AMX_COMPANIONS
                                                   if f != "avx512bf16"))


@pytest.fixture
def no_library_write(monkeypatch):
    """Fail the test if any library reaches the disk (or dlopen) before a refusal
    (the reliability tests of signed and forged artifacts)."""
    from mxc.runtime import artifact as art
    from mxc.runtime import session as session_mod

    def refuse(*a, **k):
        raise AssertionError("the library was written to disk before the artifact was refused")
    monkeypatch.setattr(art, "extract_library", refuse)
    monkeypatch.setattr(session_mod, "_LIBRARIES", {})


def compile_and_run(graph, params: dict, feeds: dict):
    """Compile *graph* (an IR graph) with *params* bound, every feed's shape and dtype given;
    returns (the compiled model, its first output as numpy)."""
    import numpy as np

    import mxc
    sym = mxc.sym.Symbol.from_graph(graph)
    model = mxc.compile(sym, (params, {}), shapes={k: v.shape for k, v in feeds.items()},
                        dtypes={k: str(v.dtype) for k, v in feeds.items()})
    return model, np.asarray(model.session().run(feeds)[0])


#: the input shape of :func:`tiny_conv`
TINY_CONV_SHAPE = {"data": (1, 4, 8, 8)}


def tiny_conv():
    """(graph, params, Relax module) of one 3x3 convolution + relu: a single tuning task,
    quick to measure (the model of the tuning tests)."""
    import numpy as np

    from mxc import sym as S
    from mxc.backends.tvm import lower_graph
    x = S.var("data")
    y = S.Convolution(x, kernel=(3, 3), num_filter=8, pad=(1, 1), name="conv")
    graph = S.Activation(y, act_type="relu", name="relu").graph
    rng = np.random.RandomState(0)
    params = {"conv_weight": rng.uniform(-1, 1, (8, 4, 3, 3)).astype("float32"),
              "conv_bias": rng.uniform(-1, 1, (8,)).astype("float32")}
    return graph, params, lower_graph(graph, shapes=TINY_CONV_SHAPE, params=params)


@pytest.fixture(scope="session")
def tiny_conv_tuned(tmp_path_factory):
    """(graph, params, module, database, report): :func:`tiny_conv` tuned to 2 trials
    (random search) plus its default schedule's record, not verified -- one tune for
    the test files that check a tuned database (tests copy it before changing it)."""
    pytest.importorskip("tvm")
    from mxc.backends.tvm.tune import tune
    graph, params, mod = tiny_conv()
    db = tmp_path_factory.mktemp("tiny-conv-tuned") / "db"
    # verify=False: the database's best records are what the tests apply; re-measurement
    # (which may keep a kernel's default) is test_tvm_tune_verify.py's
    report = tune(mod, "llvm", 2, db, search="random", progress=False, verify=False)
    return graph, params, mod, db, report


#: what a skipped test may have lacked, told apart by its skip reason, with how a user gets it
#: (the README's test command installs every Python package the suite uses; these are the rest)
OPTIONAL_NEEDS = (
    ("the MXNet corpus", re.compile(r"corpus", re.I), "set MXC_CORPUS"),
    ("Graphviz's dot", re.compile(r"\bdot\b|graphviz", re.I), "apt-get install graphviz"),
    ("headless Chromium", re.compile(r"chromium", re.I), "apt-get install chromium"),
    ("an ARM cross compiler", re.compile(r"cross compiler", re.I),
     "apt-get install g++-aarch64-linux-gnu g++-arm-linux-gnueabihf"),
    ("ARM emulation", re.compile(r"qemu|arm64 root", re.I),
     "apt-get install qemu-user-static debootstrap; python tools/arm_root.py"),
    ("a C/C++ compiler", re.compile(r"g\+\+|gcc|C\+\+ compiler|C compiler", re.I), "apt-get install g++"),
    ("nvcc", re.compile(r"nvcc|CUDA", re.I), "the CUDA toolkit"),
    ("the [tune] extra", re.compile(r"xgboost|tornado|\[tune\]", re.I), 'pip install ".[tune]"'),
)


def pytest_collection_finish(session):
    """Start building the native extension libraries the collected tests need, on one core
    in the background, while the tests before them run (native_libs.build_in_background).
    The helper module is loaded only when native tests were collected: nothing else
    starts it."""
    native = sys.modules.get("tests.extensions.native.native_libs")
    if native is not None and not session.config.option.collectonly:
        native.build_in_background(session)


def pytest_terminal_summary(terminalreporter):
    """One line naming the optional tools whose absence skipped tests, and how to get each."""
    counts: dict[str, int] = {}
    for report in terminalreporter.stats.get("skipped", []):
        longrepr = getattr(report, "longrepr", None)
        reason = longrepr[2] if isinstance(longrepr, tuple) and len(longrepr) == 3 else str(longrepr)
        for label, pattern, hint in OPTIONAL_NEEDS:
            if pattern.search(reason):
                key = f"{label} ({hint})"
                counts[key] = counts.get(key, 0) + 1
                break
    if counts:
        missing = ", ".join(f"{key}: {n}" for key, n in sorted(counts.items()))
        terminalreporter.write_line(f"skipped for want of optional tools: {missing}")


def register_mysoftsign() -> str:
    """Register the op of the wave-2 ``custom_softsign_mlp`` (a Python ``Custom`` op in
    MXNet), as its meta.json describes it: y = scale * x / (1 + |x|)."""
    import numpy as np

    import mxc
    mxc.register_custom_op(
        "mysoftsign", override=True,
        parse_attrs=lambda attrs: (1, 1),
        input_names=lambda attrs, n: ["data"],
        infer_shape=lambda attrs, in_shapes: (in_shapes, [in_shapes[0]]),
        forward=lambda attrs, inputs, outputs: [
            np.float32(float(attrs.get("scale", "1.0"))) * inputs[0]
            / (np.float32(1) + np.abs(inputs[0]))])
    return "mysoftsign"
