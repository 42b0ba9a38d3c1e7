"""What a new user hits in the first hour (issue "First contact"), each reproduced.

Every test runs the command that went wrong and checks what the user now
sees: one clear line (no traceback), the documented exit code, and the right
result.  The MLP shipped in ``examples/mlp`` is the model throughout; its
reference outputs come from the numpy reference backend.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from mxc.cli import main

REPO = Path(__file__).resolve().parents[2]
MLP = REPO / "examples" / "mlp"
SYMBOL, PARAMS = str(MLP / "mlp-symbol.json"), str(MLP / "mlp-0000.params")
NUM_WEIGHTS = 6   # fc1..fc3 weight and bias


def cli(*args):
    return subprocess.run([sys.executable, "-m", "mxc.cli", *args], capture_output=True,
                          text=True, cwd=REPO)


def one_line_error(r, code: int) -> str:
    assert r.returncode == code, (r.returncode, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert "Traceback" not in r.stderr and len(lines) == 1, r.stderr
    return lines[0]


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    out = tmp_path_factory.mktemp("ref") / "ref.npz"
    assert main(["run", SYMBOL, "--params", PARAMS, "--inputs", str(MLP / "input.npz"),
                 "--output", str(out)]) == 0
    return np.load(out)["out0"]


@pytest.fixture(scope="module")
def artifact(tmp_path_factory):
    pytest.importorskip("tvm")
    out = tmp_path_factory.mktemp("art") / "mlp.mxc"
    assert main(["compile", SYMBOL, "--params", PARAMS, "--input-shapes", "data:[4,784]",
                 "-q", "-o", str(out)]) == 0
    return out


# -- 2. a model compiled without its weights ---------------------------------------------
def test_compile_without_params_fails_naming_the_weights(tmp_path):
    pytest.importorskip("tvm")
    r = cli("compile", SYMBOL, "--shape", "data=4,784", "-o", str(tmp_path / "m.mxc"))
    line = one_line_error(r, 2)
    assert f"no parameters given; the model needs {NUM_WEIGHTS}" in line
    assert "fc1_weight" in line and "--weights-as-inputs" in line
    assert not (tmp_path / "m.mxc").exists()


def test_compile_with_another_models_params_says_so(tmp_path):
    pytest.importorskip("tvm")
    from mxc.frontend.params import save_params
    other = tmp_path / "other-0000.params"
    save_params(str(other), {"arg:conv0_weight": np.zeros((2, 2), np.float32)})
    r = cli("compile", SYMBOL, "--params", str(other), "--shape", "data=4,784",
            "-o", str(tmp_path / "m.mxc"))
    assert r.returncode == 2
    assert "1 parameter(s) in" in r.stderr and "match no input" in r.stderr   # the warning
    assert (f"0 of {NUM_WEIGHTS} parameters found in {other} — is it this model's file?"
            in r.stderr)


def test_compile_with_a_missing_key_names_it(tmp_path):
    pytest.importorskip("tvm")
    from mxc.frontend.params import load_params, save_params
    params = load_params(PARAMS)
    del params["arg:fc3_bias"]
    partial = tmp_path / "partial-0000.params"
    save_params(str(partial), params)
    r = cli("compile", SYMBOL, "--params", str(partial), "--shape", "data=4,784",
            "-o", str(tmp_path / "m.mxc"))
    line = one_line_error(r, 2)
    assert f"{NUM_WEIGHTS - 1} of {NUM_WEIGHTS} parameters found" in line
    assert "Missing: fc3_bias." in line


def test_weights_as_inputs_is_explicit(tmp_path, capsys):
    pytest.importorskip("tvm")
    from mxc.runtime import read_manifest
    out = tmp_path / "m.mxc"
    assert main(["compile", SYMBOL, "--shape", "data=4,784", "--weights-as-inputs", "-q",
                 "-o", str(out)]) == 0
    names = {i["name"] for i in read_manifest(out)["inputs"]}
    assert {"fc1_weight", "fc3_bias"} <= names
    assert len(read_manifest(out)["weights_as_inputs"]) == NUM_WEIGHTS
    capsys.readouterr()
    assert main(["inspect", str(out)]) == 0
    assert f"{NUM_WEIGHTS} weight(s) fed at run time" in capsys.readouterr().out


def test_reference_run_without_params_is_concise():
    r = cli("run", SYMBOL, "--inputs", str(MLP / "input.npz"))
    line = one_line_error(r, 2)
    assert f"the model needs {NUM_WEIGHTS}" in line and "--params" in line


# -- 5. shapes, inputs, inspect, op names, exit codes ------------------------------------
def test_zero_dimension_is_a_usage_error():
    r = cli("compile", SYMBOL, "--params", PARAMS, "--shape", "data=0,784")
    assert r.returncode == 64 and "dimensions must be positive" in r.stderr
    assert "division" not in r.stderr and "Traceback" not in r.stderr


def test_npy_inputs(tmp_path, reference):
    x = np.load(MLP / "input.npz")["data"]
    np.save(tmp_path / "x.npy", x)
    out = tmp_path / "o.npz"
    assert main(["run", SYMBOL, "--params", PARAMS, "--inputs", str(tmp_path / "x.npy"),
                 "--output", str(out)]) == 0
    np.testing.assert_array_equal(np.load(out)["out0"], reference)
    (tmp_path / "bad.npy").write_bytes(b"not numpy")
    line = one_line_error(cli("run", SYMBOL, "--params", PARAMS, "--inputs",
                              str(tmp_path / "bad.npy")), 2)
    assert "bad.npy: cannot read inputs" in line


def test_inspect_a_params_file_lists_its_arrays():
    r = cli("inspect", PARAMS)
    assert r.returncode == 0 and "a .params file" in r.stdout and "arg:fc1_weight" in r.stdout
    line = one_line_error(cli("compile", PARAMS, "--shape", "data=4,784"), 2)
    assert "is a .params file (MXNet NDArray list), not a symbol JSON" in line


def test_misspelt_op_names_node_and_suggestion_on_every_verb(tmp_path):
    bad = tmp_path / "bad-symbol.json"
    bad.write_text(Path(SYMBOL).read_text().replace('"FullyConnected"', '"FullyConected"'))
    for args in (["inspect"], ["run", "--fill-mode", "ones", "--shape", "data=1,784"],
                 ["compile", "--shape", "data=1,784"], ["partition", "--backend", "default",
                                                        "-o", str(tmp_path / "p.json")]):
        r = cli(args[0], str(bad), *args[1:])
        line = one_line_error(r, 3)
        assert "FullyConected (x3: nodes 'fc1', 'fc2', 'fc3'; did you mean 'FullyConnected'?)" \
            in line, args


def test_usage_errors_and_frontend_errors_have_different_codes(tmp_path):
    assert cli("inspect", SYMBOL, "--no-such-flag").returncode == 64
    (tmp_path / "x.json").write_text("{")
    assert cli("inspect", str(tmp_path / "x.json")).returncode == 2


def test_exit_code_table_in_readme_matches_the_errors():
    from mxc import errors
    readme = (REPO / "README.md").read_text()
    table = readme[readme.index("| exit code |"):]
    for cls in (errors.FrontendError, errors.GraphError, errors.ExecutionError,
                errors.PartitionError, errors.ExtensionError, errors.BackendError,
                errors.ArtifactError, errors.DependencyError):
        assert f"| {cls.exit_code} |" in table and cls.__name__ in table, cls
    assert f"| {errors.USAGE_EXIT_CODE} |" in table


# -- 6. targets ---------------------------------------------------------------------------
def test_tvm_target_strings_and_unsupported_kinds(tmp_path):
    pytest.importorskip("tvm")
    from mxc.backends.tvm.targets import parse_target_text
    assert parse_target_text("llvm -mcpu=skylake-avx512 -mattr=+avx512f,+fma") == {
        "kind": "llvm", "mcpu": "skylake-avx512", "mattr": ["+avx512f", "+fma"]}
    for kind in ("opencl", "metal", "vulkan", "c"):
        line = one_line_error(cli("compile", SYMBOL, "--params", PARAMS, "--shape",
                                  "data=4,784", "--target", kind, "-o",
                                  str(tmp_path / "m.mxc")), 7)
        assert f"target kind {kind!r} cannot be run" in line and "llvm (CPU), cuda" in line


def test_generic_cpu_artifact_and_inspect_features(tmp_path, capsys, reference):
    pytest.importorskip("tvm")
    from mxc.runtime import read_manifest
    portable, skx = tmp_path / "generic.mxc", tmp_path / "skx.mxc"
    assert main(["compile", SYMBOL, "--params", PARAMS, "--shape", "data=4,784", "--cpu",
                 "generic", "-q", "-o", str(portable)]) == 0
    assert main(["compile", SYMBOL, "--params", PARAMS, "--shape", "data=4,784", "--target",
                 "llvm -mcpu=skylake-avx512", "-q", "-o", str(skx)]) == 0
    host = read_manifest(portable)["target"]["host"]
    assert host["cpu"] == "generic" and "avx2" not in host["features"]
    assert "avx512f" in read_manifest(skx)["target"]["host"]["features"]
    capsys.readouterr()
    assert main(["inspect", str(skx)]) == 0
    text = capsys.readouterr().out
    assert "CPU features needed:" in text and "avx512f" in text
    out = tmp_path / "o.npz"
    assert main(["run", str(portable), "--inputs", str(MLP / "input.npz"), "-o", str(out)]) == 0
    np.testing.assert_allclose(np.load(out)["out0"], reference, rtol=1e-5, atol=1e-6)


# -- 7. ONNX Runtime habits ---------------------------------------------------------------
def test_ort_session_api(artifact, reference):
    import mxc.runtime
    x = np.load(MLP / "input.npz")["data"]
    sess = mxc.runtime.InferenceSession(str(artifact), providers=["CPUExecutionProvider"])
    (inp,) = sess.get_inputs()
    assert (inp.name, inp.shape, inp.type) == ("data", (4, 784), "tensor(float)")
    assert sess.get_outputs()[0].type == "tensor(float)"
    assert sess.get_providers() == ["CPUExecutionProvider"]
    np.testing.assert_allclose(sess.run(None, {"data": x})[0], reference, rtol=1e-5, atol=1e-6)
    by_pos = sess.run(["out0"], {"data": x})
    by_name = sess.run([sess.get_outputs()[0].name], {"data": x})
    assert len(by_pos) == 1 and np.array_equal(by_pos[0], by_name[0])
    from mxc.errors import ArtifactError, ExecutionError
    with pytest.raises(ExecutionError, match="did you mean 'out0'"):
        sess.run(["out1"], {"data": x})
    with pytest.raises(ArtifactError, match="compiled for llvm"):
        mxc.runtime.InferenceSession(str(artifact), providers=["CUDAExecutionProvider"])


# -- 8. tvmc habits -----------------------------------------------------------------------
def test_run_fill_mode_print_time_top_and_no_output_file(artifact, tmp_path, monkeypatch,
                                                         capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["run", str(artifact), "--fill-mode", "ones", "--print-time", "--repeat", "3",
                 "--number", "2", "--print-top", "3"]) == 0
    out = capsys.readouterr().out
    assert "execution time summary (3 x 2 run(s))" in out and "median (ms)" in out
    assert out.count("top 3 of output 0, row") == 4
    assert list(tmp_path.iterdir()) == []           # no --output: nothing written
    # ones through the model = the reference backend on ones
    assert main(["run", SYMBOL, "--params", PARAMS, "--fill-mode", "ones", "--shape",
                 "data=4,784", "--print-top", "3"]) == 0
    assert capsys.readouterr().out.splitlines()[1:] == out.splitlines()[1:5]


def test_fill_mode_is_needed_without_inputs(artifact):
    line = one_line_error(cli("run", str(artifact)), 4)
    assert "--fill-mode" in line


def test_profile_lists_kernels_slowest_first(artifact, capsys):
    assert main(["run", str(artifact), "--fill-mode", "random", "--profile"]) == 0
    out = capsys.readouterr().out
    rows = [ln.split() for ln in out.splitlines() if " kernel " in f" {ln} "]
    assert len(rows) >= 3 and any(r[0].startswith("fused_dense") for r in rows)
    table = out[out.index("name"):].splitlines()[1:]
    times = [float(ln.split()[-2]) for ln in table if ln.split()[1:2] in (["kernel"], ["vm"],
                                                                          ["host"])]
    assert times == sorted(times, reverse=True)
    assert "(10 run(s) after warm-up, " in out and " thread(s); kernels timed alone" in out


def test_profile_rows_add_up_to_the_uninstrumented_wall_time(artifact):
    """Kernels are timed alone (C++ timer), host nodes by the step profile, and what
    they leave of the median uninstrumented run is one row: the rows sum to the wall."""
    import mxc.runtime
    from mxc.runtime.profiler import REST, profile_kernels
    sess = mxc.runtime.load(str(artifact))
    feeds = {i.name: np.random.RandomState(0).rand(*i.shape).astype(i.dtype)
             for i in sess.inputs}
    prof = profile_kernels(sess, feeds, repeat=5)
    kernels = [r for r in prof.rows if r.kind == "kernel"]
    assert kernels and all(r.seconds > 0 and r.calls >= 1 for r in kernels)
    (rest,) = [r for r in prof.rows if r.name == REST]
    assert rest.kind == "vm" and rest.calls > 0           # the VM's builtin calls
    if rest.seconds > 0:
        assert sum(r.seconds for r in prof.rows) == pytest.approx(prof.total)
    else:
        assert sum(r.seconds for r in kernels) >= prof.total


def test_input_shapes_tvmc_form():
    from mxc.cli.common import parse_input_shapes
    assert parse_input_shapes("data:[1,3,224,224] mask:[1,10]") == [
        ("data", (1, 3, 224, 224)), ("mask", (1, 10))]
    r = cli("inspect", SYMBOL, "--input-shapes", "data=[1,2]")
    assert r.returncode == 64 and "NAME:[D1,D2,...]" in r.stderr


# -- 14. winograd ----------------------------------------------------------------------------
def test_winograd_option_and_size_in_inspect(tmp_path, capsys):
    pytest.importorskip("tvm")
    from mxc import sym as S
    from mxc.frontend.params import save_params
    from mxc.runtime import read_manifest
    x = S.var("data")
    y = S.Convolution(x, kernel=(3, 3), num_filter=16, pad=(1, 1), name="conv")
    y.save(str(tmp_path / "c-symbol.json"))
    w = np.random.RandomState(0).uniform(-1, 1, (16, 16, 3, 3)).astype("float32")
    save_params(str(tmp_path / "c.params"), {"arg:conv_weight": w,
                                             "arg:conv_bias": np.zeros(16, np.float32)})
    for mode in ("on", "off"):
        out = tmp_path / f"{mode}.mxc"
        assert main(["compile", str(tmp_path / "c-symbol.json"), "--params",
                     str(tmp_path / "c.params"), "--shape", "data=1,16,32,32", "--winograd",
                     mode, "-q", "-o", str(out)]) == 0
        wino = read_manifest(out)["winograd"]
        assert wino["mode"] == mode
        assert wino["convolutions"] == (1 if mode == "on" else 0)
        # the transformed weights (F(4, 3) over 8x8 tiles: 4x) are made at load time, not stored
        assert wino["stored_bytes"] == (w.nbytes if mode == "on" else 0)
    capsys.readouterr()
    assert main(["inspect", str(tmp_path / "on.mxc")]) == 0
    text = capsys.readouterr().out
    assert (f"winograd on: 1 convolution(s), their weights {w.nbytes:,} -> {4 * w.nbytes:,} "
            f"bytes in memory (4.0x), all transformed when the model loads; the artifact "
            f"stores {w.nbytes:,}") in text


def test_no_raw_traceback_for_internal_errors(monkeypatch, capsys):
    import mxc.cli.inspect_cmd as inspect_cmd

    def boom(*a, **k):
        raise RuntimeError("an unexpected bug")
    monkeypatch.setattr(inspect_cmd, "inspect_model", boom)
    assert main(["inspect", SYMBOL]) == 1
    err = capsys.readouterr().err
    assert "internal error: RuntimeError: an unexpected bug" in err and "-v" in err
    assert "Traceback" not in err


def test_load_on_every_verb():
    from mxc.cli import build_parser
    parser = build_parser()
    verbs = parser._subparsers._group_actions[0].choices   # noqa: SLF001
    for verb in ("compile", "run", "inspect", "partition", "opt", "tune"):
        assert "--load" in verbs[verb]._option_string_actions, verb   # noqa: SLF001


# -- 11. the tvm partitioning backend -----------------------------------------------------
def test_partition_backend_tvm_from_the_cli_and_optimize_for(tmp_path):
    pytest.importorskip("tvm")
    r = cli("partition", SYMBOL, "--params", PARAMS, "--backend", "tvm", "-o",
            str(tmp_path / "p.json"))
    line = one_line_error(r, 5)
    assert "backend 'tvm' needs the shapes" in line and "--shape" in line
    r = cli("partition", SYMBOL, "--params", PARAMS, "--shape", "data=4,784", "--backend", "tvm",
            "-o", str(tmp_path / "p.json"))
    assert r.returncode == 0 and "1 region(s) for backend 'tvm'" in r.stdout
    # a fresh interpreter: nothing imported the backend beforehand
    code = ("import mxc, numpy as np; s, a, x = mxc.load_checkpoint('examples/mlp/mlp', 0); "
            "p = s.optimize_for('tvm', args={**a, 'data': np.zeros((4, 784), 'float32')}); "
            "print([n.op for n in p.graph.op_nodes()])")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO)
    assert r.returncode == 0 and r.stdout.strip() == "['_tvm_subgraph']", r.stderr


def test_misspelt_op_names_entry_is_a_did_you_mean_error(tmp_path):
    r = cli("partition", SYMBOL, "--backend", "default", "--option",
            "op_names=FullyConected,Activation", "-o", str(tmp_path / "p.json"))
    line = one_line_error(r, 5)
    assert "'FullyConected' (did you mean 'FullyConnected'?)" in line
    assert not (tmp_path / "p.json").exists()


# -- 10. extensions on every verb: custom operators through mxc run -------------------------
GEMM = {"nodes": [{"op": "null", "name": "a", "inputs": []},
                  {"op": "null", "name": "b", "inputs": []},
                  {"op": "my_gemm", "name": "g", "inputs": [[0, 0, 0], [1, 0, 0]]},
                  {"op": "relu", "name": "r", "inputs": [[2, 0, 0]]}],
        "arg_nodes": [0, 1], "heads": [[3, 0, 0]]}
MY_OPS = str(REPO / "examples" / "extensions" / "my_ops.py")


def test_custom_operator_runs_with_load_on_every_path(tmp_path):
    """custom-operators.md promises ``mxc run`` handles custom ops: reference backend, the
    tvm backend (custom op on the host) and a compiled artifact."""
    import json
    symbol = tmp_path / "gemm-symbol.json"
    symbol.write_text(json.dumps(GEMM))
    rng = np.random.RandomState(0)
    a, b = rng.randn(2, 3).astype("float32"), rng.randn(3, 4).astype("float32")
    np.savez(tmp_path / "ab.npz", a=a, b=b)
    want = np.maximum(a @ b, 0)
    line = one_line_error(cli("run", str(symbol), "--inputs", str(tmp_path / "ab.npz")), 3)
    assert "my_gemm (x1: node 'g')" in line and "--load LIB" in line
    runs = [["run", str(symbol)], ["run", str(symbol), "--backend", "tvm"]]
    if pytest.importorskip("tvm"):
        art = tmp_path / "gemm.mxc"
        r = cli("compile", str(symbol), "--shape", "a=2,3", "--shape", "b=3,4", "--load", MY_OPS,
                "-o", str(art))
        assert r.returncode == 0 and "host node g" in r.stdout, r.stderr
        line = one_line_error(cli("run", str(art), "--inputs", str(tmp_path / "ab.npz")), 8)
        assert "--load LIB" in line
        runs.append(["run", str(art)])
    for i, args in enumerate(runs):
        out = tmp_path / f"o{i}.npz"
        r = cli(*args, "--inputs", str(tmp_path / "ab.npz"), "--load", MY_OPS, "-o", str(out))
        assert r.returncode == 0, (args, r.stderr)
        np.testing.assert_allclose(np.load(out)["out0"], want, rtol=1e-5, atol=1e-6)


def test_installed_extensions_are_found_by_every_verb(tmp_path):
    """An ``mxc.extensions`` entry point (a pip-installed extension) is loaded by the CLI:
    here a distribution whose metadata sits on PYTHONPATH, registering a custom op."""
    import json
    import os
    site = tmp_path / "site"
    (site / "ep_ext-0.1.dist-info").mkdir(parents=True)
    (site / "ep_ext-0.1.dist-info" / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: ep-ext\nVersion: 0.1\n")
    (site / "ep_ext-0.1.dist-info" / "entry_points.txt").write_text(
        "[mxc.extensions]\nep = ep_ext_mod\n")
    (site / "ep_ext_mod.py").write_text(
        "import mxc\n"
        "@mxc.register_custom_op('ep_double')\n"
        "class Double(mxc.CustomOp):\n"
        "    def parse_attrs(self, attrs):\n"
        "        return 1, 1\n"
        "    def infer_shape(self, attrs, in_shapes):\n"
        "        return in_shapes, [in_shapes[0]]\n"
        "    def forward(self, attrs, inputs, outputs):\n"
        "        outputs[0][...] = 2 * inputs[0]\n")
    symbol = tmp_path / "d-symbol.json"
    symbol.write_text(json.dumps({
        "nodes": [{"op": "null", "name": "x", "inputs": []},
                  {"op": "ep_double", "name": "d", "inputs": [[0, 0, 0]]}],
        "arg_nodes": [0], "heads": [[1, 0, 0]]}))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(REPO)])}
    for verb in (["inspect"], ["run", "--fill-mode", "ones", "--shape", "x=2", "--print-top",
                                "2"]):
        r = subprocess.run([sys.executable, "-m", "mxc.cli", verb[0], str(symbol), *verb[1:]],
                           capture_output=True, text=True, cwd=tmp_path, env=env)
        assert r.returncode == 0, (verb, r.stderr)
    assert "0: 2, 1: 2" in r.stdout


def test_cuda_arch_option_and_newer_gpus_accepted(tmp_path, monkeypatch):
    """Original failure: CUDA silently took sm_75 and newer GPUs refused the artifact."""
    pytest.importorskip("tvm")
    import shutil
    from mxc.errors import ArtifactError
    from mxc.runtime import _tvm, artifact
    line = one_line_error(cli("compile", SYMBOL, "--params", PARAMS, "--shape", "data=4,784",
                              "--cuda-arch", "sm_80", "-o", str(tmp_path / "m.mxc")), 7)
    assert "--cuda-arch sm_80 applies to --target cuda" in line
    monkeypatch.setattr(_tvm, "has_cuda", lambda: True)
    monkeypatch.setattr(_tvm, "cuda_compute_version", lambda index=0: "9.0")
    artifact._check_cuda("sm_80", "m.mxc")                     # an H100 runs sm_80 kernels
    with pytest.raises(ArtifactError, match="older architecture.*--cuda-arch sm_75"):
        monkeypatch.setattr(_tvm, "cuda_compute_version", lambda index=0: "7.5")
        artifact._check_cuda("sm_80", "m.mxc")
    if shutil.which("nvcc") is None:
        pytest.skip("compiling for CUDA needs nvcc")
    from mxc.runtime import read_manifest
    out = tmp_path / "gpu.mxc"
    assert main(["compile", SYMBOL, "--params", PARAMS, "--shape", "data=4,784", "--target",
                 "cuda", "--cuda-arch", "86", "-q", "-o", str(out)]) == 0
    assert read_manifest(out)["target"]["arch"] == "sm_86"


def test_zero_dimension_from_python_is_a_clear_error():
    pytest.importorskip("tvm")
    import mxc
    from mxc.errors import BackendError
    sym, arg, aux = mxc.load_checkpoint(str(MLP / "mlp"), 0)
    with pytest.raises(BackendError, match=r"positive dimensions.*data=\(0, 784\)"):
        mxc.compile(sym, (arg, aux), {"data": (0, 784)})
