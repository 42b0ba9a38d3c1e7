"""Quantized ``_sg_mkldnn_conv`` with a fused ``clip`` (ReLU6, MobileNetV2's oneDNN INT8 flow).

The node is built the way MXNet 1.9.1's ``quantize_net`` writes it (as the
corpus's ``_sg_mkldnn_conv`` cases): a nested ``Convolution -> clip(0, 6)``
(``-> elemwise_add`` with a residual), ``quantized=true``, ``with_act``, uint8
data with its range.  A 1x1 single-channel convolution with weight 1 and bias
-1 over data codes ``d`` of range ``[0, 255.5/16]`` (data scale 16) computes
``relu6(d/16 - 1)`` in float; quantized, the weight code is 127 (scale
127.5), the bias code ``-1 * 127.5 * 16 = -2040``, so the int32 accumulator
is ``127 d - 2040`` and each code below is worked out by hand from it
(``mkldnn_conv.cc``): without a sum MXNet drops the bounded relu and lets the
uint8 saturation cut at the calibrated maximum; before a sum the bound is
``6 * output_scale`` in codes.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from conftest import compile_and_run
from mxc.backends.reference import run_graph
from mxc.frontend.symbol_json import load_json

DATA = np.array([0, 32, 80, 128, 255], dtype=np.uint8).reshape(1, 1, 1, 5)
REAL = DATA.astype(np.float64) / 16           # 0, 2, 5, 8, 15.94
RELU6 = np.clip(REAL - 1, 0, 6)               # the float model: 0, 1, 4, 6, 6
WEIGHT = np.ones((1, 1, 1, 1), np.float32)
BIAS = np.full((1,), -1.0, np.float32)
RESIDUAL = np.array([0, 0, 0, 0, 10], np.int8).reshape(1, 1, 1, 5)


def _graph(calib: tuple[float, float] | None, with_sum: bool = False,
           clip_after_sum: bool = False):
    nested_nodes = [
        {"op": "null", "name": "data0", "inputs": []},
        {"op": "null", "name": "w0", "inputs": []},
        {"op": "null", "name": "b0", "inputs": []},
        {"op": "Convolution", "name": "conv",
         "attrs": {"kernel": "(1, 1)", "num_filter": "1"},
         "inputs": [[0, 0, 0], [1, 0, 0], [2, 0, 0]]},
    ]
    clip = {"op": "clip", "name": "relu6", "attrs": {"a_min": "0", "a_max": "6"},
            "inputs": [[len(nested_nodes) - 1, 0, 0]]}
    args = [0, 1, 2]
    if not clip_after_sum:
        nested_nodes.append(clip)
    if with_sum:
        nested_nodes += [{"op": "null", "name": "res0", "inputs": []},
                         {"op": "elemwise_add", "name": "plus",
                          "inputs": [[len(nested_nodes) - 1, 0, 0],
                                     [len(nested_nodes), 0, 0]]}]
        args.append(len(nested_nodes) - 2)
    if clip_after_sum:
        nested_nodes.append({**clip, "inputs": [[len(nested_nodes) - 1, 0, 0]]})
    nested = {"nodes": nested_nodes, "arg_nodes": args,
              "heads": [[len(nested_nodes) - 1, 0, 0]]}
    names = ["data", "weight", "bias"] + (["residual"] if with_sum else []) + \
        ["data_min", "data_max"] + (["sum_min", "sum_max"] if with_sum else [])
    attrs = {"quantized": "true", "with_act": "true"}
    if with_sum:
        attrs["with_sum"] = "true"
    if calib is not None:
        attrs["min_calib_range"], attrs["max_calib_range"] = (str(v) for v in calib)
    nodes = [{"op": "null", "name": n, "inputs": []} for n in names]
    nodes.append({"op": "_sg_mkldnn_conv", "name": "quantized_sg_mkldnn_conv_act_0",
                  "attrs": attrs, "inputs": [[i, 0, 0] for i in range(len(names))],
                  "subgraphs": [nested]})
    k = len(names)
    doc = {"nodes": nodes, "arg_nodes": list(range(k)),
           "heads": [[k, 0, 0], [k, 1, 0], [k, 2, 0]]}
    return load_json(json.dumps(doc), source="qconv-relu6")


def _feeds(with_sum: bool = False):
    f32 = np.float32
    feeds = {"data": DATA, "data_min": np.array([0], f32),
             "data_max": np.array([255.5 / 16], f32)}
    if with_sum:
        feeds.update(residual=RESIDUAL, sum_min=np.array([-8], f32), sum_max=np.array([8], f32))
    return feeds


#: name -> (calibrated range, with_sum, output dtype, codes)
CASES = {
    # acc * (255.5/6)/16/127.5 = -42.6, 42.2, 169.5, 296.7, 634: uint8 saturation, no clip
    "calibrated_0_6": ((0.0, 6.0), False, np.uint8, [0, 42, 169, 255, 255]),
    # calibrated above 6: the dropped bounded relu does not cut at 6 (7 -> 223)
    "calibrated_0_8": ((0.0, 8.0), False, np.uint8, [0, 32, 127, 223, 255]),
    # uncalibrated int32: the accumulator itself, not clipped
    "uncalibrated": (None, False, np.int32, [-2040, 2024, 8120, 14216, 30345]),
    # before a sum, int8 output in [-8, 8]: acc/128 clipped to [0, 6*127.5/8 = 95.625],
    # plus the residual codes (sum scale 1)
    "sum_int8": ((-8.0, 8.0), True, np.int8, [0, 16, 63, 96, 106]),
}


def _run_reference(case):
    calib, with_sum, _, _ = CASES[case]
    feeds = {**_feeds(with_sum), "weight": WEIGHT, "bias": BIAS}
    return run_graph(_graph(calib, with_sum), feeds)


@pytest.mark.parametrize("case", sorted(CASES))
def test_quantized_conv_relu6_codes(case):
    calib, _, dtype, want = CASES[case]
    outs = _run_reference(case)
    assert outs[0].dtype == dtype
    assert outs[0].ravel().tolist() == want


def test_quantized_conv_relu6_dequantizes_to_the_float_model():
    """The calibrated [0, 6] codes are ReLU6 of the float model within one output step
    plus the weight's quantization error (127/127.5)."""
    codes = _run_reference("calibrated_0_6")[0].astype(np.float64).ravel()
    step = 6 / 255.5
    np.testing.assert_allclose(codes * step, RELU6.ravel(), atol=step + 6 * (0.5 / 127.5))
    got = _run_reference("sum_int8")[0].astype(np.float64).ravel() * 8 / 127.5
    want = RELU6.ravel() + RESIDUAL.ravel() * 8 / 127.5
    np.testing.assert_allclose(got, want, atol=8 / 127.5 + 6 * (0.5 / 127.5))


@pytest.mark.parametrize("case", sorted(CASES))
def test_quantized_conv_relu6_compiled(case):
    pytest.importorskip("tvm")
    calib, with_sum, dtype, want = CASES[case]
    model, out = compile_and_run(_graph(calib, with_sum), {"weight": WEIGHT, "bias": BIAS},
                                 _feeds(with_sum))
    assert not model.host_nodes
    assert out.dtype == dtype
    assert out.ravel().tolist() == want


def test_clip_after_the_sum_is_refused_as_mxnet_does():
    """MXNet CHECK-fails on a post-sum activation other than relu: a clear UnsupportedOpError."""
    from mxc.errors import UnsupportedOpError
    graph = _graph((0.0, 8.0), True, clip_after_sum=True)
    with pytest.raises(UnsupportedOpError, match="after the residual sum"):
        run_graph(graph, {**_feeds(True), "weight": WEIGHT, "bias": BIAS})
