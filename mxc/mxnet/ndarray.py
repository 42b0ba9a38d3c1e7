"""``mx.nd``: MXNet's NDArray over numpy.

An :class:`NDArray` owns a numpy array (``asnumpy()`` copies it, as MXNet's
does); basic slicing returns an NDArray that shares memory, so
``exe.arg_dict['x'][:] = value`` writes into the bound array.  Execution is
synchronous: ``wait_to_read``/``waitall`` return at once.

Every registered operator is a function of this module (``mx.nd.exp``,
``mx.nd.my_gemm`` once a library registered it), resolved when first used, and
the MXNet namespaces map to the operator prefixes (``mx.nd.linalg.gemm2`` is
``_linalg_gemm2``, ``mx.nd.contrib.X`` is ``_contrib_X``).
"""

from __future__ import annotations

import os
from typing import Any, Sequence

import numpy as np

from .base import MXNetError, mxnet_error, not_supported
from .context import Context, check_cpu

__all__ = ["NDArray", "array", "empty", "zeros", "ones", "full", "arange", "load", "save",
           "waitall", "concat", "stack", "linalg", "contrib", "random", "op"]


def _dtype(dtype: Any, default: Any = np.float32) -> np.dtype:
    return np.dtype(default if dtype is None else dtype)


class NDArray:
    """An n-dimensional array on a (CPU) context, with MXNet's methods."""

    __array_priority__ = 1000.0
    stype = "default"

    def __init__(self, data: np.ndarray, ctx: Context | None = None):
        self._data = data
        self._ctx = ctx if ctx is not None else Context("cpu", 0)
        self._grad: NDArray | None = None
        self._grad_req = "null"
        self._ag = None  # autograd: (record, output index) when computed while recording

    # -- properties ----------------------------------------------------------------
    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self._data.shape)

    @property
    def dtype(self):
        return self._data.dtype.type

    @property
    def size(self) -> int:
        return int(self._data.size)

    @property
    def ndim(self) -> int:
        return self._data.ndim

    @property
    def context(self) -> Context:
        return self._ctx

    ctx = context

    @property
    def grad(self) -> "NDArray | None":
        return self._grad

    @property
    def T(self) -> "NDArray":
        return _invoke("transpose", [self], {})

    @property
    def handle(self):
        raise not_supported("NDArray.handle (there is no MXNet C handle behind an mxc NDArray)")

    # -- conversion ----------------------------------------------------------------
    def asnumpy(self) -> np.ndarray:
        return np.array(self._data, copy=True)

    def asscalar(self):
        if self.size != 1:
            raise ValueError("The current array is not a scalar")
        return self._data.reshape(()).item()

    def __array__(self, dtype=None, copy=None):
        return self._data if dtype is None else self._data.astype(dtype)

    def astype(self, dtype, copy: bool = True) -> "NDArray":
        if not copy and np.dtype(dtype) == self._data.dtype:
            return self
        return NDArray(self._data.astype(dtype), self._ctx)

    def copy(self) -> "NDArray":
        return NDArray(self._data.copy(), self._ctx)

    def copyto(self, other):
        if isinstance(other, Context):
            return NDArray(self._data.copy(), check_cpu(other, "copyto"))
        if isinstance(other, NDArray):
            if other.shape != self.shape:
                raise MXNetError(f"copyto: shape mismatch {self.shape} vs {other.shape}")
            other._data[...] = self._data
            return other
        raise TypeError(f"copyto does not support type {type(other).__name__}")

    def as_in_context(self, context: Context) -> "NDArray":
        check_cpu(context, "as_in_context")
        return self

    as_in_ctx = as_in_context

    def tostype(self, stype: str) -> "NDArray":
        from .sparse import cast_storage
        return cast_storage(self, stype)

    def tolist(self) -> list:
        return self._data.tolist()

    def wait_to_read(self) -> None:
        """Execution is synchronous in mxc.mxnet: nothing to wait for."""

    def wait_to_write(self) -> None:
        """Execution is synchronous in mxc.mxnet: nothing to wait for."""

    # -- shape ---------------------------------------------------------------------
    def reshape(self, *shape, **kwargs) -> "NDArray":
        if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
            shape = tuple(shape[0])
        shape = kwargs.pop("shape", shape)
        return _invoke("Reshape", [self], {"shape": tuple(shape), **kwargs})

    def __len__(self) -> int:
        return self.shape[0]

    # -- indexing ------------------------------------------------------------------
    def __getitem__(self, key) -> "NDArray":
        """MXNet 1.9 raises ``IndexError`` for every index it cannot use (out of range, too
        many, an unsupported key); numpy's ValueError/OverflowError/TypeError for ragged or
        huge keys become that too, as scripts catch it by that type."""
        if isinstance(key, NDArray):
            key = key._data.astype(np.int64)
        try:
            return NDArray(self._data[key], self._ctx)
        except (ValueError, OverflowError, TypeError) as exc:
            raise IndexError(f"NDArray does not support indexing with key {key!r:.80} "
                             f"({exc})") from None

    def __setitem__(self, key, value) -> None:
        if isinstance(value, NDArray):
            value = value.asnumpy() if value.stype != "default" else value._data
        self._data[key] = np.asarray(value, dtype=self._data.dtype)

    # -- autograd ------------------------------------------------------------------
    def attach_grad(self, grad_req: str = "write", stype: str | None = None) -> None:
        """Allocate ``.grad`` (zeros) and mark this array as a variable to differentiate."""
        if stype not in (None, "default"):
            raise not_supported(f"attach_grad(stype={stype!r})")
        if grad_req not in ("write", "add", "null"):
            raise ValueError(f"grad_req must be 'write', 'add' or 'null', got {grad_req!r}")
        self._grad = NDArray(np.zeros_like(self._data), self._ctx)
        self._grad_req = grad_req
        self._ag = None

    def detach(self) -> "NDArray":
        return NDArray(self._data, self._ctx)

    def backward(self, out_grad: "NDArray | None" = None, retain_graph: bool = False,
                 train_mode: bool = True) -> None:
        from . import autograd
        autograd.backward([self], [out_grad] if out_grad is not None else None,
                          retain_graph=retain_graph, train_mode=train_mode)

    # -- printing ------------------------------------------------------------------
    def __repr__(self) -> str:
        shape = "x".join(str(d) for d in self.shape)
        return f"\n{self._data}\n<NDArray {shape} @{self._ctx}>"

    def __bool__(self) -> bool:
        if self.size == 1:
            return bool(self._data.reshape(()).item())
        raise ValueError("The truth value of an NDArray with multiple elements is ambiguous.")

    # -- arithmetic: through the operators, so autograd sees it --------------------------
    def _binary(self, other, op: str, scalar_op: str, reverse_scalar: str | None = None):
        if isinstance(other, NDArray):
            return _invoke(op, [self, other], {})
        if isinstance(other, (int, float, np.number, bool)):
            return _invoke(scalar_op, [self], {"scalar": float(other)})
        if isinstance(other, np.ndarray):
            return _invoke(op, [self, array(other, dtype=other.dtype)], {})
        return NotImplemented

    def _rbinary(self, other, op: str, scalar_op: str):
        if isinstance(other, (int, float, np.number, bool)):
            return _invoke(scalar_op, [self], {"scalar": float(other)})
        if isinstance(other, np.ndarray):
            return _invoke(op, [array(other, dtype=other.dtype), self], {})
        return NotImplemented

    def __add__(self, o):
        return self._binary(o, "broadcast_add", "_plus_scalar")

    def __radd__(self, o):
        return self._rbinary(o, "broadcast_add", "_plus_scalar")

    def __sub__(self, o):
        return self._binary(o, "broadcast_sub", "_minus_scalar")

    def __rsub__(self, o):
        return self._rbinary(o, "broadcast_sub", "_rminus_scalar")

    def __mul__(self, o):
        return self._binary(o, "broadcast_mul", "_mul_scalar")

    def __rmul__(self, o):
        return self._rbinary(o, "broadcast_mul", "_mul_scalar")

    def __truediv__(self, o):
        return self._binary(o, "broadcast_div", "_div_scalar")

    def __rtruediv__(self, o):
        return self._rbinary(o, "broadcast_div", "_rdiv_scalar")

    def __mod__(self, o):
        return self._binary(o, "broadcast_mod", "_mod_scalar")

    def __pow__(self, o):
        return self._binary(o, "broadcast_power", "_power_scalar")

    def __rpow__(self, o):
        return self._rbinary(o, "broadcast_power", "_rpower_scalar")

    def __neg__(self):
        return _invoke("negative", [self], {})

    def __eq__(self, o):  # type: ignore[override]
        return self._binary(o, "broadcast_equal", "_equal_scalar")

    def __ne__(self, o):  # type: ignore[override]
        return self._binary(o, "broadcast_not_equal", "_not_equal_scalar")

    def __gt__(self, o):
        return self._binary(o, "broadcast_greater", "_greater_scalar")

    def __ge__(self, o):
        return self._binary(o, "broadcast_greater_equal", "_greater_equal_scalar")

    def __lt__(self, o):
        return self._binary(o, "broadcast_lesser", "_lesser_scalar")

    def __le__(self, o):
        return self._binary(o, "broadcast_lesser_equal", "_lesser_equal_scalar")

    __hash__ = object.__hash__

    def _inplace(self, result: "NDArray") -> "NDArray":
        self._data[...] = result._data
        return self

    def __iadd__(self, o):
        return self._inplace(self + o)

    def __isub__(self, o):
        return self._inplace(self - o)

    def __imul__(self, o):
        return self._inplace(self * o)

    def __itruediv__(self, o):
        return self._inplace(self / o)

    # -- a few methods MXNet exposes on arrays ---------------------------------------
    def sum(self, axis=None, keepdims=False) -> "NDArray":
        return _invoke("sum", [self], {"axis": axis, "keepdims": keepdims})

    def mean(self, axis=None, keepdims=False) -> "NDArray":
        return _invoke("mean", [self], {"axis": axis, "keepdims": keepdims})

    def exp(self) -> "NDArray":
        return _invoke("exp", [self], {})

    def log(self) -> "NDArray":
        return _invoke("log", [self], {})

    def transpose(self, axes=None) -> "NDArray":
        return _invoke("transpose", [self], {"axes": axes} if axes else {})

    def flatten(self) -> "NDArray":
        return _invoke("Flatten", [self], {})

    def argmax(self, axis=None, keepdims=False) -> "NDArray":
        return _invoke("argmax", [self], {"axis": axis, "keepdims": keepdims})

    def __getattr__(self, name: str):
        """MXNet's fluent methods: ``x.softmax(axis=1)`` is ``mx.nd.softmax(x, axis=1)``."""
        if name.startswith("_"):
            raise AttributeError(name)
        from ._imperative import resolve
        if resolve(name) is None:
            raise AttributeError(f"'NDArray' object has no attribute {name!r}")
        return lambda *args, **kwargs: _invoke(name, [self, *args], kwargs)


def _invoke(op_name: str, args: Sequence, kwargs: dict):
    from ._imperative import invoke
    return invoke(op_name, list(args), dict(kwargs))


# ---------------------------------------------------------------------------
# creation
# ---------------------------------------------------------------------------
def array(source_array, ctx: Context | None = None, dtype: Any = None) -> NDArray:
    """A new array holding a copy of *source_array* (float32 unless told, as MXNet)."""
    ctx = check_cpu(ctx, "array")
    if isinstance(source_array, NDArray):
        values = source_array.asnumpy()
        dt = _dtype(dtype, values.dtype)
    else:
        values = source_array
        default = source_array.dtype if isinstance(source_array, np.ndarray) else np.float32
        dt = _dtype(dtype, default)
    return NDArray(np.array(values, dtype=dt, copy=True), ctx)


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
        from ._imperative import op_function, resolve
        for prefix in self._prefixes:
            op = resolve(prefix + name)
            if op is not None:
                return op_function(op)
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
    from . import sparse as sp
    extra = {k: getattr(sp, k) for k in sp.__all__}
    return _Namespace("mxc.mxnet.ndarray.sparse", ["_sparse_", ""], extra)


def resolve_op(name: str) -> str | None:
    from ._imperative import resolve
    return resolve(name)


def __getattr__(name: str):
    if name == "sparse":
        ns = _sparse_namespace()
        globals()["sparse"] = ns
        return ns
    if name in ("CSRNDArray", "RowSparseNDArray", "BaseSparseNDArray"):
        from . import sparse as sp
        return getattr(sp, name)
    if name == "Custom" and resolve_op("Custom") is None:
        from .operator import custom_call
        return lambda *args, **kwargs: custom_call("nd", list(args), kwargs)
    if not name.startswith("__"):
        from ._imperative import op_function, resolve
        op_name = resolve(name)
        if op_name is not None:
            return op_function(op_name)
    raise AttributeError(f"module 'mxc.mxnet.ndarray' has no attribute {name!r} (no such "
                         f"operator is registered)")
