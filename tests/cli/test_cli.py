"""The ``mxc`` command line: inspect and run, error lines and exit codes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import mxc
from mxc.cli import main

REPO = Path(__file__).resolve().parents[2]
MLP = REPO / "examples" / "mlp"


def test_inspect_json_report(capsys):
    assert main(["inspect", str(MLP / "mlp-symbol.json"), "--params", str(MLP / "mlp-0000.params"),
                 "--shape", "data=4,784", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["ops"] == {"FullyConnected": 3, "Activation": 2, "SoftmaxOutput": 1}
    args = {a["name"]: a for a in report["arguments"]}
    assert args["fc1_weight"]["shape"] == [128, 784] and args["fc1_weight"]["dtype"] == "float32"
    assert args["softmax_label"]["shape"] == [4]
    assert report["outputs"] == [{"name": "softmax_output", "shape": [4, 10], "dtype": "float32"}]
    params = mxc.nd.load(MLP / "mlp-0000.params")
    assert report["num_params"] == sum(v.size for v in params.values())
    assert report["param_bytes"] == sum(v.nbytes for v in params.values())


def test_inspect_text_view(capsys):
    assert main(["inspect", str(MLP / "mlp-symbol.json"), "--shape", "data=2,784"]) == 0
    out = capsys.readouterr().out
    assert "FullyConnected" in out and "fc1_weight" in out and "128x784" in out


def test_run_matches_python_api(tmp_path):
    out = tmp_path / "out.npz"
    assert main(["run", str(MLP / "mlp-symbol.json"), "--params", str(MLP / "mlp-0000.params"),
                 "--inputs", str(MLP / "input.npz"), "--output", str(out)]) == 0
    sym, args, aux = mxc.load_checkpoint(str(MLP / "mlp"), 0)
    x = np.load(MLP / "input.npz")["data"]
    want = sym.bind(args={**args, "data": x}, aux_states=aux).forward()[0]
    got = np.load(out)
    assert got.files == ["out0"]
    np.testing.assert_array_equal(got["out0"], want)
    # softmax rows sum to one: an independent check of the whole forward
    np.testing.assert_allclose(want.sum(axis=1), 1.0, rtol=1e-5)


def run_cli(*args):
    return subprocess.run([sys.executable, "-m", "mxc.cli", *args], capture_output=True,
                          text=True, cwd=REPO)


def test_errors_are_one_line_with_exit_code(tmp_path):
    bad = tmp_path / "bad-symbol.json"
    bad.write_text('{"nodes": [\n  {"op": "null", "name": "x", "inputs": []},\n')
    r = run_cli("inspect", str(bad))
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("mxc inspect: error: ")
    assert f"{bad}:3:" in lines[0]
    r = run_cli("-v", "inspect", str(bad))
    assert "Traceback" in r.stderr


def test_unknown_ops_are_listed_together(tmp_path):
    spec = {"nodes": [{"op": "null", "name": "x", "inputs": []},
                      {"op": "MyOpA", "name": "a", "inputs": [[0, 0, 0]]},
                      {"op": "MyOpB", "name": "b", "inputs": [[1, 0, 0]]},
                      {"op": "MyOpA", "name": "c", "inputs": [[2, 0, 0]]}],
            "arg_nodes": [0], "heads": [[3, 0, 0]]}
    path = tmp_path / "m-symbol.json"
    path.write_text(json.dumps(spec))
    r = run_cli("inspect", str(path))
    assert r.returncode == 3
    assert "2 unsupported operator(s): MyOpA (x2: nodes 'a', 'c'), MyOpB (x1: node 'b')" in r.stderr


def test_run_rejects_unknown_input_names(tmp_path):
    inputs = tmp_path / "in.npz"
    np.savez(inputs, dta=np.zeros((4, 784), np.float32))
    r = run_cli("run", str(MLP / "mlp-symbol.json"), "--params", str(MLP / "mlp-0000.params"),
                "--inputs", str(inputs), "--output", str(tmp_path / "o.npz"))
    assert r.returncode == 4 and "unknown input(s) 'dta'; the model's inputs are data" in r.stderr
    assert not (tmp_path / "o.npz").exists()


def test_bad_shape_argument_is_a_usage_error():
    r = run_cli("inspect", str(MLP / "mlp-symbol.json"), "--shape", "data=4,x")
    assert r.returncode == 64 and "dimensions must be integers" in r.stderr
