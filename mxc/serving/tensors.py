"""Open Inference Protocol (KServe V2) tensors: datatypes, metadata, request checks.

The V2 protocol names element types (``FP32``, ``INT64``, ``BF16`` ...) where
the artifact's manifest names numpy dtypes; this module is the one table
between them.  A dimension an artifact leaves open (a dynamic batch) is ``-1``
in the metadata, as the protocol asks.  Requests are checked against the
model's inputs once, by the session itself (:func:`check_request`: the
runtime owns the check, this module only words its refusals in V2 terms), so
a bad request gets a :class:`~mxc.serving.errors.RequestError` naming the
input and what was expected before any of its values is read.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

import numpy as np

from .errors import RequestError

#: numpy dtype name -> V2 datatype
V2_DATATYPES: dict[str, str] = {
    "bool": "BOOL", "uint8": "UINT8", "uint16": "UINT16", "uint32": "UINT32", "uint64": "UINT64",
    "int8": "INT8", "int16": "INT16", "int32": "INT32", "int64": "INT64",
    "float16": "FP16", "float32": "FP32", "float64": "FP64", "bfloat16": "BF16",
}
#: V2 datatype -> numpy dtype name
NUMPY_DTYPES: dict[str, str] = {v: k for k, v in V2_DATATYPES.items()}


def v2_datatype(dtype: Any) -> str:
    """The V2 datatype of a numpy dtype (or its name); ``BYTES`` for anything else."""
    return V2_DATATYPES.get(str(np.dtype(dtype)) if not isinstance(dtype, str) else dtype, "BYTES")


def numpy_dtype(datatype: str) -> np.dtype:
    """The numpy dtype of a V2 datatype (``BF16`` is ml_dtypes' ``bfloat16``)."""
    if datatype == "BF16":
        import ml_dtypes
        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(NUMPY_DTYPES[datatype])


def v2_shape(shape: Iterable[Any]) -> list[int]:
    """A shape for the V2 metadata: a dimension that is not a fixed size becomes ``-1``."""
    return [d if isinstance(d, int) and d >= 0 else -1 for d in shape]


def tensor_metadata(infos: Iterable[Any]) -> list[dict]:
    """``[{"name", "datatype", "shape"}]`` of a session's ``inputs`` or ``outputs``."""
    return [{"name": t.name, "datatype": v2_datatype(t.dtype), "shape": v2_shape(t.shape)}
            for t in infos]


def check_request(model: str, session: Any, given: Mapping[str, tuple[str, list[int]]]):
    """The one check of a request's inputs: *given* maps each input name to its V2
    datatype and shape (values not read yet); *session* checks them as
    :class:`~mxc.runtime.feeds.Declared` tensors (:meth:`mxc.runtime.Session.check_feeds`),
    and its refusal is reworded here in the protocol's terms (``FP32``, ``-1``) as a
    :class:`RequestError` naming the input.  Returns the session's
    :class:`~mxc.runtime.feeds.CheckedFeeds`, whose ``fill(values)`` takes the values."""
    from ..runtime.feeds import Declared, FeedError
    declared = {name: Declared(tuple(shape), numpy_dtype(datatype) if datatype in NUMPY_DTYPES
                               else np.dtype(object))
                for name, (datatype, shape) in given.items()}
    try:
        return session.check_feeds(declared)
    except FeedError as exc:
        raise _refusal(model, session.inputs, given, exc) from None


def _refusal(model: str, inputs: Iterable[Any], given: Mapping[str, tuple[str, list[int]]],
             exc: Any) -> RequestError:
    """The runtime's refusal *exc* (a ``FeedError``) as the V2 protocol words it."""
    infos = {t.name: t for t in inputs}
    name = min(exc.names) if exc.names else None
    if exc.reason == "unknown":
        return RequestError(f"model {model!r} has no input {name!r}; its inputs are "
                            f"{sorted(infos)}")
    if exc.reason == "missing":
        return RequestError(f"model {model!r}: input {name!r} is missing")
    if exc.reason in ("dtype", "shape") and name in infos and name in given:
        datatype, shape = given[name]
        if exc.reason == "dtype":
            return RequestError(f"model {model!r} input {name!r}: datatype {datatype} given, "
                                f"{v2_datatype(infos[name].dtype)} expected")
        return RequestError(f"model {model!r} input {name!r}: shape {list(shape)} given, "
                            f"{v2_shape(infos[name].shape)} expected (-1: any size)")
    return RequestError(f"model {model!r}: {exc}")


def as_array(name: str, datatype: str, shape: list[int], decode) -> np.ndarray:
    """The request tensor as a numpy array of its shape; a payload that does not
    decode or hold that many elements is a :class:`RequestError` naming the input."""
    try:
        array = np.asarray(decode())
        if datatype in NUMPY_DTYPES and array.dtype != numpy_dtype(datatype):
            array = array.astype(numpy_dtype(datatype))
        # binary payloads decode as read-only views of the request body: the
        # runtime stages those itself (one copy, where it would copy anyway)
        return array.reshape(shape)
    except (ValueError, TypeError, KeyError, IndexError, OverflowError) as exc:
        raise RequestError(f"input {name!r}: the {datatype} payload does not hold a tensor of "
                           f"shape {list(shape)}: {exc}") from None


#: numpy kinds whose ``tolist()`` gives the JSON values KServe's per-element encoder gives
_JSON_KINDS = frozenset("biuf")


def output_tensor(name: str, value: np.ndarray, binary: bool):
    """A KServe ``InferOutput`` of *value*: its bytes for a binary response, else a flat
    list for JSON.  ``InferOutput.set_data_from_numpy(binary_data=False)`` builds that
    list one ``item()`` per element (1,000 Python calls for a classifier's output);
    ``tolist()`` gives the same values in one call.  BF16 and strings go through KServe."""
    from kserve.protocol.infer_type import InferOutput
    datatype = v2_datatype(value.dtype)
    if not binary and value.dtype.kind in _JSON_KINDS and datatype in NUMPY_DTYPES \
            and datatype != "BF16":
        return InferOutput(name=name, shape=list(value.shape), datatype=datatype,
                           data=value.reshape(-1).tolist())
    out = InferOutput(name=name, shape=list(value.shape), datatype=datatype)
    out.set_data_from_numpy(value, binary_data=binary)
    return out
