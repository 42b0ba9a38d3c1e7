"""``mxc tune`` on every kind of x86 CPU target, whatever CPU the tests run on.

The original failure: on AVX-512 targets (``skylake-avx512``, ``cascadelake``,
``znver4``, ``sapphirerapids`` -- and so on the default target of any such
host) MetaSchedule's x86 schedule rules look up the tensor intrinsics
``dot_16x4_vnni`` / ``dot_16x4_avx512``, which mxc's tuning had kept from
being registered: ``TensorIntrin 'dot_16x4_vnni' is not registered``.

Each test tunes one tiny convolution with two random-search trials, compiles
with the database and (when this CPU can execute the target's code) runs the
artifact against the reference backend.  A target this CPU cannot execute is
measured through a host-built proxy, which the progress output says.
"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("tvm")

from mxc.backends.tvm.targets import missing_on_host, parse_target_text  # noqa: E402
from mxc.cli import main  # noqa: E402
from mxc.runtime import read_manifest  # noqa: E402

from test_cli_tuning import write_tiny_model  # noqa: E402  (the same one-task model)

SHAPE = "data=1,4,8,8"


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    root = tmp_path_factory.mktemp("tune-targets")
    symbol, params_file, inputs = write_tiny_model(root)
    assert main(["run", str(symbol), "--params", str(params_file), "--inputs", str(inputs),
                 "--output", str(root / "ref.npz")]) == 0
    return root, symbol, params_file, inputs


def _tvm_target(text):
    import tvm
    from mxc.backends.tvm.build import resolve_target
    return resolve_target(parse_target_text(text)) if text else tvm.target.Target("llvm")


_TUNED: dict = {}


def _tuned_db(model, target, capsys):
    """The database of the tiny model tuned for *target* (two trials), and what the tune
    printed: tuned once per module, the first time a test asks for that target."""
    root, symbol, params_file, _ = model
    key = (str(root), target)
    if key not in _TUNED:
        db = root / f"db-{target.replace(' ', '_').replace('=', '_')}"
        common = [str(symbol), "--params", str(params_file), "--shape", SHAPE,
                  "--target", target]
        # --no-verify: the tuned record is applied whatever re-measuring it would say
        rc = main(["tune", *common, "--trials", "2", "--db", str(db), "--search", "random",
                   "--no-verify"])
        _TUNED[key] = (rc, db, capsys.readouterr())
    return _TUNED[key]


def _tune_compile_run(model, target, capsys):
    root, symbol, params_file, inputs = model
    common = [str(symbol), "--params", str(params_file), "--shape", SHAPE, "--target", target]
    rc, db, captured = _tuned_db(model, target, capsys)
    assert rc == 0, captured.err
    assert "is not registered" not in captured.err
    assert "1 task(s), 1 tuned now" in captured.out
    out = root / "tuned.mxc"
    rc = main(["compile", *common, "--db", str(db), "-o", str(out)])
    captured = capsys.readouterr()
    assert rc == 0, captured.err
    # the conv (reading its 4-channel NCHW input in place) and the output's transpose
    assert "1 of 2 kernel(s) tuned" in captured.out
    manifest = read_manifest(out)
    assert manifest["tuning_db"]["kernels_tuned"] == 1
    return out, captured


@pytest.mark.parametrize("target", ["llvm", "llvm -mcpu=skylake-avx512", "llvm -mcpu=haswell"])
def test_tune_compile_run(model, target, capsys):
    """this CPU, an AVX-512 CPU (VNNI/AVX-512 rules) and an AVX2 CPU."""
    root, _, _, inputs = model
    out, _ = _tune_compile_run(model, target, capsys)
    if missing_on_host(_tvm_target(target if target != "llvm" else "")):
        pytest.skip(f"this CPU cannot execute {target} code (tuned and compiled only)")
    assert main(["run", str(out), "--inputs", str(inputs), "--output",
                 str(root / "out.npz")]) == 0
    got, want = np.load(root / "out.npz")["out0"], np.load(root / "ref.npz")["out0"]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_target_this_cpu_cannot_run_is_measured_through_a_proxy(model, capsys):
    candidates = ["sapphirerapids", "graniterapids", "skylake-avx512", "haswell"]
    target = next((f"llvm -mcpu={c}" for c in candidates
                   if missing_on_host(_tvm_target(f"llvm -mcpu={c}"))), None)
    if target is None:
        pytest.skip("this CPU executes every candidate target's code")
    root, symbol, params_file, _ = model
    rc = main(["tune", str(symbol), "--params", str(params_file), "--shape", SHAPE,
               "--target", target, "--trials", "2", "--db", str(root / "db-proxy"),
               "--search", "random"])
    err = capsys.readouterr().err
    assert rc == 0, err
    assert "lacks" in err and "proxy" in err and "--rpc" in err
    assert "2/2 trials, best" in err


def test_missing_tuning_package_is_one_line(model, monkeypatch, capsys):
    import sys
    monkeypatch.setitem(sys.modules, "xgboost", None)
    root, symbol, params_file, _ = model
    rc = main(["tune", str(symbol), "--params", str(params_file), "--shape", SHAPE,
               "--trials", "2", "--db", str(root / "db-nodeps")])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 9 and len(err) == 1
    assert "xgboost" in err[0] and 'pip install "mxc[tune]"' in err[0]
    assert not (root / "db-nodeps").exists()


def test_failed_tune_leaves_a_database_compile_refuses(model, monkeypatch, capsys):
    """Original failure: the database a failed ``mxc tune`` left was accepted by
    ``compile --db`` ("0 of 4 kernels tuned")."""
    import mxc.backends.tvm.tune as tune_mod
    from mxc.errors import BackendError

    def broken(*args, **kwargs):
        raise BackendError("tuning fused_conv2d failed: simulated")
    monkeypatch.setattr(tune_mod, "_tune_groups", broken)
    root, symbol, params_file, _ = model
    db = root / "db-failed"
    common = [str(symbol), "--params", str(params_file), "--shape", SHAPE]
    assert main(["tune", *common, "--trials", "2", "--db", str(db), "--search", "random",
                 "-q"]) == 7
    assert (db / tune_mod.WORKLOAD_FILE).is_file()   # the database exists, with no records
    capsys.readouterr()
    rc = main(["compile", *common, "--db", str(db), "-o", str(root / "never.mxc")])
    err = capsys.readouterr().err
    assert rc == 7 and "holds no successful measurement" in err and "failed" in err
    assert not (root / "never.mxc").exists()


def test_records_for_another_cpu_are_named(model, capsys):
    """Original failure: records tuned for another ``mcpu`` were applied without a word."""
    root, symbol, params_file, _ = model
    # only haswell's records: the database test_tune_compile_run[llvm -mcpu=haswell] tunes
    rc, db, captured = _tuned_db(model, "llvm -mcpu=haswell", capsys)
    assert rc == 0, captured.err
    common = [str(symbol), "--params", str(params_file), "--shape", SHAPE]
    rc = main(["compile", *common, "--target", "llvm -mcpu=skylake-avx512", "--db", str(db),
               "-o", str(root / "foreign.mxc")])
    out = capsys.readouterr().out
    assert rc == 0
    assert "was tuned for haswell" in out and "not for skylake-avx512" in out
    assert read_manifest(root / "foreign.mxc")["tuning_db"]["warning"]
