"""Compile options: read from the environment in one place, recorded in the manifest;
the library below takes explicit values and never touches ``os.environ``.

Oracles: the environment given, a 3x3 convolution Winograd applies to under ``auto``
(16 channels, 16x16 output: >= MIN_SIZE), and the source text for the layering rule.
"""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
import pytest

from mxc.backends.tvm.options import (ENVIRONMENT, WINOGRAD_MODES, CompileOptions,
                                      TuneOptions)
from mxc.errors import BackendError

REPO = Path(__file__).resolve().parents[2]


def test_from_env_fills_only_what_was_not_given_and_records_it():
    env = {"MXC_WINOGRAD": "0", "MXC_CUDA_ARCH": "86", "MXC_TUNING_DB": "/tmp/db",
           "CXX": "aarch64-linux-gnu-g++"}
    opts = CompileOptions.from_env(env, winograd="on")
    assert opts.winograd == "on"                       # given: the variable is not used
    assert opts.cuda_arch == "sm_86" and opts.db == "/tmp/db"
    assert opts.cxx == "aarch64-linux-gnu-g++"         # the linker (backends/tvm/toolchain.py)
    # CXX picks the linker, not the code: read, not recorded
    assert dict(opts.environment) == {"MXC_CUDA_ARCH": "86", "MXC_TUNING_DB": "/tmp/db"}
    assert set(ENVIRONMENT) == set(env) - {"CXX"}


@pytest.mark.parametrize("value, mode", [("0", "off"), ("off", "off"), ("No", "off"),
                                         ("on", "on"), ("1", "auto"), ("auto", "auto")])
def test_winograd_variable_spellings(value, mode):
    assert CompileOptions.from_env({"MXC_WINOGRAD": value}).winograd == mode
    assert TuneOptions.from_env({"MXC_WINOGRAD": value}).winograd == mode


def test_empty_environment_leaves_defaults():
    opts = CompileOptions.from_env({})
    assert (opts.winograd, opts.db, opts.cuda_arch, dict(opts.environment)) == (
        None, None, None, {})


def test_options_are_checked_when_made():
    with pytest.raises(BackendError, match="winograd must be one of auto, on, off"):
        CompileOptions(winograd="sometimes")
    with pytest.raises(BackendError, match="trials must be >= 1"):
        TuneOptions(trials=0)


def test_the_build_context_checks_the_winograd_mode_like_the_options():
    pytest.importorskip("tvm")
    from mxc.backends.tvm.build_context import build_context
    from mxc.backends.tvm.targets import resolve_target
    for mode in WINOGRAD_MODES:
        assert build_context(resolve_target("llvm"), winograd=mode).winograd == mode
    with pytest.raises(BackendError, match="winograd must be one of auto, on, off"):
        build_context(resolve_target("llvm"), winograd="sometimes")


def test_environment_reaches_the_manifest_and_library_code_ignores_it(monkeypatch):
    pytest.importorskip("tvm")
    import mxc
    from mxc import sym as S
    from mxc.backends.tvm.compile import compile_with
    x = S.var("data")
    y = S.Convolution(x, kernel=(3, 3), pad=(1, 1), num_filter=16, no_bias=True, name="c")
    shapes = {"data": (1, 16, 16, 16)}
    params = {"c_weight": np.random.RandomState(0).uniform(-1, 1, (16, 16, 3, 3))
              .astype("float32")}
    monkeypatch.setenv("MXC_WINOGRAD", "0")
    model = mxc.compile(y, params, shapes)
    assert model.manifest["environment"] == {"MXC_WINOGRAD": "0"}
    assert model.manifest["winograd"]["mode"] == "off"
    assert model.manifest["winograd"]["convolutions"] == 0
    # explicit options: the variable is not read below the options layer
    explicit = compile_with(y, params, shapes, options=CompileOptions())
    assert explicit.manifest["environment"] == {}
    assert explicit.manifest["winograd"]["mode"] == "auto"
    assert explicit.manifest["winograd"]["convolutions"] == 1
    feed = {"data": np.random.RandomState(1).uniform(-1, 1, shapes["data"]).astype("float32")}
    np.testing.assert_allclose(explicit.run(feed)[0], model.run(feed)[0], rtol=1e-4, atol=1e-4)


def _environ_uses(path: Path) -> list[tuple[int, str]]:
    """(line, kind) of each ``os.environ`` / ``os.getenv`` / ``os.putenv`` use in *path*;
    kind is "write" for assignments, deletions and mutating calls."""
    tree = ast.parse(path.read_text(), str(path))
    found = []
    mutators = {"update", "setdefault", "pop", "popitem", "clear"}
    for node in ast.walk(tree):
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.Delete)):
            targets = node.targets if isinstance(node, (ast.Assign, ast.Delete)) else [node.target]
            for t in targets:
                if isinstance(t, ast.Subscript) and ast.unparse(t.value) == "os.environ":
                    found.append((node.lineno, "write"))
        elif isinstance(node, ast.Call) and (
                ast.unparse(node.func) == "os.putenv" or isinstance(node.func, ast.Attribute)
                and ast.unparse(node.func.value) == "os.environ" and node.func.attr in mutators):
            found.append((node.lineno, "write"))
        elif isinstance(node, ast.Attribute) and ast.unparse(node) in ("os.environ",
                                                                       "os.getenv"):
            found.append((node.lineno, "read"))   # every use reads, writes included
    return found


#: the one environment write left (documented there): TVM sizes each thread's pool from
#: TVM_NUM_THREADS when it creates it; see mxc/runtime/threads.py
ENV_WRITERS = {"mxc/runtime/threads.py"}
#: backend modules that read the environment: the options layer, and where nvcc lives
BACKEND_READERS = {"mxc/backends/tvm/options.py", "mxc/backends/tvm/cuda_binary.py"}


def test_no_library_module_writes_or_reads_the_environment_outside_its_place():
    writes, reads = {}, {}
    for path in sorted((REPO / "mxc").rglob("*.py")):
        rel = path.relative_to(REPO).as_posix()
        for line, kind in _environ_uses(path):
            (writes if kind == "write" else reads).setdefault(rel, []).append(line)
    assert set(writes) <= ENV_WRITERS, writes
    assert set(writes) == ENV_WRITERS                 # the checker sees that write
    backend = {p for p in reads if p.startswith("mxc/backends/")}
    assert backend <= BACKEND_READERS, reads
    assert "mxc/backends/tvm/options.py" in reads     # and reads


def test_progress_callback_hears_every_stage_and_nothing_is_printed(capsys):
    pytest.importorskip("tvm")
    import mxc
    from mxc import sym as S
    seen = []
    x = S.var("x")
    model = mxc.compile(S.exp(x), None, {"x": (2,)},
                        progress=lambda stage, summary, seconds: seen.append(
                            (stage, summary, seconds >= 0)))
    assert [s[0] for s in seen] == ["passes", "partition for tvm", "lower to Relax",
                                    "build for llvm", "runtime graph"]
    assert seen[3][1] == "one library" and all(s[2] for s in seen)
    assert set(model.timings) == {"passes", "partition", "lower", "build", "runtime graph"}
    assert capsys.readouterr().err == ""
