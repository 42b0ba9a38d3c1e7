"""Quantized ``_sg_mkldnn_conv`` with a residual sum: the codes saturate to the residual's type.

MXNet 1.9.1 runs a ``with_sum`` convolution in place on its residual
operand, so oneDNN writes the result in the residual's type: after
``+ relu`` the uint8 output of a node whose residual is int8 stops at 127
(observed layer by layer on ``int8_resnet18_v1_w0.5_mkldnn``, whose int8
downsample branches feed such sums).  The oracle here is hand-computed on a
1x1 single-channel convolution whose scales are all 1 or 127/127.5, so each
code is ``round(d * 127 / 127.5 + s)`` clipped to the residual's range and
read as the output type (these four results are also what MXNet 1.9.1 with
oneDNN returns for the same graph and inputs).
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from conftest import compile_and_run
from mxc.backends.reference import run_graph
from mxc.frontend.symbol_json import load_json

DATA = np.array([0, 100, 200, 255], dtype=np.uint8).reshape(1, 1, 2, 2)


def _graph(relu: bool):
    act = [{"op": "Activation", "name": "relu", "attrs": {"act_type": "relu"},
            "inputs": [[4, 0, 0]]}] if relu else []
    nested = {
        "nodes": [
            {"op": "null", "name": "x", "inputs": []},
            {"op": "null", "name": "w", "inputs": []},
            {"op": "Convolution", "name": "conv",
             "attrs": {"kernel": "(1, 1)", "num_filter": "1", "no_bias": "True"},
             "inputs": [[0, 0, 0], [1, 0, 0]]},
            {"op": "null", "name": "res", "inputs": []},
            {"op": "elemwise_add", "name": "plus", "inputs": [[2, 0, 0], [3, 0, 0]]},
        ] + act,
        "arg_nodes": [0, 1, 3], "heads": [[5 if relu else 4, 0, 0]],
    }
    names = ["data", "weight", "residual", "data_min", "data_max", "sum_min", "sum_max"]
    nodes = [{"op": "null", "name": n, "inputs": []} for n in names]
    attrs = {"quantized": "true", "with_sum": "true",
             "min_calib_range": "0" if relu else "-127.5",
             "max_calib_range": "255.5" if relu else "127.5"}
    if relu:
        attrs["with_postsum_act"] = "true"
    nodes.append({"op": "_sg_mkldnn_conv", "name": "qconv", "attrs": attrs,
                  "inputs": [[i, 0, 0] for i in range(len(names))], "subgraphs": [nested]})
    doc = {"nodes": nodes, "arg_nodes": list(range(len(names))),
           "heads": [[len(names), 0, 0], [len(names), 1, 0], [len(names), 2, 0]]}
    return load_json(json.dumps(doc), source="qconv-sum")


def _feeds(residual, sum_min):
    f32 = np.float32
    return {"data": DATA, "residual": residual.reshape(1, 1, 2, 2),
            "data_min": np.array([0], f32), "data_max": np.array([255.5], f32),
            "sum_min": np.array([sum_min], f32), "sum_max": np.array([abs(sum_min) or 255.5], f32)}


# data scale 255.5/255.5 = 1, weight 1.0 -> code 127 at scale 127.5, output scale
# 255.5/255.5 (uint8 after relu) or 127.5/127.5 (int8) = 1, residual scale 1:
# code = round(d * 127/127.5 + s), i.e. [0, 120, 249 (+50), 354 (+100) or 154 (-100)].
CASES = {
    # int8 residual (range +-127.5) + relu: written into int8, so 249 and 154 stop at 127
    "relu_int8_residual": (True, np.array([0, 20, 50, -100], np.int8), -127.5,
                           np.uint8, [0, 120, 127, 127]),
    # uint8 residual (range 0..255.5) + relu: the full uint8 range, 354 saturating to 255
    "relu_uint8_residual": (True, np.array([0, 20, 50, 100], np.uint8), 0.0,
                            np.uint8, [0, 120, 249, 255]),
    # int8 output over a uint8 residual: saturated to uint8 (249, 255), read as int8
    "int8_out_uint8_residual": (False, np.array([0, 20, 50, 100], np.uint8), 0.0,
                                np.int8, [0, 120, -7, -1]),
    # int8 output over an int8 residual: the ordinary int8 saturation
    "int8_out_int8_residual": (False, np.array([0, 20, 50, -100], np.int8), -127.5,
                               np.int8, [0, 120, 127, 127]),
}
WEIGHT = np.ones((1, 1, 1, 1), np.float32)


@pytest.mark.parametrize("case", sorted(CASES))
def test_quantized_conv_sum_saturates_to_residual_type(case):
    relu, residual, sum_min, dtype, want = CASES[case]
    outs = run_graph(_graph(relu), {**_feeds(residual, sum_min), "weight": WEIGHT})
    assert outs[0].dtype == dtype
    assert outs[0].ravel().tolist() == want
    assert (float(outs[1][0]), float(outs[2][0])) == ((0.0, 255.5) if relu else (-127.5, 127.5))


@pytest.mark.parametrize("case", sorted(CASES))
def test_quantized_conv_sum_compiled_saturates_alike(case):
    pytest.importorskip("tvm")
    relu, residual, sum_min, dtype, want = CASES[case]
    model, out = compile_and_run(_graph(relu), {"weight": WEIGHT}, _feeds(residual, sum_min))
    assert not model.host_nodes
    assert out.dtype == dtype
    assert out.ravel().tolist() == want
