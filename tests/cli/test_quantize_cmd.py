"""``mxc quantize`` on every case of the quantize corpus, with the acceptance command line.

Oracle: what MXNet 1.9.1's quantizer made of the same float model and
calibration data (``corpus/quantize/<case>``, its README): the INT8 graph
(op multiset; node by node where names match: op, inputs and attributes other
than the thresholds), every threshold of ``int8/thresholds.json`` (naive:
rtol 1e-5, entropy: rtol 1e-3, plus 1e-6 for the 6-decimal attributes), the int8 params, and the
outputs of the produced model (reference backend) against MXNet's int8
outputs within the case's tolerance (where MXNet could run its model: for a
"run"-stage error case the rest is compared).  Cases where MXNet refused
while quantizing must be refused.  Cases needing what the quantizer does not implement yet are
refused by it (exit code 11, "not implemented yet") and skip with that
message, so the gap stays visible.
"""

from __future__ import annotations

import json
from collections import Counter

import numpy as np
import pytest

import mxc
from conftest import corpus_path, require_corpus
from mxc.cli import main
from oracle import PRE_VNNI_RECORDED, assert_close, pre_vnni_int_dot

SPLIT = "quantize"

pytestmark = pytest.mark.corpus


def _cases() -> list[str]:
    root = corpus_path()
    if root is None or not (root / SPLIT).is_dir():
        return []
    return sorted(p.name for p in (root / SPLIT).iterdir() if (p / "quantize.json").exists())


CASES = _cases() or ["no-corpus"]


def _argv(case, out):
    """The acceptance check's command line (corpus README, "How acceptance checks a case")."""
    q = json.loads((case / "quantize.json").read_text())
    cli = q["cli"]
    argv = ["quantize", str(case / "fp32" / "symbol.json"), "--params",
            str(case / "fp32" / "model.params")]
    if q["call"].get("calib_data") is not None:
        argv += ["--calib-data", str(case / "calib.npz")]
    argv += ["--calib-mode", cli["calib_mode"], "--quantized-dtype", cli["quantized_dtype"],
             "--quantize-mode", cli["quantize_mode"]]
    for flag in ("exclude_layers", "exclude_layers_match", "exclude_operators"):
        if cli.get(flag):
            argv += [f"--{flag.replace('_', '-')}", ",".join(cli[flag])]
    if cli.get("num_calib_batches"):
        argv += ["--num-calib-batches", str(cli["num_calib_batches"])]
    if cli.get("flow") == "model":
        argv += ["--flow", "model"]
    return argv + ["-o", str(out / "model")]


def _by_name(doc):
    nodes = doc["nodes"]
    return {n["name"]: (n, [nodes[i[0]]["name"] + f":{i[1]}" for i in n["inputs"]])
            for n in nodes}


@pytest.mark.parametrize("name", CASES)
def test_quantize_matches_mxnet(name, tmp_path, capsys, monkeypatch):
    if name == "no-corpus":
        require_corpus(SPLIT)
    case = require_corpus(SPLIT) / name
    rc = main(_argv(case, tmp_path))
    err = capsys.readouterr().err
    expected = case / "expected_error.json"
    stage = json.loads(expected.read_text())["stage"] if expected.exists() else None
    if stage == "quantize":
        assert rc != 0, f"MXNet refused {name}; mxc quantize wrote a model"
        assert err.startswith("mxc quantize: error:") and "Traceback" not in err, err
        assert not (tmp_path / "model-symbol.json").exists()
        return
    if rc != 0:
        assert rc == 11 and "not implemented yet" in err and "Traceback" not in err, err
        pytest.skip(err.strip())
    # stage "run": MXNet made the model but cannot run it; mxc may, and the graph, the
    # thresholds and the params are compared (there are no MXNet outputs)
    got = json.loads((tmp_path / "model-symbol.json").read_text())
    want = json.loads((case / "int8" / "symbol.json").read_text())
    assert Counter(n["op"] for n in got["nodes"]) == Counter(n["op"] for n in want["nodes"])
    calib = ("min_calib_range", "max_calib_range")
    g_nodes, w_nodes = _by_name(got), _by_name(want)
    assert set(g_nodes) == set(w_nodes)
    for node_name, (w, w_inputs) in w_nodes.items():
        g, g_inputs = g_nodes[node_name]
        assert (g["op"], g_inputs) == (w["op"], w_inputs), node_name
        strip = [{k: v for k, v in (n.get("attrs") or {}).items() if k not in calib}
                 for n in (g, w)]
        assert strip[0] == strip[1], node_name
        assert g.get("subgraphs") == w.get("subgraphs"), node_name
    assert got["heads"] == want["heads"]

    thresholds = json.loads((case / "int8" / "thresholds.json").read_text())
    rtol = 1e-3 if thresholds["calib_mode"] == "entropy" else 1e-5
    for node in thresholds["nodes"]:
        attrs = g_nodes[node["name"]][0].get("attrs", {})
        for key in calib:
            assert key in attrs, f"{node['name']}: no {key}"
            ours, theirs = float(attrs[key]), node[key]
            assert abs(ours - theirs) <= rtol * abs(theirs) + 1e-6, \
                f"{node['name']} {key}: {ours} vs MXNet {theirs}"

    params = {k[4:]: np.asarray(v) for k, v in mxc.nd.load(tmp_path / "model-0000.params").items()}
    mx_params = {k[4:]: np.asarray(v)
                 for k, v in mxc.nd.load(case / "int8" / "model.params").items()}
    assert set(params) == set(mx_params)
    for key, value in mx_params.items():
        assert params[key].dtype == value.dtype, key
        np.testing.assert_array_equal(params[key], value, err_msg=key)

    if stage == "run":
        return
    meta = json.loads((case / "int8" / "meta.json").read_text())
    io = np.load(case / "int8" / "io.npz")
    if name in PRE_VNNI_RECORDED:   # MXNet's outputs there are those of a CPU without VNNI
        import mxc.compiler.ops.quantization as quantization
        monkeypatch.setattr(quantization, "int_dot", pre_vnni_int_dot)
    sym = mxc.sym.load(tmp_path / "model-symbol.json")
    bound = dict(params)
    bound.update({k[4:]: io[k] for k in io.files if k.startswith("in__")})
    for i, out in enumerate(sym.bind(args=bound).forward()):
        assert_close(np.asarray(out), io[f"out__{i}"], meta["rtol"], meta["atol"],
                     f"{name} output {i}")


def test_quantize_refuses_unimplemented_options(tmp_path, capsys):
    """An option the quantizer does not implement is refused, named, before any work."""
    case = require_corpus(SPLIT) / "net_mlp3_naive_full_auto"
    base = ["quantize", str(case / "fp32" / "symbol.json"), "--params",
            str(case / "fp32" / "model.params"), "--calib-data", str(case / "calib.npz"),
            "-o", str(tmp_path / "m")]
    for extra, word in ((["--exclude-layers", "mlp0_dense0_fwd"], "exclude_layers"),
                        (["--exclude-layers-match", "dense0"], "exclude_layers_match"),
                        (["--exclude-operators", "Activation"], "exclude_operators"),
                        (["--quantize-granularity", "channel-wise"], "channel-wise")):
        assert main(base + extra) == 11
        err = capsys.readouterr().err
        assert word in err and "not implemented yet" in err, err
    assert not list(tmp_path.iterdir())
