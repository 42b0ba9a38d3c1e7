"""Quantized ``_sg_mkldnn_selfatt_qk``/``_valatt``: the float fused op on dequantized codes.

MXNet 1.9.1's corpus has float cases only, so the oracle is an invariant: the
quantized node's result, read back through its output scale, equals the float
case's MXNet output up to the error the int8 (and uint8 attention) rounding of
the inputs can cause, bounded analytically.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from conftest import op_cases, require_corpus
from mxc.backends.reference import run_graph
from mxc.frontend.symbol_json import load_json

CASES = {c["op"]: c for c in op_cases("wave2/ops") if c["op"].startswith("_sg_mkldnn_selfatt")}


def _quantized_graph(case, extra_attrs, range_names):
    sym = json.loads(case["symbol"])
    node = sym["nodes"][-1]
    node["attrs"] = {**node["attrs"], "quantized": "True", **extra_attrs}
    first = len(sym["nodes"]) - 1
    for k, name in enumerate(range_names):
        sym["nodes"].insert(first + k, {"op": "null", "name": name, "inputs": []})
    node["inputs"] = node["inputs"] + [[first + k, 0, 0] for k in range(len(range_names))]
    sym["arg_nodes"] = list(range(first + len(range_names)))
    sym["heads"] = [[len(sym["nodes"]) - 1, 0, 0]]
    sym.pop("node_row_ptr", None)
    return load_json(json.dumps(sym), source=case["id"])


def _codes(x, levels, dtype):
    r = float(np.abs(x).max())
    return np.clip(np.rint(x * (levels / r)), np.iinfo(dtype).min, np.iinfo(dtype).max) \
        .astype(dtype), r


@pytest.mark.parametrize("form", ["float", "int32", "int8"])
def test_quantized_selfatt_qk_matches_float(form):
    require_corpus("wave2/ops")
    case = CASES.get("_sg_mkldnn_selfatt_qk")
    if case is None:
        pytest.skip("no _sg_mkldnn_selfatt_qk case")
    data = np.load(require_corpus("wave2/ops") / "data" / f"{case['id']}.npz")
    x, want = data["in__data"], data["out__0"].astype(np.float64)
    codes, r = _codes(x, 127.5, np.int8)
    hd = x.shape[-1] // 3 // int(case["attrs"]["heads"])
    calib = float(np.abs(want).max())
    extra = {"float": {"enable_float_output": "True"}, "int32": {},
             "int8": {"min_calib_range": str(-calib), "max_calib_range": str(calib)}}[form]
    g = _quantized_graph(case, extra, ["min_qkv", "max_qkv"])
    outs = run_graph(g, {"data": codes, "min_qkv": np.array([-r], np.float32),
                         "max_qkv": np.array([r], np.float32)})
    step = r / 127.5
    bound = hd * (2 * r * step / 2 + (step / 2) ** 2) / np.sqrt(hd)
    if form == "float":
        got, tol = outs[0].astype(np.float64), bound
    elif form == "int32":
        assert outs[0].dtype == np.int32
        got, tol = outs[0] * step * step, bound + step * step
    else:
        assert outs[0].dtype == np.int8
        got, tol = outs[0] * calib / 127.5, bound + calib / 127.5
    assert np.abs(got - want).max() <= tol


def test_quantized_selfatt_valatt_matches_float():
    require_corpus("wave2/ops")
    case = CASES.get("_sg_mkldnn_selfatt_valatt")
    if case is None:
        pytest.skip("no _sg_mkldnn_selfatt_valatt case")
    data = np.load(require_corpus("wave2/ops") / "data" / f"{case['id']}.npz")
    x, att, want = data["in__data"], data["in__att"], data["out__0"].astype(np.float64)
    att = np.abs(att)  # attention maps are non-negative (softmax): uint8 codes
    want = run_graph(load_json(case["symbol"]), {"data": x, "att": att})[0].astype(np.float64)
    xq, rx = _codes(x, 127.5, np.int8)
    aq, ra = _codes(att, 255.5, np.uint8)
    g = _quantized_graph(case, {"enable_float_output": "True"},
                         ["min_qkv", "max_qkv", "min_att", "max_att"])
    got = run_graph(g, {"data": xq, "att": aq, "min_qkv": np.array([-rx], np.float32),
                        "max_qkv": np.array([rx], np.float32),
                        "min_att": np.array([0], np.float32),
                        "max_att": np.array([ra], np.float32)})[0]
    seq = att.shape[-1]
    sx, sa = rx / 127.5 / 2, ra / 255.5 / 2
    bound = seq * (ra * sx + rx * sa + sx * sa)
    assert np.abs(got.astype(np.float64) - want).max() <= bound
