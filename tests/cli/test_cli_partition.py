"""``mxc partition``: the CLI reproduces MXNet's own partition result."""

from __future__ import annotations

import json

import numpy as np

import mxc
from conftest import require_corpus
from mxc.cli import main
from mxc.compiler.ir.compare import graph_diff
from mxc.frontend.symbol_json import load_json


def test_partition_cli_matches_mxnet_golden(tmp_path, capsys):
    root = require_corpus("models/structure3")
    golden = json.loads((root / "partition_0.json").read_text())
    out = tmp_path / "part.json"
    rc = main(["partition", str(root / "symbol.json"), "--backend", "default",
               "--option", "op_names=" + ",".join(golden["op_names"]), "-o", str(out)])
    assert rc == 0
    summary = capsys.readouterr().out
    assert f"{golden['num_subgraph_nodes']} region(s)" in summary
    assert "_CachedOp0 (_CachedOp)" in summary
    got = load_json(out.read_text())
    want = load_json(json.dumps(golden["partitioned_symbol"]))
    assert graph_diff(got, want) is None
    # the partitioned model runs and gives the unpartitioned outputs
    io = np.load(root / "io.npz")
    params = mxc.nd.load(root / "model.params")
    feeds = {k[4:]: v for k, v in params.items()}
    feeds["data"] = io["in__data"]
    part = mxc.sym.load(out)
    exe = part.bind(args={k: feeds[k] for k in part.list_arguments()},
                    aux_states={k: feeds[k] for k in part.list_auxiliary_states()})
    orig = mxc.sym.load(root / "symbol.json")
    want = orig.bind(args={k: feeds[k] for k in orig.list_arguments()},
                     aux_states={k: feeds[k] for k in orig.list_auxiliary_states()}).forward()[0]
    np.testing.assert_array_equal(exe.forward()[0], want)  # MXNet: bitwise equal too
    meta = json.loads((root / "meta.json").read_text())
    np.testing.assert_allclose(want, io["out__0"], rtol=meta["rtol"], atol=meta["atol"])


def test_partition_cli_unknown_backend_is_one_line(tmp_path, capsys):
    model = tmp_path / "m.json"
    model.write_text(mxc.sym.exp(mxc.sym.var("x")).tojson())
    rc = main(["partition", str(model), "--backend", "nope", "-o", str(tmp_path / "o.json")])
    assert rc != 0
    err = capsys.readouterr().err
    assert "'nope' is neither a subgraph backend nor a graph pass" in err
    assert not (tmp_path / "o.json").exists()
