"""Reading V2 infer requests from untrusted bytes: JSON, the binary extension, gRPC.

A served model is reached first by strangers, so every request is checked here,
field by field, before anything acts on it, and every refusal is a
:class:`~mxc.serving.errors.RequestError` whose message names the field
(``inputs[0].shape[1]``) and what was expected -- never a Python exception's
class name.  One rule serves every protocol: datatypes are the V2 names exactly
as the protocol spells them (``FP32``, not ``fp32``; KServe upper-cases REST
datatypes and takes gRPC's as given, so the two disagreed), dimensions are
positive integers (not booleans, floats, zero or negative), and the elements a
shape declares must fit the request's byte limit before any array is made from
it, so a declared size cannot become a huge allocation.

The questions every layer of the REST stack asks of a request -- which
model does its path name (:func:`model_path`), is it a binary-extension body
(:func:`binary_header_length`) -- are answered here too, once each.

JSON values are numbers only (``NaN``/``Infinity`` literals are not JSON and
are refused by the parser), integers must fit the integer datatype, and a
finite value must stay finite in a narrower float type.  The results are
KServe ``InferRequest`` objects whose inputs already hold numpy arrays (JSON)
or views of the body (binary), so the data plane runs them unchanged.

A binary input keeps its bytes (:func:`mxc.serving.kserve_private.hold_raw_input`,
where mxc's reaches past KServe's public API live), so the tensor is read
with ``np.frombuffer`` and never copied here.  ``tests/serving/dataplane_checks.py``
compares the requests it makes with KServe's ``InferRequest.from_bytes`` for
the KServe release ``pyproject.toml`` admits.
"""

from __future__ import annotations

import functools
import json
import math
from typing import Any, Callable, Mapping

import numpy as np

from .errors import RequestError
from .kserve_private import hold_raw_input
from .tensors import NUMPY_DTYPES, numpy_dtype

#: the header of the binary tensor extension: the length of the body's JSON part
BINARY_HEADER = "inference-header-content-length"


def binary_header_length(headers: Mapping[str, str]) -> str | None:
    """The JSON part's length when a request uses the binary tensor extension (its
    ``Inference-Header-Content-Length``; *headers* keyed in lower case), else None:
    the one place that answers "is this a binary request?"."""
    return headers.get(BINARY_HEADER)


#: the ASGI scope key under which :func:`model_path`'s answer travels to inner layers
MODEL_PATH_KEY = "mxc.model_path"


def model_path(path: str) -> tuple[str, str] | None:
    """``(served model name, the rest)`` of a V2 model path, the one place paths are
    parsed: ``/v2/models/mlp/infer`` -> ``("mlp", "infer")``, a version's
    ``/v2/models/mlp/versions/2/infer`` -> ``("mlp@2", "infer")`` (the served name of
    a version); None for any other path."""
    parts = path.split("/")
    if len(parts) < 4 or parts[:3] != ["", "v2", "models"] or not parts[3]:
        return None
    if len(parts) >= 6 and parts[4] == "versions":
        return f"{parts[3]}@{parts[5]}", "/".join(parts[6:])
    return parts[3], "/".join(parts[4:])


def decode_request(body: bytes, headers: Mapping[str, str], model_name: str, max_bytes: int,
                   expect: Expect | None = None):
    """A V2 infer request body as a KServe ``InferRequest``: the binary extension's
    when its header is there (:func:`binary_header_length`), else JSON."""
    length = binary_header_length(headers)
    if length is None:
        return decode_json(body, model_name, max_bytes, expect)
    return decode_binary(body, length, model_name, max_bytes, expect)


#: the datatypes a request may name (the V2 spellings); BYTES is refused by the model check
DATATYPES = frozenset(NUMPY_DTYPES) | {"BYTES"}
_INT_KINDS = frozenset("iu")


def _short(value: Any, limit: int = 60) -> str:
    """*value* as the client wrote it (JSON), cut at *limit* characters."""
    try:
        text = json.dumps(value)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= limit else text[:limit] + "..."


#: the most bytes one JSON element may take ("-1.2345678901234567e-308, " and nesting)
JSON_BYTES_PER_ELEMENT = 32
#: room for names, datatypes, shapes, ids, parameters and whitespace
JSON_OVERHEAD_BYTES = 64 << 10


def json_limit(inputs: Any, max_batch: int | None) -> int | None:
    """The largest JSON body a request for a model with *inputs* can need: its
    elements (at the largest batch it runs) at :data:`JSON_BYTES_PER_ELEMENT`
    each, plus overhead.  None (no bound but the binary limit) when an input has
    an open dimension other than a bounded batch."""
    total = JSON_OVERHEAD_BYTES
    for info in inputs:
        dims = list(info.shape)
        if dims and not (isinstance(dims[0], int) and dims[0] >= 0):
            if max_batch is None:
                return None
            dims[0] = max_batch
        if not all(isinstance(d, int) and d >= 0 for d in dims):
            return None
        total += math.prod(dims) * JSON_BYTES_PER_ELEMENT + 1024
    return total


def check_datatype(where: str, datatype: Any) -> str:
    if not isinstance(datatype, str) or datatype not in DATATYPES:
        raise RequestError(f"{where}: datatype {_short(datatype)} is not a V2 datatype "
                           f"(one of {', '.join(sorted(DATATYPES))}, spelled exactly so)")
    return datatype


def check_shape(where: str, shape: Any, itemsize: int, max_bytes: int) -> list[int]:
    """A list of positive integer dimensions whose tensor fits in *max_bytes*."""
    if not isinstance(shape, (list, tuple)):
        raise RequestError(f"{where}: a list of dimensions expected, got {_short(shape)}")
    dims = []
    for i, d in enumerate(shape):
        if isinstance(d, bool) or not isinstance(d, int):
            raise RequestError(f"{where}[{i}]: a positive integer expected, got {_short(d)}")
        if d < 1:
            why = "an empty tensor has nothing to infer" if d == 0 else "dimensions are sizes"
            raise RequestError(f"{where}[{i}]: dimension {d}; at least 1 expected ({why})")
        dims.append(d)
    if math.prod(dims) * max(itemsize, 1) > max_bytes:
        raise RequestError(f"{where}: shape {dims} declares {math.prod(dims)} elements, more "
                           f"than a request may carry ({max_bytes} bytes)", status=413)
    return dims


def _object(where: str, value: Any, optional: bool = True) -> dict | None:
    if value is None and optional:
        return None
    if not isinstance(value, dict):
        raise RequestError(f"{where}: a JSON object expected, got {_short(value)}")
    return value


def _name(where: str, value: Any) -> str:
    if not isinstance(value, str) or not value:
        raise RequestError(f"{where}: a non-empty string expected, got {_short(value)}")
    return value


def _itemsize(datatype: str) -> int:
    return 1 if datatype == "BYTES" else numpy_dtype(datatype).itemsize


def json_values(where: str, data: Any, datatype: str, shape: list[int]) -> np.ndarray:
    """The ``data`` of a JSON input as an array of *datatype* and *shape* (nested or flat)."""
    if datatype in ("BYTES", "FP16", "BF16"):
        raise RequestError(f"{where}: {datatype} tensors are sent with the binary extension, "
                           f"not as JSON numbers")
    if not isinstance(data, list):
        raise RequestError(f"{where}: a list of numbers expected, got {_short(data)}")
    try:
        values = np.array(data)
    except (ValueError, TypeError, OverflowError, RecursionError):
        raise RequestError(f"{where}: nested lists of unequal lengths or depths") from None
    if values.size != math.prod(shape):
        raise RequestError(f"{where}: {values.size} values for shape {shape} "
                           f"({math.prod(shape)} expected)")
    dtype = numpy_dtype(datatype)
    kind = values.dtype.kind
    if kind not in "biuf" or (dtype.kind == "b" and kind != "b") \
            or (dtype.kind in _INT_KINDS and kind not in "biu"):
        wanted = {"b": "true/false", "i": "integers", "u": "integers"}.get(dtype.kind, "numbers")
        first = values.reshape(-1)[0] if values.size else None
        first = first.item() if isinstance(first, np.generic) else first
        raise RequestError(f"{where}: {datatype} data must be {wanted}; got values such as "
                           f"{_short(first)}")
    if dtype.kind in _INT_KINDS and kind in _INT_KINDS and values.size:
        info = np.iinfo(dtype)
        low, high = int(values.min()), int(values.max())
        if low < info.min or high > info.max:
            raise RequestError(f"{where}: value {low if low < info.min else high} is outside "
                               f"{datatype}'s range [{info.min}, {info.max}]")
    with np.errstate(over="ignore"):  # an overflow is refused just below, not warned about
        out = values.astype(dtype).reshape(shape)
    if dtype.kind == "f" and kind == "f" and not np.isfinite(out).all():
        raise RequestError(f"{where}: a value is too large for {datatype}")
    return out


#: checks a request's (name -> (datatype, shape)) against a model's inputs, before any
#: value is read; raises RequestError, or returns the checked feeds (the runtime's
#: ``CheckedFeeds``, values given by ``fill``), or None
Expect = Callable[[dict], Any]


@functools.cache
def _checked_request_type() -> type:
    """KServe's ``InferRequest`` with the feeds the model checked as it was read."""
    from kserve.protocol.infer_type import InferRequest

    class CheckedInferRequest(InferRequest):
        """An ``InferRequest`` whose inputs the model checked while it was decoded:
        ``checked_feeds`` holds them as the runtime's ``CheckedFeeds``, so that
        ``predict`` and the session run them without checking them again."""

        checked_feeds: Any = None
    return CheckedInferRequest


def decode_json(body: bytes, model_name: str, max_bytes: int, expect: Expect | None = None):
    """A JSON V2 infer request body as a KServe ``InferRequest``."""
    import orjson
    try:
        request = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise RequestError(f"request body: not JSON ({exc}; NaN and Infinity are not "
                           f"JSON numbers)") from None
    return request_from_fields(_object("request body", request, optional=False), model_name,
                               max_bytes, None, expect)


def decode_binary(body: bytes, header_length: str, model_name: str, max_bytes: int,
                  expect: Expect | None = None):
    """A binary-extension body: *header_length* bytes of JSON, then the tensors' bytes."""
    import orjson
    if not header_length.isdigit() or int(header_length) > len(body):
        raise RequestError(f"Inference-Header-Content-Length: {_short(header_length)} is not a "
                           f"byte count within the {len(body)}-byte body")
    length = int(header_length)
    try:
        header = orjson.loads(body[:length])
    except orjson.JSONDecodeError as exc:
        raise RequestError(f"request header (the first {length} bytes): not JSON ({exc})") from None
    return request_from_fields(_object("request header", header, optional=False), model_name,
                               max_bytes, (body, length), expect)


def _input_specs(inputs: Any, max_bytes: int) -> list[tuple[str, dict, str, list[int], dict | None]]:
    """(where, spec, datatype, shape, parameters) of each input, checked; no data read yet."""
    if not isinstance(inputs, list) or not inputs:
        raise RequestError(f"inputs: a non-empty list of input objects expected, "
                           f"got {_short(inputs)}")
    specs = []
    for i, spec in enumerate(inputs):
        where = f"inputs[{i}]"
        spec = _object(where, spec, optional=False)
        _name(f"{where}.name", spec.get("name"))
        datatype = check_datatype(f"{where}.datatype", spec.get("datatype"))
        shape = check_shape(f"{where}.shape", spec.get("shape"), _itemsize(datatype), max_bytes)
        specs.append((where, spec, datatype, shape, _object(f"{where}.parameters",
                                                            spec.get("parameters"))))
    return specs


def request_from_fields(request: dict, model_name: str, max_bytes: int,
                        binary: tuple[bytes, int] | None, expect: Expect | None = None):
    """The ``InferRequest`` of a parsed request object.  Every field is checked, then
    *expect* (the model's own check of names, datatypes and shapes), and only then
    are the values read, so a request the model refuses costs no conversion."""
    from kserve.protocol.infer_type import InferInput, InferRequest, RequestedOutput
    parameters = _object("parameters", request.get("parameters"))
    specs = _input_specs(request.get("inputs"), max_bytes)
    checked = None
    if expect is not None:
        given: dict = {}
        for where, spec, datatype, shape, _ in specs:
            if spec["name"] in given:
                raise RequestError(f"{where}.name: input {spec['name']!r} is given twice")
            given[spec["name"]] = (datatype, shape)
        checked = expect(given)
    offset = binary[1] if binary else 0
    tensors = []
    values = {}
    for where, spec, datatype, shape, params in specs:
        size = (params or {}).get("binary_data_size")
        data = json_values(f"{where}.data", spec["data"], datatype, shape) if "data" in spec else None
        tensor = InferInput(name=spec["name"], shape=shape, datatype=datatype, data=data,
                            parameters=params)
        if data is None and binary is not None and size is not None:
            if isinstance(size, bool) or not isinstance(size, int) or size < 0:
                raise RequestError(f"{where}.parameters.binary_data_size: a byte count "
                                   f"expected, got {_short(size)}")
            if offset + size > len(binary[0]):
                raise RequestError(f"{where}.parameters.binary_data_size: {size} bytes run past "
                                   f"the end of the request body")
            if datatype != "BYTES" and size != math.prod(shape) * _itemsize(datatype):
                raise RequestError(f"{where}: {size} bytes for shape {shape} of {datatype} "
                                   f"({math.prod(shape) * _itemsize(datatype)} expected)")
            raw = binary[0][offset:offset + size]
            hold_raw_input(tensor, raw)   # uncopied (KServe's own decoder copies it)
            if checked is not None and datatype != "BYTES":
                values[spec["name"]] = np.frombuffer(raw, numpy_dtype(datatype)).reshape(shape)
            offset += size
        elif data is None:
            raise RequestError(f"{where}.data: missing (or parameters.binary_data_size with "
                               f"the binary extension)")
        else:
            values[spec["name"]] = data
        tensors.append(tensor)
    if binary is not None and offset != len(binary[0]):
        raise RequestError(f"request body: {len(binary[0]) - offset} bytes after the last "
                           f"input's binary data")
    outputs = request.get("outputs")
    if outputs is not None:
        if not isinstance(outputs, list):
            raise RequestError(f"outputs: a list of output objects expected, got {_short(outputs)}")
        wanted = []
        for i, o in enumerate(outputs):
            o = _object(f"outputs[{i}]", o, optional=False)
            wanted.append(RequestedOutput(name=_name(f"outputs[{i}].name", o.get("name")),
                                          parameters=_object(f"outputs[{i}].parameters",
                                                             o.get("parameters"))))
        outputs = wanted
    request_id = request.get("id")
    if request_id is not None and not isinstance(request_id, str):
        raise RequestError(f"id: a string expected, got {_short(request_id)}")
    kind = InferRequest if checked is None else _checked_request_type()
    out = kind(model_name=model_name, request_id=request_id, parameters=parameters,
               infer_inputs=tensors, request_outputs=outputs)
    if checked is not None:
        out.checked_feeds = checked.fill(values)
    return out


def check_grpc_request(request: Any, max_bytes: int) -> None:
    """Refuse a gRPC ``ModelInferRequest`` by the same rules as REST, before KServe reads it."""
    raw = list(request.raw_input_contents)
    if raw and len(raw) != len(request.inputs):
        raise RequestError(f"raw_input_contents: {len(raw)} entries for {len(request.inputs)} "
                           f"inputs")
    if not request.inputs:
        raise RequestError("inputs: at least one input expected")
    for i, tensor in enumerate(request.inputs):
        where = f"inputs[{i}]"
        _name(f"{where}.name", tensor.name)
        datatype = check_datatype(f"{where}.datatype", tensor.datatype)
        shape = check_shape(f"{where}.shape", list(tensor.shape), _itemsize(datatype), max_bytes)
        if raw:
            want = math.prod(shape) * _itemsize(datatype)
            if datatype != "BYTES" and len(raw[i]) != want:
                raise RequestError(f"raw_input_contents[{i}]: {len(raw[i])} bytes for shape "
                                   f"{shape} of {datatype} ({want} expected)")
        elif not tensor.HasField("contents"):
            raise RequestError(f"{where}.contents: missing (or raw_input_contents)")
