"""bfloat16 arrays where they leave numpy's own dtypes: ``.npz`` files and DLPack.

numpy has no bfloat16; ``ml_dtypes`` adds one, but only to numpy's dtype
registry (imported on first use here, so the runtime does not load it for
float models).  Two of numpy's exits do not know it:

* ``np.savez`` writes a bfloat16 array as an opaque two-byte void (``|V2``)
  that reads back as bytes.  mxc stores such arrays as their uint16 bits and
  lists their names in the member :data:`BF16_KEYS` (the artifact's
  ``params.npz``, the outputs of ``mxc run -o``); an ``.npz`` written by a user
  with ``np.savez`` holds ``|V2`` arrays, which :func:`restore_bfloat16` reads
  as bfloat16 (the one two-byte extension float ``ml_dtypes`` has).
* numpy's DLPack export and import refuse it, so a bfloat16 array is copied
  into and out of a TVM tensor by bytes instead (:mod:`mxc.runtime._tvm`).
"""

from __future__ import annotations

import io
import logging
from collections.abc import Mapping

import numpy as np

log = logging.getLogger(__name__)

#: npz member listing the arrays stored as the uint16 bits of bfloat16
BF16_KEYS = "__mxc_bfloat16__"


def bfloat16() -> np.dtype:
    import ml_dtypes
    return np.dtype(ml_dtypes.bfloat16)


def numpy_dtype(name: str) -> np.dtype:
    """``np.dtype(name)``, with ``"bfloat16"`` understood (ml_dtypes' type)."""
    return bfloat16() if str(name) == "bfloat16" else np.dtype(name)


def is_bfloat16(dtype) -> bool:
    """*dtype* (a numpy dtype, a TVM dtype or a name) is bfloat16."""
    return (dtype.name if isinstance(dtype, np.dtype) else str(dtype)) == "bfloat16"


def restore_bfloat16(arr: np.ndarray, what: str) -> np.ndarray:
    """*arr* viewed as bfloat16 when numpy wrote it as the opaque ``|V2`` of a bfloat16
    array (a two-byte void without fields); any other array unchanged."""
    if arr.dtype.kind == "V" and arr.dtype.itemsize == 2 and arr.dtype.names is None:
        log.debug("%s: reading the two-byte void array as bfloat16", what)
        return arr.view(bfloat16())
    return arr


def npz_bytes(arrays: Mapping[str, np.ndarray]) -> bytes:
    """An uncompressed ``.npz`` of *arrays*, bfloat16 ones as their bits (see above)."""
    buf = io.BytesIO()
    plain: dict[str, np.ndarray] = {}
    bf16: list[str] = []
    for k, v in arrays.items():
        v = np.ascontiguousarray(v)
        if is_bfloat16(v.dtype):
            bf16.append(k)
            v = v.view(np.uint16)
        plain[k] = v
    if bf16:
        plain[BF16_KEYS] = np.array(bf16)
    np.savez(buf, **plain)
    return buf.getvalue()


def npz_arrays(npz, what: str = "npz") -> dict[str, np.ndarray]:
    """The arrays of an open ``.npz``: those listed in :data:`BF16_KEYS` restored from their
    bits, ``|V2`` ones read as bfloat16."""
    arrays = {k: restore_bfloat16(npz[k], f"{what}: {k}") for k in npz.files if k != BF16_KEYS}
    if BF16_KEYS in npz.files:
        for k in npz[BF16_KEYS].tolist():
            arrays[k] = arrays[k].view(bfloat16())
    return arrays
