"""The :class:`NDArray` class itself, below everything that runs operators on it.

Why a module of its own: the operator machinery (:mod:`._imperative`), the
sparse arrays (:mod:`.sparse`, subclasses of NDArray), the executor and the
Symbol API all create NDArrays, while NDArray's own methods (``x + y``,
``x.reshape``, ``x.softmax(...)``, ``x.tostype``) run operators.  Importing
each other would tie those modules into one import cycle, so the class sits
here, importing nothing of theirs, and the functions its methods need from
above are handed in when the modules that own them are imported (see
:func:`provide`): ``invoke``/``resolve`` by :mod:`._imperative`, and
``cast_storage`` by :mod:`.sparse` (which imports :mod:`._imperative`, as
does every public module that hands out NDArrays: ``mx.nd``, ``mx.sym``, the
executor).  Users import NDArray from :mod:`mxc.mxnet.ndarray`, its public home.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from . import autograd
from .base import MXNetError, not_supported
from .context import Context, check_cpu

__all__ = ["NDArray", "array", "provide"]

#: what NDArray's methods need from the modules above: name -> function
_PROVIDED: dict[str, Callable] = {}
_PROVIDERS = {"invoke": "mxc.mxnet._imperative", "resolve": "mxc.mxnet._imperative",
              "cast_storage": "mxc.mxnet.sparse"}


def provide(**functions: Callable) -> None:
    """Hand NDArray the operator functions of a module above (called once, at its import)."""
    unknown = set(functions) - set(_PROVIDERS)
    if unknown:
        raise ValueError(f"provide: unknown names {sorted(unknown)}")
    _PROVIDED.update(functions)


def _provided(name: str) -> Callable:
    fn = _PROVIDED.get(name)
    if fn is None:  # only reachable by importing this private module alone
        raise MXNetError(f"NDArray.{name} is not available: import mxc.mxnet.ndarray "
                         f"(it loads {_PROVIDERS[name]})")
    return fn


def _dtype(dtype: Any, default: Any = np.float32) -> np.dtype:
    return np.dtype(default if dtype is None else dtype)


class NDArray:
    """An n-dimensional array on a (CPU) context, with MXNet's methods."""

    __module__ = "mxc.mxnet.ndarray"  # its public home (repr, pickling, docs)

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
        return _provided("cast_storage")(self, stype)

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
        if _provided("resolve")(name) is None:
            raise AttributeError(f"'NDArray' object has no attribute {name!r}")
        return lambda *args, **kwargs: _invoke(name, [self, *args], kwargs)


def _invoke(op_name: str, args: Sequence, kwargs: dict):
    return _provided("invoke")(op_name, list(args), dict(kwargs))


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

