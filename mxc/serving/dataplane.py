"""KServe's data plane with a binary-tensor request decoder that keeps tensors as bytes.

KServe 0.21 decodes a REST request that uses the binary tensor extension
(``Inference-Header-Content-Length``) by turning every binary input into a
Python list, one ``numpy.generic.item()`` per element
(``InferRequest.from_bytes`` calls ``set_data_from_numpy(..., binary_data=False)``),
and the model then turns that list back into an array.  For a 3x224x224 image
that is 150,528 Python floats made and read again per request, far more than
the rest of the request path.  :class:`MxcDataPlane` decodes such a body the
same way except that each binary input keeps its bytes (``InferInput.as_numpy``
then reads them with ``np.frombuffer``, no copy); JSON bodies, gRPC and every
other route are KServe's own.
"""

from __future__ import annotations

from typing import Any

import orjson
from kserve.constants.constants import INFERENCE_CONTENT_LENGTH_HEADER
from kserve.errors import InvalidInput
from kserve.protocol.dataplane import DataPlane
from kserve.protocol.infer_type import InferInput, InferRequest, RequestedOutput


class MxcDataPlane(DataPlane):
    """A ``DataPlane`` whose binary REST requests keep their tensors as bytes."""

    def decode_inference_request(self, body: Any, headers: dict, model_name: str) -> InferRequest:
        if not isinstance(body, bytes):
            return super().decode_inference_request(body, headers, model_name)
        json_length = headers.get(INFERENCE_CONTENT_LENGTH_HEADER)
        if json_length is None:
            raise InvalidInput(f"received byte inputs, but the "
                               f"'{INFERENCE_CONTENT_LENGTH_HEADER}' header is missing.")
        return request_from_bytes(body, int(json_length), model_name)


def request_from_bytes(body: bytes, json_length: int, model_name: str) -> InferRequest:
    """``InferRequest.from_bytes`` without converting binary inputs to lists (same
    fields, same :class:`~kserve.errors.InvalidInput` for malformed requests)."""
    try:
        header = orjson.loads(body[:json_length])
    except orjson.JSONDecodeError as exc:
        raise InvalidInput(f"Unrecognized request format: {exc}") from None
    if not isinstance(header, dict) or not isinstance(header.get("inputs"), list):
        raise InvalidInput("Unrecognized request format: a JSON object with an 'inputs' "
                           "list expected")
    try:
        return _request(body, header, json_length, model_name)
    except (KeyError, TypeError, ValueError) as exc:
        raise InvalidInput(f"Unrecognized request format: {type(exc).__name__}: {exc}") from None


def _request(body: bytes, header: dict, json_length: int, model_name: str) -> InferRequest:
    inputs = []
    start = json_length
    for spec in header["inputs"]:
        parameters = spec.get("parameters")
        tensor = InferInput(name=spec["name"], shape=spec["shape"], datatype=spec["datatype"],
                            parameters=parameters)
        data = spec.get("data")
        if data is not None:
            if tensor.datatype == "FP16":
                raise InvalidInput(f"Receiving FP16 data via JSON is not supported. Please use "
                                   f"the binary data format for input {tensor.name}")
            tensor.data = data
        elif parameters and parameters.get("binary_data_size") is not None:
            end = start + int(parameters["binary_data_size"])
            if end > len(body):
                raise InvalidInput(f"input {tensor.name!r}: binary_data_size "
                                   f"{parameters['binary_data_size']} runs past the end of the "
                                   f"request body")
            tensor._raw_data = body[start:end]  # what from_bytes sets, before its list copy
            start = end
        else:
            raise InvalidInput(f"'data' field is missing for input '{tensor.name}' for model "
                               f"'{model_name}'")
        inputs.append(tensor)
    outputs = None
    if header.get("outputs") is not None:
        outputs = [RequestedOutput(name=o["name"], parameters=o.get("parameters"))
                   for o in header["outputs"]]
    return InferRequest(model_name=model_name, request_id=header.get("id"),
                        parameters=header.get("parameters"), infer_inputs=inputs,
                        request_outputs=outputs)
