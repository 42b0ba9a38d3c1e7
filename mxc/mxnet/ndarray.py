"""``mx.nd``: MXNet's NDArray over numpy.

An :class:`NDArray` owns a numpy array (``asnumpy()`` copies it, as MXNet's
does); basic slicing returns an NDArray that shares memory, so
``exe.arg_dict['x'][:] = value`` writes into the bound array.  Execution is
synchronous: ``wait_to_read``/``waitall`` return at once.

Every registered operator is a function of this module (``mx.nd.exp``,
``mx.nd.my_gemm`` once a library registered it), resolved when first used, and
the MXNet namespaces map to the operator prefixes (``mx.nd.linalg.gemm2`` is
``_linalg_gemm2``, ``mx.nd.contrib.X`` is ``_contrib_X``).

The class itself lives in :mod:`._ndarray_core` (below the operator machinery,
so the two need not import each other); this module, the public face, sits on
top: importing it loads :mod:`._imperative` and :mod:`.sparse`, which hand the
class the operator functions its methods run.
"""

from __future__ import annotations

import os
from typing import Any, Sequence

import numpy as np

from . import sparse as _sp
from ._imperative import invoke as _run, op_function as _op_function, resolve as _resolve
from ._ndarray_core import NDArray, _dtype, _invoke, array
from .base import MXNetError, mxnet_error, not_supported  # noqa: F401 (mx.nd.MXNetError)
from .context import Context, check_cpu
from .operator import custom_op_type as _custom_op_type

__all__ = ["NDArray", "array", "empty", "zeros", "ones", "full", "arange", "load", "save",
           "waitall", "concat", "stack", "linalg", "contrib", "random", "op"]


# ---------------------------------------------------------------------------
# creation
# ---------------------------------------------------------------------------
def empty(shape, ctx: Context | None = None, dtype: Any = None, stype: str | None = None
          ) -> NDArray:
    """An array of *shape*.  MXNet leaves it uninitialised; mxc.mxnet fills zeros."""
    return zeros(shape, ctx, dtype, stype)


def zeros(shape, ctx: Context | None = None, dtype: Any = None, stype: str | None = None,
          **_kwargs) -> NDArray:
    ctx = check_cpu(ctx, "zeros")
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    arr = NDArray(np.zeros(shape, dtype=_dtype(dtype)), ctx)
    return arr if stype in (None, "default") else arr.tostype(stype)


def ones(shape, ctx: Context | None = None, dtype: Any = None, **_kwargs) -> NDArray:
    ctx = check_cpu(ctx, "ones")
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    return NDArray(np.ones(shape, dtype=_dtype(dtype)), ctx)


def full(shape, val, ctx: Context | None = None, dtype: Any = None, **_kwargs) -> NDArray:
    ctx = check_cpu(ctx, "full")
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    return NDArray(np.full(shape, val, dtype=_dtype(dtype)), ctx)


def arange(start, stop=None, step=1.0, repeat=1, ctx: Context | None = None,
           dtype: Any = None, **_kwargs) -> NDArray:
    ctx = check_cpu(ctx, "arange")
    values = np.arange(start, stop, step, dtype=_dtype(dtype))
    return NDArray(np.repeat(values, repeat) if repeat != 1 else values, ctx)


def concat(*arrays: NDArray, dim: int = 1) -> NDArray:
    return _invoke("Concat", list(arrays), {"dim": dim})


def stack(*arrays: NDArray, axis: int = 0) -> NDArray:
    return _invoke("stack", list(arrays), {"axis": axis})


def waitall() -> None:
    """Execution is synchronous in mxc.mxnet: nothing to wait for."""


# ---------------------------------------------------------------------------
# files (MXNet's NDArray-list format, byte-identical)
# ---------------------------------------------------------------------------
def load(fname: str | os.PathLike):
    """A dict (named arrays) or a list of :class:`NDArray` from an MXNet NDArray file."""
    from ..frontend.params import load_params
    try:
        data = load_params(fname)
    except Exception as exc:
        raise mxnet_error(exc) from exc
    if isinstance(data, dict):
        return {k: NDArray(np.asarray(v)) for k, v in data.items()}
    return [NDArray(np.asarray(v)) for v in data]


def save(fname: str | os.PathLike, data) -> None:
    """Write an NDArray, a list or a dict of them in MXNet's format."""
    from ..frontend.params import save_params

    def raw(v):
        if not isinstance(v, NDArray):
            raise TypeError(f"save only accepts NDArrays, got {type(v).__name__}")
        if v.stype != "default":
            raise not_supported(f"saving {v.stype} arrays")
        return v._data

    if isinstance(data, NDArray):
        data = [data]
    if isinstance(data, dict):
        payload: Any = {k: raw(v) for k, v in data.items()}
    else:
        payload = [raw(v) for v in data]
    save_params(fname, payload)


# ---------------------------------------------------------------------------
# every operator as a function, and MXNet's namespaces
# ---------------------------------------------------------------------------
class _Namespace:
    """``mx.nd.linalg`` & co: attribute ``f`` is operator ``<prefix>f``."""

    def __init__(self, module: str, prefixes: Sequence[str], extra: dict | None = None):
        self.__name__ = module
        self._prefixes = tuple(prefixes)
        self._extra = dict(extra or {})

    def __getattr__(self, name: str):
        if name.startswith("__"):
            raise AttributeError(name)
        if name in self._extra:
            return self._extra[name]
        for prefix in self._prefixes:
            op = _resolve(prefix + name)
            if op is not None:
                return _op_function(op)
        raise AttributeError(f"module {self.__name__!r} has no attribute {name!r} (no "
                             f"operator {' or '.join(p + name for p in self._prefixes)} is "
                             f"registered)")

    def __dir__(self):
        from ..compiler.ops.registry import registered_ops
        names = set(self._extra)
        for op in registered_ops():
            for prefix in self._prefixes:
                if prefix and op.startswith(prefix):
                    names.add(op[len(prefix):])
        return sorted(names)


linalg = _Namespace("mxc.mxnet.ndarray.linalg", ["_linalg_"])
contrib = _Namespace("mxc.mxnet.ndarray.contrib", ["_contrib_"])
random = _Namespace("mxc.mxnet.ndarray.random", ["_random_", "_sample_"])
op = _Namespace("mxc.mxnet.ndarray.op", [""])


def _sparse_namespace() -> _Namespace:
    extra = {k: getattr(_sp, k) for k in _sp.__all__}
    return _Namespace("mxc.mxnet.ndarray.sparse", ["_sparse_", ""], extra)


def resolve_op(name: str) -> str | None:
    return _resolve(name)


def __getattr__(name: str):
    if name == "sparse":
        ns = _sparse_namespace()
        globals()["sparse"] = ns
        return ns
    if name in ("CSRNDArray", "RowSparseNDArray", "BaseSparseNDArray"):
        return getattr(_sp, name)
    if name == "Custom" and resolve_op("Custom") is None:
        return lambda *args, **kwargs: _run(_custom_op_type(kwargs), list(args), kwargs)
    if not name.startswith("__"):
        op_name = _resolve(name)
        if op_name is not None:
            return _op_function(op_name)
    raise AttributeError(f"module 'mxc.mxnet.ndarray' has no attribute {name!r} (no such "
                         f"operator is registered)")
