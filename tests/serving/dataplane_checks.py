"""Checks of the request decoder and response encoder that replace KServe's
per-element loops, run by ``test_dataplane.py`` in a process of their own:
kserve's gRPC protos and tritonclient's (imported by the other serving tests)
register the same names in protobuf's one descriptor pool.

KServe's own ``InferRequest.from_bytes`` and ``InferOutput.set_data_from_numpy``
are the oracle: the arrays a model reads and the JSON a client gets must be
the same, only without a Python object per tensor element.

    python tests/serving/dataplane_checks.py   # prints one JSON line: {check: "ok" | error}
"""

from __future__ import annotations

import json
import sys
import traceback
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from mxc.serving.server import import_kserve  # noqa: E402

import_kserve()
import orjson  # noqa: E402
from kserve.errors import InvalidInput  # noqa: E402
from kserve.protocol.infer_type import InferOutput, InferRequest  # noqa: E402

from mxc.serving.dataplane import MxcDataPlane, request_from_bytes  # noqa: E402
from mxc.serving.tensors import output_tensor, v2_datatype  # noqa: E402

_HEADER = "inference-header-content-length"


def _body(tensors: dict, json_inputs: dict | None = None, outputs=None) -> tuple[bytes, int]:
    """A binary-extension request body as tritonclient builds it: JSON header, then bytes."""
    inputs, blobs = [], []
    for name, x in tensors.items():
        raw = x.tobytes()
        inputs.append({"name": name, "shape": list(x.shape), "datatype": v2_datatype(x.dtype),
                       "parameters": {"binary_data_size": len(raw)}})
        blobs.append(raw)
    for name, x in (json_inputs or {}).items():
        inputs.append({"name": name, "shape": list(x.shape), "datatype": v2_datatype(x.dtype),
                       "data": x.reshape(-1).tolist()})
    header = {"id": "r1", "inputs": inputs, "parameters": {"binary_data_output": True}}
    if outputs:
        header["outputs"] = [{"name": o, "parameters": {"binary_data": True}} for o in outputs]
    js = orjson.dumps(header)
    return js + b"".join(blobs), len(js)


def binary_inputs_decode_like_kserves_from_bytes(dtype):
    rng = np.random.default_rng(3)
    x = (rng.standard_normal((2, 3, 4)) * 50).astype(dtype)
    y = np.arange(6, dtype="int32").reshape(1, 6)
    z = np.linspace(-1, 1, 5, dtype="float32").reshape(5, 1)
    body, length = _body({"x": x, "y": y}, json_inputs={"z": z}, outputs=["out0"])
    ours = request_from_bytes(body, length, "m")
    theirs = InferRequest.from_bytes(body, length, "m")
    assert [t.name for t in ours.inputs] == [t.name for t in theirs.inputs] == ["x", "y", "z"]
    for a, b in zip(ours.inputs, theirs.inputs):
        assert (a.datatype, a.shape) == (b.datatype, b.shape)
        np.testing.assert_array_equal(a.as_numpy(), b.as_numpy())
        assert a.as_numpy().dtype == b.as_numpy().dtype
    assert ours.id == theirs.id and ours.parameters == theirs.parameters
    assert ours.use_binary_outputs == theirs.use_binary_outputs
    assert [o.name for o in ours.request_outputs] == [o.name for o in theirs.request_outputs]
    # the binary inputs were not turned into Python lists
    assert ours.inputs[0]._data is None and ours.inputs[0]._raw_data is not None


def the_data_plane_decodes_binary_bodies_and_wants_their_header():
    x = np.ones((1, 4), "float32")
    body, length = _body({"x": x})
    dp = MxcDataPlane.__new__(MxcDataPlane)  # the decoder needs no model registry
    req = dp.decode_inference_request(body, {_HEADER: str(length)}, "m")
    np.testing.assert_array_equal(req.inputs[0].as_numpy(), x)
    _raises(lambda: dp.decode_inference_request(body, {}, "m"), "header is missing")


MALFORMED = [
    (b"{not json", 0),                                                  # malformed JSON
    (b'{"inputs": 3}', 0),                                              # inputs not a list
    (b'{"inputs": [{"shape": [1], "datatype": "FP32"}]}', 0),           # no name
    (b'{"inputs": [{"name": "x", "shape": [1], "datatype": "FP32"}]}', 0),  # no data at all
    (b'{"inputs": [{"name": "x", "shape": [4], "datatype": "FP32", '
     b'"parameters": {"binary_data_size": 16}}]}', 8),                  # body cut short
    (b'{"inputs": [{"name": "x", "shape": [1], "datatype": "FP16", "data": [1.0]}]}', 0),
]


def malformed_binary_requests_are_invalid_input(header, cut):
    body = header + b"\0" * (16 - cut)
    _raises(lambda: request_from_bytes(body, len(header), "m"), "")


def outputs_encode_like_kserves_set_data_from_numpy(dtype, binary):
    rng = np.random.default_rng(7)
    value = (rng.standard_normal((2, 5)) * 100).astype(dtype)
    ours = output_tensor("out", value, binary)
    theirs = InferOutput(name="out", shape=list(value.shape), datatype=v2_datatype(value.dtype))
    theirs.set_data_from_numpy(value, binary_data=binary)
    assert (ours.name, ours.shape, ours.datatype) == (theirs.name, theirs.shape, theirs.datatype)
    assert ours.data == theirs.data and ours._raw_data == theirs._raw_data
    assert ours.parameters == theirs.parameters
    if not binary:  # the same JSON text, value for value
        assert orjson.dumps(ours.data) == orjson.dumps(theirs.data)
        assert [type(v) for v in ours.data] == [type(v) for v in theirs.data]


def _raises(fn, text: str) -> None:
    try:
        fn()
    except InvalidInput as exc:
        assert text in str(exc), exc
        return
    raise AssertionError("no InvalidInput raised")


CHECKS = {
    **{f"decode-{d}": (binary_inputs_decode_like_kserves_from_bytes, (d,))
       for d in ("float32", "int64", "uint8", "int8", "float64", "bool")},
    "data-plane": (the_data_plane_decodes_binary_bodies_and_wants_their_header, ()),
    **{f"malformed-{i}": (malformed_binary_requests_are_invalid_input, case)
       for i, case in enumerate(MALFORMED)},
    **{f"encode-{d}-{'binary' if b else 'json'}": (outputs_encode_like_kserves_set_data_from_numpy,
                                                   (d, b))
       for d in ("float32", "float64", "int64", "int32", "uint8", "int8", "bool", "float16")
       for b in (False, True)},
}


def main() -> None:
    results = {}
    for name, (fn, args) in CHECKS.items():
        try:
            fn(*args)
            results[name] = "ok"
        except Exception:  # noqa: BLE001 - reported to the test
            results[name] = traceback.format_exc()
    print(json.dumps(results))


if __name__ == "__main__":
    main()
