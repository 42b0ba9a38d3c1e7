"""KServe's data plane, decoding binary-tensor bodies by mxc's rules.

KServe 0.21 decodes a REST request that uses the binary tensor extension
(``Inference-Header-Content-Length``) by turning every binary input into a
Python list, one ``numpy.generic.item()`` per element, and the model then
turns that list back into an array (150,528 Python floats per 3x224x224
image).  It also takes malformed headers with a 500.  :class:`MxcDataPlane`
decodes such a body with :func:`mxc.serving.requests.decode_binary`: each
binary input keeps its bytes (``InferInput.as_numpy`` reads them with
``np.frombuffer``, no copy) and every malformed field is a 400 naming it.  The
V2 infer route (:mod:`mxc.serving.infer_route`) calls that decoder itself; this
class serves the routes that still go through KServe's app (CloudEvents).
"""

from __future__ import annotations

from typing import Any

from kserve.protocol.dataplane import DataPlane
from kserve.protocol.infer_type import InferRequest

from .errors import RequestError
from .requests import BINARY_HEADER, binary_header_length, decode_binary


class MxcDataPlane(DataPlane):
    """A ``DataPlane`` whose binary REST requests keep their tensors as bytes."""

    #: the most bytes one request may declare for a tensor (``--max-request-bytes``)
    max_request_bytes: int = 64 << 20

    def decode_inference_request(self, body: Any, headers: dict, model_name: str) -> InferRequest:
        if not isinstance(body, bytes):
            return super().decode_inference_request(body, headers, model_name)
        json_length = binary_header_length({k.lower(): v for k, v in headers.items()})
        if json_length is None:
            raise RequestError(f"a binary body needs the '{BINARY_HEADER}' "
                               f"header (the length of its JSON part): the header is missing")
        return decode_binary(body, str(json_length), model_name, self.max_request_bytes)
