"""``mxc opt``: optimized JSON + params load back in mxc and give the same outputs."""

from __future__ import annotations

import numpy as np
import pytest

import mxc
from conftest import require_corpus
from mxc.cli import main
from mxc.errors import PassError

from _pass_test_utils import assert_close_outputs, op_count, random_params

PIPELINE = "remove-dropout,fold-batchnorm,dce"


@pytest.fixture
def model(tmp_path):
    """A small conv-bn-relu-dropout-fc checkpoint with random weights."""
    with mxc.sym.NameManager():
        x = mxc.sym.var("data")
        y = mxc.sym.Convolution(x, kernel=(3, 3), num_filter=4, name="conv0")
        y = mxc.sym.BatchNorm(y, fix_gamma=False, name="bn0")
        y = mxc.sym.Dropout(mxc.sym.Activation(y, act_type="relu"), p=0.3)
        y = mxc.sym.FullyConnected(y, num_hidden=5, name="fc")
    args, aux = random_params(y, data=(2, 3, 6, 6))
    mxc.save_checkpoint(tmp_path / "net", 0, y, args, aux)
    data = np.random.default_rng(7).standard_normal((2, 3, 6, 6)).astype(np.float32)
    return tmp_path, y, args, aux, data


def run_outputs(sym, args, aux, data):
    return sym.bind(args={**args, "data": data}, aux_states=aux).forward()


def test_opt_round_trip(model, capsys):
    tmp, sym, args, aux, data = model
    rc = main(["opt", str(tmp / "net-symbol.json"), "--params", str(tmp / "net-0000.params"),
               "--passes", PIPELINE, "-o", str(tmp / "opt-symbol.json"),
               "--params-out", str(tmp / "opt-0000.params"), "--timing"])
    assert rc == 0
    out = capsys.readouterr().out
    assert out.startswith(f"{PIPELINE}: 14 -> 8 nodes") and "folded into Convolution 1" in out
    assert "total" in out  # the timing table
    opt, opt_args, opt_aux = mxc.load_checkpoint(tmp / "opt", 0)
    assert op_count(opt.graph, "BatchNorm") == 0 and op_count(opt.graph, "Dropout") == 0
    assert opt_aux == {} and sorted(opt_args) == ["conv0_bias", "conv0_weight", "fc_bias",
                                                  "fc_weight"]
    assert_close_outputs(run_outputs(sym, args, aux, data),
                         run_outputs(opt, opt_args, opt_aux, data))
    assert sorted(p.name for p in tmp.iterdir()) == ["net-0000.params", "net-symbol.json",
                                                     "opt-0000.params", "opt-symbol.json"]


def test_opt_requires_params_out_when_params_change(model, capsys):
    tmp, *_ = model
    rc = main(["opt", str(tmp / "net-symbol.json"), "--params", str(tmp / "net-0000.params"),
               "--passes", "fold-batchnorm", "-o", str(tmp / "opt.json")])
    assert rc == 1 and "give --params-out" in capsys.readouterr().err
    assert not (tmp / "opt.json").exists()  # nothing written
    rc = main(["opt", str(tmp / "net-symbol.json"), "--params", str(tmp / "net-0000.params"),
               "--passes", "remove-dropout", "-o", str(tmp / "opt.json")])
    assert rc == 0 and (tmp / "opt.json").exists()


def test_opt_errors_and_listing(model, capsys):
    tmp, *_ = model
    rc = main(["opt", str(tmp / "net-symbol.json"), "--passes", "dce,fold-bn",
               "-o", str(tmp / "x.json")])
    err = capsys.readouterr().err
    assert rc == PassError.exit_code and "pipeline column 5: unknown pass 'fold-bn'" in err
    assert "^" in err
    assert main(["opt", "--list-passes"]) == 0
    listing = capsys.readouterr().out
    assert "fold-batchnorm: Fold inference BatchNorm" in listing
    assert "max_elements: int, default 0" in listing
    assert main(["opt", "--passes", "dce"]) == 64   # no MODEL: a usage error
    assert "missing MODEL (a file, or '-' for standard input)" in capsys.readouterr().err


def test_opt_print_ir_after_all(model, capsys):
    tmp, *_ = model
    rc = main(["opt", str(tmp / "net-symbol.json"), "--passes", "remove-dropout,dce",
               "-o", str(tmp / "o.json"), "--print-ir-after-all"])
    err = capsys.readouterr().err
    assert rc == 0
    assert "// ----- IR after pass 1/2: remove-dropout -----" in err
    assert "// ----- IR after pass 2/2: dce -----" in err and "graph @main" in err


def test_opt_on_a_corpus_model(tmp_path):
    root = require_corpus("models/resnet18_v1")
    rc = main(["opt", str(root / "symbol.json"), "--params", str(root / "model.params"),
               "--passes", "remove-dropout,fold-batchnorm,cse,dce",
               "-o", str(tmp_path / "r-symbol.json"), "--params-out",
               str(tmp_path / "r-0000.params")])
    assert rc == 0
    opt, args, aux = mxc.load_checkpoint(tmp_path / "r", 0)
    assert op_count(opt.graph, "BatchNorm") == 0
    io = np.load(root / "io.npz")
    import json
    meta = json.loads((root / "meta.json").read_text())
    got = opt.bind(args={**args, "data": io["in__data"]}, aux_states=aux).forward()[0]
    np.testing.assert_allclose(got, io["out__0"], rtol=meta["rtol"], atol=meta["atol"])


def test_opt_loads_passes_from_an_extension_library(model, tmp_path, capsys):
    library = pytest.importorskip("mxc.library")
    tmp, sym, args, aux, data = model
    lib = tmp_path / "t_opt_passes.py"
    lib.write_text('''import mxc

@mxc.register_pass("t-opt-negate")
def negate(graph, ctx):
    """Negate every output."""
    for i, out in enumerate(list(graph.outputs)):
        graph.outputs[i] = ctx.add_node("negative", [out]).out
''')
    try:
        rc = main(["opt", str(tmp / "net-symbol.json"), "--load", str(lib),
                   "--passes", "t-opt-negate", "-o", str(tmp / "neg.json")])
        assert rc == 0, capsys.readouterr().err
        neg = mxc.sym.load(tmp / "neg.json")
        assert neg.graph.outputs[0].node.op == "negative"
        np.testing.assert_allclose(run_outputs(neg, args, aux, data)[0],
                                   -run_outputs(sym, args, aux, data)[0], rtol=1e-6)
    finally:
        library.unload(str(lib))
