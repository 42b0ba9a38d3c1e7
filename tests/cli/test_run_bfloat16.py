"""``mxc run`` with bfloat16 inputs and outputs in ``.npz`` files.

numpy writes an ``ml_dtypes.bfloat16`` array to ``.npz`` as an opaque two-byte void
(``|V2``) and cannot pass one through DLPack; ``mxc run`` used to hand those bytes to
TVM as they were.  Checked on the wave-2 AMP model (bfloat16 weights) fed bfloat16 data,
on the reference backend and through a compiled artifact, against MXNet's outputs
within the model's tolerance, and on a bfloat16 output written with ``-o`` and read back.
"""

from __future__ import annotations

import json

import ml_dtypes
import numpy as np
import pytest

from conftest import require_corpus
from mxc import sym as S
from mxc.backends.reference import run_graph
from mxc.cli import main
from mxc.cli.common import load_inputs

BF16 = ml_dtypes.bfloat16


def _amp_model():
    model = require_corpus("wave2/models") / "amp_bf16_cnn"
    if not model.is_dir():
        pytest.skip("wave-2 model amp_bf16_cnn not in the corpus")
    return model


def _bf16_inputs(model, tmp_path):
    """MXNet's inputs as bfloat16, saved by plain np.savez (|V2 members)."""
    io = np.load(model / "io.npz")
    feeds = {k[4:]: io[k].astype(BF16) for k in io.files if k.startswith("in__")}
    path = tmp_path / "inputs.npz"
    np.savez(path, **feeds)
    assert all(v.dtype.kind == "V" for v in np.load(path).values())  # what numpy writes
    return path, io["out__0"]


def _assert_within_model_tolerance(model, got, want):
    meta = json.loads((model / "meta.json").read_text())
    assert got.dtype == np.float32 and got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=meta["rtol"], atol=meta["atol"])


def test_run_reference_reads_bfloat16_npz(tmp_path):
    model = _amp_model()
    inputs, want = _bf16_inputs(model, tmp_path)
    out = tmp_path / "out.npz"
    assert main(["run", str(model / "symbol.json"), "--params", str(model / "model.params"),
                 "--inputs", str(inputs), "-o", str(out)]) == 0
    _assert_within_model_tolerance(model, np.load(out)["out0"], want)


def test_run_artifact_with_bfloat16_inputs(tmp_path, capsys):
    pytest.importorskip("tvm")
    model = _amp_model()
    inputs, want = _bf16_inputs(model, tmp_path)
    artifact, out = tmp_path / "amp.mxc", tmp_path / "out.npz"
    assert main(["compile", str(model / "symbol.json"), "--params", str(model / "model.params"),
                 "--shape", "data0=2,3,24,24", "--shape", "data1=2,8,24,24",
                 "--dtype", "data0=bfloat16", "--dtype", "data1=bfloat16",
                 "-o", str(artifact)]) == 0
    assert main(["run", str(artifact), "--inputs", str(inputs), "-o", str(out)]) == 0
    _assert_within_model_tolerance(model, np.load(out)["out0"], want)
    capsys.readouterr()
    assert main(["run", str(artifact), "--fill-mode", "ones"]) == 0   # bf16 inputs generated
    assert "dtype float32" in capsys.readouterr().out


def test_bfloat16_output_round_trips_through_npz(tmp_path):
    """A bfloat16 output is written as mxc stores bfloat16 (bits + key list) and
    ``--inputs`` reads it back as bfloat16, equal to the reference's output."""
    pytest.importorskip("tvm")
    x = np.linspace(-3, 3, 12, dtype=np.float32).reshape(3, 4)
    y = S.Cast(S.relu(S.var("data")) * 1.7, dtype="bfloat16", name="to_bf16")
    sym_path = tmp_path / "m-symbol.json"
    sym_path.write_text(y.tojson())
    np.savez(tmp_path / "x.npz", data=x)
    artifact, out = tmp_path / "m.mxc", tmp_path / "out.npz"
    assert main(["compile", str(sym_path), "--shape", "data=3,4", "-o", str(artifact)]) == 0
    assert main(["run", str(artifact), "--inputs", str(tmp_path / "x.npz"), "-o", str(out)]) == 0
    got = load_inputs(str(out))["out0"]
    want = run_graph(y.graph, {"data": x})[0]
    assert got.dtype == BF16 and want.dtype == BF16
    np.testing.assert_array_equal(got.view(np.uint16), want.view(np.uint16))
