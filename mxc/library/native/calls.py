"""The operator trampolines of lib_api, called with Python values.

Each function here calls one ``_opCall*`` entry point for an operator of a
:class:`~.handle.NativeLibrary`, converts its results back to Python
(shapes as tuples, dtype and storage-type names) and frees what the library
malloc'ed.  A hook that returns ``MX_FAIL`` becomes the library's
:class:`~mxc.errors.ExtensionError` (:meth:`NativeLibrary.fail`).
"""

from __future__ import annotations

import contextlib
import ctypes
from ctypes import POINTER, byref, c_char_p, c_int, c_uint, c_void_p
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import numpy as np

from ...errors import ExtensionError
from .abi import DTYPE_BY_FLAG, FLAG_BY_STYPE, STYPE_BY_FLAG, strings
from .guard import NativeException
from .handle import NativeLibrary
from .marshal import (NO_GPU_CALLBACK, SPARSE_CALLBACK, XPU_CALLBACK, CallScope, SparseOut,
                      dtype_flag, release, tensor_block)

__all__ = ["OpEntry", "parse_attrs", "infer_shape", "infer_type", "infer_storage_type",
           "mutate_inputs", "compute", "create_state", "stateful_compute", "destroy_state",
           "random_states"]

_NUM_CPU_RANDOM_STATES = 1024   # lib_api's MX_NUM_CPU_RANDOM_STATES
#: most inputs or outputs a library operator may declare (MXNet has no cap; a graph node
#: with millions of outputs is a broken library, not a model)
MAX_OP_ARITY = 1 << 12


@dataclass(eq=False)
class OpEntry:
    """What ``_opRegGet`` said about one operator (function pointers as ints; 0 = unset)."""

    lib: NativeLibrary
    name: str
    is_subgraph_op: bool
    forward: int = 0             # the "cpu" entries; mxc runs on the host
    backward: int = 0
    create_op: int = 0
    parse: int = 0
    infer_type: int = 0
    infer_stype: int = 0
    infer_shape: int = 0
    mutate: int = 0
    contexts: dict = field(default_factory=dict)   # kind -> [device names]
    _kv_cache: dict = field(default_factory=dict, repr=False)
    _rng: Any = field(default=None, repr=False)
    _rng_ptr: Any = field(default=None, repr=False)

    def kv(self, attrs: Mapping[str, str]):
        """``(keys, vals, n)`` ctypes arrays for *attrs* (cached per attribute set)."""
        key = tuple(attrs.items())
        hit = self._kv_cache.get(key)
        if hit is None:
            if len(self._kv_cache) > 256:
                self._kv_cache.clear()
            hit = (strings(list(attrs)), strings([str(v) for v in attrs.values()]), len(attrs))
            self._kv_cache[key] = hit
        return hit


def _check(entry: OpEntry, ok: int, hook: str, mx_hook: str, node) -> None:
    if not ok:
        raise entry.lib.fail(f"operator {entry.name!r} {hook}",
                             f"Error calling {mx_hook} for custom operator '{entry.name}'", node)


@contextlib.contextmanager
def _boundary(entry: OpEntry, hook: str, node):
    """Name the operator, hook and node in an exception the library threw."""
    try:
        yield
    except NativeException as exc:
        raise _thrown(entry, hook, node, exc) from exc


def parse_attrs(entry: OpEntry, attrs: Mapping[str, str], node=None) -> tuple[int, int]:
    """``(number of inputs, number of outputs)``, each within ``0..``:data:`MAX_OP_ARITY`
    (a library answering 2**24 outputs would otherwise stall graph building)."""
    keys, vals, n = entry.kv(attrs)
    nin, nout = c_int(0), c_int(0)
    with _boundary(entry, "parse_attrs", node):
        ok = entry.lib.abi._opCallParseAttrs(entry.parse, keys, vals, n, byref(nin), byref(nout))
    _check(entry, ok, "parse_attrs", "ParseAttrs", node)
    for what, count in (("inputs", nin.value), ("outputs", nout.value)):
        if not 0 <= count <= MAX_OP_ARITY:
            raise ExtensionError(f"extension library {entry.lib.name!r}: operator "
                                 f"{entry.name!r} parse_attrs answered {count} {what}; "
                                 f"expected 0 to {MAX_OP_ARITY}")
    return nin.value, nout.value


def infer_shape(entry: OpEntry, attrs: Mapping[str, str], in_shapes: Sequence[Sequence[int]],
                num_out: int, node=None) -> tuple[list, list]:
    """``(input shapes as the library left them, output shapes)``."""
    abi, lib = entry.lib.abi, entry.lib
    keys, vals, n = entry.kv(attrs)
    nin = len(in_shapes)
    rows = [(c_uint * max(len(s), 1))(*s) for s in in_shapes]
    shapes = (POINTER(c_uint) * max(nin, 1))(*[ctypes.cast(r, POINTER(c_uint)) for r in rows])
    dims = (c_int * max(nin, 1))(*[len(s) for s in in_shapes])
    mod_shapes, mod_dims = POINTER(POINTER(c_uint))(), POINTER(c_int)()
    out_shapes, out_dims = POINTER(POINTER(c_uint))(), POINTER(c_int)()
    with _boundary(entry, "infer_shape", node):
        ok = abi._opCallInferShape(entry.infer_shape, keys, vals, n, shapes, dims, nin,
                                   byref(mod_shapes), byref(mod_dims), byref(out_shapes),
                                   byref(out_dims), num_out)
    _check(entry, ok, "infer_shape", "InferShape", node)

    def take(ptrs, dimv, count):
        res = []
        for i in range(count):
            res.append(tuple(int(ptrs[i][j]) for j in range(dimv[i])))
            lib.free(ctypes.cast(ptrs[i], c_void_p))
        lib.free(ctypes.cast(ptrs, c_void_p))
        lib.free(ctypes.cast(dimv, c_void_p))
        return res

    return take(mod_shapes, mod_dims, nin), take(out_shapes, out_dims, num_out)


def _flags_call(entry, fn, fp, attrs, ins, num_out, hook, mx_hook, node):
    keys, vals, n = entry.kv(attrs)
    nin = len(ins)
    in_arr = (c_int * max(nin, 1))(*ins)
    out_arr = (c_int * max(num_out, 1))(*([-1] * num_out))
    with _boundary(entry, hook, node):
        ok = fn(fp, keys, vals, n, in_arr, nin, out_arr, num_out)
    _check(entry, ok, hook, mx_hook, node)
    return list(in_arr[:nin]), list(out_arr[:num_out])


def infer_type(entry: OpEntry, attrs: Mapping[str, str], in_types: Sequence[str],
               num_out: int, node=None) -> tuple[list, list]:
    """Dtype names in and out (None where the library left -1)."""
    ins, outs = _flags_call(entry, entry.lib.abi._opCallInferType, entry.infer_type, attrs,
                            [dtype_flag(t) for t in in_types], num_out, "infer_type",
                            "InferType", node)
    return (_dtype_names(entry, ins, "input", node), _dtype_names(entry, outs, "output", node))


def _dtype_names(entry: OpEntry, flags: Sequence[int], role: str, node) -> list:
    """MXNet dtype codes as names; -1 (left unset) and lib_api's ``kUNSET`` (100) are None,
    any other code an error."""
    names = []
    for i, flag in enumerate(flags):
        if flag not in (-1, 100) and flag not in DTYPE_BY_FLAG:
            where = f" on node {getattr(node, 'name', node)!r}" if node is not None else ""
            raise ExtensionError(f"extension library {entry.lib.name!r}: operator "
                                 f"{entry.name!r} infer_type{where} answered dtype code {flag} "
                                 f"for {role} {i}; expected one of MXNet's codes "
                                 f"{sorted(DTYPE_BY_FLAG)}, -1 or 100 (unset)")
        names.append(DTYPE_BY_FLAG.get(flag))
    return names


def infer_storage_type(entry: OpEntry, attrs: Mapping[str, str], in_stypes: Sequence[str],
                       num_out: int, node=None) -> tuple[list, list]:
    ins, outs = _flags_call(entry, entry.lib.abi._opCallInferSType, entry.infer_stype, attrs,
                            [FLAG_BY_STYPE[s] for s in in_stypes], num_out,
                            "infer_storage_type", "InferSType", node)
    return ([STYPE_BY_FLAG.get(f, "default") for f in ins],
            [STYPE_BY_FLAG.get(f, "default") for f in outs])


def mutate_inputs(entry: OpEntry, attrs: Mapping[str, str], node=None) -> list[int]:
    keys, vals, n = entry.kv(attrs)
    idx, size = POINTER(c_int)(), c_int(0)
    with _boundary(entry, "mutate_inputs", node):
        ok = entry.lib.abi._opCallMutateInputs(entry.mutate, keys, vals, n, byref(idx),
                                               byref(size))
    _check(entry, ok, "mutate_inputs", "MutateInputs", node)
    out = [int(idx[i]) for i in range(size.value)]
    entry.lib.free(ctypes.cast(idx, c_void_p))
    return out


def random_states(entry: OpEntry, seed: int = 0):
    """The operator's CPU random states: MXNet's array of ``std::mt19937``.

    libstdc++ lays an ``std::mt19937`` out as 624 ``unsigned long`` words and
    the position; each state here is seeded ``seed + i`` the standard way
    (``x[k] = 1812433253 * (x[k-1] ^ (x[k-1] >> 30)) + k``).  Created on the
    operator's first call and kept (MXNet: a per-operator resource).
    """
    if entry._rng is None:
        n = _NUM_CPU_RANDOM_STATES
        words = np.empty((n, 625), dtype=np.uint64)
        x = (np.arange(n, dtype=np.uint64) + np.uint64(seed)) & np.uint64(0xFFFFFFFF)
        words[:, 0] = x
        for k in range(1, 624):
            x = (np.uint64(1812433253) * (x ^ (x >> np.uint64(30))) + np.uint64(k)) \
                & np.uint64(0xFFFFFFFF)
            words[:, k] = x
        words[:, 624] = 624
        entry._rng = words
        entry._rng_ptr = c_void_p(words.ctypes.data)
    return entry._rng.ctypes.data


def _run(entry: OpEntry, fn, head: tuple, inputs, outputs):
    """``fn(*head, <inputs>, <outputs>, <resources>)``; returns ``(status, outputs)`` with
    sparse output slots filled.  All-dense calls reuse pooled argument blocks."""
    keep: list = []
    sparse = False
    for o in outputs:
        if type(o) is not np.ndarray:
            sparse = sparse or isinstance(o, SparseOut)
    slots = [o if isinstance(o, SparseOut) else None for o in outputs] if sparse else ()
    scope = CallScope(slots).__enter__()
    try:
        ins, in_sp = tensor_block(inputs, keep)
        outs, out_sp = tensor_block(outputs, keep)
        key = scope.handle
        ok = fn(*head, *ins, *outs, XPU_CALLBACK, key, NO_GPU_CALLBACK, None, None,
                SPARSE_CALLBACK, key, in_sp[0], out_sp[0], in_sp[1], out_sp[1], in_sp[2],
                out_sp[2], in_sp[3], out_sp[3], in_sp[4], out_sp[4],
                entry._rng_ptr or c_void_p(random_states(entry)), None)
    finally:
        scope.__exit__()
        release(keep)
    if sparse:
        outputs = [o.finish() if isinstance(o, SparseOut) else o for o in outputs]
    return ok, outputs


def _thrown(entry: OpEntry, hook: str, node, exc: NativeException) -> ExtensionError:
    name = node if isinstance(node, str) or node is None else getattr(node, "name", None)
    where = f" on node {name!r}" if name else ""
    err = ExtensionError(f"extension library {entry.lib.name!r}: operator {entry.name!r} "
                         f"{hook} failed{where}: {str(exc).split(': ', 1)[1]}")
    err.extension, err.function, err.node = entry.lib.name, f"operator {entry.name!r} {hook}", name
    err.messages, err.original = [], exc
    return err


def compute(entry: OpEntry, fp: int, attrs: Mapping[str, str], inputs: Sequence, outputs: Sequence,
            node=None, backward: bool = False) -> list:
    """Run a forward/backward ``fcomp``; dense outputs are written in place."""
    keys, vals, n = entry.kv(attrs)
    try:
        ok, outs = _run(entry, entry.lib.abi._opCallFCompute, (fp, keys, vals, n), inputs,
                        outputs)
    except NativeException as exc:
        raise _thrown(entry, "backward" if backward else "forward", node, exc) from exc
    if not ok:
        _check(entry, ok, "backward" if backward else "forward", "FCompute", node)
    return outs


def create_state(entry: OpEntry, attrs: Mapping[str, str], in_shapes: Sequence, in_types: Sequence,
                 node=None) -> int:
    """``createOpState``: an opaque pointer to the library's ``CustomStatefulOp``."""
    abi = entry.lib.abi
    keys, vals, n = entry.kv(attrs)
    state = c_void_p()
    with _boundary(entry, "create_op_state", node):
        if abi.version >= 10:  # v10+: the device and the input shapes/types too
            nin = len(in_shapes)
            rows = [(c_uint * max(len(s), 1))(*s) for s in in_shapes]
            shapes = (POINTER(c_uint) * max(nin, 1))(
                *[ctypes.cast(r, POINTER(c_uint)) for r in rows])
            dims = (c_int * max(nin, 1))(*[len(s) for s in in_shapes])
            types = (c_int * max(nin, 1))(*[dtype_flag(t) for t in in_types])
            ok = abi._opCallCreateOpState(entry.create_op, keys, vals, n, c_char_p(b"cpu"), 0,
                                          shapes, dims, nin, types, byref(state))
        else:
            ok = abi._opCallCreateOpState(entry.create_op, keys, vals, n, byref(state))
    _check(entry, ok, "create_op_state", "CreateOpState", node)
    return state.value or 0


def stateful_compute(entry: OpEntry, state: int, is_forward: bool, inputs: Sequence,
                     outputs: Sequence, node=None) -> list:
    try:
        ok, outs = _run(entry, entry.lib.abi._opCallFStatefulCompute,
                        (1 if is_forward else 0, c_void_p(state)), inputs, outputs)
    except NativeException as exc:
        raise _thrown(entry, "forward" if is_forward else "backward", node, exc) from exc
    _check(entry, ok, "forward" if is_forward else "backward", "FStatefulCompute", node)
    return outs


def destroy_state(lib: NativeLibrary, state: int) -> None:
    """Delete the library's state object (lib_api v11+; older ABIs leak it, as MXNet does)."""
    if state and lib.abi.has_destroy:
        lib.abi._opCallDestroyOpState(c_void_p(state))
