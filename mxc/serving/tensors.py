"""Open Inference Protocol (KServe V2) tensors: datatypes, metadata, request checks.

The V2 protocol names element types (``FP32``, ``INT64``, ``BF16`` ...) where
the artifact's manifest names numpy dtypes; this module is the one table
between them.  A dimension an artifact leaves open (a dynamic batch) is ``-1``
in the metadata, as the protocol asks.  Requests are checked against the
model's inputs here -- names, datatypes, ranks and fixed dimensions -- so a
bad request gets a :class:`~mxc.serving.errors.RequestError` naming the input
and what was expected before it reaches the session.
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


def check_feeds(model: str, inputs: Iterable[Any], given: Mapping[str, tuple[str, list[int]]]) -> None:
    """Refuse a request whose inputs do not match the model's.

    *given* maps each requested input name to its V2 datatype and shape.  Every
    required input must be there once, with the model's datatype, rank and fixed
    dimensions; an input the model does not have is refused too.
    """
    infos = {t.name: t for t in inputs}
    unknown = sorted(set(given) - set(infos))
    if unknown:
        raise RequestError(f"model {model!r} has no input {unknown[0]!r}; its inputs are "
                           f"{sorted(infos)}")
    missing = sorted(set(infos) - set(given))
    if missing:
        raise RequestError(f"model {model!r}: input {missing[0]!r} is missing")
    for name, (datatype, shape) in given.items():
        info = infos[name]
        want = v2_datatype(info.dtype)
        if datatype != want:
            raise RequestError(f"model {model!r} input {name!r}: datatype {datatype} given, "
                               f"{want} expected")
        expected = v2_shape(info.shape)
        if len(shape) != len(expected) or any(e not in (-1, g) for e, g in zip(expected, shape)):
            raise RequestError(f"model {model!r} input {name!r}: shape {list(shape)} given, "
                               f"{expected} expected (-1: any size)")


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
