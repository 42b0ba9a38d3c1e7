"""Gluon ``Parameter`` / ``ParameterDict`` for :class:`SymbolBlock`.

A parameter's array is created when its shape is known: at ``initialize()``
if the shape is, otherwise at the block's first forward (MXNet's deferred
initialisation), or by ``set_data`` / ``ParameterDict.load``.
"""

from __future__ import annotations

from collections import OrderedDict

import numpy as np

from ..base import MXNetError
from ..ndarray import NDArray, load as nd_load, save as nd_save, zeros

__all__ = ["Parameter", "ParameterDict", "DeferredInitializationError"]


class DeferredInitializationError(MXNetError):
    """The parameter's shape is not known yet; it is created at the first forward."""


class Parameter:
    def __init__(self, name: str, grad_req: str = "write", shape=None, dtype=np.float32,
                 init=None, allow_deferred_init: bool = True):
        self.name = name
        self.grad_req = grad_req
        self.shape = tuple(shape) if shape is not None else None
        self.dtype = dtype
        self.init = init
        self._data: NDArray | None = None
        self._deferred = None  # the initializer waiting for a shape

    def __repr__(self) -> str:
        return f"Parameter {self.name} (shape={self.shape}, dtype={np.dtype(self.dtype).name})"

    def initialize(self, init=None, ctx=None, default_init=None, force_reinit=False) -> None:
        from .. import initializer
        if self._data is not None and not force_reinit:
            return
        chosen = init or self.init or default_init or initializer.Uniform()
        if self.shape is None or any(d in (0, None) for d in self.shape):
            self._deferred = chosen
            return
        self._create(chosen)

    def _create(self, init) -> None:
        arr = zeros(self.shape, dtype=self.dtype)
        init(self.name, arr)
        self._data = arr
        self._deferred = None

    def _finish_deferred(self, shape, dtype) -> None:
        """Called by the block once inference knows this parameter's shape."""
        if self._data is not None or self._deferred is None:
            return
        self.shape, self.dtype = tuple(shape), dtype
        self._create(self._deferred)

    def data(self, ctx=None) -> NDArray:
        if self._data is None:
            if self._deferred is not None:
                raise DeferredInitializationError(
                    f"Parameter '{self.name}' has not been initialized yet because "
                    f"initialization was deferred. Actual initialization happens during the "
                    f"first forward pass.")
            raise MXNetError(f"Parameter '{self.name}' has not been initialized. Note that you "
                             f"should initialize parameters and create Trainer with "
                             f"Block.collect_params() instead of Block.params")
        return self._data

    def list_data(self) -> list[NDArray]:
        return [self.data()]

    def set_data(self, data) -> None:
        value = data if isinstance(data, NDArray) else NDArray(np.array(data))
        if self._data is None:
            self.shape, self.dtype = value.shape, value.dtype
            self._data = NDArray(value.asnumpy())
            self._deferred = None
        else:
            self._data[:] = value

    def cast(self, dtype) -> None:
        self.dtype = dtype
        if self._data is not None:
            self._data = self._data.astype(dtype)

    def var(self):
        from ..symbol import var
        return var(self.name, shape=self.shape, dtype=self.dtype)


class ParameterDict(OrderedDict):
    """Name -> :class:`Parameter`, with MXNet's bulk operations."""

    def __init__(self, prefix: str = "", shared=None):
        super().__init__()
        self.prefix = prefix

    def initialize(self, init=None, ctx=None, verbose=False, force_reinit=False) -> None:
        for p in self.values():
            p.initialize(None, ctx, default_init=init, force_reinit=force_reinit)

    def reset_ctx(self, ctx) -> None:
        from ..context import check_cpu
        check_cpu(ctx, "reset_ctx")

    def setattr(self, name, value) -> None:
        for p in self.values():
            setattr(p, name, value)

    def save(self, filename: str, strip_prefix: str = "") -> None:
        nd_save(filename, {k[len(strip_prefix):] if k.startswith(strip_prefix) else k:
                           p.data() for k, p in self.items()})

    def load(self, filename: str, ctx=None, allow_missing: bool = False,
             ignore_extra: bool = False, restore_prefix: str = "", cast_dtype: bool = False,
             dtype_source: str = "current") -> None:
        loaded = nd_load(filename)
        if isinstance(loaded, list):
            raise MXNetError(f"{filename} holds an unnamed NDArray list; Parameters need names")
        values = {}
        for key, value in loaded.items():
            name = key.split(":", 1)[1] if key.startswith(("arg:", "aux:")) else key
            values[restore_prefix + name] = value
        if not allow_missing:
            missing = [n for n in self if n not in values]
            if missing:
                raise MXNetError(f"Parameter '{missing[0]}' is missing in file '{filename}', "
                                 f"which contains parameters: {', '.join(sorted(values))}. "
                                 f"Set allow_missing=True to ignore missing parameters.")
        if not ignore_extra:
            extra = [n for n in values if n not in self]
            if extra:
                raise MXNetError(f"Parameter '{extra[0]}' loaded from file '{filename}' is not "
                                 f"present in this block. Set ignore_extra=True to ignore.")
        for name, value in values.items():
            if name in self:
                param = self[name]
                if cast_dtype and dtype_source == "current" and param._data is not None:
                    value = value.astype(param.dtype)
                param.set_data(value)
