"""The flat C ABI of MXNet's ``lib_api.h``, one signature table per version.

An extension library built against ``include/mxnet/lib_api.h`` exports plain C
trampolines (``_opCallFCompute``, ``_partCallSupportedOps``, ...) that rebuild
the C++ objects (``MXTensor``, ``Graph``, ``std::unordered_map``) inside the
library from arrays, C strings, integers and callbacks.  This module declares
those trampolines for :mod:`ctypes` so the rest of the package never has to
know a C++ layout.

The signatures changed over the ABI's life; the table :data:`SIGNATURES`
(kept in :mod:`.signatures`, which the exception guard reads too) holds the
differences, keyed by ``MX_LIBRARY_VERSION`` (what ``_opVersion`` returns):

=======  ==================================================================
version  difference
=======  ==================================================================
7        MXNet 1.7: no ``_msgSize``/``_msgGet`` (errors are printed, not
         collected); a graph pass returns a malloc'ed, *unterminated* copy
8        adds ``_msgSize``/``_msgGet``; a pass returns a leaked
         ``std::string``'s buffer (never freed by the caller)
10       MXNet 1.8: ``_opCallCreateOpState`` also takes the device and the
         input shapes/types; a pass returns a malloc'ed C string
11       MXNet 1.9: adds ``_opCallDestroyOpState``
=======  ==================================================================
"""

from __future__ import annotations

import ctypes
from ctypes import c_char_p
from typing import Any

from ...errors import ExtensionError
from .guard import guarded
from .signatures import (ND_MALLOC, PASS_OUTPUT, SIGNATURES, SPARSE_MALLOC,  # noqa: F401
                         SUPPORTED_VERSIONS, XPU_MALLOC, Signature)

__all__ = ["SUPPORTED_VERSIONS", "MXNET_VERSION", "Abi", "Signature", "SIGNATURES",
           "XPU_MALLOC", "SPARSE_MALLOC", "ND_MALLOC", "DTYPE_BY_FLAG", "FLAG_BY_DTYPE",
           "STYPE_BY_FLAG", "FLAG_BY_STYPE", "strings", "read_messages"]

#: The MXNet version passed to ``initialize`` (1.9.1, the newest ABI we speak).
MXNET_VERSION = 10901

#: MXNet's ``MXDType`` codes.
DTYPE_BY_FLAG = {0: "float32", 1: "float64", 2: "float16", 3: "uint8", 4: "int32",
                 5: "int8", 6: "int64"}
FLAG_BY_DTYPE = {v: k for k, v in DTYPE_BY_FLAG.items()}
#: MXNet's ``MXStorageType`` codes.
STYPE_BY_FLAG = {0: "default", 1: "row_sparse", 2: "csr"}
FLAG_BY_STYPE = {v: k for k, v in STYPE_BY_FLAG.items()}


class Abi:
    """The entry points of one library, typed for its lib_api version.

    Attribute access returns the bound ``ctypes`` function
    (``abi._opCallFCompute(...)``).  Missing optional entry points are None.
    """

    def __init__(self, cdll: ctypes.CDLL, version: int, where: str):
        if version not in SIGNATURES:
            raise ExtensionError(
                f"{where}: lib_api version {version} is not supported (this loader speaks "
                f"versions {', '.join(map(str, SUPPORTED_VERSIONS))}: MXNet 1.7, the 1.x "
                f"branch's version 8, 1.8 and 1.9)")
        self.version = version
        self.pass_output = PASS_OUTPUT[version]
        missing = []
        for name, sig in SIGNATURES[version].items():
            try:
                fn = getattr(cdll, name)
            except AttributeError:
                missing.append(name)
                continue
            fn.restype = sig.restype
            fn.argtypes = list(sig.argtypes)
            setattr(self, name, guarded(name, fn, sig.restype, sig.argtypes, where))
        if missing:
            raise ExtensionError(
                f"{where}: the library does not export {', '.join(missing)} required by "
                f"lib_api version {version}; was it built against MXNet's lib_api.h?")

    @property
    def has_messages(self) -> bool:
        return self.version >= 8

    @property
    def has_destroy(self) -> bool:
        return self.version >= 11


def strings(values) -> Any:
    """A ``const char**`` holding *values* (encoded UTF-8); keep the result alive."""
    arr = (c_char_p * max(len(values), 1))()
    for i, v in enumerate(values):
        arr[i] = v.encode("utf-8") if isinstance(v, str) else v
    return arr


def read_messages(abi: Abi) -> list[str]:
    """Every message the library collected with ``MX_ERROR_MSG`` (v8+; [] at v7).

    The list inside the library is never cleared, so, as in MXNet, the n-th
    failure reports every earlier message too.
    """
    if not abi.has_messages:
        return []
    out = []
    for i in range(abi._msgSize()):
        text = c_char_p()
        abi._msgGet(i, ctypes.byref(text))
        out.append((text.value or b"").decode("utf-8", "replace"))
    return out
