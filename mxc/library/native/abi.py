"""The flat C ABI of MXNet's ``lib_api.h``, one signature table per version.

An extension library built against ``include/mxnet/lib_api.h`` exports plain C
trampolines (``_opCallFCompute``, ``_partCallSupportedOps``, ...) that rebuild
the C++ objects (``MXTensor``, ``Graph``, ``std::unordered_map``) inside the
library from arrays, C strings, integers and callbacks.  This module declares
those trampolines for :mod:`ctypes` so the rest of the package never has to
know a C++ layout.

The signatures changed over the ABI's life; the table :data:`SIGNATURES`
holds the differences, keyed by ``MX_LIBRARY_VERSION`` (what ``_opVersion``
returns):

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
from ctypes import (CFUNCTYPE, POINTER, c_char_p, c_int, c_int64, c_size_t, c_uint, c_void_p)
from dataclasses import dataclass
from typing import Any

from ...errors import ExtensionError
from .guard import guarded

__all__ = ["SUPPORTED_VERSIONS", "MXNET_VERSION", "Abi", "Signature", "SIGNATURES",
           "XPU_MALLOC", "SPARSE_MALLOC", "ND_MALLOC", "DTYPE_BY_FLAG", "FLAG_BY_DTYPE",
           "STYPE_BY_FLAG", "FLAG_BY_STYPE", "strings", "read_messages"]

#: The MXNet version passed to ``initialize`` (1.9.1, the newest ABI we speak).
MXNET_VERSION = 10901

#: lib_api versions this loader drives.
SUPPORTED_VERSIONS = (7, 8, 10, 11)

#: MXNet's ``MXDType`` codes.
DTYPE_BY_FLAG = {0: "float32", 1: "float64", 2: "float16", 3: "uint8", 4: "int32",
                 5: "int8", 6: "int64"}
FLAG_BY_DTYPE = {v: k for k, v in DTYPE_BY_FLAG.items()}
#: MXNet's ``MXStorageType`` codes.
STYPE_BY_FLAG = {0: "default", 1: "row_sparse", 2: "csr"}
FLAG_BY_STYPE = {v: k for k, v in STYPE_BY_FLAG.items()}

c_char_pp = POINTER(c_char_p)
c_int_p = POINTER(c_int)

#: ``void* (*)(void* alloc, int size)``: the workspace allocator of forward/backward.
XPU_MALLOC = CFUNCTYPE(c_void_p, c_void_p, c_int)
#: ``void (*)(void* alloc, int index, int indices_len, int indptr_len, void** data,
#: int64_t** indices, int64_t** indptr)``: allocates a sparse output.
SPARSE_MALLOC = CFUNCTYPE(None, c_void_p, c_int, c_int, c_int, POINTER(c_void_p),
                          POINTER(POINTER(c_int64)), POINTER(POINTER(c_int64)))
#: ``void (*)(const void* alloc, const int64_t* shape, int ndim, const char* dev, int dev_id,
#: int dtype, const char* name, int is_arg, void** data)``: a graph pass's alloc_arg/aux.
ND_MALLOC = CFUNCTYPE(None, c_void_p, POINTER(c_int64), c_int, c_char_p, c_int, c_int,
                      c_char_p, c_int, POINTER(c_void_p))

_P = c_void_p  # any function pointer of the library, passed back opaque

_TENSORS = [POINTER(POINTER(c_int64)), c_int_p, POINTER(c_void_p), c_int_p,
            POINTER(c_size_t), c_char_pp, c_int_p, c_int]           # shapes..num
_COMPUTE_TAIL = [XPU_MALLOC, c_void_p, XPU_MALLOC, c_void_p, c_void_p,
                 SPARSE_MALLOC, c_void_p, c_int_p, c_int_p,
                 POINTER(c_void_p), POINTER(c_void_p), POINTER(c_void_p), POINTER(c_void_p),
                 POINTER(c_int64), POINTER(c_int64), POINTER(c_int64), POINTER(c_int64),
                 c_void_p, c_void_p]
_PARAMS = [c_char_pp, c_int, POINTER(c_void_p), POINTER(POINTER(c_int64)), c_int_p,
           c_int_p, POINTER(c_size_t), c_char_pp, c_int_p]          # names..dev_ids


@dataclass(frozen=True)
class Signature:
    """``restype`` and ``argtypes`` of one entry point."""

    restype: Any
    argtypes: tuple


def _sig(restype, *argtypes) -> Signature:
    return Signature(restype, tuple(argtypes))


_COMMON: dict[str, Signature] = {
    "initialize": _sig(c_int, c_int),
    "_opVersion": _sig(c_int),
    "_opRegSize": _sig(c_int),
    "_opRegGet": _sig(None, c_int, c_char_pp, c_int_p,
                      POINTER(c_char_pp), POINTER(POINTER(_P)), c_int_p,
                      POINTER(c_char_pp), POINTER(POINTER(_P)), c_int_p,
                      POINTER(c_char_pp), POINTER(POINTER(_P)), c_int_p,
                      POINTER(_P), POINTER(_P), POINTER(_P), POINTER(_P), POINTER(_P)),
    "_opCallFree": _sig(None, c_void_p),
    "_opCallParseAttrs": _sig(c_int, _P, c_char_pp, c_char_pp, c_int, c_int_p, c_int_p),
    "_opCallInferShape": _sig(c_int, _P, c_char_pp, c_char_pp, c_int,
                              POINTER(POINTER(c_uint)), c_int_p, c_int,
                              POINTER(POINTER(POINTER(c_uint))), POINTER(c_int_p),
                              POINTER(POINTER(POINTER(c_uint))), POINTER(c_int_p), c_int),
    "_opCallInferType": _sig(c_int, _P, c_char_pp, c_char_pp, c_int, c_int_p, c_int, c_int_p,
                             c_int),
    "_opCallInferSType": _sig(c_int, _P, c_char_pp, c_char_pp, c_int, c_int_p, c_int, c_int_p,
                              c_int),
    "_opCallFCompute": _sig(c_int, _P, c_char_pp, c_char_pp, c_int,
                            *_TENSORS, *_TENSORS, *_COMPUTE_TAIL),
    "_opCallMutateInputs": _sig(c_int, _P, c_char_pp, c_char_pp, c_int, POINTER(c_int_p),
                                c_int_p),
    "_opCallFStatefulCompute": _sig(c_int, c_int, c_void_p, *_TENSORS, *_TENSORS,
                                    *_COMPUTE_TAIL),
    "_partRegSize": _sig(c_int),
    "_partRegGetCount": _sig(c_int, c_int, c_char_pp),
    "_partRegGet": _sig(None, c_int, c_int, c_char_pp, POINTER(_P), POINTER(_P), POINTER(_P),
                        c_char_pp),
    "_partCallSupportedOps": _sig(c_int, _P, c_char_p, c_int, c_int_p, c_char_pp, c_char_pp,
                                  c_int),
    "_partCallCreateSelector": _sig(c_int, _P, c_char_p, POINTER(c_void_p), c_char_pp,
                                    c_char_pp, c_int),
    "_partCallSelect": _sig(None, c_void_p, c_int, c_int_p),
    "_partCallSelectInput": _sig(None, c_void_p, c_int, c_int, c_int_p),
    "_partCallSelectOutput": _sig(None, c_void_p, c_int, c_int, c_int_p),
    "_partCallFilter": _sig(None, c_void_p, c_int_p, c_int, POINTER(c_int_p), c_int_p),
    "_partCallReset": _sig(None, c_void_p),
    "_partCallReviewSubgraph": _sig(c_int, _P, c_char_p, c_int, c_int_p, c_char_pp, c_char_pp,
                                    c_int, POINTER(c_char_pp), POINTER(c_char_pp), c_int_p,
                                    *_PARAMS, *_PARAMS),
    "_passRegSize": _sig(c_int),
    "_passRegGet": _sig(None, c_int, POINTER(_P), c_char_pp),
    "_passCallGraphPass": _sig(c_int, _P, c_char_p, POINTER(c_void_p), c_char_pp, c_char_pp,
                               c_int, c_char_p, *_PARAMS, *_PARAMS, ND_MALLOC, c_void_p),
}

_CREATE_V7 = _sig(c_int, _P, c_char_pp, c_char_pp, c_int, POINTER(c_void_p))
_CREATE_V10 = _sig(c_int, _P, c_char_pp, c_char_pp, c_int, c_char_p, c_int,
                   POINTER(POINTER(c_uint)), c_int_p, c_int, c_int_p, POINTER(c_void_p))
_MSG = {"_msgSize": _sig(c_int), "_msgGet": _sig(None, c_int, c_char_pp)}

#: Entry point name -> signature, per lib_api version.
SIGNATURES: dict[int, dict[str, Signature]] = {
    7: {**_COMMON, "_opCallCreateOpState": _CREATE_V7},
    8: {**_COMMON, "_opCallCreateOpState": _CREATE_V7, **_MSG},
    10: {**_COMMON, "_opCallCreateOpState": _CREATE_V10, **_MSG},
    11: {**_COMMON, "_opCallCreateOpState": _CREATE_V10, **_MSG,
         "_opCallDestroyOpState": _sig(None, c_void_p)},
}

#: How ``_passCallGraphPass`` hands its output string over, per version:
#: ``"malloc-unterminated"`` (v7: a malloc'ed copy without the NUL; free it),
#: ``"leaked"`` (v8: a ``new std::string``'s buffer; never free it),
#: ``"malloc"`` (v10+: a malloc'ed C string; free it with ``_opCallFree``).
PASS_OUTPUT = {7: "malloc-unterminated", 8: "leaked", 10: "malloc", 11: "malloc"}


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
