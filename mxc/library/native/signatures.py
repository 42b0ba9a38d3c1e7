"""The per-version signature tables of ``lib_api.h``'s flat C entry points, as data.

Two modules need these tables: :mod:`.abi` binds a library's entry points with
them, and :mod:`.guard` generates one C++ exception-catching shim per distinct
signature.  They live here, below both, so that neither has to import the
other (the guard used to import :mod:`.abi` inside a function to dodge the
cycle).  :mod:`.abi` re-exports every name, which stays the place users read
them from.  The differences between versions are described in :mod:`.abi`.
"""

from __future__ import annotations

from ctypes import CFUNCTYPE, POINTER, c_char_p, c_int, c_int64, c_size_t, c_uint, c_void_p
from dataclasses import dataclass
from typing import Any

__all__ = ["SUPPORTED_VERSIONS", "Signature", "SIGNATURES", "PASS_OUTPUT", "XPU_MALLOC",
           "SPARSE_MALLOC", "ND_MALLOC"]

#: lib_api versions this loader drives.
SUPPORTED_VERSIONS = (7, 8, 10, 11)

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
