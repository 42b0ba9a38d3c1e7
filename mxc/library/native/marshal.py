"""Arrays across the lib_api boundary: flat ctypes arguments and the allocator callbacks.

``_opCallFCompute`` and ``_opCallFStatefulCompute`` take every tensor as
parallel flat arrays (shapes, ndims, data pointers, dtype codes, version ids,
devices, storage types, sparse index buffers).  :func:`tensor_block` builds
them from numpy arrays and :mod:`.sparse` containers without copying
contiguous arrays (the library reads and writes the numpy buffers in place).

The library allocates scratch memory (``OpResource::alloc_cpu``) and sparse
outputs (``alloc_sparse``) through callbacks MXNet passes in.  Here a
:class:`CallScope` owns what one call allocated: workspace buffers live until
the call returns, sparse outputs are handed to the caller.
"""

from __future__ import annotations

import ctypes
import itertools
from ctypes import POINTER, c_char_p, c_int, c_int64, c_size_t, c_void_p
from typing import Any, Sequence

import numpy as np

from ...errors import ExtensionError
from .abi import DTYPE_BY_FLAG, FLAG_BY_DTYPE, FLAG_BY_STYPE, SPARSE_MALLOC, XPU_MALLOC
from .sparse import CSRArray, RowSparseArray

__all__ = ["CallScope", "tensor_block", "release", "dtype_flag", "as_contiguous", "XPU_CALLBACK",
           "SPARSE_CALLBACK", "NO_GPU_CALLBACK", "SparseOut"]

_CPU = b"cpu"
_SCOPES: dict[int, "CallScope"] = {}
_IDS = itertools.count(1)


_FLAG_BY_NP = {np.dtype(k): v for k, v in FLAG_BY_DTYPE.items()}


def dtype_flag(dtype: Any) -> int:
    flag = _FLAG_BY_NP.get(dtype) if isinstance(dtype, np.dtype) else None
    if flag is not None:
        return flag
    name = np.dtype(dtype).name
    try:
        return FLAG_BY_DTYPE[name]
    except KeyError:
        raise ExtensionError(f"dtype {name} cannot cross the lib_api boundary (MXNet "
                             f"extension types: {', '.join(FLAG_BY_DTYPE)})") from None


def as_contiguous(x: np.ndarray) -> np.ndarray:
    """*x* itself when C-contiguous and aligned (zero copy), else a contiguous copy."""
    return x if x.flags.c_contiguous and x.flags.aligned else np.ascontiguousarray(x)


class SparseOut:
    """A sparse output slot the library fills through the sparse allocator."""

    def __init__(self, stype: str, shape: Sequence[int], dtype: Any):
        self.stype = stype
        self.shape = tuple(int(d) for d in shape)
        self.dtype = np.dtype(dtype)
        self.result: CSRArray | RowSparseArray | None = None
        self._buffers: tuple = ()

    def allocate(self, indices_len: int, indptr_len: int) -> tuple[int, int, int]:
        if self.stype == "csr":
            data = np.zeros(indices_len, self.dtype)
            indptr = np.zeros(max(indptr_len, 0), np.int64)
        else:
            data = np.zeros((indices_len,) + self.shape[1:], self.dtype)
            indptr = np.zeros(0, np.int64)
        indices = np.zeros(indices_len, np.int64)
        self._buffers = (data, indices, indptr)
        return data.ctypes.data, indices.ctypes.data, indptr.ctypes.data

    def finish(self):
        """The filled array (an empty one if the library allocated nothing)."""
        if not self._buffers:
            self.allocate(0, self.shape[0] + 1 if self.stype == "csr" else 0)
        data, indices, indptr = self._buffers
        if self.stype == "csr":
            self.result = CSRArray(data, indices, indptr, self.shape)
        else:
            self.result = RowSparseArray(data, indices, self.shape)
        return self.result


class CallScope:
    """What one library call allocated; use as a context manager around the call.

    ``handle`` is the ``void*`` the allocator callbacks receive (the scope's key).
    """

    __slots__ = ("key", "handle", "workspace", "sparse_outputs")

    def __init__(self, sparse_outputs: Sequence[SparseOut | None] = ()):
        self.key = 0
        self.handle = None
        self.workspace: list[np.ndarray] = []
        self.sparse_outputs = list(sparse_outputs)

    def __enter__(self) -> "CallScope":
        self.key = next(_IDS)  # atomic under the GIL
        self.handle = c_void_p(self.key)
        _SCOPES[self.key] = self
        return self

    def __exit__(self, *exc) -> None:
        _SCOPES.pop(self.key, None)
        self.workspace.clear()


def _cpu_malloc(alloc, size):
    scope = _SCOPES.get(alloc or 0)
    if scope is None or size < 0:
        return None
    buf = np.empty(max(int(size), 1) + 64, dtype=np.uint8)
    addr = buf.ctypes.data
    scope.workspace.append(buf)
    return addr + (-addr) % 64  # 64-byte aligned, as MXNet's storage manager


def _no_gpu_malloc(alloc, size):
    return None


def _sparse_malloc(alloc, index, indices_len, indptr_len, data, indices, indptr):
    scope = _SCOPES.get(alloc or 0)
    if scope is None or not 0 <= index < len(scope.sparse_outputs):
        return
    slot = scope.sparse_outputs[index]
    if slot is None:
        return
    d, i, p = slot.allocate(int(indices_len), int(indptr_len))
    data[0] = d
    indices[0] = ctypes.cast(i, POINTER(c_int64))
    indptr[0] = ctypes.cast(p, POINTER(c_int64))


XPU_CALLBACK = XPU_MALLOC(_cpu_malloc)
NO_GPU_CALLBACK = XPU_MALLOC(_no_gpu_malloc)
SPARSE_CALLBACK = SPARSE_MALLOC(_sparse_malloc)


class _Block:
    """The flat ctypes arguments of one list of tensors (see :func:`tensor_block`)."""

    __slots__ = ("dense", "sparse", "data", "shapes")

    def __init__(self, n: int):
        m = max(n, 1)
        self.shapes = (POINTER(c_int64) * m)()
        self.data = (c_void_p * m)()
        devs = (c_char_p * m)()
        for i in range(n):
            devs[i] = _CPU
        self.dense = [self.shapes, (c_int * m)(), self.data, (c_int * m)(), (c_size_t * m)(),
                      devs, (c_int * m)(), n]
        self.sparse = [(c_int * m)(), (c_void_p * m)(), (c_void_p * m)(), (c_int64 * m)(),
                       (c_int64 * m)()]

    def describe(self, i: int, shape: tuple, dtype, keep: list) -> None:
        s = (c_int64 * max(len(shape), 1))(*shape)
        keep.append(s)
        self.shapes[i] = s
        self.dense[1][i] = len(shape)
        self.dense[3][i] = dtype_flag(dtype)


#: dense blocks by signature ((shape, dtype), ...), each with the shape arrays it points to;
#: a block is taken out while a call uses it (calls may nest or run in threads)
_BLOCKS: dict[tuple, list] = {}


class _Lease:
    """A pooled block lent to one call (returned by :func:`release`)."""

    __slots__ = ("block", "key", "arrays")

    def __init__(self, block: "_Block", key: tuple, arrays: list):
        self.block, self.key, self.arrays = block, key, arrays


def _dense_block(values: Sequence[np.ndarray]) -> _Lease:
    key = tuple([(v.shape, v.dtype) for v in values])
    try:
        block, keep = _BLOCKS[key].pop()
    except (KeyError, IndexError):
        block, keep = _Block(len(values)), []
        for i, v in enumerate(values):
            block.describe(i, v.shape, v.dtype, keep)
    data = block.data
    for i, v in enumerate(values):
        data[i] = v.ctypes.data
    return _Lease(block, key, keep)


def release(keep: list) -> None:
    """Give the dense blocks a call's *keep* list holds back for reuse (after the call)."""
    for item in keep:
        if type(item) is _Lease:
            block, key, arrays = item.block, item.key, item.arrays
            pool = _BLOCKS.get(key)
            if pool is None:
                if len(_BLOCKS) >= 1024:
                    continue
                pool = _BLOCKS[key] = []
            if len(pool) < 4:
                pool.append((block, arrays))


def tensor_block(values: Sequence[Any], keep: list) -> tuple[list, list]:
    """Flat ctypes arguments for *values* (dense numpy arrays, sparse arrays or SparseOut).

    Returns ``(dense_args, sparse_args)``: the eight arguments lib_api takes
    per tensor list (shapes, ndims, data, dtypes, ids, dev types, dev ids,
    count) and the storage-type/sparse parts (stypes, indices, indptr, their
    lengths).  Everything that must outlive the call is appended to *keep*;
    for all-dense lists that includes a lease of a pooled block whose
    arrays are reused by later calls with the same shapes and dtypes once
    :func:`release` gives it back (the per-call cost is then the data pointers).
    """
    for v in values:
        if type(v) is not np.ndarray:
            break
    else:
        lease = _dense_block(values)
        keep.append(lease)
        keep.append(values)
        return lease.block.dense, lease.block.sparse
    block = _Block(len(values))
    for i, v in enumerate(values):
        block.describe(i, tuple(v.shape), v.dtype, keep)
        if isinstance(v, np.ndarray):
            block.data[i] = v.ctypes.data
            continue
        block.sparse[0][i] = FLAG_BY_STYPE[v.stype]
        if isinstance(v, SparseOut):
            continue
        block.data[i] = v.data.ctypes.data
        block.sparse[1][i] = v.indices.ctypes.data
        block.sparse[3][i] = v.indices.size
        if isinstance(v, CSRArray):
            block.sparse[2][i] = v.indptr.ctypes.data
            block.sparse[4][i] = v.indptr.size
    keep.append(block)
    keep.extend(values)
    return block.dense, block.sparse


def dtype_name(flag: int) -> str | None:
    return DTYPE_BY_FLAG.get(int(flag))
