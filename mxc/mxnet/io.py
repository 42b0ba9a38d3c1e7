"""``mx.io``: ``DataDesc``, ``DataBatch`` and ``NDArrayIter`` for Module inference."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .ndarray import NDArray, array

__all__ = ["DataDesc", "DataBatch", "NDArrayIter"]


class DataDesc(NamedTuple):
    """An input's name and shape (MXNet's ``DataDesc``)."""

    name: str
    shape: tuple
    dtype: object = np.float32
    layout: str = "NCHW"


class DataBatch:
    def __init__(self, data, label=None, pad=0, index=None, provide_data=None,
                 provide_label=None):
        self.data = list(data) if data is not None else []
        self.label = list(label) if label is not None else []
        self.pad = pad
        self.index = index
        self.provide_data = provide_data
        self.provide_label = provide_label


def _as_list(data, default_name: str) -> list[tuple[str, NDArray]]:
    if data is None:
        return []
    if isinstance(data, dict):
        items = list(data.items())
    elif isinstance(data, (list, tuple)):
        items = [(f"_{i}_{default_name}" if len(data) > 1 else default_name, d)
                 for i, d in enumerate(data)]
    else:
        items = [(default_name, data)]
    return [(k, v if isinstance(v, NDArray) else array(np.asarray(v),
                                                       dtype=np.asarray(v).dtype))
            for k, v in items]


class NDArrayIter:
    """Batches over in-memory arrays; the last batch is padded (``last_batch_handle='pad'``)."""

    def __init__(self, data, label=None, batch_size: int = 1, shuffle: bool = False,
                 last_batch_handle: str = "pad", data_name: str = "data",
                 label_name: str = "softmax_label"):
        if shuffle:
            from .base import not_supported
            raise not_supported("NDArrayIter(shuffle=True)")
        self.data = _as_list(data, data_name)
        self.label = _as_list(label, label_name)
        self.batch_size = int(batch_size)
        self.num_data = self.data[0][1].shape[0]
        self.last_batch_handle = last_batch_handle
        self.cursor = 0

    @property
    def provide_data(self) -> list[DataDesc]:
        return [DataDesc(k, (self.batch_size, *v.shape[1:]), v.dtype) for k, v in self.data]

    @property
    def provide_label(self) -> list[DataDesc]:
        return [DataDesc(k, (self.batch_size, *v.shape[1:]), v.dtype) for k, v in self.label]

    def reset(self) -> None:
        self.cursor = 0

    def __iter__(self):
        return self

    def _slice(self, arrays):
        lo, hi = self.cursor, self.cursor + self.batch_size
        out = []
        for _, v in arrays:
            part = v.asnumpy()[lo:hi]
            if part.shape[0] < self.batch_size:
                part = np.concatenate([part, v.asnumpy()[:self.batch_size - part.shape[0]]])
            out.append(NDArray(part))
        return out

    def __next__(self) -> DataBatch:
        if self.cursor >= self.num_data:
            raise StopIteration
        if self.last_batch_handle == "discard" and self.cursor + self.batch_size > self.num_data:
            raise StopIteration
        pad = max(0, self.cursor + self.batch_size - self.num_data)
        batch = DataBatch(self._slice(self.data), self._slice(self.label), pad=pad,
                          provide_data=self.provide_data, provide_label=self.provide_label)
        self.cursor += self.batch_size
        return batch

    next = __next__
