"""Shape inference where MXNet 1.9.1 knows more than mxc did.

* Gluon's bidirectional ``rnn.RNN``/``GRU``/``LSTM`` export the fused ``RNN`` op
  fed by ``_rnn_param_concat`` of every weight flattened (``Reshape(-1)``), in
  the order of ``_RNNLayer._forward_kernel`` (weights then biases; layer;
  direction l, r; i2h, h2h) -- the unidirectional form is the wave-2 corpus
  model ``rnn_lstm2_classifier``.  A layer exported before its input size is
  known declares ``l0_i2h_weight`` and ``r0_i2h_weight`` as ``(G*H, 0)``: two
  unknown inputs of the concatenation, which MXNet's ``RNNParamConcatShape``
  splits evenly.  Expected shapes are hand-computed: ``(G*H, C)`` for layer 0,
  ``(G*H, 2H)`` above it (G gates: 4 lstm, 3 gru, 1 rnn).
* ``insert``/``concatenate(axis=None)`` report the input view their shape
  function writes back (MXNet's recorded ``infer_shape`` of the wave-2 cases).
* ``_np_dot``/``_npi_einsum`` reducing to a scalar give DeepNumpy's ``()``.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

import mxc
from conftest import op_cases
from mxc.errors import ShapeError

GATES = {"lstm": 4, "gru": 3, "rnn_tanh": 1, "rnn_relu": 1}
T, N, C, H = 5, 2, 3, 4


def bidirectional_rnn(mode: str, layers: int, input_size: int = 0) -> dict:
    """The symbol Gluon exports for ``rnn.<mode>(H, layers, bidirectional=True)``
    whose input size is deferred (*input_size* 0) or known."""
    g = GATES[mode]
    nodes = [{"op": "null", "name": "data", "inputs": []}]
    flat = []
    for kind in ("weight", "bias"):
        for layer in range(layers):
            for d in "lr":
                for gate in ("i2h", "h2h"):
                    if kind == "bias":
                        shape = (g * H,)
                    elif gate == "h2h":
                        shape = (g * H, H)
                    else:
                        shape = (g * H, input_size if layer == 0 else 2 * H)
                    nodes.append({"op": "null", "name": f"rnn0_{d}{layer}_{gate}_{kind}",
                                  "attrs": {"__shape__": str(shape)}, "inputs": []})
                    nodes.append({"op": "Reshape", "name": f"rnn0_reshape{len(flat)}",
                                  "attrs": {"shape": "-1"}, "inputs": [[len(nodes) - 1, 0, 0]]})
                    flat.append(len(nodes) - 1)
    nodes.append({"op": "_rnn_param_concat", "name": "rnn0_rnn_param_concat0",
                  "attrs": {"dim": "0", "num_args": str(len(flat))},
                  "inputs": [[i, 0, 0] for i in flat]})
    inputs = [[0, 0, 0], [len(nodes) - 1, 0, 0]]
    for k in range(2 if mode == "lstm" else 1):
        nodes.append({"op": "null", "name": f"rnn0_h0_{k}", "inputs": []})
        inputs.append([len(nodes) - 1, 0, 0])
    nodes.append({"op": "RNN", "name": "rnn0_rnn0", "inputs": inputs, "attrs": {
        "bidirectional": "True", "mode": mode, "num_layers": str(layers), "p": "0",
        "state_outputs": "True", "state_size": str(H), "projection_size": "None",
        "lstm_state_clip_max": "None", "lstm_state_clip_min": "None",
        "lstm_state_clip_nan": "False", "use_sequence_length": "False"}})
    return {"nodes": nodes, "heads": [[len(nodes) - 1, 0, 0]],
            "arg_nodes": [i for i, n in enumerate(nodes) if n["op"] == "null"],
            "attrs": {"mxnet_version": ["int", 10901]}}


def _states(mode, layers):
    return {f"rnn0_h0_{k}": (2 * layers, N, H) for k in range(2 if mode == "lstm" else 1)}


@pytest.mark.parametrize("layers", [1, 2])
@pytest.mark.parametrize("mode", sorted(GATES))
def test_bidirectional_layer_infers_its_deferred_input_weights(mode, layers):
    sym = mxc.sym.load_json(json.dumps(bidirectional_rnn(mode, layers)))
    arg, out, _ = sym.infer_shape(data=(T, N, C), **_states(mode, layers))
    assert arg is not None, "infer_shape left shapes unknown"
    shapes = dict(zip(sym.list_arguments(), arg))
    g = GATES[mode]
    for d in "lr":
        assert shapes[f"rnn0_{d}0_i2h_weight"] == (g * H, C)
        for layer in range(1, layers):
            assert shapes[f"rnn0_{d}{layer}_i2h_weight"] == (g * H, 2 * H)
    assert out == [(T, N, 2 * H)]


def test_bidirectional_layer_with_known_weights_runs():
    mode, layers = "lstm", 2
    sym = mxc.sym.load_json(json.dumps(bidirectional_rnn(mode, layers)))
    arg, _, _ = sym.infer_shape(data=(T, N, C), **_states(mode, layers))
    rng = np.random.default_rng(0)
    args = {n: rng.standard_normal(s).astype(np.float32) * 0.3
            for n, s in zip(sym.list_arguments(), arg)}
    out = sym.bind(args=args).forward()[0]
    assert out.shape == (T, N, 2 * H) and np.isfinite(out).all()


def test_more_than_two_deferred_inputs_is_refused_as_in_mxnet():
    doc = bidirectional_rnn("gru", 2)
    for n in doc["nodes"]:
        if n["name"] == "rnn0_l1_i2h_weight":
            n["attrs"]["__shape__"] = str((GATES["gru"] * H, 0))
    sym = mxc.sym.load_json(json.dumps(doc))
    with pytest.raises(ShapeError, match="3 inputs of unknown size"):
        sym.infer_shape(data=(T, N, C), **_states("gru", 2))


WRITE_BACK = [c for c in op_cases("wave2/ops")
              if c["op"] in ("_npi_insert_scalar", "_npi_insert_slice", "_npi_insert_tensor",
                             "_npi_concatenate", "_npi_column_stack")]


@pytest.mark.parametrize("case", WRITE_BACK or [None], ids=lambda c: c["id"] if c else "none")
def test_infer_shape_reports_the_argument_shapes_mxnet_reports(case):
    if case is None:
        pytest.skip("MXNet corpus not found (set MXC_CORPUS)")
    sym = mxc.sym.load_json(case["symbol"])
    inf = case["infer"]
    arg, out, _ = sym.infer_shape(**{k: tuple(v) for k, v in inf["given"].items()})
    assert {n: list(s) for n, s in zip(sym.list_arguments(), arg)} == inf["arg_shapes"]
    assert [list(s) for s in out] == inf["out_shapes"]


def test_insert_without_axis_reports_the_flattened_array():
    # np.insert(x, 1, v) flattens x: MXNet's shape function writes (6,) back for x
    nodes = [{"op": "null", "name": "x", "inputs": []}, {"op": "null", "name": "v", "inputs": []},
             {"op": "_npi_insert_scalar", "name": "op", "attrs": {"int_ind": "1"},
              "inputs": [[0, 0, 0], [1, 0, 0]]}]
    sym = mxc.sym.load_json(json.dumps({"nodes": nodes, "arg_nodes": [0, 1],
                                        "heads": [[2, 0, 0]],
                                        "attrs": {"is_np_shape": ["int", 1]}}))
    assert sym.infer_shape(x=(2, 3), v=(1,)) == ([(6,), (1,)], [(7,)], [])
    # binding keeps the real shapes
    got = sym.bind(args={"x": np.ones((2, 3), np.float32),
                         "v": np.zeros(1, np.float32)}).forward()[0]
    np.testing.assert_array_equal(got, np.insert(np.ones((2, 3), np.float32), 1, 0.0))


@pytest.mark.parametrize("np_shape", [True, False])
@pytest.mark.parametrize("op,attrs", [("_np_dot", {}),
                                      ("_npi_einsum", {"num_args": "2", "subscripts": "i,i->",
                                                       "optimize": "0"})])
def test_a_product_reduced_to_a_scalar_is_zero_dimensional(op, attrs, np_shape):
    nodes = [{"op": "null", "name": "a", "inputs": []}, {"op": "null", "name": "b", "inputs": []},
             {"op": op, "name": "op", "attrs": attrs, "inputs": [[0, 0, 0], [1, 0, 0]]}]
    doc = {"nodes": nodes, "arg_nodes": [0, 1], "heads": [[2, 0, 0]]}
    if np_shape:
        doc["attrs"] = {"is_np_shape": ["int", 1]}
    sym = mxc.sym.load_json(json.dumps(doc))
    assert sym.infer_shape(a=(3,), b=(3,))[1] == [()]
    a, b = np.arange(3, dtype=np.float32), np.array([2, -1, 4], np.float32)
    got = sym.bind(args={"a": a, "b": b}).forward()[0]
    assert got.shape == () and got == np.float32(0 * 2 + 1 * -1 + 2 * 4)
