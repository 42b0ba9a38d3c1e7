"""``mxc tune`` then ``mxc compile --db`` / ``mxc run --backend tvm --db`` on the command line.

One tiny convolution (a single tuning task, random search, a few trials) is
tuned into a database once for the module; the compiles that use it must
still match the reference backend, and their manifests must say which
kernels came from the database.  A path that is not a tuning database is a
one-line error with a non-zero exit code, before anything is compiled.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

pytest.importorskip("tvm")

from mxc import sym as S
from mxc.cli import main
from mxc.compiler.infer import infer_shapes
from mxc.frontend.params import save_params
from mxc.runtime import read_manifest

SHAPE = (1, 4, 8, 8)
TRIALS = 3


def _tiny_conv():
    x = S.var("data")
    y = S.Convolution(x, kernel=(3, 3), num_filter=8, pad=(1, 1), name="conv")
    return S.Activation(y, act_type="relu", name="relu")


def write_tiny_model(root):
    """The tiny convolution as a checkpoint in *root*: (symbol, params, inputs npz)."""
    sym = _tiny_conv()
    shapes = infer_shapes(sym.graph, {"data": SHAPE})
    rng = np.random.RandomState(0)
    params = {n.name: rng.uniform(-0.5, 0.5, shapes[(n, 0)]).astype("float32")
              for n in sym.graph.input_nodes() if n.name != "data"}
    symbol, params_file = root / "tiny-symbol.json", root / "tiny-0000.params"
    sym.save(str(symbol))
    save_params(str(params_file), {f"arg:{k}": v for k, v in params.items()})
    inputs = root / "in.npz"
    np.savez(inputs, data=rng.uniform(-1, 1, SHAPE).astype("float32"))
    return symbol, params_file, inputs


@pytest.fixture(scope="module")
def tuned(tmp_path_factory):
    """(model dir, symbol, params, inputs npz, database) with the conv tuned by ``mxc tune``."""
    root = tmp_path_factory.mktemp("cli-tuning")
    symbol, params_file, inputs = write_tiny_model(root)
    db = root / "db"
    rc = main(["tune", str(symbol), "--params", str(params_file), "--shape", "data=1,4,8,8",
               "--trials", str(TRIALS), "--db", str(db), "--search", "random", "-q",
               "--no-verify"])   # the best record is applied, whatever re-measuring says
    assert rc == 0
    return root, symbol, params_file, inputs, db


def _reference(tuned) -> np.ndarray:
    root, symbol, params_file, inputs, _ = tuned
    out = root / "ref.npz"
    if not out.exists():
        assert main(["run", str(symbol), "--params", str(params_file), "--inputs", str(inputs),
                     "--output", str(out)]) == 0
    return np.load(out)["out0"]


def test_tune_logs_the_run_in_the_database(tuned, capsys):
    from mxc.backends.tvm.tune import TUNE_LOG, read_tune_log
    _, symbol, _, _, db = tuned
    assert (db / TUNE_LOG).is_file()
    (entry,) = read_tune_log(db)
    assert entry["model"] == "tiny" and entry["symbol"] == str(symbol.resolve())
    assert entry["shapes"] == {"data": list(SHAPE)}
    assert entry["status"] == "done" and entry["seconds"] > 0
    assert entry["trials"] == TRIALS and entry["trials_run"] == TRIALS
    assert entry["tasks"] == entry["tasks_tuned"] == 1


def test_compile_with_db_uses_tuned_kernels_and_matches_reference(tuned, capsys):
    root, symbol, params_file, inputs, db = tuned
    want = _reference(tuned)
    capsys.readouterr()
    art = root / "tuned.mxc"
    assert main(["compile", str(symbol), "--params", str(params_file), "--shape",
                 "data=1,4,8,8", "--db", str(db), "-o", str(art), "-q"]) == 0
    out = capsys.readouterr().out
    assert "tuning database" in out and "kernel(s) tuned" in out
    man = read_manifest(art)
    tdb = man["tuning_db"]
    assert tdb["path"] == str(db.resolve())
    assert tdb["kernels_tuned"] >= 1 and tdb["kernels"] >= tdb["kernels_tuned"]
    assert len(tdb["tuned"]) == tdb["kernels_tuned"]
    assert any("conv" in k for k in tdb["tuned"]), tdb
    got_npz = root / "tuned-out.npz"
    assert main(["run", str(art), "--inputs", str(inputs), "--output", str(got_npz)]) == 0
    np.testing.assert_allclose(np.load(got_npz)["out0"], want, rtol=1e-4, atol=1e-4)
    # the same model without --db: default schedules only, and the manifest says so
    plain = root / "plain.mxc"
    assert main(["compile", str(symbol), "--params", str(params_file), "--shape",
                 "data=1,4,8,8", "-o", str(plain), "-q"]) == 0
    assert read_manifest(plain)["tuning_db"] is None
    # `mxc inspect --json` shows the record
    capsys.readouterr()
    assert main(["inspect", str(art), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["tuning_db"] == tdb


def test_run_backend_tvm_with_db(tuned, capsys):
    root, symbol, params_file, inputs, db = tuned
    want = _reference(tuned)
    out = root / "run-tvm.npz"
    assert main(["run", str(symbol), "--params", str(params_file), "--inputs", str(inputs),
                 "--output", str(out), "--backend", "tvm", "--db", str(db)]) == 0
    np.testing.assert_allclose(np.load(out)["out0"], want, rtol=1e-4, atol=1e-4)


def test_compile_api_with_db(tuned):
    import mxc
    from mxc.backends.tvm.build import use_database
    _, symbol, params_file, inputs, db = tuned
    want = _reference(tuned)
    sym, params = mxc.sym.load(str(symbol)), mxc.nd.load(str(params_file))
    feed = dict(np.load(inputs))
    model = mxc.compile(sym, params, {"data": SHAPE}, db=db)
    assert model.manifest["tuning_db"]["kernels_tuned"] >= 1
    np.testing.assert_allclose(model.run(feed)[0], want, rtol=1e-4, atol=1e-4)
    # a database from use_database() (or $MXC_TUNING_DB) is recorded the same way
    with use_database(db):
        again = mxc.compile(sym, params, {"data": SHAPE})
    assert again.manifest["tuning_db"] == model.manifest["tuning_db"]


@pytest.mark.parametrize("kind", ["missing", "empty"])
def test_bad_db_is_a_one_line_error(tuned, tmp_path, capsys, kind):
    _, symbol, params_file, inputs, _ = tuned
    bad = tmp_path / "nothing-here"
    if kind == "empty":
        bad.mkdir()
    out = tmp_path / "m.mxc"
    rc = main(["compile", str(symbol), "--params", str(params_file), "--shape",
               "data=1,4,8,8", "--db", str(bad), "-o", str(out), "-q"])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc != 0 and not out.exists()
    assert len(err) == 1 and err[0].startswith("mxc compile: error: ")
    assert ("is not a directory" if kind == "missing" else "holds no tuning database") in err[0]
    assert "mxc tune" in err[0]
    rc = main(["run", str(symbol), "--params", str(params_file), "--inputs", str(inputs),
               "--output", str(tmp_path / "o.npz"), "--backend", "tvm", "--db", str(bad)])
    assert rc != 0 and "tuning database" in capsys.readouterr().err


def test_db_is_refused_where_it_means_nothing(tuned, tmp_path, capsys):
    root, symbol, params_file, inputs, db = tuned
    rc = main(["run", str(symbol), "--params", str(params_file), "--inputs", str(inputs),
               "--output", str(tmp_path / "o.npz"), "--db", str(db)])
    assert rc != 0 and "needs --backend tvm" in capsys.readouterr().err
    art = root / "plain-for-run.mxc"
    assert main(["compile", str(symbol), "--params", str(params_file), "--shape",
                 "data=1,4,8,8", "-o", str(art), "-q"]) == 0
    rc = main(["run", str(art), "--inputs", str(inputs), "--output", str(tmp_path / "o.npz"),
               "--db", str(db)])
    assert rc != 0 and "compiled artifact" in capsys.readouterr().err


def test_tune_verifies_kernels_and_checks_the_model(tuned, tmp_path, capsys):
    """Re-running ``mxc tune`` (nothing left to search) re-measures each kernel's best
    record against its default schedule, and --check-model times the whole model both
    ways: the summary and the tuning log report it, and compile applies exactly the
    records the verdicts kept."""
    import shutil

    from mxc.backends.tvm.tune import read_tune_log
    from mxc.backends.tvm.tune.verify import read_verdicts
    root, symbol, params_file, inputs, db = tuned
    copy = shutil.copytree(db, tmp_path / "db")
    capsys.readouterr()
    rc = main(["tune", str(symbol), "--params", str(params_file), "--shape", "data=1,4,8,8",
               "--trials", str(TRIALS), "--db", str(copy), "--search", "random", "-q",
               "--check-model", "1"])
    assert rc == 0
    out = capsys.readouterr().out
    assert "already in the database" in out
    assert "model: untuned " in out and " ms, tuned " in out and "interleaved rounds" in out
    entry = read_tune_log(copy)[-1]
    verdicts = read_verdicts(copy)
    assert len(entry["verdicts"]) == len(verdicts) <= 1
    for v in verdicts.values():
        assert v["kept"] in ("tuned", "default")
        assert f"kept {v['kept']}" in out
    art = tmp_path / "m.mxc"
    assert main(["compile", str(symbol), "--params", str(params_file), "--shape",
                 "data=1,4,8,8", "--db", str(copy), "-o", str(art), "-q"]) == 0
    tuned_kernels = read_manifest(art)["tuning_db"]["tuned"]
    for v in verdicts.values():
        assert (v["task"] in tuned_kernels) == (v["kept"] == "tuned"), (v, tuned_kernels)
