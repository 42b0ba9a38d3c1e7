"""``mx.nd.sparse``: CSR and row-sparse NDArrays.

A :class:`CSRNDArray` / :class:`RowSparseNDArray` wraps the loader's sparse
containers (:mod:`mxc.library.native.sparse`), which are what library
operators receive and return through lib_api's sparse structures.  The dense
value (``asnumpy()``) is materialised once, on creation, so an NDArray's
generic methods (shape, dtype, printing) work on sparse arrays too; operators
that are not sparse-aware see that dense value only if the caller converts
with ``tostype('default')``, as in MXNet.

This module sits above the operator machinery (:mod:`._imperative`, imported
here so operators run on sparse arrays however this module was reached) and
hands down what the modules below need of it: ``NDArray.tostype`` runs
:func:`cast_storage`, and operator results are wrapped by :func:`from_kernel`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from . import _imperative, _ndarray_core
from ._ndarray_core import NDArray, _dtype
from .base import MXNetError, not_supported
from .context import check_cpu

__all__ = ["BaseSparseNDArray", "CSRNDArray", "RowSparseNDArray", "csr_matrix",
           "row_sparse_array", "cast_storage", "from_kernel", "zeros", "array"]


def _containers():
    from ..library.native import sparse as containers
    return containers


class BaseSparseNDArray(NDArray):
    """Common part of the sparse arrays: read-only dense view, components as NDArrays."""

    def __init__(self, value, ctx=None):
        super().__init__(value.todense(), ctx)
        self._sparse = value

    def __setitem__(self, key, value) -> None:
        raise not_supported(f"assignment into a {self.stype} NDArray")

    @property
    def data(self) -> NDArray:
        return NDArray(np.array(self._sparse.data), self._ctx)

    @property
    def indices(self) -> NDArray:
        return NDArray(np.array(self._sparse.indices), self._ctx)

    def kernel_value(self):
        """The container a library operator receives."""
        return self._sparse

    def copy(self):
        return type(self)(type(self._sparse)(**{k: np.array(getattr(self._sparse, k))
                                                 if k != "shape" else self._sparse.shape
                                                 for k in self._fields}), self._ctx)

    def __repr__(self) -> str:
        shape = "x".join(str(d) for d in self.shape)
        return f"\n<{type(self).__name__} {shape} @{self._ctx}>"


class CSRNDArray(BaseSparseNDArray):
    stype = "csr"
    _fields = ("data", "indices", "indptr", "shape")

    @property
    def indptr(self) -> NDArray:
        return NDArray(np.array(self._sparse.indptr), self._ctx)


class RowSparseNDArray(BaseSparseNDArray):
    stype = "row_sparse"
    _fields = ("data", "indices", "shape")


def from_kernel(value: Any) -> BaseSparseNDArray | None:
    """A sparse kernel result as an NDArray (None when *value* is dense)."""
    stype = getattr(value, "stype", None)
    if stype == "csr":
        return CSRNDArray(value)
    if stype == "row_sparse":
        return RowSparseNDArray(value)
    return None


def cast_storage(arr: NDArray, stype: str) -> NDArray:
    """``arr.tostype(stype)``: ``'default'``, ``'csr'`` (2-D) or ``'row_sparse'``."""
    if stype == arr.stype:
        return arr
    dense = arr.asnumpy()
    if stype == "default":
        return NDArray(dense, arr.context)
    if stype == "csr":
        if dense.ndim != 2:
            raise MXNetError(f"Check failed: a csr array must be 2-D, got shape {dense.shape}")
        return CSRNDArray(_containers().CSRArray.from_dense(dense), arr.context)
    if stype == "row_sparse":
        return RowSparseNDArray(_containers().RowSparseArray.from_dense(dense), arr.context)
    raise MXNetError(f"unknown storage type {stype!r}; expected default, csr or row_sparse")


def _np(x, dtype=None):
    return np.asarray(x.asnumpy() if isinstance(x, NDArray) else x, dtype=dtype)


def csr_matrix(arg1, shape=None, ctx=None, dtype=None) -> CSRNDArray:
    """``csr_matrix((data, indices, indptr), shape=...)`` or from a dense 2-D array."""
    if isinstance(arg1, tuple) and len(arg1) == 3:
        data, indices, indptr = arg1
        if shape is None:
            raise MXNetError("csr_matrix((data, indices, indptr)) needs shape=")
        value = _containers().CSRArray(_np(data, dtype or np.float32), _np(indices),
                                       _np(indptr), tuple(shape))
        return CSRNDArray(value, ctx)
    dense = _np(arg1, dtype or np.float32)
    return CSRNDArray(_containers().CSRArray.from_dense(dense), ctx)


def row_sparse_array(arg1, shape=None, ctx=None, dtype=None) -> RowSparseNDArray:
    """``row_sparse_array((data, indices), shape=...)`` or from a dense array."""
    if isinstance(arg1, tuple) and len(arg1) == 2:
        data, indices = arg1
        if shape is None:
            raise MXNetError("row_sparse_array((data, indices)) needs shape=")
        value = _containers().RowSparseArray(_np(data, dtype or np.float32), _np(indices),
                                             tuple(shape))
        return RowSparseNDArray(value, ctx)
    dense = _np(arg1, dtype or np.float32)
    return RowSparseNDArray(_containers().RowSparseArray.from_dense(dense), ctx)


def zeros(stype: str, shape, ctx=None, dtype=None) -> NDArray:
    ctx = check_cpu(ctx, "zeros")
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    return cast_storage(NDArray(np.zeros(shape, dtype=_dtype(dtype)), ctx), stype)


def array(source_array, ctx=None, dtype=None) -> NDArray:
    if isinstance(source_array, BaseSparseNDArray):
        return source_array.copy()
    raise not_supported("mx.nd.sparse.array of a dense source (use csr_matrix / "
                        "row_sparse_array or tostype)")


_ndarray_core.provide(cast_storage=cast_storage)
_imperative.provide_sparse_wrapper(from_kernel)
