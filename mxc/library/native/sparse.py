"""Sparse arrays as lib_api sees them: CSR and row-sparse.

MXNet hands a library operator a sparse tensor as three flat buffers (values,
``indices``, ``indptr``) plus the dense shape, and lets the operator allocate
its sparse outputs through a callback once it knows how many non-zeros they
have.  These containers are the host side of that exchange; ``mxc.mxnet``
wraps them in its ``CSRNDArray``/``RowSparseNDArray``.

* :class:`CSRArray`: ``data[k]`` is the value at row ``r`` (``indptr[r] <= k <
  indptr[r+1]``), column ``indices[k]``.
* :class:`RowSparseArray`: ``data[i]`` is the full row ``indices[i]``.

Indices are int64, as MXNet stores them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...errors import ExtensionError

__all__ = ["CSRArray", "RowSparseArray", "SparseArray", "stype_of"]


@dataclass
class CSRArray:
    """A 2-D compressed-sparse-row array."""

    data: np.ndarray
    indices: np.ndarray
    indptr: np.ndarray
    shape: tuple[int, ...]

    stype = "csr"

    def __post_init__(self):
        self.data = np.ascontiguousarray(self.data)
        self.indices = np.ascontiguousarray(self.indices, dtype=np.int64)
        self.indptr = np.ascontiguousarray(self.indptr, dtype=np.int64)
        self.shape = tuple(int(d) for d in self.shape)
        if len(self.shape) != 2:
            raise ExtensionError(f"a CSR array is 2-D; got shape {self.shape}")
        if self.indptr.shape != (self.shape[0] + 1,):
            raise ExtensionError(f"CSR indptr has {self.indptr.size} entries; a "
                                 f"{self.shape[0]}-row array needs {self.shape[0] + 1}")
        if self.indices.size != self.data.size:
            raise ExtensionError(f"CSR indices ({self.indices.size}) and data "
                                 f"({self.data.size}) differ in length")

    @property
    def dtype(self) -> np.dtype:
        return self.data.dtype

    @classmethod
    def from_dense(cls, dense) -> "CSRArray":
        a = np.asarray(dense)
        rows, cols = np.nonzero(a)
        indptr = np.zeros(a.shape[0] + 1, dtype=np.int64)
        np.add.at(indptr, rows + 1, 1)
        return cls(a[rows, cols], cols.astype(np.int64), np.cumsum(indptr), a.shape)

    def todense(self) -> np.ndarray:
        out = np.zeros(self.shape, dtype=self.data.dtype)
        for r in range(self.shape[0]):
            lo, hi = int(self.indptr[r]), int(self.indptr[r + 1])
            out[r, self.indices[lo:hi]] = self.data[lo:hi]
        return out


@dataclass
class RowSparseArray:
    """An array of which only the rows in ``indices`` are stored."""

    data: np.ndarray
    indices: np.ndarray
    shape: tuple[int, ...]

    stype = "row_sparse"

    def __post_init__(self):
        self.data = np.ascontiguousarray(self.data)
        self.indices = np.ascontiguousarray(self.indices, dtype=np.int64)
        self.shape = tuple(int(d) for d in self.shape)
        if self.data.shape[1:] != self.shape[1:] or self.data.shape[0] != self.indices.size:
            raise ExtensionError(f"row_sparse data of shape {self.data.shape} does not hold "
                                 f"{self.indices.size} rows of an array of shape {self.shape}")

    @property
    def dtype(self) -> np.dtype:
        return self.data.dtype

    @classmethod
    def from_dense(cls, dense) -> "RowSparseArray":
        a = np.asarray(dense)
        flat = a.reshape(a.shape[0], -1) if a.ndim else a.reshape(1, 1)
        rows = np.nonzero(np.any(flat != 0, axis=1))[0]
        return cls(a[rows], rows.astype(np.int64), a.shape)

    def todense(self) -> np.ndarray:
        out = np.zeros(self.shape, dtype=self.data.dtype)
        out[self.indices] = self.data
        return out


SparseArray = (CSRArray, RowSparseArray)


def stype_of(x) -> str:
    """``"csr"``, ``"row_sparse"`` or ``"default"``."""
    return getattr(x, "stype", "default") if isinstance(x, SparseArray) else "default"
