"""A dimension range (dynamic batch) is compiled as batch buckets inside one artifact
(:mod:`mxc.backends.tvm.buckets`); what cannot be bucketed is refused before anything
is compiled, naming the input, the range and the reason, in every spelling."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import mxc
from mxc.backends.tvm.buckets import default_buckets
from mxc.cli import main
from mxc.errors import USAGE_EXIT_CODE, BackendError

MLP = Path(__file__).resolve().parents[2] / "examples" / "mlp"


def _mlp():
    sym, args, aux = mxc.load_checkpoint(str(MLP / "mlp"), 0)
    return sym, (args, aux)


def test_default_buckets_are_the_powers_of_two_and_the_top():
    assert default_buckets(1, 64) == [1, 2, 4, 8, 16, 32, 64]
    assert default_buckets(3, 12) == [4, 8, 12]
    assert default_buckets(1, 6) == [1, 2, 4, 6]


@pytest.mark.parametrize("shapes, buckets, match", [
    ({"data": ((1, 8), (1, 8))}, None, r"dimensions 0 and 1 are both ranges"),
    ({"data": ((8, 1), 784)}, None, r"1 <= LO < HI"),
    ({"data": ((1, 8), 784)}, [1, 4], r"must include 8, the top of the range 1\.\.8"),
    ({"data": ((1, 8), 784)}, [1, 16], r"must lie in the range 1\.\.8 \(16 do not\)"),
    ({"data": (8, 784)}, [1, 8], r"batch buckets need a dimension range"),
])
def test_bad_ranges_and_buckets_are_refused_before_compiling(shapes, buckets, match):
    sym, params = _mlp()
    with pytest.raises(BackendError, match=match):
        mxc.compile(sym, params, shapes, buckets=buckets)


def test_inputs_with_different_ranges_are_refused():
    a, b = mxc.sym.Variable("data"), mxc.sym.Variable("other")
    net = mxc.sym.elemwise_add(a, b)
    with pytest.raises(BackendError, match=r"different dimension ranges \(data: 1\.\.8, "
                                           r"other: 1\.\.4\)"):
        mxc.compile(net, {}, {"data": ((1, 8), 3), "other": ((1, 4), 3)})


def _fc():
    data = mxc.sym.Variable("data")
    fc = mxc.sym.FullyConnected(data, num_hidden=4, name="fc")
    params = {"fc_weight": np.random.default_rng(0).standard_normal((4, 6)).astype("float32"),
              "fc_bias": np.zeros(4, "float32")}
    return fc, params


@pytest.mark.parametrize("head, why", [
    (lambda x: mxc.sym.sum(x, axis=0, keepdims=True), r"output 'sum\w*' has no single axis"),
    (lambda x: mxc.sym.Reshape(x, shape=(1, -1)), r"output '\w+' has no single axis"),
    (lambda x: mxc.sym.broadcast_sub(x, mxc.sym.mean(x, axis=0, keepdims=True)),
     r"row 0 differs when run alone"),
])
def test_a_model_that_mixes_rows_of_the_batch_is_refused(head, why):
    fc, params = _fc()
    with pytest.raises(BackendError, match=rf"(?=.*{why})(?=.*mixes rows of the batch)"
                                           r"(?=.*static artifact)"):
        mxc.compile(head(fc), params, {"data": ((1, 8), 6)})


@pytest.mark.parametrize("flag", [["--shape", "data=1..8,784"],
                                  ["--input-shapes", "data:[1..8,784]"]])
def test_cli_refuses_a_row_mixing_range_with_the_reason(tmp_path, capsys, flag):
    fc, params = _fc()
    head = mxc.sym.sum(fc, axis=0, keepdims=True)
    (tmp_path / "m-symbol.json").write_text(head.tojson())
    mxc.nd.save(str(tmp_path / "m-0000.params"), {f"arg:{k}": mxc.nd.array(v)
                                                 for k, v in params.items()})
    flag = [f.replace("784", "6") for f in flag]
    code = main(["compile", str(tmp_path / "m-symbol.json"), "--params",
                 str(tmp_path / "m-0000.params"), *flag, "-o", str(tmp_path / "m.mxc")])
    assert code == BackendError.exit_code
    assert "mixes rows of the batch" in capsys.readouterr().err
    assert not (tmp_path / "m.mxc").exists()


def test_cli_refuses_a_reversed_range_as_a_usage_error(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["compile", str(MLP / "mlp-symbol.json"), "--params", str(MLP / "mlp-0000.params"),
              "--shape", "data=8..1,784", "-o", str(tmp_path / "m.mxc")])
    assert exit_info.value.code == USAGE_EXIT_CODE
    assert "1 <= LO < HI" in capsys.readouterr().err
